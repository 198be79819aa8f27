"""ALiBi as a PyTorch module: the fixed per-head linear bias to add to attention logits."""

from __future__ import annotations

import torch
from torch import nn

from posenc._validation import check_flag, check_int, check_query_key_lengths
from posenc.alibi import MAX_HEADS, alibi_slopes
from posenc.nn._checks import offset_as_int

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
    >>> alibi(1, 6, offset=torch.tensor(2))[0]  # a static cache of 6 slots, the token at position 2
    tensor([[-1.0000, -0.5000,  0.0000,    -inf,    -inf,    -inf]])
    """

    slopes: torch.Tensor

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = check_int(n_heads, "n_heads", minimum=1, maximum=MAX_HEADS)
        slopes = torch.from_numpy(alibi_slopes(self.n_heads)).to(torch.float32)
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(
        self, q_len: int, k_len: int | None = None, *, causal: bool = True, offset: int | torch.Tensor | None = None
    ) -> torch.Tensor:
        r"""The bias for ``q_len`` queries at positions ``offset ...`` (default: the last ``q_len`` of ``k_len``).

        Parameters
        ----------
        q_len : int
            Number of queries; ``>= 0``.
        k_len : int or None, default None
            Number of keys; ``>= q_len`` when ``causal``. ``None`` means ``q_len``.
        causal : bool, default True
            ``True``: ``-inf`` on the keys after each query. ``False``: ``-m_h * |i - j|`` everywhere.
        offset : int, 0-d integer tensor or None, default None
            Position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``None`` means
            ``k_len - q_len``. Give it for a static cache, whose ``k_len`` is the cache's size and not the
            number of tokens seen (``cache_position[0]``). ``|offset| <= 2**52``; ``>= 0`` when ``causal``.

        Returns
        -------
        bias : (n_heads, q_len, k_len) float32 tensor
            On the device of ``slopes``; query ``i`` sits at position ``offset + i``, key ``j`` at ``j``;
            equal to ``posenc.alibi_bias(n_heads, q_len, k_len, causal=causal, offset=offset)`` up to float32
            rounding.

        Raises
        ------
        TypeError
            If a length is not an int, ``causal`` is not a bool, or ``offset`` not an int or 0-d integer tensor.
        ValueError
            If a length is negative, the bias would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements,
            ``|offset| > 2**52``, or ``causal`` with ``k_len < q_len`` and no ``offset``, or a negative
            ``offset`` (a query would see no key).
        """
        causal = check_flag(causal, "causal")
        given = offset_as_int(offset)
        q_len, k_len, offset = check_query_key_lengths(q_len, k_len, given, self.n_heads, "n_heads")
        if causal and offset < 0 and q_len > 0:
            if given is not None:
                raise ValueError(f"offset must be >= 0 when causal=True, got {offset}: query 0 would see no key")
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
