"""Sphinx extension: make the built HTML book self-contained (no CDN, nothing fetched at read time).

Loaded by Jupyter Book through ``sphinx: local_extensions`` in ``_config.yml``. It does four things,
each of which a stock Jupyter Book page gets wrong when opened offline:

1. **plotly.js from ``_static``.** The ``plotly.min.js`` that ships inside the installed ``plotly``
   Python package (``plotly/package_data/plotly.min.js``) is copied once into
   ``_build/html/_static`` and loaded by a plain ``<script>`` in the ``<head>`` of every page
   whose body contains a plotly figure (a ``plotly-graph-div`` or a script that calls
   ``Plotly.``). Figures are rendered with
   ``fig.to_html(include_plotlyjs=False, full_html=False)`` and only call the global
   ``window.Plotly``: the library is never inlined per figure and never loaded from a CDN. The
   script is synchronous, so it has run before the figures' inline scripts in the body.
2. **No ipywidgets state.** MyST-NB embeds the notebook's saved widget state (metadata
   ``widgets`` → a ``<script type="application/vnd.jupyter.widget-state+json">``) into every page
   that displayed a widget; for a plotly ``FigureWidget`` that is several megabytes, plotly.js
   included, and useless without a kernel. The extension removes that script (and the widget
   manager scripts that would come with it) from MyST-NB's per-page JavaScript right after each
   document is read. The static HTML shows the ``text/html`` representation of such outputs
   instead (``nb_mime_priority_overrides`` in ``_config.yml`` drops
   ``application/vnd.jupyter.widget-view+json`` for the html builder).
3. **A configuration check** (``builder-inited``): the settings the offline design relies on, which
   live in ``_config.yml``, are verified; a wrong one is a Sphinx warning, which fails the strict
   build (``-W``). Checked: ``nb_ipywidgets_js`` empty (otherwise require.js and the widget manager
   come from cdnjs/jsdelivr — and require.js hijacks plotly's UMD loader), widget views not chosen
   by the html builder, ``mathjax_path`` local (set by ``sphinx-mathjax-offline``).
4. **An audit of the output** (``build-finished``): every written ``.html`` page is parsed and each
   ``<script src>``, ``<link href>`` (stylesheets, preloads, icons), ``<img src>``,
   ``<iframe src>``, ``<source src>``, ``<video src>``/``<audio src>`` and ``<embed src>``
   must be a relative URL that points to a file that exists in the build; no page may contain
   a widget-state script or require.js. Every violation is reported as a warning naming the
   page and the URL, so a theme update that starts to pull a web font from a CDN fails
   ``make book`` instead of shipping.

MathJax itself comes from the ``sphinx-mathjax-offline`` extension (MathJax 3.2.2 copied into
``_static/mathjax``), loaded next to this one in ``_config.yml``.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

__version__ = "0.1.0"

#: Where plotly.js is copied to, relative to ``_static``.
PLOTLY_JS = "plotly.min.js"

#: The mime type MyST-NB uses for the embedded widget state.
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"

#: A page needs plotly.js when its body holds a plotly div or a script that calls the global.
_NEEDS_PLOTLY = re.compile(r"plotly-graph-div|\bPlotly\.(?:newPlot|react|plot|restyle|relayout)\b")

#: (tag, attribute) pairs that make the browser fetch something when the page loads.
_FETCHING_ATTRS = {
    ("script", "src"),
    ("link", "href"),
    ("img", "src"),
    ("iframe", "src"),
    ("source", "src"),
    ("video", "src"),
    ("audio", "src"),
    ("embed", "src"),
    ("video", "poster"),
}
#: ``<link rel=...>`` values that do not fetch anything when the page is opened.
_NON_FETCHING_RELS = {
    "index",
    "search",
    "next",
    "prev",
    "canonical",
    "author",
    "license",
    "help",
    "alternate",
}


def plotly_js_source() -> Path:
    """Path of ``plotly.min.js`` inside the installed ``plotly`` package.

    Returns:
        The absolute path of ``plotly/package_data/plotly.min.js``.

    Raises:
        FileNotFoundError: if the installed plotly has no bundled ``plotly.min.js``.
    """
    import plotly

    path = Path(plotly.__file__).resolve().parent / "package_data" / PLOTLY_JS
    if not path.is_file():
        raise FileNotFoundError(
            f"plotly {plotly.__version__} has no bundled {PLOTLY_JS} at {path}; "
            "the offline book needs it (pip install 'plotly>=6.1')"
        )
    return path


# --------------------------------------------------------------------------------------------------
# 1. plotly.js from _static


def copy_plotly_js(app: Sphinx) -> None:
    """Copy plotly.min.js into ``<outdir>/_static`` before any page is written.

    Copying before the pages are written (rather than at ``build-finished``) lets Sphinx add its
    ``?v=<checksum>`` cache-busting suffix to the ``<script>`` tag.
    """
    if app.builder is None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    src = plotly_js_source()
    dst = static / PLOTLY_JS
    if (
        not dst.is_file()
        or dst.stat().st_size != src.stat().st_size
        or (dst.stat().st_mtime < src.stat().st_mtime)
    ):
        shutil.copyfile(src, dst)


def add_plotly_js(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Load ``_static/plotly.min.js`` (synchronously, in the head) on pages with a plotly figure."""
    if app.builder is None or app.builder.format != "html":
        return
    body = context.get("body") or ""
    if _NEEDS_PLOTLY.search(body):
        # Priority 200 (< the default 500): before the theme's and MathJax's scripts. No defer or
        # async: the figures' inline scripts in the body call window.Plotly as they are parsed.
        app.add_js_file(PLOTLY_JS, priority=200)


