"""The chapters as stored in git: stripped, listed in the TOC, with their checks hidden from readers."""

import json
import re
from pathlib import Path

import pytest
import yaml

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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stripped(path):
    """No outputs and no execution counts: the build makes outputs, git holds only sources."""
    dirty = [i for i, cell in enumerate(code_cells(path)) if cell.get("outputs") or cell.get("execution_count") is not None]
    assert dirty == [], f"{path.name}: code cells {dirty} carry outputs or execution counts"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_in_the_toc(path):
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {toc["root"], *toc_files(toc.get("chapters", []) + toc.get("parts", []))}
    assert path.relative_to(ROOT).with_suffix("").as_posix() in listed


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_assert_cells_are_hidden_from_readers(path):
    visible = [
        source(cell)[:60]
        for cell in code_cells(path)
        if re.search(r"^\s*assert\b", source(cell), re.MULTILINE) and "remove-input" not in cell["metadata"].get("tags", [])
    ]
    assert visible == [], f"{path.name}: assert cells without the remove-input tag: {visible}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_chapter_has_one_imports_cell(path):
    importing = [source(cell)[:60] for cell in code_cells(path) if IMPORT_LINE.search(source(cell))]
    assert len(importing) == 1, f"{path.name}: imports in {len(importing)} cells: {importing}"
