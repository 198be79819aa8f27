"""Fuzz the library's public callables: only a TypeError or ValueError naming a parameter escapes.

The callables are every function and class in the ``__all__`` of ``posenc``, ``posenc.nn`` and ``posenc.testing``
(test_bad_input.public_objects), plus the ``forward`` of each module class. For each one, starting from a valid
call (its ``Spec``), the fuzz replaces arguments with wrong or wild values: ints (bools, negatives, huge),
floats (NaN, infinities, huge), strings, None, odd objects, NumPy arrays and torch tensors of odd shapes and
dtypes. Whatever it passes,

* the call either succeeds, and then its output has the documented shape and is finite (given finite
  input), or it raises ``TypeError``/``ValueError`` whose message names a parameter of the callable (the
  replaced one, when only one was replaced);
* no other exception escapes, and no call runs for more than a few seconds (an oversized request that is
  accepted instead of refused would).

One test item per callable sweeps each of its parameters alone over ``SWEEP``, and reports every failure
with the callable, the parameter and the value; one hypothesis test draws wild values for several parameters
at once, over all callables (derandomized by tests/conftest.py, so a failure reproduces). Which exception each
distinct check raises is pinned by tests/test_bad_input.py's table.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import signal
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bad_input import names_parameter, public_objects, takes_no_input

import posenc
import posenc.nn
from posenc import (
    CheckWarning,
    ConfigCheck,
    ContextCheck,
    KindCheck,
    LayerRotary,
    QueryScaling,
    RopeScaling,
    RotaryPlan,
    alibi_bias,
    alibi_slopes,
    axial_frequencies,
    base_condition_error,
    base_condition_holds,
    base_condition_sum,
    check_config,
    cope_logits,
    cope_positions,
    forgetting_bias,
    frequencies,
    layout_permutation,
    mrope_frequencies,
    path_logits,
    rotary_attention_factor,
    rotary_frequencies,
    rotary_weight_permutation,
    rotate,
    rotate_multiaxis,
    shaw_relative_indices,
    sink_softmax,
    sinusoidal,
    stick_breaking_weights,
    t5_relative_bucket,
    translation_matrix,
)
from posenc.nn import (
    ALiBiBias,
    AttentionSink,
    CoPE,
    ForgettingGate,
    LearnedPositionalEmbedding,
    MultiAxisRotaryEmbedding,
    PaTHGate,
    RotaryEmbedding,
    ShawRelativeAttention,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    causal_mask_mod,
    forgetting_score_mod,
    rotary_embedding,
    stick_breaking_attention,
)
from posenc.nn import forgetting_bias as torch_forgetting_bias
from posenc.nn import path_logits as torch_path_logits
from posenc.nn import stick_breaking_weights as torch_stick_breaking_weights
from posenc.testing import (
    RotaryCase,
    assert_alibi_offset_matches_slice,
    assert_alibi_slopes_match_reference,
    assert_layouts_agree_after_permutation,
    assert_mrope_axes_match,
    assert_rerotated_keys_accurate,
    assert_rotary_angles_accurate,
    assert_rotary_calls_independent,
    assert_rotary_conforms,
    assert_rotary_matches_config,
    assert_rotary_offset_matches_slice,
    assert_rotary_scores_depend_on_offset_only,
    assert_rotary_uses_sequence_axis,
    assert_sinusoidal_matches_reference,
    assert_sinusoidal_odd_width_handled,
    assert_t5_buckets_exact,
    assert_t5_buckets_in_range,
    assert_yarn_attention_factor,
    rotary_cases,
    rotary_positions,
    t5_float32_boundaries,
)

pytestmark = pytest.mark.argument_check

SECONDS_PER_CALL = 30


# --- Wild values ----------------------------------------------------------------------------------------


def _array(shape, dtype, fill):
    if dtype is object:
        return np.full(shape, "a", dtype=object)
    values = {"zeros": 0.0, "ones": 1.0, "nan": math.nan, "inf": math.inf}[fill]
    if not np.issubdtype(dtype, np.floating) and not np.issubdtype(dtype, np.complexfloating):
        values = 0 if fill in ("nan", "inf") else values
    return np.full(shape, values).astype(dtype)


def _tensor(shape, dtype, fill):
    if fill in ("nan", "inf") and not dtype.is_floating_point:
        fill = "ones"
    return torch.full(shape, {"zeros": 0.0, "ones": 1.0, "nan": math.nan, "inf": math.inf}[fill]).to(dtype)


FILLS = st.sampled_from(["zeros", "ones", "nan", "inf"])
ARRAYS = st.builds(
    _array,
    st.sampled_from([(0,), (3,), (4,), (2, 3), (3, 3), (4, 3), (1, 8), (2, 2, 2), (0, 3)]),
    st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.bool_, np.complex128, object]),
    FILLS,
)
TENSORS = st.builds(
    _tensor,
    st.sampled_from([(2, 3, 8), (1, 5, 8), (3, 8), (1, 0, 8), (2, 3, 6), (4, 3), (2, 5), (4,), (0, 3), (2, 3, 4)]),
    st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64, torch.bool]),
    FILLS,
)
WILD = st.one_of(
    st.sampled_from([0, 1, 2, 3, 4, 5, 8, 16, -1, -8, 2**31, 2**40, 2**63, -(2**63), 10**30]),
    st.booleans(),
    st.sampled_from([0.0, 0.5, 1.0, 2.0, -3.5, 1e4, 1e300, -1e300, math.nan, math.inf, -math.inf]),
    st.sampled_from(["", "interleaved", "halves", "cos_first", "add", "concat_wide", "8", "nan"]),
    st.none(),
    st.sampled_from([np.int64(4), np.float32("nan"), np.bool_(True), 1j, [1, 2], [[1.0, 2.0]], [0, 2, 1], {}, ()]),
    ARRAYS,
    TENSORS,
)


# --- What each callable promises ------------------------------------------------------------------------


def _finite_array(value, shape):
    value = np.asarray(value)
    assert value.shape == shape, f"shape {value.shape}, documented {shape}"
    assert np.all(np.isfinite(value)), "non-finite output"


@dataclass
class Spec:
    """How to call one public callable, with which valid arguments, and what a successful result must be."""

    target: Any  # the public object: its signature names the parameters
    call: Callable[[dict], Any]
    valid: Callable[[], dict]
    check: Callable[[Any, dict], None]


def _check_module_forward(module, d_in):
    x = torch.zeros(2, 1, d_in)  # one position: every valid max_len covers it
    out = module(x)
    assert out.shape == x.shape and torch.isfinite(out).all()


def _check_rotary_module(module):
    """Rotate a tensor with as many axes as the module's seq_dim needs, of length 2 along each but the last."""
    seq_dim = module.seq_dim
    ndim = max(3, seq_dim + 2 if seq_dim >= 0 else -seq_dim)
    x = torch.ones((2,) * (ndim - 1) + (module.head_dim,))
    out = module(x)
    assert out.shape == x.shape and torch.isfinite(out).all()


