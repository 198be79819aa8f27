"""The robustness helper (posenc_book.robustness): the perturbation, where it reaches, the margin check, and
the rule for claims about seeds.

Four groups: the perturbation itself (its size, its draws, that it acts only inside ``perturbed``), that every
training function of the book applies it to the model it builds, and that :func:`check_claim` fails a planted
fragile claim (the sign of a difference smaller than its spread) while it passes a robust one, and that
:func:`check_seed_values` fails a planted claim that holds on the three seeds a page shows but not over nine (and
a real trained claim that the perturbation rule passes). The helper's
use on real training claims, and its failing demonstration on the claim of issue 29, is in
tests/test_frequency_usage.py.
"""

import math

import numpy as np
import pytest
import torch

from posenc_book.extrapolation import copy_task, position_interpolation, train_and_evaluate
from posenc_book.frequency_usage import train_rotary
from posenc_book.robustness import (
    PERTURBATION_SCALE,
    Bound,
    Perturbation,
    active_perturbation,
    assert_claim,
    assert_seeds,
    check_claim,
    check_seed_values,
    check_seeds,
    perturb_initial_weights,
    perturbed,
)
from posenc_book.tabular import TinyFTTransformer, train_regression

# --- The perturbation ------------------------------------------------------------------------------------------


def _seeded_layer():
    torch.manual_seed(0)
    return torch.nn.Linear(64, 32)


def test_a_perturbation_moves_every_weight_by_about_its_scale():
    model = _seeded_layer()
    before = [p.detach().clone() for p in model.parameters()]
    Perturbation(1).apply(model)
    for old, new in zip(before, model.parameters()):
        relative = (new.detach().double() / old.double() - 1).abs()
        # |epsilon| of a standard normal stays under 6 in 2080 draws; float32 rounding adds < 1.2e-7
        assert relative.max() < 6 * PERTURBATION_SCALE + 1.2e-7
        # a typical weight moves by about the scale: the median |epsilon| of a normal is 0.67
        assert 0.3 * PERTURBATION_SCALE < relative.median() < 1.5 * PERTURBATION_SCALE


def test_draws_are_fixed_and_distinct():
    first, again, other = _seeded_layer(), _seeded_layer(), _seeded_layer()
    Perturbation(1).apply(first)
    Perturbation(1).apply(again)
    Perturbation(2).apply(other)
    assert torch.equal(first.weight, again.weight)
    assert not torch.equal(first.weight, other.weight)


def test_it_acts_only_inside_perturbed_and_the_block_ends_even_on_an_error():
    plain, model = _seeded_layer(), _seeded_layer()
    perturb_initial_weights(model)  # outside any block: nothing
    assert torch.equal(model.weight, plain.weight)
    with pytest.raises(RuntimeError, match="inside"):
        with perturbed(Perturbation(3)):
            assert active_perturbation() == Perturbation(3)
            with perturbed(None):  # a plain run inside a perturbed block
                assert active_perturbation() is None
            raise RuntimeError("inside")
    assert active_perturbation() is None
    with perturbed(Perturbation(3)):
        perturb_initial_weights(model)
    assert not torch.equal(model.weight, plain.weight)


@pytest.mark.argument_check
@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Perturbation(-1), ValueError, "draw must be a non-negative int"),
        (lambda: Perturbation(1.0), ValueError, "draw must be a non-negative int"),
        (lambda: Perturbation(1, scale=0.0), ValueError, "scale must be a positive finite number"),
        (lambda: Perturbation(1, scale=math.inf), ValueError, "scale must be a positive finite number"),
        (lambda: perturbed(1).__enter__(), TypeError, "perturbation must be a Perturbation or None"),
        (lambda: Bound("x"), ValueError, "a Bound needs above or below"),
        (lambda: check_claim(lambda: {"x": 1.0}, [Bound("x", above=0)], factor=-1), ValueError, "factor must be"),
        (lambda: check_claim(lambda: {"x": 1.0}, []), ValueError, "bounds must hold at least one Bound"),
        (lambda: check_claim(lambda: {"x": 1.0}, [Bound("y", above=0)], draws=()), KeyError, "no quantity 'y'"),
    ],
)
def test_bad_arguments_are_refused_naming_them(make, error, match):
    with pytest.raises(error, match=match):
        make()


# --- Every training function of the book applies it ------------------------------------------------------------

TINY = dict(train_len=8, steps=3, d_model=16)


