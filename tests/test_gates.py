"""The gates of ``make test`` guard themselves: each kind of broken book makes one of them fail.

Each test writes a tiny throwaway book into ``tmp_path`` that uses this repository's own strictness
settings (the ``execute``, ``parse`` and ``sphinx`` sections of ``_config.yml``), breaks it in one way, and
shows that the gate ``make test`` relies on rejects it:

* a code cell that raises fails the strict build (``jupyter-book build --all -W -n --keep-going``) and
  nbval;
* a broken ``{ref}`` cross-reference or ``{cite}`` key fails the strict build;
* a stored output or execution count fails the stripped check of tests/test_notebook_sources.py;
* a notebook missing from ``_toc.yml`` fails its TOC check.

A clean copy of the same tiny book passes every gate, so each failure is due to the one break.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_notebook_sources import is_in_toc, unstripped_cells

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.gates

INTRO = """# Tiny book

The chapter is {ref}`sec-chapter`; the idea is from {cite:t}`tiny2020`.
"""
BIBLIOGRAPHY = """# Bibliography

```{bibliography}
```
"""
REFERENCES = """@misc{tiny2020,
  author = {Tiny, Ada},
  title = {A Tiny Source},
  year = {2020}
}
"""


def notebook(code, *, outputs=(), execution_count=None):
    return {
        "cells": [
            {"cell_type": "markdown", "id": "title", "metadata": {}, "source": "(sec-chapter)=\n# A chapter"},
            {
                "cell_type": "code",
                "id": "code",
                "metadata": {},
                "execution_count": execution_count,
                "outputs": list(outputs),
                "source": code,
            },
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_book(root: Path, *, with_notebook: bool, code="total = 1 + 1\nassert total == 2", intro=INTRO) -> Path:
    """A tiny book at ``root``: intro page, optionally a notebook chapter, one bibliography."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    tiny = {key: config[key] for key in ("execute", "parse", "sphinx") if key in config}
    tiny.update(
        title="Tiny", only_build_toc_files=True, bibtex_bibfiles=["references.bib"], exclude_patterns=["_build/*"]
    )
    local = tiny.get("sphinx", {}).get("local_extensions", {})
    for name, folder in local.items():  # the book's own extensions, from this repository (book/_ext)
        local[name] = str(ROOT / folder)
    sphinx_config = tiny.get("sphinx", {}).get("config", {})
    if "templates_path" in sphinx_config:  # the book's own templates, from this repository (book/_templates)
        sphinx_config["templates_path"] = [str(ROOT / folder) for folder in sphinx_config["templates_path"]]
    root.mkdir(parents=True, exist_ok=True)
    (root / "_config.yml").write_text(yaml.safe_dump(tiny))
    for extra in tiny.get("sphinx", {}).get("config", {}).get("html_extra_path", []):
        (root / extra).mkdir(parents=True, exist_ok=True)  # Sphinx warns about (so -W fails on) a missing one
    chapters = ([{"file": "chapter"}] if with_notebook else []) + [{"file": "bibliography"}]
    (root / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "intro", "chapters": chapters}))
    (root / "intro.md").write_text(intro if with_notebook else intro.replace("{ref}`sec-chapter`", "here"))
    (root / "bibliography.md").write_text(BIBLIOGRAPHY)
    (root / "references.bib").write_text(REFERENCES)
    if with_notebook:
        (root / "chapter.ipynb").write_text(json.dumps(notebook(code)))
    return root


def strict_build(root: Path) -> subprocess.CompletedProcess:
    """The build `make book` runs, on the tiny book."""
    return subprocess.run(
        [str(BIN / "jupyter-book"), "build", "--all", "-W", "-n", "--keep-going", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def nbval(path: Path) -> subprocess.CompletedProcess:
    """The notebook run `make notebooks` does, on one notebook."""
    return subprocess.run(
        [
            str(BIN / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-current-env",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
    )


def build_log(result) -> str:
    return result.stdout + result.stderr


def test_the_clean_tiny_book_passes_every_gate(tmp_path):
    book = write_book(tmp_path / "book", with_notebook=True)
    result = strict_build(book)
    assert result.returncode == 0, build_log(result)[-3000:]
    assert (book / "_build" / "html" / "chapter.html").exists()
    assert unstripped_cells(book / "chapter.ipynb") == []
    assert is_in_toc(book / "chapter.ipynb", book)


def test_a_cell_that_raises_fails_the_build_and_nbval(tmp_path):
    book = write_book(tmp_path / "book", with_notebook=True, code="raise RuntimeError('a chapter that breaks')")
    result = strict_build(book)
    assert result.returncode != 0
    assert "ExecutionError" in build_log(result) and "a chapter that breaks" in build_log(result)
    checked = nbval(book / "chapter.ipynb")
    assert checked.returncode != 0, checked.stdout[-2000:]
    assert "a chapter that breaks" in checked.stdout


def test_a_broken_cross_reference_fails_the_build(tmp_path):
    book = write_book(tmp_path / "book", with_notebook=False, intro=INTRO + "\nSee also {ref}`sec-nowhere`.\n")
    result = strict_build(book)
    assert result.returncode != 0
    assert "sec-nowhere" in build_log(result)


def test_an_unknown_citation_key_fails_the_build(tmp_path):
    book = write_book(tmp_path / "book", with_notebook=False, intro=INTRO + "\nAnd {cite:p}`nobody1999`.\n")
    result = strict_build(book)
    assert result.returncode != 0
    assert "nobody1999" in build_log(result)


def test_the_markdown_only_tiny_book_builds(tmp_path):
    """Control for the two tests above: without the break, the same book builds."""
    result = strict_build(write_book(tmp_path / "book", with_notebook=False))
    assert result.returncode == 0, build_log(result)[-3000:]


@pytest.mark.parametrize(
    "outputs, execution_count",
    [([{"output_type": "stream", "name": "stdout", "text": "2\n"}], None), ([], 3)],
    ids=["stored output", "execution count"],
)
def test_a_stored_output_or_execution_count_fails_the_stripped_check(tmp_path, outputs, execution_count):
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps(notebook("print(1 + 1)", outputs=outputs, execution_count=execution_count)))
    assert unstripped_cells(path) == [0]  # the one code cell


def test_a_notebook_missing_from_the_toc_fails_the_toc_check(tmp_path):
    book = write_book(tmp_path / "book", with_notebook=True)
    orphan = book / "orphan.ipynb"
    orphan.write_text(json.dumps(notebook("x = 1")))
    assert is_in_toc(book / "chapter.ipynb", book)
    assert not is_in_toc(orphan, book)
