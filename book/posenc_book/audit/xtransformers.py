"""Adapters for x-transformers: its rotary embedding, ALiBi slopes and T5-style relative position buckets."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import BFLOAT16_CAST, HEAD_DIM, Implementation, from_torch, import_allowing, to_torch

__all__ = ["implementations"]

JIT_DEPRECATION = "`torch.jit.script` is deprecated"
"""x-transformers decorates a helper with torch.jit.script at import; PyTorch 2.13 warns about it."""


def _library() -> Any:
    return import_allowing("x_transformers.x_transformers", JIT_DEPRECATION)


def _rotary() -> Any:
    import torch

    library = _library()
    rope = library.RotaryEmbedding(HEAD_DIM)  # base 10000
    cast = library.RotaryEmbedding(HEAD_DIM).to(torch.bfloat16)  # its buffer inv_freq in bfloat16

    def rotate(x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
        module = cast if dtype == BFLOAT16_CAST else rope
        freqs, scale = module(torch.as_tensor(positions))  # (1, seq, head_dim) angles, and 1.0
        return from_torch(library.apply_rotary_pos_emb(to_torch(x, dtype)[None], freqs, scale)[0])

    return rotate


def _alibi() -> Any:
    library = _library()

    def slopes(n_heads: int) -> NDArray[np.float64]:
        return from_torch(library.AlibiPositionalBias(heads=n_heads).slopes.reshape(-1))

    return slopes


def _t5_buckets() -> Any:
    import torch

    library = _library()

    def buckets(relative_position: NDArray[np.int64], *, bidirectional: bool, **kwargs: Any) -> NDArray[np.float64]:
        bucket = library.RelativePositionBias._relative_position_bucket(
            torch.as_tensor(relative_position), causal=not bidirectional, **kwargs
        )
        return np.asarray(bucket.numpy(), dtype=np.float64)

    return buckets


def implementations() -> list[Implementation]:
    """The x-transformers implementations under audit."""
    source = "x_transformers/x_transformers.py"
    return [
        Implementation(
            "x-transformers",
            "RotaryEmbedding + apply_rotary_pos_emb",
            "rotary",
            _rotary,
            layout="interleaved",
            source=source,
        ),
        Implementation("x-transformers", "AlibiPositionalBias", "slopes", _alibi, source=source),
        Implementation(
            "x-transformers", "RelativePositionBias._relative_position_bucket", "buckets", _t5_buckets, source=source
        ),
    ]
