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
    visible = [
        source(cell)[:60]
        for cell in code_cells(path)
        if re.search(r"^\s*assert\b", source(cell), re.MULTILINE)
        and "remove-input" not in cell["metadata"].get("tags", [])
    ]
    assert visible == [], f"{path.name}: assert cells without the remove-input tag: {visible}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_chapter_has_one_imports_cell(path):
    importing = [source(cell)[:60] for cell in code_cells(path) if IMPORT_LINE.search(source(cell))]
    assert len(importing) == 1, f"{path.name}: imports in {len(importing)} cells: {importing}"
