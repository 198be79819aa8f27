"""Sphinx extension: the search index also holds each grouped number without its commas, and each page's
short bold phrases, which the search page's scorer ranks.

The book writes large numbers with thousands separators ("a base of 500,000", "131,072 positions"). Sphinx's
English search splits text into words at anything that is not a letter or a digit, so "131,072" is indexed
as "131" and "072", and a reader who types 131072, as a configuration file writes it, finds nothing. This
extension gives the index, in addition, the number as one word ("131072"). The search page's own splitting
of the query is unchanged.

A page that defines a term in bold (chapter 7's "**interleaved**: features 2i and 2i+1") is about that term
more than a page that only mentions it. The index gets a key ``posenc_bold``: each bold phrase of at most
:data:`MAX_BOLD_WORDS` words, as written, with the numbers of the pages that hold it. ``search_scorer.js`` (this
folder; ``html_search_scorer`` in ``_config.yml``) reads it.

Loaded from ``_config.yml`` (``local_extensions`` puts this folder on the build's path; the extension is
named in the ``extensions`` list there). tests/site_check.py searches for a number the book writes grouped.
"""

from __future__ import annotations

import io
import re
from typing import IO, Any

import sphinx.search
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.search import IndexBuilder, languages
from sphinx.search.en import SearchEnglish

GROUPED_NUMBER = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
"""A number with thousands separators, such as ``131,072`` or ``1,000,000`` (not ``3,4`` nor a list ``1, 2``)."""


def joined_numbers(text: str) -> list[str]:
    """Each grouped number in ``text`` written without its commas: ``"131,072 and 8,192"`` gives
    ``["131072", "8192"]``."""
    return [number.replace(",", "") for number in GROUPED_NUMBER.findall(text)]


class SearchEnglishWithNumbers(SearchEnglish):
    """Sphinx's English search language, whose ``split`` also yields each grouped number as one word."""

    def split(self, input: str) -> list[str]:  # noqa: A002 - the signature is Sphinx's
        return super().split(input) + joined_numbers(input)


MAX_BOLD_WORDS = 4
"""A bold phrase of at most this many words names a term; a longer one is a sentence set in bold."""


def bold_phrases(doctree: nodes.Node) -> list[str]:
    """The bold phrases (``**...**``) of ``doctree`` with 1 to :data:`MAX_BOLD_WORDS` words, once each, in order."""
    phrases = [" ".join(node.astext().split()) for node in doctree.findall(nodes.strong)]
    return list(dict.fromkeys(p for p in phrases if 1 <= len(p.split()) <= MAX_BOLD_WORDS))


class IndexBuilderWithBold(IndexBuilder):
    """Sphinx's search index builder, which also records each page's :func:`bold_phrases` (key ``posenc_bold``:
    phrase -> the numbers of its pages, in the order of the index's ``docnames``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._bold: dict[str, list[str]] = {}

    def feed(self, docname: str, filename: str, title: str, doctree: nodes.document) -> None:
        super().feed(docname, filename, title, doctree)
        self._bold[docname] = bold_phrases(doctree)

    def load(self, stream: IO[str], format: Any) -> None:  # noqa: A002 - the signature is Sphinx's
        """An incremental build starts from the index on disk: keep the bold phrases of the pages not fed again."""
        text = stream.read()
        super().load(io.StringIO(text), format)
        frozen = (self.formats[format] if isinstance(format, str) else format).loads(text)
        for phrase, files in frozen.get("posenc_bold", {}).items():
            for file in files:
                self._bold.setdefault(frozen["docnames"][file], []).append(phrase)

    def prune(self, docnames: Any) -> None:
        docnames = set(docnames)
        super().prune(docnames)
        self._bold = {name: phrases for name, phrases in self._bold.items() if name in docnames}

    def freeze(self) -> dict[str, Any]:
        frozen = super().freeze()
        number = {name: i for i, name in enumerate(frozen["docnames"])}
        bold: dict[str, list[int]] = {}
        for docname, phrases in sorted(self._bold.items()):
            for phrase in phrases:
                if docname in number:
                    bold.setdefault(phrase, []).append(number[docname])
        frozen["posenc_bold"] = bold
        return frozen


def setup(app: Sphinx) -> dict[str, object]:
    languages["en"] = SearchEnglishWithNumbers
    # the HTML builder imports the class from sphinx.search when it sets up its index
    sphinx.search.IndexBuilder = IndexBuilderWithBold  # type: ignore[misc]
    return {"parallel_read_safe": True, "parallel_write_safe": True}
