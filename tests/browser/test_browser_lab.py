"""The live explorer in a real front-end: JupyterLab, chapter 3 opened through jupytext.

The test starts ``jupyter lab`` on 127.0.0.1 (a free port, a random token, a temporary root
holding a copy of ``chapters/03-scaling-variance.md``, temporary settings/workspace/runtime
directories), makes "Jupytext Notebook" the default viewer of Markdown through a user settings
file in ``JUPYTERLAB_SETTINGS_DIR``, opens the chapter, runs all cells from the Run menu, drags
the d_k slider of the explorer with the mouse, and waits until the ``FigureWidget``'s drawn data
(its plot div's ``data`` and annotations) changes to the new d_k. The kernel recomputes the
figure with attnbook on the change; nothing is precomputed in this path. The server is stopped
at the end, whatever happened. Every request that is not to the test's own server is aborted.

When the chapter does not exist yet, a tiny MyST notebook that calls ``scaling_explorer()`` is
used instead (and the drawn data is also compared with the library).

``test_lab_chapter_opens_unmodified`` opens chapter 1 the way ``make lab`` serves it (the
repository's ``jupytext.toml`` next to ``chapters/``, ``jupyter/`` on ``JUPYTER_CONFIG_PATH``),
waits until the kernel is idle, and checks that neither the tab nor the document model is marked
modified; then saves the untouched chapter from JupyterLab and checks that the file on disk is
byte for byte what it was.
"""

from __future__ import annotations

import difflib
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from browser import launch, require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "03-scaling-variance.md"
#: The chapter opened and saved by test_lab_chapter_opens_unmodified.
UNMODIFIED_CHAPTER = ROOT / "chapters" / "01-rnn-bottleneck.md"
SERVER_START_S = 120
NOTEBOOK_OPEN_MS = 120_000
RUN_ALL_MS = int(os.environ.get("ATTNBOOK_LAB_RUN_MS", 300_000))
REDRAW_MS = 120_000

#: The options of `scaling_explorer()` (its documented defaults).
DEFAULTS = dict(n_samples=2000, n_draws=200, seed=0)

FALLBACK_NOTEBOOK = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
---

# Scaling explorer (test notebook)

```{code-cell} ipython3
from attnbook.widgets import scaling_explorer

scaling_explorer(n_samples=400, n_draws=60, seed=0)
```
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(settings_dir: pathlib.Path, jupytext: bool = True) -> None:
    """User settings: open Markdown with jupytext's notebook view (``jupytext``, the authors'
    route; otherwise the application settings decide, as ``make lab``'s); no news, no update
    checks."""
    if jupytext:
        docmanager = settings_dir / "@jupyterlab" / "docmanager-extension"
        docmanager.mkdir(parents=True)
        (docmanager / "plugin.jupyterlab-settings").write_text(
            json.dumps(
                {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}
            )
        )
    # Render every cell (no virtual scrolling), so the explorer's output exists wherever it is.
    notebook = settings_dir / "@jupyterlab" / "notebook-extension"
    notebook.mkdir(parents=True)
    (notebook / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    apputils = settings_dir / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True)
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


