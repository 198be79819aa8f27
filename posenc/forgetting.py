"""Forgetting attention (FoX; Lin et al., 2025): a decay bias that the tokens themselves set.

Each head computes a forget gate :math:`f_t \\in (0, 1]` from every token and adds to the logit of query
:math:`i` and key :math:`j` the sum of :math:`\\log f_t` over the tokens after the key, up to the query.
With every gate at 1 the bias is 0 and the attention is plain causal softmax; with one fixed gate it is
ALiBi's linear bias. The PyTorch side is :class:`posenc.nn.ForgettingGate` (the gates) and
:func:`posenc.nn.forgetting_bias` / :func:`posenc.nn.forgetting_score_mod` (the bias).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import check_int, check_real_array, check_table_size

__all__ = ["forgetting_bias"]


def forgetting_bias(log_forget: ArrayLike, q_len: int | None = None) -> NDArray[np.float64]:
    r"""The decay bias of forgetting attention, added to the causal attention logits of each head.

    Parameters
    ----------
    log_forget : (..., k_len) array_like of float
        :math:`\log f_t` of every token ``t = 0, ..., k_len - 1`` (one row per head, or per batch and head):
        finite and ``<= 0``, since a forget gate lies in ``(0, 1]``. ``k_len >= 1``.
    q_len : int or None, default None
        Number of queries, the last ``q_len`` tokens (query ``i`` is token ``k_len - q_len + i``, as when a
        decoder extends a cache); ``None`` means ``k_len``. An int in ``[0, k_len]``.

    Returns
    -------
    bias : (..., q_len, k_len) ndarray of float64
        ``bias[..., i, j] = sum(log_forget[..., j + 1 : t + 1])`` with ``t = k_len - q_len + i``, the token
        of query ``i``, for keys ``j <= t`` (0 on the diagonal); ``-inf`` for keys after the query.

    Raises
    ------
    TypeError
        If ``log_forget`` is not an array of real numbers, or ``q_len`` not an int.
    ValueError
        If ``log_forget`` has no axis, no token, a NaN, an infinity or a positive entry; if ``q_len`` is not in
        ``[0, k_len]``; or if the bias would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements.

    Notes
    -----
    Lin et al. (2025) compute, per head, a scalar forget gate from each token :math:`x_t`,

    .. math::

        f_t = \sigma(w_f^\top x_t + b_f), \qquad
        D_{ij} = \sum_{l = j + 1}^{i} \log f_l \quad (j \le i), \qquad
        O = \operatorname{softmax}\!\Big(\frac{Q K^\top}{\sqrt{d}} + D\Big) V,

    with :math:`D_{ij} = -\infty` for :math:`j > i`. Since :math:`D_{ij} = c_i - c_j` with
    :math:`c_t = \sum_{l \le t} \log f_l`, the bias costs one cumulative sum per head; the gates enter no
    other way, and the paper uses no position embedding with them. All gates at 1 give :math:`D = 0` on
    and below the diagonal (plain causal attention); a constant gate :math:`f` gives
    :math:`D_{ij} = (i - j) \log f`, ALiBi's bias with slope :math:`-\log f`. This reference takes the
    cumulative sums in float64 and returns their differences.

    References
    ----------
    .. [1] Z. Lin, E. Nikishin, X. O. He, A. Courville, "Forgetting Transformer: Softmax Attention with a
       Forget Gate", ICLR 2025, arXiv:2503.02130.

    Examples
    --------
    >>> forgetting_bias(np.log([1.0, 0.5, 0.25]))  # three tokens, one head
    array([[ 0.        ,        -inf,        -inf],
           [-0.69314718,  0.        ,        -inf],
           [-2.07944154, -1.38629436,  0.        ]])
    >>> forgetting_bias(np.zeros(4), q_len=1)  # every gate at 1: no decay
    array([[0., 0., 0., 0.]])
    """
    accepted = "a real array of shape (..., k_len) with k_len >= 1, finite and <= 0 (log of a gate in (0, 1])"
    logs = check_real_array(log_forget, "log_forget", accepted, min_ndim=1)
    k_len = logs.shape[-1]
    if k_len == 0:
        raise ValueError(f"log_forget must be {accepted}, got an array of shape {logs.shape}")
    if np.any(logs > 0):
        raise ValueError(f"log_forget must be {accepted}: found a positive entry")
    queries = k_len if q_len is None else check_int(q_len, "q_len", maximum=k_len)
    check_table_size(logs.size // k_len * queries, k_len, "q_len times the leading axes", "k_len")
    totals = np.cumsum(logs, axis=-1)  # c_t = sum of log f_l for l <= t
    tokens = np.arange(k_len - queries, k_len)
    bias: NDArray[np.float64] = totals[..., tokens, None] - totals[..., None, :]
    bias[..., np.arange(k_len)[None, :] > tokens[:, None]] = -np.inf
    return bias
