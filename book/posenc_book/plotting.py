"""The book's one matplotlib style, the check every figure passes before it is shown, and recurring figures.

A chapter draws with pyplot and ends a figure cell with :func:`show` (not ``plt.show()``): it writes the tick
labels of log axes as plain text (:func:`readable_ticks`), then refuses a figure whose text would be too small
to read on a phone, too faint against what is behind it, or drawn over another text, and a figure whose PNG
would be blurry on a desktop's 2x screen (:func:`check_figure`).

The legibility rule. The theme shows a figure at the width of its column: :data:`DISPLAY_WIDTH_PX` (672) CSS
pixels on a desktop, :data:`PHONE_DISPLAY_WIDTH_PX` (342) on a 390 px phone. A font of ``s`` points in a
figure ``w`` inches wide (as saved: trimmed to its drawing, plus the padding) is then ``s / 72 * 342 / w``
CSS pixels on the phone, the unit of a CSS ``font-size``, and every glyph must reach :data:`MIN_TEXT_PX` (9).
The sizes are the ones the figure really draws, glyph by glyph (:func:`drawn_texts`): the figure is drawn
once, each text the renderer is asked to draw is recorded (tick labels outside the axes' limits are not
drawn, and not counted), and a mathematical label is laid out by matplotlib's mathtext, whose sub- and
superscripts are set at 0.7 of the label's size (the 4 of a log axis's :math:`10^4`: 13 pt becomes 9.1 pt,
6.6 CSS px on the phone). A superscript or subscript character (``⁴``, ``₂``) is measured by the height of
its ink against that of the character it stands for. At the book's 13 pt a figure may be up to 6.86 inches
wide as saved (a 7-inch ``figsize`` trimmed to its drawing); wider multi-panel figures stack their panels
instead. (342 px is what Chromium shows at a 390 px viewport; a desktop shows the same figure at 672 px,
where 9 px becomes 17.7 px, about the size of the body text.)

The contrast rule. Every text has a contrast of at least :data:`MIN_CONTRAST` (4.5:1, WCAG AA) with the
pixels drawn behind it, in light mode and in dark mode, where the theme dims figures with the CSS filter
``brightness(0.8) contrast(1.2)`` (:func:`dark_mode_colour`). The book's colour cycle
(:data:`BOOK_COLOURS`) meets it on white in both modes; matplotlib's orange (2.53:1 on white) does not.

No two texts may overlap, and two texts side by side on a line are at least 0.45 em apart (:data:`MIN_GAP_EM`),
about a word space and a half: the start page's "q, m = 4" and "k, n = 5", 0.38 em apart, read as one label.
Texts stacked one above the other (a legend's rows) may touch.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont, get_font
from matplotlib.mathtext import MathTextParser
from matplotlib.text import Text
from matplotlib.ticker import LogFormatter, LogFormatterMathtext
from matplotlib.transforms import Bbox

__all__ = [
    "BOOK_COLOURS",
    "BOOK_STYLE",
    "DISPLAY_WIDTH_PX",
    "MIN_CONTRAST",
    "MIN_GAP_EM",
    "MIN_TEXT_PX",
    "PHONE_DISPLAY_WIDTH_PX",
    "DrawnText",
    "PlainLogFormatter",
    "check_figure",
    "contrast_ratio",
    "dark_mode_colour",
    "drawn_text_sizes",
    "drawn_texts",
    "heatmap",
    "readable_ticks",
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
"""Smallest font size, in CSS pixels (a CSS ``font-size``), that a figure's glyph may have on that phone."""

MIN_CONTRAST = 4.5
"""Smallest contrast ratio (WCAG 2, level AA) of a figure's text with what is drawn behind it, in either mode."""

