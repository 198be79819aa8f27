"""Bad input gets a TypeError or ValueError naming the parameter, before anything large is allocated."""

import tracemalloc

import numpy as np
import pytest
import torch

from posenc import (
    MAX_TABLE_ELEMENTS,
    alibi_bias,
    alibi_slopes,
    frequencies,
    layout_permutation,
    shaw_relative_indices,
    sinusoidal,
    t5_relative_bucket,
    translation_matrix,
)
from posenc._validation import check_table_size
from posenc.bench import run as bench_run
from posenc.chapters.add_or_concatenate import layer_cost, logit_terms, mean_abs_cosine
from posenc.chapters.extrapolation import (
    TinyCausalLM,
    markov_chain,
    position_interpolation,
    sample_sequences,
    train_and_evaluate,
)
from posenc.chapters.plotting import heatmap
from posenc.chapters.prototypes import binary_code, dyadic_dials, normalised_count, raw_count
from posenc.chapters.tabular import FeatureTokenizer, TinyFTTransformer, permute_features, train_regression
from posenc.nn import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    ShawRelativeAttention,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
)
from posenc.nn.rotary import RotaryEmbedding
from posenc.rotary import rotary_attention_factor, rotary_frequencies, rotary_weight_permutation, rotate
from posenc.testing import (
    assert_alibi_slopes_match_reference,
    assert_layouts_agree_after_permutation,
    assert_rotary_angles_accurate,
    assert_rotary_calls_independent,
    assert_rotary_offset_matches_slice,
    assert_rotary_scores_depend_on_offset_only,
    assert_sinusoidal_matches_reference,
    assert_sinusoidal_odd_width_handled,
    assert_t5_buckets_exact,
    assert_t5_buckets_in_range,
    t5_float32_boundaries,
)

pytestmark = pytest.mark.argument_check


def _tiny_regression(y_shape=(4,)):
    """A valid (model, x_train, y_train, x_test, y_test) for train_regression, with the y_train shape given."""
    x = torch.zeros(4, 3)
    return TinyFTTransformer(3, d_token=4), x, torch.zeros(y_shape), x, torch.zeros(4)


