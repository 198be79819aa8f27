"""Measure how far training results move on another processor, and how far the perturbation moves them.

``python tests/claim_spread.py calibrate`` trains a fixed set of the book's small models (chapter 12's RoPE and
p-RoPE models, seeds 0-3; chapter 9's models of five schemes, seed 0; chapter 5's four tokenizers) and prints,
for each number they give (a loss at some length, a test error), its value on the plain run and how far it
moves

- with NumPy's and PyTorch's kernels capped as ``make check-portable`` caps them (levels ``avx2`` and
  ``baseline`` of ``tests/check_portable.py``, each in a subprocess, where this processor has them), and
- with the initial weights perturbed by :class:`posenc_book.robustness.Perturbation` (draws 1-4 at the scale
  1e-6, and one draw at each of 1e-8, 1e-7, 1e-5 and 1e-4),

then a summary: the median and largest change of each kind. The perturbation is a fair stand-in for another
processor when it moves the numbers at least as far as the capped kernels do. One thread, as the chapters.
About 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from check_portable import LEVELS, cpu_flags

ROOT = Path(__file__).resolve().parent.parent


def calibration_numbers() -> dict[str, float]:
    """The numbers ``calibrate`` compares, trained under the active perturbation (if any)."""
    import torch

    from posenc_book.extrapolation import train_and_evaluate
    from posenc_book.frequency_usage import train_rotary
    from posenc_book.tabular import TinyFTTransformer, train_regression

    numbers = {}
    for seed in range(4):
        for fraction in (1.0, 0.75):
            r = train_rotary(fraction, seed=seed)
            for length, loss in r.losses.items():
                numbers[f"ch12 p={fraction} seed {seed} loss@{length}"] = loss
            numbers[f"ch12 p={fraction} seed {seed} fast share mean"] = float(r.trained.share[..., :3].sum(-1).mean())
    for scheme in ("sinusoidal", "rotary", "t5", "alibi", "none"):
        r = train_and_evaluate(scheme, seed=0, eval_lens=(32, 256))
        for length, loss in r.losses.items():
            numbers[f"ch9 {scheme} seed 0 loss@{length}"] = loss
    # chapter 5's experiment, as its cells 21 and 23 run it
    torch.set_num_threads(1)
    data = torch.Generator().manual_seed(0)
    x_train, x_test = torch.randn(256, 4, generator=data), torch.randn(256, 4, generator=data)
    y_train, y_test = x_train[:, 0] - x_train[:, 1], x_test[:, 0] - x_test[:, 1]
    variants = {
        "no identity": dict(shared_weight=True, bias=False),
        "bias only": dict(shared_weight=True, bias=True),
        "weight only": dict(bias=False),
        "FT-Transformer": dict(),
        "pre-norm weight only": dict(bias=False, norm_first=True),
        "pre-norm both": dict(norm_first=True),
    }
    for name, options in variants.items():
        torch.manual_seed(0)
        model = TinyFTTransformer(4, d_token=8, n_heads=2, **options)
        curves = train_regression(model, x_train, y_train, x_test, y_test, steps=150, lr=1e-2)
        numbers[f"ch5 {name} log10 settled test MSE"] = float(np.log10(np.median(curves.test_mse[-25:])))
    return numbers


def numbers_main(draw: int | None, scale: float) -> None:
    from posenc_book.robustness import Perturbation, perturbed

    with perturbed(None if draw is None else Perturbation(draw, scale)):
        print(json.dumps(calibration_numbers()))


def run_numbers(env_caps: dict[str, str] | None = None, draw: int | None = None, scale: float = 1e-6) -> dict:
    args = [sys.executable, __file__, "numbers", "--scale", repr(scale)]
    if draw is not None:
        args += ["--draw", str(draw)]
    env = {**os.environ, **(env_caps or {})}
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def calibrate() -> None:
    flags = cpu_flags()
    configurations = {"plain": {}}
    for level, spec in LEVELS.items():
        if spec["needs"] in flags:
            configurations[f"kernels {level}"] = {"env_caps": spec["env"]}
    for draw in (1, 2, 3, 4):
        configurations[f"draw {draw}, 1e-06"] = {"draw": draw, "scale": 1e-6}
    for scale in (1e-8, 1e-7, 1e-5, 1e-4):
        configurations[f"draw 1, {scale:.0e}"] = {"draw": 1, "scale": scale}
    results = {}
    for name, spec in configurations.items():
        results[name] = run_numbers(**spec)
        print(f"ran {name}", flush=True)
    plain = results["plain"]
    names = list(plain)
    width = max(map(len, names))
    others = [c for c in configurations if c != "plain"]
    print(f"\n{'number':<{width}} {'plain':>9} " + " ".join(f"{c[:14]:>14}" for c in others))
    for n in names:
        print(f"{n:<{width}} {plain[n]:>9.4f} " + " ".join(f"{results[c][n] - plain[n]:>+14.4f}" for c in others))
    print("\n|change| from the plain run over those numbers: median, largest")
    for group in ("ch12", "ch9", "ch5"):
        print(f"  {group}:")
        chosen = [n for n in names if n.startswith(group + " ")]
        for c in others:
            d = np.abs([results[c][n] - plain[n] for n in chosen])
            print(f"    {c:<16} median {np.median(d):.4f}  largest {d.max():.4f}")
        kernel = [c for c in others if c.startswith("kernels")]
        draws = [c for c in others if c.startswith("draw") and c.endswith("1e-06")]
        if kernel:
            k = np.max([[abs(results[c][n] - plain[n]) for n in chosen] for c in kernel], axis=0)
            p = np.max([[abs(results[c][n] - plain[n]) for n in chosen] for c in draws], axis=0)
            print(
                f"    per number, largest kernel change / largest change over draws 1-4: "
                f"median {np.median(k / np.maximum(p, 1e-12)):.2f}, largest {np.max(k / np.maximum(p, 1e-12)):.2f}; "
                f"numbers whose kernel change exceeds 3 x the draws' spread: {int(np.sum(k > 3 * p))} of {len(chosen)}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("calibrate", help="kernel caps against the perturbation, on a fixed set of numbers")
    numbers = sub.add_parser("numbers", help="(internal) print the calibration numbers as JSON")
    numbers.add_argument("--draw", type=int, default=None)
    numbers.add_argument("--scale", type=float, default=1e-6)
    args = parser.parse_args()
    if args.command == "calibrate":
        calibrate()
    else:
        numbers_main(args.draw, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
