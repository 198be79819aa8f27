"""The checks of ALiBi's slopes and biases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc._validation import (
    check_int,
    check_real,
)
from posenc.testing._common import (
    MAX_CHECK_ELEMENTS,
    Implementation,
    as_array,
    call_implementation,
    check_implementation,
    check_int_sequence,
    show,
)


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
    check_implementation(slopes_fn, "slopes_fn")
    max_heads = check_int(max_heads, "max_heads", minimum=1, maximum=1024)
    rtol = check_real(rtol, "rtol", above=0.0)
    for n_heads in range(1, max_heads + 1):
        call = f"slopes_fn({n_heads})"
        got = as_array(call_implementation(slopes_fn, call, n_heads), call).reshape(-1)
        want = posenc.alibi_slopes(n_heads)
        if got.shape == want.shape and np.all(np.abs(got - want) <= rtol * np.abs(want)):
            continue
        raise AssertionError(
            f"{call} returned {show(got)} but ALiBi's slopes for {n_heads} heads are {show(want)} "
            f"(rtol {rtol:g}). When n_heads is not a power of two, ALiBi takes the slopes of the largest power "
            f"of two below it, then every other slope of twice that many heads."
        )


def _alibi_bias_of(fn: Implementation, n_heads: int, q_len: int, k_len: int) -> NDArray[np.float64]:
    """``fn(q_len, k_len)`` as a float64 ``(n_heads, q_len, k_len)`` array, broadcast as attention would add it."""
    call = f"bias_fn({q_len}, {k_len})"
    bias = as_array(call_implementation(fn, call, q_len, k_len), call)
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
    check_implementation(bias_fn, "bias_fn")
    n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=1024)
    k_len = check_int(k_len, "k_len", minimum=2, maximum=4096)
    if n_heads * k_len * k_len > MAX_CHECK_ELEMENTS:
        raise ValueError(f"n_heads x k_len**2 must be at most {MAX_CHECK_ELEMENTS}, got {n_heads} x {k_len}**2")
    lengths = check_int_sequence(q_lens, "q_lens", low=1, high=k_len)
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
            f"the row over keys 0..{offset + row} is {show(row_got)}, ALiBi's is "
            f"{show(want[head, row][visible[head, row]])}.{hint}"
        )
