"""posenc's RotaryEmbedding inside transformers' Llama: left-padded batches and one-token-at-a-time decoding.

A tiny random-initialised ``LlamaForCausalLM`` (2 layers, 4 query and 2 key/value heads of 16) runs twice on the
same inputs: as transformers ships it, and with its rotary replaced by :class:`posenc.nn.RotaryEmbedding`. The swap
replaces the model's ``rotary_emb`` by a module that passes the positions on (transformers' own ``position_ids``,
``(batch, seq)``, or a 0-d tensor offset) in place of cos and sin, and ``apply_rotary_pos_emb``, which each attention
layer calls with them, by one that rotates q and k with posenc. Everything else (weights, masks, the key/value
cache) is transformers' own.

*Tolerance.* ``rotary_swap.TOLERANCE``, ``atol = rtol = 1e-5``, as tests/rotary_swap.py explains (the module also
holds the swap itself and the batch); wrong positions (the last test) move the logits by more than 100 times that.
"""

from __future__ import annotations

import pytest
import torch
from rotary_swap import HEAD_DIM, TINY_DECODER, TOLERANCE, decode, left_padded_batch, swap_rotary

from posenc.nn import RotaryEmbedding

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **TINY_DECODER,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def posenc_llama(monkeypatch, *, offsets=False, corrupt=None):
    """The same tiny Llama, its rotary replaced by posenc's (halves: transformers' rotate_half layout)."""
    from transformers.models.llama import modeling_llama

    rope = RotaryEmbedding(HEAD_DIM, layout="halves", base=10000.0)
    return swap_rotary(monkeypatch, modeling_llama, tiny_llama(), rope, offsets=offsets, corrupt=corrupt)


def test_left_padded_batch_with_per_row_position_ids_matches_transformers(monkeypatch):
    """Prefill and 4 decoding steps of a left-padded batch: (batch, seq) and then (batch, 1) position_ids."""
    batch = left_padded_batch()
    theirs = decode(tiny_llama(), *batch, steps=4)
    ours = decode(posenc_llama(monkeypatch), *batch, steps=4)
    real = batch[1].bool()
    torch.testing.assert_close(ours[0][real], theirs[0][real], **TOLERANCE)  # the padding's logits are noise
    for step, (mine, their) in enumerate(zip(ours[1:], theirs[1:]), start=1):
        torch.testing.assert_close(mine, their, **TOLERANCE, msg=lambda m, step=step: f"decoding step {step}: {m}")


def test_the_left_padded_row_equals_the_same_prompt_alone(monkeypatch):
    """Per-row positions are what makes padding harmless: row 1 gives the logits of its 5 tokens run alone."""
    input_ids, attention_mask, position_ids = left_padded_batch()
    model = posenc_llama(monkeypatch)
    with torch.no_grad():
        padded = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
        alone = model(input_ids=input_ids[1:, 4:]).logits
    torch.testing.assert_close(padded[1, 4:], alone[0], **TOLERANCE)


def test_decoding_with_0d_tensor_offsets_matches_transformers(monkeypatch):
    """An unpadded batch, decoded token by token through the cache; posenc gets each position as a 0-d tensor."""
    input_ids = torch.randint(1, 101, (2, 6), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(input_ids)
    positions = torch.arange(6).expand(2, 6)
    theirs = decode(tiny_llama(), input_ids, mask, positions, steps=5)
    model = posenc_llama(monkeypatch, offsets=True)
    ours = decode(model, input_ids, mask, positions, steps=5)
    for step, (mine, their) in enumerate(zip(ours, theirs)):
        torch.testing.assert_close(mine, their, **TOLERANCE, msg=lambda m, step=step: f"call {step}: {m}")
    seen = model.model.rotary_emb.offsets_seen
    assert [offset.ndim for offset in seen] == [0] * 6 and [int(offset) for offset in seen] == [0, 6, 7, 8, 9, 10]


@pytest.mark.parametrize(
    "offsets, corrupt",
    [(False, lambda positions: 2 * positions), (True, lambda offset: 0 * offset)],
    ids=["positions doubled", "every token decoded at position 0"],
)
def test_the_comparison_sees_wrong_positions(monkeypatch, offsets, corrupt):
    """The swap is live: posenc's rotary at wrong positions moves the logits far beyond the tolerance.

    (Not positions shifted by one: that moves every query and key alike, and the scores see offsets only.)
    """
    input_ids = torch.randint(1, 101, (1, 6), generator=torch.Generator().manual_seed(3))
    positions = torch.arange(6)[None]
    theirs = decode(tiny_llama(), input_ids, torch.ones_like(input_ids), positions, steps=2)
    ours = decode(
        posenc_llama(monkeypatch, offsets=offsets, corrupt=corrupt),
        input_ids,
        torch.ones_like(input_ids),
        positions,
        steps=2,
    )
    assert max(float((mine - their).abs().max()) for mine, their in zip(ours, theirs)) > 100 * TOLERANCE["atol"]
