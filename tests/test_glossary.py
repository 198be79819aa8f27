"""The glossary (book/glossary.md) is alphabetical, and its A–Z line jumps to every letter it has."""

import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parent.parent / "book" / "glossary.md"


def sections(text):
    """``(label, heading, [first term of each entry])`` for each letter section of the glossary's source."""
    found = []
    for label, heading, body in re.findall(
        r"^\((glossary-\w+)\)=\n## ([^\n]+)\n\n```\{glossary\}\n(.*?)^```", text, re.M | re.S
    ):
        entries = [block for block in body.strip("\n").split("\n\n") if block.strip()]
        found.append((label, heading, [entry.splitlines()[0] for entry in entries]))
    return found


def test_every_entry_stands_under_its_letter_in_alphabetical_order():
    text = GLOSSARY.read_text()
    found = sections(text)
    terms = [term for _, _, firsts in found for term in firsts]
    assert len(terms) >= 20 and terms == sorted(terms, key=str.casefold), terms
    for label, heading, firsts in found:
        assert label == f"glossary-{heading.lower()}" and all(term[0].upper() == heading for term in firsts)
    # every entry of the page is in one of the letter sections
    assert text.count("```{glossary}") == len(found)


def test_the_jump_line_links_each_letter_section_once_in_order():
    text = GLOSSARY.read_text()
    jumps = re.findall(r"\{ref\}`(\w) <(glossary-\w+)>`", text.split("\n(glossary-", 1)[0])
    assert len(jumps) >= 5 and jumps == [(heading, label) for label, heading, _ in sections(text)]
