"""No module of posenc reaches into another module's private names.

A name with a leading underscore is private to the module that defines it: another module that imports it
(``from posenc.rotary import _frequencies``) or reads it through the module (``posenc.rotary._frequencies``)
breaks silently when the owner renames or changes it. Code shared between modules lives in a private module
under un-prefixed names (``posenc/_rope.py``, ``posenc/_validation.py``), or is public. The check reads the
source of every module of the installed package with ``ast``, so it sees imports inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import posenc

PACKAGE = Path(posenc.__file__).resolve().parent


ALLOWED = {
    "torch._assert_async": "documented by torch (its docstring): the one way to check a tensor's value on its "
    "device without waiting for it, which posenc.nn._checks.check_on_device needs",
}
"""Private names of other packages that posenc uses on purpose, with the reason."""


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_imports(source: str, modules: set[str]) -> list[str]:
    """Each ``line: what`` of ``source`` that uses another module's private name.

    Flags ``from m import _x`` (relative imports included) and ``m._x`` where ``m`` is bound by ``import m``
    or ``import m as alias`` (``import a.b`` binds ``a``, so ``a.b._x`` is caught too). A private *module*
    (``_x`` such that ``m._x`` is in ``modules``, the dotted names of posenc's modules) is allowed: that is
    where shared code lives.
    """
    tree = ast.parse(source)
    found = []
    bound: dict[str, str] = {}  # local name -> the module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = "." * node.level + (node.module or "")
            for alias in node.names:
                if _is_private(alias.name) and f"{origin}.{alias.name}" not in modules:
                    found.append(f"{node.lineno}: from {origin} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            path = [node.attr]
            root = node.value
            while isinstance(root, ast.Attribute):
                path.append(root.attr)
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                dotted = ".".join([bound[root.id], *reversed(path)])
                if dotted not in modules and dotted not in ALLOWED:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda entry: int(entry.split(":")[0]))


MODULES = sorted(PACKAGE.rglob("*.py"))
MODULE_NAMES = {_module_name(path) for path in MODULES}


def test_the_walk_sees_the_whole_package():
    assert {"posenc", "posenc.rotary", "posenc.nn", "posenc.nn.rotary", "posenc.testing"} <= MODULE_NAMES


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_no_module_imports_another_modules_private_names(path):
    found = private_imports(path.read_text(encoding="utf-8"), MODULE_NAMES)
    assert found == [], f"{_module_name(path)} uses private names of other modules: {found}"


def test_the_check_catches_each_form():
    """The forms the check must flag, and the ones it must let through."""
    flagged = """
from posenc.rotary import _frequencies, rotate
from . import _helper
import posenc.rotary
import numpy as np
posenc.rotary._parse_scaling(None)
np._core
def f():
    from posenc.sinusoid import _direct_table as table
"""
    allowed = """
from posenc._validation import check_int
from posenc import _validation
from importlib.metadata import version as _version
import posenc._rope
self._tables = {}
posenc._rope.inverse_frequencies
x.__class__
"""
    modules = {"posenc", "posenc.rotary", "posenc._validation", "posenc._rope"}
    assert [entry.split(": ", 1)[1] for entry in private_imports(flagged, modules)] == [
        "from posenc.rotary import _frequencies",
        "from . import _helper",
        "posenc.rotary._parse_scaling",
        "np._core",
        "from posenc.sinusoid import _direct_table",
    ]
    assert private_imports(allowed, modules) == []
