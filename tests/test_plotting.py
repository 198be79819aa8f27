"""posenc_book.plotting: figures legible on a phone and sharp on a desktop; the heat map draws a table as it is.

The legibility check (``check_figure``, run by ``show()`` in every chapter) is tested on figures built here:
one that passes in the book's style, and the kinds the chapters used to show (a 9- or 10-inch figure with
panels side by side, an 8 pt legend, a log axis's 10^4 whose exponent is 6.6 CSS px on a phone, labels in
matplotlib's orange at 2.53:1, two labels drawn over each other) which it must refuse. Every chapter's figure
goes through ``show()``.
"""

import io
import json
import re
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

import posenc
from posenc_book.plotting import (
    BOOK_COLOURS,
    BOOK_STYLE,
    DISPLAY_WIDTH_PX,
    MIN_CONTRAST,
    MIN_TEXT_PX,
    PHONE_DISPLAY_WIDTH_PX,
    check_figure,
    contrast_ratio,
    dark_mode_colour,
    drawn_text_sizes,
    drawn_texts,
    heatmap,
    plain_number,
    readable_ticks,
    show,
    shown_width_inches,
    text_heights_on_phone,
    use_book_style,
)

CHAPTERS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def png_width(figure):
    """Width in pixels of ``figure`` saved as the inline backend saves it (its dpi, trimmed to its drawing)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi, bbox_inches="tight")
    png = buffer.getvalue()
    assert png[12:16] == b"IHDR"
    return int.from_bytes(png[16:20], "big")  # the PNG header's width field


def line_figure(figsize=None, legend_size=None, dpi=None):
    """A labelled line plot in the book's style, optionally with a legend of its own font size."""
    figure = Figure(figsize=figsize, dpi=dpi)
    axes = figure.subplots()
    axes.plot([0, 1], [1, 0], label="a line")
    axes.set(xlabel="position", ylabel="value", title="A line plot")
    axes.legend(fontsize=legend_size)
    return figure


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


def test_the_width_a_figure_is_shown_at_is_the_width_of_the_png_the_backend_saves():
    """The phone sizes are computed from this width: it must be the saved image's, not ``figsize``'s.

    A legend placed below the axes and outside the figure widens the saved image beyond its figsize; the
    two widths must agree to within a pixel (rounding of the bounding box to whole pixels)."""
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        figure.axes[0].legend(["a much longer legend entry, outside"], loc="upper left", bbox_to_anchor=(0.8, -0.15))
        width = shown_width_inches(figure)
        assert width > figure.get_size_inches()[0]
        assert abs(width * figure.dpi - png_width(figure)) <= 1.0


def test_a_figure_of_the_default_size_in_the_book_style_passes_the_check():
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        check_figure(figure)
        sizes = [size for _, size in text_heights_on_phone(figure)]
    # title, two axis labels, tick labels and the legend entry, all at least MIN_TEXT_PX on the phone
    assert len(sizes) >= 5 and min(sizes) >= MIN_TEXT_PX


@pytest.mark.parametrize(
    ("figsize", "legend_size", "what"),
    [
        ((10.0, 4.0), None, "its smallest font (13 pt) needs at most 6.86 in"),
        ((7.0, 4.0), 8, "smallest first: 'a line'"),
    ],
)
def test_a_figure_with_text_too_small_on_a_phone_is_refused(figsize, legend_size, what):
    """The chapters' old figures: panels side by side in 9 to 10 inches, or 8 pt legends."""
    with mpl.rc_context():
        use_book_style()
        figure = line_figure(figsize=figsize, legend_size=legend_size)
        with pytest.raises(ValueError, match=r"figure text too small on a phone: \d+ texts under 9 CSS px") as error:
            check_figure(figure)
    assert what in str(error.value)


def test_text_between_the_former_8_5_and_9_css_px_is_refused():
    """The check used to accept 8.5 CSS px on a phone; the book now asks for 9. A legend set to show at 8.75 px
    (its size in points computed from the figure's saved width) is refused, and at 9.25 px accepted."""
    with mpl.rc_context():
        use_book_style()
        for target_px, refused in ((8.75, True), (9.25, False)):
            figure = line_figure()
            points = target_px * 72.0 * shown_width_inches(figure) / PHONE_DISPLAY_WIDTH_PX
            figure.axes[0].legend(fontsize=points)
            assert min(size for _, size in text_heights_on_phone(figure)) == pytest.approx(target_px, abs=0.05)
            if refused:
                with pytest.raises(ValueError, match=r"1 texts under 9 CSS px at 342 px, smallest first: 'a line'"):
                    check_figure(figure)
            else:
                check_figure(figure)


