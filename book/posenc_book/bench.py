"""Time posenc's sinusoidal tables and rotary rotations against the ways people compute them, and against memory.

Run ``make bench`` or ``python -m posenc_book.bench`` (add ``--json`` for machine-readable output, ``--sizes
2048x512`` for other sizes, ``--section sinusoidal``, ``--section rotary`` or ``--section flex`` for one section;
the flex section, ALiBi through FlexAttention, is :mod:`posenc_book.bench_flex`). For each
table size, every approach is called once to warm up and then timed with ``time.perf_counter`` several times; the
median is reported, with its ratio to the write bound and to ``posenc``, the largest absolute error against a float64
reference of the same formula and layout, and the peak memory of one call. Progress goes to stderr.

The approaches, all producing an ``(n_positions, d_model)`` table:

- ``posenc.sinusoidal``: float32, interleaved, blocked angle addition (with the two-thread split for large
  tables), and the same on one thread;
- note 001's NumPy code: float64 broadcasting of ``positions * frequencies``, then ``np.cos``/``np.sin`` on
  alternate columns (cosine first), a float64 table;
- note 004's torch code: float32 positions and ``exp``/``log`` frequencies, ``torch.sin``/``torch.cos``
  written into alternate columns of a float32 tensor (torch's own threads);
- a tensor2tensor/fairseq-style ``[sin | cos]`` table: frequencies spaced so that the last is ``1/base``,
  float32 angles, the two halves concatenated;
- a float64-angle reference: float64 angles, ``np.sin``/``np.cos``, stored in float32 (posenc before the
  fast path);
- the ``positional_encodings`` package's ``PositionalEncoding1D`` (torch, float32 angles), a new module per call
  since the module caches its table per input shape;

and three physical bounds: filling a preallocated float32 buffer of the table's size (the write bound, the
base of every ratio), allocating and filling a new buffer of that size (what any function that returns a
new table pays at least, page faults included), and one float32 ``np.sin`` over as many elements into a
preallocated buffer.

Peak memory is what ``tracemalloc`` sees for NumPy code. Torch's allocator is invisible to
``tracemalloc``; for torch the growth of the resident set's high-water mark is read from
``/proc/self/status`` after resetting it (Linux), a lower bound since reused pages are not counted, and
reported as "not traced" where that is unavailable. Approaches slower than a second per call are timed
three times at most.

The rotary section rotates one float32 tensor of shape (1, 16, 4096, 64) at positions 0 .. 4095 with
transformers' ``apply_rotary_pos_emb`` (its per-tensor body, with cos/sin precomputed by its Llama model),
rotary-embedding-torch, a complex multiplication by a float64-accurate table, the same with Meta's float32-angle
table, and :class:`posenc.nn.RotaryEmbedding` in both layouts, by an int offset and by transformers'
``(1, seq)`` int64 ``position_ids`` (the same tensor at every call, as a model hands it to every layer, and a new
one at every call), against ``x.clone()``: the medians of runs in shuffled rounds; one decode step (q and k of
shape (1, 32, 1, 128) at a new position each step) with transformers' cos/sin and ``apply_rotary_pos_emb`` and
with :meth:`posenc.nn.RotaryEmbedding.rotate_pair`; each approach's error against the float64 rotation
(:func:`posenc.rotate`), the errors at positions up to 2**20, and a bfloat16 check. ``make check-gpu``
(:mod:`posenc_book.bench_gpu`) times the same on a CUDA GPU, compiled too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import posenc

# A command-line tool; chapter 6 calls run and the tests call run_rotary at tiny sizes.
__all__ = ["run", "format_report", "run_rotary", "run_rotary_decode", "format_rotary_report", "main"]

DEFAULT_SIZES = ((2048, 512), (8192, 1024), (65536, 1024))
BASE = 10000.0


# --- The approaches --------------------------------------------------------------------------------------


def note_001_numpy(n_positions: int, d_model: int) -> np.ndarray:
    """Note 001 (Kernes' NumPy version): float64 angles by broadcasting, cos in even columns, sin in odd."""
    exponents = 2 * (np.arange(d_model) // 2) / d_model
    angles = np.arange(n_positions).reshape(-1, 1) * ((1.0 / BASE) ** exponents).reshape(1, -1)
    angles[:, 0::2] = np.cos(angles[:, 0::2])
    angles[:, 1::2] = np.sin(angles[:, 1::2])
    return angles


def note_004_torch(n_positions: int, d_model: int):
    """Note 004's torch code: float32 positions times exp(-2i log(base) / d), sin and cos in alternate columns."""
    import torch

    position = torch.arange(0, n_positions, dtype=torch.float).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(BASE) / d_model))
    table = torch.zeros((n_positions, d_model))
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def t2t_frequencies(d_model: int, dtype) -> np.ndarray:
    """tensor2tensor's timescales: log-spaced so that the first frequency is 1 and the last exactly 1/base."""
    half = d_model // 2
    increment = math.log(BASE) / max(half - 1, 1)
    return np.exp(np.arange(half, dtype=dtype) * dtype(-increment))


