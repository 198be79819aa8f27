"""Which rotary frequencies a trained model uses, and p-RoPE (posenc_book.frequency_usage and chapter 12).

Four groups: p-RoPE's rotation (the dropped pairs are never rotated, the kept pairs rotate as RoPE's,
p = 1 is RoPE, p = 0 is no positional encoding), the usage measurement (it reads the pairs the heads
actually use), where heads attend and what removing pairs does, and chapter 12's claims re-run on seeds the
chapter does not use (seed 0 is the page's). The last group trains six small models five times each, plainly
and under four perturbations of their initial weights (posenc_book.robustness), a few seconds each on one
thread. The chapter's claims about the toy are also checked on nine seeds, 0 to 8, with three seed-spreads of
margin by ``make check-seeds`` (tests/check_seeds.py); the tests here keep seeds 1 to 3 under perturbation on
every run.
"""

import copy
import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.nn import RotaryEmbedding
from posenc_book.extrapolation import TinyCausalLM, evaluate
from posenc_book.frequency_usage import (
    NoRotation,
    _attention_weights,
    _projections,
    attention_by_offset,
    frequency_usage,
    kept_pairs,
    p_rope,
    train_rotary,
    without_pairs,
)
from posenc_book.robustness import Bound, active_perturbation, assert_claim, check_claim, perturbed

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


# --- Attention by offset and the ablation of pairs -----------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: TinyCausalLM("rotary", d_model=32, n_heads=2),
        lambda: TinyCausalLM("rotary", d_model=32, n_heads=2, nope_layer_interval=2),  # block 2 does not rotate
        lambda: _with_rotary(TinyCausalLM("rotary", d_model=32, n_heads=2), p_rope(16, 0.75)),
    ],
    ids=["rope", "rope+nope", "p-rope"],
)
def test_attention_weights_reproduce_the_models_attention_output(make):
    torch.manual_seed(4)
    model = make().eval()
    tokens = torch.randint(0, 16, (3, 20))
    mixed = []
    hooks = [b.out.register_forward_hook(lambda _m, inputs, _o: mixed.append(inputs[0])) for b in model.blocks]
    with torch.no_grad():
        model(tokens)
    for hook in hooks:
        hook.remove()
    weights = _attention_weights(model, tokens)
    for layer, (w, (_q, _k, v)) in enumerate(zip(weights, _projections(model, tokens))):
        assert torch.all(w.triu(1) == 0)  # causal
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, 20))
        ours = (w @ v).transpose(1, 2).reshape(3, 20, 32)
        torch.testing.assert_close(ours, mixed[layer], rtol=0, atol=1e-5)


def _with_rotary(model, rotary):
    model.rotary = rotary
    return model


def test_attention_by_offset_is_uniform_over_the_prefix_when_queries_are_zero():
    torch.manual_seed(0)
    model = TinyCausalLM("rotary", d_model=32, n_heads=2)
    with torch.no_grad():
        for block in model.blocks:
            block.qkv.weight[:32] = 0.0  # every query is 0: each query at i attends 1 / (i + 1) to every key
            block.qkv.bias[:32] = 0.0
    weights = attention_by_offset(model, length=12, n_sequences=4)
    expected = [np.mean([1 / (i + 1) for i in range(max(d, 2), 12)]) for d in range(12)]
    np.testing.assert_allclose(weights, np.broadcast_to(expected, (2, 2, 12)), rtol=1e-6)


