"""posenc's RotaryEmbedding inside transformers' Qwen2, Mistral, Qwen3 and Llama: full rotary, as the models ship.

Each family's tiny random-initialised ``*ForCausalLM`` (2 layers, 4 query and 2 key/value heads of 16, transformers
5.23.0) runs twice on the same inputs: as transformers ships it, and with its rotary replaced by
:class:`posenc.nn.RotaryEmbedding` (the swap of tests/rotary_swap.py: transformers' ``position_ids``, ``(batch,
seq)``, go to posenc unchanged). Compared: a left-padded batch through prefill and one-token-at-a-time decoding with
a DynamicCache, ``generate()`` (greedy, 5 new tokens, left-padded batch), and Llama configured with a ``llama3`` and a
``yarn`` ``rope_parameters`` dict, which posenc is built from as it stands in the config.

*Tolerance.* ``rotary_swap.TOLERANCE``, ``atol = rtol = 1e-5``: transformers' float32 angles against posenc's float64
ones, rounded once, carried through two float32 layers (the argument is in tests/rotary_swap.py; measured here:
``1.8e-7`` at most). The greedy tokens must be identical; the test also asks each step's two best logits to be more
than ``1e-3`` apart (measured: ``3e-3`` at least), so that rounding alone could not flip a token. Each comparison is
shown to see deliberate bugs by more than 100 times the tolerance: a padded row's decoded token placed one position
late (measured: ``1.6e-3`` to ``4.7e-2``), a scaling dict left out (``4e-3`` and ``6e-3``).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from rotary_swap import (
    HEAD_DIM,
    PAD,
    TINY_DECODER,
    TOLERANCE,
    decode,
    greedy_generate,
    largest_difference,
    left_padded_batch,
    swap_rotary,
)

from posenc.nn import RotaryEmbedding

pytestmark = pytest.mark.usefixtures("quiet_transformers")

# family: (config class, model class, modeling module); each has its own apply_rotary_pos_emb to patch
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", "transformers.models.llama.modeling_llama"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", "transformers.models.qwen2.modeling_qwen2"),
    "mistral": ("MistralConfig", "MistralForCausalLM", "transformers.models.mistral.modeling_mistral"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", "transformers.models.qwen3.modeling_qwen3"),
}

# As the configs ship them: a trained length of 8 (the tests run to position 13), factor 4, so that most pairs are
# rescaled; max_position_embeddings = factor * 8, as YaRN's checkpoints set it.
SCALINGS = {
    "llama3": {
        "rope_type": "llama3",
        "factor": 4.0,
        "original_max_position_embeddings": 8,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "rope_theta": 10000.0,
    },
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "rope_theta": 10000.0},
}


def tiny(family: str, rope_parameters: dict | None = None):
    """The family's tiny random-initialised causal LM, in eval mode (the same weights on every call)."""
    import transformers

    config_class, model_class, _ = FAMILIES[family]
    config = getattr(transformers, config_class)(
        **TINY_DECODER,
        max_position_embeddings=32,
        rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": 10000.0},
        pad_token_id=PAD,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    return getattr(transformers, model_class)(config).eval()


def with_posenc(monkeypatch, family: str, model, scaling=None, corrupt=None):
    """``model`` with posenc's rotary (halves: transformers' rotate_half layout) built from ``scaling``."""
    rope = RotaryEmbedding(HEAD_DIM, layout="halves", scaling=scaling)
    modeling = importlib.import_module(FAMILIES[family][2])
    return swap_rotary(monkeypatch, modeling, model, rope, corrupt=corrupt)


def assert_same_logits(ours, theirs, real):
    """Prefill (the padding's logits are noise, left out) and every decoding step within the tolerance."""
    torch.testing.assert_close(ours[0][real], theirs[0][real], **TOLERANCE, msg=lambda m: f"prefill: {m}")
    for step, (mine, their) in enumerate(zip(ours[1:], theirs[1:]), start=1):
        torch.testing.assert_close(mine, their, **TOLERANCE, msg=lambda m, step=step: f"decoding step {step}: {m}")


def padded_row_one_late(positions):
    """A deliberate bug: the padded row's decoded tokens one position later than transformers puts them."""
    if positions.shape[-1] != 1:
        return positions
    return positions + torch.tensor([[0], [1]])


@pytest.mark.parametrize("family", ["qwen2", "mistral", "qwen3"])
def test_left_padded_batch_with_cache_decoding_matches_transformers(monkeypatch, family):
    """Prefill with (batch, seq) position_ids, then 4 cached steps with (batch, 1) ones: the same logits."""
    batch = left_padded_batch()
    theirs = decode(tiny(family), *batch, steps=4)
    ours = decode(with_posenc(monkeypatch, family, tiny(family)), *batch, steps=4)
    assert_same_logits(ours, theirs, batch[1].bool())


@pytest.mark.parametrize("family", ["qwen2", "mistral", "qwen3"])
def test_the_comparison_sees_a_padded_row_decoded_one_position_late(monkeypatch, family):
    """The swap is live: the padded row's decoded tokens one position late move its logits far beyond tolerance.

    (Not the whole row shifted: a shift of every query and key alike leaves the scores, and the logits, unchanged.)
    """
    batch = left_padded_batch()
    theirs = decode(tiny(family), *batch, steps=2)
    ours = decode(with_posenc(monkeypatch, family, tiny(family), corrupt=padded_row_one_late), *batch, steps=2)
    real = batch[1].bool()
    torch.testing.assert_close(ours[0][real], theirs[0][real], **TOLERANCE)  # the prefill is untouched
    torch.testing.assert_close(ours[1][0], theirs[1][0], **TOLERANCE)  # the unpadded row is untouched
    assert float((ours[1][1] - theirs[1][1]).abs().max()) > 100 * TOLERANCE["atol"]


@pytest.mark.parametrize("family", ["llama", "qwen2", "mistral", "qwen3"])
def test_generate_on_a_left_padded_batch_gives_transformers_tokens(monkeypatch, family):
    """generate() computes position_ids from the attention mask and grows a cache: identical greedy tokens."""
    input_ids, attention_mask, _ = left_padded_batch()
    their_tokens, their_logits = greedy_generate(tiny(family), 5, input_ids=input_ids, attention_mask=attention_mask)
    our_tokens, our_logits = greedy_generate(
        with_posenc(monkeypatch, family, tiny(family)), 5, input_ids=input_ids, attention_mask=attention_mask
    )
    top2 = their_logits.topk(2, dim=-1).values
    assert float((top2[..., 0] - top2[..., 1]).min()) > 1e-3, "a near tie: rounding could flip a token"
    assert our_tokens.tolist() == their_tokens.tolist()
    torch.testing.assert_close(our_logits, their_logits, **TOLERANCE)


def test_generate_sees_a_padded_row_decoded_one_position_late(monkeypatch):
    """The same bug as above, through generate(): the padded row's logits move far beyond tolerance."""
    input_ids, attention_mask, _ = left_padded_batch()
    _, their_logits = greedy_generate(tiny("qwen2"), 5, input_ids=input_ids, attention_mask=attention_mask)
    model = with_posenc(monkeypatch, "qwen2", tiny("qwen2"), corrupt=padded_row_one_late)
    _, our_logits = greedy_generate(model, 5, input_ids=input_ids, attention_mask=attention_mask)
    torch.testing.assert_close(our_logits[0], their_logits[0], **TOLERANCE)
    assert float((our_logits[1, 1:] - their_logits[1, 1:]).abs().max()) > 100 * TOLERANCE["atol"]


@pytest.mark.parametrize("rope_type", SCALINGS)
def test_llama_with_a_rope_parameters_dict_matches_transformers(monkeypatch, rope_type):
    """posenc built from the config's own rope_parameters dict: the same logits, prefill and cached decoding."""
    batch = left_padded_batch()
    theirs = decode(tiny("llama", SCALINGS[rope_type]), *batch, steps=4)
    model = tiny("llama", SCALINGS[rope_type])
    ours = decode(with_posenc(monkeypatch, "llama", model, scaling=dict(model.config.rope_parameters)), *batch, steps=4)
    assert_same_logits(ours, theirs, batch[1].bool())


@pytest.mark.parametrize("rope_type", SCALINGS)
def test_the_comparison_sees_the_scaling_left_out(monkeypatch, rope_type):
    """posenc without the dict (plain RoPE) in the scaled Llama: the logits move far beyond the tolerance."""
    batch = left_padded_batch()
    theirs = decode(tiny("llama", SCALINGS[rope_type]), *batch, steps=2)
    ours = decode(with_posenc(monkeypatch, "llama", tiny("llama", SCALINGS[rope_type])), *batch, steps=2)
    assert largest_difference(ours, theirs, batch[1].bool()) > 100 * TOLERANCE["atol"]
