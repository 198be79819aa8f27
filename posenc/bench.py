"""Time ``posenc.sinusoidal`` against the ways people build the table, and against what memory allows.

Run ``python -m posenc.bench`` (add ``--json`` for machine-readable output, ``--sizes 2048x512`` for other
sizes). For each table size, every approach is called once to warm up and then timed with
``time.perf_counter`` several times; the median is reported, with its ratio to the write bound and to
``posenc``, the largest absolute error against a float64 reference of the same formula and layout, and
the peak memory of one call. Progress goes to stderr.

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

and three physical bounds: filling a preallocated float32 buffer of the table's size (the write bound, the
base of every ratio), allocating and filling a new buffer of that size (what any function that returns a
new table pays at least, page faults included), and one float32 ``np.sin`` over as many elements into a
preallocated buffer.

Peak memory is what ``tracemalloc`` sees for NumPy code. Torch's allocator is invisible to
``tracemalloc``; for torch the growth of the resident set's high-water mark is read from
``/proc/self/status`` after resetting it (Linux), a lower bound since reused pages are not counted, and
reported as "not traced" where that is unavailable. Approaches slower than a second per call are timed
three times at most.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import posenc
from posenc._validation import check_count, check_d_model, check_table_size

# A command-line tool, not part of the package's API: ``run`` is public for the book's chapter, but kept out
# of ``__all__`` so that the API fuzz (tests/test_fuzz_bad_input.py) does not start benchmarks.
__all__: list[str] = []

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


@dataclass
class Approach:
    name: str
    build: Callable[[int, int], object]
    layout: str  # of the float64 reference the error is measured against
    frequencies: str  # "paper" or "t2t"
    uses_torch: bool = False


APPROACHES = [
    Approach("posenc.sinusoidal", lambda n, d: posenc.sinusoidal(n, d), "interleaved", "paper"),
    Approach("posenc, one thread", posenc_one_thread, "interleaved", "paper"),
    Approach("note 001 numpy, float64", note_001_numpy, "cos_first", "paper"),
    Approach("note 004 torch, float32 angles", note_004_torch, "interleaved", "paper", uses_torch=True),
    Approach("t2t/fairseq [sin|cos], float32 angles", t2t_halves_float32, "halves", "t2t"),
    Approach("float64 angles -> float32", float64_angles_to_float32, "interleaved", "paper"),
]


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
    sizes = []
    for item in text.split(","):
        try:
            n_positions, d_model = (int(part) for part in item.lower().split("x"))
            sizes.append(check_sizes([(n_positions, d_model)])[0])
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(
                f"sizes must look like 2048x512,8192x1024 (d_model even); got {item!r}"
            ) from error
    return sizes


def check_sizes(sizes) -> list[tuple[int, int]]:
    """Return ``sizes`` as a list of ``(n_positions, d_model)`` int pairs: n_positions >= 1, d_model even."""
    accepted = "a list of (n_positions, d_model) pairs of ints"
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError(f"sizes must be {accepted}, got {type(sizes).__name__} {sizes!r}")
    checked = []
    for size in sizes:
        if isinstance(size, (str, bytes)) or not hasattr(size, "__len__") or len(size) != 2:
            raise TypeError(f"sizes must be {accepted}, got an item {size!r}")
        n_positions = check_count(size[0], "sizes: n_positions", minimum=1)
        d_model = check_d_model(size[1])
        check_table_size(n_positions, d_model, "sizes: n_positions")
        checked.append((n_positions, d_model))
    if not checked:
        raise ValueError(f"sizes must be {accepted}, got an empty list")
    return checked


def run(sizes=DEFAULT_SIZES, *, have_torch: bool | None = None, progress: bool = True) -> dict:
    """Benchmark every approach at each size; return the results as a dict (what ``--json`` prints).

    Parameters
    ----------
    sizes : list of (int, int), default ((2048, 512), (8192, 1024), (65536, 1024))
        The ``(n_positions, d_model)`` of each table: ``n_positions >= 1``, ``d_model`` positive and even.
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
    sizes = check_sizes(sizes)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=list(DEFAULT_SIZES),
        help="comma-separated NxD, default 2048x512,8192x1024,65536x1024",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    results = run(args.sizes)
    _log(f"done in {time.perf_counter() - began:.0f} s")
    print(json.dumps(results, indent=2) if args.json else format_report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
