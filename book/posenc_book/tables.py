"""Results shown as tables: what a chapter displays in place of a loop of ``print`` calls.

A :class:`Table` is the last expression of a cell. Jupyter and the book (MyST-NB) render it as an HTML
table (``_repr_html_``), which the theme styles and lets scroll inside its own box on a phone; a terminal or
a plain-text viewer gets aligned columns (``repr``). A range of values is written with an en dash
(:func:`value_range`), never a hyphen that reads as a minus sign.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

__all__ = ["VERDICTS", "Table", "value_range"]

# A number (1,024  -0.5  +3.1%  2.4e-04), a range (1.66–1.78), or a number and a range (2.13 (2.09–2.17)).
_NUMBER = re.compile(r"[-+−]?[\d.,]+(?:e[-+−]?\d+)?%?(?:–[\d.,]+)?(?: \([\d.,]+–[\d.,]+\))?", re.IGNORECASE)


_LONG_NAME = re.compile(r"[\w.]{16,}")
"""A word long enough to widen its column, made of name characters (``RotaryEmbedding.rotate_queries_or_keys``)."""

VERDICTS = {
    "FAIL": '<strong class="posenc-verdict posenc-fail"><span aria-hidden="true">✗ </span>FAIL</strong>',
    "pass": '<span class="posenc-verdict posenc-pass"><span aria-hidden="true">✓ </span>pass</span>',
}
"""How a cell's first word, when it is a verdict, is shown in HTML: a failure in bold with a cross, a pass with a
tick. The site's stylesheet (``_static/verdicts.css``) also colours them, in light and dark mode; the symbol
and the weight tell them apart without colour. A screen reader reads the word alone."""


def _cell_html(cell: str) -> str:
    """A cell's text as HTML that breaks where a reader would and nowhere else.

    A number (``1.9e-05``) never breaks at its minus sign; a long dotted or snake-case name may break after
    each ``.`` and ``_`` (``<wbr>``, no visible hyphen), so that one name does not set a column's width. A
    verdict that begins the cell (``FAIL 1.4e+00``) is shown as :data:`VERDICTS` says. The text itself, tags
    and the verdicts' symbols removed, is the cell's.
    """
    if _NUMBER.fullmatch(cell):
        return f'<span style="white-space: nowrap">{html.escape(cell)}</span>'
    words = []
    for index, word in enumerate(cell.split(" ")):
        escaped = html.escape(word)
        if index == 0 and word in VERDICTS:
            escaped = VERDICTS[word]
        elif _NUMBER.fullmatch(word):
            escaped = f'<span style="white-space: nowrap">{escaped}</span>'
        elif _LONG_NAME.search(word):
            escaped = re.sub(r"([._])(?=\w)", r"\1<wbr>", escaped)
        words.append(escaped)
    return " ".join(words)


def value_range(low: float, high: float, digits: int = 2) -> str:
    """``low`` and ``high`` written as a range with an en dash, e.g. ``"1.66–1.78"``.

    Parameters
    ----------
    low, high : float
    digits : int, default 2
        Digits after the decimal point.

    Returns
    -------
    text : str
    """
    return f"{low:.{digits}f}–{high:.{digits}f}"


class Table:
    """A small results table: a header row and rows of already formatted cells.

    Parameters
    ----------
    header : sequence of str
        Column names.
    rows : sequence of sequences
        One sequence per row, as long as ``header``; each cell is shown with ``str``.
    caption : str, optional
        A line shown above the table.

    Notes
    -----
    A cell that begins with a verdict, ``FAIL`` or ``pass`` (the audit's cells: ``"FAIL 1.4e+00"``), shows it
    with a symbol and a weight as well as a colour (:data:`VERDICTS`), so that a failure stands out in either
    colour scheme and to a reader who does not see colour.

    A column whose cells mostly read as numbers (``0.25``, ``1,024``, ``+3.1%``, ``2.4e-04``, ``1.66–1.78``) is
    right-aligned, so that a "cannot run" among them does not move it; the others (names) are left-aligned.
    """

    def __init__(self, header: Sequence[object], rows: Sequence[Sequence[object]], caption: str | None = None):
        self.header = [str(cell) for cell in header]
        self.rows = [[str(cell) for cell in row] for row in rows]
        self.caption = caption
        for index, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(f"row {index} has {len(row)} cells, the header {len(self.header)}: {row}")

    def _numeric(self, column: int) -> bool:
        cells = [row[column].strip() for row in self.rows if row[column].strip()]
        return 2 * sum(bool(_NUMBER.fullmatch(cell)) for cell in cells) > len(cells)

    def _repr_html_(self) -> str:
        aligns = ["right" if self._numeric(column) else "left" for column in range(len(self.header))]

        def row_html(cells: list[str], tag: str) -> str:
            return (
                "<tr>"
                + "".join(
                    f'<{tag} style="text-align: {align}">{_cell_html(cell)}</{tag}>'
                    for cell, align in zip(cells, aligns)
                )
                + "</tr>"
            )

        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        body = "".join(row_html(row, "td") for row in self.rows)
        head = row_html(self.header, "th")
        return f'<table class="table posenc-results">{caption}<thead>{head}</thead><tbody>{body}</tbody></table>'

    def __repr__(self) -> str:
        widths = [max(len(row[column]) for row in [self.header, *self.rows]) for column in range(len(self.header))]
        numeric = [self._numeric(column) for column in range(len(self.header))]

        def line(cells: list[str]) -> str:
            return "  ".join(
                cell.rjust(width) if right else cell.ljust(width) for cell, width, right in zip(cells, widths, numeric)
            ).rstrip()

        lines = ([self.caption] if self.caption else []) + [line(self.header)] + [line(row) for row in self.rows]
        return "\n".join(lines)
