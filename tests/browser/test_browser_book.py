"""The built HTML book is self-contained and works in a real browser (issue 2, section 2).

Two kinds of test, both on the strict build from the ``edition_book`` fixture:

* static checks of the HTML files: every ``<script src>``, ``<link href>``, ``<img src>``, …
  is a file of the book (nothing from a CDN), no ipywidgets state and no require.js is embedded,
  plotly.js is loaded once from ``_static`` on the pages with figures and never inlined, MathJax
  comes from ``_static/mathjax``, and each page weighs at most 2 MB without the shared ``_static``;
* a browser test (Playwright driving Debian's Chromium, see tests/browser/browser.py) that
  opens **every**
  built page — chapters, intro, references, ``genindex.html``, ``search.html`` and the
  ``index.html`` redirect; none is left out — from a localhost server, with every request to any
  other origin aborted, and asserts: no request aborted or failed, no console error, no page
  error, all math typeset by MathJax (no raw TeX left in the text), and every plotly figure drew
  its traces.

The interaction tests for the explorers (dragging sliders) live in the widgets' own test file.
"""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from browser import launch, serve

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MAX_PAGE_BYTES = 2 * 1024 * 1024  # issue 2: each chapter page <= 2 MB excluding _static
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
#: Folders of the build that hold assets, not pages.
ASSET_DIRS = {"_static", "_images", "_sources", "_downloads"}
#: Tags/attributes that make the browser fetch something when the page loads.
FETCHING = {
    ("script", "src"),
    ("img", "src"),
    ("iframe", "src"),
    ("source", "src"),
    ("video", "src"),
    ("video", "poster"),
    ("audio", "src"),
    ("embed", "src"),
    ("link", "href"),
}
#: <link rel=...> values that are plain navigation hints (nothing is fetched).
NAVIGATION_RELS = {
    "index",
    "search",
    "next",
    "prev",
    "canonical",
    "author",
    "license",
    "help",
    "alternate",
}


# --------------------------------------------------------------------------------------------------
# helpers


class PageParser(HTMLParser):
    """Collects the fetched URLs, the inline scripts and the meta refresh of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fetched: list[tuple[str, str, str]] = []
        self.scripts: list[dict] = []  # {"attrs": {...}, "text": str}
        self.refresh: str | None = None
        self._in_script: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = {k: (v or "") for k, v in attrs}
        if tag == "meta" and attrs.get("http-equiv", "").lower() == "refresh":
            self.refresh = attrs.get("content", "")
        if tag == "script":
            self._in_script = {"attrs": attrs, "text": ""}
            self.scripts.append(self._in_script)
        if tag == "link" and set(attrs.get("rel", "").lower().split()) <= NAVIGATION_RELS:
            return
        for name, value in attrs.items():
            if (tag, name) in FETCHING and value:
                self.fetched.append((tag, name, value))
        if tag in ("img", "source") and attrs.get("srcset"):
            # "url [descriptor], url [descriptor]": each candidate may be fetched (a figure's
            # phone drawing, book/_ext/attnbook_figures.py).
            for candidate in attrs["srcset"].split(","):
                if candidate.strip():
                    self.fetched.append((tag, "srcset", candidate.split()[0]))

    def handle_data(self, data):
        if self._in_script is not None:
            self._in_script["text"] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


def parse_page(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser


def built_pages(html_dir: Path) -> list[Path]:
    """Every .html page of the build (asset folders excluded)."""
    return sorted(
        p for p in html_dir.rglob("*.html") if p.relative_to(html_dir).parts[0] not in ASSET_DIRS
    )


def resolve_local(page: Path, url: str, html_dir: Path) -> Path | None:
    """The file a URL on ``page`` loads, or None if the URL leaves the book."""
    parts = urlsplit(url)
    if parts.scheme == "data":
        return page
    if parts.scheme or parts.netloc:
        return None
    if not parts.path:
        return page
    target = (page.parent / unquote(parts.path)).resolve()
    if not target.is_relative_to(html_dir.resolve()):
        return None
    return target


def page_weight(page: Path, html_dir: Path) -> int:
    """Bytes of the page plus every file it loads that is not under the shared ``_static``."""
    total = page.stat().st_size
    seen = set()
    for _tag, _attr, url in parse_page(page).fetched:
        target = resolve_local(page, url, html_dir)
        if target is None or target == page or target in seen or not target.is_file():
            continue
        if target.relative_to(html_dir.resolve()).parts[0] == "_static":
            continue
        seen.add(target)
        total += target.stat().st_size
    return total


def toc_files() -> list[str]:
    """Document names listed in _toc.yml (root first)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts", []) or []:
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []) or []:
        walk(part.get("chapters"))
    return names


