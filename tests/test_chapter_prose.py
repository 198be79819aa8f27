"""The chapters' prose stands alone: few mentions of the research notes, and every "chapter N" a link."""

import json
import re
from pathlib import Path

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
