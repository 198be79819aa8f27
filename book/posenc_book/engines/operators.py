"""Standard rotary operators under posenc's conformance suite (chapter 17, ``make check-operators``).

A user of :mod:`posenc.testing` checks a rotary operator by writing ``rotate(x, positions)`` around it, built from a
:class:`posenc.testing.RotaryCase`, and calling ``case.check(rotate, ...)`` on every case of
:func:`posenc.testing.rotary_cases`. This module holds those few lines for four operators, :data:`OPERATORS`:

- ONNX's standard ``RotaryEmbedding`` (opset 23) and ONNX Runtime's own ``com.microsoft.RotaryEmbedding``, on ONNX
  Runtime's CPU provider (:func:`onnx_rotary`). Neither reads a config: each takes a cos and a sin table,
  ``(rows, rotary_dim // 2)``, the ``position_ids`` that pick a row per token, and the attributes ``interleaved`` (the
  pair layout) and ``rotary_embedding_dim`` (the rotated width, the first features). The table given here is what an
  exporter computes: posenc's float64 angles of the case, the attention factor folded in (as ONNX Runtime GenAI's
  builder folds YaRN's), rounded once to the operator's dtype. Its rows are the positions themselves, so
  ``position_ids`` are the case's positions; the rows no call uses are zero, which costs no memory until written,
  and a gather from the wrong row shows. What the suite can find in such an operator is what the operator itself
  does: the pairing, the rotated width, the gather, and its arithmetic in each dtype. It cannot find a wrong angle.
- MLX's ``mx.fast.rope`` on MLX's CPU backend (:func:`mlx_rope`), which computes its angles itself: from ``base`` and
  ``scale`` for the default and linear rotations (the call ``mlx.nn.RoPE`` makes), and from the periods ``freqs`` a
  caller passes for the other scalings (the call mlx-lm's ``Llama3RoPE``, ``YarnRoPE`` and ``SuScaledRoPE`` make);
  the attention factor multiplies the rotated features first, as mlx-lm's ``YarnRoPE`` does.
- keras-hub's ``RotaryEmbedding`` layer on Keras's JAX backend (:func:`keras_rope`), which also computes its angles,
  from ``max_wavelength``, ``scaling_factor``, and for YaRN ``beta_fast``, ``beta_slow``,
  ``original_max_position_embeddings`` and ``truncate``. It pairs halves, rotates every feature it is given (the
  caller passes the rotated width only) and has no other scalings: a case it cannot express is "n/a".

:func:`run_suite` runs every case in float32 and float16 and in both layouts, and :func:`write_results` writes
:data:`RESULTS` with the versions, the date and a digest of what the results depend on; chapter 17 reads it with
:func:`read_results`, which refuses a stale or mismatched file.
"""

from __future__ import annotations

import datetime
import functools
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
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc.testing import RotaryCase, rotary_cases

__all__ = [
    "DTYPES",
    "LAYOUTS",
    "OPERATORS",
    "RESULTS",
    "Check",
    "NotExpressible",
    "keras_rope",
    "mlx_rope",
    "onnx_rotary",
    "read_results",
    "run_suite",
    "write_results",
]

ROOT = pathlib.Path(__file__).resolve().parents[3]
RESULTS = ROOT / "book" / "data" / "operators.json"
"""The output of ``make check-operators``, committed: read by chapter 17."""
REQUIREMENTS = (ROOT / "requirements.txt", ROOT / "requirements-extra-engines.txt")
"""Where the operators' packages are pinned."""

DTYPES = ("float32", "float16")
LAYOUTS = ("halves", "interleaved")
OPSET23, CONTRIB, MLX, KERAS = (
    "ONNX RotaryEmbedding (opset 23)",
    "com.microsoft.RotaryEmbedding",
    "MLX fast.rope",
    "keras-hub RotaryEmbedding (JAX)",
)
PACKAGES = {
    OPSET23: ("onnxruntime", "onnx"),
    CONTRIB: ("onnxruntime", "onnx"),
    MLX: ("mlx",),
    KERAS: ("keras-hub", "keras", "jax"),
}
"""The distributions each operator's result depends on."""

_ELEMENT = {"float32": 1, "float16": 10, "bfloat16": 16}  # onnx.TensorProto's element types


class NotExpressible(Exception):
    """The operator has no parameter for what the case needs (the message says what): the check is "n/a"."""


@dataclass(frozen=True)
class Check:
    """One case of the suite, in one dtype and layout, for one operator: its verdict and the suite's message."""

    operator: str
    case: str
    layout: str
    dtype: str
    beyond: bool
    verdict: str
    message: str = ""


# --- The operators, wrapped as a user of the suite wraps them -------------------------------------------------


