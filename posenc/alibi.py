"""ALiBi, attention with linear biases (Press, Smith and Lewis, 2022): the head slopes and the bias matrices.

ALiBi adds no position vector to the tokens. Each head ``h`` adds ``-m_h * distance`` to the logit of every
(query, key) pair, with a fixed slope ``m_h`` per head, so attention fades linearly (before the softmax) with
the distance to the key.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from posenc._validation import check_flag, check_int, check_query_key_lengths

__all__ = ["MAX_HEADS", "alibi_slopes", "alibi_bias"]

MAX_HEADS = 2**16
"""Largest head count :func:`alibi_slopes` accepts (the slopes are computed one by one, as in the paper's code)."""


def _power_of_two_slopes(n: int) -> list[float]:
    """The geometric slopes for ``n`` a power of two: first slope and ratio both ``2 ** (-8 / n)``.

    The arithmetic is the paper's, step for step in float64, so the values agree bit for bit with its code run
    in the same Python (both use the platform's ``log2`` and ``pow``):
    ``start = 2 ** (-2 ** -(log2(n) - 3))`` and slope ``i`` is ``start * start ** i``.
    """
    start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
    return [start * start**i for i in range(n)]


def alibi_slopes(n_heads: int) -> NDArray[np.float64]:
    r"""The fixed slope of each attention head in ALiBi.

    Parameters
    ----------
    n_heads : int
        Number of attention heads; an int in ``[1, MAX_HEADS]``. Powers of two and other counts alike.

    Returns
    -------
    slopes : (n_heads,) ndarray of float64
        Distinct, in ``(0, 1)``; equal bit for bit to ``get_slopes(n_heads)`` of the paper's reference code
        run in the same Python (another platform's ``pow`` may move both by a unit in the last place).

    Raises
    ------
    TypeError
        If ``n_heads`` is not an int (a bool or float included).
    ValueError
        If ``n_heads`` is not in ``[1, MAX_HEADS]``.

    Notes
    -----
    For :math:`n` heads, :math:`n` a power of two, the slopes form the geometric sequence that starts at
    :math:`2^{-8/n}` with that same ratio (Press et al., 2022, §3):

    .. math::

        m_h = 2^{-8h/n}, \qquad h = 1, \dots, n,

    so ``(1/2, 1/4, ..., 1/256)`` for 8 heads. For other :math:`n` the reference code
    (``get_slopes`` in ``fairseq/models/transformer.py`` of github.com/ofirpress/attention_with_linear_biases)
    takes the :math:`c = 2^{\lfloor \log_2 n \rfloor}` slopes of :math:`c` heads, then the first
    :math:`n - c` of the odd-numbered slopes of :math:`2c` heads, :math:`2^{-8(2k-1)/(2c)}` for
    :math:`k = 1, \dots, n - c`. The result is not sorted: for 12 heads it is the eight slopes
    :math:`2^{-1}, \dots, 2^{-8}` followed by :math:`2^{-0.5}, 2^{-1.5}, 2^{-2.5}, 2^{-3.5}`.

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409, §3.

    Examples
    --------
    >>> alibi_slopes(8)
    array([0.5       , 0.25      , 0.125     , 0.0625    , 0.03125   ,
           0.015625  , 0.0078125 , 0.00390625])
    >>> alibi_slopes(3)  # the 2 slopes of 2 heads, then the first odd-numbered slope of 4 heads
    array([0.0625    , 0.00390625, 0.25      ])
    """
    return _slopes(check_int(n_heads, "n_heads", minimum=1, maximum=MAX_HEADS))


def _slopes(n_heads: int) -> NDArray[np.float64]:
    """:func:`alibi_slopes` for a checked ``n_heads``."""
    closest = 1 << (n_heads.bit_length() - 1)  # the largest power of two <= n_heads
    slopes = _power_of_two_slopes(closest)
    if closest != n_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: n_heads - closest]
    return np.array(slopes, dtype=np.float64)


