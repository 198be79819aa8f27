"""The browser check (tests/site_check.py) reports each kind of broken page a reader could meet.

These tests drive Debian's Chromium, so they carry the ``browser`` marker: ``make test`` deselects them
(pyproject addopts ``-m "not browser"``) because CI installs Chromium only after ``make test``, and
``make check-site`` runs them (``-m browser``) before checking the real book. Without /usr/bin/chromium they
fail with an install hint; they never skip.
"""

import base64
import json
import sysconfig
from pathlib import Path

import pytest
import site_check
from site_check import CHROMIUM, PHONE_WIDTH, alt_text_problem, check_pages, check_search, format_table

pytestmark = pytest.mark.browser

# A 1x1 PNG, so that the "good" image really decodes.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
MATHJAX = Path(sysconfig.get_paths()["purelib"]) / "sphinx-mathjax-offline" / "static" / "mathjax"
MATHJAX_TAGS = (
    '<script>window.MathJax = {options: {processHtmlClass: "math"}};</script>'
    '<script defer src="mathjax/tex-chtml.js"></script>'
)


def page(body, head=""):
    return f"<!doctype html><html><head><meta charset='utf-8'><title>t</title>{head}</head><body>{body}</body></html>"


# Dark mode for a page that follows the system's colour scheme, as the book's theme does.
DARK_PAGE = "<style>@media (prefers-color-scheme: dark) { body { background: #14181e; color: #ced6dd } }</style>"
# A formula far wider than a phone: 30 terms.
LONG_TEX = " + ".join(f"a_{{{i}}}" for i in range(1, 31))
# A table with six columns of long cells: wider than a phone's column.
WIDE_TABLE = (
    "<table><caption>The rotary implementations.</caption><thead><tr>"
    + "".join(f"<th>property number {i}</th>" for i in range(6))
    + "</tr></thead><tbody>"
    + "".join(
        "<tr>" + "".join(f"<td>{'pass 1.9e-05' if i else f'library {row}: function'}</td>" for i in range(6)) + "</tr>"
        for row in range(3)
    )
    + "</tbody></table>"
)
# pydata-sphinx-theme's table style (any-screen.css): a table is a block that scrolls inside its own box.
TABLE_BOX = "<style>table { display: block; max-width: 100%; overflow-x: auto }</style>"

SITE = {
    "good.html": page(
        '<nav><a href="target.html">contents</a></nav><article id="top">'
        '<p>Inline <span class="math notranslate nohighlight">\\(x^2 + 1\\)</span></p>'
        '<div class="math notranslate nohighlight">\\[\\sin(\\omega t)\\]</div>'
        '<img src="pixel.png" alt="pixel"> <a href="target.html#here">there</a> <a href="#top">up</a>'
        ' <a href="https://example.org/paper">a cited paper, inside the article</a>'
        "<table><caption>Loss in nats</caption><thead><tr><th>scheme</th><th>loss</th></tr></thead>"
        "<tbody><tr><td>rotary</td><td>1.53</td></tr></tbody></table></article>",
        MATHJAX_TAGS + DARK_PAGE,
    ),
    "target.html": page('<article><h1 id="here">Here</h1></article>'),
    "broken_image.html": page('<article><img src="missing.png" alt="gone"></article>'),
    "broken_anchor.html": page(
        '<article><a href="target.html#nowhere">dangling</a> <a href="#absent">self</a></article>'
    ),
    "broken_link.html": page('<article><a href="no_such_page.html">dead</a></article>'),
    "remote_script.html": page("<article>text</article>", '<script src="https://cdn.example.com/lib.js"></script>'),
    "console_error.html": page("<article>text</article><script>console.error('boom from the page')</script>"),
    "page_error.html": page("<article>text</article><script>undefinedFunctionCall()</script>"),
    "math_error.html": page('<article><span class="math">\\(\\frac{1}\\)</span></article>', MATHJAX_TAGS),
    "math_untypeset.html": page('<article><span class="math">\\(x\\)</span></article>'),
    "chrome_link.html": page(
        '<header><a href="https://github.com/nobody/nothing">repository</a></header><article>x</article>'
    ),
    # Phone width: a fixed-width box, and a heading with a word too long to break, scroll the page sideways.
    "too_wide.html": page('<article><p>fits</p><div class="wide-box" style="width:700px">700 px</div></article>'),
    "long_heading.html": page(f"<article><h1 id='long'>{'Positional' * 12}</h1></article>"),
    # ... but a wide block inside a box that scrolls on its own (what the book's CSS does for code) does not.
    "wide_in_own_box.html": page(
        '<article><div style="overflow-x:auto"><div style="width:900px">wide</div></div>'
        '<img src="pixel.png" alt="A one-pixel test image."></article>'
    ),
    # A table too wide for a phone, in its own scrolling box: the page fits, but the reader sees two of its
    # six columns and no sign of the others.
    "wide_table.html": page(f"<article>{WIDE_TABLE}</article>", TABLE_BOX),
    # An inline formula wider than the line, clipped as pydata-sphinx-theme's span.math clips it
    # (inline-flex, max-width 100%, overflow hidden): the end of the formula is cut off.
    "math_cut.html": page(
        '<article><p>The sum <span class="math" style="display:inline-flex;max-width:100%;overflow:hidden">'
        f"\\({LONG_TEX}\\)</span> is long.</p></article>",
        MATHJAX_TAGS,
    ),
    # ... and the same formula as display math in a box that scrolls, which a reader can scroll: it passes.
    "math_scrolls.html": page(
        f'<article><div class="math" style="max-width:100%;overflow-x:auto">\\[{LONG_TEX}\\]</div></article>',
        MATHJAX_TAGS,
    ),
    # Contrast: a grey caption on light grey (2.5:1) in either colour scheme ...
    "contrast_light.html": page(
        '<article><table><caption style="color:#999;background:#eee">Loss in nats</caption>'
        "<tbody><tr><td>rotary</td></tr></tbody></table></article>"
    ),
    # ... a table readable in light mode whose text is dark grey on the dark page in dark mode (1.4:1) ...
    "contrast_dark.html": page(
        "<article><table><tbody><tr><td>FAIL 1.4e+00</td></tr></tbody></table></article>",
        "<style>@media (prefers-color-scheme: dark) { body { background: #14181e } td { color: #444 } }</style>",
    ),
    # ... and a page that sets its theme to light and keeps it when the system turns dark.
    "theme_stuck_light.html": page("<article><p>always light</p></article>").replace(
        "<html>", '<html data-theme="light">'
    ),
    # Images whose alt text a screen reader would read as a file name, or not at all.
    "alt_missing.html": page('<article><img src="pixel.png"></article>'),
    "alt_empty.html": page('<article><img src="pixel.png" alt=" "></article>'),
    "alt_file_name.html": page('<article><img src="pixel.png" alt="_images/3f2a9c01de4b5a6b.png"></article>'),
    # At 1280 px: a code block whose line is wider than its 300 px box scrolls sideways and fails; the same block
    # collapsed behind a toggle (what hide-input gives) is not seen and passes, and a wide output is only counted.
    # Only notebook cells (div.cell_input) are judged.
    "wide_code.html": page(
        f'<article><div class="cell_input"><div class="highlight"><pre style="width:300px;overflow-x:auto">'
        f"x = 1  # {'w' * 100}\ny = 2</pre></div></div></article>"
    ),
    "wide_code_collapsed.html": page(
        f'<article><details><summary>Show code</summary><div class="cell_input"><div class="highlight"><pre '
        f'style="width:300px;overflow-x:auto">x = 1  # {"w" * 100}</pre></div></div></details><div class="cell_input">'
        '<div class="highlight"><pre style="width:300px;overflow-x:auto">fits = True</pre></div></div>'
        '<div class="cell_output"><pre style="width:300px;overflow-x:auto">fits too</pre></div></article>'
    ),
    # ... and an output block that scrolls fails as well.
    "wide_output.html": page(
        f'<article><div class="cell_output"><pre style="width:300px;overflow-x:auto">{"9" * 100}</pre></div></article>'
    ),
    # A cell that printed a warning to stderr (myst-nb's class for a stderr stream).
    "stderr.html": page(
        '<article><div class="cell_output"><div class="output stderr"><pre>/site-packages/tqdm/auto.py:21: '
        "TqdmWarning: IProgress not found.</pre></div></div></article>"
    ),
    # An API page whose class entry rendered but whose method did not (the method's id is missing).
    "api_missing_entry.html": page('<article><dl><dt id="posenc.nn.RotaryEmbedding">class</dt></dl></article>'),
}

