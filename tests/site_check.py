"""Check the rendered book in a real browser, the way a reader meets it.

Serves a built HTML site on an ephemeral 127.0.0.1 port, drives Debian's headless Chromium
(``/usr/bin/chromium``) with Playwright (no downloaded browser), and visits every page the table of
contents produces, each in a fresh browser context (nothing cached, no icon remembered: a reader's first
visit). A page passes when it

* loads (HTTP 200), logs no console error and raises no page error;
* requests nothing from any host but the local server (such requests are counted, and fail: the browser's
  only proxy is a closed local port) and gets no 4xx/5xx answer from it. The server itself records every
  request the browser makes, because Playwright does not report all of them: Chromium's automatic request
  for ``/favicon.ico`` reaches the server and the console but fires no Playwright request event;
* has an icon: the ``<link rel="icon">`` it declares, or else ``/favicon.ico`` (what a browser then asks
  for), answers 200 with an image;
* has every math element typeset by MathJax (each ``.math`` element holds an ``mjx-container``, and no
  ``mjx-merror`` node exists);
* has every image decoded (``naturalWidth > 0``);
* has every internal link resolve, ``#anchor`` included;
* has no external link in the theme's chrome (outside the article), and, for a book, the
  previous/next links of the TOC order and, for a notebook, a download link to its ``.ipynb``;
* fits a phone: at a viewport :data:`PHONE_WIDTH` (390) px wide, ``document.documentElement.scrollWidth``
  is at most that width (no sideways scrolling); a page that is wider is reported with its width and the
  element that reaches furthest right (outside any box that scrolls or clips on its own);
* has no visible code cell wider than its box at the desktop width (1280 px): a notebook cell's input
  (``div.cell_input`` ``div.highlight pre``) that a reader sees, i.e. not collapsed behind a toggle, must
  have ``scrollWidth <= clientWidth``, or the reader scrolls sideways inside it to read the code; such blocks
  are counted per page (:attr:`PageReport.wide_code`) and fail, and so do the output blocks (``div.cell_output
  pre``) that scroll (``wide_output``): a printed line longer than about 80 characters;
* shows no cell output printed to stderr (myst-nb's ``div.output.stderr``): a warning from a library, with
  the build machine's paths in it, is not part of a chapter;
* gives every image in the article a real alt text: present, not blank, and not a file name or hash
  (``_images/abc123.png``, ``../_build/....png``), which a screen reader would read aloud;
* for a page of the API reference (``book/api/*.rst``), has an element whose ``id`` is each object its
  autodoc directives document (``posenc.nn.RotaryEmbedding``, ``posenc.nn.RotaryEmbedding.forward``, ...):
  an object autodoc could not render, or a method it skipped, leaves no entry.

It prints one row per page, saves a full-page screenshot of each page at 1280 px and at 390 px
(``<page>.png`` and ``<page>@390.png``, for a person to look at), and
exits non-zero if any page fails. Site-wide, ``/favicon.ico`` must answer with an image (browsers and
other clients ask for it whether or not a page declares an icon), and the site's search must list results
for a word.

The browser's requests are deliberately not intercepted (no ``route``): with interception on, Chromium
stops asking for ``/favicon.ico``, and the check would miss the 404 a reader's browser logs.

Usage (from the repository root, after ``make book``)::

    .venv/bin/python tests/site_check.py [--html _build/html] [--screenshots _build/site-check]

``make check-site`` runs it. :func:`check_pages` is the reusable core (tests/test_site_check.py feeds it a
tiny broken site to show that each kind of failure is reported).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html.parser
import http.server
import os
import re
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# Debian's Chromium; POSENC_CHROMIUM points elsewhere (e.g. /snap/bin/chromium on Ubuntu).
CHROMIUM = Path(os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parent.parent
PAGE_TIMEOUT_MS = 30_000
DESKTOP_VIEWPORT = {"width": 1280, "height": 900}
PHONE_WIDTH = 390
"""The phone pass's viewport width in CSS pixels (a common phone's, e.g. 390 x 844)."""
PHONE_VIEWPORT = {"width": PHONE_WIDTH, "height": 844}
# The checker's own requests (links, anchors, icons) carry this User-Agent, so that the server's record of
# failed requests holds only the browser's.
CHECKER_AGENT = "posenc-site-check"


@dataclass
class PageReport:
    """What one page showed the browser; ``failures`` is empty when the page passes."""

    page: str
    status: int | None = None
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    remote_requests: list[str] = field(default_factory=list)
    failed_local_requests: list[str] = field(default_factory=list)
    icon: str | None = None
    icon_ok: bool = False
    math_elements: int = 0
    math_typeset: int = 0
    math_errors: int = 0
    images: int = 0
    images_decoded: int = 0
    links_checked: int = 0
    anchors_checked: int = 0
    external_links: int = 0
    phone_width: int | None = None
    widest_element: str | None = None
    images_without_alt: list[str] = field(default_factory=list)
    wide_code: list[str] = field(default_factory=list)
    wide_output: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


class _IdCollector(html.parser.HTMLParser):
    """Collect every ``id`` (and ``<a name>``) of a document: the targets a ``#fragment`` may name."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is not None and (name == "id" or (tag == "a" and name == "name")):
                self.ids.add(value)


