"""The page as a reader sees it (issue 10): every page of both editions, at 1280 and 390 px.

One Chromium, one context per width, one tab reused for every page; each page is loaded from a
localhost server (every other request aborted), left to settle (MathJax typeset, plotly drawn,
images and fonts loaded), measured by one script in the page (tests/browser/layout.py, which
defines every finding), then every explorer's first slider is moved one step and its labels are
measured again (new label findings are added). The tests below read those findings:

* display equations: none wider than its box at 1280 px; at 390 px one may scroll inside its
  own box, but then with a visible cue (the edge shadow of book/_static/attnbook.css), and
  none may stick out of the page;
* no code or output block scrolls sideways at 1280 px; at 390 px text outputs wrap, and code
  blocks and printed tables that scroll show the cue;
* figures are shown at ≥ 90 % of the width they were drawn at (1280 px), and no image is wider
  than its box (either width);
* explorer labels (titles, axis titles, annotations, legends, ticks, slider labels) neither
  overlap one another nor stick out of their figure (either width);
* the page itself never scrolls sideways;
* every chapter page links its ``.ipynb``.

Set ``ATTNBOOK_LAYOUT_HTML`` to a built HTML folder to measure that folder instead of the
``built_book`` fixture's strict build (e.g. an older build, to see the checks fail). The last
test is a negative control on a synthetic page with each fault, and a clean page without.
The counts for a whole book: ``tests/browser/layout_report.py HTML_DIR``.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import layout
import pytest
from layout_report import all_pages, measure_book, serve

from browser import require_chromium

pytestmark = pytest.mark.browser

HTML_ENV = "ATTNBOOK_LAYOUT_HTML"
#: A figure shown below this fraction of the width it was drawn at fails (1280 px).
MIN_SHOWN_RATIO = 0.90
#: At most this many findings are listed in a failure message (the count is always given).
SHOW_AT_MOST = 40


@pytest.fixture(scope="module", params=["override"] if os.environ.get(HTML_ENV) else ["en", "zh"])
def layout_html(request) -> Path:
    """The built HTML to measure: each edition of the strict build of the book (English, then
    Chinese: the same figures with other labels, which must fit as well), or
    $ATTNBOOK_LAYOUT_HTML (measured once)."""
    override = os.environ.get(HTML_ENV)
    if request.param == "override":
        path = Path(override)
        assert (path / "intro.html").is_file(), f"{HTML_ENV}={override} holds no built book"
        return path
    return request.getfixturevalue("built_editions")[request.param]


@pytest.fixture(scope="module")
def measured(layout_html):
    """(pages, findings, problems) of every page at both widths."""
    require_chromium()
    pages = all_pages(Path(layout_html))
    assert pages, f"no pages in {layout_html}"
    findings, problems = measure_book(Path(layout_html), pages, layout.WIDTHS, step_sliders=True)
    return pages, findings, problems


def select(findings, *, kind, width=None, subs=None, keep=None):
    return [
        f
        for f in findings
        if f["kind"] == kind
        and (width is None or f["width"] == width)
        and (subs is None or f["sub"] in subs)
        and (keep is None or keep(f))
    ]


def report(found: list[dict], what: str) -> str:
    lines = [layout.format_finding(f) for f in found[:SHOW_AT_MOST]]
    more = f"\n  ... and {len(found) - SHOW_AT_MOST} more" if len(found) > SHOW_AT_MOST else ""
    return f"{len(found)} {what}:\n  " + "\n  ".join(lines) + more


@pytest.mark.book
def test_every_page_settled_and_stayed_offline(measured):
    pages, _, problems = measured
    assert len(pages) >= 5, pages
    assert not problems, "pages did not settle or left the book:\n  " + "\n  ".join(problems)


@pytest.mark.book
def test_no_display_equation_is_wider_than_its_column_at_1280(measured):
    found = select(measured[1], kind="equation", width=1280)
    assert not found, report(
        found, "display equations wider than their box at 1280 px (break them into aligned lines)"
    )


@pytest.mark.book
def test_display_equations_scroll_visibly_inside_their_box_at_390(measured):
    found = select(
        measured[1],
        kind="equation",
        width=390,
        keep=lambda f: f["sub"] == "overflows" or not f["numbers"]["cue"],
    )
    assert not found, report(
        found,
        "display equations at 390 px that stick out of the page, or scroll with no visible cue",
    )


@pytest.mark.book
def test_no_code_or_output_block_scrolls_sideways_at_1280(measured):
    # A Markdown table (sub "prose-...") may scroll with its edge shadow, as a wide reference
    # table in the API index does; that cue is held at 390 px below.
    found = select(
        measured[1], kind="scroll", width=1280, keep=lambda f: not f["sub"].startswith("prose-")
    )
    assert not found, report(found, "code/output blocks that scroll sideways at 1280 px")


@pytest.mark.book
def test_printed_output_wraps_on_a_phone(measured):
    found = select(measured[1], kind="scroll", width=390, subs={"output-pre"})
    assert not found, report(
        found, "text outputs that scroll sideways at 390 px (attnbook.css wraps them on a phone)"
    )


@pytest.mark.book
def test_code_and_printed_tables_scroll_visibly_at_390(measured):
    found = select(
        measured[1],
        kind="scroll",
        width=390,
        keep=lambda f: (
            (f["sub"].startswith(("code-", "prose-")) or f["numbers"]["printed"])
            and not f["numbers"]["cue"]
        ),
    )
    assert not found, report(
        found,
        "code blocks, printed tables or prose tables that scroll at 390 px with no visible cue",
    )


@pytest.mark.book
def test_figures_are_shown_at_the_size_they_were_drawn_at_1280(measured):
    found = select(
        measured[1],
        kind="shrunk",
        width=1280,
        subs={"below70", "below95"},
        keep=lambda f: f["numbers"]["ratio"] < MIN_SHOWN_RATIO,
    )
    assert not found, report(
        found,
        f"figures shown below {MIN_SHOWN_RATIO:.0%} of their drawn "
        "width at 1280 px (draw them with viz.figsize)",
    )


@pytest.mark.book
def test_no_image_is_wider_than_its_box(measured):
    found = select(measured[1], kind="shrunk", subs={"wider"})
    assert not found, report(found, "images wider than their box")


@pytest.mark.book
def test_explorer_labels_neither_overlap_nor_stick_out(measured):
    found = select(measured[1], kind="labels")
    assert not found, report(
        found,
        "overlapping or clipped labels in plotly figures/explorers "
        "(both widths, as loaded and after one slider step)",
    )


@pytest.mark.book
def test_no_page_scrolls_sideways(measured):
    found = select(measured[1], kind="page")
    assert not found, report(found, "pages wider than the viewport")


@pytest.mark.book
def test_every_chapter_page_links_its_notebook(measured):
    pages, findings, _ = measured
    chapters = [p for p in pages if p.startswith("chapters/")]
    assert chapters, "no chapter pages were measured"
    found = select(findings, kind="ipynb", keep=lambda f: f["page"] in chapters)
    missing = sorted({f["page"] for f in found})
    assert not missing, f"chapter pages with no link to an .ipynb: {missing}"


# ------------------------------------------------------------------------------------------
# Negative control: each measurement fires on a synthetic page with its fault, and not on a
# page without faults.


def png(width: int, height: int) -> bytes:
    """A white RGB PNG of the given size (no imaging library needed)."""

    def chunk(tag, data):
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    raw = b"".join(b"\x00" + b"\xff" * (3 * width) for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


FAULTY = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="plotly.min.js"></script>
<style>body{margin:0} .bd-article{width:600px;padding:0 20px}
mjx-container{display:block} mjx-math{display:inline-block}</style></head>
<body><main><article class="bd-article">
<section id="eq"><div class="eq"><mjx-container display="true"><mjx-math
  style="width:2000px">x</mjx-math></mjx-container></div>
<div class="eq"><mjx-container display="true" style="overflow-x:auto"><mjx-math
  style="width:900px">y</mjx-math></mjx-container></div></section>
<section id="code"><pre style="overflow:auto">%s</pre></section>
<section id="figs"><div class="cell_output"><img src="wide.png" style="max-width:100%%"></div>
<div class="cell_output"><div><img src="wide.png" style="width:700px"></div></div></section>
<section id="plot"><div id="fig" class="plotly-graph-div" style="width:600px;height:300px"></div>
<script>Plotly.newPlot('fig', [{x: [1, 2], y: [1, 2]}], {
  width: 600, height: 300, margin: {l: 40, r: 10, t: 30, b: 30},
  annotations: [{text: 'first long label', x: 1.5, y: 1.5, showarrow: false},
                {text: 'second long label', x: 1.5, y: 1.5, showarrow: false},
                {text: 'sticks out of the figure', xref: 'paper', x: 1.08, y: 1.5,
                 showarrow: false, xanchor: 'left'}]});</script></section>
</article><div id="wide" style="width:1500px;height:5px"></div></main></body></html>
""" % ("x = 1  # " + "a" * 150)

