"""Chapter 12's band of bases: above the last failing base it reports, no base of its grid fails.

The chapter scans the grid of 100 bases per decade from the smallest base at which Men et al.'s condition,
``sum_i cos(m theta_i) >= 0`` for every distance ``m`` below the context length, holds, up to ten times it, and
reports the last one that fails. This test checks the rest of the grid for three of its lengths: every base
above that scan holds, up to the base at which a lower bound on the sum is positive (from there on the condition
holds at every base, so the band really ends where the chapter says). The bound: a pair that turns by at most
pi over the context contributes at least ``cos((L - 1) theta_i)``, every other pair at least -1; it only grows
with the base, since every theta_i but the first shrinks.
"""

import numpy as np
import pytest

import posenc

HEAD_DIM = 128
GRID = 10 ** (np.arange(200, 1000) / 100)  # the chapter's grid: 100 per decade, 100 to 1e10


def minimum_sum(base, length):
    """min over m < length of sum_i cos(m theta_i), in float64."""
    theta = posenc.rotary_frequencies(HEAD_DIM, base=base)
    return np.cos(np.outer(np.arange(length), theta)).sum(axis=1).min()


def minimum_sum_float32(base, length):
    """The same minimum summed in float32 (eight times faster here), and a bound on its error.

    Each angle is off by at most two roundings, 2 * 2**-24 * m * theta_i, which moves its cosine by no more;
    the bound doubles that and adds 2**-12 for the rounding of the 64 cosines and of their sum.
    """
    theta = posenc.rotary_frequencies(HEAD_DIM, base=base)
    angles = np.outer(np.arange(length, dtype=np.float32), theta.astype(np.float32))
    return np.cos(angles).sum(axis=1).min(), 2.0**-22 * length * theta.sum() + 2.0**-12


def lower_bound(base, length):
    """A lower bound on the sum at every m < length that grows with the base."""
    angle = (length - 1) * posenc.rotary_frequencies(HEAD_DIM, base=base)
    slow = angle <= np.pi
    return np.cos(angle[slow]).sum() - np.count_nonzero(~slow)


@pytest.mark.parametrize(
    ("length", "smallest", "last_failing"),
    [(4096, 28_840, 54_954), (8192, 91_201, 177_828), (16384, 234_423, 1_318_257)],
)
def test_no_grid_base_above_the_chapters_band_fails(length, smallest, last_failing):
    first = int(np.argmin(np.abs(GRID - smallest)))
    assert abs(GRID[first] / smallest - 1) < 1e-4 and minimum_sum(GRID[first], length) >= 0
    assert minimum_sum(GRID[first - 1], length) < 0
    end = int(np.argmin(np.abs(GRID - last_failing)))
    assert minimum_sum(GRID[end], length) < 0
    safe = next(j for j in range(end, len(GRID)) if lower_bound(GRID[j], length) > 0)
    for j in range(end + 1, safe + 1):
        # the smallest sum above the band is 0.035 (at 4096), several times the float32 error bound (0.006)
        rough, error = minimum_sum_float32(GRID[j], length)
        assert rough > error, f"the grid base {GRID[j]:.6g} above the band may fail at {length}"
    assert lower_bound(GRID[-1], length) > 0  # and the bound only grows from there
