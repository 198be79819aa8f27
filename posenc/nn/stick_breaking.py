r"""Stick-breaking attention in PyTorch: weights computed in log space, and the attention that uses them."""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from posenc._validation import check_flag, check_real, check_table_size
from posenc.nn._checks import check_float_tensor, check_on_device, offset_tensor

__all__ = ["stick_breaking_weights", "stick_breaking_attention"]


def _visible(
    q_len: int, k_len: int, offset: int | torch.Tensor | None, attend_current: bool, device: torch.device
) -> torch.Tensor:
    """``(q_len, k_len)`` bool: which keys each query sees (query ``i`` at ``offset + i``)."""
    shift = offset_tensor(k_len - q_len if offset is None else offset, causal=False, device=device)
    queries = torch.arange(q_len, device=device)[:, None] + shift
    keys = torch.arange(k_len, device=device)[None, :]
    return keys <= queries if attend_current else keys < queries


def _log_weights(logits: torch.Tensor, visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log A`` (``-inf`` where not visible) and the log of the stick left over, in float32 at least."""
    z = logits.to(torch.promote_types(logits.dtype, torch.float32))
    log_stay = F.logsigmoid(-z).masked_fill(~visible, 0.0)  # log(1 - sigmoid(z)), 0 for keys not seen
    # suffix sums from the nearest key back, shifted by one: the keys strictly after j
    suffix = log_stay.flip(-1).cumsum(-1).flip(-1)
    after = F.pad(suffix, (0, 1))[..., 1:]
    log_weights = (F.logsigmoid(z) + after).masked_fill(~visible, float("-inf"))
    return log_weights, suffix[..., :1].sum(-1)  # with no keys, an empty sum: the whole stick is left


def stick_breaking_weights(
    logits: torch.Tensor, *, attend_current: bool = False, offset: int | torch.Tensor | None = None
) -> torch.Tensor:
    r"""The weights :math:`A_{ij} = \sigma(z_{ij}) \prod_{j<k<i} (1 - \sigma(z_{ik}))` of stick-breaking attention.

    Parameters
    ----------
    logits : (..., q_len, k_len) tensor
        The logits :math:`z_{ij}`, floating point, no NaN (checked on the device); ``k_len`` may be 0.
    attend_current : bool, default False
        ``False``: query ``i`` sees the keys strictly before it (the authors' default); ``True``: its own too.
    offset : int, 0-d integer tensor or None, default None
        Position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``; ``None`` means
        ``k_len - q_len``. ``|offset| <= 2**52`` (a tensor's value is checked on its device).

    Returns
    -------
    weights : (..., q_len, k_len) tensor
        Of ``logits``' dtype: in ``[0, 1]``, 0 for the keys a query does not see, each row summing to at
        most 1 before the weights are rounded to that dtype (computed in float32 at least; a bfloat16 row can
        exceed 1 by that rounding, about 2**-9 of it);
        :func:`posenc.stick_breaking_weights` up to float32 rounding.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor, ``attend_current`` not a bool, or ``offset`` not an int or 0-d
        integer tensor.
    ValueError
        If ``logits`` has fewer than 2 axes, holds a NaN, or ``|offset| > 2**52``.

    Notes
    -----
    Computed in log space,

    .. math::

        \log A_{ij} = \log\sigma(z_{ij}) + \sum_{j<k<i} \log\sigma(-z_{ik}),

    with the sum accumulated from the query's nearest key back (a reversed cumulative sum) in float32 or wider, as
    in the authors' reference (``sb_ref.py`` of github.com/shawntan/stickbreaking-attention); see
    :func:`posenc.stick_breaking_weights`.

    Examples
    --------
    >>> stick_breaking_weights(torch.zeros(3, 3))
    tensor([[0.0000, 0.0000, 0.0000],
            [0.5000, 0.0000, 0.0000],
            [0.2500, 0.5000, 0.0000]])
    """
    tensor = check_float_tensor(logits, "logits", "(..., q_len, k_len)", min_ndim=2)
    attend_current = check_flag(attend_current, "attend_current")
    visible = _visible(tensor.shape[-2], tensor.shape[-1], offset, attend_current, tensor.device)
    check_on_device(~torch.isnan(tensor).any(), "logits must hold no NaN: the tensor does")
    log_weights, _ = _log_weights(tensor, visible)
    return log_weights.exp().to(tensor.dtype)


def stick_breaking_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    attend_current: bool = False,
    offset: int | torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Stick-breaking attention: the weighted values, and the stick each query leaves over.

    Parameters
    ----------
    q : (..., q_len, head_dim) tensor
        Queries, floating point.
    k : (..., k_len, head_dim) tensor
        Keys, of ``q``'s dtype and leading axes.
    v : (..., k_len, v_dim) tensor
        Values, of ``q``'s dtype and leading axes.
    scale : float or None, default None
        Multiplies :math:`q_i^\top k_j`; ``None`` means ``1 / sqrt(head_dim)``. Finite and ``> 0``.
    attend_current : bool, default False
        As in :func:`stick_breaking_weights`.
    offset : int, 0-d integer tensor or None, default None
        As in :func:`stick_breaking_weights`: ``None`` makes the queries the last ``q_len`` keys' tokens.

    Returns
    -------
    out : (..., q_len, v_dim) tensor
        :math:`o_i = \sum_j A_{ij} v_j`, of ``q``'s dtype.
    remainder : (..., q_len) tensor
        :math:`1 - \sum_j A_{ij} = \prod_j (1 - \sigma(z_{ij}))` over the keys query ``i`` sees, computed as
        that product (in log space), of ``q``'s dtype.

    Raises
    ------
    TypeError
        If ``q``, ``k`` or ``v`` is not a floating tensor, they differ in dtype, ``scale`` is not a real
        number, ``attend_current`` not a bool or ``offset`` not an int or 0-d integer tensor.
    ValueError
        If the shapes do not fit together, ``scale`` is not positive, the weights would exceed
        ``posenc.MAX_TABLE_ELEMENTS`` elements, ``|offset| > 2**52``, or ``q`` and ``k`` give a NaN logit
        (checked on the device).

    Notes
    -----
    The authors' tests add the remainder to the query's own value when a query does not see itself
    (``o + rem[..., None] * v`` in ``tests/test_attn.py`` of github.com/shawntan/stickbreaking-attention):
    ``out + remainder[..., None] * v`` for self-attention.

    Examples
    --------
    >>> q = k = v = torch.randn(2, 4, 6, 8)  # (batch, heads, seq, head_dim)
    >>> out, remainder = stick_breaking_attention(q, k, v)
    >>> out = out + remainder[..., None] * v  # the stick left over goes to the token itself
    >>> out.shape, remainder.shape
    (torch.Size([2, 4, 6, 8]), torch.Size([2, 4, 6]))
    """
    queries = check_float_tensor(q, "q", "(..., q_len, head_dim)", min_ndim=2)
    keys = check_float_tensor(k, "k", "(..., k_len, head_dim)", min_ndim=2)
    values = check_float_tensor(v, "v", "(..., k_len, v_dim)", min_ndim=2)
    if keys.dtype != queries.dtype or values.dtype != queries.dtype:
        raise TypeError(f"q, k and v must have one dtype, got {queries.dtype}, {keys.dtype} and {values.dtype}")
    if (
        keys.shape[:-2] != queries.shape[:-2]
        or values.shape[:-2] != queries.shape[:-2]
        or keys.shape[-1] != queries.shape[-1]
        or values.shape[-2] != keys.shape[-2]
    ):
        raise ValueError(
            "q, k and v must have shapes (..., q_len, head_dim), (..., k_len, head_dim) and (..., k_len, v_dim), "
            f"got {tuple(queries.shape)}, {tuple(keys.shape)} and {tuple(values.shape)}"
        )
    head_dim = queries.shape[-1]
    factor = (1.0 / math.sqrt(head_dim) if head_dim else 1.0) if scale is None else check_real(scale, "scale", above=0)
    attend_current = check_flag(attend_current, "attend_current")
    q_len, k_len = queries.shape[-2], keys.shape[-2]
    check_table_size(queries.numel() // max(head_dim, 1) if head_dim else 0, k_len, "the queries", "k_len")
    visible = _visible(q_len, k_len, offset, attend_current, queries.device)
    logits = (queries @ keys.transpose(-1, -2)) * factor
    check_on_device(~torch.isnan(logits).any(), "q and k must give no NaN logits: they do")
    log_weights, log_remainder = _log_weights(logits, visible)
    out = log_weights.exp() @ values.to(log_weights.dtype)
    return out.to(queries.dtype), log_remainder.exp().to(queries.dtype)