def alibi_bias(
    n_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True, offset: int | None = None
) -> NDArray[np.float64]:
    r"""The ALiBi bias added to the attention logits of every head.

    Parameters
    ----------
    n_heads : int
        Number of heads; an int in ``[1, MAX_HEADS]`` (see :func:`alibi_slopes`).
    q_len : int
        Number of queries; ``>= 0``.
    k_len : int or None, default None
        Number of keys; ``>= 0``. ``None`` means ``q_len``.
    causal : bool, default True
        ``True``: a query sees the keys at its own position and before, the later ones get ``-inf``.
        ``False``: the symmetric bidirectional form, ``-m_h * |distance|`` on every key.
    offset : int or None, default None
        Absolute position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``None``
        means ``k_len - q_len``, the queries being the last ``q_len`` positions (a decoder extending a
        cache of keys). An int with ``|offset| <= 2**52``; ``>= 0`` when ``causal`` (with a negative offset
        query 0 would see no key at all). Only differences of positions matter: shifting ``offset`` and every
        key together changes nothing.

    Returns
    -------
    bias : (n_heads, q_len, k_len) ndarray of float64
        ``bias[h, i, j] = -slopes[h] * (offset + i - j)`` where ``j <= offset + i``; ``-inf`` where
        ``j > offset + i`` if ``causal``, else ``-slopes[h] * (j - offset - i)`` there.

    Raises
    ------
    TypeError
        If a length, ``n_heads`` or ``offset`` is not an int, or ``causal`` is not a bool.
    ValueError
        If ``n_heads`` is out of range, a length is negative, the result would exceed
        ``posenc.MAX_TABLE_ELEMENTS`` elements, ``|offset| > 2**52``, or ``offset < 0`` with ``causal``.

    Notes
    -----
    Press et al. (2022, §3) compute the logits of query :math:`i` as

    .. math::

        \operatorname{softmax}\!\big(q_i K^\top + m \cdot [-(i-1), \dots, -2, -1, 0]\big),

    one slope :math:`m` per head, with no position embedding anywhere. Their code adds ``m * j`` instead
    (the same for every query), which differs from the above by ``m * i`` along each row and so gives the
    same softmax. This function returns the bias as the paper writes it, which is also correct for the keys
    above the diagonal in the bidirectional form (``-m * |i - j|``, the form Press recommends for encoders
    in issue #5 of the reference repository).

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409, §3 and Fig. 3.

    Examples
    --------
    >>> alibi_bias(8, 3)[0]  # head 0 of 8, slope 1/2
    array([[ 0. , -inf, -inf],
           [-0.5,  0. , -inf],
           [-1. , -0.5,  0. ]])
    >>> alibi_bias(8, 2, 4, causal=False)[0]  # two queries at positions 2 and 3
    array([[-1. , -0.5,  0. , -0.5],
           [-1.5, -1. , -0.5,  0. ]])
    """
    n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=MAX_HEADS)
    causal = check_flag(causal, "causal")
    q_len, k_len, offset = check_query_key_lengths(q_len, k_len, offset, n_heads, "n_heads")
    if causal and offset < 0 and q_len > 0:
        raise ValueError(
            f"offset must be >= 0 when causal=True, got {offset} (q_len={q_len}, k_len={k_len}): query 0 would "
            "see no key; give k_len >= q_len, an offset >= 0, or causal=False"
        )
    if not (q_len and k_len):  # an empty bias: allocate nothing of the other length (it may be huge)
        return np.zeros((n_heads, q_len, k_len))
    # offset + i - j, exact in float64 (|offset| <= 2**52 and the lengths are at most 2**28)
    distance = (np.arange(q_len, dtype=np.float64) + offset)[:, None] - np.arange(k_len, dtype=np.float64)
    slopes = _slopes(n_heads)[:, None, None]
    if not causal:
        unmasked: NDArray[np.float64] = 0.0 - slopes * np.abs(distance)  # 0.0 - x: a zero distance gives +0.0
        return unmasked
    bias: NDArray[np.float64] = 0.0 - slopes * distance
    bias[:, distance < 0] = -np.inf
    return bias
