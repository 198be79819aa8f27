"""Bad input gets a TypeError or ValueError naming the parameter, before anything large is allocated."""

import tracemalloc

import numpy as np
import pytest
import torch

from posenc._validation import check_table_size
from posenc import MAX_TABLE_ELEMENTS, frequencies, layout_permutation, sinusoidal, translation_matrix
from posenc.nn import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from posenc.plotting import heatmap

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
    "learned wrong feature size": (lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 2, 9)), ValueError, "d_model"),
    "learned too long": (lambda: LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 5, 8)), ValueError, "max_len"),
    # plotting
    "heatmap of a vector": (lambda: heatmap(np.zeros(5)), ValueError, "table"),
}


@pytest.mark.parametrize("call, exception, named", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_input_raises_an_error_naming_the_parameter(call, exception, named):
    with pytest.raises(exception) as raised:
        call()
    assert named in str(raised.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sinusoidal(2**40, 512),
        lambda: sinusoidal(MAX_TABLE_ELEMENTS // 64 + 1, 64),
        lambda: translation_matrix(1.0, 2**16),
        lambda: frequencies(2**40),
        lambda: SinusoidalPositionalEncoding(1024, max_len=2**30),
    ],
    ids=["2**40 positions", "one row over the limit", "65536-wide matrix", "2**40 frequencies", "module cache"],
)
def test_oversized_requests_fail_before_allocating(call):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError):
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_the_limit_is_exactly_max_table_elements():
    check_table_size(MAX_TABLE_ELEMENTS // 64, 64)
    with pytest.raises(ValueError, match="positions x d_model"):
        check_table_size(MAX_TABLE_ELEMENTS // 64 + 1, 64)
