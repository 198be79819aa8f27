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
* has no visible code block wider than its box at the desktop width (1280 px): a notebook cell's input
  (``div.cell_input`` ``div.highlight pre``) or an example on a page of the API reference (``book/api/``) that
  a reader sees, i.e. not collapsed behind a toggle, must
  have ``scrollWidth <= clientWidth``, or the reader scrolls sideways inside it to read the code; such blocks
  are counted per page (:attr:`PageReport.wide_code`) and fail, and so do the output blocks (``div.cell_output
  pre``) that scroll (``wide_output``): a printed line longer than about 80 characters;
* shows no cell output printed to stderr (myst-nb's ``div.output.stderr``): a warning from a library, with
  the build machine's paths in it, is not part of a chapter;
* gives every image in the article a real alt text: present, not blank, and not a file name or hash
  (``_images/abc123.png``, ``../_build/....png``), which a screen reader would read aloud;
* for a page of the API reference (``book/api/*.rst``), has an element whose ``id`` is each object its
  autodoc directives document (``posenc.nn.RotaryEmbedding``, ``posenc.nn.RotaryEmbedding.forward``, ...):
  an object autodoc could not render, or a method it skipped, leaves no entry;
* works when a reader taps it (``toggles``, as ``make check-site`` runs it): at 1280 px a click on the site
  navigation button (☰) collapses the sidebar and a second brings it back; at 390 px a tap on ☰, and on
  the contents button where the page has contents, opens its sidebar (a modal dialog with links on the
  screen). pydata-sphinx-theme 0.17 bound both to hidden copies of the buttons, and nothing opened;
* has drawers that behave (``toggles``): at 390 px, tapping an entry of the contents drawer closes the drawer
  and goes to the entry's section; after each step of :data:`DRAWER_SEQUENCES` (collapse the site navigation at
  1280 px, narrow the window, open ☰, widen it; and others), no open modal drawer is invisible;
* breaks no word of the sidebars' links across two lines (at 1280 px, and in the drawers at 390 px: a break
  after a hyphen, or at a ``<wbr>``, is a line break, not a broken word), and shows no fullscreen button;
* at 390 px, shows the book's name on the first screen (``book_title``), no item of the article's header
  reaching out of it, and every code block that scrolls sideways shows that it does (a mask that fades the
  edge, or a shadow drawn as a gradient);
* at 390 px, shows every formula whole or in a box of its own that scrolls (a formula that a clipping box
  cuts off, or that reaches past the screen, fails), and no table of the article wider than its box;
* in light mode, and then in the dark mode the page must follow when the system turns dark, has every text
  of a table or a caption at a contrast of at least :data:`MIN_CONTRAST` (4.5:1) with what is behind it.

It prints one row per page, saves screenshots of each page at 1280 px and at 390 px, in light and dark mode
(``<page>.png``, ``<page>@390.png``, ``<page>.dark.png``, ``<page>@390.dark.png``, for a person to look at),
each in tiles of at most :data:`SCREENSHOT_TILE_PX` (the rest in ``<page>.part2.png`` and on; a tile that
times out is printed as a note, not a failure), and exits non-zero if any page fails. Site-wide,
``/favicon.ico`` must answer with an image (browsers and other clients ask for it whether or not a page
declares an icon), and the site's search must list results for a word, each with an excerpt of prose (no
file name, no raw LaTeX), and list first, for each query of :data:`SEARCH_RANKING`, the page that is about it.

``--phone-screens JSON`` only measures, for every chapter on a 390 x 844 touch phone, its length and how far
down its first figure starts and ends, in screens, and how much of its visible code is cut at the right
(:func:`measure_phone_screens`).

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
import glob
import html.parser
import http.server
import json
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
    toggles_tapped: int = 0
    toggles_opened: int = 0
    sidebar_collapses: bool | None = None
    math_overflow: list[str] = field(default_factory=list)
    wide_tables: list[str] = field(default_factory=list)
    silent_scrolling_code: list[str] = field(default_factory=list)
    drawer_entry_closes: bool | None = None
    drawer_faults: list[str] = field(default_factory=list)
    broken_words: dict[str, list[str]] = field(default_factory=dict)
    name_on_first_screen: bool | None = None
    fullscreen_buttons: int = 0
    contrast_checked: dict[str, int] = field(default_factory=dict)
    low_contrast: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
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

# At the desktop width: the code blocks a reader sees (not in a collapsed <details>, not display: none) whose
# text is wider than their box, so that they scroll sideways. Input blocks are the div.highlight pre of a
# notebook cell's input (div.cell_input) and, on a page of the API reference (book/api/), every div.highlight pre
# (the docstrings' examples); output blocks are the pre of div.cell_output. Each wide input block is named by
# its first line. (Code blocks of the other pages, such as reproducing.md's, are not judged.)
_WIDE_CODE_JS = """
() => {
  const visible = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const scrolls = (el) => el.scrollWidth > el.clientWidth + 1;
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const blocks = [...article.querySelectorAll("div.highlight pre")].filter(visible);
  // the API reference's pages: every code block (the docstrings' examples); other pages: a notebook cell's input
  const api = /\\/book\\/api\\//.test(window.location.pathname);
  const inputs = blocks.filter(el => el.closest(".cell_input") || (api && !el.closest(".cell_output")));
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

# --- What a reader does on a page: tap the toggles, read the math, the tables and the captions ---------------

# The sidebars each toggle opens: the theme's modal dialog (a phone) and the sidebar itself (a desktop).
TOGGLES = {
    "primary": {
        "button": ".primary-toggle",
        "name": "the site navigation button (☰)",
        "opens": "#pst-primary-sidebar-modal, .bd-sidebar-primary",
        "drawer": "#pst-primary-sidebar-modal",
    },
    "secondary": {
        "button": ".secondary-toggle",
        "name": "the contents button",
        "opens": "#pst-secondary-sidebar-modal, .bd-sidebar-secondary",
        "drawer": "#pst-secondary-sidebar-modal",
    },
}
"""The two toggles of pydata-sphinx-theme's layout, and what each must open: CSS selectors."""
TOGGLE_WAIT_MS = 2_000
"""How long a toggle gets to open or close its sidebar (the theme's transitions take 0.25 s)."""

# The visible buttons matching a selector, marked with data-site-check-target so that Playwright can click the
# first one with a real mouse event (which fails if something covers it).
_MARK_VISIBLE_JS = """
(selector) => {
  document.querySelectorAll("[data-site-check-target]").forEach((el) => el.removeAttribute("data-site-check-target"));
  const visible = [...document.querySelectorAll(selector)].filter((el) => {
    const rect = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return rect.width > 0 && rect.height > 0 && style.visibility !== "hidden" && rect.right > 0 && rect.bottom > 0
      && rect.left < window.innerWidth && rect.top < window.innerHeight;
  });
  if (visible.length) visible[0].setAttribute("data-site-check-target", "");
  return visible.length;
}
"""

# Whether one of the elements `opens` is shown on the screen with a link a reader can tap: an open <dialog>, or
# a sidebar that is displayed, visible and at least 100 px wide inside the viewport, holding a visible link.
_SHOWN_JS = """
(opens) => {
  const onScreen = (el) => {
    const rect = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    return style.display !== "none" && style.visibility !== "hidden" && Number(style.opacity) > 0.1
      && Math.min(rect.right, window.innerWidth) - Math.max(rect.left, 0) >= 100
      && rect.bottom > 0 && rect.top < window.innerHeight;
  };
  const withLink = (el) => [...el.querySelectorAll("a[href]")].some((a) => {
    const rect = a.getBoundingClientRect();
    return rect.width > 0 && rect.height > 0 && getComputedStyle(a).visibility !== "hidden";
  });
  return [...document.querySelectorAll(opens)].some((el) =>
    (el.tagName !== "DIALOG" || el.open) && onScreen(el) && withLink(el));
}
"""
_DIALOG_OPEN_JS = "() => [...document.querySelectorAll('dialog')].some((d) => d.open)"
# Whether the page has a table of contents to open (the theme leaves the contents button out when it has none).
_HAS_CONTENTS_JS = """() => document.querySelectorAll(
  "#pst-secondary-sidebar a[href], .bd-sidebar-secondary a[href], #pst-secondary-sidebar-modal a[href]").length > 0"""

# At the phone's width, each typeset formula (mjx-container) that reaches past the viewport or past a box that
# clips it, without a box of its own that scrolls: the reader cannot see all of it. A formula inside a box that
# scrolls sideways (overflow-x auto or scroll) and that box inside the viewport, is readable by scrolling it.
_MATH_OVERFLOW_JS = """
() => {
  const viewport = document.documentElement.clientWidth;
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const problems = [];
  for (const math of article.querySelectorAll("mjx-container")) {
    if (!shown(math)) continue;
    // The typeset formula's own box (mjx-math): the container's scrollWidth also counts MathJax's hidden
    // assistive MathML, and a box that clips the formula does not shrink its rectangle.
    const rect = (math.querySelector("mjx-math") || math).getBoundingClientRect();
    const left = rect.left;
    const right = rect.right;
    let verdict = right > viewport + 1 || left < -1 ? "reaches past the viewport" : null;
    for (let box = math; box && box !== document.body; box = box.parentElement) {
      const style = getComputedStyle(box);
      // overflow does not apply to an inline box (it neither clips nor scrolls)
      const overflow = ["inline", "contents"].includes(style.display) ? "visible" : style.overflowX;
      const edges = box.getBoundingClientRect();
      if (overflow === "auto" || overflow === "scroll") {
        const fits = edges.right <= viewport + 1 && edges.left >= -1;
        verdict = fits ? null : "sits in a scrolling box wider than the viewport";
        break;
      }
      if ((overflow === "hidden" || overflow === "clip") && (right > edges.right + 1 || left < edges.left - 1)) {
        const name = box.className ? "." + String(box.className).trim().split(/\\s+/)[0] : "";
        verdict = `is cut off by ${box.tagName.toLowerCase()}${name}`;
        break;
      }
    }
    if (verdict) {
      let tex = "";
      try {
        const items = MathJax.startup.document.getMathItemsWithin(math);
        if (items.length) tex = items[0].math;
      } catch (error) {
        tex = math.textContent || "";
      }
      tex = tex.replace(/\\s+/g, " ").trim();
      problems.push(`${math.getAttribute("display") === "true" ? "display" : "inline"} math ${verdict} ` +
        `(${Math.round(right - left)} px wide, right edge at ${Math.round(right)} px): ${tex.slice(0, 50)}`);
    }
  }
  return problems;
}
"""

# At the phone's width, the tables of the article whose columns do not fit their box (it scrolls sideways).
_WIDE_TABLES_JS = """
() => {
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const shown = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  return [...article.querySelectorAll("table")].filter(shown)
    .filter((table) => table.scrollWidth > table.clientWidth + 1 || table.getBoundingClientRect().right >
      document.documentElement.clientWidth + 1)
    .map((table) => {
      const caption = table.querySelector("caption");
      const label = (caption ? caption.textContent : (table.querySelector("th, td") || {}).textContent || "")
        .replace(/\\s+/g, " ").trim().slice(0, 50);
      return `${table.scrollWidth} > ${table.clientWidth} px: ${label}`;
    });
}
"""

# Contrast of the text of tables and captions (WCAG 2 contrast ratio): every text node inside a table, a
# caption or a figure caption, and the labels a stacked table writes with ::before, against the background
# behind it (the element's and its ancestors' background colours, composed; white below them all).
_CONTRAST_JS = """
(minimum) => {
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const parse = (text) => {
    let m = text.match(/^rgba?\\(([^)]*)\\)$/);
    if (m) {
      const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    }
    m = text.match(/^color\\(srgb ([^)]*)\\)$/);
    if (m) {
      const p = m[1].split(/[\\s\\/]+/).filter(Boolean).map(Number);
      return [p[0] * 255, p[1] * 255, p[2] * 255, p.length > 3 ? p[3] : 1];
    }
    return null;
  };
  const over = (top, below) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + below[i] * (1 - a)).concat([1]);
  };
  const background = (el) => {
    const layers = [];
    for (let node = el; node; node = node.parentElement) {
      const colour = parse(getComputedStyle(node).backgroundColor);
      if (colour && colour[3] > 0) {
        layers.push(colour);
        if (colour[3] >= 1) break;
      }
    }
    let result = [255, 255, 255, 1];
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => {
      const s = v / 255;
      return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const hex = (c) => "#" + c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, "0")).join("");
  const shown = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden"
    && !el.closest("details:not([open])");
  const roots = article.querySelectorAll("table, caption, figcaption, .caption");
  const seen = new Set();
  const low = [];
  let checked = 0;
  const judge = (el, colourText, text) => {
    const colour = parse(colourText);
    if (!colour) return;
    const behind = background(el);
    const value = ratio(over(colour, behind), behind);
    checked += 1;
    if (value < minimum) {
      low.push(`${el.tagName.toLowerCase()} ${JSON.stringify(text.slice(0, 40))}: ${value.toFixed(2)}:1 ` +
        `(${hex(over(colour, behind))} on ${hex(behind)})`);
    }
  };
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!el || seen.has(el) || !node.textContent.trim() || !shown(el)) continue;
      if (el.closest("mjx-container")) continue;  // MathJax's glyphs inherit the colour of the text around them
      seen.add(el);
      judge(el, getComputedStyle(el).color, node.textContent.trim());
    }
    for (const cell of root.querySelectorAll("td, th")) {
      const before = getComputedStyle(cell, "::before");
      const content = before.content;
      if (!content || content === "none" || content === "normal" || content === '""' || !shown(cell)) continue;
      judge(cell, before.color, content.replace(/^"|"$/g, ""));
    }
  }
  return {checked, low};
}
"""


MIN_CONTRAST = 4.5
"""Smallest contrast ratio a table's text or a caption may have against its background (WCAG 2, level AA)."""
SCREENSHOT_TILE_PX = 4_000
"""A page's screenshot is taken in tiles at most this many CSS pixels tall, each with its own timeout, so that
the time one takes does not grow with the page's length (a full-page shot of the longest chapter timed out
after 30 s on a slower machine)."""
SCREENSHOT_TIMEOUT_MS = 30_000
SCREENSHOT_OVERLAP_PX = 100
"""Each tile after the first starts this much above the end of the one before: a sticky header (the article's
header is 48 to 56 px tall) covers the top of every tile but the first."""


def _settle(page) -> None:
    """Wait two frames: a resize, a theme change or a click has been laid out and painted."""
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _rest(page) -> None:
    """Leave the page as a reader who stopped tapping: no button focused, the pointer off every button (the
    theme's tooltips show on focus and hover, and would appear in the screenshots)."""
    page.evaluate("() => document.activeElement && document.activeElement.blur && document.activeElement.blur()")
    size = page.viewport_size
    page.mouse.move(size["width"] // 2, size["height"] - 1)


def _check_toggles_on_phone(page, report: PageReport) -> None:
    """Tap each toggle the theme shows at the phone's width; fail when nothing opens."""
    from playwright.sync_api import Error as PlaywrightError

    width = page.viewport_size["width"]
    for key, toggle in TOGGLES.items():
        page.evaluate("() => window.scrollTo(0, 0)")
        _settle(page)
        if not page.evaluate(_MARK_VISIBLE_JS, toggle["button"]):
            if key == "secondary" and not page.evaluate(_HAS_CONTENTS_JS):
                continue  # a page without sections has no contents to open, and no button for them
            report.failures.append(f"at {width} px, {toggle['name']} is not on the screen")
            continue
        if page.evaluate(_SHOWN_JS, toggle["opens"]):
            report.failures.append(f"at {width} px, what {toggle['name']} opens is already shown before a tap")
            continue
        report.toggles_tapped += 1
        try:
            page.locator("[data-site-check-target]").click(timeout=5_000)
            page.wait_for_function(_SHOWN_JS, arg=toggle["opens"], timeout=TOGGLE_WAIT_MS)
            report.toggles_opened += 1
            _check_words_whole(page, report, f"the drawer of {toggle['name']} at {width} px", toggle["drawer"])
        except PlaywrightError:
            report.failures.append(f"at {width} px, tapping {toggle['name']} opens nothing")
        page.keyboard.press("Escape")  # closes the theme's dialog
        with contextlib.suppress(PlaywrightError):
            page.wait_for_function(f"() => !({_DIALOG_OPEN_JS})()", timeout=TOGGLE_WAIT_MS)


def _check_sidebar_collapses(page, report: PageReport) -> None:
    """At the desktop's width ☰ must hide the site navigation (no dialog), and a second click bring it back."""
    from playwright.sync_api import Error as PlaywrightError

    toggle = TOGGLES["primary"]
    width = page.viewport_size["width"]
    report.sidebar_collapses = False
    page.evaluate("() => window.scrollTo(0, 0)")
    _settle(page)
    if not page.evaluate(_MARK_VISIBLE_JS, toggle["button"]):
        report.failures.append(f"at {width} px, {toggle['name']} is not on the screen")
        return
    sidebar = ".bd-sidebar-primary"
    if not page.evaluate(_SHOWN_JS, sidebar):
        report.failures.append(f"at {width} px, the site navigation is not shown")
        return
    button = page.locator("[data-site-check-target]")
    try:
        button.click(timeout=5_000)
        page.wait_for_function(
            f"() => !({_SHOWN_JS})({json.dumps(sidebar)}) || ({_DIALOG_OPEN_JS})()", timeout=TOGGLE_WAIT_MS
        )
    except PlaywrightError:
        report.failures.append(f"at {width} px, {toggle['name']} does not collapse the site navigation")
        return
    if page.evaluate(_DIALOG_OPEN_JS):
        report.failures.append(f"at {width} px, {toggle['name']} opens a dialog instead of collapsing the sidebar")
        page.keyboard.press("Escape")
        return
    try:
        button.click(timeout=5_000)
        page.wait_for_function(_SHOWN_JS, arg=sidebar, timeout=TOGGLE_WAIT_MS)
        report.sidebar_collapses = True
    except PlaywrightError:
        report.failures.append(f"at {width} px, a second click on {toggle['name']} does not bring the sidebar back")


# --- Drawers, code that scrolls, words in the contents, the book's name, no fullscreen button -------------

# At the phone's width: the visible code blocks (inputs and outputs) that scroll sideways, each with whether it
# shows that it does: a mask that fades the edge where more code is hidden, or a shadow drawn as a gradient
# (the book's _static/code-scroll.js and any-screen.css), and the share of its width out of sight.
_SCROLLING_CODE_JS = """
() => {
  const article = document.querySelector("article") || document.querySelector("main") || document.body;
  const visible = (el) => el.getClientRects().length > 0 && !el.closest("details:not([open])");
  const blocks = [...article.querySelectorAll("div.highlight pre, div.cell_output pre")].filter(visible);
  const cue = (el) => {
    const style = getComputedStyle(el);
    const mask = style.maskImage || style.webkitMaskImage || "none";
    return mask !== "none" || /gradient/.test(style.backgroundImage);
  };
  const scrolling = blocks.filter((el) => el.scrollWidth > el.clientWidth + 1);
  const name = (el) => `${el.scrollWidth} > ${el.clientWidth} px: ` +
    (el.textContent || "").split("\\n")[0].trim().slice(0, 50);
  return {
    blocks: blocks.length,
    scrolling: scrolling.length,
    hidden: scrolling.map((el) => 1 - el.clientWidth / el.scrollWidth),
    silent: scrolling.filter((el) => !cue(el)).map(name),
  };
}
"""

# Words of the links in the elements `selector` matches (displayed ones, with every sub-entry of a page's contents
# shown) that the browser broke across two lines
# ("FlexAttenti" / "on"): a word is a run of non-space characters within one text node, up to and with a hyphen
# (a <wbr> between two text nodes, and a hyphen, are places where a line may break), broken when its rectangles
# lie on more than one line.
_BROKEN_WORDS_JS = """
(selector) => {
  const broken = [];
  // every entry of a page's contents as it shows when its section is the one read (the theme shows an entry's
  // sub-entries only then, and the reader's scrolling decides which)
  const expand = document.createElement("style");
  expand.textContent = `:is(${selector}) ul.section-nav { display: flex !important; }`;
  document.head.append(expand);
  for (const box of document.querySelectorAll(selector)) {
    if (box.getClientRects().length === 0 || getComputedStyle(box).visibility === "hidden") continue;
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement || !node.parentElement.closest("a")) continue;
      for (const match of node.textContent.matchAll(/[^\\s\\-\u2010\u2013\u2014]+[\\-\u2010\u2013\u2014]?/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0)
          .map((r) => Math.round(r.top + r.height / 2)));
        if (lines.size > 1) broken.push(match[0]);
      }
    }
    // a <wbr> between two letters of prose (outside code) splits a word into two text nodes, which the loop above
    // sees as two words: "(Co" and "PE)" on two lines is one word broken
    for (const wbr of box.querySelectorAll("a wbr")) {
      if (wbr.closest("code, .pre")) continue;
      const before = wbr.previousSibling, after = wbr.nextSibling;
      if (!before || !after || before.nodeType !== Node.TEXT_NODE || after.nodeType !== Node.TEXT_NODE) continue;
      if (!/[A-Za-z0-9]$/.test(before.textContent) || !/^[A-Za-z0-9]/.test(after.textContent)) continue;
      const middle = (node, start) => {
        const range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, start + 1);
        const rect = [...range.getClientRects()].find((r) => r.width > 0);
        return rect && Math.round(rect.top + rect.height / 2);
      };
      const left = middle(before, before.textContent.length - 1), right = middle(after, 0);
      if (left !== undefined && right !== undefined && left !== right) {
        broken.push(before.textContent.match(/\\S*$/)[0] + after.textContent.match(/^\\S*/)[0]);
      }
    }
  }
  expand.remove();
  return [...new Set(broken)];
}
"""

# Whether a text node holding `name` (the book's title, case and spacing aside) is drawn inside the first screen:
# displayed, visible, not in a closed dialog or a hidden sidebar, with a rectangle within the viewport.
_NAME_ON_FIRST_SCREEN_JS = """
(name) => {
  const wanted = name.toLowerCase().replace(/\\s+/g, " ").trim();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || !node.textContent.toLowerCase().replace(/\\s+/g, " ").includes(wanted)) continue;
    const dialog = el.closest("dialog");
    if (dialog && !dialog.open) continue;
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || Number(style.opacity) < 0.1) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const onScreen = [...range.getClientRects()].some((r) => r.width > 0 && r.height > 0 && r.bottom > 0
      && r.top < window.innerHeight && r.right > 0 && r.left < window.innerWidth);
    // an ancestor that hides it (display: none gives no rectangles; opacity and visibility are inherited)
    let hidden = false;
    for (let box = el; box; box = box.parentElement) {
      const boxStyle = getComputedStyle(box);
      if (Number(boxStyle.opacity) < 0.1 || boxStyle.visibility === "hidden") hidden = true;
    }
    if (onScreen && !hidden) return true;
  }
  return false;
}
"""

# The items of the article's header (the sticky bar with ☰) that reach out of it: drawn over the page below.
_HEADER_SPILL_JS = """
() => {
  const header = document.querySelector(".bd-header-article");
  if (!header || header.getClientRects().length === 0) return [];
  const box = header.getBoundingClientRect();
  return [...header.querySelectorAll("a, button, span, div")].filter((el) => {
    const rect = el.getBoundingClientRect();
    return rect.width > 0 && rect.height > 0 && getComputedStyle(el).visibility !== "hidden"
      && (rect.bottom > box.bottom + 1 || rect.top < box.top - 1);
  }).map((el) => (el.textContent || el.className || el.tagName).replace(/\\s+/g, " ").trim().slice(0, 40));
}
"""

# The theme's fullscreen button (sphinx-book-theme's article header), where it is displayed.
_FULLSCREEN_BUTTONS_JS = """() => [...document.querySelectorAll(
    '.btn-fullscreen-button, [onclick*="toggleFullScreen"], [title="Fullscreen mode"]')]
  .filter((el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden").length"""

# The open <dialog>s that are modal (everything else on the page is inert) but not on the screen: not displayed,
# hidden, transparent, or less than 100 px of them inside the viewport. A reader sees the page and nothing responds.
_INVISIBLE_MODALS_JS = """
() => [...document.querySelectorAll("dialog")].filter((dialog) => {
  if (!dialog.open || !dialog.matches(":modal")) return false;
  const style = getComputedStyle(dialog);
  const rect = dialog.getBoundingClientRect();
  const onScreen = style.display !== "none" && style.visibility !== "hidden" && Number(style.opacity) > 0.1
    && Math.min(rect.right, window.innerWidth) - Math.max(rect.left, 0) >= 100
    && rect.bottom > 0 && rect.top < window.innerHeight;
  return !onScreen;
}).map((dialog) => "dialog#" + dialog.id
  + (dialog.className ? "." + dialog.className.trim().split(/\\s+/).join(".") : ""))
"""

DRAWER_SEQUENCES = {
    "collapse the site navigation at 1280 px, narrow the window to 390 px, open ☰, widen it to 1280 px": [
        ("size", 1280, 900),
        ("tap", "primary"),
        ("size", 390, 844),
        ("tap", "primary"),
        ("size", 1280, 900),
    ],
    "open the contents at 390 px, widen the window to 1280 px": [
        ("size", 390, 844),
        ("tap", "secondary"),
        ("size", 1280, 900),
    ],
    "open ☰ on a tablet held upright (820 x 1180), turn it sideways (1180 x 820)": [
        ("size", 820, 1180),
        ("tap", "primary"),
        ("size", 1180, 820),
    ],
}
"""Sequences of window sizes and taps on the toggles (:data:`TOGGLES`) after each of which no open modal drawer
may be invisible. The first is the one that left pydata-sphinx-theme's drawer invisible and modal: the collapsed
sidebar's class moves onto the drawer with its links, and hides it once the window is wide again."""


def _tap_toggle(page, key: str) -> bool:
    """Tap the visible toggle ``key`` of :data:`TOGGLES`; ``False`` when none is on the screen."""
    from playwright.sync_api import Error as PlaywrightError

    page.evaluate("() => window.scrollTo(0, 0)")
    _settle(page)
    if not page.evaluate(_MARK_VISIBLE_JS, TOGGLES[key]["button"]):
        return False
    try:
        page.locator("[data-site-check-target]").click(timeout=5_000)
    except PlaywrightError:
        return False
    page.wait_for_timeout(400)  # the theme's transitions take 0.25 s
    return True


def _check_drawer_entry(page, report: PageReport) -> None:
    """At the phone's width, open the contents drawer and tap one of its entries: the drawer must close and the
    page go to the entry's section."""
    from playwright.sync_api import Error as PlaywrightError

    width = page.viewport_size["width"]
    if not page.evaluate(_HAS_CONTENTS_JS) or not _tap_toggle(page, "secondary"):
        return
    entry = page.evaluate(
        """() => {
          const links = [...document.querySelectorAll("#pst-secondary-sidebar-modal a[href*='#']")].filter((a) => {
            const rect = a.getBoundingClientRect();
            return rect.width > 0 && rect.height > 0 && rect.top >= 0 && rect.bottom <= window.innerHeight;
          });
          const link = links[Math.min(1, links.length - 1)];
          if (!link) return null;
          link.setAttribute("data-site-check-entry", "");
          return decodeURIComponent(new URL(link.href).hash);
        }"""
    )
    if entry is None:
        page.keyboard.press("Escape")
        return
    page.locator("[data-site-check-entry]").click(timeout=5_000)
    try:
        page.wait_for_function(f"() => !({_DIALOG_OPEN_JS})()", timeout=TOGGLE_WAIT_MS)
        report.drawer_entry_closes = True
    except PlaywrightError:
        report.drawer_entry_closes = False
        report.failures.append(
            f"at {width} px, tapping an entry of the contents drawer ({entry}) leaves the drawer open over the page"
        )
        page.keyboard.press("Escape")
    if page.evaluate("() => decodeURIComponent(window.location.hash)") != entry:
        report.failures.append(f"at {width} px, tapping {entry} in the contents drawer does not go to that section")


def _check_drawer_sequences(page, report: PageReport, url: str) -> None:
    """Run each of :data:`DRAWER_SEQUENCES` from a fresh load of the page; fail when, after any step, an open
    modal drawer is invisible (and say whether Escape closes it)."""
    for description, steps in DRAWER_SEQUENCES.items():
        page.set_viewport_size({"width": steps[0][1], "height": steps[0][2]})
        page.goto(url, wait_until="load", timeout=PAGE_TIMEOUT_MS)
        for step in steps:
            if step[0] == "size":
                page.set_viewport_size({"width": step[1], "height": step[2]})
                page.wait_for_timeout(400)
            else:
                _tap_toggle(page, step[1])
            invisible = page.evaluate(_INVISIBLE_MODALS_JS)
            if invisible:
                page.keyboard.press("Escape")
                _settle(page)
                escape = "Escape closes it" if not page.evaluate(_DIALOG_OPEN_JS) else "Escape does not close it"
                fault = f"{description}: an open drawer ({invisible[0]}) is invisible but modal ({escape})"
                report.drawer_faults.append(fault)
                report.failures.append(fault)
                break
        page.keyboard.press("Escape")


def _check_words_whole(page, report: PageReport, where: str, selector: str) -> None:
    """Fail when a word of the links in ``selector`` is broken across two lines (``where`` names the place)."""
    broken = page.evaluate(_BROKEN_WORDS_JS, selector)
    report.broken_words[where] = broken
    if broken:
        report.failures.append(
            f"{len(broken)} words broken across two lines in {where}: " + ", ".join(repr(w) for w in broken[:5])
        )


def _check_contrast(page, report: PageReport, mode: str) -> None:
    """Fail table text and captions under :data:`MIN_CONTRAST` against their background in colour ``mode``."""
    facts = page.evaluate(_CONTRAST_JS, MIN_CONTRAST)
    report.contrast_checked[mode] = facts["checked"]
    report.low_contrast[mode] = facts["low"]
    if facts["low"]:
        report.failures.append(
            f"{len(facts['low'])} texts of tables or captions under {MIN_CONTRAST}:1 contrast in {mode} mode: "
            + "; ".join(facts["low"][:3])
        )


def _follow_dark_mode(page, report: PageReport) -> None:
    """Switch the browser to a dark colour scheme; a page that sets a theme (``data-theme``) must follow it."""
    from playwright.sync_api import Error as PlaywrightError

    page.emulate_media(color_scheme="dark")
    themed = "() => [undefined, 'dark'].includes(document.documentElement.dataset.theme)"
    try:
        page.wait_for_function(themed, timeout=TOGGLE_WAIT_MS)
    except PlaywrightError:
        theme = page.evaluate("() => document.documentElement.dataset.theme")
        report.failures.append(f"the page does not follow the system's dark mode (data-theme stays {theme!r})")
    _settle(page)


def _screenshot(page, directory: Path, stem: str, report: PageReport) -> None:
    """Save the whole page as ``stem.png`` and, below its first :data:`SCREENSHOT_TILE_PX` pixels, ``stem.part2.png``
    and on.

    Each tile is the viewport's own picture: the viewport is made one tile tall and scrolled to the tile, so
    that a tile costs the same on a long page as on a short one. (Playwright's full-page screenshot, even
    clipped to one tile, took more than 30 s per tile on the 53,000 px of chapter 10 at 390 px on a loaded
    2-core machine; a viewport tile took 0.3 s.) Sticky elements, such as the article's header, show at the
    top of every tile, as a reader scrolled there sees them; tiles overlap by :data:`SCREENSHOT_OVERLAP_PX`
    so that what they cover is in the tile before. A tile that fails (:data:`SCREENSHOT_TIMEOUT_MS`) is noted
    in ``report.notes``, not a failure: how fast a machine draws a page is not a fact about the site.
    """
    from playwright.sync_api import Error as PlaywrightError

    directory.mkdir(parents=True, exist_ok=True)
    for old in [directory / f"{stem}.png", *directory.glob(f"{glob.escape(stem)}.part*.png")]:
        old.unlink(missing_ok=True)
    viewport = page.viewport_size
    width = viewport["width"]
    height = page.evaluate("() => document.documentElement.scrollHeight")
    tile = max(min(SCREENSHOT_TILE_PX, height), 1)
    page.set_viewport_size({"width": width, "height": tile})
    try:
        height = page.evaluate("() => document.documentElement.scrollHeight")
        step = max(tile - SCREENSHOT_OVERLAP_PX, 1) if height > tile else tile
        for index, top in enumerate(range(0, max(height - SCREENSHOT_OVERLAP_PX, 1), step)):
            name = f"{stem}.png" if index == 0 else f"{stem}.part{index + 1}.png"
            # the last tile: the browser scrolls no further than the end, so the rest sits lower in the view
            scrolled = page.evaluate(_SCROLL_TO_JS, top)
            clip = {"x": 0, "y": top - scrolled, "width": width, "height": min(tile, height - top)}
            try:
                page.screenshot(path=str(directory / name), clip=clip, timeout=SCREENSHOT_TIMEOUT_MS)
            except PlaywrightError as error:
                report.notes.append(f"screenshot {name} not taken: {error.message.splitlines()[0]}")
    finally:
        page.set_viewport_size(viewport)
        page.evaluate(_SCROLL_TO_JS, 0)


_SCROLL_TO_JS = """(top) => {
  window.scrollTo({top, left: 0, behavior: "instant"});
  return window.scrollY;
}"""


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
    toggles: bool = False,
    book_title: str | None = None,
    drawer_sequence_pages: frozenset[str] | None = None,
) -> tuple[list[PageReport], list[str]]:
    """Visit ``pages`` (paths relative to ``html_dir``) in Chromium; return a report per page and site-wide failures.

    ``prev_next`` demands that page ``k`` links back to page ``k - 1`` and on to page ``k + 1`` (the theme's
    footer). ``notebooks`` are the pages that must offer their ``.ipynb`` for download. ``search_word``, if
    given, is searched for on ``search.html`` and must give at least one result. ``required_ids`` maps a
    page to the element ids it must hold (the entries of the API reference: :func:`reference_ids`).
    ``phone_width``: after the desktop pass (1280 px), each page is resized to this width and must not be
    wider than it, show no formula cut off or reaching past the screen without a box that scrolls, and no
    table wider than its box (``None``: no phone pass). At that width the text of tables and captions must
    have a contrast of :data:`MIN_CONTRAST` against its background, in the light colour scheme and then in the
    dark one, which a page that sets a theme must follow. ``toggles``: the page must have the theme's two
    toggles working: at 1280 px ☰ collapses the site navigation and brings it back; at the phone's width
    tapping ☰ and the contents button each opens its sidebar (:data:`TOGGLES`); the contents drawer closes when
    one of its entries is tapped, and no sequence of :data:`DRAWER_SEQUENCES` leaves an open drawer invisible
    (run on the pages of ``drawer_sequence_pages``, every page if ``None``: each sequence loads the page again).
    ``book_title``: the phone's first screen must show it. On every page: no fullscreen button, no word of the
    sidebars' links broken across two lines (at 1280 px, and in the drawers the toggles open), and at the
    phone's width every code block that scrolls sideways shows that it does.
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
            report.fullscreen_buttons = page.evaluate(_FULLSCREEN_BUTTONS_JS)
            if report.fullscreen_buttons:
                report.failures.append(f"{report.fullscreen_buttons} fullscreen buttons shown")
            for where, selector in (
                ("the contents column", ".bd-sidebar-secondary"),
                ("the site navigation", ".bd-sidebar-primary"),
            ):
                _check_words_whole(page, report, f"{where} at {page.viewport_size['width']} px", selector)
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
                _screenshot(page, screenshot_dir, shot_name, report)
            if toggles:
                _check_sidebar_collapses(page, report)
                _rest(page)
            if phone_width is not None:
                page.set_viewport_size({**PHONE_VIEWPORT, "width": phone_width})
                _judge_phone(report, page.evaluate(_PHONE_FACTS_JS))
                _judge_phone_content(
                    report, page.evaluate(_MATH_OVERFLOW_JS), page.evaluate(_WIDE_TABLES_JS), phone_width
                )
                _judge_scrolling_code(report, page.evaluate(_SCROLLING_CODE_JS), phone_width)
                spilled = page.evaluate(_HEADER_SPILL_JS)
                if spilled:
                    report.failures.append(
                        f"at {phone_width} px, items of the article's header reach out of it: " + ", ".join(spilled[:3])
                    )
                if book_title is not None:
                    page.evaluate(_SCROLL_TO_JS, 0)
                    report.name_on_first_screen = page.evaluate(_NAME_ON_FIRST_SCREEN_JS, book_title)
                    if not report.name_on_first_screen:
                        report.failures.append(f"at {phone_width} px, the first screen does not show the book's name")
                _check_contrast(page, report, "light")
                if screenshot_dir is not None:
                    _screenshot(page, screenshot_dir, f"{shot_name}@{phone_width}", report)
                if toggles:
                    _check_toggles_on_phone(page, report)
                    _check_drawer_entry(page, report)
                    page.evaluate(_SCROLL_TO_JS, 0)
                    _rest(page)
                _follow_dark_mode(page, report)
                _check_contrast(page, report, "dark")
                if screenshot_dir is not None:
                    _screenshot(page, screenshot_dir, f"{shot_name}@{phone_width}.dark", report)
                    page.set_viewport_size(DESKTOP_VIEWPORT)
                    _settle(page)
                    _screenshot(page, screenshot_dir, f"{shot_name}.dark", report)
            if toggles and (drawer_sequence_pages is None or page_path in drawer_sequence_pages):
                _check_drawer_sequences(page, report, urls[index])
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


def _judge_scrolling_code(report: PageReport, facts: dict, width: int) -> None:
    """Fail a page with a code block that scrolls sideways at the phone's width with no sign that it does."""
    report.silent_scrolling_code = facts["silent"]
    if facts["silent"]:
        report.failures.append(
            f"{len(facts['silent'])} of {facts['scrolling']} code blocks that scroll sideways at {width} px show no "
            "sign that they do: " + "; ".join(facts["silent"][:3])
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


def _judge_phone_content(report: PageReport, math: list[str], tables: list[str], width: int) -> None:
    """Fail a page whose formulas a phone cuts off, or whose tables scroll sideways, at the phone's width."""
    report.math_overflow, report.wide_tables = math, tables
    if math:
        report.failures.append(
            f"{len(math)} formulas at {width} px cut off or past the screen, with no box that scrolls: "
            + "; ".join(math[:3])
        )
    if tables:
        report.failures.append(
            f"{len(tables)} tables wider than their box at {width} px (columns out of sight): " + "; ".join(tables[:3])
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
        elif href.startswith("data:") and link["in_article"]:
            pass  # a file the page carries itself (chapter 17's CSV download): no request leaves the page
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
        "math cut",
        "wide tables",
        "low contrast (light, dark)",
        "toggles: collapse, opened/tapped",
        "drawers: entry closes, faults",
        "words broken",
        f"{PHONE_WIDTH} px: silent scrolling code",
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
            str(len(r.math_overflow)),
            str(len(r.wide_tables)),
            ", ".join(
                f"{len(r.low_contrast.get(mode, []))}/{r.contrast_checked.get(mode, 0)}" for mode in ("light", "dark")
            ),
            ("-" if r.sidebar_collapses is None else "ok" if r.sidebar_collapses else "no")
            + f", {r.toggles_opened}/{r.toggles_tapped}",
            ("-" if r.drawer_entry_closes is None else "ok" if r.drawer_entry_closes else "no")
            + f", {len(r.drawer_faults)}",
            str(sum(len(words) for words in r.broken_words.values())),
            str(len(r.silent_scrolling_code)),
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

SEARCH_WORDS = ("YaRN", "interleaved", "rotary", "wavelength", "10000")
"""Words the search pass looks up: one only the later chapters use, one the early chapters use too, one whose
stem ("rotari") occurs nowhere literally, which left Sphinx's excerpts showing the download menu ("....ipynb"),
one that stands next to formulas on most of its pages (their excerpts showed raw LaTeX), and a number, the
sinusoid's base, which Sphinx's query parser dropped (a number alone found nothing)."""

SEARCH_RANKING = {
    "interleaved": "notebooks/07_rotary.html",
    "base": "notebooks/12_choosing_the_base.html",
    "partial rotary": "notebooks/07_rotary.html",
    "M-RoPE": "notebooks/11_rope_in_more_dimensions.html",
    "ALiBi": "notebooks/08_relative_biases.html",
}
"""Queries and the page the search must list first: the one that defines the word in bold (chapter 7's
"**interleaved**", where no heading holds it), has it in its title ("Choosing the base"; chapter 8's title
names ALiBi) or in a section heading ("Partial rotary: only part of each head turns", "M-RoPE: text, images and
video in one sequence"). Other pages mention each of them: "base" has headings in the bug gallery too."""

# Sphinx's searchtools.js appends the excerpt (``p.context``) once its fetch of the result's page returns, after
# the list is complete; the pass waits for every item to have one (or for the timeout, then reports the rest).
_SEARCH_RESULTS_JS = """() => [...document.querySelectorAll("#search-results ul.search li")].map((item) => ({
  title: (item.querySelector("a") || {}).innerText || "",
  href: (item.querySelector("a") || {}).href || "",
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
# LaTeX a formula's source leaves in an excerpt: MathJax's delimiters, or a command of the kinds the chapters'
# formulas use (a backslash in code, such as "\n", is not one of them).
_RAW_LATEX = re.compile(
    r"\\[()\[\]]|\\(?:frac|sum|prod|sqrt|math[a-z]*|text|operatorname|left|right|cdot|times|theta|omega|alpha|"
    r"beta|Delta|lambda|pi|sigma|ln|log|exp|sin|cos|approx|le|ge|ell|dots|ldots|quad|begin|end)(?![A-Za-z])"
)


@dataclass
class SearchReport:
    """What searching for ``word`` on ``search.html`` showed: the results and the page's visible search boxes."""

    word: str
    results: list[dict] = field(default_factory=list)
    visible_inputs: int = 0
    expected_first: str | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def first_page(self) -> str | None:
        """The page (path from the site's root, no ``#anchor``) of the first result, ``None`` without results."""
        if not self.results:
            return None
        return urllib.parse.urlsplit(self.results[0].get("href", "")).path.lstrip("/") or None

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
    latex = _RAW_LATEX.search(text)
    if latex:
        return f"excerpt shows raw LaTeX ({latex.group()!r}): {text[max(latex.start() - 30, 0) : latex.end() + 30]!r}"
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
    if report.expected_first is not None and report.results and report.first_page != report.expected_first:
        pages = [urllib.parse.urlsplit(r.get("href", "")).path.lstrip("/") for r in report.results]
        place = pages.index(report.expected_first) + 1 if report.expected_first in pages else None
        report.failures.append(
            f"search for {report.word!r} lists {report.first_page} ({report.results[0]['title']!r}) first, not "
            f"{report.expected_first}" + (f" (it comes {place}.)" if place else " (it is not listed)")
        )


def check_search(
    html_dir: Path, words: tuple[str, ...] = SEARCH_WORDS, ranking: dict[str, str] | None = None
) -> list[SearchReport]:
    """Search ``html_dir``'s ``search.html`` for each of ``words`` and of ``ranking``'s queries in Chromium, at
    1280 px; one report per query.

    A search passes when it lists at least one result, every result shows an excerpt of its page's text
    (not a file name, raw notebook JSON or dots), the search page shows exactly one search box (a text
    field, or the theme's search button drawn as a box), and, for a query of ``ranking``, the first result is
    on the page ``ranking`` gives (a path from the site's root).
    """
    ranking = ranking or {}
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
        for word in dict.fromkeys([*words, *ranking]):
            report = SearchReport(word, expected_first=ranking.get(word))
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


# --- How long a page is on a phone, and how far down its first picture comes -------------------------------

PHONE_SCREEN = {"width": PHONE_WIDTH, "height": 844}
"""The phone of the screen count: 390 x 844 CSS pixels, touch, a mobile browser (a common phone's size)."""
FIGURE_MIN_WIDTH_PX = 100
"""An image of the article at least this wide on the phone counts as a figure (not an icon or a badge)."""

# Once the images are decoded, MathJax has typeset and the tables are laid out (narrow-tables.js stacks them on
# "load"): the page's height, and the top and bottom of the first figure of the article, in CSS pixels from the
# top of the page. A figure is an image of the article drawn at least FIGURE_MIN_WIDTH_PX wide and not inside a
# closed dropdown.
_PHONE_SCREENS_JS = """
async (minWidth) => {
  for (const img of document.images) { img.loading = "eager"; }
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const article = document.querySelector("article.bd-article") || document.querySelector("article") || document.body;
  const figure = [...article.querySelectorAll("img")].find((img) => {
    const rect = img.getBoundingClientRect();
    return img.naturalWidth > 0 && rect.width >= minWidth && !img.closest("details:not([open])");
  });
  const rect = figure ? figure.getBoundingClientRect() : null;
  const code = [...article.querySelectorAll("div.highlight pre, div.cell_output pre")]
    .filter((el) => el.getClientRects().length > 0 && !el.closest("details:not([open])"));
  const cut = code.filter((el) => el.scrollWidth > el.clientWidth + 1);
  return {
    code_blocks: code.length,
    code_cut: cut.map((el) => 1 - el.clientWidth / el.scrollWidth),
    height: document.documentElement.scrollHeight,
    figure_top: rect ? rect.top + window.scrollY : null,
    figure_bottom: rect ? rect.bottom + window.scrollY : null,
    figure_alt: figure ? (figure.getAttribute("alt") || "").slice(0, 60) : null,
  };
}
"""


@dataclass
class PhoneScreens:
    """One page on the phone of :data:`PHONE_SCREEN`: its length and where its first figure starts and ends,
    in screens (a screen is the viewport's height, 844 CSS px; ``None``: the page has no figure)."""

    page: str
    screens: float
    figure_top: float | None
    figure_bottom: float | None
    figure_alt: str | None = None
    code_blocks: int = 0
    code_cut: list[float] = field(default_factory=list)


def measure_phone_screens(html_dir: Path, pages: list[str]) -> list[PhoneScreens]:
    """Open each of ``pages`` as a phone does (390 x 844, touch, a mobile browser, the page as it loads: nothing
    expanded) and measure its length and the position of its first figure, in screens."""
    from playwright.sync_api import sync_playwright

    _require_chromium()
    measured = []
    with LocalServer(html_dir) as server, _closed_port() as no_proxy, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*CHROMIUM_ARGS, f"--proxy-server=http://127.0.0.1:{no_proxy}"],
        )
        for page_path in pages:
            context = browser.new_context(
                viewport=PHONE_SCREEN, is_mobile=True, has_touch=True, device_scale_factor=2, service_workers="block"
            )
            page = context.new_page()
            page.goto(f"{server.origin}/{page_path}", wait_until="load", timeout=PAGE_TIMEOUT_MS)
            facts = page.evaluate(_PHONE_SCREENS_JS, FIGURE_MIN_WIDTH_PX)
            screen = PHONE_SCREEN["height"]
            measured.append(
                PhoneScreens(
                    page_path,
                    facts["height"] / screen,
                    None if facts["figure_top"] is None else facts["figure_top"] / screen,
                    None if facts["figure_bottom"] is None else facts["figure_bottom"] / screen,
                    facts["figure_alt"],
                    facts["code_blocks"],
                    facts["code_cut"],
                )
            )
            context.close()
        browser.close()
    return measured


def format_phone_screens(measured: list[PhoneScreens]) -> str:
    """A Markdown table: per page, its length and where its first figure starts and ends, in phone screens."""
    lines = [
        f"| page | phone screens ({PHONE_SCREEN['width']} x {PHONE_SCREEN['height']}) | first figure starts "
        "(screens down) | first figure ends | visible code blocks cut on the right | their median share hidden |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in measured:
        top = "no figure" if m.figure_top is None else f"{m.figure_top:.2f}"
        bottom = "-" if m.figure_bottom is None else f"{m.figure_bottom:.2f}"
        hidden = f"{100 * sorted(m.code_cut)[len(m.code_cut) // 2]:.0f} %" if m.code_cut else "-"
        lines.append(
            f"| {m.page} | {m.screens:.1f} | {top} | {bottom} | {len(m.code_cut)} of {m.code_blocks} | {hidden} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="built site (default _build/html)")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "site-check", help="where screenshots go")
    parser.add_argument(
        "--source", type=Path, default=ROOT, help="book source holding _toc.yml (default: this repository)"
    )
    parser.add_argument("--search-word", default="positional", help="word the search page must find")
    parser.add_argument(
        "--phone-screens",
        type=Path,
        metavar="JSON",
        help="only measure each chapter's length and its first figure in phone screens (390 x 844, touch), print "
        "the table and save the numbers in JSON",
    )
    args = parser.parse_args(argv)
    if not (args.html / "index.html").exists():
        raise SystemExit(f"site check: {args.html}/index.html not found: build the book first (make book)")

    pages, notebooks = toc_pages(args.source)
    if args.phone_screens is not None:
        measured = measure_phone_screens(args.html, [page for page in pages if page in notebooks])
        print(format_phone_screens(measured))
        args.phone_screens.write_text(json.dumps([vars(m) for m in measured], indent=1) + "\n")
        return 0
    required_ids = reference_ids(args.source)
    reports, site_failures = check_pages(
        args.html,
        pages,
        screenshot_dir=args.screenshots,
        prev_next=True,
        notebooks=notebooks,
        search_word=args.search_word,
        required_ids=required_ids,
        toggles=True,
        book_title=yaml.safe_load((args.source / "_config.yml").read_text())["title"],
        # The drawers are the same script on every page: the sequences (three loads each) run on the first chapter
        # and the first page of the API reference, whose drawers hold the longest lists.
        drawer_sequence_pages=frozenset(
            [next(page for page in pages if page in notebooks), next(page for page in pages if page in required_ids)]
        ),
    )
    print(format_table(reports))
    total = (
        f"{len(reports)} pages, {sum(r.math_typeset for r in reports)}/{sum(r.math_elements for r in reports)} math "
        f"elements typeset, {sum(r.images_decoded for r in reports)}/{sum(r.images for r in reports)} images decoded, "
        f"{sum(len(r.images_without_alt) for r in reports)} images without a real alt text, "
        f"{sum((r.phone_width or 0) > PHONE_WIDTH for r in reports)} pages wider than {PHONE_WIDTH} px, "
        f"{sum(len(r.math_overflow) for r in reports)} formulas cut off and {sum(len(r.wide_tables) for r in reports)} "
        f"tables wider than their box at {PHONE_WIDTH} px, "
        + ", ".join(
            f"{sum(len(r.low_contrast.get(mode, [])) for r in reports)} of "
            f"{sum(r.contrast_checked.get(mode, 0) for r in reports)} table and caption texts under {MIN_CONTRAST}:1 "
            f"in {mode} mode"
            for mode in ("light", "dark")
        )
        + f", ☰ collapses the sidebar at {DESKTOP_VIEWPORT['width']} px on "
        f"{sum(bool(r.sidebar_collapses) for r in reports)} pages, {sum(r.toggles_opened for r in reports)} of "
        f"{sum(r.toggles_tapped for r in reports)} toggles tapped at {PHONE_WIDTH} px opened their sidebar, "
        f"the contents drawer closed on a tapped entry on {sum(bool(r.drawer_entry_closes) for r in reports)} of "
        f"{sum(r.drawer_entry_closes is not None for r in reports)} pages, "
        f"{sum(len(r.drawer_faults) for r in reports)} invisible modal drawers after {len(DRAWER_SEQUENCES)} "
        "sequences of resizing and tapping on 2 pages, "
        f"{sum(len(w) for r in reports for w in r.broken_words.values())} words of the sidebars broken across lines, "
        f"{sum(len(r.silent_scrolling_code) for r in reports)} code blocks scrolling at {PHONE_WIDTH} px with no "
        "sign of it, "
        f"the book's name on the first phone screen of {sum(bool(r.name_on_first_screen) for r in reports)} pages, "
        f"{sum(r.fullscreen_buttons for r in reports)} fullscreen buttons, "
        f"{sum(len(r.wide_code) for r in reports)} visible code blocks and {sum(r.wide_output for r in reports)} "
        f"output blocks wider than their box at {DESKTOP_VIEWPORT['width']} px, "
        f"{sum(r.links_checked for r in reports)} internal links checked ({sum(r.anchors_checked for r in reports)} "
        f"with anchors), {sum(map(len, required_ids.values()))} API reference entries required on "
        f"{len(required_ids)} pages; screenshots in {args.screenshots}"
    )
    print(total)
    for report in reports:
        for note in report.notes:
            print(f"note {report.page}: {note}")
    failed = [r for r in reports if not r.ok]
    for report in failed:
        print(f"\nFAIL {report.page}:")
        for failure in dict.fromkeys(report.failures):
            print(f"  - {failure}")
    for search in check_search(args.html, ranking=SEARCH_RANKING):
        print(
            f"search for {search.word!r}: {len(search.results)} results, {search.with_excerpt} with an excerpt of "
            f"the page's text, first {search.first_page}; {search.visible_inputs} visible search box(es) on the "
            "search page"
        )
        site_failures += search.failures
    for failure in site_failures:
        print(f"FAIL site: {failure}")
    print(f"site check: {len(reports) - len(failed)} passed, {len(failed) + len(site_failures)} failed")
    return 1 if failed or site_failures else 0


if __name__ == "__main__":
    sys.exit(main())