class LabServer:
    """``jupyter lab`` in its own process group, stopped by :meth:`stop` (idempotent)."""

    def __init__(
        self,
        root: pathlib.Path,
        work: pathlib.Path,
        extra_args: tuple[str, ...] = (),
        jupytext: bool = True,
    ):
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log_path = work / "jupyter-lab.log"
        env = dict(os.environ)
        env.update(
            JUPYTERLAB_SETTINGS_DIR=str(work / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"),
            JUPYTER_RUNTIME_DIR=str(work / "runtime"),
            JUPYTER_CONFIG_DIR=str(work / "config"),
            PYTHONUNBUFFERED="1",
        )
        if jupytext:  # as `make lab-source`: jupyter_server_config.py (the chapters' language_info)
            env["JUPYTER_CONFIG_PATH"] = str(ROOT / "jupyter")
        env.pop("TRITON_INTERPRET", None)
        write_settings(work / "settings", jupytext=jupytext)
        exe = pathlib.Path(sys.executable).parent / "jupyter-lab"
        cmd = [
            str(exe),
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            *extra_args,
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
            cmd.append("--allow-root")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_S
        url = f"{self.base}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        pytest.fail(f"jupyter lab did not answer within {SERVER_START_S} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 60) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            # SIGINT twice is jupyter's own "shut down without confirmation" (kernels included).
            for _ in range(2):
                try:
                    self.proc.send_signal(signal.SIGINT)
                except ProcessLookupError:
                    break
                time.sleep(0.3)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                # SIGINT is ignored when the tests run as a background job of a shell; SIGTERM
                # also shuts the server and its kernels down.
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the group this test started
                    self.proc.wait(timeout=10)
        self._log.close()


def test_lab_scaling_explorer_live(tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    root = tmp_path / "root"
    root.mkdir()
    if CHAPTER.exists():
        name = CHAPTER.name
        shutil.copy(CHAPTER, root / name)
        # With the default options (a plain `scaling_explorer()` call) the drawn numbers are also
        # compared with the library; otherwise only the change itself is checked.
        library = DEFAULTS if "scaling_explorer()" in CHAPTER.read_text() else None
    else:
        name = "scaling-explorer.md"
        (root / name).write_text(FALLBACK_NOTEBOOK)
        library = dict(n_samples=400, n_draws=60, seed=0)

    server = LabServer(root, tmp_path)
    try:
        server.wait_ready()
        with sync_playwright() as p:
            browser = launch(p)
            try:
                run_in_lab(browser, server, name, library, tmp_path)
            except BaseException:
                for i, pg in enumerate(browser.contexts[0].pages if browser.contexts else []):
                    shot = tmp_path / f"failure-{i}.png"
                    pg.screenshot(path=str(shot))
                    print(f"screenshot of the failing page: {shot}")
                raise
            finally:
                browser.close()
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()
    assert server.proc.returncode is not None


def run_in_lab(browser, server, name, library, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):
        if r.request.url.startswith(server.base):
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.goto(f"{server.base}/lab/tree/{name}?token={server.token}")

    # Opened as a notebook (jupytext), not in the text editor.
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=NOTEBOOK_OPEN_MS)
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell').length > 1",
        timeout=NOTEBOOK_OPEN_MS,
    )
    # The kernel named in the jupytext header has started: the status bar says "Idle".
    page.locator(".jp-StatusBar-Item", has_text="Idle").first.wait_for(timeout=NOTEBOOK_OPEN_MS)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

    # The explorer's widget view: the d_k slider and a drawn FigureWidget.
    slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text="d_k")).first
    slider.wait_for(timeout=RUN_ALL_MS)
    output = page.locator(".jp-OutputArea-output", has=slider).first
    plot = output.locator(".js-plotly-plot").first
    plot.wait_for(timeout=RUN_ALL_MS)
    wait_until(plot, "(gd) => !!(gd.data && gd.data.length >= 3 && gd._fullData)", None, RUN_ALL_MS)
    readout = slider.locator(".widget-readout")
    before_dk = int(readout.text_content().strip())
    before = drawn(plot)
    # The score panel's title (an annotation of the figure: the scaling explorer has no
    # overall title, so its caption above the plot stays empty) names the slider's d_k.
    assert f"d<sub>k</sub> = {before_dk}" in before["title"]

    # Drag the handle to the right with the mouse (real input).
    handle = slider.locator(".noUi-handle")
    handle.scroll_into_view_if_needed()
    box = handle.bounding_box()
    track = slider.locator(".noUi-target").bounding_box()
    # A track a person can drag (issue 10: at least 150 px, the label not counted).
    assert track["width"] >= 150, f"the d_k slider's track is {track['width']:.0f} px wide"
    x0, y0 = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(min(x0 + 0.25 * track["width"], track["x"] + track["width"] - 2), y0, steps=15)
    page.mouse.up()
    wait_until(readout, "(el, v) => parseInt(el.textContent, 10) !== v", before_dk, REDRAW_MS)
    new_dk = int(readout.text_content().strip())
    assert new_dk > before_dk

    # The kernel recomputes and the FigureWidget redraws for the new d_k.
    wait_until(
        plot,
        "(gd, t) => !!(gd.layout.annotations"
        " && gd.layout.annotations.some(a => a.text.includes(t)))",
        f"d<sub>k</sub> = {new_dk}",
        REDRAW_MS,
    )
    after = drawn(plot)
    assert after["hist_y"] != before["hist_y"], "the histogram did not change"
    scaled = output.locator(".widget-checkbox input[type=checkbox]").first.is_checked()
    n_keys = int(
        output.locator(".widget-slider", has=page.locator(".widget-label", has_text="keys S"))
        .first.locator(".widget-readout")
        .text_content()
        .strip()
    )
    # Expected variance: 1 with scaling, d_k without (Vaswani et al., 2017, footnote 4).
    assert after["meta"]["expected_variance"] == (1 if scaled else new_dk)
    assert len(after["weights_y"]) == n_keys
    if os.environ.get("ATTNBOOK_SCREENSHOTS"):
        page.screenshot(path=os.path.join(os.environ["ATTNBOOK_SCREENSHOTS"], "lab_explorer.png"))
    if library is not None:
        from attnbook.scaling import saturation_stats, score_samples
        from attnbook.testing import assert_close

        ref = saturation_stats(
            new_dk, n_keys, library["n_draws"], scaled=scaled, rng=library["seed"] + 1
        )
        assert_close(np.array(after["weights_y"]), ref.mean_sorted_weights, atol=1e-12, rtol=1e-9)
        s = score_samples(new_dk, library["n_samples"], scaled=scaled, rng=library["seed"])
        assert_close(after["meta"]["variance"], np.var(s, ddof=1), atol=0, rtol=1e-9)
    assert not errors, f"page errors: {errors}"
    page.close()


