"""The API reference (book/api/): every public name has an autodoc entry, and every page is in the book.

Reads the page sources only (no build): ``make book`` renders them, and ``make check-site`` checks that the
built pages hold an element for every entry these directives name.
"""

import ast
import importlib
import inspect
from pathlib import Path

from site_check import REFERENCE_DIR, documented_ids, reference_ids, toc_pages
from torch import nn

import posenc
import posenc.nn
import posenc.testing

ROOT = Path(__file__).resolve().parent.parent


def is_constant(name: str) -> bool:
    """A module-level name in capitals (``MAX_HEADS``) is a public constant, whatever its module's ``__all__``."""
    return name.isupper() and not name.startswith("_")


def public_modules() -> list:
    """Every module of the package whose dotted name has no part starting with ``_``."""
    names = []
    for path in sorted((ROOT / "posenc").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        name = ".".join(parts)
        if not any(part.startswith("_") for part in parts):
            names.append(name)
    return [importlib.import_module(name) for name in names]


def constants(module) -> list[str]:
    """Names in capitals that ``module``'s own source assigns at the top level (imported ones excluded)."""
    tree = ast.parse(inspect.getsource(module))
    targets = [
        target
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    return [target.id for target in targets if isinstance(target, ast.Name) and is_constant(target.id)]


def imported_as(module, name: str) -> str:
    """The name users import ``module.name`` by: ``posenc.X`` or ``posenc.nn.X`` if re-exported there."""
    value = getattr(module, name)
    for package in (posenc, posenc.nn):
        if name in package.__all__ and getattr(package, name) is value:
            return f"{package.__name__}.{name}"
    return f"{module.__name__}.{name}"


def public_ids() -> set[str]:
    """The ids the reference must have an entry for: modules, public names, constants, each module's ``forward``."""
    ids = {f"posenc.{name}" for name in posenc.__all__}
    ids |= {f"posenc.nn.{name}" for name in posenc.nn.__all__}
    ids |= {f"posenc.testing.{name}" for name in posenc.testing.__all__}
    for module in public_modules():
        ids.add(f"module-{module.__name__}")
        ids |= {imported_as(module, name) for name in [*getattr(module, "__all__", ()), *constants(module)]}
    for name in posenc.nn.__all__:
        value = getattr(posenc.nn, name)
        if inspect.isclass(value) and issubclass(value, nn.Module):
            ids.add(f"posenc.nn.{name}.forward")
    return ids


def documented() -> set[str]:
    return set().union(*reference_ids(ROOT).values())


def test_the_reference_has_pages():
    assert len(reference_ids(ROOT)) >= 8, f"{REFERENCE_DIR} holds too few pages: {list(reference_ids(ROOT))}"


def test_every_public_name_has_an_autodoc_entry():
    missing = sorted(public_ids() - documented())
    assert missing == [], f"no autodoc directive in {REFERENCE_DIR}/*.rst documents: {missing}"


def test_constants_are_found_in_the_sources():
    """The constants the issue names are among what the test demands (the AST walk sees them)."""
    assert {
        "posenc.LAYOUTS",
        "posenc.ROPE_TYPES",
        "posenc.MAX_TABLE_ELEMENTS",
        "posenc.alibi.MAX_HEADS",
    } <= public_ids()


def test_every_reference_page_is_in_the_toc():
    pages, _ = toc_pages(ROOT)
    missing = [page for page in reference_ids(ROOT) if page not in pages]
    assert missing == [], f"reference pages not listed in _toc.yml: {missing}"


def test_documented_ids_reads_modules_classes_and_their_members():
    text = "\n".join(
        [
            "Title",
            "=====",
            "",
            ".. automodule:: posenc.nn",
            "",
            ".. autoclass:: posenc.nn.T5RelativeBias",
            "   :members: forward, buckets",
            "   :undoc-members:",
            "",
            ".. autofunction:: posenc.rotate",
            "   :members: not_a_class_member",
            "",
            ".. py:module:: posenc",
        ]
    )
    assert documented_ids(text) == [
        "module-posenc.nn",
        "posenc.nn.T5RelativeBias",
        "posenc.nn.T5RelativeBias.forward",
        "posenc.nn.T5RelativeBias.buckets",
        "posenc.rotate",
        "module-posenc",
    ]