def test_only_the_text_a_figure_draws_is_measured():
    """Tick labels outside the axes' limits exist as Text objects but are not drawn: a tiny one there does not
    count, and the same tiny label inside the limits does. Every drawn text is listed: title, axis labels,
    the tick labels in view and the legend."""
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        axes = figure.axes[0]
        axes.set_xticks([0.0, 0.5, 1.0, 2.0])
        axes.set_xlim(0.0, 1.0)
        figure.draw_without_rendering()
        axes.get_xticklabels()[-1].set_fontsize(4)  # the label of x = 2, outside the limits
        drawn = [text for text, _ in drawn_text_sizes(figure)]
        assert "2.0" not in drawn and {"0.0", "0.5", "1.0", "position", "value", "A line plot", "a line"} <= set(drawn)
        check_figure(figure)
        axes.get_xticklabels()[1].set_fontsize(4)  # x = 0.5, in view
        with pytest.raises(ValueError, match=r"1 texts under 9 CSS px at 342 px, smallest first: '0.5'"):
            check_figure(figure)


def test_a_figure_that_would_be_blurry_on_a_2x_screen_is_refused():
    """6.4 inches at 100 dpi is a PNG of about 640 px, shown at 672: under half the pixels a 2x screen has."""
    with mpl.rc_context():
        use_book_style()
        with pytest.raises(ValueError, match=r"under twice the 672 px it is shown at"):
            check_figure(line_figure(dpi=100))


def test_show_checks_every_open_pyplot_figure_before_showing():
    with mpl.rc_context():
        use_book_style()
        figure, axes = plt.subplots(figsize=(10.0, 4.0))
        try:
            axes.plot([0, 1], label="too small on a phone")
            with pytest.raises(ValueError, match="too small on a phone"):
                show()
        finally:
            plt.close(figure)


def log_figure():
    """A log-log plot of the book's size: matplotlib labels its decades 1, 10, ... as mathtext 10^0, 10^1, ..."""
    figure = Figure()
    axes = figure.subplots()
    positions = np.logspace(0, 5, 20)
    axes.loglog(positions, 1e-8 * positions)
    axes.set(xlabel="position", ylabel="angle error (rad)", xlim=(1, 1e5))
    return figure


def test_a_log_axis_exponent_is_measured_at_the_size_it_is_drawn():
    """The 4 of 10^4 is set by mathtext at 0.7 of the 13 pt label: 9.1 pt, 6.6 CSS px on a phone. The check used
    to measure it at the label's 13 pt (9.5 px) and passed it."""
    with mpl.rc_context():
        use_book_style()
        figure = log_figure()
        sizes = dict(drawn_text_sizes(figure))
        assert sizes[r"$\mathdefault{10^{4}}$"] == pytest.approx(0.7 * 13, abs=1e-6)
        assert sizes["position"] == 13
        with pytest.raises(ValueError, match=re.escape(r"'$\\mathdefault{10^{0}}$' (6.") + r"\d px at its '0'\)"):
            check_figure(figure)


def test_a_superscript_character_is_measured_by_the_height_of_its_ink():
    """The text "10⁴" as plain text: the font size is the label's, but the ⁴ is drawn at about 0.6 of a 4's height."""
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        figure.axes[0].set_title("base 10⁴")
        (title,) = [text for text in drawn_texts(figure) if text.text == "base 10⁴"]
        assert title.glyph == "⁴" and 0.5 * 14 < title.points < 0.7 * 14, title
        with pytest.raises(ValueError, match=r"'base 10⁴' \(\d\.\d px at its '⁴'\)"):
            check_figure(figure)


@pytest.mark.parametrize(
    ("value", "label"),
    [(1.0, "1"), (10.0, "10"), (1000.0, "1000"), (1e4, "1e4"), (2.5e5, "2.5e5"), (0.01, "0.01"), (0.5, "0.5")]
    + [(1e-3, "1e-3"), (1e-8, "1e-8"), (3e-5, "3e-5")],
)
def test_plain_numbers_for_log_ticks(value, label):
    assert plain_number(value) == label


def test_log_ticks_written_plain_pass_and_show_writes_them():
    with mpl.rc_context():
        use_book_style()
        figure = log_figure()
        readable_ticks(figure)
        check_figure(figure)
        drawn = [text for text, _ in drawn_text_sizes(figure)]
        assert ["1", "10", "100", "1000", "1e4", "1e5"] == drawn[:6], drawn
        assert "1e−8" in drawn  # matplotlib's minus sign (axes.unicode_minus)
        figure, axes = plt.subplots()
        try:
            axes.semilogy([1, 2], [1e-3, 1e3])
            show()  # raises if the mathtext exponents are still there
            assert not any("mathdefault" in text for text, _ in drawn_text_sizes(figure))
        finally:
            plt.close(figure)


def test_a_base_2_axis_keeps_whole_numbers():
    with mpl.rc_context():
        use_book_style()
        figure = Figure()
        axes = figure.subplots()
        axes.plot([1024, 131072], [1, 2])
        axes.set_xscale("log", base=2)
        readable_ticks(figure)
        assert {"1024", "4096", "16384", "65536"} <= {text for text, _ in drawn_text_sizes(figure)}


def test_the_book_colours_reach_the_contrast_on_white_in_both_modes():
    white = np.ones(3)
    for colour in BOOK_COLOURS:
        rgb = np.array(mpl.colors.to_rgb(colour))
        assert contrast_ratio(rgb, white) >= MIN_CONTRAST, colour
        assert contrast_ratio(dark_mode_colour(rgb), dark_mode_colour(white)) >= MIN_CONTRAST, colour


