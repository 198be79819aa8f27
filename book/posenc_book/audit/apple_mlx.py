"""Adapters for Apple's MLX (its CPU backend on Linux): ``nn.RoPE`` in both layouts and ``nn.ALiBi``'s slopes."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import HEAD_DIM, Implementation, by_offset

__all__ = ["implementations"]


def _rope(traditional: bool) -> Any:
    import mlx.core as mx
    import mlx.nn

    rope = mlx.nn.RoPE(HEAD_DIM, traditional=traditional)  # base 10000, calls mx.fast.rope

    def rotate_at(x: NDArray[np.float64], offset: int, dtype: str) -> NDArray[np.float64]:
        out = rope(mx.array(x.astype(np.float32)[None]).astype(getattr(mx, dtype)), offset=offset)
        return np.asarray(out.astype(mx.float32)[0], dtype=np.float64)

    return by_offset(rotate_at)


def _alibi() -> Any:
    import mlx.core as mx
    import mlx.nn

    def slopes(n_heads: int) -> NDArray[np.float64]:
        return np.asarray(mlx.nn.ALiBi.create_alibi_slope(n_heads, dtype=mx.float32), dtype=np.float64).reshape(-1)

    return slopes


def implementations() -> list[Implementation]:
    """The MLX implementations under audit."""
    source = "mlx/nn/layers/positional_encoding.py"
    return [
        Implementation("mlx", "nn.RoPE", "rotary", lambda: _rope(False), layout="halves", source=source),
        Implementation(
            "mlx", "nn.RoPE(traditional=True)", "rotary", lambda: _rope(True), layout="interleaved", source=source
        ),
        Implementation("mlx", "nn.ALiBi.create_alibi_slope", "slopes", _alibi, source=source),
    ]
