"""The browser check (tests/site_check.py) reports each kind of broken page a reader could meet.

These tests drive Debian's Chromium, so they carry the ``browser`` marker: ``make test`` deselects them
(pyproject addopts ``-m "not browser"``) because CI installs Chromium only after ``make test``, and
``make check-site`` runs them (``-m browser``) before checking the real book. Without /usr/bin/chromium they
fail with an install hint; they never skip.
"""

import base64
import sysconfig
from pathlib import Path

import pytest
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


SITE = {
    "good.html": page(
        '<nav><a href="target.html">contents</a></nav><article id="top">'
        '<p>Inline <span class="math notranslate nohighlight">\\(x^2 + 1\\)</span></p>'
        '<div class="math notranslate nohighlight">\\[\\sin(\\omega t)\\]</div>'
        '<img src="pixel.png" alt="pixel"> <a href="target.html#here">there</a> <a href="#top">up</a>'
        ' <a href="https://example.org/paper">a cited paper, inside the article</a></article>',
        MATHJAX_TAGS,
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
    # ... but a wide table inside a box that scrolls on its own (what the book's CSS does) does not.
    "wide_in_own_box.html": page(
        '<article><div style="overflow-x:auto"><table style="width:900px"><tr><td>wide</td></tr></table></div>'
        '<img src="pixel.png" alt="A one-pixel test image."></article>'
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