# (call, exception, text the message must contain)
BAD_CALLS = {
    # d_model
    "odd d_model": (lambda: sinusoidal(4, 7), ValueError, "d_model"),
    "zero d_model": (lambda: frequencies(0), ValueError, "d_model"),
    "negative d_model": (lambda: translation_matrix(1.0, -4), ValueError, "d_model"),
    "bool d_model": (lambda: sinusoidal(4, True), TypeError, "d_model"),
    "str d_model": (lambda: frequencies("512"), TypeError, "d_model"),
    "float d_model": (lambda: layout_permutation("interleaved", "halves", 8.0), TypeError, "d_model"),
    "huge d_model": (lambda: frequencies(2**40), ValueError, "d_model"),
    # positions
    "negative count": (lambda: sinusoidal(-1, 8), ValueError, "positions"),
    "bool count": (lambda: sinusoidal(True, 8), TypeError, "positions"),
    "str count": (lambda: sinusoidal("10", 8), TypeError, "positions"),
    "float count": (lambda: sinusoidal(10.0, 8), TypeError, "positions"),
    "None positions": (lambda: sinusoidal(None, 8), TypeError, "positions"),
    "nan position": (lambda: sinusoidal([0.0, np.nan], 8), ValueError, "positions"),
    "infinite position": (lambda: sinusoidal(np.array([np.inf]), 8), ValueError, "positions"),
    "2-D positions": (lambda: sinusoidal(np.zeros((2, 2)), 8), ValueError, "positions"),
    "bool positions": (lambda: sinusoidal(np.array([True, False]), 8), TypeError, "positions"),
    "complex positions": (lambda: sinusoidal(np.array([1j]), 8), TypeError, "positions"),
    "string positions": (lambda: sinusoidal(["a", "b"], 8), TypeError, "positions"),
    "too many positions": (lambda: sinusoidal(2**40, 512), ValueError, "positions"),
    "one row over the limit": (lambda: sinusoidal(MAX_TABLE_ELEMENTS // 64 + 1, 64), ValueError, "positions"),
    "65536-wide matrix": (lambda: translation_matrix(1.0, 2**16), ValueError, "d_model"),
    "module cache over the limit": (lambda: SinusoidalPositionalEncoding(1024, max_len=2**30), ValueError, "max_len"),
    "raw count one over the limit": (lambda: raw_count(MAX_TABLE_ELEMENTS + 1), ValueError, "n_positions"),
    "normalised count 2**40": (lambda: normalised_count(2**40), ValueError, "n_positions"),
    "binary too many positions for its bits": (lambda: binary_code(2**40, 10), ValueError, "n_bits"),
    # start and step (an int count only)
    "nan start": (lambda: sinusoidal(4, 8, start=float("nan")), ValueError, "start"),
    "str step": (lambda: sinusoidal(4, 8, step="1"), TypeError, "step"),
    "step with a position array": (lambda: sinusoidal([0.0, 1.0], 8, step=2.0), ValueError, "step"),
    "zero threads": (lambda: sinusoidal(4, 8, n_threads=0), ValueError, "n_threads"),
    "float threads": (lambda: sinusoidal(4, 8, n_threads=2.0), TypeError, "n_threads"),
    "overflowing progression": (lambda: sinusoidal(4, 8, start=1e308, step=1e308), ValueError, "start + step"),
    "bench odd d_model": (lambda: bench_run([(16, 7)]), ValueError, "d_model"),
    "bench size not a pair": (lambda: bench_run([2048]), TypeError, "sizes"),
    # base
    "zero base": (lambda: sinusoidal(4, 8, base=0.0), ValueError, "base"),
    "negative base": (lambda: frequencies(8, base=-10000.0), ValueError, "base"),
    "base of one": (lambda: frequencies(8, base=1.0), ValueError, "base"),
    "infinite base": (lambda: translation_matrix(1.0, 8, base=np.inf), ValueError, "base"),
    "nan base": (lambda: sinusoidal(4, 8, base=float("nan")), ValueError, "base"),
    "str base": (lambda: sinusoidal(4, 8, base="1e4"), TypeError, "base"),
    "bool base": (lambda: sinusoidal(4, 8, base=True), TypeError, "base"),
    # layout
    "unknown layout": (lambda: sinusoidal(4, 8, layout="concatenated"), ValueError, "layout"),
    "non-str layout": (lambda: translation_matrix(1.0, 8, layout=0), TypeError, "layout"),
    "unknown source": (lambda: layout_permutation("paper", "halves", 8), ValueError, "source"),
    "unknown target": (lambda: layout_permutation("halves", None, 8), TypeError, "target"),
    # dtype
    "int dtype": (lambda: sinusoidal(4, 8, dtype=np.int32), TypeError, "dtype"),
    "complex dtype": (lambda: sinusoidal(4, 8, dtype=np.complex64), TypeError, "dtype"),
    "bogus dtype": (lambda: sinusoidal(4, 8, dtype="float99"), TypeError, "dtype"),
    "None dtype": (lambda: sinusoidal(4, 8, dtype=None), TypeError, "dtype"),
    # offset
    "nan offset": (lambda: translation_matrix(float("nan"), 8), ValueError, "offset"),
    "str offset": (lambda: translation_matrix("1", 8), TypeError, "offset"),
    "array offset": (lambda: translation_matrix(np.array([1.0, 2.0]), 8), TypeError, "offset"),
    # the modules
    "module odd d_model": (lambda: SinusoidalPositionalEncoding(5), ValueError, "d_model"),
    "module zero max_len": (lambda: SinusoidalPositionalEncoding(8, max_len=0), ValueError, "max_len"),
    "module float max_len": (lambda: SinusoidalPositionalEncoding(8, max_len=1e3), TypeError, "max_len"),
    "module huge max_len": (lambda: SinusoidalPositionalEncoding(512, max_len=2**40), ValueError, "max_len"),
    "module dropout of one": (lambda: SinusoidalPositionalEncoding(8, dropout=1.0), ValueError, "dropout"),
    "module str dropout": (lambda: SinusoidalPositionalEncoding(8, dropout="0.1"), TypeError, "dropout"),
    "module bad layout": (lambda: SinusoidalPositionalEncoding(8, layout="rope"), ValueError, "layout"),
    "wrong feature size": (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(2, 3, 6)), ValueError, "d_model"),
    "two-dimensional input": (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(3, 8)), ValueError, "x"),
    "integer input": (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8, dtype=torch.long)), TypeError, "x"),
    "numpy input": (lambda: SinusoidalPositionalEncoding(8)(np.zeros((1, 3, 8))), TypeError, "x"),
    "learned zero max_len": (lambda: LearnedPositionalEmbedding(0, 8), ValueError, "max_len"),
    "learned bool d_model": (lambda: LearnedPositionalEmbedding(4, False), TypeError, "d_model"),
    "learned huge table": (lambda: LearnedPositionalEmbedding(2**30, 1024), ValueError, "max_len"),
    "learned wrong feature size": (
        lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 9)),
        ValueError,
        "d_model",
    ),
    "learned too long": (lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 5, 8)), ValueError, "max_len"),
    # rotary position embedding (posenc.rotary, posenc.nn.rotary)
    "rotary odd head_dim": (lambda: rotary_frequencies(7), ValueError, "head_dim"),
    "rotary str head_dim": (lambda: rotary_frequencies("64"), TypeError, "head_dim"),
    "rotary huge head_dim": (lambda: rotary_frequencies(2**40), ValueError, "head_dim"),
    "rotary base of one": (lambda: rotary_frequencies(8, base=1.0), ValueError, "base"),
    "rotary scaling not a dict": (lambda: rotary_frequencies(8, scaling="linear"), TypeError, "scaling"),
    "rotary unknown rope_type": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "longrope"}),
        ValueError,
        "rope_type",
    ),
    "rotary non-str rope_type": (lambda: rotary_frequencies(8, scaling={"rope_type": 1}), TypeError, "rope_type"),
    "rotary type and rope_type differ": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "type": "dynamic", "factor": 2.0}),
        ValueError,
        "rope_type",
    ),
    "rotary missing factor": (lambda: rotary_frequencies(8, scaling={"rope_type": "linear"}), ValueError, "factor"),
    "rotary factor below one": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factor": 0.5}),
        ValueError,
        "factor",
    ),
    "rotary str factor": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factor": "2"}),
        TypeError,
        "factor",
    ),
    "rotary nan factor": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factor": float("nan")}),
        ValueError,
        "factor",
    ),
    "rotary misspelt key": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "linear", "factr": 2.0}),
        ValueError,
        "factr",
    ),
    "rotary factor with default": (lambda: rotary_frequencies(8, scaling={"factor": 2.0}), ValueError, "factor"),
    "rotary dynamic without length": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "dynamic", "factor": 2.0}),
        ValueError,
        "original_max_position_embeddings",
    ),
    "rotary dynamic head_dim 2": (
        lambda: rotary_frequencies(
            2, scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
        ),
        ValueError,
        "head_dim",
    ),
    "rotary float trained length": (
        lambda: rotary_frequencies(
            8, scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096.0}
        ),
        TypeError,
        "original_max_position_embeddings",
    ),
    "rotary yarn beta_fast below beta_slow": (
        lambda: rotary_frequencies(
            8,
            scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "beta_fast": 0.5},
        ),
        ValueError,
        "beta_fast",
    ),
    "rotary yarn zero beta_slow": (
        lambda: rotary_frequencies(
            8, scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "beta_slow": 0}
        ),
        ValueError,
        "beta_slow",
    ),
    "rotary yarn int truncate": (
        lambda: rotary_frequencies(
            8, scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "truncate": 1}
        ),
        TypeError,
        "truncate",
    ),
    "rotary llama3 high below low": (
        lambda: rotary_frequencies(
            8,
            scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "low_freq_factor": 4.0,
                "high_freq_factor": 1.0,
            },
        ),
        ValueError,
        "high_freq_factor",
    ),
    "rotary rope_theta disagrees with base": (
        lambda: rotary_frequencies(8, scaling={"rope_type": "default", "rope_theta": 500000.0}),
        ValueError,
        "rope_theta",
    ),
    "rotary partial rotary factor": (
        lambda: rotary_frequencies(8, scaling={"partial_rotary_factor": 0.5}),
        ValueError,
        "partial_rotary_factor",
    ),
    "rotary negative seq_len": (lambda: rotary_frequencies(8, seq_len=-1), ValueError, "seq_len"),
    "rotary str seq_len": (lambda: rotary_frequencies(8, seq_len="4096"), TypeError, "seq_len"),
    "attention factor of a str": (lambda: rotary_attention_factor("yarn"), TypeError, "scaling"),
    "attention factor negative": (
        lambda: rotary_attention_factor(
            {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8, "attention_factor": -1.0}
        ),
        ValueError,
        "attention_factor",
    ),
    "rotate odd head_dim": (lambda: rotate(np.zeros((3, 5)), 3), ValueError, "x"),
    "rotate 1-D x": (lambda: rotate(np.zeros(4), 1), ValueError, "x"),
    "rotate complex x": (lambda: rotate(np.zeros((2, 4), dtype=complex), 2), TypeError, "x"),
    "rotate ragged x": (lambda: rotate([[1.0, 2.0], [3.0]], 2), TypeError, "x"),
    "rotate positions of the wrong length": (lambda: rotate(np.zeros((3, 4)), [0.0, 1.0]), ValueError, "positions"),
    "rotate nan position": (lambda: rotate(np.zeros((2, 4)), [0.0, np.nan]), ValueError, "positions"),
    "rotate cos_first layout": (lambda: rotate(np.zeros((2, 4)), 2, layout="cos_first"), ValueError, "layout"),
    "rotate bad scaling": (lambda: rotate(np.zeros((2, 4)), 2, scaling={"rope_type": "ntk"}), ValueError, "rope_type"),
    "permutation unknown source": (lambda: rotary_weight_permutation("gptj", "halves", 8), ValueError, "source"),
    "permutation None target": (lambda: rotary_weight_permutation("halves", None, 8), TypeError, "target"),
    "permutation odd head_dim": (lambda: rotary_weight_permutation("halves", "halves", 9), ValueError, "head_dim"),
    "permutation zero heads": (
        lambda: rotary_weight_permutation("halves", "interleaved", 8, n_heads=0),
        ValueError,
        "n_heads",
    ),
    "permutation too many rows": (
        lambda: rotary_weight_permutation("halves", "interleaved", 2**20, n_heads=2**20),
        ValueError,
        "n_heads",
    ),
    "rotary module odd head_dim": (lambda: RotaryEmbedding(7), ValueError, "head_dim"),
    "rotary module cos_first": (lambda: RotaryEmbedding(8, layout="cos_first"), ValueError, "layout"),
    "rotary module bad scaling": (lambda: RotaryEmbedding(8, scaling={"rope_type": "ntk"}), ValueError, "rope_type"),
    "rotary module wrong head_dim": (lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 6)), ValueError, "head_dim"),
    "rotary module 1-D input": (lambda: RotaryEmbedding(8)(torch.zeros(8)), ValueError, "x"),
    "rotary module integer input": (lambda: RotaryEmbedding(8)(torch.zeros(3, 8, dtype=torch.long)), TypeError, "x"),
    "rotary module numpy input": (lambda: RotaryEmbedding(8)(np.zeros((3, 8))), TypeError, "x"),
    "rotary module negative offset": (lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=-1), ValueError, "offset"),
    "rotary module float offset": (lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=1.0), TypeError, "offset"),
    "rotary module offset past 2**53": (
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=2**53),
        ValueError,
        "offset",
    ),
    "rotary module offset and positions": (
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), offset=1, positions=torch.arange(3)),
        ValueError,
        "offset",
    ),
    "rotary module short positions": (
        lambda: RotaryEmbedding(8)(torch.zeros(3, 8), positions=torch.arange(2)),
        ValueError,
        "positions",
    ),
    "rotary module nan positions": (
        lambda: RotaryEmbedding(8)(torch.zeros(2, 8), positions=torch.tensor([0.0, float("nan")])),
        ValueError,
        "positions",
    ),
    "rotary module bool positions": (
        lambda: RotaryEmbedding(8)(torch.zeros(2, 8), positions=torch.tensor([True, False])),
        TypeError,
        "positions",
    ),
    "rotary module int positions": (lambda: RotaryEmbedding(8)(torch.zeros(2, 8), positions=2), TypeError, "positions"),
    # plotting
    "heatmap of a vector": (lambda: heatmap(np.zeros(5)), ValueError, "table"),
    # the prototype codes (posenc.chapters.prototypes)
    "raw count negative": (lambda: raw_count(-1), ValueError, "n_positions"),
    "raw count float": (lambda: raw_count(3.0), TypeError, "n_positions"),
    "raw count too many": (lambda: raw_count(2**40), ValueError, "n_positions"),
    "normalised count of one": (lambda: normalised_count(1), ValueError, "n_positions"),
    "normalised count bool": (lambda: normalised_count(True), TypeError, "n_positions"),
    "normalised count too many": (lambda: normalised_count(MAX_TABLE_ELEMENTS + 1), ValueError, "n_positions"),
    "binary too few bits": (lambda: binary_code(9, 3), ValueError, "n_bits"),
    "binary zero bits": (lambda: binary_code(1, 0), ValueError, "n_bits"),
    "binary str bits": (lambda: binary_code(4, "2"), TypeError, "n_bits"),
    "binary negative count": (lambda: binary_code(-1, 4), ValueError, "n_positions"),
    "binary float count": (lambda: binary_code(4.0, 4), TypeError, "n_positions"),
    "binary non-bool centred": (lambda: binary_code(4, 2, centred="yes"), TypeError, "centred"),
    "binary huge table": (lambda: binary_code(2**30, 40), ValueError, "n_bits"),
    "dials zero columns": (lambda: dyadic_dials(4, 0), ValueError, "n_columns"),
    "dials bool columns": (lambda: dyadic_dials(4, True), TypeError, "n_columns"),
    "dials negative count": (lambda: dyadic_dials(-3, 4), ValueError, "n_positions"),
    "dials huge table": (lambda: dyadic_dials(2**20, 2**10), ValueError, "n_columns"),
    # add or concatenate (posenc.chapters.add_or_concatenate)
    "cost zero d_model": (lambda: layer_cost(0), ValueError, "d_model"),
    "cost float d_model": (lambda: layer_cost(512.0), TypeError, "d_model"),
    "cost unknown combine": (lambda: layer_cost(8, combine="concat"), ValueError, "combine"),
    "cost non-str combine": (lambda: layer_cost(8, combine=1), TypeError, "combine"),
    "cost add with d_position": (lambda: layer_cost(8, d_position=4), ValueError, "d_position"),
    "cost concat without d_position": (lambda: layer_cost(8, combine="concat_wide"), ValueError, "d_position"),
    "cost negative d_position": (lambda: layer_cost(8, combine="concat_qkv", d_position=-1), ValueError, "d_position"),
    "cost zero seq_len": (lambda: layer_cost(8, seq_len=0), ValueError, "seq_len"),
    "cost bool ffn_multiplier": (lambda: layer_cost(8, ffn_multiplier=True), TypeError, "ffn_multiplier"),
    "logits 1-D tokens": (
        lambda: logit_terms(np.zeros(4), np.zeros((1, 4)), np.eye(4), np.eye(4)),
        ValueError,
        "tokens",
    ),
    "logits mismatched positions": (
        lambda: logit_terms(np.zeros((2, 4)), np.zeros((3, 4)), np.eye(4), np.eye(4)),
        ValueError,
        "positions",
    ),
    "logits wrong w_query rows": (
        lambda: logit_terms(np.zeros((2, 4)), np.zeros((2, 4)), np.eye(3), np.eye(3)),
        ValueError,
        "w_query",
    ),
    "logits nan w_key": (
        lambda: logit_terms(np.zeros((2, 2)), np.zeros((2, 2)), np.eye(2), np.full((2, 2), np.nan)),
        ValueError,
        "w_key",
    ),
    "logits str tokens": (lambda: logit_terms("x", np.zeros((2, 2)), np.eye(2), np.eye(2)), TypeError, "tokens"),
    "logits complex positions": (
        lambda: logit_terms(np.zeros((1, 2)), np.ones((1, 2)) * 1j, np.eye(2), np.eye(2)),
        TypeError,
        "positions",
    ),
    "cosine zero row": (lambda: mean_abs_cosine(np.zeros((1, 3)), np.ones((1, 3))), ValueError, "rows_a"),
    "cosine widths differ": (lambda: mean_abs_cosine(np.ones((1, 3)), np.ones((1, 4))), ValueError, "rows_b"),
    "cosine empty": (lambda: mean_abs_cosine(np.ones((1, 3)), np.ones((0, 3))), ValueError, "rows_b"),
    "cosine None": (lambda: mean_abs_cosine(None, np.ones((1, 3))), TypeError, "rows_a"),
    "cosine ragged rows": (lambda: mean_abs_cosine([[1.0, 2.0], [3.0]], np.ones((1, 2))), TypeError, "rows_a"),
    # the tabular models (posenc.chapters.tabular)
    "tokenizer zero features": (lambda: FeatureTokenizer(0, 4), ValueError, "n_features"),
    "tokenizer str d_token": (lambda: FeatureTokenizer(3, "4"), TypeError, "d_token"),
    "tokenizer int bias flag": (lambda: FeatureTokenizer(3, 4, bias=1), TypeError, "bias"),
    "tokenizer huge table": (lambda: FeatureTokenizer(2**20, 2**10), ValueError, "n_features"),
    "tokenizer wrong width": (lambda: FeatureTokenizer(3, 4)(torch.zeros(2, 5)), ValueError, "x"),
    "tokenizer integer input": (lambda: FeatureTokenizer(3, 4)(torch.zeros(2, 3, dtype=torch.long)), TypeError, "x"),
    "model heads not dividing": (lambda: TinyFTTransformer(3, d_token=6, n_heads=4), ValueError, "n_heads"),
    "model bool n_layers": (lambda: TinyFTTransformer(3, n_layers=True), TypeError, "n_layers"),
    "model float64 input": (
        lambda: TinyFTTransformer(3, d_token=4)(torch.zeros(2, 3, dtype=torch.float64)),
        TypeError,
        "x",
    ),
    "permute repeated index": (lambda: permute_features(FeatureTokenizer(3, 4), [0, 0, 1]), ValueError, "permutation"),
    "permute a str": (lambda: permute_features(FeatureTokenizer(3, 4), "012"), TypeError, "permutation"),
    "permute a plain module": (lambda: permute_features(torch.nn.Linear(2, 2), [0, 1]), TypeError, "module"),
    "train zero steps": (lambda: train_regression(*_tiny_regression(), steps=0), ValueError, "steps"),
    "train nan lr": (lambda: train_regression(*_tiny_regression(), lr=float("nan")), ValueError, "lr"),
    "train 2-D targets": (lambda: train_regression(*_tiny_regression(y_shape=(4, 1))), ValueError, "y_train"),
    "train not a model": (lambda: train_regression(torch.nn.Linear(3, 1), *_tiny_regression()[1:]), TypeError, "model"),
    "model too many layers": (lambda: TinyFTTransformer(3, n_layers=65), ValueError, "n_layers"),
    "model encoder too large": (lambda: TinyFTTransformer(1, d_token=2**13, n_heads=1), ValueError, "d_token"),
    "model int norm_first": (lambda: TinyFTTransformer(3, norm_first=1), TypeError, "norm_first"),
    "tokenizer str shared_weight": (lambda: FeatureTokenizer(3, 4, shared_weight="no"), TypeError, "shared_weight"),
    "tokenizer 3-D input": (lambda: FeatureTokenizer(3, 4)(torch.zeros(2, 3, 1)), ValueError, "x"),
    "permute short permutation": (
        lambda: permute_features(TinyFTTransformer(3, d_token=4), [0, 1]),
        ValueError,
        "permutation",
    ),
    "permute float permutation": (
        lambda: permute_features(FeatureTokenizer(3, 4), [0.0, 1.0, 2.0]),
        TypeError,
        "permutation",
    ),
    "train too many steps": (lambda: train_regression(*_tiny_regression(), steps=10**6), ValueError, "steps"),
    # train short, test long (posenc.chapters.extrapolation): every check runs before any training
    "chain negative seed": (lambda: markov_chain(-1), ValueError, "seed"),
    "chain float seed": (lambda: markov_chain(1.0), TypeError, "seed"),
    "chain 33 symbols": (lambda: markov_chain(0, n_symbols=33), ValueError, "n_symbols"),
    "chain huge alphabet": (lambda: markov_chain(0, n_symbols=2**20), ValueError, "n_symbols"),
    "chain zero concentration": (lambda: markov_chain(0, concentration=0.0), ValueError, "concentration"),
    "chain str concentration": (lambda: markov_chain(0, concentration="0.1"), TypeError, "concentration"),
    "sample from a dict": (lambda: sample_sequences({}, 2, 4, seed=0), TypeError, "chain"),
    "sample zero sequences": (
        lambda: sample_sequences(markov_chain(0, n_symbols=2), 0, 4, seed=0),
        ValueError,
        "n_sequences",
    ),
    "sample huge length": (
        lambda: sample_sequences(markov_chain(0, n_symbols=2), 1, 2**40, seed=0),
        ValueError,
        "length",
    ),
    "sample bool seed": (lambda: sample_sequences(markov_chain(0, n_symbols=2), 1, 4, seed=True), TypeError, "seed"),
    "lm unknown scheme": (lambda: TinyCausalLM("relative"), ValueError, "scheme"),
    "lm None scheme": (lambda: TinyCausalLM(None), TypeError, "scheme"),
    "lm heads not dividing": (lambda: TinyCausalLM("none", d_model=30, n_heads=4), ValueError, "n_heads"),
    "lm odd rotary head": (lambda: TinyCausalLM("rotary", d_model=12, n_heads=4), ValueError, "d_model"),
    "lm odd sinusoidal width": (lambda: TinyCausalLM("sinusoidal", d_model=5, n_heads=1), ValueError, "d_model"),
    "lm one-symbol vocabulary": (lambda: TinyCausalLM("none", vocab_size=1), ValueError, "vocab_size"),
    "lm huge width": (lambda: TinyCausalLM("none", d_model=2**20, n_heads=1), ValueError, "d_model"),
    "lm too many layers": (lambda: TinyCausalLM("none", n_layers=17), ValueError, "n_layers"),
    "lm huge max_len": (lambda: TinyCausalLM("learned", max_len=2**30), ValueError, "max_len"),
    "lm float tokens": (lambda: TinyCausalLM("none")(torch.zeros(2, 3)), TypeError, "tokens"),
    "lm 1-D tokens": (lambda: TinyCausalLM("none")(torch.zeros(3, dtype=torch.long)), ValueError, "tokens"),
    "lm symbol out of range": (lambda: TinyCausalLM("none")(torch.full((1, 3), 16)), ValueError, "tokens"),
    "lm learned too long": (
        lambda: TinyCausalLM("learned", max_len=4)(torch.zeros(1, 5, dtype=torch.long)),
        ValueError,
        "max_len",
    ),
    "lm huge batch": (
        lambda: TinyCausalLM("none")(torch.zeros(1, 1, dtype=torch.long).expand(4096, 4096)),
        ValueError,
        "tokens",
    ),
    "lm positions without rotary": (
        lambda: TinyCausalLM("alibi")(torch.zeros(1, 3, dtype=torch.long), positions=torch.zeros(3)),
        ValueError,
        "positions",
    ),
    "lm positions wrong length": (
        lambda: TinyCausalLM("rotary")(torch.zeros(1, 3, dtype=torch.long), positions=torch.zeros(4)),
        ValueError,
        "positions",
    ),
    "lm integer positions": (
        lambda: TinyCausalLM("rotary")(torch.zeros(1, 3, dtype=torch.long), positions=torch.arange(3)),
        TypeError,
        "positions",
    ),
    "train unknown scheme": (lambda: train_and_evaluate("abs", seed=0), ValueError, "scheme"),
    "train missing seed": (lambda: train_and_evaluate("none", seed=None), TypeError, "seed"),
    "lm-train zero steps": (lambda: train_and_evaluate("none", seed=0, steps=0), ValueError, "steps"),
    "lm-train a million steps": (lambda: train_and_evaluate("none", seed=0, steps=10**6), ValueError, "steps"),
    "train eval_lens as str": (lambda: train_and_evaluate("none", seed=0, eval_lens="32"), TypeError, "eval_lens"),
    "train empty eval_lens": (lambda: train_and_evaluate("none", seed=0, eval_lens=()), ValueError, "eval_lens"),
    "train repeated eval_lens": (
        lambda: train_and_evaluate("none", seed=0, eval_lens=(32, 32)),
        ValueError,
        "eval_lens",
    ),
    "train eval length one": (lambda: train_and_evaluate("none", seed=0, eval_lens=(1,)), ValueError, "eval_lens"),
    "lm-train nan lr": (lambda: train_and_evaluate("none", seed=0, lr=float("nan")), ValueError, "lr"),
    "train lr above one": (lambda: train_and_evaluate("none", seed=0, lr=2.0), ValueError, "lr"),
    "train train_len one": (lambda: train_and_evaluate("none", seed=0, train_len=1), ValueError, "train_len"),
    "train huge batch": (
        lambda: train_and_evaluate("none", seed=0, batch_size=4096, train_len=4096),
        ValueError,
        "batch_size",
    ),
    "train long eval for 64 heads": (
        lambda: train_and_evaluate("none", seed=0, d_model=64, n_heads=64, eval_lens=(4096,)),
        ValueError,
        "n_heads",
    ),
    "train str concentration": (
        lambda: train_and_evaluate("none", seed=0, concentration="low"),
        TypeError,
        "concentration",
    ),
    "train zero eval_tokens": (lambda: train_and_evaluate("none", seed=0, eval_tokens=0), ValueError, "eval_tokens"),
    "interpolate factor one": (lambda: position_interpolation(seed=0, factor=1), ValueError, "factor"),
    "interpolate too long": (lambda: position_interpolation(seed=0, train_len=2048, factor=4), ValueError, "factor"),
    "interpolate zero fine-tuning": (
        lambda: position_interpolation(seed=0, finetune_steps=0),
        ValueError,
        "finetune_steps",
    ),
    "interpolate negative finetune_lr": (
        lambda: position_interpolation(seed=0, finetune_lr=-1e-3),
        ValueError,
        "finetune_lr",
    ),
    "interpolate odd rotary head": (lambda: position_interpolation(seed=0, d_model=12), ValueError, "d_model"),
    # ALiBi (posenc.alibi, posenc.nn.alibi)
    "alibi zero heads": (lambda: alibi_slopes(0), ValueError, "n_heads"),
    "alibi negative heads": (lambda: alibi_slopes(-8), ValueError, "n_heads"),
    "alibi float heads": (lambda: alibi_slopes(8.0), TypeError, "n_heads"),
    "alibi bool heads": (lambda: alibi_slopes(True), TypeError, "n_heads"),
    "alibi too many heads": (lambda: alibi_slopes(2**40), ValueError, "n_heads"),
    "alibi bias negative q_len": (lambda: alibi_bias(8, -1), ValueError, "q_len"),
    "alibi bias float k_len": (lambda: alibi_bias(8, 4, 4.0), TypeError, "k_len"),
    "alibi bias int causal": (lambda: alibi_bias(8, 4, causal=1), TypeError, "causal"),
    "alibi bias causal with fewer keys": (lambda: alibi_bias(8, 4, 2), ValueError, "offset"),
    "alibi bias causal negative offset": (lambda: alibi_bias(8, 4, offset=-1), ValueError, "offset"),
    "alibi bias huge offset": (lambda: alibi_bias(8, 4, causal=False, offset=2**60), ValueError, "offset"),
    "alibi bias float offset": (lambda: alibi_bias(8, 4, offset=1.5), TypeError, "offset"),
    "alibi bias too large": (lambda: alibi_bias(64, 2**12, 2**12), ValueError, "q_len"),
    "alibi module zero heads": (lambda: ALiBiBias(0), ValueError, "n_heads"),
    "alibi module str heads": (lambda: ALiBiBias("8"), TypeError, "n_heads"),
    "alibi module causal with fewer keys": (lambda: ALiBiBias(4)(5, 3), ValueError, "k_len"),
    "alibi module float q_len": (lambda: ALiBiBias(4)(5.0), TypeError, "q_len"),
    "alibi module None causal": (lambda: ALiBiBias(4)(5, causal=None), TypeError, "causal"),
    "alibi module too large": (lambda: ALiBiBias(64)(2**12, 2**12), ValueError, "q_len"),
    # T5 buckets (posenc.t5, posenc.nn.t5)
    "t5 float positions": (lambda: t5_relative_bucket(np.array([1.0, 2.0])), TypeError, "relative_position"),
    "t5 float scalar": (lambda: t5_relative_bucket(3.0), TypeError, "relative_position"),
    "t5 bool positions": (lambda: t5_relative_bucket(np.array([True])), TypeError, "relative_position"),
    "t5 str positions": (lambda: t5_relative_bucket("3"), TypeError, "relative_position"),
    "t5 None positions": (lambda: t5_relative_bucket(None), TypeError, "relative_position"),
    "t5 float tensor": (lambda: t5_relative_bucket(torch.ones(3)), TypeError, "relative_position"),
    "t5 odd buckets bidirectional": (lambda: t5_relative_bucket(0, num_buckets=33), ValueError, "num_buckets"),
    "t5 too few buckets bidirectional": (lambda: t5_relative_bucket(0, num_buckets=2), ValueError, "num_buckets"),
    "t5 one bucket": (lambda: t5_relative_bucket(0, bidirectional=False, num_buckets=1), ValueError, "num_buckets"),
    "t5 float buckets": (lambda: t5_relative_bucket(0, num_buckets=32.0), TypeError, "num_buckets"),
    "t5 max_distance at max_exact": (lambda: t5_relative_bucket(0, max_distance=8), ValueError, "max_distance"),
    "t5 zero max_distance": (lambda: t5_relative_bucket(0, max_distance=0), ValueError, "max_distance"),
    "t5 float max_distance": (lambda: t5_relative_bucket(0, max_distance=128.0), TypeError, "max_distance"),
    "t5 int bidirectional": (lambda: t5_relative_bucket(0, bidirectional=1), TypeError, "bidirectional"),
    "t5 module zero heads": (lambda: T5RelativeBias(0), ValueError, "n_heads"),
    "t5 module odd buckets": (lambda: T5RelativeBias(4, num_buckets=31), ValueError, "num_buckets"),
    "t5 module small max_distance": (lambda: T5RelativeBias(4, max_distance=4), ValueError, "max_distance"),
    "t5 module huge table": (lambda: T5RelativeBias(2**20, num_buckets=2**10), ValueError, "num_buckets"),
    "t5 module negative k_len": (lambda: T5RelativeBias(4)(3, -1), ValueError, "k_len"),
    "t5 module too large": (lambda: T5RelativeBias(64)(2**12, 2**12), ValueError, "q_len"),
    # Shaw (posenc.shaw, posenc.nn.shaw)
    "shaw negative max_distance": (lambda: shaw_relative_indices(4, max_distance=-1), ValueError, "max_distance"),
    "shaw float max_distance": (lambda: shaw_relative_indices(4, max_distance=2.0), TypeError, "max_distance"),
    "shaw missing max_distance": (lambda: shaw_relative_indices(4, max_distance=None), TypeError, "max_distance"),
    "shaw negative q_len": (lambda: shaw_relative_indices(-4, max_distance=2), ValueError, "q_len"),
    "shaw str k_len": (lambda: shaw_relative_indices(4, "4", max_distance=2), TypeError, "k_len"),
    "shaw huge offset": (lambda: shaw_relative_indices(4, max_distance=2, offset=-(2**60)), ValueError, "offset"),
    "shaw too large": (lambda: shaw_relative_indices(2**15, max_distance=2), ValueError, "q_len"),
    "shaw layer heads not dividing": (lambda: ShawRelativeAttention(10, 4, max_distance=2), ValueError, "n_heads"),
    "shaw layer zero heads": (lambda: ShawRelativeAttention(8, 0, max_distance=2), ValueError, "n_heads"),
    "shaw layer negative k": (lambda: ShawRelativeAttention(8, 2, max_distance=-1), ValueError, "max_distance"),
    "shaw layer int values": (lambda: ShawRelativeAttention(8, 2, max_distance=2, values=1), TypeError, "values"),
    "shaw layer str causal": (lambda: ShawRelativeAttention(8, 2, max_distance=2, causal="no"), TypeError, "causal"),
    "shaw layer huge d_model": (lambda: ShawRelativeAttention(2**15, 1, max_distance=2), ValueError, "d_model"),
    "shaw layer huge table": (lambda: ShawRelativeAttention(2**12, 1, max_distance=2**20), ValueError, "max_distance"),
    "shaw layer wrong width": (
        lambda: ShawRelativeAttention(8, 2, max_distance=2)(torch.zeros(1, 3, 6)),
        ValueError,
        "x",
    ),
    "shaw layer float64 input": (
        lambda: ShawRelativeAttention(8, 2, max_distance=2)(torch.zeros(1, 3, 8, dtype=torch.float64)),
        TypeError,
        "x",
    ),
    "shaw layer integer input": (
        lambda: ShawRelativeAttention(8, 2, max_distance=2)(torch.zeros(1, 3, 8, dtype=torch.long)),
        TypeError,
        "x",
    ),
    # the property checks (posenc.testing): bad arguments to the check itself, not a failing implementation
    "check of a non-callable table_fn": (lambda: assert_sinusoidal_matches_reference(None), TypeError, "table_fn"),
    "check of an odd d_model": (
        lambda: assert_sinusoidal_matches_reference(sinusoidal, d_model=7),
        ValueError,
        "d_model",
    ),
    "check of a huge table": (
        lambda: assert_sinusoidal_matches_reference(sinusoidal, n_positions=2**40),
        ValueError,
        "n_positions",
    ),
    "check with zero atol": (lambda: assert_sinusoidal_matches_reference(sinusoidal, atol=0.0), ValueError, "atol"),
    "check with a bad layout": (
        lambda: assert_sinusoidal_matches_reference(sinusoidal, layout="rope"),
        ValueError,
        "layout",
    ),
    "odd-width check of an even width": (
        lambda: assert_sinusoidal_odd_width_handled(sinusoidal, d_model=8),
        ValueError,
        "d_model",
    ),
    "odd-width check of a str": (lambda: assert_sinusoidal_odd_width_handled("table"), TypeError, "table_fn"),
    "angle check of an array": (lambda: assert_rotary_angles_accurate(np.zeros(3)), TypeError, "rotate_fn"),
    "angle check odd head_dim": (lambda: assert_rotary_angles_accurate(print, head_dim=7), ValueError, "head_dim"),
    "angle check too many positions": (
        lambda: assert_rotary_angles_accurate(print, n_positions=2**30),
        ValueError,
        "n_positions",
    ),
    "angle check cos_first layout": (
        lambda: assert_rotary_angles_accurate(print, layout="cos_first"),
        ValueError,
        "layout",
    ),
    "angle check nan atol": (lambda: assert_rotary_angles_accurate(print, atol=float("nan")), ValueError, "atol"),
    "score check float distances": (
        lambda: assert_rotary_scores_depend_on_offset_only(print, distances=[0.5]),
        TypeError,
        "distances",
    ),
    "score check empty shifts": (
        lambda: assert_rotary_scores_depend_on_offset_only(print, shifts=[]),
        ValueError,
        "shifts",
    ),
    "score check negative shift": (
        lambda: assert_rotary_scores_depend_on_offset_only(print, shifts=[-1]),
        ValueError,
        "shifts",
    ),
    "score check str seed": (lambda: assert_rotary_scores_depend_on_offset_only(print, seed="0"), TypeError, "seed"),
    "offset check zero offset": (lambda: assert_rotary_offset_matches_slice(print, offset=0), ValueError, "offset"),
    "offset check of None": (lambda: assert_rotary_offset_matches_slice(None), TypeError, "fn"),
    "offset check huge seq_len": (
        lambda: assert_rotary_offset_matches_slice(print, seq_len=2**40),
        ValueError,
        "seq_len",
    ),
    "independence check long not longer": (
        lambda: assert_rotary_calls_independent(print, short_len=16, long_len=16),
        ValueError,
        "long_len",
    ),
    "independence check huge long_len": (
        lambda: assert_rotary_calls_independent(print, long_len=2**40),
        ValueError,
        "long_len",
    ),
    "independence check bool head_dim": (
        lambda: assert_rotary_calls_independent(print, head_dim=True),
        TypeError,
        "head_dim",
    ),
    "layout check of a str": (lambda: assert_layouts_agree_after_permutation("w[perm]"), TypeError, "convert_fn"),
    "layout check unknown source": (
        lambda: assert_layouts_agree_after_permutation(print, source="paper"),
        ValueError,
        "source",
    ),
    "layout check zero heads": (
        lambda: assert_layouts_agree_after_permutation(print, n_heads=0),
        ValueError,
        "n_heads",
    ),
    "layout check huge d_in": (lambda: assert_layouts_agree_after_permutation(print, d_in=2**40), ValueError, "d_in"),
    "slopes check of an int": (lambda: assert_alibi_slopes_match_reference(8), TypeError, "slopes_fn"),
    "slopes check zero heads": (
        lambda: assert_alibi_slopes_match_reference(print, max_heads=0),
        ValueError,
        "max_heads",
    ),
    "slopes check negative rtol": (lambda: assert_alibi_slopes_match_reference(print, rtol=-1.0), ValueError, "rtol"),
    "bucket check int bidirectional": (
        lambda: assert_t5_buckets_in_range(print, bidirectional=1),
        TypeError,
        "bidirectional",
    ),
    "bucket check one bucket": (lambda: assert_t5_buckets_in_range(print, num_buckets=1), ValueError, "num_buckets"),
    "bucket check huge max_distance": (
        lambda: assert_t5_buckets_in_range(print, max_distance=2**40),
        ValueError,
        "max_distance",
    ),
    "bucket check of None": (lambda: assert_t5_buckets_in_range(None), TypeError, "bucket_fn"),
    "exact bucket check of None": (lambda: assert_t5_buckets_exact(None), TypeError, "bucket_fn"),
    "exact bucket check one bucket": (lambda: assert_t5_buckets_exact(print, num_buckets=1), ValueError, "num_buckets"),
    "boundaries of float positions": (lambda: t5_float32_boundaries([1.5]), TypeError, "relative_position"),
    "boundaries of odd buckets": (lambda: t5_float32_boundaries(0, num_buckets=33), ValueError, "num_buckets"),
    "t5 too many buckets": (lambda: t5_relative_bucket(0, num_buckets=2**16 + 2), ValueError, "num_buckets"),
}


