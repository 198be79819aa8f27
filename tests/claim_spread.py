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

``python tests/claim_spread.py chapters [NN ...]`` runs chapters 5, 9 and 12 (or those named) plainly and
under the four perturbations of :func:`posenc_book.robustness.check_claim`, each chapter's code cells in one
namespace with their ``assert`` statements removed, and checks every hidden assertion of the chapter that
reads a number from training: its value, the spread of that number over the four perturbed runs, its margin,
and whether the margin is at least three times the spread. The bounds below repeat the chapters' asserts (the
label names the assert cell); the chapters keep each spread beside its assert as a comment. About 4 minutes per
chapter 9 run on 2 cores. The training claims of tests/test_extrapolation.py are checked the same way by
``pytest tests/test_extrapolation.py -k claim --claim-draws 1,2,3,4 -s``; those of tests/test_frequency_usage.py
on every run of the tests.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from check_portable import LEVELS, cpu_flags

from posenc_book.robustness import Bound, check_claim

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


class _WithoutAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.copy_location(ast.Pass(), node)


class _OnSeed(_WithoutAsserts):
    """The chapter's code run on training seed ``seed`` in place of its page's seeds (asserts removed too).

    ``SEEDS = (...)`` becomes ``SEEDS = (seed,)``; a keyword ``seed=0``, a parameter ``seed`` whose default is 0,
    and a key ``(name, 0)`` (a scheme's run on seed 0, as chapter 9 reads ``results["t5", 0]``) take ``seed``.
    Other integers, the data's seeds (``seed=1`` of a sampler, ``manual_seed(0)`` of chapter 5's data) and the
    chain's (``markov_chain(0)``) are left alone.
    """

    def __init__(self, seed: int):
        self.seed = seed

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        if any(isinstance(t, ast.Name) and t.id == "SEEDS" for t in node.targets):
            node.value = ast.Tuple([ast.Constant(self.seed)], ast.Load())
        return node

    def visit_keyword(self, node):
        node = self.generic_visit(node)
        if node.arg == "seed" and isinstance(node.value, ast.Constant) and node.value.value == 0:
            node.value = ast.Constant(self.seed)
        return node

    def visit_arguments(self, node):
        node = self.generic_visit(node)
        positional = node.posonlyargs + node.args
        for arg, default in zip(positional[len(positional) - len(node.defaults) :], node.defaults):
            if arg.arg == "seed" and isinstance(default, ast.Constant) and default.value == 0:
                node.defaults[node.defaults.index(default)] = ast.Constant(self.seed)
        return node

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        key = node.slice
        if (
            isinstance(key, ast.Tuple)
            and len(key.elts) == 2
            and isinstance(key.elts[0], ast.Constant)
            and isinstance(key.elts[0].value, str)
            and isinstance(key.elts[1], ast.Constant)
            and key.elts[1].value == 0
        ):
            key.elts[1] = ast.Constant(self.seed)
        return node


