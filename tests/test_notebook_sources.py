"""The chapters as stored in git: stripped, listed in the TOC, with their checks hidden from readers."""

import json
import re
from pathlib import Path

import pytest
import yaml
from test_exercises import exercise_solutions

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IMPORT_LINE = re.compile(r"^\s*(import|from)\s+\w", re.MULTILINE)


def toc_files(entries):
    for entry in entries:
        if "file" in entry:
            yield entry["file"]
        yield from toc_files(entry.get("chapters", []) + entry.get("sections", []) + entry.get("parts", []))


def code_cells(path):
    return [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]


def source(cell):
    return "".join(cell["source"])


def test_there_are_chapters():
    assert NOTEBOOKS, "notebooks/ holds no chapter"


def unstripped_cells(path):
    """Indices of the code cells of notebook ``path`` that carry outputs or an execution count."""
    return [
        i for i, cell in enumerate(code_cells(path)) if cell.get("outputs") or cell.get("execution_count") is not None
    ]


def is_in_toc(path, root=ROOT):
    """Whether notebook ``path`` (inside the book at ``root``) is listed in ``root/_toc.yml``."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    listed = {toc["root"], *toc_files(toc.get("chapters", []) + toc.get("parts", []))}
    return path.relative_to(root).with_suffix("").as_posix() in listed


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stripped(path):
    """No outputs and no execution counts: the build makes outputs, git holds only sources."""
    dirty = unstripped_cells(path)
    assert dirty == [], f"{path.name}: code cells {dirty} carry outputs or execution counts"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_in_the_toc(path):
    assert is_in_toc(path), f"{path.name} is not listed in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_assert_cells_are_hidden_from_readers(path):
    """Asserts that pin a claim are removed from the page; an exercise's solution shows its own behind a toggle."""
    cells = json.loads(path.read_text())["cells"]
    solutions = [id(cell) for cell in exercise_solutions(cells)]
    visible = [
        source(cell)[:60]
        for cell in cells
        if cell["cell_type"] == "code"
        and id(cell) not in solutions
        and re.search(r"^\s*assert\b", source(cell), re.MULTILINE)
        and "remove-input" not in cell["metadata"].get("tags", [])
    ]
    assert visible == [], f"{path.name}: assert cells without the remove-input tag: {visible}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_chapter_has_one_imports_cell(path):
    importing = [source(cell)[:60] for cell in code_cells(path) if IMPORT_LINE.search(source(cell))]
    assert len(importing) == 1, f"{path.name}: imports in {len(importing)} cells: {importing}"


MAX_VISIBLE_COLUMNS = 80
"""Width of the code a reader sees without scrolling sideways in the book's theme."""

HIDDEN_INPUT_TAGS = {"remove-input", "remove-cell"}


def wide_visible_lines(path, width=MAX_VISIBLE_COLUMNS):
    """``(cell index, line)`` for every line wider than ``width`` in a code cell whose input readers see."""
    return [
        (index, line)
        for index, cell in enumerate(code_cells(path))
        if not HIDDEN_INPUT_TAGS & set(cell["metadata"].get("tags", []))
        for line in source(cell).splitlines()
        if len(line) > width
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_visible_code_fits_in_80_columns(path):
    """Code readers see never scrolls sideways; hidden assert cells are exempt."""
    wide = wide_visible_lines(path)
    assert wide == [], f"{path.name}: visible code lines over {MAX_VISIBLE_COLUMNS} columns: {wide}"


def test_the_width_check_sees_a_wide_visible_line_and_ignores_hidden_ones(tmp_path):
    cells = [
        {"cell_type": "code", "metadata": {}, "source": ["x = 1  # " + "w" * 80], "outputs": []},
        {"cell_type": "code", "metadata": {"tags": ["remove-input"]}, "source": ["assert 1, '" + "h" * 90 + "'"]},
    ]
    notebook = tmp_path / "wide.ipynb"
    notebook.write_text(json.dumps({"cells": cells}))
    assert [index for index, _ in wide_visible_lines(notebook)] == [0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_a_chapter_with_failing_cells_shows_only_the_call_and_the_message(path):
    """A ``raises-exception`` cell shows the error line, not a traceback through posenc: ``%xmode Minimal``."""
    cells = code_cells(path)
    if any("raises-exception" in cell["metadata"].get("tags", []) for cell in cells):
        importing = [cell for cell in cells if IMPORT_LINE.search(source(cell))]
        assert importing and re.search(r"^%xmode Minimal$", source(importing[0]), re.MULTILINE), (
            f"{path.name} has cells meant to fail: its imports cell must run %xmode Minimal"
        )
        assert "remove-output" in importing[0]["metadata"].get("tags", []), (
            f"{path.name}: tag the imports cell remove-output, or readers see 'Exception reporting mode: Minimal'"
        )


def test_the_start_page_follows_the_introduction_unnumbered():
    """A reader who arrives from a link finds "Start here" first in the navigation, before chapter 1."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    first_part = toc["parts"][0]
    assert [entry["file"] for entry in first_part["chapters"]] == ["notebooks/00_start_here"]
    assert not first_part.get("numbered", False), "the start page is not a numbered chapter"
    assert toc["parts"][1]["chapters"][0]["file"] == "notebooks/01_vaswani_formula"
