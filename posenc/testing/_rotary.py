"""The checks of rotary implementations (RoPE) on one position axis."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc._rope import ROPE_TYPES, parse_scaling
from posenc._validation import (
    ROTARY_LAYOUTS,
    RotaryLayout,
    check_choice,
    check_int,
    check_real,
)
from posenc.testing._common import (
    MAX_CHECK_ELEMENTS,
    MAX_POSITION,
    MAX_SEED,
    Implementation,
    as_array,
    as_tensor,
    call_implementation,
    check_implementation,
    check_int_sequence,
    expect_shape,
    is_torch_module,
    pairs_of,
    rotate_at_offset,
    rotate_with,
    wrap_angle,
)


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
    check_implementation(rotate_fn, "rotate_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=MAX_POSITION)
    if n_positions * head_dim > MAX_CHECK_ELEMENTS:
        raise ValueError(f"n_positions x head_dim must be at most {MAX_CHECK_ELEMENTS}, got {n_positions} x {head_dim}")
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    scaling = parse_scaling(scaling, base, rope_types=ROPE_TYPES)  # the whole head rotated: no partial factor
    positions = np.arange(n_positions, dtype=np.float64)
    frequencies = posenc.rotary_frequencies(head_dim, base=base, scaling=scaling, seq_len=n_positions)
    largest_angle = float(positions[-1] * frequencies.max())  # pair 0 has frequency 1 without a scaling
    atol = _rotary_tolerance(largest_angle) if atol is None else check_real(atol, "atol", above=0.0)
    length = posenc.rotary_attention_factor(scaling)

    x = np.zeros((n_positions, head_dim))
    first, _ = pairs_of(x, layout)
    first[...] = 1.0  # the unit vector (1, 0) in every pair: the output is (cos, sin) of each angle
    description = f"rotate_fn(x, positions) with positions 0..{n_positions - 1}"
    out = rotate_with(rotate_fn, x, positions, description)
    reference = posenc.rotate(x, positions, base=base, layout=layout, scaling=scaling)
    got_cos, got_sin = pairs_of(out, layout)
    ref_cos, ref_sin = pairs_of(reference, layout)
    radius = np.hypot(got_cos, got_sin)
    error = np.abs(wrap_angle(np.arctan2(got_sin, got_cos) - np.arctan2(ref_sin, ref_cos)))
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
        error = np.abs(wrap_angle(got_angle - np.arctan2(ref_sin[rows], ref_cos[rows])))
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
    check_implementation(rotate_fn, "rotate_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    distance_array = check_int_sequence(distances, "distances", low=-(2**20), high=2**20)
    shift_array = check_int_sequence(shifts, "shifts", low=0, high=2**23)
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    query_positions = (shift_array[:, None] + distance_array[None, :]).ravel().astype(np.float64)
    key_positions = np.repeat(shift_array, len(distance_array)).astype(np.float64)
    largest = float(np.abs(np.concatenate([query_positions, key_positions])).max())
    rtol = _rotary_tolerance(largest) if rtol is None else check_real(rtol, "rtol", above=0.0)

    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, head_dim))
    scale = float(np.linalg.norm(q) * np.linalg.norm(k))
    count = len(query_positions)
    got_q = rotate_with(rotate_fn, np.tile(q, (count, 1)), query_positions, "rotate_fn(queries, positions)")
    got_k = rotate_with(rotate_fn, np.tile(k, (count, 1)), key_positions, "rotate_fn(keys, positions)")
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
    check_implementation(fn, "fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    seq_len = check_int(seq_len, "seq_len", minimum=1, maximum=4096)
    offset = check_int(offset, "offset", minimum=1, maximum=4096)
    atol = check_real(atol, "atol", above=0.0)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    whole = np.random.default_rng(seed).standard_normal((offset + seq_len, head_dim))
    tail = whole[offset:]
    scale = float(np.abs(whole).max())

    rotate_at_offset(fn, tail, 0, "fn(tail, offset=0)")  # fills a cache keyed on the length, if there is one
    full = rotate_at_offset(fn, whole, 0, "fn(whole, offset=0)")
    shifted = rotate_at_offset(fn, tail, offset, f"fn(tail, offset={offset})")
    error = np.abs(shifted - full[offset:]) / scale
    error = np.where(np.isfinite(error), error, np.inf)
    if error.max() <= atol:
        return
    row = int(np.argmax(error.max(axis=1)))
    unrotated = np.abs(shifted - rotate_at_offset(fn, tail, 0, "fn(tail, offset=0)")).max() / scale
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
    check_implementation(fn, "fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    short_len = check_int(short_len, "short_len", minimum=1, maximum=4096)
    long_len = check_int(long_len, "long_len", minimum=2, maximum=2**16)
    if long_len <= short_len:
        raise ValueError(f"long_len must be greater than short_len = {short_len}, got {long_len}")
    if long_len * head_dim > MAX_CHECK_ELEMENTS:
        raise ValueError(f"long_len x head_dim must be at most {MAX_CHECK_ELEMENTS}, got {long_len} x {head_dim}")
    atol = check_real(atol, "atol", above=0.0)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    rng = np.random.default_rng(seed)
    short, long = rng.standard_normal((short_len, head_dim)), rng.standard_normal((long_len, head_dim))
    scale = float(np.abs(short).max())

    before = rotate_at_offset(fn, short, 0, f"fn(x of length {short_len})")
    rotate_at_offset(fn, long, 0, f"fn(x of length {long_len})")
    after = rotate_at_offset(fn, short, 0, f"fn(x of length {short_len}) after the long call")
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
    check_implementation(fn, "fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    seq_len = check_int(seq_len, "seq_len", minimum=2, maximum=4096)
    n_heads = check_int(n_heads, "n_heads", minimum=2, maximum=64)
    batch = check_int(batch, "batch", minimum=1, maximum=64)
    if batch * seq_len * n_heads * head_dim > MAX_CHECK_ELEMENTS:
        raise ValueError(
            f"batch x seq_len x n_heads x head_dim must be at most {MAX_CHECK_ELEMENTS}, got "
            f"{batch} x {seq_len} x {n_heads} x {head_dim}"
        )
    base = check_real(base, "base", above=1.0)
    layout = check_choice(layout, "layout", ROTARY_LAYOUTS)
    atol = check_real(atol, "atol", above=0.0)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    tokens = np.random.default_rng(seed).standard_normal((batch, seq_len, head_dim))
    x = np.repeat(tokens[:, :, None, :], n_heads, axis=2)  # (batch, seq, heads, head_dim), heads identical
    scale = float(np.abs(x).max())
    shape = (batch, seq_len, n_heads, head_dim)
    description = f"fn(x of shape (batch, seq, heads, head_dim) = {shape})"
    out = as_array(
        call_implementation(fn, description, as_tensor(x, "float32") if is_torch_module(fn) else x.copy()), description
    )
    expect_shape(out, shape, description)

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
    check_implementation(convert_fn, "convert_fn")
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=1024, even=True)
    n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=64)
    source = check_choice(source, "source", ROTARY_LAYOUTS)
    target = check_choice(target, "target", ROTARY_LAYOUTS)
    d_in = check_int(d_in, "d_in", minimum=1, maximum=1024)
    base = check_real(base, "base", above=1.0)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    rng = np.random.default_rng(seed)
    rows = n_heads * head_dim
    w_query, w_key = rng.standard_normal((2, rows, d_in)) / math.sqrt(d_in)
    tokens = rng.standard_normal((6, d_in))
    positions = np.array([0.0, 1.0, 2.0, 9.0, 130.0, 2047.0])

    converted = []
    for name, weight in (("query", w_query), ("key", w_key)):
        call = f"convert_fn({name} weight of shape {weight.shape})"
        out = as_array(call_implementation(convert_fn, call, weight.copy()), call)
        expect_shape(out, weight.shape, call)
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
    check_implementation(rotate_fn, "rotate_fn")
    expected = posenc.rotary_attention_factor(scaling)
    head_dim = check_int(head_dim, "head_dim", minimum=2, maximum=4096, even=True)
    n_positions = check_int(n_positions, "n_positions", minimum=1, maximum=4096)
    if n_positions * head_dim > MAX_CHECK_ELEMENTS:
        raise ValueError(f"n_positions x head_dim must be at most {MAX_CHECK_ELEMENTS}, got {n_positions} x {head_dim}")
    rtol = check_real(rtol, "rtol", above=0.0)
    seed = check_int(seed, "seed", maximum=MAX_SEED)
    x = np.random.default_rng(seed).standard_normal((n_positions, head_dim))
    positions = np.arange(n_positions, dtype=np.float64)
    description = f"rotate_fn(x, positions) with positions 0..{n_positions - 1}"
    out = rotate_with(rotate_fn, x, positions, description)
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