def chapter_namespace(number: str, seed: int | None = None) -> dict:
    """Run chapter ``number``'s code cells, their asserts removed, in one namespace.

    Returns ``{cell id: the namespace as that cell left it}`` (shallow copies): a later cell may rebind a name an
    assert cell read (chapter 9 reuses ``gap``), so each claim reads the names as its own assert cell saw them.
    With ``seed``, the chapter trains on that seed alone, in place of its page's seeds (:class:`_OnSeed`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (path,) = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    namespace = {"__name__": f"chapter_{number}"}
    after = {}
    transform = _WithoutAsserts() if seed is None else _OnSeed(seed)
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            tree = ast.fix_missing_locations(transform.visit(ast.parse("".join(cell["source"]))))
            exec(compile(tree, f"{path.name}:{cell['id']}", "exec"), namespace)
            if "show" in namespace:  # the book's show() checks and shows a figure: nothing to show here
                namespace["show"] = lambda: None
            plt.close("all")
            after[cell["id"]] = dict(namespace)
    return after


def _chapter_5():
    """Chapter 5's hidden asserts on its trained models (experiment-run, experiment-figure-md, prenorm-run,
    prenorm-size)."""

    def first_step_below(curves, level):
        return next(step for step, mse in enumerate(curves.test_mse) if mse < level)

    def largest_late_jump(curves):
        return max(abs(a - b) for a, b in zip(curves.test_mse[100:], curves.test_mse[101:]))

    def blind_swap(ns):
        import torch

        blind, x = ns["runs"][ns["names"][0]][0], ns["x_test"]
        with torch.no_grad():
            return float((blind(x[:, [1, 0, 2, 3]]) - blind(x)).abs().max())

    def blind_both(ns):
        import torch

        blind, x, y = ns["runs"][ns["names"][0]][0], ns["x_test"], ns["y_test"]
        with torch.no_grad():
            rows, targets = torch.cat([x, x[:, [1, 0, 2, 3]]]), torch.cat([y, -y])
            return float(((blind(rows) - targets) ** 2).mean())

    def numbers(after):
        ns = after["prenorm-run-check"]
        size = after["prenorm-size-check"]
        names, final, runs, zero = ns["names"], ns["final"], ns["runs"], ns["always_zero"]
        identified = np.array([final[n] for n in names[1:]])
        reached = {n: first_step_below(runs[n][1], 0.1 * zero) for n in names[1:]}
        return {
            "experiment-run: blind / always-zero": final[names[0]] / zero,
            "experiment-run: blind settled train MSE - mean y^2": ns["settled"](runs[names[0]][1].train_mse)
            - float((ns["y_train"] ** 2).mean()),
            "experiment-run: identified / always-zero": identified / zero,
            "experiment-run: log10 blind / identified": np.log10(final[names[0]] / identified),
            "experiment-figure-md: bias-only step minus others": reached[names[1]]
            - max(reached[names[2]], reached[names[3]]),
            "experiment-figure-md: log10 bias-only late jump / FT's": np.log10(
                largest_late_jump(runs[names[1]][1]) / largest_late_jump(runs[names[3]][1])
            ),
            "prenorm-run: log10 weight-only / both": np.log10(ns["pre_weight_only"] / ns["pre_both"]),
            "prenorm-run: log10 pre weight-only / post weight-only": np.log10(
                ns["pre_weight_only"] / final["weight only: own W_j, no bias"]
            ),
            "prenorm-run: both / always-zero": ns["pre_both"] / zero,
            "prenorm-run: weight-only": ns["pre_weight_only"],
            "prenorm-run: weight-only / always-zero": ns["pre_weight_only"] / zero,
            "experiment-run: blind model's change under the swap": blind_swap(ns),
            "experiment-run: blind error on rows and swaps - always-zero": blind_both(ns) - zero,
            "prenorm-size: log10 initial smaller var W_j / epsilon": np.log10(
                float(size["spread"]["initial"].min()) / size["epsilon"]
            ),
            "prenorm-size: initial size response": size["moved"]["initial"],
            "prenorm-size: trained smaller var W_j / epsilon": float(size["spread"]["trained"].min()) / size["epsilon"],
            "prenorm-size: log10 trained / initial size response": np.log10(
                size["moved"]["trained"] / size["moved"]["initial"]
            ),
        }

    bounds = [
        Bound("experiment-run: blind / always-zero", above=0.9),
        Bound("experiment-run: blind settled train MSE - mean y^2", below=0.0),
        Bound("experiment-run: identified / always-zero", below=0.01),
        Bound("experiment-run: log10 blind / identified", above=np.log10(5)),
        Bound("experiment-figure-md: bias-only step minus others", above=0.0),
        Bound("experiment-figure-md: log10 bias-only late jump / FT's", above=0.0),
        Bound("prenorm-run: log10 weight-only / both", above=np.log10(5)),
        Bound("prenorm-run: log10 pre weight-only / post weight-only", above=1.0),
        Bound("prenorm-run: both / always-zero", below=0.01),
        Bound("prenorm-run: weight-only", above=0.1),
        Bound("prenorm-run: weight-only / always-zero", below=0.5),
        Bound("experiment-run: blind model's change under the swap", below=1e-5),
        # (not "experiment-run: blind error on rows and swaps - always-zero": that one is a theorem,
        # (f - y)^2 + (f + y)^2 >= 2 y^2 for any f, true of every run up to rounding, not a training result)
        Bound("prenorm-size: log10 initial smaller var W_j / epsilon", above=3.0),
        Bound("prenorm-size: initial size response", below=0.01),
        Bound("prenorm-size: trained smaller var W_j / epsilon", below=100),
        Bound("prenorm-size: log10 trained / initial size response", above=1.0),
    ]
    return "05", numbers, bounds


def _chapter_9():
    """Chapter 9's hidden asserts on trained models (claim-32, shuffle, shuffle-gain, claim-256, position, window,
    window-most, partial, hybrid-gap, copy, pi-run)."""

    def numbers(after):
        ns = after["pi-run-check"]
        gap = after["shuffle-check"]["gap"]  # the PI cells rebind gap
        at32, at256, order1, floor = ns["at32"], ns["at256"], ns["order1"], ns["floor"]
        mean32, mean256, rise = ns["mean32"], ns["mean256"], ns["rise"]
        windowed, removed, grid, acc, pi = ns["windowed"], ns["removed"], ns["grid"], ns["acc"], ns["pi"]
        hybrid, rotary, nope = grid["rotary + NoPE"], grid["rotary"], grid["none"]
        others32 = [v for s, v in mean32.items() if s not in ("learned", "none")]
        out = {
            "claim-32: at 32 - order1": np.concatenate([v - order1 for v in at32.values()]),
            "claim-32: at 32 - floor": np.concatenate([v - floor for v in at32.values()]),
            "claim-32: next mean - rotary": min(v for s, v in mean32.items() if s != "rotary") - mean32["rotary"],
            "claim-32: learned, none - the rest": min(mean32["learned"], mean32["none"]) - max(others32),
            "shuffle: rotary": gap["rotary"],
            "shuffle: alibi": gap["alibi"],
            "shuffle: t5": gap["t5"],
            "shuffle: sinusoidal": gap["sinusoidal"],
            "shuffle: learned": gap["learned"],
            "shuffle: none": gap["none"],
            "claim-256: |rise| alibi": np.abs(rise["alibi"]),
            "claim-256: sinusoidal at 256 - order1": at256["sinusoidal"] - order1,
            "claim-256: rotary at 256 - order1": at256["rotary"] - order1,
            "claim-256: rise t5": rise["t5"],
            "claim-256: rise none": rise["none"],
            "claim-256: mean t5 - alibi": mean256["t5"] - mean256["alibi"],
            "claim-256: mean none - t5": mean256["none"] - mean256["t5"],
            "claim-256: mean sinusoidal - none": mean256["sinusoidal"] - mean256["none"],
            "claim-256: mean rotary - sinusoidal": mean256["rotary"] - mean256["sinusoidal"],
            "window: rotary windowed - at 32": windowed["rotary"] - at32["rotary"],
            "window: rotary removed": removed["rotary"],
            "window: t5 removed - 0.3 rise": removed["t5"] - 0.3 * rise["t5"],
            "window: sinusoidal removed": removed["sinusoidal"],
            "window: sinusoidal windowed - at 32": windowed["sinusoidal"] - at32["sinusoidal"],
            "window: |alibi removed|": np.abs(removed["alibi"]),
            "partial: hybrid - rotary at 32": hybrid[:, 0] - rotary[:, 0],
            "partial: hybrid - rotary at 32, mean": hybrid[:, 0].mean() - rotary[:, 0].mean(),
            "partial: hybrid at 256 - order1": hybrid[:, -1] - order1,
            "partial: |hybrid windowed - at 32|": np.abs(ns["hybrid_windowed"] - hybrid[:, 0]),
            "copy: rotary at 8": acc["rotary"][8],
            "copy: rotary - none at 8": acc["rotary"][8] - acc["none"][8],
            "copy: rotary at 16": acc["rotary"][16],
            "pi-run: extrapolated - trained": pi.extrapolated - pi.trained,
            "pi-run: interpolated - trained": pi.interpolated - pi.trained,
            "pi-run: extrapolated - interpolated": pi.extrapolated - pi.interpolated,
            "pi-run: interpolated short - trained": pi.interpolated_short - pi.trained,
            "pi-run: short cost - half the cost at 128": (pi.interpolated_short - pi.trained)
            - 0.5 * (pi.interpolated - pi.trained),
            "pi-run: finetuned extrapolated - interpolated": pi.finetuned_extrapolated - pi.finetuned_interpolated,
            "pi-run: finetuned interpolated - trained": pi.finetuned_interpolated - pi.trained,
            "pi-run: finetuned extrapolated short - trained": pi.finetuned_extrapolated_short - pi.trained,
            "pi-run: finetuned interpolated short - trained": pi.finetuned_interpolated_short - pi.trained,
        }
        for name in ("rotary 2 of 8", "rotary 4 of 8"):
            p = grid[name]
            out[f"partial: {name} - rotary at 32"] = p[:, 0] - rotary[:, 0]
            out[f"partial: none - {name} at 32"] = nope[:, 0] - p[:, 0]
            out[f"partial: {name} at 256 - order1"] = p[:, -1] - order1
            out[f"partial: {name} - rotary at 256"] = p[:, -1] - rotary[:, -1]
        for n in (12, 16):
            out[f"copy: none - rotary at {n}"] = acc["none"][n] - acc["rotary"][n]
            out[f"copy: alibi - none at {n}"] = acc["alibi"][n] - acc["none"][n]
        sg = after["shuffle-gain-check"]
        learned_none = [(s, seed) for s in ("learned", "none") for seed in sg["SEEDS"]]
        out["shuffle-gain: gain"] = [sg["gain"][k] for k in learned_none]
        out["shuffle-gain: share kept"] = [sg["kept"][k] for k in learned_none]
        out["shuffle-gain: alone - lowest"] = sg["alone"] - sg["lowest"]
        ps = after["position-check"]
        one_draw, two_draws, per_seed, band = ps["one_draw"], ps["rise"], ps["per_seed"], ps["band"]
        out["position: one-draw alibi"] = one_draw["alibi"]
        out["position: rise alibi"] = two_draws["alibi"]
        out["position: one-draw none"] = one_draw["none"]
        out["position: rise none"] = two_draws["none"]
        out["position: one-draw sinusoidal, rotary, t5"] = np.concatenate(
            [one_draw[s] for s in ("sinusoidal", "rotary", "t5")]
        )
        out["position: |two draws - one draw|"] = np.concatenate([np.abs(two_draws[s] - one_draw[s]) for s in one_draw])
        early = ps["early"]
        out["position: learned, none 16-31 - 1-7"] = np.concatenate([early[s] for s in ("learned", "none")])
        out["position: the other four 16-31 - 1-7"] = np.concatenate(
            [early[s] for s in ("sinusoidal", "alibi", "t5", "rotary")]
        )
        out["position: sinusoidal, alibi 16-31 - 1-7"] = np.concatenate([early[s] for s in ("sinusoidal", "alibi")])
        out["position: |rotary 16-31 - 1-7|"] = np.abs(early["rotary"])
        out["position: none 32-63 - 16-31"] = per_seed("none", lambda p: band(p, 32, 63) - band(p, 16, 31))
        out["position: rotary 32-63 - 16-31"] = per_seed("rotary", lambda p: band(p, 32, 63) - band(p, 16, 31))
        far = {s: per_seed(s, lambda p: band(p, 128, 255)).mean() for s in one_draw}
        order = ["alibi", "t5", "none", "sinusoidal", "rotary"]
        for lower, higher in zip(order, order[1:]):
            out[f"position: far {higher} - {lower}"] = far[higher] - far[lower]
        out["position: one-draw sinusoidal, rotary"] = np.concatenate([one_draw[s] for s in ("sinusoidal", "rotary")])
        out["position: one-draw t5"] = one_draw["t5"]
        out["position: t5 16-31 - 1-7"] = early["t5"]
        wm = after["window-most-check"]
        out["window-most: t5 removed - half the rise"] = wm["removed"]["t5"] - 0.5 * wm["rise"]["t5"]
        out["window-most: t5 share of the rise removed"] = wm["removed"]["t5"] / wm["rise"]["t5"]
        hg = after["hybrid-gap-check"]
        out["hybrid-gap: hybrid - rotary at 32"] = hg["hybrid"][:, 0] - hg["rotary"][:, 0]
        return out

    bounds = [
        Bound("claim-32: at 32 - order1", below=-0.1),
        Bound("claim-32: at 32 - floor", above=0.2),
        Bound("claim-32: next mean - rotary", above=0.0),
        Bound("claim-32: learned, none - the rest", above=0.0),
        Bound("shuffle: rotary", above=0.5),
        Bound("shuffle: alibi", above=0.5),
        Bound("shuffle: t5", above=0.1),
        Bound("shuffle: sinusoidal", above=0.1),
        Bound("shuffle: learned", above=0.01, below=0.2),
        Bound("shuffle: none", above=0.01, below=0.2),
        Bound("claim-256: |rise| alibi", below=0.2),
        Bound("claim-256: sinusoidal at 256 - order1", above=0.05),
        Bound("claim-256: rotary at 256 - order1", above=0.05),
        Bound("claim-256: rise t5", above=0.2),
        Bound("claim-256: rise none", above=0.2),
        Bound("claim-256: mean t5 - alibi", above=0.0),
        Bound("claim-256: mean none - t5", above=0.0),
        Bound("claim-256: mean sinusoidal - none", above=0.0),
        Bound("claim-256: mean rotary - sinusoidal", above=0.0),
        Bound("window: rotary windowed - at 32", below=0.2),
        Bound("window: rotary removed", above=0.5),
        Bound("window: t5 removed - 0.3 rise", above=0.0),
        Bound("window: sinusoidal removed", below=0.35),
        Bound("window: sinusoidal windowed - at 32", above=0.3),
        Bound("window: |alibi removed|", below=0.05),
        Bound("partial: hybrid - rotary at 32", above=0.02),
        Bound("partial: hybrid - rotary at 32, mean", above=0.05),
        Bound("partial: hybrid at 256 - order1", above=0.2),
        Bound("partial: |hybrid windowed - at 32|", below=0.2),
        *[
            bound
            for name in ("rotary 2 of 8", "rotary 4 of 8")
            for bound in (
                Bound(f"partial: {name} - rotary at 32", above=0.25),
                Bound(f"partial: none - {name} at 32", above=0.1),
                Bound(f"partial: {name} at 256 - order1", below=-0.05),
                Bound(f"partial: {name} - rotary at 256", below=-0.4),
            )
        ],
        Bound("copy: rotary at 8", above=0.95),
        Bound("copy: rotary - none at 8", above=0.1),
        Bound("copy: rotary at 16", below=0.3),
        *[Bound(f"copy: none - rotary at {n}", above=0.1) for n in (12, 16)],
        *[Bound(f"copy: alibi - none at {n}", above=0.1) for n in (12, 16)],
        Bound("pi-run: extrapolated - trained", above=0.8),
        Bound("pi-run: interpolated - trained", above=0.5),
        Bound("pi-run: extrapolated - interpolated", above=0.0),
        Bound("pi-run: interpolated short - trained", above=0.4),
        Bound("pi-run: short cost - half the cost at 128", above=0.0),
        Bound("pi-run: finetuned extrapolated - interpolated", above=0.1),
        Bound("pi-run: finetuned interpolated - trained", above=0.1),
        Bound("pi-run: finetuned extrapolated short - trained", above=0.05),
        Bound("pi-run: finetuned interpolated short - trained", above=0.05),
        Bound("shuffle-gain: gain", above=0.1, below=0.15),
        Bound("shuffle-gain: share kept", above=0.4, below=0.7),
        Bound("shuffle-gain: alone - lowest", above=0.05, below=0.1),
        Bound("position: one-draw alibi", below=0.05),
        Bound("position: rise alibi", above=0.05, below=0.15),
        Bound("position: one-draw none", above=0.15, below=0.25),
        Bound("position: rise none", above=0.25, below=0.35),
        Bound("position: one-draw sinusoidal, rotary, t5", above=0.3),
        Bound("position: |two draws - one draw|", below=0.15),
        Bound("position: learned, none 16-31 - 1-7", above=0.25, below=0.35),
        Bound("position: the other four 16-31 - 1-7", below=0.15),
        Bound("position: sinusoidal, alibi 16-31 - 1-7", above=0.05),
        Bound("position: |rotary 16-31 - 1-7|", below=0.05),
        Bound("position: none 32-63 - 16-31", below=0.3),
        Bound("position: rotary 32-63 - 16-31", above=0.5),
        *[
            Bound(f"position: far {higher} - {lower}", above=0.0)
            for lower, higher in zip(["alibi", "t5", "none", "sinusoidal"], ["t5", "none", "sinusoidal", "rotary"])
        ],
        Bound("window-most: t5 removed - half the rise", above=0.0),
        Bound("hybrid-gap: hybrid - rotary at 32", above=0.05),
    ]
    return "09", numbers, bounds


def _chapter_12():
    """Chapter 12's hidden asserts on its trained models (base-52, base-54b, base-60, base-61b)."""

    def numbers(after):
        ns = after["base-61b"]
        rope, prope, fast = ns["rope"], ns["prope"], ns["fast"]
        whole, fastest, slowest = (ns["near"][name] for name in ns["ablations"])
        loss_whole, loss_fastest, loss_slowest = ns["ablated_loss"].values()
        mean_share = rope.trained.share.mean(axis=(0, 1))
        return {
            "base-52: trained fast share, lowest head": rope.trained.share[..., :fast].sum(-1).min(),
            "base-52: untrained fast share, highest head": rope.untrained.share[..., :fast].sum(-1).max(),
            "base-52: trained lowest head - untrained highest head": rope.trained.share[..., :fast].sum(-1).min()
            - rope.untrained.share[..., :fast].sum(-1).max(),
            "base-52: trained fast share, mean": rope.trained.share[..., :fast].sum(-1).mean(),
            "base-52: most used fast pair - most used slow pair": mean_share[:fast].max() - mean_share[fast:].max(),
            "base-54b: layer 2 near attention, mean": whole[1].mean(),
            "base-54b: layer 2 near attention, lowest head": whole[1].min(),
            "base-54b: without 0-2, layer 2 near attention, highest": fastest[1].max(),
            "base-54b: without 0-2, loss rise": loss_fastest - loss_whole,
            "base-54b: without 5-7, largest change of near attention": np.abs(slowest - whole).max(),
            "base-54b: without 5-7, loss rise": loss_slowest - loss_whole,
            "base-60: |p-RoPE - RoPE| at 32": abs(prope.losses[32] - rope.losses[32]),
            "base-60: RoPE rise 32 to 128": rope.losses[128] - rope.losses[32],
            "base-60: p-RoPE rise 32 to 128": prope.losses[128] - prope.losses[32],
            "base-60: |p-RoPE - RoPE| at 128": abs(prope.losses[128] - rope.losses[128]),
            "base-61b: |swap - RoPE| at 32": abs(ns["swap_loss"][32] - rope.losses[32]),
            "base-61b: |swap - RoPE| at 128": abs(ns["swap_loss"][128] - rope.losses[128]),
        }

    bounds = [
        Bound("base-52: trained fast share, lowest head", above=0.5),
        Bound("base-52: untrained fast share, highest head", below=0.5),
        Bound("base-52: trained lowest head - untrained highest head", above=0.0),
        Bound("base-52: trained fast share, mean", above=0.65),
        Bound("base-52: most used fast pair - most used slow pair", above=0.0),
        Bound("base-54b: layer 2 near attention, mean", above=0.6),
        Bound("base-54b: layer 2 near attention, lowest head", above=0.5),
        Bound("base-54b: without 0-2, layer 2 near attention, highest", below=0.4),
        Bound("base-54b: without 0-2, loss rise", above=1.0),
        Bound("base-54b: without 5-7, largest change of near attention", below=0.12),
        Bound("base-54b: without 5-7, loss rise", below=0.25),
        Bound("base-60: |p-RoPE - RoPE| at 32", below=0.08),
        Bound("base-60: RoPE rise 32 to 128", above=0.5),
        Bound("base-60: p-RoPE rise 32 to 128", above=0.5),
        Bound("base-60: |p-RoPE - RoPE| at 128", below=0.4),
        Bound("base-61b: |swap - RoPE| at 32", below=1e-3),
        Bound("base-61b: |swap - RoPE| at 128", below=0.01),
    ]
    return "12", numbers, bounds


