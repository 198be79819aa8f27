"""Adapters for mlx-lm's rope utilities (``mlx_lm/models/rope_utils.py``): the scaled RoPEs its models build
from a config's ``rope_scaling``, each with the dict of the model that ships it.

- ``YarnRoPE`` from GPT-OSS's dict, as ``mlx_lm/models/gpt_oss.py`` builds it with ``initialize_rope``;
- ``Llama3RoPE`` from Llama 3.1's dict, through ``initialize_rope``;
- ``SuScaledRoPE``, as ``mlx_lm/models/phi3.py`` builds it for a ``longrope`` dict (lists made up here).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import HEAD_DIM, Implementation, by_offset, fed_dtype
from posenc_book.audit.hf_transformers import GPT_OSS_BASE, GPT_OSS_YARN

__all__ = ["LLAMA31", "LLAMA31_BASE", "LONGROPE", "implementations"]

LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
"""Llama 3.1's ``rope_scaling``."""
LLAMA31_BASE = 500000.0
"""Llama 3.1's ``rope_theta``."""
LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 8 + [1.0 + 0.25 * i for i in range(8)],
    "long_factor": [1.0] * 8 + [2.0**i for i in range(8)],
    "original_max_position_embeddings": 4096,
    "factor": 32.0,
}
"""A longrope dict shaped as Phi-3.5's (trained length 4096, ``max_position_embeddings`` 131072, so factor 32),
with lists of one divisor per pair of the audit's 32-feature head made up here: 1 for the fast pairs, growing
for the slow ones, the long list more than the short one."""
LONGROPE_MAX_POSITIONS = 131072


def _rope(kind: str) -> Any:
    import mlx.core as mx
    from mlx_lm.models.rope_utils import SuScaledRoPE, initialize_rope

    if kind == "yarn":  # gpt_oss.py: initialize_rope(head_dim, rope_theta, traditional=False, scaling_config=...)
        rope = initialize_rope(HEAD_DIM, GPT_OSS_BASE, traditional=False, scaling_config=GPT_OSS_YARN)
    elif kind == "llama3":
        rope = initialize_rope(
            HEAD_DIM, LLAMA31_BASE, traditional=False, scaling_config=LLAMA31, max_position_embeddings=131072
        )
    else:  # phi3.py builds SuScaledRoPE itself for a "longrope" (or "su") dict
        rope = SuScaledRoPE(
            HEAD_DIM,
            base=10000.0,
            max_position_embeddings=LONGROPE_MAX_POSITIONS,
            original_max_position_embeddings=int(LONGROPE["original_max_position_embeddings"]),  # type: ignore[call-overload]
            short_factor=LONGROPE["short_factor"],  # type: ignore[arg-type]
            long_factor=LONGROPE["long_factor"],  # type: ignore[arg-type]
        )

    def rotate_at(x: NDArray[np.float64], offset: int, dtype: str) -> NDArray[np.float64]:
        out = rope(mx.array(x.astype(np.float32)[None]).astype(getattr(mx, fed_dtype(dtype))), offset=offset)
        return np.asarray(out.astype(mx.float32)[0], dtype=np.float64)

    return by_offset(rotate_at)


def implementations() -> list[Implementation]:
    """The mlx-lm implementations under audit."""
    source = "mlx_lm/models/rope_utils.py"
    return [
        Implementation(
            "mlx-lm",
            "YarnRoPE, GPT-OSS's rope_scaling",
            "scaled",
            lambda: _rope("yarn"),
            layout="halves",
            source=source,
            scaling=GPT_OSS_YARN,
            base=GPT_OSS_BASE,
        ),
        Implementation(
            "mlx-lm",
            "Llama3RoPE, Llama 3.1's rope_scaling",
            "scaled",
            lambda: _rope("llama3"),
            layout="halves",
            source=source,
            scaling=LLAMA31,
            base=LLAMA31_BASE,
        ),
        Implementation(
            "mlx-lm",
            "SuScaledRoPE, a longrope rope_scaling",
            "scaled",
            lambda: _rope("longrope"),
            layout="halves",
            source=source,
            scaling=LONGROPE,
            base=10000.0,
        ),
    ]
