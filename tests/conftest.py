"""Shared test set-up: deterministic hypothesis settings (a failure reproduces on every machine), and a
quiet transformers logger for the parity tests."""

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
