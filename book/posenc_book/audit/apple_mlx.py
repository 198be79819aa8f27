"""Adapters for Apple's MLX (its CPU backend on Linux): ``nn.RoPE`` in both layouts and ``nn.ALiBi``'s slopes,
with float32 and with bfloat16 attention scores."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import BFLOAT16_CAST, HEAD_DIM, Implementation, by_offset, fed_dtype

__all__ = ["implementations"]


def _rope(traditional: bool) -> Any:
    import mlx.core as mx
    import mlx.nn

    rope = mlx.nn.RoPE(HEAD_DIM, traditional=traditional)  # base 10000, calls mx.fast.rope
    cast = mlx.nn.RoPE(HEAD_DIM, traditional=traditional)
    cast.set_dtype(mx.bfloat16)  # how an MLX model is cast; nn.RoPE holds no array, so nothing changes

    def rotate_at(x: NDArray[np.float64], offset: int, dtype: str) -> NDArray[np.float64]:
        module = cast if dtype == BFLOAT16_CAST else rope
        out = module(mx.array(x.astype(np.float32)[None]).astype(getattr(mx, fed_dtype(dtype))), offset=offset)
        return np.asarray(out.astype(mx.float32)[0], dtype=np.float64)

    return by_offset(rotate_at)


def _alibi(scores_dtype: str) -> Any:
    import mlx.core as mx
    import mlx.nn

    alibi = mlx.nn.ALiBi()

    def slopes(n_heads: int) -> NDArray[np.float64]:
        # nn.ALiBi.__call__ adds the bias to scores (batch, heads, queries, keys) and builds the slopes in the
        # scores' dtype; one query at position 0 and keys 0 and 1: the bias at key 1 is minus the slope
        scores = mx.zeros((1, n_heads, 1, 2), dtype=getattr(mx, scores_dtype))
        bias = alibi(scores).astype(mx.float32)
        return -np.asarray(bias[0, :, 0, 1], dtype=np.float64)

    return slopes


def implementations() -> list[Implementation]:
    """The MLX implementations under audit."""
    source = "mlx/nn/layers/positional_encoding.py"
    return [
        Implementation("mlx", "nn.RoPE", "rotary", lambda: _rope(False), layout="halves", source=source),
        Implementation(
            "mlx", "nn.RoPE(traditional=True)", "rotary", lambda: _rope(True), layout="interleaved", source=source
        ),
        Implementation("mlx", "nn.ALiBi, float32 scores", "slopes", lambda: _alibi("float32"), source=source),
        Implementation("mlx", "nn.ALiBi, bfloat16 scores", "slopes", lambda: _alibi("bfloat16"), source=source),
    ]
