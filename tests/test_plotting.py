"""posenc_book.plotting: the heat map draws a table as it is, and refuses what is not a table."""

import numpy as np
import pytest
from matplotlib.figure import Figure

import posenc
from posenc_book.plotting import heatmap


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
