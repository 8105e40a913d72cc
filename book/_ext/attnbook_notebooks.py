"""Chapters as notebooks: the "run it yourself" links and the ``.ipynb`` downloads.

Registered in ``_config.yml`` (``sphinx: config: extensions``). For every chapter page
(``chapters/NN-topic``), in the HTML build:

1. **The reader notebook.** ``book/_ext/attnbook_reader_notebooks.py``, a builder that
   ``book/editions.py`` runs after the HTML build, writes ``_sources/chapters/NN-topic.ipynb``
   into the edition's HTML from the page as Sphinx resolved it (glue values, citations, the
   edition's language); this extension only links it.
2. **The download menu.** The theme's download dropdown (sphinx-book-theme's ``header_buttons``)
   offers that ``.ipynb`` next to ``.md`` and ``.pdf``: the extension sets the page's
   ``ipynb_source`` before the theme builds its buttons. A "Run this chapter" button next to it
   leads to the page on running the book (``run.md``).
3. **A visible line under the chapter's title**: "Run this chapter yourself: download the
   notebook NN-topic.ipynb · the book's code (zip) · how to run it", with the same links and
   the source archive.

And once per build of the book:

4. **The book's code.** A notebook imports ``attnbook``, so a reader who has only the HTML book
   needs the package too. After both editions are built, ``book/editions.py`` writes
   ``_downloads/attnbook-source.zip`` into each edition (``write_source_archive``): the source
   tree the book is built from (``archive_files``: the repository's files, without ``.venv``,
   ``_build``, caches, other hidden files or ``.ipynb``; ``.gitignore`` and ``.ci/`` stay) and
   both editions' notebook trees under ``notebooks/en`` and ``notebooks/zh`` (the reader
   notebooks and the pages they link), every file under one folder, ``attnbook-source/``.
   Entries are sorted and carry a fixed date and normalised permissions, so two builds of the
   same files write the same bytes. The role ``{attnbook-source}`text``` links it from a page
   (``run.md``); the chapter line above links it too.
"""

from __future__ import annotations

import fnmatch
import io
import os
import posixpath
import re
import zipfile
from html import escape
from pathlib import Path
from typing import Any

from attnbook_i18n import ui_text
from docutils import nodes
from sphinx.application import Sphinx

__version__ = "1.0"

#: Docnames of the chapters (``chapters/01-rnn-bottleneck``, ...).
CHAPTER_DOCNAME = re.compile(r"^chapters/\d\d-[a-z0-9-]+$")
#: The docname of the page that explains how to run the book.
RUN_PAGE = "run"
#: The kernel a reader notebook asks for: ipykernel's Python 3.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
#: Where the notebooks go, relative to the HTML output (the theme links ``_sources/<page>.ipynb``).
SOURCES = "_sources"
#: The source archive, relative to the HTML output.
ARCHIVE = "_downloads/attnbook-source.zip"
#: The folder of the archive that holds the editions' notebook trees (``notebooks/en``, ...).
NOTEBOOKS = "notebooks"
#: The folder every member of the archive is in (what ``unzip`` creates).
ARCHIVE_ROOT = "attnbook-source"
#: Folders left out of the archive wherever they are (hidden ones are left out anyway).
EXCLUDED_DIRS = ("_build", "__pycache__", "*.egg-info", "_scratch", "node_modules")
#: Files left out of the archive (hidden ones are left out anyway).
EXCLUDED_FILES = ("*.ipynb", "*.pyc", "*.pyo", "*.zip", "*.mo")
#: Folders at the top of the tree left out: ``notebooks/`` is a reader's working copy of the
#: notebooks (``make lab``); the archive carries the build's under that name instead.
EXCLUDED_TOP = (NOTEBOOKS,)
#: Hidden entries at the top of the tree that the archive keeps.
KEPT_HIDDEN = (".gitignore", ".ci")
#: A fixed date for every entry (the earliest a zip can hold), so builds are byte-identical.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def is_chapter(docname: str) -> bool:
    """Whether ``docname`` is one of the book's chapters."""
    return bool(CHAPTER_DOCNAME.match(docname))


def notebook_name(docname: str) -> str:
    """``chapters/01-rnn-bottleneck`` → ``chapters/01-rnn-bottleneck.ipynb``."""
    return docname + ".ipynb"


def _relative(docname: str, target: str) -> str:
    """URL of ``target`` (a path under the HTML output) from the page of ``docname``."""
    return posixpath.relpath(target, posixpath.dirname(docname) or ".")