CHAPTERS = {"05": _chapter_5, "09": _chapter_9, "12": _chapter_12}


def audit_chapters(numbers: list[str]) -> int:
    failed = []
    for number in numbers or list(CHAPTERS):
        chapter, read, bounds = CHAPTERS[number]()

        def measure(read=read, chapter=chapter):
            return read(chapter_namespace(chapter))

        check = check_claim(measure, bounds)
        print(f"\n=== chapter {chapter}\n{check.table()}", flush=True)
        if not check.passed:
            failed.append(chapter)
    print("chapters whose claims are not robust:", failed or "none")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("calibrate", help="kernel caps against the perturbation, on a fixed set of numbers")
    chapters = sub.add_parser("chapters", help="every training assert of chapters 5, 9 and 12, perturbed")
    chapters.add_argument("numbers", nargs="*", help="chapter numbers (05, 09, 12); all when none")
    numbers = sub.add_parser("numbers", help="(internal) print the calibration numbers as JSON")
    numbers.add_argument("--draw", type=int, default=None)
    numbers.add_argument("--scale", type=float, default=1e-6)
    args = parser.parse_args()
    if args.command == "calibrate":
        calibrate()
    elif args.command == "chapters":
        return audit_chapters(args.numbers)
    else:
        numbers_main(args.draw, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
