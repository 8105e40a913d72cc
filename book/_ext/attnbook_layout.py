"""The book's page layout: its stylesheet ``book/_static/attnbook.css``, and one search box.

Registered in ``_config.yml`` (``sphinx: config: extensions``). The stylesheet is what makes the
pages read at 1280 px and on a phone (390 px); ``tests/browser/test_browser_layout.py`` measures
the result in Chromium.

One search box: sphinx-book-theme 1.x puts a search field in the primary sidebar (wide
screens) and a search button in the article header (narrow screens), and leaves the
pydata-sphinx-theme header bar empty by setting ``navbar_persistent`` to nothing in its
``theme.conf``. pydata-sphinx-theme 0.17 no longer reads that default: unless the *user's*
``html_theme_options`` name ``navbar_persistent``, it fills it with ``search-button-field``, so
a header bar with a second search field appeared above every page. We name it, empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

__version__ = "1.0"

STATIC_DIR = Path(__file__).resolve().parent.parent / "_static"


def add_static_path(app: Sphinx, config: Any) -> None:
    """Serve ``book/_static`` as part of the HTML's ``_static``."""
    path = str(STATIC_DIR)
    if path not in config.html_static_path:
        config.html_static_path.append(path)


def no_header_search(app: Sphinx, config: Any) -> None:
    """Leave pydata-sphinx-theme's header bar empty (no second search field), unless set."""
    options = dict(config.html_theme_options or {})
    options.setdefault("navbar_persistent", [])
    config.html_theme_options = options


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    app.connect("config-inited", add_static_path)
    app.connect("config-inited", no_header_search)
    app.add_css_file("attnbook.css")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
