"""Adapters for Hugging Face transformers: Llama's rotary, the GGUF loader's layout conversion, Bloom's and
Falcon's ALiBi, T5's buckets."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_book.audit.common import BFLOAT16_CAST, HEAD_DIM, Implementation, from_torch, to_torch

__all__ = ["GPT_OSS_BASE", "GPT_OSS_YARN", "implementations"]

GPT_OSS_YARN = {
    "rope_type": "yarn",
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
}
"""GPT-OSS's rope dict as ``GptOssConfig`` writes it by default (transformers 5.23): YaRN, ramp not truncated."""
GPT_OSS_BASE = 150000.0
"""GPT-OSS's ``rope_theta``."""


def _llama_rotary() -> Any:
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(hidden_size=2 * HEAD_DIM, num_attention_heads=2, max_position_embeddings=2**15)
    rope = LlamaRotaryEmbedding(config)  # default rope_theta 10000.0
    # model.to(torch.bfloat16) casts every floating buffer, inv_freq among them
    cast = LlamaRotaryEmbedding(config).to(torch.bfloat16)

    def rotate(x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
        q = to_torch(x, dtype)[None, None]  # (batch, heads, seq, head_dim)
        module = cast if dtype == BFLOAT16_CAST else rope
        cos, sin = module(q, torch.as_tensor(positions)[None])  # position_ids (batch, seq), as a model passes
        rotated, _ = apply_rotary_pos_emb(q, q, cos, sin)
        return from_torch(rotated[0, 0])

    return rotate


def _yarn_rotary(per_layer_type: bool) -> Any:
    """GPT-OSS's rotary embedding from its flat rope dict, or Gemma 3's from a per-layer-type dict whose
    full-attention layers carry the same YaRN scaling."""
    import torch

    small = {"hidden_size": 2 * HEAD_DIM, "head_dim": HEAD_DIM, "num_attention_heads": 2, "num_key_value_heads": 2}
    yarn = dict(GPT_OSS_YARN, rope_theta=GPT_OSS_BASE)
    if per_layer_type:
        from transformers import Gemma3TextConfig
        from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding, apply_rotary_pos_emb

        config = Gemma3TextConfig(
            **small,
            num_hidden_layers=2,
            layer_types=["sliding_attention", "full_attention"],
            max_position_embeddings=131072,
            rope_parameters={
                "full_attention": yarn,
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        )
        gemma = Gemma3RotaryEmbedding(config)

        def rope(q: Any, position_ids: Any) -> Any:
            return gemma(q, position_ids, "full_attention")

    else:
        from transformers import GptOssConfig
        from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding, apply_rotary_pos_emb

        rope = GptOssRotaryEmbedding(GptOssConfig(**small, num_hidden_layers=2, rope_parameters=yarn))

    def rotate(x: NDArray[np.float64], positions: NDArray[np.int64], dtype: str) -> NDArray[np.float64]:
        q = to_torch(x, dtype)[None, None]  # (batch, heads, seq, head_dim)
        cos, sin = rope(q, torch.as_tensor(positions)[None])
        rotated, _ = apply_rotary_pos_emb(q, q, cos, sin)
        return from_torch(rotated[0, 0])

    return rotate


def _gguf_llama_permutation() -> Any:
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    processor = LlamaTensorProcessor(config={"num_attention_heads": 2, "num_key_value_heads": 2})

    def convert(weight: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(processor.process(weight, "blk.0.attn_q.weight").weights, dtype=np.float64)

    return convert


def _alibi_slopes(model: str) -> Any:
    import torch

    if model == "bloom":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    else:
        from transformers.models.falcon.modeling_falcon import build_alibi_tensor

    def slopes(n_heads: int) -> NDArray[np.float64]:
        # the bias of the key at position 1 is its head's slope
        bias = build_alibi_tensor(torch.ones(1, 2, dtype=torch.long), n_heads, torch.float32)
        return from_torch(bias.reshape(n_heads, 2)[:, 1])

    return slopes


def _t5_buckets() -> Any:
    import torch
    from transformers.models.t5.modeling_t5 import T5Attention

    def buckets(relative_position: NDArray[np.int64], **kwargs: Any) -> NDArray[np.float64]:
        bucket = T5Attention._relative_position_bucket(torch.as_tensor(relative_position), **kwargs)
        return np.asarray(bucket.numpy(), dtype=np.float64)

    return buckets


def implementations() -> list[Implementation]:
    """The transformers implementations under audit."""
    return [
        Implementation(
            "transformers",
            "LlamaRotaryEmbedding + apply_rotary_pos_emb",
            "rotary",
            _llama_rotary,
            layout="halves",
            source="transformers/models/llama/modeling_llama.py",
        ),
        Implementation(
            "transformers",
            "GptOssRotaryEmbedding, YaRN, flat rope dict",
            "scaled",
            lambda: _yarn_rotary(False),
            layout="halves",
            source="transformers/modeling_rope_utils.py",
            scaling=GPT_OSS_YARN,
            base=GPT_OSS_BASE,
        ),
        Implementation(
            "transformers",
            "Gemma3RotaryEmbedding, the same YaRN in a per-layer-type dict",
            "scaled",
            lambda: _yarn_rotary(True),
            layout="halves",
            source="transformers/modeling_rope_utils.py",
            scaling=GPT_OSS_YARN,
            base=GPT_OSS_BASE,
        ),
        Implementation(
            "transformers",
            "GGUF LlamaTensorProcessor (q rows)",
            "conversion",
            _gguf_llama_permutation,
            layout="halves",
            source="transformers/modeling_gguf_pytorch_utils.py",
        ),
        Implementation(
            "transformers",
            "Bloom build_alibi_tensor",
            "slopes",
            lambda: _alibi_slopes("bloom"),
            source="transformers/models/bloom/modeling_bloom.py",
        ),
        Implementation(
            "transformers",
            "Falcon build_alibi_tensor",
            "slopes",
            lambda: _alibi_slopes("falcon"),
            source="transformers/models/falcon/modeling_falcon.py",
        ),
        Implementation(
            "transformers",
            "T5Attention._relative_position_bucket",
            "buckets",
            _t5_buckets,
            source="transformers/models/t5/modeling_t5.py",
        ),
    ]
