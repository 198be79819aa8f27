"""posenc_book.base_bound: Xu et al.'s sum, the condition, chapter 12's first grid base and grid band, and
the bound that proves the condition above a base.

``cosine_sum`` and ``condition_holds`` compute the sum blockwise as a matrix product; here they are compared
with the sum of the cosines taken directly, and ``base_bound`` with the scan chapter 12 ran before it (every
grid base from the start, the direct sum at every distance) on the chapter's lengths. ``sum_floor`` is checked
to be a lower bound on the sum that never falls as the base grows, so ``sure_base`` is a threshold. A test checks
that the grid band ends where the chapter says *on the grid*: above the last failing grid base it reports, no
grid base fails, up to ``sure_base``. Bases between grid points above it do fail (chapter 12 shows some): the
bases that satisfy the condition do not form an interval, and only ``sure_base`` bounds them.
"""

import functools

import numpy as np
import pytest

import posenc
from posenc_book.base_bound import (
    GRID,
    base_bound,
    condition_holds,
    cosine_sum,
    grid_verdicts,
    sum_error,
    sum_floor,
    sure_base,
)

HEAD_DIM = 128


def direct_sum(base, distances, head_dim=HEAD_DIM):
    """sum_i cos(m theta_i) at the given distances, one cosine at a time, in float64."""
    theta = posenc.rotary_frequencies(head_dim, base=base)
    return np.cos(np.outer(distances, theta)).sum(axis=1)


def direct_holds(base, length, head_dim=HEAD_DIM):
    """The condition as chapter 12 checked it before: the direct sum in float32 at every distance, then in
    float64 where float32 leaves the sign in doubt (two roundings of each angle, doubled, and 2**-12)."""
    theta = posenc.rotary_frequencies(head_dim, base=base)
    m = np.arange(length)
    rough = np.cos(np.outer(m.astype(np.float32), theta.astype(np.float32))).sum(axis=1)
    doubt = m[rough < 2.0**-22 * length * theta.sum() + 2.0**-12]
    return bool(np.all(direct_sum(base, doubt, head_dim) >= 0))


@functools.cache
def direct_smallest(length):
    """Index into GRID of the first base that holds, scanned from the answer for half the length."""
    start = direct_smallest(length // 2) if length > 512 else 0
    return next(j for j in range(start, GRID.size) if direct_holds(GRID[j], length))


@pytest.mark.parametrize(
    ("base", "length", "head_dim"),
    [(10_000.0, 4096, 128), (500_000.0, 16384, 128), (2.0e5, 4097, 64), (8.9e6, 131_072, 128), (4.2e8, 2**20, 128)],
)
def test_the_blockwise_sum_is_the_direct_sum_within_its_error_bound(base, length, head_dim):
    rng = np.random.default_rng(0)
    # every distance below 16384, or the last 4096 and 4096 drawn from the rest
    m = np.arange(length) if length <= 16384 else np.r_[rng.integers(0, length, 4096), np.arange(length - 4096, length)]
    blockwise = cosine_sum(base, length, head_dim)
    assert blockwise.shape == (length,)
    error = np.abs(blockwise[m] - direct_sum(base, m, head_dim)).max()
    assert error < sum_error(length, head_dim) / 4, error


@pytest.mark.parametrize("length", [1, 2, 3, 100, 4097, 5000])
def test_the_condition_checks_every_distance_and_no_more(length):
    # at base 10000 the sum first dips below zero at some m; the condition must flip exactly past it
    first_dip = int(np.flatnonzero(direct_sum(10_000.0, np.arange(5000)) < 0)[0])
    assert condition_holds(10_000.0, length) == (length <= first_dip)
    assert condition_holds(10_000.0, first_dip) and not condition_holds(10_000.0, first_dip + 1)


@pytest.mark.parametrize("length", [512, 1024, 2048, 4096, 8192, 16384])
def test_base_bound_gives_the_answers_of_the_direct_scan(length):
    # the scan chapter 12 ran before, with the direct sum: upwards from the half length's answer, and the next 100
    bound = base_bound(length)
    k = direct_smallest(length)
    assert (bound.smallest, bound.below) == (GRID[k], GRID[k - 1])
    failing = tuple(float(GRID[j]) for j in range(k + 1, k + 101) if not direct_holds(GRID[j], length))
    assert bound.failing == failing


@pytest.mark.parametrize(("length", "low", "high"), [(4096, 1e4, 4e5), (8192, 3e4, 2e6)])
def test_grid_verdicts_are_the_condition_at_each_grid_base(length, low, high):
    # below the first grid base, inside base_bound's scan and beyond it (ten times the first grid base)
    bases, holds = grid_verdicts(length, low, high)
    assert np.array_equal(bases, GRID[(GRID >= low) & (GRID < high)])
    assert bases[-1] > 10 * base_bound(length).smallest > bases[0]
    assert holds.tolist() == [direct_holds(base, length) for base in bases]


def test_base_bound_with_another_head_size():
    bound = base_bound(4096, head_dim=64)
    assert direct_holds(bound.smallest, 4096, 64) and not direct_holds(bound.below, 4096, 64)
    assert bound.smallest > base_bound(4096).smallest  # fewer pairs need a larger base


@pytest.mark.parametrize(
    ("length", "smallest", "last_failing"),
    [
        (4096, 28_840, 54_954),
        (8192, 91_201, 177_828),
        (16384, 234_423, 1_318_257),
        (32768, 630_957, 1_862_087),
        (131_072, 8_912_509, 31_622_777),
    ],
)
def test_no_grid_base_above_the_chapters_band_fails(length, smallest, last_failing):
    bound = base_bound(length)
    assert round(bound.smallest) == smallest and round(bound.band_end) == last_failing
    end = int(np.argmin(np.abs(GRID - bound.band_end)))
    safe = int(np.searchsorted(GRID, sure_base(length)))
    for j in range(end + 1, safe + 1):
        assert condition_holds(GRID[j], length), f"the grid base {GRID[j]:.6g} above the band fails at {length}"
    assert sum_floor(GRID[safe], length) > 0  # and the bound only grows from there


@pytest.mark.parametrize(("length", "head_dim"), [(1000, 128), (4096, 128), (4096, 64), (131_072, 128)])
def test_sum_floor_bounds_the_sum_from_below_and_never_falls_as_the_base_grows(length, head_dim):
    bases = 10 ** np.linspace(3, 11, 161)
    floors = np.array([sum_floor(b, length, head_dim) for b in bases])
    assert (np.diff(floors) >= 0).all()
    for base, floor in zip(bases[::8], floors[::8]):
        assert floor <= cosine_sum(base, length, head_dim).min() + sum_error(length, head_dim)


@pytest.mark.parametrize(("length", "head_dim"), [(1024, 128), (8192, 128), (4096, 64), (2**20, 128)])
def test_sure_base_is_where_the_floor_turns_positive(length, head_dim):
    sure = sure_base(length, head_dim)
    tolerance = sum_error(length, head_dim)
    assert sum_floor(sure, length, head_dim) > tolerance >= sum_floor(sure * (1 - 1e-8), length, head_dim)
    assert condition_holds(sure, length, head_dim)


def test_gemma3_leaves_its_context_to_a_class_default_of_131072():
    # chapter 12 reads Gemma 3's context from Gemma3TextConfig's default: its published text_config has none
    from transformers import Gemma3TextConfig

    from posenc_book.zoo import PUBLISHED_CONFIGS

    assert "max_position_embeddings" not in PUBLISHED_CONFIGS["google/gemma-3-4b-it"].values
    assert Gemma3TextConfig().max_position_embeddings == 131_072
