"""The chapters' prose stands alone: few mentions of the research notes, and every "chapter N" a link."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# A mention of a research note by number ("note 001", "Note 004's", "research note\n004"). A reader who
# arrives from a search has never seen the notes: the chapters quote the claim, name its public source and
# link its entry on the errata page, which keeps the mapping to the notes.
NOTE_MENTION = re.compile(r"\bnotes?\s+00\d", re.IGNORECASE)
MAX_NOTE_MENTIONS = 5


def markdown_sources(path):
    """The sources of the markdown cells of notebook ``path``."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]


def note_mentions(texts):
    """The mentions of a research note by number in ``texts``."""
    return [match.group(0) for text in texts for match in NOTE_MENTION.finditer(text)]


def test_note_mention_pattern_finds_the_forms_the_chapters_used():
    assert note_mentions(["Research note 004 says", "Note 001's guess", "of research note\n  004 does"]) == [
        "note 004",
        "Note 001",
        "note\n  004",
    ]
    assert note_mentions(["a note on 2004", "notebook 001", "footnote 3"]) == []


def test_chapters_mention_the_research_notes_at_most_a_handful_of_times():
    mentions = {path.name: len(note_mentions(markdown_sources(path))) for path in NOTEBOOKS}
    total = sum(mentions.values())
    assert total <= MAX_NOTE_MENTIONS, (
        f"the chapters' markdown mentions the research notes by number {total} times "
        f"(at most {MAX_NOTE_MENTIONS}): {mentions}. Quote the claim, name its source and link its "
        "erratum ({ref}`erratum N <errata-NN>`) instead."
    )


# "chapter 5", "Chapter 10", "chapters 1 and 3": a reference to a chapter by its number. The chapters are
# numbered (`numbered: true` in _toc.yml), and each such reference must be a link the strict build resolves:
# {doc}`chapter 5 <05_tabular_identity>` or chapters {doc}`1 <...>` and {doc}`3 <...>`.
CHAPTER_NUMBER = re.compile(r"\bchapters?\s+\d+", re.IGNORECASE)
LINK = re.compile(r"\{doc\}`[^`]*`|\[[^\]]*\]\([^)]*\)")
BOOK_PAGES = sorted((ROOT / "book").glob("*.md"))


def unlinked_chapter_numbers(text):
    """The references to a chapter by number in markdown ``text`` that are not inside a link."""
    return CHAPTER_NUMBER.findall(LINK.sub("", text))


def test_chapter_number_pattern_tells_links_from_plain_references():
    assert unlinked_chapter_numbers("as chapter 4 shows; Chapter 10 and chapters 1 and 3") == [
        "chapter 4",
        "Chapter 10",
        "chapters 1",
    ]
    linked = "see {doc}`chapter 4 <04_add_or_concatenate>`, chapters {doc}`1 <01_a>` and [3](03_b.ipynb)"
    assert unlinked_chapter_numbers(linked) == []
    assert unlinked_chapter_numbers("every other chapter; this chapter's figure 3") == []


@pytest.mark.parametrize("path", NOTEBOOKS + BOOK_PAGES, ids=lambda path: path.name)
def test_every_chapter_number_is_a_link(path):
    texts = markdown_sources(path) if path.suffix == ".ipynb" else [path.read_text(encoding="utf-8")]
    unlinked = [ref for text in texts for ref in unlinked_chapter_numbers(text)]
    assert unlinked == [], f"{path.name}: {unlinked} name a chapter by number without linking it"


def figure_texts(path):
    """The captions and alt texts in the cell metadata of notebook ``path`` (``mystnb.figure``/``mystnb.image``)."""
    texts = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        mystnb = cell["metadata"].get("mystnb", {})
        texts += [mystnb.get("figure", {}).get("caption", ""), mystnb.get("image", {}).get("alt", "")]
    return texts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_figures_name_the_formula_not_the_note(path):
    """A caption or alt text names what is drawn (the formula), never a research note by number."""
    assert note_mentions(figure_texts(path)) == [], f"{path.name}: a figure's caption or alt text names a note"


# Chapter 10's summary counts the issue and pull-request threads its first six families cite ("Bugs from N
# issues and pull requests ... in six families") and cites them again in that bullet. A thread is a
# bibliography entry whose url is a GitHub issue or pull request; papers cited in the same sections are not.
GALLERY = ROOT / "notebooks" / "10_bug_gallery.ipynb"
CITE = re.compile(r"\{cite:[tp]\}`([^`]*)`")


