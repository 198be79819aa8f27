"""The book's one matplotlib style and its recurring figures."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["BOOK_STYLE", "DISPLAY_WIDTH_PX", "use_book_style", "heatmap"]

DISPLAY_WIDTH_PX = 672
"""Width, in CSS pixels, at which the book's theme shows a figure (its content column on a desktop)."""

BOOK_STYLE = {
    "figure.figsize": (7.0, 4.0),
    # 220 dots per inch: a 7-inch figure, trimmed to its drawing by the inline backend (bbox_inches="tight"),
    # is a PNG of about 1360 pixels, twice the 672 px it is shown at, so it stays
    # sharp on a high-density (2x) screen and when a phone reader zooms in. The inline backend draws at
    # figure.dpi; savefig.dpi is for figures saved by hand.
    "figure.dpi": 220,
    "savefig.dpi": 220,
    # Larger than matplotlib's 10 pt: a figure shrunk to a phone's width keeps its labels readable.
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.grid": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "copper",
    "svg.hashsalt": "posenc",
}
"""rcParams every chapter uses: set once by :func:`use_book_style`."""


def use_book_style() -> None:
    """Apply :data:`BOOK_STYLE` to matplotlib's global rcParams."""
    mpl.rcParams.update(BOOK_STYLE)


def heatmap(table, *, ax=None, title="PE matrix heat map", cmap="copper", colorbar=True):
    """Draw a positional-encoding table with positions down and embedding columns across.

    Parameters
    ----------
    table : (n_positions, d_model) array_like
        The table to draw; row ``r`` is position ``r``.
    ax : matplotlib Axes, optional
        Where to draw; a new figure's axes by default.
    title : str, default "PE matrix heat map"
        Axes title (the one the research notes use).
    cmap : str, default "copper"
        Colour map (the notes' choice).
    colorbar : bool, default True
        Whether to add a colour bar.

    Returns
    -------
    ax : matplotlib Axes
    """
    table = np.asarray(table)
    if table.ndim != 2:
        raise ValueError(f"table must be 2-D (n_positions, d_model), got shape {table.shape}")
    if ax is None:
        _, ax = plt.subplots()
    mesh = ax.pcolormesh(table, cmap=cmap, vmin=-1.0, vmax=1.0, rasterized=True)
    ax.set_xlabel("Depth (embedding column)")
    ax.set_ylabel("Position")
    ax.set_xlim(0, table.shape[1])
    ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(mesh, ax=ax)
    return ax
