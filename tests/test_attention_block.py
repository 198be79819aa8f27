"""The causal self-attention block of the start-here page (posenc_book.attention_block): cached decoding, left
padding and key positions, the properties the page shows, on other sizes and seeds."""

import inspect

import numpy as np
import pytest
import torch

import posenc
from posenc_book import attention_block
from posenc_book.attention_block import CausalSelfAttention, KVCache

TOLERANCE = 1e-5
"""float32 rounding of outputs of size about 1 (the page states the same tolerance)."""


def make_block(seed, d_model=48, n_heads=3):
    torch.manual_seed(seed)
    return CausalSelfAttention(d_model, n_heads)


def decode(block, tokens, prompt_length, real=None):
    """Prefill ``tokens[:, :prompt_length]``, then one call per later token, with one cache: outputs and cache."""
    cache = KVCache()
    with torch.no_grad():
        outputs = [block(tokens[:, :prompt_length], cache=cache, real=real)]
        outputs += [block(tokens[:, t : t + 1], cache=cache) for t in range(prompt_length, tokens.shape[1])]
    return torch.cat(outputs, dim=1), cache


def key_projection(block, tokens):
    """The keys of ``tokens`` before rotation: (batch, heads, seq, head_dim)."""
    d_model = block.n_heads * block.head_dim
    with torch.no_grad():
        keys = tokens @ block.qkv.weight[d_model : 2 * d_model].T
    return keys.view(*tokens.shape[:2], block.n_heads, block.head_dim).transpose(1, 2)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("prompt_length", [1, 5, 16])
def test_cached_decoding_gives_the_one_pass_outputs(seed, prompt_length):
    block = make_block(seed)
    tokens = torch.randn(2, 16, 48, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        one_pass = block(tokens)
    decoded, cache = decode(block, tokens, prompt_length)
    assert (decoded - one_pass).abs().max().item() < TOLERANCE
    assert cache.keys.shape == cache.values.shape == (2, 3, 16, 16)


def test_the_block_is_causal():
    """An output depends on its token and the ones before, not on later tokens."""
    block = make_block(2)
    tokens = torch.randn(1, 10, 48)
    changed = tokens.clone()
    changed[:, 6:] = torch.randn(1, 4, 48)
    with torch.no_grad():
        before, after = block(tokens), block(changed)
    assert (after[:, :6] - before[:, :6]).abs().max().item() < TOLERANCE
    assert (after[:, 6:] - before[:, 6:]).abs().max().item() > 0.01


def left_padded(prompts, width):
    """Prompts ``(length, d_model)`` padded on the left with zeros to ``width``: tokens and the mask ``real``."""
    tokens = torch.zeros(len(prompts), width, prompts[0].shape[-1])
    real = torch.zeros(len(prompts), width, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        tokens[row, width - len(prompt) :] = prompt
        real[row, width - len(prompt) :] = True
    return tokens, real


@pytest.mark.parametrize("seed", [0, 1])
def test_a_left_padded_row_gives_the_outputs_of_its_prompt_alone(seed):
    """Prefill of prompts of 9, 6 and 2 tokens padded to 9, then 4 decoded tokens: each row as if alone."""
    block = make_block(seed)
    generator = torch.Generator().manual_seed(seed)
    prompts = [torch.randn(length, 48, generator=generator) for length in (9, 6, 2)]
    later = torch.randn(3, 4, 48, generator=generator)
    tokens, real = left_padded(prompts, 9)
    padded, _ = decode(block, torch.cat((tokens, later), dim=1), 9, real=real)
    for row, prompt in enumerate(prompts):
        alone, _ = decode(block, torch.cat((prompt, later[row]))[None], len(prompt))
        gap = (padded[row, 9 - len(prompt) :] - alone[0]).abs().max().item()
        assert gap < TOLERANCE, f"row {row}: {gap}"
    # a padding query sees no key: zeros from scaled_dot_product_attention, not NaN
    for row, prompt in enumerate(prompts):
        assert torch.equal(padded[row, : 9 - len(prompt)], torch.zeros(9 - len(prompt), 48))


def test_cached_keys_are_rotated_by_their_own_positions():
    """Key ``j`` of a row is rotated by the number of real tokens before it, not by its column or a later offset."""
    block = make_block(3)
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randn(length, 48, generator=generator) for length in (7, 3)]
    tokens, real = left_padded(prompts, 7)
    tokens = torch.cat((tokens, torch.randn(2, 3, 48, generator=generator)), dim=1)
    _, cache = decode(block, tokens, 7, real=real)
    raw = key_projection(block, tokens).double().numpy()
    for row, first in ((0, 0), (1, 4)):
        expected = posenc.rotate(raw[row, :, first:], 10 - first)  # positions 0, 1, ... of the real tokens
        assert np.abs(cache.keys[row, :, first:].double().numpy() - expected).max() < TOLERANCE
    assert cache.real.sum(1).tolist() == [10, 6]


@pytest.mark.argument_check
def test_real_must_be_a_bool_mask_of_the_input_shape():
    block = make_block(0)
    tokens = torch.randn(2, 5, 48)
    with pytest.raises(ValueError, match="real must be bool \\(2, 5\\), got torch.int64 \\(2, 5\\)"):
        block(tokens, real=torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="real must be"):
        block(tokens, real=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_heads=3 must divide d_model=50"):
        CausalSelfAttention(50, 3)


def test_the_block_fits_the_page_without_scrolling():
    """The start-here page shows the file whole (literalinclude): no line wider than the chapters' 80 columns."""
    wide = [line for line in inspect.getsource(attention_block).splitlines() if len(line) > 80]
    assert wide == []
