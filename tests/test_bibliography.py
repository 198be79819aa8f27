"""The one bibliography: it parses, holds each key once, every citation in the book names one of its keys, and
every key is cited by a page."""

import re
from pathlib import Path

import pytest
from pybtex.database import parse_file

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "book" / "references.bib"
CITE = re.compile(r"\{cite(?::[tp])?\}`([^`\s][^`]*)`")
PAGES = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("book/*.md")])


def cited_keys(text):
    """Keys cited with {cite}, {cite:t} or {cite:p}; a role written inside inline code is prose, not a citation."""
    text = re.sub(r"``[^`]*``|`\{cite(?::[tp])?\}`", "", text)
    return {key.strip() for group in CITE.findall(text) for key in group.split(",")}


def test_every_key_appears_once():
    keys = re.findall(r"^@\w+\{([^,\s]+),", BIB.read_text(), re.MULTILINE)
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    assert repeated == [], f"keys defined more than once in {BIB.name}: {repeated}"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: path.name)
def test_every_citation_names_an_entry(page):
    known = set(parse_file(BIB).entries)
    unknown = sorted(cited_keys(page.read_text()) - known)
    assert unknown == [], f"{page.name} cites keys that {BIB.name} does not define: {unknown}"


def test_every_entry_is_cited_by_a_page():
    """book/bibliography.md lists every entry (``:all:``) as "every source the book cites": an entry that no
    chapter or book page cites would be listed there all the same."""
    cited = set().union(*(cited_keys(page.read_text()) for page in PAGES))
    uncited = sorted(set(parse_file(BIB).entries) - cited)
    assert uncited == [], (
        f"{BIB.name} has entries that no page cites: {uncited}; cite them where they support the text, or drop them"
    )


def test_the_citation_pattern_finds_every_form():
    assert cited_keys("{cite:t}`a` and {cite:p}`b, c` and {cite}`d`") == {"a", "b", "c", "d"}
    assert cited_keys("cite into it with `{cite:t}` or `{cite:p}`.") == set()


def test_no_entry_holds_latex_math_which_the_bibliography_page_would_show_raw():
    """The bibliography page is not typeset by MathJax, and pybtex keeps a field's ``$...$`` as text (it showed
    ``$B_m,\\theta = \\sum _i \\cos (m\\theta _i)$``): a formula in a field is written in Unicode instead."""
    entries = parse_file(BIB).entries
    with_math = sorted(
        f"{key}.{name}"
        for key, entry in entries.items()
        for name, value in entry.fields.items()
        if "$" in value or re.search(r"\\(?!_|#|&|%)[A-Za-z]+", value)
    )
    assert with_math == [], f"fields of {BIB.name} with LaTeX math or commands: {with_math}"


def test_every_entry_has_a_year():
    """The author-year style cites an entry without a year as "n.d." (sphinxcontrib-bibtex's template reads
    ``first_of[optional[field("year")], "n.d."]``); a repository is dated by the version the book read."""
    undated = sorted(key for key, entry in parse_file(BIB).entries.items() if "year" not in entry.fields)
    assert undated == [], f"{BIB.name} has entries without a year, cited as 'n.d.': {undated}"
