"""posenc's pytest plugin: the ``rotary_case`` fixture of the rotary conformance suite.

Installing posenc registers this module with pytest (the ``pytest11`` entry point ``posenc`` in pyproject.toml), so a
test that takes an argument named ``rotary_case`` runs once per :class:`posenc.testing.RotaryCase` of
:func:`posenc.testing.rotary_cases`: real configs, within and beyond their trained length. ::

    import posenc.nn

    def test_rotary(rotary_case):
        rotary_case.check(posenc.nn.rotary_embedding(rotary_case.rotary))

``--rotary-dtype float16`` (repeatable) runs the cases in other dtypes than float32; ``-p no:posenc`` turns the
plugin off. A test session that asks for no ``rotary_case`` does not import posenc through the plugin, and gets no
other test, fixture or hook from it.

The module sits outside the package, as Hypothesis's plugin does: pytest imports every plugin when it starts, and
``import posenc.testing`` (NumPy, every scheme, the family table) would then cost each pytest session of a venv that
has posenc, whether it checks a rotary operator or not; this module imports posenc only in ``pytest_generate_tests``
of a test that takes ``rotary_case``. Like every distribution that ships a pytest plugin, posenc's modules are
assertion-rewritten by pytest when imported in a test session (the ``assert isinstance`` lines that narrow types
for mypy in ``posenc.nn``; the behaviour is the same).
"""

from __future__ import annotations

from typing import Any

import pytest

DTYPES = ("float32", "float64", "float16", "bfloat16")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("posenc", "posenc's rotary conformance suite (the rotary_case fixture)")
    group.addoption(
        "--rotary-dtype",
        action="append",
        choices=DTYPES,
        default=None,
        help="a dtype to run every rotary_case in (repeatable; default float32; bfloat16 needs array='torch')",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rotary_case" not in metafunc.fixturenames:
        return
    from posenc.testing import rotary_cases

    cases = rotary_cases(dtypes=metafunc.config.getoption("rotary_dtype") or ("float32",))
    metafunc.parametrize("rotary_case", cases, ids=[case.id for case in cases], indirect=True)


@pytest.fixture
def rotary_case(request: pytest.FixtureRequest) -> Any:
    """A :class:`posenc.testing.RotaryCase`: the test runs once per case of :func:`posenc.testing.rotary_cases`."""
    return request.param