def wait_until(locator, predicate: str, arg, timeout_ms: int) -> None:
    """Poll ``predicate(element, arg)`` on the element ``locator`` finds now, until it is true.

    A locator is resolved again at every poll, so a widget view that re-renders (a new plot
    element) is followed; an element handle taken once would go stale.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    last = None
    while True:
        try:
            last = locator.evaluate(predicate, arg, timeout=5_000)
            if last:
                return
        except Exception as e:  # noqa: BLE001 - the element is being replaced; poll again
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not true within {timeout_ms / 1000:.0f} s: {predicate} (last: {last!r})"
            )
        time.sleep(0.25)


def drawn(plot) -> dict:
    return plot.evaluate(
        """(gd) => ({
             title: (gd.layout.annotations || []).map(a => a.text).join(' | '),
             hist_y: Array.from(gd.data[0].y || []),
             weights_y: Array.from(gd.data[2].y || []),
             meta: gd.data[0].meta || {},
           })"""
    )


def test_lab_chapter_opens_unmodified(tmp_path):
    """A chapter opened in JupyterLab is not marked modified; saving it rewrites nothing."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    root = tmp_path / "root"
    (root / "chapters").mkdir(parents=True)
    shutil.copy(ROOT / "jupytext.toml", root / "jupytext.toml")
    name = f"chapters/{UNMODIFIED_CHAPTER.name}"
    original = UNMODIFIED_CHAPTER.read_bytes()
    (root / name).write_bytes(original)

    # window.jupyterapp gives the test the document model (its dirty flag, its save()).
    server = LabServer(root, tmp_path, extra_args=("--LabApp.expose_app_in_browser=True",))
    try:
        server.wait_ready()
        with sync_playwright() as p:
            browser = launch(p)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.route(
                    "**/*",
                    lambda r: r.continue_() if r.request.url.startswith(server.base) else r.abort(),
                )
                page.goto(f"{server.base}/lab/tree/{name}?token={server.token}")
                page.locator(".jp-NotebookPanel").first.wait_for(timeout=NOTEBOOK_OPEN_MS)
                # The kernel has started and answered (kernelspec and language_info are set
                # from its reply): the status bar says "Idle".
                page.locator(".jp-StatusBar-Item", has_text="Idle").first.wait_for(
                    timeout=NOTEBOOK_OPEN_MS
                )
                page.wait_for_function(
                    """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                               return w && w.context && w.context.isReady
                                 && w.sessionContext.session && w.sessionContext.session.kernel
                                 && w.context.model.getMetadata('language_info').version; }""",
                    timeout=NOTEBOOK_OPEN_MS,
                )
                page.wait_for_timeout(1500)  # anything that would dirty it has had its turn
                tab = page.locator(
                    ".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=UNMODIFIED_CHAPTER.name
                )
                assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), (
                    "the chapter's tab is marked modified right after opening"
                )
                state = page.evaluate(
                    """() => { const m = window.jupyterapp.shell.currentWidget.context.model;
                               return {dirty: m.dirty,
                                       kernelspec: m.getMetadata('kernelspec')}; }"""
                )
                assert state["dirty"] is False, f"the document model is dirty: {state}"
                assert state["kernelspec"]["name"] == "python3"
                # Save the untouched chapter from JupyterLab: the file must not change.
                page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
                saved = (root / name).read_bytes()
                assert saved == original, "saving from JupyterLab rewrote the chapter:\n" + "".join(
                    difflib.unified_diff(
                        original.decode().splitlines(True),
                        saved.decode().splitlines(True),
                        "before",
                        "after saving",
                    )
                )
            finally:
                browser.close()
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()
    # The server's own record of the save (the file was written, not skipped).
    assert "Saving file at /" + name in server.log_path.read_text()