def test_without_pairs_removes_those_pairs_from_queries_and_keys_only():
    torch.manual_seed(0)
    model = TinyCausalLM("rotary", d_model=64, n_heads=4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ablated = without_pairs(model, [0, 7])
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the model is untouched
    share = frequency_usage(ablated, n_sequences=4).share
    assert np.all(share[..., [0, 7]] == 0) and np.all(share[..., 1:7] > 0)
    for block, original in zip(ablated.blocks, model.blocks):  # the values are the model's
        assert torch.equal(block.qkv.weight[128:], original.qkv.weight[128:])
    assert not ablated.training


@pytest.mark.argument_check
@pytest.mark.parametrize("pairs", [[8], [-1], [1.0], [True]])
def test_without_pairs_refuses_pairs_a_head_does_not_have(pairs):
    with pytest.raises(ValueError, match=r"pairs must be ints in \[0, 8\)"):
        without_pairs(TinyCausalLM("rotary", d_model=64, n_heads=4), pairs)


# --- Chapter 12's claims on other seeds, under perturbation ----------------------------------------------------
# Each claim is checked with posenc_book.robustness.assert_claim: the six models are trained plainly and under
# four perturbations of their initial weights (draws 1-4, 1e-6), and a bound fails when its margin is under
# three times the spread of its number over those runs. The comments give "value, spread" of the seed nearest
# to the bound, as measured on the book's 2-core AMD EPYC with AVX-512 (pytest -s prints each claim's table).

CLAIM_SEEDS = (1, 2, 3)  # the chapter trains seed 0
FAST = 3  # the three fastest of the eight pairs


@functools.cache
def _trained(seed, fraction, perturbation):
    with perturbed(perturbation):
        return train_rotary(fraction, seed=seed)


def _run(seed, fraction):
    """The model of ``seed`` and ``fraction`` under the active perturbation (trained once per perturbation)."""
    return _trained(seed, fraction, active_perturbation())


def check(measure, bounds):
    result = assert_claim(measure, bounds)
    print("\n" + result.table())
    return result


def test_trained_rope_heads_use_the_fastest_pairs():
    def measure():
        trained = [_run(seed, 1.0).trained.share[..., :FAST].sum(-1) for seed in CLAIM_SEEDS]
        untrained = [_run(seed, 1.0).untrained.share[..., :FAST].sum(-1) for seed in CLAIM_SEEDS]
        return {
            "fast share, lowest trained head": [t.min() for t in trained],
            "fast share, highest untrained head": [u.max() for u in untrained],
            "fast share, mean over trained heads": [t.mean() for t in trained],
        }

    check(
        measure,
        [
            Bound("fast share, lowest trained head", above=0.5),  # every head, after training: 0.61, 0.020 (seed 3)
            Bound("fast share, highest untrained head", below=0.5),  # none before: 0.43, 0.000
            Bound("fast share, mean over trained heads", above=0.65),  # 0.74, 0.010 (seed 2)
        ],
    )


def test_second_layer_heads_attend_to_the_last_two_symbols_through_the_fastest_pairs():
    # the chapter's ablation: the queries and keys without pairs 0-2 (the fastest) or 5-7 (the slowest)
    def measure():
        numbers = {}
        for seed in CLAIM_SEEDS:
            model = _run(seed, 1.0).model
            models = {
                "all": model,
                "fastest": without_pairs(model, [0, 1, 2]),
                "slowest": without_pairs(model, [5, 6, 7]),
            }
            # (layers, heads) attention on the current and the previous symbol
            near = {name: attention_by_offset(m)[..., :2].sum(-1) for name, m in models.items()}
            loss = {name: evaluate(m, 32) for name, m in models.items()}
            for key, value in {
                "layer 2's attention on them, mean over heads": near["all"][1].mean(),
                "without 0-2: highest head": near["fastest"][1].max(),
                "without 0-2: loss rise": loss["fastest"] - loss["all"],
                "without 5-7: largest change of a head": np.abs(near["slowest"] - near["all"]).max(),
                "without 5-7: loss rise": loss["slowest"] - loss["all"],
            }.items():
                numbers.setdefault(key, []).append(value)
        return numbers

    check(
        measure,
        [
            Bound("layer 2's attention on them, mean over heads", above=0.6),  # 0.75, 0.027 (seed 1)
            Bound("without 0-2: highest head", below=0.4),  # 0.24, 0.042 (seed 2; layer 2)
            Bound("without 0-2: loss rise", above=1.0),  # 1.31, 0.062 (seed 3); 1.55, 0.14 (seed 2)
            Bound("without 5-7: largest change of a head", below=0.12),  # 0.079, 0.006 (seed 3; either layer)
            Bound("without 5-7: loss rise", below=0.25),  # 0.12, 0.021 (seed 1)
        ],
    )


def test_p_rope_is_nearly_rope_and_neither_extrapolates():
    def measure():
        rope = [_run(seed, 1.0) for seed in CLAIM_SEEDS]
        prope = [_run(seed, 0.75) for seed in CLAIM_SEEDS]
        swapped = []
        for r in rope:  # the trained RoPE model rotated as p-RoPE rotates, without retraining
            model = copy.deepcopy(r.model)
            model.rotary = p_rope(16, 0.75)
            swapped.append({n: evaluate(model, n) for n in (32, 128)})
        return {
            "|p-RoPE - RoPE| at 32": [abs(p.losses[32] - r.losses[32]) for p, r in zip(prope, rope)],
            "rise from 32 to 128": [x.losses[128] - x.losses[32] for x in rope + prope],
            "|p-RoPE - RoPE| at 128": [abs(p.losses[128] - r.losses[128]) for p, r in zip(prope, rope)],
            "|RoPE model with p-RoPE's rotation - RoPE| at 32": [
                abs(s[32] - r.losses[32]) for s, r in zip(swapped, rope)
            ],
            "|RoPE model with p-RoPE's rotation - RoPE| at 128": [
                abs(s[128] - r.losses[128]) for s, r in zip(swapped, rope)
            ],
        }

    check(
        measure,
        [
            Bound("|p-RoPE - RoPE| at 32", below=0.08),  # 0.005, 0.009 (seed 3)
            # the chapter's "more than half a nat"; 0.8 had 3.0 spreads (0.152 / 0.051) with NumPy's and PyTorch's
            # kernels capped at AVX2 (make check-portable), 0.97, 0.027 here (seed 3, RoPE)
            Bound("rise from 32 to 128", above=0.5),
            Bound("|p-RoPE - RoPE| at 128", below=0.4),  # 0.004, 0.041 (seed 2)
            Bound("|RoPE model with p-RoPE's rotation - RoPE| at 32", below=1e-3),  # under 1e-5
            Bound("|RoPE model with p-RoPE's rotation - RoPE| at 128", below=0.01),  # 0.0005, 0.0005 (seed 2)
        ],
    )


def test_which_of_rope_and_p_rope_is_lower_beyond_the_training_length_is_not_a_robust_claim():
    """The claim of issue 29, refused: on every seed, the sign of p-RoPE minus RoPE at 128 moves under perturbation.

    The test this replaces asserted min(gaps) < 0 < max(gaps) over these seeds on the plain runs: +0.007, -0.004,
    +0.016 on an AVX-512 machine, +0.020, +0.013, +0.009 with its kernels capped at AVX2. Here each seed's sign,
    either way, is checked with the helper, and each is refused: its margin is under three times its spread.
    """
    for seed in CLAIM_SEEDS:

        def measure(seed=seed):
            return {"p-RoPE - RoPE at 128": _run(seed, 0.75).losses[128] - _run(seed, 1.0).losses[128]}

        lower = check_claim(measure, [Bound("p-RoPE - RoPE at 128", below=0.0)])
        higher = check_claim(measure, [Bound("p-RoPE - RoPE at 128", above=0.0)])
        print(f"\nseed {seed}\n{lower.table()}\n{higher.table()}")
        assert not lower.passed and not higher.passed
