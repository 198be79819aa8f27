"""Adapter for Hugging Face diffusers: the rotary embedding of Flux and the models built like it.

``get_1d_rotary_pos_embed`` (``diffusers/models/embeddings.py``) makes the cos and sin tables of one axis from
the positions it is given; ``FluxPosEmbed.forward`` (``models/transformers/transformer_flux.py``) calls it per
axis with ``pos = ids.float()``, ``use_real=True``, ``repeat_interleave_real=True`` and float64 frequencies
(float32 on MPS and NPU), and the attention applies the tables with ``apply_rotary_emb(..., use_real=True,
use_real_unbind_dim=-1)``: interleaved pairs. The adapter makes the same calls for one axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import HEAD_DIM, Implementation, from_torch, to_torch

__all__ = ["implementations"]


def _flux_axis() -> Any:
    import torch
    from diffusers.models.embeddings import apply_rotary_emb, get_1d_rotary_pos_embed

    def rotate(x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
        # FluxPosEmbed: pos = ids.float(); the tables hold no state and no module holds them, so a model cast
        # to bfloat16 computes them as before
        cos, sin = get_1d_rotary_pos_embed(
            HEAD_DIM,
            torch.as_tensor(positions).float(),
            theta=10000,
            repeat_interleave_real=True,
            use_real=True,
            freqs_dtype=torch.float64,
        )
        q = to_torch(x, dtype)[None, None]  # (batch, heads, seq, head_dim)
        return from_torch(apply_rotary_emb(q, (cos, sin), use_real=True, use_real_unbind_dim=-1)[0, 0])

    return rotate


def implementations() -> list[Implementation]:
    """The diffusers implementation under audit."""
    return [
        Implementation(
            "diffusers",
            "get_1d_rotary_pos_embed + apply_rotary_emb, as FluxPosEmbed",
            "rotary",
            _flux_axis,
            layout="interleaved",
            source="diffusers/models/embeddings.py",
        )
    ]
