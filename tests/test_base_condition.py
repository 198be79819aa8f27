"""posenc.base_condition: Xu et al.'s cosine sum over a head's frequencies, its error bound and its sign.

The blockwise sum is compared with the sum of the cosines of the float64 angles taken directly, one cosine at a
time, within a quarter of its error bound; the condition is checked to flip exactly where the direct sum first
dips below zero; frequencies 0 (unrotated pairs) are checked to add 1 each, so ``head_dim`` pads the same way;
a scaled head's frequencies are checked to give the sum of their own cosines. The grid search built on these
functions, chapter 12's, is tests/test_base_bound.py's.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc


def direct_sum(theta, distances):
    """sum_i cos(m theta_i) at the given distances, one cosine of one float64 angle at a time."""
    return np.cos(np.outer(distances, theta)).sum(axis=1)


def rope(head_dim, base, scaling=None):
    return posenc.rotary_frequencies(head_dim, base=base, scaling=scaling)


@pytest.mark.parametrize(
    ("theta", "length"),
    [
        (rope(128, 10_000.0), 4096),
        (rope(128, 500_000.0), 16384),
        (rope(64, 2.0e5), 4097),
        (rope(128, 8.9e6), 131_072),
        (rope(128, 4.2e8), 2**20),
        (rope(128, 5e5, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}), 65_536),
        (np.array([3.0, 0.7, 0.0, 0.0, 1e-4]), 5000),  # frequencies above 1, and unrotated pairs
    ],
)
def test_the_blockwise_sum_is_the_direct_sum_within_its_error_bound(theta, length):
    rng = np.random.default_rng(0)
    # every distance below 16384, or the last 4096 and 4096 drawn from the rest
    m = np.arange(length) if length <= 16384 else np.r_[rng.integers(0, length, 4096), np.arange(length - 4096, length)]
    blockwise = posenc.base_condition_sum(theta, length)
    assert blockwise.shape == (length,) and blockwise.dtype == np.float64
    assert blockwise[0] == theta.size
    error = np.abs(blockwise[m] - direct_sum(theta, m)).max()
    assert error < posenc.base_condition_error(theta, length) / 4, error


@settings(max_examples=30, deadline=None)
@given(
    theta=st.lists(st.floats(0.0, 4.0), min_size=1, max_size=12),
    length=st.integers(1, 3000),
)
def test_the_sum_and_the_condition_agree_with_the_direct_sum_for_any_frequencies(theta, length):
    theta = np.array(theta)
    direct = direct_sum(theta, np.arange(length))
    tolerance = posenc.base_condition_error(theta, length)
    assert np.abs(posenc.base_condition_sum(theta, length) - direct).max() < tolerance / 4
    if np.abs(direct).min() <= 2 * tolerance:
        return  # the sign of a sum this close to zero is the ArithmeticError's case, below
    assert posenc.base_condition_holds(theta, length) == bool(direct.min() >= 0)


@pytest.mark.parametrize("length", [1, 2, 3, 100, 4097, 5000])
def test_the_condition_checks_every_distance_and_no_more(length):
    # at base 10000 the sum first dips below zero at some m; the condition must flip exactly past it
    theta = rope(128, 10_000.0)
    first_dip = int(np.flatnonzero(direct_sum(theta, np.arange(5000)) < 0)[0])
    assert posenc.base_condition_holds(theta, length) == (length <= first_dip)
    assert posenc.base_condition_holds(theta, first_dip) and not posenc.base_condition_holds(theta, first_dip + 1)


def test_unrotated_pairs_are_frequency_zero_and_head_dim_adds_them():
    # a head of 128 that rotates 64 features (GPT-NeoX's partial rotary, or p-RoPE): 32 pairs turn, 32 do not
    rotated = rope(64, 10_000.0)
    padded = np.r_[rotated, np.zeros(32)]
    np.testing.assert_array_equal(
        posenc.base_condition_sum(rotated, 4096, head_dim=128), posenc.base_condition_sum(padded, 4096)
    )
    np.testing.assert_allclose(
        posenc.base_condition_sum(rotated, 4096, head_dim=128),
        posenc.base_condition_sum(rotated, 4096) + 32,
        rtol=0,
        atol=2 * posenc.base_condition_error(padded, 4096),
    )
    assert posenc.base_condition_error(rotated, 4096, head_dim=128) == posenc.base_condition_error(padded, 4096)
    # the rotated pairs alone fail at 4096 positions; with the 32 unrotated pairs the head holds
    assert not posenc.base_condition_holds(rotated, 4096)
    assert posenc.base_condition_holds(rotated, 4096, head_dim=128)


def test_the_condition_reads_a_scaled_head_from_its_frequencies():
    # Llama 3.1's head at 131072: llama3 scaling slows the slow pairs, and the sum is that of the scaled cosines
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    }
    scaled = rope(128, 500_000.0, scaling)
    m = np.arange(131_072 - 2048, 131_072)
    sums = posenc.base_condition_sum(scaled, 131_072)
    assert np.abs(sums[m] - direct_sum(scaled, m)).max() < posenc.base_condition_error(scaled, 131_072) / 4
    holds = posenc.base_condition_holds(scaled, 131_072)
    assert holds == bool(posenc.base_condition_sum(scaled, 131_072).min() >= 0)


def test_a_sum_that_touches_zero_is_refused_not_guessed():
    # a pair at a quarter turn per position and an unrotated one: 1 + cos(m pi / 2) is 0 at m = 2, up to rounding
    assert posenc.base_condition_holds([np.pi / 2, 0.0], 2)
    with pytest.raises(ArithmeticError, match="sign unknown"):
        posenc.base_condition_holds([np.pi / 2, 0.0], 3)


def test_the_error_bound_is_the_documented_formula():
    theta = rope(128, 1e6)
    n, length = 64, 2**20
    expected = 2 * n * (2.0**-51 * length * 1.0 + 2.0**-50 + n * 2.0**-52)
    assert posenc.base_condition_error(theta, length) == expected
    # it scales with the fastest frequency's size
    assert posenc.base_condition_error(2 * theta, length) > posenc.base_condition_error(theta, length)
