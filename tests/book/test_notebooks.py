"""Every chapter as a downloadable notebook (book/_ext/attnbook_notebooks.py).

Without a build: ``chapter_notebook`` turns each chapter into a valid nbformat 4 notebook whose
code cells are the chapter's ``{code-cell}`` blocks, read here by a small parser of our own (not
by Jupytext, which the extension uses), with no outputs and the ``python3`` kernel.

On the built book: each chapter's ``_sources/chapters/NN-topic.ipynb`` exists, is valid, holds
the same code cells, and the chapter's page links it twice (the download menu and the line
under the title) and links the "Run it yourself" page.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import attnbook_notebooks as ext  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))
CODE_CELL = re.compile(r"^(?P<fence>`{3,}|~{3,})\{code-cell\}")


def code_cells(text: str) -> list[str]:
    """Sources of the ``{code-cell}`` blocks of a MyST notebook, options removed.

    Options are either a YAML block between ``---`` lines or ``:key: value`` lines at the top
    of the block (MyST-NB's two forms).
    """
    lines = text.split("\n")
    i = 0
    if lines and lines[0] == "---":  # the notebook's front matter
        i = lines.index("---", 1) + 1
    cells = []
    while i < len(lines):
        m = CODE_CELL.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        body = []
        i += 1
        while lines[i].rstrip() != fence:
            body.append(lines[i])
            i += 1
        i += 1
        if body and body[0] == "---":
            body = body[body.index("---", 1) + 1:]
        else:
            while body and re.match(r"^:[A-Za-z][\w-]*:", body[0]):
                body = body[1:]
        cells.append("\n".join(body).strip("\n"))
    return cells


def test_code_cells_parser():
    text = (
        "---\nkernelspec:\n  name: python3\n---\n\n# T\n\n"
        "```{code-cell} ipython3\nx = 1\n```\n\ntext\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\n\ny = 2\nprint(y)\n```\n\n"
        "````{code-cell} ipython3\n---\ntags: [hide-input]\n---\ns = '```'\n````\n"
        "```python\nnot_a_cell = 1\n```\n"
    )
    assert code_cells(text) == ["x = 1", "y = 2\nprint(y)", "s = '```'"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_notebook_is_clean_and_complete(chapter):
    nb = ext.chapter_notebook(chapter)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) >= (4, 5)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert set(nb.metadata) == {"kernelspec", "language_info"}, "Jupytext's metadata left in"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source.strip("\n") for c in code] == code_cells(chapter.read_text())
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert [c.id for c in nb.cells] == [f"cell-{i:03d}" for i in range(len(nb.cells))]
    # The prose is there too: the title is the first cell.
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


def test_chapter_notebook_is_reproducible():
    a, b = (nbformat.writes(ext.chapter_notebook(CHAPTERS[0])) for _ in range(2))
    assert a == b


def test_only_chapters_get_a_notebook():
    assert ext.is_chapter("chapters/01-rnn-bottleneck")
    for other in ("intro", "run", "references", "appendix/notation", "chapters/index"):
        assert not ext.is_chapter(other)


class Links(HTMLParser):
    """Every ``<a href>`` of a page, with its class and whether it is inside the article."""

    def __init__(self):
        super().__init__()
        self.links: list[dict] = []
        self._article = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "article":
            self._article += 1
        if tag == "a" and a.get("href"):
            self.links.append({**a, "in_article": self._article > 0})

    def handle_endtag(self, tag):
        if tag == "article":
            self._article -= 1


def page_links(html_file: Path) -> list[dict]:
    p = Links()
    p.feed(html_file.read_text(encoding="utf-8"))
    return p.links


def resolve(html_file: Path, href: str) -> Path:
    return (html_file.parent / unquote(urlsplit(href).path)).resolve()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_built_chapter_offers_its_notebook(built_book, chapter):
    docname = f"chapters/{chapter.stem}"
    page = built_book / f"{docname}.html"
    if not page.is_file():
        pytest.skip(f"{docname} is not in the built book")
    notebook = built_book / "_sources" / f"{docname}.ipynb"
    assert notebook.is_file(), f"{notebook} was not written"
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source.strip("\n") for c in code] == code_cells(chapter.read_text())
    assert all(c.outputs == [] for c in code), "the download carries outputs"

    links = page_links(page)
    to_notebook = [a for a in links if resolve(page, a["href"]) == notebook.resolve()]
    # The theme's download menu (outside the article) and the line under the title (inside).
    assert any(not a["in_article"] for a in to_notebook), "no .ipynb in the download menu"
    assert any(a["in_article"] and "download" in a for a in to_notebook), (
        "no .ipynb download link in the page's text"
    )
    run_page = (built_book / "run.html").resolve()
    to_run = [a for a in links if resolve(page, a["href"]) == run_page]
    assert any(not a["in_article"] for a in to_run), "no 'Run this chapter' header button"
    assert any(a["in_article"] for a in to_run), "no 'how to run it' link under the title"


def test_run_page_is_linked_from_the_introduction(built_book):
    index = built_book / "intro.html"
    run_page = (built_book / "run.html").resolve()
    links = [a for a in page_links(index) if a["in_article"]]
    assert any(resolve(index, a["href"]) == run_page for a in links)