# --------------------------------------------------------------------------------------------------
# static checks of the built HTML


def test_every_toc_page_is_built(edition_book):
    missing = [name for name in toc_files() if not (edition_book / f"{name}.html").is_file()]
    assert not missing, f"pages listed in _toc.yml but not built: {missing}"
    for extra in ("index.html", "genindex.html", "search.html"):
        assert (edition_book / extra).is_file(), f"{extra} was not built"


def test_pages_load_only_files_of_the_book(edition_book):
    problems = []
    for page in built_pages(edition_book):
        rel = page.relative_to(edition_book).as_posix()
        for tag, attr, url in parse_page(page).fetched:
            target = resolve_local(page, url, edition_book)
            if target is None:
                problems.append(f"{rel}: <{tag} {attr}={url!r}> leaves the book")
            elif not target.is_file():
                problems.append(f"{rel}: <{tag} {attr}={url!r}> is missing from the build")
    assert not problems, "\n".join(problems)


def test_no_widget_state_no_requirejs_no_thebe(edition_book):
    problems = []
    for page in built_pages(edition_book):
        rel = page.relative_to(edition_book).as_posix()
        parsed = parse_page(page)
        for script in parsed.scripts:
            if script["attrs"].get("type") == WIDGET_STATE_MIME:
                problems.append(f"{rel}: embeds ipywidgets state ({len(script['text'])} chars)")
            src = script["attrs"].get("src", "")
            if re.search(r"require(\.min)?\.js|thebe|embed-amd|html-manager", src):
                problems.append(f"{rel}: loads {src}")
            if "THEBE_JS_URL" in script["text"]:
                problems.append(f"{rel}: carries thebe's configuration script")
    assert not problems, "\n".join(problems)


def test_plotly_js_comes_once_from_static_and_is_never_inlined(edition_book):
    import plotly

    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    served = edition_book / "_static" / "plotly.min.js"
    assert served.is_file(), "_static/plotly.min.js was not copied into the build"
    assert (
        hashlib.sha256(served.read_bytes()).digest()
        == hashlib.sha256(bundled.read_bytes()).digest()
    ), "_static/plotly.min.js differs from the installed plotly's plotly.min.js"

    problems, pages_with_figures = [], 0
    for page in built_pages(edition_book):
        rel = page.relative_to(edition_book).as_posix()
        text = page.read_text(encoding="utf-8")
        parsed = parse_page(page)
        loads = [
            s["attrs"]["src"]
            for s in parsed.scripts
            if urlsplit(s["attrs"].get("src", "")).path.endswith("plotly.min.js")
        ]
        has_figure = "plotly-graph-div" in text
        pages_with_figures += has_figure
        if has_figure and len(loads) != 1:
            problems.append(f"{rel}: has plotly figures but loads plotly.min.js {len(loads)} times")
        for src in loads:
            target = resolve_local(page, src, edition_book)
            if target != served.resolve():
                problems.append(f"{rel}: loads plotly.js from {src}, not from _static")
            attrs = next(s["attrs"] for s in parsed.scripts if s["attrs"].get("src") == src)
            if "defer" in attrs or "async" in attrs:
                problems.append(f"{rel}: plotly.min.js is deferred; inline figures would run first")
        for script in parsed.scripts:
            # plotly.min.js is ~3.6 MB; the largest explorer (the KV-cache calculator, every
            # frame fitted to the column and to a phone) is ~0.6 MB of JSON.
            if len(script["text"]) > 1_500_000:
                problems.append(f"{rel}: an inline script of {len(script['text'])} chars")
    assert not problems, "\n".join(problems)
    chapters = [p for p in toc_files() if p.startswith("chapters/")]
    if chapters:
        assert pages_with_figures > 0, "no built page has a plotly figure; chapters should"


