"""posenc_book.zoo's tiny models: a published config followed to logits, with posenc's rotation swapped in.

For GPT-OSS (YaRN without truncation, sliding and full layers), Gemma 3 (a base per layer type) and DeepSeek-V3
(latent attention's last 64 features, interleaved pairs, YaRN), a transformers model built from the published
config scaled down (two to six layers, hidden size 64, the head sizes and rope parameters kept) gives the same
logits, within ``1e-4`` in float32, when :func:`posenc_book.zoo.posenc_rotation` makes its attention rotate with
``posenc.nn.rotary_embedding`` of the config's :class:`posenc.RotaryPlan`. The difference left, at most ``1.2e-5``
here, grows with the position (for Gemma 3, measured once: 3e-7 at positions up to 7, 3e-4 up to 131071), as it
would if it came from transformers' float32 angles (posenc's are float64, rounded once): a hypothesis. A
misreading of the config (the wrong YaRN ``truncate``, the sliding layers given the full layers' base and scaling, the
latent pairs read as halves) moves the logits by more than ``4e-3``, forty times the tolerance.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

import posenc
from posenc_book.zoo import PUBLISHED_CONFIGS, posenc_rotation, tiny_model

pytestmark = pytest.mark.usefixtures("quiet_transformers")

TOLERANCE = 1e-4
POSITIONS = torch.tensor([[0, 1, 2, 1023, 4095, 4096, 8190, 8191]])
TOKENS = torch.tensor([[3, 7, 1, 9, 4, 2, 8, 5]])

SMALL = dict(hidden_size=64, intermediate_size=32, vocab_size=32)
TINY = {
    "openai/gpt-oss-20b": dict(
        SMALL, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"], num_local_experts=2, num_experts_per_tok=1,
    ),
    "google/gemma-3-4b-it": dict(SMALL, num_attention_heads=1, num_key_value_heads=1, num_hidden_layers=6),
    "deepseek-ai/DeepSeek-V3": dict(
        SMALL, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2, q_lora_rank=16, kv_lora_rank=16,
        moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
        first_k_dense_replace=1,
    ),
}  # fmt: skip
"""The scaled-down sizes: few layers and heads, a small hidden size; head sizes and rope parameters as published."""


def misread(model_id: str, plan: posenc.RotaryPlan) -> posenc.RotaryPlan:
    """``plan`` with one reading of the config wrong, as the bug galleries' engines read them."""
    if model_id.startswith("openai"):  # YaRN's truncate taken as the default True
        layers = [dataclasses.replace(k, scaling=dataclasses.replace(k.scaling, truncate=True)) for k in plan.layers]
    elif model_id.startswith("google"):  # every layer given the full-attention layers' base and scaling
        full = next(kind for kind in plan.kinds if kind.layer_type == "full_attention")
        layers = [dataclasses.replace(full, layer_type=kind.layer_type) for kind in plan.layers]
    else:  # latent attention's interleaved pairs read as halves
        layers = [dataclasses.replace(kind, layout="halves") for kind in plan.layers]
    return dataclasses.replace(plan, layers=tuple(layers))


def logits(model, plan=None) -> torch.Tensor:
    with torch.no_grad():
        if plan is None:
            return model(input_ids=TOKENS, position_ids=POSITIONS).logits
        with posenc_rotation(model, plan):
            return model(input_ids=TOKENS, position_ids=POSITIONS).logits


@pytest.mark.parametrize("model_id", TINY)
def test_a_tiny_model_gives_transformers_logits_with_posencs_rotation(model_id):
    values = {**PUBLISHED_CONFIGS[model_id].as_dict(), **TINY[model_id]}
    config, model = tiny_model(values)
    plan = posenc.RotaryPlan.from_config(config)
    theirs = logits(model)
    assert (logits(model, plan) - theirs).abs().max() < TOLERANCE
    assert (logits(model, misread(model_id, plan)) - theirs).abs().max() > 30 * TOLERANCE


def test_the_swap_rotates_with_posenc_and_restores_transformers_functions():
    """Inside the block the modeling file's function is posenc's (a plan with another layout changes the logits);
    after it, transformers' own function is back and no hook is left."""
    values = {**PUBLISHED_CONFIGS["google/gemma-3-4b-it"].as_dict(), **TINY["google/gemma-3-4b-it"]}
    config, model = tiny_model(values)
    modeling = sys.modules[type(model.model.layers[0].self_attn).__module__]
    original = modeling.apply_rotary_pos_emb
    plan = posenc.RotaryPlan.from_config(config)
    other = dataclasses.replace(plan, layers=tuple(dataclasses.replace(k, layout="interleaved") for k in plan.layers))
    theirs = logits(model)
    assert (logits(model, other) - theirs).abs().max() > 30 * TOLERANCE
    assert modeling.apply_rotary_pos_emb is original
    assert not model.model.layers[0].self_attn._forward_pre_hooks
    assert torch.equal(logits(model), theirs)
