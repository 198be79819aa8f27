"""Shared test set-up: deterministic hypothesis settings (a failure reproduces on every machine), a quiet
transformers logger for the parity tests, and the option that re-runs chapter 9's training claims perturbed."""

import logging

import pytest
from hypothesis import settings

settings.register_profile("posenc", derandomize=True, max_examples=60, deadline=None)
settings.load_profile("posenc")


@pytest.fixture(scope="module")
def quiet_transformers():
    """transformers logs (not warns) about config fields; keep the test output readable.

    Parity modules use it with ``pytestmark = pytest.mark.usefixtures("quiet_transformers")``.
    """
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def pytest_addoption(parser):
    parser.addoption(
        "--claim-draws",
        default="",
        help="comma-separated draws of posenc_book.robustness.Perturbation under which tests/test_extrapolation.py "
        "trains its models again, failing a claim whose margin is under 3 times its spread (default: none, the "
        "plain runs only; 1,2,3,4 for the spreads its comments give, 87 minutes on a busy 2-core machine)",
    )


@pytest.fixture(scope="session")
def claim_draws(request):
    """The perturbation draws given with ``--claim-draws`` (empty: the plain run only)."""
    text = request.config.getoption("--claim-draws")
    return tuple(int(draw) for draw in text.split(",") if draw.strip())
