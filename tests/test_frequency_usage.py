"""Which rotary frequencies a trained model uses, and p-RoPE (posenc_book.frequency_usage and chapter 12).

Three groups: p-RoPE's rotation (the dropped pairs are never rotated, the kept pairs rotate as RoPE's,
p = 1 is RoPE, p = 0 is no positional encoding), the usage measurement (it reads the pairs the heads
actually use), and chapter 12's claims re-run on seeds the chapter does not use (seed 0 is the page's).
The last group trains six small models (a few seconds each on one thread).
"""

import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.nn import RotaryEmbedding
from posenc_book.extrapolation import TinyCausalLM
from posenc_book.frequency_usage import NoRotation, frequency_usage, kept_pairs, p_rope, train_rotary

# --- p-RoPE's rotation ----------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    half=st.integers(1, 32),
    fraction=st.floats(0.0, 1.0),
    base=st.sampled_from([10.0, 10_000.0, 500_000.0]),
    offset=st.integers(0, 4000),
)
def test_p_rope_leaves_dropped_pairs_alone_and_rotates_kept_pairs_as_rope(half, fraction, base, offset):
    head_dim = 2 * half
    kept = kept_pairs(head_dim, fraction)
    x = torch.randn(2, 3, 16, head_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(half))
    rotated = p_rope(head_dim, fraction, base=base)(x, offset=offset) if kept else p_rope(head_dim, fraction)(x)
    # dropped pairs (the slowest): unchanged at every position, bit for bit
    assert torch.equal(rotated[..., 2 * kept :], x[..., 2 * kept :])
    # kept pairs: RoPE's rotation with RoPE's frequencies base**(-2i/d). The partial embedding's base is
    # base**(r/d), rounded once, so each frequency is within a few ulp of RoPE's; at positions up to ~4000
    # the angles then differ by < 1e-11 rad, hence the tolerance.
    rope = RotaryEmbedding(head_dim, base=base)(x, offset=offset)
    torch.testing.assert_close(rotated[..., : 2 * kept], rope[..., : 2 * kept], rtol=0, atol=1e-9)


def test_kept_pairs_rotate_with_the_library_frequencies():
    head_dim, fraction, base = 16, 0.75, 10_000.0
    kept = kept_pairs(head_dim, fraction)
    theta = posenc.rotary_frequencies(head_dim, base=base)
    rotary = p_rope(head_dim, fraction, base=base)
    positions = torch.arange(0, 64, dtype=torch.float64)
    for pair in range(head_dim // 2):
        unit = torch.zeros(1, 64, head_dim, dtype=torch.float64)
        unit[..., 2 * pair] = 1.0  # the first feature of the pair; interleaved layout
        out = rotary(unit, positions=positions)[0]
        angle = torch.atan2(out[:, 2 * pair + 1], out[:, 2 * pair]).numpy()
        expected = positions.numpy() * (theta[pair] if pair < kept else 0.0)
        # compare on the circle: atan2 wraps to (-pi, pi]; float64 rounding of m * theta, < 1e-12 rad here
        np.testing.assert_allclose(np.angle(np.exp(1j * (angle - expected))), 0.0, rtol=0, atol=1e-12)


def test_p_equal_1_is_rope():
    x = torch.randn(2, 4, 40, 16)
    assert torch.equal(p_rope(16, 1.0)(x), RotaryEmbedding(16)(x))
    assert torch.equal(p_rope(16, 1.0, base=500_000.0)(x, offset=7), RotaryEmbedding(16, base=500_000.0)(x, offset=7))


def test_p_equal_0_is_nope():
    rotary = p_rope(16, 0.0)
    assert isinstance(rotary, NoRotation)
    # a model with p = 0 computes exactly what the "none" model with the same weights computes
    torch.manual_seed(3)
    nope = TinyCausalLM("none", d_model=32, n_heads=2)
    model = TinyCausalLM("rotary", d_model=32, n_heads=2)
    model.load_state_dict(nope.state_dict())
    model.rotary = rotary
    tokens = torch.randint(0, 16, (3, 24))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), nope(tokens), rtol=0, atol=0)
        # and a model with p > 0 does not (position reaches its logits)
        model.rotary = p_rope(16, 0.25)
        assert not torch.allclose(model(tokens), nope(tokens))


