"""Reader notebooks: each chapter as a Jupyter notebook, built from the book as Sphinx resolved it.

A Sphinx builder (``reader-notebooks``), registered in ``_config.yml``. ``book/editions.py`` runs
it right after an edition's HTML build, with the same configuration, output folder and doctrees,
so it reads nothing again and executes nothing: it takes each chapter's *resolved* doctree (glue
values filled in, citations and cross-references resolved, the Chinese translation applied) and
writes ``<html>/_sources/chapters/NN-topic.ipynb``, the file the chapter page offers for
download (``book/_ext/attnbook_notebooks.py``).

How a notebook is made (``write_doc``):

* **Code cells** come from the chapter's source, read by MyST-NB's own reader: every cell, in
  order, with its metadata, byte-equal to the chapter's. Cells the HTML removes or hides (tags
  ``remove-cell``, ``remove-input``, ``hide-input``: the glue bookkeeping, imports) are kept
  collapsed (``metadata.jupyter.source_hidden``). No outputs, except a listing's (below).
* **Markdown cells** are the doctree written as Markdown by a subclass of
  ``sphinx-markdown-builder``'s translator, cut where the code cells stand: a cell MyST-NB
  rendered is replaced by a marker (:class:`CutAtCodeCells`); a removed cell, which has no node,
  gets its marker before the first block whose source line follows the cell's (blocks are
  placed by their own line: nodes inside a translated paragraph report the paragraph's line).
* What the translator writes differently from its base: an admonition is a titled ``<div>``
  box, one with class ``dropdown`` a collapsed ``<details>`` whose summary is its title
  ("Solution", "解答"); the ``misconceptions`` div a box; raw HTML passes through; links to
  pages that are not notebooks lead to the edition's HTML page beside it. The output of a
  ``remove-input`` cell that is Markdown (the library listings of ``attnbook.listing``) is
  written by the same translator and stored as that cell's output (``display_data``,
  ``text/markdown``), so the code a chapter teaches is readable before anything runs, and
  running the cell replaces the listing instead of printing it a second time. Citations,
  glued numbers and math are already text in the resolved doctree.
* A note under the title says that the prose numbers are from the book's run; a Chinese
  notebook starts with one code cell that sets the figures' language.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nbformat
from attnbook_i18n import ui_text
from attnbook_notebooks import KERNELSPEC, SOURCES, is_chapter
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.locale import admonitionlabels
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.osutil import ensuredir, relative_uri
from sphinx_markdown_builder import MarkdownBuilder
from sphinx_markdown_builder.contexts import SubContext, SubContextParams, WrappedContext
from sphinx_markdown_builder.translator import MarkdownTranslator, pushing_context

__version__ = "1.0"

logger = logging.getLogger(__name__)

#: The builder's name (``sphinx -b reader-notebooks``).
NAME = "reader-notebooks"
#: Tags whose cells the HTML removes or hides; the notebook keeps them collapsed.
COLLAPSED_TAGS = ("remove-cell", "remove-input", "hide-input", "hide-cell")
#: What a Chinese notebook runs first (attnbook.i18n draws figures in the reader's language).
LANGUAGE_CELL = 'from attnbook import i18n; i18n.set_language("{language}")'
#: Inline styles of a box: a border, no background (readable in light and dark themes).
BOX_STYLE = (
    "border: 1px solid #8aa4c8; border-left: 4px solid #3d6fb4; border-radius: 4px; "
    "padding: 0.2em 1em; margin: 0.8em 0"
)
#: The note under a notebook's title (translated by attnbook_i18n.UI_TEXT).
NOTE = (
    "The numbers in this text are those of the book's own run (the same seeds); the code "
    "cells compute them again when you run them."
)
_MARKER = re.compile("\x00cell:(\\d+)\x00")
#: A listing's Markdown right after its cell's marker, between two ``\x02``.
_LISTING = re.compile("\\s*\x02(.*?)\x02", re.DOTALL)
_LINK = re.compile("\x01([^\x01]+)\x01")
#: The notebook tree, beside each edition's HTML folder (``_build/editions/<code>/notebooks``).
TREE = "notebooks"
#: The file that marks a folder as a notebook tree this builder wrote (and may replace); hidden,
#: so neither the source archive nor JupyterLab's file browser shows it.
TREE_MARKER = ".attnbook-notebook-tree"


class cell_marker(nodes.Element):
    """Where code cell ``index`` of the chapter stands in the doctree (this builder only)."""


class listing_output(nodes.Element):
    """The Markdown output of a listing's cell, right after its marker (this builder only)."""


