r"""A learned attention sink per head (GPT-OSS), for dense logits or for FlexAttention's output."""

from __future__ import annotations

import torch
from torch import nn

from posenc._validation import check_int
from posenc.nn._checks import check_float_tensor

__all__ = ["AttentionSink"]


class AttentionSink(nn.Module):
    r"""One learned sink logit per head: a softmax column that belongs to no token and is dropped.

    Parameters
    ----------
    n_heads : int
        Number of attention heads (query heads); a positive int.

    Attributes
    ----------
    sinks : nn.Parameter of shape (n_heads,)
        The sink logit :math:`s_h` of each head, initialised to 0 (transformers' GPT-OSS draws it from
        :math:`N(0, \sigma^2)` with the config's ``initializer_range``). Set it to ``-inf`` for no sink.

    Notes
    -----
    As transformers' GPT-OSS (``eager_attention_forward`` in ``models/gpt_oss/modeling_gpt_oss.py``): the
    sink is appended to every row of logits, the softmax taken, and the sink's column dropped, so that
    :math:`w_{ij} = e^{z_{ij}} / (e^{s_h} + \sum_k e^{z_{ik}})` (see :func:`posenc.sink_softmax`). With an
    attention kernel that returns the log-sum-exp of each row, as FlexAttention does, :meth:`rescale` applies
    the sink to the output instead, as transformers' FlexAttention path does.

    References
    ----------
    .. [1] OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card", arXiv:2508.10925, 2025.

    Examples
    --------
    >>> sink = AttentionSink(4)
    >>> logits = torch.zeros(2, 4, 3, 3)  # (batch, heads, queries, keys)
    >>> sink(logits)[0, 0, 0]  # three keys and the sink at logit 0: a quarter each
    tensor([0.2500, 0.2500, 0.2500], grad_fn=<SelectBackward0>)
    """

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=2**16)
        self.sinks = nn.Parameter(torch.zeros(self.n_heads))

    def _sinks(self, dtype: torch.dtype) -> torch.Tensor:
        return self.sinks.to(dtype)[:, None, None]

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        r"""The attention weights of every key, with the sink's share dropped.

        Parameters
        ----------
        logits : (..., n_heads, q_len, k_len) tensor
            Scaled, masked attention logits (``-inf`` for masked keys), floating point.

        Returns
        -------
        weights : (..., n_heads, q_len, k_len) tensor
            :math:`e^{z_{ij}} / (e^{s_h} + \sum_k e^{z_{ik}})`, of ``logits``' dtype; each row sums to less
            than 1 unless the sink is ``-inf``.

        Raises
        ------
        TypeError
            If ``logits`` is not a floating tensor.
        ValueError
            If its third axis from the end is not ``n_heads``.
        """
        tensor = check_float_tensor(logits, "logits", f"(..., n_heads={self.n_heads}, q_len, k_len)", min_ndim=3)
        if tensor.shape[-3] != self.n_heads:
            raise ValueError(
                f"logits must have shape (..., n_heads={self.n_heads}, q_len, k_len), got {tuple(tensor.shape)}"
            )
        column = self._sinks(tensor.dtype).expand(*tensor.shape[:-1], 1)
        combined = torch.cat([tensor, column], dim=-1)
        return torch.softmax(combined, dim=-1)[..., :-1]

    def rescale(self, out: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
        r"""Apply the sink to an attention output computed without it, from the rows' log-sum-exp.

        Parameters
        ----------
        out : (..., n_heads, q_len, v_dim) tensor
            Softmax attention output without the sink (``flex_attention``'s first output), floating point.
        lse : (..., n_heads, q_len) tensor
            :math:`\log \sum_k e^{z_{ik}}` of each row (FlexAttention's ``lse``), floating point.

        Returns
        -------
        out : (..., n_heads, q_len, v_dim) tensor
            ``out * sigmoid(lse - sink)``: the output of :meth:`forward`'s weights times the values, of
            ``out``'s dtype.

        Raises
        ------
        TypeError
            If ``out`` or ``lse`` is not a floating tensor.
        ValueError
            If their shapes do not fit, or their head axis is not ``n_heads``.

        Notes
        -----
        .. math::

            \sum_j w_{ij} v_j = \sigma(\mathrm{lse}_i - s_h) \sum_j \operatorname{softmax}(z_i)_j v_j,

        since the sink multiplies every weight of the row by
        :math:`e^{\mathrm{lse}_i} / (e^{\mathrm{lse}_i} + e^{s_h})`.

        Examples
        --------
        >>> sink = AttentionSink(2)
        >>> sink.rescale(torch.ones(1, 2, 1, 3), torch.zeros(1, 2, 1))  # lse = sink = 0: half the output
        tensor([[[[0.5000, 0.5000, 0.5000]],
        <BLANKLINE>
                 [[0.5000, 0.5000, 0.5000]]]], grad_fn=<MulBackward0>)
        """
        values = check_float_tensor(out, "out", f"(..., n_heads={self.n_heads}, q_len, v_dim)", min_ndim=3)
        sums = check_float_tensor(lse, "lse", f"(..., n_heads={self.n_heads}, q_len)", min_ndim=2)
        if values.shape[-3] != self.n_heads or sums.shape != values.shape[:-1]:
            raise ValueError(
                f"out and lse must have shapes (..., n_heads={self.n_heads}, q_len, v_dim) and (..., n_heads, "
                f"q_len), got {tuple(values.shape)} and {tuple(sums.shape)}"
            )
        wide = torch.promote_types(sums.dtype, torch.float32)
        kept = torch.sigmoid(sums.to(wide) - self.sinks.to(wide)[:, None])
        return values * kept[..., None].to(values.dtype)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}"
