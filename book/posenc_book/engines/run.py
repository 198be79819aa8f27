"""Running the matrix: the engines the book runs live, those ``make check-engines`` runs, and its output file.

:data:`LIVE` are the engines installed by ``requirements.txt`` (transformers, mlx-lm, ONNX Runtime's operator);
chapter 17 runs them on every build. :data:`SEPARATE` are those whose install does not fit ``make test`` (ONNX Runtime
GenAI's builder, vLLM's CPU build, llama.cpp): ``make check-engines`` installs them (``requirements-engines.txt``)
into a virtual environment of their own, runs them with :func:`write_results` and writes :data:`RESULTS`, which the
chapter reads with :func:`read_results`. That function refuses a file whose cases, measurement code or engine
versions are not those of this checkout (:func:`digest`, :func:`pinned_versions`).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import inspect
import json
import math
import pathlib
import platform
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import posenc
import posenc_book.engines as core
from posenc_book.engines import Case, Cell, Engine, measure, pair_angle_errors, with_rope_keys
from posenc_book.engines.cases import CASES, as_saved

__all__ = [
    "LIVE",
    "REQUIREMENTS",
    "RESULTS",
    "SEPARATE",
    "digest",
    "live_builders",
    "live_cells",
    "pinned_versions",
    "read_results",
    "records_to_csv",
    "run_cells",
    "truncate_answer",
    "write_results",
]

ROOT = pathlib.Path(__file__).resolve().parents[3]
RESULTS = ROOT / "book" / "data" / "engines.json"
"""The output of ``make check-engines``, committed: read by chapter 17."""
REQUIREMENTS = ROOT / "requirements-engines.txt"
"""The separate engines' pins."""

Builder = Callable[[Case], Engine]


def live_builders() -> dict[str, Builder]:
    """The live engines' builders, by name."""
    from posenc_book.engines import hf, mlx, ort

    return {"transformers": hf.build, "mlx-lm": mlx.build, "ONNX RotaryEmbedding (opset 23)": ort.build_operator}


def _separate() -> dict[str, Builder]:
    from posenc_book.engines import ort, vllm

    return {"ONNX Runtime GenAI": ort.build_genai, "vLLM": vllm.build}


LIVE: tuple[str, ...] = ("transformers", "mlx-lm", "ONNX RotaryEmbedding (opset 23)")
"""The engines chapter 17 runs on every build, in the matrix's column order."""
READS_CONFIG: tuple[str, ...] = ("transformers", "mlx-lm")
"""The live engines that read the ``config.json`` themselves, and so run both spellings (ONNX's operator takes
posenc's reading, the same for both)."""
SEPARATE: tuple[str, ...] = ("ONNX Runtime GenAI", "vLLM")
"""The engines ``make check-engines`` runs, in column order."""

REFUSALS: tuple[type[BaseException], ...] = (
    TypeError,
    ValueError,
    LookupError,
    AttributeError,
    NotImplementedError,
    RuntimeError,
    ImportError,
)
"""What an engine's loader raises on a config it cannot read (transformers' ``AmbiguousGlobalPerLayerAttributeError``
is a ``RuntimeError``): the cell says ``refused`` and keeps the message. Anything else stops the run."""


def run_cells(name: str, build: Builder, cases: Sequence[Case], spelling: str) -> list[dict[str, Any]]:
    """Measure ``cases`` in one engine: one record per case (the :class:`~posenc_book.engines.Cell` and timings)."""
    records = []
    for case in cases:
        start = time.perf_counter()
        try:
            engine = build(case)
        except core.NotAsked as error:
            cell = Cell(case.name, name, "", verdict="n/a", detail=str(error))
        except REFUSALS as error:
            cell = measure(case, None, build_error=f"{type(error).__name__}: {error}")
            cell.engine = name
        else:
            cell = measure(case, engine)
        record = _record(cell)
        record.update(spelling=spelling, seconds=round(time.perf_counter() - start, 2))
        records.append(record)
    return records


def _record(cell: Cell) -> dict[str, Any]:
    def number(x: float) -> float | None:
        return None if math.isnan(x) else float(f"{x:.4g}")

    return {
        "case": cell.case,
        "engine": cell.engine,
        "version": cell.version,
        "verdict": cell.verdict,
        "angle_error": number(cell.angle_error),
        "worst_ratio": number(cell.worst_ratio),
        "length_error": number(cell.length_error),
        "passthrough_error": number(cell.passthrough_error),
        "compared_pairs": cell.compared_pairs,
        "skipped_pairs": cell.skipped_pairs,
        "detail": cell.detail,
    }


def live_cells() -> list[dict[str, Any]]:
    """Every case, in both spellings, in every live engine (the chapter's own run)."""
    builders = live_builders()
    records = []
    for name in LIVE:
        records += run_cells(name, builders[name], CASES, "published")
    saved = tuple(as_saved(case) for case in CASES)
    for name in READS_CONFIG:
        records += run_cells(name, builders[name], saved, "saved")
    return records


