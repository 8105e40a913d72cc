"""Fixtures of the JupyterLab browser tests: one server on the reader notebooks, one Chromium.

``lab`` is JupyterLab as ``make lab`` starts it (the application settings of
``jupyter/reader``, no Jupytext configuration) on a copy of both built notebook trees
(``_build/notebooks/en`` and ``zh``, under ``lab.root``), for the whole session: the reader
notebooks test and the repeated reloads of a live explorer run against that one server.
"""

from __future__ import annotations

import shutil

import pytest
from test_browser_lab import ROOT, LabServer

from browser import launch, require_chromium


@pytest.fixture(scope="session")
def lab(notebook_trees, tmp_path_factory):
    """One JupyterLab server on a copy of both notebook trees, as `make lab` starts it."""
    require_chromium()
    work = tmp_path_factory.mktemp("reader-lab")
    root = work / "notebooks"
    for code, tree in notebook_trees.items():
        shutil.copytree(tree, root / code)
    server = LabServer(root, work, jupytext=False, extra_args=(
        f"--LabApp.app_settings_dir={ROOT / 'jupyter' / 'reader'}",
        "--LabApp.expose_app_in_browser=True"))
    try:
        server.wait_ready()
        server.root = root
        yield server
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lab_browser():
    """Chromium for one test module (Playwright's sync API allows one at a time: the other
    browser tests start their own)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()


