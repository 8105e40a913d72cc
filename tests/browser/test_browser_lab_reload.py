"""Every load of a live explorer draws (issue 19): chapter 6's mask explorer, reloaded 20 times.

The session's one JupyterLab server on the reader notebooks (the ``lab`` fixture of
``tests/conftest.py``, as ``make lab`` starts it; the reader notebooks test uses the same
server) and one headless Chromium. The notebook is chapter 6's English reader notebook
(``en/chapters/06-masks.ipynb``). It is run once and saved (the copy is put back afterwards),
and the page is reloaded :data:`RELOADS` times against the same kernel: JupyterLab draws the
explorer again from the widget state the kernel holds. After the run and each reload the
test checks that

* the plot has drawn data and it is the figure of the controls as they stand (the library's
  figure for that number of pad tokens: the keys' labels and the values), and
* a mouse drag of the "pad tokens" slider redraws it, to the library's figure for the new value.

A load that fails is counted *blank* (no data drawn), *stale* (the data of other control values)
and/or *dead* (no redraw after the drag); the assertion message gives the counts.

What failed before the fix (``attnbook.explorers.base._figure_widget_class``): anywidget gives a
widget's front-end module 2 s to load, then drops every message from the kernel to that model;
plotly's ``FigureWidget`` module (5 MB) took about 1 s to compile on an idle machine and more
on a busy one. A figure displayed by the kernel then kept empty axes (its data comes in such a
message) and one drawn again by a reload stayed dead. So the first run and every
:data:`SLOW_EVERY`-th reload emulate a busy machine: an init script holds the page's main thread
for :data:`SLOW_COMPILE_MS` ms before a module over 1 MB is compiled (it wraps
``URL.createObjectURL``). And a reload drew the figure as it was when the explorer was created,
whatever the controls said since (stale).
"""

from __future__ import annotations

import json
import pathlib
import re
import time

import numpy as np
import pytest
from test_browser_lab import NOTEBOOK_OPEN_MS, RUN_ALL_MS

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.book]

#: The chapter's reader notebook in the shared server's copy of the notebook trees (``lab``).
READER_NOTEBOOK = "en/chapters/06-masks.ipynb"
#: The chapter's explorer call (chapters/06-masks.md).
EXPLORER_CALL = 'mask_explorer("causal + padding", n_pad=2, pad_side="left")'
SLIDER_LABEL = "pad tokens"
RELOADS = 20
#: The first run and every SLOW_EVERY-th reload hold the main thread before a large compile.
SLOW_EVERY = 4
#: Longer than anywidget's 2 s deadline for a widget's front-end module.
SLOW_COMPILE_MS = 2100
#: How long a load may take to draw; then how long the drawn figure may take to be the right
#: one, and a drag to redraw (the kernel recomputes in well under a second).
DRAW_MS = 30_000
SETTLE_MS = 5_000

# Emulates a busy machine on the loads that set the flag in sessionStorage (kept by a reload).
SLOW_COMPILE_JS = (
    """(() => {
  if (sessionStorage.getItem('attnbook-slow-compile') !== '1') { return; }
  const create = URL.createObjectURL.bind(URL);
  URL.createObjectURL = (blob) => {
    if (blob && blob.size > 1e6) {
      const t0 = performance.now();
      while (performance.now() - t0 < %d) { /* busy */ }
    }
    return create(blob);
  };
})()"""
    % SLOW_COMPILE_MS
)

# What the plot draws: per trace the key labels and the values (decoded typed arrays too).
DRAWN_JS = """(gd) => (gd.data || []).map((t) => ({
  x: Array.from(t.x || [], String),
  z: Array.from(t.z || [], (row) => Array.from(row, Number)),
}))"""


def expected_figures() -> dict[int, list[dict]]:
    """The library's figure (key labels, values) for every number of pad tokens."""
    pytest.importorskip("plotly")
    from attnbook.explorers.masks import mask_explorer

    ex = mask_explorer("causal + padding", n_pad=2, pad_side="left")
    out = {}
    for _, n_pad in ex.controls["n_pad"].options:  # (label, value) pairs
        ex.controls["n_pad"].value = n_pad
        out[n_pad] = [
            {"x": [str(v) for v in t.x], "z": np.asarray(t.z, float)} for t in ex.figure.data
        ]
    return out


def same_figure(drawn: list[dict], expected: list[dict]) -> bool:
    if len(drawn) != len(expected):
        return False
    for d, e in zip(drawn, expected):
        z = np.asarray(d["z"], float)
        if d["x"] != e["x"] or z.shape != e["z"].shape or not np.allclose(z, e["z"], atol=1e-9):
            return False
    return True