# page -> the ids it must hold, as site_check.reference_ids gives them for the book's API pages
REQUIRED_IDS = {
    "good.html": frozenset({"top"}),
    "api_missing_entry.html": frozenset({"posenc.nn.RotaryEmbedding", "posenc.nn.RotaryEmbedding.forward"}),
}

# page -> a phrase that must appear among its failures
EXPECTED_FAILURE = {
    "wide_table.html": "1 tables wider than their box at 390 px (columns out of sight): ",
    "math_cut.html": "1 formulas at 390 px cut off or past the screen, with no box that scrolls: inline math is cut",
    "contrast_light.html": 'texts of tables or captions under 4.5:1 contrast in light mode: caption "Loss in nats"',
    "contrast_dark.html": 'texts of tables or captions under 4.5:1 contrast in dark mode: td "FAIL 1.4e+00"',
    "theme_stuck_light.html": "the page does not follow the system's dark mode (data-theme stays 'light')",
    "broken_image.html": "local request failed: 404 /missing.png",
    "broken_anchor.html": "missing anchor #nowhere",
    "broken_link.html": "broken link",
    "remote_script.html": "request to another host: https://cdn.example.com/lib.js",
    "console_error.html": "console error: boom from the page",
    "page_error.html": "page error:",
    "math_error.html": "MathJax errors",
    "math_untypeset.html": "MathJax did not run",
    "chrome_link.html": "external link in the theme's chrome",
    "api_missing_entry.html": "no entry for posenc.nn.RotaryEmbedding.forward",
    "too_wide.html": f"at a {PHONE_WIDTH} px viewport (scrolls sideways); widest element: div.wide-box",
    "long_heading.html": "widest element: h1#long",
    "wide_code.html": "1 of 1 visible code blocks wider than their box at 1280 px (they scroll sideways): ",
    "wide_output.html": "1 visible output blocks wider than their box at 1280 px (they scroll sideways): ",
    "stderr.html": "1 cell outputs printed to stderr: /site-packages/tqdm/auto.py:21: TqdmWarning",
    "alt_missing.html": "image without a real alt text (no alt attribute)",
    "alt_empty.html": "image without a real alt text (empty alt text)",
    "alt_file_name.html": "alt text is a file name: '_images/3f2a9c01de4b5a6b.png'",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    root = tmp_path_factory.mktemp("site")
    for name, text in SITE.items():
        (root / name).write_text(text)
    (root / "pixel.png").write_bytes(PIXEL_PNG)
    (root / "favicon.ico").write_bytes(PIXEL_PNG)  # browsers take PNG data in an .ico
    (root / "mathjax").symlink_to(MATHJAX, target_is_directory=True)
    shots = root.parent / "shots"
    reports, _ = check_pages(root, list(SITE), screenshot_dir=shots, required_ids=REQUIRED_IDS)
    print(format_table(reports))
    return {report.page: report for report in reports}, shots


def test_a_clean_page_passes_with_its_math_images_and_links_counted(site):
    reports, shots = site
    good = reports["good.html"]
    assert good.ok, good.failures
    assert (good.math_elements, good.math_typeset, good.math_errors) == (2, 2, 0)
    assert (good.images, good.images_decoded) == (1, 1)
    assert good.links_checked == 3 and good.anchors_checked == 2 and good.external_links == 1
    assert good.phone_width is not None and good.phone_width <= PHONE_WIDTH and not good.images_without_alt
    assert reports["target.html"].ok
    assert (shots / "good.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (shots / f"good@{PHONE_WIDTH}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_page_too_wide_for_a_phone_reports_its_width_and_the_element(site):
    reports, _ = site
    wide = reports["too_wide.html"]
    # 700 px box plus the body's default 8 px margin on the left
    assert wide.phone_width == 708 and wide.widest_element == "div.wide-box", wide.failures
    assert [f for f in wide.failures if "px wide" in f] == [
        f"708 px wide at a {PHONE_WIDTH} px viewport (scrolls sideways); widest element: div.wide-box reaching"
        " 708 px ('700 px')"
    ]


def test_a_wide_table_in_its_own_scrolling_box_fits_a_phone(site):
    reports, _ = site
    report = reports["wide_in_own_box.html"]
    assert report.ok, report.failures
    assert report.phone_width == PHONE_WIDTH


@pytest.mark.parametrize(
    "alt", ["A heat map of the encoding: positions down, columns across.", "Loss against length (log scale)"]
)
def test_a_descriptive_alt_text_passes(alt):
    assert alt_text_problem(alt) is None


@pytest.mark.parametrize(
    "alt", [None, "", "  ", "_images/abc123.png", "../_build/jupyter_execute/x.png", "figure.svg", "3f2a9c01de4b5a6b"]
)
def test_a_missing_or_file_name_alt_text_fails(alt):
    assert alt_text_problem(alt) is not None


@pytest.mark.parametrize("name", EXPECTED_FAILURE)
def test_each_kind_of_broken_page_is_reported(site, name):
    reports, _ = site
    failures = reports[name].failures
    assert not reports[name].ok
    assert any(EXPECTED_FAILURE[name] in failure for failure in failures), failures


def test_a_broken_image_is_reported_as_undecoded(site):
    reports, _ = site
    assert any("image not decoded" in failure for failure in reports["broken_image.html"].failures)


def test_a_remote_request_is_aborted_and_counted(site):
    reports, _ = site
    assert reports["remote_script.html"].remote_requests == ["https://cdn.example.com/lib.js"]


def test_a_missing_anchor_on_the_page_itself_is_reported(site):
    reports, _ = site
    assert any("missing anchor #absent on this page" in failure for failure in reports["broken_anchor.html"].failures)


def test_previous_and_next_links_must_follow_the_given_order(tmp_path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    (tmp_path / "a.html").write_text(page('<article>A</article><a class="right-next" href="b.html">next</a>'))
    (tmp_path / "b.html").write_text(page('<article>B</article><a class="left-prev" href="c.html">prev</a>'))
    (tmp_path / "c.html").write_text(page('<article>C</article><a class="left-prev" href="b.html">prev</a>'))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    reports, _ = check_pages(tmp_path, ["a.html", "b.html", "c.html"], prev_next=True)
    assert reports[0].ok, reports[0].failures
    assert any("previous link" in failure for failure in reports[1].failures)
    assert any("next link" in failure for failure in reports[1].failures)
    assert reports[2].ok, reports[2].failures


def _check_icon_site(root, *, root_favicon, declared_icon=None):
    """Check two plain pages; the first declares ``declared_icon`` (not created) if given; ``/favicon.ico``
    exists if ``root_favicon``."""
    head = f'<link rel="icon" href="{declared_icon}">' if declared_icon else ""
    (root / "one.html").write_text(page('<article>one <a href="two.html">two</a></article>', head))
    (root / "two.html").write_text(page("<article>two</article>"))
    if root_favicon:
        (root / "favicon.ico").write_bytes(PIXEL_PNG)
    return check_pages(root, ["one.html", "two.html"])


def test_a_site_without_a_favicon_fails_on_the_request_the_browser_makes_by_itself(tmp_path):
    """No page asks for /favicon.ico, yet Chromium does, logs the 404, and the check must fail on it."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    reports, site_failures = _check_icon_site(tmp_path, root_favicon=False)
    print(format_table(reports))
    one, two = reports
    # What the browser itself did, seen by the server and in the console (Chromium asks once per site).
    assert "404 /favicon.ico" in one.failed_local_requests, one.failures
    assert any(e.startswith("Failed to load resource") and e.endswith("/favicon.ico)") for e in one.console_errors)
    # The checker's own look at each page's icon, the same on every page.
    for report in (one, two):
        assert not report.ok and not report.icon_ok
        assert any(
            "no declared icon, and the default" in f and "/favicon.ico answers 404" in f for f in report.failures
        )
    assert site_failures == ["/favicon.ico answers 404"]


def test_a_site_with_a_favicon_passes(tmp_path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    reports, site_failures = _check_icon_site(tmp_path, root_favicon=True)
    print(format_table(reports))
    assert [(r.ok, r.icon_ok, r.console_errors, r.failed_local_requests) for r in reports] == [(True, True, [], [])] * 2
    assert site_failures == []


def test_a_declared_icon_that_is_missing_fails_even_when_favicon_ico_exists(tmp_path):
    """A page that declares an icon makes the browser fetch that one, not /favicon.ico."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    reports, site_failures = _check_icon_site(tmp_path, root_favicon=True, declared_icon="_static/icon.png")
    one, two = reports
    assert "404 /_static/icon.png" in one.failed_local_requests, one.failures
    assert any("declared icon" in f and "/_static/icon.png answers 404" in f for f in one.failures)
    assert two.ok, two.failures
    assert site_failures == []


def test_an_api_page_fails_only_for_the_entry_it_lacks(site):
    reports, _ = site
    failures = [f for f in reports["api_missing_entry.html"].failures if f.startswith("no entry")]
    assert failures == [
        "no entry for posenc.nn.RotaryEmbedding.forward (no element with id 'posenc.nn.RotaryEmbedding.forward')"
    ]


# --- The search pass: a stand-in for Sphinx's search page, as it looked before and after the fix -------------


def search_page(results, inputs):
    """A search page whose result list is already complete: ``results`` are (title, excerpt or None) pairs."""
    items = "".join(
        f'<li><a href="p.html">{title}</a>' + ("" if excerpt is None else f'<p class="context">{excerpt}</p>') + "</li>"
        for title, excerpt in results
    )
    # A closed search dialog's input (display: none) is not a box the reader sees.
    dialog = '<div style="display:none"><input type="search" name="q"></div>'
    return page(
        f'{inputs}{dialog}<div id="search-results"><h2>Search Results</h2><ul class="search">{items}</ul></div>'
    )


PROSE = "extends the context by changing the wavelengths of the slow pairs and rescaling the attention logits"


def _search_site(tmp_path, results, inputs):
    (tmp_path / "search.html").write_text(search_page(results, inputs))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)  # the browser asks for it; a 404 is a console error
    return check_search(tmp_path, ("YaRN",))[0]


def test_search_results_with_dots_a_file_name_or_no_excerpt_fail_and_so_do_three_search_boxes(tmp_path):
    # Sphinx's field, and the theme's two "Search Ctrl+K" buttons drawn as boxes.
    three_boxes = '<input type="search" name="q">' + '<button class="search-button-field">Search</button>' * 2
    results = [("Rotary", "....ipynb..."), ("Bug gallery", None), ("Scaling", f"...{PROSE}...")]
    report = _search_site(tmp_path, results, three_boxes)
    assert report.visible_inputs == 3 and report.with_excerpt == 1
    assert "the search page shows 3 search boxes, not one" in report.failures
    assert any("'Rotary': excerpt is not prose" in failure for failure in report.failures)
    assert any("'Bug gallery': no excerpt" in failure for failure in report.failures)


def test_search_results_with_prose_excerpts_and_one_search_box_pass(tmp_path):
    report = _search_site(tmp_path, [("Rotary", f"...{PROSE}..."), ("Scaling", PROSE)], '<input type="search">')
    assert report.failures == [] and report.with_excerpt == 2 and report.visible_inputs == 1


def test_a_search_without_results_fails(tmp_path):
    assert _search_site(tmp_path, [], '<input type="search">').failures == ["searching for 'YaRN' listed no result"]


def test_a_wide_code_block_is_named_by_its_first_line_and_size(site):
    reports, _ = site
    (wide,) = reports["wide_code.html"].wide_code
    assert wide.endswith("px: x = 1  # " + "w" * 51), wide
    assert int(wide.split(" > ")[0]) > int(wide.split(" > ")[1].split(" px")[0])


def test_a_collapsed_wide_code_block_passes_and_a_wide_output_fails(site):
    reports, _ = site
    report = reports["wide_code_collapsed.html"]
    assert report.ok, report.failures
    assert report.wide_code == [] and report.wide_output == 0
    assert reports["wide_output.html"].wide_output == 1


# --- What a reader does: the toggles, the math and tables on a phone, contrast in light and dark mode -------


def test_the_clean_page_has_its_table_and_caption_measured_in_both_colour_schemes(site):
    reports, _ = site
    good = reports["good.html"]
    # the caption and the four cells, in light mode and in dark mode
    assert good.contrast_checked == {"light": 5, "dark": 5} and good.low_contrast == {"light": [], "dark": []}
    assert good.math_overflow == [] and good.wide_tables == []


def test_a_formula_in_a_box_that_scrolls_passes_and_a_dark_mode_fault_is_not_a_light_mode_one(site):
    reports, _ = site
    assert reports["math_scrolls.html"].ok, reports["math_scrolls.html"].failures
    dark_only = reports["contrast_dark.html"]
    assert dark_only.low_contrast["light"] == [] and len(dark_only.low_contrast["dark"]) == 1
    assert dark_only.low_contrast["dark"][0].startswith('td "FAIL 1.4e+00": 1.'), dark_only.low_contrast


REPOSITORY = Path(__file__).resolve().parent.parent


def test_a_wide_table_passes_once_the_books_script_shows_it_as_cards(tmp_path):
    """_static/narrow-tables.js and .css, as the book ships them: the same six-column table fits a phone."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    for name in ("narrow-tables.js", "narrow-tables.css"):
        (tmp_path / name).write_text((REPOSITORY / "_static" / name).read_text())
    head = TABLE_BOX + '<link rel="stylesheet" href="narrow-tables.css"><script src="narrow-tables.js"></script>'
    (tmp_path / "stacked.html").write_text(page(f'<article class="bd-article">{WIDE_TABLE}</article>', head))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    (report,), _ = check_pages(tmp_path, ["stacked.html"])
    assert report.ok and report.wide_tables == [], report.failures


# A page laid out as pydata-sphinx-theme 0.17 and sphinx-book-theme lay out the book: a sidebar of links on
# either side, shown beside the article on a wide screen and opened as a modal <dialog> by a toggle on a
# narrow one; on a wide screen ☰ collapses the left sidebar. Like the themes, the script binds each handler
# to the first button of its class in the page. With a second, hidden pair of buttons before the visible
# ones (the theme's navbar), the visible ones get no handler: the dead toggles of the book's phone pages.
TOGGLE_PAGE = """<style>
  .layout {{ display: flex }} main {{ flex: 1 }}
  .bd-sidebar-primary {{ width: 250px }} .bd-sidebar-secondary {{ width: 200px }}
  dialog {{ width: 300px }} .navbar-toggle {{ display: none }} .pst-sidebar-hidden {{ display: none }}
  @media (max-width: 991px) {{ .bd-sidebar-primary {{ display: none }} }}
  @media (max-width: 1199px) {{ .bd-sidebar-secondary {{ display: none }} }}
  @media (min-width: 1200px) {{ .secondary-toggle {{ display: none }} }}
</style>
{navbar}
<div class="layout">
  <dialog id="pst-primary-sidebar-modal"></dialog>
  <div id="pst-primary-sidebar" class="bd-sidebar-primary"><a href="target.html">Chapter 1</a></div>
  <main>
    <div><button class="primary-toggle">☰</button> <button class="secondary-toggle">Contents</button></div>
    <article id="top"><h1>A chapter</h1><p>Text.</p></article>
  </main>
  <dialog id="pst-secondary-sidebar-modal"></dialog>
  <div id="pst-secondary-sidebar" class="bd-sidebar-secondary"><a href="#top">A chapter</a></div>
</div>
<script>
  const bind = (toggle, dialog, sidebar, collapses) => toggle.addEventListener("click", () => {{
    if (collapses && matchMedia("(min-width: 992px)").matches) {{
      sidebar.classList.toggle("pst-sidebar-hidden");
      return;
    }}
    dialog.append(...sidebar.childNodes);
    dialog.showModal();
    dialog.addEventListener("close", () => sidebar.append(...dialog.childNodes), {{once: true}});
  }});
  const byId = (id) => document.getElementById(id);
  bind(document.querySelector(".primary-toggle"), byId("pst-primary-sidebar-modal"), byId("pst-primary-sidebar"), true);
  bind(document.querySelector(".secondary-toggle"), byId("pst-secondary-sidebar-modal"),
       byId("pst-secondary-sidebar"), false);
</script>"""
HIDDEN_NAVBAR = '<header><button class="primary-toggle navbar-toggle">☰</button>' + (
    '<button class="secondary-toggle navbar-toggle">Contents</button></header>'
)


@pytest.fixture(scope="module")
def toggle_reports(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    root = tmp_path_factory.mktemp("toggles")
    # the working page also has the book's drawers.js: the contents drawer closes when its entry is tapped
    (root / "drawers.js").write_text((REPOSITORY / "_static" / "drawers.js").read_text())
    (root / "working.html").write_text(page(TOGGLE_PAGE.format(navbar=""), '<script src="drawers.js"></script>'))
    (root / "dead.html").write_text(page(TOGGLE_PAGE.format(navbar=HIDDEN_NAVBAR)))
    (root / "target.html").write_text(page("<article>Chapter 1</article>"))
    (root / "favicon.ico").write_bytes(PIXEL_PNG)
    reports, _ = check_pages(root, ["working.html", "dead.html"], toggles=True)
    print(format_table(reports))
    return {report.page: report for report in reports}


def test_toggles_that_open_their_sidebars_pass(toggle_reports):
    working = toggle_reports["working.html"]
    assert working.ok, working.failures
    assert (working.sidebar_collapses, working.toggles_tapped, working.toggles_opened) == (True, 2, 2)


def test_toggles_bound_to_the_hidden_navbar_buttons_fail_on_a_phone_and_a_desktop(toggle_reports):
    dead = toggle_reports["dead.html"]
    assert (dead.sidebar_collapses, dead.toggles_tapped, dead.toggles_opened) == (False, 2, 0)
    assert dead.failures == [
        "at 1280 px, the site navigation button (☰) does not collapse the site navigation",
        f"at {PHONE_WIDTH} px, tapping the site navigation button (☰) opens nothing",
        f"at {PHONE_WIDTH} px, tapping the contents button opens nothing",
    ]


# --- Screenshots: in tiles, and never a failure of the site --------------------------------------------------


def png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_a_long_page_is_photographed_in_tiles_of_bounded_height(tmp_path):
    """A page 9,000 px tall gives three tiles (4,000 px, 4,000 px starting 100 px above the end of the first,
    and the rest), at 1280 and 390 px and in dark mode too, so that no single screenshot grows with the page
    (issue 29: chapter 10's full-page shot timed out)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    (tmp_path / "tall.html").write_text(page('<article><div style="height:9000px">tall</div></article>'))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    shots = tmp_path / "shots"
    (report,), _ = check_pages(tmp_path, ["tall.html"], screenshot_dir=shots)
    assert report.ok and report.notes == [], (report.failures, report.notes)
    for stem, width in (("tall", 1280), ("tall.dark", 1280), ("tall@390", 390), ("tall@390.dark", 390)):
        sizes = [png_size(shots / f"{stem}{part}.png") for part in ("", ".part2", ".part3")]
        assert [w for w, _ in sizes] == [width] * 3 and [h for _, h in sizes[:2]] == [4000, 4000], (stem, sizes)
        # the page (9,000 px and the body's margins) once, and the two overlaps of 100 px
        assert 9200 <= sum(h for _, h in sizes) < 9300 and not (shots / f"{stem}.part4.png").exists()


def test_a_screenshot_that_times_out_is_a_note_not_a_failure_of_the_page(tmp_path, monkeypatch):
    """How fast a machine draws a page is not a fact about the site: a tile that times out (here every tile,
    with a 1 ms limit) is reported as a note, and the page is judged on everything else."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    monkeypatch.setattr(site_check, "SCREENSHOT_TIMEOUT_MS", 1)
    (tmp_path / "plain.html").write_text(page("<article><p>A page.</p></article>"))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    (report,), _ = check_pages(tmp_path, ["plain.html"], screenshot_dir=tmp_path / "shots")
    assert report.ok, report.failures
    assert len(report.notes) == 4 and all("not taken" in note and "Timeout 1ms" in note for note in report.notes)


# --- Search excerpts without LaTeX ---------------------------------------------------------------------------


def test_a_search_excerpt_with_raw_latex_fails(tmp_path):
    latex = "the angle \\(m\\theta_i\\) of pair i grows with the position m, at a rate the base of the frequencies sets"
    report = _search_site(tmp_path, [("Rotary", latex)], '<input type="search">')
    (failure,) = report.failures
    assert failure.startswith("search for 'YaRN', result 'Rotary': excerpt shows raw LaTeX ('\\\\('): 'the angle")


def test_the_books_search_excerpts_write_formulas_as_text(tmp_path):
    """_static/search-excerpts.js, given a page whose text holds formulas as MathJax's LaTeX source, makes an
    excerpt without LaTeX."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    from playwright.sync_api import sync_playwright

    (tmp_path / "search-excerpts.js").write_text((REPOSITORY / "_static" / "search-excerpts.js").read_text())
    # Sphinx's searchtools.js defines the global Search; the script replaces its makeSearchSummary.
    (tmp_path / "search.html").write_text(
        page("", '<script>var Search = {};</script><script src="search-excerpts.js"></script>')
    )
    result = (
        '<article class="bd-article"><p>Pair <span class="math">\\(i\\)</span> turns at '
        '<span class="math">\\(\\omega_i = 10000^{-2i/d_{model}}\\)</span> radians per position, and the ratio is</p>'
        '<div class="math">\\[\\frac{0.1\\,\\mathrm{mscale} \\ln s + 1}'
        "{0.1\\,\\mathrm{mscale\\_all\\_dim} \\ln s + 1}\\]</div>"
        "</article>"
    )
    with site_check.LocalServer(tmp_path) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=site_check.CHROMIUM_ARGS)
        tab = browser.new_page()
        tab.goto(f"{server.origin}/search.html?q=radians", wait_until="load")
        excerpt = tab.evaluate("(html) => Search.makeSearchSummary(html, ['radian'], '').textContent", result)
        browser.close()
    assert excerpt == (
        "Pair i turns at ω_i = 10000^-2i/d_model radians per position, and the ratio is "
        "(0.1 mscale ln s + 1)/(0.1 mscale_all_dim ln s + 1)"
    )
    assert site_check.excerpt_problem(excerpt) is None


def test_a_glossary_entry_with_two_names_gets_its_definition_as_excerpt(tmp_path):
    """A glossary entry with two terms ("ALiBi", "T5 bias") has two <dt>s before its <dd>: the excerpt of a
    search result pointing at the first was the two names alone, "ALiBi T5 bias", too short to tell anything."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    from playwright.sync_api import sync_playwright

    (tmp_path / "search-excerpts.js").write_text((REPOSITORY / "_static" / "search-excerpts.js").read_text())
    (tmp_path / "search.html").write_text(
        page("", '<script>var Search = {};</script><script src="search-excerpts.js"></script>')
    )
    glossary = (
        '<article class="bd-article"><dl class="glossary"><dt id="term-ALiBi">ALiBi</dt><dt id="term-T5-bias">T5 '
        "bias</dt><dd><p>A number that depends on the query-key offset and is added to the attention logit.</p>"
        "</dd></dl></article>"
    )
    with site_check.LocalServer(tmp_path) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=site_check.CHROMIUM_ARGS)
        tab = browser.new_page()
        tab.goto(f"{server.origin}/search.html?q=ALiBi", wait_until="load")
        excerpt = tab.evaluate(
            "(html) => Search.makeSearchSummary(html, ['alibi'], '#term-ALiBi').textContent", glossary
        )
        browser.close()
    assert excerpt == "ALiBi A number that depends on the query-key offset and is added to the attention logit."
    assert site_check.excerpt_problem(excerpt) is None


SPHINX_STATIC = Path(sysconfig.get_paths()["purelib"]) / "sphinx" / "themes" / "basic" / "static"


def test_a_number_typed_alone_is_searched_for(tmp_path):
    """Sphinx's own query parser (searchtools.js, as the book's search page loads it) drops a term made of
    digits alone; with the book's search-excerpts.js the number is among the terms searched for."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    from playwright.sync_api import sync_playwright

    for name in ("doctools.js", "searchtools.js"):
        (tmp_path / name).write_text((SPHINX_STATIC / name).read_text())
    (tmp_path / "search-excerpts.js").write_text((REPOSITORY / "_static" / "search-excerpts.js").read_text())
    # what language_data.js, sphinx_highlight.js and documentation_options.js define for searchtools.js
    stubs = (
        "<script>var stopwords = []; var Stemmer = function () { this.stemWord = (word) => word; };"
        "var SPHINX_HIGHLIGHT_ENABLED = false; var DOCUMENTATION_OPTIONS = {};</script>"
    )
    scripts = {
        "sphinx.html": ["doctools.js", "searchtools.js"],
        "book.html": ["doctools.js", "search-excerpts.js", "searchtools.js"],  # the order of the book's pages
    }
    terms = {}
    with site_check.LocalServer(tmp_path) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=site_check.CHROMIUM_ARGS)
        for page_name, sources in scripts.items():
            tags = "".join(f'<script src="{source}"></script>' for source in sources)
            (tmp_path / page_name).write_text(page("", stubs + tags))
            tab = browser.new_page()
            tab.goto(f"{server.origin}/{page_name}", wait_until="load")
            terms[page_name] = tab.evaluate("() => [...Search._parseQuery('131072 rotary')[1]].sort()")
            tab.close()
        browser.close()
    assert terms == {"sphinx.html": ["rotary"], "book.html": ["131072", "rotary"]}


