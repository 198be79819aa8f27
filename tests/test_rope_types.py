"""Partial rotary and the rope types real checkpoints ship, against transformers' own code.

Each test builds a tiny config with transformers' config classes, reads the ``rope_parameters`` the config
standardised (as a model would), parses it with :meth:`posenc.RopeScaling.from_dict`, and compares
:func:`posenc.rotary_frequencies`, :func:`posenc.rotary_attention_factor` and :func:`posenc.rotate` with
``ROPE_INIT_FUNCTIONS[rope_type]`` and the models' ``apply_rotary_pos_emb`` (transformers v5.23).

Tolerances. transformers computes in float32, posenc in float64, so the comparison is relative and bounded by
float32 rounding: the exponent ``2i / d`` rounded to float32 (relative error ``2**-25``) is multiplied by
``ln(base)`` in ``base ** (2i / d)``, plus a few roundings of the power, of a divisor (``factor``, a longrope
entry) and of the division: ``(ln(base) + 10) * 2**-24`` relative per frequency. A rotation at position ``p``
turns by ``p * inv_freq`` (at most ``p`` radians), so its angle is off by at most ``p`` times that bound plus the
float32 product's own rounding, and the rotated features by that angle times their size, plus the rounding of
``x * cos + rotate_half(x) * sin``: ``max|x| * (P * (ln(base) + 11) + 8) * 2**-24`` absolute for positions below
``P``. The attention factors are Python floats on both sides (``math.sqrt``, ``math.log``), equal to a few ulps.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from posenc import RopeScaling, rotary_attention_factor, rotary_frequencies, rotate
from posenc.nn import RotaryEmbedding

EPS32 = 2.0**-24  # float32 unit roundoff


pytestmark = pytest.mark.usefixtures("quiet_transformers")


def frequency_rtol(base):
    """Relative tolerance of a float32 inverse frequency of transformers (see the module docstring)."""
    return (math.log(base) + 10) * EPS32


def rotation_atol(x, n_positions, base):
    """Absolute tolerance of a float32 rotation at positions below ``n_positions`` (see the module docstring)."""
    return float(np.abs(x).max()) * (n_positions * (math.log(base) + 11) + 8) * EPS32


def random_tensor(seed, shape):
    return torch.from_numpy(np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape).astype(np.float32))


def init_function(config, rope_type, seq_len=None, layer_type=None):
    """(inv_freq as float64 NumPy, attention factor) from transformers' ROPE_INIT_FUNCTIONS[rope_type]."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kwargs = {} if layer_type is None else {"layer_type": layer_type}
    inv_freq, attention = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len, **kwargs)
    return inv_freq.double().numpy(), attention


# --- Partial rotary -------------------------------------------------------------------------------------


def test_partial_rotary_matches_gpt_neox():
    """GPT-NeoX/Pythia rotary_pct 0.25: the first int(64 * 0.25) = 16 features in halves, the rest unchanged."""
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding, apply_rotary_pos_emb

    config = GPTNeoXConfig(hidden_size=128, num_attention_heads=2, intermediate_size=32, rotary_pct=0.25)
    scaling = RopeScaling.from_dict(config.rope_parameters)
    assert scaling.partial_rotary_factor == 0.25
    n_positions = 48
    q, k = random_tensor(0, (1, 2, n_positions, 64)), random_tensor(1, (1, 2, n_positions, 64))
    position_ids = torch.arange(n_positions)[None]
    cos, sin = GPTNeoXRotaryEmbedding(config)(q, position_ids)
    assert cos.shape[-1] == 16
    q_theirs, k_theirs = apply_rotary_pos_emb(q, k, cos, sin)
    atol = rotation_atol(q.numpy(), n_positions, 10000.0)
    for x, theirs in ((q, q_theirs), (k, k_theirs)):
        ours = rotate(x.double().numpy(), n_positions, layout="halves", scaling=config.rope_parameters)
        np.testing.assert_allclose(ours, theirs.double().numpy(), rtol=0, atol=atol)
        np.testing.assert_array_equal(ours[..., 16:], x.double().numpy()[..., 16:])
        np.testing.assert_array_equal(
            ours, rotate(x.double().numpy(), n_positions, layout="halves", rotary_dim=16, scaling=scaling)
        )


