"""posenc's RotaryEmbedding with partial rotary inside transformers' GPT-NeoX (rotary_pct 0.25) and Phi (0.4).

As in tests/test_llama_positions.py (the batch, decoding loop and position hand-over are tests/rotary_swap.py's): a tiny
random-initialised model runs as transformers ships it and with its rotary replaced by posenc's, built from the
config's own ``rope_parameters`` dict (``partial_rotary_factor`` and ``rope_theta`` in it, no ``base=`` given).
GPT-NeoX hands its ``apply_rotary_pos_emb`` whole heads, so posenc rotates the first quarter and passes the rest
through itself. Phi slices the rotated part off before calling it (``query_states[..., :rotary_ndims]``), so
the swap pads that slice back to a whole head with zeros, rotates the head with posenc and keeps its rotated part:
the module's own rotary dimension, from the dict, decides what is rotated.

*Tolerance*: that of tests/test_llama_positions.py (float32 angles against float64 ones at positions below 16,
two layers): ``rtol = atol = 1e-5``; rotating the whole head instead (the last test) moves the logits by more
than 100 times that.
"""

from __future__ import annotations

import pytest
import torch
from rotary_swap import TOLERANCE, PassPositions, decode, left_padded_batch

from posenc.nn import RotaryEmbedding

pytestmark = pytest.mark.usefixtures("quiet_transformers")


def tiny(family):
    """A 2-layer model with heads of 16 (GPT-NeoX, 4 rotated) or 20 (Phi, 8 rotated), vocabulary 101."""
    if family == "gpt_neox":
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

        config = GPTNeoXConfig(
            vocab_size=101,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            rotary_pct=0.25,
            max_position_embeddings=64,
            attn_implementation="eager",
        )
        model_class = GPTNeoXForCausalLM
    else:
        from transformers import PhiConfig, PhiForCausalLM

        config = PhiConfig(
            vocab_size=101,
            hidden_size=80,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            partial_rotary_factor=0.4,
            max_position_embeddings=64,
            attn_implementation="eager",
        )
        model_class = PhiForCausalLM
    torch.manual_seed(0)
    return model_class(config).eval()


def with_posenc(monkeypatch, family, *, whole_head=False):
    """The same tiny model, its rotary replaced by posenc's (halves, from the config's rope_parameters)."""
    import importlib

    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    model = tiny(family)
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    parameters = dict(config.rope_parameters)
    if whole_head:
        parameters.pop("partial_rotary_factor")
    rope = RotaryEmbedding(head_dim, layout="halves", scaling=parameters)

    def rotate(x, positions):
        width = x.shape[-1]
        if width < head_dim:  # Phi's slice: pad it to a whole head, keep what posenc rotated
            x = torch.cat((x, x.new_zeros(*x.shape[:-1], head_dim - width)), dim=-1)
        rotated = rope(x, positions=positions) if positions.ndim else rope(x, offset=positions)
        return rotated[..., :width]

    def apply_posenc(q, k, positions, unused, unsqueeze_dim=1):
        return rotate(q, positions), rotate(k, positions)

    monkeypatch.setattr(module, "apply_rotary_pos_emb", apply_posenc)
    model.base_model.rotary_emb = PassPositions(offsets=False)
    return model, rope


FAMILIES = ["gpt_neox", "phi"]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_rotary_dimension_comes_from_the_config_dict(monkeypatch, family):
    model, rope = with_posenc(monkeypatch, family)
    assert (rope.rotary_dim, rope.head_dim, rope.base) == ({"gpt_neox": (4, 16), "phi": (8, 20)}[family] + (10000.0,))


@pytest.mark.parametrize("family", FAMILIES)
def test_left_padded_batch_and_decoding_match_transformers(monkeypatch, family):
    """Prefill of a left-padded batch with (batch, seq) position_ids, then 4 decoding steps through the cache."""
    batch = left_padded_batch()
    theirs = decode(tiny(family), *batch, steps=4)
    ours = decode(with_posenc(monkeypatch, family)[0], *batch, steps=4)
    real = batch[1].bool()
    torch.testing.assert_close(ours[0][real], theirs[0][real], **TOLERANCE)  # the padding's logits are noise
    for step, (mine, their) in enumerate(zip(ours[1:], theirs[1:]), start=1):
        torch.testing.assert_close(mine, their, **TOLERANCE, msg=lambda m, step=step: f"decoding step {step}: {m}")


@pytest.mark.parametrize("family", FAMILIES)
def test_rotating_the_whole_head_is_seen(monkeypatch, family):
    """The comparison sees the partial rotary: a module that rotates every feature moves the logits far."""
    batch = left_padded_batch()
    theirs = decode(tiny(family), *batch, steps=1)
    ours = decode(with_posenc(monkeypatch, family, whole_head=True)[0], *batch, steps=1)
    real = batch[1].bool()
    assert float((ours[0][real] - theirs[0][real]).abs().max()) > 100 * TOLERANCE["atol"]