def test_kept_pairs_counts_as_gemma_does():
    # Gemma's apply_rope: rope_angles = int(rope_proportion * head_dim // 2)
    assert [kept_pairs(256, p) for p in (0.25, 0.75, 1.0)] == [32, 96, 128]
    assert [kept_pairs(16, p) for p in (0.0, 0.1, 0.125, 0.5)] == [0, 0, 1, 4]


@pytest.mark.argument_check
@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((15, 0.5), {}, "head_dim must be a positive even int"),
        ((16, 1.5), {}, r"fraction must be a real number in \[0, 1\]"),
        ((16, -0.1), {}, r"fraction must be a real number in \[0, 1\]"),
        ((16, 0.5), {"base": 1.0}, "base must be a finite real number greater than 1"),
    ],
)
def test_p_rope_refuses_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        p_rope(*args, **kwargs)


# --- The usage measurement ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("layer", "head", "pair"), [(0, 0, 0), (1, 2, 5), (0, 3, 7)])
def test_usage_finds_the_one_pair_a_head_uses(layer, head, pair):
    # a model whose head `head` of layer `layer` has queries and keys only in the two features of `pair`
    torch.manual_seed(0)
    model = TinyCausalLM("rotary", d_model=64, n_heads=4)
    head_dim = 16
    with torch.no_grad():
        qkv = model.blocks[layer].qkv
        for part in (0, 1):  # queries, keys
            start = part * 64 + head * head_dim
            rows = qkv.weight[start : start + head_dim]
            keep = torch.zeros(head_dim, dtype=torch.bool)
            keep[2 * pair : 2 * pair + 2] = True
            rows[~keep] = 0.0
            qkv.bias[start : start + head_dim][~keep] = 0.0
    usage = frequency_usage(model, n_sequences=4)
    assert usage.share[layer, head, pair] == 1.0
    assert usage.query_norm[layer, head, pair] > 0 and usage.key_norm[layer, head, pair] > 0
    np.testing.assert_allclose(usage.share.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


# --- Chapter 12's claims on other seeds --------------------------------------------------------------------

CLAIM_SEEDS = (1, 2, 3)  # the chapter trains seed 0
FAST = 3  # the three fastest of the eight pairs


@functools.cache
def _trained(seed, fraction):
    return train_rotary(fraction, seed=seed)


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_trained_rope_heads_use_the_fastest_pairs(seed):
    result = _trained(seed, 1.0)
    trained = result.trained.share[..., :FAST].sum(axis=-1)
    untrained = result.untrained.share[..., :FAST].sum(axis=-1)
    print(
        f"seed {seed}: fast share trained min {trained.min():.2f} mean {trained.mean():.2f}, "
        f"untrained max {untrained.max():.2f} mean {untrained.mean():.2f}"
    )
    assert trained.min() > 0.5 > untrained.max()  # every head, after training; none before
    assert trained.mean() > 0.65


@pytest.mark.parametrize("seed", CLAIM_SEEDS)
def test_p_rope_matches_rope_at_the_training_length_and_neither_extrapolates(seed):
    rope, prope = _trained(seed, 1.0), _trained(seed, 0.75)
    print(f"seed {seed}: RoPE {rope.losses}, p-RoPE 0.75 {prope.losses}")
    assert abs(prope.losses[32] - rope.losses[32]) < 0.015
    for result in (rope, prope):
        assert result.losses[128] - result.losses[32] > 0.8


def test_neither_rope_nor_p_rope_is_lower_beyond_the_training_length_on_every_seed():
    gaps = [_trained(seed, 0.75).losses[128] - _trained(seed, 1.0).losses[128] for seed in CLAIM_SEEDS]
    print("p-RoPE minus RoPE at 128:", [round(gap, 3) for gap in gaps])
    assert min(gaps) < 0 < max(gaps)
