"""Rotary position embedding: the rotation's properties, the two layouts, the scalings, and parity with the
libraries people run (transformers, rotary-embedding-torch).

Tolerances, and why:

* float64 identities (scores depend on m - n only, R(a) R(b) = R(a + b)): each angle ``p * theta`` is rounded
  once in float64, so its error is at most ``|p| * theta * 2**-53``; cos and sin add about ``2**-53`` each.
  Over a dot product of unit-scale vectors the error is then below ``8 * (sum of |positions| + 8) * 2**-52``
  times the norms: the tolerance grows with the positions, as any float64 angle's error does.
* float32 output vs the float64 reference: the table is rounded once from float64 and the products once more,
  so the error is a few ``2**-24`` of the pair's norm, at every position; ``1e-6 * max|x|`` is the pinned bound.
* frequencies vs transformers: transformers computes them in float32, ``base ** (2i/d)`` with a float32
  exponent (relative error about ``ln(base) * 2**-25``) plus a few roundings, so the tolerance is
  ``(ln(base) + 8) * 2**-24`` relative; yarn and llama3 blend the two frequencies with a float32 ramp whose
  absolute error, amplified by up to ``factor - 1`` relative to the result, adds a term stated at each test.
* rotations vs transformers and rotary-embedding-torch: both form ``position * inv_freq`` in float32, off by up
  to ``position * 2**-24`` radians plus the frequency's own error, so the tolerance is
  ``(16 * max_position + 16) * 2**-24`` times the pair's norm. At large positions posenc is the more accurate
  one (a test shows it): its angles are float64.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    RopeScaling,
    frequencies,
    rotary_attention_factor,
    rotary_frequencies,
    rotary_weight_permutation,
    rotate,
    translation_matrix,
)
from posenc.nn import RotaryEmbedding
from posenc.nn import rotary as rotary_module

# The parity tests below build transformers configs, whose logger talks about their fields.
pytestmark = pytest.mark.usefixtures("quiet_transformers")

EPS64 = 2.0**-52
EPS32 = 2.0**-24  # float32 unit roundoff

LINEAR = {"rope_type": "linear", "factor": 4.0}
DYNAMIC = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 16}
YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 64,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
SCALINGS = {"default": None, "linear": LINEAR, "dynamic": DYNAMIC, "yarn": YARN, "llama3": LLAMA3}
# Scalings whose frequencies do not depend on the positions of the call (dynamic's depend on the length).
STATIC_SCALINGS = {name: scaling for name, scaling in SCALINGS.items() if name != "dynamic"}
LAYOUTS = ("interleaved", "halves")


def random_array(seed, shape, dtype=np.float64):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(dtype)


def explicit_rotation(x, positions, inv_freq, layout):
    """An independent reference: build each 2 x 2 block of RoFormer's R_m (§3.2) and apply it, pair by pair."""
    x = np.asarray(x, dtype=np.float64)
    half = x.shape[-1] // 2
    out = np.empty_like(x)
    for row, position in enumerate(positions):
        for pair in range(half):
            i, j = (2 * pair, 2 * pair + 1) if layout == "interleaved" else (pair, pair + half)
            angle = position * inv_freq[pair]
            block = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
            out[..., row, [i, j]] = x[..., row, [i, j]] @ block.T
    return out


# --- The NumPy reference --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotate_applies_roformers_block_rotation(layout):
    x = random_array(0, (2, 5, 8))
    positions = np.array([0.0, 1.0, -3.5, 100.0, 2.0**20])
    expected = explicit_rotation(x, positions, frequencies(8, base=500.0), layout)
    np.testing.assert_allclose(rotate(x, positions, base=500.0, layout=layout), expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotation_at_m_is_the_sinusoids_translation_matrix(layout):
    """R(m) = T(m) of posenc.translation_matrix (column vectors): the chapter's starting point."""
    x = random_array(1, (1, 16))
    rotated = rotate(x, [7.25], base=100.0, layout=layout)
    np.testing.assert_allclose(rotated[0], translation_matrix(7.25, 16, base=100.0, layout=layout) @ x[0], atol=1e-15)


def integer_positions(limit=2**20):
    return st.integers(-limit, limit)


@settings(max_examples=40)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=integer_positions(),
    n=integer_positions(),
    shift=integer_positions(),
    layout=st.sampled_from(LAYOUTS),
    scaling=st.sampled_from(sorted(STATIC_SCALINGS)),
)
def test_score_depends_on_the_offset_only(seed, m, n, shift, layout, scaling):
    """<R(m) q, R(n) k> = <R(m + t) q, R(n + t) k>, to float64 angle rounding, which grows with the positions."""
    q, k = random_array(seed, (2, 1, 32))
    scaling = STATIC_SCALINGS[scaling]

    def score(a, b):
        return float(
            rotate(q, [a], layout=layout, scaling=scaling)[0] @ rotate(k, [b], layout=layout, scaling=scaling)[0]
        )

    gain = rotary_attention_factor(scaling) ** 2
    tolerance = gain * 8 * (abs(m) + abs(n) + 2 * abs(shift) + 8) * EPS64 * np.linalg.norm(q) * np.linalg.norm(k)
    assert abs(score(m, n) - score(m + shift, n + shift)) <= tolerance


@settings(max_examples=40)
@given(
    seed=st.integers(0, 2**32 - 1),
    position=st.floats(-(2.0**20), 2.0**20),
    layout=st.sampled_from(LAYOUTS),
    scaling=st.sampled_from(sorted(STATIC_SCALINGS)),
)
def test_rotation_preserves_norms(seed, position, layout, scaling):
    """Each pair keeps its length (times YaRN's attention factor): the rotation is orthogonal."""
    x = random_array(seed, (3, 1, 16))
    scaling = STATIC_SCALINGS[scaling]
    rotated = rotate(x, [position], layout=layout, scaling=scaling)
    np.testing.assert_allclose(
        np.linalg.norm(rotated, axis=-1), rotary_attention_factor(scaling) * np.linalg.norm(x, axis=-1), rtol=1e-14
    )


