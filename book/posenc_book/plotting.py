"""The book's one matplotlib style, the check every figure passes before it is shown, and recurring figures.

A chapter draws with pyplot and ends a figure cell with :func:`show` (not ``plt.show()``): it refuses a figure
whose text would be too small to read on a phone, or whose PNG would be blurry on a desktop's 2x screen.

The legibility rule. The theme shows a figure at the width of its column: :data:`DISPLAY_WIDTH_PX` (672) CSS
pixels on a desktop, :data:`PHONE_DISPLAY_WIDTH_PX` (342) on a 390 px phone. A font of ``s`` points in a
figure ``w`` inches wide (as saved: trimmed to its drawing, plus the padding) is then ``s / 72 * 342 / w``
CSS pixels on the phone, the unit of a CSS ``font-size``, and every text must reach :data:`MIN_TEXT_PX` (9).
The sizes are the ones the figure really draws: :func:`drawn_text_sizes` draws it and records each text the
renderer is asked to draw, with its font size (tick labels outside the axes' limits are not drawn, and not
counted). As in CSS, the size of a text is its font size: the sub- and superscripts of a mathematical label
(the 3 of a log axis's :math:`10^3`) are set smaller, at 0.7 of it, as a browser sets ``<sub>``. At the
book's 13 pt a figure may be up to 6.86 inches wide as saved (a 7-inch ``figsize`` trimmed to its drawing);
wider multi-panel figures stack their panels instead. (342 px is what Chromium shows at a 390 px viewport;
a desktop shows the same figure at 672 px, where 9 px becomes 17.7 px, about the size of the body text.)
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure

__all__ = [
    "BOOK_STYLE",
    "DISPLAY_WIDTH_PX",
    "MIN_TEXT_PX",
    "PHONE_DISPLAY_WIDTH_PX",
    "check_figure",
    "drawn_text_sizes",
    "heatmap",
    "show",
    "shown_width_inches",
    "text_heights_on_phone",
    "use_book_style",
]

DISPLAY_WIDTH_PX = 672
"""Width, in CSS pixels, at which the book's theme shows a figure (its content column on a desktop)."""

PHONE_DISPLAY_WIDTH_PX = 342
"""Width, in CSS pixels, at which the theme shows a figure on a phone 390 px wide (measured in Chromium)."""

MIN_TEXT_PX = 9.0
"""Smallest font size, in CSS pixels (a CSS ``font-size``), that a figure's text may have on that phone."""

