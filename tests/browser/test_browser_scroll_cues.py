"""Boxes that scroll sideways show it, and nothing widens the page (book/_static/attnbook.css).

A toy page styled by the book's own stylesheet, with MathJax 3.2.2 (the copy the build puts in
``_static/mathjax``, from the sphinx-mathjax-offline package), holds the three kinds of box a
reader found wrong, copied from the built book:

* two display formulas of chapter 4 that are 17 and 26 px too wide for a 390 px phone: they
  scrolled, but the 2.5rem covers of the edge shadows (which sit at the ends of the content)
  hid the shadow when there is less than that to scroll; a formula far wider than a phone, whose
  shadow always showed, is the control;
* the summary of a collapsed full listing, "The full class:
  attnbook.experiments.ScaledMultiHeadAttention", one word wider than a phone's column, which
  made chapter 4's page 406 px wide at 390 px;
* chapter 9's printed table with the line printed under it, 52 px too long at 1280 px: the
  line's own ``pre`` scrolled, with no shadow (the output around it carries the shadow, and it
  does not scroll).

"Shows a shadow" is measured in pixels, as a reader sees it: the text in the box is made
transparent, the strip along the box's edge is captured once as drawn and once with the box's
background images removed, and the largest difference must be at least half of what the
full shadow (``--attnbook-scroll-shadow``, 22 % black) makes on white. The right edge is
measured with the box scrolled to its start, the left edge with it scrolled to its end.

Set ``ATTNBOOK_CSS`` to another stylesheet to measure it instead (e.g. an older
``attnbook.css``, to see the tests fail).
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import layout
import pytest

from browser import launch, require_chromium, serve

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CSS = ROOT / "book" / "_static" / "attnbook.css"
#: Half the full shadow's darkening of white (22 % black at the edge: 56 levels of 255).
MIN_SHADOW_LEVELS = 28
#: Width of the captured edge strip, px (the shadow is 0.8rem = 12.8 px, darkest at the edge).
STRIP_PX = 3
PHONE, DESKTOP = 390, 1280

#: The temperature identity and the query's gradient of chapter 4 (17 and 26 px too wide at
#: 390 px in the built book), and a long formula as the control.
TEMPERATURE = r"""\begin{split}
\begin{aligned}
&\operatorname{softmax}\!\left(\frac{q \cdot k_j}{\sqrt{d_k}}\right)_{j=1..S} \\
&\quad = \operatorname{softmax}_{T}\big(q \cdot k_j\big)_{j=1..S}
\quad\text{with } T = \sqrt{d_k}.
\end{aligned}
\end{split}"""
GRADIENT = r"""\frac{\partial \ell}{\partial p} = v, \qquad
\frac{\partial \ell}{\partial z} = J v, \qquad
\frac{\partial \ell}{\partial q} = c\, K^\top J v."""
LONG = r"""\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(
\frac{Q K^\top}{\sqrt{d_k}} + M\right) V \quad\text{with } M_{ij} = 0 \text{ where } j \le i
\text{ and } -\infty \text{ elsewhere}"""
SHORT = r"y = x"
PRINTED_LINE = (
    "adds / reads, every seed: step 0 0.62 to 0.88; step 29: 0.11 to 0.15; with warmup 0.60 to 1.39"
)

PAGE = """<!DOCTYPE html><html data-theme="light"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  /* What the theme (pydata-sphinx-theme) gives the book's stylesheet to work with. */
  :root {{ --pst-color-surface: #f3f4f5; --pst-color-background: #ffffff;
           --pst-color-border: #d1d5da; --pst-font-family-monospace: monospace; }}
  body {{ margin: 0; background: var(--pst-color-background); font-size: 16px;
          font-family: system-ui, sans-serif; }}
  .bd-article {{ max-width: 688px; margin: 0 auto; padding: 0 16px; }}
  .bd-article pre {{ overflow: auto; }}
  div.math {{ display: flex; }}
</style>
<link rel="stylesheet" href="attnbook.css">
<script>MathJax = {{options: {{processHtmlClass: "math"}}}};</script>
<script defer src="mathjax/tex-chtml.js"></script>
</head><body><main><article class="bd-article">
<section id="math">
<p>Inline math, with its hidden copy for screen readers:
<span class="math">\\(T = \\sqrt{{d_k}}\\)</span>.</p>
<div class="math" id="temperature" data-over="26">\\[{temperature}\\]</div>
<div class="math" id="gradient" data-over="17">\\[{gradient}\\]</div>
<div class="math" id="long">\\[{long}\\]</div>
<div class="math" id="short">\\[{short}\\]</div>
</section>
<section id="listing"><div class="cell_output">
<details class="attnbook-full-listing"><summary>The full class:
attnbook.experiments.ScaledMultiHeadAttention</summary><pre>class X: pass</pre></details>
</div></section>
<section id="code"><div class="highlight"><pre>x = 1  # {code}</pre></div></section>
<section id="printed"><div class="cell_output"><div class="output text_html">
<pre class="attnbook-printed">Post, seed 0: share that varies, of what a branch reads and adds</pre>
<table class="attnbook-printed-table"><thead><tr><th>branch</th><th class="num">step 0: reads</th>
<th class="num">adds</th><th class="num">step 29: reads</th><th class="num">adds</th></tr></thead>
<tbody><tr><td>layer 1, FFN</td><td class="num">0.43</td><td class="num">0.34</td>
<td class="num">0.41</td><td class="num">0.043</td></tr></tbody></table>
<pre class="attnbook-printed">{printed}</pre></div></div></section>
</article></main></body></html>
"""

#: Each formula with ``data-over`` gets a box that many px narrower than it is typeset (the
#: book's column at 390 px; the toy page's font is not the theme's, so its formulas have
#: other widths).
NARROW_JS = r"""
() => {
  for (const div of document.querySelectorAll('div.math[data-over]')) {
    const w = div.querySelector('mjx-math').getBoundingClientRect().width;
    div.style.width = (w - parseFloat(div.dataset.over)) + 'px';
  }
}
"""

#: [width of the summary's long name on one line, width of the column].
WORD_JS = r"""
() => {
  const summary = document.querySelector('#listing summary');
  const probe = document.createElement('span');
  probe.style.whiteSpace = 'nowrap';
  probe.textContent = 'attnbook.experiments.ScaledMultiHeadAttention';
  summary.appendChild(probe);
  const w = probe.getBoundingClientRect().width;
  probe.remove();
  return [w, summary.parentElement.clientWidth];
}
"""

#: Every visible element of the article that scrolls sideways, tagged for the probe.
SCROLLERS_JS = r"""
() => {
  const found = [];
  let n = 0;
  for (const el of document.querySelectorAll('.bd-article *')) {
    const cs = getComputedStyle(el);
    if (!['auto', 'scroll'].includes(cs.overflowX)) continue;
    if (el.getClientRects().length === 0 || el.closest('details:not([open])')) continue;
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    el.setAttribute('data-cue-probe', String(n));
    const sec = el.closest('[id]');
    found.push({n: n++, tag: el.tagName.toLowerCase(), where: sec ? sec.id : '',
                over: el.scrollWidth - el.clientWidth});
  }
  return found;
}
"""

#: Text and rules in the probed box are made transparent: only backgrounds are compared.
HIDE_TEXT_CSS = """
[data-cue-probe], [data-cue-probe] *, [data-cue-probe] *::before, [data-cue-probe] *::after {
  color: transparent !important; -webkit-text-fill-color: transparent !important;
  border-color: transparent !important; text-shadow: none !important;
}
"""

#: Scrolls box ``n`` to its start or end, waits two frames; returns the strip along the edge
#: that should then show a shadow (viewport coordinates).
PLACE_JS = r"""
async ({n, end, strip, bare}) => {
  const el = document.querySelector(`[data-cue-probe="${n}"]`);
  el.scrollIntoView({block: 'center'});
  el.scrollLeft = end ? el.scrollWidth : 0;
  el.style.setProperty('background-image', bare ? 'none' : '', bare ? 'important' : '');
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const r = el.getBoundingClientRect();
  const top = Math.max(0, r.top + el.clientTop);
  const bottom = Math.min(innerHeight, r.top + el.clientTop + el.clientHeight);
  const left = r.left + el.clientLeft + (end ? 0 : el.clientWidth - strip);
  return {x: left, y: top, width: strip, height: Math.max(1, bottom - top)};
}
"""


def _strip(page, n: int, *, end: bool, bare: bool):
    from PIL import Image

    clip = page.evaluate(PLACE_JS, {"n": n, "end": end, "strip": STRIP_PX, "bare": bare})
    return Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB")


def edge_shadows(page, n: int) -> dict:
    """Largest colour difference (0-255) a shadow makes along each edge of box ``n``."""
    from PIL import ImageChops

    out = {}
    for edge, end in (("right", False), ("left", True)):
        drawn = _strip(page, n, end=end, bare=False)
        bare = _strip(page, n, end=end, bare=True)
        out[edge] = max(hi for _, hi in ImageChops.difference(drawn, bare).getextrema())
    page.evaluate(
        'n => document.querySelector(`[data-cue-probe="${n}"]`).style'
        ".removeProperty('background-image')",
        n,
    )
    return out


def mathjax_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sphinx-mathjax-offline (the book's MathJax) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """{width: (page scrollWidth, clientWidth, [scrolling boxes with their edge shadows],
    [width of the summary's long name, its column])}."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    site = tmp_path_factory.mktemp("scroll-cues")
    css = Path(os.environ.get("ATTNBOOK_CSS", CSS))
    shutil.copy(css, site / "attnbook.css")
    os.symlink(mathjax_dir(), site / "mathjax")
    (site / "index.html").write_text(
        PAGE.format(
            temperature=TEMPERATURE,
            gradient=GRADIENT,
            long=LONG,
            short=SHORT,
            code="a" * 150,
            printed=PRINTED_LINE,
        ),
        encoding="utf-8",
    )
    result = {}
    with serve(site) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            for width in (PHONE, DESKTOP):
                context = layout.new_context(browser, width)
                aborted = layout.block_other_hosts(context, base)
                page = context.new_page()
                assert layout.load(page, base + "index.html", timeout_ms=20_000) == []
                assert page.evaluate("() => document.querySelectorAll('mjx-container').length")
                page.evaluate(NARROW_JS)
                sw, cw = page.evaluate(
                    "() => [document.scrollingElement.scrollWidth, "
                    "document.scrollingElement.clientWidth]"
                )
                word = page.evaluate(WORD_JS)
                boxes = page.evaluate(SCROLLERS_JS)
                page.add_style_tag(content=HIDE_TEXT_CSS)
                for box in boxes:
                    box.update(edge_shadows(page, box["n"]))
                result[width] = (sw, cw, boxes, word)
                context.close()
                assert aborted == []
        finally:
            browser.close()
    return result


def describe(boxes) -> str:
    return "\n  ".join(
        f"{b['tag']} #{b['where']}: {b['over']} px to scroll, shadow right {b['right']}, "
        f"left {b['left']}"
        for b in boxes
    )


def test_the_toy_page_has_the_boxes_that_scroll_on_a_phone(measured):
    """The probe sees what it must judge: at 390 px the three formulas and the code scroll."""
    boxes = measured[PHONE][2]
    where = sorted(b["where"] for b in boxes)
    for name in ("temperature", "gradient", "long", "code"):
        assert name in where, describe(boxes)
    assert "short" not in where, describe(boxes)
    small = sorted(b["over"] for b in boxes if b["where"] in ("temperature", "gradient"))
    assert [round(x) for x in small] in ([17, 26], [17, 27], [16, 26]), describe(boxes)


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_every_box_that_scrolls_shows_its_edge_shadows(measured, width):
    boxes = measured[width][2]
    faint = [b for b in boxes if b["right"] < MIN_SHADOW_LEVELS or b["left"] < MIN_SHADOW_LEVELS]
    assert not faint, (
        f"boxes that scroll sideways at {width} px with no visible edge shadow "
        f"(< {MIN_SHADOW_LEVELS} levels):\n  " + describe(faint)
    )


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_page_is_no_wider_than_the_viewport(measured, width):
    sw, cw, _, word = measured[width]
    if width == PHONE:  # the summary's name alone is wider than a phone's column
        assert word[0] > word[1], word
    assert sw <= cw, f"the page is {sw} px wide in a {cw} px viewport"


def test_a_line_printed_with_a_table_wraps_at_1280(measured):
    boxes = [b for b in measured[DESKTOP][2] if b["where"] == "printed"]
    assert not boxes, "printed output that scrolls at 1280 px:\n  " + describe(boxes)
