"""The static explorers in a real Chromium: drag the d_k slider, switch the mask type.

Two settings (and the referent explorer of chapter 02, in the built book only):

* a standalone page written to a temporary directory (plotly.min.js copied from the plotly
  package and loaded with ``defer``, so the explorers' scripts run before ``window.Plotly``
  exists — the case they must survive), where the drawn data is also compared with the
  library itself;
* the built book (``built_book`` fixture: the path of ``_build/html``), pages
  ``chapters/03-scaling-variance.html`` and ``chapters/06-masks.html``, where the drawn data is
  compared with the frame the page embeds.

Input is real: the mouse drags the range input's thumb, the keyboard presses arrow keys, and
Playwright's ``select_option`` / ``click`` act on the controls; no test sets ``.value`` in JS.
Every request that is not ``file://`` is aborted and counted; console errors fail the test.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

from browser import launch, require_chromium

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import widgets  # noqa: E402
from attnbook.scaling import saturation_stats, score_samples  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402

pytestmark = pytest.mark.browser

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMALL = dict(n_samples=400, n_draws=60, seed=0)
TIMEOUT_MS = 30_000


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


class Guard:
    """Abort every request that is not file://, and collect console errors."""

    def __init__(self, page):
        self.aborted: list[str] = []
        self.errors: list[str] = []
        page.route("**/*", self._route)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, route):
        url = route.request.url
        if url.startswith("file://") or url.startswith("data:"):
            route.continue_()
        else:
            self.aborted.append(url)
            route.abort()

    def check(self):
        assert not self.aborted, f"requests outside the book: {self.aborted}"
        assert not self.errors, f"console errors: {self.errors}"


def explorer_uid(page, control: str) -> str:
    """Root id of the (first) explorer on the page that has a control named ``control``."""
    loc = page.locator(f'.attnbook-explorer:has([id$="-{control}"])').first
    loc.wait_for(timeout=TIMEOUT_MS)
    return loc.get_attribute("id")


def embedded(page, uid: str) -> dict:
    return json.loads(page.locator(f"#{uid}-data").text_content())


def control_state(page, uid: str, spec: dict) -> dict:
    """Current value of every control, read from the DOM (option values, not indices)."""
    values = {}
    for c in spec["controls"]:
        el = page.locator(f"#{uid}-{c['name']}")
        if c["kind"] == "toggle":
            values[c["name"]] = el.is_checked()
        else:
            values[c["name"]] = c["options"][int(el.input_value())]
    return values


def frame_for(spec: dict, values: dict) -> dict:
    flat = 0
    for c, stride in zip(spec["controls"], spec["strides"]):
        flat += c["options"].index(values[c["name"]]) * stride
    frame = spec["frames"][spec["frame_of"][flat]]
    return {"flat": flat, "data": [spec["traces"][i] for i in frame["data"]]}


def wait_drawn(page, uid: str, flat: int) -> list:
    """Wait until the plot shows grid point ``flat`` and return its drawn traces."""
    page.wait_for_function(
        """([id, flat]) => { const gd = document.getElementById(id + '-plot');
             return gd && gd._fullData && gd._fullData.length > 0 &&
                    gd.getAttribute('data-grid-index') === String(flat); }""",
        arg=[uid, flat],
        timeout=TIMEOUT_MS,
    )
    return page.evaluate(
        """(id) => { const gd = document.getElementById(id + '-plot');
             return {n_full: gd._fullData.length, n_svg: gd.querySelectorAll('.trace, .hm').length,
                     data: gd.data.map(t => ({x: t.x, y: t.y, z: t.z, meta: t.meta}))}; }""",
        uid,
    )


def assert_drawn_matches(drawn: dict, frame: dict) -> None:
    assert drawn["n_full"] == len(frame["data"])
    assert drawn["n_svg"] >= 1, "no trace was drawn"
    for got, want in zip(drawn["data"], frame["data"]):
        for key in ("y", "z"):
            if key in want:
                assert_close(
                    np.array(got[key], dtype=float),
                    np.array(want[key], dtype=float),
                    atol=0,
                    rtol=0,
                )


