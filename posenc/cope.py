"""Contextual position encoding (CoPE; Golovneva et al., 2024): positions that count what the gates let through.

A query measures the position of each key by summing sigmoid gates over the tokens from the key up to
itself; the gates come from the query and those tokens, so a head can count words, sentences or one marker
token instead of tokens. The fractional position picks a position embedding by linear interpolation between
the two integer positions around it. With every gate at 1 the position is the token distance plus one and
CoPE is a learned relative-position embedding. The PyTorch side is :class:`posenc.nn.CoPE`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import check_query_key_lengths, check_real, check_real_array, check_table_size

__all__ = ["cope_positions", "cope_logits"]


def cope_positions(gates: ArrayLike, *, offset: int | None = None) -> NDArray[np.float64]:
    r"""The contextual position of every key seen from every query: the sum of the gates from the key on.

    Parameters
    ----------
    gates : (..., q_len, k_len) array_like of float
        The gates :math:`g_{ij} \in [0, 1]` (``sigmoid`` of the attention logits in the paper).
    offset : int or None, default None
        Position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``None`` means
        ``k_len - q_len`` (the queries are the last tokens). ``|offset| <= 2**52``.

    Returns
    -------
    positions : (..., q_len, k_len) ndarray of float64
        :math:`p_{ij} = \sum_{t = j}^{\mathrm{offset} + i} g_{it}` for the keys ``j <= offset + i``, 0 for
        the keys after the query. Every gate at 1 gives ``offset + i - j + 1``.

    Raises
    ------
    TypeError
        If ``gates`` is not an array of real numbers or ``offset`` is not an int.
    ValueError
        If ``gates`` has fewer than 2 axes or an entry outside ``[0, 1]`` (NaN included), or
        ``|offset| > 2**52``.

    Notes
    -----
    Golovneva et al. (2024) compute, for query :math:`i` and key :math:`j \le i`,

    .. math::

        g_{ij} = \sigma(q_i^\top k_j), \qquad p_{ij} = \sum_{t = j}^{i} g_{it},

    so the sum includes both the key and the query itself, and :math:`p_{ij}` grows as the key moves back
    only when the tokens passed have open gates. Their code computes it as a reversed cumulative sum over
    the keys of gates masked to 0 after the query (``context_position.py`` of
    github.com/facebookresearch/RAM, ``projects/cope``); this reference does the same in float64.

    References
    ----------
    .. [1] O. Golovneva, T. Wang, J. Weston, S. Sukhbaatar, "Contextual Position Encoding: Learning to Count
       What's Important", arXiv:2405.18719, 2024.

    Examples
    --------
    >>> cope_positions(np.ones((3, 3)))  # every gate open: distance + 1
    array([[1., 0., 0.],
           [2., 1., 0.],
           [3., 2., 1.]])
    >>> cope_positions([[1.0, 0.0, 1.0, 0.0]], offset=3)  # only tokens 0 and 2 count
    array([[2., 1., 1., 0.]])
    """
    accepted = "a real array of shape (..., q_len, k_len) with entries in [0, 1]"
    values = check_real_array(gates, "gates", accepted, min_ndim=2)
    if np.any((values < 0) | (values > 1)):
        raise ValueError(f"gates must be {accepted}: found an entry outside [0, 1]")
    q_len, k_len = values.shape[-2], values.shape[-1]
    _, _, start = check_query_key_lengths(q_len, k_len, offset)
    seen = np.arange(k_len)[None, :] <= np.arange(q_len)[:, None] + start
    masked = np.where(seen, values, 0.0)
    positions: NDArray[np.float64] = np.cumsum(masked[..., ::-1], axis=-1)[..., ::-1]
    return np.ascontiguousarray(positions)


def cope_logits(
    q: ArrayLike, k: ArrayLike, embeddings: ArrayLike, *, scale: float | None = None
) -> NDArray[np.float64]:
    r"""Causal self-attention logits with contextual position embeddings, as the CoPE authors compute them.

    Parameters
    ----------
    q, k : (..., seq, head_dim) array_like of float
        Queries and keys of the same shape, finite; ``seq >= 1``.
    embeddings : (n_positions, head_dim) array_like of float
        The position embeddings :math:`e[0], \dots, e[n - 1]`, finite; ``n_positions >= 1``. Positions
        above ``n_positions - 1`` use the last one.
    scale : float or None, default None
        Multiplies the logits; ``None`` means ``1 / sqrt(head_dim)``. Finite and ``> 0``.

    Returns
    -------
    logits : (..., seq, seq) ndarray of float64
        :math:`s\,(q_i^\top k_j + q_i^\top e[p_{ij}])` for ``j <= i``, ``-inf`` for ``j > i``, with
        :math:`s` the scale, the gates :math:`\sigma(s\, q_i^\top k_j)`, :math:`p_{ij}` their
        :func:`cope_positions` clamped to ``n_positions - 1`` and :math:`e[p]` interpolated (Notes).

    Raises
    ------
    TypeError
        If an array is not of real numbers, or ``scale`` not a real number.
    ValueError
        If ``q`` and ``k`` differ in shape or have fewer than 2 axes, ``embeddings`` is not
        ``(n_positions, head_dim)``, an entry is not finite, ``scale`` is not positive, or the logits
        would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements.

    Notes
    -----
    Golovneva et al. (2024) add a position embedding chosen by the contextual position to each key,
    :math:`a_{ij} = \operatorname{softmax}_j\big(q_i^\top (k_j + e[p_{ij}])\big)`, and interpolate it at
    fractional positions,

    .. math::

        e[p] = (p - \lfloor p \rfloor)\, e[\lceil p \rceil] + (1 - p + \lfloor p \rfloor)\, e[\lfloor p \rfloor],

    which is exact at integers. Since :math:`q_i^\top e[p]` is linear in :math:`e[p]`, it is computed as
    the interpolation of the integer logits :math:`q_i^\top e[n]`. This function follows the authors' code
    (``context_position.py`` of github.com/facebookresearch/RAM, ``projects/cope``, by default): gates from
    the scaled logits, positions clamped to the last embedding, and the position term added before the scale.

    References
    ----------
    .. [1] O. Golovneva, T. Wang, J. Weston, S. Sukhbaatar, "Contextual Position Encoding: Learning to Count
       What's Important", arXiv:2405.18719, 2024.

    Examples
    --------
    >>> q = k = np.zeros((3, 2))  # every gate 1/2: positions 1/2, 1, 3/2 back from the query
    >>> embeddings = np.zeros((4, 2))
    >>> cope_logits(q, k, embeddings)
    array([[  0., -inf, -inf],
           [  0.,   0., -inf],
           [  0.,   0.,   0.]])
    """
    accepted_qk = "a finite real array of shape (..., seq, head_dim) with seq >= 1"
    queries = check_real_array(q, "q", accepted_qk, min_ndim=2)
    keys = check_real_array(k, "k", accepted_qk, min_ndim=2)
    if keys.shape != queries.shape or queries.shape[-2] == 0 or queries.shape[-1] == 0:
        raise ValueError(f"q and k must have one shape (..., seq, head_dim), got {queries.shape} and {keys.shape}")
    seq, head_dim = queries.shape[-2], queries.shape[-1]
    accepted_e = f"a finite real array of shape (n_positions, head_dim={head_dim}) with n_positions >= 1"
    table = check_real_array(embeddings, "embeddings", accepted_e, min_ndim=2)
    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] != head_dim:
        raise ValueError(f"embeddings must be {accepted_e}, got shape {table.shape}")
    factor = 1.0 / math.sqrt(head_dim) if scale is None else check_real(scale, "scale", above=0.0)
    check_table_size(queries.size // head_dim * max(seq, table.shape[0]), 1, "the logits' size", "1")
    scores = queries @ np.swapaxes(keys, -1, -2)
    future = np.arange(seq)[None, :] > np.arange(seq)[:, None]
    gates = np.where(future, 0.0, 1.0 / (1.0 + np.exp(-factor * scores)))
    positions = np.minimum(cope_positions(gates), table.shape[0] - 1)
    floor = np.floor(positions)
    weight = positions - floor
    integer_logits = queries @ table.T  # q_i . e[n] for every integer position n: (..., seq, n_positions)
    low = np.take_along_axis(integer_logits, floor.astype(np.int64), axis=-1)
    high = np.take_along_axis(integer_logits, np.ceil(positions).astype(np.int64), axis=-1)
    position_logits = weight * high + (1.0 - weight) * low
    logits: NDArray[np.float64] = factor * (scores + position_logits)
    logits[..., future] = -np.inf
    return logits
