"""Sphinx extension: the search index also holds each grouped number without its commas.

The book writes large numbers with thousands separators ("a base of 500,000", "131,072 positions"). Sphinx's
English search splits text into words at anything that is not a letter or a digit, so "131,072" is indexed
as "131" and "072", and a reader who types 131072, as a configuration file writes it, finds nothing. This
extension gives the index, in addition, the number as one word ("131072"). The search page's own splitting
of the query is unchanged.

Loaded from ``_config.yml`` (``local_extensions`` puts this folder on the build's path; the extension is
named in the ``extensions`` list there). tests/site_check.py searches for a number the book writes grouped.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.search import languages
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


def setup(app: Sphinx) -> dict[str, object]:
    languages["en"] = SearchEnglishWithNumbers
    return {"parallel_read_safe": True, "parallel_write_safe": True}
