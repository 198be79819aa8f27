"""Adapter for Meta's reference Llama 3 code (the ``llama-models`` package), interleaved pairs."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import HEAD_DIM, Implementation, by_offset, from_torch, to_torch

__all__ = ["implementations"]

TABLE_LENGTH = 2**15
"""Meta's Transformer precomputes ``freqs_cis`` for twice its max_seq_len; 2**15 covers every check."""


def _llama3_rotary() -> Any:
    from llama_models.llama3.model import apply_rotary_emb, precompute_freqs_cis

    freqs_cis = precompute_freqs_cis(HEAD_DIM, TABLE_LENGTH)  # theta 10000, complex64 (positions, pairs)
    # Meta's Transformer keeps freqs_cis as a plain attribute (self.freqs_cis = ...), not a buffer, so
    # model.to(torch.bfloat16) leaves it complex64: a model cast to bfloat16 uses the same table.

    def rotate_at(x: NDArray[np.float64], offset: int, dtype: str) -> NDArray[np.float64]:
        q = to_torch(x, dtype)[None, :, None, :]  # (batch, seq, heads, head_dim), as Meta's attention has it
        # the slice Meta's Transformer.forward takes: freqs_cis[start_pos : start_pos + seqlen]
        rotated, _ = apply_rotary_emb(q, q, freqs_cis[offset : offset + len(x)])
        return from_torch(rotated[0, :, 0])

    return by_offset(rotate_at)


def implementations() -> list[Implementation]:
    """The llama-models implementation under audit."""
    return [
        Implementation(
            "llama-models",
            "llama3 precompute_freqs_cis + apply_rotary_emb",
            "rotary",
            _llama3_rotary,
            layout="interleaved",
            source="llama_models/llama3/model.py",
        )
    ]