def _tiny_regression():
    torch.manual_seed(0)
    x = torch.randn(32, 3, generator=torch.Generator().manual_seed(1))
    model = TinyFTTransformer(3, d_token=4)
    train_regression(model, x, x[:, 0], x, x[:, 0], steps=3)
    return model


RUNS = {  # each returns the trained model
    "train_and_evaluate": lambda: train_and_evaluate("rotary", seed=0, eval_lens=(8,), **TINY).model,
    "copy_task": lambda: copy_task("alibi", seed=0, max_train_len=3, eval_lens=(3,), steps=3, d_model=8).model,
    "train_rotary": lambda: train_rotary(0.5, seed=0, eval_lens=(8,), n_heads=2, **TINY).model,
    "train_regression": _tiny_regression,
}


def _weights(model):
    return torch.cat([p.detach().double().flatten() for p in model.parameters()])


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_every_training_function_trains_a_perturbed_model_inside_perturbed(run):
    plain, again = _weights(run()), _weights(run())
    with perturbed(Perturbation(1)):
        moved = _weights(run())
    assert torch.equal(plain, again)  # the plain run is reproducible ...
    assert not torch.equal(moved, plain)  # ... and the perturbation reached the model it trained
    # a perturbation, not another model: another seed moves some weight of the tiny regression by 1.02. Adam's
    # first steps move a weight by about the learning rate (1e-2 there) whatever its gradient's size, so a
    # perturbation that flips the sign of a near-zero gradient moves that weight by up to twice that a step:
    # 7e-4 here, 0.0027 with the kernels at the x86-64 baseline (make check-portable)
    assert (moved - plain).abs().max() < 0.1


def test_position_interpolation_starts_from_the_perturbed_model():
    # it builds its model with train_and_evaluate's builder (perturbed above): inside the same block, the same
    # perturbed model, hence the same losses
    with perturbed(Perturbation(1)):
        pi = position_interpolation(seed=0, factor=2, finetune_steps=1, **TINY)
        same = train_and_evaluate("rotary", seed=0, eval_lens=(8, 16), **TINY)
    assert pi.trained == same.losses[8] and pi.extrapolated == same.losses[16]


# --- The margin check ------------------------------------------------------------------------------------------


def _planted_measure():
    """A claim's numbers as a function of the active perturbation: a "difference" of +1e-5 on the plain run that
    the perturbed runs move by up to 0.003 (as training moves chapter 12's losses), and a loss far from its
    bound."""
    perturbation = active_perturbation()
    moved = {None: 0.0, 1: 0.002, 2: -0.003, 3: 0.001, 4: -0.0005}[None if perturbation is None else perturbation.draw]
    return {"difference": 1e-5 + moved, "loss": 2.0 + moved}


def test_a_planted_fragile_claim_fails_and_a_robust_one_passes():
    check = check_claim(_planted_measure, [Bound("difference", above=0.0), Bound("loss", below=math.log(16))])
    fragile, robust = check.checks
    print("\n" + check.table())
    assert fragile.value == pytest.approx(1e-5) and fragile.margin > 0  # the plain run "supports" it
    assert fragile.spread == pytest.approx(0.003)
    assert not fragile.passed and fragile.broken_by == (2, 4) and not check.passed
    assert robust.passed and robust.margin == pytest.approx(math.log(16) - 2.0)
    with pytest.raises(AssertionError, match="not robust to perturbation"):
        assert_claim(_planted_measure, [Bound("difference", above=0.0)])
    # a margin of 3 spreads passes even when no draw breaks the bound only just
    assert check_claim(_planted_measure, [Bound("loss", above=2.0 - 3 * 0.003 - 1e-9)]).passed
    assert not check_claim(_planted_measure, [Bound("loss", above=2.0 - 3 * 0.003 + 1e-9)]).passed


def test_spread_and_margin_are_those_of_the_element_nearest_to_failing():
    values = iter([[1.0, 5.0], [1.1, 5.0], [0.95, 3.0]])  # plain, draw 1, draw 2

    def measure():
        return {"x": next(values)}

    check = check_claim(measure, [Bound("x", above=0.5)], draws=(1, 2))
    (c,) = check.checks
    # element 0: margin 0.5, spread 0.1 (slack 0.2); element 1: margin 4.5, spread 2 (slack -1.5)
    assert (c.value, c.spread, c.margin) == (5.0, 2.0, 4.5)
    assert not c.passed and c.broken_by == ()
    np.testing.assert_equal(check.draws, (1, 2))


# --- Claims about seeds ----------------------------------------------------------------------------------------

NINE = tuple(range(9))