BOOK_STYLE = {
    "figure.figsize": (7.0, 4.0),
    # 220 dots per inch: a 7-inch figure, trimmed to its drawing by the inline backend (bbox_inches="tight"),
    # is a PNG of about 1360 pixels, twice the 672 px it is shown at, so it stays
    # sharp on a high-density (2x) screen and when a phone reader zooms in. The inline backend draws at
    # figure.dpi; savefig.dpi is for figures saved by hand.
    "figure.dpi": 220,
    "savefig.dpi": 220,
    # Larger than matplotlib's 10 pt: a 7-inch figure, saved about 6.5 inches wide, shrunk to a phone's
    # 342 px keeps its labels at 13 / 72 * 342 / 6.5 = 9.5 CSS px (MIN_TEXT_PX is 9). Legends and tick
    # labels are "medium", 13 pt too: a chapter must not make them smaller (check_figure refuses it).
    "font.size": 13,
    "axes.titlesize": 14,
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


def shown_width_inches(figure: Figure) -> float:
    """Width, in inches, of ``figure`` as the inline backend saves it.

    IPython saves a figure with ``bbox_inches="tight"``: trimmed to what is drawn (a legend below the axes
    included), then padded by ``savefig.pad_inches`` on each side. The width of that image, not the figure's
    ``figsize``, is what the theme scales to its column.

    Parameters
    ----------
    figure : matplotlib Figure

    Returns
    -------
    width : float
        In inches.
    """
    figure.draw_without_rendering()
    tight = figure.get_tightbbox()  # with the renderer savefig uses to trim
    return float(tight.width) + 2.0 * float(mpl.rcParams["savefig.pad_inches"])


def drawn_text_sizes(figure: Figure) -> list[tuple[str, float]]:
    """Every text ``figure`` draws, with its font size in points.

    The figure is drawn once on an Agg renderer that records each call to ``draw_text``: what matplotlib
    really draws (titles, labels, the tick labels inside the axes' limits, legend entries, annotations,
    colour-bar ticks), not every ``Text`` the figure holds, with the font size it is drawn at. The
    renderer's other ``draw_*`` methods do nothing (as in ``Figure.draw_without_rendering``): lines, meshes
    and images cost no time.

    Parameters
    ----------
    figure : matplotlib Figure

    Returns
    -------
    sizes : list of (str, float)
        ``(text, points)`` for each non-blank text drawn, in drawing order.
    """
    width, height = figure.get_size_inches() * figure.dpi
    renderer = RendererAgg(max(int(width), 1), max(int(height), 1), figure.dpi)
    recorded: list[tuple[str, float]] = []

    def record(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            recorded.append((s, float(prop.get_size_in_points())))

    def skip(*args, **kwargs):
        return None

    for name in dir(RendererBase):
        if name.startswith("draw_"):
            setattr(renderer, name, skip)
    renderer.draw_text = record  # type: ignore[method-assign]
    figure.draw(renderer)
    return recorded


def text_heights_on_phone(
    figure: Figure, *, display_width_px: float = PHONE_DISPLAY_WIDTH_PX
) -> list[tuple[str, float]]:
    """Every text ``figure`` draws, with its font size on a phone, in CSS pixels.

    Parameters
    ----------
    figure : matplotlib Figure
    display_width_px : float, default :data:`PHONE_DISPLAY_WIDTH_PX`
        Width, in CSS pixels, at which the figure is shown.

    Returns
    -------
    heights : list of (str, float)
        ``(text, size)`` for each text of :func:`drawn_text_sizes`, ``size = points / 72 * display_width_px /
        width`` with ``width`` from :func:`shown_width_inches`.
    """
    pixels_per_point = display_width_px / shown_width_inches(figure) / 72.0
    return [(text, points * pixels_per_point) for text, points in drawn_text_sizes(figure)]


def check_figure(figure: Figure, *, min_text_px: float = MIN_TEXT_PX) -> None:
    """Raise if ``figure`` would be illegible on a phone or blurry on a desktop's 2x screen.

    Parameters
    ----------
    figure : matplotlib Figure
        Drawn at its own ``dpi``, as the inline backend draws it.
    min_text_px : float, default :data:`MIN_TEXT_PX`
        Smallest font size allowed on a phone, in CSS pixels (see :func:`text_heights_on_phone`).

    Raises
    ------
    ValueError
        If some text is smaller than ``min_text_px`` at :data:`PHONE_DISPLAY_WIDTH_PX`, naming the texts, the
        figure's width and the largest width its smallest font allows; or if the PNG would be narrower than
        twice :data:`DISPLAY_WIDTH_PX` pixels.
    """
    width = shown_width_inches(figure)
    pixels_per_point = PHONE_DISPLAY_WIDTH_PX / width / 72.0
    sizes = drawn_text_sizes(figure)
    small = sorted(
        ((text, points) for text, points in sizes if points * pixels_per_point < min_text_px), key=lambda pair: pair[1]
    )
    if small:
        smallest = small[0][1]
        widest = smallest / 72.0 * PHONE_DISPLAY_WIDTH_PX / min_text_px
        shown = ", ".join(f"{text!r} ({points * pixels_per_point:.1f} px)" for text, points in small[:5])
        raise ValueError(
            f"figure text too small on a phone: {len(small)} texts under {min_text_px:g} CSS px at "
            f"{PHONE_DISPLAY_WIDTH_PX} px, smallest first: {shown}; the figure is {width:.2f} in wide as saved, "
            f"its smallest font ({smallest:g} pt) needs at most {widest:.2f} in: enlarge the font, narrow the "
            "figure, or stack its panels"
        )
    pixels = width * float(figure.dpi)
    if pixels < 2 * DISPLAY_WIDTH_PX:
        raise ValueError(
            f"figure would be a PNG {pixels:.0f} px wide, under twice the {DISPLAY_WIDTH_PX} px it is shown at "
            f"(blurry on a 2x screen): raise its dpi ({figure.dpi:g}) to at least {2 * DISPLAY_WIDTH_PX / width:.0f}"
        )


def show() -> None:
    """Check every open pyplot figure with :func:`check_figure`, then show them (``plt.show()``).

    A chapter ends each figure cell with ``show()``: a figure that fails the check stops the chapter (nbval,
    the book's build) instead of reaching readers.
    """
    for number in plt.get_fignums():
        check_figure(plt.figure(number))
    plt.show()


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
