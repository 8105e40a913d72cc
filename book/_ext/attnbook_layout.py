"""The book's page layout: its stylesheet ``book/_static/attnbook.css``.

Registered in ``_config.yml`` (``sphinx: config: extensions``). The stylesheet is what makes the
pages read at 1280 px and on a phone (390 px); ``tests/browser/test_browser_layout.py`` measures
the result in Chromium.
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


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    app.connect("config-inited", add_static_path)
    app.add_css_file("attnbook.css")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