def test_the_dark_mode_filter_matches_the_issues_measurement_of_matplotlibs_orange():
    """Issue 36 measured the start page's orange labels at 2.53:1 in light mode and 2.67:1 in dark mode (the
    theme's brightness(0.8) contrast(1.2)); the same numbers come out here, the dark one to 0.01 (2.664)."""
    orange, white = np.array(mpl.colors.to_rgb("#ff7f0e")), np.ones(3)
    assert round(float(contrast_ratio(orange, white)), 2) == 2.53
    assert float(contrast_ratio(dark_mode_colour(orange), dark_mode_colour(white))) == pytest.approx(2.67, abs=0.01)
    np.testing.assert_allclose(dark_mode_colour(white), [0.86] * 3)
    np.testing.assert_array_equal(dark_mode_colour(np.zeros(3)), np.zeros(3))


def test_a_label_in_matplotlibs_orange_is_refused_and_the_books_c1_passes():
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        figure.axes[0].text(0.5, 0.5, "k, n = 5", color="#ff7f0e")
        with pytest.raises(ValueError, match=r"1 texts under 4\.5:1 .*'k, n = 5' \(2\.5\d:1 light, 2\.6\d:1 dark\)"):
            check_figure(figure)
        figure.axes[0].texts[0].set_color("C1")
        check_figure(figure)


def test_a_grey_label_on_a_dark_box_is_refused_against_the_pixels_behind_it():
    """The background is what the figure draws behind the text: black text on a dark-grey box fails."""
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        figure.axes[0].text(0.2, 0.2, "inside a box", bbox={"facecolor": "0.25", "edgecolor": "none"})
        with pytest.raises(ValueError, match=r"'inside a box' \(2\.0\d:1 light, 1\.3\d:1 dark\)"):
            check_figure(figure)


def test_two_labels_drawn_over_each_other_or_run_together_are_refused():
    """Crossing boxes, and two labels side by side less than 0.45 em apart (the start page's "q, m = 4" and
    "k, n = 5", 0.38 em apart, read as one), are refused; a legend's rows, stacked, pass (line_figure has one)."""
    with mpl.rc_context():
        use_book_style()
        figure = line_figure()
        axes = figure.axes[0]
        axes.text(0.5, 0.5, "q, m = 4")
        axes.text(0.55, 0.52, "k, n = 5")
        with pytest.raises(ValueError, match=r"under 0\.45 em apart on a line\): 1 pairs: 'q, m = 4' and 'k, n = 5'"):
            check_figure(figure)
        end = next(t.box.x1 for t in drawn_texts(figure) if t.text == "q, m = 4")
        em = 13 * figure.dpi / 72
        for gap_em, refused in ((0.38, True), (0.6, False)):
            x, _ = axes.transData.inverted().transform((end + gap_em * em, 0))
            axes.texts[1].set_position((x, 0.5))
            if refused:
                with pytest.raises(ValueError, match=r"'q, m = 4' and 'k, n = 5'; move them apart"):
                    check_figure(figure)
            else:
                check_figure(figure)


def figure_cells(path, with_tags=False):
    """``(id, source)`` (and its tags, if ``with_tags``) of every code cell of a chapter that carries a figure's
    caption or alt text."""
    cells = json.loads(path.read_text())["cells"]
    return [
        (cell["id"], "".join(cell["source"]), *([cell["metadata"].get("tags", [])] if with_tags else []))
        for cell in cells
        if cell["cell_type"] == "code" and "image" in cell["metadata"].get("mystnb", {})
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda path: path.name)
def test_every_figure_of_a_chapter_is_checked_before_it_is_shown(path):
    """A figure cell ends with ``show()`` (the check), never ``plt.show()``, which would skip it."""
    cells = figure_cells(path)
    unchecked = [cell_id for cell_id, source in cells if not source.rstrip().endswith("\nshow()")]
    assert unchecked == [], f"{path.name}: figure cells that do not end with show(): {unchecked}"
    sources = "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"])
    assert "plt.show()" not in sources, f"{path.name} calls plt.show(), which skips the legibility check"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda path: path.name)
def test_the_drawing_code_of_every_figure_is_collapsed_and_the_figure_shown(path):
    """Drawing is not what the chapters teach: a figure cell's code sits behind a toggle (``hide-input``), and
    nothing hides its output (``remove-output``, ``remove-cell``, ``hide-output``, ``hide-cell``)."""
    hiding_the_figure = {"remove-output", "remove-cell", "hide-output", "hide-cell"}
    wrong = [
        (cell_id, tags)
        for cell_id, _, tags in figure_cells(path, with_tags=True)
        if "hide-input" not in tags or hiding_the_figure & set(tags)
    ]
    assert wrong == [], f"{path.name}: figure cells whose code shows, or whose figure hides: {wrong}"


def test_the_chapters_have_figures():
    assert sum(len(figure_cells(path)) for path in CHAPTERS) >= 20


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
