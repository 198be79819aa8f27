"""Time causal ALiBi attention through compiled FlexAttention against SDPA with the dense bias, and its memory.

Run with ``python -m posenc_book.bench --section flex`` (or ``python -m posenc_book.bench_flex``). Float32 queries,
keys and values of shape ``(1, heads, seq, 64)`` drawn once from a seeded normal; causal ALiBi with
:class:`posenc.nn.ALiBiBias`:

- ``sdpa + dense bias``: ``scaled_dot_product_attention(q, k, v, attn_mask=bias)`` with the
  ``(heads, seq, seq)`` float32 bias of ``ALiBiBias(heads)(seq)`` built beforehand (its build is timed apart);
- ``flex, score_mod``: ``torch.compile(flex_attention)`` with ``ALiBiBias.score_mod()``, the causal ``-inf``
  coming from the score_mod (every block of scores computed);
- ``flex, score_mod + block mask``: the same with ``create_block_mask(posenc.nn.causal_mask_mod())``, built
  beforehand, so that the blocks above the diagonal are skipped.

Each approach runs once to compile and warm up, then is timed a few times (median), in shuffled rounds; the
first call's time (compilation included) is reported too. Outputs are compared with the SDPA result (max abs
difference). At the long size, where the dense bias alone would take ``heads * seq**2 * 4`` bytes, only the
block-masked FlexAttention runs, once after its compilation, with the growth of the resident set's high-water mark
(a lower bound, see :func:`posenc_book.bench.call_with_peak`).
"""

from __future__ import annotations

import random
import statistics
import sys
import time

__all__ = ["run_flex", "format_flex_report", "main"]

HEAD_DIM = 64
COMPARED = (8, 4096)
"""(heads, seq) of the comparison with SDPA (issue 16: at least 2x faster than SDPA with the dense bias)."""
LONG = (32, 16384)
"""(heads, seq) of the long run, where the dense float32 bias alone would be 32 GiB."""
SPEEDUP_TARGET = 2.0


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _peak(call):
    """``call()`` with the growth of the resident set's high-water mark (bytes, lower bound) or None."""
    from posenc_book.bench import call_with_peak

    result, peak, _ = call_with_peak(call, uses_torch=True)
    return result, peak


def _qkv(heads: int, seq: int, seed: int = 0):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, seq, HEAD_DIM, generator=generator) for _ in range(3))