def drag_range(page, selector: str, to_fraction: float) -> None:
    """Drag a range input's thumb with the mouse to ``to_fraction`` of the track."""
    el = page.locator(selector)
    el.scroll_into_view_if_needed()
    box = el.bounding_box()
    lo, hi = float(el.get_attribute("min")), float(el.get_attribute("max"))
    cur = (float(el.input_value()) - lo) / (hi - lo)
    thumb = 8  # half the width of Chromium's default thumb, in CSS pixels
    track = box["width"] - 2 * thumb
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + thumb + cur * track, y)
    page.mouse.down()
    page.mouse.move(box["x"] + thumb + to_fraction * track, y, steps=12)
    page.mouse.up()


def exercise_scaling(page, uid: str, *, library: dict | None) -> None:
    """Drag d_k, press a key, toggle scaling; check the drawn data after each step."""
    spec = embedded(page, uid)
    values = control_state(page, uid, spec)
    first = frame_for(spec, values)
    before = wait_drawn(page, uid, first["flat"])
    assert_drawn_matches(before, first)
    stops = next(c["options"] for c in spec["controls"] if c["name"] == "d_k")
    old_dk = values["d_k"]

    drag_range(page, f"#{uid}-d_k", 0.8)  # towards the large d_k end
    values = control_state(page, uid, spec)
    assert values["d_k"] > old_dk, f"the drag did not move d_k up ({old_dk} -> {values['d_k']})"
    label = page.locator(f"#{uid}-d_k-value").text_content()
    assert label == str(values["d_k"])
    frame = frame_for(spec, values)
    after = wait_drawn(page, uid, frame["flat"])
    assert_drawn_matches(after, frame)
    assert after["data"][0]["y"] != before["data"][0]["y"], "the histogram did not change"
    check_scaling_trace(after, values, library)

    page.locator(f"#{uid}-d_k").focus()
    page.keyboard.press("ArrowLeft")
    values2 = control_state(page, uid, spec)
    assert stops.index(values2["d_k"]) == stops.index(values["d_k"]) - 1
    frame = frame_for(spec, values2)
    assert_drawn_matches(wait_drawn(page, uid, frame["flat"]), frame)

    page.locator(f'label[for="{uid}-scaled"]').click()  # toggles the checkbox
    values3 = control_state(page, uid, spec)
    assert values3["scaled"] != values2["scaled"]
    frame = frame_for(spec, values3)
    drawn = wait_drawn(page, uid, frame["flat"])
    assert_drawn_matches(drawn, frame)
    check_scaling_trace(drawn, values3, library)


def check_scaling_trace(drawn: dict, values: dict, library: dict | None) -> None:
    meta = drawn["data"][0]["meta"]
    # The expected variance is d_k unscaled and 1 scaled (Vaswani et al., 2017, footnote 4).
    assert meta["expected_variance"] == (1 if values["scaled"] else values["d_k"])
    if library is None:
        return
    ref = saturation_stats(
        values["d_k"],
        values["n_keys"],
        library["n_draws"],
        scaled=values["scaled"],
        rng=library["seed"] + 1,
    )
    assert_close(drawn["data"][2]["y"], ref.mean_sorted_weights, atol=1e-12, rtol=1e-3)
    s = score_samples(
        values["d_k"], library["n_samples"], scaled=values["scaled"], rng=library["seed"]
    )
    assert_close(meta["variance"], np.var(s, ddof=1), atol=0, rtol=1e-3)


