r"""Xu et al.'s condition on the rotary base for a context length, searched on a grid of bases (chapter 12).

Xu et al. (2024) ask that, for a head of ``head_dim`` features with RoPE's frequencies
:math:`\theta_i = \text{base}^{-2i/d}`, the sum

.. math:: B_{m,\theta} = \sum_{i=0}^{d/2-1} \cos(m\theta_i)

stay non-negative at every distance :math:`m` below the context length :math:`L`. This module holds

- :func:`cosine_sum`, :math:`B_{m,\theta}` at every distance below a length;
- :func:`condition_holds`, whether :math:`B_{m,\theta} \ge 0` at all of them;
- :func:`base_bound`, the first base of a geometric grid (100 per decade) at which the condition holds for a
  length, and the grid bases above it where the condition fails again, as a :class:`BaseBound`;
- :func:`grid_verdicts`, whether the condition holds at each grid base of a range, for a length;
- :func:`sum_floor` and :func:`sure_base`, a lower bound on the sum that only grows with the base, and the base
  above which that bound proves the condition at every base.

The condition is not monotone in the base: the bases that satisfy it do not form an interval. So the first grid
base is a property of the grid, not of the condition. Bases between grid points may satisfy it lower down, and
bases between grid points above the last failing grid base may fail. Only :func:`sure_base` is a threshold,
and it is very conservative.

The sum, its error bound and the condition are the library's, :func:`posenc.base_condition_sum`,
:func:`posenc.base_condition_error` and :func:`posenc.base_condition_holds`, which take the frequencies
themselves (a scaled or partially rotated head); :func:`cosine_sum`, :func:`sum_error` and
:func:`condition_holds` here are those for RoPE's frequencies of a base, as chapter 12 asks. The library's
notes hold the blockwise product and its accuracy argument.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import ThreadpoolController

import posenc

__all__ = [
    "GRID",
    "BaseBound",
    "cosine_sum",
    "sum_error",
    "condition_holds",
    "base_bound",
    "grid_verdicts",
    "sum_floor",
    "sure_base",
]

GRID: NDArray[np.float64] = 10 ** (np.arange(200, 1300) / 100)
"""The bases :func:`base_bound` searches: :math:`10^{j/100}`, 100 per decade, from 100 to about :math:`10^{13}`."""

_BAND = 100  # grid bases above the first holding one that base_bound scans: up to ten times it


def _check(length: int, head_dim: int) -> None:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if isinstance(head_dim, bool) or not isinstance(head_dim, (int, np.integer)) or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even integer, got {head_dim!r}")


def _frequencies(base: float, head_dim: int, scaling: Mapping[str, object] | None) -> NDArray[np.float64]:
    return posenc.rotary_frequencies(head_dim, base=base, scaling=scaling)


@functools.cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # inspects the loaded libraries once (a few ms)


def _one_thread() -> contextlib.AbstractContextManager[object]:
    """NumPy's BLAS on one thread for the library's matrix products: its threads spin on a busy machine (the
    grid search of all chapter 12's lengths took 20-27 s with two threads and 2.7-4.7 s with one, at a load of 9
    on 2 cores)."""
    return _blas().limit(limits=1, user_api="blas")


def cosine_sum(
    base: float, length: int, head_dim: int = 128, *, scaling: Mapping[str, object] | None = None
) -> NDArray[np.float64]:
    r"""Xu et al.'s sum :math:`B_{m,\theta} = \sum_i \cos(m\theta_i)` at every distance ``m < length``.

    :func:`posenc.base_condition_sum` for ``posenc.rotary_frequencies(head_dim, base=base, scaling=scaling)``,
    over all ``head_dim / 2`` pairs of the head: a scaling's ``partial_rotary_factor`` leaves pairs unrotated,
    and they count as frequency 0 (each adds 1).

    Parameters
    ----------
    base : float
        The rotary base (``rope_theta``); greater than 1.
    length : int
        The context length :math:`L`; positive.
    head_dim : int, default 128
        Features per head :math:`d`; positive and even.
    scaling : dict or None, default None
        A transformers ``rope_scaling`` dict, to sum the cosines of a scaled model's frequencies (the grid
        search, :func:`base_bound`, is for unscaled ones).

    Returns
    -------
    (length,) ndarray of float64
        :math:`B_{m,\theta}` for :math:`m = 0, \dots, L - 1`; :math:`B_{0,\theta} = d/2`. Each value is within
        :func:`sum_error` of the exact sum of the cosines of the float64 angles.

    Examples
    --------
    >>> s = cosine_sum(10_000.0, 4096)
    >>> s.shape, float(s[0])
    ((4096,), 64.0)
    """
    _check(length, head_dim)
    with _one_thread():
        return posenc.base_condition_sum(_frequencies(base, head_dim, scaling), length, head_dim=head_dim)


def sum_error(length: int, head_dim: int = 128) -> float:
    r"""A bound on the error of :func:`cosine_sum` at distances below ``length``, for any base, unscaled.

    :func:`posenc.base_condition_error` for RoPE's frequencies, whose fastest is :math:`\theta_0 = 1` at
    every base (so the bound does not depend on the base).

    Parameters
    ----------
    length : int
        The context length; positive.
    head_dim : int, default 128
        Features per head; positive and even.

    Returns
    -------
    float

    Examples
    --------
    >>> f"{sum_error(2**20):.1e}"
    '6.0e-08'
    """
    _check(length, head_dim)
    return posenc.base_condition_error(_frequencies(10_000.0, head_dim, None), length)


def condition_holds(
    base: float, length: int, head_dim: int = 128, *, scaling: Mapping[str, object] | None = None
) -> bool:
    r"""Whether :math:`B_{m,\theta} \ge 0` at every distance ``m < length`` (Xu et al.'s condition).

    :func:`posenc.base_condition_holds` for ``posenc.rotary_frequencies(head_dim, base=base, scaling=scaling)``
    over all ``head_dim / 2`` pairs (unrotated pairs, with a ``partial_rotary_factor``, are frequency 0).

    Parameters
    ----------
    base : float
        The rotary base; greater than 1.
    length : int
        The context length; positive.
    head_dim : int, default 128
        Features per head; positive and even.
    scaling : dict or None, default None
        A transformers ``rope_scaling`` dict, passed to :func:`posenc.rotary_frequencies`.

    Returns
    -------
    bool

    Raises
    ------
    ArithmeticError
        If a sum lies within :func:`sum_error` of zero, where its sign cannot be told.

    Examples
    --------
    >>> condition_holds(10_000.0, 4096), condition_holds(100_000.0, 4096)
    (False, True)
    """
    _check(length, head_dim)
    with _one_thread():
        return posenc.base_condition_holds(_frequencies(base, head_dim, scaling), length, head_dim=head_dim)


@dataclass(frozen=True)
class BaseBound:
    r"""The first grid base that satisfies Xu et al.'s condition for a length, and the grid's band above it.

    Both are properties of :data:`GRID`: bases between its points may satisfy the condition below ``smallest``
    and fail it above ``band_end``.

    Attributes
    ----------
    length : int
        The context length :math:`L`.
    head_dim : int
        Features per head.
    smallest : float
        The first base of :data:`GRID` at which :math:`B_{m,\theta} \ge 0` for every ``m < length``.
    below : float
        The grid base just below it, at which the condition fails.
    failing : tuple of float
        The grid bases above ``smallest``, up to ten times it (the next 100), at which the condition fails
        again, in increasing order; empty if none does.

    Notes
    -----
    ``smallest`` keeps its name from the search: it is the smallest *grid* base that holds.
    """

    length: int
    head_dim: int
    smallest: float
    below: float
    failing: tuple[float, ...]

    @property
    def band_end(self) -> float:
        """The last failing grid base of the scan (the grid band's end), or ``below`` if no grid base above fails."""
        return self.failing[-1] if self.failing else self.below

    @property
    def band_bases(self) -> int:
        """Grid bases from ``smallest`` up to ``band_end`` (0 if none above the smallest fails)."""
        if not self.failing:
            return 0
        return int(round(100 * math.log10(self.band_end / self.smallest))) + 1


@functools.cache
def _first_holding(length: int, head_dim: int) -> int:
    """Index into GRID of the first base that holds for ``length``; starts at the half length's answer."""
    start = _first_holding((length + 1) // 2, head_dim) if length > 256 else 0
    for k in range(start, GRID.size):
        if condition_holds(float(GRID[k]), length, head_dim):
            return k
    raise ValueError(f"no base up to {GRID[-1]:.0e} satisfies the condition for length {length}")


@functools.cache
def _base_bound(length: int, head_dim: int) -> BaseBound:
    k = _first_holding(length, head_dim)
    top = min(k + _BAND, GRID.size - 1)
    failing = tuple(
        float(GRID[j]) for j in range(k + 1, top + 1) if not condition_holds(float(GRID[j]), length, head_dim)
    )
    return BaseBound(length, head_dim, float(GRID[k]), float(GRID[k - 1]) if k else math.nan, failing)


def base_bound(length: int, head_dim: int = 128) -> BaseBound:
    r"""The first base of :data:`GRID` at which Xu et al.'s condition holds for ``length``, and the grid's band.

    The condition, :math:`B_{m,\theta} = \sum_i \cos(m\theta_i) \ge 0` at every distance ``m < length``
    (:func:`condition_holds`), holds for every shorter length where it holds for a longer one, so the first
    grid base only grows with the length: the search scans :data:`GRID` upwards from the answer for half the
    length (computed the same way, and cached). It is not monotone in the base: above the first grid base some
    grid bases fail again, and the result lists those among the next 100 (up to ten times the first).

    Parameters
    ----------
    length : int
        The context length :math:`L`; positive.
    head_dim : int, default 128
        Features per head; positive and even.

    Returns
    -------
    BaseBound
        ``smallest``, the first grid base that holds, the grid base ``below`` it (which fails), the
        ``failing`` grid bases above it and the grid band's end.

    Raises
    ------
    ValueError
        If no base of :data:`GRID` satisfies the condition (lengths far beyond :math:`2^{20}`).

    Notes
    -----
    A search on another grid finds other values. The bases that satisfy the condition do not form an interval:
    bases between grid points may hold below ``smallest`` (at 131072, 4.87e6 holds below the grid's 8.9e6) and
    fail above ``band_end`` (at 8192, 394276 fails above the grid band's 177828). :func:`sure_base` gives a base
    above which the condition holds at every base.

    References
    ----------
    Xu, Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024, arXiv:2405.14591.

    Examples
    --------
    >>> bound = base_bound(4096)
    >>> round(bound.smallest), round(bound.band_end), len(bound.failing)
    (28840, 54954, 19)
    """
    _check(length, head_dim)
    return _base_bound(int(length), int(head_dim))


def grid_verdicts(
    length: int, low: float, high: float, head_dim: int = 128
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    r"""Every base of :data:`GRID` in ``[low, high)``, and whether Xu et al.'s condition holds there for ``length``.

    Reads :func:`base_bound`'s scan where it can: grid bases below its first holding base fail (it is the first),
    those of the scan above it fail exactly when they are in its ``failing``; the grid bases beyond the scan
    are checked with :func:`condition_holds`.

    Parameters
    ----------
    length : int
        The context length; positive.
    low, high : float
        The range of bases, ``low < high``.
    head_dim : int, default 128
        Features per head; positive and even.

    Returns
    -------
    bases : (n,) ndarray of float64
        The grid bases in ``[low, high)``, increasing.
    holds : (n,) ndarray of bool
        Whether the condition holds at each.

    Examples
    --------
    >>> bases, holds = grid_verdicts(4096, 1e4, 1e5)
    >>> len(bases), int(holds.sum())
    (100, 35)
    """
    _check(length, head_dim)
    if not low < high:
        raise ValueError(f"low must be below high, got {low!r} and {high!r}")
    bound = base_bound(length, head_dim)
    first = int(np.searchsorted(GRID, bound.smallest))
    failing = {int(np.searchsorted(GRID, base)) for base in bound.failing}
    chosen = np.flatnonzero((GRID >= low) & (GRID < high))
    holds = np.array(
        [
            j >= first
            and (j not in failing if j <= first + _BAND else condition_holds(float(GRID[j]), length, head_dim))
            for j in chosen
        ],
        dtype=bool,
    )
    return GRID[chosen], holds


def sum_floor(base: float, length: int, head_dim: int = 128) -> float:
    r"""A lower bound on :math:`B_{m,\theta}` at every distance ``m < length`` that never falls as the base grows.

    A pair that turns by at most :math:`\pi` over the context, :math:`(L - 1)\theta_i \le \pi`, contributes at
    least :math:`\cos((L - 1)\theta_i)` at every :math:`m < L` (the cosine falls on :math:`[0, \pi]`); every
    other pair contributes at least :math:`-1`. As the base grows every :math:`\theta_i` but :math:`\theta_0`
    shrinks, so each slow pair's term grows and fast pairs become slow: the bound never falls.

    Parameters
    ----------
    base : float
        The rotary base; greater than 1.
    length : int
        The context length :math:`L`; positive.
    head_dim : int, default 128
        Features per head; positive and even.

    Returns
    -------
    float
        :math:`\sum_{i:\,(L-1)\theta_i \le \pi} \cos((L-1)\theta_i) - \#\{i : (L-1)\theta_i > \pi\}`.

    Examples
    --------
    >>> sum_floor(10_000.0, 4096) < 0 < sum_floor(1e8, 4096)
    True
    """
    _check(length, head_dim)
    angle = (length - 1) * posenc.rotary_frequencies(head_dim, base=base)
    slow = angle <= np.pi
    return float(np.cos(angle[slow]).sum() - np.count_nonzero(~slow))


def sure_base(length: int, head_dim: int = 128) -> float:
    r"""A base above which Xu et al.'s condition holds at every base, from :func:`sum_floor`.

    Bisects :math:`\log_{10}` of the base for the point where :func:`sum_floor` exceeds :func:`sum_error`, to a
    relative :math:`10^{-9}`, and returns a base at which it does. Since the bound never falls as the base grows,
    :math:`B_{m,\theta} > 0` at every ``m < length`` for every base from there on. It is very conservative: it
    lets no pair that turns past :math:`\pi` contribute more than :math:`-1`.

    Parameters
    ----------
    length : int
        The context length :math:`L`; positive.
    head_dim : int, default 128
        Features per head; positive and even.

    Returns
    -------
    float

    Examples
    --------
    >>> f"{sure_base(8192):.3e}"
    '4.656e+07'
    """
    _check(length, head_dim)
    tolerance = sum_error(length, head_dim)
    low, high = 0.0, 2.0  # log10 of the base
    while sum_floor(10**high, length, head_dim) <= tolerance:
        low, high = high, 2 * high
    while high - low > 4e-10:
        middle = (low + high) / 2
        if sum_floor(10**middle, length, head_dim) > tolerance:
            high = middle
        else:
            low = middle
    return float(10**high)
