"""Chapter figures on a phone (issue 20): each is drawn for the column and for a phone.

:func:`attnbook.mpl_figures.figure_bundle` draws a matplotlib figure twice per edition and the
page offers both in a ``<picture>`` (``book/_ext/attnbook_figures.py``). Measured in Chromium on
every chapter page of both editions (device scale 1):

* at 390 px (a phone) every figure image is shown at ≥ 70 % of the width it was drawn at, and
  a figure with a phone drawing shows that one; a figure whose panels do not fit a phone (no
  phone drawing, ``attnbook.edition_outputs.WIDE_FIGURE_CLASS``) keeps its size in a box that
  scrolls sideways (the page itself does not: tests/browser/test_browser_layout.py);
* at 1280 px every figure shows its column drawing (the ``<img src>``), never the phone's.

Before this, 31 of 32 figures in each edition were shown below 70 % at 390 px. The last test
runs the same checks on a synthetic page with each fault, and on one without.
"""

from __future__ import annotations

from pathlib import Path

import layout
import pytest
from layout_report import serve

from browser import launch, require_chromium

pytestmark = pytest.mark.browser

PHONE, DESKTOP = 390, 1280
#: A figure shown below this fraction of its drawn width on a phone fails.
MIN_PHONE_RATIO = 0.70

#: Every visible image in a cell output: drawn and shown width, the file shown, the <img src>
#: and the phone drawing its <picture> offers (null: a plain <img>).
FIGURES_JS = r"""
() => [...document.querySelectorAll('.cell_output img')]
  .filter(img => img.getBoundingClientRect().width > 0)
  .map(img => {
    const pic = img.parentElement.tagName === 'PICTURE' ? img.parentElement : null;
    const source = pic && pic.querySelector('source[srcset]');
    const abs = u => new URL(u, document.baseURI).href;
    return {natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
            current: img.currentSrc, src: abs(img.getAttribute('src')),
            box: img.closest('.attnbook-wide-figure') ?
                 img.closest('.attnbook-wide-figure').scrollWidth >
                 img.closest('.attnbook-wide-figure').clientWidth + 1 : null,
            phone: source ? abs(source.getAttribute('srcset').trim().split(/\s+/)[0]) : null};
  })
"""


def figures(browser, base: str, pages: list[str], width: int) -> list[dict]:
    """:data:`FIGURES_JS` on each page at ``width`` px, each row with its page."""
    context = layout.new_context(browser, width)
    aborted = layout.block_other_hosts(context, base)
    page = context.new_page()
    rows = []
    try:
        for name in pages:
            page.goto(base + name, wait_until="load")
            rows += [dict(r, page=name) for r in page.evaluate(FIGURES_JS)]
    finally:
        context.close()
    assert aborted == [], aborted
    return rows


def faults(rows: list[dict], width: int) -> list[str]:
    """What is wrong with the figures measured at ``width`` px (empty: nothing)."""
    out = []
    for r in rows:
        where = f"{r['page']} @ {width} px: {r['current'].rsplit('/', 1)[-1]}"
        if not r["natural"]:
            out.append(f"{where}: not loaded")
        elif width <= PHONE and r["box"] is False:
            out.append(f"{where}: too wide for a phone, but its box does not scroll")
        elif width <= PHONE and r["phone"] and r["current"] != r["phone"]:
            out.append(f"{where}: the column's drawing, not the phone's")
        elif width <= PHONE and r["shown"] < MIN_PHONE_RATIO * r["natural"]:
            out.append(
                f"{where}: shown at {r['shown']:.0f} of {r['natural']} px "
                f"({r['shown'] / r['natural']:.0%})"
            )
        elif width >= DESKTOP and r["current"] != r["src"]:
            out.append(f"{where}: the phone's drawing at {width} px, not the column's")
    return out