BOOK_COLOURS = (
    "#1f77b4",
    "#c05600",
    "#2a7f2a",
    "#d62728",
    "#8a5cb8",
    "#8c564b",
    "#c03a8f",
    "#707070",
    "#767600",
    "#117a8b",
)
"""The colour cycle (``C0`` to ``C9``): matplotlib's ten hues, those under 4.5:1 on white darkened until they
reach it, also under the dark mode's filter (blue, red and brown are matplotlib's own)."""

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
    "axes.prop_cycle": cycler(color=list(BOOK_COLOURS)),
    "image.cmap": "copper",
    "svg.hashsalt": "posenc",
}
"""rcParams every chapter uses: set once by :func:`use_book_style`."""


def use_book_style() -> None:
    """Apply :data:`BOOK_STYLE` to matplotlib's global rcParams."""
    mpl.rcParams.update(BOOK_STYLE)


class PlainLogFormatter(LogFormatter):
    """Tick labels of a log axis as plain text: ``0.01``, ``1``, ``1000``, ``1e4``, ``2e-5``.

    matplotlib writes a decade as :math:`10^4` with mathtext, whose exponent is set at 0.7 of the label's size:
    6.6 CSS px on a phone, under :data:`MIN_TEXT_PX`. Here a value from 0.01 to 9999 is written as a number, a
    whole number in full, and any other as a number with an ``e`` exponent, as Python prints it (``1e4``,
    without the ``+`` and the leading zero); on a base-2 axis every whole number is written in full (``65536``).
    Which ticks get a label is :class:`matplotlib.ticker.LogFormatter`'s choice, as before.
    """

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return plain_number(x, whole=self._base == 2)