def _check_forward_result(out, kwargs, expected_shape=None):
    x = kwargs["x"]
    assert out.shape == (expected_shape or x.shape), f"shape {tuple(out.shape)}"
    if torch.isfinite(x).all():
        assert torch.isfinite(out).all(), "non-finite output for finite input"


def _check_rotated(out, kwargs):
    x = np.asarray(kwargs["x"], dtype=np.float64)
    assert out.shape == x.shape, f"shape {out.shape}"
    if np.all(np.isfinite(x)):
        assert np.all(np.isfinite(out)), "non-finite output for finite input"


def _check_rotated_multiaxis(out, kwargs):
    """The rotation has x's last axis and is finite for finite input (its leading axes broadcast with positions')."""
    x = np.asarray(kwargs["x"], dtype=np.float64)
    assert out.shape[-1] == x.shape[-1] and out.ndim >= 2, f"shape {out.shape}"
    assert np.all(np.isfinite(out)), "non-finite output"


def _lengths(kwargs):
    q_len = int(kwargs["q_len"])
    return q_len, q_len if kwargs["k_len"] is None else int(kwargs["k_len"])


def _check_bias(out, kwargs, n_heads, causal=True):
    """A (n_heads, q_len, k_len) bias: no NaN, -inf only for keys after their query (causal), else finite."""
    q_len, k_len = _lengths(kwargs)
    out = np.asarray(out.detach() if isinstance(out, torch.Tensor) else out, dtype=np.float64)
    assert out.shape == (n_heads, q_len, k_len), f"shape {out.shape}"
    assert not np.isnan(out).any(), "NaN in a bias"
    offset = kwargs.get("offset")
    offset = k_len - q_len if offset is None else int(offset)
    future = np.arange(k_len)[None, :] > (np.arange(q_len) + offset)[:, None]
    if causal:
        assert np.all(np.isneginf(out[:, future])) and np.all(np.isfinite(out[:, ~future]))
    else:
        assert np.all(np.isfinite(out))


def _check_score_mod(mod, dense, q_len=2, k_len=5):
    """A score_mod called on broadcast (head, query, key) indices is the module's dense bias, offset included."""
    heads = torch.arange(dense.shape[0])[:, None, None]
    queries, keys = torch.arange(q_len)[:, None], torch.arange(k_len)
    assert torch.equal(mod(torch.zeros(()), torch.tensor(0), heads, queries, keys), dense), "score_mod != dense bias"


def _check_mask_mod(mod, kwargs):
    """True where the key is at or before the query, query 0 at ``offset``."""
    offset = int(kwargs["offset"])
    queries, keys = torch.arange(2)[:, None], torch.arange(5)[None, :]
    assert torch.equal(mod(0, 0, queries, keys), keys <= queries + offset), "mask_mod"


def _seeded_t5():
    """The same small T5RelativeBias at every call, to compare a score_mod with its dense bias."""
    torch.manual_seed(0)
    return T5RelativeBias(4, num_buckets=8, max_distance=16)


def _check_buckets(out, kwargs):
    assert out.dtype == np.int64 and out.shape == np.shape(np.asarray(kwargs["relative_position"]))
    assert np.all((out >= 0) & (out < kwargs["num_buckets"]))


# The property checks of posenc.testing are valid with posenc's own implementation, and must then pass. The
# implementation argument holds a placeholder that each call replaces by the posenc implementation that
# matches the other arguments (its layout, base, head count), unless the fuzz drew a wild value for it.


def _reference_placeholder(*args, **kwargs):
    raise AssertionError("placeholder: replaced by a posenc implementation before the call")


def _passed(result, kwargs):
    assert result is None, f"a check returns None when the property holds, got {result!r}"


def _rotate_at(x, offset=0):
    return posenc.rotate(x, offset + np.arange(x.shape[-2]))


def _with(kwargs, name, implementation):
    """``kwargs`` with the placeholder under ``name`` replaced by ``implementation``."""
    if kwargs[name] is _reference_placeholder:
        return {**kwargs, name: implementation}
    return kwargs


def _raw_cache(a):
    """A cache that stores unrotated keys and rotates them to their places when read, with the check's RoPE."""

    def make():
        kept = []

        def push(key, position):
            kept.append(key)
            if len(kept) > a["n_sink"] + a["window"]:
                del kept[a["n_sink"]]
            return posenc.rotate(np.array(kept), len(kept), base=a["base"], layout=a["layout"])

        return push

    return make


def _sinusoid_check(a):
    table = lambda n, d: sinusoidal(n, d, base=a["base"], layout=a["layout"])  # noqa: E731
    return assert_sinusoidal_matches_reference(**_with(a, "table_fn", table))


def _rotary_check(check, a):
    rotate = lambda x, p: posenc.rotate(x, p, base=a["base"], layout=a["layout"])  # noqa: E731
    return check(**_with(a, "rotate_fn", rotate))


def _sequence_axis_check(a):
    def rotate(x):  # batch-first: the sequence is axis 1
        return posenc.rotate(x.swapaxes(1, 2), x.shape[1], base=a["base"], layout=a["layout"]).swapaxes(1, 2)

    return assert_rotary_uses_sequence_axis(**_with(a, "fn", rotate))


def _layout_check(a):
    def convert(w):
        return w[posenc.rotary_weight_permutation(a["source"], a["target"], a["head_dim"], n_heads=a["n_heads"])]

    return assert_layouts_agree_after_permutation(**_with(a, "convert_fn", convert))


def _bucket_check(a):
    return assert_t5_buckets_in_range(**_with(a, "bucket_fn", posenc.t5_relative_bucket))


def _exact_bucket_check(a):
    return assert_t5_buckets_exact(**_with(a, "bucket_fn", posenc.t5_relative_bucket))


def _condition_or_undecided(a):
    """base_condition_holds, with its documented ArithmeticError (a sum within its error of zero) as a result."""
    try:
        return base_condition_holds(a["frequencies"], a["length"], head_dim=a["head_dim"])
    except ArithmeticError:
        return "undecided"


def _check_boundaries(out, a):
    assert isinstance(out, np.ndarray) and out.dtype == np.bool_ and out.shape == np.shape(a["relative_position"])


_TINY_LLAMA = {
    "model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1,
    "max_position_embeddings": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}  # fmt: skip


def _conforming_operator(a):
    """posenc's float64 rotation of assert_rotary_conforms' config and layout, as an operator on x (..., seq, dim)."""

    def rotate(x, positions):
        kind = RotaryPlan.from_config(a["config"], model_type=a["model_type"]).kinds[0]
        kind = kind if a["layout"] is None else dataclasses.replace(kind, layout=a["layout"])
        return kind.rotate(np.asarray(x, dtype=np.float64), np.asarray(positions, dtype=np.float64))

    return rotate


