"""The checks of T5's relative-position buckets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

import posenc
from posenc._validation import (
    check_flag,
    check_int,
)
from posenc.testing._common import Implementation, as_array, call_implementation, check_implementation, expect_shape


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
    check_implementation(bucket_fn, "bucket_fn")
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
    got = as_array(call_implementation(bucket_fn, call, offsets.copy(), **kwargs), call)
    expect_shape(got, offsets.shape, call)
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
