"""The markup book/_ext/attnbook_a11y.py changes, checked without a build or a browser.

The whole effect is measured by axe-core on the built pages (tests/browser/test_browser_a11y.py);
these tests pin down the two rewrites themselves: the sidebar's expand toggles get a name in the
page's language, and MyST-NB's code toggle is named by its visible prompt.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import attnbook_a11y  # noqa: E402

#: A sidebar entry with sub-pages as pydata-sphinx-theme 0.17 writes it, and a part caption
#: whose summary already has text.
SIDEBAR = (
    '<ul class="nav bd-sidenav"><li class="toctree-l1 has-children">'
    '<a class="reference internal" href="api/index.html">B ·  API reference</a>'
    '<details><summary><span class="toctree-toggle" role="presentation">'
    '<i class="fa-solid fa-chevron-down"></i></span></summary>'
    '<ul><li class="toctree-l2"><a href="api/x.html">x</a></li></ul></details></li>'
    '<li class="toctree-l0"><details><summary><p class="caption">Chapters</p></summary>'
    "</details></li></ul>"
)


def test_sidebar_toggles_are_named_in_the_page_language():
    en = BeautifulSoup(attnbook_a11y.name_toggles(SIDEBAR, "en"), "html.parser")
    zh = BeautifulSoup(SIDEBAR, "html.parser")
    assert attnbook_a11y.name_toggles(zh, "zh_CN") is zh  # the theme's soup, changed in place
    names = [[s.get("aria-label") for s in tree.select("summary")] for tree in (en, zh)]
    assert names == [["Pages under B · API reference", None], ["B · API reference下的页面", None]]


def test_code_toggle_is_named_by_its_visible_prompt():
    class Translator:
        body: list[str] = []

    node = {
        "classes": ["above-input"],
        "prompt_show": "Show code cell source",
        "prompt_hide": "Hide code cell <source>",
    }
    t = Translator()
    t.body = []
    attnbook_a11y.visit_hide_cell_input(t, node)
    html = "".join(t.body) + "</details>"
    summary = BeautifulSoup(html, "html.parser").summary
    assert summary.attrs == {}, summary.attrs  # no aria-label hiding the prompt
    assert [p.get_text() for p in summary.find_all("p")] == [
        "Show code cell source",
        "Hide code cell <source>",
    ]
