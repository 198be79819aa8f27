"""The prototype position codes of posenc_book.prototypes: what each one is, and the weakness each one has."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_book.prototypes import binary_code, dyadic_dials, normalised_count, raw_count

counts = st.integers(min_value=0, max_value=3000)
lengths = st.integers(min_value=2, max_value=3000)
columns = st.integers(min_value=1, max_value=24)


def bits_needed(n_positions):
    """Smallest number of bits that writes every position 0 .. n_positions - 1, from the definition."""
    bits = 1
    while 2**bits < n_positions:
        bits += 1
    return bits


# --- Shapes and dtypes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, shape",
    [
        (raw_count(7), (7, 1)),
        (raw_count(0), (0, 1)),
        (normalised_count(7), (7, 1)),
        (binary_code(7, 5), (7, 5)),
        (binary_code(0, 2, centred=True), (0, 2)),
        (dyadic_dials(7, 6), (7, 6)),
    ],
)
def test_every_prototype_is_a_float64_table_with_one_row_per_position(table, shape):
    assert table.shape == shape and table.dtype == np.float64


# --- The counts -------------------------------------------------------------------------------------------


@given(counts)
def test_raw_count_is_the_position_itself_and_is_not_centred(n):
    table = raw_count(n)
    np.testing.assert_array_equal(table[:, 0], np.arange(n))
    if n >= 2:
        assert table.mean() == pytest.approx((n - 1) / 2)  # the mean grows with n instead of staying at 0


@given(lengths)
def test_normalised_count_runs_from_zero_to_one_in_steps_of_one_over_n_minus_one(n):
    values = normalised_count(n)[:, 0]
    assert values[0] == 0.0 and values[-1] == 1.0
    np.testing.assert_allclose(np.diff(values), 1 / (n - 1), rtol=1e-9)


@given(lengths, lengths, st.data())
def test_normalised_value_of_a_position_depends_on_the_sequence_length(n1, n2, data):
    """Position k > 0 gets k / (n - 1): the same position has different values at different lengths."""
    k = data.draw(st.integers(min_value=1, max_value=min(n1, n2) - 1), label="k")
    first, second = normalised_count(n1)[k, 0], normalised_count(n2)[k, 0]
    assert (first == second) == (n1 == n2)
    assert first == pytest.approx(k / (n1 - 1)) and second == pytest.approx(k / (n2 - 1))


# --- The binary code --------------------------------------------------------------------------------------


@given(counts, st.integers(min_value=0, max_value=20))
def test_binary_code_decodes_back_to_the_position(n, extra_bits):
    n_bits = bits_needed(n) + extra_bits
    table = binary_code(n, n_bits)
    assert set(np.unique(table)) <= {0.0, 1.0}
    np.testing.assert_array_equal(table @ (2.0 ** np.arange(n_bits)), np.arange(n))


@given(counts, st.integers(min_value=0, max_value=20))
def test_centred_binary_code_is_two_b_minus_one_with_values_minus_one_and_one(n, extra_bits):
    n_bits = bits_needed(n) + extra_bits
    centred = binary_code(n, n_bits, centred=True)
    assert set(np.unique(centred)) <= {-1.0, 1.0}
    np.testing.assert_array_equal(centred, 2 * binary_code(n, n_bits) - 1)
    np.testing.assert_array_equal(np.sum(centred**2, axis=1), n_bits)  # every row has the same norm


@pytest.mark.parametrize("n_bits", [1, 2, 3, 8])
def test_the_full_centred_code_has_mean_zero_in_every_column(n_bits):
    assert np.array_equal(binary_code(2**n_bits, n_bits, centred=True).mean(axis=0), np.zeros(n_bits))


@pytest.mark.argument_check
def test_binary_code_needs_enough_bits_and_says_how_many():
    binary_code(8, 3)  # 0 .. 7 fit in three bits
    with pytest.raises(ValueError, match="n_bits must be at least 4"):
        binary_code(9, 3)  # 8 = 1000 does not
    assert binary_code(1, 1).tolist() == [[0.0]]


def test_hamming_distance_does_not_follow_distance_between_positions():
    """7 and 8 are neighbours but differ in 4 bits; 8 and 9 differ in 1; 0 and 8, eight apart, in 1."""
    code = binary_code(16, 4)
    hamming = lambda a, b: int(np.abs(code[a] - code[b]).sum())  # noqa: E731
    assert (hamming(7, 8), hamming(8, 9), hamming(0, 8)) == (4, 1, 1)
    centred = binary_code(16, 4, centred=True)
    assert np.sum((centred[7] - centred[8]) ** 2) == 4 * hamming(7, 8)  # squared distance = 4 x Hamming


def test_high_bits_beyond_any_possible_position_are_zero():
    table = binary_code(5, 70)  # more bits than an int64 shift can address
    np.testing.assert_array_equal(table[:, 3:], 0.0)
    np.testing.assert_array_equal(table @ np.ldexp(1.0, np.arange(70)), np.arange(5))


# --- The dyadic dials -------------------------------------------------------------------------------------


@given(counts, columns)
def test_dials_are_sin_two_pi_i_over_two_to_the_j(n, n_columns):
    i, j = np.meshgrid(np.arange(n), np.arange(n_columns), indexing="ij")
    np.testing.assert_allclose(dyadic_dials(n, n_columns), np.sin(2 * np.pi * i / 2.0**j), rtol=0, atol=1e-12)


@given(st.integers(min_value=1, max_value=3000), st.integers(min_value=2, max_value=24))
def test_first_two_dial_columns_carry_only_rounding_noise(n, n_columns):
    """sin(2 pi i) = sin(pi i) = 0 for every integer i; in float64 the noise stays below i * 1e-15."""
    dead = np.abs(dyadic_dials(n, n_columns)[:, :2])
    assert np.all(dead <= 1e-15 * np.arange(1, n + 1)[:, None])


@given(st.integers(min_value=3, max_value=12))
def test_dial_rows_repeat_with_period_two_to_the_j_minus_one(n_columns):
    period = 2 ** (n_columns - 1)
    dials = dyadic_dials(3 * period, n_columns)
    np.testing.assert_allclose(dials[period:], dials[:-period], rtol=0, atol=1e-11)
    # ... and not with any shorter period: the slowest column needs all 2**(J-1) positions
    assert np.abs(dials[period // 2 :] - dials[: -(period // 2)]).max() > 0.5


@given(st.integers(min_value=3, max_value=12))
def test_dial_rows_zero_and_two_to_the_j_minus_two_coincide_inside_one_period(n_columns):
    """Every dial is a sine of a multiple of pi at both positions, so both rows are 0: not unique."""
    dials = dyadic_dials(2 ** (n_columns - 1), n_columns)
    np.testing.assert_allclose(dials[2 ** (n_columns - 2)], dials[0], rtol=0, atol=1e-11)
    # those two are the only coincidence within a period
    distances = np.linalg.norm(dials[:, None, :] - dials[None, :, :], axis=-1)
    close = np.argwhere(np.triu(distances < 1e-9, k=1))
    assert close.tolist() == [[0, 2 ** (n_columns - 2)]]


def test_dials_with_many_columns_underflow_to_zero_without_warnings():
    dials = dyadic_dials(3, 2000)  # 2**2000 overflows a float64; dividing by it must not
    assert np.all(np.isfinite(dials))
    np.testing.assert_array_equal(dials[:, 1100:], 0.0)


# --- The one refused input ------------------------------------------------------------------------------------


@pytest.mark.argument_check
def test_normalised_count_needs_two_positions_to_divide_by_the_last_index():
    assert normalised_count(2).tolist() == [[0.0], [1.0]]
    with pytest.raises(ValueError, match="n_positions must be at least 2"):
        normalised_count(1)  # 0 / 0