def test_a_planted_claim_true_on_the_three_seeds_shown_fails_over_nine():
    """The issue-33 pattern: a per-seed gap of about 0.03 whose seeds scatter by about 0.02. "More than 0.01 for
    every seed" holds on seeds 0-2 (as on the page) and on the perturbation rule, but seed 7 breaks it and the
    nine-seed mean is not three spreads above 0.01; "more than -0.05" holds with margin."""
    gaps = np.array([0.031, 0.045, 0.028, 0.012, 0.051, 0.039, 0.022, 0.004, 0.035])
    assert np.all(gaps[:3] > 0.01)  # the page's three seeds "support" it
    check = check_seed_values({"gap": gaps}, [Bound("gap", above=0.01), Bound("gap", above=-0.05)], NINE)
    fragile, robust = check.checks
    print("\n" + check.table())
    assert not fragile.passed and fragile.failing_seeds == (7,) and not check.passed
    assert fragile.spread == pytest.approx(gaps.std(ddof=1)) and fragile.mean == pytest.approx(gaps.mean())
    assert robust.passed and robust.margin == pytest.approx(gaps.mean() + 0.05)
    assert "FAILS (seeds 7 break it)" in check.table()
    # every seed meets 0.0, yet the mean is under three spreads above it: the margin rule alone fails it
    (close,) = check_seed_values({"gap": gaps}, [Bound("gap", above=0.0)], NINE).checks
    assert close.failing_seeds == () and close.ratio < 3 and not close.passed


def _tiny_prediction(seed):
    """A real trained number: the mean prediction of a tiny regression model trained for 20 steps from ``seed``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only spin
    try:
        torch.manual_seed(seed)
        x = torch.randn(32, 3, generator=torch.Generator().manual_seed(1))
        model = TinyFTTransformer(3, d_token=4)
        perturb_initial_weights(model)
        train_regression(model, x, x[:, 0], x, x[:, 0], steps=20)
        with torch.no_grad():
            return {"prediction": model(x).mean().item()}
    finally:
        torch.set_num_threads(threads)


def test_a_claim_robust_to_perturbation_can_fail_over_seeds():
    """On a real trained number: a bound 0.005 below seed 0's value passes the perturbation rule (the perturbed
    runs move it by far less) and fails over nine seeds, which move it by far more."""
    value = _tiny_prediction(0)["prediction"]
    bound = Bound("prediction", above=value - 0.005)
    assert check_claim(lambda: _tiny_prediction(0), [bound]).passed
    check = check_seeds(_tiny_prediction, [bound], NINE)
    print("\n" + check.table())
    assert not check.passed and check.checks[0].failing_seeds
    with pytest.raises(AssertionError, match="does not hold over the seeds"):
        assert_seeds(_tiny_prediction, [bound], NINE)


def test_spread_and_margin_over_seeds_are_those_of_the_element_nearest_to_failing():
    # element 0: mean 1.0, sd 0.1, margin 0.5 (slack 0.2); element 1: mean 5.0, sd 2.0, margin 4.5 (slack -1.5)
    values = [[1.0 + 0.1 * (k % 3 - 1) * (4 / 3) ** 0.5, 5.0 + 2.0 * (k % 3 - 1) * (4 / 3) ** 0.5] for k in range(9)]
    (c,) = check_seed_values({"x": values}, [Bound("x", above=0.5)], NINE).checks
    assert (c.mean, c.margin) == pytest.approx((5.0, 4.5)) and c.spread == pytest.approx(2.0, rel=1e-12)
    assert not c.passed and c.failing_seeds == () and len(c.values) == 9


@pytest.mark.argument_check
@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: check_seed_values({"x": range(3)}, [Bound("x", above=0)], range(3)), ValueError, "at least 9"),
        (lambda: check_seed_values({"x": [1] * 9}, [Bound("x", above=0)], [0] * 9), ValueError, "distinct"),
        (lambda: check_seed_values({"x": [1] * 8}, [Bound("x", above=0)], NINE), ValueError, "one value per seed"),
        (lambda: check_seed_values({"x": [1] * 9}, [Bound("x", above=0)], [0.5] * 9), TypeError, "seeds must be"),
        (lambda: check_seed_values({"x": [1] * 9}, [], NINE), ValueError, "bounds must hold"),
        (lambda: check_seed_values({"x": [1] * 9}, [Bound("y", above=0)], NINE), KeyError, "no quantity 'y'"),
    ],
)
def test_bad_seed_arguments_are_refused_naming_them(make, error, match):
    with pytest.raises(error, match=match):
        make()
