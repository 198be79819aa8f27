"""Run posenc.testing's checks against every implementation, and measure each error independently.

Each property pairs a check of :mod:`posenc.testing` (which decides pass or fail, with its own tolerance)
with a measurement made here from the implementation's output and posenc's float64 reference (so that a
pass shows its error too). Nothing is parsed from the checks' messages. Only the check's
``AssertionError`` is caught: any other exception is a fault of the audit, and propagates.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
import posenc.testing as pt
from posenc_book.audit import (
    apple_mlx,
    equinox_jax,
    hf_diffusers,
    hf_transformers,
    lucidrains_rotary,
    meta_llama,
    mlx_lm_rope,
    xtransformers,
)
from posenc_book.audit.common import BFLOAT16_CAST, HEAD_DIM, Implementation
from posenc_book.tables import Table

__all__ = ["PROPERTIES", "PYTORCH_LIBRARIES", "Audit", "Cell", "Property", "all_implementations", "run_audit"]

ANGLE_POSITIONS = 8192
"""Positions 0..8191, where the angle checks' tolerance is 2**-20 * 8191 = 0.0078 rad.

The checks' default is 16384; half of it halves the work, and the chapter must run in under 10 s."""
ANGLE_TOLERANCE = 2.0**-20 * (ANGLE_POSITIONS - 1)
"""The angle checks' default tolerance at :data:`ANGLE_POSITIONS`: 2**-20 rad per radian of the largest angle."""
SHIFTS = (0, 1024, 8192)
DISTANCES = (0, 1, 7, 100)
SLICE_OFFSET, SLICE_LENGTH = 5, 16
SHORT, LONG = 16, 4096
MAX_HEADS = 64
T5_CONFIG = {"bidirectional": True, "num_buckets": 32, "max_distance": 128}


PYTORCH_LIBRARIES = ("transformers", "rotary-embedding-torch", "x-transformers", "llama-models", "diffusers")
"""The audited libraries built on PyTorch (chapter 13); the others, MLX, mlx-lm and Equinox, are chapter 14's."""


def all_implementations(libraries: Sequence[str] | None = None) -> list[Implementation]:
    """The implementations of the audit, library by library.

    Parameters
    ----------
    libraries : sequence of str, optional
        Only these libraries' implementations (names as :attr:`Implementation.library`, e.g.
        :data:`PYTORCH_LIBRARIES`), in the audit's order. Default: every library.

    Returns
    -------
    list of Implementation

    Raises
    ------
    TypeError
        If ``libraries`` is a string (a sequence of names is wanted).
    ValueError
        If ``libraries`` names a library the audit does not have.
    """
    modules = (
        hf_transformers,
        lucidrains_rotary,
        xtransformers,
        meta_llama,
        hf_diffusers,
        apple_mlx,
        mlx_lm_rope,
        equinox_jax,
    )
    every = [implementation for module in modules for implementation in module.implementations()]
    if libraries is None:
        return every
    if isinstance(libraries, str):
        raise TypeError(f"libraries must be a sequence of library names, not the string {libraries!r}")
    known = list(dict.fromkeys(implementation.library for implementation in every))
    unknown = sorted(set(libraries) - set(known))
    if unknown:
        raise ValueError(f"libraries: unknown {unknown}; the audit has {known}")
    return [implementation for implementation in every if implementation.library in libraries]


# --- Measurements: the implementation's error against posenc's float64 reference ---------------------------


