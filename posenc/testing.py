"""Property checks for positional-encoding code: give one your implementation, get an AssertionError if it is wrong.

Each ``assert_*`` function here calls an implementation you pass in (a function, or a PyTorch module),
compares what it returns with a property that every correct implementation has, computed with posenc's own
float64 reference, and raises ``AssertionError`` with a message that says which input broke the property,
by how much, and what usually causes that. It returns ``None`` when the property holds. posenc's own
implementations pass every check; the book's chapter :doc:`/notebooks/10_bug_gallery` runs each check on
small faulty implementations that reproduce bugs reported in public issue trackers, and shows them failing.

Conventions shared by the checks:

* The implementation receives NumPy ``float64`` arrays, except a ``torch.nn.Module``, which receives
  ``float32`` tensors (and tensor positions). It may return a NumPy array, anything ``np.asarray``
  accepts, or a tensor of any floating dtype; the check converts the result to ``float64``.
* An implementation that raises an exception fails the check: the ``AssertionError`` names the call and
  chains the original exception.
* Bad arguments *to the check itself* (not an implementation, a negative size, an unknown layout) raise
  ``TypeError`` or ``ValueError`` naming the parameter, as everywhere in posenc.

Sinusoidal
    :func:`assert_sinusoidal_matches_reference`, :func:`assert_sinusoidal_odd_width_handled`
Rotary (RoPE)
    :func:`assert_rotary_angles_accurate`, :func:`assert_rotary_scores_depend_on_offset_only`,
    :func:`assert_rotary_offset_matches_slice`, :func:`assert_rotary_calls_independent`,
    :func:`assert_rotary_uses_sequence_axis`,
    :func:`assert_layouts_agree_after_permutation`, :func:`assert_yarn_attention_factor`,
    :func:`assert_mrope_axes_match`
A whole model, from its transformers config
    :func:`assert_rotary_matches_config`
ALiBi and T5
    :func:`assert_alibi_slopes_match_reference`, :func:`assert_alibi_offset_matches_slice`,
    :func:`assert_t5_buckets_in_range`,
    :func:`assert_t5_buckets_exact`, :func:`t5_float32_boundaries`
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

import posenc
from posenc._families import NO_ATTENTION_TYPES
from posenc._rope import ROPE_TYPES, parse_scaling
from posenc._validation import (
    ROTARY_LAYOUTS,
    Layout,
    RotaryLayout,
    check_choice,
    check_flag,
    check_int,
    check_real,
    check_table_size,
    is_int,
)

__all__ = [
    "assert_sinusoidal_matches_reference",
    "assert_sinusoidal_odd_width_handled",
    "assert_rotary_angles_accurate",
    "assert_rotary_scores_depend_on_offset_only",
    "assert_rotary_offset_matches_slice",
    "assert_rotary_calls_independent",
    "assert_rotary_uses_sequence_axis",
    "assert_layouts_agree_after_permutation",
    "assert_alibi_slopes_match_reference",
    "assert_t5_buckets_in_range",
    "assert_t5_buckets_exact",
    "t5_float32_boundaries",
    "assert_alibi_offset_matches_slice",
    "assert_yarn_attention_factor",
    "assert_mrope_axes_match",
    "assert_rotary_matches_config",
]

_MAX_POSITION = 2**24
"""Largest position a rotary check visits: every integer up to it is exact in float32."""

_MAX_CHECK_ELEMENTS = 2**22
"""Largest array (elements) a check builds, so that every check runs in well under a second."""


_MAX_SEED = 2**32 - 1
"""Largest seed a check accepts (the checks draw their inputs from ``np.random.default_rng(seed)``)."""

Implementation = Callable[..., Any]
"""What a check calls: a function, or a ``torch.nn.Module`` (callable, and typed by torch)."""


def _check_implementation(fn: object, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be a callable (a function or a torch.nn.Module), got {type(fn).__name__}")


# --- Calling an implementation and reading what it returns ------------------------------------------------


def _is_torch_module(fn: object) -> bool:
    torch = sys.modules.get("torch")  # a Module can only exist if torch is already imported
    return torch is not None and isinstance(fn, torch.nn.Module)


def _tensor(array: NDArray[Any], dtype_name: str) -> Any:  # a torch.Tensor, torch not imported here
    torch = sys.modules["torch"]
    return torch.as_tensor(np.ascontiguousarray(array), dtype=getattr(torch, dtype_name))


def _call(fn: Implementation, description: str, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; any exception it raises becomes an AssertionError that names the call."""
    try:
        return fn(*args, **kwargs)
    except AssertionError:
        raise
    except Exception as error:  # the implementation under test failed: that is the check's finding
        raise AssertionError(f"{description} raised {type(error).__name__}: {error}") from error


def _as_array(result: Any, description: str) -> NDArray[np.float64]:
    """The result of an implementation as a float64 NumPy array (tensors of any dtype accepted)."""
    if hasattr(result, "detach") and hasattr(result, "cpu"):  # a torch tensor, without importing torch
        result = result.detach().cpu()
        result = result.double() if result.is_floating_point() else result
        result = result.numpy()
    try:
        array = np.asarray(result)
        if array.dtype == object or np.iscomplexobj(array):
            raise TypeError(f"dtype {array.dtype}")
        return array.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise AssertionError(f"{description} returned {type(result).__name__}, not a real array ({error})") from error


def _expect_shape(array: NDArray[Any], shape: tuple[int, ...], description: str) -> None:
    if array.shape != shape:
        raise AssertionError(f"{description} returned shape {array.shape}, expected {shape}")


def _rotate_with(
    fn: Implementation, x: NDArray[np.float64], positions: NDArray[np.float64], description: str
) -> NDArray[np.float64]:
    """Call a rotary implementation ``fn(x, positions)`` (a Module gets ``fn(x, positions=positions)``)."""
    if _is_torch_module(fn):
        out = _call(fn, description, _tensor(x, "float32"), positions=_tensor(positions, "float64"))
    else:
        out = _call(fn, description, x.copy(), positions.copy())
    out = _as_array(out, description)
    _expect_shape(out, x.shape, description)
    return out


def _rotate_at_offset(fn: Implementation, x: NDArray[np.float64], offset: int, description: str) -> NDArray[np.float64]:
    """Call a rotary implementation ``fn(x, offset=offset)`` (positions ``offset, offset + 1, ...``)."""
    x_in = _tensor(x, "float32") if _is_torch_module(fn) else x.copy()
    out = _as_array(_call(fn, description, x_in, offset=offset), description)
    _expect_shape(out, x.shape, description)
    return out


