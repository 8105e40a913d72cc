"""Sphinx extension: the static explorers' script and stylesheet, loaded once per page.

Registered in ``_config.yml`` (``sphinx: config: extensions``). An explorer's output in the built
book holds only its controls, its plot, its JSON and a call to ``attnbookExplorer.mount``
(:meth:`attnbook.explorers.base.Explorer.static_html` with ``assets=False``, which each edition's
rendering uses). What it runs is package data of ``attnbook.explorers``
(:func:`attnbook.explorers.base.page_assets`): ``explorer.js`` and ``explorer.css``, copied here
into ``_static`` as ``attnbook-explorer.js`` and ``attnbook-explorer.css`` before any page is
written (so Sphinx adds its ``?v=<checksum>`` suffix), and loaded by every page whose body shows
an explorer, once however many it shows: the script synchronously in the ``<head>``, like
plotly.js (``attnbook_offline``). The explorers' own call waits for both anyway.

The figures' font. The explorers' plotly figures ask for :data:`attnbook.fonts.FAMILY` and
measure their text with its metrics; this extension writes that font into ``_static``
(:func:`attnbook.fonts.write_webfonts`: ``attnbook-fonts.css`` and two WOFF subsets, for every
character the label catalogs and the explorer modules hold) and loads the CSS with the
explorer's own files. The Chinese face is fetched only by a page that draws Chinese
(``unicode-range``).

An output that still carries the files inline (``text/html``, when a page is built without the
editions' rendering) works beside them: the first copy of the script to run defines
``window.attnbookExplorer`` and every later one does nothing.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

__version__ = "1.0"

#: The stylesheet of the figures' font (:func:`attnbook.fonts.write_webfonts`).
FONT_CSS = "attnbook-fonts.css"
#: A page shows an explorer when its body holds an explorer's outer ``<div>``.
_HAS_EXPLORER = re.compile(r'<div class="attnbook-explorer"')


def _html(app: Sphinx) -> bool:
    return app.builder is not None and app.builder.format == "html"


def figure_texts() -> list[str]:
    """Every text the explorers can draw: the label catalogs and the explorer modules' sources.

    Labels come from the catalogs (``lib/attnbook/locale/*/*.po``, msgids and translations);
    example data (the 苹果 sentences) is written in the explorer modules; numbers and notation
    are in :data:`attnbook.fonts.BASE_CHARS`.
    """
    import attnbook

    lib = Path(attnbook.__file__).resolve().parent
    files = sorted((lib / "locale").glob("*/*.po")) + sorted((lib / "explorers").glob("*.py"))
    return [f.read_text(encoding="utf-8") for f in files]


def copy_assets(app: Sphinx) -> None:
    """Copy the explorer's script and stylesheet, and write the figure font, into ``_static``."""
    if not _html(app):
        return
    from attnbook import fonts
    from attnbook.explorers.base import page_assets

    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    for name, src in page_assets().items():
        dst = static / name
        if not dst.is_file() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
    fonts.write_webfonts(static, fonts.webfont_chars(figure_texts()))


def add_assets(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Load ``_static/attnbook-explorer.{js,css}`` on a page that shows an explorer."""
    if not _html(app) or not _HAS_EXPLORER.search(context.get("body") or ""):
        return
    from attnbook.explorers.base import page_assets

    for name in page_assets():
        if name.endswith(".js"):
            app.add_js_file(name)
        else:
            app.add_css_file(name)
    app.add_css_file(FONT_CSS)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    app.connect("builder-inited", copy_assets)
    app.connect("html-page-context", add_assets)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
