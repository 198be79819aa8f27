"""The start page's one-line chapter results are checked against their chapters.

``notebooks/00_start_here.ipynb`` ends with one line per chapter: its main result, typed in the start page's
markdown. Each line is checked here against the chapter it links to. :data:`EVIDENCE` gives, per chapter, the
passages of the chapter's own prose that state what the line says (the chapter pins them with its hidden
asserts); each passage must still be in the chapter, word for word up to line breaks, and every number of the
line must appear in one of them. So a chapter that changes a result, or a line that states a number its
chapter does not, fails here. Every chapter of ``_toc.yml`` must have exactly one line, in the order of the
table of contents: a new chapter (16, 17, ...) adds its line to the start page and its passages here.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
START = NOTEBOOKS / "00_start_here.ipynb"

EVIDENCE = {
    "01_vaswani_formula": [
        "Column $2i$ holds a sine and column $2i+1$ a cosine of one shared {term}`frequency`, $10000^{-2i/d_{model}}$.",
        "A shift by $\\Delta$ is $PE(x)\\,T(\\Delta)$ with a block-diagonal rotation $T$",
    ],
    "02_derive_sinusoidal": [
        "A lone sine cannot be shifted by any linear map, while a sine paired with a cosine is shifted exactly",
    ],
    "03_encoding_or_embedding": [
        "are two independent questions about a scheme.",
        "It places six well-known schemes in one table with a source behind every cell.",
        "a numerical test of whether an attention score depends on the offset $m - n$ only.",
    ],
    "04_add_or_concatenate": [
        "The first is an expansion of the attention logits into four terms",
        "why concatenation is addition in separate coordinates.",
        "The parameter guess points the right way: concatenating costs parameters and compute.",
    ],
    "05_tabular_identity": [
        "Table columns need an identity, not an order.",
        "cannot learn even $y = x_0 - x_1$",
    ],
    "06_building_the_table_fast": [
        "the table is as accurate as computing every angle in float64.",
        "Both come from $\\log_2 n$ rows of {term}`phasors <phasor>`",
        "from about fourteen thousand sines and cosines instead of eight million",
        "Why the error of this construction does not grow with the position",
    ],
    "07_rotary": [
        "That RoPE's rotation at position $m$ *is* the translation matrix $T(m)$.",
        "depends on $n - m$ alone",
        "A checkpoint run by code written for the other pair layout still loads, and produces garbage.",
    ],
    "08_relative_biases": [
        "learn a vector per clipped distance, which the query multiplies, and a second one for the values.",
        "T5's coarse far range, ALiBi's fixed preference for recent tokens.",
    ],
    "09_train_short_test_long": [
        "a small {term}`causal <causal attention>` Transformer keeps its loss only with {term}`ALiBi`.",
        "Its loss stays within 0.2 {term}`nats <nat>` of its loss at 32 symbols, on each of nine training seeds",
        "With a {term}`rotary <rotary position embedding>` encoding it ends worse than a predictor that sees only "
        "the current symbol, on the synthetic source used here, and so does a "
        "{term}`sinusoidal <sinusoidal encoding>` one on the three seeds shown.",
    ],
    "10_bug_gallery": [
        "The positional-encoding bugs collected here from public issue trackers rarely crashed.",
        "It reproduces each one in a few lines and catches it with a property check from `posenc.testing`.",
        "rotary angles in float16 or bfloat16",
        "## Family 5: caches that forget the offset or keep stale state",
    ],
    "11_rope_in_more_dimensions": [
        "their score depends on the content and on the offset along each axis alone, whatever the frequencies are.",
        "the score depends on the content and on the offset $p' - p$ along each axis, for *any* matrix $F$.",
    ],
    "12_choosing_the_base": [
        "the condition of {cite:t}`menBaseRoPEBounds2024` has no single smallest base",
        "The first grid base grows faster than the context.",
        "So the condition gives no base to pick for 128k.",
        "Bases of a few million nearly all fail it, bases from about 30 million nearly all meet it",
        "Llama 2 (base 10000 at 4096 positions) fails the condition. Llama 3 (500000 at 8192) meets it",
    ],
    "13_auditing_implementations": [
        "the rotary, ALiBi and T5 code of five PyTorch libraries.",
        "In {term}`bfloat16` (8 significant bits), rotary-embedding-torch rounds its positions.",
        "A bfloat16 cast rounds the rotary frequencies of transformers' Llama, x-transformers and "
        "rotary-embedding-torch",
    ],
    "14_auditing_outside_pytorch": [
        "MLX passes every {term}`rotary <rotary position embedding>` property audited",
        "## mlx-lm's YaRN and longrope differ from transformers'",
        "Equinox keeps one rotary table per width and dtype, so a module of base 10000 that runs after one of "
        "base $10^6$ can get the other base's angles.",
    ],
    "15_model_zoo": [
        "reads the rotary settings of 227 of 238 configuration classes in `transformers` 5.23",
        "the 236 whose defaults carry rope parameters, and GPT-J's and CodeGen's, which fix their rotation in code.",
        "the logits agree within $10^{-4}$.",
    ],
    "16_position_from_content": [
        "the schemes of 2024 to 2026 that compute a token's position from the tokens do what their papers claim",
        "Contextual positions ({term}`CoPE <contextual position encoding>`) recall the symbol two marks back",
        "PaTH's Householder products track the parity of a bit string",
        "Forgetting attention and stick-breaking attention, trained on {doc}`chapter 9 <09_train_short_test_long>`'s "
        "chain at 32 symbols, lose less than 0.1 nats at 256",
        "One claim does not reproduce at this budget: DroPE's.",
    ],
    "17_same_model_every_engine": [
        "Five engines and 25 model families make the matrix below. Three cells of the published files are red. "
        "mlx-lm rounds GPT-OSS's YaRN ramp",
        "mlx-lm gives Phi-3.5 its long LongRoPE list at every length, on purpose, and so does vLLM when it serves "
        "more than 4096 tokens",
        "built from the file the way its own loader builds it",
    ],
}
"""Per chapter, the passages of its prose that its start-page line summarises (whitespace-normalised)."""


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def markdown(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return flat("\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"))


def toc_chapters() -> list[str]:
    names = re.findall(r"file:\s*notebooks/(\d\d_\w+)", (ROOT / "_toc.yml").read_text())
    return [name for name in names if not name.startswith("00_")]


def start_page_lines() -> dict[str, str]:
    """``{chapter: its line}`` from the start page's numbered list of chapter results."""
    text = markdown(START)
    section = text[text.index("## The chapters, one result each") :]
    section = section[: section.index("## Summary")] if "## Summary" in section else section
    items = re.split(r"\s(?=\d+\. \{doc\}`)", section)[1:]
    lines = {}
    for item in items:
        chapter = re.match(r"\d+\. \{doc\}`([^`<]+)", item).group(1)
        assert chapter not in lines, f"two lines for {chapter}"
        lines[chapter] = item
    return lines