def _pairs(array: NDArray[np.float64], layout: RotaryLayout) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The first and second member of every rotated pair of the last axis, in pair order."""
    half = array.shape[-1] // 2
    if layout == "interleaved":
        return array[..., 0::2], array[..., 1::2]
    return array[..., :half], array[..., half:]


def _show(values: NDArray[Any]) -> str:
    return np.array2string(values, precision=4, separator=", ", threshold=12)


def _wrap(angle: NDArray[np.float64]) -> NDArray[np.float64]:
    """Angles folded into [-pi, pi)."""
    folded: NDArray[np.float64] = (angle + np.pi) % (2 * np.pi) - np.pi
    return folded


# --- Sinusoidal ----------------------------------------------------------------------------------------------


def assert_sinusoidal_matches_reference(
    table_fn: Implementation,
    *,
    n_positions: int = 128,
    d_model: int = 64,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    atol: float = 1e-5,
) -> None:
    r"""Check that ``table_fn(n_positions, d_model)`` is the sinusoidal table of Vaswani et al.

    Parameters
    ----------
    table_fn : callable
        ``table_fn(n_positions, d_model)`` returns the ``(n_positions, d_model)`` table (array or tensor) of
        positions ``0, ..., n_positions - 1``. To check a module that adds the encoding to its input, wrap it:
        ``lambda n, d: module(torch.zeros(1, n, d))[0]``.
    n_positions : int, default 128
        Rows to compare; at least 2, and ``n_positions * d_model`` at most ``2**22``.
    d_model : int, default 64
        Width of the table; positive and even.
    base : float, default 10000.0
        The base of the frequencies; greater than 1.
    layout : {"interleaved", "cos_first", "halves"}, default "interleaved"
        Where ``table_fn`` puts each sine and cosine (see :func:`posenc.sinusoidal`).
    atol : float, default 1e-5
        Largest accepted absolute difference from the float64 reference (float32 tables are within 1e-6).

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If the table has the wrong shape, holds a non-finite entry, differs from the reference by more than
        ``atol``, or if ``table_fn`` raises. The message names the worst entry, its pair and frequency.
    TypeError, ValueError
        If an argument of the check is invalid (named in the message).

    Notes
    -----
    The reference is :func:`posenc.sinusoidal` in float64:
    :math:`PE_{(p, 2i)} = \sin(p\,\omega_i)`, :math:`PE_{(p, 2i+1)} = \cos(p\,\omega_i)`,
    :math:`\omega_i = \text{base}^{-2i/d_{model}}`, with ``i`` counting *pairs* of columns. The classic
    mistakes (an exponent per column instead of per pair, ``(2i+1)/d`` for the cosine, ``x / d // 2``
    parsed as ``(x / d) // 2``, integer division, dividing by the sequence length, ``position / div_term``)
    all change whole columns, so one comparison catches them.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> import posenc
    >>> assert_sinusoidal_matches_reference(posenc.sinusoidal)
    >>> def per_column_exponent(n, d):  # 10000 ** (2 j / d) for column j
    ...     angles = np.outer(np.arange(n), 10000.0 ** (-2 * np.arange(d) / d))
    ...     return np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))
    >>> assert_sinusoidal_matches_reference(per_column_exponent)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: table_fn(128, 64) differs from the sinusoidal table in 63 of 64 columns...
    """
    _check_implementation(table_fn, "table_fn")
    n_positions = check_int(n_positions, "n_positions", minimum=2, maximum=_MAX_CHECK_ELEMENTS)
    d_model = check_int(d_model, "d_model", minimum=2, maximum=_MAX_CHECK_ELEMENTS, even=True)
    check_table_size(n_positions, d_model, "n_positions", "d_model")
    if n_positions * d_model > _MAX_CHECK_ELEMENTS:
        raise ValueError(f"n_positions x d_model must be at most {_MAX_CHECK_ELEMENTS}, got {n_positions * d_model}")
    base = check_real(base, "base", above=1.0)
    reference = posenc.sinusoidal(n_positions, d_model, base=base, layout=layout, dtype=np.float64)
    atol = check_real(atol, "atol", above=0.0)

    call = f"table_fn({n_positions}, {d_model})"
    table = _as_array(_call(table_fn, call, n_positions, d_model), call)
    _expect_shape(table, (n_positions, d_model), call)
    if not np.all(np.isfinite(table)):
        row, column = np.argwhere(~np.isfinite(table))[0]
        raise AssertionError(f"{call}[{row}, {column}] = {table[row, column]}: the table must be finite")
    error = np.abs(table - reference)
    if error.max() <= atol:
        return
    row, column = np.unravel_index(np.argmax(error), error.shape)
    sine_columns = posenc.layout_permutation(layout, "interleaved", d_model)  # interleaved column -> ours
    where = int(np.flatnonzero(sine_columns == column)[0])  # the interleaved column of `column`
    pair, kind = where // 2, ("sine" if where % 2 == 0 else "cosine")
    omega = posenc.frequencies(d_model, base=base)[pair]
    bad_columns = np.flatnonzero(error.max(axis=0) > atol)
    raise AssertionError(
        f"{call} differs from the sinusoidal table in {len(bad_columns)} of {d_model} columns (layout "
        f"{layout!r}, base {base:g}); worst at row {row}, column {column} (the {kind} of pair {pair}, "
        f"frequency base**(-2*{pair}/{d_model}) = {omega:.6g}): got {table[row, column]:.6g}, expected "
        f"{reference[row, column]:.6g}, |error| {error[row, column]:.3g} > atol {atol:g}. First wrong column: "
        f"{bad_columns[0]}. Both members of a pair share the exponent 2i/d_model, i counting pairs."
    )


def assert_sinusoidal_odd_width_handled(
    table_fn: Implementation, *, n_positions: int = 16, d_model: int = 7, base: float = 10000.0, atol: float = 1e-5
) -> None:
    r"""Check that an odd ``d_model`` is either refused with a ``ValueError`` or computed by the formula.

    Parameters
    ----------
    table_fn : callable
        ``table_fn(n_positions, d_model)`` returns the ``(n_positions, d_model)`` table in the paper's
        interleaved layout, or raises a ``ValueError`` naming ``d_model`` for a width it does not support.
    n_positions : int, default 16
        Rows to compare; between 1 and 4096.
    d_model : int, default 7
        An odd width, between 1 and 4095.
    base : float, default 10000.0
        The base of the frequencies; greater than 1.
    atol : float, default 1e-5
        Largest accepted absolute difference from the formula.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If ``table_fn`` raises anything but a ``ValueError`` whose message names ``d_model`` (or says "even"
        or "odd"), such as a shape mismatch deep inside, or returns a table that is not the formula's
        ``d_model`` columns.
    TypeError, ValueError
        If an argument of the check is invalid (``d_model`` even, for instance).

    Notes
    -----
    With an odd width the formula still defines every column: column ``j`` is the sine (``j`` even) or the
    cosine (``j`` odd) of ``p * base**(-2 * (j // 2) / d_model)``, so the last column is an unpaired
    sine. The reference is that table, computed with :func:`posenc.sinusoidal` at width ``d_model + 1`` and
    the base rescaled so that its exponents are over ``d_model``. A clear refusal is fine too (posenc
    refuses); crashing with an unrelated error, as a common implementation does when it assigns
    ``d_model // 2 + 1`` cosines to ``d_model // 2`` columns, is not.

    References
    ----------
    .. [1] A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017, arXiv:1706.03762, §3.5.

    Examples
    --------
    >>> import posenc
    >>> assert_sinusoidal_odd_width_handled(posenc.sinusoidal)  # refuses odd widths with a ValueError
    """
    _check_implementation(table_fn, "table_fn")
    n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=4096)
    d_model = check_int(d_model, "d_model", minimum=1, maximum=4095)
    if d_model % 2 == 0:
        raise ValueError(f"d_model must be an odd int in [1, 4095], got {d_model}")
    base = check_real(base, "base", above=1.0)
    atol = check_real(atol, "atol", above=0.0)

    call = f"table_fn({n_positions}, {d_model})"
    try:
        result = table_fn(n_positions, d_model)
    except Exception as raised:  # a refusal is a ValueError that says what is wrong with d_model
        refusal = isinstance(raised, ValueError) and any(word in str(raised) for word in ("d_model", "even", "odd"))
        if refusal:
            return
        raise AssertionError(
            f"{call} raised {type(raised).__name__}: {raised}. An odd d_model must be refused with a ValueError "
            f"that names d_model, or computed by the formula (the last column an unpaired sine)"
        ) from raised
    table = _as_array(result, call)
    _expect_shape(table, (n_positions, d_model), call)
    # base**(-2i/d) = (base**((d+1)/d))**(-2i/(d+1)): the even table one column wider, last column dropped
    reference = posenc.sinusoidal(n_positions, d_model + 1, base=base ** ((d_model + 1) / d_model), dtype=np.float64)
    error = np.abs(table - reference[:, :d_model])
    if np.all(np.isfinite(table)) and error.max() <= atol:
        return
    column = int(np.argmax(np.where(np.isfinite(error), error, np.inf).max(axis=0)))
    raise AssertionError(
        f"{call} is not the formula's table: column {column} differs by up to {np.nanmax(error[:, column]):.3g} "
        f"(atol {atol:g}); column j must be sin/cos(p * base**(-2*(j//2)/{d_model}))"
    )


# --- Rotary ----------------------------------------------------------------------------------------------


def _rotary_tolerance(largest_angle: float) -> float:
    """2**-20 radians per radian of the largest angle: eight times float32's relative precision 2**-23 of it."""
    return 2.0**-20 * max(1.0, largest_angle)


def assert_rotary_angles_accurate(
    rotate_fn: Implementation,
    *,
    head_dim: int = 64,
    n_positions: int = 16384,
    base: float = 10000.0,
    layout: RotaryLayout = "interleaved",
    atol: float | None = None,
    scaling: posenc.RopeScaling | Mapping[str, object] | None = None,
) -> None:
    r"""Check every rotation angle of a rotary implementation against the float64 reference.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions)`` rotates ``x`` ``(seq, head_dim)`` at ``positions`` ``(seq,)`` and returns
        the same shape; a ``torch.nn.Module`` is called as ``rotate_fn(x, positions=positions)``, the way
        :class:`posenc.nn.RotaryEmbedding` takes them. :func:`posenc.rotate` passes as it is.
    head_dim : int, default 64
        Width of one head; even, at most 4096.
    n_positions : int, default 16384
        The check visits positions ``0, ..., n_positions - 1``; at most ``2**24`` and
        ``n_positions * head_dim`` at most ``2**22``.
    base : float, default 10000.0
        The rotary base; greater than 1.
    layout : {"interleaved", "halves"}, default "interleaved"
        How ``rotate_fn`` pairs dimensions: ``(2i, 2i + 1)`` or ``(i, i + head_dim / 2)``.
    atol : float, optional
        Largest accepted angle error in radians. Default ``2**-20 * max(1, largest angle)``: eight times
        float32's relative precision ``2**-23`` of the largest angle (8 to 16 units in the last place,
        depending on where it sits between two powers of 2), so a float32 computation passes and one in
        float16 or bfloat16 fails.
    scaling : RopeScaling, dict or None, default None
        The scaling ``rotate_fn`` was configured with (a transformers-style ``rope_parameters`` dict, as
        :func:`posenc.rotate` takes it; it may not carry a ``"rope_theta"`` other than ``base``): the
        reference is ``posenc.rotate(..., scaling=scaling)`` for the one call of ``n_positions`` rows, and
        each rotated unit pair must have the length :func:`posenc.rotary_attention_factor` gives instead
        of 1. ``None``: RoFormer's frequencies.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If an angle is off by more than ``atol`` (the message gives the position, the pair, both angles and
        how many angles are off, and says so when every wrong angle is that of a position of a shorter table,
        clamped or wrapped past its end), if a rotated pair does not have the length the scaling gives it
        (1 without one), or if ``rotate_fn`` raises (a table indexed past its end, for instance).
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    Rotary embedding turns pair ``i`` of a vector at position ``p`` by the angle
    :math:`\theta_{p,i} = p\,\text{base}^{-2i/d}` (with a scaling, ``p`` times
    ``posenc.rotary_frequencies(head_dim, base=base, scaling=scaling, seq_len=n_positions)[i]``). Feeding
    the unit vector ``(1, 0)`` in every pair returns :math:`(\cos\theta, \sin\theta)` there, so one call
    reads all the angles. In a format with ``t``
    significant bits the angle is only known to about :math:`|\theta|\,2^{-t}`: at position 2000 that is
    0.5 rad in float16 (``t = 11``) and 4 rad in bfloat16 (``t = 8``), whatever ``cos`` and ``sin`` do next.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> import posenc
    >>> assert_rotary_angles_accurate(posenc.rotate)
    >>> def half_angles(x, positions):  # positions and frequencies held in float16
    ...     inv = (10000.0 ** -(np.arange(0, 64, 2) / 64)).astype(np.float16)
    ...     ang = np.outer(positions.astype(np.float16), inv).astype(np.float64)
    ...     cos, sin = np.cos(ang), np.sin(ang)
    ...     out = x.copy()
    ...     out[:, 0::2] = x[:, 0::2] * cos - x[:, 1::2] * sin
    ...     out[:, 1::2] = x[:, 0::2] * sin + x[:, 1::2] * cos
    ...     return out
    >>> assert_rotary_angles_accurate(half_angles)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: ... of 524288 rotary angles are off by more than ...
    >>> yarn = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "truncate": False}
    >>> assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, scaling=yarn), scaling=yarn)
    >>> truncated = dict(yarn, truncate=True)  # the ramp's ends rounded to whole pairs: other frequencies
    >>> assert_rotary_angles_accurate(lambda x, p: posenc.rotate(x, p, scaling=truncated), scaling=yarn)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: ... rotary angles are off by more than ...
    """
    _check_implementation(rotate_fn, "rotate_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=_MAX_POSITION)
    if n_positions * head_dim > _MAX_CHECK_ELEMENTS:
        raise ValueError(
            f"n_positions x head_dim must be at most {_MAX_CHECK_ELEMENTS}, got {n_positions} x {head_dim}"
        )
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    scaling = parse_scaling(scaling, base, rope_types=ROPE_TYPES)  # the whole head rotated: no partial factor
    positions = np.arange(n_positions, dtype=np.float64)
    frequencies = posenc.rotary_frequencies(head_dim, base=base, scaling=scaling, seq_len=n_positions)
    largest_angle = float(positions[-1] * frequencies.max())  # pair 0 has frequency 1 without a scaling
    atol = _rotary_tolerance(largest_angle) if atol is None else check_real(atol, "atol", above=0.0)
    length = posenc.rotary_attention_factor(scaling)

    x = np.zeros((n_positions, head_dim))
    first, _ = _pairs(x, layout)
    first[...] = 1.0  # the unit vector (1, 0) in every pair: the output is (cos, sin) of each angle
    description = f"rotate_fn(x, positions) with positions 0..{n_positions - 1}"
    out = _rotate_with(rotate_fn, x, positions, description)
    reference = posenc.rotate(x, positions, base=base, layout=layout, scaling=scaling)
    got_cos, got_sin = _pairs(out, layout)
    ref_cos, ref_sin = _pairs(reference, layout)
    radius = np.hypot(got_cos, got_sin)
    error = np.abs(_wrap(np.arctan2(got_sin, got_cos) - np.arctan2(ref_sin, ref_cos)))
    error = np.where(np.isfinite(error), error, np.inf)
    bad = (error > atol) | ~(np.abs(radius - length) <= length * max(atol, 1e-3))
    if not bad.any():
        return
    position, pair = np.unravel_index(np.argmax(np.where(bad, error, -1.0)), error.shape)
    omega = frequencies[pair]
    first_bad = int(np.flatnonzero(bad.any(axis=1))[0])
    got = math.atan2(got_sin[position, pair], got_cos[position, pair])
    want = math.atan2(ref_sin[position, pair], ref_cos[position, pair])
    precision = (
        "Positions, frequencies or angles held in float16 or bfloat16 give errors of this kind; compute the "
        "angles in float32 or better."
    )
    if scaling != posenc.RopeScaling():
        precision = (
            "Frequencies other than this scaling's (posenc.rotary_frequencies gives them), or positions, "
            "frequencies or angles held in float16 or bfloat16, give errors of this kind."
        )
    cause = _short_table(got_cos, got_sin, ref_cos, ref_sin, first_bad, atol) or precision
    scaled = "" if scaling == posenc.RopeScaling() else f", scaling {scaling!r}"
    expected_length = "" if length == 1.0 else f" (expected {length:.4f}, the attention factor)"
    raise AssertionError(
        f"{int(bad.sum())} of {bad.size} rotary angles are off by more than {atol:.3g} rad (layout {layout!r}, "
        f"base {base:g}{scaled}); the first wrong position is {first_bad}. Worst: position {position}, pair "
        f"{pair} (frequency {omega:.6g}, true angle {position * omega:.6g} rad): got {got:.4f} rad mod 2 pi, "
        f"expected {want:.4f}, error {error[position, pair]:.3g} rad; length of the rotated unit pair "
        f"{radius[position, pair]:.4f}{expected_length}. {cause}"
    )


def _short_table(
    got_cos: NDArray[np.float64],
    got_sin: NDArray[np.float64],
    ref_cos: NDArray[np.float64],
    ref_sin: NDArray[np.float64],
    first_bad: int,
    atol: float,
) -> str:
    """What a table of ``first_bad`` positions, clamped or wrapped past its end, explains; "" if neither does."""
    if first_bad < 1:
        return ""
    tail = slice(first_bad, None)
    got_angle = np.arctan2(got_sin[tail], got_cos[tail])
    candidates = {
        "clamped": np.full(got_angle.shape[0], first_bad - 1),  # every later position reads the last row
        "wrapped": np.arange(first_bad, got_cos.shape[0]) % first_bad,  # position p reads row p mod length
    }
    for name, rows in candidates.items():
        error = np.abs(_wrap(got_angle - np.arctan2(ref_sin[rows], ref_cos[rows])))
        if np.all(error <= atol):
            reads = f"that of position {first_bad - 1}" if name == "clamped" else f"that of position p mod {first_bad}"
            return (
                f"From position {first_bad} on, the angle of every position p is {reads}: a table of {first_bad} "
                f"positions, {name} past its end. Build the table for the longest context, compute the angles from "
                f"the positions, or refuse longer inputs with an error that names the limit."
            )
    return ""


def assert_rotary_scores_depend_on_offset_only(
    rotate_fn: Implementation,
    *,
    head_dim: int = 64,
    distances: Sequence[int] = (0, 1, 7, 100),
    shifts: Sequence[int] = (0, 1024, 16384),
    base: float = 10000.0,
    layout: RotaryLayout = "interleaved",
    rtol: float | None = None,
    seed: int = 0,
) -> None:
    r"""Check that a rotary attention score depends on the offset ``m - n`` only, at every shift tried.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions)`` as in :func:`assert_rotary_angles_accurate`.
    head_dim : int, default 64
        Width of one head; even, at most 4096.
    distances : sequence of int, default (0, 1, 7, 100)
        The offsets ``m - n`` tried (between ``-2**20`` and ``2**20``; at most 64 of them).
    shifts : sequence of int, default (0, 1024, 16384)
        Both positions are shifted by each of these (between 0 and ``2**23``; at most 64 of them).
    base : float, default 10000.0
        The rotary base; greater than 1.
    layout : {"interleaved", "halves"}, default "interleaved"
        How ``rotate_fn`` pairs dimensions.
    rtol : float, optional
        Largest accepted error of a score, relative to ``|q| |k|``. Default ``2**-20 * max(1, largest
        position)``, as in :func:`assert_rotary_angles_accurate`.
    seed : int, default 0
        Seed of the random query and key.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If a score at shifted positions differs from the float64 score for the same offset by more than
        ``rtol * |q| |k|``, or if ``rotate_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    With :math:`R_p` the rotation at position ``p``, :math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k`: the
    score sees the offset only, which is the point of rotary embedding. The check computes
    :math:`q^\top R_{n-m} k` once in float64 with :func:`posenc.rotate` and compares the implementation's
    score at positions ``(s + d, s)`` for every distance ``d`` and shift ``s``. An implementation whose
    angles lose precision far from 0 (reduced-precision positions or frequencies) passes at shift 0 and
    fails at a large shift.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> import posenc
    >>> assert_rotary_scores_depend_on_offset_only(posenc.rotate)
    """
    _check_implementation(rotate_fn, "rotate_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    distance_array = _check_int_sequence(distances, "distances", low=-(2**20), high=2**20)
    shift_array = _check_int_sequence(shifts, "shifts", low=0, high=2**23)
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    query_positions = (shift_array[:, None] + distance_array[None, :]).ravel().astype(np.float64)
    key_positions = np.repeat(shift_array, len(distance_array)).astype(np.float64)
    largest = float(np.abs(np.concatenate([query_positions, key_positions])).max())
    rtol = _rotary_tolerance(largest) if rtol is None else check_real(rtol, "rtol", above=0.0)

    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, head_dim))
    scale = float(np.linalg.norm(q) * np.linalg.norm(k))
    count = len(query_positions)
    got_q = _rotate_with(rotate_fn, np.tile(q, (count, 1)), query_positions, "rotate_fn(queries, positions)")
    got_k = _rotate_with(rotate_fn, np.tile(k, (count, 1)), key_positions, "rotate_fn(keys, positions)")
    got = np.einsum("sd,sd->s", got_q, got_k)
    # The reference for offset d, computed at the unshifted positions (d, 0) in float64.
    ref_q = posenc.rotate(
        np.tile(q, (len(distance_array), 1)), distance_array.astype(np.float64), base=base, layout=layout
    )
    ref_k = posenc.rotate(k[None, :], np.zeros(1), base=base, layout=layout)
    want = np.tile(ref_q @ ref_k[0], len(shift_array))
    error = np.abs(got - want) / scale
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= rtol:
        return
    worst = int(np.argmax(error))
    m, n = int(query_positions[worst]), int(key_positions[worst])
    raise AssertionError(
        f"the score of a query at {m} and a key at {n} (offset {m - n}) is {got[worst]:.6g}, but every pair of "
        f"positions with that offset must give {want[worst]:.6g} (float64, layout {layout!r}); error "
        f"{error[worst]:.3g} |q||k| > rtol {rtol:.3g}. {int((error > rtol).sum())} of {error.size} scores fail, "
        f"the first at shift {int(key_positions[np.argmax(error > rtol)])}: the rotation depends on more than "
        f"the offset (angles losing precision as positions grow, or the wrong frequencies)."
    )


def _check_int_sequence(values: object, name: str, *, low: int, high: int) -> NDArray[np.int64]:
    """A 1-D sequence of 1 to 64 ints in ``[low, high]``, as an int64 array."""
    accepted = f"a non-empty sequence of at most 64 ints in [{low}, {high}]"
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be {accepted}, got {type(values).__name__} {values!r}")
    items = list(values)
    if not 0 < len(items) <= 64:
        raise ValueError(f"{name} must be {accepted}, got {len(items)} values")
    for value in items:
        if not is_int(value):
            raise TypeError(f"{name} must be {accepted}, got an element {type(value).__name__} {value!r}")
        if not low <= int(value) <= high:
            raise ValueError(f"{name} must be {accepted}, got {int(value)}")
    return np.array([int(value) for value in items], dtype=np.int64)


def assert_rotary_offset_matches_slice(
    fn: Implementation, *, head_dim: int = 64, seq_len: int = 16, offset: int = 5, atol: float = 1e-4, seed: int = 0
) -> None:
    r"""Check that rotating a tail at ``offset`` gives the tail of rotating the whole sequence.

    Parameters
    ----------
    fn : callable
        ``fn(x, offset=k)`` rotates ``x`` ``(seq, head_dim)`` at positions ``k, k + 1, ...`` and returns the
        same shape, the way a decoding step with a key-value cache calls it; a ``torch.nn.Module`` such as
        :class:`posenc.nn.RotaryEmbedding` gets a float32 tensor.
    head_dim : int, default 64
        Width of one head; even, at most 4096.
    seq_len : int, default 16
        Length of the tail; between 1 and 4096.
    offset : int, default 5
        Where the tail starts; between 1 and 4096.
    atol : float, default 1e-4
        Largest accepted difference, relative to the largest entry of ``x``.
    seed : int, default 0
        Seed of the random input.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If ``fn(tail, offset=offset)`` differs from ``fn(whole, offset=0)[offset:]``, or if ``fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    The calls come in an order that exposes a cache keyed on the sequence length alone: first the tail at
    offset 0 (which fills such a cache), then the whole sequence, then the tail at ``offset``, which must
    not come back with the angles of positions ``0, 1, ...``. A correct implementation gives the same rows
    for the same positions whichever way they were asked for.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> import posenc
    >>> def with_offset(x, offset=0):
    ...     return posenc.rotate(x, offset + np.arange(x.shape[-2]))
    >>> assert_rotary_offset_matches_slice(with_offset)
    >>> assert_rotary_offset_matches_slice(lambda x, offset=0: with_offset(x))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: fn(tail, offset=5) differs from rows 5 to 20 of fn(whole, offset=0)...
    """
    _check_implementation(fn, "fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    seq_len = check_int(seq_len, "seq_len", minimum=1, maximum=4096)
    offset = check_int(offset, "offset", minimum=1, maximum=4096)
    atol = check_real(atol, "atol", above=0.0)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    whole = np.random.default_rng(seed).standard_normal((offset + seq_len, head_dim))
    tail = whole[offset:]
    scale = float(np.abs(whole).max())

    _rotate_at_offset(fn, tail, 0, "fn(tail, offset=0)")  # fills a cache keyed on the length, if there is one
    full = _rotate_at_offset(fn, whole, 0, "fn(whole, offset=0)")
    shifted = _rotate_at_offset(fn, tail, offset, f"fn(tail, offset={offset})")
    error = np.abs(shifted - full[offset:]) / scale
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= atol:
        return
    row = int(np.argmax(error.max(axis=1)))
    unrotated = np.abs(shifted - _rotate_at_offset(fn, tail, 0, "fn(tail, offset=0)")).max() / scale
    hint = (
        " It equals fn(tail, offset=0): the offset is ignored, for instance by a cache keyed on the length alone."
        if unrotated <= atol
        else ""
    )
    raise AssertionError(
        f"fn(tail, offset={offset}) differs from rows {offset} to {offset + seq_len - 1} of fn(whole, offset=0) "
        f"by up to {error.max():.3g} (relative to max |x|; atol {atol:g}), first at tail row {row} "
        f"(position {offset + row}).{hint}"
    )


def assert_rotary_calls_independent(
    fn: Implementation,
    *,
    head_dim: int = 64,
    short_len: int = 16,
    long_len: int = 4096,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    r"""Check that a rotary call gives the same result before and after a long call: no stale state.

    Parameters
    ----------
    fn : callable
        ``fn(x, offset=0)`` as in :func:`assert_rotary_offset_matches_slice`.
    head_dim : int, default 64
        Width of one head; even, at most 4096.
    short_len : int, default 16
        Length of the short input; between 1 and 4096.
    long_len : int, default 4096
        Length of the long input, longer than ``short_len``; at most ``2**16``, with
        ``long_len * head_dim`` at most ``2**22``.
    atol : float, default 1e-6
        Largest accepted difference between the two short calls, relative to the largest entry of ``x``.
    seed : int, default 0
        Seed of the random input.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If the short call returns something else after the long call, or if ``fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    A rotary module may cache its frequencies and tables, and context-extension schemes such as dynamic NTK
    scaling change the frequencies with the length. Either way the result for a given input and offset must
    not depend on what was called before: a frequency enlarged for a long prompt and kept for the next short
    one changes every angle of the short one.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> import posenc
    >>> assert_rotary_calls_independent(lambda x, offset=0: posenc.rotate(x, offset + np.arange(len(x))))
    """
    _check_implementation(fn, "fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    short_len = check_int(short_len, "short_len", minimum=1, maximum=4096)
    long_len = check_int(long_len, "long_len", minimum=2, maximum=2**16)
    if long_len <= short_len:
        raise ValueError(f"long_len must be greater than short_len = {short_len}, got {long_len}")
    if long_len * head_dim > _MAX_CHECK_ELEMENTS:
        raise ValueError(f"long_len x head_dim must be at most {_MAX_CHECK_ELEMENTS}, got {long_len} x {head_dim}")
    atol = check_real(atol, "atol", above=0.0)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    rng = np.random.default_rng(seed)
    short, long = rng.standard_normal((short_len, head_dim)), rng.standard_normal((long_len, head_dim))
    scale = float(np.abs(short).max())

    before = _rotate_at_offset(fn, short, 0, f"fn(x of length {short_len})")
    _rotate_at_offset(fn, long, 0, f"fn(x of length {long_len})")
    after = _rotate_at_offset(fn, short, 0, f"fn(x of length {short_len}) after the long call")
    error = np.abs(after - before) / scale
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= atol:
        return
    row = int(np.argmax(error.max(axis=1)))
    raise AssertionError(
        f"fn on the same {short_len}-position input returned different rows before and after a call of length "
        f"{long_len}: up to {error.max():.3g} apart (relative to max |x|; atol {atol:g}), first at position {row}. "
        f"State from the long call (an enlarged base or a cached table) leaks into the short one."
    )


def assert_rotary_uses_sequence_axis(
    fn: Implementation,
    *,
    head_dim: int = 64,
    seq_len: int = 8,
    n_heads: int = 4,
    batch: int = 2,
    base: float = 10000.0,
    layout: RotaryLayout = "interleaved",
    atol: float = 1e-5,
    seed: int = 0,
) -> None:
    r"""Check that a batch-first tensor ``(batch, seq, heads, head_dim)`` is rotated along ``seq``, not ``heads``.

    Parameters
    ----------
    fn : callable
        ``fn(x)`` rotates ``x`` of shape ``(batch, seq, heads, head_dim)`` (the layout of Meta's Llama code and
        flash-attn), row ``s`` of axis 1 at position ``s``, and returns the same shape; a ``torch.nn.Module``
        such as ``posenc.nn.RotaryEmbedding(head_dim, seq_dim=1)`` gets a float32 tensor.
    head_dim : int, default 64
        Width of one head; even, at most 4096.
    seq_len : int, default 8
        Length of the sequence; between 2 and 4096.
    n_heads : int, default 4
        Number of heads, all identical copies; between 2 and 64.
    batch : int, default 2
        Batch size; between 1 and 64. ``batch * seq_len * n_heads * head_dim`` is at most ``2**22``.
    base : float, default 10000.0
        The rotary base; greater than 1.
    layout : {"interleaved", "halves"}, default "interleaved"
        How ``fn`` pairs dimensions.
    atol : float, default 1e-5
        Largest accepted difference, relative to the largest entry of ``x``.
    seed : int, default 0
        Seed of the random input.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If the heads of the result differ (``fn`` rotated along the heads axis), if a row is not the float64
        rotation at its sequence position, or if ``fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    A rotary implementation written for ``(..., seq, head_dim)`` accepts a ``(batch, seq, heads, head_dim)``
    tensor without complaint, and rotates row ``h`` of axis 2 by position ``h``: the heads get the positions
    and every token of one head the same angle. Nothing fails; attention merely stops seeing order. The
    check makes every head an identical copy of its token's vector: a correct implementation returns
    identical heads, each the rotation at the token's position, and one that rotates along the heads
    returns heads that differ.

    Examples
    --------
    >>> import posenc
    >>> assert_rotary_uses_sequence_axis(lambda x: posenc.rotate(x.swapaxes(1, 2), x.shape[1]).swapaxes(1, 2))
    >>> assert_rotary_uses_sequence_axis(lambda x: posenc.rotate(x, x.shape[-2]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: fn rotated x of shape (batch, seq, heads, head_dim) = (2, 8, 4, 64) whose heads are ...
    """
    _check_implementation(fn, "fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    seq_len = check_int(seq_len, "seq_len", minimum=2, maximum=4096)
    n_heads = check_int(n_heads, "n_heads", minimum=2, maximum=64)
    batch = check_int(batch, "batch", minimum=1, maximum=64)
    if batch * seq_len * n_heads * head_dim > _MAX_CHECK_ELEMENTS:
        raise ValueError(
            f"batch x seq_len x n_heads x head_dim must be at most {_MAX_CHECK_ELEMENTS}, got "
            f"{batch} x {seq_len} x {n_heads} x {head_dim}"
        )
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    atol = check_real(atol, "atol", above=0.0)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    tokens = np.random.default_rng(seed).standard_normal((batch, seq_len, head_dim))
    x = np.repeat(tokens[:, :, None, :], n_heads, axis=2)  # (batch, seq, heads, head_dim), heads identical
    scale = float(np.abs(x).max())
    shape = (batch, seq_len, n_heads, head_dim)
    description = f"fn(x of shape (batch, seq, heads, head_dim) = {shape})"
    out = _as_array(_call(fn, description, _tensor(x, "float32") if _is_torch_module(fn) else x.copy()), description)
    _expect_shape(out, shape, description)

    spread = np.abs(out - out[:, :, :1, :]).max(axis=(0, 1, 3)) / scale
    spread = np.where(np.isfinite(spread), spread, np.inf)
    if spread.max() > atol:
        head = int(np.argmax(spread > atol))
        raise AssertionError(
            f"fn rotated x of shape (batch, seq, heads, head_dim) = {shape} whose heads are identical copies, and "
            f"head {head} came out different from head 0 by up to {spread.max():.3g} (relative to max |x|; atol "
            f"{atol:g}): it rotates along axis 2, the heads, as if x were (..., seq, head_dim). Likely cause: a "
            "batch-first tensor given to code that takes the sequence axis to be the one before head_dim. Say "
            "where the sequence axis is (posenc.nn.RotaryEmbedding(..., seq_dim=1)) or transpose x to "
            "(batch, heads, seq, head_dim) first."
        )
    want = posenc.rotate(tokens, np.arange(seq_len, dtype=np.float64), base=base, layout=layout)
    error = np.abs(out - want[:, :, None, :]) / scale
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= atol:
        return
    row = int(np.argmax(error.max(axis=(0, 2, 3))))
    by_batch = posenc.rotate(tokens.swapaxes(0, 1), np.arange(batch, dtype=np.float64), base=base, layout=layout)
    hint = (
        " It is the rotation by batch index: fn rotates along axis 0, the batch."
        if batch > 1 and np.abs(out - by_batch.swapaxes(0, 1)[:, :, None, :]).max() / scale <= atol
        else " Check the base, the layout and the frequencies."
    )
    raise AssertionError(
        f"{description} returned identical heads, but row {row} of axis 1 is not rotated by position {row}: it "
        f"differs from the float64 rotation (layout {layout!r}, base {base:g}) by up to {error.max():.3g} "
        f"(relative to max |x|; atol {atol:g}).{hint}"
    )


def assert_layouts_agree_after_permutation(
    convert_fn: Implementation,
    *,
    head_dim: int = 8,
    n_heads: int = 2,
    source: RotaryLayout = "interleaved",
    target: RotaryLayout = "halves",
    d_in: int = 16,
    base: float = 10000.0,
    seed: int = 0,
) -> None:
    r"""Check that a weight conversion between rotary layouts keeps every attention score.

    Parameters
    ----------
    convert_fn : callable
        ``convert_fn(weight)`` takes the ``(n_heads * head_dim, d_in)`` weight of a query or key projection
        written for the ``source`` layout and returns the weight for a model that rotates in the ``target``
        layout (same shape). Bind the head count yourself, e.g. ``lambda w: permute(w, n_heads=2)``.
    head_dim : int, default 8
        Width of one head; even, at most 1024.
    n_heads : int, default 2
        Heads in the weight (for a key projection with grouped-query attention, the key-value heads);
        between 1 and 64.
    source, target : {"interleaved", "halves"}
        Layout of the model the weight comes from, and of the model it goes to.
    d_in : int, default 16
        Input width of the projection; between 1 and 1024.
    base : float, default 10000.0
        The rotary base; greater than 1.
    seed : int, default 0
        Seed of the random weights and tokens.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If, for some head, the query-key scores of the converted model differ from the original's (the
        message names the head and gives the row order that would work), or if ``convert_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    Rotary embedding pairs dimensions ``(2i, 2i + 1)`` in the interleaved layout and ``(i, i + d/2)`` in
    the halves layout. Reordering the output rows of the query and key projections within each head with
    :func:`posenc.rotary_weight_permutation` moves each pair to where the other layout expects it, and every
    score :math:`(R_m W_q x)^\top (R_n W_k y)` stays the same. The check computes the scores of random tokens
    at scattered positions for each head, both ways, in float64.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864.

    Examples
    --------
    >>> import posenc
    >>> order = posenc.rotary_weight_permutation("interleaved", "halves", 8, n_heads=2)
    >>> assert_layouts_agree_after_permutation(lambda w: w[order])
    >>> assert_layouts_agree_after_permutation(lambda w: w)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: after convert_fn, head 0's attention scores differ...
    """
    _check_implementation(convert_fn, "convert_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=1024, even=True)
    n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=64)
    source = check_choice(source, "source", ROTARY_LAYOUTS)
    target = check_choice(target, "target", ROTARY_LAYOUTS)
    d_in = check_int(d_in, "d_in", minimum=1, maximum=1024)
    base = check_real(base, "base", above=1.0)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    rng = np.random.default_rng(seed)
    rows = n_heads * head_dim
    w_query, w_key = rng.standard_normal((2, rows, d_in)) / math.sqrt(d_in)
    tokens = rng.standard_normal((6, d_in))
    positions = np.array([0.0, 1.0, 2.0, 9.0, 130.0, 2047.0])

    converted = []
    for name, weight in (("query", w_query), ("key", w_key)):
        call = f"convert_fn({name} weight of shape {weight.shape})"
        out = _as_array(_call(convert_fn, call, weight.copy()), call)
        _expect_shape(out, weight.shape, call)
        converted.append(out)

    def head_scores(wq: NDArray[np.float64], wk: NDArray[np.float64], layout: RotaryLayout) -> NDArray[np.float64]:
        q = (tokens @ wq.T).reshape(len(tokens), n_heads, head_dim).transpose(1, 0, 2)
        k = (tokens @ wk.T).reshape(len(tokens), n_heads, head_dim).transpose(1, 0, 2)
        q = posenc.rotate(q, positions, base=base, layout=layout)
        k = posenc.rotate(k, positions, base=base, layout=layout)
        scores: NDArray[np.float64] = q @ k.transpose(0, 2, 1)  # (n_heads, tokens, tokens)
        return scores

    want = head_scores(w_query, w_key, source)
    got = head_scores(converted[0], converted[1], target)
    scale = float(np.abs(want).max())
    error = np.abs(got - want) / scale
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= 1e-9:
        return
    head = int(np.argmax(error.reshape(n_heads, -1).max(axis=1)))
    order = posenc.rotary_weight_permutation(source, target, head_dim, n_heads=n_heads)
    shown = np.array2string(order[:head_dim], separator=", ", threshold=16)
    raise AssertionError(
        f"after convert_fn, head {head}'s attention scores differ from the {source} model's by up to "
        f"{error.max():.3g} of the largest score ({int((error.reshape(n_heads, -1).max(axis=1) > 1e-9).sum())} "
        f"of {n_heads} heads wrong). Going from {source} to {target} with head_dim {head_dim} and {n_heads} "
        f"heads, each head's rows must be reordered within the head, as "
        f"posenc.rotary_weight_permutation({source!r}, {target!r}, {head_dim}, n_heads={n_heads}) does "
        f"(first head: {shown}); check the head count used by the conversion."
    )


# --- ALiBi and T5 ----------------------------------------------------------------------------------------


def assert_alibi_slopes_match_reference(slopes_fn: Implementation, *, max_heads: int = 64, rtol: float = 1e-6) -> None:
    r"""Check ``slopes_fn(n)`` against the ALiBi slopes for every head count ``n = 1, ..., max_heads``.

    Parameters
    ----------
    slopes_fn : callable
        ``slopes_fn(n_heads)`` returns the ``(n_heads,)`` slopes (array, list or tensor).
    max_heads : int, default 64
        The largest head count tried; between 1 and 1024.
    rtol : float, default 1e-6
        Largest accepted relative difference of a slope.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        For the first head count whose slopes differ (the message shows both sequences) or for which
        ``slopes_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    For a power of two ``n`` the slopes are the geometric sequence :math:`2^{-8/n}, 2^{-16/n}, \dots,
    2^{-8}`. For other ``n``, Press et al. take the slopes of the largest power of two :math:`2^k < n` and
    then every other slope of :math:`2^{k+1}` heads until there are ``n``, as their reference code does;
    the plain sequence :math:`2^{-8i/n}` is a different set of slopes. The reference is
    :func:`posenc.alibi_slopes`.

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409.

    Examples
    --------
    >>> import posenc
    >>> assert_alibi_slopes_match_reference(posenc.alibi_slopes)
    >>> plain = lambda n: 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
    >>> assert_alibi_slopes_match_reference(plain)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: slopes_fn(3) returned [...] but ALiBi's slopes for 3 heads are [...]...
    """
    _check_implementation(slopes_fn, "slopes_fn")
    max_heads = check_int(max_heads, "max_heads", minimum=1, maximum=1024)
    rtol = check_real(rtol, "rtol", above=0.0)
    for n_heads in range(1, max_heads + 1):
        call = f"slopes_fn({n_heads})"
        got = _as_array(_call(slopes_fn, call, n_heads), call).reshape(-1)
        want = posenc.alibi_slopes(n_heads)
        if got.shape == want.shape and np.all(np.abs(got - want) <= rtol * np.abs(want)):
            continue
        raise AssertionError(
            f"{call} returned {_show(got)} but ALiBi's slopes for {n_heads} heads are {_show(want)} "
            f"(rtol {rtol:g}). When n_heads is not a power of two, ALiBi takes the slopes of the largest power "
            f"of two below it, then every other slope of twice that many heads."
        )


def _t5_sides(bidirectional: bool, num_buckets: int) -> tuple[int, int]:
    """(buckets of one side, max_exact) of a T5 configuration."""
    side = num_buckets // 2 if bidirectional else num_buckets
    return side, side // 2


def t5_float32_boundaries(
    relative_position: ArrayLike, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> NDArray[np.bool_]:
    r"""Where T5's float32 formula may give either of two buckets: distances on a bucket boundary.

    Parameters
    ----------
    relative_position : int or array_like of int
        ``key position - query position``, any shape, as for :func:`posenc.t5_relative_bucket`.
    bidirectional, num_buckets, max_distance
        The configuration, as for :func:`posenc.t5_relative_bucket` (which validates them).

    Returns
    -------
    on_boundary : ndarray of bool, the shape of ``relative_position``
        ``True`` where the exact log term :math:`\ln(n/E)/\ln(D/E)\,(B - E)` of the distance ``n`` lies within
        float32 rounding of an integer :math:`k` with :math:`1 \le k < B - E`. There an evaluation in float32
        (T5's code) may land on either side of :math:`k`, so its bucket is the exact one or its neighbour,
        depending on the last bit of the float32 logarithm of the machine.

    Notes
    -----
    The float32 evaluation ``log(float32(n) / E) / log(D / E) * (B - E)`` errs by at most a few units in
    the last place of each step: about :math:`2^{-23}(B - E)/\ln(D/E) + 2^{-22}\,t` for a term :math:`t`.
    This function flags a distance when the term, evaluated in float64, is within
    :math:`2^{-20}\,((B - E)/\ln(D/E) + t)` of an integer: eight times that bound, and about :math:`10^{8}`
    times the float64 error of the flagging itself, so a flag does not depend on the machine either.
    Distances from ``max_distance`` on are never flagged: every evaluation clamps them to the last bucket.

    Examples
    --------
    >>> import numpy as np
    >>> n = np.arange(1, 129)
    >>> n[t5_float32_boundaries(-n)]  # T5's defaults: log terms exactly 2, 4 and 6
    array([16, 32, 64])
    """
    # The bucket function validates every argument, relative_position included, with the messages it documents.
    posenc.t5_relative_bucket(
        relative_position, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    bidirectional, num_buckets, max_distance = bool(bidirectional), int(num_buckets), int(max_distance)
    relative = np.asarray(relative_position)
    if relative.dtype == object or np.issubdtype(relative.dtype, np.unsignedinteger):  # beyond int64
        relative = np.vectorize(lambda v: max(-max_distance, min(max_distance, int(v))), otypes=[np.int64])(relative)
    relative = np.clip(relative.astype(np.int64), -max_distance, max_distance)
    side, max_exact = _t5_sides(bidirectional, num_buckets)
    n_log = side - max_exact
    distance = np.abs(relative) if bidirectional else -np.minimum(relative, 0)
    log_ratio = math.log(max_distance / max_exact)
    with np.errstate(divide="ignore"):
        term = np.log(np.maximum(distance, 1) / max_exact) / log_ratio * n_log
    nearest = np.rint(term)
    margin = 2.0**-20 * (n_log / log_ratio + np.abs(term))
    on_boundary = (
        (distance > max_exact)
        & (distance < max_distance)
        & (nearest >= 1)
        & (nearest < n_log)
        & (np.abs(term - nearest) <= margin)
    )
    return np.asarray(on_boundary)  # a 0-d array, not a NumPy scalar, for a scalar input


def _t5_offsets(max_distance: int) -> NDArray[np.int64]:
    """Every offset within ``4 * max_distance`` of the query and a few far larger ones, as int64."""
    reach = 4 * max_distance
    far = [-(10**9), -(10**6), -(10**4), 10**4, 10**6, 10**9]
    return np.concatenate([np.arange(-reach, reach + 1), far]).astype(np.int64)


def _t5_check_arguments(
    bucket_fn: Implementation, bidirectional: object, num_buckets: object, max_distance: object
) -> dict[str, Any]:
    _check_implementation(bucket_fn, "bucket_fn")
    bidirectional = check_flag(bidirectional, "bidirectional")
    num_buckets = check_int(num_buckets, "num_buckets", minimum=2, maximum=1024)
    max_distance = check_int(max_distance, "max_distance", minimum=2, maximum=2**20)
    return dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)


def _t5_buckets_of(
    bucket_fn: Implementation, offsets: NDArray[np.int64], kwargs: dict[str, Any]
) -> tuple[str, NDArray[np.float64]]:
    """``bucket_fn``'s buckets of ``offsets`` under ``kwargs``, and the call as the messages name it."""
    call = (
        f"bucket_fn(offsets, bidirectional={kwargs['bidirectional']}, num_buckets={kwargs['num_buckets']}, "
        f"max_distance={kwargs['max_distance']})"
    )
    got = _as_array(_call(bucket_fn, call, offsets.copy(), **kwargs), call)
    _expect_shape(got, offsets.shape, call)
    return call, got


def _t5_first_wrong(wrong: NDArray[np.bool_], offsets: NDArray[np.int64]) -> int:
    """The index of the offset nearest the query among those marked ``wrong``."""
    candidates = np.flatnonzero(wrong)
    return int(candidates[np.argmin(np.abs(offsets[candidates]))])


def assert_t5_buckets_in_range(
    bucket_fn: Implementation, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> None:
    r"""Check that T5 relative-position buckets lie in ``[0, num_buckets)`` and match T5's, far past ``max_distance``.

    Parameters
    ----------
    bucket_fn : callable
        ``bucket_fn(relative_position, bidirectional=..., num_buckets=..., max_distance=...)`` maps an int64
        array of ``key - query`` offsets to an array of buckets of the same shape, as
        :func:`posenc.t5_relative_bucket` and Hugging Face's ``T5Attention._relative_position_bucket`` do.
    bidirectional : bool, default True
        Encoder-style (both signs get their own buckets) or decoder-style (positive offsets share bucket 0).
    num_buckets : int, default 32
        Number of buckets; between 2 and 1024 (even when bidirectional).
    max_distance : int, default 128
        Offsets this far or farther share the last bucket of their side; between 2 and ``2**20``, greater
        than the exact-bucket range.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If a bucket falls outside ``[0, num_buckets)`` (the message gives the offset) or differs from T5's,
        or if ``bucket_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    Half of a side's buckets hold one offset each; the other half cover offsets up to ``max_distance`` on a
    logarithmic scale, and everything beyond must be clamped to the last bucket. Without the clamp, large
    offsets get bucket numbers past the end, or spill into the buckets of the other sign. The check tries
    every offset within ``4 * max_distance`` and a few far larger ones. The reference is
    :func:`posenc.t5_relative_bucket`; at the offsets :func:`t5_float32_boundaries` flags, a bucket one
    away from it is accepted too, as T5's float32 code gives either there (:func:`assert_t5_buckets_exact`
    checks those offsets).

    References
    ----------
    .. [1] C. Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
       Transformer", JMLR 2020, arXiv:1910.10683.

    Examples
    --------
    >>> import posenc
    >>> assert_t5_buckets_in_range(posenc.t5_relative_bucket)
    """
    kwargs = _t5_check_arguments(bucket_fn, bidirectional, num_buckets, max_distance)
    num_buckets = kwargs["num_buckets"]
    offsets = _t5_offsets(kwargs["max_distance"])
    want = posenc.t5_relative_bucket(offsets, **kwargs)  # validates the combination of arguments
    call, got = _t5_buckets_of(bucket_fn, offsets, kwargs)
    outside = (got < 0) | (got >= num_buckets) | ~np.isfinite(got)
    if outside.any():
        i = _t5_first_wrong(outside, offsets)
        raise AssertionError(
            f"{call} puts offset {offsets[i]} in bucket {got[i]:g}, outside 0..{num_buckets - 1} "
            f"({int(outside.sum())} of {len(offsets)} offsets outside; T5's bucket is {want[i]}). Offsets of "
            f"max_distance or more must be clamped to the last bucket of their side."
        )
    wrong = (got != want) & ~((np.abs(got - want) == 1) & t5_float32_boundaries(offsets, **kwargs))
    if wrong.any():
        i = _t5_first_wrong(wrong, offsets)
        raise AssertionError(
            f"{call} puts offset {offsets[i]} in bucket {got[i]:g}, T5 puts it in {want[i]} ({int(wrong.sum())} "
            f"of {len(offsets)} offsets differ). Offsets of max_distance or more must be clamped to the last "
            f"bucket of their side, not spill past it."
        )


def assert_t5_buckets_exact(
    bucket_fn: Implementation, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> None:
    r"""Check that T5 buckets are the exact ones at every offset, bucket boundaries included.

    Parameters
    ----------
    bucket_fn : callable
        As for :func:`assert_t5_buckets_in_range`.
    bidirectional : bool, default True
        Encoder-style or decoder-style buckets.
    num_buckets : int, default 32
        Number of buckets; between 2 and 1024 (even when bidirectional).
    max_distance : int, default 128
        Between 2 and ``2**20``, greater than the exact-bucket range.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If a bucket differs from the exact value of T5's formula (:func:`posenc.t5_relative_bucket`); the
        message says whether the offset is one of those :func:`t5_float32_boundaries` flags.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    T5's bucket is the floor of a logarithmic term. Where that term is an integer (with the defaults, at
    distances 16, 32 and 64 of a bidirectional side) or within float32 rounding of one, an implementation
    that evaluates it in floating point returns the exact bucket or the one below or above it, depending on
    the last bit of its logarithm; the same code and checkpoint then put a few distances in other buckets on
    another processor. This check passes only an implementation whose buckets are exact, which makes them
    the same on every machine: :func:`posenc.t5_relative_bucket` decides the boundaries in integer
    arithmetic. Every offset within ``4 * max_distance`` is tried, and a few far larger ones.

    Examples
    --------
    >>> import posenc
    >>> assert_t5_buckets_exact(posenc.t5_relative_bucket, num_buckets=34, max_distance=27)
    """
    kwargs = _t5_check_arguments(bucket_fn, bidirectional, num_buckets, max_distance)
    offsets = _t5_offsets(kwargs["max_distance"])
    want = posenc.t5_relative_bucket(offsets, **kwargs)
    call, got = _t5_buckets_of(bucket_fn, offsets, kwargs)
    wrong = got != want
    if not wrong.any():
        return
    i = _t5_first_wrong(wrong, offsets)
    on_boundary = t5_float32_boundaries(offsets, **kwargs)
    side, max_exact = _t5_sides(kwargs["bidirectional"], kwargs["num_buckets"])
    where = (
        f"There the log term ln(n/{max_exact}) / ln({kwargs['max_distance']}/{max_exact}) * {side - max_exact} "
        f"is an integer or within float32 rounding of one, so a floating-point evaluation gives either bucket, "
        f"depending on the processor's logarithm; decide the boundaries in exact arithmetic."
        if on_boundary[i]
        else "That offset is not on a bucket boundary: the formula itself differs."
    )
    raise AssertionError(
        f"{call} puts offset {offsets[i]} in bucket {got[i]:g}, the exact bucket is {want[i]} "
        f"({int(wrong.sum())} of {len(offsets)} offsets differ, {int((wrong & on_boundary).sum())} of them on a "
        f"bucket boundary). {where}"
    )


# --- Checks added for the bugs of 2024-2026 --------------------------------------------------------------------


def _alibi_bias_of(fn: Implementation, n_heads: int, q_len: int, k_len: int) -> NDArray[np.float64]:
    """``fn(q_len, k_len)`` as a float64 ``(n_heads, q_len, k_len)`` array, broadcast as attention would add it."""
    call = f"bias_fn({q_len}, {k_len})"
    bias = _as_array(_call(fn, call, q_len, k_len), call)
    while bias.ndim > 3 and bias.shape[0] == 1:  # a batch axis of one
        bias = bias[0]
    try:
        return np.broadcast_to(bias, (n_heads, q_len, k_len))
    except ValueError as error:
        raise AssertionError(
            f"{call} returned shape {bias.shape}, which does not broadcast to (n_heads, q_len, k_len) = "
            f"({n_heads}, {q_len}, {k_len}): the bias must cover every key of the cache, not only the queries"
        ) from error


def _centred_rows(bias: NDArray[np.float64], visible: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``bias`` minus the mean of each row over its visible keys (a constant per row, which softmax ignores)."""
    finite_visible = np.where(visible, bias, 0.0)
    mean = finite_visible.sum(axis=-1, keepdims=True) / visible.sum(axis=-1, keepdims=True)
    centred: NDArray[np.float64] = np.where(visible, bias - mean, 0.0)
    return centred


def assert_alibi_offset_matches_slice(
    bias_fn: Implementation,
    *,
    n_heads: int = 8,
    k_len: int = 16,
    q_lens: Sequence[int] = (1, 3),
    atol: float = 1e-5,
) -> None:
    r"""Check that the ALiBi bias of the last queries of a cache is the slice of the whole sequence's bias.

    Parameters
    ----------
    bias_fn : callable
        ``bias_fn(q_len, k_len)`` returns the bias added to the attention scores of the last ``q_len`` queries
        (positions ``k_len - q_len, ..., k_len - 1``) against all ``k_len`` keys (positions ``0, ..., k_len -
        1``), the way a decoding step with a key-value cache uses it: an array or tensor that broadcasts to
        ``(n_heads, q_len, k_len)``, with leading batch axes of size 1 allowed. :class:`posenc.nn.ALiBiBias`
        passes as it is; ``functools.partial(posenc.alibi_bias, n_heads)`` too.
    n_heads : int, default 8
        Number of heads, between 1 and 1024; head ``h`` must use ALiBi's slope
        (:func:`posenc.alibi_slopes`).
    k_len : int, default 16
        Length of the cache, queries included; between 2 and 4096, with ``n_heads * k_len**2`` at most
        ``2**22``.
    q_lens : sequence of ints, default (1, 3)
        The query lengths tried, each between 1 and ``k_len``; 1 is one decoding step.
    atol : float, default 1e-5
        Largest accepted difference, relative to the largest bias :math:`\max_h m_h\,(k_len - 1)`.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If for some ``q_len`` a head's bias differs from ALiBi's :math:`-m_h\,(i - j)` at a key the query
        sees, after removing a constant per query row (the message names the call, the query's position, the
        head and the key, and says whether the bias is constant along the keys), if the result does not
        broadcast to ``(n_heads, q_len, k_len)``, or if ``bias_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    ALiBi adds :math:`-m_h\,(i - j)` to the score of query position :math:`i` and key position :math:`j`
    [1]_. During cached decoding the query is the last position of the cache, not position 0: a bias built
    over the query's own window, or with the query's offset dropped, gives the row of the wrong position.
    For a single query such a row is often constant (:math:`m_h \cdot 0` broadcast over the cache), so that
    the model decodes with no positional bias at all while the full-sequence pass, and every test that runs
    only it, is right. Only keys :math:`j \le i` are compared (what a causal mask adds elsewhere is free),
    and a constant per query row is allowed: softmax ignores it, which is why implementations that add
    :math:`m_h\,j` (BLOOM's and Falcon's form) are equivalent to the paper's.

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409.

    Examples
    --------
    >>> import functools, posenc
    >>> assert_alibi_offset_matches_slice(functools.partial(posenc.alibi_bias, 8))
    >>> def window_only(q_len, k_len):  # built over the queries alone, positions 0 .. q_len - 1
    ...     return posenc.alibi_slopes(8)[:, None, None] * np.arange(q_len)
    >>> assert_alibi_offset_matches_slice(window_only)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: bias_fn(1, 16): the bias of query position 15, head 0 (slope 0.5)...constant along the keys...
    """
    _check_implementation(bias_fn, "bias_fn")
    n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=1024)
    k_len = check_int(k_len, "k_len", minimum=2, maximum=4096)
    if n_heads * k_len * k_len > _MAX_CHECK_ELEMENTS:
        raise ValueError(f"n_heads x k_len**2 must be at most {_MAX_CHECK_ELEMENTS}, got {n_heads} x {k_len}**2")
    lengths = _check_int_sequence(q_lens, "q_lens", low=1, high=k_len)
    atol = check_real(atol, "atol", above=0.0)
    slopes = posenc.alibi_slopes(n_heads)
    scale = float(slopes.max()) * (k_len - 1)
    for q_len in (int(n) for n in lengths):
        offset = k_len - q_len
        got = _alibi_bias_of(bias_fn, n_heads, q_len, k_len)
        want = posenc.alibi_bias(n_heads, q_len, k_len)
        visible = np.broadcast_to(np.arange(k_len)[None, :] <= offset + np.arange(q_len)[:, None], got.shape)
        finite = np.isfinite(got) | ~visible
        error = np.abs(_centred_rows(np.where(finite, got, 0.0), visible) - _centred_rows(want, visible)) / scale
        error = np.where(finite, error, np.inf)
        if error.max() <= atol:
            continue
        head, row, key = np.unravel_index(int(np.argmax(error)), error.shape)
        row_got = got[head, row][visible[head, row]]
        flat = bool(np.isfinite(row_got).all() and np.ptp(row_got) <= atol * scale)
        hint = (
            " The bias is constant along the keys: it adds no position information, as a bias built over the "
            "queries alone does for one query (slope x 0, broadcast over the cache)."
            if flat
            else " A bias computed as if the queries started at position 0 (the cache's length dropped) "
            "gives rows of this kind."
        )
        raise AssertionError(
            f"bias_fn({q_len}, {k_len}): the bias of query position {offset + row}, head {head} (slope "
            f"{slopes[head]:.6g}), differs from ALiBi's -slope x (i - j) by up to {error.max():.3g} of the "
            f"largest bias {scale:.4g} (atol {atol:g}), worst at key {key}, after removing a constant per row; "
            f"the row over keys 0..{offset + row} is {_show(row_got)}, ALiBi's is "
            f"{_show(want[head, row][visible[head, row]])}.{hint}"
        )


def _yarn_factor_hint(measured: float, scaling: object, rtol: float) -> str:
    """Which known mistake a measured factor matches, for a YaRN scaling; "" if none does."""

    def get(key: str) -> object:
        if isinstance(scaling, posenc.RopeScaling):
            return getattr(scaling, key, None)
        return scaling.get(key) if isinstance(scaling, Mapping) else None

    rope_type = get("rope_type") if get("rope_type") is not None else get("type")
    factor, mscale, mscale_all_dim = get("factor"), get("mscale"), get("mscale_all_dim")
    if rope_type != "yarn" or not isinstance(factor, (int, float)) or get("attention_factor") is not None:
        return ""

    def m(coefficient: float) -> float:  # YaRN's 0.1 * coefficient * ln(s) + 1
        return 1.0 if factor <= 1.0 else 0.1 * coefficient * math.log(factor) + 1.0

    known = [(1.0, "1: no attention factor at all, the rotated q and k keep their length")]
    if isinstance(mscale, (int, float)) and isinstance(mscale_all_dim, (int, float)) and mscale and mscale_all_dim:
        known = [
            (m(1.0), "0.1 ln(s) + 1, as if mscale and mscale_all_dim were absent: they were dropped on the way"),
            (m(mscale), "0.1 mscale ln(s) + 1, where the ratio of mscale's term to mscale_all_dim's was due"),
            *known,
        ]
    for value, what in known:
        if abs(measured - value) <= rtol * value:
            return f" The measured factor is {what}."
    return ""


def assert_yarn_attention_factor(
    rotate_fn: Implementation,
    scaling: posenc.RopeScaling | Mapping[str, object] | None,
    *,
    head_dim: int = 64,
    n_positions: int = 64,
    rtol: float = 1e-5,
    seed: int = 0,
) -> None:
    r"""Check the factor a rotary implementation multiplies q and k by against the scaling's attention factor.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions)`` rotates ``x`` ``(seq, head_dim)`` at ``positions`` ``(seq,)`` with the
        scaling ``scaling`` and returns the same shape (a ``torch.nn.Module`` gets ``positions=``), as
        :func:`assert_rotary_angles_accurate` calls it.
    scaling : RopeScaling, dict or None
        The scaling ``rotate_fn`` was configured with, as :func:`posenc.rotary_attention_factor` takes it
        (a transformers-style ``rope_parameters`` dict, for instance a YaRN one with ``"mscale"`` and
        ``"mscale_all_dim"``).
    head_dim : int, default 64
        Width of one head; even, at most 4096.
    n_positions : int, default 64
        Positions ``0, ..., n_positions - 1`` are rotated; at most 4096.
    rtol : float, default 1e-5
        Largest accepted relative difference of the factor.
    seed : int, default 0
        Seed of the random input.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If the length of some rotated row, divided by the length of the input row, differs from
        ``posenc.rotary_attention_factor(scaling)`` by more than ``rtol`` (the message gives both factors and,
        for YaRN, whether the measured one is a known mistake: the mscale coefficients dropped, one used
        alone, or no factor), or if ``rotate_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    A rotation keeps lengths, so whatever changes the length of the rotated query and key is the attention
    factor; the logits :math:`q \cdot k` grow by its square. YaRN's factor is :math:`0.1 \ln s + 1` for a
    scaling factor :math:`s` [1]_; DeepSeek's configurations carry two coefficients, ``mscale`` and
    ``mscale_all_dim``, and transformers (``_compute_yarn_parameters``) and posenc then multiply cos and sin
    by

    .. math::

        \frac{0.1\,\text{mscale} \ln s + 1}{0.1\,\text{mscale\_all\_dim} \ln s + 1},

    which is 1 when the two are equal. DeepSeek's attention applies the square of the second term to its
    softmax scale, a factor of the whole logit that this check does not see. The factor is measured on every
    position, so one that depends on the position is caught too.

    References
    ----------
    .. [1] B. Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models",
       arXiv:2309.00071.

    Examples
    --------
    >>> import posenc
    >>> yarn = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096,
    ...         "mscale": 1.0, "mscale_all_dim": 1.0}
    >>> assert_yarn_attention_factor(lambda x, p: posenc.rotate(x, p, scaling=yarn), yarn)
    >>> plain = {key: yarn[key] for key in ("rope_type", "factor", "original_max_position_embeddings")}
    >>> assert_yarn_attention_factor(lambda x, p: posenc.rotate(x, p, scaling=plain), yarn)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: rotate_fn multiplies the length of q and k by 1.27726..., the attention factor ... is 1...
    """
    _check_implementation(rotate_fn, "rotate_fn")
    expected = posenc.rotary_attention_factor(scaling)
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=4096)
    if n_positions * head_dim > _MAX_CHECK_ELEMENTS:
        raise ValueError(
            f"n_positions x head_dim must be at most {_MAX_CHECK_ELEMENTS}, got {n_positions} x {head_dim}"
        )
    rtol = check_real(rtol, "rtol", above=0.0)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    x = np.random.default_rng(seed).standard_normal((n_positions, head_dim))
    positions = np.arange(n_positions, dtype=np.float64)
    description = f"rotate_fn(x, positions) with positions 0..{n_positions - 1}"
    out = _rotate_with(rotate_fn, x, positions, description)
    measured = np.linalg.norm(out, axis=-1) / np.linalg.norm(x, axis=-1)
    measured = np.where(np.isfinite(measured), measured, np.inf)
    wrong = np.abs(measured - expected) > rtol * expected
    if not wrong.any():
        return
    row = int(np.argmax(np.abs(measured - expected)))
    spread = "" if np.ptp(measured) <= rtol * expected else f" (from {measured.min():.6g} to {measured.max():.6g})"
    raise AssertionError(
        f"rotate_fn multiplies the length of q and k by {measured[row]:.6g}{spread}, the attention factor of this "
        f"scaling is {expected:.6g} (posenc.rotary_attention_factor; rtol {rtol:g}), first at position "
        f"{int(np.argmax(wrong))}: the logits q . k come out {measured[row] ** 2 / expected**2:.4g} times what "
        f"they should be.{_yarn_factor_hint(float(measured[row]), scaling, rtol)}"
    )


_MROPE_AXES = ("time", "height", "width")


def _axis_of_pairs(angles: NDArray[np.float64], atol: float) -> NDArray[np.intp]:
    """For angles ``(3, seq, n_pairs)``, one axis swept at a time: each pair's axis (-1 none, 3 several)."""
    moves = (np.abs(angles) > atol).any(axis=1)  # (3, n_pairs)
    axis = np.where(moves.sum(axis=0) == 1, moves.argmax(axis=0), np.where(moves.any(axis=0), 3, -1))
    return np.asarray(axis, dtype=np.intp)


def assert_mrope_axes_match(
    rotate_fn: Implementation,
    mrope_section: Sequence[int],
    *,
    assignment: posenc.MRopeAssignment = "chunked",
    head_dim: int = 128,
    base: float = 10000.0,
    layout: RotaryLayout = "interleaved",
    atol: float = 1e-5,
) -> None:
    r"""Check which axis (time, height, width) each rotated pair of a multimodal rotary embedding follows.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions)`` rotates ``x`` ``(seq, head_dim)`` by the coordinates ``positions``
        ``(seq, 3)`` (time, height, width of each token) and returns the same shape; a ``torch.nn.Module``
        such as :class:`posenc.nn.MultiAxisRotaryEmbedding` is called ``rotate_fn(x, positions=positions)``.
    mrope_section : sequence of three ints
        The model's ``mrope_section``, as :func:`posenc.mrope_frequencies` takes it.
    assignment : {"chunked", "interleaved"}, default "chunked"
        The model's assignment of pairs to axes: Qwen2-VL's contiguous sections or Qwen3-VL's interleaving.
    head_dim : int, default 128
        Width of one head, all rotated; even, at most 4096.
    base : float, default 10000.0
        ``rope_theta``; greater than 1.
    layout : {"interleaved", "halves"}, default "interleaved"
        How ``rotate_fn`` pairs features, as in :func:`posenc.rotate_multiaxis`.
    atol : float, default 1e-5
        Largest accepted angle error in radians; also the smallest angle counted as a turn.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If some pair turns with another axis than ``mrope_frequencies(head_dim, mrope_section,
        assignment=assignment)`` gives it (the message lists the pairs, and says when the implementation
        follows the other assignment), if an angle is otherwise off by more than ``atol``, or if
        ``rotate_fn`` raises.
    TypeError, ValueError
        If an argument of the check is invalid.

    Notes
    -----
    A text token has equal time, height and width coordinates, so every assignment of pairs to axes gives it
    the same angles: a kernel that follows the wrong assignment is right on text and wrong on images and
    video. The check rotates the unit vector :math:`(1, 0)` in every pair at 16 tokens, three times, moving
    one axis at a time (coordinates 1 to 16 on that axis, 0 on the others), reads each pair's angle and
    compares it with :func:`posenc.rotate_multiaxis` and the frequencies of :func:`posenc.mrope_frequencies`.

    References
    ----------
    .. [1] P. Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of the World at Any
       Resolution", arXiv:2409.12191.

    Examples
    --------
    >>> import posenc
    >>> f = posenc.mrope_frequencies(128, [24, 20, 20], assignment="interleaved")
    >>> assert_mrope_axes_match(lambda x, p: posenc.rotate_multiaxis(x, p, f), [24, 20, 20], assignment="interleaved")
    >>> chunked = posenc.mrope_frequencies(128, [24, 20, 20])
    >>> assert_mrope_axes_match(  # doctest: +ELLIPSIS
    ...     lambda x, p: posenc.rotate_multiaxis(x, p, chunked), [24, 20, 20], assignment="interleaved"
    ... )
    Traceback (most recent call last):
        ...
    AssertionError: ... of 64 pairs follow the wrong axis...the chunked assignment...
    """
    _check_implementation(rotate_fn, "rotate_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    assignment = check_choice(assignment, "assignment", posenc.MROPE_ASSIGNMENTS)
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    atol = check_real(atol, "atol", above=0.0)
    frequencies = posenc.mrope_frequencies(head_dim, mrope_section, assignment=assignment, base=base)
    seq = 16
    x = np.zeros((seq, head_dim))
    first, _ = _pairs(x, layout)
    first[...] = 1.0  # (1, 0) in every pair: the output is (cos, sin) of each angle
    got_angles, want_angles = [], []
    for axis in range(3):
        positions = np.zeros((seq, 3))
        positions[:, axis] = np.arange(1, seq + 1)
        description = f"rotate_fn(x, positions) with {_MROPE_AXES[axis]} 1..{seq}, the other axes 0"
        if _is_torch_module(rotate_fn):
            out = _call(rotate_fn, description, _tensor(x, "float32"), positions=_tensor(positions, "float64"))
        else:
            out = _call(rotate_fn, description, x.copy(), positions.copy())
        out = _as_array(out, description)
        _expect_shape(out, x.shape, description)
        got_cos, got_sin = _pairs(out, layout)
        ref_cos, ref_sin = _pairs(posenc.rotate_multiaxis(x, positions, frequencies, layout=layout), layout)
        got_angles.append(np.arctan2(got_sin, got_cos))
        want_angles.append(np.arctan2(ref_sin, ref_cos))
    got, want = np.array(got_angles), np.array(want_angles)  # (axis, token, pair)
    error = np.abs(_wrap(got - want))
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= atol:
        return
    got_axis, want_axis = _axis_of_pairs(got, atol), _axis_of_pairs(want, atol)
    wrong = np.flatnonzero(got_axis != want_axis)
    names = (*_MROPE_AXES, "several axes")
    if wrong.size == 0:
        worst_axis, token, pair = (int(i) for i in np.unravel_index(int(np.argmax(error)), error.shape))
        raise AssertionError(
            f"every pair follows the right axis, but angles are off by up to {error.max():.3g} rad (atol {atol:g}), "
            f"worst at pair {pair} of token {token} with {_MROPE_AXES[worst_axis]} {token + 1}: check the frequencies "
            f"and the base ({base:g})"
        )
    shown = ", ".join(
        f"pair {i} follows {names[got_axis[i]] if got_axis[i] >= 0 else 'no axis'}, not {names[want_axis[i]]}"
        for i in wrong[:4]
    )
    other: posenc.MRopeAssignment = "interleaved" if assignment == "chunked" else "chunked"
    try:  # the other assignment of the same sections, if they are valid for it
        other_frequencies = posenc.mrope_frequencies(head_dim, mrope_section, assignment=other, base=base)
    except ValueError:
        other_frequencies = None
    hint = ""
    if other_frequencies is not None and np.array_equal(got_axis, np.abs(other_frequencies).argmax(axis=0)):
        hint = (
            f" The pairs follow the {other} assignment of the same sections: the kernel ignores the model's "
            f"{assignment!r} assignment (Qwen2-VL's is chunked, Qwen3-VL's interleaved)."
        )
    more = f" and {wrong.size - 4} more" if wrong.size > 4 else ""
    raise AssertionError(
        f"{wrong.size} of {head_dim // 2} pairs follow the wrong axis for mrope_section {list(mrope_section)} and "
        f"assignment {assignment!r}: {shown}{more}.{hint} Text tokens, whose three "
        f"coordinates are equal, do not show this; images and video do."
    )


# --- A whole model's rotation, from its config -------------------------------------------------------------------

_CONFIG_RTOL = 2.0**-20
"""Angle error allowed per radian of a pair's angle (eight times float32's relative precision), as in
:func:`assert_rotary_angles_accurate`; a pass-through feature may differ by this much relative to the input."""


def _trained_lengths(plan: posenc.RotaryPlan) -> list[int]:
    lengths = {kind.scaling.original_max_position_embeddings or plan.max_position_embeddings for kind in plan.kinds}
    return sorted(length for length in lengths if length is not None) or [4096]


def _config_tolerance(
    kind: posenc.LayerRotary, x: NDArray[np.float64], positions: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per-entry tolerance ``(seq, head_dim)`` of the rotation of ``x`` by ``kind`` at ``positions``."""
    scale = float(np.abs(x).max())
    tolerance = np.full(x.shape, _CONFIG_RTOL * scale)
    if not kind.rotates:
        return tolerance
    part = np.arange(kind.rotary_offset, kind.rotary_offset + kind.rotary_dim)
    if kind.feature_order:
        part = part[np.array(kind.feature_order)]
    half = kind.rotary_dim // 2
    first, second = (part[0::2], part[1::2]) if kind.layout == "interleaved" else (part[:half], part[half:])
    inv_freq = kind.inverse_frequencies(seq_len=float(positions.max()) + 1.0)
    angles = np.abs(np.outer(positions, inv_freq))
    amplitude = np.hypot(x[:, first], x[:, second])
    per_pair = max(1.0, kind.attention_factor) * _CONFIG_RTOL * (amplitude * np.maximum(angles, 1.0) + scale)
    tolerance[:, first] = per_pair
    tolerance[:, second] = per_pair
    return tolerance


def _config_candidates(kind: posenc.LayerRotary, plan: posenc.RotaryPlan) -> list[tuple[posenc.LayerRotary, str]]:
    """Misreadings of a config that implementations are known to make, each with what to say when it matches."""
    from dataclasses import replace

    scaling = kind.scaling
    width = kind.head_dim - kind.rotary_offset
    found: list[tuple[posenc.LayerRotary, str]] = []

    def add(build: Callable[[], posenc.LayerRotary], message: str) -> None:
        try:
            found.append((build(), message))
        except ValueError:  # the misreading is not a rotation posenc can build for this layer
            pass

    if kind.base != 10000.0:
        add(
            lambda: replace(kind, base=10000.0, scaling=replace(scaling, rope_theta=None)),
            f"the default base 10000 in place of the config's {kind.base:g}: rope_theta looked for where the config "
            "does not keep it (transformers v5 writes it inside rope_parameters, v4 at the top level)",
        )

    def as_other(other: posenc.LayerRotary) -> Callable[[], posenc.LayerRotary]:
        return lambda: replace(other, layer_type=kind.layer_type)

    for other in plan.kinds:
        if other.rotates and other.n_axes == 1 and other.head_dim == kind.head_dim and other != kind:
            add(
                as_other(other),
                f"the rotation of the config's {other.layer_type!r} layers (base {other.base:g}, rope_type "
                f"{other.scaling.rope_type!r}): the per-layer-type rope parameters not wired to this layer type (one "
                "flat rope dict for every layer?)",
            )
    if scaling.rope_type not in ("default", "proportional"):
        add(
            lambda: replace(kind, scaling=posenc.RopeScaling(rope_theta=scaling.rope_theta)),
            f"base {kind.base:g} without the config's {scaling.rope_type!r} scaling: the scaling not applied",
        )
    if scaling.rope_type == "yarn":
        add(
            lambda: replace(kind, scaling=replace(scaling, truncate=not scaling.truncate)),
            f"YaRN with truncate={not scaling.truncate} where the config says truncate={scaling.truncate} (the "
            "correction range's bounds rounded to integers or not)",
        )
    if kind.rotary_dim < width and scaling.rope_type != "proportional":
        add(
            lambda: replace(kind, rotary_dim=width),
            f"all {width} features rotated with base^(-2i/{width}) where the config rotates the first "
            f"{kind.rotary_dim}: the partial_rotary_factor dropped",
        )
        add(
            lambda: replace(
                kind,
                rotary_dim=width,
                scaling=posenc.RopeScaling(
                    rope_type="proportional",
                    partial_rotary_factor=kind.rotary_dim / width,
                    rope_theta=scaling.rope_theta,
                ),
            ),
            f"the proportional convention (Gemma 4's full layers: base^(-2i/{width}) on pairs (i, i + {width // 2})) "
            f"applied to a partial-rotary layer, whose {kind.rotary_dim} rotated features take "
            f"base^(-2i/{kind.rotary_dim}) on pairs (i, i + {kind.rotary_dim // 2})",
        )
    if scaling.rope_type == "proportional":
        rotated = 2 * int(scaling.partial_rotary_factor * width // 2)
        add(
            lambda: replace(
                kind,
                rotary_dim=rotated,
                scaling=posenc.RopeScaling(rope_theta=scaling.rope_theta),
            ),
            f"partial rotary's convention (base^(-2i/{rotated}) on the first {rotated} features) applied to a "
            f"proportional layer, whose frequencies are base^(-2i/{width}) on pairs (i, i + {width // 2})",
        )
    flipped: RotaryLayout = "halves" if kind.layout == "interleaved" else "interleaved"
    add(
        lambda: replace(kind, layout=flipped),
        f"the pairs taken as {flipped} where this family pairs its features as {kind.layout}",
    )
    return found


def assert_rotary_matches_config(
    rotate_fn: Implementation,
    config: object,
    *,
    model_type: str | None = None,
    positions: Sequence[int] | None = None,
    seed: int = 0,
) -> None:
    r"""Check that a model's rotation, layer by layer, is the one its transformers config describes.

    Parameters
    ----------
    rotate_fn : callable
        ``rotate_fn(x, positions, layer)`` rotates ``x`` ``(seq, head_dim)``, one query head of layer ``layer``
        (an ``int``, from 0), at ``positions`` ``(seq,)`` as that layer of the model does, and returns the same
        shape: the features the layer rotates turned (and multiplied by its attention factor), the others
        unchanged, a NoPE layer's head unchanged. The output must keep the input's feature order: feature ``j``
        of the output is feature ``j`` of ``x`` turned. An engine that permutes the rotated features of queries
        and keys alike (transformers' ``apply_rotary_pos_emb_interleave``, which DeepSeek-V3 and other latent
        attention models call, returns the pairs de-interleaved) leaves the attention scores unchanged but
        fails this check; permute its output back first (:func:`posenc.rotary_weight_permutation` gives the
        order). ``head_dim`` is that of the layer's :class:`posenc.LayerRotary`
        (multi-head latent attention: ``qk_nope_head_dim + qk_rope_head_dim``, the rotated features last). A
        ``torch.nn.Module`` gets a float32 tensor and ``positions=`` and ``layer=`` keywords. It is not called
        for layers without attention (the ``"linear_attention"``, ``"conv"`` and ``"mamba"`` layers of hybrid
        models).
    config : transformers config object or Mapping[str, object]
        The model's config, as :meth:`posenc.RotaryPlan.from_config` reads it (a ``config.json`` dict, v5
        ``rope_parameters`` or legacy ``rope_scaling``).
    model_type : str or None, default None
        Passed on to :meth:`posenc.RotaryPlan.from_config`.
    positions : sequence of int or None, default None
        At most 64 positions in ``[0, 2**24]``. Default: 0 to 3, and ``L - 1``, ``L`` and ``2L`` for each
        trained length ``L`` of the config (a scaling's ``original_max_position_embeddings``, else
        ``max_position_embeddings``, else 4096), capped at ``2**24``.
    seed : int, default 0
        Seed of the random heads.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        If some layer's output differs from :meth:`posenc.LayerRotary.rotate` of the config's plan by more than
        the tolerance (see Notes), or ``rotate_fn`` raises. The message names the layers and layer types that
        differ, the first layer's worst entry, and, when the output matches a known misreading of the config,
        which: a NoPE layer rotated or a rotating layer left alone, the default base 10000 in place of the
        config's, another layer type's parameters, the scaling left out, YaRN's ``truncate`` or attention factor
        not honoured, a ``partial_rotary_factor`` dropped, the partial and proportional conventions swapped,
        the pair layout flipped, or the rotation right but its output de-interleaved (see ``rotate_fn``).
    TypeError, ValueError
        If an argument of the check is invalid, or :meth:`posenc.RotaryPlan.from_config` cannot read ``config``
        (the message names the key), or a layer rotates on several axes (check those with
        :func:`assert_mrope_axes_match`).

    Notes
    -----
    Each layer gets its own random head (standard normal, ``seed``) at every position. An entry of a rotated
    pair may differ from posenc's float64 reference by :math:`2^{-20}\,a\,(|a_p \max(1, \phi)| + s)`, with
    :math:`\phi` the pair's angle at that position, :math:`a_p` the pair's length, :math:`s` the largest input
    entry and :math:`a` the attention factor (if above 1): eight times float32's relative precision of the
    angle, as :func:`assert_rotary_angles_accurate` allows, so that a float32 implementation passes; any other
    entry by :math:`2^{-20} s`. The config is read once, by :meth:`posenc.RotaryPlan.from_config`, which
    tests/test_model_zoo.py checks against transformers' own rotary classes for every family of transformers
    5.23 whose model rotates with its config, except the three posenc cannot serve (listed there from
    ``posenc_book.zoo.LEFT_OUT``); five classes whose defaults posenc refuses run there with a published value
    in their place (``posenc_book.zoo.OVERRIDES``).

    What is checked is the rotation of one head, feature by feature, and the attention factor that multiplies
    its rotated features. What the attention does outside the rotation is not checked: the softmax scale
    (the ``softmax_scale`` of a :class:`posenc.LayerRotary`, such as latent attention's YaRN factor from
    ``mscale_all_dim``) and the position-dependent query multipliers (its ``query_scaling``: Llama 4's
    temperature tuning, ``llama_4_scaling_beta``, Mistral Large 4's learned multiplier). An engine that drops
    them passes; compare them with the plan yourself.

    Examples
    --------
    >>> import posenc
    >>> config = {"model_type": "gemma3_text", "hidden_size": 64, "head_dim": 16, "num_attention_heads": 4,
    ...           "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
    ...           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    ...                               "full_attention": {"rope_type": "linear", "factor": 8.0,
    ...                                                  "rope_theta": 1000000.0}}}
    >>> plan = posenc.RotaryPlan.from_config(config)
    >>> assert_rotary_matches_config(lambda x, p, layer: plan.layers[layer].rotate(x, p), config)
    >>> full = plan.layers[1]
    >>> assert_rotary_matches_config(lambda x, p, layer: full.rotate(x, p), config)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    AssertionError: rotate_fn differs ... in 1 of 2 layers (layer 0, of type 'sliding_attention')...misreading...
    """
    _check_implementation(rotate_fn, "rotate_fn")
    plan = posenc.RotaryPlan.from_config(config, model_type=model_type)
    several = [kind for kind in plan.kinds if kind.rotates and kind.n_axes > 1]
    if several:
        raise ValueError(
            f"config's {several[0].layer_type!r} layers rotate on several axes {several[0].axes}: check them with "
            "posenc.testing.assert_mrope_axes_match"
        )
    if positions is None:
        chosen = {0, 1, 2, 3}
        for length in _trained_lengths(plan):
            chosen |= {min(p, _MAX_POSITION) for p in (length - 1, length, 2 * length)}
        grid = np.array(sorted(chosen), dtype=np.float64)
    else:
        grid = _check_int_sequence(positions, "positions", low=0, high=_MAX_POSITION).astype(np.float64)
    seed = check_int(seed, "seed", maximum=_MAX_SEED)
    if len(plan.layers) * len(grid) * max(kind.head_dim for kind in plan.kinds) > 16 * _MAX_CHECK_ELEMENTS:
        raise ValueError("config has too many layers and features for positions: pass fewer positions")
    rng = np.random.default_rng(seed)
    wrong: list[tuple[int, float, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]] = []
    for layer, kind in enumerate(plan.layers):
        x = rng.standard_normal((len(grid), kind.head_dim))
        if kind.layer_type in NO_ATTENTION_TYPES:
            continue  # a recurrent or convolutional layer: no queries or keys to rotate
        description = f"rotate_fn(x, positions, {layer})"
        if _is_torch_module(rotate_fn):
            got = _call(rotate_fn, description, _tensor(x, "float32"), positions=_tensor(grid, "float64"), layer=layer)
        else:
            got = _call(rotate_fn, description, x.copy(), grid.copy(), layer)
        out = _as_array(got, description)
        _expect_shape(out, x.shape, description)
        expected = kind.rotate(x, grid)
        excess = np.abs(out - expected) / _config_tolerance(kind, x, grid)
        excess = np.where(np.isfinite(excess), excess, np.inf)
        if excess.max() > 1.0:
            wrong.append((layer, float(excess.max()), x, out, expected))
    if not wrong:
        return
    layer, _, x, out, expected = wrong[0]
    kind = plan.layers[layer]
    tolerance = _config_tolerance(kind, x, grid)
    row, feature = (int(i) for i in np.unravel_index(int(np.argmax(np.abs(out - expected) / tolerance)), x.shape))
    types = sorted({plan.layers[i].layer_type for i, *_ in wrong})
    shown = ", ".join(str(i) for i, *_ in wrong[:8]) + (", ..." if len(wrong) > 8 else "")
    message = (
        f"rotate_fn differs from the rotation that config (model_type {plan.model_type!r}) describes in "
        f"{len(wrong)} of {len(plan.layers)} layers (layer{'s' if len(wrong) > 1 else ''} {shown}, of type "
        f"{', '.join(map(repr, types))}): layer {layer} by {abs(out - expected)[row, feature]:.3g} at position "
        f"{int(grid[row])}, feature {feature} (tolerance {tolerance[row, feature]:.2g})."
    )

    def matches(reference: NDArray[np.float64], kind_for_tolerance: posenc.LayerRotary) -> bool:
        bound = np.maximum(tolerance, _config_tolerance(kind_for_tolerance, x, grid))
        return bool(np.all(np.abs(out - reference) <= bound))

    if not kind.rotates:
        rotating = [other for other in plan.kinds if other.rotates and other.head_dim == kind.head_dim]
        hint = (
            f" Layer {layer} is a NoPE layer in this config (its family's rule and the config's "
            "no_rope_layers / layer types leave it unrotated), but rotate_fn rotates it"
        )
        if rotating and matches(rotating[0].rotate(x, grid), rotating[0]):
            hint += f" as the config's {rotating[0].layer_type!r} layers rotate"
        raise AssertionError(message + hint + ".")
    if matches(x, kind):
        raise AssertionError(
            message + f" rotate_fn leaves layer {layer} unrotated, but the config rotates it "
            f"({kind.rotary_dim} of its {kind.head_dim} features): a NoPE rule applied to the wrong layers?"
        )
    part = np.arange(kind.rotary_offset, kind.rotary_offset + kind.rotary_dim)
    rotated_norm = np.linalg.norm(out[:, part], axis=-1) / np.linalg.norm(x[:, part], axis=-1)
    measured = float(np.median(rotated_norm))
    if abs(measured - kind.attention_factor) > 1e-6 * kind.attention_factor and matches(
        expected * np.where(np.isin(np.arange(kind.head_dim), part), measured / kind.attention_factor, 1.0), kind
    ):
        raise AssertionError(
            message + f" The angles are right, but the rotated features are multiplied by {measured:.6g} where the "
            f"config's attention factor is {kind.attention_factor:.6g} (YaRN's attention_factor, or mscale and "
            "mscale_all_dim, not read as transformers reads them?)."
        )
    if kind.layout == "interleaved":
        # transformers' apply_rotary_pos_emb_interleave returns pair i at features i and i + rotary_dim / 2
        order = part[posenc.rotary_weight_permutation("interleaved", "halves", kind.rotary_dim)]
        deinterleaved, bound = expected.copy(), tolerance.copy()
        deinterleaved[:, part], bound[:, part] = expected[:, order], np.maximum(tolerance[:, part], tolerance[:, order])
        if np.all(np.abs(out - deinterleaved) <= bound):
            raise AssertionError(
                message + f" Layer {layer} matches a known misreading: the rotation right, but its output "
                f"de-interleaved (pair i returned at features i and i + {kind.rotary_dim // 2} of the rotated "
                f"{kind.rotary_dim}, as transformers' apply_rotary_pos_emb_interleave returns them). Scores are "
                "unchanged when queries and keys are permuted alike, but this check compares features in the "
                "input's order: re-interleave the output (posenc.rotary_weight_permutation) before the check."
            )
    for candidate, what in _config_candidates(kind, plan):
        if matches(candidate.rotate(x, grid), candidate):
            raise AssertionError(message + f" Layer {layer} matches a known misreading: {what}.")
    raise AssertionError(message)
