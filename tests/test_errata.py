"""The errata of the two research notes (book/errata.md), each pinned where code can check it.

Test ``test_erratum_NN_...`` belongs to erratum NN of the errata page. Its docstring quotes the note
briefly and states the property that holds instead. Every test asserts that property of ``posenc``, so
it fails if ``posenc`` implemented what the note says; most also compute the note's version to show
that the difference is real and not rounding.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from posenc import frequencies, sinusoidal, translation_matrix
from posenc.nn import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from posenc_book.prototypes import binary_code, dyadic_dials, normalised_count, raw_count
from posenc_book.tabular import TinyFTTransformer, permute_features


def table64(positions, d_model, **kwargs):
    return sinusoidal(positions, d_model, dtype=np.float64, **kwargs)


# --- The notes' versions, written out only to compare them with posenc --------------------------------


def note_004_printed_formula(positions, d_model):
    """Note 004's equations: sin(pos / 10000^(2i/d)) and cos(pos / 10000^((2i+1)/d))."""
    pairs = np.arange(d_model // 2)
    positions = np.asarray(positions, dtype=np.float64)[:, None]
    table = np.empty((positions.shape[0], d_model))
    table[:, 0::2] = np.sin(positions / 10000.0 ** (2 * pairs / d_model))
    table[:, 1::2] = np.cos(positions / 10000.0 ** ((2 * pairs + 1) / d_model))
    return table


def note_004_torch_code(positions, d_model):
    """Note 004's torch lines, with ``torch.arange(0, max_len)`` replaced by the given positions."""
    pos = torch.as_tensor(positions, dtype=torch.float).unsqueeze(1)
    wk = torch.exp(torch.arange(0, d_model, 2).float() * -(torch.log(torch.tensor(10000.0)) / d_model))
    pos_enc = torch.zeros((len(positions), d_model))
    pos_enc[:, 0::2] = torch.sin(pos * wk)
    pos_enc[:, 1::2] = torch.cos(pos * wk)
    return pos_enc


def note_004_vector_frequencies(d_model):
    """Note 004's vector form: w_k = 1 / 10000^(2k/D) for k = 1 ... D/2."""
    k = np.arange(1, d_model // 2 + 1)
    return 1.0 / 10000.0 ** (2 * k / d_model)


def note_001_numpy_code(max_position, d_model, min_freq=1e-4):
    """Note 001's NumPy ``positional_encoding`` (after Kernes): cos in even columns, sin in odd ones."""
    position = np.arange(max_position)
    freqs = min_freq ** (2 * (np.arange(d_model) // 2) / d_model)
    pos_enc = position.reshape(-1, 1) * freqs.reshape(1, -1)
    pos_enc[:, ::2] = np.cos(pos_enc[:, ::2])
    pos_enc[:, 1::2] = np.sin(pos_enc[:, 1::2])
    return pos_enc


def note_001_per_column_exponent(positions, d_model, min_freq=1e-4):
    """Note 001's prose version, omega_min ** (range(d) / d): a different frequency in every column."""
    positions = np.asarray(positions, dtype=np.float64)[:, None]
    angles = positions * min_freq ** (np.arange(d_model) / d_model)
    table = np.empty_like(angles)
    table[:, 0::2] = np.cos(angles[:, 0::2])
    table[:, 1::2] = np.sin(angles[:, 1::2])
    return table


def largest_error_of_best_linear_shift(make_table, offset, positions):
    """Fit the best matrix T with table(x) @ T = table(x + offset) by least squares; return the worst miss."""
    before, after = make_table(positions), make_table(positions + offset)
    matrix, *_ = np.linalg.lstsq(before, after, rcond=None)
    return np.abs(before @ matrix - after).max()


# --- Note 001: the tabular caveat -----------------------------------------------------------------------


def test_erratum_01_without_feature_identity_attention_cannot_tell_columns_apart():
    """Note 001: PE is "not important for tabular data, as the ordering of features is invariant".

    Because unmasked attention is permutation-equivariant and the [CLS] readout then order-invariant, a
    model whose tokens carry no feature identity gives the same prediction for any reordering of a row's
    values: it cannot tell which column holds which value.
    Per-feature parameters (FT-Transformer's W_j and b_j) are what make columns distinguishable.
    """
    torch.manual_seed(0)
    x = torch.randn(16, 4)
    swapped = [1, 0, 3, 2]
    anonymous = TinyFTTransformer(4, d_token=8, bias=False, shared_weight=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(anonymous(x[:, swapped]), anonymous(x), rtol=0, atol=1e-5)
        ft_transformer = TinyFTTransformer(4, d_token=8).eval()
        assert (ft_transformer(x[:, swapped]) - ft_transformer(x)).abs().max() > 1e-2


def test_erratum_02_per_feature_parameters_play_the_role_of_a_position_encoding():
    """Note 001: "Both architectures (TabTransformer and FTTransformer) don't include one."

    They add no sequence-position vector, but each column's tokens carry per-column parameters (column
    embedding; feature bias b_j). The identity travels with those parameters: reordering the columns
    together with them leaves the prediction unchanged, and a per-feature bias alone already separates
    the columns.
    """
    torch.manual_seed(0)
    x = torch.randn(16, 5)
    order = [4, 2, 0, 3, 1]
    model = TinyFTTransformer(5, d_token=8).eval()
    bias_only = TinyFTTransformer(5, d_token=8, shared_weight=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(permute_features(model, order)(x[:, order]), model(x), rtol=0, atol=1e-5)
        assert (bias_only(x[:, order]) - bias_only(x)).abs().max() > 1e-2


# --- Note 001: terminology and the types of position information ----------------------------------------


def test_erratum_05_learned_position_embeddings_are_absolute_too():
    """Note 001 lists "learnable embeddings, absolute ... and relative" representations as three types.

    A learned position embedding adds the vector of the absolute index p, whatever the sequence: it is
    an absolute representation, like the sinusoid.
    """
    torch.manual_seed(0)
    embedding = LearnedPositionalEmbedding(8, 4)
    with torch.no_grad():
        for seq in (3, 8):
            added = embedding(torch.zeros(1, seq, 4))[0]
            torch.testing.assert_close(added, embedding.weight[:seq], rtol=0, atol=0)


def test_erratum_07_the_sinusoidal_encoding_is_itself_absolute():
    """Note 001: "Why not use an absolute encoding?", before deriving the sinusoid.

    The sinusoid is an absolute encoding: row p depends on p alone, not on the other positions or the
    length of the sequence. Relative information appears only in products, PE(x)·PE(x+k) depending on k
    alone.
    """
    alone = table64([7.0], 16)[0]
    for n in (8, 30, 500):
        np.testing.assert_array_equal(table64(n, 16)[7], alone)
    assert np.abs(table64([0.0], 16) - table64([5.0], 16)).max() > 0.5  # the vector itself is not shift-invariant
    dots = [table64([x], 16)[0] @ table64([x + 3.0], 16)[0] for x in (0.0, 11.0, 250.0)]
    np.testing.assert_allclose(dots, dots[0], rtol=0, atol=1e-12)


# --- Note 001: the prototypes after Kernes --------------------------------------------------------------


def test_erratum_08_a_raw_count_is_an_input_of_growing_scale_the_sinusoid_is_bounded():
    """Note 001: "Weights for neural networks should be centered and balanced around zero."

    LeCun et al.'s advice is about the inputs: centred and of comparable scale. The raw count grows with
    the sequence (mean (n-1)/2), while every sinusoid value lies in [-1, 1] at any position. The sinusoid
    is bounded, not centred: its slow cosine columns stay near 1 over a short sequence.
    """
    count = raw_count(1000).ravel()
    assert count.max() == 999 and count.mean() == pytest.approx(499.5)
    far = table64(np.array([0.0, 1e3, 1e6, 1e9, -1e9]), 64)
    assert np.abs(far).max() <= 1.0
    slow_cosine = table64(100, 64)[:, -1]
    assert slow_cosine.mean() > 0.99


@given(st.integers(min_value=5, max_value=400), st.integers(min_value=5, max_value=400))
def test_erratum_09_normalised_count_changes_with_the_length_the_sinusoid_does_not(n_a, n_b):
    """Note 001: "Count through and normalize: can no longer handle arbitrary sequence lengths".

    It handles any length; the flaw is that position p gets a different value, and neighbours a different
    step, in sequences of different length. The sinusoid gives position p the same vector at any length.
    """
    p = 3
    if n_a != n_b:
        assert normalised_count(n_a)[p, 0] != normalised_count(n_b)[p, 0]
    np.testing.assert_array_equal(sinusoidal(n_a, 8)[p], sinusoidal(n_b, 8)[p])


def test_erratum_10_binary_codes_of_neighbours_can_be_far_apart():
    """Note 001: binary "can not handle large numbers which would require more places than columns".

    True, but the deeper flaw is that code distance does not follow position distance: 127 and 128
    differ in all 8 bits, 0 and 128 in one. The sinusoid's step between neighbours is the same everywhere.
    """
    bits = binary_code(256, 8)
    hamming = np.abs(np.diff(bits, axis=0)).sum(axis=1)
    assert hamming.min() == 1 and hamming.max() == 8
    assert np.abs(bits[128] - bits[0]).sum() == 1
    table = table64(256, 128)
    steps = np.linalg.norm(np.diff(table, axis=0), axis=1)
    np.testing.assert_allclose(steps, steps[0], rtol=1e-9)
    assert np.linalg.norm(table[128] - table[127]) < np.linalg.norm(table[128] - table[0])


def test_erratum_11_bounded_range_is_not_normalised():
    """Note 001: "sin function exists on [-1,1] and is normalized".

    [-1, 1] is the range of sine, not its domain: the encoding takes any real position (negative and
    fractional ones too). Its values are bounded, not normalised: each row has squared norm d_model / 2.
    """
    positions = np.array([-2.5, -1.0, 0.0, 0.25, 3.0, 1e7])
    table = table64(positions, 32)
    assert np.isfinite(table).all() and np.abs(table).max() <= 1.0
    np.testing.assert_allclose(np.sum(table**2, axis=1), 16.0, rtol=1e-12)


@pytest.mark.parametrize("d_model", [4, 16, 512])
def test_erratum_12_each_frequency_serves_two_columns(d_model):
    """Note 001: "the frequency is different for every column in the embedding matrix".

    The sinusoid has d_model / 2 frequencies, each shared by a sine and a cosine column, so each pair
    satisfies sin^2 + cos^2 = 1 at every position. Note 004's 2i+1 exponent would break this.
    """
    positions = np.arange(0.0, 3000.0, 7.0)
    assert frequencies(d_model).shape == (d_model // 2,)
    table = table64(positions, d_model)
    np.testing.assert_allclose(table[:, 0::2] ** 2 + table[:, 1::2] ** 2, 1.0, rtol=0, atol=1e-12)
    wrong = note_004_printed_formula(positions, d_model)
    assert np.abs(wrong[:, 0::2] ** 2 + wrong[:, 1::2] ** 2 - 1.0).max() > 0.1


def test_erratum_13_dyadic_dials_waste_two_columns_and_repeat():
    """Note 001: dials M_ij = sin(2 pi i / 2^j), whose only stated flaw is that "the curve is closed".

    For integer i, columns j = 0 and 1 are sin(2 pi i) = sin(pi i) = 0, and the rows repeat exactly
    every 2^(J-1) positions: row i + 2^(J-1) equals row i, not merely lies "nearby". The sinusoid's
    columns are never all zero and its rows do not repeat at that period.
    """
    n_columns = 6
    period = 2 ** (n_columns - 1)
    dials = dyadic_dials(3 * period, n_columns)
    assert np.abs(dials[:, :2]).max() < 1e-12
    assert np.abs(dials[0]).max() == 0 and np.abs(dials[period // 2]).max() < 1e-12  # two zero rows per period
    np.testing.assert_allclose(dials[period:], dials[:-period], rtol=0, atol=1e-12)
    table = table64(3 * period, 2 * n_columns)
    assert np.abs(table[:, :2]).max(axis=0).min() > 0.9
    assert np.abs(table[period:] - table[:-period]).max(axis=1).min() > 1e-3


def test_erratum_13_the_paper_keeps_frequency_1_and_spreads_the_others_below_it():
    """Note 001: "We can lower all of the frequencies, and in this way keep ourselves far away from the
    boundary."

    The paper does not lower all of them: pair 0 keeps frequency 1 (wavelength 2 pi) at every width, and on
    its own it comes back within 1e-4 of its start at position 710 (710 ~ 113 * 2 pi). The spread of the
    other frequencies is what keeps the whole row away: at 710 it is more than 9 from row 0.
    """
    for d_model in (2, 16, 128, 512, 4096):
        assert frequencies(d_model)[0] == 1.0
    rows = table64([0.0, 710.0], 128)
    assert np.abs(rows[1, :2] - rows[0, :2]).max() < 1e-4
    assert np.linalg.norm(rows[1] - rows[0]) > 9.0


@pytest.mark.parametrize("d_model", [4, 128, 512])
def test_erratum_14_column_index_never_reaches_d_model(d_model):
    """Note 001: for sin(x_i w0^(j/d_model)), "j=d_model gives the smallest" frequency, w0.

    Columns run j = 0 ... d_model - 1 and both columns of a pair share exponent 2*(j//2)/d_model (as the
    note's own code has it), so the smallest frequency is w0^((d_model-2)/d_model), never w0.
    """
    kernes = 1e-4 ** (2 * (np.arange(d_model) // 2) / d_model)
    np.testing.assert_allclose(np.repeat(frequencies(d_model), 2), kernes, rtol=1e-12)
    assert frequencies(d_model).min() == pytest.approx(1e-4 ** ((d_model - 2) / d_model), rel=1e-12)
    assert frequencies(d_model).min() > 1e-4


@given(st.integers(min_value=1, max_value=1024).map(lambda half: 2 * half))
def test_erratum_15_the_paper_bounds_the_wavelength_it_does_not_reach_frequency_1e_4(d_model):
    """Note 001: "The original authors choose a minimum frequency of 1/10,000".

    The paper says the wavelengths "form a geometric progression from 2 pi to 10000 · 2 pi" (§3.5). The
    longest wavelength used, 2 pi · 10000^((d-2)/d), stays below 10000 · 2 pi, so the angular frequencies
    stay above 1/10000: it is a lower bound, not reached, approached as d_model grows. (tensor2tensor's
    spacing does reach it; the paper's formula does not.)
    """
    omega = frequencies(d_model)
    longest = 2 * np.pi / omega.min()
    assert 2 * np.pi <= longest < 10000 * 2 * np.pi
    assert np.all(omega > 1e-4)  # a lower bound on the frequencies, never reached
    assert omega.min() == pytest.approx(1e-4 * 10000 ** (2 / d_model), rel=1e-12)
    assert longest == pytest.approx(2 * np.pi * 10000 ** ((d_model - 2) / d_model), rel=1e-12)
    n = d_model // 2
    if n > 1:  # tensor2tensor: log-spaced timescales from 1 to 1e4 inclusive
        tensor2tensor = np.exp(-np.arange(n) * math.log(1e4) / (n - 1))
        assert tensor2tensor[-1] == pytest.approx(1e-4, rel=1e-12)


def test_erratum_16_frequencies_decrease_and_pairs_share_them_so_a_shift_is_linear():
    """Note 001: they "increase frequencies exponentially via omega_min^(range(d)/d)".

    The frequencies decrease along the row (wavelengths increase), and the exponent is 2*(j//2)/d, shared
    by a pair. With range(d)/d every column has its own frequency, and no matrix shifts the rows: the best
    least-squares fit misses by O(1), where the paper's pairs are shifted exactly by a rotation matrix.
    """
    omega = frequencies(16)
    assert np.all(np.diff(omega) < 0)
    positions = np.arange(0.0, 400.0)
    paper_error = largest_error_of_best_linear_shift(lambda p: table64(p, 16), 5.0, positions)
    note_error = largest_error_of_best_linear_shift(lambda p: note_001_per_column_exponent(p, 16), 5.0, positions)
    assert paper_error < 1e-9 and note_error > 0.1
    shifted = table64(positions, 16) @ translation_matrix(5.0, 16)
    np.testing.assert_allclose(shifted, table64(positions + 5.0, 16), rtol=0, atol=1e-9)


def test_erratum_16_monotone_frequencies_do_not_make_a_monotone_encoding():
    """Note 001: the exponential frequencies are chosen "to achieve the monotonicity criteria".

    The frequencies are monotone (they fall along the row), but the encoding is not monotone in the
    position: every column oscillates, and the distance |PE(k) - PE(0)| falls at almost half of the steps
    k -> k + 1 up to 2048 for d_model = 128.
    """
    assert np.all(np.diff(frequencies(128)) < 0)
    table = table64(2049, 128)
    for column in (0, 1, 63, 64):  # fast and medium columns turn back over 2048 positions
        steps = np.diff(table[:, column])
        assert (steps > 0).any() and (steps < 0).any()
    distance = np.linalg.norm(table[1:] - table[0], axis=1)
    falls = int((np.diff(distance) < 0).sum())
    assert 0.4 * 2047 < falls < 0.5 * 2047
    # the same steps seen through the dot product: it rises exactly where the distance falls
    dots = table[1:] @ table[0]
    np.testing.assert_array_equal(np.diff(dots) > 0, np.diff(distance) < 0)


def test_erratum_18_the_number_of_frequencies_is_half_d_model_not_the_sequence_length():
    """Note 001: v^(i) = [cos(w_0 x_i), sin(w_0 x_i), ..., cos(w_{n-1} x_i), sin(w_{n-1} x_i)].

    n was the sequence length; a row has d_model / 2 frequencies whatever the length. Reading the angle of
    each (sin, cos) pair at position 1 recovers the same d_model / 2 frequencies for every length.
    """
    expected = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    for n_positions in (3, 8, 300):
        table = table64(n_positions, 8)
        assert table.shape == (n_positions, 8)
        angle_at_one = np.arctan2(table[1, 0::2], table[1, 1::2])
        np.testing.assert_allclose(angle_at_one, expected, rtol=1e-12)


def test_erratum_19_note_001_code_is_the_papers_table_with_each_pair_swapped():
    """Note 001: "The row-vector is an alternating series of sines and cosines"; its code puts cos first.

    The paper puts sin in column 2i and cos in 2i+1. The note's code is the paper's table with each pair
    swapped (posenc's "cos_first" layout), and the translation block must match the layout: for [cos, sin]
    row pairs it is [[c, s], [-s, c]], the transpose of the paper's; the wrong pairing misses by O(1).
    """
    note_table = note_001_numpy_code(64, 16)
    np.testing.assert_allclose(note_table, table64(64, 16, layout="cos_first"), rtol=0, atol=1e-12)
    assert np.abs(note_table - table64(64, 16)).max() > 0.5
    assert table64([1.0], 16)[0, 0] == pytest.approx(math.sin(1.0), abs=1e-15)  # the paper: sin first
    c, s = math.cos(0.3), math.sin(0.3)
    np.testing.assert_allclose(translation_matrix(0.3, 2, layout="cos_first"), [[c, s], [-s, c]], atol=1e-15)
    np.testing.assert_allclose(translation_matrix(0.3, 2), [[c, -s], [s, c]], atol=1e-15)
    positions = np.arange(10.0)
    right = note_001_numpy_code(12, 16)[:10] @ translation_matrix(2.0, 16, layout="cos_first")
    wrong = note_001_numpy_code(12, 16)[:10] @ translation_matrix(2.0, 16)
    np.testing.assert_allclose(right, note_001_numpy_code(12, 16)[2:], rtol=0, atol=1e-12)
    assert np.abs(wrong - table64(positions + 2.0, 16, layout="cos_first")).max() > 0.5


# --- Note 004 -------------------------------------------------------------------------------------------


def test_erratum_20_unique_in_exact_arithmetic_but_not_in_float32_or_always_far_apart():
    """Note 004: "encode each position with a unique representation in continuous space".

    Integer positions get distinct vectors in exact arithmetic, but the note's float32 positions cannot
    tell 2**24 from 2**24 + 1, so those rows coincide; posenc keeps them apart. Distinct is not far apart
    either: with d_model = 16, some offset below two million gives a pair of encodings closer than
    neighbouring positions are.
    """
    big = [2.0**24, 2.0**24 + 1]
    note_rows = note_004_torch_code(big, 16)
    assert torch.equal(note_rows[0], note_rows[1])
    ours = table64(big, 16)
    assert np.abs(ours[0] - ours[1]).max() > 0.5
    offsets = np.arange(1, 2_000_001, dtype=np.float64)
    squared_distance = np.full_like(offsets, 16.0)
    for omega in frequencies(16):
        squared_distance -= 2.0 * np.cos(omega * offsets)
    assert squared_distance[1:].min() < squared_distance[0]


def test_erratum_21_position_information_is_needed_because_attention_ignores_order():
    """Note 004: PE "is added to the input embeddings ... Therefore, it is not necessary to deal with
    recurrence or convolutions".

    The paper argues the other way round: the model has no recurrence or convolution, so position must be
    injected (§3.5). Unmasked self-attention alone (the paper's encoder) is permutation-equivariant; adding
    the encoding breaks that. (A causal mask breaks it too, which this test does not use.)
    """
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    encoding = SinusoidalPositionalEncoding(8).eval()
    x = torch.randn(1, 6, 8)
    order = torch.tensor([3, 0, 5, 1, 4, 2])

    def attend(tokens):
        return attention(tokens, tokens, tokens, need_weights=False)[0]

    with torch.no_grad():
        torch.testing.assert_close(attend(x[:, order]), attend(x)[:, order], rtol=0, atol=1e-5)
        with_positions = attend(encoding(x[:, order])) - attend(encoding(x))[:, order]
    assert with_positions.abs().max() > 1e-2


@pytest.mark.parametrize("d_model", [4, 64, 512])
def test_erratum_22_cosine_exponent_is_2i_over_d_not_2i_plus_1(d_model):
    """Note 004: "PE(pos, 2i+1) = cos(pos / 10000^((2i+1)/d_model))".

    The paper uses 2i/d_model for both members of pair i. The note's own torch code does too (one wk for
    sin and cos) and agrees with posenc to float32 rounding; its printed formula differs by O(1).
    """
    positions = np.arange(0.0, 200.0)
    ours = table64(positions, d_model)
    i = np.arange(d_model // 2)
    np.testing.assert_allclose(ours[:, 1::2], np.cos(positions[:, None] / 10000.0 ** (2 * i / d_model)), atol=1e-12)
    assert np.abs(note_004_printed_formula(positions, d_model) - ours).max() > 0.1
    np.testing.assert_allclose(note_004_torch_code(positions, d_model).double().numpy(), ours, rtol=0, atol=1e-4)


def test_erratum_23_max_len_is_a_cache_size_not_a_limit_of_the_formula():
    """Note 004: PE "is usually predefined with a threshold parameter ... very large entries will have
    inputs cut off or will not be accepted".

    The formula is defined at every position; max_len only sizes a precomputed table, and posenc's module
    extends it on demand (as fairseq recomputes). Only a learned embedding has a hard limit.
    """
    encoding = SinusoidalPositionalEncoding(8, max_len=4)
    out = encoding(torch.zeros(1, 50, 8))
    torch.testing.assert_close(out[0], torch.from_numpy(sinusoidal(50, 8)), rtol=0, atol=0)
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositionalEmbedding(4, 8)(torch.zeros(1, 50, 8))
    fixed_note_table = note_004_torch_code(range(4), 8)  # what a fixed max_len=4 table holds
    with pytest.raises(RuntimeError):
        torch.zeros(1, 50, 8) + fixed_note_table


@pytest.mark.parametrize("d_model", [8, 128, 512])
def test_erratum_25_frequencies_fall_by_10000_to_the_2_over_d_not_by_half(d_model):
    """Note 004: sin and cos "map the binarization into continuos functions".

    Binary digit j has period 2^(j+1): the rates halve from column to column. The sinusoid's frequencies
    fall by the factor 10000^(-2/d_model) per pair (0.965 for d_model = 512), a different progression and
    not a smoothed binary code.
    """
    omega = frequencies(d_model)
    np.testing.assert_allclose(omega[1:] / omega[:-1], 10000.0 ** (-2 / d_model), rtol=1e-12)
    assert abs(omega[1] / omega[0] - 0.5) > 0.1
    periods = [2 ** (j + 1) for j in range(8)]
    bits = binary_code(256, 8)
    for j, period in enumerate(periods):
        np.testing.assert_array_equal(bits[period:, j], bits[:-period, j])


@pytest.mark.parametrize("d_model", [4, 64, 512])
def test_erratum_26_frequency_index_starts_at_zero(d_model):
    """Note 004: w_k = 1/10000^(2k/D) for components k = 1 ... D/2.

    The paper's pairs are i = 0 ... d/2 - 1: the first frequency is 1 (wavelength 2 pi) and the last is
    10000^(-(d-2)/d). The note's index is shifted: it drops frequency 1 and adds exactly 1/10000.
    """
    ours, note = frequencies(d_model), note_004_vector_frequencies(d_model)
    assert ours[0] == 1.0 and note[0] < 1.0
    np.testing.assert_allclose(ours[1:], note[:-1], rtol=1e-12)
    assert note[-1] == pytest.approx(1e-4, rel=1e-12) and ours[-1] > 1e-4


@pytest.mark.parametrize("d_model", [4, 64, 512])
def test_erratum_27_the_exp_log_form_is_the_same_power_not_a_removal_of_it(d_model):
    """Note 004: "logarithmic and exponent properties are applied to eliminate the exponents in w_k".

    exp(-2i ln(10000) / d) is the power 10000^(-2i/d) rewritten, equal to float64 rounding; in the note's
    float32 code it carries float32 rounding.
    """
    i = np.arange(0, d_model, 2)
    exp_log = np.exp(i * -(math.log(10000.0) / d_model))
    np.testing.assert_allclose(frequencies(d_model), exp_log, rtol=1e-13)
    note_wk = torch.exp(torch.arange(0, d_model, 2).float() * -(torch.log(torch.tensor(10000.0)) / d_model))
    # float32: logf(10000) within one ulp (2**-20 in [8, 16); the exponent i / d * ln(10000), i / d < 1, carries
    # at most that), the product rounded once (<= 9.3 * 2**-24 of an exponent <= 9.3) and expf within one ulp
    # (2 * 2**-24): 28 * 2**-24 relative in all. The former 1e-6 (17 * 2**-24) held only because torch's logf
    # happens to round ln(10000) correctly: one ulp off either way gives 1.28e-6 and 1.47e-6. A float16 log or
    # the base 10001 is off by 3e-4 and 5e-5.
    np.testing.assert_allclose(note_wk.double().numpy(), frequencies(d_model), rtol=32 * 2.0**-24, atol=0)


def test_erratum_28_float32_angles_lose_accuracy_at_large_positions():
    """Note 004's code: pos = torch.arange(0, max_len, dtype=torch.float), then sin(pos * wk) in float32.

    Forming the angle in float32 loses about pos * 2**-24 radians: near position 1e5 the note's sines are
    off by more than 1e-3. posenc forms angles in float64 and rounds only the result, so its float32
    table is accurate to float32 rounding.
    """
    positions = [1e5, 1e5 + 1, 123456.0, 131071.0]
    omega = 10000.0 ** (-np.arange(0, 512, 2) / 512)  # written out, so that the reference is independent
    angles = np.multiply.outer(positions, omega)
    exact = np.empty((4, 512))
    exact[:, 0::2], exact[:, 1::2] = np.sin(angles), np.cos(angles)
    note_error = np.abs(note_004_torch_code(positions, 512).double().numpy() - exact).max()
    ours_error = np.abs(sinusoidal(np.array(positions), 512).astype(np.float64) - exact).max()
    assert note_error > 1e-3
    assert ours_error <= 2**-24 + 1e-12


def note_001_tensorflow_code_in_numpy(positions, d_model, min_freq=1e-4):
    """Note 001's TensorFlow version, op for op in NumPy float32 (TensorFlow is not a dependency)."""
    position = np.asarray(positions, dtype=np.float32)  # tf.range(max_position, dtype=tf.float32)
    mask = np.arange(d_model)
    sin_mask = (mask % 2).astype(np.float32)
    cos_mask = 1 - sin_mask
    exponent = (2 * (mask // 2)).astype(np.float32) / np.float32(d_model)
    freqs = np.float32(min_freq) ** exponent
    angles = np.einsum("i,j->ij", position, freqs)
    return np.cos(angles) * cos_mask + np.sin(angles) * sin_mask


def test_erratum_28_note_001_tensorflow_version_forms_float32_angles_too():
    """Note 001's TensorFlow code: position = tf.range(max_position, dtype=tf.float32), einsum with freqs.

    Its angles are float32 products, so near position 1e5 it is off by more than 1e-3, like note 004's
    torch code; its NumPy version works in float64. posenc's float32 table is accurate to float32 rounding.
    """
    positions = [1e5, 1e5 + 1, 123456.0, 131071.0]
    exact = table64(np.array(positions), 512, layout="cos_first")
    note_table = note_001_tensorflow_code_in_numpy(positions, 512)
    assert note_table.dtype == np.float32
    assert np.abs(note_table - exact).max() > 1e-3
    ours = sinusoidal(np.array(positions), 512, layout="cos_first").astype(np.float64)
    assert np.abs(ours - exact).max() <= 2**-24 + 1e-12
    # at small positions the same code is the cosine-first table to float32 rounding
    small = note_001_tensorflow_code_in_numpy(range(64), 512)
    assert np.abs(small - table64(64, 512, layout="cos_first")).max() < 1e-5
    np.testing.assert_allclose(note_001_numpy_code(64, 512), table64(64, 512, layout="cos_first"), atol=1e-12)


class _Note004Module(nn.Module):
    """Note 004's table kept as ``self.pos_enc = torch.zeros(...)``: a plain attribute."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.pos_enc = note_004_torch_code(range(max_len), d_model)


def test_erratum_29_the_table_must_be_a_buffer_to_follow_the_module():
    """Note 004's code: self.pos_enc = torch.zeros((max_len, d_model)), a plain tensor attribute.

    A plain attribute is not registered: .to(device) leaves it behind. posenc registers its table as a
    buffer, which moves with the module (here to the "meta" device).
    """
    note_module = _Note004Module(4, 8).to("meta")
    assert note_module.pos_enc.device.type == "cpu"
    ours = SinusoidalPositionalEncoding(8, max_len=4)
    assert "table" in dict(ours.named_buffers())
    assert ours.to("meta").table.device.type == "meta"


def test_erratum_30_sines_fill_even_dimensions_not_even_positions():
    """Note 004's code comment: "filling in sines for even positions and cosines for odd positions".

    The split is over the embedding dimensions (columns): every position, odd ones included, has sines in
    its even columns and cosines in its odd columns.
    """
    positions = np.arange(9.0)
    table = table64(positions, 8)
    angles = np.multiply.outer(positions, frequencies(8))
    np.testing.assert_allclose(table[1::2, 0::2], np.sin(angles[1::2]), rtol=0, atol=1e-15)
    np.testing.assert_allclose(table[0::2, 1::2], np.cos(angles[0::2]), rtol=0, atol=1e-15)


# --- Found on a second reading -------------------------------------------------------------------------

NOTE_001_NUMPY_CODE_AS_STORED = """def positional_encoding(max_position, d_model, min_freq=1e-4):

position = np.arange(max_position)

freqs = min_freq**(2*(np.arange(d_model)//2)/d_model)

pos_enc = position.reshape(-1,1)*freqs.reshape(1,-1)

pos_enc[:, ::2] = np.cos(pos_enc[:, ::2])

pos_enc[:, 1::2] = np.sin(pos_enc[:, 1::2])

return pos_enc
"""


def test_erratum_32_note_001_code_as_stored_is_not_valid_python():
    """Note 001, lines 81-93: the NumPy function with its body in column 0, as the note stores it.

    As stored it does not compile (IndentationError); with its body indented one level it computes the
    cosine-first table of posenc to rounding.
    """
    with pytest.raises(IndentationError):
        compile(NOTE_001_NUMPY_CODE_AS_STORED, "note_001", "exec")
    header, *body = NOTE_001_NUMPY_CODE_AS_STORED.splitlines()
    indented = "\n".join([header] + [("    " + line) if line else line for line in body])
    namespace = {"np": np}
    exec(compile(indented, "note_001", "exec"), namespace)
    table = namespace["positional_encoding"](256, 128)
    assert np.abs(table - table64(256, 128, layout="cos_first")).max() < 1e-12
    assert np.abs(table - table64(256, 128)).max() > 0.5  # and it is not the paper's layout (entry 19)


# --- Found on a third reading ----------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [7, 9, 513])
def test_erratum_37_note_004_code_fails_for_an_odd_d_model(d_model):
    """Note 004's torch lines, given for any d_model: wk = exp(arange(0, d_model, 2) * ...), then
    pos_enc[:, 0::2] = sin(pos * wk) and pos_enc[:, 1::2] = cos(pos * wk).

    For odd d_model, wk has ceil(d/2) entries, as many as the even columns, but the odd columns are one
    fewer: the cosine line raises a RuntimeError that does not name d_model. posenc refuses an odd width
    with a ValueError that does; at the even width d_model + 1 the note's code runs and agrees with posenc.
    """
    assert len(range(0, d_model, 2)) == len(range(d_model)[0::2]) == len(range(d_model)[1::2]) + 1
    pos = torch.arange(0, 4, dtype=torch.float).unsqueeze(1)
    wk = torch.exp(torch.arange(0, d_model, 2).float() * -(torch.log(torch.tensor(10000.0)) / d_model))
    pos_enc = torch.zeros((4, d_model))
    pos_enc[:, 0::2] = torch.sin(pos * wk)  # the sine line runs
    with pytest.raises(RuntimeError) as error:
        pos_enc[:, 1::2] = torch.cos(pos * wk)  # the cosine line does not
    assert "d_model" not in str(error.value)
    with pytest.raises(RuntimeError):
        note_004_torch_code(range(4), d_model)
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal(4, d_model)
    even = d_model + 1
    np.testing.assert_allclose(note_004_torch_code(range(4), even).double().numpy(), table64(range(4), even), atol=1e-6)


# --- The page itself: grouped, each entry short with its details folded, no line numbers ----------------

ERRATA_PAGE = Path(__file__).resolve().parent.parent / "book" / "errata.md"
ENTRY = re.compile(r"^\(errata-(\d\d)\)=\n### (\d+)\. ", re.MULTILINE)
GROUP = re.compile(r"^\(errata-group-([a-z-]+)\)=\n## ", re.MULTILINE)
# "line 16", "lines 25–28", "(004, 41; 001, 59–73)": places in the stored note files, which a reader cannot see.
STORED_LINE = re.compile(r"\blines?\s+\d|\b00[14],\s*\d")
# A test in this module that belongs to an entry: test_erratum_NN_...
ERRATUM_TEST = re.compile(r"\btest_erratum_(\d\d)_\w+")


def entries_outside_groups(text):
    """The numbers of the entries of errata page ``text`` that stand before its first ``##`` heading or under a
    ``##`` heading without an ``(errata-group-...)`` anchor."""
    parts = re.split(r"^(\(errata-group-[a-z-]+\)=\n)?## .*$", text, flags=re.MULTILINE)
    # parts: [before the first heading, anchor, body, anchor, body, ...]
    outside = [parts[0]] + [body for anchor, body in zip(parts[1::2], parts[2::2], strict=True) if not anchor]
    return [int(match.group(1)) for part in outside for match in ENTRY.finditer(part)]


def entries_of(text):
    """The entries of errata page ``text``: {number: the entry's text up to the next anchor or heading}."""
    matches = list(ENTRY.finditer(text))
    entries = {}
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = text[match.start() : end]
        entries[int(match.group(1))] = re.split(r"^\(errata-group-|^## ", body, flags=re.MULTILINE)[0]
        assert int(match.group(1)) == int(match.group(2)), (
            f"anchor errata-{match.group(1)} heads entry {match.group(2)}"
        )
    return entries


def entry_problems(number, entry):
    """What is wrong with the form of erratum ``number`` (its ``entry`` text): a list of complaints."""
    problems = []
    heading, _, rest = entry.partition("\n### ")[2].partition("\n")
    before_details, fence, details = rest.partition(":::{dropdown}")
    summary = " ".join(before_details.split())
    if not fence:
        problems.append("its details are not in a {dropdown}")
    if not re.match(r"^Note 00[14]", summary):
        problems.append("its summary does not start by naming the note it corrects")
    if len(summary.split()) > 60:
        problems.append(f"its summary has {len(summary.split())} words (at most 60 stay visible)")
    for field in ("Note's words", "Problem", "Correction", "Source", "Pinned by"):
        if f"\n{field}\n: " not in details:
            problems.append(f"its details have no {field!r} field")
    if not details.rstrip().endswith(":::"):
        problems.append("its {dropdown} is not closed at the end of the entry")
    return problems


def test_the_page_form_checks_find_what_they_guard_against():
    flat = '(errata-07)=\n### 7. A title\n\nNote\'s words\n: "quote" (line 15)\n\nProblem\n: ...\n'
    problems = entry_problems(7, flat)
    assert "its details are not in a {dropdown}" in problems
    assert "its summary does not start by naming the note it corrects" in problems
    assert STORED_LINE.search(flat) and STORED_LINE.search("| 28 | 004, 41; 001, 59–73 |")
    assert not STORED_LINE.search("read line by line against the sources; note 001 and note 004")
    page = "# Errata\n\n(errata-01)=\n### 1. A\n\n(errata-group-x)=\n## X\n\n(errata-02)=\n### 2. B\n\n## Y\n\n"
    assert entries_outside_groups(page + "(errata-03)=\n### 3. C\n") == [1, 3]


def test_every_erratum_is_short_with_its_details_folded():
    entries = entries_of(ERRATA_PAGE.read_text(encoding="utf-8"))
    assert sorted(entries) == list(range(1, len(entries) + 1)), "the entries are not numbered 1 ... N"
    problems = {number: entry_problems(number, entry) for number, entry in entries.items()}
    assert {number: found for number, found in problems.items() if found} == {}


def test_every_erratum_is_in_a_group_and_the_page_names_no_stored_line():
    text = ERRATA_PAGE.read_text(encoding="utf-8")
    assert entries_outside_groups(text) == []
    assert len(GROUP.findall(text)) >= 3, "fewer than three groups"
    assert [match.group(0) for match in STORED_LINE.finditer(text)] == []


def test_every_erratum_test_belongs_to_an_entry_that_names_it():
    entries = entries_of(ERRATA_PAGE.read_text(encoding="utf-8"))
    tests = {name for name in globals() if ERRATUM_TEST.fullmatch(name)}
    assert tests, "no test_erratum_NN_... in this module"
    for name in tests:
        number = int(ERRATUM_TEST.fullmatch(name).group(1))
        assert name in entries.get(number, ""), f"{name} is not named in entry {number} of the errata page"
    for number, entry in entries.items():
        for named in ERRATUM_TEST.finditer(entry):
            assert named.group(0) in tests, f"entry {number} names {named.group(0)}, which does not exist"
            assert int(named.group(1)) == number, f"entry {number} names {named.group(0)}"
