"""Every explorer in the built book works in the static HTML.

For each chapter page, every ``.attnbook-explorer`` is found, and each of its enabled controls is
operated with real input (arrow keys on a range slider, a click on a checkbox, a choice in a
select). After each change the figure must show exactly the precomputed frame of the new control
values (read back from the plot's drawn data), and every explorer must have at least one control
that changes what is drawn. The detailed, library-checked tests of individual explorers are in
tests/browser/test_browser_explorers.py; this file makes sure none is forgotten as chapters are
added.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from test_browser_explorers import ROOT, Guard, control_state, frame_for, wait_drawn

from browser import launch, require_chromium


def assert_drawn_matches(drawn: dict, frame: dict) -> None:
    """The plot shows exactly the frame's traces (numbers or category labels alike)."""
    assert drawn["n_full"] == len(frame["data"]), (drawn["n_full"], len(frame["data"]))
    assert drawn["n_svg"] >= 1, "no trace was drawn"
    for got, want in zip(drawn["data"], frame["data"]):
        for key in ("x", "y", "z"):
            if key in want:
                assert got[key] == want[key], f"drawn {key} differs from the precomputed frame"


def chapters_with_explorers() -> list[str]:
    """The chapters in _toc.yml whose source displays an explorer (a call to ``*_explorer(``)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    parts = toc.get("parts") or [{"chapters": toc["chapters"]}]
    files = [e["file"] for part in parts for e in part["chapters"]]
    return [
        f
        for f in files
        if f.startswith("chapters/")
        and re.search(r"\w+_explorer\(", (ROOT / f"{f}.md").read_text(encoding="utf-8"))
    ]


def test_most_chapters_have_an_explorer():
    # Guards the parametrisation below against silently collecting nothing.
    assert len(chapters_with_explorers()) >= 8, chapters_with_explorers()


def drawn_signature(page, uid: str) -> str:
    """What the plot shows: its traces' data, its caption (the title above the plot) and its
    annotations, as JSON."""
    return page.evaluate(
        """(id) => { const gd = document.getElementById(id + '-plot');
             const lay = gd.layout || {};
             const cap = document.getElementById(id + '-caption');
             return JSON.stringify({data: gd.data.map(t => [t.x, t.y, t.z, t.text, t.visible]),
                                    title: cap ? cap.innerHTML : lay.title,
                                    ann: (lay.annotations || []).map(a => a.text)});
           }""",
        uid,
    )


def operate(page, uid: str, control: dict) -> bool:
    """Change one control with real input; False if it is disabled."""
    el = page.locator(f"#{uid}-{control['name']}")
    if el.is_disabled():
        return False
    if control["kind"] == "toggle":
        el.click()
    elif el.evaluate("e => e.tagName") == "SELECT":
        current = el.input_value()
        options = el.evaluate("e => Array.from(e.options).map(o => o.value)")
        el.select_option(next(o for o in options if o != current))
    else:
        el.focus()
        at_end = int(el.input_value()) >= int(el.get_attribute("max"))
        page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    return True


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("chapter", chapters_with_explorers())
def test_every_static_explorer_redraws_its_frames(chapter, edition_book):
    require_chromium()
    from playwright.sync_api import sync_playwright

    path = Path(edition_book) / f"{chapter}.html"
    assert path.is_file(), f"the built book lacks {path}"
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1400})
            guard = Guard(page)
            page.goto(path.as_uri())
            uids = page.eval_on_selector_all(".attnbook-explorer", "els => els.map(e => e.id)")
            assert uids, f"{chapter} calls an explorer but the page shows none"
            for uid in uids:
                spec = json.loads(page.locator(f"#{uid}-data").text_content())
                page.locator(f"#{uid}").scroll_into_view_if_needed()
                start = frame_for(spec, control_state(page, uid, spec))
                assert_drawn_matches(wait_drawn(page, uid, start["flat"]), start)
                changed_something = False
                for control in spec["controls"]:
                    before = drawn_signature(page, uid)
                    if not operate(page, uid, control):
                        continue
                    want = frame_for(spec, control_state(page, uid, spec))
                    assert_drawn_matches(wait_drawn(page, uid, want["flat"]), want)
                    changed_something |= drawn_signature(page, uid) != before
                assert changed_something, (
                    f"{chapter}: no control of explorer {uid} changes the figure"
                )
            guard.check()
        finally:
            browser.close()


def explorer_label_findings(page, *, name: str, width: int) -> list[dict]:
    """Overlapping or clipped text of the page's explorers (tests/browser/layout.py's measure).

    Numbers drawn on the data (heatmap cells) overlapping one another are not counted here;
    every other text element of an explorer's figure (titles, subplot titles, axis titles,
    ticks, legend, colour bar, captions) and of its controls is.
    """
    import layout

    titles = page.eval_on_selector_all(
        ".attnbook-explorer .attnbook-explorer-plot",
        "els => els.map(e => e.getAttribute('aria-label'))",
    )
    found = layout.measure(page, name=name, width=width)
    return [
        f
        for f in found
        if f["kind"] == "labels"
        and f["sub"] != "data-overlap"
        and any(f["what"].startswith(t[:50]) for t in titles)
    ]


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("chapter", chapters_with_explorers())
def test_explorer_text_fits_at_1280_and_on_a_phone(chapter, width, built_book):
    # The English edition, chapter by chapter (a failure names the chapter); both editions'
    # explorer labels, at both widths and after a slider step, are measured again by
    # tests/browser/test_browser_layout.py::test_explorer_labels_neither_overlap_nor_stick_out.
    """No explorer text overlaps another or leaves its figure, before and after a slider moves.

    At 390 px (a phone; the column is ~358 px) the explorers draw their narrow frames
    (stacked panels, wrapped text); the check is repeated after one slider of every explorer
    has moved, so a redraw cannot bring the wide layout back.
    """
    require_chromium()
    import layout
    from playwright.sync_api import sync_playwright

    path = Path(built_book) / f"{chapter}.html"
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": width, "height": layout.VIEWPORT_HEIGHT})
            guard = Guard(page)
            layout.load(page, path.as_uri())
            want = "narrow" if width < 520 else "wide"
            modes = page.eval_on_selector_all(
                ".attnbook-explorer-plot", "els => els.map(e => e.dataset.layout)"
            )
            assert modes and set(modes) == {want}, modes
            before = explorer_label_findings(page, name=chapter, width=width)
            assert not before, "\n".join(layout.format_finding(f) for f in before)
            assert layout.step_sliders(page) >= 1
            modes = page.eval_on_selector_all(
                ".attnbook-explorer-plot", "els => els.map(e => e.dataset.layout)"
            )
            assert set(modes) == {want}, f"a redraw changed the layout: {modes}"
            after = explorer_label_findings(page, name=chapter, width=width)
            assert not after, "\n".join(layout.format_finding(f) for f in after)
            guard.check()
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.book  # the built page, through request.getfixturevalue
def test_explorer_switches_layout_when_the_window_is_resized(edition_book):
    require_chromium()
    from playwright.sync_api import sync_playwright

    chapter = "chapters/06-masks"
    path = Path(edition_book) / f"{chapter}.html"
    if not path.is_file():
        pytest.skip(f"the built book has no {chapter}.html")
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            guard = Guard(page)
            page.goto(path.as_uri())
            uid = page.eval_on_selector(".attnbook-explorer", "e => e.id")
            plot = page.locator(f"#{uid}-plot")
            page.wait_for_function("id => document.getElementById(id + '-plot')._fullData", arg=uid)
            assert plot.get_attribute("data-layout") == "wide"
            wide_h = plot.bounding_box()["height"]
            page.set_viewport_size({"width": 390, "height": 900})
            page.wait_for_function(
                "id => document.getElementById(id + '-plot').dataset.layout === 'narrow'", arg=uid
            )
            page.wait_for_timeout(300)
            assert plot.bounding_box()["height"] > wide_h  # stacked panels are taller
            page.set_viewport_size({"width": 1280, "height": 900})
            page.wait_for_function(
                "id => document.getElementById(id + '-plot').dataset.layout === 'wide'", arg=uid
            )
            guard.check()
        finally:
            browser.close()
