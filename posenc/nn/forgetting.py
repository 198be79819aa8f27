r"""Forgetting attention (FoX) in PyTorch: the forget gates, their decay bias, and the bias as a ``score_mod``."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from posenc._validation import check_d_model, check_int, check_table_size
from posenc.nn._checks import check_embeddings, check_float_tensor, check_on_device, offset_tensor
from posenc.nn.flex import ScoreMod

__all__ = ["ForgettingGate", "forgetting_bias", "forgetting_score_mod"]

_LOG_FORGET_SHAPE = "(..., k_len) with k_len >= 1"
_HINT = "use forgetting_score_mod() with torch.nn.attention.flex_attention, which never builds the bias tensor"


class ForgettingGate(nn.Module):
    r"""The forget gates of forgetting attention: one :math:`\log f_t` per head and token, computed from the token.

    Parameters
    ----------
    d_model : int
        Width of the tokens; a positive int.
    n_heads : int
        Number of heads, each with its own gate; a positive int.

    Attributes
    ----------
    proj : nn.Linear(d_model, n_heads)
        :math:`w_f` and :math:`b_f` of every head, with PyTorch's default initialisation (the authors' layer
        code draws the weights from :math:`N(0, 0.02^2)`, its default ``initializer_range``, with a zero bias).

    Notes
    -----
    :math:`\log f_t = \log \sigma(w_f^\top x_t + b_f)` (Lin et al., 2025), computed in float32 at least, as the
    authors' ``ForgettingAttentionLayer`` does. :func:`forgetting_bias` turns the gates into the bias
    :math:`D_{ij} = \sum_{l=j+1}^{i} \log f_l` (see :func:`posenc.forgetting_bias`), and
    :func:`forgetting_score_mod` gives it to FlexAttention.

    References
    ----------
    .. [1] Z. Lin, E. Nikishin, X. O. He, A. Courville, "Forgetting Transformer: Softmax Attention with a
       Forget Gate", ICLR 2025, arXiv:2503.02130.

    Examples
    --------
    >>> gate = ForgettingGate(16, 4)
    >>> x = torch.randn(2, 5, 16)  # (batch, seq, d_model)
    >>> log_forget = gate(x)  # (batch, n_heads, seq)
    >>> q = k = v = torch.randn(2, 4, 5, 8)
    >>> out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=forgetting_bias(log_forget))
    >>> out.shape
    torch.Size([2, 4, 5, 8])
    """

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.d_model = check_d_model(d_model, even=False)
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=2**16)
        check_table_size(self.n_heads, self.d_model, "n_heads", "d_model")
        self.proj = nn.Linear(self.d_model, self.n_heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\log f_t` of every head and token of ``x``.

        Parameters
        ----------
        x : (batch, seq, d_model) tensor
            Floating point, of the module's dtype.

        Returns
        -------
        log_forget : (batch, n_heads, seq) tensor
            :math:`\log \sigma(w_f^\top x_t + b_f) \le 0`, in float32 (float64 for a float64 module).

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor of the module's dtype.
        ValueError
            If ``x`` is not of shape ``(batch, seq, d_model)``.
        """
        check_embeddings(x, self.d_model)
        if x.dtype != self.proj.weight.dtype:
            raise TypeError(f"x must have the module's dtype {self.proj.weight.dtype}, got {x.dtype}")
        logits = self.proj(x).transpose(1, 2)
        return F.logsigmoid(logits.to(torch.promote_types(logits.dtype, torch.float32)))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}"


def _check_log_forget(log_forget: object) -> torch.Tensor:
    """``log_forget`` as a floating ``(..., k_len)`` tensor, its values (finite, <= 0) checked on its device."""
    tensor = check_float_tensor(log_forget, "log_forget", _LOG_FORGET_SHAPE)
    if tensor.shape[-1] == 0:
        raise ValueError(f"log_forget must have shape {_LOG_FORGET_SHAPE}, got {tuple(tensor.shape)}")
    valid = (torch.isfinite(tensor) & (tensor <= 0)).all()
    check_on_device(valid, "log_forget must be finite and <= 0 (the log of a gate in (0, 1]): the tensor is not")
    return tensor


def _totals(log_forget: torch.Tensor) -> torch.Tensor:
    """:math:`c_t = \\sum_{l \\le t} \\log f_l` in float64, whatever the input's dtype."""
    return torch.cumsum(log_forget.to(torch.float64), dim=-1)