@pytest.mark.parametrize("call, exception, named", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_input_raises_an_error_naming_the_parameter(call, exception, named):
    with pytest.raises(exception) as raised:
        call()
    assert named in str(raised.value)


def test_the_limit_is_exactly_max_table_elements():
    check_table_size(MAX_TABLE_ELEMENTS // 64, 64)
    with pytest.raises(ValueError, match="positions x d_model"):
        check_table_size(MAX_TABLE_ELEMENTS // 64 + 1, 64)


# --- Coverage: every public name of posenc has a row above -----------------------------------------------


def public_modules():
    """``posenc`` itself and every public submodule of the library (``posenc.nn``, ``posenc.testing``, ...).

    The census covers the library's public surface only: the book's helpers (``posenc.chapters``) and the
    benchmark check what a reader is likely to get wrong, and their rows above are not demanded name by name.
    """
    import importlib
    import pkgutil

    import posenc

    names = sorted(
        info.name
        for info in pkgutil.walk_packages(posenc.__path__, prefix="posenc.")
        if not any(part.startswith("_") for part in info.name.split("."))
        and not info.name.startswith(("posenc.chapters", "posenc.bench"))
    )
    return [posenc, *(importlib.import_module(name) for name in names)]


def public_objects():
    """``{"module.name": object}`` for every name in the ``__all__`` of every public module."""
    return {
        f"{module.__name__}.{name}": getattr(module, name)
        for module in public_modules()
        for name in getattr(module, "__all__", ())  # a module without __all__ fails the next test
    }


def test_every_public_module_declares_its_public_names():
    """The coverage below is over __all__: a public module (no leading underscore) must declare one."""
    assert [m.__name__ for m in public_modules() if not hasattr(m, "__all__")] == []


def takes_no_input(obj):
    """Public names that accept nothing to validate: constants, result records, functions without parameters."""
    import dataclasses
    import inspect

    if not callable(obj):
        return "a constant"
    if isinstance(obj, type) and (
        dataclasses.is_dataclass(obj) or (issubclass(obj, tuple) and hasattr(obj, "_fields"))
    ):
        return "a result record returned by a function"
    if not isinstance(obj, type) and not inspect.signature(obj).parameters:
        return "a function without parameters"
    return None


def objects_called_by(call):
    """The module-level objects a table row's lambda refers to by name."""
    return [call.__globals__[name] for name in call.__code__.co_names if name in call.__globals__]


def test_every_public_name_has_a_bad_input_row():
    """Each public function and class of posenc, in every module's __all__, is called with bad input above."""
    covered = [obj for call, _, _ in BAD_CALLS.values() for obj in objects_called_by(call)]
    missing = [
        name
        for name, obj in public_objects().items()
        if takes_no_input(obj) is None and not any(obj is other for other in covered)
    ]
    assert missing == [], f"public names without a row in BAD_CALLS: {missing}"


def test_every_bad_input_is_refused_before_a_large_allocation():
    """No row allocates 1 MB before it raises: validation comes first."""
    too_large = {}
    for label, (call, exception, _) in BAD_CALLS.items():
        tracemalloc.start()
        try:
            with pytest.raises(exception):
                call()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        if peak >= 1_000_000:
            too_large[label] = peak
    assert too_large == {}
