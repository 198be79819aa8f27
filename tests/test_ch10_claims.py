"""Chapter 10's claims about transformers 5.23 (huggingface/transformers#25681), checked on a tiny Llama.

The chapter says that casting a Llama with ``.to(torch.bfloat16)`` rounds its rotary frequencies, that nothing in
the library restores them (``.float()``, ``_init_weights``), that recomputing them after the cast does, and that
loading with ``from_pretrained(..., dtype=torch.bfloat16)`` leaves them in float32. Nothing is downloaded: the
model has random weights and is saved to a temporary directory.
"""

import numpy as np
import torch
import transformers

POSITION = 20000
HEAD_DIM = 64


def tiny_llama():
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=HEAD_DIM,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
    )
    torch.manual_seed(0)
    return config, transformers.LlamaModel(config)


def cos_error(model, dtype):
    """Worst |cos - exact| over the frequencies of ``model``'s rotary module at ``POSITION``."""
    cos, _ = model.rotary_emb(torch.zeros(1, 1, HEAD_DIM, dtype=dtype), torch.tensor([[POSITION]]))
    exact = np.cos(POSITION * 10000.0 ** (-np.arange(0, HEAD_DIM, 2) / HEAD_DIM))
    return np.abs(cos[0, 0, : HEAD_DIM // 2].double().numpy() - exact).max()


def test_the_float32_model_is_accurate():
    _, model = tiny_llama()
    assert model.rotary_emb.inv_freq.dtype == torch.float32
    assert cos_error(model, torch.float32) < 1e-2  # measured 5.6e-4


def test_casting_the_model_rounds_the_frequencies_and_spoils_the_cosines():
    _, model = tiny_llama()
    model.to(torch.bfloat16)
    assert model.rotary_emb.inv_freq.dtype == torch.bfloat16
    assert model.rotary_emb.original_inv_freq.dtype == torch.bfloat16
    assert cos_error(model, torch.bfloat16) > 1.0  # measured 2.0
    # forward's .float() sees the rounded values: a float32 input does not help
    assert cos_error(model, torch.float32) > 1.0


def test_casting_back_to_float32_does_not_restore_them():
    _, model = tiny_llama()
    model.to(torch.bfloat16).float()
    assert model.rotary_emb.inv_freq.dtype == torch.float32
    assert cos_error(model, torch.float32) > 1.0


def test_init_weights_after_the_cast_keeps_the_rounded_buffer():
    _, model = tiny_llama()
    model.to(torch.bfloat16)
    model._init_weights(model.rotary_emb)
    assert model.rotary_emb.inv_freq.dtype == torch.bfloat16
    assert cos_error(model, torch.bfloat16) > 1.0


def test_llama_keeps_no_module_in_float32():
    _, model = tiny_llama()
    assert not model._keep_in_fp32_modules
    assert not model._keep_in_fp32_modules_strict


def test_recomputing_the_frequencies_after_the_cast_restores_them():
    config, model = tiny_llama()
    model.to(torch.bfloat16)
    rope = model.rotary_emb
    fresh, _ = rope.compute_default_rope_parameters(config)
    rope.inv_freq = fresh
    rope.original_inv_freq = fresh.clone()
    assert rope.inv_freq.dtype == torch.float32
    assert cos_error(model, torch.bfloat16) < 1e-2  # measured 1.7e-3: cos rounded to bfloat16
    assert model.layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16
    hidden = model(input_ids=torch.tensor([[1, 2, 3]])).last_hidden_state
    assert hidden.dtype == torch.bfloat16 and torch.isfinite(hidden.float()).all()


def test_loading_in_bfloat16_keeps_the_frequencies_in_float32(tmp_path):
    _, model = tiny_llama()
    model.save_pretrained(tmp_path)
    loaded = transformers.LlamaModel.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert loaded.layers[0].self_attn.q_proj.weight.dtype == torch.bfloat16
    assert loaded.rotary_emb.inv_freq.dtype == torch.float32
    assert cos_error(loaded, torch.bfloat16) < 1e-2