@functools.cache
def _onnx_session(operator: str, *, dtype: str, interleaved: bool, rotary_dim: int, head_dim: int, heads: int) -> Any:
    """An ONNX Runtime CPU session of a one-node model: the operator with these attributes (one per set)."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    element = _ELEMENT[dtype]
    table = [helper.make_tensor_value_info(name, element, ["rows", rotary_dim // 2]) for name in ("cos", "sin")]
    ids = helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"])
    if operator == CONTRIB:
        shape: list[Any] = ["batch", "seq", heads * head_dim]
        inputs = ["x", "position_ids", "cos", "sin"]
        extra = {"domain": "com.microsoft", "num_heads": heads}
        imports = [helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)]
    else:
        shape = ["batch", heads, "seq", head_dim]
        inputs, extra = ["x", "cos", "sin", "position_ids"], {}
        imports = [helper.make_opsetid("", 23)]
    node = helper.make_node(
        "RotaryEmbedding", inputs, ["y"], interleaved=int(interleaved), rotary_embedding_dim=rotary_dim, **extra
    )
    x = helper.make_tensor_value_info("x", element, shape)
    y = helper.make_tensor_value_info("y", element, shape)
    model = helper.make_model(helper.make_graph([node], "rotary", [x, *table, ids], [y]), opset_imports=imports)
    model.ir_version = 10
    onnx.checker.check_model(model)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def onnx_rotary(
    case: RotaryCase, *, operator: str = OPSET23, layout: str | None = None, heads: int = 3
) -> Callable[[NDArray[Any], NDArray[np.int64]], NDArray[Any]]:
    """``rotate(x, positions)`` by ONNX Runtime's CPU kernel of ``operator``, with the table of ``case``'s angles.

    Parameters
    ----------
    case : RotaryCase
    operator : str, default :data:`OPSET23`
        ONNX's ``RotaryEmbedding`` (check with ``qkv_format="bhsd"``: its ``x`` is ``(batch, heads, seq, head_dim)``)
        or :data:`CONTRIB` (``qkv_format="bshd"``, reshaped to its ``(batch, seq, heads * head_dim)``).
    layout : {"halves", "interleaved"} or None, default None
        The ``interleaved`` attribute; None: the case's layout.
    heads : int, default 3
        The number of heads the check passes.

    Returns
    -------
    rotate : callable
        ``rotate(x, positions)``: ``x`` a NumPy array in the case's dtype, ``positions`` ``(seq,)`` int64.
    """
    if operator not in (OPSET23, CONTRIB):
        raise ValueError(f"operator must be {OPSET23!r} or {CONTRIB!r}, got {operator!r}")
    session = _onnx_session(
        operator,
        dtype=case.dtype,
        interleaved=(layout or case.layout) == "interleaved",
        rotary_dim=case.rotary_dim,
        head_dim=case.head_dim,
        heads=heads,
    )

    def rotate(x: NDArray[Any], positions: NDArray[np.int64]) -> NDArray[Any]:
        angles = np.outer(positions, case.rotary.inverse_frequencies(seq_len=float(positions.max()) + 1.0))
        cos = np.zeros((int(positions.max()) + 1, case.rotary_dim // 2), x.dtype)  # row p: position p
        sin = np.zeros(cos.shape, x.dtype)
        cos[positions] = case.attention_factor * np.cos(angles)
        sin[positions] = case.attention_factor * np.sin(angles)
        ids = np.broadcast_to(positions, (x.shape[0], len(positions))).copy()
        fed = x.reshape(x.shape[0], x.shape[1], -1) if operator == CONTRIB else x
        (out,) = session.run(None, {"x": fed, "cos": cos, "sin": sin, "position_ids": ids})
        return np.asarray(out).reshape(x.shape)

    return rotate


def _periods(case: RotaryCase, seq_len: float) -> NDArray[np.float32]:
    """Each pair's period (``1 / inv_freq``) in float32, infinite for a pair that does not turn."""
    inverse = case.rotary.inverse_frequencies(seq_len=seq_len)
    periods = np.full(inverse.shape, np.inf)
    periods[inverse > 0] = 1.0 / inverse[inverse > 0]
    return periods.astype(np.float32)