def t2t_halves_float32(n_positions: int, d_model: int) -> np.ndarray:
    """A tensor2tensor/fairseq-style table: float32 angles, ``[sin | cos]`` concatenated."""
    angles = np.arange(n_positions, dtype=np.float32)[:, None] * t2t_frequencies(d_model, np.float32)[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def float64_angles_to_float32(n_positions: int, d_model: int) -> np.ndarray:
    """The accurate direct way: float64 angles, float64 sin and cos, stored as float32 (interleaved)."""
    angles = np.multiply.outer(np.arange(n_positions, dtype=np.float64), posenc.frequencies(d_model))
    table = np.empty((n_positions, d_model), dtype=np.float32)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table


def posenc_one_thread(n_positions: int, d_model: int) -> np.ndarray:
    return posenc.sinusoidal(n_positions, d_model, base=BASE, n_threads=1)


def positional_encodings_1d(n_positions: int, d_model: int):
    """The ``positional_encodings`` package: a new ``PositionalEncoding1D`` (float32 angles, interleaved), called once.

    The module caches its table per input shape, so only its first call computes; a new module per call times that.
    It reads nothing but the shape of its ``(batch, x, ch)`` input, so an uninitialised tensor is passed.
    """
    import torch
    from positional_encodings.torch_encodings import PositionalEncoding1D

    return PositionalEncoding1D(d_model)(torch.empty(1, n_positions, d_model))[0]


@dataclass
class Approach:
    name: str
    build: Callable[[int, int], object]
    layout: str  # of the float64 reference the error is measured against
    frequencies: str  # "paper" or "t2t"
    uses_torch: bool = False
    requires: str | None = None  # a package the approach imports; skipped when it is not installed


APPROACHES = [
    Approach("posenc.sinusoidal", lambda n, d: posenc.sinusoidal(n, d), "interleaved", "paper"),
    Approach("posenc, one thread", posenc_one_thread, "interleaved", "paper"),
    Approach("note 001 numpy, float64", note_001_numpy, "cos_first", "paper"),
    Approach("note 004 torch, float32 angles", note_004_torch, "interleaved", "paper", uses_torch=True),
    Approach("t2t/fairseq [sin|cos], float32 angles", t2t_halves_float32, "halves", "t2t"),
    Approach("float64 angles -> float32", float64_angles_to_float32, "interleaved", "paper"),
    Approach(
        "positional_encodings PositionalEncoding1D (torch)",
        positional_encodings_1d,
        "interleaved",
        "paper",
        uses_torch=True,
        requires="positional_encodings",
    ),
]


def _importable(name: str | None) -> bool:
    if name is None:
        return True
    import importlib.util

    return importlib.util.find_spec(name) is not None


# --- Measuring -------------------------------------------------------------------------------------------


def reference_rows(rows: slice, d_model: int, layout: str, frequencies: str) -> np.ndarray:
    """float64 reference rows of the table in ``layout``, with the paper's or tensor2tensor's frequencies."""
    omega = posenc.frequencies(d_model) if frequencies == "paper" else t2t_frequencies(d_model, np.float64)
    angles = np.multiply.outer(np.arange(rows.start, rows.stop, dtype=np.float64), omega)
    interleaved = np.empty((len(angles), d_model))
    interleaved[:, 0::2] = np.sin(angles)
    interleaved[:, 1::2] = np.cos(angles)
    return interleaved[:, posenc.layout_permutation("interleaved", layout, d_model)]


def max_abs_error(table: np.ndarray, layout: str, frequencies: str, rows_per_chunk: int = 2048) -> float:
    error = 0.0
    for first in range(0, table.shape[0], rows_per_chunk):
        rows = slice(first, min(first + rows_per_chunk, table.shape[0]))
        reference = reference_rows(rows, table.shape[1], layout, frequencies)
        error = max(error, float(np.abs(table[rows].astype(np.float64) - reference).max()))
    return error


def median_time(call: Callable[[], object], repeats: int) -> tuple[float, int]:
    """Median wall time of ``repeats`` calls in seconds, after one warm-up call, and the number of calls timed.

    An approach whose warm-up takes more than a second is timed three times at most, to keep a run short.
    """
    began = time.perf_counter()
    call()
    if time.perf_counter() - began > 1.0:
        repeats = min(repeats, 3)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times), repeats


