"""Every chapter as a downloadable notebook (book/_ext/attnbook_notebooks.py).

On the built book, in each edition: each chapter's reader notebook
``_sources/chapters/NN-topic.ipynb`` (written by book/_ext/attnbook_reader_notebooks.py, whose
own tests are in test_reader_notebooks.py) exists, is valid, holds the chapter's code cells,
read here by a small parser of our own (not by MyST-NB, which the builder uses), and the
chapter's page links it twice (the download menu and the line under the title) and links the
"Run it yourself" page.

The source archive (``_downloads/attnbook-source.zip``): without a build, ``source_archive``
zips a small tree made here with every kind of file it must leave out, and the repository
itself (what it keeps is what Git tracks); the bytes do not depend on the files' dates. On the
built book the archive exists, and the run page and every chapter link it.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import attnbook_notebooks as ext  # noqa: E402
from test_reader_notebooks import outputs_are_listings_only  # noqa: E402

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
            body = body[body.index("---", 1) + 1 :]
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
@pytest.mark.parametrize("edition", ["en", "zh"])
def test_built_chapter_offers_its_notebook(built_editions, edition, chapter):
    built_book = built_editions[edition]
    docname = f"chapters/{chapter.stem}"
    page = built_book / f"{docname}.html"
    if not page.is_file():
        pytest.skip(f"{docname} is not in the built book")
    notebook = built_book / "_sources" / f"{docname}.ipynb"
    assert notebook.is_file(), f"{notebook} was not written"
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if edition == "zh":  # the figures' language first (test_reader_notebooks.py)
        assert code[0].source.startswith("from attnbook import i18n;")
        code = code[1:]
    assert [c.source.strip("\n") for c in code] == code_cells(chapter.read_text())
    # No outputs, except each library listing, stored as its folded cell's output
    # (test_reader_notebooks.py).
    assert outputs_are_listings_only(code), "the download carries outputs"

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
    archive = (built_book / ext.ARCHIVE).resolve()
    assert any(
        a["in_article"] and "download" in a and resolve(page, a["href"]) == archive for a in links
    ), "no link to the book's code under the title"


def test_run_page_is_linked_from_the_introduction(built_book):
    index = built_book / "intro.html"
    run_page = (built_book / "run.html").resolve()
    links = [a for a in page_links(index) if a["in_article"]]
    assert any(resolve(index, a["href"]) == run_page for a in links)


# --------------------------------------------------------------------------------------------------
# The source archive

#: A tree with what the archive keeps (True) and what it must leave out (False).
TREE = {
    "Makefile": True,
    "README.md": True,
    ".gitignore": True,
    ".ci/run": True,
    "chapters/01-a.md": True,
    "chapters/01-a.ipynb": False,
    "chapters/.ipynb_checkpoints/01-a-checkpoint.ipynb": False,
    "lib/attnbook/__init__.py": True,
    "lib/attnbook/__pycache__/__init__.cpython-311.pyc": False,
    "lib/attnbook.egg-info/PKG-INFO": False,
    "lib/attnbook/.hidden": False,
    "benchmarks/results/cpu.csv": True,
    "benchmarks/_scratch/tmp.csv": False,
    ".git/config": False,
    ".venv/bin/python": False,
    ".pytest_cache/README.md": False,
    ".ruff_cache/x": False,
    ".hypothesis/examples/x": False,
    ".jupyter_cache/global.db": False,
    ".env": False,
    "_build/html/index.html": False,
    "_build/html/_downloads/attnbook-source.zip": False,
    "tests/test_x.py": True,
}


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "repo"
    for i, rel in enumerate(TREE):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}: {rel}\n")
    (root / ".ci" / "run").chmod(0o755)
    (root / "lib" / "attnbook" / "__init__.py").chmod(0o600)
    (root / "link.md").symlink_to(root / "README.md")
    (root / "linked-lib").symlink_to(root / "lib", target_is_directory=True)
    return root


def members(data: bytes) -> dict[str, zipfile.ZipInfo]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        return {info.filename: info for info in zf.infolist()}


def test_source_archive_keeps_the_sources_and_leaves_out_the_rest(tree):
    data = ext.source_archive(tree)
    kept = sorted(rel for rel, keep in TREE.items() if keep)
    info = members(data)
    assert list(info) == [f"attnbook-source/{rel}" for rel in kept]  # sorted, one folder
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for rel in kept:
            assert zf.read(f"attnbook-source/{rel}") == (tree / rel).read_bytes()
    modes = {name[len("attnbook-source/") :]: i.external_attr >> 16 for name, i in info.items()}
    assert modes[".ci/run"] == 0o100755  # unzip keeps the script executable
    assert modes["lib/attnbook/__init__.py"] == 0o100644
    assert modes["README.md"] == 0o100644
    assert {i.date_time for i in info.values()} == {(1980, 1, 1, 0, 0, 0)}


def test_source_archive_is_byte_identical_whatever_the_dates(tree):
    first = ext.source_archive(tree)
    for path in tree.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (1_900_000_000, 1_900_000_000))
    assert ext.source_archive(tree) == first
    (tree / "README.md").write_text("changed\n")
    assert ext.source_archive(tree) != first  # the bytes do follow the contents


def test_source_archive_carries_the_notebook_trees(tree, tmp_path):
    """Each edition's tree goes under notebooks/<code>/, notebooks included, in sorted order."""
    trees = {}
    for code in ("zh", "en"):
        trees[code] = tmp_path / f"tree-{code}"
        (trees[code] / "chapters").mkdir(parents=True)
        (trees[code] / "chapters" / "01-x.ipynb").write_text(f"{code} notebook")
        (trees[code] / "references.md").write_text(f"{code} refs")
    data = ext.source_archive(tree, trees)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
        assert zf.read("attnbook-source/notebooks/zh/chapters/01-x.ipynb") == b"zh notebook"
        assert zf.read("attnbook-source/notebooks/en/references.md") == b"en refs"
    assert names == sorted(names)
    assert set(members(ext.source_archive(tree))) < set(names)
    assert ext.source_archive(tree, dict(reversed(trees.items()))) == data  # order-free


