"""ALiBi as a PyTorch module: the fixed per-head linear bias to add to attention logits."""

from __future__ import annotations

import torch
from torch import nn

from posenc._validation import check_flag, check_int, check_query_key_lengths
from posenc.alibi import MAX_HEADS, alibi_slopes

__all__ = ["ALiBiBias"]


class ALiBiBias(nn.Module):
    r"""The ALiBi bias of Press et al. (2022) for ``n_heads`` heads; nothing in it is trained.

    Parameters
    ----------
    n_heads : int
        Number of attention heads; an int in ``[1, posenc.alibi.MAX_HEADS]``.

    Attributes
    ----------
    slopes : (n_heads,) float32 tensor
        :func:`posenc.alibi_slopes` rounded to float32; a non-persistent buffer (it moves with ``.to()``
        but is not saved in ``state_dict``, since it is a fixed function of ``n_heads``).

    Notes
    -----
    Head :math:`h` adds :math:`-m_h \, (i - j)` to the logit of query position :math:`i` and key position
    :math:`j` (Press et al., 2022, §3); see :func:`posenc.alibi_bias` for the slopes :math:`m_h`, the
    non-power-of-two rule and the bidirectional form.

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409.

    Examples
    --------
    >>> alibi = ALiBiBias(8)
    >>> alibi(3)[0]
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.5000,  0.0000,    -inf],
            [-1.0000, -0.5000,  0.0000]])
    >>> logits = torch.zeros(2, 8, 3, 5)  # (batch, heads, queries, keys): 3 new tokens after 2 cached
    >>> (logits + alibi(3, 5)).shape
    torch.Size([2, 8, 3, 5])
    """

    slopes: torch.Tensor

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=MAX_HEADS)
        slopes = torch.from_numpy(alibi_slopes(self.n_heads)).to(torch.float32)
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(self, q_len: int, k_len: int | None = None, *, causal: bool = True) -> torch.Tensor:
        r"""The bias for ``q_len`` queries that are the last ``q_len`` of ``k_len`` key positions.

        Parameters
        ----------
        q_len : int
            Number of queries; ``>= 0``.
        k_len : int or None, default None
            Number of keys; ``>= q_len`` when ``causal``. ``None`` means ``q_len``.
        causal : bool, default True
            ``True``: ``-inf`` on the keys after each query. ``False``: ``-m_h * |i - j|`` everywhere.

        Returns
        -------
        bias : (n_heads, q_len, k_len) float32 tensor
            On the device of ``slopes``; query ``i`` sits at position ``k_len - q_len + i``, key ``j``
            at ``j``; equal to ``posenc.alibi_bias(n_heads, q_len, k_len, causal=causal)`` up to float32
            rounding.

        Raises
        ------
        TypeError
            If a length is not an int or ``causal`` is not a bool.
        ValueError
            If a length is negative, the bias would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements, or
            ``causal`` with ``k_len < q_len`` (a query would see no key).
        """
        causal = check_flag(causal, "causal")
        q_len, k_len, offset = check_query_key_lengths(q_len, k_len, None, self.n_heads, "n_heads")
        if causal and offset < 0 and q_len > 0:
            raise ValueError(
                f"k_len must be >= q_len when causal=True, got q_len={q_len}, k_len={k_len}: the first queries "
                "would see no key"
            )
        device = self.slopes.device
        # key position minus query position, as an int: a zero distance becomes +0.0, never -0.0
        relative = torch.arange(k_len, device=device)[None, :] - (torch.arange(q_len, device=device) + offset)[:, None]
        if not causal:
            return self.slopes[:, None, None] * (-relative.abs()).to(torch.float32)
        bias = self.slopes[:, None, None] * relative.to(torch.float32)
        return bias.masked_fill(relative > 0, float("-inf"))

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}"
