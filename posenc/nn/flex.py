r"""Attention biases for PyTorch's FlexAttention: the bias computed per score, never stored as a tensor.

:class:`posenc.nn.ALiBiBias` and :class:`posenc.nn.T5RelativeBias` return a dense ``(n_heads, q_len, k_len)``
bias, to add to the logits or pass as ``attn_mask=`` to ``torch.nn.functional.scaled_dot_product_attention``:
32 heads at 16384 tokens make 32 GiB of float32 before any attention is computed. Their ``score_mod``
methods instead return a function for ``torch.nn.attention.flex_attention.flex_attention``, which calls it on
each score with the indices of its batch, head, query and key (Dong et al., 2024, "Flex Attention: A Programming
Model for Generating Optimized Attention Kernels", arXiv:2412.05496), so that the bias of a
pair is computed where the score is and memory grows with the sequence, not with its square:

>>> import torch
>>> from torch.nn.attention.flex_attention import flex_attention
>>> from posenc.nn import ALiBiBias
>>> q = k = v = torch.zeros(1, 8, 4096, 64)
>>> attention = torch.compile(flex_attention)  # doctest: +SKIP
>>> out = attention(q, k, v, score_mod=ALiBiBias(8).score_mod())  # doctest: +SKIP

A query offset (the position of query 0, for decoding with a cache) is held in a 0-d int64 tensor that the
function captures, so a compiled ``flex_attention`` is not recompiled when only the offset changes.
:func:`posenc.nn.causal_mask_mod` gives the matching causal ``mask_mod`` for
``torch.nn.attention.flex_attention.create_block_mask``, which lets FlexAttention skip the blocks of keys
after the queries instead of computing and discarding them.

On CPU, PyTorch 2.13's FlexAttention computes no gradient for the query, key or value (it raises if they
require one); the learned table of :class:`posenc.nn.T5RelativeBias`, which its score_mod captures, does get
its gradient there when ``flex_attention`` runs uncompiled.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from posenc.nn._checks import offset_tensor

__all__ = ["ScoreMod", "MaskMod", "causal_mask_mod"]

ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``score_mod(score, batch, head, q_idx, kv_idx) -> score``, as ``flex_attention`` calls it (0-d int32 indices)."""

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``mask_mod(batch, head, q_idx, kv_idx) -> bool``, as ``create_block_mask`` calls it: ``True`` keeps the pair."""


def causal_mask_mod(offset: int | torch.Tensor = 0) -> MaskMod:
    """The causal ``mask_mod``: query ``i``, at position ``offset + i``, sees the keys ``j <= offset + i``.

    Parameters
    ----------
    offset : int or 0-d integer tensor, default 0
        Position of query 0, as in :meth:`posenc.nn.ALiBiBias.score_mod`; ``0 <= offset <= 2**52``. Held
        in a 0-d int64 tensor, on the offset's device if it is a tensor (its value checked there, never read
        on the host), else on the default device (a compiled ``flex_attention`` is then not recompiled when
        only the offset changes).

    Returns
    -------
    mask_mod : MaskMod
        For ``torch.nn.attention.flex_attention.create_block_mask``: ``kv_idx <= q_idx + offset``, a bool
        tensor of the broadcast shape of the indices.

    Raises
    ------
    TypeError
        If ``offset`` is not an int or a 0-d integer tensor.
    ValueError
        If ``offset`` is negative or above ``2**52``.

    Examples
    --------
    >>> mask_mod = causal_mask_mod(2)
    >>> mask_mod(0, 0, torch.arange(2)[:, None], torch.arange(4)[None, :])
    tensor([[ True,  True,  True, False],
            [ True,  True,  True,  True]])
    """
    device = offset.device if isinstance(offset, torch.Tensor) else torch.get_default_device()
    shift = offset_tensor(offset, causal=True, device=device)

    def causal(batch: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return kv_idx.to(torch.int64) <= q_idx.to(torch.int64) + shift  # int64: int32 + offset could overflow

    return causal