def forgetting_bias(log_forget: torch.Tensor, q_len: int | None = None) -> torch.Tensor:
    r"""The decay bias of forgetting attention, to add to the causal logits (or pass as ``attn_mask``).

    Parameters
    ----------
    log_forget : (..., k_len) tensor
        :math:`\log f_t` of every token (:class:`ForgettingGate`'s output, or the cached gates of the keys
        followed by the new tokens'): floating, finite and ``<= 0`` (checked on its device); ``k_len >= 1``.
    q_len : int or None, default None
        Number of queries, the last ``q_len`` tokens; ``None`` means ``k_len``. An int in ``[0, k_len]``.

    Returns
    -------
    bias : (..., q_len, k_len) tensor
        Of ``log_forget``'s dtype and device: ``bias[..., i, j]`` is the sum of ``log_forget`` over the tokens
        after key ``j`` up to query ``i``'s token ``k_len - q_len + i``, ``-inf`` for keys after it. Equal to
        :func:`posenc.forgetting_bias` up to one rounding: the cumulative sums are taken in float64.

    Raises
    ------
    TypeError
        If ``log_forget`` is not a floating tensor or ``q_len`` not an int.
    ValueError
        If ``log_forget`` has no axis or no token, a value that is not finite or is positive, ``q_len`` is
        out of range, or the bias would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements (the message then
        points to :func:`forgetting_score_mod`).

    Notes
    -----
    :math:`D_{ij} = c_{t_i} - c_j` with :math:`c_t = \sum_{l \le t} \log f_l` and :math:`t_i` query
    :math:`i`'s token: one cumulative sum and a difference (see :func:`posenc.forgetting_bias`). Summed in
    float32, :math:`c_t` of a long sequence would lose the small differences between nearby tokens to
    rounding; in float64 the bias is exact to float32 rounding at any length this function allows.

    Examples
    --------
    >>> forgetting_bias(torch.log(torch.tensor([1.0, 0.5, 0.25])))
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.6931,  0.0000,    -inf],
            [-2.0794, -1.3863,  0.0000]])
    """
    tensor = _check_log_forget(log_forget)
    k_len = tensor.shape[-1]
    queries = k_len if q_len is None else check_int(q_len, "q_len", maximum=k_len)
    check_table_size(tensor.numel() // k_len * queries, k_len, "q_len times the leading axes", "k_len", hint=_HINT)
    totals = _totals(tensor)
    tokens = torch.arange(k_len - queries, k_len, device=tensor.device)
    bias = totals[..., k_len - queries :, None] - totals[..., None, :]
    future = torch.arange(k_len, device=tensor.device)[None, :] > tokens[:, None]
    return bias.masked_fill(future, float("-inf")).to(tensor.dtype)


def forgetting_score_mod(log_forget: torch.Tensor, *, offset: int | torch.Tensor = 0) -> ScoreMod:
    r"""The bias of :func:`forgetting_bias` as a FlexAttention ``score_mod``, computed per score.

    Parameters
    ----------
    log_forget : (batch, n_heads, k_len) tensor
        :math:`\log f_t` of every key, as for :func:`forgetting_bias`; the batch and head indices that
        ``flex_attention`` passes select its row.
    offset : int or 0-d integer tensor, default 0
        Token of query 0: query ``i`` is token ``offset + i`` (``0`` for a prefill or training,
        ``k_len - q_len`` when decoding after a cache). ``0 <= offset``, and ``offset + q_len <= k_len``
        for the bias to be the dense one (a query beyond the last key reads the last key's sum).

    Returns
    -------
    score_mod : posenc.nn.flex.ScoreMod
        ``score_mod(score, batch, head, q_idx, kv_idx)`` returns ``score + bias[batch, head, q_idx, kv_idx]``
        of :func:`forgetting_bias` (``-inf`` for the keys after the query). It captures the float64 sums of
        ``log_forget`` and the offset on ``log_forget``'s device.

    Raises
    ------
    TypeError
        If ``log_forget`` is not a floating tensor, or ``offset`` not an int or 0-d integer tensor.
    ValueError
        If ``log_forget`` is not ``(batch, n_heads, k_len)`` with ``k_len >= 1`` or holds a value that is
        not finite or is positive, or ``offset`` is negative or above ``2**52``.

    Examples
    --------
    >>> log_forget = torch.log(torch.tensor([[[1.0, 0.5, 0.25]]]))  # (batch, n_heads, k_len)
    >>> mod = forgetting_score_mod(log_forget)
    >>> queries, keys = torch.arange(3)[:, None], torch.arange(3)
    >>> got = mod(torch.zeros(()), torch.tensor(0), torch.tensor(0), queries, keys)
    >>> bool(torch.equal(got, forgetting_bias(log_forget)[0, 0]))
    True
    """
    tensor = _check_log_forget(log_forget)
    if tensor.ndim != 3:
        raise ValueError(f"log_forget must have shape (batch, n_heads, k_len), got {tuple(tensor.shape)}")
    shift = offset_tensor(offset, causal=True, device=tensor.device)
    n_heads, k_len = tensor.shape[1], tensor.shape[2]
    totals = _totals(tensor).flatten()  # read at one flat index: a 0-d batch index would be read on the host
    last = k_len - 1
    dtype = tensor.dtype

    def forgetting(
        score: torch.Tensor, batch: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
    ) -> torch.Tensor:
        # in int64, since the int32 indices would take the offset's sum in int32 (0-d tensors do not promote)
        token = q_idx.to(torch.int64) + shift
        key = kv_idx.to(torch.int64)
        row = (batch * n_heads + head).to(torch.int64) * k_len
        difference = totals[row + token.clamp(max=last)] - totals[row + key.clamp(max=last)]
        bias = difference.to(dtype).to(score.dtype)
        return torch.where(key > token, float("-inf"), score + bias)

    return forgetting