def numbers(text: str) -> set[str]:
    """The numbers a line states: digit runs (with thousands separators and decimals), not a chapter's index."""
    text = re.sub(r"^\d+\. \{doc\}`[^`]+`:?", "", text)  # the list number and the link
    return set(re.findall(r"\d+(?:[.,]\d+)*", text))


def test_every_chapter_has_one_line_in_the_order_of_the_table_of_contents():
    assert list(start_page_lines()) == toc_chapters()
    assert sorted(EVIDENCE) == sorted(toc_chapters()), "a chapter without passages in EVIDENCE (or one too many)"


@pytest.mark.parametrize("chapter", sorted(EVIDENCE))
def test_each_passage_is_still_in_its_chapter(chapter):
    text = markdown(NOTEBOOKS / f"{chapter}.ipynb")
    missing = [passage for passage in EVIDENCE[chapter] if flat(passage) not in text]
    assert missing == [], f"{chapter} no longer says: {missing}"


@pytest.mark.parametrize("chapter", sorted(EVIDENCE))
def test_every_number_of_a_line_is_in_its_chapters_passages(chapter):
    line = start_page_lines()[chapter]
    passages = " ".join(flat(p) for p in EVIDENCE[chapter])
    stated = set(re.findall(r"\d+(?:[.,]\d+)*", passages))
    assert numbers(line) <= stated, f"{chapter}: numbers of its line not in its passages: {numbers(line) - stated}"


def test_a_number_the_chapter_does_not_state_is_refused():
    """The check above, on a planted line: 12's line with another base."""
    passages = " ".join(flat(p) for p in EVIDENCE["12_choosing_the_base"])
    planted = start_page_lines()["12_choosing_the_base"].replace("10000", "20000")
    assert "20000" in planted and not numbers(planted) <= set(re.findall(r"\d+(?:[.,]\d+)*", passages))