def _read_status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def call_with_peak(call: Callable[[], object], uses_torch: bool) -> tuple[object, float | None, str]:
    """Call once; return the result, the peak memory of the call in bytes, and how that was measured.

    NumPy reports its allocations to ``tracemalloc``. Torch does not; for it the growth of the resident
    set's high-water mark is read instead, which is a lower bound (pages the allocator reuses from earlier
    calls are not counted), or nothing where ``/proc/self/clear_refs`` is unavailable.
    """
    if not uses_torch:
        tracemalloc.start()
        try:
            result = call()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return result, float(peak), "tracemalloc"
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # reset the VmHWM high-water mark to the current RSS
        before = _read_status_kib("VmRSS")
    except OSError:
        return call(), None, "not traced"
    result = call()
    return result, 1024.0 * (_read_status_kib("VmHWM") - before), "RSS growth, lower bound"


def repeats_for(n_elements: int) -> int:
    return 7 if n_elements <= 2**22 else 5 if n_elements <= 2**24 else 3


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bench_size(n_positions: int, d_model: int, *, have_torch: bool, label: str, progress: bool = True) -> dict:
    n_elements = n_positions * d_model
    repeats = repeats_for(n_elements)
    table_bytes = 4 * n_elements
    rows = []
    log = _log if progress else (lambda message: None)

    buffer = np.empty((n_positions, d_model), dtype=np.float32)
    log(f"{label} {n_positions}x{d_model}: bounds ({repeats} runs each)")
    write_bound, _ = median_time(lambda: buffer.fill(0.5), repeats)
    fresh_bound, _ = median_time(lambda: np.empty((n_positions, d_model), dtype=np.float32).fill(0.5), repeats)
    sine_input = np.linspace(0.0, 100.0, n_elements, dtype=np.float32)
    sine_bound, _ = median_time(lambda: np.sin(sine_input, out=buffer.reshape(-1)), repeats)
    sine_input = buffer = None  # free both before the approaches run

    for approach in APPROACHES:
        if approach.uses_torch and not have_torch:
            log(f"{label} {n_positions}x{d_model}: skipping {approach.name} (torch is not installed)")
            continue
        if not _importable(approach.requires):
            log(f"{label} {n_positions}x{d_model}: skipping {approach.name} ({approach.requires} is not installed)")
            continue
        log(f"{label} {n_positions}x{d_model}: {approach.name} ({repeats} runs)")
        call = lambda approach=approach: approach.build(n_positions, d_model)  # noqa: E731
        seconds, timed = median_time(call, repeats)
        table, peak, peak_method = call_with_peak(call, approach.uses_torch)
        table = table.numpy() if hasattr(table, "numpy") else table
        error = max_abs_error(table, approach.layout, approach.frequencies)
        del table
        rows.append(
            {
                "approach": approach.name,
                "ms": 1e3 * seconds,
                "runs": timed,
                "peak_bytes": peak,
                "peak_method": peak_method,
                "max_abs_error": error,
            }
        )

    posenc_ms = rows[0]["ms"]
    for row in rows:
        row["x_write_bound"] = row["ms"] / (1e3 * write_bound)
        row["x_posenc"] = row["ms"] / posenc_ms
        row["peak_x_table"] = None if row["peak_bytes"] is None else row["peak_bytes"] / table_bytes
    bounds = [
        {"approach": "bound: fill a preallocated buffer", "ms": 1e3 * write_bound},
        {"approach": "bound: allocate and fill a new buffer", "ms": 1e3 * fresh_bound},
        {"approach": "bound: one np.sin (float32)", "ms": 1e3 * sine_bound},
    ]
    for row in bounds:
        row["x_write_bound"] = row["ms"] / (1e3 * write_bound)
        row["x_posenc"] = row["ms"] / posenc_ms
    return {
        "n_positions": n_positions,
        "d_model": d_model,
        "table_bytes": table_bytes,
        "repeats": repeats,
        "approaches": rows,
        "bounds": bounds,
    }


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "posenc": posenc.__version__,
    }
    if hasattr(os, "getloadavg"):
        info["load_average_1min"] = round(os.getloadavg()[0], 2)
    return info


def _format_error(error: float) -> str:
    return f"{error:.1e}"