def mlx_rope(case: RotaryCase, *, layout: str | None = None) -> Callable[[NDArray[Any], NDArray[np.int64]], Any]:
    """``rotate(x, positions)`` by ``mx.fast.rope`` on MLX's CPU backend, one call per position (``offset``).

    Default and linear rotations pass ``base`` and ``scale``; the others pass ``freqs``, the pairs' periods, which
    the caller computes (here from posenc's float64 frequencies). ``traditional`` is the interleaved layout.
    """
    import mlx.core as mx

    traditional = (layout or case.layout) == "interleaved"
    kind = case.scaling.rope_type
    dtype = getattr(mx, case.dtype)

    def rotate(x: NDArray[Any], positions: NDArray[np.int64]) -> NDArray[np.float32]:
        a = mx.array(np.asarray(x, np.float32)).astype(dtype)
        if case.attention_factor != 1.0:
            a = mx.concatenate([a[..., : case.rotary_dim] * case.attention_factor, a[..., case.rotary_dim :]], -1)
        if kind in ("default", "linear"):
            scale = 1.0 / case.scaling.factor if kind == "linear" else 1.0
            options: dict[str, Any] = {"base": case.base, "scale": scale}
        else:
            options = {"base": None, "scale": 1.0, "freqs": mx.array(_periods(case, float(positions.max()) + 1.0))}
        rows = [
            mx.fast.rope(a[..., i : i + 1, :], case.rotary_dim, traditional=traditional, offset=int(p), **options)
            for i, p in enumerate(positions)
        ]
        return np.array(mx.concatenate(rows, axis=-2).astype(mx.float32))

    return rotate


def keras_rope(case: RotaryCase, *, layout: str | None = None) -> Callable[[NDArray[Any], NDArray[np.int64]], Any]:
    """``rotate(x, positions)`` by keras-hub's ``RotaryEmbedding`` layer (Keras's JAX backend), on the rotated width.

    The layer's call is compiled with ``jax.jit``, as a JAX program runs it (eagerly, JAX compiles each of its
    operations apart, about ten seconds a case on the book's machine).

    Raises
    ------
    NotExpressible
        For the interleaved layout (the layer pairs halves), and for a rotation other than the default, linear
        and YaRN ones, or YaRN with an attention factor other than its default (the layer has no parameter for
        them).
    """
    import jax
    import keras
    from keras_hub.layers import RotaryEmbedding

    if (layout or case.layout) != "halves":
        raise NotExpressible("the layer pairs halves only")
    scaling = case.scaling
    kind = scaling.rope_type
    options: dict[str, Any] = {"max_wavelength": case.base, "dtype": case.dtype, "sequence_axis": 2}
    if kind == "linear":
        options.update(scaling_factor=scaling.factor)
    elif kind == "yarn":
        if not math.isclose(case.attention_factor, 0.1 * math.log(scaling.factor) + 1.0, rel_tol=1e-12):
            raise NotExpressible(
                f"YaRN's attention factor {case.attention_factor:.6g} is not the layer's 0.1 ln(factor) + 1"
            )
        options.update(
            rope_type="yarn",
            scaling_factor=scaling.factor,
            beta_fast=scaling.beta_fast,
            beta_slow=scaling.beta_slow,
            original_max_position_embeddings=scaling.original_max_position_embeddings,
            truncate=scaling.truncate,
        )
    elif kind != "default":
        raise NotExpressible(f"the layer has no {kind!r} rotation")
    layer = RotaryEmbedding(**options)
    call = jax.jit(lambda part, positions: layer(part, positions=positions))  # one compilation, not one per op

    def rotate(x: NDArray[Any], positions: NDArray[np.int64]) -> NDArray[Any]:
        part = keras.ops.convert_to_tensor(np.ascontiguousarray(x[..., : case.rotary_dim]), dtype=case.dtype)
        out = np.asarray(call(part, positions.astype(np.int32)))
        return np.concatenate([out.astype(x.dtype), x[..., case.rotary_dim :]], axis=-1)

    return rotate


def build(operator: str, case: RotaryCase, layout: str) -> tuple[Callable[..., Any], str]:
    """The wrapped operator for ``case`` in ``layout``, and the ``qkv_format`` to check it with."""
    if operator in (OPSET23, CONTRIB):
        return onnx_rotary(case, operator=operator, layout=layout), "bshd" if operator == CONTRIB else "bhsd"
    if operator == MLX:
        return mlx_rope(case, layout=layout), "bhsd"
    if operator == KERAS:
        return keras_rope(case, layout=layout), "bhsd"
    raise ValueError(f"operator must be one of {OPERATORS}, got {operator!r}")


OPERATORS: tuple[str, ...] = (OPSET23, CONTRIB, MLX, KERAS)
"""The operators, in the chapter's order."""


# --- The suite, run -----------------------------------------------------------------------------------------------


def check_one(operator: str, case: RotaryCase, layout: str) -> Check:
    """``case.check`` of ``operator`` in ``layout``: pass, fail (the suite's message), or n/a (why)."""
    verdict, message = "pass", ""
    try:
        rotate, qkv_format = build(operator, case, layout)
        case.check(rotate, layout=layout, qkv_format=qkv_format, array="numpy")  # type: ignore[arg-type]
    except NotExpressible as reason:
        verdict, message = "n/a", str(reason)
    except AssertionError as failure:
        verdict, message = "fail", str(failure)
    return Check(operator, case.id, layout, case.dtype, case.beyond, verdict, message)


