"""Properties of the sinusoidal table and its translation matrix that hold for every input."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import LAYOUTS, frequencies, layout_permutation, sinusoidal, translation_matrix

d_models = st.integers(min_value=1, max_value=64).map(lambda half: 2 * half)
bases = st.floats(min_value=1.5, max_value=1e6)
offsets = st.floats(min_value=-1000.0, max_value=1000.0)
layouts = st.sampled_from(LAYOUTS)
position_arrays = st.lists(st.floats(min_value=-1e4, max_value=1e4), min_size=1, max_size=8).map(np.array)


def table64(positions, d_model, **kwargs):
    return sinusoidal(positions, d_model, dtype=np.float64, **kwargs)


# --- The formula as Vaswani et al. (2017, §3.5) print it -------------------------------------------------


@pytest.mark.parametrize("d_model", [2, 4, 6, 10, 128])
def test_every_entry_is_the_papers_formula_with_exponent_2i_over_d_for_both_members(d_model):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)) and PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), entry by entry."""
    positions = [0, 1, 2, 7, 50, 999]
    table = table64(positions, d_model)
    for row, pos in enumerate(positions):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[row, 2 * i] == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[row, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-12)


def test_frequencies_are_a_geometric_progression_from_one_to_base_to_the_minus_d_minus_2_over_d():
    omega = frequencies(512)
    assert omega.shape == (256,) and omega.dtype == np.float64
    assert omega[0] == 1.0
    np.testing.assert_allclose(omega[1:] / omega[:-1], 10000.0 ** (-2 / 512), rtol=1e-12)
    assert omega[-1] == pytest.approx(10000.0 ** (-510 / 512), rel=1e-12)
    assert omega[-1] > 1 / 10000.0  # the paper's 10000·2π wavelength is an upper bound, not reached