# --------------------------------------------------------------------------------------------------
# 2. no ipywidgets state


def drop_widget_state(app: Sphinx, doctree: Any) -> None:
    """Remove MyST-NB's embedded ipywidgets state (and widget-manager scripts) for this document.

    MyST-NB's ``render_nb_finalise`` registers the notebook metadata ``widgets`` as an inline
    ``<script type="application/vnd.jupyter.widget-state+json">`` under the key
    ``ipywidgets_state`` and the manager scripts under ``ipywidgets_0``, ``ipywidgets_1``, …; the
    parser moves them to ``env.nb_metadata[docname]["js_files"]`` before ``doctree-read`` fires.
    """
    env = app.env
    data = getattr(env, "nb_metadata", None)
    if not data or env.docname not in data:
        return
    js_files = data[env.docname].get("js_files") or {}
    for key in [k for k in js_files if k == "ipywidgets_state" or k.startswith("ipywidgets_")]:
        del js_files[key]


# --------------------------------------------------------------------------------------------------
# 3. configuration check


def check_config(app: Sphinx) -> None:
    """Warn (→ strict build fails) when a setting the offline design relies on is wrong."""
    if app.builder is None or app.builder.format != "html":
        return
    config = app.config
    if getattr(config, "nb_ipywidgets_js", None):
        logger.warning(
            "[attnbook_offline] nb_ipywidgets_js must be {} (it is %r): it loads require.js and "
            "the widget manager from a CDN, and require.js hijacks plotly's UMD loader",
            config.nb_ipywidgets_js,
            type="attnbook",
            subtype="offline",
        )
    overrides = [tuple(o) for o in (getattr(config, "nb_mime_priority_overrides", None) or ())]
    if not any(
        len(o) == 3 and o[0] in ("html", "*") and o[1] == WIDGET_VIEW_MIME and o[2] is None
        for o in overrides
    ):
        logger.warning(
            "[attnbook_offline] nb_mime_priority_overrides must drop %s for the html builder "
            "(['html', '%s', null]); a widget view cannot render without a kernel",
            WIDGET_VIEW_MIME,
            WIDGET_VIEW_MIME,
            type="attnbook",
            subtype="offline",
        )
    mathjax_path = getattr(config, "mathjax_path", "") or ""
    if "://" in mathjax_path or mathjax_path.startswith("//"):
        logger.warning(
            "[attnbook_offline] mathjax_path %r is remote; load the sphinx-mathjax-offline "
            "extension",
            mathjax_path,
            type="attnbook",
            subtype="offline",
        )