def offer_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """``html-page-context``: offer the chapter's reader notebook in the download menu.

    Runs before sphinx-book-theme's ``add_header_buttons`` (priority 501), which turns
    ``ipynb_source`` into the ``.ipynb`` entry of the download dropdown. The notebook itself is
    written by the ``reader-notebooks`` builder after the HTML build.
    """
    if app.builder.format != "html" or not is_chapter(pagename):
        return
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
            "tooltip": ui_text(
                app.config.language, "Run this chapter: how to run it as a notebook"
            ),
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
    archive = _relative(docname, ARCHIVE)
    # The words in the edition's language (attnbook_i18n.UI_TEXT; trusted constants).
    lang = app.config.language
    intro = ui_text(lang, "Run this chapter yourself: download the notebook ")
    code = ui_text(lang, "the book's code (zip)")
    parts = [
        f'<p class="attnbook-run-links">{intro}',
        f'<a class="reference download" href="{escape(href)}" download>'
        f"<code>{escape(posixpath.basename(ipynb))}</code></a>",
        f' · <a class="reference download attnbook-source" href="{escape(archive)}" download>'
        f"{code}</a>",
    ]
    if RUN_PAGE in app.env.all_docs:
        run = app.builder.get_relative_uri(docname, RUN_PAGE)
        how = ui_text(lang, "how to run it")
        parts.append(f' · <a class="reference internal" href="{escape(run)}">{how}</a>')
    parts.append("</p>")
    section.insert(1, nodes.raw("", "".join(parts), format="html"))


def archive_files(root: str | Path) -> list[str]:
    """The files of the tree at ``root`` that go into the source archive, as sorted POSIX paths.

    Left out: hidden files and folders (``.git``, ``.venv``, tool caches) except
    ``KEPT_HIDDEN`` at the top, the folders ``EXCLUDED_DIRS`` (``_build``, ``__pycache__``, ...)
    anywhere and ``EXCLUDED_TOP`` (``notebooks``) at the top, the files ``EXCLUDED_FILES``
    (``*.ipynb``, compiled catalogs, ...) and symbolic links.
    """
    root = Path(root)
    files = []
    for here, dirs, names in os.walk(root):
        rel = Path(here).relative_to(root)
        top = rel == Path(".")

        def keep(name: str, excluded: tuple[str, ...], top: bool = top) -> bool:
            if name.startswith(".") and not (top and name in KEPT_HIDDEN):
                return False
            return not any(fnmatch.fnmatch(name, pattern) for pattern in excluded)

        dirs[:] = sorted(
            d
            for d in dirs
            if keep(d, EXCLUDED_DIRS)
            and not Path(here, d).is_symlink()
            and not (top and d in EXCLUDED_TOP)
        )
        for name in names:
            path = Path(here, name)
            if keep(name, EXCLUDED_FILES) and path.is_file() and not path.is_symlink():
                files.append((rel / name).as_posix())
    return sorted(files)


def source_archive(root: str | Path, notebooks: dict[str, Path] | None = None) -> bytes:
    """The zip of ``archive_files(root)`` and of each notebook tree, under ``attnbook-source/``.

    Args:
        root: the source tree.
        notebooks: edition code (``"en"``) → its notebook tree (every file of it goes under
            ``notebooks/<code>/``, hidden ones left out).

    Entries are in sorted order, dated ``ZIP_DATE``, with mode 0644 (0755 for a file the owner
    may execute, such as ``.ci/run``), deflated at level 9: deterministic bytes.
    """
    root = Path(root)
    members = [(rel, root / rel) for rel in archive_files(root)]
    for code, tree in sorted((notebooks or {}).items()):
        for path in sorted(Path(tree).rglob("*")):
            rel = path.relative_to(tree)
            # Hidden files (the tree's marker, JupyterLab's checkpoints) are not the book's.
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                members.append((f"{NOTEBOOKS}/{code}/{rel.as_posix()}", path))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for rel, path in sorted(members):
            info = zipfile.ZipInfo(f"{ARCHIVE_ROOT}/{rel}", date_time=ZIP_DATE)
            info.create_system = 3  # Unix, so that the permissions below are read back
            mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes(), compresslevel=9)
    return buffer.getvalue()


def write_source_archive(
    root: str | Path, html_dirs: list[Path], notebooks: dict[str, Path]
) -> bytes:
    """Write :func:`source_archive` once into each of ``html_dirs`` (at ``ARCHIVE``).

    Called by ``book/editions.py`` after both editions are built, so the archive carries both
    editions' notebook trees. Returns the archive's bytes.
    """
    data = source_archive(root, notebooks)
    for html in html_dirs:
        target = Path(html, ARCHIVE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return data


class source_archive_ref(nodes.Inline, nodes.TextElement):
    """A link to the source archive; made into HTML at ``doctree-resolved``."""


def source_archive_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{attnbook-source}`text```: a download link to the source archive."""
    return [source_archive_ref(rawtext, text or posixpath.basename(ARCHIVE))], []


def resolve_archive_refs(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: each ``{attnbook-source}`` becomes a link (HTML) or its text."""
    for ref in list(doctree.findall(source_archive_ref)):
        if app.builder.format != "html":
            ref.replace_self(nodes.Text(ref.astext()))
            continue
        href = _relative(docname, ARCHIVE)
        html = (
            f'<a class="reference download attnbook-source" href="{escape(href)}" download>'
            f"{escape(ref.astext())}</a>"
        )
        ref.replace_self(nodes.raw("", html, format="html"))


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    app.add_node(source_archive_ref)
    app.add_role("attnbook-source", source_archive_role)
    app.connect("doctree-resolved", resolve_archive_refs)
    app.connect("html-page-context", offer_notebook, priority=450)
    app.connect("html-page-context", add_run_button, priority=550)
    app.connect("doctree-resolved", add_run_line)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