def test_frozen_snapshot_of_small_table():
    """Values of sin and cos written out, for d_model = 4 (frequencies 1 and 0.01).

    Not bit for bit: NumPy's float64 sin, cos and power are not correctly rounded everywhere and differ by an ulp
    between processors (power does between AVX-512 and AVX2 machines), and the literal sin(0.03) is printed to 15
    digits (11 ulps off). atol 1e-15 is 9 ulps or more of every entry (all <= 1), several times both; the float32
    table is one rounding from these, 2**-25 < 6e-8."""
    expected = np.array(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.8414709848078965, 0.5403023058681398, 0.009999833334166664, 0.9999500004166653],
            [0.1411200080598672, -0.9899924966004454, 0.0299955002024957, 0.9995500337489875],
            [-0.9589242746631385, 0.28366218546322625, 0.04997916927067833, 0.9987502603949663],
        ]
    )
    np.testing.assert_allclose(table64([0, 1, 3, 5], 4), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(sinusoidal(np.array([0, 1, 3, 5]), 4), expected, rtol=0, atol=6e-8)


def test_int_count_means_positions_zero_to_n_minus_one():
    np.testing.assert_array_equal(sinusoidal(7, 12), sinusoidal(np.arange(7), 12))
    assert sinusoidal(0, 12).shape == (0, 12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_dtype_is_respected(dtype):
    assert sinusoidal(5, 8, dtype=dtype).dtype == dtype


def test_float32_table_is_accurate_at_large_positions():
    """Angles are formed in float64: a float32 table is off by float32 rounding only, even near 2**20."""
    positions = np.array([2.0**20 - 1, 2.0**20, 2.0**20 + 0.5, 1e6 + 0.25])
    error = np.abs(sinusoidal(positions, 512).astype(np.float64) - table64(positions, 512))
    assert error.max() <= 2**-24 + 1e-12
    # Forming the angles in float32 instead, as many implementations do, is wrong by orders of magnitude.
    angles32 = positions.astype(np.float32)[:, None] * frequencies(512).astype(np.float32)
    assert np.abs(np.sin(angles32) - table64(positions, 512)[:, ::2]).max() > 1e-3


def test_blocked_computation_matches_one_shot_formula_across_block_boundaries():
    positions = np.arange(40000, dtype=np.float64) * 0.37 - 5000.0  # more rows than one block holds
    table = table64(positions, 128)
    angles = np.multiply.outer(positions, frequencies(128))
    np.testing.assert_array_equal(table[:, 0::2], np.sin(angles))
    np.testing.assert_array_equal(table[:, 1::2], np.cos(angles))


# --- Norms and dot products ------------------------------------------------------------------------------


@given(position_arrays, d_models, bases, layouts)
def test_every_row_has_squared_norm_d_model_over_2(positions, d_model, base, layout):
    norms = np.sum(table64(positions, d_model, base=base, layout=layout) ** 2, axis=1)
    np.testing.assert_allclose(norms, d_model / 2, rtol=1e-12)


@given(position_arrays, offsets, d_models, bases, layouts)
def test_dot_product_depends_on_the_offset_only(positions, k, d_model, base, layout):
    """PE(x)·PE(x+k) = Σ_i cos(ω_i k), whatever x is."""
    dots = np.sum(
        table64(positions, d_model, base=base, layout=layout)
        * table64(positions + k, d_model, base=base, layout=layout),
        axis=1,
    )
    expected = np.sum(np.cos(frequencies(d_model, base=base) * k))
    np.testing.assert_allclose(dots, expected, rtol=0, atol=1e-9 * d_model)


# --- The translation matrix ------------------------------------------------------------------------------


@given(position_arrays, offsets, d_models, bases, layouts)
def test_translation_matrix_shifts_every_row_by_the_offset(positions, offset, d_model, base, layout):
    """PE(x + Δ) = PE(x) · T(Δ) for negative and fractional Δ, any d_model, base and layout."""
    shifted = table64(positions, d_model, base=base, layout=layout) @ translation_matrix(
        offset, d_model, base=base, layout=layout
    )
    np.testing.assert_allclose(
        shifted, table64(positions + offset, d_model, base=base, layout=layout), rtol=0, atol=1e-9
    )


@given(offsets, d_models, layouts)
def test_translation_matrix_is_orthogonal(offset, d_model, layout):
    matrix = translation_matrix(offset, d_model, layout=layout)
    np.testing.assert_allclose(matrix @ matrix.T, np.eye(d_model), rtol=0, atol=1e-12)


@given(offsets, offsets, d_models, layouts)
def test_translations_compose_by_adding_offsets(a, b, d_model, layout):
    product = translation_matrix(a, d_model, layout=layout) @ translation_matrix(b, d_model, layout=layout)
    np.testing.assert_allclose(product, translation_matrix(a + b, d_model, layout=layout), rtol=0, atol=1e-9)


@given(offsets, d_models, layouts)
def test_negative_offset_gives_the_transpose(offset, d_model, layout):
    np.testing.assert_allclose(
        translation_matrix(-offset, d_model, layout=layout),
        translation_matrix(offset, d_model, layout=layout).T,
        rtol=0,
        atol=1e-15,
    )


def test_zero_offset_is_the_identity():
    for layout in LAYOUTS:
        np.testing.assert_array_equal(translation_matrix(0, 16, layout=layout), np.eye(16))


@pytest.mark.parametrize(
    "matrix_layout, table_layout",
    [("interleaved", "cos_first"), ("cos_first", "interleaved"), ("interleaved", "halves")],
)
def test_translation_matrix_of_another_layout_is_wrong_by_order_one(matrix_layout, table_layout):
    """The block must be paired with the layout: the wrong pairing fails by O(1), not by rounding."""
    positions = np.arange(10.0)
    shifted = table64(positions, 16, layout=table_layout) @ translation_matrix(1.0, 16, layout=matrix_layout)
    assert np.abs(shifted - table64(positions + 1.0, 16, layout=table_layout)).max() > 0.5


def test_interleaved_block_is_c_minus_s_over_s_c():
    """For pairs [sin, cos] and row vectors the block is [[c, -s], [s, c]]; for [cos, sin] its transpose."""
    c, s = math.cos(0.7), math.sin(0.7)
    np.testing.assert_allclose(translation_matrix(0.7, 2)[:2, :2], [[c, -s], [s, c]], atol=1e-15)
    np.testing.assert_allclose(translation_matrix(0.7, 2, layout="cos_first"), [[c, s], [-s, c]], atol=1e-15)


# --- Layouts ---------------------------------------------------------------------------------------------


@given(position_arrays, d_models, layouts, layouts)
def test_layouts_hold_the_same_numbers_up_to_a_column_permutation(positions, d_model, source, target):
    permutation = layout_permutation(source, target, d_model)
    np.testing.assert_array_equal(np.sort(permutation), np.arange(d_model))
    np.testing.assert_array_equal(
        table64(positions, d_model, layout=target), table64(positions, d_model, layout=source)[:, permutation]
    )


def test_layout_columns_are_where_the_docs_say():
    table = table64([1.0], 4, layout="halves")[0]
    np.testing.assert_allclose(table, [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)], atol=1e-15)
    table = table64([1.0], 4, layout="cos_first")[0]
    np.testing.assert_allclose(table, [math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)], atol=1e-15)


def test_translation_matrices_of_two_layouts_are_related_by_the_permutation():
    permutation = layout_permutation("interleaved", "halves", 10)
    interleaved = translation_matrix(2.5, 10)
    np.testing.assert_array_equal(
        translation_matrix(2.5, 10, layout="halves"), interleaved[np.ix_(permutation, permutation)]
    )


def test_the_sinusoidal_functions_are_public_at_the_top_level():
    """``posenc.sinusoidal`` and friends are the module's own functions, re-exported once."""
    import posenc.sinusoid

    assert set(posenc.sinusoid.__all__) <= set(posenc.__all__)
    assert all(getattr(posenc, name) is getattr(posenc.sinusoid, name) for name in posenc.sinusoid.__all__)


def test_import_posenc_needs_numpy_only():
    """``import posenc`` must not import torch or matplotlib (the chapters' helpers and posenc.nn do)."""
    import subprocess
    import sys

    code = "import sys, posenc; print(sorted({'torch', 'matplotlib'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