def plain_number(x: float, *, whole: bool = False) -> str:
    """``x`` as a short plain label: a number from 0.01 to 9999 as it is, any other as ``1e4`` or ``2.5e-5``
    (``whole``: a whole number in full whatever its size)."""
    if x == int(x) and (whole or abs(x) < 1e4):
        return f"{int(x)}"
    if 1e-2 <= abs(x) < 1e4:
        return f"{x:.3g}"
    mantissa, _, exponent = f"{x:.2e}".partition("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def readable_ticks(figure: Figure) -> None:
    """Write the tick labels of every log axis of ``figure`` (colour bars included) with
    :class:`PlainLogFormatter` instead of matplotlib's mathtext :math:`10^4`; other formatters are left alone.

    Parameters
    ----------
    figure : matplotlib Figure
    """
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            for formatter, setter in (
                (axis.get_major_formatter(), axis.set_major_formatter),
                (axis.get_minor_formatter(), axis.set_minor_formatter),
            ):
                if isinstance(formatter, LogFormatterMathtext):
                    setter(
                        PlainLogFormatter(
                            base=formatter._base,
                            labelOnlyBase=formatter.labelOnlyBase,
                            minor_thresholds=formatter.minor_thresholds,
                            linthresh=formatter._linthresh,
                        )
                    )


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


@dataclass(frozen=True)
class DrawnText:
    """One text as a figure draws it.

    ``text`` is the string handed to the renderer (a mathematical one with its ``$``), ``points`` the font
    size of its smallest glyph in points and ``glyph`` that glyph, ``colour`` its RGBA colour, ``box`` its
    layout box in the figure's pixels (``None`` for a text without a ``Text`` artist), ``artist`` the artist,
    ``font_points`` the text's own font size.
    """

    text: str
    points: float
    glyph: str
    colour: tuple[float, float, float, float]
    box: Bbox | None
    artist: Text | None
    font_points: float = 0.0


_MATHTEXT = MathTextParser("path")
_SCRIPT_FORMS = ("<super>", "<sub>")


def _script_scale(character: str, prop: FontProperties) -> float:
    """How much smaller than its font size a superscript or subscript character (``⁴``, ``₂``) is drawn: the
    height of its ink over that of the character it stands for (``4``), in the text's font; 1 for any other."""
    if not unicodedata.decomposition(character).startswith(_SCRIPT_FORMS):
        return 1.0
    base = unicodedata.normalize("NFKC", character)
    font = get_font(findfont(prop))
    font.set_size(100.0, 72)
    heights = [font.load_char(ord(glyph)).height or 1 for glyph in (character, base)]
    return heights[0] / heights[1]


def _glyph_sizes(text: str, prop: FontProperties, ismath: bool | str) -> list[tuple[str, float]]:
    """``(glyph, points)`` for every glyph of ``text`` as drawn: mathtext's own sizes for a mathematical text."""
    if ismath is True:
        laid_out = _MATHTEXT.parse(text, 72, prop)
        glyphs = [(chr(glyph[2]), float(glyph[1])) for glyph in laid_out.glyphs]  # (font, size, code, x, ...)
    else:
        glyphs = [(character, float(prop.get_size_in_points())) for character in text if not character.isspace()]
    return [(glyph, size * _script_scale(glyph, prop)) for glyph, size in glyphs]


def _draw(figure: Figure) -> tuple[list[DrawnText], np.ndarray, RendererAgg]:
    """Draw ``figure`` on an Agg renderer that draws everything but text and records each text instead."""
    width, height = figure.get_size_inches() * figure.dpi
    renderer = RendererAgg(max(int(width), 1), max(int(height), 1), figure.dpi)
    recorded: list[tuple[str, FontProperties, bool | str, tuple[float, ...], Text | None]] = []

    def record(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            recorded.append((s, prop.copy(), ismath, tuple(gc.get_rgb()), mtext))

    renderer.draw_text = record  # type: ignore[method-assign]
    figure.draw(renderer)
    background = np.asarray(renderer.buffer_rgba(), dtype=float) / 255.0
    texts = []
    for s, prop, ismath, colour, mtext in recorded:
        glyph, points = min(_glyph_sizes(s, prop, ismath), key=lambda pair: pair[1], default=(s, 0.0))
        box = Text.get_window_extent(mtext, renderer) if isinstance(mtext, Text) else None
        rgba = (*colour[:3], colour[3] if len(colour) > 3 else 1.0)
        texts.append(DrawnText(s, points, glyph, rgba, box, mtext, float(prop.get_size_in_points())))
    return texts, background, renderer


def drawn_texts(figure: Figure) -> list[DrawnText]:
    """Every non-blank text ``figure`` draws, as drawn.

    The figure is drawn once on an Agg renderer that records each call to ``draw_text``: what matplotlib
    really draws (titles, labels, the tick labels inside the axes' limits, legend entries, annotations,
    colour-bar ticks), not every ``Text`` the figure holds. Each text's size is that of its smallest glyph:
    mathtext lays out a mathematical text and gives each glyph its size (a superscript's is 0.7 of the
    label's), and a superscript or subscript character counts at the height of its ink.

    Parameters
    ----------
    figure : matplotlib Figure

    Returns
    -------
    texts : list of DrawnText
        In drawing order.
    """
    return _draw(figure)[0]


def drawn_text_sizes(figure: Figure) -> list[tuple[str, float]]:
    """``(text, points)`` for each non-blank text ``figure`` draws: the size of its smallest glyph, in points.

    Parameters
    ----------
    figure : matplotlib Figure

    Returns
    -------
    sizes : list of (str, float)
        In drawing order (see :func:`drawn_texts`).
    """
    return [(text.text, text.points) for text in drawn_texts(figure)]


def text_heights_on_phone(
    figure: Figure, *, display_width_px: float = PHONE_DISPLAY_WIDTH_PX
) -> list[tuple[str, float]]:
    """Every text ``figure`` draws, with the font size of its smallest glyph on a phone, in CSS pixels.

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


def _luminance(rgb: np.ndarray) -> np.ndarray:
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(foreground: np.ndarray, background: np.ndarray) -> np.ndarray:
    """WCAG 2 contrast ratio of opaque sRGB colours (``(..., 3)`` arrays of values in [0, 1]), element-wise.

    Parameters
    ----------
    foreground, background : (..., 3) ndarray

    Returns
    -------
    ratio : (...) ndarray
        From 1 to 21.
    """
    lighter = np.maximum(_luminance(foreground), _luminance(background))
    darker = np.minimum(_luminance(foreground), _luminance(background))
    return (lighter + 0.05) / (darker + 0.05)


def dark_mode_colour(rgb: np.ndarray) -> np.ndarray:
    """An sRGB colour (``(..., 3)``, values in [0, 1]) as a figure shows it in the book's dark mode: through
    pydata-sphinx-theme's image filter ``brightness(0.8) contrast(1.2)``, clipped to [0, 1]."""
    return np.clip((np.asarray(rgb) * 0.8 - 0.5) * 1.2 + 0.5, 0.0, 1.0)


def _contrasts(text: DrawnText, background: np.ndarray) -> tuple[float, float]:
    """Median contrast of ``text``'s colour against the pixels drawn behind it, in light and in dark mode."""
    assert text.box is not None
    height = background.shape[0]
    x0, x1 = (int(np.clip(v, 0, background.shape[1])) for v in (math.floor(text.box.x0), math.ceil(text.box.x1)))
    y0, y1 = (int(np.clip(height - v, 0, height)) for v in (math.ceil(text.box.y1), math.floor(text.box.y0)))
    pixels = background[y0:y1, x0:x1].reshape(-1, 4)
    if pixels.size == 0:
        return math.inf, math.inf
    # the PNG is shown on white in both modes (the theme's panel behind figures)
    behind = pixels[:, :3] * pixels[:, 3:] + (1.0 - pixels[:, 3:])
    alpha = text.colour[3]
    ink = alpha * np.asarray(text.colour[:3]) + (1.0 - alpha) * behind
    light = float(np.median(contrast_ratio(ink, behind)))
    dark = float(np.median(contrast_ratio(dark_mode_colour(ink), dark_mode_colour(behind))))
    return light, dark


def _rotation(text: DrawnText) -> float:
    return float(text.artist.get_rotation()) % 180.0 if text.artist is not None else 0.0


MIN_GAP_EM = 0.45
"""Two texts side by side on a line are at least this many ems apart (of the smaller font): closer, they read as one
("q, m = 4k, n = 5")."""


def _overlapping(texts: list[DrawnText], dpi: float) -> list[tuple[str, str]]:
    """Pairs of texts drawn over each other, or side by side on a line less than :data:`MIN_GAP_EM` apart.

    Two layout boxes side by side share more than a sliver (1/8 of the smaller one's height) of their height;
    texts stacked one above the other (a legend's rows) may touch, and so may two texts turned differently (an
    axis label and its tick labels), which must not cross by more than a sliver.
    """
    boxed = [text for text in texts if text.box is not None]
    pairs = []
    for i, first in enumerate(boxed):
        for second in boxed[i + 1 :]:
            if first.artist is second.artist:
                continue
            a, b = first.box, second.box
            assert a is not None and b is not None
            em = min(first.font_points, second.font_points) * dpi / 72.0
            shared_height = min(a.y1, b.y1) - max(a.y0, b.y0)
            gap_across = max(a.x0, b.x0) - min(a.x1, b.x1)  # negative when they overlap across
            sliver = min(a.height, b.height) / 8.0
            # a gap is asked for between texts that read along one line; an axis label turned by 90 degrees beside
            # its tick labels may sit closer (matplotlib's labelpad is 4 pt), but not over them
            along = _rotation(first) == _rotation(second)
            if shared_height > sliver and gap_across < (MIN_GAP_EM * em if along else -sliver):
                pairs.append((first.text, second.text))
    return pairs


def check_figure(figure: Figure, *, min_text_px: float = MIN_TEXT_PX, min_contrast: float = MIN_CONTRAST) -> None:
    """Raise if ``figure`` would be illegible on a phone or in either colour mode, or blurry on a 2x screen.

    Parameters
    ----------
    figure : matplotlib Figure
        Drawn at its own ``dpi``, as the inline backend draws it.
    min_text_px : float, default :data:`MIN_TEXT_PX`
        Smallest glyph size allowed on a phone, in CSS pixels (see :func:`text_heights_on_phone`).
    min_contrast : float, default :data:`MIN_CONTRAST`
        Smallest contrast of a text with the pixels behind it (their median), in light and in dark mode.

    Raises
    ------
    ValueError
        Naming each fault: texts smaller than ``min_text_px`` at :data:`PHONE_DISPLAY_WIDTH_PX` (with the
        glyph that is, the figure's width and the largest width its smallest font allows), texts under
        ``min_contrast`` in either mode, texts that overlap or run together, or a PNG narrower than twice
        :data:`DISPLAY_WIDTH_PX` pixels.
    """
    width = shown_width_inches(figure)
    pixels_per_point = PHONE_DISPLAY_WIDTH_PX / width / 72.0
    texts, background, _ = _draw(figure)
    faults = []
    small = sorted((text for text in texts if text.points * pixels_per_point < min_text_px), key=lambda t: t.points)
    if small:
        smallest = small[0].points
        widest = smallest / 72.0 * PHONE_DISPLAY_WIDTH_PX / min_text_px
        shown = ", ".join(
            f"{t.text!r} ({t.points * pixels_per_point:.1f} px"
            + ("" if t.glyph == t.text else f" at its {t.glyph!r}")
            + ")"
            for t in small[:5]
        )
        faults.append(
            f"figure text too small on a phone: {len(small)} texts under {min_text_px:g} CSS px at "
            f"{PHONE_DISPLAY_WIDTH_PX} px, smallest first: {shown}; the figure is {width:.2f} in wide as saved, "
            f"its smallest font ({smallest:g} pt) needs at most {widest:.2f} in: enlarge the font, narrow the "
            "figure, or stack its panels"
        )
    faint = []
    for text in texts:
        if text.box is None:
            continue
        light, dark = _contrasts(text, background)
        if min(light, dark) < min_contrast:
            faint.append(f"{text.text!r} ({light:.2f}:1 light, {dark:.2f}:1 dark)")
    if faint:
        faults.append(
            f"figure text too faint: {len(faint)} texts under {min_contrast:g}:1 against what is drawn behind "
            f"them: {', '.join(faint[:5])}; use a darker colour (BOOK_COLOURS, C0 to C9, pass)"
        )
    overlaps = _overlapping(texts, float(figure.dpi))
    if overlaps:
        faults.append(
            f"figure texts overlap or run together (under {MIN_GAP_EM:g} em apart on a line): {len(overlaps)} pairs: "
            + ", ".join(f"{a!r} and {b!r}" for a, b in overlaps[:5])
            + "; move them apart"
        )
    pixels = width * float(figure.dpi)
    if pixels < 2 * DISPLAY_WIDTH_PX:
        faults.append(
            f"figure would be a PNG {pixels:.0f} px wide, under twice the {DISPLAY_WIDTH_PX} px it is shown at "
            f"(blurry on a 2x screen): raise its dpi ({figure.dpi:g}) to at least {2 * DISPLAY_WIDTH_PX / width:.0f}"
        )
    if faults:
        raise ValueError("; ".join(faults))


def show() -> None:
    """Write every open pyplot figure's log ticks as plain text (:func:`readable_ticks`), check each figure with
    :func:`check_figure`, then show them (``plt.show()``).

    A chapter ends each figure cell with ``show()``: a figure that fails the check stops the chapter (nbval,
    the book's build) instead of reaching readers.
    """
    for number in plt.get_fignums():
        figure = plt.figure(number)
        readable_ticks(figure)
        check_figure(figure)
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