def test_mathjax_is_served_from_the_book(edition_book):
    mathjax = edition_book / "_static" / "mathjax" / "tex-chtml.js"
    assert mathjax.is_file(), "MathJax was not copied into _static/mathjax"
    fonts_dir = edition_book / "_static" / "mathjax" / "output" / "chtml" / "fonts"
    fonts = list(fonts_dir.rglob("*.woff"))
    assert fonts, "MathJax's CHTML web fonts are missing from _static/mathjax"
    intro = parse_page(edition_book / "intro.html")
    srcs = [s["attrs"].get("src", "") for s in intro.scripts]
    assert any(urlsplit(s).path == "_static/mathjax/tex-chtml.js" for s in srcs), srcs


def test_page_weight_without_static_is_at_most_2_mb(edition_book):
    weights = {
        page.relative_to(edition_book).as_posix(): page_weight(page, edition_book)
        for page in built_pages(edition_book)
    }
    heavy = {name: w for name, w in weights.items() if w > MAX_PAGE_BYTES}
    assert not heavy, f"pages over {MAX_PAGE_BYTES} bytes without _static: {heavy}"
    assert weights, "no pages found"


def test_page_weight_counts_images():
    """The weight helper adds the images a page loads and skips _static (synthetic page)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        html_dir = Path(tmp)
        (html_dir / "_static").mkdir()
        (html_dir / "_images").mkdir()
        (html_dir / "_static" / "big.js").write_bytes(b"x" * 5000)
        (html_dir / "_images" / "fig.png").write_bytes(b"p" * 3000)
        page = html_dir / "page.html"
        page.write_text(
            '<html><head><script src="_static/big.js"></script></head>'
            '<body><img src="_images/fig.png"><img src="_images/fig.png"></body></html>'
        )
        assert page_weight(page, html_dir) == page.stat().st_size + 3000


# --------------------------------------------------------------------------------------------------
# the browser test


@pytest.fixture(scope="module")
def book_url(edition_book):
    """The built book served on localhost for the duration of the module."""
    with serve(edition_book) as url:
        yield url


# Runs in the page: walks the text outside code, scripts and typeset math, and reports what
# MathJax left behind.
MATH_REPORT_JS = r"""
() => {
  const math = Array.from(document.querySelectorAll('.math'));
  const untypeset = math.filter(el => !el.querySelector('mjx-container'))
                        .map(el => el.textContent.slice(0, 80));
  const skip = 'PRE, CODE, SCRIPT, STYLE, TEXTAREA, MJX-CONTAINER, .highlight';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const raw = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip)) continue;
    const text = node.textContent;
    if (/\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{/.test(text)) raw.push(text.trim().slice(0, 80));
  }
  return {
    n_math: math.length,
    n_typeset: document.querySelectorAll('mjx-container').length,
    untypeset: untypeset,
    raw_tex: raw,
    errors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent),
  };
}
"""

PLOTLY_REPORT_JS = r"""
() => Array.from(document.querySelectorAll('.plotly-graph-div, .js-plotly-plot')).map(gd => ({
  id: gd.id,
  plotted: gd.classList.contains('js-plotly-plot'),
  traces: (gd._fullData || []).filter(t => t.visible !== false).length,
  drawn: gd.querySelectorAll('g.trace, g.hm image, .imagelayer image').length,
}))
"""

PLOTLY_SETTLED_JS = r"""
() => Array.from(document.querySelectorAll('.plotly-graph-div'))
           .every(gd => gd._fullLayout && gd.querySelector('.main-svg'))
