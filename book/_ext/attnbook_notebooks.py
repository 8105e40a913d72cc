"""Chapters as notebooks: the "run it yourself" links and the ``.ipynb`` downloads.

Registered in ``_config.yml`` (``sphinx: config: extensions``). For every chapter page
(``chapters/NN-topic``), in the HTML build:

1. **A clean notebook.** The chapter's source, ``chapters/NN-topic.md`` (a MyST-Markdown notebook),
   is converted with Jupytext into ``_build/html/_sources/chapters/NN-topic.ipynb``, next to the
   ``.md`` source Sphinx copies there: every cell, hidden ones included (the chapter runs top to
   bottom as in the book), no outputs, no execution counts, the ``python3`` kernel, and cell ids
   numbered in order so that two builds write the same file. It is the source, not the executed
   notebook: a reader runs it and gets the outputs.
2. **The download menu.** The theme's download dropdown (sphinx-book-theme's ``header_buttons``)
   offers that ``.ipynb`` next to ``.md`` and ``.pdf``: the extension sets the page's
   ``ipynb_source`` before the theme builds its buttons. A "Run this chapter" button next to it
   leads to the page on running the book (``run.md``).
3. **A visible line under the chapter's title**: "Run this chapter yourself: download the
   notebook NN-topic.ipynb · how to run it", with the same two links.
"""

from __future__ import annotations

import posixpath
import re
from html import escape
from pathlib import Path
from typing import Any

import jupytext
import nbformat
from docutils import nodes
from sphinx.application import Sphinx

__version__ = "1.0"

#: Docnames of the chapters (``chapters/01-rnn-bottleneck``, ...).
CHAPTER_DOCNAME = re.compile(r"^chapters/\d\d-[a-z0-9-]+$")
#: The docname of the page that explains how to run the book.
RUN_PAGE = "run"
#: The kernel a downloaded notebook asks for: ipykernel's Python 3.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
#: Where the notebooks go, relative to the HTML output (the theme links ``_sources/<page>.ipynb``).
SOURCES = "_sources"


def is_chapter(docname: str) -> bool:
    """Whether ``docname`` is one of the book's chapters."""
    return bool(CHAPTER_DOCNAME.match(docname))


def chapter_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The chapter at ``path`` (MyST Markdown) as a clean nbformat 4 notebook.

    Every cell is kept, in order, with its tags; code cells have no outputs and no execution
    count; the metadata is only the ``python3`` kernelspec and the language. Cell ids are
    ``cell-000``, ``cell-001``, ... The result is validated against the nbformat schema.
    """
    nb = jupytext.read(Path(path), fmt="md:myst")
    nb.metadata = nbformat.from_dict(
        {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    )
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nbformat.validate(nb)
    return nb


def notebook_name(docname: str) -> str:
    """``chapters/01-rnn-bottleneck`` → ``chapters/01-rnn-bottleneck.ipynb``."""
    return docname + ".ipynb"


def _relative(docname: str, target: str) -> str:
    """URL of ``target`` (a path under the HTML output) from the page of ``docname``."""
    return posixpath.relpath(target, posixpath.dirname(docname) or ".")


def write_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """``html-page-context``: write the chapter's notebook and offer it in the download menu.

    Runs before sphinx-book-theme's ``add_header_buttons`` (priority 501), which turns
    ``ipynb_source`` into the ``.ipynb`` entry of the download dropdown.
    """
    if app.builder.format != "html" or not is_chapter(pagename):
        return
    target = Path(app.outdir, SOURCES, notebook_name(pagename))
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(chapter_notebook(app.env.doc2path(pagename)), target)
    context["ipynb_source"] = notebook_name(pagename)


def add_run_button(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """``html-page-context``, after the theme's buttons: a "Run this chapter" header button."""
    if app.builder.format != "html" or not is_chapter(pagename):
        return
    if RUN_PAGE not in app.env.all_docs:
        return
    context.setdefault("header_buttons", []).insert(
        0,
        {
            "type": "link",
            "url": context["pathto"](RUN_PAGE),
            # Icon only, like the theme's other buttons (a label would wrap on a phone).
            "tooltip": "Run this chapter: how to run it as a notebook",
            "icon": "fas fa-play",
            "label": "run-chapter-button",
        },
    )


def add_run_line(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: the download and "how to run it" links under the chapter's title."""
    if app.builder.format != "html" or not is_chapter(docname):
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not section.children or not isinstance(section[0], nodes.title):
        return
    ipynb = notebook_name(docname)
    href = _relative(docname, f"{SOURCES}/{ipynb}")
    parts = [
        '<p class="attnbook-run-links">Run this chapter yourself: download the notebook ',
        f'<a class="reference download" href="{escape(href)}" download>'
        f"<code>{escape(posixpath.basename(ipynb))}</code></a>",
    ]
    if RUN_PAGE in app.env.all_docs:
        run = app.builder.get_relative_uri(docname, RUN_PAGE)
        parts.append(f' · <a class="reference internal" href="{escape(run)}">how to run it</a>')
    parts.append("</p>")
    section.insert(1, nodes.raw("", "".join(parts), format="html"))


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    app.connect("html-page-context", write_notebook, priority=450)
    app.connect("html-page-context", add_run_button, priority=550)
    app.connect("doctree-resolved", add_run_line)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
