"""The static explorers' script and stylesheet in a built site (book/_ext/attnbook_explorers.py).

A toy Sphinx site is built in ``tmp_path`` with the book's extension: one page shows two
explorers as the built book shows them (``static_html(assets=False)``: no script or stylesheet
of their own), one page shows none. Checked: the files in ``_static`` are the package's, the
explorer page loads each once and the other page neither, every resource is a file of the site
(``attnbook_offline.audit_html``), and, in Chromium (``browser``), both explorers draw from the
one script, redraw from the keyboard, and show a visible focus ring from ``explorer.css``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from toy_site import build_html

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")
pytest.importorskip("sphinx")

ROOT = Path(__file__).resolve().parents[2]
EXT_DIR = ROOT / "book" / "_ext"

CONF = """
import sys
sys.path.insert(0, {ext!r})
import attnbook_offline

extensions = ["attnbook_explorers"]
html_theme = "basic"


def setup(app):
    # plotly.js from the plotly package, as the book loads it (without the book's other checks).
    app.connect("builder-inited", attnbook_offline.copy_plotly_js)
    app.connect("html-page-context", attnbook_offline.add_plotly_js)
"""


def toy_explorer():
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control, Explorer

    def render(n, bars):
        return go.Figure(
            go.Bar(y=[n * (i + 1) for i in range(bars)]),
            layout=dict(height=300, title=dict(text=f"n = {n}")),
        )

    return Explorer(
        [
            Control("n", "n", "slider", (1, 2, 3, 4), 2),
            Control("bars", "bars", "select", (2, 3), 2),
        ],
        render,
        title="toy explorer",
    )


def indent(html: str) -> str:
    return "\n".join("   " + line for line in html.splitlines())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:

    src = tmp_path_factory.mktemp("toy-site")
    (src / "conf.py").write_text(CONF.format(ext=str(EXT_DIR)), encoding="utf-8")
    explorers = "\n\n".join(
        f".. raw:: html\n\n{indent(toy_explorer().static_html(assets=False))}\n" for _ in range(2)
    )
    (src / "index.rst").write_text(
        "Explorers\n=========\n\n" + explorers + "\n.. toctree::\n\n   other\n", encoding="utf-8"
    )
    (src / "other.rst").write_text("Other\n=====\n\nNo explorer here.\n", encoding="utf-8")
    out = build_html(src)
    return out


def test_each_page_with_explorers_loads_the_package_files_once(site):
    sys.path.insert(0, str(EXT_DIR))
    try:
        import attnbook_offline
    finally:
        sys.path.remove(str(EXT_DIR))
    from attnbook.explorers.base import page_assets

    for name, path in page_assets().items():
        assert (site / "_static" / name).read_bytes() == path.read_bytes(), name
    index = (site / "index.html").read_text(encoding="utf-8")
    other = (site / "other.html").read_text(encoding="utf-8")
    assert index.count('class="attnbook-explorer"') == 2
    assert len(re.findall(r'<script src="_static/attnbook-explorer\.js(\?v=\w+)?"', index)) == 1
    assert len(re.findall(r'<link [^>]*href="_static/attnbook-explorer\.css', index)) == 1
    assert "attnbook-explorer" not in other
    # The explorers carry no copy of the script or the stylesheet.
    assert "applyPatch" not in index and "<style>" not in index.split("</head>")[1]
    assert index.count("attnbookExplorer.mount(uid)") == 2
    assert not attnbook_offline.audit_html(site)


@pytest.mark.browser
def test_explorers_draw_from_the_one_script_and_redraw_from_the_keyboard(site):
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    try:
        from browser import launch, require_chromium
    finally:
        sys.path.pop(0)
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            errors = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((site / "index.html").as_uri())
            uids = page.eval_on_selector_all(".attnbook-explorer", "els => els.map(e => e.id)")
            assert len(uids) == 2
            for uid in uids:
                page.wait_for_function(
                    "id => { const gd = document.getElementById(id + '-plot');"
                    " return gd._fullData && gd._fullData.length === 1; }",
                    arg=uid,
                )
            slider = page.locator(f"#{uids[1]}-n")
            before = page.get_attribute(f"#{uids[1]}-plot", "data-grid-index")
            page.keyboard.press("Tab")  # into the page: focus the first control by keyboard
            slider.focus()
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                "([id, b]) => document.getElementById(id + '-plot')"
                ".getAttribute('data-grid-index') !== b",
                arg=[uids[1], before],
            )
            assert page.text_content(f"#{uids[1]}-n-value") == "3"  # from 2
            assert page.get_attribute(f"#{uids[0]}-plot", "data-grid-index") == before
            outline = page.eval_on_selector(
                f"#{uids[1]}-n",
                "el => getComputedStyle(el).outlineStyle + ' ' + getComputedStyle(el).outlineWidth",
            )
            assert outline == "solid 2px", outline
            assert not errors, errors
        finally:
            browser.close()