def _first_of_pairs(array: NDArray[np.float64], layout: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    half = array.shape[-1] // 2
    if layout == "interleaved":
        return array[..., 0::2], array[..., 1::2]
    return array[..., :half], array[..., half:]


def _finite_max(error: NDArray[np.float64]) -> float:
    return float(np.where(np.isfinite(error), error, np.inf).max())


class _Remember:
    """A rotary function that remembers its calls and answers an identical call from memory.

    The angle properties measure the very outputs the check judged (its calls of up to ANGLE_POSITIONS rows),
    instead of rotating the same inputs a second time.
    """

    def __init__(self, rotate: Callable[..., Any]):
        self.rotate = rotate
        self.calls: dict[tuple[bytes, bytes, str], NDArray[np.float64]] = {}

    def __call__(self, x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
        key = (np.ascontiguousarray(x).tobytes(), np.asarray(positions, dtype=np.int64).tobytes(), dtype)
        if key not in self.calls:
            self.calls[key] = np.asarray(self.rotate(x, positions, dtype), dtype=np.float64).copy()
        return self.calls[key].copy()


@functools.cache
def _reference_angles(layout: str) -> NDArray[np.float64]:
    """posenc's float64 angles at positions 0..ANGLE_POSITIONS - 1, mod 2 pi, (positions, pairs)."""
    x = np.zeros((ANGLE_POSITIONS, HEAD_DIM))
    _first_of_pairs(x, layout)[0][...] = 1.0
    cos, sin = _first_of_pairs(posenc.rotate(x, np.arange(ANGLE_POSITIONS, dtype=np.float64), layout=layout), layout)
    angles: NDArray[np.float64] = np.arctan2(sin, cos)
    return angles


def _angle_error(rotate: Callable[..., Any], layout: str, dtype: str) -> float:
    """Largest error (radians, mod 2 pi) of the angles at positions 0..ANGLE_POSITIONS - 1."""
    x = np.zeros((ANGLE_POSITIONS, HEAD_DIM))
    _first_of_pairs(x, layout)[0][...] = 1.0  # (1, 0) in every pair: the result is (cos, sin)
    positions = np.arange(ANGLE_POSITIONS)
    got_cos, got_sin = _first_of_pairs(rotate(x, positions, dtype), layout)
    difference = np.arctan2(got_sin, got_cos) - _reference_angles(layout)
    return _finite_max(np.abs((difference + np.pi) % (2 * np.pi) - np.pi))


SCALED_SHORT = 1024
"""The scaled rows' short call: positions 0..1023, within every audited scaling's trained length."""


def _scaled_angle_error(rotate: Callable[..., Any], implementation: Implementation) -> float:
    """Largest angle error (rad, mod 2 pi) of the calls of SCALED_SHORT and ANGLE_POSITIONS rows, scaled."""
    assert implementation.layout is not None and implementation.scaling is not None
    worst = 0.0
    for n_positions in (SCALED_SHORT, ANGLE_POSITIONS):
        x = np.zeros((n_positions, HEAD_DIM))
        _first_of_pairs(x, implementation.layout)[0][...] = 1.0
        positions = np.arange(n_positions)
        got_cos, got_sin = _first_of_pairs(rotate(x, positions, "float32"), implementation.layout)
        want = posenc.rotate(
            x,
            positions.astype(np.float64),
            base=implementation.base,
            layout=implementation.layout,
            scaling=implementation.scaling,
        )
        want_cos, want_sin = _first_of_pairs(want, implementation.layout)
        difference = np.arctan2(got_sin, got_cos) - np.arctan2(want_sin, want_cos)
        worst = max(worst, _finite_max(np.abs((difference + np.pi) % (2 * np.pi) - np.pi)))
    return worst


def _check_scaled(rotate: Callable[..., Any], implementation: Implementation) -> None:
    """The angle check with the row's scaling, on a call within the trained length and one of 8192 rows."""
    assert implementation.layout is not None and implementation.scaling is not None
    for n_positions in (SCALED_SHORT, ANGLE_POSITIONS):
        pt.assert_rotary_angles_accurate(
            lambda x, positions: rotate(x, positions.astype(np.int64), "float32"),
            head_dim=HEAD_DIM,
            n_positions=n_positions,
            base=implementation.base,
            layout=implementation.layout,
            scaling=implementation.scaling,
        )


def _score_error(rotate: Callable[..., Any], layout: str) -> float:
    """Largest error of a query-key score at shifted positions, relative to |q||k|."""
    shifts, distances = np.array(SHIFTS), np.array(DISTANCES)
    query_positions = (shifts[:, None] + distances[None, :]).ravel()
    key_positions = np.repeat(shifts, len(distances))
    q, k = np.random.default_rng(1).standard_normal((2, HEAD_DIM))
    count = len(query_positions)
    got_q = rotate(np.tile(q, (count, 1)), query_positions, "float32")
    got_k = rotate(np.tile(k, (count, 1)), key_positions, "float32")
    got = np.einsum("sd,sd->s", got_q, got_k)
    want_q = posenc.rotate(np.tile(q, (count, 1)), query_positions.astype(np.float64), layout=layout)
    want_k = posenc.rotate(np.tile(k, (count, 1)), key_positions.astype(np.float64), layout=layout)
    want = np.einsum("sd,sd->s", want_q, want_k)
    return _finite_max(np.abs(got - want) / (np.linalg.norm(q) * np.linalg.norm(k)))


def _slice_error(rotate: Callable[..., Any], layout: str) -> float:
    """|rotate(tail at offset) - rotate(whole)[offset:]| relative to max |x|, in the check's call order."""
    whole = np.random.default_rng(2).standard_normal((SLICE_OFFSET + SLICE_LENGTH, HEAD_DIM))
    tail = whole[SLICE_OFFSET:]
    rotate(tail, np.arange(SLICE_LENGTH), "float32")  # fills a cache keyed on the length, if any
    full = rotate(whole, np.arange(len(whole)), "float32")
    shifted = rotate(tail, SLICE_OFFSET + np.arange(SLICE_LENGTH), "float32")
    return _finite_max(np.abs(shifted - full[SLICE_OFFSET:]) / np.abs(whole).max())


def _stale_error(rotate: Callable[..., Any], layout: str) -> float:
    """|short call after a long call - short call before it| relative to max |x|."""
    rng = np.random.default_rng(3)
    short, long = rng.standard_normal((SHORT, HEAD_DIM)), rng.standard_normal((LONG, HEAD_DIM))
    before = rotate(short, np.arange(SHORT), "float32")
    rotate(long, np.arange(LONG), "float32")
    after = rotate(short, np.arange(SHORT), "float32")
    return _finite_max(np.abs(after - before) / np.abs(short).max())


CONVERSION_HEADS, CONVERSION_HEAD_DIM, CONVERSION_D_IN = 2, 8, 16


def _conversion_error(convert: Callable[..., Any], layout: str) -> float:
    """Largest change of a query-key score after converting interleaved weights, relative to the largest."""
    rng = np.random.default_rng(4)
    rows = CONVERSION_HEADS * CONVERSION_HEAD_DIM
    w_query, w_key = rng.standard_normal((2, rows, CONVERSION_D_IN))
    tokens = rng.standard_normal((6, CONVERSION_D_IN))
    positions = np.array([0.0, 1.0, 3.0, 50.0, 700.0, 4000.0])

    def scores(wq: NDArray[np.float64], wk: NDArray[np.float64], layout: str) -> NDArray[np.float64]:
        shape = (len(tokens), CONVERSION_HEADS, CONVERSION_HEAD_DIM)
        q = posenc.rotate((tokens @ wq.T).reshape(shape).swapaxes(0, 1), positions, layout=layout)
        k = posenc.rotate((tokens @ wk.T).reshape(shape).swapaxes(0, 1), positions, layout=layout)
        result: NDArray[np.float64] = q @ k.swapaxes(1, 2)
        return result

    want = scores(w_query, w_key, "interleaved")
    got = scores(convert(w_query.copy()), convert(w_key.copy()), "halves")
    return _finite_max(np.abs(got - want) / np.abs(want).max())


def _slope_error(slopes: Callable[..., Any], layout: str | None) -> float:
    """Largest relative error of a slope, over every head count 1..MAX_HEADS."""
    worst = 0.0
    for n_heads in range(1, MAX_HEADS + 1):
        got = np.asarray(slopes(n_heads), dtype=np.float64).reshape(-1)
        want = posenc.alibi_slopes(n_heads)
        if got.shape != want.shape:
            return math.inf
        worst = max(worst, _finite_max(np.abs(got - want) / want))
    return worst


def _t5_offsets() -> NDArray[np.int64]:
    reach = 4 * T5_CONFIG["max_distance"]
    far = [-(10**9), -(10**6), -(10**4), 10**4, 10**6, 10**9]
    return np.concatenate([np.arange(-reach, reach + 1), far]).astype(np.int64)


def _bucket_error(buckets: Callable[..., Any], layout: str | None) -> float:
    """How many offsets get another bucket than the exact one (out of the check's offsets)."""
    offsets = _t5_offsets()
    got = np.asarray(buckets(offsets.copy(), **T5_CONFIG), dtype=np.float64)
    return float((got != posenc.t5_relative_bucket(offsets, **T5_CONFIG)).sum())


def t5_differences_on_boundaries(buckets: Callable[..., Any]) -> bool:
    """Whether every offset whose bucket is not the exact one is a float32 boundary, one bucket away."""
    offsets = _t5_offsets()
    got = np.asarray(buckets(offsets.copy(), **T5_CONFIG), dtype=np.float64)
    want = posenc.t5_relative_bucket(offsets, **T5_CONFIG)
    wrong = got != want
    boundary = pt.t5_float32_boundaries(offsets, **T5_CONFIG)
    return bool(np.all(~wrong | (boundary & (np.abs(got - want) == 1))))


# --- The checks, as each property calls them ----------------------------------------------------------------


def _check_angles(rotate: Callable[..., Any], layout: str, dtype: str = "float32") -> None:
    pt.assert_rotary_angles_accurate(
        lambda x, positions: rotate(x, positions.astype(np.int64), dtype),
        head_dim=HEAD_DIM,
        n_positions=ANGLE_POSITIONS,
        layout=layout,
    )


def _check_scores(rotate: Callable[..., Any], layout: str) -> None:
    pt.assert_rotary_scores_depend_on_offset_only(
        lambda x, positions: rotate(x, positions.astype(np.int64), "float32"),
        head_dim=HEAD_DIM,
        distances=DISTANCES,
        shifts=SHIFTS,
        layout=layout,
    )


def _with_offset(rotate: Callable[..., Any]) -> Callable[..., Any]:
    return lambda x, offset=0: rotate(x, offset + np.arange(len(x)), "float32")


def _check_slice(rotate: Callable[..., Any], layout: str) -> None:
    pt.assert_rotary_offset_matches_slice(
        _with_offset(rotate), head_dim=HEAD_DIM, seq_len=SLICE_LENGTH, offset=SLICE_OFFSET
    )


def _check_stale(rotate: Callable[..., Any], layout: str) -> None:
    pt.assert_rotary_calls_independent(_with_offset(rotate), head_dim=HEAD_DIM, short_len=SHORT, long_len=LONG)


def _check_conversion(convert: Callable[..., Any], layout: str) -> None:
    pt.assert_layouts_agree_after_permutation(
        convert,
        head_dim=CONVERSION_HEAD_DIM,
        n_heads=CONVERSION_HEADS,
        source="interleaved",
        target="halves",
        d_in=CONVERSION_D_IN,
    )


@dataclass(frozen=True)
class Property:
    """One column of the audit: the kind of implementation it applies to, its check and its measurement.

    ``check(function, layout)`` and ``measure(function, layout)`` get the adapter's function and the row's
    layout; with ``needs_implementation`` they get the row's :class:`Implementation` instead (its scaling and
    base).
    """

    key: str
    title: str
    kind: str
    check: Callable[[Callable[..., Any], Any], None]
    measure: Callable[[Callable[..., Any], Any], float]
    unit: str
    measure_same_call: bool = False
    """Measure the output of the check's own calls (at fresh state) instead of a second build."""
    needs_implementation: bool = False


PROPERTIES = [
    Property(
        "angles",
        "angles, float32",
        "rotary",
        _check_angles,
        lambda r, lay: _angle_error(r, lay, "float32"),
        "rad",
        True,
    ),
    Property("offset_only", "score sees offset only", "rotary", _check_scores, _score_error, "of |q||k|"),
    Property("slice", "offset = slice", "rotary", _check_slice, _slice_error, "of max |x|"),
    Property("stale", "no stale state", "rotary", _check_stale, _stale_error, "of max |x|"),
    Property(
        "bfloat16",
        "angles, bfloat16 input",
        "rotary",
        lambda r, lay: _check_angles(r, lay, "bfloat16"),
        lambda r, lay: _angle_error(r, lay, "bfloat16"),
        "rad",
        True,
    ),
    Property(
        "bfloat16_cast",
        "angles, model cast to bfloat16",
        "rotary",
        lambda r, lay: _check_angles(r, lay, BFLOAT16_CAST),
        lambda r, lay: _angle_error(r, lay, BFLOAT16_CAST),
        "rad",
        True,
    ),
    Property(
        "scaled",
        "angles as configured, 1024 and 8192 positions",
        "scaled",
        _check_scaled,
        _scaled_angle_error,
        "rad",
        True,
        True,
    ),
    Property("layout", "layout conversion", "conversion", _check_conversion, _conversion_error, "of largest score"),
    Property(
        "slopes",
        "ALiBi slopes, 1-64 heads",
        "slopes",
        lambda s, lay: pt.assert_alibi_slopes_match_reference(s, max_heads=MAX_HEADS),
        _slope_error,
        "relative",
    ),
    Property(
        "t5_range",
        "T5 buckets in range",
        "buckets",
        lambda b, lay: pt.assert_t5_buckets_in_range(b, **T5_CONFIG),
        _bucket_error,
        "offsets off",
    ),
    Property(
        "t5_exact",
        "T5 buckets exact",
        "buckets",
        lambda b, lay: pt.assert_t5_buckets_exact(b, **T5_CONFIG),
        _bucket_error,
        "offsets off",
    ),
]
"""The columns of the audit table, in order."""


@dataclass(frozen=True)
class Cell:
    """One verdict: ``passed`` is None where the property does not apply."""

    passed: bool | None
    error: float | None = None
    message: str = ""
    unit: str = ""

    def __str__(self) -> str:
        if self.passed is None or self.error is None:
            return "n/a"
        number = f"{self.error:.0f}" if self.unit == "offsets off" else f"{self.error:.1e}"
        return f"{'pass' if self.passed else 'FAIL'} {number}"


@dataclass
class Audit:
    """The result of :func:`run_audit`: one :class:`Cell` per implementation and property."""

    implementations: list[Implementation]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def cell(self, implementation: Implementation | str, key: str) -> Cell:
        """The cell of an implementation (or its row label) and a property key."""
        name = implementation if isinstance(implementation, str) else implementation.name
        return self.cells[(name, key)]

    def implementation(self, library: str, function: str) -> Implementation:
        """The first implementation of ``library`` (in table order) whose function starts with ``function``.

        Parameters
        ----------
        library : str
            As :attr:`Implementation.library`, e.g. ``"transformers"``.
        function : str
            The start of :attr:`Implementation.function`, e.g. ``"Falcon"``.

        Returns
        -------
        Implementation

        Raises
        ------
        ValueError
            If the audit has no such implementation.
        """
        for implementation in self.implementations:
            if implementation.library == library and implementation.function.startswith(function):
                return implementation
        raise ValueError(f"the audit has no implementation of {library!r} whose function starts with {function!r}")

    def failures(self) -> list[tuple[str, str]]:
        """(row label, property key) of every failed cell, in table order."""
        return [
            (implementation.name, prop.key)
            for implementation in self.implementations
            for prop in PROPERTIES
            if self.cells[(implementation.name, prop.key)].passed is False
        ]

    def table(self, kinds: list[str] | None = None, caption: str | None = None, keys: list[str] | None = None) -> Table:
        """The audit as a :class:`posenc_book.tables.Table`: rows implementations, columns properties.

        Parameters
        ----------
        kinds : list of str, optional
            Show only the implementations of these kinds (``"rotary"``, ``"conversion"``, ``"slopes"``,
            ``"buckets"``). Default: all. Either way, only the properties that apply to a shown row are columns.
        caption : str, optional
            The table's caption.
        keys : list of str, optional
            Show only these properties (keys of :data:`PROPERTIES`), in the audit's order. Default: all.

        Raises
        ------
        ValueError
            If ``kinds`` or ``keys`` names a kind or a property the audit does not have.
        """
        known = sorted({prop.kind for prop in PROPERTIES})
        unknown = sorted(set(kinds or []) - set(known))
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; the kinds are {known}")
        unknown_keys = sorted(set(keys or []) - {prop.key for prop in PROPERTIES})
        if unknown_keys:
            raise ValueError(f"unknown property keys {unknown_keys}; the keys are {[p.key for p in PROPERTIES]}")
        shown = [i for i in self.implementations if kinds is None or i.kind in kinds]
        used = [
            prop
            for prop in PROPERTIES
            if any(i.kind == prop.kind for i in shown) and (keys is None or prop.key in keys)
        ]
        # one label column, "library version: function", so that the table fits a desktop page's column
        header = ["implementation"] + [f"{prop.title} ({prop.unit})" for prop in used]
        rows = [[i.name] + [str(self.cells[(i.name, prop.key)]) for prop in used] for i in shown]
        return Table(header, rows, caption=caption)


def run_audit(implementations: list[Implementation] | None = None, keys: list[str] | None = None) -> Audit:
    """Run every property that applies to every implementation.

    Parameters
    ----------
    implementations : list of Implementation, optional
        Default :func:`all_implementations`.
    keys : list of str, optional
        Run only the properties with these keys (the others read n/a). Default: all of :data:`PROPERTIES`.

    Returns
    -------
    Audit
        The verdict of each check with the error measured here; ``n/a`` where a property does not apply.
    """
    implementations = all_implementations() if implementations is None else implementations
    unknown = sorted(set(keys or []) - {prop.key for prop in PROPERTIES})
    if unknown:
        raise ValueError(f"unknown property keys {unknown}; the keys are {[prop.key for prop in PROPERTIES]}")
    audit = Audit(list(implementations))
    for implementation in audit.implementations:
        for prop in PROPERTIES:
            if prop.kind != implementation.kind or (keys is not None and prop.key not in keys):
                audit.cells[(implementation.name, prop.key)] = Cell(None)
                continue
            function = implementation.build()
            if prop.measure_same_call:
                function = _Remember(function)
            about = implementation if prop.needs_implementation else implementation.layout
            try:
                prop.check(function, about)
                passed, message = True, ""
            except AssertionError as error:
                passed, message = False, str(error)
            if not prop.measure_same_call:
                function = implementation.build()  # fresh state: the measurement repeats the check's calls
            error_value = prop.measure(function, about)
            audit.cells[(implementation.name, prop.key)] = Cell(passed, error_value, message, prop.unit)
    return audit