@settings(max_examples=40)
@given(
    seed=st.integers(0, 2**32 - 1),
    a=integer_positions(),
    b=integer_positions(),
    layout=st.sampled_from(LAYOUTS),
    scaling=st.sampled_from(["default", "linear", "llama3"]),
)
def test_rotations_compose_by_adding_positions(seed, a, b, layout, scaling):
    """R(b) R(a) = R(a + b), to float64 angle rounding (YaRN's factor would apply twice, so it is left out)."""
    x = random_array(seed, (1, 16))
    scaling = STATIC_SCALINGS[scaling]
    twice = rotate(rotate(x, [a], layout=layout, scaling=scaling), [b], layout=layout, scaling=scaling)
    once = rotate(x, [a + b], layout=layout, scaling=scaling)
    tolerance = 8 * (abs(a) + abs(b) + 8) * EPS64 * np.linalg.norm(x)
    np.testing.assert_allclose(twice, once, rtol=0, atol=tolerance)


def test_positions_may_be_a_count():
    x = random_array(2, (4, 6))
    np.testing.assert_array_equal(rotate(x, 4), rotate(x, [0.0, 1.0, 2.0, 3.0]))


def test_integer_positions_are_exact_up_to_2_53_and_refused_beyond():
    """float64 holds every integer up to 2**53; 2**53 + 1 would round to 2**53 and be rotated as that position."""
    x = random_array(3, (2, 8))
    np.testing.assert_array_equal(rotate(x, [2**53, -(2**53)]), rotate(x, [2.0**53, -(2.0**53)]))
    for beyond in (2**53 + 1, -(2**53) - 1, 2**62):
        with pytest.raises(ValueError, match="2\\*\\*53"):
            rotate(x[:1], np.array([beyond], dtype=np.int64))
    module = RotaryEmbedding(8)
    assert torch.isfinite(module(torch.from_numpy(x), positions=torch.tensor([2**53, -(2**53)]))).all()
    with pytest.raises(ValueError, match="2\\*\\*53"):
        module(torch.from_numpy(x), positions=torch.tensor([2**53 + 1, 0]))


# --- The two layouts and the weight permutation ---------------------------------------------------------


def attention_scores(x, w_q, w_k, n_heads, layout):
    """Per-head scores <R(m) q_m, R(n) k_n> of tokens x (seq, d_model) through projections (out, d_model)."""
    seq = x.shape[0]
    q = (x @ w_q.T).reshape(seq, n_heads, -1).transpose(1, 0, 2)
    k = (x @ w_k.T).reshape(seq, n_heads, -1).transpose(1, 0, 2)
    positions = np.arange(seq, dtype=np.float64)
    return rotate(q, positions, layout=layout) @ rotate(k, positions, layout=layout).transpose(0, 2, 1)