CLEAN = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="plotly.min.js"></script>
<style>body{margin:0} mjx-container{display:block}</style></head>
<body><main><article class="bd-article" style="width:600px">
<a href="chapter.ipynb">notebook</a>
<div class="eq"><mjx-container display="true"><mjx-math style="display:inline-block;
  width:100px">z</mjx-math></mjx-container></div>
<pre>short</pre>
<div class="cell_output"><img src="small.png"></div>
<div class="cell_output"><picture><source media="(max-width: 10px)" srcset="small.png"><img
  src="small.png" width="300" height="20"></picture></div>
<div id="fig" class="plotly-graph-div" style="width:560px;height:300px"></div>
<script>Plotly.newPlot('fig', [{x: [1, 2], y: [1, 2]}], {width: 560, height: 300,
  title: {text: 'A title'}, xaxis: {title: {text: 'x'}}, yaxis: {title: {text: 'y'}}});
</script></article></main></body></html>
"""


def test_the_measurements_catch_each_fault(tmp_path):
    require_chromium()
    import plotly
    from playwright.sync_api import sync_playwright

    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", tmp_path)
    (tmp_path / "wide.png").write_bytes(png(1000, 20))
    (tmp_path / "small.png").write_bytes(png(300, 20))
    (tmp_path / "faulty.html").write_text(FAULTY, encoding="utf-8")
    (tmp_path / "clean.html").write_text(CLEAN, encoding="utf-8")
    with serve(tmp_path) as base, sync_playwright() as pw:
        from browser import launch

        browser = launch(pw)
        try:
            context = layout.new_context(browser, 1280)
            aborted = layout.block_other_hosts(context, base)
            page = context.new_page()
            assert layout.load(page, base + "faulty.html", timeout_ms=10_000) == []
            faulty = layout.measure(page, name="faulty.html", width=1280)
            assert layout.load(page, base + "clean.html", timeout_ms=10_000) == []
            clean = layout.measure(page, name="clean.html", width=1280)
            context.close()
        finally:
            browser.close()
    assert aborted == []
    got = layout.counts(faulty)
    text = "\n".join(layout.format_finding(f) for f in faulty)
    assert got[("faulty.html", 1280, "equation", "overflows")] == 1, text
    assert got[("faulty.html", 1280, "equation", "scrolls")] == 1, text
    scrolling_eq = select(faulty, kind="equation", subs={"scrolls"})[0]
    assert scrolling_eq["numbers"]["cue"] is False, text
    assert 890 <= scrolling_eq["numbers"]["content"] <= 910, text
    assert got[("faulty.html", 1280, "scroll", "code-pre")] == 1, text
    scrolling_code = select(faulty, kind="scroll", subs={"code-pre"})[0]
    assert scrolling_code["numbers"]["cue"] is False, text
    assert got[("faulty.html", 1280, "shrunk", "below70")] == 1, text
    shrunk = select(faulty, kind="shrunk", subs={"below70"})[0]
    assert shrunk["numbers"]["natural"] == 1000 and abs(shrunk["numbers"]["ratio"] - 0.6) < 0.01
    assert got[("faulty.html", 1280, "shrunk", "wider")] == 1, text
    overlaps = select(faulty, kind="labels", subs={"overlap"})
    assert any(
        "first long label" in f["what"] and "second long label" in f["what"] for f in overlaps
    ), text
    clipped = select(faulty, kind="labels", subs={"clipped"})
    assert any("sticks out" in f["what"] for f in clipped), text
    assert got[("faulty.html", 1280, "ipynb", "missing")] == 1, text
    page_wide = select(faulty, kind="page")
    assert len(page_wide) == 1 and "div #wide" in page_wide[0]["what"], text
    assert page_wide[0]["numbers"]["scroll"] >= 1500, text
    assert all("faulty.html @ 1280 px" in layout.format_finding(f) for f in faulty)
    assert clean == [], "\n".join(layout.format_finding(f) for f in clean)
