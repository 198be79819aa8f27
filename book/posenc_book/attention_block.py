"""Causal self-attention with rotary position embedding and a key-value cache.

One call takes a whole prompt (the prefill) or one new token per decoding
step. Prompts of different lengths share a batch padded on the left, with
their padding mask. Needs only torch and posenc. From the start-here page of
the posenc book, whose tests/test_attention_block.py checks it.

References
----------
.. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position
   Embedding", arXiv:2104.09864.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posenc.nn import RotaryEmbedding

__all__ = ["CausalSelfAttention", "KVCache"]


class KVCache:
    """The rotated keys, the values and the padding mask of earlier calls.

    Attributes
    ----------
    keys, values : (batch, heads, seen, head_dim) tensor or None
        Each key is rotated once, by its own position, when it is stored.
    real : (batch, seen) bool tensor or None
        False where a row was padded. None before the first call.
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.real: torch.Tensor | None = None

    def real_tokens(self) -> torch.Tensor | int:
        """How many real tokens each row holds: (batch, 1) tensor, or 0."""
        return 0 if self.real is None else self.real.sum(1, keepdim=True)

    def extend(
        self, keys: torch.Tensor, values: torch.Tensor, real: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Append one call's keys, values and mask; return all of them."""
        if self.keys is None or self.values is None or self.real is None:
            self.keys, self.values, self.real = keys, values, real
        else:
            self.keys = torch.cat((self.keys, keys), dim=2)
            self.values = torch.cat((self.values, values), dim=2)
            self.real = torch.cat((self.real, real), dim=1)
        return self.keys, self.values, self.real


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with rotary position embedding.

    Parameters
    ----------
    d_model : int
        Features per token, a multiple of ``n_heads``.
    n_heads : int
        Attention heads; each has ``d_model // n_heads`` features, an even
        number.
    base : float, default 10000.0
        The rotary base (``rope_theta`` in transformers' configs).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        base: float = 10000.0,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.rope = RotaryEmbedding(self.head_dim, base=base)

    def forward(
        self,
        x: torch.Tensor,
        *,
        cache: KVCache | None = None,
        real: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from each new token to itself and the real tokens before it.

        Parameters
        ----------
        x : (batch, new, d_model) tensor
            The new tokens: a whole prompt, or one token per decoding step.
        cache : KVCache or None, default None
            The tokens of earlier calls; this call's keys and values are
            appended to it. None: no earlier tokens, nothing kept.
        real : (batch, new) bool tensor or None, default None
            False at the left padding of a batch of prompts of different
            lengths. None: every new token is real.

        Returns
        -------
        (batch, new, d_model) tensor
            Zeros at padding.
        """
        batch, new, _ = x.shape
        if real is None:
            real = torch.ones(batch, new, dtype=torch.bool, device=x.device)
        if real.shape != (batch, new) or real.dtype != torch.bool:
            got = f"{real.dtype} {tuple(real.shape)}"
            raise ValueError(f"real must be bool ({batch}, {new}), got {got}")
        qkv = self.qkv(x).view(batch, new, 3, self.n_heads, self.head_dim)
        # q, k, v: (batch, heads, new, head_dim) each
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        # A token's position: how many real tokens of its row precede it.
        before = 0 if cache is None else cache.real_tokens()
        positions = (before + real.cumsum(1) - 1).clamp(min=0)
        q, k = self.rope.rotate_pair(q, k, positions=positions)
        keys_real = real
        if cache is not None:
            k, v, keys_real = cache.extend(k, v, real)
        seen = k.shape[2]
        # Query i of this call is token seen - new + i of the sequence.
        query_index = torch.arange(seen - new, seen, device=x.device)
        key_index = torch.arange(seen, device=x.device)
        causal = key_index <= query_index[:, None]
        # (batch, 1, new, seen): a padding query sees no key, and PyTorch's
        # attention gives it zeros (pytorch/pytorch#133882), not NaN.
        allowed = causal & keys_real[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.out(out.transpose(1, 2).reshape(batch, new, -1))
