"""posenc_book.plotting: the heat map draws a table as it is, and refuses what is not a table."""

import io

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib.figure import Figure

import posenc
from posenc_book.plotting import BOOK_STYLE, DISPLAY_WIDTH_PX, heatmap, use_book_style


def test_a_figure_in_the_book_style_is_a_png_twice_its_displayed_width():
    """The inline backend draws at ``figure.dpi`` and trims the figure to its drawing (``bbox_inches="tight"``):
    a figure of the default size must still come out at least twice as wide, in pixels, as the theme shows
    it, or it is blurry on a 2x screen."""
    with mpl.rc_context():
        use_book_style()
        figure = Figure()
        axes = figure.subplots()
        axes.plot([0, 1], [1, 0])
        axes.set(xlabel="position", ylabel="value", title="A figure of the default size")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=figure.dpi, bbox_inches="tight")
    png = buffer.getvalue()
    assert png[12:16] == b"IHDR"
    width = int.from_bytes(png[16:20], "big")  # the PNG header's width field
    assert width >= 2 * DISPLAY_WIDTH_PX, (width, BOOK_STYLE["figure.dpi"])


def test_heatmap_puts_positions_down_and_columns_across():
    table = posenc.sinusoidal(6, 4, dtype=np.float64)
    ax = heatmap(table, ax=Figure().subplots())
    np.testing.assert_array_equal(ax.collections[0].get_array().reshape(6, 4), table)
    assert ax.get_xlim() == (0.0, 4.0) and ax.get_ylabel() == "Position"


@pytest.mark.argument_check
def test_heatmap_refuses_one_row_instead_of_a_table():
    """A 1-D row (say ``table[5]``) would fail inside matplotlib with 'not enough values to unpack'."""
    with pytest.raises(ValueError, match=r"table must be 2-D \(n_positions, d_model\), got shape \(4,\)"):
        heatmap(posenc.sinusoidal(6, 4)[5], ax=Figure().subplots())