"""


def check_page(
    page, url: str, origin: str, *, expect_url: str | None = None, timeout_ms: int = 30_000
) -> list[str]:
    """Open ``url`` in ``page`` and return every problem found (empty list: all good).

    ``origin`` is the book's own server: any request elsewhere is aborted and reported.
    ``timeout_ms`` bounds each wait (MathJax start-up, plotly drawing).
    """
    problems: list[str] = []
    aborted: list[str] = []

    def route(route):
        request_url = route.request.url
        if request_url.startswith(origin):
            route.continue_()
        else:
            aborted.append(request_url)
            route.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "requestfailed",
        lambda r: (
            r.url.startswith(origin) and problems.append(f"request failed: {r.url} ({r.failure})")
        ),
    )
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))

    page.goto(url, wait_until="load")
    if expect_url is not None:
        page.wait_for_url(expect_url, wait_until="load", timeout=15_000)

    # MathJax: wait until it has finished typesetting (its startup promise resolves after the
    # first typeset pass), then look for anything left untypeset.
    if page.evaluate("() => document.querySelectorAll('.math').length") > 0:
        try:
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=timeout_ms,
            )
            page.evaluate("async () => { await MathJax.startup.promise; }")
        except Exception as exc:  # noqa: BLE001 - reported as a problem of the page
            problems.append(f"MathJax never started: {exc}")
    report = page.evaluate(MATH_REPORT_JS)
    if report["untypeset"]:
        problems.append(f"math left untypeset: {report['untypeset']}")
    if report["raw_tex"]:
        problems.append(f"raw TeX in the text: {report['raw_tex']}")
    if report["errors"]:
        problems.append(f"MathJax errors: {report['errors']}")
    if report["n_math"] and report["n_typeset"] < report["n_math"]:
        problems.append(f"{report['n_math']} math elements but {report['n_typeset']} typeset")

    # plotly: every figure div became a plot and drew its traces.
    try:
        page.wait_for_function(PLOTLY_SETTLED_JS, timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - the report below names the figures that did not draw
        pass
    for fig in page.evaluate(PLOTLY_REPORT_JS):
        if not fig["plotted"] or fig["traces"] == 0 or fig["drawn"] == 0:
            problems.append(f"plotly figure {fig['id']!r} did not draw: {fig}")

    problems.extend(f"request to another host aborted: {u}" for u in aborted)
    return problems


@pytest.mark.browser
def test_every_page_is_offline_clean_in_chromium(edition_book, book_url):
    from playwright.sync_api import sync_playwright

    pages = built_pages(edition_book)
    assert pages, "no pages built"
    failures: dict[str, list[str]] = {}
    figures_seen = 0
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            for path in pages:
                rel = path.relative_to(edition_book).as_posix()
                refresh = parse_page(path).refresh
                expect = None
                if refresh:  # index.html is a redirect to the root page
                    target = refresh.split("url=", 1)[1].strip()
                    expect = (
                        book_url
                        + (path.parent / target)
                        .resolve()
                        .relative_to(edition_book.resolve())
                        .as_posix()
                    )
                context = browser.new_context()
                page = context.new_page()
                try:
                    problems = check_page(page, book_url + rel, book_url, expect_url=expect)
                    figures_seen += page.evaluate(
                        "() => document.querySelectorAll('.js-plotly-plot').length"
                    )
                finally:
                    context.close()
                if problems:
                    failures[rel] = problems
        finally:
            browser.close()
    assert not failures, "\n".join(
        f"{name}:\n  " + "\n  ".join(problems) for name, problems in failures.items()
    )
    chapters = [p for p in toc_files() if p.startswith("chapters/")]
    if chapters:
        assert figures_seen > 0, "no plotly figure was drawn on any page"


BROKEN_PAGE = r"""<!DOCTYPE html>
<html><head>
<script src="https://cdn.example.invalid/lib.js"></script>
</head><body>
<p>Inline math that nothing typesets: <span class="math">\(x^2\)</span></p>
<p>Display math left raw: $$a + b$$</p>
<div class="plotly-graph-div" id="never-plotted"></div>
<script>console.error("boom");</script>
<script>throw new Error("uncaught");</script>
</body></html>
"""


@pytest.mark.browser
def test_browser_check_catches_each_fault(tmp_path):
    """The page check fails on a page with each fault it looks for (a negative control)."""
    from playwright.sync_api import sync_playwright

    (tmp_path / "broken.html").write_text(BROKEN_PAGE, encoding="utf-8")
    (tmp_path / "clean.html").write_text("<html><body><p>plain</p></body></html>")
    with serve(tmp_path) as url, sync_playwright() as pw:
        browser = launch(pw)
        try:
            context = browser.new_context()
            problems = check_page(context.new_page(), url + "broken.html", url, timeout_ms=2_000)
            clean = check_page(context.new_page(), url + "clean.html", url, timeout_ms=2_000)
            context.close()
        finally:
            browser.close()
    text = "\n".join(problems)
    assert "request to another host aborted: https://cdn.example.invalid/lib.js" in text, text
    assert "console error: boom" in text, text
    assert "page error:" in text and "uncaught" in text, text
    assert "MathJax never started" in text, text
    assert "math left untypeset" in text, text
    assert "raw TeX in the text" in text and "$$a + b$$" in text, text
    assert "plotly figure 'never-plotted' did not draw" in text, text
    assert clean == [], clean
