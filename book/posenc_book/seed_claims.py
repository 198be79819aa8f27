"""The committed table of ``make check-seeds`` (``book/data/seed_claims.md``), read back for the chapters and tests.

``tests/check_seeds.py`` checks every claim chapters 5, 9 and 12 make about a scheme, a chain or every seed on
nine training seeds and writes one table per chapter (:func:`posenc_book.robustness.check_seed_values`'s rows)
under a header with the date, the machine, the versions and a digest of the code the numbers come from. A
chapter that says a claim holds "on each of nine seeds" asserts it here, with :func:`verdicts`; the test
``tests/test_seed_claims.py`` refuses a table whose digest or versions are not the current ones, or whose claims
are not those ``tests/check_seeds.py`` checks.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SEED_CLAIMS", "SeedRow", "SeedTable", "read", "verdicts"]

SEED_CLAIMS = Path(__file__).resolve().parents[1] / "data" / "seed_claims.md"
"""Where ``make check-seeds`` writes its table: ``book/data/seed_claims.md``."""


@dataclass(frozen=True)
class SeedRow:
    """One claim of the table: its name, bound, range over the seeds, mean, spread, margin, ratio and verdict."""

    claim: str
    bound: str
    low: float
    high: float
    mean: float
    spread: float
    margin: float
    ratio: float
    verdict: str

    @property
    def holds(self) -> bool:
        """Whether the claim held over the seeds."""
        return self.verdict == "holds"


@dataclass(frozen=True)
class SeedTable:
    """The header fields (``date``, ``seeds``, ``machine``, ``versions``, ``run time``, ``source digest``) and
    the rows of each chapter (``"05"``, ``"09"``, ``"12"``)."""

    header: dict[str, str]
    chapters: dict[str, tuple[SeedRow, ...]]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse(text: str) -> SeedTable:
    """The table written by ``tests/check_seeds.py``'s ``report``, parsed."""
    header: dict[str, str] = {}
    chapters: dict[str, list[SeedRow]] = {}
    chapter = None
    for line in text.splitlines():
        if line.startswith("- ") and ": " in line and chapter is None:
            key, value = line[2:].split(": ", 1)
            header[key] = value
        elif line.startswith("## "):  # "## 09_train_short_test_long": the rows of chapter "09"
            chapter = line.removeprefix("## ").strip()[:2]
            chapters[chapter] = []
        elif chapter is not None and line.startswith("| ") and not line.startswith(("| claim |", "| --- |")):
            # cells split at the | that are not escaped (a claim's name may hold "\|")
            inner = line.strip()[1:-1]
            cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]
            claim, bound, span, mean, spread, margin, ratio, verdict = cells
            low, high = span.split(" to ")
            chapters[chapter].append(
                SeedRow(
                    claim,
                    bound,
                    _number(low),
                    _number(high),
                    _number(mean),
                    _number(spread),
                    _number(margin),
                    _number(ratio),
                    verdict,
                )
            )
    return SeedTable(header, {number: tuple(rows) for number, rows in chapters.items()})


@functools.cache
def read(path: Path = SEED_CLAIMS) -> SeedTable:
    """The committed table (``book/data/seed_claims.md`` unless ``path``), parsed; read once."""
    return parse(Path(path).read_text())


def verdicts(chapter: str) -> dict[str, bool]:
    """``{claim: whether it held over the seeds}`` for chapter ``chapter`` (``"05"``, ``"09"`` or ``"12"``)."""
    return {row.claim: row.holds for row in read().chapters[chapter]}
