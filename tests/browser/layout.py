"""The page as a reader sees it: layout measurements of a built page in Chromium (issue 10).

Given a Playwright page already loaded at some viewport width, :func:`settle` waits until
MathJax has typeset, plotly has drawn, images have loaded and fonts are in, and
:func:`measure` runs one JavaScript function in the page (``MEASURE_JS``) that returns a list
of *findings*. Each finding is a dict::

    {"page": "chapters/03-scaling-variance.html", "width": 390, "kind": "equation",
     "sub": "scrolls", "what": "\\\\operatorname{softmax}(QK^\\\\top ...", "where": "#section-id",
     "numbers": {"content": 512.3, "box": 342.0}}

Kinds (``KINDS``) and their sub-kinds:

``equation``
    A display equation (MathJax 3 CHTML ``mjx-container[display="true"]``) whose typeset
    content (``mjx-math``) is wider than the box it sits in (+1 px). ``sub`` is ``"scrolls"``
    when an element between the formula and its ``div.math`` scrolls sideways
    (``overflow-x: auto|scroll``) and stays inside the page, ``"overflows"`` when the formula is
    cut or sticks out of the page (no scroll box, or the scroll box itself is wider than the
    viewport). ``numbers["cue"]`` says whether the scroll box draws a visible cue (a background
    image, e.g. an edge shadow, or a visible scrollbar).
``scroll``
    A visible block of code or output that scrolls sideways: a ``pre`` (listing, text output)
    or an output area / output table (in ``.cell_output``) whose ``scrollWidth`` exceeds its
    ``clientWidth`` by more than 1 px, or an output table wider than its box. Blocks inside a
    closed ``<details>`` or not displayed are ignored. One finding per block (a ``pre`` inside a
    scrolling output is not counted twice). ``numbers["cue"]`` as for equations;
    ``numbers["printed"]``: the block is or holds a printed table (``attnbook.printed.table``).
    A Markdown table's scroll box in the prose (the theme's ``.pst-scrollable-table-container``)
    counts too; its ``sub`` starts with ``"prose-"`` (``"code-"``: outside any cell output,
    ``"output-"``: inside one).
``shrunk``
    A visible image in a cell output (or a glued figure) drawn at ``naturalWidth`` px and shown
    narrower: ``sub`` ``"below70"`` (shown < 70 % of its drawn width), ``"below95"``
    (70 % ≤ shown < 95 %); ``numbers["ratio"]`` is shown/drawn. ``"wider"``: any visible image
    wider than its box (its parent's content box or the viewport), unless that box scrolls
    sideways and itself fits the page.
``labels``
    Inside each plotly figure (``.js-plotly-plot``): two text elements (titles, axis titles,
    annotations such as subplot titles, legend texts, slider and current-value labels, tick
    and colorbar labels, the numbers drawn on the data; not hover labels) whose boxes overlap
    by more than ``OVERLAP_PX2`` px² (``sub`` ``"overlap"``, or ``"data-overlap"`` when both
    are numbers drawn on the data, e.g. a heatmap's cell values; boxes are the SVG text boxes,
    as rotated on screen, each inset by ``INSET_PX`` px so glyph-free leading does not count;
    each overlapping *pair* is one finding), or a text sticking out of the figure's box by more
    than ``OVERLAP_PX2`` px² (``"clipped"``).
    In an explorer (``.attnbook-explorer``) the HTML controls (labels, sliders, value outputs)
    are checked the same way against one another and the explorer's box
    (``"control-overlap"``, ``"control-clipped"``).
``ipynb``
    Reported once per page (``sub`` ``"missing"``) when the page has no ``<a>`` whose href ends
    in ``.ipynb``; whether that matters depends on the page (chapters must have one).
``page``
    The page itself scrolls sideways (``scrollWidth`` of the document > its ``clientWidth``);
    ``what`` names up to three outermost elements that stick out of the viewport.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

KINDS = ("equation", "scroll", "shrunk", "labels")
WIDTHS = (1280, 390)
VIEWPORT_HEIGHT = 900
#: Overlap (or area outside the figure) below this many px² is not counted.
OVERLAP_PX2 = 4.0
#: Each text box is shrunk by this many px on every side before overlaps are computed.
INSET_PX = 1.0
#: Seconds to wait for MathJax, plotly and images, each.
TIMEOUT_MS = 30_000

SETTLE_JS = r"""
async (timeoutMs) => {
  const deadline = Date.now() + timeoutMs;
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const notes = [];
  if (document.querySelector('.math')) {
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
      if (Date.now() > deadline) { notes.push('MathJax never started'); break; }
      await sleep(50);
    }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      await MathJax.startup.promise;
    }
  }
  document.querySelectorAll('img[loading="lazy"]').forEach(img => { img.loading = 'eager'; });
  const ready = () => {
    const plots = Array.from(document.querySelectorAll('.plotly-graph-div'));
    const imgs = Array.from(document.querySelectorAll('img'));
    return plots.every(gd => gd._fullLayout && gd.querySelector('.main-svg')) &&
           imgs.every(img => img.complete);
  };
  while (!ready()) {
    if (Date.now() > deadline) { notes.push('plotly figures or images did not finish'); break; }
    await sleep(50);
  }
  await document.fonts.ready;
  await frames();
  return notes;
}
"""

MEASURE_JS = r"""
({overlapPx2, insetPx}) => {
  const out = [];
  const vw = document.documentElement.clientWidth;
  const r1 = x => Math.round(x * 10) / 10;

  const visible = el => {
    if (el.closest('details:not([open])')) return false;
    if (el.getClientRects().length === 0) return false;
    const cs = getComputedStyle(el);
    return cs.visibility !== 'hidden' && cs.display !== 'none';
  };
  const where = el => {
    const sec = el.closest('section[id]') || el.closest('[id]');
    return sec && sec.id ? '#' + sec.id : '';
  };
  const short = (s, n = 60) => (s || '').replace(/\s+/g, ' ').trim().slice(0, n);
  const scrollsX = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);

  // ---- display equations --------------------------------------------------------------------
  let mathItems = [];
  try { mathItems = MathJax.startup.document.getMathItemsWithin(document.body); } catch (e) {}
  const texOf = c => {
    const item = mathItems.find(m => m.typesetRoot === c);
    if (item) return item.math;
    const mml = c.querySelector('mjx-assistive-mml');
    return mml ? mml.textContent : c.textContent;
  };
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    if (!visible(c)) continue;
    const math = c.querySelector('mjx-math');
    if (!math) continue;
    const block = c.closest('div.math') || c.parentElement;
    const content = math.getBoundingClientRect().width;
    const box = Math.min(c.clientWidth, block.clientWidth);
    if (content <= box + 1) continue;
    // The scroll box: the innermost element from the container up to div.math that scrolls.
    let scroller = null;
    for (let el = c; el; el = el.parentElement) {
      if (scrollsX(el)) { scroller = el; break; }
      if (el === block) break;
    }
    let sub = 'overflows';
    let cue = false;
    if (scroller) {
      const rect = scroller.getBoundingClientRect();
      if (rect.left >= -1 && rect.right <= vw + 1) sub = 'scrolls';
      const cs = getComputedStyle(scroller);
      cue = cs.backgroundImage !== 'none' || scroller.offsetHeight - scroller.clientHeight > 2;
    }
    out.push({kind: 'equation', sub, what: short(texOf(c)), where: where(c),
              numbers: {content: r1(content), box: r1(box), cue: cue}});
  }

  // ---- code and output blocks that scroll sideways -----------------------------------------
  const seen = new Set();
  const blocks = Array.from(document.querySelectorAll(
    '.cell_output .output, .cell_output > div, .cell_output table, pre, ' +
    '.bd-article .pst-scrollable-table-container'));
  // Outermost first, so a pre inside a scrolling output is not counted twice.
  const depth = el => { let d = 0; for (; el; el = el.parentElement) d++; return d; };
  blocks.sort((a, b) => depth(a) - depth(b));
  for (const el of blocks) {
    if (!visible(el)) continue;
    if (Array.from(seen).some(s => s.contains(el))) continue;
    const isTable = el.tagName === 'TABLE';
    let sub = null, over = 0;
    if (el.scrollWidth > el.clientWidth + 1 && (scrollsX(el) || el.tagName === 'PRE')) {
      sub = isTable ? 'table' : (el.tagName === 'PRE' ? 'pre' : 'output');
      over = el.scrollWidth - el.clientWidth;
    } else if (isTable) {
      const parent = el.parentElement;
      const w = el.getBoundingClientRect().width;
      if (w > parent.clientWidth + 1) { sub = 'table'; over = w - parent.clientWidth; }
    }
    if (!sub) continue;
    seen.add(el);
    const inProse = el.matches('.pst-scrollable-table-container');  // a Markdown table's box
    const inCode = !inProse && !el.closest('.cell_output');
    const text = el.innerText || el.textContent;
    const cs = getComputedStyle(el);
    const cue = cs.backgroundImage !== 'none' || el.offsetHeight - el.clientHeight > 2;
    const printedTable = 'table.attnbook-printed-table';
    const printed = el.matches(printedTable) || !!el.querySelector(printedTable);
    const place = inProse ? 'prose-' : (inCode ? 'code-' : 'output-');
    out.push({kind: 'scroll', sub: place + sub,
              what: short(text.split('\n').find(l => l.trim()) || '', 50), where: where(el),
              numbers: {scroll: el.scrollWidth, client: el.clientWidth, over: r1(over),
                        cue: cue, printed: printed}});
  }

  // ---- images: shrunk, or wider than their box ----------------------------------------------
  const content = document.querySelector('main, article, .bd-article') || document.body;
  for (const img of content.querySelectorAll('img')) {
    if (!visible(img) || !img.naturalWidth) continue;
    const shown = img.getBoundingClientRect();
    const src = (img.currentSrc || img.getAttribute('src') || '').split('/').pop();
    const what = short((img.getAttribute('alt') || '') + ' ' + src, 60);
    // The box of a <picture> (inline) is its parent's.
    const parent = img.parentElement.tagName === 'PICTURE' ? img.parentElement.parentElement
                                                           : img.parentElement;
    const ps = getComputedStyle(parent);
    const pbox = parent.clientWidth - parseFloat(ps.paddingLeft) - parseFloat(ps.paddingRight);
    // A box that scrolls sideways and fits the page holds a wide image on purpose (a figure
    // too wide for a phone, edition_outputs.WIDE_FIGURE_CLASS).
    const scrollBox = scrollsX(parent) && parent.getBoundingClientRect().right <= vw + 1;
    if (!scrollBox && (shown.width > pbox + 1 || shown.right > vw + 1)) {
      out.push({kind: 'shrunk', sub: 'wider', what, where: where(img),
                numbers: {shown: r1(shown.width), box: r1(pbox), right: r1(shown.right),
                          viewport: vw}});
    }
    const inOutput = img.closest('.cell_output, .output, figure, .figure');
    if (!inOutput || img.naturalWidth < 100) continue;
    const ratio = shown.width / img.naturalWidth;
    if (ratio < 0.95) {
      out.push({kind: 'shrunk', sub: ratio < 0.7 ? 'below70' : 'below95', what,
                where: where(img),
                numbers: {natural: img.naturalWidth, shown: r1(shown.width),
                          ratio: Math.round(ratio * 1000) / 1000}});
    }
  }

  // ---- plotly labels: overlapping or clipped ------------------------------------------------
  const area = poly => {
    let a = 0;
    for (let i = 0; i < poly.length; i++) {
      const p = poly[i], q = poly[(i + 1) % poly.length];
      a += p[0] * q[1] - q[0] * p[1];
    }
    return Math.abs(a) / 2;
  };
  // Sutherland-Hodgman: the part of convex polygon `subject` inside convex polygon `clip`.
  const clipPoly = (subject, clip) => {
    let outp = subject;
    const orient = Math.sign(
      (clip[1][0] - clip[0][0]) * (clip[2][1] - clip[0][1]) -
      (clip[1][1] - clip[0][1]) * (clip[2][0] - clip[0][0])) || 1;
    for (let i = 0; i < clip.length && outp.length; i++) {
      const a = clip[i], b = clip[(i + 1) % clip.length];
      const side = p => orient * ((b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]));
      const input = outp; outp = [];
      for (let j = 0; j < input.length; j++) {
        const p = input[j], q = input[(j + 1) % input.length];
        const sp = side(p), sq = side(q);
        if (sp >= 0) outp.push(p);
        if ((sp >= 0) !== (sq >= 0)) {
          const t = sp / (sp - sq);
          outp.push([p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])]);
        }
      }
    }
    return outp;
  };
  const rectPoly = r => [[r.left, r.top], [r.right, r.top], [r.right, r.bottom],
                         [r.left, r.bottom]];
  const aabb = poly => {
    const xs = poly.map(p => p[0]), ys = poly.map(p => p[1]);
    return {left: Math.min(...xs), right: Math.max(...xs),
            top: Math.min(...ys), bottom: Math.max(...ys)};
  };
  const boxesMeet = (a, b) => a.left < b.right && b.left < a.right &&
                              a.top < b.bottom && b.top < a.bottom;
  // The on-screen quadrilateral of an SVG text (its text box, rotated as drawn, inset).
  const textPoly = t => {
    let bb;
    try { bb = t.getBBox(); } catch (e) { return null; }
    if (!bb || bb.width <= 2 * insetPx || bb.height <= 2 * insetPx) return null;
    const m = t.getScreenCTM();
    if (!m) return null;
    const x0 = bb.x + insetPx, x1 = bb.x + bb.width - insetPx;
    const y0 = bb.y + insetPx, y1 = bb.y + bb.height - insetPx;
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]].map(([x, y]) =>
      [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const kindOf = t => {
    const g = c => t.closest(c);
    if (g('.textpoint, .heatmap-label')) return 'number';
    if (g('.legend')) return 'legend';
    if (g('.slider-container, .slider-group')) return 'slider';
    if (g('.updatemenu-container')) return 'menu';
    if (g('.annotation')) return 'annotation';
    if (t.classList.contains('gtitle')) return 'title';
    if (g('.colorbar')) return 'colorbar';
    if (g('[class$="title"]') || /title/.test(t.getAttribute('class') || '')) return 'axis title';
    if (g('[class$="tick"], [class$="tick2"]')) return 'tick';
    return 'text';
  };
  const shownOn = t => {
    for (let el = t; el && el.tagName !== 'svg'; el = el.parentElement) {
      const cs = getComputedStyle(el);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0)
        return false;
    }
    return true;
  };
  const figName = gd => {
    const ex = gd.closest('.attnbook-explorer');
    const label = (ex && ex.querySelector('.attnbook-explorer-plot')) ?
      ex.querySelector('.attnbook-explorer-plot').getAttribute('aria-label') : '';
    let title = '';
    try {
      const t = gd.layout && gd.layout.title;
      title = (typeof t === 'string' ? t : t && t.text) || '';
    } catch (e) {}
    return short(label || title || gd.id, 50);
  };
  const describe = (k, t) => k + ' "' + short(t.textContent, 30) + '"';

  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (!visible(gd)) continue;
    const fig = figName(gd);
    const svg = gd.querySelector('.main-svg');
    const figRect = (svg || gd).getBoundingClientRect();
    const figPoly = rectPoly(figRect);
    const texts = [];
    for (const t of gd.querySelectorAll('svg text')) {
      if (t.closest('.hoverlayer, .legendtoggle, .js-placeholder')) continue;
      if (!t.textContent.trim() || !shownOn(t)) continue;
      const poly = textPoly(t);
      if (!poly) continue;
      texts.push({t, poly, box: aabb(poly), kind: kindOf(t)});
    }
    for (const a of texts) {
      const inside = area(clipPoly(a.poly, figPoly));
      const outside = area(a.poly) - inside;
      if (outside > overlapPx2) {
        out.push({kind: 'labels', sub: 'clipped', what: fig + ': ' + describe(a.kind, a.t),
                  where: where(gd),
                  numbers: {outside_px2: r1(outside), area_px2: r1(area(a.poly))}});
      }
    }
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i], b = texts[j];
        if (!boxesMeet(a.box, b.box)) continue;
        const ov = area(clipPoly(a.poly, b.poly));
        if (ov > overlapPx2) {
          const data = a.kind === 'number' && b.kind === 'number';
          out.push({kind: 'labels', sub: data ? 'data-overlap' : 'overlap',
                    what: fig + ': ' + describe(a.kind, a.t) + ' / ' + describe(b.kind, b.t),
                    where: where(gd), numbers: {overlap_px2: r1(ov)}});
        }
      }
    }
  }
  // Explorer controls (HTML): labels, sliders, value outputs, selects.
  for (const ex of document.querySelectorAll('.attnbook-explorer')) {
    if (!visible(ex)) continue;
    const fig = figName(ex.querySelector('.js-plotly-plot') || ex);
    const exRect = ex.getBoundingClientRect();
    const els = Array.from(ex.querySelectorAll(
      '.attnbook-controls label, .attnbook-controls input, .attnbook-controls output, ' +
      '.attnbook-controls select')).filter(visible);
    const rects = els.map(e => e.getBoundingClientRect());
    const name = e => e.tagName.toLowerCase() + ' "' +
      short(e.tagName === 'INPUT' ? (e.id.split('-').pop()) : e.textContent, 30) + '"';
    els.forEach((e, i) => {
      const r = rects[i];
      const outside = Math.max(0, exRect.left - r.left) + Math.max(0, r.right - exRect.right) +
                      Math.max(0, r.right - vw);
      if (outside > 1) {
        out.push({kind: 'labels', sub: 'control-clipped', what: fig + ': ' + name(e),
                  where: where(ex), numbers: {outside_px: r1(outside)}});
      }
      for (let j = i + 1; j < els.length; j++) {
        const s = rects[j];
        const w = Math.min(r.right, s.right) - Math.max(r.left, s.left);
        const h = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
        if (w > 0 && h > 0 && w * h > overlapPx2 && !e.contains(els[j]) && !els[j].contains(e)) {
          out.push({kind: 'labels', sub: 'control-overlap',
                    what: fig + ': ' + name(e) + ' / ' + name(els[j]), where: where(ex),
                    numbers: {overlap_px2: r1(w * h)}});
        }
      }
    });
  }

  // ---- the notebook download ----------------------------------------------------------------
  const ipynb = Array.from(document.querySelectorAll('a[href]'))
    .filter(a => /\.ipynb([?#].*)?$/.test(a.getAttribute('href')));
  if (!ipynb.length) out.push({kind: 'ipynb', sub: 'missing', what: 'no <a href=*.ipynb>',
                               where: '', numbers: {}});

  // ---- the page itself scrolls sideways ------------------------------------------------------
  // Named by the outermost elements that stick out of the viewport (not inside a box that
  // clips or scrolls, not fixed: an off-canvas sidebar does not widen the page).
  const doc = document.scrollingElement || document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) {
    const culprits = [];
    for (const el of document.body.querySelectorAll('*')) {
      if (culprits.length >= 3) break;
      const r = el.getBoundingClientRect();
      if (r.right <= vw + 1 || !el.parentElement) continue;
      if (el.parentElement.getBoundingClientRect().right > vw + 1) continue;
      let hidden = getComputedStyle(el).position === 'fixed';
      for (let a = el.parentElement; a && a !== document.body && !hidden; a = a.parentElement) {
        const cs = getComputedStyle(a);
        hidden = cs.overflowX !== 'visible' || cs.position === 'fixed';
      }
      if (hidden) continue;
      const cls = (el.getAttribute('class') || '').split(/\s+/).slice(0, 2).join('.');
      culprits.push(el.tagName.toLowerCase() + (cls ? '.' + cls : '') + ' ' +
                    where(el) + ' "' + short(el.textContent, 30) + '" right=' + r1(r.right));
    }
    out.push({kind: 'page', sub: 'scrolls',
              what: 'the page scrolls sideways: ' + (culprits.join('; ') || '?'), where: '',
              numbers: {scroll: doc.scrollWidth, client: doc.clientWidth}});
  }
  return out;
}
"""

#: Moves the first enabled slider of every explorer one step (right, or left at its end) and
#: resolves once every moved explorer has redrawn. Returns how many were moved.
STEP_SLIDERS_JS = r"""
async (timeoutMs) => {
  const moved = [];
  for (const ex of document.querySelectorAll('.attnbook-explorer')) {
    const input = Array.from(ex.querySelectorAll('input[type=range]')).find(i => !i.disabled);
    const plot = ex.querySelector('.attnbook-explorer-plot');
    if (!input || !plot) continue;
    const before = plot.getAttribute('data-grid-index');
    const v = parseInt(input.value, 10), max = parseInt(input.max, 10);
    input.value = String(v < max ? v + 1 : v - 1);
    input.dispatchEvent(new Event('input', {bubbles: true}));
    moved.push([plot, before]);
  }
  const deadline = Date.now() + timeoutMs;
  while (moved.some(([p, b]) => p.getAttribute('data-grid-index') === b) &&
         Date.now() < deadline) {
    await new Promise(r => setTimeout(r, 50));
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return moved.length;
}
"""


def settle(page, timeout_ms: int = TIMEOUT_MS) -> list[str]:
    """Wait until MathJax, plotly, images and fonts are done; returns what did not finish."""
    return page.evaluate(SETTLE_JS, timeout_ms)


def measure(page, *, name: str, width: int) -> list[dict]:
    """Every finding on the loaded, settled ``page`` (see the module docstring)."""
    found = page.evaluate(MEASURE_JS, {"overlapPx2": OVERLAP_PX2, "insetPx": INSET_PX})
    return [{"page": name, "width": width, **f} for f in found]


def step_sliders(page, timeout_ms: int = TIMEOUT_MS) -> int:
    """Move one slider of each explorer by one step and wait for the redraw; returns the count."""
    return page.evaluate(STEP_SLIDERS_JS, timeout_ms)


def load(page, url: str, timeout_ms: int = TIMEOUT_MS) -> list[str]:
    """Open ``url`` and :func:`settle`; returns what did not finish."""
    page.goto(url, wait_until="load", timeout=timeout_ms)
    return settle(page, timeout_ms)


def block_other_hosts(context, origin: str) -> list[str]:
    """Abort every request of ``context`` that does not start with ``origin``; returns them."""
    aborted: list[str] = []

    def route(route):
        url = route.request.url
        if url.startswith(origin) or url.startswith("data:"):
            route.continue_()
        else:
            aborted.append(url)
            route.abort()

    context.route("**/*", route)
    return aborted


def new_context(browser, width: int, **kwargs):
    """A browser context with a ``width`` px wide viewport at device scale 1."""
    return browser.new_context(
        viewport={"width": width, "height": VIEWPORT_HEIGHT}, device_scale_factor=1, **kwargs
    )


def counts(findings: Iterable[dict]) -> Counter:
    """Findings counted by (page, width, kind, sub)."""
    return Counter((f["page"], f["width"], f["kind"], f["sub"]) for f in findings)


def format_finding(f: dict) -> str:
    """One line naming the page, width, element and numbers."""
    nums = ", ".join(f"{k}={v}" for k, v in f["numbers"].items())
    where = f" {f['where']}" if f.get("where") else ""
    return f"{f['page']} @ {f['width']} px{where}: {f['kind']}/{f['sub']}: {f['what']} ({nums})"