def exercise_masks(page, uid: str, *, scores: np.ndarray | None) -> None:
    """Switch the mask type (and the pad count); check the drawn keep-mask and weights."""
    spec = embedded(page, uid)
    values = control_state(page, uid, spec)
    wait_drawn(page, uid, frame_for(spec, values)["flat"])
    seen = set()
    for mask_type in ("causal", "padding", "sliding window", "causal + padding"):
        page.locator(f"#{uid}-mask_type").select_option(label=mask_type)
        values = control_state(page, uid, spec)
        assert values["mask_type"] == mask_type
        frame = frame_for(spec, values)
        drawn = wait_drawn(page, uid, frame["flat"])
        assert_drawn_matches(drawn, frame)
        keep = np.array(drawn["data"][0]["z"], dtype=float)
        weights = np.array(drawn["data"][1]["z"], dtype=float)
        L = keep.shape[0]
        i, j = np.indices((L, L))
        if "causal" in mask_type or mask_type == "sliding window":
            assert (keep[j > i] == 0).all(), "a future key is visible"
        assert (weights[keep == 0] == 0).all(), "a hidden key got weight"
        sums = weights.sum(axis=-1)
        visible_rows = keep.any(axis=-1)
        assert_close(sums[visible_rows], np.ones(int(visible_rows.sum())), atol=2e-3, rtol=0)
        assert (sums[~visible_rows] == 0).all()
        if scores is not None:
            e = np.where(keep > 0, np.exp(scores - scores.max(axis=-1, keepdims=True)), 0.0)
            tot = e.sum(axis=-1, keepdims=True)
            ref = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
            assert_close(weights, ref, atol=1e-12, rtol=1e-3)
        seen.add(json.dumps(drawn["data"][1]["z"]))
    assert len(seen) == 4, "switching the mask type did not change the drawn weights"

    # Real keyboard input on the pad slider (active under "causal + padding").
    pad = page.locator(f"#{uid}-n_pad")
    assert pad.is_enabled()
    old = control_state(page, uid, spec)["n_pad"]
    pad.focus()
    page.keyboard.press("ArrowRight")
    values = control_state(page, uid, spec)
    assert values["n_pad"] == old + 1
    frame = frame_for(spec, values)
    drawn = wait_drawn(page, uid, frame["flat"])
    assert_drawn_matches(drawn, frame)
    keep = np.array(drawn["data"][0]["z"], dtype=float)
    # The pad keys sit at the end or, with the "padding at" control on "left", at the start
    # (chapter 6 opens the explorer with left padding).
    n_pad = values["n_pad"]
    if values.get("pad_side", "right") == "left":
        pad_keys = keep[:, :n_pad]
    else:
        pad_keys = keep[:, keep.shape[1] - n_pad :]
    assert pad_keys.shape[1] == n_pad and (pad_keys == 0).all(), "a pad key is visible"
    assert page.locator(f"#{uid}-window").is_disabled()


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    guard = Guard(page)
    page.goto(url)
    return page, guard


# ------------------------------------------------------------------------------------------
# Standalone page
# ------------------------------------------------------------------------------------------


def write_standalone(tmp_path: pathlib.Path) -> pathlib.Path:
    import plotly

    src = pathlib.Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    shutil.copy(src, tmp_path / "plotly.min.js")
    scaling = widgets.scaling_explorer(**SMALL)
    masks_ex = widgets.mask_explorer()
    page = tmp_path / "index.html"
    page.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>explorers</title>"
        # defer: the explorers' inline scripts run before window.Plotly exists.
        "<script src='plotly.min.js' defer></script></head>"
        "<body style='max-width:1000px;margin:auto;font-family:sans-serif'>"
        f"<h1>√d_k explorer</h1>{scaling.static_html()}"
        f"<h1>Mask explorer</h1>{masks_ex.static_html()}</body></html>",
        encoding="utf-8",
    )
    return page