# --- The drawers, as pydata-sphinx-theme 0.17.1 and sphinx-book-theme 1.3.0 work them ------------------------
#
# Below 992 px the site navigation, and below 1200 px the page's contents, open as a modal <dialog>: the theme
# moves the sidebar's links and its classes into the dialog and moves them back when it closes (Escape is handled
# on the dialog itself). From 992 px up, ☰ toggles the class pst-sidebar-hidden on the site navigation instead,
# which hides whatever carries it from 992 px up. The book's _static/drawers.js is added, or not, by {script}.
THEME_PAGE = """<style>
  body {{ margin: 0 }} .layout {{ display: flex }} main {{ flex: 1; min-width: 0 }}
  .bd-sidebar-primary {{ width: 250px }} .bd-sidebar-secondary {{ width: 200px }}
  dialog {{ width: 300px; height: 90vh }}
  @media (min-width: 992px) {{ .pst-sidebar-hidden {{ margin-left: -250px; visibility: hidden; opacity: 0 }} }}
  @media (max-width: 991.98px) {{ #pst-primary-sidebar {{ display: none }} }}
  @media (max-width: 1199.98px) {{ #pst-secondary-sidebar {{ display: none }} }}
  @media (min-width: 1200px) {{ .secondary-toggle {{ display: none }} }}
  section {{ min-height: 1500px }}
</style>
<div class="layout">
  <dialog id="pst-primary-sidebar-modal"></dialog>
  <div id="pst-primary-sidebar" class="bd-sidebar-primary"><a href="target.html">Chapter 1</a></div>
  <main>
    <div class="bd-header-article"><button class="primary-toggle">☰</button>
      <button class="secondary-toggle">Contents</button></div>
    <article class="bd-article" id="top"><h1>A chapter</h1>
      <section id="one"><h2>One</h2><p>Text.</p></section><section id="two"><h2>Two</h2><p>Text.</p></section>
    </article>
  </main>
  <dialog id="pst-secondary-sidebar-modal"></dialog>
  <div id="pst-secondary-sidebar" class="bd-sidebar-secondary"><nav><a href="#one">One</a><br>
    <a href="#two">Two</a></nav></div>
</div>
<script>
  const move = (from, to) => {{
    Array.from(from.childNodes).forEach((node) => to.appendChild(node));
    Array.from(from.classList).forEach((cls) => {{ from.classList.remove(cls); to.classList.add(cls); }});
  }};
  const byId = (id) => document.getElementById(id);
  const primaryToggle = document.querySelector(".primary-toggle");
  primaryToggle.addEventListener("click", (event) => {{
    if (matchMedia("(min-width: 992px)").matches) {{
      event.stopImmediatePropagation();
      byId("pst-primary-sidebar").classList.toggle("pst-sidebar-hidden");
    }}
  }}, true);
  [[primaryToggle, byId("pst-primary-sidebar-modal"), byId("pst-primary-sidebar")],
   [document.querySelector(".secondary-toggle"), byId("pst-secondary-sidebar-modal"), byId("pst-secondary-sidebar")],
  ].forEach(([toggle, dialog, sidebar]) => {{
    toggle.addEventListener("click", () => {{ move(sidebar, dialog); dialog.showModal(); }});
    dialog.addEventListener("keydown", (event) => {{
      if (event.key === "Escape") {{ event.preventDefault(); dialog.close(); }}
    }});
    dialog.addEventListener("close", () => move(dialog, sidebar));
  }});
</script>
{script}"""


