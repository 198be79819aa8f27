"""The committed table of ``make check-seeds`` (``book/data/seed_claims.md``) is current, complete and green.

``tests/check_seeds.py`` takes about 20 minutes, so ``make test`` does not run it; it reads what the last run
wrote. The table is refused if it was made from other code than the chapters' and helpers' current code (its
source digest), with other versions of NumPy or PyTorch than ``requirements.txt`` pins, on other seeds, or for
other claims and bounds than ``tests/check_seeds.py``'s; and every claim in it must hold. Rerun
``make check-seeds`` after changing what a chapter trains or measures.
"""

import re
from pathlib import Path

import numpy as np
import pytest
from check_seeds import CLAIMS, OUT, SEEDS, report, source_digest

from posenc_book.robustness import Bound, check_seed_values
from posenc_book.seed_claims import SEED_CLAIMS, parse, read, verdicts

ROOT = Path(__file__).resolve().parent.parent


def pinned(package: str) -> str:
    """The version ``requirements.txt`` pins for ``package``."""
    match = re.search(rf"^{re.escape(package)}==(\S+)$", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert match, package
    return match.group(1)


def test_the_table_is_where_the_target_writes_it():
    assert OUT == SEED_CLAIMS and SEED_CLAIMS.exists(), "run make check-seeds"


def test_the_table_was_made_from_the_current_code():
    header = read().header
    assert header["source digest"] == source_digest(), (
        "book/data/seed_claims.md was made from other code than the current chapters 5, 9, 12 and their helpers: "
        "run make check-seeds"
    )


def test_the_table_was_made_with_the_pinned_versions_and_a_date():
    header = read().header
    assert f"NumPy {pinned('numpy')}" in header["versions"]
    assert f"PyTorch {pinned('torch')}" in header["versions"]  # "2.13.0+cpu" and the like start with the pin
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", header["date"])
    assert header["seeds"] == ", ".join(map(str, SEEDS)) and len(SEEDS) >= 9


def test_the_table_lists_exactly_the_claims_checked_and_each_holds():
    table = read()
    assert set(table.chapters) == set(CLAIMS)
    for chapter, bounds in CLAIMS.items():
        rows = table.chapters[chapter]
        assert [(r.claim, r.bound) for r in rows] == [(b.quantity, b.text()) for b in bounds], chapter
        failing = [r.claim for r in rows if not r.holds]
        assert failing == [], f"chapter {chapter}: claims that do not hold over the seeds: {failing}"
        for r in rows:  # a row that holds has every seed inside and three spreads of margin
            assert r.margin > 0 and (r.spread == 0 or r.ratio >= 3.0), (chapter, r.claim)
    assert verdicts("12") == {b.quantity: True for b in CLAIMS["12"]}


def test_a_stale_or_failing_table_is_refused(tmp_path):
    """The checks above, on a copy of the table with a planted change: another digest, a failing row."""
    text = SEED_CLAIMS.read_text()
    stale = parse(text.replace(read().header["source digest"], "0" * 64))
    assert stale.header["source digest"] != source_digest()
    row = next(line for line in text.splitlines() if line.startswith("| ") and line.endswith("| holds |"))
    failing = parse(text.replace(row, row.replace("| holds |", "| FAILS (seeds 4 break it) |"), 1))
    assert any(not r.holds for rows in failing.chapters.values() for r in rows)


@pytest.mark.parametrize("chapter", sorted(CLAIMS))
def test_the_rows_are_consistent_numbers(chapter):
    for r in read().chapters[chapter]:
        assert r.low <= r.mean <= r.high and r.spread >= 0, r.claim
        assert np.isfinite([r.low, r.high, r.mean, r.spread, r.margin]).all(), r.claim


def test_the_table_reads_back_what_the_target_writes():
    """report() and parse() agree, a claim whose name holds | (as "|rise|") included, and a failing row too."""
    values = {
        "|rise| x": [0.1 + 0.01 * k for k in range(9)],
        "gap": [0.05, 0.06, 0.04, 0.05, 0.055, 0.045, 0.05, 0.065, 0.0],
    }
    check = check_seed_values(values, [Bound("|rise| x", below=0.5), Bound("gap", above=0.01)], range(9))
    table = parse(report({"09": check}, 60.0, "ab" * 32))
    rise, gap = table.chapters["09"]
    assert (rise.claim, rise.bound, rise.holds) == ("|rise| x", "< 0.5", True)
    assert (rise.low, rise.high) == pytest.approx((0.1, 0.18))
    assert (gap.claim, gap.holds) == ("gap", False) and gap.verdict.startswith("FAILS (seeds 8")
    assert table.header["source digest"] == "ab" * 32 and table.header["run time"] == "1.0 min"