def github_threads(keys):
    """The keys among ``keys`` whose entry in book/references.bib has a GitHub issue or pull-request url."""
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    urls = dict(re.findall(r"@\w+\{([^,\s]+),.*?url\s*=\s*\{([^}]*)\}", bib, flags=re.S))
    return {key for key in keys if re.search(r"github\.com/.+/(issues|pull)/\d+", urls.get(key, ""))}


def cited_keys(text):
    return {key.strip() for body in CITE.findall(text) for key in body.split(",")}


def test_gallery_summary_counts_the_threads_of_families_1_to_6():
    texts = markdown_sources(GALLERY)
    first = next(i for i, text in enumerate(texts) if text.startswith("## Family 1:"))
    seventh = next(i for i, text in enumerate(texts) if text.startswith("## Family 7:"))
    threads = github_threads(cited_keys("\n".join(texts[first:seventh])))
    summary = next(text for text in texts if text.startswith("## Summary"))
    bullet = summary.split("\n- ")[1]
    count = re.search(r"(\d+) issues and pull requests", bullet)
    assert count, "the summary's first bullet no longer says 'N issues and pull requests'"
    assert int(count.group(1)) == len(threads), (
        f"the summary counts {count.group(1)} issues and pull requests; families 1 to 6 cite {len(threads)}"
    )
    assert github_threads(cited_keys(bullet)) == threads, "the summary's first bullet cites other threads"


# "Paragraphs under 150 words" (DEVELOPERS.md). A paragraph is a block of a markdown cell between blank lines,
# each list item on its own. Headings, tables, display math and fenced blocks are not prose; a dropdown's text
# (```` ```{dropdown} ```` or ``:::{dropdown}``) is, and counts.
MAX_PARAGRAPH_WORDS = 150
FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*(\{(\w[\w-]*)\})?")
LIST_ITEM = re.compile(r"^\s*([-*+]|\d+\.)\s")


def paragraphs(markdown):
    """The prose paragraphs of one markdown cell, each as one string."""
    found, current, dropdowns = [], [], []  # dropdowns: the fences of the open dropdowns
    skipping, in_math = None, False  # the fence of a block that is not prose; inside $$ ... $$

    def close():
        if current:
            found.append(" ".join(line.strip() for line in current))
            current.clear()

    for line in markdown.split("\n"):
        fence, stripped = FENCE.match(line), line.strip()
        if skipping is not None:
            if fence and fence.group(1) == skipping and stripped == skipping:
                skipping = None
            continue
        if in_math:
            in_math = not stripped.endswith("$$")
            continue
        if fence:
            close()
            marks, directive = fence.group(1), fence.group(3)
            if directive == "dropdown":
                dropdowns.append(marks)
            elif stripped == marks and dropdowns and dropdowns[-1] == marks:
                dropdowns.pop()  # the dropdown's closing fence
            else:
                skipping = marks  # code, {literalinclude}, {math} ...: up to the closing fence
            continue
        if stripped.startswith("$$"):
            close()
            in_math = not (len(stripped) > 2 and stripped.endswith("$$"))
            continue
        if not stripped or stripped.startswith(("#", "|")) or (stripped.startswith(":") and stripped[1:2].strip()):
            close()  # a blank line, a heading, a table row, a directive's option
            continue
        if LIST_ITEM.match(line):
            close()
        current.append(line)
    close()
    return found


def test_paragraph_pattern_splits_items_and_skips_what_is_not_prose():
    text = "\n".join(
        [
            "# Title",
            "",
            "One two three.",
            "Four.",
            "",
            "- item one",
            "  continues",
            "- item two",
            "",
            "$$",
            "x = y",
            "$$",
            "",
            "```python",
            "print('code')",
            "```",
            "",
            "```",
            "bare code block",
            "```",
            "",
            "````{dropdown} A report",
            "Inside the dropdown.",
            "````",
            "| a | b |",
        ]
    )
    assert paragraphs(text) == [
        "One two three. Four.",
        "- item one continues",
        "- item two",
        "Inside the dropdown.",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_paragraphs_are_under_150_words(path):
    long = [
        f"markdown cell {index}, {len(paragraph.split())} words: {paragraph[:60]}..."
        for index, text in enumerate(markdown_sources(path))
        for paragraph in paragraphs(text)
        if len(paragraph.split()) >= MAX_PARAGRAPH_WORDS
    ]
    assert long == [], f"{path.name}: paragraphs of {MAX_PARAGRAPH_WORDS} words or more (split them): {long}"