def unsupported_dtype(operator: str, dtype: str = "bfloat16") -> str | None:
    """Why ONNX Runtime's CPU provider cannot run ``operator`` in ``dtype`` (its error), or None when it can."""
    import onnxruntime

    try:
        _onnx_session(operator, dtype=dtype, interleaved=False, rotary_dim=8, head_dim=8, heads=1)
    except onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented as error:
        return str(error)
    return None


def run_suite(
    operators: Sequence[str] = OPERATORS,
    *,
    dtypes: Sequence[str] = DTYPES,
    layouts: Sequence[str] = LAYOUTS,
    cases: Sequence[RotaryCase] | None = None,
) -> list[Check]:
    """Every case of :func:`posenc.testing.rotary_cases` (within and beyond) in each dtype and layout, per operator."""
    chosen = list(cases) if cases is not None else rotary_cases(dtypes=tuple(dtypes))  # type: ignore[arg-type]
    return [check_one(operator, case, layout) for operator in operators for case in chosen for layout in layouts]


# --- The committed results ----------------------------------------------------------------------------------------


def _pins() -> dict[str, str]:
    pins = {}
    for path in REQUIREMENTS:
        for line in path.read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.\[\]-]+)==([^\s;#]+)", line.strip())
            if match:
                pins[re.sub(r"\[.*\]", "", match.group(1)).lower()] = match.group(2)
    return pins


def pinned_versions() -> dict[str, str]:
    """The pinned version of every distribution an operator's result depends on."""
    pins = _pins()
    return {name: pins[name] for name in sorted({p for names in PACKAGES.values() for p in names})}


def digest() -> str:
    """A hash of what the results depend on here: every case (its id, posenc's reading, its positions), posenc's
    checking code and the wrappers of this module."""
    import posenc.testing._conformance as conformance

    parts = [f"{case.id} {case.rotary!r} {case.positions}" for case in rotary_cases(dtypes=DTYPES)]
    parts.append(inspect.getsource(conformance))
    for function in (onnx_rotary, mlx_rope, keras_rope, _periods, build, check_one):
        parts.append(inspect.getsource(function))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def summarise(checks: Sequence[Check]) -> dict[str, Any]:
    """Counts per operator, dtype and layout; every failure in full; the reasons of the "n/a" checks, counted."""
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for check in checks:
        key = f"{check.operator}|{check.dtype}|{check.layout}|{check.verdict}"
        counts[key] = counts.get(key, 0) + 1
        if check.verdict == "n/a":
            reason = f"{check.operator}|{check.message}"
            reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "counts": counts,
        "failures": [asdict(check) for check in checks if check.verdict == "fail"],
        "not_applicable": reasons,
    }


def write_results(path: pathlib.Path = RESULTS) -> dict[str, Any]:
    """Run the suite on every operator; write ``path`` (JSON) with the counts, the failures, the versions."""
    start = time.perf_counter()
    checks = run_suite()
    result = {
        "written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "digest": digest(),
        "versions": {name: importlib.metadata.version(name) for name in pinned_versions()},
        "posenc": posenc.__version__,
        "cases": len({check.case for check in checks}),
        "bfloat16": {name: unsupported_dtype(name) for name in (OPSET23, CONTRIB)},
        **summarise(checks),
        "seconds": round(time.perf_counter() - start),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return result


def read_results(path: pathlib.Path = RESULTS) -> dict[str, Any]:
    """The committed output of ``make check-operators``, refused (``ValueError``) when stale or mismatched.

    Stale: the catalogue, posenc's reading of it, the suite's code or the wrappers changed since it was written
    (its ``digest``). Mismatched: its versions are not the pins of ``requirements.txt`` and
    ``requirements-extra-engines.txt``.
    """
    result: dict[str, Any] = json.loads(path.read_text())
    if result.get("digest") != digest():
        raise ValueError(
            f"{path.name} is stale: the cases, posenc's reading of them, the suite or the wrappers changed since it "
            f"was written ({result.get('written')}); run make check-operators"
        )
    pins = pinned_versions()
    if result.get("versions") != pins:
        raise ValueError(f"{path.name} was written with {result.get('versions')}, not the pins {pins}")
    return result


def main() -> None:
    """``python -m posenc_book.engines.operators`` (``make check-operators``): run the suite; write the file."""
    result = write_results()
    for key, count in sorted(result["counts"].items()):
        print(f"{key:80s} {count}")
    for failure in result["failures"]:
        print(f"FAIL {failure['operator']} {failure['case']} {failure['layout']}: {failure['message'][:300]}")
    print(f"bfloat16: {result['bfloat16']}")
    print(f"wrote {RESULTS} in {result['seconds']} s")


if __name__ == "__main__":
    main()
