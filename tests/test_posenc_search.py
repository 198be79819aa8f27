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