def source_notebook(env: Any, docname: str) -> nbformat.NotebookNode:
    """The chapter's source read exactly as MyST-NB reads it (code cells and a source map)."""
    from myst_nb.core.read import create_nb_reader

    path = env.doc2path(docname)
    text = Path(path).read_text(encoding="utf-8")
    reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
    return reader.read(text)


def _line(node: nodes.Node) -> int | None:
    """The source line of a block: its own, else that of its first descendant that has one."""
    for sub in node.findall(nodes.Element):
        if sub.line:
            return sub.line
    return None


def _is_code(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def _is_bundle(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle"


def _markdown_output(cell: nodes.container) -> list[nodes.Node]:
    """The nodes of the Markdown outputs of ``cell`` (a listing), else ``[]``.

    A listing made during a book build also carries the per-edition output
    (:data:`attnbook.edition_outputs.MIME`), whose rendering is this edition's (its collapsed
    block's label in the edition's language): that one is taken.
    """
    from attnbook.edition_outputs import MIME

    out: list[nodes.Node] = []
    for bundle in cell.findall(_is_bundle):
        by_type = {r.get("mime_type"): r for r in bundle.children}
        if "text/markdown" not in by_type:
            continue
        rendering = by_type.get(MIME, by_type["text/markdown"])
        out.extend(child.deepcopy() for child in rendering.children)
    return out


class CutAtCodeCells(SphinxPostTransform):
    """Mark every code cell's place in a chapter's doctree; drop the outputs.

    Runs before MyST-NB's ``SelectMimeType`` (priority 4), which would ask for a mime priority
    this builder does not have: a notebook carries no outputs.
    """

    builders = (NAME,)
    default_priority = 3

    def run(self, **kwargs: Any) -> None:
        docname = self.env.docname
        if is_chapter(docname):
            self._mark(source_notebook(self.env, docname))
        for bundle in list(self.document.findall(_is_bundle)):
            bundle.parent.remove(bundle)

    def _mark(self, nb: nbformat.NotebookNode) -> None:
        smap = nb.metadata.get("source_map", [])
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        # Blocks directly under a section or the document, in document order: the code cells
        # MyST-NB rendered (known by their index) and the prose (known by its source line).
        blocks = [
            n
            for n in self.document.findall(nodes.Element)
            if isinstance(n.parent, (nodes.section, nodes.document))
            and not isinstance(n, nodes.title)
        ]
        rendered = {n["cell_index"]: n for n in blocks if _is_code(n)}

        def follows(block: nodes.Element, index: int) -> bool:
            if _is_code(block):
                return block["cell_index"] > index
            return (_line(block) or 0) > smap[index] + 1  # source_map counts from 0

        for index in code:
            marker = cell_marker(index=index)
            if index in rendered:
                node = rendered[index]
                listing = []
                if "remove-input" in nb.cells[index].metadata.get("tags", []):
                    listing = _markdown_output(node)
                node.replace_self([marker, listing_output("", *listing)] if listing else marker)
                continue
            after = next((b for b in blocks if follows(b, index)), None)
            if after is None:
                self.document.append(marker)
            else:
                after.parent.insert(after.parent.index(after), marker)
        # The note under the title.
        section = next(iter(self.document.findall(nodes.section)), None)
        if section is not None and section.children and isinstance(section[0], nodes.title):
            text = ui_text(self.config.language, NOTE)
            # Italic in English; Chinese fonts have no italic (a browser slants them), so plain.
            inner = (
                nodes.Text(text)
                if self.config.language.startswith("zh")
                else nodes.emphasis(text, text)
            )
            section.insert(1, nodes.paragraph("", "", inner))


class _Block(SubContext):
    """A Markdown block between an opening and a closing line of HTML (blank lines around)."""

    def __init__(self, opening: str, closing: str):
        super().__init__(SubContextParams(2, 2))
        self.opening, self.closing = opening, closing

    def make(self) -> str:
        return f"{self.opening}\n\n{super().make().strip()}\n\n{self.closing}"


class _Emphasis(WrappedContext):
    """``*text*``/``**text**`` with a space before the mark only where CommonMark needs one.

    sphinx-markdown-builder adds a space when the text starts with anything but an ASCII letter
    or digit, which puts a stray space inside Chinese prose (``被 *替换*为``). A mark before a
    letter of any script opens emphasis without it; only punctuation after a letter needs it.
    """

    def make(self) -> str:
        content = SubContext.make(self)
        stripped = content.strip()
        if not stripped:
            return content
        lead = content[: len(content) - len(content.lstrip())]
        trail = content[len(content.rstrip()) :]
        if lead == "" and unicodedata.category(stripped[0])[0] in "PS":
            lead = " "
        return f"{lead}{self.prefix}{stripped}{self.suffix}{trail}"


class ReaderTranslator(MarkdownTranslator):
    """sphinx-markdown-builder's translator with boxes, solutions, raw HTML and cell markers."""

    def visit_emphasis(self, node: nodes.emphasis) -> None:
        self._push_context(_Emphasis("*"))

    def depart_emphasis(self, node: nodes.emphasis) -> None:
        self._pop_context()

    def visit_strong(self, node: nodes.strong) -> None:
        self._push_context(_Emphasis("**"))

    def depart_strong(self, node: nodes.strong) -> None:
        self._pop_context()

    def visit_cell_marker(self, node: cell_marker) -> None:
        self.add(f"\x00cell:{node['index']}\x00", prefix_eol=2, suffix_eol=2)
        raise nodes.SkipNode

    def visit_listing_output(self, node: listing_output) -> None:
        self._push_context(_Block("\x02", "\x02"))

    def depart_listing_output(self, node: listing_output) -> None:
        self._pop_context()

    def _open_box(self, node: nodes.Element, title: str | None) -> None:
        if "dropdown" in node.get("classes", []):
            summary = title or ui_text(self.config.language, "Solution")
            self._push_context(_Block(f"<details>\n<summary>{summary}</summary>", "</details>"))
            return
        opening = f'<div class="attnbook-box" style="{BOX_STYLE}">'
        if title:
            opening += f"\n\n**{title}**"
        self._push_context(_Block(opening, "</div>"))

    def visit_admonition(self, node: nodes.Element) -> None:
        title = node[0].astext() if node.children and isinstance(node[0], nodes.title) else None
        if title is None:  # {note}, {tip}, ...: the label Sphinx gives it in this language
            title = admonitionlabels.get(node.tagname)
        self._open_box(node, title)

    def depart_admonition(self, node: nodes.Element) -> None:
        self._pop_context()

    @pushing_context
    def visit_title(self, node: nodes.title) -> None:
        if isinstance(node.parent, nodes.Admonition):
            raise nodes.SkipNode  # written by visit_admonition
        super().visit_title(node)

    def visit_container(self, node: nodes.container) -> None:
        if "misconceptions" in node.get("classes", []):
            self._open_box(node, None)

    def depart_container(self, node: nodes.container) -> None:
        if "misconceptions" in node.get("classes", []):
            self._pop_context()

    def visit_math_block(self, node: nodes.math_block) -> None:
        """``$$ ... $$`` with no blank line inside (one would end the block in markdown-it)."""
        latex = "\n".join(line for line in node.astext().strip("\n").split("\n") if line.strip())
        self.add(f"$$\n{latex}\n$$", prefix_eol=2, suffix_eol=2)
        raise nodes.SkipNode

    def visit_raw(self, node: nodes.raw) -> None:
        if "html" in node.get("format", "").split():
            if isinstance(node.parent, nodes.TextElement):
                self.add(node.astext())
            else:
                self.add(node.astext(), prefix_eol=2, suffix_eol=2)
        raise nodes.SkipNode

    @pushing_context  # the base class pops a context only after a visit that carries this
    def visit_desc_signature(self, node: nodes.Element) -> None:
        """An API entry's heading, after an anchor per id, so a link lands on it."""
        if not self.config.markdown_anchor_signatures:  # else the base class writes them
            for anchor in node.get("ids", []):
                self._add_anchor(anchor)
        super().visit_desc_signature(node)

    def visit_citation(self, node: nodes.citation) -> None:
        """A reference of the bibliography: an anchor, then its text as a paragraph."""
        for anchor in node.get("ids", []):
            self._add_anchor(anchor)

    def depart_citation(self, node: nodes.citation) -> None:
        pass

    def visit_label(self, node: nodes.label) -> None:
        raise nodes.SkipNode  # author-year style: the text starts with the authors and year

    def visit_image(self, node: nodes.image) -> None:
        """No page has an image of its own yet; one would need copying into the notebook tree."""
        logger.warning(
            "reader notebooks: image %r is not copied into the notebook tree",
            node["uri"],
            location=node,
        )
        raise nodes.SkipNode


for _name in (
    "attention",
    "caution",
    "danger",
    "error",
    "hint",
    "important",
    "note",
    "seealso",
    "tip",
    "warning",
):
    setattr(ReaderTranslator, f"visit_{_name}", ReaderTranslator.visit_admonition)
    setattr(ReaderTranslator, f"depart_{_name}", ReaderTranslator.depart_admonition)


class ReaderNotebookBuilder(MarkdownBuilder):
    """Writes every chapter's reader notebook twice, and every other page as Markdown once.

    * ``<outdir>/_sources/chapters/NN-topic.ipynb``: the download the chapter page offers (its
      links lead to the edition's HTML pages beside it);
    * ``<outdir>/../notebooks/``: the edition's *notebook tree*, the book a reader opens in
      JupyterLab (``make lab``, the source archive): ``chapters/NN-topic.ipynb`` and every other
      page as ``.md`` (plain Markdown: the references, the API, the appendices), linked to each
      other.

    A link is written as a placeholder for its target page (:meth:`get_relative_uri`) and made
    into a relative path for each of the two places (:func:`link_for`).
    """

    name = NAME
    format = "ipynb"
    epilog = (
        "The reader notebooks are written (downloads in %(outdir)s/"
        + SOURCES
        + "/chapters; the notebook tree beside it, which book/editions.py publishes to "
        "_build/notebooks)."
    )
    default_translator_class = ReaderTranslator
    allow_parallel = False

    @property
    def tree(self) -> Path:
        """The notebook tree: ``notebooks/`` beside the edition's HTML folder."""
        return Path(self.outdir).parent / TREE

    def get_outdated_docs(self):
        """Every page, every time (the doctrees are read, not rebuilt: a few seconds)."""
        return sorted(self.env.found_docs)

    def get_target_uri(self, docname: str, typ: str | None = None) -> str:
        """A chapter is its notebook; any other page its Markdown page (in the tree)."""
        return docname + (".ipynb" if is_chapter(docname) else ".md")

    def get_relative_uri(self, from_: str, to: str, typ: str | None = None) -> str:
        """A placeholder naming the target page, made into a path by :func:`link_for`."""
        return f"\x01{to}\x01"

    def prepare_writing(self, docnames) -> None:
        """Start the tree afresh: every page is written again, and none that was removed stays.

        Raises:
            sphinx.errors.SphinxError: if a folder of that name is there that this builder did
                not write (it has no ``TREE_MARKER``): it is not deleted.
        """
        from sphinx.errors import SphinxError

        super().prepare_writing(docnames)
        if self.tree.exists():
            if not (self.tree / TREE_MARKER).is_file():
                raise SphinxError(
                    f"{self.tree} exists and is not a notebook tree this builder "
                    f"wrote (no {TREE_MARKER}); move it away"
                )
            shutil.rmtree(self.tree)
        self.tree.mkdir(parents=True)
        (self.tree / TREE_MARKER).write_text("written by the reader-notebooks builder\n")

    def write_doc(self, docname: str, doctree: nodes.document) -> None:
        self.current_doc_name = docname
        visitor = self.create_translator(doctree, self)
        doctree.walkabout(visitor)
        text = visitor.astext()
        if not is_chapter(docname):
            _write(self.tree / (docname + ".md"), link_for(text, docname, download=False))
            return
        source = source_notebook(self.env, docname)
        language = self.config.language or "en"
        for download, target in (
            (True, Path(self.outdir, notebook_path(docname))),
            (False, self.tree / (docname + ".ipynb")),
        ):
            nb = reader_notebook(
                source, link_for(text, docname, download=download), language, docname
            )
            _write(target, nbformat.writes(nb) + "\n")

    def finish(self) -> None:
        """Nothing to copy: the chapters have no images of their own, the HTML has the rest."""


def _write(path: Path, text: str) -> None:
    ensuredir(str(path.parent))
    path.write_text(text, encoding="utf-8")


def link_for(text: str, docname: str, *, download: bool) -> str:
    """``text`` with every link placeholder made into a relative path from ``docname``'s file.

    In the notebook tree (``download=False``) a chapter links to ``NN-topic.ipynb``, any other
    page to its ``.md``; in a download beside the HTML (``_sources/chapters/``) a chapter links
    to its download, any other page to its HTML page.
    """

    def here(doc: str) -> str:
        if download:
            return notebook_path(doc) if is_chapter(doc) else doc + ".html"
        return doc + (".ipynb" if is_chapter(doc) else ".md")

    start = here(docname)
    return _LINK.sub(lambda m: quote(relative_uri(start, here(m.group(1)))), text)


def notebook_path(docname: str) -> str:
    """``chapters/03-x`` → ``_sources/chapters/03-x.ipynb`` (relative to the HTML output)."""
    return posixpath.join(SOURCES, docname + ".ipynb")


def reader_notebook(
    source: nbformat.NotebookNode, markdown: str, language: str, docname: str
) -> nbformat.NotebookNode:
    """The reader notebook: ``markdown`` (the translator's output, with cell markers) cut into
    Markdown cells between the code cells of ``source``.

    Raises:
        ValueError: if the markers are not every code cell of ``source`` once, in order.
    """
    parts = _MARKER.split(markdown)
    texts, order = parts[0::2], [int(i) for i in parts[1::2]]
    listings = {}  # cell index -> the Markdown of its listing, taken out of the text after it
    for k, index in enumerate(order):
        found = _LISTING.match(texts[k + 1])
        if found:
            listings[index] = found.group(1).strip("\n")
            texts[k + 1] = texts[k + 1][found.end() :]
    code = [i for i, c in enumerate(source.cells) if c.cell_type == "code"]
    if order != code:
        raise ValueError(f"{docname}: code cells placed in the order {order}, not {code}")
    cells = []
    # The language cell runs before every other code cell, and stands under the title (the
    # first Markdown cell), where JupyterLab's table of contents and a reader's eye start.
    language_cell = (
        None
        if language == "en"
        else nbformat.v4.new_code_cell(LANGUAGE_CELL.format(language=language))
    )
    for text, index in zip(texts, [*order, None]):
        text = text.strip("\n")
        if text.strip():
            cells.append(nbformat.v4.new_markdown_cell(text))
        if language_cell is not None:
            cells.append(language_cell)
            language_cell = None
        if index is not None:
            src = source.cells[index]
            metadata = nbformat.from_dict(dict(src.metadata))
            if set(metadata.get("tags", [])) & set(COLLAPSED_TAGS):
                metadata["jupyter"] = {"source_hidden": True}
            outputs = (
                [nbformat.v4.new_output("display_data", data={"text/markdown": listings[index]})]
                if index in listings
                else []
            )
            cells.append(nbformat.v4.new_code_cell(src.source, metadata=metadata, outputs=outputs))
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:03d}"
    # The language_info ipykernel reports (this Python's version): JupyterLab, run from the same
    # environment (`make lab`), then finds nothing to change and opens the notebook unmodified.
    from ipykernel.ipkernel import IPythonKernel

    nb = nbformat.v4.new_notebook(
        cells=cells,
        metadata={
            "kernelspec": dict(KERNELSPEC),
            "language_info": dict(IPythonKernel.language_info),
        },
    )
    nbformat.validate(nb)
    return nb


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the builder (Sphinx entry point)."""
    app.setup_extension("sphinx_markdown_builder")  # its translator's configuration values
    app.add_node(cell_marker)
    app.add_node(listing_output)
    app.add_builder(ReaderNotebookBuilder)
    app.add_post_transform(CutAtCodeCells)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