def test_standalone_page_explorers(tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    page_path = write_standalone(tmp_path)
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page, guard = open_page(browser, page_path.as_uri())
            exercise_scaling(page, explorer_uid(page, "d_k"), library=SMALL)
            scores = np.random.default_rng(0).standard_normal((8, 8))  # mask_explorer's scores
            exercise_masks(page, explorer_uid(page, "mask_type"), scores=scores)
            if os.environ.get("ATTNBOOK_SCREENSHOTS"):
                page.screenshot(
                    path=os.path.join(os.environ["ATTNBOOK_SCREENSHOTS"], "static_explorers.png"),
                    full_page=True,
                )
            guard.check()
        finally:
            browser.close()


# ------------------------------------------------------------------------------------------
# The built book
# ------------------------------------------------------------------------------------------

BOOK_PAGES = {
    "scaling": ("chapters/03-scaling-variance.md", "chapters/03-scaling-variance.html"),
    "masks": ("chapters/06-masks.md", "chapters/06-masks.html"),
    "referent": ("chapters/02-queries-keys-values.md", "chapters/02-queries-keys-values.html"),
}


def book_page(request, which: str) -> pathlib.Path:
    """The built page for ``which``; builds the book (``built_book``) only if the chapter exists."""
    source, html = BOOK_PAGES[which]
    if not (ROOT / source).exists():
        msg = f"{source} is not written yet, so the built book has no {html}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    path = pathlib.Path(request.getfixturevalue("built_book")) / html
    assert path.exists(), f"the built book lacks {html} although {source} exists"
    return path


def exercise_book_page(request, which: str, control: str, exercise) -> None:
    """Open the built page of explorer ``which`` and run ``exercise(page, uid)`` on it."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    path = book_page(request, which)
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page, guard = open_page(browser, path.as_uri())
            exercise(page, explorer_uid(page, control))
            if os.environ.get("ATTNBOOK_SCREENSHOTS"):
                page.screenshot(
                    path=os.path.join(os.environ["ATTNBOOK_SCREENSHOTS"], f"{which}_explorer.png"),
                    full_page=True,
                )
            guard.check()
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.book  # the built page, through request.getfixturevalue
def test_book_scaling_explorer(request):
    exercise_book_page(
        request, "scaling", "d_k", lambda page, uid: exercise_scaling(page, uid, library=None)
    )


@pytest.mark.slow
@pytest.mark.book  # the built page, through request.getfixturevalue
def test_book_mask_explorer(request):
    exercise_book_page(
        request, "masks", "mask_type", lambda page, uid: exercise_masks(page, uid, scores=None)
    )


def exercise_referent(page, uid: str, rows) -> None:
    """Drag the layer slider, press a key on the head slider; check each drawn frame.

    After every move the plot must show the frame the page embeds for the controls' new values
    (layer and head are 1-based) and, within the 4 significant digits the page stores, the rows
    ``attention_of_token`` computes for that layer and head in both sentences.
    """
    spec = embedded(page, uid)
    values = control_state(page, uid, spec)
    first = frame_for(spec, values)
    before = wait_drawn(page, uid, first["flat"])
    assert_drawn_matches(before, first)
    check_referent_rows(before, values, rows)

    target = 1 if values["layer"] > 3 else 6
    drag_range(page, f"#{uid}-layer", 0.0 if target == 1 else 1.0)
    moved = control_state(page, uid, spec)
    assert moved["layer"] == target, f"the drag did not reach layer {target}: {moved}"
    assert moved["head"] == values["head"]
    assert page.locator(f"#{uid}-layer-value").text_content() == str(target)
    frame = frame_for(spec, moved)
    after = wait_drawn(page, uid, frame["flat"])
    assert_drawn_matches(after, frame)
    check_referent_rows(after, moved, rows)
    assert after["data"][0]["y"] != before["data"][0]["y"], "the bars did not change"

    head = page.locator(f"#{uid}-head")
    head.focus()
    page.keyboard.press("ArrowLeft" if moved["head"] > 1 else "ArrowRight")
    moved2 = control_state(page, uid, spec)
    assert abs(moved2["head"] - moved["head"]) == 1 and moved2["layer"] == moved["layer"]
    frame = frame_for(spec, moved2)
    drawn = wait_drawn(page, uid, frame["flat"])
    assert_drawn_matches(drawn, frame)
    check_referent_rows(drawn, moved2, rows)


def check_referent_rows(drawn: dict, values: dict, rows) -> None:
    for i, w in enumerate(rows):
        want = w[values["layer"] - 1, values["head"] - 1].astype(float)  # (T,)
        assert_close(np.array(drawn["data"][i]["y"], dtype=float), want, atol=1e-12, rtol=1e-3)
        meta = drawn["data"][i]["meta"]
        assert (meta["layer"], meta["head"]) == (values["layer"], values["head"])


@pytest.mark.slow
@pytest.mark.book  # the built page, through request.getfixturevalue
def test_book_referent_explorer(request):
    from attnbook import pretrained

    rows = [pretrained.attention_of_token(s, "it")[1] for s in (pretrained.TIRED, pretrained.WIDE)]
    exercise_book_page(
        request, "referent", "layer", lambda page, uid: exercise_referent(page, uid, rows)
    )