class _RecordingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files quietly, recording ``(path, status)`` of every request except the checker's own."""

    def log_message(self, format, *args):  # noqa: A002 - the signature is http.server's
        pass

    def log_request(self, code="-", size="-"):
        if self.headers.get("User-Agent") != CHECKER_AGENT:
            with self.server.requests_lock:
                self.server.requests.append((self.path, int(code)))


class _Server(http.server.ThreadingHTTPServer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, int]] = []
        self.requests_lock = threading.Lock()

    def handle_error(self, request, client_address):
        """A browser that drops a connection mid-response (navigating on) is not an error of the site."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class LocalServer:
    """``http.server`` on 127.0.0.1 with an ephemeral port, serving ``root`` from a background thread.

    ``new_failures()`` returns the requests answered with a status >= 400 since its previous call.
    """

    def __init__(self, root: Path):
        handler = functools.partial(_RecordingHandler, directory=str(root))
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._seen = 0

    def new_failures(self) -> list[str]:
        with self.httpd.requests_lock:
            new = self.httpd.requests[self._seen :]
            self._seen = len(self.httpd.requests)
        return [f"{status} {path}" for path, status in new if status >= 400]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@contextlib.contextmanager
def _closed_port():
    """A local TCP port that refuses connections (bound, never listening) for as long as the block runs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _console_text(message) -> str:
    """A console message, with the URL it is about when the text alone does not name it."""
    url = (message.location or {}).get("url")
    if message.text.startswith("Failed to load resource") and url:
        return f"{message.text} ({url})"
    return message.text


def _require_chromium() -> None:
    if not CHROMIUM.exists():
        raise SystemExit(
            f"site check: {CHROMIUM} not found. Install Debian's Chromium first "
            "(as root: apt-get update && apt-get install -y chromium); see README.md."
        )