# --------------------------------------------------------------------------------------------------
# 4. audit of the output


class _ResourceCollector(HTMLParser):
    """Collect the URLs a page fetches when it loads, and inline-script facts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str, str]] = []  # (tag, attribute, url)
        self.script_types: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: (v or "") for k, v in attrs}
        if tag == "script":
            self.script_types.append(attr.get("type", ""))
        if tag == "link":
            rels = set(attr.get("rel", "").lower().split())
            if rels and rels <= _NON_FETCHING_RELS:
                return
        for name, value in attr.items():
            if (tag, name) in _FETCHING_ATTRS and value:
                self.urls.append((tag, name, value))
        if tag in ("img", "source") and attr.get("srcset"):
            for candidate in attr["srcset"].split(","):
                url = candidate.strip().split(" ")[0]
                if url:
                    self.urls.append((tag, "srcset", url))


def page_resources(html: str) -> _ResourceCollector:
    """Parse ``html`` and return the collector with the fetched URLs and script types."""
    collector = _ResourceCollector()
    collector.feed(html)
    collector.close()
    return collector


def local_target(page: Path, url: str, outdir: Path) -> Path | None:
    """The file a relative ``url`` on ``page`` points to, or None when ``url`` is not local.

    ``data:`` URLs count as local (nothing is fetched); any URL with another scheme or a network
    location (``https://…``, ``//cdn…``) is not local.
    """
    parts = urlsplit(url)
    if parts.scheme == "data":
        return page
    if parts.scheme or parts.netloc:
        return None
    if not parts.path:  # "#anchor" or "?query" only
        return page
    target = (page.parent / unquote(parts.path)).resolve()
    try:
        target.relative_to(outdir.resolve())
    except ValueError:
        return None
    return target


def audit_html(outdir: Path) -> list[str]:
    """Check every built page for remote or missing resources and embedded widget state.

    Args:
        outdir: the html output directory (``_build/html``).

    Returns:
        One message per problem found, empty when the book is self-contained.
    """
    problems: list[str] = []
    for page in sorted(outdir.rglob("*.html")):
        rel = page.relative_to(outdir).as_posix()
        if rel.startswith("_static/"):
            continue
        html = page.read_text(encoding="utf-8", errors="replace")
        found = page_resources(html)
        for tag, attr, url in found.urls:
            target = local_target(page, url, outdir)
            if target is None:
                problems.append(f"{rel}: <{tag} {attr}={url!r}> is not a file of the book")
            elif not target.exists():
                problems.append(f"{rel}: <{tag} {attr}={url!r}> points to a missing file")
            if tag == "script" and re.search(r"require(\.min)?\.js", url):
                problems.append(f"{rel}: loads require.js ({url!r}), which breaks plotly.js")
        if WIDGET_STATE_MIME in found.script_types:
            problems.append(f"{rel}: embeds ipywidgets state ({WIDGET_STATE_MIME})")
    return problems


def audit_build(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished``: report every offline problem in the output as a warning."""
    if exception is not None or app.builder is None or app.builder.format != "html":
        return
    for message in audit_html(Path(app.outdir)):
        logger.warning("[attnbook_offline] %s", message, type="attnbook", subtype="offline")


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    app.connect("builder-inited", check_config)
    app.connect("builder-inited", copy_plotly_js)
    app.connect("doctree-read", drop_widget_state)
    app.connect("html-page-context", add_plotly_js)
    # After sphinx-mathjax-offline's own build-finished handler (priority 500) has copied MathJax.
    app.connect("build-finished", audit_build, priority=900)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
