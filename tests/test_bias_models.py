"""posenc's ALiBiBias and T5RelativeBias inside transformers' Bloom and T5: batches, cached decoding, generate().

Tiny random-initialised models run twice on the same inputs: as transformers ships them, and with their bias
computed by posenc from the model's own weights (the rest, weights, masks and key/value cache, is transformers').

*Bloom* (``BloomForCausalLM``, 2 layers, 6 heads of 8: six heads take the slopes of 4 heads then two of 8, the
non-power-of-two rule) builds one ``(batch * heads, 1, k_len)`` tensor of ``slope * key_position`` and adds it to
every query's row (its ``build_alibi_tensor``); the swap hands each attention layer posenc's
``(batch * heads, q_len, k_len)`` causal ``ALiBiBias`` instead, query ``i`` at ``past + i`` (``past`` read from the
layer's cache, as the offset for cached decoding). The two differ by ``slope * query_position`` along each row,
which the softmax removes; in a left-padded row Bloom counts positions from the first real token and posenc from
the first slot, which shifts both query and key positions alike and changes no difference between them.
The slopes are powers of two for six heads (``2**-2 .. 2**-8`` and ``2**-1, 2**-3``), equal in float32 in both.

*Tolerance (Bloom).* The logits then differ only by float32 rounding: the biased scores are rounded once with
biases of different sizes (up to ``slope * 16`` = 8 in size here, 17 tokens at most), each off by half a unit in the
last place of values up to about 8 (5e-7), and the softmax and two layers carry that, attenuated, to logits of
magnitude up to 1.2 (measured: at most 3.7e-8 apart). ``atol = rtol = 1e-5`` bounds the worst case with room; a
query placed one position early in a cached step (the misplaced-query test) moves the logits by 4e-3, over 100
times that.

*T5* (``T5ForConditionalGeneration``, 2 + 2 layers, 4 heads): the first layer of each stack computes the bias with
``compute_bias(q_len, k_len, past_seen_tokens=...)`` and the later layers reuse it. The swap replaces that method by a
``T5RelativeBias`` sharing the layer's ``relative_attention_bias`` embedding, with ``offset=past_seen_tokens``.
transformers places a relative position in its bucket by a float32 logarithm, posenc exactly; the configuration
(16 buckets, ``max_distance=20``) has no relative position within 64 where the two may differ
(:func:`posenc.testing.t5_float32_boundaries`, asserted below), so both gather the same table entries and every
logit is equal bit for bit: the test asserts equality.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posenc.nn import ALiBiBias, T5RelativeBias
from posenc.testing import t5_float32_boundaries

pytestmark = pytest.mark.usefixtures("quiet_transformers")

TOLERANCE = dict(rtol=1e-5, atol=1e-5)
VOCAB = 101
T5_BUCKETS = dict(num_buckets=16, max_distance=20)


def left_padded_batch(generator_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two rows of 9 token ids, the second left-padded by 3 (pad id 0, mask 0)."""
    generator = torch.Generator().manual_seed(generator_seed)
    ids = torch.randint(2, VOCAB, (2, 9), generator=generator)
    mask = torch.ones(2, 9, dtype=torch.long)
    ids[1, :3], mask[1, :3] = 0, 0
    return ids, mask


# --- Bloom, ALiBi -------------------------------------------------------------------------------------------------


