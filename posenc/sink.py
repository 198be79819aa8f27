"""A learned attention sink (GPT-OSS): one extra logit per head that takes a share of the softmax.

Softmax must hand out all of a query's attention, so a head with nothing to attend to parks it on some token,
often the first (an "attention sink"). GPT-OSS gives each head a learned logit instead, a column of the
softmax that belongs to no token: whatever weight it takes is dropped, and the weights of the tokens sum to
less than 1. The PyTorch side is :class:`posenc.nn.AttentionSink`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc._validation import check_real_array

__all__ = ["sink_softmax"]


def sink_softmax(logits: ArrayLike, sinks: ArrayLike) -> NDArray[np.float64]:
    r"""Softmax over the keys and one learned sink logit per head, the sink's share dropped.

    Parameters
    ----------
    logits : (..., n_heads, q_len, k_len) array_like of float
        Attention logits (scaled, masked): finite or ``-inf`` (a masked key).
    sinks : (n_heads,) array_like of float
        The sink logit :math:`s_h` of each head: finite, or ``-inf`` for no sink.

    Returns
    -------
    weights : (..., n_heads, q_len, k_len) ndarray of float64
        :math:`e^{z_{ij}} / (e^{s_h} + \sum_k e^{z_{ik}})`; each row sums to :math:`1 - w_{\mathrm{sink}}`,
        below 1 whenever the sink is finite.

    Raises
    ------
    TypeError
        If ``logits`` or ``sinks`` is not an array of real numbers.
    ValueError
        If an entry is NaN or ``+inf``; if ``logits`` has fewer than 3 axes or ``sinks`` is not
        ``(n_heads,)`` for its third axis from the end; or if a row has every logit and its sink at
        ``-inf`` (no weight to share).

    Notes
    -----
    transformers' GPT-OSS (``eager_attention_forward`` in ``models/gpt_oss/modeling_gpt_oss.py``) appends
    ``module.sinks``, one learned logit per attention head, as a last column of every row of logits, subtracts
    the row's maximum, takes the softmax and drops the last column:

    .. math::

        w_{ij} = \frac{e^{z_{ij}}}{e^{s_h} + \sum_k e^{z_{ik}}}, \qquad
        w_{\mathrm{sink}} = \frac{e^{s_h}}{e^{s_h} + \sum_k e^{z_{ik}}} = \sigma(s_h - \mathrm{lse}_i),

    with :math:`\mathrm{lse}_i = \log \sum_k e^{z_{ik}}`. The values are not extended, so the output of a
    head is the plain softmax output scaled by :math:`1 - w_{\mathrm{sink}} = \sigma(\mathrm{lse}_i - s_h)`,
    which is how transformers' FlexAttention path applies the sink (``integrations/flex_attention.py``). A
    sink at :math:`-\infty` gives the plain softmax.

    References
    ----------
    .. [1] OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv:2508.10925, 2025.

    Examples
    --------
    >>> sink_softmax(np.zeros((1, 1, 3)), [0.0])  # three keys and a sink, all at logit 0
    array([[[0.25, 0.25, 0.25]]])
    >>> sink_softmax(np.zeros((1, 1, 3)), [-np.inf])  # no sink: the plain softmax
    array([[[0.33333333, 0.33333333, 0.33333333]]])
    """
    accepted = "a real array of shape (..., n_heads, q_len, k_len), finite or -inf"
    z = check_real_array(logits, "logits", accepted, min_ndim=3, allow_neginf=True)
    accepted_sinks = f"a real array of shape (n_heads,) = ({z.shape[-3]},), finite or -inf"
    s = check_real_array(sinks, "sinks", accepted_sinks, min_ndim=1, allow_neginf=True)
    if s.shape != (z.shape[-3],):
        raise ValueError(f"sinks must be {accepted_sinks}, got shape {s.shape}")
    column = np.broadcast_to(s[:, None, None], (*z.shape[:-1], 1))
    combined = np.concatenate([z, column], axis=-1)
    peak = combined.max(axis=-1, keepdims=True)
    if np.any(np.isneginf(peak)):
        raise ValueError("logits must leave each row a finite logit or a finite sink: found a row all at -inf")
    exponentials = np.exp(combined - peak)
    weights: NDArray[np.float64] = (exponentials / exponentials.sum(axis=-1, keepdims=True))[..., :-1]
    return weights
