"""Adapter for rotary-embedding-torch (Phil Wang's ``RotaryEmbedding``), interleaved pairs."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import BFLOAT16_CAST, HEAD_DIM, Implementation, by_offset, from_torch, to_torch

__all__ = ["implementations"]


def _rotate_queries_or_keys() -> Any:
    import torch
    from rotary_embedding_torch import RotaryEmbedding

    rope = RotaryEmbedding(dim=HEAD_DIM)  # theta 10000, cache of up to 8192 positions
    cast = RotaryEmbedding(dim=HEAD_DIM).to(torch.bfloat16)  # freqs and the cache buffers in bfloat16

    def rotate_at(x: NDArray[np.float64], offset: int, dtype: str) -> NDArray[np.float64]:
        module = cast if dtype == BFLOAT16_CAST else rope
        return from_torch(module.rotate_queries_or_keys(to_torch(x, dtype)[None], offset=offset)[0])

    return by_offset(rotate_at)


def implementations() -> list[Implementation]:
    """The rotary-embedding-torch implementation under audit."""
    return [
        Implementation(
            "rotary-embedding-torch",
            "RotaryEmbedding.rotate_queries_or_keys",
            "rotary",
            _rotate_queries_or_keys,
            layout="interleaved",
            source="rotary_embedding_torch/rotary_embedding_torch.py",
        )
    ]