@pytest.fixture(scope="module", params=["en", "zh"])
def measured(request, built_editions):
    """``{width: rows}`` of every chapter page of one edition."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    html = Path(built_editions[request.param])
    pages = sorted(p.relative_to(html).as_posix() for p in (html / "chapters").glob("*.html"))
    assert pages, f"no chapter pages in {html}"
    with serve(html) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            return {w: figures(browser, base, pages, w) for w in (PHONE, DESKTOP)}
        finally:
            browser.close()


@pytest.mark.book
def test_chapter_figures_are_legible_on_a_phone(measured):
    rows = measured[PHONE]
    pictures = [r for r in rows if r["phone"]]
    # Every chapter but one draws matplotlib figures; each wider than a phone has two drawings.
    assert len({r["page"] for r in pictures}) >= 10, sorted({r["page"] for r in rows})
    assert len(pictures) >= 25, (len(pictures), len(rows))
    # Every figure wider than a phone's column has a phone drawing, or (its panels do not fit
    # there) keeps its size in a box that scrolls sideways.
    wide = [r for r in rows if r["natural"] > 358 and not r["phone"]]
    assert all(r["box"] for r in wide), [r["src"].rsplit("/", 1)[-1] for r in wide if not r["box"]]
    found = faults(rows, PHONE)
    assert not found, f"{len(found)} of {len(rows)} figures:\n  " + "\n  ".join(found)


@pytest.mark.book
def test_a_wide_window_shows_the_column_drawing(measured):
    rows = measured[DESKTOP]
    assert sum(1 for r in rows if r["phone"]) >= 25
    found = faults(rows, DESKTOP)
    assert not found, f"{len(found)} of {len(rows)} figures:\n  " + "\n  ".join(found)


# A synthetic book page: a column 358 px wide below 600 px, 688 px above (as the theme's).
PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {margin: 0} article {width: 688px; padding: 0 16px}
@media (max-width: 600px) {article {width: 358px}}
.cell_output img {max-width: 100%%; height: auto}</style></head><body><article>%s</article>
</body></html>"""
GOOD = (
    '<div class="cell_output"><picture><source media="(max-width: 600px)" '
    'srcset="phone.png" width="358" height="40"><img src="column.png" alt="a figure" '
    'width="688" height="40"></picture></div>'
)
#: At 390 px: a plain column drawing (shown at 52 %); at 1280: a phone drawing whose media
#: query also holds on a wide screen.
BAD = (
    '<div class="cell_output"><img src="column.png" alt="only the column"></div>'
    '<div class="cell_output"><picture><source media="(max-width: 2000px)" '
    'srcset="phone.png"><img src="column.png" alt="always the phone"></picture></div>'
)


def test_the_checks_catch_each_fault(tmp_path):
    require_chromium()
    from PIL import Image
    from playwright.sync_api import sync_playwright

    Image.new("RGB", (688, 40), "white").save(tmp_path / "column.png")
    Image.new("RGB", (358, 40), "white").save(tmp_path / "phone.png")
    (tmp_path / "good.html").write_text(PAGE % GOOD, encoding="utf-8")
    (tmp_path / "bad.html").write_text(PAGE % BAD, encoding="utf-8")
    with serve(tmp_path) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            got = {
                w: figures(browser, base, ["good.html", "bad.html"], w) for w in (PHONE, DESKTOP)
            }
        finally:
            browser.close()
    assert faults([r for r in got[PHONE] if r["page"] == "good.html"], PHONE) == []
    assert faults([r for r in got[DESKTOP] if r["page"] == "good.html"], DESKTOP) == []
    phone = faults([r for r in got[PHONE] if r["page"] == "bad.html"], PHONE)
    assert len(phone) == 1 and "shown at 358 of 688 px (52%)" in phone[0], phone
    desktop = faults([r for r in got[DESKTOP] if r["page"] == "bad.html"], DESKTOP)
    assert len(desktop) == 1 and "phone's drawing at 1280 px" in desktop[0], desktop
