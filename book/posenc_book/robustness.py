r"""Training claims that survive another processor: perturbed runs, the spread they show, and a margin check.

A number that comes out of training is the end of a chaotic computation. Another processor runs other
kernels (another vector width, another order of a sum), so its matrix products differ in their last bits, and
150 steps of Adam carry such a difference up to the size of the result: the difference between two of
chapter 12's small models' losses at 128 symbols moved by up to 0.017 nats when NumPy's and PyTorch's kernels
were capped at AVX2 on an AVX-512 machine (issue 29), enough to flip the sign a test asserted. The thread count
does not stand in for that (issue 29: one and two threads gave identical losses); the processor's kernels do.
This module holds

- :class:`Perturbation`, the stand-in for another processor: every initial weight of a freshly built model
  multiplied by :math:`1 + s\,\varepsilon`, :math:`s` = :data:`PERTURBATION_SCALE`, with fixed
  standard-normal draws :math:`\varepsilon` numbered by ``draw``;
- :func:`perturbed`, a context manager inside which the book's training functions
  (:func:`posenc_book.extrapolation.train_and_evaluate`, :func:`~posenc_book.extrapolation.position_interpolation`,
  :func:`~posenc_book.extrapolation.copy_task`, :func:`posenc_book.frequency_usage.train_rotary` and
  :func:`posenc_book.tabular.train_regression`) apply a perturbation to the model before its first step
  (:func:`perturb_initial_weights`);
- :class:`Bound` and :func:`check_claim`: a claim is a function that trains and returns named numbers, and
  inequalities on them; :func:`check_claim` runs the function plainly and under each of several
  perturbations, measures each number's spread, and fails a bound whose margin is under
  :data:`MARGIN_FACTOR` times that spread, or that a perturbed run breaks. :func:`assert_claim` raises with
  the table;
- :func:`check_seeds` and :func:`check_seed_values`, the rule for a claim about a scheme, a chain or "every
  seed": it must hold on every one of at least :data:`MIN_SEEDS` training seeds (the page's included), and the
  nine-seed mean must lie inside its bound by at least :data:`MARGIN_FACTOR` times the standard deviation over
  those seeds. :func:`assert_seeds` raises with the table.

Two rules, for two kinds of sentence. A perturbation of one part in a million is what another processor does
to a run: it is the spread of *the run on the page*, and a sentence about that run ("on the seeds shown")
needs a margin of three such spreads. Another seed is another run: it moves chapter 9's losses 10 to 100 times
further (issue 33), so a sentence about what a scheme, a model family or a chain does is a sentence about
seeds, and needs three seed-spreads of margin over a sample larger than the page's.

Why a relative :math:`10^{-6}`, and why four draws. A float32 weight's last bit is :math:`2^{-24}` to
:math:`2^{-23}` of it (:math:`6 \cdot 10^{-8}` to :math:`1.2 \cdot 10^{-7}`), so the perturbation moves a
weight by several units in the last place, more than one rounding of another kernel moves a product; training
then carries either difference to the same size. ``python tests/claim_spread.py calibrate`` measured it on 40
numbers of chapters 5, 9 and 12 (losses of the chapters' models at and beyond the training length, usage
shares, chapter 5's test errors) on an AMD EPYC with AVX-512: NumPy's and PyTorch's kernels capped at AVX2 or
at the x86-64 baseline (as ``make check-portable`` caps them) moved chapter 12's numbers by up to 0.026 nats
(median 0.003) and chapter 9's by up to 0.0024, and moved each of those 34 numbers by at most 1.5 times the
largest change that draws 1-4 gave it (median 0.48 on chapter 12's, 0.25 on chapter 9's): a margin of three
times the draws' spread covers the capped kernels. (Of chapter 5's six test errors, one moved 3.6 times as far
under the capped kernels, by less than 1e-4 in log10; its claim's margin is orders of magnitude larger.) A
perturbation of :math:`10^{-8}` moved chapter 12's losses as far as one of :math:`10^{-6}`: the scale is not
critical, as long as it is not below one rounding.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = [
    "PERTURBATION_SCALE",
    "PERTURBATION_DRAWS",
    "MARGIN_FACTOR",
    "Perturbation",
    "perturbed",
    "active_perturbation",
    "perturb_initial_weights",
    "Bound",
    "BoundCheck",
    "ClaimCheck",
    "check_claim",
    "assert_claim",
    "MIN_SEEDS",
    "SeedBoundCheck",
    "SeedCheck",
    "check_seed_values",
    "check_seeds",
    "assert_seeds",
]

PERTURBATION_SCALE = 1e-6
"""Relative size :math:`s` of the perturbation of each initial weight (see the module's notes)."""

PERTURBATION_DRAWS = (1, 2, 3, 4)
"""The draws :func:`check_claim` runs by default, besides the plain run."""

MARGIN_FACTOR = 3.0
"""A bound passes when its margin is at least this many times the spread of its quantity."""

MIN_SEEDS = 9
"""The fewest training seeds :func:`check_seed_values` accepts for a claim about a scheme, a chain or every seed."""

_SEED_TAG = 29
"""Mixed into the seed of every draw, so that draw ``k`` is not the stream of ``default_rng(k)`` used elsewhere."""

_ACTIVE: contextvars.ContextVar[Perturbation | None] = contextvars.ContextVar("perturbation", default=None)


@dataclass(frozen=True)
class Perturbation:
    r"""Multiply every initial weight by :math:`1 + s\,\varepsilon`, with :math:`\varepsilon` draw ``draw``.

    Parameters
    ----------
    draw : int
        Numbers the fixed draws of :math:`\varepsilon`: equal draws perturb equal models equally, on every
        machine (NumPy's ``default_rng``, standard normal, in float64).
    scale : float, default PERTURBATION_SCALE
        :math:`s`, positive and finite.

    Examples
    --------
    >>> model = torch.nn.Linear(3, 2)
    >>> before = model.weight.detach().clone()
    >>> Perturbation(1).apply(model)
    >>> change = (model.weight.detach() / before - 1).abs().max().item()
    >>> 0 < change < 1e-5
    True
    """

    draw: int
    scale: float = PERTURBATION_SCALE

    def __post_init__(self) -> None:
        if isinstance(self.draw, bool) or not isinstance(self.draw, int) or self.draw < 0:
            raise ValueError(f"draw must be a non-negative int, got {self.draw!r}")
        if (
            isinstance(self.scale, bool)
            or not isinstance(self.scale, (int, float))
            or not math.isfinite(self.scale)
            or self.scale <= 0
        ):
            raise ValueError(f"scale must be a positive finite number, got {self.scale!r}")

    def apply(self, model: nn.Module) -> None:
        """Perturb ``model``'s parameters in place (in ``named_parameters`` order, one stream of draws)."""
        rng = np.random.default_rng([_SEED_TAG, self.draw])
        with torch.no_grad():
            for _, parameter in model.named_parameters():
                epsilon = torch.from_numpy(rng.standard_normal(tuple(parameter.shape)))
                factor = 1.0 + self.scale * epsilon
                parameter.copy_((parameter.double() * factor).to(parameter.dtype))


@contextlib.contextmanager
def perturbed(perturbation: Perturbation | None) -> Iterator[None]:
    """Within the block, the book's training functions perturb each model they build (None: none).

    Parameters
    ----------
    perturbation : Perturbation or None

    Examples
    --------
    >>> with perturbed(Perturbation(2)):
    ...     active_perturbation()
    Perturbation(draw=2, scale=1e-06)
    >>> active_perturbation() is None
    True
    """
    if perturbation is not None and not isinstance(perturbation, Perturbation):
        raise TypeError(f"perturbation must be a Perturbation or None, got {type(perturbation).__name__}")
    token = _ACTIVE.set(perturbation)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_perturbation() -> Perturbation | None:
    """The perturbation of the innermost :func:`perturbed` block, or None outside every block.

    A cache of training results must include it in its key, or a perturbed claim reads a plain run.
    """
    return _ACTIVE.get()


def perturb_initial_weights(model: nn.Module) -> None:
    """Apply the active perturbation to a freshly built ``model`` (nothing outside :func:`perturbed`).

    The training functions of the book call it once, after building and seeding the model and before its
    first step.
    """
    perturbation = _ACTIVE.get()
    if perturbation is not None:
        perturbation.apply(model)


# --- Claims and their margins --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """One inequality a claim asserts: ``quantity > above`` and/or ``quantity < below``, for every element.

    Parameters
    ----------
    quantity : str
        The name of a number (or of an array of numbers, one per seed, say) the claim's function returns.
    above, below : float or None
        The thresholds; at least one. An order ("a is lower than b") is the bound ``above=0`` on the
        difference ``b - a``.
    """

    quantity: str
    above: float | None = None
    below: float | None = None

    def __post_init__(self) -> None:
        if self.above is None and self.below is None:
            raise ValueError(f"a Bound needs above or below, got neither for {self.quantity!r}")

    def margin(self, values: np.ndarray) -> np.ndarray:
        """Distance of each value inside the bound (negative outside it), elementwise."""
        margins = np.full(values.shape, np.inf)
        if self.above is not None:
            margins = np.minimum(margins, values - self.above)
        if self.below is not None:
            margins = np.minimum(margins, self.below - values)
        return margins

    def text(self) -> str:
        """The bound as ``"> 0.8"``, ``"< 0.05"`` or ``"in (a, b)"``."""
        if self.above is not None and self.below is not None:
            return f"in ({self.above:g}, {self.below:g})"
        return f"> {self.above:g}" if self.above is not None else f"< {self.below:g}"


@dataclass(frozen=True)
class BoundCheck:
    """One bound of a claim, checked: the element of its quantity nearest to failing.

    Attributes
    ----------
    bound : Bound
    value : float
        The plain run's value of that element.
    spread : float
        Largest absolute change of that element from the plain run to a perturbed run.
    margin : float
        Distance of the plain value inside the bound (negative: outside).
    broken_by : tuple of int
        The draws whose perturbed run breaks the bound (for any element).
    passed : bool
        ``margin >= factor * spread`` for every element, ``margin > 0``, and no run breaks the bound.
    """

    bound: Bound
    value: float
    spread: float
    margin: float
    broken_by: tuple[int, ...]
    passed: bool


@dataclass(frozen=True)
class ClaimCheck:
    """What :func:`check_claim` found: one :class:`BoundCheck` per bound, and the draws it ran."""

    checks: tuple[BoundCheck, ...]
    draws: tuple[int, ...]
    factor: float

    @property
    def passed(self) -> bool:
        """Whether every bound passed."""
        return all(check.passed for check in self.checks)

    def table(self) -> str:
        """The checks as aligned text: quantity, bound, value, spread, margin, margin/spread, verdict."""
        width = max([8, *(len(c.bound.quantity) for c in self.checks)])
        lines = [
            f"plain run and draws {list(self.draws)}; a bound passes when margin >= {self.factor:g} x spread",
            f"{'quantity':<{width}} {'bound':>14} {'value':>9} {'spread':>9} {'margin':>9} {'ratio':>7}  verdict",
        ]
        for c in self.checks:
            ratio = c.margin / c.spread if c.spread > 0 else math.inf
            verdict = "ok" if c.passed else "FAIL" + (f" (broken by draws {list(c.broken_by)})" if c.broken_by else "")
            lines.append(
                f"{c.bound.quantity:<{width}} {c.bound.text():>14} {c.value:>9.4f} {c.spread:>9.4f} {c.margin:>9.4f} "
                f"{ratio:>7.1f}  {verdict}"
            )
        return "\n".join(lines)


def _as_arrays(numbers: Mapping[str, object], bounds: Sequence[Bound]) -> dict[str, np.ndarray]:
    arrays = {}
    for bound in bounds:
        if bound.quantity not in numbers:
            raise KeyError(f"the claim's function returned no quantity {bound.quantity!r}")
        arrays[bound.quantity] = np.asarray(numbers[bound.quantity], dtype=np.float64)
    return arrays


def check_claim(
    measure: Callable[[], Mapping[str, object]],
    bounds: Sequence[Bound],
    *,
    draws: Sequence[int] = PERTURBATION_DRAWS,
    scale: float = PERTURBATION_SCALE,
    factor: float = MARGIN_FACTOR,
) -> ClaimCheck:
    r"""Run a training claim plainly and under perturbations, and check each bound's margin against its spread.

    Parameters
    ----------
    measure : callable
        ``measure() -> {name: number or array}``: trains what the claim needs (with the book's training
        functions, which :func:`perturbed` reaches) and returns the quantities the bounds read. Called once
        plainly and once inside ``perturbed(Perturbation(draw, scale))`` for each draw.
    bounds : sequence of Bound
        The inequalities the claim asserts.
    draws : sequence of int, default PERTURBATION_DRAWS
        The perturbations to run. Empty: the plain run only, every spread 0 (the bounds are then checked
        without a margin; a claim's spread must have been measured elsewhere).
    scale : float, default PERTURBATION_SCALE
    factor : float, default MARGIN_FACTOR
        The margin a bound needs, in units of its spread.

    Returns
    -------
    check : ClaimCheck
        ``check.passed`` and ``check.table()``.

    Notes
    -----
    For a quantity :math:`x` (elementwise, if an array) with plain value :math:`x_0` and perturbed values
    :math:`x_1, \dots, x_K`, the spread is :math:`\max_k |x_k - x_0|` and the margin of a bound
    :math:`x > a` is :math:`x_0 - a` (of :math:`x < b`, :math:`b - x_0`). The bound passes when the margin
    is positive, at least ``factor`` times the spread, and no :math:`x_k` breaks the bound. A claim
    about the sign of a difference smaller than its spread therefore fails, whichever sign the plain run
    happens to give.

    Examples
    --------
    A "claim" on an untrained layer's weight, which the perturbation moves by about 1e-6 of its size, far
    from its bound; and one on the sign of that movement itself, which no run can support:

    >>> def measure():
    ...     torch.manual_seed(0)
    ...     model = torch.nn.Linear(4, 1)
    ...     before = model.weight.detach().clone()
    ...     perturb_initial_weights(model)
    ...     weight = model.weight.detach()
    ...     return {"weight": weight[0, 0].item(), "moved": (weight - before)[0, 0].item()}
    >>> check_claim(measure, [Bound("weight", below=0.0)]).passed
    True
    >>> check_claim(measure, [Bound("moved", above=0.0)]).passed
    False
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 0:
        raise ValueError(f"factor must be a non-negative number, got {factor!r}")
    if not bounds:
        raise ValueError("bounds must hold at least one Bound")
    draws = tuple(draws)
    with perturbed(None):
        plain = _as_arrays(measure(), bounds)
    runs = {}
    for draw in draws:
        with perturbed(Perturbation(draw, scale)):
            runs[draw] = _as_arrays(measure(), bounds)
    checks = []
    for bound in bounds:
        value = plain[bound.quantity]
        margins = bound.margin(value)
        spreads = np.zeros(value.shape)
        broken = []
        for draw, numbers in runs.items():
            other = numbers[bound.quantity]
            if other.shape != value.shape:
                raise ValueError(f"{bound.quantity!r} has shape {other.shape} under draw {draw}, {value.shape} plainly")
            spreads = np.maximum(spreads, np.abs(other - value))
            if np.any(bound.margin(other) <= 0):
                broken.append(draw)
        slack = margins - factor * spreads  # the element nearest to failing has the least slack
        worst = np.unravel_index(np.argmin(slack), slack.shape) if slack.ndim else ()
        passed = bool(np.all(margins > 0) and np.all(slack >= 0) and not broken)
        checks.append(
            BoundCheck(bound, float(value[worst]), float(spreads[worst]), float(margins[worst]), tuple(broken), passed)
        )
    return ClaimCheck(tuple(checks), draws, float(factor))


def assert_claim(
    measure: Callable[[], Mapping[str, object]],
    bounds: Sequence[Bound],
    *,
    draws: Sequence[int] = PERTURBATION_DRAWS,
    scale: float = PERTURBATION_SCALE,
    factor: float = MARGIN_FACTOR,
) -> ClaimCheck:
    """:func:`check_claim`, raising ``AssertionError`` with the table when a bound fails; else the check."""
    check = check_claim(measure, bounds, draws=draws, scale=scale, factor=factor)
    if not check.passed:
        raise AssertionError("a training claim is not robust to perturbation:\n" + check.table())
    return check


# --- Claims about seeds ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedBoundCheck:
    """One bound of a claim, checked over seeds: the element of its quantity nearest to failing.

    Attributes
    ----------
    bound : Bound
    values : tuple of float
        That element's value on each seed, in the order of :attr:`SeedCheck.seeds`.
    mean, spread : float
        Their mean and standard deviation (``ddof=1``).
    margin : float
        Distance of the mean inside the bound (negative: outside).
    failing_seeds : tuple of int
        The seeds on which the bound fails (for any element).
    passed : bool
        No seed fails the bound, and ``margin >= factor * spread`` for every element.
    """

    bound: Bound
    values: tuple[float, ...]
    mean: float
    spread: float
    margin: float
    failing_seeds: tuple[int, ...]
    passed: bool

    @property
    def ratio(self) -> float:
        """``margin / spread`` (infinite for a spread of 0)."""
        return self.margin / self.spread if self.spread > 0 else math.inf


@dataclass(frozen=True)
class SeedCheck:
    """What :func:`check_seed_values` found: one :class:`SeedBoundCheck` per bound, the seeds and the factor."""

    checks: tuple[SeedBoundCheck, ...]
    seeds: tuple[int, ...]
    factor: float

    @property
    def passed(self) -> bool:
        """Whether every bound passed."""
        return all(check.passed for check in self.checks)

    def rows(self) -> list[list[str]]:
        """One row per bound: claim, bound, range over the seeds, mean, spread, margin, margin/spread, verdict."""
        rows = []
        for c in self.checks:
            verdict = "holds" if c.passed else "FAILS"
            if c.failing_seeds:
                verdict += f" (seeds {', '.join(map(str, c.failing_seeds))} break it)"
            elif not c.passed:
                verdict += f" (margin under {self.factor:g} spreads)"
            rows.append(
                [
                    c.bound.quantity,
                    c.bound.text(),
                    f"{min(c.values):.4g} to {max(c.values):.4g}",
                    f"{c.mean:.4g}",
                    f"{c.spread:.3g}",
                    f"{c.margin:.3g}",
                    f"{c.ratio:.1f}",
                    verdict,
                ]
            )
        return rows

    def table(self) -> str:
        """The checks as aligned text, under a line naming the seeds and the rule."""
        header = ["claim", "bound", "range over seeds", "mean", "spread", "margin", "ratio", "verdict"]
        rows = [header, *self.rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            f"seeds {list(self.seeds)}; a bound holds when every seed meets it and the mean's margin is at least "
            f"{self.factor:g} x the standard deviation over the seeds (spread)"
        ]
        lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
        return "\n".join(lines)


def check_seed_values(
    values: Mapping[str, object],
    bounds: Sequence[Bound],
    seeds: Sequence[int],
    *,
    factor: float = MARGIN_FACTOR,
    minimum: int = MIN_SEEDS,
) -> SeedCheck:
    r"""Check bounds on quantities measured on several training seeds: every seed, and three seed-spreads.

    Parameters
    ----------
    values : mapping of str to array_like
        For each quantity a bound reads, its values with the seeds along the first axis: ``(n_seeds,)`` for a
        number, ``(n_seeds, ...)`` for an array of numbers (one per scheme, say), each element checked alone.
    bounds : sequence of Bound
        The inequalities the claim asserts.
    seeds : sequence of int
        The seeds, in the order of the first axis; distinct, at least ``minimum`` of them.
    factor : float, default MARGIN_FACTOR
        The margin a bound needs, in standard deviations over the seeds.
    minimum : int, default MIN_SEEDS

    Returns
    -------
    check : SeedCheck
        ``check.passed`` and ``check.table()``.

    Notes
    -----
    For an element with values :math:`x_1, \dots, x_n` on the :math:`n` seeds, mean :math:`\bar x` and
    standard deviation :math:`s` (``ddof=1``), a bound :math:`x > a` holds when every :math:`x_k > a` and
    :math:`\bar x - a \ge` ``factor`` :math:`\cdot s` (:math:`x < b` likewise). If the seeds' values were
    normal, a fresh seed would then meet the bound with probability at least 99.8 %; a bound that one of nine
    seeds breaks fails whatever its mean. The spread of a perturbed run (:func:`check_claim`) is not this
    spread: it is what another processor does to one seed, 10 to 100 times less than another seed does to
    chapter 9's losses.

    Examples
    --------
    A gap of about 0.05 whose seeds scatter by 0.01: "above 0.01" holds, "above 0.03" does not (its mean is
    less than three spreads above it, though every seed meets it).

    >>> gaps = {"gap": [0.05, 0.06, 0.04, 0.05, 0.055, 0.045, 0.05, 0.065, 0.035]}
    >>> seeds = range(9)
    >>> check_seed_values(gaps, [Bound("gap", above=0.01)], seeds).passed
    True
    >>> check_seed_values(gaps, [Bound("gap", above=0.03)], seeds).passed
    False
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 0:
        raise ValueError(f"factor must be a non-negative number, got {factor!r}")
    if not bounds:
        raise ValueError("bounds must hold at least one Bound")
    seeds = tuple(seeds)
    if any(isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) for seed in seeds):
        raise TypeError(f"seeds must be ints, got {seeds!r}")
    if len(set(seeds)) != len(seeds) or len(seeds) < minimum:
        raise ValueError(f"seeds must be at least {minimum} distinct seeds, got {list(seeds)}")
    arrays = _as_arrays(values, bounds)
    checks = []
    for bound in bounds:
        value = arrays[bound.quantity]
        if value.ndim == 0 or value.shape[0] != len(seeds):
            raise ValueError(
                f"quantity {bound.quantity!r} must have one value per seed along its first axis "
                f"({len(seeds)}), got shape {value.shape}"
            )
        mean, spread = value.mean(axis=0), value.std(axis=0, ddof=1)
        margins = bound.margin(mean)
        per_seed = bound.margin(value).reshape(len(seeds), -1)
        failing = tuple(int(seed) for seed, m in zip(seeds, per_seed) if np.any(m <= 0))
        slack = margins - factor * spread
        worst = np.unravel_index(np.argmin(slack), slack.shape) if slack.ndim else ()
        passed = bool(not failing and np.all(slack >= 0))
        checks.append(
            SeedBoundCheck(
                bound,
                tuple(float(v) for v in value[(slice(None), *worst)]),
                float(mean[worst]),
                float(spread[worst]),
                float(margins[worst]),
                failing,
                passed,
            )
        )
    return SeedCheck(tuple(checks), seeds, float(factor))


def check_seeds(
    measure: Callable[[int], Mapping[str, object]],
    bounds: Sequence[Bound],
    seeds: Sequence[int],
    *,
    factor: float = MARGIN_FACTOR,
    minimum: int = MIN_SEEDS,
) -> SeedCheck:
    """:func:`check_seed_values` on ``measure(seed)`` for each seed: ``measure`` trains with that seed.

    Parameters
    ----------
    measure : callable
        ``measure(seed) -> {name: number or array}``, the quantities the bounds read, for one training seed.
    bounds, seeds, factor, minimum
        As for :func:`check_seed_values`.

    Returns
    -------
    check : SeedCheck
    """
    seeds = tuple(seeds)
    runs = [measure(seed) for seed in seeds]
    values = {bound.quantity: [run[bound.quantity] for run in runs] for bound in bounds if bound.quantity in runs[0]}
    return check_seed_values(values, bounds, seeds, factor=factor, minimum=minimum)


def assert_seeds(
    measure: Callable[[int], Mapping[str, object]],
    bounds: Sequence[Bound],
    seeds: Sequence[int],
    *,
    factor: float = MARGIN_FACTOR,
    minimum: int = MIN_SEEDS,
) -> SeedCheck:
    """:func:`check_seeds`, raising ``AssertionError`` with the table when a bound fails; else the check."""
    check = check_seeds(measure, bounds, seeds, factor=factor, minimum=minimum)
    if not check.passed:
        raise AssertionError("a claim about seeds does not hold over the seeds:\n" + check.table())
    return check
