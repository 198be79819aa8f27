"""Bad input to the library gets a TypeError or ValueError naming the parameter, before anything large is allocated.

The library's public surface is ``posenc`` (the NumPy functions), ``posenc.nn`` and ``posenc.testing``. The
table below has one row per distinct check: a check shared by several functions (the width check behind every
``d_model``, the flag check behind every bool) has its rows through one function, and another function gets a
row for a parameter only where it checks that parameter in its own way or with its own message (``head_dim``
rather than ``d_model``, a ``d_model x d_model`` matrix, a length compared with ``max_len``). That every
parameter of every public callable refuses wrong values at all is tests/test_fuzz_bad_input.py's job.

Each row asserts the contract only: the exception type (``TypeError`` for the wrong kind of value,
``ValueError`` for the right kind with a wrong value) and that the message names the parameter, as a word.
"""

import dataclasses
import importlib
import inspect
import re
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
import torch

from posenc import (
    MAX_TABLE_ELEMENTS,
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
    query_scale,
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
from posenc.alibi import MAX_HEADS
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
from posenc.nn import query_scale as torch_query_scale
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

LIBRARY_MODULES = ("posenc", "posenc.nn", "posenc.testing")

_LLAMA_CONFIG = {
    "model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
}  # fmt: skip
_MROPE_CONFIG = {
    "model_type": "qwen2_vl_text", "hidden_size": 64, "num_attention_heads": 1, "num_hidden_layers": 1,
    "rope_theta": 10000.0, "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
}  # fmt: skip
"""The library's public namespaces: every name in their ``__all__`` is public surface."""


@dataclasses.dataclass(frozen=True)
class Bad:
    """A call with one bad argument, the exception it must raise, and the parameter its message must name."""

    call: Callable[[], object]
    error: type[Exception]
    names: str
    large: bool = False  # without its check the call would allocate a large table (see the tracemalloc test)


def names_parameter(message: str, parameter: str) -> bool:
    """Whether ``message`` contains ``parameter`` as a word (``x`` in "x must be ...", not in "exceeds")."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(parameter)}(?![A-Za-z0-9_])", message) is not None


def _yarn(**extra):
    return {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, **extra}


_LLAMA3_INVERTED = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 4.0,
    "high_freq_factor": 1.0,
}
_DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
_NESTED = {"full_attention": {"rope_type": "linear", "factor": 8.0}, "sliding_attention": {"rope_type": "default"}}


def _longrope(**extra):
    return {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.5],
        "long_factor": [2.0, 4.0],
        "original_max_position_embeddings": 64,
        "factor": 4.0,
        **extra,
    }


_ONE_BEYOND = MAX_TABLE_ELEMENTS // 8 + 1  # rows of width 8 one past the limit


BAD_CALLS = {
    # --- the shared checks, each through one function ---------------------------------------------------
    # width (check_d_model)
    "bool d_model": Bad(lambda: frequencies(True), TypeError, "d_model"),
    "str d_model": Bad(lambda: frequencies("512"), TypeError, "d_model"),
    "odd d_model": Bad(lambda: frequencies(7), ValueError, "d_model"),
    "zero d_model": Bad(lambda: frequencies(0), ValueError, "d_model"),
    "huge d_model": Bad(lambda: frequencies(2**40), ValueError, "d_model", large=True),
    # base (check_base)
    "bool base": Bad(lambda: frequencies(8, base=True), TypeError, "base"),
    "str base": Bad(lambda: frequencies(8, base="1e4"), TypeError, "base"),
    "base of one": Bad(lambda: frequencies(8, base=1.0), ValueError, "base"),
    "infinite base": Bad(lambda: frequencies(8, base=np.inf), ValueError, "base"),
    # a finite real (check_real)
    "array offset": Bad(lambda: translation_matrix(np.array([1.0, 2.0]), 8), TypeError, "offset"),
    "nan start": Bad(lambda: sinusoidal(4, 8, start=float("nan")), ValueError, "start"),
    # layout (check_layout)
    "non-str layout": Bad(lambda: sinusoidal(4, 8, layout=0), TypeError, "layout"),
    "unknown layout": Bad(lambda: sinusoidal(4, 8, layout="concatenated"), ValueError, "layout"),
    # dtype (check_float_dtype)
    "int dtype": Bad(lambda: sinusoidal(4, 8, dtype=np.int32), TypeError, "dtype"),
    "None dtype": Bad(lambda: sinusoidal(4, 8, dtype=None), TypeError, "dtype"),
    "unknown dtype": Bad(lambda: sinusoidal(4, 8, dtype="float99"), TypeError, "dtype"),
    # positions (an int count, or a 1-D array of finite reals)
    "bool count": Bad(lambda: sinusoidal(True, 8), TypeError, "positions"),
    "negative count": Bad(lambda: sinusoidal(-1, 8), ValueError, "positions"),
    "float count": Bad(lambda: sinusoidal(10.0, 8), TypeError, "positions"),
    "str positions": Bad(lambda: sinusoidal("10", 8), TypeError, "positions"),
    "None positions": Bad(lambda: sinusoidal(None, 8), TypeError, "positions"),
    "bool position array": Bad(lambda: sinusoidal(np.array([True, False]), 8), TypeError, "positions"),
    "complex position array": Bad(lambda: sinusoidal(np.array([1j]), 8), TypeError, "positions"),
    "2-D position array": Bad(lambda: sinusoidal(np.zeros((2, 2)), 8), ValueError, "positions"),
    "nan position": Bad(lambda: sinusoidal([0.0, np.nan], 8), ValueError, "positions"),
    "count one row over the limit": Bad(
        lambda: sinusoidal(MAX_TABLE_ELEMENTS // 64 + 1, 64), ValueError, "positions", large=True
    ),
    "position array one row over the limit": Bad(  # a view of one float: nothing allocated by the caller
        lambda: sinusoidal(np.broadcast_to(np.float32(0), (_ONE_BEYOND,)), 8), ValueError, "positions", large=True
    ),
    # a flag (check_flag), an int in a range (check_int)
    "int causal": Bad(lambda: alibi_bias(8, 4, causal=1), TypeError, "causal"),
    "bool n_heads": Bad(lambda: alibi_slopes(True), TypeError, "n_heads"),
    "float n_heads": Bad(lambda: alibi_slopes(8.0), TypeError, "n_heads"),
    "zero n_heads": Bad(lambda: alibi_slopes(0), ValueError, "n_heads"),
    "n_heads one over MAX_HEADS": Bad(lambda: alibi_slopes(MAX_HEADS + 1), ValueError, "n_heads"),
    # query and key lengths, and the offset of query 0 (check_query_key_lengths)
    "negative q_len": Bad(lambda: alibi_bias(8, -1), ValueError, "q_len"),
    "float k_len": Bad(lambda: alibi_bias(8, 4, 4.0), TypeError, "k_len"),
    "float offset": Bad(lambda: alibi_bias(8, 4, offset=1.5), TypeError, "offset"),
    "offset past 2**52": Bad(lambda: alibi_bias(8, 4, causal=False, offset=2**52 + 1), ValueError, "offset"),
    # --- posenc.sinusoid ------------------------------------------------------------------------------
    "str step": Bad(lambda: sinusoidal(4, 8, step="1"), TypeError, "step"),
    "step with a position array": Bad(lambda: sinusoidal([0.0, 1.0], 8, step=2.0), ValueError, "step"),
    "overflowing progression": Bad(lambda: sinusoidal(4, 8, start=1e308, step=1e308), ValueError, "start"),
    "zero n_threads": Bad(lambda: sinusoidal(4, 8, n_threads=0), ValueError, "n_threads"),
    "float n_threads": Bad(lambda: sinusoidal(4, 8, n_threads=2.0), TypeError, "n_threads"),
    "65536-wide translation matrix": Bad(lambda: translation_matrix(1.0, 2**16), ValueError, "d_model", large=True),
    "unknown source layout": Bad(lambda: layout_permutation("paper", "halves", 8), ValueError, "source"),
    "None target layout": Bad(lambda: layout_permutation("halves", None, 8), TypeError, "target"),
    # --- posenc.rotary --------------------------------------------------------------------------------
    "str head_dim": Bad(lambda: rotary_frequencies("64"), TypeError, "head_dim"),
    "odd head_dim": Bad(lambda: rotary_frequencies(7), ValueError, "head_dim"),
    "dynamic with head_dim 2": Bad(lambda: rotary_frequencies(2, scaling=_DYNAMIC), ValueError, "head_dim"),
    "str seq_len": Bad(lambda: rotary_frequencies(8, seq_len="4096"), TypeError, "seq_len"),
    "negative seq_len": Bad(lambda: rotary_frequencies(8, seq_len=-1), ValueError, "seq_len"),
    "scaling not a dict": Bad(lambda: rotary_frequencies(8, scaling="linear"), TypeError, "scaling"),
    # the typed scaling checks its own fields, built directly or from a dict
    "RopeScaling.from_dict of a str": Bad(lambda: RopeScaling.from_dict("linear"), TypeError, "scaling"),
    # a transformers config, read (posenc.config): its own config-level refusals are tests/test_config.py's
    "RotaryPlan.from_config of a str": Bad(lambda: RotaryPlan.from_config("llama"), TypeError, "config"),
    "RotaryPlan without layers": Bad(lambda: RotaryPlan("llama", (), None, "models/llama"), ValueError, "layers"),
    "LayerRotary with an odd rotary_dim": Bad(
        lambda: LayerRotary("full_attention", True, 16, rotary_dim=7), ValueError, "rotary_dim"
    ),
    # issue 32: accepted, inverse_frequencies() answered with base, and rotate() raised later
    "LayerRotary with a base its scaling's rope_theta contradicts": Bad(
        lambda: LayerRotary("full_attention", True, 8, 8, base=10000.0, scaling=RopeScaling(rope_theta=5e5)),
        ValueError,
        "base",
    ),
    # posenc check: a config it cannot read, and the report's parts (tests/test_check.py: the refusals of configs)
    "check_config of a file that is not there": Bad(lambda: check_config("no/such/config.json"), ValueError, "config"),
    "check_config with a context of 1": Bad(
        lambda: check_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}, context=1),
        ValueError,
        "context",
    ),
    "ConfigCheck without a plan": Bad(lambda: ConfigCheck("config.json", None, None, (), ()), TypeError, "plan"),
    "KindCheck of a dict": Bad(lambda: KindCheck({}, (0,)), TypeError, "kind"),
    "ContextCheck failing past its length": Bad(
        lambda: ContextCheck(8, False, 8, "fails"), ValueError, "first_failure"
    ),
    "CheckWarning with one source as a str": Bad(
        lambda: CheckWarning("truncate", "message", "chapter 13", "github.com/x/y"), TypeError, "sources"
    ),
    "QueryScaling of an unknown kind": Bad(lambda: QueryScaling("temperature", 0.1, 8.0), ValueError, "kind"),
    "query_scale at a negative position": Bad(
        lambda: query_scale([-1], QueryScaling("llama4_beta", 0.1, 8.0)), ValueError, "positions"
    ),
    "nn.query_scale of a list": Bad(
        lambda: torch_query_scale([0, 1], QueryScaling("llama4_beta", 0.1, 8.0)), TypeError, "positions"
    ),
    "rotary_embedding of a NoPE layer": Bad(
        lambda: rotary_embedding(LayerRotary("full_attention", False, 16)), ValueError, "layer"
    ),
    "RopeScaling with a factor below 1": Bad(lambda: RopeScaling("linear", factor=0.5), ValueError, "factor"),
    "RopeScaling with a field its type does not use": Bad(
        lambda: RopeScaling("linear", factor=2.0, beta_fast=8.0), ValueError, "beta_fast"
    ),
    "scaling with a non-str key": Bad(lambda: rotary_frequencies(8, scaling={1: 2.0}), TypeError, "scaling"),
    "non-str rope_type": Bad(lambda: rotary_frequencies(8, scaling={"rope_type": 1}), TypeError, "rope_type"),
    "unknown rope_type": Bad(lambda: rotary_frequencies(8, scaling={"rope_type": "ntk"}), ValueError, "rope_type"),
    "type and rope_type differ": Bad(
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "type": "dynamic", "factor": 2.0}),
        ValueError,
        "rope_type",
    ),
    "misspelt scaling key": Bad(
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factr": 2.0}), ValueError, "factr"
    ),
    "missing factor": Bad(lambda: rotary_frequencies(8, scaling={"rope_type": "linear"}), ValueError, "factor"),
    "str factor": Bad(
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factor": "2"}), TypeError, "factor"
    ),
    "factor below one": Bad(
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factor": 0.5}), ValueError, "factor"
    ),
    "float trained length": Bad(
        lambda: rotary_frequencies(8, scaling=_yarn(original_max_position_embeddings=4096.0)),
        TypeError,
        "original_max_position_embeddings",
    ),
    "rope_theta disagrees with base": Bad(
        lambda: rotary_frequencies(8, base=10000.0, scaling={"rope_type": "default", "rope_theta": 500000.0}),
        ValueError,
        "rope_theta",
    ),
    "partial_rotary_factor above one": Bad(
        lambda: rotary_frequencies(8, scaling={"partial_rotary_factor": 1.5}), ValueError, "partial_rotary_factor"
    ),
    "str partial_rotary_factor": Bad(
        lambda: RopeScaling(partial_rotary_factor="0.5"), TypeError, "partial_rotary_factor"
    ),
    "partial_rotary_factor rotating an odd number of features": Bad(
        lambda: rotary_frequencies(10, scaling={"partial_rotary_factor": 0.5}), ValueError, "partial_rotary_factor"
    ),
    "longrope list of the wrong length": Bad(
        lambda: rotary_frequencies(8, scaling=_longrope(short_factor=[1.0], long_factor=[2.0])),
        ValueError,
        "short_factor",
    ),
    "longrope lists of different lengths": Bad(
        lambda: RopeScaling.from_dict(_longrope(long_factor=[2.0])), ValueError, "long_factor"
    ),
    "longrope factor of a str": Bad(
        lambda: RopeScaling.from_dict(_longrope(short_factor="1.0")), TypeError, "short_factor"
    ),
    "longrope zero factor": Bad(
        lambda: RopeScaling.from_dict(_longrope(long_factor=[2.0, 0.0])), ValueError, "long_factor"
    ),
    "longrope without factor nor max_position_embeddings": Bad(
        lambda: RopeScaling.from_dict({k: v for k, v in _longrope().items() if k != "factor"}),
        ValueError,
        "max_position_embeddings",
    ),
    "dynamic without a trained length": Bad(
        lambda: RopeScaling.from_dict({"rope_type": "dynamic", "factor": 2.0}), ValueError, "max_position_embeddings"
    ),
    "dynamic trained length disagreeing with max_position_embeddings": Bad(
        lambda: RopeScaling.from_dict(_DYNAMIC, max_position_embeddings=16), ValueError, "max_position_embeddings"
    ),
    "float max_position_embeddings": Bad(
        lambda: RopeScaling.from_dict(_DYNAMIC, max_position_embeddings=8.0), TypeError, "max_position_embeddings"
    ),
    "top-level trained length disagreeing with the dict's": Bad(
        lambda: RopeScaling.from_dict(_yarn(), original_max_position_embeddings=128),
        ValueError,
        "original_max_position_embeddings",
    ),
    "nested scaling without layer_type": Bad(lambda: RopeScaling.from_dict(_NESTED), ValueError, "layer_type"),
    "layer_type not in the nested scaling": Bad(
        lambda: RopeScaling.from_dict(_NESTED, layer_type="global"), ValueError, "layer_type"
    ),
    "layer_type with a flat scaling": Bad(
        lambda: RopeScaling.from_dict(_yarn(), layer_type="full_attention"), ValueError, "layer_type"
    ),
    "int layer_type": Bad(lambda: RopeScaling.from_dict(_NESTED, layer_type=0), TypeError, "layer_type"),
    "rotate odd rotary_dim": Bad(lambda: rotate(np.zeros((2, 8)), 2, rotary_dim=3), ValueError, "rotary_dim"),
    "rotate rotary_dim past head_dim": Bad(
        lambda: rotate(np.zeros((2, 8)), 2, rotary_dim=10), ValueError, "rotary_dim"
    ),
    "rotate float rotary_dim": Bad(lambda: rotate(np.zeros((2, 8)), 2, rotary_dim=4.0), TypeError, "rotary_dim"),
    "rotate rotary_dim disagreeing with partial_rotary_factor": Bad(
        lambda: rotate(np.zeros((2, 8)), 2, rotary_dim=2, scaling={"partial_rotary_factor": 0.5}),
        ValueError,
        "rotary_dim",
    ),
    "llama3 high_freq_factor below low": Bad(
        lambda: rotary_frequencies(8, scaling=_LLAMA3_INVERTED), ValueError, "high_freq_factor"
    ),
    "yarn beta_fast below beta_slow": Bad(
        lambda: rotary_frequencies(8, scaling=_yarn(beta_fast=0.5)), ValueError, "beta_fast"
    ),
    "yarn int truncate": Bad(lambda: rotary_frequencies(8, scaling=_yarn(truncate=1)), TypeError, "truncate"),
    "attention factor of a str": Bad(lambda: rotary_attention_factor("yarn"), TypeError, "scaling"),
    "negative attention_factor": Bad(
        lambda: rotary_attention_factor(_yarn(attention_factor=-1.0)), ValueError, "attention_factor"
    ),
    "rotate 1-D x": Bad(lambda: rotate(np.zeros(4), 1), ValueError, "x"),
    "rotate odd head": Bad(lambda: rotate(np.zeros((3, 5)), 3), ValueError, "x"),
    "rotate complex x": Bad(lambda: rotate(np.zeros((2, 4), dtype=complex), 2), TypeError, "x"),
    "rotate ragged x": Bad(lambda: rotate([[1.0, 2.0], [3.0]], 2), TypeError, "x"),
    "rotate dynamic with head_dim 2": Bad(lambda: rotate(np.zeros((2, 2)), 2, scaling=_DYNAMIC), ValueError, "x"),
    "rotate positions of the wrong length": Bad(lambda: rotate(np.zeros((3, 4)), [0.0, 1.0]), ValueError, "positions"),
    "rotate too many positions": Bad(lambda: rotate(np.zeros((1, 8)), 2**40), ValueError, "positions", large=True),
    "rotate integer position not exact in float64": Bad(
        lambda: rotate(np.zeros((1, 8)), [2**53 + 1]), ValueError, "positions"
    ),
    "rotate cos_first layout": Bad(lambda: rotate(np.zeros((2, 4)), 2, layout="cos_first"), ValueError, "layout"),
    "weight permutation cos_first source": Bad(
        lambda: rotary_weight_permutation("cos_first", "halves", 8), ValueError, "source"
    ),
    "weight permutation zero heads": Bad(
        lambda: rotary_weight_permutation("halves", "interleaved", 8, n_heads=0), ValueError, "n_heads"
    ),
    "weight permutation too many rows": Bad(
        lambda: rotary_weight_permutation("halves", "interleaved", 2**20, n_heads=2**20),
        ValueError,
        "n_heads",
        large=True,
    ),
    # --- posenc.alibi, posenc.shaw, posenc.t5 ---------------------------------------------------------
    "causal alibi with a negative offset": Bad(lambda: alibi_bias(8, 4, offset=-1), ValueError, "offset"),
    "alibi bias too large": Bad(lambda: alibi_bias(64, 2**12, 2**12), ValueError, "q_len", large=True),
    "shaw missing max_distance": Bad(lambda: shaw_relative_indices(4, max_distance=None), TypeError, "max_distance"),
    "shaw negative max_distance": Bad(lambda: shaw_relative_indices(4, max_distance=-1), ValueError, "max_distance"),
    "shaw max_distance past the table limit": Bad(
        lambda: shaw_relative_indices(1, max_distance=MAX_TABLE_ELEMENTS // 2 + 1), ValueError, "max_distance"
    ),
    "shaw too large": Bad(lambda: shaw_relative_indices(2**15, max_distance=2), ValueError, "q_len", large=True),
    "t5 bool relative_position": Bad(lambda: t5_relative_bucket(True), TypeError, "relative_position"),
    "t5 float relative_position": Bad(lambda: t5_relative_bucket(3.0), TypeError, "relative_position"),
    "t5 float array": Bad(lambda: t5_relative_bucket(np.array([1.0, 2.0])), TypeError, "relative_position"),
    "t5 ragged list": Bad(lambda: t5_relative_bucket([[1], [1, 2]]), TypeError, "relative_position"),
    "t5 odd buckets bidirectional": Bad(lambda: t5_relative_bucket(0, num_buckets=33), ValueError, "num_buckets"),
    "t5 two buckets bidirectional": Bad(lambda: t5_relative_bucket(0, num_buckets=2), ValueError, "num_buckets"),
    "t5 one bucket": Bad(lambda: t5_relative_bucket(0, bidirectional=False, num_buckets=1), ValueError, "num_buckets"),
    "t5 buckets past 2**16": Bad(lambda: t5_relative_bucket(0, num_buckets=2**16 + 2), ValueError, "num_buckets"),
    "t5 max_distance at max_exact": Bad(lambda: t5_relative_bucket(0, max_distance=8), ValueError, "max_distance"),
    "t5 max_distance past 2**52": Bad(
        lambda: t5_relative_bucket(0, max_distance=2**52 + 1), ValueError, "max_distance"
    ),
    # --- posenc.nn ------------------------------------------------------------------------------------
    "module float max_len": Bad(lambda: SinusoidalPositionalEncoding(8, max_len=1e3), TypeError, "max_len"),
    "module zero max_len": Bad(lambda: SinusoidalPositionalEncoding(8, max_len=0), ValueError, "max_len"),
    "module cache over the limit": Bad(
        lambda: SinusoidalPositionalEncoding(1024, max_len=2**30), ValueError, "max_len", large=True
    ),
    "module str dropout": Bad(lambda: SinusoidalPositionalEncoding(8, dropout="0.1"), TypeError, "dropout"),
    "module dropout of one": Bad(lambda: SinusoidalPositionalEncoding(8, dropout=1.0), ValueError, "dropout"),
    "module numpy input": Bad(lambda: SinusoidalPositionalEncoding(8)(np.zeros((1, 3, 8))), TypeError, "x"),
    "module integer input": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8, dtype=torch.long)), TypeError, "x"
    ),
    "module 2-D input": Bad(lambda: SinusoidalPositionalEncoding(8)(torch.zeros(3, 8)), ValueError, "x"),
    "module wrong feature size": Bad(lambda: SinusoidalPositionalEncoding(8)(torch.zeros(2, 3, 6)), ValueError, "x"),
    "module input one row over the limit": Bad(  # an expanded view of one row: nothing allocated by the caller
        lambda: SinusoidalPositionalEncoding(8, max_len=4)(torch.zeros(1, 1, 8).expand(1, _ONE_BEYOND, 8)),
        ValueError,
        "x",
        large=True,
    ),
    "learned zero max_len": Bad(lambda: LearnedPositionalEmbedding(0, 8), ValueError, "max_len"),
    "learned table over the limit": Bad(
        lambda: LearnedPositionalEmbedding(2**30, 1024), ValueError, "max_len", large=True
    ),
    "learned input longer than max_len": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 5, 8)), ValueError, "max_len"
    ),
    "rotary module dynamic with head_dim 2": Bad(lambda: RotaryEmbedding(2, scaling=_DYNAMIC), ValueError, "head_dim"),
    "rotary module numpy input": Bad(lambda: RotaryEmbedding(8)(np.zeros((3, 8))), TypeError, "x"),
    "rotary module integer input": Bad(lambda: RotaryEmbedding(8)(torch.zeros(3, 8, dtype=torch.long)), TypeError, "x"),
    "rotary module 1-D input": Bad(lambda: RotaryEmbedding(8)(torch.zeros(8)), ValueError, "x"),
    "rotary module wrong head_dim": Bad(lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 6)), ValueError, "x"),
    "rotary module float offset": Bad(lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=1.0), TypeError, "offset"),
    "rotary module negative offset": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=-1), ValueError, "offset"
    ),
    "rotary module offset past 2**53": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=2**53), ValueError, "offset"
    ),
    "rotary module offset and positions": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=1, positions=torch.arange(3)), ValueError, "offset"
    ),
    "rotary module int positions": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(2, 8), positions=2), TypeError, "positions"
    ),
    "rotary module bool positions": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(2, 8), positions=torch.tensor([True, False])),
        TypeError,
        "positions",
    ),
    "rotary module positions on the meta device": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(2, 8), positions=torch.zeros(2, device="meta")),
        ValueError,
        "positions",
    ),
    "rotary module integer positions not exact in float64": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(1, 8), positions=torch.tensor([2**53 + 1])), ValueError, "positions"
    ),
    "rotary module host integer positions not exact in float64": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(1, 8), positions=[-(2**53) - 1]), ValueError, "positions"
    ),
    "rotary module short positions": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), positions=torch.arange(2)), ValueError, "positions"
    ),
    "rotary module seq_dim of the last axis": Bad(lambda: RotaryEmbedding(8, seq_dim=-1), ValueError, "seq_dim"),
    "rotary module float seq_dim": Bad(lambda: RotaryEmbedding(8, seq_dim=1.0), TypeError, "seq_dim"),
    "rotary module seq_dim out of range": Bad(lambda: RotaryEmbedding(8, seq_dim=16), ValueError, "seq_dim"),
    "rotary module seq_dim beyond x": Bad(
        lambda: RotaryEmbedding(8, seq_dim=2)(torch.zeros(2, 3, 8)), ValueError, "seq_dim"
    ),
    "rotary module float tensor offset": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=torch.tensor(1.0)), TypeError, "offset"
    ),
    "rotary module 1-D tensor offset": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=torch.tensor([1])), ValueError, "offset"
    ),
    "rotary module negative tensor offset": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=torch.tensor(-1)), ValueError, "offset"
    ),
    "rotary module offset tensor on the meta device": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=torch.tensor(1, device="meta")), ValueError, "offset"
    ),
    "rotary module batch positions not broadcasting": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(2, 4, 3, 8), positions=torch.zeros(3, 3)), ValueError, "positions"
    ),
    "rotary module batch positions for x without a batch axis": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), positions=torch.zeros(1, 3)), ValueError, "positions"
    ),
    "rotary module ragged positions": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(1, 2, 8), positions=[[0, 1], [0]]), ValueError, "positions"
    ),
    "rotary module infinite batch positions": Bad(
        lambda: RotaryEmbedding(8)(torch.zeros(2, 2, 8), positions=[[0, 1], [0, np.inf]]), ValueError, "positions"
    ),
    "rotary module odd rotary_dim": Bad(lambda: RotaryEmbedding(8, rotary_dim=3), ValueError, "rotary_dim"),
    "rotary module rotary_dim over head_dim": Bad(lambda: RotaryEmbedding(8, rotary_dim=10), ValueError, "rotary_dim"),
    "rotary module float rotary_dim": Bad(lambda: RotaryEmbedding(8, rotary_dim=4.0), TypeError, "rotary_dim"),
    "rotary module rotary_dim disagreeing with the factor": Bad(
        lambda: RotaryEmbedding(8, rotary_dim=6, scaling={"partial_rotary_factor": 0.5}), ValueError, "rotary_dim"
    ),
    "rotary module partial factor leaving an odd part": Bad(
        lambda: RotaryEmbedding(10, scaling={"partial_rotary_factor": 0.5}), ValueError, "partial_rotary_factor"
    ),
    "rotary module unknown dynamic_length": Bad(
        lambda: RotaryEmbedding(8, dynamic_length="max"), ValueError, "dynamic_length"
    ),
    "rotary module base disagreeing with rope_theta": Bad(
        lambda: RotaryEmbedding(8, base=10000.0, scaling={"rope_theta": 500000.0}), ValueError, "rope_theta"
    ),
    "rotary module pair with keys of another length": Bad(
        lambda: RotaryEmbedding(8).rotate_pair(torch.zeros(1, 3, 8), torch.zeros(1, 4, 8)), ValueError, "k"
    ),
    "rotary module pair with keys not a tensor": Bad(
        lambda: RotaryEmbedding(8).rotate_pair(torch.zeros(1, 3, 8), np.zeros((1, 3, 8))), TypeError, "k"
    ),
    "sinusoidal module negative offset": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8), offset=-1), ValueError, "offset"
    ),
    "sinusoidal module float offset": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8), offset=0.5), TypeError, "offset"
    ),
    "sinusoidal module offset and positions": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8), offset=1, positions=[0, 1, 2]),
        ValueError,
        "offset",
    ),
    "sinusoidal module positions of another batch": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(2, 3, 8), positions=torch.zeros(3, 3)),
        ValueError,
        "positions",
    ),
    "sinusoidal module 3-D positions": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(2, 3, 8), positions=torch.zeros(1, 2, 3)),
        ValueError,
        "positions",
    ),
    "sinusoidal module complex positions": Bad(
        lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 8), positions=torch.zeros(2, dtype=torch.complex64)),
        TypeError,
        "positions",
    ),
    "learned module offset past max_len": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 8), offset=3), ValueError, "offset"
    ),
    "learned module tensor offset past max_len": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 8), offset=torch.tensor(3)), ValueError, "offset"
    ),
    "learned module fractional positions": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 8), positions=[0.5, 1.0]), TypeError, "positions"
    ),
    "learned module position past max_len": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 8), positions=[0, 4]), ValueError, "positions"
    ),
    "learned module negative position": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 8), positions=[[-1, 0]]), ValueError, "positions"
    ),
    "learned module offset and positions": Bad(
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 8), offset=1, positions=[0, 1]),
        ValueError,
        "offset",
    ),
    "alibi module causal with fewer keys": Bad(lambda: ALiBiBias(4)(5, 3), ValueError, "k_len"),
    "alibi module causal with a negative offset": Bad(lambda: ALiBiBias(4)(2, 3, offset=-1), ValueError, "offset"),
    "alibi module offset past 2**52": Bad(
        lambda: ALiBiBias(4)(2, 3, causal=False, offset=2**52 + 1), ValueError, "offset"
    ),
    "alibi module float tensor offset": Bad(lambda: ALiBiBias(4)(2, 3, offset=torch.tensor(1.0)), TypeError, "offset"),
    "t5 module float offset": Bad(lambda: T5RelativeBias(4)(2, 3, offset=1.5), TypeError, "offset"),
    "t5 module offset past 2**52": Bad(lambda: T5RelativeBias(4)(2, 3, offset=-(2**52) - 1), ValueError, "offset"),
    "t5 buckets 1-D tensor offset": Bad(
        lambda: T5RelativeBias(4).buckets(2, 3, offset=torch.tensor([1, 2])), ValueError, "offset"
    ),
    "t5 module table over the limit": Bad(
        lambda: T5RelativeBias(2**20, num_buckets=2**10), ValueError, "num_buckets", large=True
    ),
    "alibi score_mod causal with a negative offset": Bad(
        lambda: ALiBiBias(4).score_mod(offset=torch.tensor(-1)), ValueError, "offset"
    ),
    "t5 score_mod lookup over the limit": Bad(
        lambda: T5RelativeBias(1, max_distance=2**27).score_mod(), ValueError, "max_distance", large=True
    ),
    "causal mask_mod float offset": Bad(lambda: causal_mask_mod(0.5), TypeError, "offset"),
    "shaw layer heads not dividing": Bad(lambda: ShawRelativeAttention(10, 4, max_distance=2), ValueError, "n_heads"),
    "shaw layer more heads than features": Bad(
        lambda: ShawRelativeAttention(4, 8, max_distance=2), ValueError, "n_heads"
    ),
    "shaw layer d_model x d_model over the limit": Bad(
        lambda: ShawRelativeAttention(2**15, 1, max_distance=2), ValueError, "d_model", large=True
    ),
    "shaw layer relative table over the limit": Bad(
        lambda: ShawRelativeAttention(2**12, 1, max_distance=2**20), ValueError, "max_distance", large=True
    ),
    "shaw layer input of another dtype": Bad(
        lambda: ShawRelativeAttention(8, 2, max_distance=2)(torch.zeros(1, 3, 8, dtype=torch.float64)),
        TypeError,
        "x",
    ),
    "shaw layer relative indices over the limit": Bad(
        lambda: ShawRelativeAttention(8, 2, max_distance=2).relative_indices(2**15), ValueError, "seq", large=True
    ),
    # --- posenc.testing: bad arguments to a check, not a failing implementation -----------------------
    "check of a non-callable table_fn": Bad(lambda: assert_sinusoidal_matches_reference(None), TypeError, "table_fn"),
    "check of an odd d_model": Bad(
        lambda: assert_sinusoidal_matches_reference(sinusoidal, d_model=7), ValueError, "d_model"
    ),
    "check with too many positions": Bad(
        lambda: assert_sinusoidal_matches_reference(sinusoidal, n_positions=2**40), ValueError, "n_positions"
    ),
    "check of a table over its own limit": Bad(
        lambda: assert_sinusoidal_matches_reference(sinusoidal, n_positions=2**12, d_model=2**12),
        ValueError,
        "n_positions",
        large=True,
    ),
    "check with zero atol": Bad(lambda: assert_sinusoidal_matches_reference(sinusoidal, atol=0.0), ValueError, "atol"),
    "odd-width check of a str": Bad(lambda: assert_sinusoidal_odd_width_handled("table"), TypeError, "table_fn"),
    "odd-width check of an even width": Bad(
        lambda: assert_sinusoidal_odd_width_handled(sinusoidal, d_model=8), ValueError, "d_model"
    ),
    "angle check of an array": Bad(lambda: assert_rotary_angles_accurate(np.zeros(3)), TypeError, "rotate_fn"),
    "angle check over its own limit": Bad(
        lambda: assert_rotary_angles_accurate(print, head_dim=4096, n_positions=2**12),
        ValueError,
        "n_positions",
        large=True,
    ),
    "score check of None": Bad(lambda: assert_rotary_scores_depend_on_offset_only(None), TypeError, "rotate_fn"),
    "score check float distances": Bad(
        lambda: assert_rotary_scores_depend_on_offset_only(print, distances=[0.5]), TypeError, "distances"
    ),
    "score check distances as a str": Bad(
        lambda: assert_rotary_scores_depend_on_offset_only(print, distances="03"), TypeError, "distances"
    ),
    "score check empty shifts": Bad(
        lambda: assert_rotary_scores_depend_on_offset_only(print, shifts=[]), ValueError, "shifts"
    ),
    "score check negative shift": Bad(
        lambda: assert_rotary_scores_depend_on_offset_only(print, shifts=[-1]), ValueError, "shifts"
    ),
    "score check str seed": Bad(lambda: assert_rotary_scores_depend_on_offset_only(print, seed="0"), TypeError, "seed"),
    "offset check of None": Bad(lambda: assert_rotary_offset_matches_slice(None), TypeError, "fn"),
    "offset check zero offset": Bad(lambda: assert_rotary_offset_matches_slice(print, offset=0), ValueError, "offset"),
    "independence check of a str": Bad(lambda: assert_rotary_calls_independent("rope"), TypeError, "fn"),
    "sequence-axis check of a str": Bad(lambda: assert_rotary_uses_sequence_axis("rope"), TypeError, "fn"),
    "sequence-axis check with one head": Bad(
        lambda: assert_rotary_uses_sequence_axis(print, n_heads=1), ValueError, "n_heads"
    ),
    "sequence-axis check with one position": Bad(
        lambda: assert_rotary_uses_sequence_axis(print, seq_len=1), ValueError, "seq_len"
    ),
    "sequence-axis check with no batch": Bad(
        lambda: assert_rotary_uses_sequence_axis(print, batch=0), ValueError, "batch"
    ),
    "sequence-axis check too large": Bad(
        lambda: assert_rotary_uses_sequence_axis(print, batch=64, seq_len=4096, n_heads=64), ValueError, "batch"
    ),
    "independence check long not longer": Bad(
        lambda: assert_rotary_calls_independent(print, short_len=16, long_len=16), ValueError, "long_len"
    ),
    "independence check over its own limit": Bad(
        lambda: assert_rotary_calls_independent(print, head_dim=4096, long_len=2**16),
        ValueError,
        "long_len",
        large=True,
    ),
    "layout check of a str": Bad(lambda: assert_layouts_agree_after_permutation("w[perm]"), TypeError, "convert_fn"),
    "slopes check of an int": Bad(lambda: assert_alibi_slopes_match_reference(8), TypeError, "slopes_fn"),
    "yarn factor check of a str": Bad(lambda: assert_yarn_attention_factor("rope", None), TypeError, "rotate_fn"),
    "yarn factor check of an unknown key": Bad(
        lambda: assert_yarn_attention_factor(print, {"rope_type": "yarn", "factor": 2.0, "msc": 1.0}),
        ValueError,
        "scaling",
    ),
    "yarn factor check over its own limit": Bad(
        lambda: assert_yarn_attention_factor(print, None, head_dim=4096, n_positions=4096),
        ValueError,
        "n_positions",
        large=True,
    ),
    "config check of a str": Bad(lambda: assert_rotary_matches_config("rope", _LLAMA_CONFIG), TypeError, "rotate_fn"),
    "config check of an M-RoPE config": Bad(
        lambda: assert_rotary_matches_config(print, _MROPE_CONFIG), ValueError, "assert_mrope_axes_match"
    ),
    "config check past float32's exact integers": Bad(
        lambda: assert_rotary_matches_config(print, _LLAMA_CONFIG, positions=[0, 2**24 + 1]), ValueError, "positions"
    ),
    "conformance check of a str": Bad(lambda: assert_rotary_conforms("rope", _LLAMA_CONFIG), TypeError, "rotate_fn"),
    "conformance check in bfloat16 NumPy arrays": Bad(
        lambda: assert_rotary_conforms(print, _LLAMA_CONFIG, dtype="bfloat16"), ValueError, "dtype"
    ),
    "conformance check of an unknown layout of x": Bad(
        lambda: assert_rotary_conforms(print, _LLAMA_CONFIG, qkv_format="bsd"), ValueError, "qkv_format"
    ),
    "conformance check of an M-RoPE config": Bad(
        lambda: assert_rotary_conforms(print, _MROPE_CONFIG), ValueError, "assert_mrope_axes_match"
    ),
    "conformance case of a NoPE layer": Bad(
        lambda: RotaryCase("nope", {}, "", LayerRotary("full_attention", False, 8), 16, None, (0,)),
        ValueError,
        "rotary",
    ),
    "conformance cases in an unknown dtype": Bad(lambda: rotary_cases(dtypes=("float8",)), ValueError, "dtypes"),
    "conformance cases with a dtype named twice": Bad(
        lambda: rotary_cases(dtypes=("float32", "float32")), ValueError, "dtypes"
    ),
    "conformance positions of an empty context": Bad(lambda: rotary_positions(0), ValueError, "trained_length"),
    "mrope axes check of None": Bad(lambda: assert_mrope_axes_match(None, [2, 1, 1]), TypeError, "rotate_fn"),
    "mrope axes check sections of the wrong sum": Bad(
        lambda: assert_mrope_axes_match(print, [2, 1, 1]), ValueError, "mrope_section"
    ),
    "mrope axes check unknown assignment": Bad(
        lambda: assert_mrope_axes_match(print, [24, 20, 20], assignment="blocked"), ValueError, "assignment"
    ),
    "rerotation check of an array": Bad(lambda: assert_rerotated_keys_accurate(np.zeros(3)), TypeError, "make_cache"),
    "rerotation check of an odd head": Bad(
        lambda: assert_rerotated_keys_accurate(print, head_dim=7), ValueError, "head_dim"
    ),
    "rerotation check over its own limit": Bad(
        lambda: assert_rerotated_keys_accurate(print, window=4096, n_evictions=4096), ValueError, "window", large=True
    ),
    "alibi offset check of an array": Bad(lambda: assert_alibi_offset_matches_slice(np.zeros(3)), TypeError, "bias_fn"),
    "alibi offset check query longer than the cache": Bad(
        lambda: assert_alibi_offset_matches_slice(print, k_len=4, q_lens=[5]), ValueError, "q_lens"
    ),
    "alibi offset check over its own limit": Bad(
        lambda: assert_alibi_offset_matches_slice(print, n_heads=1024, k_len=4096), ValueError, "k_len", large=True
    ),
    "bucket check of None": Bad(lambda: assert_t5_buckets_in_range(None), TypeError, "bucket_fn"),
    "bucket check one bucket": Bad(lambda: assert_t5_buckets_in_range(print, num_buckets=1), ValueError, "num_buckets"),
    "exact bucket check of None": Bad(lambda: assert_t5_buckets_exact(None), TypeError, "bucket_fn"),
    "boundaries of float positions": Bad(lambda: t5_float32_boundaries([1.5]), TypeError, "relative_position"),
    # Xu et al.'s condition on a head's frequencies
    "condition frequencies 2-D": Bad(lambda: base_condition_holds(np.ones((2, 4)), 16), ValueError, "frequencies"),
    "condition frequencies empty": Bad(lambda: base_condition_sum([], 16), ValueError, "frequencies"),
    "condition frequencies of str": Bad(lambda: base_condition_error("1.0", 16), TypeError, "frequencies"),
    "condition frequencies of NaN": Bad(lambda: base_condition_holds([1.0, np.nan], 16), ValueError, "frequencies"),
    "condition length 0": Bad(lambda: base_condition_holds([1.0, 0.1], 0), ValueError, "length"),
    "condition length times pairs too large": Bad(
        lambda: base_condition_sum(np.ones(64), MAX_TABLE_ELEMENTS // 32), ValueError, "length", large=True
    ),
    "condition head_dim below the pairs": Bad(
        lambda: base_condition_holds([1.0, 0.1, 0.01], 16, head_dim=4), ValueError, "head_dim"
    ),
    "condition head_dim odd": Bad(lambda: base_condition_sum([1.0, 0.1], 16, head_dim=7), ValueError, "head_dim"),
    "condition head_dim of a float": Bad(lambda: base_condition_sum([1.0], 16, head_dim=8.0), TypeError, "head_dim"),
    # rotary on several axes
    "axial axes not dividing the head": Bad(lambda: axial_frequencies(12, 4), ValueError, "head_dim"),
    "axial no axis": Bad(lambda: axial_frequencies(8, 0), ValueError, "n_axes"),
    "mrope sections of the wrong sum": Bad(lambda: mrope_frequencies(16, [4, 2, 1]), ValueError, "mrope_section"),
    "mrope two sections": Bad(lambda: mrope_frequencies(16, [4, 4]), ValueError, "mrope_section"),
    "mrope section of a str": Bad(lambda: mrope_frequencies(16, "422"), TypeError, "mrope_section"),
    "mrope interleaving cannot give the sections": Bad(
        lambda: mrope_frequencies(16, [2, 3, 3], assignment="interleaved"), ValueError, "mrope_section"
    ),
    "mrope unknown assignment": Bad(
        lambda: mrope_frequencies(16, [4, 2, 2], assignment="mixed"), ValueError, "assignment"
    ),
    "multiaxis frequencies 1-D": Bad(
        lambda: rotate_multiaxis(np.ones((3, 8)), np.ones((3, 1)), [1.0, 0.1]), ValueError, "frequencies"
    ),
    "multiaxis more pairs than the head": Bad(
        lambda: rotate_multiaxis(np.ones((3, 4)), np.ones((3, 1)), np.ones((1, 3))), ValueError, "frequencies"
    ),
    "multiaxis positions with the wrong axes": Bad(
        lambda: rotate_multiaxis(np.ones((3, 4)), np.ones((3, 3)), axial_frequencies(4, 2)), ValueError, "positions"
    ),
    "multiaxis positions of another length": Bad(
        lambda: rotate_multiaxis(np.ones((3, 4)), np.ones((2, 2)), axial_frequencies(4, 2)), ValueError, "positions"
    ),
    "multiaxis angles overflow": Bad(
        lambda: rotate_multiaxis(np.ones((1, 4)), [[1e300, 0.0]], np.full((2, 2), 1e300)), ValueError, "positions"
    ),
    "multiaxis x of str": Bad(lambda: rotate_multiaxis("x", np.ones((3, 2)), axial_frequencies(4, 2)), TypeError, "x"),
    "multiaxis integer coordinate not exact in float64": Bad(
        lambda: rotate_multiaxis(np.ones((1, 4)), [[2**53 + 1, 0]], axial_frequencies(4, 2)), ValueError, "positions"
    ),
    "multiaxis module frequencies of NaN": Bad(
        lambda: MultiAxisRotaryEmbedding([[float("nan"), 1.0]]), ValueError, "frequencies"
    ),
    "multiaxis module learnable of an int": Bad(
        lambda: MultiAxisRotaryEmbedding(axial_frequencies(4, 2), learnable=1), TypeError, "learnable"
    ),
    "multiaxis forward positions not broadcasting into x": Bad(
        lambda: MultiAxisRotaryEmbedding(axial_frequencies(4, 2))(torch.ones(2, 3, 4), torch.ones(5, 2, 3, 2)),
        ValueError,
        "positions",
    ),
    "multiaxis forward integer coordinate not exact in float64": Bad(
        lambda: MultiAxisRotaryEmbedding(axial_frequencies(4, 2))(torch.ones(1, 4), torch.tensor([[2**53 + 1, 0]])),
        ValueError,
        "positions",
    ),
    "multiaxis forward (batch, seq, n_axes) positions against (batch, heads, seq, head_dim)": Bad(
        lambda: MultiAxisRotaryEmbedding(axial_frequencies(4, 2))(torch.ones(2, 2, 3, 4), torch.ones(2, 3, 2)),
        ValueError,
        "positions",
    ),
    "multiaxis forward x too narrow": Bad(
        lambda: MultiAxisRotaryEmbedding(axial_frequencies(8, 2))(torch.ones(3, 4), torch.ones(3, 2)), ValueError, "x"
    ),
    # position from content
    "forgetting log gate positive": Bad(lambda: forgetting_bias([0.0, 0.1]), ValueError, "log_forget"),
    "forgetting log gates of str": Bad(lambda: forgetting_bias("gates"), TypeError, "log_forget"),
    "forgetting no token": Bad(lambda: forgetting_bias(np.zeros((2, 0))), ValueError, "log_forget"),
    "forgetting more queries than keys": Bad(lambda: forgetting_bias(np.zeros(3), q_len=4), ValueError, "q_len"),
    "forgetting too large": Bad(lambda: forgetting_bias(np.zeros(2**15)), ValueError, "q_len", large=True),
    "forgetting module log gate NaN": Bad(
        lambda: torch_forgetting_bias(torch.tensor([0.0, float("nan")])), ValueError, "log_forget"
    ),
    "forgetting module log gate positive": Bad(
        lambda: torch_forgetting_bias(torch.tensor([0.0, 0.5])), ValueError, "log_forget"
    ),
    "forgetting module log gates of ints": Bad(
        lambda: torch_forgetting_bias(torch.zeros(3, dtype=torch.int64)), TypeError, "log_forget"
    ),
    "forgetting module too large": Bad(lambda: torch_forgetting_bias(torch.zeros(2**15)), ValueError, "q_len"),
    "forgetting score_mod without heads": Bad(
        lambda: forgetting_score_mod(torch.zeros(2, 3)), ValueError, "log_forget"
    ),
    "forgetting score_mod negative offset": Bad(
        lambda: forgetting_score_mod(torch.zeros(1, 1, 3), offset=-1), ValueError, "offset"
    ),
    "forgetting gate no width": Bad(lambda: ForgettingGate(0, 2), ValueError, "d_model"),
    "forgetting gate no head": Bad(lambda: ForgettingGate(4, 0), ValueError, "n_heads"),
    "forgetting gate x of another width": Bad(lambda: ForgettingGate(4, 2)(torch.zeros(1, 3, 5)), ValueError, "x"),
    "stick-breaking logits 1-D": Bad(lambda: stick_breaking_weights([0.0, 1.0]), ValueError, "logits"),
    "stick-breaking logits NaN": Bad(lambda: stick_breaking_weights([[float("nan")]]), ValueError, "logits"),
    "stick-breaking attend_current of an int": Bad(
        lambda: stick_breaking_weights(np.zeros((2, 2)), attend_current=1), TypeError, "attend_current"
    ),
    "stick-breaking module logits of ints": Bad(
        lambda: torch_stick_breaking_weights(torch.zeros(2, 2, dtype=torch.int64)), TypeError, "logits"
    ),
    "stick-breaking float offset": Bad(
        lambda: torch_stick_breaking_weights(torch.zeros(2, 2), offset=torch.tensor(1.0)), TypeError, "offset"
    ),
    "stick-breaking torch logits NaN": Bad(
        lambda: torch_stick_breaking_weights(torch.full((2, 2), float("nan"))), ValueError, "logits"
    ),
    "stick-breaking attention NaN queries": Bad(
        lambda: stick_breaking_attention(
            torch.full((1, 2, 4), float("nan")), torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)
        ),
        ValueError,
        "NaN",
    ),
    "stick-breaking attention head widths differ": Bad(
        lambda: stick_breaking_attention(torch.zeros(1, 2, 4), torch.zeros(1, 3, 5), torch.zeros(1, 3, 4)),
        ValueError,
        "q",
    ),
    "stick-breaking attention dtypes differ": Bad(
        lambda: stick_breaking_attention(torch.zeros(2, 4), torch.zeros(2, 4).double(), torch.zeros(2, 4)),
        TypeError,
        "k",
    ),
    "stick-breaking attention zero scale": Bad(
        lambda: stick_breaking_attention(torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4), scale=0.0),
        ValueError,
        "scale",
    ),
    "cope gate above 1": Bad(lambda: cope_positions([[0.5, 1.5]]), ValueError, "gates"),
    "cope table of another width": Bad(
        lambda: cope_logits(np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((5, 3))), ValueError, "embeddings"
    ),
    "cope q and k differ": Bad(
        lambda: cope_logits(np.zeros((3, 4)), np.zeros((2, 4)), np.zeros((5, 4))), ValueError, "q"
    ),
    "cope negative scale": Bad(
        lambda: cope_logits(np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((5, 4)), scale=-1.0), ValueError, "scale"
    ),
    "cope module no position": Bad(lambda: CoPE(0, 4), ValueError, "n_positions"),
    "cope module q of another width": Bad(lambda: CoPE(5, 4)(torch.zeros(3, 5), torch.zeros(3, 3)), ValueError, "q"),
    "cope module gate logits NaN": Bad(
        lambda: CoPE(5, 4)(torch.zeros(1, 4), torch.tensor([[float("nan")]])), ValueError, "gate_logits"
    ),
    "cope module gate logits of other queries": Bad(
        lambda: CoPE(5, 4)(torch.zeros(3, 4), torch.zeros(2, 3)), ValueError, "gate_logits"
    ),
    "cope module fewer keys than queries": Bad(
        lambda: CoPE(5, 4).logits(torch.zeros(3, 4), torch.zeros(2, 4)), ValueError, "k"
    ),
    "sink sinks of another head count": Bad(lambda: sink_softmax(np.zeros((2, 1, 3)), [0.0]), ValueError, "sinks"),
    "sink logits +inf": Bad(lambda: sink_softmax(np.full((1, 1, 2), np.inf), [0.0]), ValueError, "logits"),
    "sink row with nothing to share": Bad(
        lambda: sink_softmax(np.full((1, 1, 2), -np.inf), [-np.inf]), ValueError, "logits"
    ),
    "sink module no head": Bad(lambda: AttentionSink(0), ValueError, "n_heads"),
    "sink module logits of another head count": Bad(
        lambda: AttentionSink(2)(torch.zeros(3, 4, 4)), ValueError, "logits"
    ),
    "sink module lse of another shape": Bad(
        lambda: AttentionSink(2).rescale(torch.zeros(2, 4, 8), torch.zeros(2, 5)), ValueError, "lse"
    ),
    "path beta of another shape": Bad(
        lambda: path_logits(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(4)), ValueError, "beta"
    ),
    "path w of another shape": Bad(
        lambda: path_logits(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 3)), np.zeros(3)), ValueError, "w"
    ),
    "path module dtypes differ": Bad(
        lambda: torch_path_logits(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2).double(), torch.zeros(3)),
        TypeError,
        "w",
    ),
    "path gate no head width": Bad(lambda: PaTHGate(8, 2, 0), ValueError, "head_dim"),
}


@pytest.mark.parametrize("bad", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_input_raises_an_error_naming_the_parameter(bad):
    with pytest.raises(bad.error) as raised:
        bad.call()
    assert names_parameter(str(raised.value), bad.names), f"{bad.names!r} not named in {str(raised.value)!r}"


def test_oversized_requests_are_refused_before_a_large_allocation():
    """No row marked ``large`` allocates 1 MB (as NumPy and Python allocations, which tracemalloc sees) first."""
    large = {label: bad for label, bad in BAD_CALLS.items() if bad.large}
    assert len(large) >= 10
    peaks = {}
    for label, bad in large.items():
        tracemalloc.start()
        try:
            with pytest.raises(bad.error):
                bad.call()
            _, peaks[label] = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert {label: peak for label, peak in peaks.items() if peak >= 1_000_000} == {}


def test_the_limit_is_exactly_max_table_elements():
    """A table of exactly MAX_TABLE_ELEMENTS elements is accepted and one row more is refused.

    Built on the meta device, the accepted table allocates no memory.
    """
    rows = MAX_TABLE_ELEMENTS // 64
    with torch.device("meta"):
        embedding = LearnedPositionalEmbedding(rows, 64)
        assert embedding.weight.numel() == MAX_TABLE_ELEMENTS
        with pytest.raises(ValueError) as raised:
            LearnedPositionalEmbedding(rows + 1, 64)
    assert names_parameter(str(raised.value), "max_len")


# --- Census: every public name of the library has a row above ------------------------------------------------


def public_objects():
    """``{"module.name": object}`` for every name in the ``__all__`` of each of LIBRARY_MODULES."""
    objects = {}
    for module_name in LIBRARY_MODULES:
        module = importlib.import_module(module_name)
        assert hasattr(module, "__all__"), f"{module_name} declares no __all__"
        objects.update({f"{module_name}.{name}": getattr(module, name) for name in module.__all__})
    return objects


def takes_no_input(obj) -> bool:
    """Whether a public name takes nothing to validate: a constant or type alias, or a callable without parameters."""
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return True
    parameters = inspect.signature(obj).parameters
    return not [name for name in parameters if name != "self"]


def objects_called_by(call):
    """The module-level objects a row's lambda refers to by name."""
    return [call.__globals__[name] for name in call.__code__.co_names if name in call.__globals__]


def test_every_public_name_has_a_bad_input_row():
    """Each public function and class of the library is called with bad input above."""
    covered = [obj for bad in BAD_CALLS.values() for obj in objects_called_by(bad.call)]
    missing = [
        name
        for name, obj in public_objects().items()
        if not takes_no_input(obj) and not any(obj is other for other in covered)
    ]
    assert missing == [], f"public names without a row in BAD_CALLS: {missing}"
