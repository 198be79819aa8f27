"""The fast path of ``posenc.sinusoidal``: blocked angle addition, as accurate as float64 angles.

Evenly spaced positions in a float32 (or float16) table are built from a few float64 phasors by the
translation property (see the Notes of :func:`posenc.sinusoidal`). These tests pin what that buys and
what it must not cost: accuracy against float64 angles at every layout, width and position up to 2**20,
the same bits whatever the number of threads or the length of the table, and a bounded peak memory.
"""

import tracemalloc

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from posenc import LAYOUTS, frequencies, layout_permutation, sinusoidal
from posenc.sinusoid import _direct_table, _progression_table

HALF_ULP_BELOW_ONE = 2.0**-25
"""Largest error of rounding a value in [-1, 1] to float32."""

ANGLE_SLACK = 1e-9
"""Room for the float64 rounding of angles near position 2**20 (about 2**20 * 2**-53 radians each way)."""

ISSUE_TARGET = 2.5e-7
"""The accuracy the fast path was asked for; what it reaches is much tighter (HALF_ULP_BELOW_ONE + slack)."""


def reference(positions, d_model, layout="interleaved", base=10000.0):
    """float64 angles, float64 sines and cosines: the paper's formula written out, independently of posenc."""
    angles = np.multiply.outer(np.asarray(positions, dtype=np.float64), frequencies(d_model, base=base))
    interleaved = np.empty((len(angles), d_model))
    interleaved[:, 0::2] = np.sin(angles)
    interleaved[:, 1::2] = np.cos(angles)
    return interleaved[:, layout_permutation("interleaved", layout, d_model)]


def max_error(table, positions, layout="interleaved", base=10000.0):
    return np.abs(table.astype(np.float64) - reference(positions, table.shape[1], layout, base)).max()


def progression(n, d_model, *, layout="interleaved", dtype=np.float32, start=0.0, step=1.0, n_threads=None):
    return _progression_table(
        start, step, n, d_model, base=10000.0, layout=layout, dtype=np.dtype(dtype), n_threads=n_threads
    )


# --- Accuracy ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "d_model, n_positions",
    [(2, 5000), (4, 3001), (6, 777), (10, 1000), (64, 1500), (512, 700), (1024, 300), (4096, 90)],
)
def test_count_table_is_within_half_a_float32_ulp_of_float64_angles(layout, d_model, n_positions):
    """Every width from 2 to 4096, every layout, more rows than one block: rounding to float32 is the only error."""
    error = max_error(sinusoidal(n_positions, d_model, layout=layout), np.arange(n_positions), layout)
    assert error <= HALF_ULP_BELOW_ONE + ANGLE_SLACK < ISSUE_TARGET


@given(
    start=st.floats(min_value=-1e5, max_value=1e5),
    step=st.floats(min_value=-100.0, max_value=100.0),
    n_positions=st.integers(min_value=1, max_value=600),
    half=st.integers(min_value=1, max_value=64),
    layout=st.sampled_from(LAYOUTS),
)
def test_fractional_and_negative_starts_and_steps_are_as_accurate(start, step, n_positions, half, layout):
    table = sinusoidal(n_positions, 2 * half, layout=layout, start=start, step=step)
    positions = start + step * np.arange(n_positions)
    assert max_error(table, positions, layout) <= HALF_ULP_BELOW_ONE + ANGLE_SLACK


@pytest.mark.parametrize("layout", LAYOUTS)
def test_error_does_not_grow_up_to_position_2_to_the_20(layout):
    """Rows up to 2**20: every row of a 2**20 + 5 row table, and wide rows reached by a large step or start."""
    n_positions = 2**20 + 5
    assert (
        max_error(sinusoidal(n_positions, 4, layout=layout), np.arange(n_positions), layout)
        <= HALF_ULP_BELOW_ONE + ANGLE_SLACK
    )
    wide = sinusoidal(4097, 1024, layout=layout, step=256.0)  # positions 0, 256, ..., 2**20
    assert max_error(wide, 256.0 * np.arange(4097), layout) <= HALF_ULP_BELOW_ONE + ANGLE_SLACK
    near_end = sinusoidal(300, 4096, layout=layout, start=2.0**20 - 150.5, step=0.75)
    assert max_error(near_end, 2.0**20 - 150.5 + 0.75 * np.arange(300), layout) <= HALF_ULP_BELOW_ONE + ANGLE_SLACK


def test_float32_angles_are_far_less_accurate_at_the_same_positions():
    """The contrast the fast path is measured against: float32 angles miss by ~1e-3 near position 65536."""
    positions = np.arange(65536 - 64, 65536, dtype=np.float32)
    angles32 = positions[:, None] * frequencies(512).astype(np.float32)
    float32_error = np.abs(np.sin(angles32) - reference(positions, 512)[:, 0::2]).max()
    fast_error = max_error(sinusoidal(64, 512, start=65536.0 - 64), positions)
    assert float32_error > 1e-3 > 1000 * fast_error