def test_lab_mask_explorer_draws_on_every_reload(lab, lab_browser):
    expected = expected_figures()
    path = lab.root / READER_NOTEBOOK
    original = path.read_bytes()
    cells = json.loads(original)["cells"]
    assert any(EXPLORER_CALL in "".join(c["source"]) for c in cells), (
        f"{READER_NOTEBOOK} lacks the explorer"
    )
    t_start = time.monotonic()
    try:
        outcomes, errors = reload_many(lab_browser, lab, path, expected)
    finally:
        path.write_bytes(original)  # the shared tree as it was, for any later test
    print(f"the first run and {RELOADS} reloads in {time.monotonic() - t_start:.0f} s")
    # Load 0 is the first run; the loads on a (emulated) busy machine are marked.
    failed = {
        f"{i}{' (busy)' if i % SLOW_EVERY == 0 else ''}": o
        for i, o in enumerate(outcomes)
        if o != "ok"
    }
    counts = {k: sum(k in o for o in failed.values()) for k in ("blank", "stale", "dead")}
    assert not failed, (
        f"the mask explorer failed on {len(failed)} of {len(outcomes)} loads (the first run and "
        f"{RELOADS} reloads): {counts['blank']} blank, {counts['stale']} stale, "
        f"{counts['dead']} dead: {failed}; page errors: {errors[:3]}"
    )


def reload_many(browser, server, path: pathlib.Path, expected) -> tuple[list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route(
        "**/*", lambda r: r.continue_() if r.request.url.startswith(server.base) else r.abort()
    )
    page.add_init_script(SLOW_COMPILE_JS)
    # The first run on a busy machine too (the case: a fresh display, empty axes).
    page.goto(f"{server.base}/api/status?token={server.token}")
    page.evaluate("() => sessionStorage.setItem('attnbook-slow-compile', '1')")
    rel = path.relative_to(server.root).as_posix()
    page.goto(f"{server.base}/lab/tree/{rel}?reset&token={server.token}")
    page.locator(".jp-StatusBar-Item", has_text="Idle").first.wait_for(timeout=NOTEBOOK_OPEN_MS)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    slider = page.locator(
        ".widget-slider", has=page.locator(".widget-label", has_text=SLIDER_LABEL)
    ).first
    plot = page.locator(".jp-OutputArea-output", has=slider).first.locator(".js-plotly-plot")
    outcomes = [check_load(page, slider, plot, expected, timeout_ms=RUN_ALL_MS)]
    # Every cell has run; saved with its outputs, so that a reload shows the explorer again.
    page.wait_for_function(
        "() => ![...document.querySelectorAll('.jp-InputArea-prompt')]"
        ".some((e) => e.textContent.includes('*'))",
        timeout=RUN_ALL_MS,
    )
    page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Save( Notebook)?$")).first.click()
    deadline = time.monotonic() + 60
    while "application/vnd.jupyter.widget-view+json" not in path.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, "the notebook was not saved with its outputs"
        page.wait_for_timeout(200)  # not time.sleep: the route handler runs only meanwhile

    for i in range(1, RELOADS + 1):
        slow = i % SLOW_EVERY == 0
        page.evaluate(
            "(s) => sessionStorage.setItem('attnbook-slow-compile', s)", "1" if slow else "0"
        )
        page.reload()
        outcomes.append(check_load(page, slider, plot, expected, timeout_ms=DRAW_MS))
    page.close()
    return outcomes, errors


def check_load(page, slider, plot, expected, timeout_ms: int) -> str:
    """``"ok"``, or why not: the plot is drawn for the controls and redraws after a drag."""
    readout = slider.locator(".widget-readout")
    try:
        readout.wait_for(timeout=timeout_ms)
        drawn = wait_drawn(plot, lambda d: any(t["z"] for t in d), timeout_ms)
    except Exception as e:  # noqa: BLE001 - no explorer at all: the load is blank
        return f"blank ({type(e).__name__})"
    if drawn is None:
        return "blank (no data drawn)"
    before = int(readout.text_content().strip())
    problems = []
    drawn = wait_drawn(plot, lambda d: same_figure(d, expected[before]), SETTLE_MS)
    if drawn is None:
        problems.append(f"stale (the figure is not that of {before} pad tokens)")
        drawn = plot.first.evaluate(DRAWN_JS)
    shown = next((v for v, e in expected.items() if same_figure(drawn, e)), None)

    # Drag the handle two stops, towards the middle, to a value whose figure is not the one
    # drawn (a stale figure must not pass for a redraw); real mouse input.
    n = len(expected)
    order = (2, -2) if before < n // 2 else (-2, 2)
    target = next(before + d for d in order if 0 <= before + d < n and before + d != shown)
    handle = slider.locator(".noUi-handle")
    handle.scroll_into_view_if_needed()
    box = handle.bounding_box()
    track = slider.locator(".noUi-target").bounding_box()
    x0, y0 = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x0 + (target - before) / (n - 1) * track["width"], y0, steps=8)
    page.mouse.up()
    after = int(readout.text_content().strip())
    if after == before:
        problems.append(f"dead (the slider did not move from {before})")
    elif wait_drawn(plot, lambda d: same_figure(d, expected[after]), SETTLE_MS) is None:
        problems.append(f"dead (no redraw for {before} -> {after} pad tokens)")
    return ", ".join(problems) or "ok"


def wait_drawn(plot, good, timeout_ms: int):
    """Poll the drawn data until ``good(drawn)``; the drawn data, or None at the deadline."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            drawn = plot.first.evaluate(DRAWN_JS, timeout=5_000)
            if good(drawn):
                return drawn
        except Exception:  # noqa: BLE001 - not drawn yet, or the view is being replaced
            pass
        if time.monotonic() > deadline:
            return None
        plot.page.wait_for_timeout(100)