SPECS = {
    "posenc.frequencies": Spec(
        frequencies,
        lambda a: frequencies(a["d_model"], base=a["base"]),
        lambda: dict(d_model=8, base=10000.0),
        lambda out, a: _finite_array(out, (a["d_model"] // 2,)),
    ),
    "posenc.sinusoidal": Spec(
        sinusoidal,
        lambda a: sinusoidal(
            a["positions"],
            a["d_model"],
            base=a["base"],
            layout=a["layout"],
            dtype=a["dtype"],
            start=a["start"],
            step=a["step"],
            n_threads=a["n_threads"],
        ),
        lambda: dict(
            positions=5,
            d_model=8,
            base=10000.0,
            layout="interleaved",
            dtype=np.float32,
            start=0.0,
            step=1.0,
            n_threads=None,
        ),
        lambda out, a: _finite_array(
            out,
            (a["positions"] if isinstance(a["positions"], (int, np.integer)) else len(a["positions"]), a["d_model"]),
        ),
    ),
    "posenc.translation_matrix": Spec(
        translation_matrix,
        lambda a: translation_matrix(a["offset"], a["d_model"], base=a["base"], layout=a["layout"]),
        lambda: dict(offset=1.5, d_model=8, base=10000.0, layout="halves"),
        lambda out, a: _finite_array(out, (a["d_model"], a["d_model"])),
    ),
    "posenc.layout_permutation": Spec(
        layout_permutation,
        lambda a: layout_permutation(a["source"], a["target"], a["d_model"]),
        lambda: dict(source="interleaved", target="halves", d_model=8),
        lambda out, a: np.testing.assert_array_equal(np.sort(out), np.arange(a["d_model"])),
    ),
    "posenc.rotary_frequencies": Spec(
        rotary_frequencies,
        lambda a: rotary_frequencies(a["head_dim"], base=a["base"], scaling=a["scaling"], seq_len=a["seq_len"]),
        lambda: dict(
            head_dim=8,
            base=10000.0,
            scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4},
            seq_len=16,
        ),
        lambda out, a: _finite_array(out, (a["head_dim"] // 2,)),
    ),
    "posenc.rotary_attention_factor": Spec(
        rotary_attention_factor,
        lambda a: rotary_attention_factor(a["scaling"]),
        lambda: dict(scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
        lambda out, a: isinstance(out, float) and math.isfinite(out) and out > 0 or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.rotate": Spec(
        rotate,
        lambda a: rotate(
            a["x"], a["positions"], base=a["base"], layout=a["layout"], scaling=a["scaling"], rotary_dim=a["rotary_dim"]
        ),
        lambda: dict(
            x=np.ones((2, 3, 8)),
            positions=[0.0, 1.5, 3.0],
            base=10000.0,
            layout="halves",
            scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
            rotary_dim=4,
        ),
        _check_rotated,
    ),
    "posenc.RopeScaling": Spec(
        RopeScaling,
        lambda a: RopeScaling(**a),
        lambda: dict(
            rope_type="yarn",
            factor=4.0,
            original_max_position_embeddings=16,
            low_freq_factor=None,  # llama3's: must stay None for yarn
            high_freq_factor=None,
            beta_fast=32.0,
            beta_slow=1.0,
            truncate=True,
            mscale=1.0,
            mscale_all_dim=1.0,
            attention_factor=None,
            rope_theta=10000.0,
            short_factor=None,  # longrope's: must stay None for yarn
            long_factor=None,
            partial_rotary_factor=0.5,
        ),
        lambda out, a: (
            (isinstance(out, RopeScaling) and math.isfinite(out.attention_scaling) and out.attention_scaling > 0)
            or pytest.fail(f"returned {out!r}")
        ),
    ),
    "posenc.rotary_weight_permutation": Spec(
        rotary_weight_permutation,
        lambda a: rotary_weight_permutation(a["source"], a["target"], a["head_dim"], n_heads=a["n_heads"]),
        lambda: dict(source="interleaved", target="halves", head_dim=8, n_heads=2),
        lambda out, a: np.testing.assert_array_equal(np.sort(out), np.arange(a["n_heads"] * a["head_dim"])),
    ),
    "posenc.nn.RotaryEmbedding": Spec(
        RotaryEmbedding,
        lambda a: RotaryEmbedding(
            a["head_dim"],
            base=a["base"],
            layout=a["layout"],
            scaling=a["scaling"],
            seq_dim=a["seq_dim"],
            rotary_dim=a["rotary_dim"],
            dynamic_length=a["dynamic_length"],
        ),
        lambda: dict(
            head_dim=8,
            base=10000.0,
            layout="interleaved",
            seq_dim=1,
            rotary_dim=4,
            dynamic_length="longest",
            scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "original_max_position_embeddings": 16,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            },
        ),
        lambda module, a: _check_rotary_module(module),
    ),
    "posenc.nn.RotaryEmbedding.forward": Spec(
        RotaryEmbedding.forward,
        lambda a: RotaryEmbedding(8, layout="halves")(a["x"], offset=a["offset"], positions=a["positions"]),
        lambda: dict(x=torch.zeros(2, 3, 8), offset=0, positions=torch.tensor([[0.0, 2.5, 7.0], [3.0, 4.0, 5.0]])),
        _check_forward_result,
    ),
    "posenc.nn.RotaryEmbedding.rotate_pair": Spec(
        RotaryEmbedding.rotate_pair,
        lambda a: RotaryEmbedding(8, layout="halves", rotary_dim=4).rotate_pair(
            a["q"], a["k"], offset=a["offset"], positions=a["positions"]
        ),
        lambda: dict(q=torch.zeros(2, 2, 3, 8), k=torch.zeros(2, 1, 3, 8), offset=0, positions=torch.tensor([1, 2, 3])),
        lambda out, a: [_check_forward_result(rotated, {"x": a[name]}) for rotated, name in zip(out, "qk")],
    ),
    "posenc.nn.SinusoidalPositionalEncoding": Spec(
        SinusoidalPositionalEncoding,
        lambda a: SinusoidalPositionalEncoding(
            a["d_model"], max_len=a["max_len"], base=a["base"], layout=a["layout"], dropout=a["dropout"]
        ),
        lambda: dict(d_model=8, max_len=4, base=10000.0, layout="interleaved", dropout=0.0),
        lambda module, a: _check_module_forward(module.eval(), a["d_model"]),
    ),
    "posenc.nn.SinusoidalPositionalEncoding.forward": Spec(
        SinusoidalPositionalEncoding.forward,
        lambda a: SinusoidalPositionalEncoding(8, max_len=4)(a["x"], offset=a["offset"], positions=a["positions"]),
        lambda: dict(x=torch.zeros(2, 3, 8), offset=0, positions=None),
        _check_forward_result,
    ),
    "posenc.nn.LearnedPositionalEmbedding": Spec(
        LearnedPositionalEmbedding,
        lambda a: LearnedPositionalEmbedding(a["max_len"], a["d_model"]),
        lambda: dict(max_len=4, d_model=5),
        lambda module, a: _check_module_forward(module, a["d_model"]),
    ),
    "posenc.nn.LearnedPositionalEmbedding.forward": Spec(
        LearnedPositionalEmbedding.forward,
        lambda a: LearnedPositionalEmbedding(4, 8)(a["x"], offset=a["offset"], positions=a["positions"]),
        lambda: dict(x=torch.zeros(2, 3, 8), offset=0, positions=None),
        _check_forward_result,
    ),
    "posenc.alibi_slopes": Spec(
        alibi_slopes,
        lambda a: alibi_slopes(a["n_heads"]),
        lambda: dict(n_heads=12),
        lambda out, a: _finite_array(out, (int(a["n_heads"]),)),
    ),
    "posenc.alibi_bias": Spec(
        alibi_bias,
        lambda a: alibi_bias(a["n_heads"], a["q_len"], a["k_len"], causal=a["causal"], offset=a["offset"]),
        lambda: dict(n_heads=8, q_len=3, k_len=5, causal=True, offset=None),
        lambda out, a: _check_bias(out, a, int(a["n_heads"]), bool(a["causal"])),
    ),
    "posenc.t5_relative_bucket": Spec(
        t5_relative_bucket,
        lambda a: t5_relative_bucket(
            a["relative_position"],
            bidirectional=a["bidirectional"],
            num_buckets=a["num_buckets"],
            max_distance=a["max_distance"],
        ),
        lambda: dict(relative_position=np.arange(-5, 6), bidirectional=True, num_buckets=32, max_distance=128),
        _check_buckets,
    ),
    "posenc.shaw_relative_indices": Spec(
        shaw_relative_indices,
        lambda a: shaw_relative_indices(a["q_len"], a["k_len"], max_distance=a["max_distance"], offset=a["offset"]),
        lambda: dict(q_len=3, k_len=5, max_distance=2, offset=None),
        lambda out, a: (
            _finite_array(out, _lengths(a)),
            np.all((out >= 0) & (out <= 2 * int(a["max_distance"]))) or pytest.fail("index out of range"),
        ),
    ),
    "posenc.nn.ALiBiBias": Spec(
        ALiBiBias,
        lambda a: ALiBiBias(a["n_heads"]),
        lambda: dict(n_heads=8),
        lambda module, a: _check_bias(module(3, 4), dict(q_len=3, k_len=4), int(a["n_heads"])),
    ),
    "posenc.nn.ALiBiBias.forward": Spec(
        ALiBiBias.forward,
        lambda a: ALiBiBias(4)(a["q_len"], a["k_len"], causal=a["causal"], offset=a["offset"]),
        lambda: dict(q_len=3, k_len=5, causal=True, offset=torch.tensor(1)),
        lambda out, a: _check_bias(out, a, 4, bool(a["causal"])),
    ),
    "posenc.nn.ALiBiBias.score_mod": Spec(
        ALiBiBias.score_mod,
        lambda a: ALiBiBias(4).score_mod(causal=a["causal"], offset=a["offset"]),
        lambda: dict(causal=True, offset=torch.tensor(3)),
        lambda mod, a: _check_score_mod(mod, ALiBiBias(4)(2, 5, causal=bool(a["causal"]), offset=int(a["offset"]))),
    ),
    "posenc.nn.T5RelativeBias": Spec(
        T5RelativeBias,
        lambda a: T5RelativeBias(
            a["n_heads"], bidirectional=a["bidirectional"], num_buckets=a["num_buckets"], max_distance=a["max_distance"]
        ),
        lambda: dict(n_heads=4, bidirectional=True, num_buckets=32, max_distance=128),
        lambda module, a: _check_bias(module(3, 4), dict(q_len=3, k_len=4), int(a["n_heads"]), causal=False),
    ),
    "posenc.nn.T5RelativeBias.forward": Spec(
        T5RelativeBias.forward,
        lambda a: T5RelativeBias(4)(a["q_len"], a["k_len"], offset=a["offset"]),
        lambda: dict(q_len=3, k_len=5, offset=7),
        lambda out, a: _check_bias(out, a, 4, causal=False),
    ),
    "posenc.nn.T5RelativeBias.buckets": Spec(
        T5RelativeBias.buckets,
        lambda a: T5RelativeBias(4, num_buckets=8, max_distance=16).buckets(a["q_len"], a["k_len"], offset=a["offset"]),
        lambda: dict(q_len=3, k_len=5, offset=torch.tensor(-2)),
        lambda out, a: (
            (out.dtype == torch.int64 and out.shape == _lengths(a) and bool(((out >= 0) & (out < 8)).all()))
            or pytest.fail(f"buckets {out!r}")
        ),
    ),
    "posenc.nn.T5RelativeBias.score_mod": Spec(
        T5RelativeBias.score_mod,
        lambda a: _seeded_t5().score_mod(offset=a["offset"]),
        lambda: dict(offset=-3),
        lambda mod, a: _check_score_mod(mod, _seeded_t5()(2, 5, offset=int(a["offset"]))),
    ),
    "posenc.nn.causal_mask_mod": Spec(
        causal_mask_mod,
        lambda a: causal_mask_mod(a["offset"]),
        lambda: dict(offset=torch.tensor(2)),
        _check_mask_mod,
    ),
    "posenc.nn.ShawRelativeAttention": Spec(
        ShawRelativeAttention,
        lambda a: ShawRelativeAttention(
            a["d_model"], a["n_heads"], max_distance=a["max_distance"], values=a["values"], causal=a["causal"]
        ),
        lambda: dict(d_model=8, n_heads=2, max_distance=3, values=True, causal=False),
        lambda module, a: _check_module_forward(module, int(a["d_model"])),
    ),
    "posenc.nn.ShawRelativeAttention.forward": Spec(
        ShawRelativeAttention.forward,
        lambda a: ShawRelativeAttention(8, 2, max_distance=3, causal=True)(a["x"]),
        lambda: dict(x=torch.zeros(2, 3, 8)),
        _check_forward_result,
    ),
    "posenc.testing.assert_sinusoidal_matches_reference": Spec(
        assert_sinusoidal_matches_reference,
        _sinusoid_check,
        lambda: dict(
            table_fn=_reference_placeholder, n_positions=16, d_model=8, base=10000.0, layout="interleaved", atol=1e-5
        ),
        _passed,
    ),
    "posenc.testing.assert_sinusoidal_odd_width_handled": Spec(
        assert_sinusoidal_odd_width_handled,
        lambda a: assert_sinusoidal_odd_width_handled(**a),
        lambda: dict(table_fn=sinusoidal, n_positions=4, d_model=5, base=10000.0, atol=1e-5),
        _passed,
    ),
    "posenc.testing.assert_rotary_angles_accurate": Spec(
        assert_rotary_angles_accurate,
        lambda a: _rotary_check(assert_rotary_angles_accurate, a),
        lambda: dict(
            rotate_fn=_reference_placeholder,
            head_dim=8,
            n_positions=64,
            base=10000.0,
            layout="interleaved",
            atol=None,
            scaling=None,
        ),
        _passed,
    ),
    "posenc.testing.assert_rotary_scores_depend_on_offset_only": Spec(
        assert_rotary_scores_depend_on_offset_only,
        lambda a: _rotary_check(assert_rotary_scores_depend_on_offset_only, a),
        lambda: dict(
            rotate_fn=_reference_placeholder,
            head_dim=8,
            distances=(0, 3),
            shifts=(0, 100),
            base=10000.0,
            layout="interleaved",
            rtol=None,
            seed=0,
        ),
        _passed,
    ),
    "posenc.testing.assert_rotary_offset_matches_slice": Spec(
        assert_rotary_offset_matches_slice,
        lambda a: assert_rotary_offset_matches_slice(**a),
        lambda: dict(fn=_rotate_at, head_dim=8, seq_len=4, offset=3, atol=1e-4, seed=0),
        _passed,
    ),
    "posenc.testing.assert_rotary_calls_independent": Spec(
        assert_rotary_calls_independent,
        lambda a: assert_rotary_calls_independent(**a),
        lambda: dict(fn=_rotate_at, head_dim=8, short_len=4, long_len=64, atol=1e-6, seed=0),
        _passed,
    ),
    "posenc.testing.assert_rotary_uses_sequence_axis": Spec(
        assert_rotary_uses_sequence_axis,
        _sequence_axis_check,
        lambda: dict(
            fn=_reference_placeholder,
            head_dim=8,
            seq_len=4,
            n_heads=2,
            batch=2,
            base=10000.0,
            layout="halves",
            atol=1e-5,
            seed=0,
        ),
        _passed,
    ),
    "posenc.testing.assert_layouts_agree_after_permutation": Spec(
        assert_layouts_agree_after_permutation,
        _layout_check,
        lambda: dict(
            convert_fn=_reference_placeholder,
            head_dim=4,
            n_heads=2,
            source="interleaved",
            target="halves",
            d_in=4,
            base=10000.0,
            seed=0,
        ),
        _passed,
    ),
    "posenc.testing.assert_alibi_slopes_match_reference": Spec(
        assert_alibi_slopes_match_reference,
        lambda a: assert_alibi_slopes_match_reference(**a),
        lambda: dict(slopes_fn=posenc.alibi_slopes, max_heads=8, rtol=1e-6),
        _passed,
    ),
    "posenc.testing.assert_rerotated_keys_accurate": Spec(
        assert_rerotated_keys_accurate,
        lambda a: assert_rerotated_keys_accurate(**_with(a, "make_cache", _raw_cache(a))),
        lambda: dict(
            make_cache=_reference_placeholder,
            head_dim=8,
            n_sink=2,
            window=14,
            n_evictions=20,
            base=10000.0,
            layout="interleaved",
            seed=0,
        ),
        _passed,
    ),
    "posenc.testing.assert_alibi_offset_matches_slice": Spec(
        assert_alibi_offset_matches_slice,
        lambda a: assert_alibi_offset_matches_slice(
            **_with(a, "bias_fn", lambda q_len, k_len: alibi_bias(a["n_heads"], q_len, k_len))
        ),
        lambda: dict(bias_fn=_reference_placeholder, n_heads=3, k_len=8, q_lens=(1, 3), atol=1e-5),
        _passed,
    ),
    "posenc.testing.assert_yarn_attention_factor": Spec(
        assert_yarn_attention_factor,
        lambda a: assert_yarn_attention_factor(
            **_with(a, "rotate_fn", lambda x, p: posenc.rotate(x, p, scaling=a["scaling"]))
        ),
        lambda: dict(
            rotate_fn=_reference_placeholder,
            scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
            head_dim=8,
            n_positions=8,
            rtol=1e-5,
            seed=0,
        ),
        _passed,
    ),
    "posenc.testing.assert_rotary_matches_config": Spec(
        assert_rotary_matches_config,
        lambda a: assert_rotary_matches_config(
            **_with(
                a,
                "rotate_fn",
                lambda x, p, layer: (
                    RotaryPlan.from_config(a["config"], model_type=a["model_type"]).layers[layer].rotate(x, p)
                ),
            )
        ),
        lambda: dict(
            rotate_fn=_reference_placeholder,
            config={
                "model_type": "llama",
                "hidden_size": 16,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "max_position_embeddings": 16,
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            },
            model_type=None,
            positions=(0, 1, 15),
            seed=0,
        ),
        _passed,
    ),  # fmt: skip
    "posenc.testing.assert_rotary_conforms": Spec(
        assert_rotary_conforms,
        lambda a: assert_rotary_conforms(**_with(a, "rotate_fn", _conforming_operator(a))),
        lambda: dict(
            rotate_fn=_reference_placeholder,
            config=_TINY_LLAMA,
            layer_type=None,
            model_type=None,
            positions=None,
            layout=None,
            dtype="float32",
            qkv_format="bhsd",
            array=None,
            batch=2,
            heads=3,
            seed=0,
        ),
        _passed,
    ),
    "posenc.testing.RotaryCase": Spec(
        RotaryCase,
        lambda a: RotaryCase(**a),
        lambda: dict(
            name="llama",
            config=_TINY_LLAMA,
            source="",
            rotary=RotaryPlan.from_config(_TINY_LLAMA).kinds[0],
            trained_length=16,
            max_position_embeddings=16,
            positions=(0, 1, 15, 16),
            dtype="float32",
            families=(),
        ),
        lambda out, a: isinstance(out, RotaryCase) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.testing.rotary_cases": Spec(
        rotary_cases,
        lambda a: rotary_cases(**a),
        lambda: dict(dtypes=("float32", "float16"), beyond=True),
        lambda out, a: (
            all(
                isinstance(c, RotaryCase) and c.beyond in ((True, False) if a["beyond"] is None else (a["beyond"],))
                for c in out
            )
            or pytest.fail("cases on the wrong side of the trained length")
        ),
    ),
    "posenc.testing.rotary_positions": Spec(
        rotary_positions,
        lambda a: rotary_positions(**a),
        lambda: dict(trained_length=16, max_position_embeddings=64, beyond=True),
        lambda out, a: (
            (isinstance(out, tuple) and all(isinstance(p, int) and 0 <= p <= 2**24 for p in out))
            or pytest.fail(f"returned {out!r}")
        ),
    ),
    "posenc.testing.assert_mrope_axes_match": Spec(
        assert_mrope_axes_match,
        lambda a: assert_mrope_axes_match(
            **_with(
                a,
                "rotate_fn",
                lambda x, p: rotate_multiaxis(
                    x,
                    p,
                    mrope_frequencies(a["head_dim"], a["mrope_section"], assignment=a["assignment"], base=a["base"]),
                    layout=a["layout"],
                ),
            )
        ),
        lambda: dict(
            rotate_fn=_reference_placeholder,
            mrope_section=[2, 1, 1],
            assignment="interleaved",
            head_dim=8,
            base=10000.0,
            layout="halves",
            atol=1e-5,
        ),
        _passed,
    ),
    "posenc.testing.assert_t5_buckets_in_range": Spec(
        assert_t5_buckets_in_range,
        _bucket_check,
        lambda: dict(bucket_fn=_reference_placeholder, bidirectional=True, num_buckets=32, max_distance=128),
        _passed,
    ),
    "posenc.testing.assert_t5_buckets_exact": Spec(
        assert_t5_buckets_exact,
        _exact_bucket_check,
        lambda: dict(bucket_fn=_reference_placeholder, bidirectional=True, num_buckets=32, max_distance=128),
        _passed,
    ),
    "posenc.testing.t5_float32_boundaries": Spec(
        t5_float32_boundaries,
        lambda a: t5_float32_boundaries(
            a["relative_position"],
            bidirectional=a["bidirectional"],
            num_buckets=a["num_buckets"],
            max_distance=a["max_distance"],
        ),
        lambda: dict(relative_position=np.arange(-5, 6), bidirectional=True, num_buckets=32, max_distance=128),
        _check_boundaries,
    ),
    "posenc.base_condition_sum": Spec(
        base_condition_sum,
        lambda a: base_condition_sum(a["frequencies"], a["length"], head_dim=a["head_dim"]),
        lambda: dict(frequencies=[1.0, 0.1, 0.01], length=40, head_dim=8),
        lambda out, a: _finite_array(out, (a["length"],)),
    ),
    "posenc.base_condition_error": Spec(
        base_condition_error,
        lambda a: base_condition_error(a["frequencies"], a["length"], head_dim=a["head_dim"]),
        lambda: dict(frequencies=[1.0, 0.1, 0.01], length=40, head_dim=8),
        lambda out, a: (isinstance(out, float) and 0 < out < math.inf) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.base_condition_holds": Spec(
        base_condition_holds,
        _condition_or_undecided,
        lambda: dict(frequencies=[1.0, 0.1, 0.01], length=40, head_dim=8),
        lambda out, a: out in (True, False, "undecided") or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.axial_frequencies": Spec(
        axial_frequencies,
        lambda a: axial_frequencies(a["head_dim"], a["n_axes"], base=a["base"]),
        lambda: dict(head_dim=12, n_axes=3, base=100.0),
        lambda out, a: _finite_array(out, (a["n_axes"], a["head_dim"] // 2)),
    ),
    "posenc.mrope_frequencies": Spec(
        mrope_frequencies,
        lambda a: mrope_frequencies(a["head_dim"], a["mrope_section"], assignment=a["assignment"], base=a["base"]),
        lambda: dict(head_dim=16, mrope_section=[4, 2, 2], assignment="interleaved", base=1e6),
        lambda out, a: _finite_array(out, (3, a["head_dim"] // 2)),
    ),
    "posenc.rotate_multiaxis": Spec(
        rotate_multiaxis,
        lambda a: rotate_multiaxis(a["x"], a["positions"], a["frequencies"], layout=a["layout"]),
        lambda: dict(
            x=np.ones((2, 3, 8)),
            positions=np.array([[0.0, 1.0], [2.0, -3.5], [4.0, 5.0]]),
            frequencies=np.array([[1.0, 0.1, 0.0], [0.0, 0.0, 1.0]]),
            layout="halves",
        ),
        _check_rotated_multiaxis,
    ),
    "posenc.nn.MultiAxisRotaryEmbedding": Spec(
        MultiAxisRotaryEmbedding,
        lambda a: MultiAxisRotaryEmbedding(a["frequencies"], layout=a["layout"], learnable=a["learnable"]),
        lambda: dict(frequencies=np.array([[1.0, 0.1, 0.0], [0.0, 0.0, 1.0]]), layout="interleaved", learnable=True),
        lambda module, a: _check_forward_result(
            module(torch.ones(2, 3, 2 * module.n_pairs), torch.zeros(3, module.n_axes)),
            {"x": torch.ones(2, 3, 2 * module.n_pairs)},
        ),
    ),
    "posenc.LayerRotary": Spec(
        LayerRotary,
        lambda a: LayerRotary(**a),
        lambda: dict(
            layer_type="full_attention",
            rotates=True,
            head_dim=16,
            rotary_dim=8,
            rotary_offset=8,
            layout="halves",
            base=10000.0,
            scaling=RopeScaling(),
            axes=("position",),
            axis_of_pair=(),
            frequency_of_pair=(),
            frequency_dim=0,
            frequency_scale=1.0,
            feature_order=(),
            softmax_scale=1.0,
            query_scaling=None,
        ),
        lambda out, a: isinstance(out, LayerRotary) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.RotaryPlan": Spec(
        RotaryPlan,
        lambda a: RotaryPlan(**a),
        lambda: dict(
            model_type="llama",
            layers=(LayerRotary("full_attention", True, 8, 8),),
            max_position_embeddings=64,
            source="models/llama/modeling_llama.py",
            config_class="LlamaConfig",
            defaults_used={"rope_theta": 10000.0},
        ),
        lambda out, a: isinstance(out, RotaryPlan) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.check_config": Spec(
        check_config,
        lambda a: check_config(a["config"], context=a["context"], model_type=a["model_type"]),
        lambda: dict(config=dict(_LLAMA_CONFIG), context=4096, model_type="llama"),
        lambda out, a: (
            (isinstance(out, ConfigCheck) and max(map(len, out.render().splitlines())) <= 80)
            or pytest.fail(f"returned {out!r}")
        ),
    ),
    "posenc.ConfigCheck": Spec(
        ConfigCheck,
        lambda a: ConfigCheck(**a),
        lambda: dict(
            source="config.json",
            part=None,
            plan=_LLAMA_PLAN,
            kinds=(KindCheck(_LLAMA_PLAN.kinds[0], (0, 1)),),
            warnings=(CheckWarning("static-yarn", "message", "chapter 12"),),
            context=4096,
        ),
        lambda out, a: isinstance(out, ConfigCheck) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.KindCheck": Spec(
        KindCheck,
        lambda a: KindCheck(**a),
        lambda: dict(kind=_LLAMA_PLAN.kinds[0], layers=(0, 1), context=ContextCheck(64, True, None, "holds")),
        lambda out, a: isinstance(out, KindCheck) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.ContextCheck": Spec(
        ContextCheck,
        lambda a: ContextCheck(**a),
        lambda: dict(length=4096, holds=False, first_failure=1707, meaning="fails"),
        lambda out, a: isinstance(out, ContextCheck) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.CheckWarning": Spec(
        CheckWarning,
        lambda a: CheckWarning(**a),
        lambda: dict(code="truncate", message="message", see="chapter 13", sources=("github.com/x/y/pull/1",)),
        lambda out, a: isinstance(out, CheckWarning) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.QueryScaling": Spec(
        QueryScaling,
        lambda a: QueryScaling(**a),
        lambda: dict(kind="llama4_beta", scale=0.1, length=16384.0),
        lambda out, a: isinstance(out, QueryScaling) or pytest.fail(f"returned {out!r}"),
    ),
    "posenc.query_scale": Spec(
        posenc.query_scale,
        lambda a: posenc.query_scale(a["positions"], a["scaling"]),
        lambda: dict(positions=np.arange(4), scaling=QueryScaling("llama4_temperature", 0.1, 2.0)),
        lambda out, a: (out.shape == np.shape(a["positions"]) and np.all(np.isfinite(out))) or pytest.fail(repr(out)),
    ),
    "posenc.nn.rotary_embedding": Spec(
        rotary_embedding,
        lambda a: rotary_embedding(a["layer"], seq_dim=a["seq_dim"], dynamic_length=a["dynamic_length"]),
        lambda: dict(layer=LayerRotary("full_attention", True, 8, 8), seq_dim=-2, dynamic_length="call"),
        lambda module, a: _check_rotary_module(module),
    ),
    "posenc.nn.query_scale": Spec(
        posenc.nn.query_scale,
        lambda a: posenc.nn.query_scale(a["positions"], a["scaling"], dtype=a["dtype"]),
        lambda: dict(positions=torch.arange(4), scaling=QueryScaling("llama4_beta", 0.1, 2.0), dtype=torch.float32),
        lambda out, a: out.shape == a["positions"].shape or pytest.fail(repr(out)),
    ),
    "posenc.nn.MultiAxisRotaryEmbedding.forward": Spec(
        MultiAxisRotaryEmbedding.forward,
        lambda a: MultiAxisRotaryEmbedding(np.array([[1.0, 0.1, 0.0], [0.0, 0.0, 1.0]]))(a["x"], a["positions"]),
        lambda: dict(x=torch.zeros(2, 3, 8), positions=torch.tensor([[0.0, 2.5], [7.0, 3.0], [4.0, 5.0]])),
        _check_forward_result,
    ),
}


# Position from content: outputs of the documented shape, without NaN when every input is finite.


def _finite_inputs(kwargs) -> bool:
    """Whether every array or tensor argument is finite (a NaN or infinite input may give NaN)."""
    for value in kwargs.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return False
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            return False
    return True


def _check_content(out, shape, kwargs, lower=None, upper=None):
    """``out`` has ``shape``, no NaN for finite input, and lies in ``[lower, upper]`` where finite, if given."""
    values = np.asarray(out.detach().double() if isinstance(out, torch.Tensor) else out, dtype=np.float64)
    assert values.shape == tuple(shape), f"shape {values.shape}, documented {tuple(shape)}"
    if _finite_inputs(kwargs):
        assert not np.isnan(values).any(), "NaN for finite input"
        assert not np.isposinf(values).any(), "+inf for finite input"
    finite = values[np.isfinite(values)]
    assert lower is None or np.all(finite >= lower - 1e-6), "below the documented range"
    assert upper is None or np.all(finite <= upper + 1e-6), "above the documented range"


def _shape(value) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else np.shape(np.asarray(value))


def _bias_shape(kwargs) -> tuple[int, ...]:
    shape = _shape(kwargs["log_forget"])
    q_len = shape[-1] if kwargs["q_len"] is None else int(kwargs["q_len"])
    return (*shape[:-1], q_len, shape[-1])


def _pair_shape(name):
    """The ``(..., seq, seq)`` shape of logits from ``kwargs[name]`` of shape ``(..., seq, head_dim)``."""
    return lambda kwargs: (*_shape(kwargs[name])[:-1], _shape(kwargs[name])[-2])


def _call_score_mod(mod, kwargs):
    index = (torch.zeros((), dtype=torch.int64), torch.arange(2)[:, None, None], torch.arange(2)[:, None])
    _check_content(mod(torch.zeros(()), *index, torch.arange(3)), (2, 2, 3), kwargs)


def _attention_shapes(out, kwargs):
    values, remainder = out
    q, v = kwargs["q"], kwargs["v"]
    _check_content(values, (*q.shape[:-1], v.shape[-1]), kwargs)
    _check_content(remainder, q.shape[:-1], kwargs, 0.0, 1.0)


CONTENT_SPECS = {
    "posenc.forgetting_bias": Spec(
        forgetting_bias,
        lambda a: forgetting_bias(a["log_forget"], q_len=a["q_len"]),
        lambda: dict(log_forget=np.log([[1.0, 0.5, 0.25]]), q_len=2),
        lambda out, a: _check_content(out, _bias_shape(a), a, upper=0.0),
    ),
    "posenc.stick_breaking_weights": Spec(
        stick_breaking_weights,
        lambda a: stick_breaking_weights(a["logits"], attend_current=a["attend_current"], offset=a["offset"]),
        lambda: dict(logits=np.zeros((2, 3, 4)), attend_current=False, offset=None),
        lambda out, a: _check_content(out, _shape(a["logits"]), a, 0.0, 1.0),
    ),
    "posenc.cope_positions": Spec(
        cope_positions,
        lambda a: cope_positions(a["gates"], offset=a["offset"]),
        lambda: dict(gates=np.full((3, 4), 0.5), offset=1),
        lambda out, a: _check_content(out, _shape(a["gates"]), a, lower=0.0),
    ),
    "posenc.cope_logits": Spec(
        cope_logits,
        lambda a: cope_logits(a["q"], a["k"], a["embeddings"], scale=a["scale"]),
        lambda: dict(q=np.ones((2, 3, 4)), k=np.ones((2, 3, 4)), embeddings=np.ones((5, 4)), scale=None),
        lambda out, a: _check_content(out, _pair_shape("q")(a), a),
    ),
    "posenc.sink_softmax": Spec(
        sink_softmax,
        lambda a: sink_softmax(a["logits"], a["sinks"]),
        lambda: dict(logits=np.zeros((2, 3, 4)), sinks=np.zeros(2)),
        lambda out, a: _check_content(out, _shape(a["logits"]), a, 0.0, 1.0),
    ),
    "posenc.path_logits": Spec(
        path_logits,
        lambda a: path_logits(a["q"], a["k"], a["w"], a["beta"]),
        lambda: dict(q=np.ones((2, 3, 4)), k=np.ones((2, 3, 4)), w=np.ones((2, 3, 4)) / 2, beta=np.ones((2, 3))),
        lambda out, a: _check_content(out, _pair_shape("q")(a), a),
    ),
    "posenc.nn.ForgettingGate": Spec(
        ForgettingGate,
        lambda a: ForgettingGate(a["d_model"], a["n_heads"]),
        lambda: dict(d_model=8, n_heads=2),
        lambda module, a: _check_content(module(torch.zeros(2, 3, module.d_model)), (2, module.n_heads, 3), {}),
    ),
    "posenc.nn.ForgettingGate.forward": Spec(
        ForgettingGate.forward,
        lambda a: ForgettingGate(8, 2)(a["x"]),
        lambda: dict(x=torch.zeros(2, 3, 8)),
        lambda out, a: _check_content(out, (a["x"].shape[0], 2, a["x"].shape[1]), a, upper=0.0),
    ),
    "posenc.nn.forgetting_bias": Spec(
        torch_forgetting_bias,
        lambda a: torch_forgetting_bias(a["log_forget"], q_len=a["q_len"]),
        lambda: dict(log_forget=-torch.ones(2, 4), q_len=3),
        lambda out, a: _check_content(out, _bias_shape(a), a, upper=0.0),
    ),
    "posenc.nn.forgetting_score_mod": Spec(
        forgetting_score_mod,
        lambda a: forgetting_score_mod(a["log_forget"], offset=a["offset"]),
        lambda: dict(log_forget=-torch.ones(1, 2, 3), offset=torch.tensor(1)),
        _call_score_mod,
    ),
    "posenc.nn.stick_breaking_weights": Spec(
        torch_stick_breaking_weights,
        lambda a: torch_stick_breaking_weights(a["logits"], attend_current=a["attend_current"], offset=a["offset"]),
        lambda: dict(logits=torch.zeros(2, 3, 4), attend_current=True, offset=torch.tensor(1)),
        lambda out, a: _check_content(out, _shape(a["logits"]), a, 0.0, 1.0),
    ),
    "posenc.nn.stick_breaking_attention": Spec(
        stick_breaking_attention,
        lambda a: stick_breaking_attention(
            a["q"], a["k"], a["v"], scale=a["scale"], attend_current=a["attend_current"], offset=a["offset"]
        ),
        lambda: dict(
            q=torch.ones(2, 1, 4),
            k=torch.ones(2, 3, 4),
            v=torch.ones(2, 3, 5),
            scale=0.5,
            attend_current=False,
            offset=None,
        ),
        _attention_shapes,
    ),  # fmt: skip
    "posenc.nn.CoPE": Spec(
        CoPE,
        lambda a: CoPE(a["n_positions"], a["head_dim"]),
        lambda: dict(n_positions=5, head_dim=4),
        lambda module, a: _check_content(
            module.logits(torch.ones(2, 3, module.head_dim), torch.ones(2, 3, module.head_dim)), (2, 3, 3), {}
        ),
    ),
    "posenc.nn.CoPE.forward": Spec(
        CoPE.forward,
        lambda a: CoPE(5, 8)(a["q"], a["gate_logits"]),
        lambda: dict(q=torch.ones(2, 3, 8), gate_logits=torch.zeros(2, 3, 4)),
        lambda out, a: _check_content(out, _shape(a["gate_logits"]), a),
    ),
    "posenc.nn.AttentionSink": Spec(
        AttentionSink,
        lambda a: AttentionSink(a["n_heads"]),
        lambda: dict(n_heads=2),
        lambda module, a: _check_content(
            module(torch.zeros(module.n_heads, 3, 3)), (module.n_heads, 3, 3), {}, 0.0, 1.0
        ),
    ),
    "posenc.nn.AttentionSink.forward": Spec(
        AttentionSink.forward,
        lambda a: AttentionSink(3)(a["logits"]),
        lambda: dict(logits=torch.zeros(2, 3, 4, 5)),
        lambda out, a: _check_content(out, _shape(a["logits"]), a, 0.0, 1.0),
    ),
    "posenc.nn.PaTHGate": Spec(
        PaTHGate,
        lambda a: PaTHGate(a["d_model"], a["n_heads"], a["head_dim"]),
        lambda: dict(d_model=8, n_heads=2, head_dim=4),
        lambda module, a: _check_content(
            module(torch.ones(2, 3, module.d_model))[0], (2, module.n_heads, 3, module.head_dim), {}
        ),
    ),
    "posenc.nn.PaTHGate.forward": Spec(
        PaTHGate.forward,
        lambda a: PaTHGate(8, 2, 4)(a["x"]),
        lambda: dict(x=torch.ones(2, 3, 8)),
        lambda out, a: _check_content(out[1], (a["x"].shape[0], 2, a["x"].shape[1]), a, 0.0, 2.0),
    ),
    "posenc.nn.path_logits": Spec(
        torch_path_logits,
        lambda a: torch_path_logits(a["q"], a["k"], a["w"], a["beta"]),
        lambda: dict(q=torch.ones(2, 3, 4), k=torch.ones(2, 3, 4), w=torch.ones(2, 3, 4) / 2, beta=torch.ones(2, 3)),
        lambda out, a: _check_content(out, _pair_shape("q")(a), a),
    ),
}
SPECS.update(CONTENT_SPECS)
_LLAMA_CONFIG = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
"""A minimal Llama config.json dict: what posenc.check_config is fuzzed from."""

_LLAMA_PLAN = RotaryPlan.from_config(_LLAMA_CONFIG)


def parameter_names(target) -> list[str]:
    return [name for name in inspect.signature(target).parameters if name != "self"]


@contextmanager
def time_limit(seconds):
    def expire(signum, frame):
        raise TimeoutError(f"call ran longer than {seconds} s: an oversized request was accepted instead of refused")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_every_public_callable_has_a_fuzz_spec():
    """New public functions and classes of the library join the fuzz: SPECS names every one that takes input."""
    needed = {name: obj for name, obj in public_objects().items() if not takes_no_input(obj)}
    targets = [spec.target for spec in SPECS.values()]
    missing = sorted(name for name, obj in needed.items() if not any(obj is target for target in targets))
    assert missing == [], f"public callables without a fuzz spec: {missing}"


def test_every_spec_names_every_parameter():
    """Each valid call names exactly the parameters of the signature, so the fuzz reaches every one."""
    differ = {
        name: (sorted(spec.valid()), sorted(parameter_names(spec.target)))
        for name, spec in SPECS.items()
        if sorted(spec.valid()) != sorted(parameter_names(spec.target))
    }
    assert differ == {}, f"(spec's parameters, signature's parameters) that differ: {differ}"


def judge(name: str, kwargs: dict, replaced: list[str]) -> str | None:
    """Call SPECS[name] with ``kwargs``; ``None`` if the call keeps the contract, else what went wrong.

    A success must pass the spec's check. A TypeError or ValueError must name a parameter: the replaced one
    when only one was replaced. Any other exception, or a call longer than SECONDS_PER_CALL, is a failure.
    """
    spec = SPECS[name]
    call = f"{name}({', '.join(f'{p}={kwargs[p]!r}' for p in replaced)})"
    try:
        with time_limit(SECONDS_PER_CALL):
            try:
                result = spec.call(kwargs)
            except (TypeError, ValueError) as error:
                wanted = replaced if len(replaced) == 1 else parameter_names(spec.target)
                if not any(names_parameter(str(error), p) for p in wanted):
                    return f"{call} raised {type(error).__name__} naming none of {wanted}: {error}"
                return None
            spec.check(result, kwargs)
    except Exception as error:  # any other exception, a failed check or a timeout: the finding
        return f"{call} raised {type(error).__name__}: {error}"
    return None


SWEEP = {"huge int": 2**40, "negative int": -1, "bool": True, "None": None, "NaN": math.nan, "str": "x"}


@pytest.mark.parametrize("name", SPECS)
def test_each_parameter_alone_refuses_a_wrong_or_oversized_value(name):
    """Every parameter of the callable, one at a time, over SWEEP: a huge int is refused (not run), and so on."""
    failures = []
    for parameter in parameter_names(SPECS[name].target):
        for value in SWEEP.values():
            kwargs = SPECS[name].valid()
            kwargs[parameter] = value
            failure = judge(name, kwargs, [parameter])
            if failure is not None:
                failures.append(failure)
    assert failures == [], "\n".join(failures)


@settings(max_examples=25 * len(SPECS))
@given(name=st.sampled_from(sorted(SPECS)), data=st.data())
def test_wild_arguments_get_a_type_or_value_error_naming_a_parameter(name, data):
    params = parameter_names(SPECS[name].target)
    kwargs = SPECS[name].valid()
    forced = data.draw(st.sampled_from(params), label="wild parameter")
    replaced = []
    for param in params:
        if param == forced or data.draw(st.booleans(), label=f"also replace {param}"):
            kwargs[param] = data.draw(WILD, label=param)
            replaced.append(param)
    failure = judge(name, kwargs, replaced)
    assert failure is None, failure