def format_report(results: dict) -> str:
    lines = [
        "machine: {cpu}, {cores} cores; Python {python}, NumPy {numpy}{torch}; {date}; load average {load}".format(
            torch=f", torch {results['machine']['torch']}" if "torch" in results["machine"] else "",
            load=results["machine"].get("load_average_1min", "n/a"),
            **{key: value for key, value in results["machine"].items() if key != "torch"},
        )
    ]
    for size in results["sizes"]:
        lines += [
            "",
            f"{size['n_positions']} x {size['d_model']} float32 table ({size['table_bytes'] / 2**20:.0f} MiB), "
            f"median of {size['repeats']} runs "
            "(3 for approaches slower than a second)",
            "",
            "| approach | ms | x write bound | x posenc | max abs error | peak MiB (x table) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in size["approaches"]:
            if row["peak_bytes"] is None:
                peak = "not traced"
            else:
                at_least = "" if row["peak_method"] == "tracemalloc" else ">= "
                peak = (
                    f"{at_least}{row['peak_bytes'] / 2**20:.1f} "
                    f"({at_least}{row['peak_x_table']:.2f}, {row['peak_method']})"
                )
            lines.append(
                f"| {row['approach']} | {row['ms']:.2f} | {row['x_write_bound']:.1f} | {row['x_posenc']:.1f} | "
                f"{_format_error(row['max_abs_error'])} | {peak} |"
            )
        for row in size["bounds"]:
            lines.append(
                f"| {row['approach']} | {row['ms']:.2f} | {row['x_write_bound']:.1f} | {row['x_posenc']:.2f} | | |"
            )
    return "\n".join(lines)


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``--sizes``: comma-separated ``NxD`` pairs, ``N >= 1`` and ``D`` positive and even."""
    sizes = []
    for item in text.split(","):
        try:
            n_positions, d_model = (int(part) for part in item.lower().split("x"))
        except ValueError:  # not two ints
            n_positions = d_model = 0
        if n_positions < 1 or d_model < 1 or d_model % 2:
            raise argparse.ArgumentTypeError(f"sizes must look like 2048x512,8192x1024 (d_model even); got {item!r}")
        sizes.append((n_positions, d_model))
    return sizes


def run(sizes=DEFAULT_SIZES, *, have_torch: bool | None = None, progress: bool = True) -> dict:
    """Benchmark every approach at each size; return the results as a dict (what ``--json`` prints).

    Parameters
    ----------
    sizes : list of (int, int), default ((2048, 512), (8192, 1024), (65536, 1024))
        The ``(n_positions, d_model)`` of each table: ``n_positions >= 1``, ``d_model`` positive and even
        (:func:`posenc.sinusoidal` refuses an odd one).
    have_torch : bool, optional
        Whether to time the torch approach; by default, whenever torch can be imported.
    progress : bool, default True
        Whether to report each step on stderr.

    Returns
    -------
    results : dict
        ``"machine"`` (CPU, cores, versions, date, load average) and ``"sizes"``: per size, each
        approach's median time in ms, its ratios to the write bound and to ``posenc``, its largest
        absolute error against a float64 reference, and its peak memory.
    """
    if have_torch is None:
        try:
            import torch
        except ImportError:
            have_torch = False
        else:
            have_torch = True
            torch.set_num_threads(min(2, os.cpu_count() or 1))
    info = machine()
    if have_torch:
        import torch

        info["torch"] = torch.__version__
    results = {"machine": info, "sizes": []}
    for index, (n_positions, d_model) in enumerate(sizes, start=1):
        label = f"[{index}/{len(sizes)}]"
        results["sizes"].append(bench_size(n_positions, d_model, have_torch=have_torch, label=label, progress=progress))
    return results


# --- Rotary position embedding ---------------------------------------------------------------------------

ROTARY_SHAPE = (1, 16, 4096, 64)
"""(batch, heads, seq, head_dim) of the float32 tensor every rotary approach rotates."""

ROTARY_LONG_POSITIONS = 2**20
"""The error check at large positions rotates rows at the positions just below this one."""

ROTARY_DECODE_SHAPE = (1, 32, 1, 128)
"""(batch, heads, 1, head_dim) of the float32 queries and keys of one decode step."""

ROTARY_DECODE_START = 4096
"""The position of the first timed decode step; each step (each call of each approach) is one position later."""

ROTARY_TARGETS = {
    "posenc interleaved / x.clone()": ("<=", 1.3),
    # An eager halves rotation moves the tensor at least five times to a clone's two (issue 27): 2.5x at best.
    "posenc halves / x.clone()": ("<=", 3.5),
    "transformers / posenc interleaved": (">=", 5.0),
    "transformers / posenc halves": (">=", 1.5),
    # Issue 32: 1.15 held while a module kept the table of the last call by a tensor, which went stale when the
    # tensor changed behind its version counter. Every call by positions now gathers its rows from the cached table
    # and computes the float64 cos and sin of every position (those past the table are taken from it): measured 1.63
    # (interleaved) and 1.36 (halves) on one thread, 6.3 and 4.1 on two at a load average of 10 (2026-11-29).
    "posenc position_ids / offset, interleaved": ("<=", 2.0),
    "posenc position_ids / offset, halves": ("<=", 2.0),
    "transformers decode / posenc rotate_pair, halves": (">=", 3.0),
    "transformers decode / posenc rotate_pair, interleaved": (">=", 4.0),
    "posenc float32 error at positions up to 2**20": ("<=", 1e-6),
}
"""Each target of issues 6, 16 and 27 (the halves targets as issue 27 revised them, the positions ones as issue 32
did), with its bound."""


def _uniform_tensor(shape, seed: int = 0):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return 2 * torch.rand(shape, generator=generator, dtype=torch.float32) - 1


def _transformers_cos_sin(head_dim: int, positions, dtype):
    """cos and sin as transformers' Llama model computes them (float32 angles, cast to ``dtype``), unsqueezed
    for ``(batch, heads, seq, head_dim)`` as ``apply_rotary_pos_emb`` does."""
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=int(positions[-1]) + 1,
        rope_parameters={"rope_type": "default", "rope_theta": BASE},
    )
    cos, sin = LlamaRotaryEmbedding(config)(torch.empty(1, dtype=dtype), positions[None])
    return cos[:, None], sin[:, None]


def rotary_approaches(x, offset: int = 0) -> dict:
    """``{name: (call, layout)}``: each call rotates ``x`` ``(..., seq, head_dim)`` at positions ``offset + r``.

    Tables an approach would cache (its cos/sin, its frequencies, a complex table) are built here, outside the
    timed calls. Approaches whose library is not installed are left out.
    """
    import torch

    from posenc.nn import RotaryEmbedding

    seq, head_dim = x.shape[-2], x.shape[-1]
    positions = torch.arange(offset, offset + seq)
    approaches = {"x.clone() (bound)": (x.clone, None)}
    if _importable("transformers"):
        from transformers.models.llama.modeling_llama import rotate_half

        cos, sin = _transformers_cos_sin(head_dim, positions, x.dtype)
        # The body of apply_rotary_pos_emb for one of its two tensors, with transformers' own rotate_half.
        approaches["transformers apply_rotary_pos_emb, per tensor"] = (
            lambda: (x * cos) + (rotate_half(x) * sin),
            "halves",
        )
    if _importable("rotary_embedding_torch"):
        from rotary_embedding_torch import RotaryEmbedding as LucidrainsRotary

        lucidrains = LucidrainsRotary(dim=head_dim)
        approaches["rotary-embedding-torch"] = (
            lambda: lucidrains.rotate_queries_or_keys(x, offset=offset),
            "interleaved",
        )
    angles = np.multiply.outer(np.arange(offset, offset + seq, dtype=np.float64), posenc.rotary_frequencies(head_dim))
    table = torch.complex(torch.from_numpy(np.cos(angles)), torch.from_numpy(np.sin(angles))).to(torch.complex64)

    def complex_multiply():
        return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * table).flatten(-2)

    approaches["complex multiply, float64-accurate table"] = (complex_multiply, "interleaved")
    # Meta's precompute_freqs_cis: float32 frequencies and positions, torch.outer, torch.polar (complex64).
    inv_freq32 = 1.0 / (BASE ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles32 = torch.outer(torch.arange(offset, offset + seq, dtype=torch.float32), inv_freq32)
    table32 = torch.polar(torch.ones_like(angles32), angles32)

    def complex_multiply_float32_angles():
        return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * table32).flatten(-2)

    approaches["complex multiply, float32 angles (Meta's table)"] = (complex_multiply_float32_angles, "interleaved")
    # One module per approach, as each layer of a model may have its own; the approaches run in shuffled rounds.
    # A module keeps nothing per tensor of positions (issue 32): the same tensor and a new one take one path, and
    # the two rows show it.
    position_ids = positions[None]  # transformers' (1, seq) int64 position_ids
    for layout in ("interleaved", "halves"):
        by_offset, by_positions, by_new = (RotaryEmbedding(head_dim, layout=layout) for _ in range(3))
        approaches[f"posenc RotaryEmbedding, {layout}"] = (
            lambda rope=by_offset: rope(x, offset=offset),
            layout,
        )
        # The same position_ids tensor at every call, as a model hands it to every layer.
        approaches[f"posenc RotaryEmbedding, {layout}, position_ids"] = (
            lambda rope=by_positions: rope(x, positions=position_ids),
            layout,
        )
        # A new tensor at every call, as the first layer of each forward pass gets it.
        approaches[f"posenc RotaryEmbedding, {layout}, new position_ids per call"] = (
            lambda rope=by_new: rope(x, positions=position_ids.clone()),
            layout,
        )
    return approaches


def rotary_decode_approaches(q, k) -> dict:
    """``{name: (step, layout)}``: ``step(position)`` rotates ``q`` and ``k`` ``(batch, heads, 1, head_dim)`` at
    ``position``, everything a decode step computes included (transformers' cos/sin from its position ids).

    transformers: ``LlamaRotaryEmbedding`` (built once, as a model does) then ``apply_rotary_pos_emb``. posenc:
    :meth:`posenc.nn.RotaryEmbedding.rotate_pair`, which reads the step's row from its cached table.
    """
    import torch

    from posenc.nn import RotaryEmbedding

    head_dim = q.shape[-1]
    approaches = {"q.clone(), k.clone() (bound)": (lambda position: (q.clone(), k.clone()), None)}
    if _importable("transformers"):
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

        config = LlamaConfig(
            hidden_size=2 * head_dim,
            num_attention_heads=2,
            head_dim=head_dim,
            max_position_embeddings=2 * ROTARY_DECODE_START,
            rope_parameters={"rope_type": "default", "rope_theta": BASE},
        )
        theirs = LlamaRotaryEmbedding(config)

        def transformers_step(position):
            cos, sin = theirs(q, torch.tensor([[position]]))
            return apply_rotary_pos_emb(q, k, cos, sin)

        approaches["transformers cos/sin + apply_rotary_pos_emb"] = (transformers_step, "halves")
    for layout in ("halves", "interleaved"):
        rope = RotaryEmbedding(head_dim, layout=layout)
        approaches[f"posenc rotate_pair, {layout}"] = (
            lambda position, rope=rope: rope.rotate_pair(q, k, offset=position),
            layout,
        )
    return approaches


def run_rotary_decode(shape=ROTARY_DECODE_SHAPE, *, steps: int = 501) -> list[dict]:
    """Time one decode step of each approach: q and k of ``shape`` at a new position every call.

    Rounds of one step of each approach in shuffled order (fixed seed), as in :func:`run_rotary`; each approach's
    positions run from ``ROTARY_DECODE_START`` up, one per step (after one warm-up step at the position before).
    Returns one row per approach: median microseconds, ratio to the two clones, transformers' time over this one,
    and the largest error of the last step's q and k against the float64 rotation.
    """
    q, k = _uniform_tensor(shape, seed=1), _uniform_tensor(shape, seed=2)
    approaches = rotary_decode_approaches(q, k)
    for step, _ in approaches.values():
        step(ROTARY_DECODE_START - 1)
    times: dict[str, list[float]] = {name: [] for name in approaches}
    order = list(approaches)
    shuffler = random.Random(1)
    for index in range(steps):
        shuffler.shuffle(order)
        for name in order:
            step = approaches[name][0]
            began = time.perf_counter()
            step(ROTARY_DECODE_START + index)
            times[name].append(time.perf_counter() - began)
    last = np.array([ROTARY_DECODE_START + steps - 1], dtype=np.float64)
    rows = []
    for name, (step, layout) in approaches.items():
        error = None
        if layout is not None:
            rotated_q, rotated_k = step(int(last[0]))
            error = max(
                _rotation_error(rotated_q, q.double().numpy(), last, layout),
                _rotation_error(rotated_k, k.double().numpy(), last, layout),
            )
        rows.append(
            {"approach": name, "us": 1e6 * statistics.median(times[name]), "runs": steps, "max_abs_error": error}
        )
    clone_us = rows[0]["us"]
    transformers_us = next((row["us"] for row in rows if row["approach"].startswith("transformers")), None)
    for row in rows:
        row["x_clone"] = row["us"] / clone_us
        row["transformers_x_faster"] = None if transformers_us is None else transformers_us / row["us"]
    return rows


def _rotation_error(rotated, x64: np.ndarray, positions: np.ndarray, layout: str) -> float:
    expected = posenc.rotate(x64, positions, layout=layout)
    return float(np.abs(rotated.double().numpy() - expected).max())


def run_rotary(
    shape=ROTARY_SHAPE,
    *,
    repeats: int = 51,
    long_rows: int = 512,
    progress: bool = True,
    decode_shape=ROTARY_DECODE_SHAPE,
    decode_steps: int = 501,
) -> dict:
    """Benchmark the rotary approaches on one float32 tensor; return times, ratios, errors and the checks.

    Parameters
    ----------
    shape : tuple of int, default (1, 16, 4096, 64)
        ``(..., seq, head_dim)`` of the rotated tensor.
    repeats : int, default 51
        Timed calls per approach, in rounds of one call of each approach, in an order shuffled every round (from
        a fixed seed): a slow moment of a shared machine then hits every approach alike, and no approach always
        runs right after the same other one (which would inherit its freed memory, or its cache pollution). The
        median is reported.
    long_rows : int, default 512
        Rows of the error check at large positions: positions ``2**20 - long_rows`` to ``2**20 - 1``.
    progress : bool, default True
        Whether to report each step on stderr.
    decode_shape : tuple of int, default (1, 32, 1, 128)
        ``(batch, heads, 1, head_dim)`` of the queries and keys of the decode step (:func:`run_rotary_decode`).
    decode_steps : int, default 501
        Timed decode steps per approach.

    Returns
    -------
    results : dict
        ``"approaches"`` (median ms, runs, ratio to ``x.clone()`` and to transformers, max error against the
        float64 rotation), ``"decode"`` (the same for one decode step, in microseconds),
        ``"long_positions"`` (max error of each approach at positions up to 2**20),
        ``"bfloat16"`` (posenc and transformers in bfloat16 against the exact rotation of the bfloat16 input) and
        ``"targets"`` (each target of the brief with its value and whether it is met).
    """
    import torch

    shape = tuple(shape)
    log = _log if progress else (lambda message: None)
    x = _uniform_tensor(shape)
    x64 = x.double().numpy()
    positions = np.arange(shape[-2], dtype=np.float64)
    approaches = rotary_approaches(x)

    log(f"rotary {shape}: warm-up, then {repeats} rounds of {len(approaches)} approaches in shuffled order")
    times: dict[str, list[float]] = {name: [] for name in approaches}
    for call, _ in approaches.values():
        call()
    order = list(approaches)
    shuffler = random.Random(0)  # a fixed sequence of orders, so that runs are comparable
    for _ in range(repeats):
        shuffler.shuffle(order)
        for name in order:
            call = approaches[name][0]
            began = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - began)
    rows = []
    for name, (call, layout) in approaches.items():
        error = None if layout is None else _rotation_error(call(), x64, positions, layout)
        rows.append(
            {"approach": name, "ms": 1e3 * statistics.median(times[name]), "runs": repeats, "max_abs_error": error}
        )
    clone_ms = rows[0]["ms"]
    transformers_ms = next((row["ms"] for row in rows if row["approach"].startswith("transformers")), None)
    for row in rows:
        row["x_clone"] = row["ms"] / clone_ms
        row["transformers_x_faster"] = None if transformers_ms is None else transformers_ms / row["ms"]

    log(f"rotary: errors at positions {ROTARY_LONG_POSITIONS - long_rows} .. {ROTARY_LONG_POSITIONS - 1}")
    long_x = x[..., :long_rows, :].contiguous()
    long_positions = np.arange(ROTARY_LONG_POSITIONS - long_rows, ROTARY_LONG_POSITIONS, dtype=np.float64)
    long_errors = {
        name: _rotation_error(call(), long_x.double().numpy(), long_positions, layout)
        for name, (call, layout) in rotary_approaches(long_x, offset=ROTARY_LONG_POSITIONS - long_rows).items()
        if layout is not None
    }

    log("rotary: bfloat16")
    bfloat16 = {}
    x_bf = x[..., : min(shape[-2], 1024), :].to(torch.bfloat16)
    bf_positions = np.arange(x_bf.shape[-2], dtype=np.float64)
    for name, (call, layout) in rotary_approaches(x_bf).items():
        if layout is None or not (name.startswith("posenc") or name.startswith("transformers")):
            continue
        exact = posenc.rotate(x_bf.double().numpy(), bf_positions, layout=layout)
        out = call().double().numpy()
        one_rounding = 2.0**-8 * np.abs(exact) + 2e-6  # bfloat16 unit roundoff, plus float32 arithmetic
        rounded = torch.from_numpy(exact).to(torch.bfloat16).double().numpy()
        bfloat16[name] = {
            "dtype": str(call().dtype).replace("torch.", ""),
            "max_abs_error": float(np.abs(out - exact).max()),
            "max_error_in_roundings": float((np.abs(out - exact) / one_rounding).max()),
            "share_equal_to_rounded_exact": float(np.mean(out == rounded)),
        }

    log(f"rotary: decode steps of q and k of shape {tuple(decode_shape)}")
    decode = run_rotary_decode(decode_shape, steps=decode_steps)
    decode_by_name = {row["approach"]: row for row in decode}

    rows_by_name = {row["approach"]: row for row in rows}
    values = {
        "posenc interleaved / x.clone()": rows_by_name["posenc RotaryEmbedding, interleaved"]["x_clone"],
        "posenc halves / x.clone()": rows_by_name["posenc RotaryEmbedding, halves"]["x_clone"],
        "transformers decode / posenc rotate_pair, halves": decode_by_name["posenc rotate_pair, halves"][
            "transformers_x_faster"
        ],
        "transformers decode / posenc rotate_pair, interleaved": decode_by_name["posenc rotate_pair, interleaved"][
            "transformers_x_faster"
        ],
        "transformers / posenc interleaved": rows_by_name["posenc RotaryEmbedding, interleaved"][
            "transformers_x_faster"
        ],
        "transformers / posenc halves": rows_by_name["posenc RotaryEmbedding, halves"]["transformers_x_faster"],
        "posenc position_ids / offset, interleaved": rows_by_name["posenc RotaryEmbedding, interleaved, position_ids"][
            "ms"
        ]
        / rows_by_name["posenc RotaryEmbedding, interleaved"]["ms"],
        "posenc position_ids / offset, halves": rows_by_name["posenc RotaryEmbedding, halves, position_ids"]["ms"]
        / rows_by_name["posenc RotaryEmbedding, halves"]["ms"],
        "posenc float32 error at positions up to 2**20": max(
            long_errors["posenc RotaryEmbedding, interleaved"], long_errors["posenc RotaryEmbedding, halves"]
        ),
    }
    targets = []
    for name, (relation, bound) in ROTARY_TARGETS.items():
        value = values[name]
        met = None if value is None else (value <= bound if relation == "<=" else value >= bound)
        targets.append({"target": name, "relation": relation, "bound": bound, "value": value, "met": met})
    return {
        "shape": list(shape),
        "approaches": rows,
        "decode_shape": list(decode_shape),
        "decode": decode,
        "long_positions": {
            "first": ROTARY_LONG_POSITIONS - long_rows,
            "last": ROTARY_LONG_POSITIONS - 1,
            "max_abs_error": long_errors,
        },
        "bfloat16": bfloat16,
        "targets": targets,
    }


def format_rotary_report(rotary: dict) -> str:
    shape = " x ".join(str(size) for size in rotary["shape"])
    lines = [
        f"Rotating one float32 tensor of shape {shape} (batch, heads, seq, head_dim) at positions 0 .., "
        f"median of {rotary['approaches'][0]['runs']} runs in shuffled rounds",
        "",
        "| approach | ms | x x.clone() | transformers / this | max abs error vs float64 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rotary["approaches"]:
        error = "" if row["max_abs_error"] is None else _format_error(row["max_abs_error"])
        faster = "" if row["transformers_x_faster"] is None else f"{row['transformers_x_faster']:.1f}"
        lines.append(f"| {row['approach']} | {row['ms']:.2f} | {row['x_clone']:.2f} | {faster} | {error} |")
    decode_shape = " x ".join(str(size) for size in rotary["decode_shape"])
    lines += [
        "",
        f"One decode step: q and k of shape {decode_shape} at a new position each step (from "
        f"{ROTARY_DECODE_START}), median of {rotary['decode'][0]['runs']} steps in shuffled rounds",
        "",
        "| approach | us | x two clones | transformers / this | max abs error vs float64 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rotary["decode"]:
        error = "" if row["max_abs_error"] is None else _format_error(row["max_abs_error"])
        faster = "" if row["transformers_x_faster"] is None else f"{row['transformers_x_faster']:.1f}"
        lines.append(f"| {row['approach']} | {row['us']:.1f} | {row['x_clone']:.2f} | {faster} | {error} |")
    long = rotary["long_positions"]
    lines += [
        "",
        f"float32 at positions {long['first']} .. {long['last']}: max abs error vs float64 rotation",
        "",
        "| approach | max abs error |",
        "| --- | ---: |",
    ]
    lines += [f"| {name} | {_format_error(error)} |" for name, error in long["max_abs_error"].items()]
    lines += [
        "",
        "bfloat16 input: error against the exact rotation of the bfloat16 values, in units of one bfloat16 rounding "
        "(2**-8 |exact| + 2e-6)",
        "",
        "| approach | output dtype | max abs error | max error / one rounding | share equal to rounded exact |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, row in rotary["bfloat16"].items():
        lines.append(
            f"| {name} | {row['dtype']} | {_format_error(row['max_abs_error'])} | "
            f"{row['max_error_in_roundings']:.2f} | {row['share_equal_to_rounded_exact']:.3f} |"
        )
    lines += ["", "| target | value | met |", "| --- | ---: | --- |"]
    for target in rotary["targets"]:
        value = "n/a" if target["value"] is None else f"{target['value']:.3g}"
        met = "n/a" if target["met"] is None else ("yes" if target["met"] else "NO")
        lines.append(f"| {target['target']} {target['relation']} {target['bound']:g} | {value} | {met} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc_book.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=list(DEFAULT_SIZES),
        help="comma-separated NxD, default 2048x512,8192x1024,65536x1024",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    parser.add_argument(
        "--section",
        choices=("all", "sinusoidal", "rotary", "flex"),
        default="all",
        help="run the sinusoidal tables, the rotary rotations, ALiBi through FlexAttention, or all (default)",
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    results = run(args.sizes) if args.section in ("all", "sinusoidal") else {"machine": machine(), "sizes": []}
    if args.section in ("all", "flex") and _importable("torch"):
        import torch

        from posenc_book.bench_flex import run_flex

        torch.set_num_threads(min(2, os.cpu_count() or 1))
        results["flex"] = run_flex()
    if args.section in ("all", "rotary"):
        if _importable("torch"):
            import torch

            torch.set_num_threads(min(2, os.cpu_count() or 1))
            results["machine"]["torch"] = torch.__version__
            results["rotary"] = run_rotary()
        else:
            _log("skipping the rotary section: torch is not installed")
    _log(f"done in {time.perf_counter() - began:.0f} s")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        report = format_report(results)
        if "rotary" in results:
            report += "\n\n" + format_rotary_report(results["rotary"])
        if "flex" in results:
            from posenc_book.bench_flex import format_flex_report

            report += "\n\n" + format_flex_report(results["flex"])
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