def test_partial_rotary_matches_phi():
    """Phi-2's partial_rotary_factor 0.4 of a 32-feature head: int(12.8) = 12 features rotated."""
    from transformers import PhiConfig
    from transformers.models.phi.modeling_phi import PhiRotaryEmbedding, apply_rotary_pos_emb

    config = PhiConfig(hidden_size=64, num_attention_heads=2, intermediate_size=32, partial_rotary_factor=0.4)
    n_positions = 40
    q, k = random_tensor(2, (2, 2, n_positions, 32)), random_tensor(3, (2, 2, n_positions, 32))
    cos, sin = PhiRotaryEmbedding(config)(q, torch.arange(n_positions)[None])
    rotary_ndims = int(32 * config.rope_parameters["partial_rotary_factor"])  # PhiAttention's
    assert cos.shape[-1] == rotary_ndims == 12
    q_rot, k_rot = apply_rotary_pos_emb(q[..., :rotary_ndims], k[..., :rotary_ndims], cos, sin)
    q_theirs, k_theirs = (torch.cat((rot, x[..., rotary_ndims:]), dim=-1) for rot, x in ((q_rot, q), (k_rot, k)))
    atol = rotation_atol(q.numpy(), n_positions, 10000.0)
    for x, theirs in ((q, q_theirs), (k, k_theirs)):
        ours = rotate(x.double().numpy(), n_positions, layout="halves", scaling=config.rope_parameters)
        np.testing.assert_allclose(ours, theirs.double().numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(
        rotary_frequencies(32, scaling=config.rope_parameters),
        PhiRotaryEmbedding.compute_default_rope_parameters(config)[0].double().numpy(),
        rtol=frequency_rtol(10000.0),
    )


def test_partial_rotary_matches_gpt_j():
    """GPT-J's rotary_dim: the first rotary_dim features in the interleaved layout (rotate_every_two)."""
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb, create_sinusoidal_positions

    rotary_dim, n_positions = 8, 40
    x = random_tensor(4, (2, n_positions, 3, 24))  # GPT-J's (batch, seq, heads, head_dim)
    sincos = create_sinusoidal_positions(n_positions, rotary_dim)[torch.arange(n_positions)][None]
    sin, cos = torch.split(sincos, rotary_dim // 2, dim=-1)
    theirs = torch.cat([apply_rotary_pos_emb(x[..., :rotary_dim], sin, cos), x[..., rotary_dim:]], dim=-1)
    ours = rotate(x.double().numpy().swapaxes(1, 2), n_positions, rotary_dim=rotary_dim).swapaxes(1, 2)
    np.testing.assert_allclose(ours, theirs.double().numpy(), rtol=0, atol=rotation_atol(x.numpy(), n_positions, 1e4))


def test_partial_rotary_keeps_scores_relative_on_the_rotated_features():
    """Scores of the rotated part depend on the offset only; the passed-through part does not move at all."""
    q, k = random_tensor(5, (1, 10)).double().numpy(), random_tensor(6, (1, 10)).double().numpy()
    for layout in ("interleaved", "halves"):
        scores = [
            float(rotate(q, [m + 3.0], layout=layout, rotary_dim=6)[0] @ rotate(k, [m], layout=layout, rotary_dim=6)[0])
            for m in (0.0, 17.0, 1000.0)
        ]
        np.testing.assert_allclose(scores, scores[0], rtol=1e-12)
        np.testing.assert_array_equal(rotate(q, [5.0], layout=layout, rotary_dim=6)[:, 6:], q[:, 6:])


# --- Rope types as shipped ------------------------------------------------------------------------------


def phi3_config(**extra):
    """A tiny Phi-3.5-like config: longrope lists as config.json carries them, the trained length outside."""
    from transformers import Phi3Config

    head_dim = 16 if "partial_rotary_factor" not in extra else 32
    pairs = int(head_dim * extra.get("partial_rotary_factor", 1.0)) // 2
    rope_scaling = {
        "type": "longrope",
        "short_factor": [1.0 + 0.1 * i for i in range(pairs)],
        "long_factor": [1.0 + 0.7 * i for i in range(pairs)],
    }
    return Phi3Config(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=1024,
        original_max_position_embeddings=64,
        rope_scaling=rope_scaling,
        **extra,
    )


@pytest.mark.parametrize("partial", [1.0, 0.75])  # Phi-3.5-mini rotates all; Phi-4-mini 0.75 of each head
def test_longrope_matches_transformers(partial):
    """Short list up to the trained length, long beyond; attention factor sqrt(1 + ln(1024/64) / ln 64)."""
    config = phi3_config() if partial == 1.0 else phi3_config(partial_rotary_factor=partial)
    head_dim = config.hidden_size // config.num_attention_heads
    scaling = RopeScaling.from_dict(
        config.rope_parameters,
        max_position_embeddings=config.max_position_embeddings,
        original_max_position_embeddings=config.original_max_position_embeddings,
    )
    assert scaling.factor == 16.0 and scaling.original_max_position_embeddings == 64
    base = config.rope_parameters["rope_theta"]
    for seq_len in (None, 1, 64, 65, 1000):
        theirs, attention = init_function(config, "longrope", seq_len=seq_len)
        ours = rotary_frequencies(head_dim, scaling=scaling, seq_len=seq_len)
        np.testing.assert_allclose(ours, theirs, rtol=frequency_rtol(base))
        assert rotary_attention_factor(scaling) == pytest.approx(attention, rel=4 * 2.0**-53)
    assert rotary_attention_factor(scaling) == pytest.approx(math.sqrt(1 + math.log(16) / math.log(64)), rel=1e-15)


def test_longrope_rotation_switches_lists_with_the_sequence_length():
    """rotate takes the length from its positions, as transformers' longrope_frequency_update does."""
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding, apply_rotary_pos_emb

    config = phi3_config()
    scaling = RopeScaling.from_dict(config.rope_parameters, max_position_embeddings=1024)  # the dict carries 64
    rope = Phi3RotaryEmbedding(config)
    for n_positions in (64, 65):  # the short list, then the long one
        q = random_tensor(n_positions, (1, 2, n_positions, 16))
        cos, sin = rope(q, torch.arange(n_positions)[None])
        theirs, _ = apply_rotary_pos_emb(q, q, cos, sin)
        ours = rotate(q.double().numpy(), n_positions, layout="halves", scaling=scaling)
        np.testing.assert_allclose(
            ours, theirs.double().numpy(), rtol=0, atol=rotation_atol(q.numpy(), n_positions, 1e4)
        )
        module_q, _ = RotaryEmbedding(16, layout="halves", scaling=scaling).rotate_pair(q, q)
        np.testing.assert_allclose(
            module_q.double().numpy(), theirs.double().numpy(), rtol=0, atol=rotation_atol(q.numpy(), n_positions, 1e4)
        )


def test_the_module_reproduces_transformers_dynamic_longest_length_seen():
    """dynamic_length="longest": transformers' dynamic_rope_update, call after call. Trained length 16: a call of
    40 positions raises the base, one of 20 keeps 40's frequencies, one of 8 resets them, one of 30 raises again.
    With dynamic_length="call" the call of 20 takes its own frequencies, which the comparison sees."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    parameters = {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}
    config = LlamaConfig(
        hidden_size=32, num_attention_heads=2, head_dim=16, max_position_embeddings=16, rope_parameters=parameters
    )
    theirs = LlamaRotaryEmbedding(config)
    scaling = RopeScaling.from_dict(parameters, max_position_embeddings=16)
    longest = RotaryEmbedding(16, layout="halves", scaling=scaling, dynamic_length="longest")
    per_call = RotaryEmbedding(16, layout="halves", scaling=scaling)
    for n_positions in (10, 40, 20, 8, 30):
        q = random_tensor(n_positions, (1, 2, n_positions, 16))
        cos, sin = theirs(q, torch.arange(n_positions)[None])
        expected, _ = apply_rotary_pos_emb(q, q, cos, sin)
        atol = rotation_atol(q.numpy(), n_positions, 1e4 * 4.0**2)
        torch.testing.assert_close(longest(q), expected, rtol=0, atol=atol)
        if n_positions == 20:
            assert float((per_call(q) - expected).abs().max()) > 100 * atol


def test_longrope_v5_dict_with_factor_and_attention_factor():
    """The v5 form carries factor and attention_factor itself: no config lengths needed."""
    from transformers import LlamaConfig

    parameters = {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.25, 1.5, 2.0],
        "long_factor": [3.0, 4.0, 6.0, 9.0],
        "original_max_position_embeddings": 32,
        "factor": 8.0,
        "attention_factor": 1.5,
        "rope_theta": 5000.0,
    }
    config = LlamaConfig(
        hidden_size=16, num_attention_heads=2, head_dim=8, max_position_embeddings=256, rope_parameters=dict(parameters)
    )
    for seq_len in (None, 33):
        theirs, attention = init_function(config, "longrope", seq_len=seq_len)
        np.testing.assert_allclose(
            rotary_frequencies(8, scaling=parameters, seq_len=seq_len), theirs, rtol=frequency_rtol(5000.0)
        )
        assert rotary_attention_factor(parameters) == attention == 1.5


@pytest.mark.parametrize("factor", [1.0, 2.0, 8.0])
def test_dynamic_without_original_length_matches_transformers(factor):
    """config.json's dynamic dict has no trained length: transformers takes config.max_position_embeddings."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        hidden_size=64,
        num_attention_heads=2,
        head_dim=32,
        max_position_embeddings=128,
        rope_parameters={"rope_type": "dynamic", "factor": factor, "rope_theta": 500000.0},
    )
    scaling = RopeScaling.from_dict(config.rope_parameters, max_position_embeddings=config.max_position_embeddings)
    assert scaling.original_max_position_embeddings == 128
    for seq_len in (None, 16, 128, 129, 4096):
        theirs, attention = init_function(config, "dynamic", seq_len=seq_len)
        dynamic_base = 500000.0 * max(1.0, factor * max(seq_len or 0, 128) / 128 - (factor - 1)) ** (32 / 30)
        ours = rotary_frequencies(32, scaling=scaling, seq_len=seq_len)
        np.testing.assert_allclose(ours, theirs, rtol=frequency_rtol(dynamic_base))
        assert attention == rotary_attention_factor(scaling) == 1.0


def test_transformers_dynamic_ignores_an_original_length_in_the_dict_and_posenc_refuses_a_different_one():
    """Chapter 7: a dynamic dict's ``original_max_position_embeddings`` changes nothing in transformers, which
    reads ``config.max_position_embeddings``; posenc refuses a dict whose value disagrees with it."""
    from transformers import LlamaConfig

    def config(**dynamic):
        parameters = {"rope_type": "dynamic", "factor": 8.0, "rope_theta": 10000.0, **dynamic}
        return LlamaConfig(
            hidden_size=64, num_attention_heads=2, head_dim=32, max_position_embeddings=128, rope_parameters=parameters
        )

    without, _ = init_function(config(), "dynamic", seq_len=1024)
    for trained in (32, 128, 512):
        with_key, _ = init_function(config(original_max_position_embeddings=trained), "dynamic", seq_len=1024)
        assert np.array_equal(with_key, without), trained
    # the length that counts is 128: the frequencies of L = 32 are another set
    ours = rotary_frequencies(
        32,
        scaling=RopeScaling.from_dict({"rope_type": "dynamic", "factor": 8.0}, max_position_embeddings=128),
        seq_len=1024,
    )
    np.testing.assert_allclose(ours, without, rtol=frequency_rtol(10000.0 * 57 ** (32 / 30)))
    short = rotary_frequencies(
        32, scaling=RopeScaling("dynamic", 8.0, original_max_position_embeddings=32), seq_len=1024
    )
    assert np.abs(short / ours - 1).max() > 0.5
    with pytest.raises(ValueError, match="transformers' dynamic scaling uses max_position_embeddings"):
        RopeScaling.from_dict(config(original_max_position_embeddings=32).rope_parameters, max_position_embeddings=128)
    agreeing = RopeScaling.from_dict(
        config(original_max_position_embeddings=128).rope_parameters, max_position_embeddings=128
    )
    assert agreeing.original_max_position_embeddings == 128


def test_llama3_with_equal_factors_matches_transformers():
    """Llama 4's llama3 dict (low_freq_factor == high_freq_factor == 1): a step, as transformers computes it."""
    from transformers import LlamaConfig

    parameters = {
        "rope_type": "llama3",
        "factor": 16.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 64,
        "rope_theta": 500000.0,
    }
    config = LlamaConfig(
        hidden_size=128, num_attention_heads=2, head_dim=64, max_position_embeddings=1024, rope_parameters=parameters
    )
    theirs, attention = init_function(config, "llama3")
    assert np.all(np.isfinite(theirs))  # no wavelength exactly at the step in this config
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero on the way
        ours = rotary_frequencies(64, scaling=config.rope_parameters)
    np.testing.assert_allclose(ours, theirs, rtol=frequency_rtol(500000.0))
    unscaled = rotary_frequencies(64, base=500000.0)
    long = 2 * np.pi / unscaled > 64
    assert long.any() and (~long).any()
    np.testing.assert_array_equal(ours, np.where(long, unscaled / 16.0, unscaled))
    assert attention == rotary_attention_factor(parameters) == 1.0


@pytest.mark.parametrize("rope_type", ["default", "linear", "yarn", "llama3"])
def test_rope_theta_in_the_dict_is_the_base(rope_type):
    """No base= given: the dict's rope_theta, as transformers' configs carry it."""
    from transformers import LlamaConfig

    parameters = {"rope_type": rope_type, "rope_theta": 250000.0}
    if rope_type != "default":
        parameters["factor"] = 4.0
    if rope_type in ("yarn", "llama3"):
        parameters["original_max_position_embeddings"] = 64
    if rope_type == "llama3":
        parameters.update(low_freq_factor=1.0, high_freq_factor=4.0)
    config = LlamaConfig(
        hidden_size=64,
        num_attention_heads=2,
        head_dim=32,
        max_position_embeddings=256,
        rope_parameters=dict(parameters),
    )
    if rope_type == "default":
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        theirs = LlamaRotaryEmbedding.compute_default_rope_parameters(config)[0].double().numpy()
    else:
        theirs, _ = init_function(config, rope_type)
    np.testing.assert_allclose(rotary_frequencies(32, scaling=parameters), theirs, rtol=frequency_rtol(250000.0))
    x = random_tensor(7, (3, 32)).double().numpy()
    np.testing.assert_array_equal(rotate(x, 3, scaling=parameters), rotate(x, 3, base=250000.0, scaling=parameters))


def test_nested_per_layer_dict_matches_gemma3():
    """Gemma 3's rope_parameters nested by layer type: each layer type's dict, parsed by layer_type."""
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    nested = {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    }
    config = Gemma3TextConfig(
        hidden_size=32,
        num_attention_heads=2,
        head_dim=16,
        num_hidden_layers=2,
        intermediate_size=16,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={key: dict(value) for key, value in nested.items()},
    )
    rope = Gemma3RotaryEmbedding(config)
    for layer_type, parameters in nested.items():
        scaling = RopeScaling.from_dict(config.rope_parameters, layer_type=layer_type)
        assert scaling == RopeScaling.from_dict(parameters)
        theirs = getattr(rope, f"{layer_type}_inv_freq").double().numpy()
        np.testing.assert_allclose(
            rotary_frequencies(16, scaling=scaling), theirs, rtol=frequency_rtol(parameters["rope_theta"])
        )
        assert rotary_attention_factor(scaling) == getattr(rope, f"{layer_type}_attention_scaling")


# --- What is shown, and what callers that do not handle the new fields refuse ----------------------------


def test_the_repr_shows_the_new_fields_when_they_matter():
    assert "partial_rotary_factor" not in repr(RopeScaling())
    assert "partial_rotary_factor=0.25" in repr(RopeScaling(partial_rotary_factor=0.25))
    longrope = RopeScaling(
        "longrope", short_factor=[1.0, 2.0], long_factor=[3.0, 4.0], original_max_position_embeddings=8
    )
    for text in ("short_factor=(1.0, 2.0)", "long_factor=(3.0, 4.0)", "original_max_position_embeddings=8"):
        assert text in repr(longrope)
    dynamic = RopeScaling.from_dict({"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=32)
    assert "original_max_position_embeddings=32" in repr(dynamic)


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_the_module_rotates_part_of_a_head_and_longrope_as_rotate_does(layout):
    """posenc.nn.RotaryEmbedding against the float64 reference: partial rotary from the factor and from rotary_dim,
    and longrope on both sides of the trained length (8: 6 positions take the short list, 12 the long one).
    float64 on both sides, the same float64 frequencies: a few float64 roundings of values of size 1."""
    longrope = {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 4.0, 6.0, 8.0]}
    longrope.update(original_max_position_embeddings=8, factor=2.0, partial_rotary_factor=0.5)
    cases = [({"partial_rotary_factor": 0.5}, {}), (None, {"rotary_dim": 6}), (longrope, {})]
    x = random_tensor(7, (2, 3, 12, 16)).double()
    for scaling, kwargs in cases:
        rope = RotaryEmbedding(16, layout=layout, scaling=scaling, **kwargs)
        for seq, offset in ((6, 0), (6, 2), (12, 0)):
            part = x[..., :seq, :]
            expected = rotate(part.numpy(), np.arange(offset, offset + seq), layout=layout, scaling=scaling, **kwargs)
            got = rope(part, offset=offset).numpy()
            np.testing.assert_allclose(got, expected, rtol=0, atol=16 * 2.0**-53)
            np.testing.assert_array_equal(got[..., rope.rotary_dim :], part.numpy()[..., rope.rotary_dim :])