def run_flex(compared=COMPARED, long=LONG, *, runs: int = 5, progress: bool = True) -> dict:
    """Time the approaches at ``compared`` and run the block-masked one at ``long``; see the module docstring."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from torch.nn.functional import scaled_dot_product_attention

    from posenc.nn import ALiBiBias, causal_mask_mod

    attention = torch.compile(flex_attention, dynamic=False)
    heads, seq = compared
    q, k, v = _qkv(heads, seq)
    alibi = ALiBiBias(heads)
    began = time.perf_counter()
    bias = alibi(seq)
    bias_ms = 1e3 * (time.perf_counter() - began)
    began = time.perf_counter()
    block_mask = create_block_mask(causal_mask_mod(), None, None, seq, seq, device="cpu")
    block_mask_ms = 1e3 * (time.perf_counter() - began)
    score_mod = alibi.score_mod()
    approaches = {
        "sdpa + dense bias": lambda: scaled_dot_product_attention(q, k, v, attn_mask=bias),
        "flex, score_mod": lambda: attention(q, k, v, score_mod=score_mod),
        "flex, score_mod + block mask": lambda: attention(q, k, v, score_mod=score_mod, block_mask=block_mask),
    }
    first_ms, outputs, times = {}, {}, {name: [] for name in approaches}
    with torch.no_grad():
        for name, call in approaches.items():
            if progress:
                _log(f"flex: first call of {name} at {heads} heads x {seq}")
            began = time.perf_counter()
            outputs[name] = call()
            first_ms[name] = 1e3 * (time.perf_counter() - began)
        order = list(approaches)
        for round_ in range(runs):
            random.Random(round_).shuffle(order)
            for name in order:
                began = time.perf_counter()
                approaches[name]()
                times[name].append(time.perf_counter() - began)
    reference = outputs["sdpa + dense bias"]
    sdpa_ms = 1e3 * statistics.median(times["sdpa + dense bias"])
    rows = []
    for name in approaches:
        ms = 1e3 * statistics.median(times[name])
        rows.append(
            {
                "approach": name,
                "ms": ms,
                "first_call_ms": first_ms[name],
                "sdpa_over_this": sdpa_ms / ms,
                "max_abs_difference": float((outputs[name] - reference).abs().max()),
            }
        )
    approaches.clear()  # free the short run's tensors (the dense bias above all) before the long run
    outputs.clear()
    q = k = v = bias = reference = None

    long_heads, long_seq = long
    if progress:
        _log(f"flex: block-masked score_mod at {long_heads} heads x {long_seq}")
    lq, lk, lv = _qkv(long_heads, long_seq, seed=1)
    long_score_mod = ALiBiBias(long_heads).score_mod()
    with torch.no_grad():
        long_mask = create_block_mask(causal_mask_mod(), None, None, long_seq, long_seq, device="cpu")
        began = time.perf_counter()
        attention(lq, lk, lv, score_mod=long_score_mod, block_mask=long_mask)
        long_first_ms = 1e3 * (time.perf_counter() - began)
        began = time.perf_counter()
        out, peak = _peak(lambda: attention(lq, lk, lv, score_mod=long_score_mod, block_mask=long_mask))
        long_ms = 1e3 * (time.perf_counter() - began)
    best = max(row["sdpa_over_this"] for row in rows[1:])
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "compared": {"heads": heads, "seq": seq, "head_dim": HEAD_DIM, "runs": runs},
        "dense_bias_build_ms": bias_ms,
        "dense_bias_bytes": heads * seq * seq * 4,
        "block_mask_build_ms": block_mask_ms,
        "approaches": rows,
        "long": {
            "heads": long_heads,
            "seq": long_seq,
            "head_dim": HEAD_DIM,
            "first_call_ms": long_first_ms,
            "ms": long_ms,
            "peak_bytes": peak,
            "inputs_bytes": 3 * lq.numel() * lq.element_size(),
            "dense_bias_bytes": long_heads * long_seq * long_seq * 4,
            "finite": bool(torch.isfinite(out).all()),
        },
        "target": {"sdpa_over_flex": best, "bound": SPEEDUP_TARGET, "met": best >= SPEEDUP_TARGET},
    }


def _gib(n_bytes: float | None) -> str:
    return "not traced" if n_bytes is None else f"{n_bytes / 2**30:.2f} GiB"


def format_flex_report(flex: dict) -> str:
    compared = flex["compared"]
    lines = [
        f"Causal ALiBi attention, float32 (1, {compared['heads']}, {compared['seq']}, {compared['head_dim']}), "
        f"torch {flex['torch']} on {flex['threads']} threads, median of {compared['runs']} runs in shuffled rounds "
        f"after a first call (compilation included); the dense bias ({_gib(flex['dense_bias_bytes'])}) built in "
        f"{flex['dense_bias_build_ms']:.0f} ms and the block mask in {flex['block_mask_build_ms']:.0f} ms beforehand",
        "",
        "| approach | ms | first call ms | SDPA / this | max abs difference vs SDPA |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in flex["approaches"]:
        lines.append(
            f"| {row['approach']} | {row['ms']:.0f} | {row['first_call_ms']:.0f} | {row['sdpa_over_this']:.2f} | "
            f"{row['max_abs_difference']:.1e} |"
        )
    long = flex["long"]
    lines += [
        "",
        f"Long context: (1, {long['heads']}, {long['seq']}, {long['head_dim']}), flex with score_mod + block mask, "
        f"where the dense bias alone would be {_gib(long['dense_bias_bytes'])}",
        "",
        "| first call ms | second call ms | peak memory of the second call | q, k, v | output finite |",
        "| ---: | ---: | ---: | ---: | --- |",
        f"| {long['first_call_ms']:.0f} | {long['ms']:.0f} | {_gib(long['peak_bytes'])} | "
        f"{_gib(long['inputs_bytes'])} | {'yes' if long['finite'] else 'NO'} |",
        "",
        "| target | value | met |",
        "| --- | ---: | --- |",
        f"| SDPA with dense bias / best flex >= {flex['target']['bound']:g} | {flex['target']['sdpa_over_flex']:.2f} | "
        f"{'yes' if flex['target']['met'] else 'NO'} |",
    ]
    return "\n".join(lines)


def main() -> int:
    import os

    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    print(format_flex_report(run_flex()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
