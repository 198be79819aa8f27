"""The book's search extension (book/_ext/posenc_search.py) indexes "131,072" as "131072" too."""

import importlib.util
from pathlib import Path

from sphinx.search.en import SearchEnglish

PATH = Path(__file__).resolve().parent.parent / "book" / "_ext" / "posenc_search.py"
SPEC = importlib.util.spec_from_file_location("posenc_search", PATH)
posenc_search = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(posenc_search)


def test_a_grouped_number_is_also_indexed_as_one_word():
    text = "A base of 500,000 covers 131,072 positions; 1,000,000 is a million, 8,192 a power of two."
    # Sphinx's own English split loses the numbers a reader would type
    assert "131072" not in SearchEnglish({}).split(text)
    words = posenc_search.SearchEnglishWithNumbers({}).split(text)
    assert words[: len(SearchEnglish({}).split(text))] == SearchEnglish({}).split(text)
    assert words[len(SearchEnglish({}).split(text)) :] == ["500000", "131072", "1000000", "8192"]


def test_only_numbers_with_thousands_separators_are_joined():
    assert posenc_search.joined_numbers("pairs 1, 2, 3 and 4,5; 3.14,159 and 12,34 and 1,2345 and (64, 128)") == []
    assert posenc_search.joined_numbers("from 16,384 to 32,768.") == ["16384", "32768"]


def test_short_bold_phrases_are_the_terms_a_page_defines():
    """Chapter 7 defines "**interleaved**" and "**halves**"; a sentence set in bold is not a term."""
    from docutils.core import publish_doctree

    doctree = publish_doctree(
        "- **interleaved**: features 2i and 2i+1;\n- **halves**: features i and i + d/2.\n\n"
        "**What users saw, why, and the fix.** The reporter ... **interleaved** again, and **M-RoPE**.\n"
    )
    assert posenc_search.bold_phrases(doctree) == ["interleaved", "halves", "M-RoPE"]


def test_the_index_holds_the_bold_phrases_by_page_number():
    """The frozen index gets ``posenc_bold``: phrase -> numbers of the pages (in ``docnames`` order) that hold it."""
    from docutils.core import publish_doctree

    builder = posenc_search.IndexBuilderWithBold.__new__(posenc_search.IndexBuilderWithBold)
    builder._bold = {
        "notebooks/07_rotary": posenc_search.bold_phrases(publish_doctree("**interleaved** and **halves**")),
        "notebooks/01_vaswani_formula": ["interleaved"],
        "gone": ["halves"],  # not in the index any more
    }
    frozen = {"docnames": ["notebooks/01_vaswani_formula", "notebooks/07_rotary"]}
    # the part of freeze that is this extension's, on a frozen index as Sphinx's own freeze returns it
    original = posenc_search.IndexBuilder.freeze
    try:
        posenc_search.IndexBuilder.freeze = lambda self: dict(frozen)
        assert builder.freeze()["posenc_bold"] == {"interleaved": [0, 1], "halves": [1]}
    finally:
        posenc_search.IndexBuilder.freeze = original
