"""ALiBi as a PyTorch module: the fixed per-head linear bias to add to attention logits."""

from __future__ import annotations

import torch
from torch import nn

from posenc._validation import check_flag, check_int, check_query_key_lengths
from posenc.alibi import MAX_HEADS, alibi_slopes
from posenc.nn._checks import LONG_CONTEXT_HINT, offset_tensor
from posenc.nn.flex import ScoreMod

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

    For long contexts, :meth:`score_mod` gives the same bias to FlexAttention without the tensor
    (see :mod:`posenc.nn.flex`).
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
            A tensor's value stays on its device: it is checked there (on an accelerator by a device
            assertion, reported at the next synchronisation), never read on the host.

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
            If a length is negative, the bias would exceed ``posenc.MAX_TABLE_ELEMENTS`` elements (the
            message then points to :meth:`score_mod`), ``|offset| > 2**52``, or ``causal`` with
            ``k_len < q_len`` and no ``offset``, or a negative ``offset`` (a query would see no key).
        """
        causal = check_flag(causal, "causal")
        device = self.slopes.device
        given = 0 if isinstance(offset, torch.Tensor) else offset
        q_len, k_len, start = check_query_key_lengths(
            q_len, k_len, given, self.n_heads, "n_heads", hint=LONG_CONTEXT_HINT
        )
        shift: int | torch.Tensor = start
        if isinstance(offset, torch.Tensor):  # checked on the device: a static cache's counter is never read
            shift = offset_tensor(offset, causal=causal and q_len > 0, device=device)
        elif causal and start < 0 and q_len > 0:
            if offset is not None:
                raise ValueError(f"offset must be >= 0 when causal=True, got {start}: query 0 would see no key")
            raise ValueError(
                f"k_len must be >= q_len when causal=True, got q_len={q_len}, k_len={k_len}: the first queries "
                "would see no key"
            )
        if not (q_len and k_len):  # an empty bias: allocate nothing of the other length (it may be huge)
            return torch.zeros(self.n_heads, q_len, k_len, dtype=self.slopes.dtype, device=device)
        # key position minus query position, as an int: a zero distance becomes +0.0, never -0.0
        relative = torch.arange(k_len, device=device)[None, :] - (torch.arange(q_len, device=device) + shift)[:, None]
        if not causal:
            return self.slopes[:, None, None] * (-relative.abs()).to(torch.float32)
        bias = self.slopes[:, None, None] * relative.to(torch.float32)
        return bias.masked_fill(relative > 0, float("-inf"))

    def score_mod(self, *, causal: bool = True, offset: int | torch.Tensor = 0) -> ScoreMod:
        r"""The bias of :meth:`forward` as a FlexAttention ``score_mod``, computed per score: no bias tensor.

        Parameters
        ----------
        causal : bool, default True
            As in :meth:`forward`: ``-inf`` on the keys after each query, else the symmetric bias.
        offset : int or 0-d integer tensor, default 0
            Position of query 0: query ``i`` sits at ``offset + i``, key ``j`` at ``j``. ``0`` for a prefill
            or training (queries and keys the same tokens); the number of cached tokens when decoding
            (``k_len - q_len`` with a dynamic cache, ``cache_position[0]`` with a static one). There is no
            ``None`` default as in :meth:`forward`, since a ``score_mod`` is not told the lengths.
            ``|offset| <= 2**52``; ``>= 0`` when ``causal``.

        Returns
        -------
        score_mod : posenc.nn.flex.ScoreMod
            ``score_mod(score, batch, head, q_idx, kv_idx)`` returns ``score + bias[head, q_idx, kv_idx]``
            with ``bias = self(q_len, k_len, causal=causal, offset=offset)`` for any lengths: the same
            float32 bias values (cast to the score's dtype), added to the scaled score (``-inf`` for the keys
            after a causal query).
            It captures ``slopes`` and the offset (a 0-d int64 tensor) on the device of ``slopes``: move
            the module first. Pass it as ``flex_attention(q, k, v, score_mod=...)``, with q, k and v of
            shape ``(batch, n_heads, seq, head_dim)``.

        Raises
        ------
        TypeError
            If ``causal`` is not a bool or ``offset`` not an int or 0-d integer tensor.
        ValueError
            If ``|offset| > 2**52``, or ``offset < 0`` with ``causal``.

        Notes
        -----
        Causal masking through the ``-inf`` of the score_mod still computes the scores of the masked
        pairs; with ``block_mask=create_block_mask(posenc.nn.flex.causal_mask_mod(offset), ...)`` as
        well, FlexAttention skips the blocks that are masked entirely.

        Examples
        --------
        >>> alibi = ALiBiBias(8)
        >>> mod = alibi.score_mod(offset=2)
        >>> heads, queries, keys = torch.arange(8)[:, None, None], torch.arange(1)[:, None], torch.arange(6)
        >>> bool((mod(torch.zeros(()), 0, heads, queries, keys) == alibi(1, 6, offset=2)).all())
        True
        """
        causal = check_flag(causal, "causal")
        shift = offset_tensor(offset, causal=causal, device=self.slopes.device)
        slopes = self.slopes

        def alibi(
            score: torch.Tensor, batch: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
        ) -> torch.Tensor:
            # key position minus query position as an int, as forward computes it, so the bias is the same float32;
            # in int64, since the int32 indices would take the offset's sum in int32 (0-d tensors do not promote)
            relative = kv_idx.to(torch.int64) - (q_idx.to(torch.int64) + shift)
            if not causal:
                return score + (slopes[head] * (-relative.abs()).to(torch.float32)).to(score.dtype)
            biased = score + (slopes[head] * relative.to(torch.float32)).to(score.dtype)
            return torch.where(relative > 0, float("-inf"), biased)

        return alibi

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}"
