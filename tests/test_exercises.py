"""Every chapter ends with exercises, each solution hidden behind a toggle and checked by an assert.

A chapter's last section is "## Exercises". Each exercise is a markdown cell stating the task, followed by
its solution: a code cell tagged ``hide-cell`` (or ``hide-input``), so that the book shows a "show code"
toggle instead of the answer, which ends in asserts that check the property the exercise asks for. Those
asserts run wherever the chapter runs (`make notebooks`, `make book`), so a solution the book shows is one
that passed. Words that explain a solution go in a markdown ``{dropdown}`` after it.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The numbered chapters; the start-here page (00_start_here.ipynb) is a way in, not a chapter, and has none.
NOTEBOOKS = sorted(path for path in (ROOT / "notebooks").glob("*.ipynb") if not path.name.startswith("00_"))

MIN_EXERCISES = 2
EXERCISES_HEADING = re.compile(r"\A## Exercises\s*$", re.MULTILINE)
SECTION_HEADING = re.compile(r"^#{1,2} ", re.MULTILINE)
ASSERT = re.compile(r"^\s*assert\b", re.MULTILINE)
SOLUTION_TAGS = frozenset({"hide-cell", "hide-input"})


def source(cell):
    return "".join(cell["source"])


def tags(cell):
    return set(cell["metadata"].get("tags", []))


def exercises_section(cells):
    """The cells from the chapter's "## Exercises" heading to its end; empty if it has no such heading."""
    starts = [
        index
        for index, cell in enumerate(cells)
        if cell["cell_type"] == "markdown" and EXERCISES_HEADING.search(source(cell))
    ]
    return cells[starts[-1] :] if starts else []


def exercise_solutions(cells):
    """The code cells of the exercises section that are hidden behind a toggle and check with an assert."""
    return [
        cell
        for cell in exercises_section(cells)
        if cell["cell_type"] == "code" and SOLUTION_TAGS & tags(cell) and ASSERT.search(source(cell))
    ]


def exercise_problems(cells):
    """What is wrong with the exercises of a chapter made of ``cells``: a list of sentences, empty if nothing."""
    section = exercises_section(cells)
    if not section:
        return ["no '## Exercises' section"]
    problems = []
    later = [
        source(cell)[:40]
        for cell in section[1:]
        if cell["cell_type"] == "markdown" and SECTION_HEADING.search(source(cell))
    ]
    if later:
        problems.append(f"the exercises are not the chapter's last section: {later} follow")
    for index, cell in enumerate(section):
        if cell["cell_type"] != "code":
            continue
        if not SOLUTION_TAGS & tags(cell):
            problems.append(f"a solution in plain view (tag it hide-cell): {source(cell)[:40]!r}")
        if not ASSERT.search(source(cell)):
            problems.append(f"a solution that no assert checks: {source(cell)[:40]!r}")
        if section[index - 1]["cell_type"] != "markdown":
            problems.append(f"a solution with no statement of its exercise before it: {source(cell)[:40]!r}")
    count = len(exercise_solutions(cells))
    if count < MIN_EXERCISES:
        problems.append(f"{count} exercises with a hidden, checked solution (at least {MIN_EXERCISES})")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_chapter_ends_with_exercises_and_checked_hidden_solutions(path):
    problems = exercise_problems(json.loads(path.read_text(encoding="utf-8"))["cells"])
    assert problems == [], f"{path.name}: {problems}"


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": [text]}


def code(text, *cell_tags):
    return {"cell_type": "code", "metadata": {"tags": list(cell_tags)}, "source": [text], "outputs": []}


BODY = [markdown("# A chapter"), code("x = 1"), markdown("## Summary and what's next")]
TASK, SOLUTION = markdown("**Exercise 1.** Show that x is 1."), code("y = x\nassert y == 1", "hide-cell")


def test_the_exercise_check_accepts_two_hidden_checked_solutions():
    chapter = [*BODY, markdown("## Exercises"), TASK, SOLUTION, TASK, code("assert x", "hide-input")]
    assert exercise_problems(chapter) == []
    assert len(exercise_solutions(chapter)) == 2


@pytest.mark.parametrize(
    ("exercises", "problem"),
    [
        ([], "no '## Exercises' section"),
        ([markdown("## Exercises"), TASK, SOLUTION], "1 exercises"),
        ([markdown("## Exercises"), TASK, SOLUTION, TASK, code("assert y == 1")], "plain view"),
        ([markdown("## Exercises"), TASK, SOLUTION, TASK, code("y = 2", "hide-cell")], "no assert checks"),
        ([markdown("## Exercises"), TASK, SOLUTION, SOLUTION], "no statement"),
        ([markdown("## Exercises"), TASK, SOLUTION, TASK, SOLUTION, markdown("## More")], "not the chapter's last"),
        ([TASK, SOLUTION, TASK, SOLUTION], "no '## Exercises' section"),
    ],
    ids=["none", "one", "visible", "unchecked", "unstated", "not-last", "no-heading"],
)
def test_the_exercise_check_rejects(exercises, problem):
    problems = exercise_problems([*BODY, *exercises])
    assert any(problem in text for text in problems), problems