@pytest.fixture(scope="module")
def drawer_reports(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    root = tmp_path_factory.mktemp("drawers")
    (root / "drawers.js").write_text((REPOSITORY / "_static" / "drawers.js").read_text())
    (root / "theme.html").write_text(page(THEME_PAGE.format(script="")))
    (root / "book.html").write_text(page(THEME_PAGE.format(script='<script src="drawers.js"></script>')))
    (root / "target.html").write_text(page("<article>Chapter 1</article>"))
    (root / "favicon.ico").write_bytes(PIXEL_PNG)
    reports, _ = check_pages(root, ["theme.html", "book.html"], toggles=True)
    print(format_table(reports))
    return {report.page: report for report in reports}


def test_the_themes_drawers_stay_open_on_a_tapped_entry_and_become_invisible_and_modal(drawer_reports):
    """The two faults of the book's pages before _static/drawers.js, shown on the themes' own behaviour."""
    theme = drawer_reports["theme.html"]
    assert theme.drawer_entry_closes is False
    assert "at 390 px, tapping an entry of the contents drawer (#two) leaves the drawer open over the page" in (
        theme.failures
    )
    (fault,) = theme.drawer_faults  # the first sequence; the other two leave nothing invisible
    assert fault.startswith(
        "collapse the site navigation at 1280 px, narrow the window to 390 px, open ☰, widen it to 1280 px: an open "
        "drawer (dialog#pst-primary-sidebar-modal.bd-sidebar-primary.pst-sidebar-hidden) is invisible but modal"
    ), fault
    # the rest of the theme works: the toggles open and collapse
    assert (theme.sidebar_collapses, theme.toggles_opened, theme.toggles_tapped) == (True, 2, 2)


def test_the_books_drawers_close_on_a_tapped_entry_and_when_the_window_widens(drawer_reports):
    book = drawer_reports["book.html"]
    assert book.ok, book.failures
    assert book.drawer_entry_closes is True and book.drawer_faults == []


# --- Code that scrolls on a phone shows that it does ---------------------------------------------------------

CODE_LINE = "scores = torch.einsum('bhqd,bhkd->bhqk', rotate(q, offset), rotate(k))"  # 72 columns


def test_code_that_scrolls_on_a_phone_without_a_sign_fails_and_the_books_fading_edge_passes(tmp_path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    block = f'<div class="cell_input"><div class="highlight"><pre>{CODE_LINE}</pre></div></div>'
    box = "<style>pre { max-width: 100%; overflow-x: auto; font-size: 13px }</style>"
    (tmp_path / "plain.html").write_text(page(f'<article class="bd-article">{block}</article>', box))
    for name in ("any-screen.css", "code-scroll.js"):
        (tmp_path / name).write_text((REPOSITORY / "_static" / name).read_text())
    book = '<link rel="stylesheet" href="any-screen.css"><script src="code-scroll.js"></script>'
    (tmp_path / "book.html").write_text(page(f'<article class="bd-article">{block}</article>', box + book))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    plain, book_report = check_pages(tmp_path, ["plain.html", "book.html"])[0]
    (failure,) = [f for f in plain.failures if "show no sign" in f]
    assert failure.startswith("1 of 1 code blocks that scroll sideways at 390 px show no sign that they do: "), failure
    assert failure.endswith(f"px: {CODE_LINE[:50]}"), failure
    assert book_report.ok and book_report.silent_scrolling_code == [], book_report.failures


# --- Words of the sidebars' links stay whole ------------------------------------------------------------------

SIDEBAR_LINKS = (
    '<a href="#one">FlexAttention</a><br>'
    '<a href="#one">In a model: <code>posenc.nn.RotaryEmbedding</code></a><br>'
    '<a href="#one"><code>posenc.testing.assert_rotary_scores_depend_on_offset_only</code></a>'
)
# The contents column as the theme lays it out at 1280 px (272 px, 24 px of padding each side, the list in a flex
# row), with the list's box shrunk, as on the book's pages (96 px on one), here to 80 px: narrower than "FlexAttention".
COLUMN = (
    "<style>.bd-sidebar-secondary { width: 272px; padding: 0 24px; box-sizing: border-box; font: 15px sans-serif }"
    ".sidebar-secondary-items { display: flex } .sidebar-secondary-item { width: 80px }</style>"
    '<div class="bd-sidebar-secondary"><div class="sidebar-secondary-items"><div class="sidebar-secondary-item">'
    f"<nav>{SIDEBAR_LINKS}</nav></div></div></div><article id='one'>x</article>"
)


def test_words_broken_in_a_narrow_contents_column_fail_and_the_books_column_and_breaks_pass(tmp_path):
    """With overflow-wrap: anywhere (the book's rule before) the narrow list broke "FlexAttention" and the
    dotted names inside words; the book's CSS gives the list the column's width and breaks a word only when it
    is wider than the column, and its name-breaks.js lets a long name break after a dot or an underscore."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    anywhere = "<style>.bd-sidebar-secondary a, .bd-sidebar-secondary code { overflow-wrap: anywhere }</style>"
    (tmp_path / "anywhere.html").write_text(page(COLUMN, anywhere))
    for name in ("any-screen.css", "name-breaks.js"):
        (tmp_path / name).write_text((REPOSITORY / "_static" / name).read_text())
    book = '<link rel="stylesheet" href="any-screen.css"><script src="name-breaks.js"></script>'
    (tmp_path / "book.html").write_text(page(COLUMN, anywhere + book))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    anywhere_report, book_report = check_pages(tmp_path, ["anywhere.html", "book.html"], phone_width=None)[0]
    broken = anywhere_report.broken_words["the contents column at 1280 px"]
    assert {"FlexAttention", "posenc.testing.assert_rotary_scores_depend_on_offset_only"} <= set(broken), broken
    assert any(f.startswith("3 words broken across two lines in the contents column") for f in anywhere_report.failures)
    assert book_report.broken_words["the contents column at 1280 px"] == [], book_report.failures
    assert book_report.ok, book_report.failures


PROSE_ENTRY = (
    # 25 monospace columns: "Contextual positions (Co" (24) fits on the first line, the whole entry (27) does not
    "<style>.bd-sidebar-secondary { width: 25ch; font: 12px monospace }</style>"
    '<div class="bd-sidebar-secondary"><nav><a href="#one">Contextual positions (CoPE)</a><br>'
    '<a href="#one"><code>posenc.nn.MultiAxisRotaryEmbedding</code></a></nav></div><article id="one">x</article>'
)


def test_a_prose_word_split_at_a_break_the_script_added_fails(tmp_path):
    """name-breaks.js once split every CamelCase run, prose too: "(CoPE)" showed as "(Co" / "PE)" in the API
    page's contents at 1280 px, and the check, which reads a text node at a time, saw two whole words. A break
    added inside a word of prose now counts as a broken word; the book's script splits CamelCase in code only."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    split = '<script>document.querySelector("nav a").innerHTML = "Contextual positions (Co<wbr>PE)"</script>'
    (tmp_path / "split.html").write_text(page(PROSE_ENTRY + split))
    (tmp_path / "name-breaks.js").write_text((REPOSITORY / "_static" / "name-breaks.js").read_text())
    (tmp_path / "book.html").write_text(page(PROSE_ENTRY + '<script src="name-breaks.js"></script>'))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    split_report, book_report = check_pages(tmp_path, ["split.html", "book.html"], phone_width=None)[0]
    assert split_report.broken_words["the contents column at 1280 px"] == ["(CoPE)"], split_report.failures
    assert book_report.broken_words["the contents column at 1280 px"] == [], book_report.failures


# --- The book's name on a phone's first screen, and no fullscreen button ------------------------------------

BOOK_TITLE = "Positional Encoding, Executed"


def test_the_books_name_must_be_on_the_first_phone_screen_and_no_fullscreen_button_shown(tmp_path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    pages = {
        # the name only in a closed drawer (the theme's site navigation on a phone), and at the page's end
        "hidden.html": f"<dialog><a href='hidden.html'>{BOOK_TITLE}</a></dialog><article><h1>Rotary</h1>"
        f"<div style='height:2000px'></div><p>{BOOK_TITLE}</p></article>",
        "named.html": f"<header><a href='named.html'>{BOOK_TITLE}</a></header><article><h1>Rotary</h1></article>",
        # the name under ☰ in a header 48 px tall: it hangs over the page below (the book's first try)
        "spilled.html": "<div class='bd-header-article' style='height:48px'><button>☰</button>"
        f"<a href='spilled.html' style='display:block;padding-top:20px'>{BOOK_TITLE}</a></div><article>x</article>",
        "fullscreen.html": f"<header>{BOOK_TITLE} <button class='btn btn-fullscreen-button' "
        "onclick='toggleFullScreen()' title='Fullscreen mode'>⛶</button></header><article>x</article>",
    }
    for name, body in pages.items():
        (tmp_path / name).write_text(page(body))
    (tmp_path / "favicon.ico").write_bytes(PIXEL_PNG)
    reports = {r.page: r for r in check_pages(tmp_path, list(pages), book_title=BOOK_TITLE)[0]}
    assert reports["hidden.html"].failures == ["at 390 px, the first screen does not show the book's name"]
    assert reports["named.html"].ok and reports["named.html"].name_on_first_screen, reports["named.html"].failures
    assert reports["fullscreen.html"].failures == ["1 fullscreen buttons shown"]
    assert reports["spilled.html"].failures == [
        f"at 390 px, items of the article's header reach out of it: {BOOK_TITLE}"
    ], reports["spilled.html"].failures


# --- Search: a page about the query before a page that mentions it ------------------------------------------

# A search index as Sphinx 7.4 writes it, for six pages: the bug gallery, whose section headings hold "base" and
# "ALiBi" and whose title sorts first; the chapter titled by "base"; a page that only mentions "base" and
# "interleaved", whose title sorts before the chapter that defines "interleaved" in bold (posenc_bold,
# book/_ext/posenc_search.py) but has it in no heading; chapter 8, whose title names ALiBi; and the API page of the
# module posenc.alibi, an object of the index.
SEARCH_INDEX = {
    "docnames": ["book/api/alibi", "notebooks/01", "notebooks/07", "notebooks/08", "notebooks/10", "notebooks/12"],
    "filenames": ["alibi.rst", "01.ipynb", "07.ipynb", "08.ipynb", "10.ipynb", "12.ipynb"],
    "titles": [
        "posenc.alibi",
        "Compute the sinusoids",
        "Rotate queries and keys",
        "Bias the logits instead: Shaw, T5 and ALiBi",
        "Catch bugs",
        "Choosing the base",
    ],
    "alltitles": {
        "posenc.alibi": [[0, None]],
        "Compute the sinusoids": [[1, None]],
        "Rotate queries and keys": [[2, None]],
        "Two layouts, one rotation": [[2, "two-layouts"]],
        "Bias the logits instead: Shaw, T5 and ALiBi": [[3, None]],
        "Catch bugs": [[4, None]],
        "Family 3: ALiBi slopes for head counts that are not powers of two": [[4, "family-3"]],
        "Family 11: a base read where the config no longer keeps it": [[4, "family-11"]],
        "Choosing the base": [[5, None]],
    },
    "terms": {"base": [1, 4, 5], "interleaved": [1, 2], "alibi": [0, 3, 4]},
    "titleterms": {"base": [4, 5], "alibi": [0, 3, 4], "catch": 4, "choosing": 5, "rotate": 2, "layouts": 2},
    "objects": {"": [[0, 0, 0, "module-posenc.alibi", "posenc.alibi"]]},
    "objnames": {"0": ["py", "module", "Python module"]},
    "objtypes": {"0": "py:module"},
    "indexentries": {},
    "envversion": {},
    "posenc_bold": {"interleaved": [2]},
}


def test_the_books_scorer_ranks_a_page_about_the_query_above_pages_that_mention_it(tmp_path):
    """Sphinx's searchtools.js, as the search page loads it, with and without the book's scorer
    (book/_ext/search_scorer.js, which Sphinx puts into language_data.js, after searchtools.js): Sphinx orders
    equal scores by title, so the bug gallery comes before "Choosing the base" and "interleaved" lists chapter 1
    first, and "ALiBi" the module's API page; the book's scorer puts the titled chapter and the chapter that
    defines the word first."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (see README.md)")
    from playwright.sync_api import sync_playwright

    for name in ("doctools.js", "searchtools.js"):
        (tmp_path / name).write_text((SPHINX_STATIC / name).read_text())
    (tmp_path / "scorer.js").write_text((REPOSITORY / "book" / "_ext" / "search_scorer.js").read_text())
    stubs = (
        "<script>var stopwords = []; var Stemmer = function () { this.stemWord = (word) => word; };"
        "var SPHINX_HIGHLIGHT_ENABLED = false; var DOCUMENTATION_OPTIONS = {};</script>"
    )
    index = f"<script>Search.setIndex({json.dumps(SEARCH_INDEX)});</script>"
    scripts = {
        "sphinx.html": ["doctools.js", "searchtools.js"],
        "book.html": ["doctools.js", "searchtools.js", "scorer.js"],
    }
    order = {}
    with site_check.LocalServer(tmp_path) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=site_check.CHROMIUM_ARGS)
        for page_name, sources in scripts.items():
            tags = "".join(f'<script src="{source}"></script>' for source in sources)
            (tmp_path / page_name).write_text(page("", stubs + tags + index))
            for query in ("base", "interleaved", "ALiBi"):
                tab = browser.new_page()
                tab.goto(f"{server.origin}/{page_name}?q={query}", wait_until="load")
                order[page_name, query] = tab.evaluate(
                    """(query) => {
                      const [q, terms, excluded, highlighted, objects] = Search._parseQuery(query);
                      // the page shows the results from the end of the list (searchtools.js pops them)
                      return Search._performSearch(q, terms, excluded, highlighted, objects).reverse()
                        .map((result) => result[0] + result[2]);
                    }""",
                    query,
                )
                tab.close()
        browser.close()
    assert order["sphinx.html", "base"][0] == "notebooks/10"
    assert order["sphinx.html", "interleaved"][0] == "notebooks/01"
    assert order["sphinx.html", "ALiBi"][0] == "book/api/alibi#module-posenc.alibi"
    # the title, then the heading in the bug gallery, then the page that only mentions the word
    assert order["book.html", "base"] == ["notebooks/12", "notebooks/10", "notebooks/01"]
    assert order["book.html", "interleaved"] == ["notebooks/07", "notebooks/01"]
    # two titles hold "ALiBi": the chapter's first, then the module's page (its object result and its page
    # result), then the bug gallery's heading
    assert order["book.html", "ALiBi"][0] == "notebooks/08"
    assert order["book.html", "ALiBi"][-1] == "notebooks/10", order["book.html", "ALiBi"]
