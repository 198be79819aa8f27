"""fairseq's ``SinusoidalPositionalEmbedding`` is not the paper's table in another column order.

The book once said so. fairseq's ``get_embedding`` (fairseq/modules/sinusoidal_positional_embedding.py,
facebookresearch/fairseq at commit 3d262bb2) spaces ``half_dim = embedding_dim // 2`` frequencies by
``log(10000) / (half_dim - 1)``, so they run from 1 down to exactly 1/10000, as tensor2tensor's do; it
concatenates ``[sin | cos]``, appends a zero column when the width is odd, and zeroes row
``padding_idx``. ``utils.make_positions`` numbers the non-padding tokens from ``padding_idx + 1``. The
function below is written here from that description (fairseq is not a dependency) and compared with
``posenc.sinusoidal(..., layout="halves")``, which keeps the paper's frequencies.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import frequencies, layout_permutation, sinusoidal


def fairseq_style_table(n_rows, width, padding_idx=None):
    """Row ``r`` is fairseq's embedding of position ``r``, in float64 (fairseq computes in float32)."""
    half = width // 2
    omega = np.exp(-np.arange(half) * (math.log(10000.0) / (half - 1)))
    angles = np.multiply.outer(np.arange(n_rows, dtype=np.float64), omega)
    table = np.zeros((n_rows, width))
    table[:, :half] = np.sin(angles)
    table[:, half : 2 * half] = np.cos(angles)
    if padding_idx is not None:
        table[padding_idx] = 0.0
    return table


def fairseq_style_positions(tokens, padding_idx):
    """Row of the table each token reads: ``padding_idx + k`` for the k-th non-padding token (k >= 1)."""
    not_pad = np.asarray(tokens) != padding_idx
    return np.cumsum(not_pad, axis=1) * not_pad + padding_idx


def paper_halves(positions, width):
    return sinusoidal(np.asarray(positions, dtype=np.float64), width, layout="halves", dtype=np.float64)


@given(st.integers(2, 1024).map(lambda half: 2 * half))
def test_fairseq_frequencies_end_at_1e_4_the_papers_stop_short_of_it(width):
    """Pair j: fairseq 10000^(-j/(h-1)), paper 10000^(-j/h), h = width/2; ratio 10000^(-j/(h(h-1)))."""
    half = width // 2
    fairseq_omega = np.exp(-np.arange(half) * (math.log(10000.0) / (half - 1)))
    paper_omega = frequencies(width)
    assert fairseq_omega[0] == paper_omega[0] == 1.0
    assert fairseq_omega[-1] == pytest.approx(1e-4, rel=1e-12)
    assert paper_omega[-1] > 1e-4
    j = np.arange(half)
    assert np.allclose(fairseq_omega / paper_omega, 10000.0 ** (-j / (half * (half - 1))), rtol=1e-12, atol=0)
    # the largest relative gap is at the last pair: 1 - 10000^(-2/width), 3.5 % for width 512
    gap = 1 - fairseq_omega / paper_omega
    assert gap.max() == pytest.approx(1 - 10000.0 ** (-2 / width), rel=1e-9)


def test_fairseq_table_differs_from_the_papers_halves_beyond_the_first_frequency():
    """Same layout, same positions: only the frequency-1 columns (sin and cos of pair 0) agree.

    For width 512 and positions 0..4095, every other column differs somewhere (by more than 0.005 even in
    the slowest column), by up to 1.99 (almost the full range 2); and no column permutation of posenc's
    table gives fairseq's.
    """
    width, n = 512, 4096
    ours = paper_halves(np.arange(n), width)
    theirs = fairseq_style_table(n, width)
    gap = np.abs(ours - theirs).max(axis=0)
    half = width // 2
    frequency_one = [0, half]
    assert np.all(gap[frequency_one] == 0.0)
    others = np.delete(gap, frequency_one)
    assert others.min() > 0.005
    assert 1.9 < others.max() <= 2.0
    # the same numbers in other columns? No: the multisets of a row differ beyond rounding
    assert np.abs(np.sort(ours[n - 1]) - np.sort(theirs[n - 1])).max() > 0.1
    # whereas posenc's own layouts are exact permutations of one another
    interleaved = sinusoidal(np.arange(n, dtype=np.float64), width, dtype=np.float64)
    assert np.array_equal(interleaved[:, layout_permutation("interleaved", "halves", width)], ours)


@pytest.mark.parametrize("padding_idx", [0, 1, 5])
def test_fairseq_positions_start_at_padding_idx_plus_one(padding_idx):
    """Token t of an unpadded sequence reads the sinusoid at position padding_idx + 1 + t, not t;
    padding tokens read the zero row, wherever they sit."""
    width, pad = 16, padding_idx
    tokens = np.array([[7, 8, 9, 10, pad, pad], [pad, pad, 7, 8, 9, 10]])
    rows = fairseq_style_positions(tokens, pad)
    table = fairseq_style_table(rows.max() + 1, width, padding_idx=pad)
    vectors = table[rows]
    first_pair = np.sin(np.arange(1, 5) + pad)  # column 0: sin(1 * position)
    assert np.array_equal(vectors[0, :4, 0], first_pair)
    assert np.array_equal(vectors[1, 2:, 0], first_pair)  # left padding does not shift the numbering
    assert np.all(vectors[0, 4:] == 0) and np.all(vectors[1, :2] == 0)
    # against posenc: the frequency-1 columns are the paper's at position t + padding_idx + 1, not at t
    shifted = paper_halves(np.arange(4) + pad + 1, width)
    assert np.allclose(vectors[0, :4, [0, width // 2]], shifted[:, [0, width // 2]].T, rtol=0, atol=1e-15)
    ours = paper_halves(np.arange(4), width)
    assert ours[0, 0] == 0.0 and vectors[0, 0, 0] == pytest.approx(math.sin(pad + 1), abs=1e-15)
    assert np.abs(vectors[0, :4, 0] - ours[:, 0]).max() > 0.25


def test_fairseq_pads_an_odd_width_with_a_zero_column_posenc_refuses_it():
    """Width 7: fairseq gives three frequencies, [sin | cos], and a zero column 7; posenc raises."""
    theirs = fairseq_style_table(32, 7)
    assert np.all(theirs[:, 6] == 0.0)
    assert np.array_equal(theirs[:, :6], fairseq_style_table(32, 6))
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal(32, 7)