def truncate_answer(build: Builder, case: Case | None = None) -> dict[str, Any]:
    """GPT-OSS's ``truncate: false``, asked of one engine at run time.

    The engine is built from GPT-OSS's config as published (``truncate: false``) and asked for its full-attention
    layer's rotation at position ``M - 1 = 131071``; each pair's angle is compared with posenc's rotation under
    ``truncate: false`` (YaRN's ramp ends left as computed) and under ``truncate: true`` (rounded). Returns which
    reading the engine follows (``"keeps"``: within tolerance of the first; ``"rounds"``: of the second), the pairs
    whose angle is off the ``truncate: false`` rotation beyond tolerance, and their largest error in radians.
    """
    case = case or next(c for c in CASES if c.model_id == "openai/gpt-oss-20b")
    engine = build(case)
    position = (case.plan().max_position_embeddings or 1) - 1
    kept, tolerance = pair_angle_errors(case, engine, position, layer_type="full_attention")
    rounded_case = with_rope_keys(case, case.name + ", truncate: true", truncate=True)
    rounded, _ = pair_angle_errors(rounded_case, engine, position, layer_type="full_attention")
    off = [int(i) for i in (kept > tolerance).nonzero()[0]]
    reading = "keeps" if not off else ("rounds" if bool((rounded <= tolerance).all()) else "neither")
    return {
        "engine": engine.name,
        "version": engine.version,
        "position": position,
        "reading": reading,
        "pairs_off": off,
        "largest_error": float(f"{float(kept.max()):.4g}"),
        "largest_error_against_rounded": float(f"{float(rounded.max()):.4g}"),
    }


CSV_FIELDS = (
    "spelling",
    "case",
    "engine",
    "version",
    "verdict",
    "angle_error",
    "worst_ratio",
    "length_error",
    "passthrough_error",
    "compared_pairs",
    "skipped_pairs",
    "detail",
)
"""The columns of :func:`records_to_csv`."""


def records_to_csv(records: Sequence[dict[str, Any]]) -> str:
    """Records of :func:`run_cells` as CSV text: a header of :data:`CSV_FIELDS`, then one line per record."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for record in records:
        writer.writerow(["" if record[key] is None else record[key] for key in CSV_FIELDS])
    return out.getvalue()


def digest() -> str:
    """A hash of what a result depends on here: every case's config (both spellings), posenc's reading of it (the
    plan's ``repr``) and the measuring code."""
    parts = [json.dumps([case.name, dict(case.config)], sort_keys=True) for case in CASES]
    parts += [repr(case.plan()) for case in CASES]
    parts += [json.dumps([case.name, dict(as_saved(case).config)], sort_keys=True) for case in CASES]
    for function in (core.measure, core.angle_tolerance, core.positions_of, core.probe, core.pair_frequencies):
        parts.append(inspect.getsource(function))
    parts.append(posenc.__version__ if hasattr(posenc, "__version__") else "")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def pinned_versions() -> dict[str, str]:
    """``{distribution: version}`` of the ``==`` pins in ``requirements-engines.txt``."""
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def write_results(path: pathlib.Path = RESULTS, *, engines: Sequence[str] = SEPARATE) -> dict[str, Any]:
    """Run the separate engines on every case and GPT-OSS's ``truncate``; write ``path`` (JSON).

    Both separate engines read a ``config.json`` through transformers' ``AutoConfig`` (vLLM then patches the rope
    dict), so the two spellings reach them as the same configuration; they are run on the published files only.

    With ``engines`` a subset, the other engines' records are kept from the file at ``path`` when it is current
    (its digest is this checkout's); otherwise they are dropped.
    """
    builders = _separate()
    cells: list[dict[str, Any]] = []
    truncate = []
    if path.exists():
        previous = json.loads(path.read_text())
        if previous.get("digest") == digest():
            cells = [record for record in previous["cells"] if record["engine"] not in _names(engines)]
            truncate = [record for record in previous["truncate"] if record["engine"] not in _names(engines)]
    for name in engines:  # both read the file with transformers' AutoConfig: the published spelling only
        cells += run_cells(name, builders[name], CASES, "published")
        truncate.append(truncate_answer(builders[name]))
    versions = {name: importlib.metadata.version(name) for name in pinned_versions()}
    result = {
        "written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "digest": digest(),
        "versions": versions,
        "cells": cells,
        "truncate": truncate,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return result


def _names(engines: Sequence[str]) -> set[str]:
    """The engine names records carry for the builders named ``engines``."""
    return set(engines)


def read_results(path: pathlib.Path = RESULTS) -> dict[str, Any]:
    """The committed output of ``make check-engines``, refused (``ValueError``) when stale or mismatched.

    Stale: the cases, posenc's reading of them or the measuring code changed since it was written (its
    ``digest``). Mismatched: its engine
    versions are not the pins of ``requirements-engines.txt``.
    """
    result: dict[str, Any] = json.loads(path.read_text())
    if result.get("digest") != digest():
        raise ValueError(
            f"{path.name} is stale: the cases, posenc's reading of them or the measuring code changed since it was "
            f"written ({result.get('written')}); run make check-engines"
        )
    pins = pinned_versions()
    if result.get("versions") != pins:
        raise ValueError(f"{path.name} was written with {result.get('versions')}, not the pins {pins}")
    return result


def main() -> None:
    """``python -m posenc_book.engines.run`` (``make check-engines``): run the separate engines; write the file."""
    import sys

    start = time.perf_counter()
    result = write_results(engines=tuple(sys.argv[1:]) or SEPARATE)
    for record in result["cells"]:
        if record["spelling"] == "published":
            print(f"{record['engine']:20s} {record['case']:20s} {record['verdict']:8s} {record['angle_error']}")
    for answer in result["truncate"]:
        pairs, error = answer["pairs_off"], answer["largest_error"]
        print(f"truncate: {answer['engine']} {answer['reading']} pairs {pairs} {error} rad")
    print(f"wrote {RESULTS} in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