@pytest.mark.parametrize("layout", LAYOUTS)
def test_float16_tables_are_rounded_once(layout):
    table = sinusoidal(1000, 64, layout=layout, dtype=np.float16)
    expected = reference(np.arange(1000), 64, layout).astype(np.float16)
    assert table.dtype == np.float16
    assert np.abs(table.astype(np.float64) - expected.astype(np.float64)).max() <= 2.0**-11  # one float16 ulp at most


# --- Which positions take the fast path, and that it gives one answer ------------------------------------


@given(
    start=st.floats(min_value=-1e4, max_value=1e4),
    step=st.sampled_from([1.0, -1.0, 0.5, 0.25, 3.0, 0.0]),
    n_positions=st.integers(min_value=2, max_value=400),
    layout=st.sampled_from(LAYOUTS),
)
def test_an_evenly_spaced_array_gives_the_same_bits_as_start_and_step(start, step, n_positions, layout):
    """An array equal to p[0] + (p[1] - p[0]) * r is detected and built like the count with start and step."""
    positions = start + step * np.arange(n_positions)
    assume(np.array_equal(positions[0] + (positions[1] - positions[0]) * np.arange(n_positions), positions))
    np.testing.assert_array_equal(
        sinusoidal(positions, 16, layout=layout),
        sinusoidal(n_positions, 16, layout=layout, start=positions[0], step=positions[1] - positions[0]),
    )


def test_an_uneven_array_takes_the_direct_path():
    positions = np.array([0.0, 1.0, 3.0, 5.0, 1e6 + 0.25])
    np.testing.assert_array_equal(
        sinusoidal(positions, 32), _direct_table(positions, 32, base=10000.0, layout="interleaved", dtype=np.float32)
    )


@given(
    n_positions=st.integers(min_value=1, max_value=3000),
    cut=st.integers(min_value=1, max_value=3000),
    layout=st.sampled_from(LAYOUTS),
)
def test_a_row_does_not_depend_on_the_length_of_the_table(n_positions, cut, layout):
    """sinusoidal(n)[:m] == sinusoidal(m): the blocks and phasors of a row depend on its index only."""
    cut = min(cut, n_positions)
    np.testing.assert_array_equal(sinusoidal(n_positions, 24, layout=layout)[:cut], sinusoidal(cut, 24, layout=layout))


@given(
    n_positions=st.integers(min_value=0, max_value=200),
    half=st.integers(min_value=1, max_value=40),
    source=st.sampled_from(LAYOUTS),
    target=st.sampled_from(LAYOUTS),
)
def test_layouts_of_the_fast_path_hold_the_same_bits(n_positions, half, source, target):
    permutation = layout_permutation(source, target, 2 * half)
    np.testing.assert_array_equal(
        sinusoidal(n_positions, 2 * half, layout=target),
        sinusoidal(n_positions, 2 * half, layout=source)[:, permutation],
    )


def test_float64_tables_keep_the_direct_path_bit_for_bit():
    """A float64 table is np.sin and np.cos of float64 angles, exactly, for counts too."""
    np.testing.assert_array_equal(sinusoidal(5000, 64, dtype=np.float64), reference(np.arange(5000), 64))


# --- Threads ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n_positions, d_model", [(1000, 512), (4099, 64), (37, 8)])
def test_threaded_fast_path_equals_single_threaded_bit_for_bit(layout, dtype, n_positions, d_model):
    one = progression(n_positions, d_model, layout=layout, dtype=dtype, start=-3.5, step=0.7, n_threads=1)
    for n_threads in (2, 3):
        np.testing.assert_array_equal(
            progression(n_positions, d_model, layout=layout, dtype=dtype, start=-3.5, step=0.7, n_threads=n_threads),
            one,
        )


def test_large_table_uses_threads_and_matches_single_threaded():
    """The public call on a table above the threshold equals the one-thread build."""
    np.testing.assert_array_equal(sinusoidal(8192, 256), progression(8192, 256, n_threads=1))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_threaded_direct_path_equals_single_threaded_bit_for_bit(layout):
    positions = np.random.default_rng(0).uniform(-1e5, 1e5, size=3001)
    one = _direct_table(positions, 128, base=10000.0, layout=layout, dtype=np.float64, n_threads=1)
    np.testing.assert_array_equal(
        _direct_table(positions, 128, base=10000.0, layout=layout, dtype=np.float64, n_threads=2), one
    )


# --- Memory ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n_positions, d_model", [(8192, 1024), (65536, 16), (2048, 512)])
def test_peak_memory_is_at_most_one_and_a_half_tables(layout, n_positions, d_model):
    tracemalloc.start()
    try:
        table = sinusoidal(n_positions, d_model, layout=layout)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 1.5 * table.nbytes
