"""What the themes and MyST-NB render, made accessible where they render it.

Registered in ``_config.yml`` (``sphinx: config: extensions``). axe-core in Chromium
(``tests/browser/test_browser_a11y.py``, which keeps every audited page of both editions at 0
serious or critical violations) found three kinds of problem on every page, none of them in the
book's own text:

* **The theme's buttons** (``label-content-name-mismatch``, WCAG 2.5.3 Label in Name): the
  sidebar's search field shows "Search Ctrl+K" but is named "Search"; the colour-mode button's
  icons carry titles ("Light") that its name "Color mode" does not contain. ``book/_templates``
  holds the two theme components, each with its one change (the search field named by its
  text, the icons without titles); this extension puts that folder before the themes' own.
* **MyST-NB's "Show code cell source"** (``label-content-name-mismatch``): its ``<summary>`` is
  named "Toggle hidden content" whatever it shows. The summary is written here without that
  ``aria-label``, so its name is the visible "Show code cell source" / "Hide code cell source"
  (translated in the Chinese edition).
* **The sidebar's expand toggles** (``summary-name``): pydata-sphinx-theme gives each entry with
  sub-pages a ``<summary>`` holding only a chevron icon. Each gets a name here, "Pages under
  <entry>", in the page's language (``attnbook_i18n.UI_TEXT``).

The fourth finding, link colour on the "Common misconceptions" box (``color-contrast``), is
fixed in ``book/_static/attnbook.css`` (c).
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from attnbook_i18n import ui_text
from sphinx.application import Sphinx

__version__ = "1.0"

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "_templates"
#: The name of a sidebar entry's expand toggle; ``{title}`` is the entry's text.
TOGGLE_NAME = "Pages under {title}"


def templates_first(app: Sphinx, config: Any) -> None:
    """Put ``book/_templates`` before the themes' component folders."""
    path = str(TEMPLATES_DIR)
    if path not in config.templates_path:
        config.templates_path.insert(0, path)


def visit_hide_cell_input(self: Any, node: Any) -> None:
    """MyST-NB's ``HideCodeCellNode`` visit, without the fixed ``aria-label`` on its summary.

    The summary's accessible name is then its visible prompt (the other prompt is
    ``display: none``), which changes as the reader opens and closes it.
    """
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n')
    self.body.append("<summary>\n")
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def name_toggles(soup: Any, language: str | None) -> Any:
    """Give every sidebar ``<summary>`` without text an ``aria-label`` naming its entry.

    Args:
        soup: the theme's toctree, a ``BeautifulSoup`` (changed in place) or an HTML ``str``.
        language: the page's Sphinx language.

    Returns:
        ``soup`` with its toggles named (a new ``str`` when given one).
    """
    from bs4 import BeautifulSoup

    tree = BeautifulSoup(soup, "html.parser") if isinstance(soup, str) else soup
    for summary in tree.select("li > details > summary"):
        if summary.get_text(strip=True) or summary.get("aria-label"):
            continue
        entry = summary.find_parent("li")
        link = entry.find("a", recursive=False) if entry is not None else None
        title = " ".join(link.get_text().split()) if link is not None else ""
        if title:
            summary["aria-label"] = ui_text(language, TOGGLE_NAME).format(title=title)
    return str(tree) if isinstance(soup, str) else tree


def wrap_toctree(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """Wrap pydata-sphinx-theme's ``generate_toctree_html`` so the sidebar's toggles are named.

    Connected after the theme's own ``html-page-context`` handler, which defines the function
    (it returns a ``BeautifulSoup`` that the template prints).
    """
    generate = context.get("generate_toctree_html")
    if generate is None:
        return
    language = app.config.language

    def generate_named(kind: str, *args: Any, **kwargs: Any) -> Any:
        out = generate(kind, *args, **kwargs)
        return name_toggles(out, language) if kind == "sidebar" else out

    context["generate_toctree_html"] = generate_named


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput

    app.connect("config-inited", templates_first)
    app.add_node(
        HideCodeCellNode, override=True, html=(visit_hide_cell_input, depart_HideCellInput)
    )
    app.connect("html-page-context", wrap_toctree, priority=900)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