def _fetch(url: str) -> tuple[int | None, str, bytes]:
    """``(status, Content-Type, body)`` of ``url`` as the checker, not the browser, gets it (status None: no answer)."""
    request = urllib.request.Request(url, headers={"User-Agent": CHECKER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), b""
    except (urllib.error.URLError, OSError):
        return None, "", b""


def _icon_problem(url: str) -> str | None:
    """``None`` if ``url`` answers 200 with a non-empty image, else what is wrong with it."""
    status, content_type, body = _fetch(url)
    if status != 200:
        return f"answers {status}"
    if not content_type.startswith("image/") or not body:
        return f"is not an image (Content-Type {content_type!r}, {len(body)} bytes)"
    return None


class _AnchorIndex:
    """Fetches local documents once and answers whether a URL (with its fragment) resolves."""

    def __init__(self, origin: str):
        self.origin = origin
        self.ids: dict[str, set[str] | None] = {}  # None: the document did not load

    def _load(self, url: str) -> set[str] | None:
        if url not in self.ids:
            status, content_type, body = _fetch(url)
            if status != 200:
                self.ids[url] = None
                return None
            collector = _IdCollector()
            if "html" in content_type:
                collector.feed(body.decode("utf-8", errors="replace"))
            self.ids[url] = collector.ids
        return self.ids[url]

    def problem(self, url: str) -> str | None:
        """``None`` if ``url`` resolves, else what is wrong with it."""
        document, _, fragment = url.partition("#")
        ids = self._load(document)
        if ids is None:
            return f"broken link {url}"
        fragment = urllib.parse.unquote(fragment)
        if fragment and fragment not in ids:
            return f"missing anchor #{fragment} in {document}"
        return None


_PAGE_FACTS_JS = """
async () => {
  for (const img of document.images) { img.loading = "eager"; }
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  let mathjax = "absent";
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
    mathjax = "done";
  }
  const math = [...document.querySelectorAll(".math")];
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  return {
    mathjax,
    math_elements: math.length,
    math_typeset: math.filter(el => el.querySelector("mjx-container")).length,
    math_containers: document.querySelectorAll("mjx-container").length,
    math_errors: document.querySelectorAll("mjx-merror").length,
    images: [...document.images].map(img => ({
      src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0,
      alt: img.getAttribute("alt"), in_article: article.contains(img)})),
    links: [...document.querySelectorAll("a[href]")].map(a => ({
      href: a.href, raw: a.getAttribute("href"), in_article: article.contains(a), classes: a.className,
    })),
    ids: [...document.querySelectorAll("[id]")].map(el => el.id),
    icons: [...document.querySelectorAll('link[rel~="icon" i]')].map(link => link.href),
    prev: (document.querySelector("a.left-prev") || {}).href || null,
    next: (document.querySelector("a.right-next") || {}).href || null,
  };
}
"""


# At the phone's width: the page's own width, and, if it is wider than the viewport, the element reaching
# furthest right. Elements inside a box that scrolls or clips (overflow-x other than visible) are not counted:
# they widen their box, not the page; nor are hidden or fixed ones (the theme's off-canvas sidebars). Ties
# go to the later element in document order, i.e. the innermost.
_PHONE_FACTS_JS = """
async () => {
  await new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const viewport = window.innerWidth;
  const width = document.documentElement.scrollWidth;
  let widest = null;
  if (width > viewport) {
    let best = -Infinity;
    const visit = (el) => {
      const style = getComputedStyle(el);
      // Hidden or fixed boxes (the theme's off-canvas sidebars) do not widen the page.
      if (style.display === "none" || style.position === "fixed") return;
      const clips = style.overflowX !== "visible";
      const rect = el.getBoundingClientRect();
      const right = window.scrollX + (clips ? rect.right : Math.max(rect.right, rect.left + el.scrollWidth));
      if (rect.width > 0 && style.visibility !== "hidden" && right >= best) {
        best = right;
        const id = el.id ? "#" + el.id : "";
        const cls = typeof el.className === "string" && el.className.trim()
          ? "." + el.className.trim().split(/\\s+/).slice(0, 2).join(".") : "";
        const text = (el.textContent || "").replace(/\\s+/g, " ").trim().slice(0, 50);
        widest = {element: el.tagName.toLowerCase() + id + cls, text, right: Math.round(right)};
      }
      if (!clips) for (const child of el.children) visit(child);
    };
    for (const child of document.body.children) visit(child);
  }
  return {viewport, width, widest};
}
"""

# At the desktop width: the code cells a reader sees (not in a collapsed <details>, not display: none) whose
# text is wider than their box, so that they scroll sideways. Input blocks are the div.highlight pre of a
# notebook cell's input (div.cell_input; code blocks of other pages, e.g. docstring examples, are not judged);
# output blocks are the pre of div.cell_output. Each wide input block is named by its first line.
_WIDE_CODE_JS = """
() => {
  const visible = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const scrolls = (el) => el.scrollWidth > el.clientWidth + 1;
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const blocks = [...article.querySelectorAll("div.highlight pre")].filter(visible);
  const inputs = blocks.filter(el => el.closest(".cell_input"));
  const outputs = [...article.querySelectorAll("div.cell_output pre")].filter(visible);
  return {
    code_blocks: inputs.length,
    wide_code: inputs.filter(scrolls).map(el =>
      `${el.scrollWidth} > ${el.clientWidth} px: ${(el.textContent || "").split("\\n")[0].trim().slice(0, 60)}`),
    wide_output: outputs.filter(scrolls).map(el =>
      `${el.scrollWidth} > ${el.clientWidth} px: ${(el.textContent || "").split("\\n")[0].trim().slice(0, 60)}`),
    stderr: [...article.querySelectorAll("div.output.stderr")].map(el =>
      (el.textContent || "").trim().split("\\n")[0].slice(0, 100)),
  };
}
"""

_FILE_NAME_ALT = re.compile(r"\S*\.(png|jpe?g|gif|svg|webp|avif)|\S*/\S*|[0-9a-f]{12,}", re.IGNORECASE)


def alt_text_problem(alt: str | None) -> str | None:
    """``None`` if ``alt`` describes an image in words, else what is wrong with it.

    Missing, blank, a file name or path (``_images/abc123.png``, ``../_build/x.png``) or a bare hash are
    problems: a screen reader reads them aloud in place of a description.
    """
    if alt is None:
        return "no alt attribute"
    if not alt.strip():
        return "empty alt text"
    if _FILE_NAME_ALT.fullmatch(alt.strip()):
        return f"alt text is a file name: {alt.strip()!r}"
    return None


REFERENCE_DIR = Path("book") / "api"
"""The API reference's pages, relative to the book's root: one reStructuredText page per module."""

_AUTODOC = re.compile(r"^\.\. (?:auto|py:)(module|function|class|data|exception)::\s*(\S+)\s*$")
_MEMBERS = re.compile(r"^\s+:members:\s*(\S.*)$")


def documented_ids(text: str) -> list[str]:
    """The HTML ids of the entries the autodoc directives in the page source ``text`` produce, in order.

    ``.. automodule:: posenc.nn`` gives ``module-posenc.nn``; ``.. autoclass:: posenc.nn.RotaryEmbedding``
    with ``:members: forward`` gives ``posenc.nn.RotaryEmbedding`` and ``posenc.nn.RotaryEmbedding.forward``.
    Names are written in full in the directives (the reference pages use no ``currentmodule``).
    """
    ids: list[str] = []
    owner = None
    for line in text.splitlines():
        directive = _AUTODOC.match(line)
        members = _MEMBERS.match(line)
        if directive:
            kind, name = directive.groups()
            ids.append(f"module-{name}" if kind == "module" else name)
            owner = name if kind == "class" else None
        elif members and owner:
            ids += [f"{owner}.{member.strip()}" for member in members.group(1).split(",")]
        elif line.strip() and not line.startswith(" "):
            owner = None
    return ids


def reference_ids(root: Path = ROOT) -> dict[str, frozenset[str]]:
    """For each page of the API reference under ``root``, the HTML page and the ids it must hold."""
    return {
        (REFERENCE_DIR / source.name).with_suffix(".html").as_posix(): frozenset(documented_ids(source.read_text()))
        for source in sorted((root / REFERENCE_DIR).glob("*.rst"))
    }


_SEARCH_FINISHED_JS = '() => (document.querySelector("#search-results h2") || {}).innerText === "Search Results"'


def check_pages(
    html_dir: Path,
    pages: list[str],
    *,
    screenshot_dir: Path | None = None,
    prev_next: bool = False,
    notebooks: frozenset[str] = frozenset(),
    search_word: str | None = None,
    required_ids: dict[str, frozenset[str]] | None = None,
    phone_width: int | None = PHONE_WIDTH,
) -> tuple[list[PageReport], list[str]]:
    """Visit ``pages`` (paths relative to ``html_dir``) in Chromium; return a report per page and site-wide failures.

    ``prev_next`` demands that page ``k`` links back to page ``k - 1`` and on to page ``k + 1`` (the theme's
    footer). ``notebooks`` are the pages that must offer their ``.ipynb`` for download. ``search_word``, if
    given, is searched for on ``search.html`` and must give at least one result. ``required_ids`` maps a
    page to the element ids it must hold (the entries of the API reference: :func:`reference_ids`).
    ``phone_width``: after the desktop pass (1280 px), each page is resized to this width and must not be
    wider than it (``None``: no phone pass).
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    _require_chromium()
    reports: list[PageReport] = []
    site_failures: list[str] = []
    with LocalServer(html_dir) as server, _closed_port() as no_proxy, sync_playwright() as playwright:
        # Every request to another host goes to a proxy that refuses connections, so it fails without leaving
        # the machine; Chromium never proxies loopback, so the local server is reached directly.
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*CHROMIUM_ARGS, f"--proxy-server=http://127.0.0.1:{no_proxy}"],
        )
        local = (server.origin + "/", "data:", "blob:")

        def first_visit(remote_requests: list[str]):
            """A page in a fresh browser context (no cache, no remembered icon), as on a reader's first visit;
            its requests to other hosts go into ``remote_requests``."""
            context = browser.new_context(viewport=DESKTOP_VIEWPORT, service_workers="block")
            context.on(
                "request",
                lambda request: None if request.url.startswith(local) else remote_requests.append(request.url),
            )
            return context.new_page()

        anchors = _AnchorIndex(server.origin)
        icon_problem = functools.cache(_icon_problem)
        root_icon = icon_problem(f"{server.origin}/favicon.ico")
        if root_icon:
            site_failures.append(f"/favicon.ico {root_icon}")
        urls = [f"{server.origin}/{page}" for page in pages]
        for index, page_path in enumerate(pages):
            report = PageReport(page_path)
            page = first_visit(report.remote_requests)
            page.on(
                "console",
                lambda msg, r=report: r.console_errors.append(_console_text(msg)) if msg.type == "error" else None,
            )
            page.on("pageerror", lambda error, r=report: r.page_errors.append(str(error)))
            _report_late_failures(reports, server.new_failures())
            try:
                response = page.goto(urls[index], wait_until="load", timeout=PAGE_TIMEOUT_MS)
                report.status = response.status if response else None
                page.wait_for_load_state("networkidle", timeout=PAGE_TIMEOUT_MS)
                facts = page.evaluate(_PAGE_FACTS_JS)
            except PlaywrightError as error:
                report.failures.append(f"page did not load: {error.message.splitlines()[0]}")
                page.context.close()
                reports.append(report)
                continue
            report.failed_local_requests = server.new_failures()
            report.icon = facts["icons"][0] if facts["icons"] else f"{server.origin}/favicon.ico"
            problem = icon_problem(report.icon)
            report.icon_ok = problem is None
            if problem:
                declared = "declared icon" if facts["icons"] else "no declared icon, and the default"
                report.failures.append(f"{declared} {report.icon} {problem}")
            _judge(report, facts, anchors, server.origin, urls[index])
            _judge_code_width(report, page.evaluate(_WIDE_CODE_JS), page.viewport_size["width"])
            if prev_next:
                expected_prev = urls[index - 1] if index > 0 else None
                expected_next = urls[index + 1] if index + 1 < len(urls) else None
                for side, found, expected in (
                    ("previous", facts["prev"], expected_prev),
                    ("next", facts["next"], expected_next),
                ):
                    if (found.split("#")[0] if found else None) != expected:
                        report.failures.append(f"{side} link is {found}, expected {expected}")
            for missing in sorted((required_ids or {}).get(page_path, frozenset()) - set(facts["ids"])):
                report.failures.append(f"no entry for {missing} (no element with id {missing!r})")
            if page_path in notebooks:
                downloads = [link["href"] for link in facts["links"] if link["href"].split("?")[0].endswith(".ipynb")]
                if not downloads:
                    report.failures.append("no download link to the notebook")
            shot_name = page_path.replace("/", "__").removesuffix(".html")
            if screenshot_dir is not None:
                screenshot_dir.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot_dir / f"{shot_name}.png"), full_page=True)
            if phone_width is not None:
                page.set_viewport_size({**PHONE_VIEWPORT, "width": phone_width})
                _judge_phone(report, page.evaluate(_PHONE_FACTS_JS))
                if screenshot_dir is not None:
                    page.screenshot(path=str(screenshot_dir / f"{shot_name}@{phone_width}.png"), full_page=True)
            page.context.close()
            reports.append(report)

        if search_word is not None:
            search_remote: list[str] = []
            page = first_visit(search_remote)
            page.on(
                "console",
                lambda msg: (
                    site_failures.append(f"search page: console error: {_console_text(msg)}")
                    if msg.type == "error"
                    else None
                ),
            )
            page.goto(f"{server.origin}/search.html?q={urllib.parse.quote(search_word)}", wait_until="load")
            try:
                # Results appear one by one; Sphinx's searchtools.js retitles the list when it has shown them all.
                page.wait_for_function(_SEARCH_FINISHED_JS, timeout=PAGE_TIMEOUT_MS)
                hits = page.locator("#search-results ul.search li").count()
            except PlaywrightError:
                hits = 0
            if hits == 0:
                site_failures.append(f"searching for {search_word!r} listed no result")
            else:
                print(f"search for {search_word!r}: {hits} results")
            if search_remote:
                site_failures.append(f"search page requested {search_remote}")
            page.context.close()
        _report_late_failures(reports, server.new_failures())
        if search_word is not None:
            site_failures += [f"search page: local request failed: {text}" for text in server.new_failures()]
        browser.close()
    return reports, site_failures


def _report_late_failures(reports: list[PageReport], late: list[str]) -> None:
    """Failed requests the server answered after the previous page was judged belong to that page."""
    if late and reports:
        reports[-1].failed_local_requests += late
        reports[-1].failures += [f"local request failed: {text}" for text in late]


def _judge_code_width(report: PageReport, facts: dict, viewport_width: int) -> None:
    """Fail a page with a visible input or output code block that scrolls sideways at the desktop width, or
    with a cell output printed to stderr (a warning a reader should not see)."""
    report.wide_code = facts["wide_code"]
    report.wide_output = len(facts["wide_output"])
    if facts["wide_output"]:
        report.failures.append(
            f"{report.wide_output} visible output blocks wider than their box at {viewport_width} px (they scroll "
            "sideways): " + "; ".join(facts["wide_output"][:3])
        )
    if facts["stderr"]:
        # a warning a cell printed (with the build machine's paths): the reader should never see one
        report.failures.append(
            f"{len(facts['stderr'])} cell outputs printed to stderr: " + "; ".join(facts["stderr"][:3])
        )
    if report.wide_code:
        report.failures.append(
            f"{len(report.wide_code)} of {facts['code_blocks']} visible code blocks wider than their box at "
            f"{viewport_width} px (they scroll sideways): " + "; ".join(report.wide_code[:3])
        )


def _judge_phone(report: PageReport, facts: dict) -> None:
    """Fail a page that is wider than the phone's viewport, naming the element that reaches furthest."""
    report.phone_width = facts["width"]
    if facts["width"] > facts["viewport"]:
        widest = facts["widest"] or {}
        report.widest_element = widest.get("element")
        report.failures.append(
            f"{facts['width']} px wide at a {facts['viewport']} px viewport (scrolls sideways); widest element: "
            f"{widest.get('element')} reaching {widest.get('right')} px ({widest.get('text', '')!r})"
        )


def _judge(report: PageReport, facts: dict, anchors: _AnchorIndex, origin: str, page_url: str) -> None:
    """Turn the facts gathered in the page into counts and failures."""
    if report.status != 200:
        report.failures.append(f"HTTP status {report.status}")
    report.failures += [f"console error: {text}" for text in report.console_errors]
    report.failures += [f"page error: {text}" for text in report.page_errors]
    report.failures += [f"request to another host: {url}" for url in report.remote_requests]
    report.failures += [f"local request failed: {text}" for text in report.failed_local_requests]

    report.math_elements, report.math_typeset = facts["math_elements"], facts["math_typeset"]
    report.math_errors = facts["math_errors"]
    if report.math_elements and facts["mathjax"] != "done":
        report.failures.append(f"{report.math_elements} math elements but MathJax did not run")
    if report.math_typeset != report.math_elements:
        report.failures.append(f"only {report.math_typeset} of {report.math_elements} math elements typeset")
    if report.math_errors:
        report.failures.append(f"{report.math_errors} MathJax errors (mjx-merror)")

    report.images = len(facts["images"])
    report.images_decoded = sum(image["ok"] for image in facts["images"])
    report.failures += [f"image not decoded: {image['src']}" for image in facts["images"] if not image["ok"]]
    for image in facts["images"]:
        problem = alt_text_problem(image["alt"]) if image["in_article"] else None
        if problem:
            report.images_without_alt.append(image["src"])
            report.failures.append(f"image without a real alt text ({problem}): {image['src']}")

    own_ids = set(facts["ids"])
    for link in facts["links"]:
        href = link["href"]
        if href.startswith(origin + "/"):
            document, _, fragment = href.partition("#")
            if document == page_url.partition("#")[0] and link["raw"].startswith("#"):
                # Same-page anchor: resolve against the live document.
                if fragment and urllib.parse.unquote(fragment) not in own_ids:
                    report.failures.append(f"missing anchor #{fragment} on this page")
            else:
                problem = anchors.problem(href)
                if problem:
                    report.failures.append(problem)
            report.links_checked += 1
            report.anchors_checked += bool(fragment)
        elif href.startswith(("http://", "https://")):
            report.external_links += 1
            if not link["in_article"]:
                report.failures.append(f"external link in the theme's chrome: {href}")
        elif not href.startswith(("mailto:", "javascript:")):
            report.failures.append(f"link with an unexpected scheme: {href}")


def toc_pages(root: Path = ROOT) -> tuple[list[str], frozenset[str]]:
    """The HTML pages of the book in reading order, and which of them are notebooks."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())

    def files(entries):
        for entry in entries:
            if "file" in entry:
                yield entry["file"]
            yield from files(entry.get("chapters", []) + entry.get("sections", []) + entry.get("parts", []))

    sources = [toc["root"], *files(toc.get("chapters", []) + toc.get("parts", []))]
    pages = [f"{source}.html" for source in sources]
    notebooks = frozenset(f"{source}.html" for source in sources if (root / f"{source}.ipynb").exists())
    return pages, notebooks


def format_table(reports: list[PageReport]) -> str:
    header = (
        "page",
        "status",
        "console",
        "remote",
        "math typeset",
        "images decoded",
        "no alt",
        "wide code (output)",
        f"{PHONE_WIDTH} px: width",
        "links (anchors)",
        "external",
        "icon",
        "result",
    )
    rows = [
        (
            r.page,
            str(r.status),
            str(len(r.console_errors) + len(r.page_errors)),
            str(len(r.remote_requests)),
            f"{r.math_typeset}/{r.math_elements}",
            f"{r.images_decoded}/{r.images}",
            str(len(r.images_without_alt)),
            f"{len(r.wide_code)} ({r.wide_output})",
            "-" if r.phone_width is None else str(r.phone_width),
            f"{r.links_checked} ({r.anchors_checked})",
            str(r.external_links),
            "ok" if r.icon_ok else "missing",
            "ok" if r.ok else "FAIL",
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


# --- Search: every result with an excerpt of the page's text, one search box ----------------------------

SEARCH_WORDS = ("YaRN", "interleaved", "rotary")
"""Words the search pass looks up: one only the later chapters use, one the early chapters use too, and one
whose stem ("rotari") occurs nowhere literally, which left Sphinx's excerpts showing the download menu ("....ipynb")."""

# Sphinx's searchtools.js appends the excerpt (``p.context``) once its fetch of the result's page returns, after
# the list is complete; the pass waits for every item to have one (or for the timeout, then reports the rest).
_SEARCH_RESULTS_JS = """() => [...document.querySelectorAll("#search-results ul.search li")].map((item) => ({
  title: (item.querySelector("a") || {}).innerText || "",
  excerpt: item.querySelector("p.context") ? item.querySelector("p.context").innerText : null,
  described: item.querySelector(":scope > span") !== null,
}))"""
_SEARCH_EXCERPTS_DONE_JS = """() => [...document.querySelectorAll("#search-results ul.search li")]
  .every((item) => item.querySelector("p.context"))"""
# The search boxes a reader sees: text fields, and the theme's "Search Ctrl+K" buttons drawn as boxes
# (.search-button-field); displayed, with a box on the screen (a closed dialog's field has none).
_VISIBLE_SEARCH_INPUTS_JS = """() => [...document.querySelectorAll(
    'input[type="search"], input[name="q"], .search-button-field')]
  .filter((input) => input.getClientRects().length > 0 && getComputedStyle(input).visibility !== "hidden")
  .length"""
# An excerpt must be words of the page: at least this many letters, and not a file name (the ".ipynb" of the
# download menu, or raw notebook JSON) or a row of dots.
_MIN_EXCERPT_LETTERS = 40
_NOT_PROSE = re.compile(r"\.ipynb|\"cell_type\"|^[.\s]*$")


@dataclass
class SearchReport:
    """What searching for ``word`` on ``search.html`` showed: the results and the page's visible search boxes."""

    word: str
    results: list[dict] = field(default_factory=list)
    visible_inputs: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def with_excerpt(self) -> int:
        return sum(excerpt_problem(result["excerpt"]) is None for result in self.results)


def excerpt_problem(excerpt: str | None) -> str | None:
    """Why ``excerpt`` (the text under a search result, ``None`` if there is none) is not an excerpt of prose."""
    if excerpt is None:
        return "no excerpt"
    text = " ".join(excerpt.split())
    if _NOT_PROSE.search(text):
        return f"excerpt is not prose: {text[:60]!r}"
    if sum(character.isalpha() for character in text) < _MIN_EXCERPT_LETTERS:
        return f"excerpt too short: {text!r}"
    return None


def judge_search(report: SearchReport) -> None:
    """Fill ``report.failures``: no result, a result without a prose excerpt, more than one search box."""
    if not report.results:
        report.failures.append(f"searching for {report.word!r} listed no result")
    for result in report.results:
        if result["excerpt"] is None and result.get("described"):
            continue  # an API object: Sphinx describes it ("Python class, in posenc.nn") instead of an excerpt
        problem = excerpt_problem(result["excerpt"])
        if problem:
            report.failures.append(f"search for {report.word!r}, result {result['title']!r}: {problem}")
    if report.visible_inputs != 1:
        report.failures.append(f"the search page shows {report.visible_inputs} search boxes, not one")


def check_search(html_dir: Path, words: tuple[str, ...] = SEARCH_WORDS) -> list[SearchReport]:
    """Search ``html_dir``'s ``search.html`` for each of ``words`` in Chromium, at 1280 px; one report per word.

    A search passes when it lists at least one result, every result shows an excerpt of its page's text
    (not a file name, raw notebook JSON or dots), and the search page shows exactly one search box (a text
    field, or the theme's search button drawn as a box).
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    _require_chromium()
    reports = []
    with LocalServer(html_dir) as server, _closed_port() as no_proxy, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*CHROMIUM_ARGS, f"--proxy-server=http://127.0.0.1:{no_proxy}"],
        )
        for word in words:
            report = SearchReport(word)
            context = browser.new_context(viewport=DESKTOP_VIEWPORT, service_workers="block")
            page = context.new_page()
            page.on(
                "console",
                lambda msg, r=report: (
                    r.failures.append(f"console error: {_console_text(msg)}") if msg.type == "error" else None
                ),
            )
            page.goto(f"{server.origin}/search.html?q={urllib.parse.quote(word)}", wait_until="load")
            try:
                page.wait_for_function(_SEARCH_FINISHED_JS, timeout=PAGE_TIMEOUT_MS)
                with contextlib.suppress(PlaywrightError):  # judged below, result by result
                    page.wait_for_function(_SEARCH_EXCERPTS_DONE_JS, timeout=10_000)
                report.results = page.evaluate(_SEARCH_RESULTS_JS)
            except PlaywrightError as error:
                report.failures.append(f"search for {word!r} did not finish: {error.message.splitlines()[0]}")
            report.visible_inputs = page.evaluate(_VISIBLE_SEARCH_INPUTS_JS)
            judge_search(report)
            context.close()
            reports.append(report)
        browser.close()
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="built site (default _build/html)")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "site-check", help="where screenshots go")
    parser.add_argument(
        "--source", type=Path, default=ROOT, help="book source holding _toc.yml (default: this repository)"
    )
    parser.add_argument("--search-word", default="positional", help="word the search page must find")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").exists():
        raise SystemExit(f"site check: {args.html}/index.html not found: build the book first (make book)")

    pages, notebooks = toc_pages(args.source)
    required_ids = reference_ids(args.source)
    reports, site_failures = check_pages(
        args.html,
        pages,
        screenshot_dir=args.screenshots,
        prev_next=True,
        notebooks=notebooks,
        search_word=args.search_word,
        required_ids=required_ids,
    )
    print(format_table(reports))
    total = (
        f"{len(reports)} pages, {sum(r.math_typeset for r in reports)}/{sum(r.math_elements for r in reports)} math "
        f"elements typeset, {sum(r.images_decoded for r in reports)}/{sum(r.images for r in reports)} images decoded, "
        f"{sum(len(r.images_without_alt) for r in reports)} images without a real alt text, "
        f"{sum((r.phone_width or 0) > PHONE_WIDTH for r in reports)} pages wider than {PHONE_WIDTH} px, "
        f"{sum(len(r.wide_code) for r in reports)} visible code blocks and {sum(r.wide_output for r in reports)} "
        f"output blocks wider than their box at {DESKTOP_VIEWPORT['width']} px, "
        f"{sum(r.links_checked for r in reports)} internal links checked ({sum(r.anchors_checked for r in reports)} "
        f"with anchors), {sum(map(len, required_ids.values()))} API reference entries required on "
        f"{len(required_ids)} pages; screenshots in {args.screenshots}"
    )
    print(total)
    failed = [r for r in reports if not r.ok]
    for report in failed:
        print(f"\nFAIL {report.page}:")
        for failure in dict.fromkeys(report.failures):
            print(f"  - {failure}")
    for search in check_search(args.html):
        print(
            f"search for {search.word!r}: {len(search.results)} results, {search.with_excerpt} with an excerpt of "
            f"the page's text; {search.visible_inputs} visible search box(es) on the search page"
        )
        site_failures += search.failures
    for failure in site_failures:
        print(f"FAIL site: {failure}")
    print(f"site check: {len(reports) - len(failed)} passed, {len(failed) + len(site_failures)} failed")
    return 1 if failed or site_failures else 0


if __name__ == "__main__":
    sys.exit(main())
