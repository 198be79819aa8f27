"""Adapter for Equinox on JAX: ``equinox.nn.RotaryPositionalEmbedding``, halves layout.

The module rotates a ``(seq, embedding_size)`` array at positions ``0, ..., seq - 1`` and takes no offset;
the adapter puts the rows at their positions behind zero rows, the way a model without a cache recomputes
the whole prefix. Its cos/sin tables live in a cache of the library (``equinox.clear_caches`` empties it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import BFLOAT16_CAST, HEAD_DIM, Implementation, by_offset, fed_dtype

__all__ = ["OTHER_THETA", "implementations"]

OTHER_THETA = 1_000_000.0
"""The base of a second RoPE in the same process (as in a model whose local and global layers differ)."""
OTHER_LENGTH = 2**14
"""How many positions the second RoPE has rotated: more than any check visits."""
PADDED_LENGTHS = (16, 2**14)
"""The lengths the adapter pads a call to (each length costs JAX a compilation of every operation).

The short and long calls of the state check (16 and 4096 rows) stay apart: 16 and 16384."""


def _rotary(after_other_theta: bool) -> Any:
    import equinox
    import jax
    import jax.numpy as jnp

    equinox.clear_caches()  # start from a fresh process's state
    if after_other_theta:
        other = equinox.nn.RotaryPositionalEmbedding(HEAD_DIM, theta=OTHER_THETA)
        other(jnp.zeros((OTHER_LENGTH, HEAD_DIM), jnp.float32))
    modules = {
        dtype: equinox.nn.RotaryPositionalEmbedding(HEAD_DIM, dtype=getattr(jnp, dtype))  # theta 10000
        for dtype in ("float32", "bfloat16")
    }
    # a model cast as JAX casts one, every inexact array leaf to bfloat16; the module has no array leaf
    modules[BFLOAT16_CAST] = jax.tree_util.tree_map(
        lambda leaf: leaf.astype(jnp.bfloat16) if equinox.is_inexact_array(leaf) else leaf, modules["float32"]
    )

    def rotate_at(x: NDArray[np.float64], offset: int, dtype: str) -> NDArray[np.float64]:
        # zero rows behind, and after up to one of a few lengths (each new length costs JAX compilations)
        length = next(size for size in PADDED_LENGTHS if size >= offset + len(x))
        padded = np.zeros((length, x.shape[1]))
        padded[offset : offset + len(x)] = x
        out = modules[dtype](jnp.asarray(padded, dtype=getattr(jnp, fed_dtype(dtype))))
        # slice in NumPy: a JAX slice compiles anew for every offset
        return np.asarray(out).astype(np.float64)[offset : offset + len(x)]

    return by_offset(rotate_at)


def implementations() -> list[Implementation]:
    """The Equinox implementations under audit."""
    source = "equinox/nn/_embedding.py"
    return [
        Implementation(
            "equinox",
            "nn.RotaryPositionalEmbedding",
            "rotary",
            lambda: _rotary(False),
            layout="halves",
            source=source,
        ),
        Implementation(
            "equinox",
            f"nn.RotaryPositionalEmbedding, after one with theta {OTHER_THETA:.0e}",
            "rotary",
            lambda: _rotary(True),
            layout="halves",
            source=source,
        ),
    ]