def test_source_archive_leaves_out_a_readers_notebooks_and_compiled_catalogs(tree):
    """A reader's notebooks/ (make lab's copy) and *.mo (build output) are not sources."""
    (tree / "notebooks" / "en" / "chapters").mkdir(parents=True)
    (tree / "notebooks" / "en" / "references.md").write_text("my copy")
    (tree / "notebooks" / "en" / "chapters" / "01-x.ipynb").write_text("{}")
    (tree / "lib" / "notebooks").mkdir(parents=True, exist_ok=True)
    (tree / "lib" / "notebooks" / "kept.md").write_text("a folder of that name elsewhere")
    (tree / "locales").mkdir(exist_ok=True)
    (tree / "locales" / "run.mo").write_bytes(b"\x00")
    files = ext.archive_files(tree)
    assert not [f for f in files if f.startswith("notebooks/") or f.endswith(".mo")], files
    assert "lib/notebooks/kept.md" in files


def test_source_archive_of_the_repository():
    files = ext.archive_files(ROOT)
    for rel in (
        "lib/attnbook/__init__.py",
        "pyproject.toml",
        "requirements.txt",
        "requirements-test.txt",
        "Makefile",
        "jupytext.toml",
        "jupyter/source/overrides.json",
        "jupyter/reader/overrides.json",
        "jupyter/jupyter_server_config.py",
        "README.md",
        "CONTRIBUTING.md",
        "benchmarks/results/cpu_flash.csv",
        "book/_ext/attnbook_notebooks.py",
    ):
        assert rel in files
    assert {f"chapters/{c.name}" for c in CHAPTERS} <= set(files)
    for rel in files:
        parts = rel.split("/")
        assert not rel.endswith((".ipynb", ".pyc")), rel
        assert not {".git", ".venv", "_build", "__pycache__"} & set(parts), rel
        assert not any(p.endswith(".egg-info") for p in parts), rel
    git = shutil.which("git")
    if git and (ROOT / ".git").exists():
        tracked = subprocess.run(
            [git, "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        # Only git reads this one (blame skips the formatting commit): no use without .git.
        git_only = {".git-blame-ignore-revs"}
        missing = [
            rel
            for rel in tracked
            if (ROOT / rel).is_file() and rel not in files and rel not in git_only
        ]
        assert missing == [], "tracked files the archive leaves out"
    # About 2.0 MB today (the shipped checkpoint is 0.4 MB of it, the catalogs and chapters most
    # of the rest); the ceiling catches a stray build output, notebook or data set (megabytes),
    # not the book's own growth.
    size = len(ext.source_archive(ROOT))
    assert size < 2_500_000, f"the archive is {size} bytes"


def test_built_book_carries_its_source(built_book):
    archive = built_book / ext.ARCHIVE
    assert archive.is_file(), f"{archive} was not written"
    info = members(archive.read_bytes())
    for rel in ("lib/attnbook/__init__.py", "requirements.txt", "Makefile", "run.md"):
        assert f"attnbook-source/{rel}" in info
    assert not [name for name in info if "/_build/" in name]
    # Both editions' notebook trees, as built (what `make lab` opens in the unzipped folder),
    # and no other notebook.
    data = archive.read_bytes()
    notebooks = sorted(n for n in info if n.endswith(".ipynb"))
    expected = sorted(
        f"attnbook-source/notebooks/{code}/chapters/{c.stem}.ipynb"
        for code in ("en", "zh")
        for c in CHAPTERS
    )
    assert notebooks == expected
    tree = ROOT / "_build" / "notebooks"
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for code in ("en", "zh"):
            for rel in ("chapters/03-scaling-variance.ipynb", "references.md"):
                assert (
                    zf.read(f"attnbook-source/notebooks/{code}/{rel}")
                    == (tree / code / rel).read_bytes()
                ), f"{code}/{rel} differs from the build's"
    other = built_book.parent / "zh" / ext.ARCHIVE
    assert other.read_bytes() == data, "the two editions offer different archives"
    page = built_book / "run.html"
    links = [a for a in page_links(page) if a["in_article"] and "download" in a]
    assert any(resolve(page, a["href"]) == archive.resolve() for a in links), (
        "the run page does not link the archive"
    )
