"""Chapters as notebooks: the "run it yourself" links and the ``.ipynb`` downloads.

Registered in ``_config.yml`` (``sphinx: config: extensions``).
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

__version__ = "1.0"


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
