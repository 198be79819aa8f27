"""Stick-breaking attention (Tan et al., 2025): each key takes a share of what the nearer keys left.

Stick-breaking replaces the softmax. Query :math:`i` walks back from the nearest key; each key :math:`j`
takes the fraction :math:`\\sigma(z_{ij})` of the stick the keys between it and the query left, so the
weights sum to at most 1, a key that fires hides every key behind it, and the order of the keys enters
without any position encoding. The PyTorch side is :func:`posenc.nn.stick_breaking_weights` and
:func:`posenc.nn.stick_breaking_attention`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import check_flag, check_query_key_lengths, check_real_array

__all__ = ["stick_breaking_weights"]


def _log_sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """:math:`\\log \\sigma(z) = -\\log(1 + e^{-z})`, without overflow for either sign of ``z``."""
    result: NDArray[np.float64] = -np.logaddexp(0.0, -z)
    return result


def stick_breaking_weights(
    logits: ArrayLike, *, attend_current: bool = False, offset: int | None = None
) -> NDArray[np.float64]:
    r"""The attention weights of stick-breaking attention, from the logits :math:`z_{ij}`.

    Parameters
    ----------
    logits : (..., q_len, k_len) array_like of float
        The logits :math:`z_{ij}` (``q_i . k_j`` times the scale); finite. Those of keys a query does not
        see are ignored.
    attend_current : bool, default False
        ``False``: query ``i`` sees the keys strictly before it, as in the paper's code by default (the
        stick left over then goes to the query's own value, see Notes). ``True``: its own key as well.
    offset : int or None, default None
        Position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``None`` means
        ``k_len - q_len`` (the queries are the last tokens). ``|offset| <= 2**52``; a query that sees no
        key gets weights 0.

    Returns
    -------
    weights : (..., q_len, k_len) ndarray of float64
        :math:`A_{ij}`: in ``[0, 1]``, 0 for the keys a query does not see; each row sums to at most 1.

    Raises
    ------
    TypeError
        If ``logits`` is not an array of real numbers, ``attend_current`` not a bool, or ``offset`` not an int.
    ValueError
        If ``logits`` has fewer than 2 axes or holds NaN or an infinity, or ``|offset| > 2**52``.

    Notes
    -----
    With :math:`\beta_{ij} = \sigma(z_{ij})`, Tan et al. (2025) give query :math:`i` the weights

    .. math::

        A_{ij} = \beta_{ij} \prod_{j < k < i} (1 - \beta_{ik}), \qquad o_i = \sum_{j < i} A_{ij} v_j,

    computed in log space,

    .. math::

        \log A_{ij} = \log \sigma(z_{ij}) + \sum_{j<k<i} \log \sigma(-z_{ik}),

    since :math:`1 - \sigma(z) = \sigma(-z)`. The authors' reference code (``sb_ref.py`` and
    ``tests/test_attn.py`` of github.com/shawntan/stickbreaking-attention) excludes :math:`j = i` unless
    ``attend_current`` and adds the remainder :math:`1 - \sum_j A_{ij} = \prod_{j<i} (1 - \beta_{ij})` times
    :math:`v_i` to the output. Weights never exceed the stick that is left: a key :math:`k` behind a key
    :math:`j` (:math:`k < j < i`) gets at most :math:`1 - \beta_{ij}`, and of two keys with equal logits the
    nearer gets at least as much. This reference sums the logarithms in float64 from the nearest key back.

    References
    ----------
    .. [1] S. Tan, S. Yang, A. Courville, R. Panda, Y. Shen, "Scaling Stick-Breaking Attention: An Efficient
       Implementation and In-depth Study", ICLR 2025, arXiv:2410.17980.

    Examples
    --------
    >>> stick_breaking_weights(np.zeros((3, 3)))  # every key takes half of what is left
    array([[0.  , 0.  , 0.  ],
           [0.5 , 0.  , 0.  ],
           [0.25, 0.5 , 0.  ]])
    >>> stick_breaking_weights([[0.0, 5.0, 0.0]], offset=2)  # key 1 fires and all but hides key 0
    array([[0.00334643, 0.99330715, 0.        ]])
    """
    accepted = "a finite real array of shape (..., q_len, k_len)"
    z = check_real_array(logits, "logits", accepted, min_ndim=2)
    attend_current = check_flag(attend_current, "attend_current")
    q_len, k_len = z.shape[-2], z.shape[-1]
    _, _, start = check_query_key_lengths(q_len, k_len, offset)
    query_positions = np.arange(q_len, dtype=np.int64)[:, None] + start
    keys = np.arange(k_len, dtype=np.int64)[None, :]
    visible = keys <= query_positions if attend_current else keys < query_positions
    log_stay = np.where(visible, _log_sigmoid(-z), 0.0)  # log(1 - beta), 0 where the key is not seen
    # sum over the keys after j (k > j), accumulated from the last key back: a suffix sum shifted by one
    after = np.zeros_like(log_stay)
    after[..., :-1] = np.cumsum(log_stay[..., ::-1], axis=-1)[..., ::-1][..., 1:]
    weights: NDArray[np.float64] = np.where(visible, np.exp(_log_sigmoid(z) + after), 0.0)
    return weights