def tiny_bloom():
    from transformers import BloomConfig, BloomForCausalLM

    config = BloomConfig(vocab_size=VOCAB, hidden_size=48, n_layer=2, n_head=6, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    return BloomForCausalLM(config).eval()


def use_posenc_alibi(model, monkeypatch, *, misplace: int = 0) -> list[int]:
    """Make each attention layer of ``model`` use posenc's ALiBiBias; return the list of offsets it used.

    ``misplace`` moves every cached query by that many positions (a wrong offset, for the test that the tests
    see one).
    """
    posenc_alibi = ALiBiBias(model.config.n_head)
    offsets: list[int] = []
    for block in model.transformer.h:
        attention = block.self_attention

        def forward(hidden_states, residual, *, alibi, _attention=attention, _forward=attention.forward, **kw):
            del alibi  # Bloom's (batch * heads, 1, k_len) tensor, replaced below
            layer_past = kw.get("layer_past")
            batch, q_len = hidden_states.shape[:2]
            past = layer_past.get_seq_length(_attention.layer_idx) if layer_past is not None else 0
            offset = past + (misplace if past else 0)
            offsets.append(offset)
            bias = posenc_alibi(q_len, past + q_len, offset=offset)  # (heads, q_len, k_len), query i at offset + i
            bias = bias.repeat(batch, 1, 1).to(hidden_states.dtype)
            return _forward(hidden_states, residual, alibi=bias, **kw)

        monkeypatch.setattr(attention, "forward", forward)
    return offsets


def cached_logits(model, ids, mask, prefill: int) -> list[torch.Tensor]:
    """Logits of a prefill of the first ``prefill`` tokens, then of each later token fed alone with the cache."""
    with torch.no_grad():
        out = model(input_ids=ids[:, :prefill], attention_mask=mask[:, :prefill], use_cache=True)
        logits, cache = [out.logits], out.past_key_values
        for step in range(prefill, ids.shape[1]):
            out = model(
                input_ids=ids[:, step : step + 1],
                attention_mask=mask[:, : step + 1],
                past_key_values=cache,
                use_cache=True,
            )
            logits.append(out.logits)
            cache = out.past_key_values
    return logits


def test_bloom_left_padded_batch_logits_equal(monkeypatch):
    ids, mask = left_padded_batch()
    model = tiny_bloom()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
    offsets = use_posenc_alibi(model, monkeypatch)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits
    assert offsets == [0, 0], "posenc's bias was not used"
    real = mask.bool()  # the padded slots' logits are no one's prediction
    torch.testing.assert_close(got[real], expected[real], **TOLERANCE)


def test_bloom_cached_decoding_logits_equal(monkeypatch):
    """A prefill of 5 tokens, then 4 tokens one at a time, each at its offset (5, 6, 7, 8) from the cache."""
    ids, mask = left_padded_batch(1)
    model = tiny_bloom()
    expected = cached_logits(model, ids, mask, prefill=5)
    offsets = use_posenc_alibi(model, monkeypatch)
    got = cached_logits(model, ids, mask, prefill=5)
    assert offsets == [0, 0, 5, 5, 6, 6, 7, 7, 8, 8]
    real = mask.bool()
    torch.testing.assert_close(got[0][real[:, :5]], expected[0][real[:, :5]], **TOLERANCE)
    for g, e in zip(got[1:], expected[1:], strict=True):
        torch.testing.assert_close(g, e, **TOLERANCE)


def test_bloom_a_misplaced_query_is_seen(monkeypatch):
    """The decoding test can fail: a cached query one position early hides its own key and moves the logits."""
    ids, mask = left_padded_batch(1)
    model = tiny_bloom()
    expected = cached_logits(model, ids, mask, prefill=5)
    use_posenc_alibi(model, monkeypatch, misplace=-1)
    got = cached_logits(model, ids, mask, prefill=5)
    assert (got[1] - expected[1]).abs().max() > 100 * TOLERANCE["atol"]


def test_bloom_generate_gives_the_same_tokens(monkeypatch):
    ids, mask = left_padded_batch(2)
    model = tiny_bloom()
    settings = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(input_ids=ids, attention_mask=mask, **settings)
    offsets = use_posenc_alibi(model, monkeypatch)
    with torch.no_grad():
        got = model.generate(input_ids=ids, attention_mask=mask, **settings)
    assert max(offsets) == ids.shape[1] + 6, "generate did not decode with the cache through posenc's bias"
    assert torch.equal(got, expected)


# --- T5, learned relative buckets ---------------------------------------------------------------------------------


def tiny_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=T5_BUCKETS["num_buckets"],
        relative_attention_max_distance=T5_BUCKETS["max_distance"],
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        dropout_rate=0.0,
    )
    torch.manual_seed(0)
    return T5ForConditionalGeneration(config).eval()


def use_posenc_t5(model, monkeypatch) -> list[int]:
    """Replace ``compute_bias`` of the first self-attention of each stack; return the offsets it was called with."""
    offsets: list[int] = []
    for stack in (model.encoder, model.decoder):
        attention = stack.block[0].layer[0].SelfAttention
        bias = T5RelativeBias(attention.n_heads, bidirectional=not attention.is_decoder, **T5_BUCKETS)
        bias.relative_attention_bias = attention.relative_attention_bias  # the model's own table, shared

        def compute_bias(query_length, key_length, device=None, past_seen_tokens=0, _bias=bias):
            offsets.append(int(past_seen_tokens))
            return _bias(query_length, key_length, offset=past_seen_tokens).unsqueeze(0)

        monkeypatch.setattr(attention, "compute_bias", compute_bias)
    return offsets


def test_t5_configuration_has_no_float32_boundary():
    """Within 64 positions, transformers' float32 buckets are posenc's exact ones in this configuration."""
    relative = np.arange(-64, 65)
    for bidirectional in (True, False):
        assert not t5_float32_boundaries(relative, bidirectional=bidirectional, **T5_BUCKETS).any()


def t5_run(model, ids, mask, decoder_ids):
    """Encoder-decoder logits over the whole decoder input, then the same decoded one token at a time."""
    with torch.no_grad():
        whole = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
        encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
        steps, cache = [], None
        for step in range(decoder_ids.shape[1]):
            out = model(
                encoder_outputs=encoder_outputs,
                attention_mask=mask,
                decoder_input_ids=decoder_ids[:, step : step + 1],
                past_key_values=cache,
                use_cache=True,
            )
            steps.append(out.logits)
            cache = out.past_key_values
    return whole, torch.cat(steps, dim=1)


def test_t5_padded_batch_and_cached_decoding_logits_equal(monkeypatch):
    ids, mask = left_padded_batch(3)
    decoder_ids = torch.cat([torch.zeros(2, 1, dtype=torch.long), ids[:, 4:]], dim=1)  # 6 decoder tokens
    model = tiny_t5()
    expected = t5_run(model, ids, mask, decoder_ids)
    offsets = use_posenc_t5(model, monkeypatch)
    got = t5_run(model, ids, mask, decoder_ids)
    assert offsets.count(0) >= 3 and max(offsets) == decoder_ids.shape[1] - 1, "posenc's bias was not used"
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)
    torch.testing.assert_close(got[1], got[0], **TOLERANCE)  # cached steps agree with the whole pass


def test_t5_generate_gives_the_same_tokens(monkeypatch):
    ids, mask = left_padded_batch(4)
    model = tiny_t5()
    settings = dict(max_new_tokens=8, do_sample=False, min_new_tokens=8)
    with torch.no_grad():
        expected = model.generate(input_ids=ids, attention_mask=mask, **settings)
    offsets = use_posenc_t5(model, monkeypatch)
    with torch.no_grad():
        got = model.generate(input_ids=ids, attention_mask=mask, **settings)
    assert max(offsets) == 7, "generate did not decode with the cache through posenc's bias"
    assert torch.equal(got, expected)