@settings(max_examples=30)
@given(
    seed=st.integers(0, 2**32 - 1),
    head_dim=st.sampled_from([2, 4, 8, 16]),
    n_heads=st.integers(1, 4),
    source=st.sampled_from(LAYOUTS),
)
def test_permuted_weights_give_identical_scores_in_the_other_layout(seed, head_dim, n_heads, source):
    target = "halves" if source == "interleaved" else "interleaved"
    d_model = 12
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(7, d_model))
    w_q, w_k = rng.normal(size=(2, n_heads * head_dim, d_model))
    permutation = rotary_weight_permutation(source, target, head_dim, n_heads=n_heads)
    expected = attention_scores(x, w_q, w_k, n_heads, source)
    converted = attention_scores(x, w_q[permutation], w_k[permutation], n_heads, target)
    np.testing.assert_allclose(converted, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_unpermuted_weights_in_the_other_layout_change_the_scores():
    """The failure the permutation prevents: same weights, other layout, scores off by O(1)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 32))
    w_q, w_k = rng.normal(size=(2, 64, 32))
    right = attention_scores(x, w_q, w_k, 1, "interleaved")
    wrong = attention_scores(x, w_q, w_k, 1, "halves")
    assert np.abs(wrong - right).max() > 0.5 * np.abs(right).max()


@pytest.mark.parametrize("head_dim, n_heads", [(2, 1), (8, 3), (128, 2)])
def test_weight_permutations_are_inverse_and_match_the_llama_conversion(head_dim, n_heads):
    forward = rotary_weight_permutation("interleaved", "halves", head_dim, n_heads=n_heads)
    backward = rotary_weight_permutation("halves", "interleaved", head_dim, n_heads=n_heads)
    np.testing.assert_array_equal(forward[backward], np.arange(n_heads * head_dim))
    np.testing.assert_array_equal(
        rotary_weight_permutation("halves", "halves", head_dim, n_heads=n_heads), np.arange(n_heads * head_dim)
    )
    # transformers' convert_llama_weights_to_hf.permute: view(n_heads, head_dim // 2, 2, -1).transpose(1, 2)
    rows = torch.arange(n_heads * head_dim)[:, None]
    llama = rows.view(n_heads, head_dim // 2, 2, 1).transpose(1, 2).reshape(-1)
    np.testing.assert_array_equal(forward, llama.numpy())


# --- Frequencies and scalings ---------------------------------------------------------------------------


def test_default_frequencies_are_the_sinusoids():
    np.testing.assert_array_equal(rotary_frequencies(64, base=500000.0), frequencies(64, base=500000.0))
    np.testing.assert_array_equal(rotary_frequencies(64, scaling={"rope_type": "default"}), frequencies(64))


@pytest.mark.parametrize("name", ["linear", "yarn", "llama3"])
def test_scalings_slow_each_frequency_by_at_most_the_factor(name):
    scaling = SCALINGS[name]
    base_freq, scaled = rotary_frequencies(64), rotary_frequencies(64, scaling=scaling)
    assert np.all(scaled <= base_freq) and np.all(scaled >= base_freq / scaling["factor"] * (1 - 1e-15))
    assert np.all(np.diff(scaled) < 0)


@pytest.mark.parametrize("name", ["linear", "yarn", "llama3"])
def test_a_factor_of_one_changes_nothing(name):
    """(Not dynamic: its base grows as (factor * l / L - factor + 1) ** (d / (d - 2)), which is l / L for factor 1.)"""
    scaling = dict(SCALINGS[name], factor=1.0)
    np.testing.assert_allclose(rotary_frequencies(32, scaling=scaling), frequencies(32), rtol=1e-15)


def test_dynamic_changes_nothing_up_to_the_trained_length_and_then_raises_the_base():
    trained = DYNAMIC["original_max_position_embeddings"]
    for seq_len in (None, 1, trained):
        np.testing.assert_array_equal(rotary_frequencies(16, scaling=DYNAMIC, seq_len=seq_len), frequencies(16))
    longer = rotary_frequencies(16, scaling=DYNAMIC, seq_len=4 * trained)
    assert longer[0] == 1.0 and np.all(longer[1:] < frequencies(16)[1:])


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    """Peng et al. (2023), as their reference code implements it: pairs turning > beta_fast times over the
    trained length are untouched, pairs turning < beta_slow times are divided by the factor."""
    head_dim, trained = 128, 4096
    scaling = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": trained}
    base_freq, scaled = rotary_frequencies(head_dim), rotary_frequencies(head_dim, scaling=scaling)
    turns = trained * base_freq / (2 * math.pi)
    np.testing.assert_array_equal(scaled[turns > 32 * 1.2], base_freq[turns > 32 * 1.2])
    np.testing.assert_allclose(scaled[turns < 1 / 1.2], base_freq[turns < 1 / 1.2] / 16.0, rtol=1e-15)
    assert rotary_attention_factor(scaling) == pytest.approx(0.1 * math.log(16.0) + 1.0, rel=1e-15)


def test_llama3_bands_follow_the_wavelengths():
    base_freq = rotary_frequencies(128, base=500000.0)
    scaling = dict(LLAMA3, original_max_position_embeddings=8192)
    scaled = rotary_frequencies(128, base=500000.0, scaling=scaling)
    wavelength = 2 * math.pi / base_freq
    short, long = wavelength < 8192 / 4.0, wavelength > 8192 / 1.0
    np.testing.assert_array_equal(scaled[short], base_freq[short])
    np.testing.assert_allclose(scaled[long], base_freq[long] / 8.0, rtol=1e-15)
    assert short.sum() + long.sum() < 64  # some pairs are in the blended band


def test_yarn_attention_factor_options():
    scaling = dict(YARN, mscale=0.707, mscale_all_dim=0.707)
    assert rotary_attention_factor(scaling) == 1.0
    assert rotary_attention_factor(dict(YARN, attention_factor=0.5)) == 0.5
    assert rotary_attention_factor(dict(YARN, mscale=1.0)) == pytest.approx(0.1 * math.log(8.0) + 1.0)
    for name in ("default", "linear", "dynamic", "llama3"):
        assert rotary_attention_factor(SCALINGS[name]) == 1.0


def test_old_type_key_and_matching_rope_theta_are_accepted():
    old = {"type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    np.testing.assert_array_equal(rotary_frequencies(8, scaling=old), frequencies(8) / 2.0)


# --- RopeScaling: the dict parsed once -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_the_parsed_scaling_gives_what_its_dict_gives(name):
    """rotary_frequencies, rotary_attention_factor, rotate and RotaryEmbedding take the object as the dict."""
    scaling = SCALINGS[name]
    parsed = RopeScaling.from_dict(scaling) if scaling is not None else RopeScaling()
    np.testing.assert_array_equal(
        rotary_frequencies(16, scaling=parsed, seq_len=100.0), rotary_frequencies(16, scaling=scaling, seq_len=100.0)
    )
    assert rotary_attention_factor(parsed) == rotary_attention_factor(scaling)
    x = random_array(0, (3, 40, 16))
    np.testing.assert_array_equal(rotate(x, 40, scaling=parsed), rotate(x, 40, scaling=scaling))
    q = torch.from_numpy(x)
    torch.testing.assert_close(RotaryEmbedding(16, scaling=parsed)(q), RotaryEmbedding(16, scaling=scaling)(q))


def test_the_module_keeps_the_parsed_scaling():
    rope = RotaryEmbedding(16, scaling=YARN)
    assert rope.scaling == RopeScaling.from_dict(YARN)
    assert rope.attention_factor == rope.scaling.attention_scaling == rotary_attention_factor(YARN)
    parsed = RopeScaling.from_dict(LLAMA3)
    assert RotaryEmbedding(16, scaling=parsed).scaling is parsed
    assert RotaryEmbedding(16).scaling == RopeScaling()
    assert "rope_type='yarn'" in repr(rope)


def test_the_repr_shows_what_was_understood():
    """The rope type, the keys of that type with the defaults filled in, and the attention scaling; no others."""
    yarn = RopeScaling.from_dict(YARN)
    shown = repr(yarn)
    for text in ("rope_type='yarn'", "factor=8.0", "original_max_position_embeddings=64", "beta_fast=32.0"):
        assert text in shown
    for text in ("beta_slow=1.0", "truncate=True", f"attention_scaling={rotary_attention_factor(YARN)!r}"):
        assert text in shown
    assert "mscale" not in shown and "low_freq_factor" not in shown
    linear = repr(RopeScaling.from_dict(LINEAR))
    assert linear == "RopeScaling(rope_type='linear', factor=4.0, attention_scaling=1.0)"


def test_the_attention_scaling_follows_the_fields_it_derives_from():
    """Frozen, and a replaced factor re-derives YaRN's attention scaling rather than keeping the old one."""
    yarn = RopeScaling.from_dict(YARN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        yarn.factor = 2.0
    assert dataclasses.replace(yarn, factor=2.0).attention_scaling == rotary_attention_factor(dict(YARN, factor=2.0))
    assert yarn.attention_scaling != rotary_attention_factor(dict(YARN, factor=2.0))
    given = RopeScaling.from_dict(dict(YARN, attention_factor=0.5))
    assert dataclasses.replace(given, factor=2.0).attention_scaling == 0.5


def test_a_field_the_rope_type_does_not_use_is_refused():
    """Built by its fields, a RopeScaling refuses what from_dict refuses as an unknown key."""
    with pytest.raises(ValueError, match="beta_fast"):
        RopeScaling("linear", factor=2.0, beta_fast=16.0)
    with pytest.raises(TypeError, match="original_max_position_embeddings"):
        RopeScaling("yarn", factor=2.0)
    assert RopeScaling("yarn", factor=8.0, original_max_position_embeddings=64) == RopeScaling.from_dict(YARN)


def test_a_parsed_rope_theta_must_agree_with_the_base():
    """An explicit base must agree with rope_theta; no base means rope_theta (10000 without one)."""
    parsed = RopeScaling.from_dict(dict(LINEAR, rope_theta=500000.0))
    with pytest.raises(ValueError, match="rope_theta"):
        rotary_frequencies(8, base=10000.0, scaling=parsed)
    with pytest.raises(ValueError, match="rope_theta"):
        rotate(np.ones((2, 8)), 2, base=10000.0, scaling=dict(LINEAR, rope_theta=500000.0))
    np.testing.assert_array_equal(rotary_frequencies(8, scaling=parsed), frequencies(8, base=500000.0) / 4)
    x = random_array(1, (3, 8))
    np.testing.assert_array_equal(rotate(x, 3, scaling=parsed), rotate(x, 3, base=500000.0, scaling=LINEAR))
    np.testing.assert_array_equal(rotate(x, 3, scaling=LINEAR), rotate(x, 3, base=10000.0, scaling=LINEAR))
    with pytest.raises(ValueError, match="rope_theta"):
        RotaryEmbedding(8, base=10000.0, scaling=parsed)
    assert RotaryEmbedding(8, scaling=parsed).base == 500000.0 and RotaryEmbedding(8, scaling=LINEAR).base == 10000.0
    np.testing.assert_array_equal(
        rotary_frequencies(8, base=500000.0, scaling=parsed), frequencies(8, base=500000.0) / 4
    )


# --- Parity with transformers: frequencies --------------------------------------------------------------


def transformers_config(head_dim, rope_parameters, max_position_embeddings):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        rope_parameters=dict(rope_parameters),
    )


def transformers_frequencies(head_dim, base, scaling, *, max_position_embeddings, seq_len=None):
    """(inv_freq, attention_factor) from transformers' own init functions, as its Llama model calls them."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    parameters = {key: value for key, value in (scaling or {"rope_type": "default"}).items()}
    parameters["rope_theta"] = base
    if parameters["rope_type"] == "dynamic":  # transformers reads the trained length from the config
        max_position_embeddings = parameters.pop("original_max_position_embeddings")
    config = transformers_config(head_dim, parameters, max_position_embeddings)
    if parameters["rope_type"] == "default":
        inv_freq, attention = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, attention = ROPE_INIT_FUNCTIONS[parameters["rope_type"]](config, "cpu", seq_len=seq_len)
    return inv_freq.double().numpy(), attention


BASES = st.floats(2.0, 1e7)
HEAD_DIMS = st.integers(2, 128).map(lambda half: 2 * half)
FACTORS = st.floats(1.0, 64.0)


def float32_frequency_tolerance(base):
    """Relative: the float32 exponent 2i/d (error <= 2**-25) times ln(base), plus a few roundings."""
    return (math.log(base) + 8) * EPS32


@settings(max_examples=40)
@given(head_dim=HEAD_DIMS, base=BASES, factor=FACTORS, name=st.sampled_from(["default", "linear"]))
def test_frequencies_match_transformers_default_and_linear(head_dim, base, factor, name):
    scaling = None if name == "default" else {"rope_type": "linear", "factor": factor}
    theirs, attention = transformers_frequencies(head_dim, base, scaling, max_position_embeddings=2048)
    ours = rotary_frequencies(head_dim, base=base, scaling=scaling)
    np.testing.assert_allclose(ours, theirs, rtol=float32_frequency_tolerance(base), atol=0)
    assert attention == rotary_attention_factor(scaling) == 1.0


@settings(max_examples=40)
@given(
    head_dim=st.integers(2, 128).map(lambda half: 2 * half),
    base=BASES,
    factor=FACTORS,
    trained=st.integers(1, 2**16),
    seq_len=st.one_of(st.none(), st.integers(1, 2**20)),
)
def test_frequencies_match_transformers_dynamic(head_dim, base, factor, trained, seq_len):
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": trained}
    theirs, _ = transformers_frequencies(head_dim, base, scaling, max_position_embeddings=None, seq_len=seq_len)
    ours = rotary_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)
    length = trained if seq_len is None else max(seq_len, trained)
    dynamic_base = base * (factor * length / trained - (factor - 1)) ** (head_dim / (head_dim - 2))
    np.testing.assert_allclose(ours, theirs, rtol=float32_frequency_tolerance(dynamic_base), atol=0)


def yarn_ramp_width(head_dim, base, trained, beta_fast, beta_slow, truncate):
    """high - low of YaRN's ramp (the reference code's and transformers' find_correction_range)."""

    def pair(turns):
        return head_dim * math.log(trained / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair(beta_fast), pair(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    return max(high - low, 0.001)


@settings(max_examples=60)
@given(
    head_dim=HEAD_DIMS,
    base=BASES,
    factor=FACTORS,
    trained=st.integers(16, 2**17),
    beta_slow=st.one_of(st.none(), st.floats(0.25, 4.0)),
    extra=st.floats(0.0, 64.0),
    truncate=st.booleans(),
    attention=st.sampled_from([None, "factor", "mscale"]),
)
def test_frequencies_and_attention_factor_match_transformers_yarn(
    head_dim, base, factor, trained, beta_slow, extra, truncate, attention
):
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained, "truncate": truncate}
    if beta_slow is not None:
        scaling.update(beta_slow=beta_slow, beta_fast=beta_slow + extra)
    if attention == "factor":
        scaling["attention_factor"] = 0.75
    elif attention == "mscale":
        scaling.update(mscale=1.0, mscale_all_dim=0.5)
    theirs, their_attention = transformers_frequencies(
        head_dim, base, scaling, max_position_embeddings=int(trained * factor)
    )
    ours = rotary_frequencies(head_dim, base=base, scaling=scaling)
    # The ramp (i - low) / (high - low) is float32 in transformers: absolute error <= 4 * (head_dim / 2) /
    # (high - low) * 2**-24, and it weighs a difference of up to (factor - 1) times the result.
    width = yarn_ramp_width(
        head_dim, base, trained, scaling.get("beta_fast", 32.0), scaling.get("beta_slow", 1.0), truncate
    )
    ramp_error = 4 * (head_dim / 2) / width * EPS32 * (factor - 1)
    np.testing.assert_allclose(ours, theirs, rtol=float32_frequency_tolerance(base) + ramp_error, atol=0)
    assert rotary_attention_factor(scaling) == pytest.approx(their_attention, rel=1e-15)


@settings(max_examples=60)
@given(
    head_dim=HEAD_DIMS,
    base=BASES,
    factor=FACTORS,
    trained=st.integers(16, 2**17),
    low=st.floats(0.25, 4.0),
    gap=st.floats(0.25, 8.0),
)
def test_frequencies_match_transformers_llama3(head_dim, base, factor, trained, low, gap):
    scaling = {
        "rope_type": "llama3",
        "factor": factor,
        "original_max_position_embeddings": trained,
        "low_freq_factor": low,
        "high_freq_factor": low + gap,
    }
    theirs, attention = transformers_frequencies(head_dim, base, scaling, max_position_embeddings=2 * trained)
    ours = rotary_frequencies(head_dim, base=base, scaling=scaling)
    # The blend weight g = (L / wavelength - low) / (high - low) is float32 in transformers: relative error of a
    # few 2**-24 times L / wavelength <= high, divided by high - low, weighing up to (factor - 1) times the result.
    blend_error = 4 * (low + gap) / gap * EPS32 * (factor - 1) * (math.log(base) + 8)
    np.testing.assert_allclose(ours, theirs, rtol=float32_frequency_tolerance(base) + blend_error, atol=0)
    assert attention == 1.0


@settings(max_examples=40)
@given(
    head_dim=HEAD_DIMS,
    base=BASES,
    factor=st.one_of(st.none(), FACTORS),
    partial=st.sampled_from([None, 0.125, 0.25, 0.3, 0.5, 0.75, 1.0]),
)
def test_frequencies_match_transformers_proportional(head_dim, base, factor, partial):
    """Gemma 4's full-attention layers: the whole head's frequencies base**(-2i/head_dim) on the first
    int(p * head_dim // 2) pairs, 0 on the others, all divided by the factor; the whole head is rotated."""
    scaling = {"rope_type": "proportional"}
    if factor is not None:
        scaling["factor"] = factor
    if partial is not None:
        scaling["partial_rotary_factor"] = partial
    theirs, attention = transformers_frequencies(head_dim, base, scaling, max_position_embeddings=2048)
    ours = rotary_frequencies(head_dim, base=base, scaling=scaling)
    assert ours.shape == theirs.shape == (head_dim // 2,)
    turning = int((1.0 if partial is None else partial) * head_dim // 2)
    np.testing.assert_array_equal(ours[turning:], 0.0)
    np.testing.assert_allclose(ours, theirs, rtol=float32_frequency_tolerance(base), atol=0)
    np.testing.assert_allclose(
        ours[:turning], rotary_frequencies(head_dim, base=base)[:turning] / (factor or 1.0), rtol=1e-15
    )
    assert attention == rotary_attention_factor(scaling) == 1.0


# --- The PyTorch module ---------------------------------------------------------------------------------


def random_tensor(seed, shape, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return (2 * torch.rand(shape, generator=generator, dtype=torch.float64) - 1).to(dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_module_matches_the_numpy_reference(layout, name):
    """float64 in, float64 out: same numbers as posenc.rotate (to 4 float64 roundings); float32 within 1e-6."""
    rope = RotaryEmbedding(32, base=500.0, layout=layout, scaling=SCALINGS[name])
    x = random_tensor(0, (2, 3, 40, 32), torch.float64)
    expected = rotate(x.numpy(), np.arange(5, 45), base=500.0, layout=layout, scaling=SCALINGS[name])
    np.testing.assert_allclose(rope(x, offset=5).numpy(), expected, rtol=0, atol=8 * EPS64)
    np.testing.assert_allclose(rope(x.float(), offset=5).double().numpy(), expected, rtol=0, atol=1e-6)


@settings(max_examples=30)
@given(
    seed=st.integers(0, 2**32 - 1),
    seq=st.integers(1, 20),
    cut=st.integers(0, 20),
    offset=st.integers(0, 2**40),
    layout=st.sampled_from(LAYOUTS),
    name=st.sampled_from(sorted(STATIC_SCALINGS)),
)
def test_rotating_with_an_offset_equals_slicing_a_longer_rotation(seed, seq, cut, offset, layout, name):
    """Rows rotated at offset + cut are the rows of the whole sequence rotated at offset: the same table entries
    (float64 angles of the same positions), multiplied by torch's contiguous or strided loop, which may round the
    last float32 bit differently: 2 units of 2**-24 on entries of size <= sqrt(2)."""
    cut = min(cut, seq)
    rope = RotaryEmbedding(8, layout=layout, scaling=SCALINGS[name])
    x = random_tensor(seed, (2, seq, 8))
    whole = rope(x, offset=offset)
    torch.testing.assert_close(rope(x[:, cut:], offset=offset + cut), whole[:, cut:], rtol=0, atol=4 * EPS32)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_cached_table_is_never_reused_for_another_offset(layout):
    """lucidrains/rotary-embedding-torch#11: a cache keyed on the length alone returns the offset-0 rotation."""
    rope = RotaryEmbedding(16, layout=layout)
    x = random_tensor(1, (1, 4, 16), torch.float64)
    rope(x)  # fills the cache for offset 0, length 4
    expected = rotate(x.numpy(), np.arange(9, 13), layout=layout)
    np.testing.assert_allclose(rope(x, offset=9).numpy(), expected, atol=1e-15)
    np.testing.assert_allclose(
        rope(x, positions=torch.arange(9, 13) * 2).numpy(),
        rotate(x.numpy(), np.arange(18, 26, 2), layout=layout),
        atol=1e-15,
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("by_positions", [False, True])
def test_a_table_cached_in_inference_mode_serves_a_training_step(layout, by_positions):
    """A validation loop under torch.inference_mode() (Lightning's default), then a training step at the same
    length: the cached table must be an ordinary tensor, or backward raises "Inference tensors cannot be saved
    for backward". Gradients equal those of a module that never saw inference mode."""
    kwargs = {"positions": torch.arange(3, 8)} if by_positions else {"offset": 3}
    rope = RotaryEmbedding(16, layout=layout)
    with torch.inference_mode():
        rope(random_tensor(3, (2, 5, 16)), **kwargs)
    q = random_tensor(4, (2, 5, 16)).requires_grad_()
    (rope(q, **kwargs) ** 2).sum().backward()
    fresh = q.detach().clone().requires_grad_()
    (RotaryEmbedding(16, layout=layout)(fresh, **kwargs) ** 2).sum().backward()
    torch.testing.assert_close(q.grad, fresh.grad, rtol=0, atol=0)


def test_the_cache_is_keyed_on_dtype_grows_and_is_bounded():
    """One table per device and dtype, covering positions 0 .. n - 1: a float64 call after a float32 one gets
    float64 rows; decoding one position at a time grows it geometrically (a few rebuilds, not one per step);
    positions past the bound are computed directly, and agree with the reference."""
    rope = RotaryEmbedding(16)
    x = random_tensor(2, (3, 16), torch.float64)
    rope(x.float())  # a complex64 table for offsets 0 .. 2
    np.testing.assert_allclose(rope(x).numpy(), rotate(x.numpy(), 3), rtol=0, atol=4 * EPS64)
    assert sorted(str(dtype) for _, dtype in rope._tables) == ["torch.float32", "torch.float64"]
    sizes = set()
    for offset in range(1000):
        rope(x[:1].float(), offset=offset)
        sizes.add(rope._tables[(x.device, torch.float32)].shape[0])
    assert len(sizes) <= 5 and max(sizes) < 2000
    far = 2**40
    np.testing.assert_allclose(
        rope(x, offset=far).numpy(), rotate(x.numpy(), np.arange(far, far + 3.0)), rtol=0, atol=2.0**-30
    )
    assert max(table.shape[0] for table in rope._tables.values()) < 2000


@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), offset=st.integers(0, 2**30), layout=st.sampled_from(LAYOUTS))
def test_explicit_positions_equal_the_offset_path(seed, offset, layout):
    rope = RotaryEmbedding(16, layout=layout)
    x = random_tensor(seed, (2, 6, 16))
    by_offset = rope(x, offset=offset)
    assert torch.equal(rope(x, positions=torch.arange(offset, offset + 6)), by_offset)
    assert torch.equal(rope(x, positions=np.arange(offset, offset + 6, dtype=np.float64)), by_offset)


def test_fractional_positions_rotate_by_fractional_angles():
    rope = RotaryEmbedding(8, layout="halves")
    x = random_tensor(3, (3, 8), torch.float64)
    positions = [-2.5, 0.125, 1e6 + 0.5]
    np.testing.assert_allclose(
        rope(x, positions=torch.tensor(positions)).numpy(),
        rotate(x.numpy(), positions, layout="halves"),
        atol=4 * EPS64,
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_error_stays_below_1e6_at_positions_up_to_2_20(layout):
    """Float64 angles: the float32 result is within 1e-6 of the float64 rotation even at position 2**20, where
    a table built from float32 angles (as transformers and rotary-embedding-torch build theirs) is off by 1e-2."""
    rope = RotaryEmbedding(64, layout=layout)
    x = random_tensor(4, (1, 2, 512, 64), torch.float64)
    offset = 2**20 - 512
    expected = rotate(x.numpy(), np.arange(offset, 2**20), layout=layout)
    error = np.abs(rope(x.float(), offset=offset).double().numpy() - expected).max()
    assert error <= 1e-6
    # The same rotation from float32 angles, to show the bound is not met by accident:
    inv_freq = torch.from_numpy(frequencies(64)).float()
    angles = torch.arange(offset, 2**20, dtype=torch.float32)[:, None] * inv_freq
    float32_angles = torch.view_as_real(
        torch.view_as_complex(x.float().unflatten(-1, (-1, 2))) * torch.polar(torch.ones_like(angles), angles)
    ).flatten(-2)
    if layout == "interleaved":
        assert np.abs(float32_angles.double().numpy() - expected).max() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_dtype_is_preserved(dtype, layout):
    rope = RotaryEmbedding(16, layout=layout)
    x = random_tensor(5, (2, 7, 16), dtype)
    out = rope(x, offset=3)
    assert out.dtype == dtype and out.shape == x.shape


@pytest.mark.parametrize("dtype, unit_roundoff", [(torch.bfloat16, 2.0**-8), (torch.float16, 2.0**-11)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_low_precision_result_is_one_rounding_from_exact(dtype, unit_roundoff, layout):
    """The rotation of the bfloat16 (or float16) input, computed exactly, then rounded once: each entry is within
    one unit roundoff of the exact value, plus the float32 computation's ~1e-6 of the pair's norm."""
    rope = RotaryEmbedding(64, layout=layout)
    x = random_tensor(6, (2, 4, 256, 64), dtype)
    exact = rotate(x.double().numpy(), np.arange(1000, 1256), layout=layout)
    out = rope(x, offset=1000).double().numpy()
    assert np.all(np.abs(out - exact) <= unit_roundoff * np.abs(exact) + 2e-6)


def test_gradient_is_the_inverse_rotation():
    """d<w, R x>/dx = R^T w = rotation of w by the negated positions; both layouts, grad path = no-grad path."""
    for layout in LAYOUTS:
        rope = RotaryEmbedding(8, layout=layout)
        x = random_tensor(7, (2, 5, 8), torch.float64).requires_grad_()
        w = random_tensor(8, (2, 5, 8), torch.float64)
        out = rope(x, offset=2)
        (out * w).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), rotate(w.numpy(), -np.arange(2.0, 7.0), layout=layout), atol=1e-15)
        with torch.no_grad():
            np.testing.assert_allclose(rope(x, offset=2).numpy(), out.detach().numpy(), atol=4 * EPS64)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_input_is_rotated_like_a_contiguous_one(layout):
    """(batch, seq, heads, d) transposed to (batch, heads, seq, d), and a head sliced out of a fused projection
    (odd storage offset), strided or, for one token decoded at a time, contiguous: same result up to the last
    float32 bit (torch's strided loops round on their own)."""
    rope = RotaryEmbedding(8, layout=layout)
    x = random_tensor(9, (2, 5, 3, 8)).transpose(1, 2)
    torch.testing.assert_close(rope(x), rope(x.contiguous()), rtol=0, atol=4 * EPS32)
    fused = random_tensor(10, (2, 5, 25))
    for part in fused[..., 1:9], fused[:1, :1, 1:9]:
        torch.testing.assert_close(rope(part), rope(part.clone()), rtol=0, atol=4 * EPS32)
    assert fused[:1, :1, 1:9].is_contiguous() and fused[:1, :1, 1:9].storage_offset() == 1


def test_no_parameters_no_state_and_moves_with_to():
    rope = RotaryEmbedding(16, scaling=YARN)
    assert list(rope.parameters()) == [] and list(rope.buffers()) == [] and rope.state_dict() == {}
    x = random_tensor(11, (1, 3, 16))
    before = rope(x)
    rope.to(torch.float16)  # no floating buffer to round: the frequencies stay float64
    assert torch.equal(rope(x), before)
    meta = rope.to("meta")(torch.zeros(1, 3, 16, device="meta"), offset=4)
    assert meta.device.type == "meta" and meta.shape == (1, 3, 16)


def test_dynamic_frequencies_follow_the_length_of_the_call():
    rope = RotaryEmbedding(16, scaling=DYNAMIC)
    x = random_tensor(12, (1, 40, 16), torch.float64)
    np.testing.assert_allclose(rope(x).numpy(), rotate(x.numpy(), 40, scaling=DYNAMIC), atol=8 * EPS64)
    short = rope(x[:, :10])  # within the trained length: plain RoPE
    np.testing.assert_allclose(short.numpy(), rotate(x[:, :10].numpy(), 10), atol=8 * EPS64)


# --- Parity with the libraries people run ---------------------------------------------------------------


def library_rotation_tolerance(max_position, norm):
    """Their angles are float32: position * inv_freq rounded once (<= position * 2**-24 rad), inv_freq itself
    off by <= 14 * 2**-24 relative; cos, sin and the products add a few 2**-24. Times the pair's norm."""
    return (16 * max_position + 16) * EPS32 * norm


@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_halves_matches_transformers_apply_rotary_pos_emb(name):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    scaling = SCALINGS[name]
    head_dim, seq = 32, 96
    parameters = dict(scaling or {"rope_type": "default"}, rope_theta=10000.0)
    max_position_embeddings = 16 if name == "dynamic" else 256
    if name == "dynamic":
        parameters.pop("original_max_position_embeddings")
    config = transformers_config(head_dim, parameters, max_position_embeddings)
    q = random_tensor(13, (2, 3, seq, head_dim))
    k = random_tensor(14, (2, 3, seq, head_dim))
    cos, sin = LlamaRotaryEmbedding(config)(q, torch.arange(seq)[None].expand(2, -1))
    their_q, their_k = apply_rotary_pos_emb(q, k, cos, sin)
    rope = RotaryEmbedding(head_dim, layout="halves", scaling=scaling)
    norm = math.sqrt(2) * rotary_attention_factor(scaling)
    tolerance = library_rotation_tolerance(seq - 1, norm)
    torch.testing.assert_close(rope(q), their_q, rtol=0, atol=tolerance)
    torch.testing.assert_close(rope(k), their_k, rtol=0, atol=tolerance)


def test_interleaved_matches_rotary_embedding_torch():
    from rotary_embedding_torch import RotaryEmbedding as LucidrainsRotary

    theirs = LucidrainsRotary(dim=32)
    ours = RotaryEmbedding(32)
    q = random_tensor(15, (2, 4, 64, 32))
    tolerance = library_rotation_tolerance(63 + 100, math.sqrt(2))
    torch.testing.assert_close(ours(q), theirs.rotate_queries_or_keys(q), rtol=0, atol=tolerance)
    torch.testing.assert_close(
        ours(q, offset=100), theirs.rotate_queries_or_keys(q, offset=100), rtol=0, atol=tolerance
    )


def test_at_large_positions_posenc_is_the_accurate_one():
    """Where transformers' float32 angles drift (position 2**20), posenc stays within 1e-6 of float64."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = transformers_config(64, {"rope_type": "default", "rope_theta": 10000.0}, 2**21)
    q = random_tensor(16, (1, 1, 256, 64))
    positions = torch.arange(2**20 - 256, 2**20)
    cos, sin = LlamaRotaryEmbedding(config)(q, positions[None])
    theirs, _ = apply_rotary_pos_emb(q, q, cos, sin)
    exact = rotate(q.double().numpy(), positions.numpy(), layout="halves")
    their_error = np.abs(theirs.double().numpy() - exact).max()
    our_error = np.abs(RotaryEmbedding(64, layout="halves")(q, positions=positions).double().numpy() - exact).max()
    assert our_error <= 1e-6 < 1e-3 < their_error


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "q_shape, k_shape, kwargs",
    [
        ((1, 4, 1, 16), (1, 4, 1, 16), {"offset": 4097}),  # a decode step (rotated side by side in "halves")
        ((2, 4, 3, 16), (2, 2, 3, 16), {"offset": torch.tensor(5)}),  # grouped-query attention
        ((2, 4, 3, 16), (2, 4, 3, 16), {"positions": torch.tensor([[0, 1, 2], [7, 8, 9]])}),  # per-row positions
        ((1, 8192, 16), (1, 8192, 16), {"offset": 3}),  # too large to copy side by side
    ],
)
def test_rotate_pair_equals_two_calls(layout, q_shape, k_shape, kwargs):
    rope = RotaryEmbedding(16, layout=layout)
    q, k = random_tensor(20, q_shape), random_tensor(21, k_shape)
    rotated_q, rotated_k = rope.rotate_pair(q, k, **kwargs)
    assert torch.equal(rotated_q, rope(q, **kwargs)) and torch.equal(rotated_k, rope(k, **kwargs))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ordinary_calls_skip_the_checks_and_rotate_their_own_rows(layout, monkeypatch):
    """Once the cached table covers them, ordinary float32 calls with an int offset (a decode step, grouped-query
    keys, a prefill, a transposed or odd-offset view) take the lean path, which never calls the checks, and rotate
    by the rows of their own positions: within 1e-6 * max|x| (the float32 promise; each output is two float32
    products of a float32-rounded table, a few units of 2**-24) of the float64 rotation. Rows of another position
    would be off by about |x|. forward and rotate_pair agree bit for bit (the same products in the same order,
    whether the halves are swapped by a copy, by torch.roll or by out= products)."""
    rope = RotaryEmbedding(16, layout=layout)
    rope(random_tensor(30, (1, 1, 1200, 16)))  # caches the table of positions 0 .. 1199 at least

    def checked_path(*args, **kwargs):
        raise AssertionError("an ordinary call took the checked path")

    monkeypatch.setattr(rotary_module, "_sequence_axis", checked_path)
    fused = random_tensor(31, (1, 4, 1, 40))
    cases = [
        (random_tensor(32, (1, 4, 1, 16)), random_tensor(33, (1, 4, 1, 16)), 257),  # a decode step
        (random_tensor(34, (1, 4, 1, 16)), random_tensor(35, (1, 2, 1, 16)), 258),  # grouped-query attention
        (random_tensor(36, (2, 4, 5, 16)), random_tensor(37, (2, 4, 5, 16)), 3),  # a prefill
        (random_tensor(40, (1, 4, 1100, 16)), random_tensor(41, (1, 4, 1100, 16)), 5),  # a long one (out= products)
        (random_tensor(38, (1, 5, 4, 16)).transpose(1, 2), random_tensor(39, (1, 4, 5, 16)), 7),  # transposed
        (fused[..., 1:17], fused[..., 17:33], 100),  # sliced out of a fused projection, odd storage offset
    ]
    for q, k, offset in cases:
        positions = np.arange(offset, offset + q.shape[-2], dtype=np.float64)
        for x, rotated in zip((q, k), rope.rotate_pair(q, k, offset=offset)):
            exact = rotate(x.double().numpy(), positions, layout=layout)
            assert np.abs(rotated.double().numpy() - exact).max() <= 1e-6 * np.abs(exact).max()
            assert torch.equal(rotated, rope(x, offset=offset))
