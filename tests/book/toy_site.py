"""Build a toy Sphinx site strictly, as the book's own build would (for the tests in this folder).

The toy sites of ``test_explorer_assets.py`` and ``test_figure_pictures.py`` are written into a
``tmp_path`` with the book's extensions; this builds one with warnings as errors.
"""

from __future__ import annotations

import sys
from pathlib import Path


def build_html(src: Path) -> Path:
    """Build ``src`` (its ``conf.py`` and pages) to HTML in ``src/_build``; warnings are errors.

    Each toy build in this process starts from docutils' own node registry: a node class a build
    before it registered would make this one warn (an error here). sphinx.testing's clean-up, as
    ``SphinxTestApp.cleanup`` runs it, is done before and after.
    """
    from sphinx.application import Sphinx
    from sphinx.testing.util import _clean_up_global_state

    out = src / "_build"
    _clean_up_global_state()
    app = Sphinx(
        str(src),
        str(src),
        str(out),
        str(out / ".doctrees"),
        "html",
        status=None,
        warning=sys.stderr,
        freshenv=True,
        warningiserror=True,
    )
    try:
        app.build()
    finally:
        _clean_up_global_state()
    return out
