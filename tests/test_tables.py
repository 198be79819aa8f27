"""posenc_book.tables: the chapters' results tables render as HTML with their cells as given, escaped."""

import re

import pytest

from posenc_book.tables import Table, value_range


def test_a_range_is_written_with_an_en_dash_not_a_hyphen():
    """A hyphen between two numbers reads as a minus sign: "1.66-1.78"."""
    assert value_range(1.6649, 1.7751) == "1.66–1.78"
    assert value_range(0.5, 2.0, digits=1) == "0.5–2.0"


def test_the_html_table_holds_every_cell_in_order_and_escapes_markup():
    table = Table(["scheme", "loss"], [["<rotary>", "1.5 (1.4–1.6)"], ["t5 & co", "cannot run"]], caption="a < b")
    html = table._repr_html_()
    assert html.startswith('<table class="table posenc-results"><caption>a &lt; b</caption>')
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[hd] style=[^>]*>(.*?)</t[hd]>", html)]
    assert cells == [
        "scheme",
        "loss",
        "&lt;rotary&gt;",
        "1.5 (1.4–1.6)",
        "t5 &amp; co",
        "cannot run",
    ]


def test_a_column_of_numbers_is_right_aligned_even_with_a_word_among_them():
    table = Table(
        ["design", "params", "vs add"],
        [["add", "3,152,384", "+0.0%"], ["concat", "cannot run", "+3.1%"], ["x", "12", "-0.5%"]],
    )
    html = table._repr_html_()
    assert html.count('<th style="text-align: left">') == 1 and html.count('<th style="text-align: right">') == 2
    lines = repr(table).splitlines()
    assert lines[0] == "design      params  vs add"
    assert lines[1] == "add      3,152,384   +0.0%"
    assert all(len(line) == len(lines[0]) for line in lines)


@pytest.mark.argument_check
def test_a_row_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match=r"row 1 has 1 cells, the header 2"):
        Table(["a", "b"], [["1", "2"], ["3"]])


def test_in_html_a_number_never_breaks_and_a_long_name_breaks_only_after_dots_and_underscores():
    table = Table(
        ["function", "angles"],
        [["RotaryEmbedding.rotate_queries_or_keys", "pass 1.9e-05"], ["nn.RoPE", "2.13 (2.09–2.17)"]],
    )
    page = table._repr_html_()
    # the break opportunities of the long name, and none in the short one
    assert "RotaryEmbedding.<wbr>rotate_<wbr>queries_<wbr>or_<wbr>keys" in page
    assert ">nn.RoPE<" in page
    # the numbers are kept whole: a line may not break at the minus of an exponent or inside a range
    assert 'pass</span> <span style="white-space: nowrap">1.9e-05</span>' in page
    assert '<span style="white-space: nowrap">2.13 (2.09–2.17)</span>' in page
    # the text a reader selects is the cell's, tags (and a verdict's symbol) removed
    page = re.sub(r'<span aria-hidden="true">.*?</span>', "", page)
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", page)]
    assert cells == ["RotaryEmbedding.rotate_queries_or_keys", "pass 1.9e-05", "nn.RoPE", "2.13 (2.09–2.17)"]


def test_a_failure_is_marked_by_a_symbol_and_bold_type_as_well_as_colour():
    """In dark mode the audit's FAIL looked like a pass: its colour was its only mark. A verdict that begins a
    cell now carries a symbol and (for a failure) bold type; the word itself and the number after it stay."""
    table = Table(
        ["implementation", "angles (rad)"], [["a: f", "FAIL 1.4e+00"], ["b: g", "pass 1.9e-05"], ["c", "n/a"]]
    )
    page = table._repr_html_()
    fail, passed, absent = re.findall(r"<td[^>]*>(.*?)</td>", page)[1::2]
    assert re.fullmatch(
        r'<strong class="[^"]*posenc-fail[^"]*"><span aria-hidden="true">✗ </span>FAIL</strong> .*', fail
    )
    assert re.fullmatch(r'<span class="[^"]*posenc-pass[^"]*"><span aria-hidden="true">✓ </span>pass</span> .*', passed)
    assert absent == "n/a"
    # the words and numbers a reader selects or a screen reader reads, symbols and tags removed
    text = [re.sub(r"<[^>]+>", "", re.sub(r'<span aria-hidden="true">.*?</span>', "", cell)) for cell in (fail, passed)]
    assert text == ["FAIL 1.4e+00", "pass 1.9e-05"]
    # a verdict only where it begins the cell, and the plain-text form is unchanged
    assert "posenc-fail" not in Table(["a"], [["no FAIL here"]])._repr_html_()
    assert repr(table).splitlines()[1] == "a: f            FAIL 1.4e+00"
