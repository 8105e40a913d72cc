"""The reader notebooks (book/_ext/attnbook_reader_notebooks.py): the chapters as the book reads.

Without the book: a toy book of one chapter, written here into ``tmp_path`` with every construct
the chapters use (glue, an admonition, a solution, the misconceptions box, a citation, an API
reference, a library listing, display math, ``remove-cell``/``remove-input``/``hide-input``
cells) and a Chinese catalog, is built as ``book/editions.py`` builds an edition (HTML, then the
``reader-notebooks`` builder on the same doctrees); its notebooks must show no MyST, the glued
values, boxes, collapsed solutions and every code cell of the source, byte for byte. The
negative control: the chapter converted the old way (Jupytext, cell for cell) fails the same
MyST check.

On the built book (``book`` marker): every chapter's notebook in each edition has the chapter's
code cells byte-equal, no raw MyST, every decimal number of the page's prose, no link to a file
the published book lacks, and (Chinese) the language cell first and Chinese prose.
``python tests/book/test_reader_notebooks.py`` prints these measurements for the built book.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, also when run as a script
from conftest import CHAPTER_HEADER  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import execute  # noqa: E402 - book/execute.py: reads a chapter exactly as MyST-NB does

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))
EDITIONS = {"en": "en", "zh": "zh_CN"}
LANGUAGE_CELL = 'from attnbook import i18n; i18n.set_language("{}")'

#: What JupyterLab would show raw: MyST roles, directive fences and options, colon fences.
RAW_MYST = re.compile(
    r"\{(?:glue|cite|py|ref|doc|numref|eq|term|attnbook)[:\w-]*\}`"  # roles
    r"|^\s*(?:`{3,}|~{3,}|:{3,})\s*\{[\w:-]+\}"  # ```{directive} / :::{div}
    r"|^\s*:{4,}\s*$"  # a closing ::::
    r"|^\s*:(?:class|tags|name|label|width|align):(?:[ \t]|$)"  # directive options
    r"|^\(\S+\)=\s*$",  # (label)= targets
    re.M,
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def without_code(text: str) -> str:
    """``text`` without its fenced code blocks (```python ...), as CommonMark parses them: code
    is shown as code, whatever it holds (a listing's docstring may name a ``:class:`X` ``). A
    MyST directive (```{admonition} ...) is a fence too, and stays."""
    from markdown_it import MarkdownIt

    drop: set[int] = set()
    for token in MarkdownIt("commonmark").parse(text):
        if token.type == "fence" and token.map and not token.info.strip().startswith("{"):
            drop.update(range(*token.map))
    return "\n".join(line for i, line in enumerate(text.split("\n")) if i not in drop)


def raw_myst(text: str) -> list[str]:
    """The raw MyST constructs in ``text`` (Markdown a Jupyter front-end renders as it stands),
    outside fenced code blocks."""
    return [m.group(0).strip() for m in RAW_MYST.finditer(without_code(text))]


def markdown(nb) -> str:
    """What a reader sees before running anything, in order: the Markdown cells and the
    listings stored as their cells' outputs."""
    return "\n\n".join(
        c.source if c.cell_type == "markdown" else listing_of(c)
        for c in nb.cells
        if c.cell_type == "markdown" or listing_of(c)
    )


def listing_of(cell) -> str:
    """The Markdown a code cell's stored outputs show (a listing), else ``""``."""
    return "\n\n".join(
        o["data"]["text/markdown"]
        for o in cell.get("outputs", [])
        if "text/markdown" in o.get("data", {})
    )


def outputs_are_listings_only(cells) -> bool:
    """Only a ``remove-input`` cell has an output: one ``display_data`` of Markdown (its
    listing); no cell has an execution count."""
    for c in cells:
        if c.execution_count is not None:
            return False
        if not c.outputs:
            continue
        if "remove-input" not in c.metadata.get("tags", []) or len(c.outputs) != 1:
            return False
        if c.outputs[0]["output_type"] != "display_data" or not listing_of(c):
            return False
    return True


def prose(text: str) -> str:
    """``text`` (notebook Markdown) without code, math, HTML tags and link targets."""
    text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", "", text, flags=re.S)
    text = re.sub(r"<[^>]*>", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def myst_extensions() -> list[str]:
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["parse"]["myst_enable_extensions"]


def source_code_cells(path: Path, extensions: list[str]) -> list[str]:
    nb = execute.read_notebook(path, extensions)
    return [c.source for c in nb.cells if c.cell_type == "code"]


# --------------------------------------------------------------------------------------------------
# The toy book

TOY_CONFIG = """\
title: Toy
author: toy
only_build_toc_files: true
exclude_patterns: [_build, locales, build.py]
execute:
  execute_notebooks: cache
  cache: _build/.jupyter_cache
  raise_on_error: true
parse:
  myst_enable_extensions: [amsmath, colon_fence, deflist, dollarmath, substitution]
launch_buttons:
  thebe: false
bibtex_bibfiles: [references.bib]
sphinx:
  local_extensions:
    attnbook_notebooks: {ext}
  config:
    extensions: [sphinx_togglebutton, sphinx_copybutton, myst_nb, jupyter_book, sphinx_comments,
                 sphinx_external_toc, sphinx_design, sphinx_book_theme, sphinxcontrib.bibtex,
                 attnbook_notebooks, attnbook_reader_notebooks, attnbook_i18n,
                 sphinx.ext.autodoc, sphinx.ext.napoleon]
    bibtex_reference_style: author_year
    locale_dirs: [locales]
    gettext_compact: false
    autodoc_typehints: none
    napoleon_numpy_docstring: false
    nb_execution_raise_on_error: true
"""
TOY_TOC = """\
format: jb-book
root: intro
chapters:
  - file: chapters/01-toy
  - file: references
  - file: api
"""
TOY_CHAPTER = (
    CHAPTER_HEADER
    + r"""
# 1 · A toy chapter

```{admonition} What you will learn
:class: tip

- Why $\sqrt{d_k}$ matters, with **bold** words.
```

Scores are scaled {cite}`vaswani2017attention`; see {py:func}`attnbook.listing.show_code`.

```{code-cell} ipython3
:tags: [remove-cell]

from myst_nb import glue

from attnbook import scaling
from attnbook.listing import show_code
```

The library code:

```{code-cell} ipython3
:tags: [remove-input]

show_code(scaling.score_samples_core, full=scaling.score_samples)
```

```{code-cell} ipython3
x = 3.14159  # a comment, and trailing spaces:<TRAILING>
print(x)
```

```{code-cell} ipython3
:tags: [remove-cell]

glue("toy_x", x, display=False)
```

The measured value is {glue:text}`toy_x:.3f`, and

$$
y = x^2
$$

## Common misconceptions

::::{div} misconceptions
- **"A myth."** No: {glue:text}`toy_x:.1f`.
::::

```{code-cell} ipython3
:tags: [hide-input]

y = x ** 2
```

**Exercise 1.** Compute $x^2$.

```{admonition} Solution
:class: dropdown

It is $x^2$, about {glue:text}`toy_x:.2f` squared.
```

```{note}
A plain note.
```

```{code-cell} ipython3
:tags: [remove-cell]

z = 1
```
"""
)
TOY_PO = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Language: zh_CN\n"

msgid "1 · A toy chapter"
msgstr "1 · 一个玩具章节"

msgid "What you will learn"
msgstr "本章你将学到"

msgid "Why $\\sqrt{d_k}$ matters, with **bold** words."
msgstr "为什么 $\\sqrt{d_k}$ 重要，还有**粗体**字。"

msgid "The library code:"
msgstr "库代码："

msgid "The measured value is {glue:text}`toy_x:.3f`, and"
msgstr "测得的值是 {glue:text}`toy_x:.3f`，而且"

msgid "Solution"
msgstr "解答"

msgid "It is $x^2$, about {glue:text}`toy_x:.2f` squared."
msgstr "它是 $x^2$，约为 {glue:text}`toy_x:.2f` 的平方。"
"""
TOY_BIB = """\
@inproceedings{vaswani2017attention,
  title={Attention is all you need},
  author={Vaswani, Ashish and Shazeer, Noam and Parmar, Niki},
  booktitle={NeurIPS},
  year={2017}
}
"""
#: Each edition as book/editions.py builds it: the HTML, then the notebooks on its doctrees.
TOY_BUILD = """\
import sys
from pathlib import Path
from jupyter_book.sphinx import build_sphinx

root = Path(sys.argv[1])
for language in sys.argv[2:]:
    out = root / "_build" / language / "html"
    overrides = {"external_toc_path": "_toc.yml", "latex_individualpages": False,
                 "nitpicky": True, "language": language}
    for builder in ("html", "reader-notebooks"):
        status = build_sphinx(root, out, noconfig=True, path_config=root / "_config.yml",
                              confoverrides=dict(overrides), builder=builder,
                              warningiserror=True, keep_going=True)
        if status:
            sys.exit(f"{language} {builder}: {status}")
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    """The toy book, built in both languages: ``{"root": Path, "en": nb, "zh_CN": nb}``."""
    root = tmp_path_factory.mktemp("toybook")
    files = {
        "_config.yml": TOY_CONFIG.format(ext=ROOT / "book" / "_ext"),
        "_toc.yml": TOY_TOC,
        "intro.md": "# Toy\n\nA toy book.\n",
        "references.md": "# References\n\n```{bibliography}\n```\n",
        "references.bib": TOY_BIB,
        "api.md": "# API\n\n```{eval-rst}\n.. automodule:: attnbook.listing\n   :members:\n```\n",
        "chapters/01-toy.md": TOY_CHAPTER.replace("<TRAILING>", "   "),
        "locales/zh_CN/LC_MESSAGES/chapters/01-toy.po": TOY_PO,
        "build.py": TOY_BUILD,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    out = {"root": root}
    run = subprocess.run(
        [sys.executable, "build.py", str(root), "en", "zh_CN"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for language in ("en", "zh_CN"):
        html = root / "_build" / language / "html"
        out[language] = nbformat.read(html / "_sources/chapters/01-toy.ipynb", as_version=4)
        out[language + "_html"] = html
    return out


def test_toy_code_cells_are_the_chapters_own_byte_for_byte(toy):
    source = source_code_cells(toy["root"] / "chapters/01-toy.md", myst_extensions())
    assert len(source) == 6
    en = [c for c in toy["en"].cells if c.cell_type == "code"]
    assert [c.source for c in en] == source  # the trailing spaces too
    zh = [c for c in toy["zh_CN"].cells if c.cell_type == "code"]
    # The title comes first, then the language cell, before every other code cell.
    assert toy["zh_CN"].cells[0].cell_type == "markdown"
    assert toy["zh_CN"].cells[0].source.startswith("# ")
    assert toy["zh_CN"].cells[1].source == LANGUAGE_CELL.format("zh_CN")
    assert [c.source for c in zh] == [LANGUAGE_CELL.format("zh_CN")] + source
    for nb in (toy["en"], toy["zh_CN"]):
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert outputs_are_listings_only(code)
        # The listing is the show_code cell's output, written once: running the cell replaces
        # it instead of printing it under a Markdown copy.
        listing = [c for c in code if c.outputs]
        assert [c.source.split("(")[0] for c in listing] == ["show_code"]
        assert listing_of(listing[0]).startswith("```python\ndef score_samples_core(")
        assert markdown(nb).count("def score_samples_core(") == 1


def test_toy_hidden_cells_are_kept_collapsed(toy):
    code = [c for c in toy["en"].cells if c.cell_type == "code"]
    hidden = [c.metadata.get("jupyter", {}).get("source_hidden", False) for c in code]
    tags = [c.metadata.get("tags", []) for c in code]
    assert tags == [
        ["remove-cell"],
        ["remove-input"],
        [],
        ["remove-cell"],
        ["hide-input"],
        ["remove-cell"],
    ]
    assert hidden == [True, True, False, True, True, True]


def test_toy_cells_stand_where_the_chapter_has_them(toy):
    kinds = [(c.cell_type, c.source.split("\n")[0][:30]) for c in toy["en"].cells]
    assert kinds == [
        ("markdown", "# 1 · A toy chapter"),
        ("code", "from myst_nb import glue"),
        ("markdown", "The library code:"),
        ("code", "show_code(scaling.score_sample"),  # its output: the listing (stored)
        ("code", "x = 3.14159  # a comment, and "),
        ("code", 'glue("toy_x", x, display=False'),
        ("markdown", "The measured value is 3.142, a"),
        ("code", "y = x ** 2"),
        ("markdown", "**Exercise 1.** Compute $x^2$."),
        ("code", "z = 1"),
    ]


def test_toy_markdown_is_the_resolved_page(toy):
    text = markdown(toy["en"])
    assert raw_myst(text) == []
    # Glued values, from the book's run, and the note that says so under the title.
    assert "The measured value is 3.142, and" in text
    assert "No: 3.1." in text and "about 3.14 squared" in text
    title, note = toy["en"].cells[0].source.split("\n\n")[:2]
    assert "book's own run" in note
    # Boxes: a titled div; the solution collapsed; the misconceptions a box.
    assert '<div class="attnbook-box"' in text and "**What you will learn**" in text
    assert "<details>\n<summary>Solution</summary>\n\nIt is $x^2$" in text
    assert text.count('<div class="attnbook-box"') == 3  # learn, misconceptions, note
    assert "**Note**\n\nA plain note." in text
    # The citation in full, linked to the references page that exists beside the notebook.
    html = toy["en_html"]
    links = re.findall(r"\[([^\[\]]*)\]\(([^)]+)\)", text)
    cite = [(t, href) for t, href in links if "2017" in t]
    assert cite and cite[0][0] == "Vaswani *et al.*, 2017"
    for _text, href in links:
        target = (html / "_sources/chapters" / href.split("#")[0]).resolve()
        assert target.is_file(), href
    assert any(href.startswith("../../api.html#attnbook.listing.show_code") for _t, href in links)
    # The same notebook in the edition's notebook tree (what `make lab` opens): its links lead
    # to the tree's Markdown pages, which exist; the code cells are the same.
    tree = html.parent / "notebooks"
    in_tree = nbformat.read(tree / "chapters/01-toy.ipynb", as_version=4)
    assert [c.source for c in in_tree.cells if c.cell_type == "code"] == [
        c.source for c in toy["en"].cells if c.cell_type == "code"
    ]
    tree_links = re.findall(
        r"\]\(([^)]+)\)", "\n".join(c.source for c in in_tree.cells if c.cell_type == "markdown")
    )
    assert len(tree_links) == len(links)
    for href in tree_links:
        assert (tree / "chapters" / href.split("#")[0]).resolve().is_file(), href
    assert any(href.startswith("../api.md#attnbook.listing.show_code") for href in tree_links)
    # ... and lands on the entry: the Markdown page has the anchor, and each entry is its own
    # short heading (a context left open would run every entry into one heading).
    api = (tree / "api.md").read_text("utf-8")
    assert '<a id="attnbook.listing.show_code"></a>' in api
    assert heading_problems(api) == []
    assert heading_problems("### f(x)<br/><br/>Returns x.\n") != []  # the check can fail
    assert "Vaswani" in (tree / "references.md").read_text(encoding="utf-8")
    # Math as in the book, with no blank line inside a display block.
    assert "$$\ny = x^2\n$$" in text
    # The listing: the core open, the full function collapsed.
    assert "```python\ndef score_samples_core(" in text
    assert '<details class="attnbook-full-listing">' in text


def test_toy_chinese_notebook_has_chinese_prose(toy):
    nb = toy["zh_CN"]
    text = markdown(nb)
    assert raw_myst(text) == []
    assert "# 1 · 一个玩具章节" in text and "**本章你将学到**" in text
    assert "测得的值是 3.142，而且" in text
    assert "<summary>解答</summary>\n\n它是 $x^2$，约为 3.14 的平方。" in text
    assert "正文中的数字是构建本书时算出的" in nb.cells[0].source
    assert "*注：" not in nb.cells[0].source  # no italics in Chinese (no CJK italic face)
    # No half-width space pushed in before an emphasis mark inside Chinese prose.
    assert not re.search(r"[\u4e00-\u9fff] \*+[\u4e00-\u9fff]", text), text
    english = [c.source for c in toy["en"].cells if c.cell_type == "code"]
    assert [c.source for c in nb.cells if c.cell_type == "code"][1:] == english


def test_old_conversion_fails_the_myst_check(toy):
    """Negative control: the chapter converted cell for cell (the old download) shows MyST."""
    import jupytext

    old = jupytext.read(toy["root"] / "chapters/01-toy.md", fmt="md:myst")
    found = raw_myst(markdown(old))
    assert {
        "{cite}`",
        "{py:func}`",
        "{glue:text}`",
        ":class:",
        "```{admonition}",
        "::::{div}",
        "::::",
    } <= set(found), found


def test_raw_myst_detector():
    assert raw_myst("a {glue:text}`x:.2f` b {cite}`k` {py:func}`f`") == [
        "{glue:text}`",
        "{cite}`",
        "{py:func}`",
    ]
    assert raw_myst("```{admonition} T\n:class: tip\n```\n::::{div} m\n::::\n(lab)=\n") == [
        "```{admonition}",
        ":class:",
        "::::{div}",
        "::::",
        "(lab)=",
    ]
    assert raw_myst("```python\nx = {'a': 1}\n```\n$\\{x\\}$ and {glue} `x` prose") == []
    # Code is code: a docstring's role inside a listing is not MyST a reader sees.
    assert raw_myst('```python\n"""Returns:\n    :class:`Stats`."""\n```\n') == []
    assert raw_myst("````{admonition} S\n:class: dropdown\n```python\nx\n```\n````\n") == [
        "````{admonition}",
        ":class:",
    ]


# --------------------------------------------------------------------------------------------------
# The built book's notebooks


def notebook_of(html: Path, chapter: Path):
    return nbformat.read(html / "_sources" / "chapters" / f"{chapter.stem}.ipynb", as_version=4)


def measure(edition: Path, chapter: Path) -> dict:
    """What a reader of ``chapter``'s notebook in ``edition`` gets (see the module docstring)."""
    from test_editions import parse

    nb = notebook_of(edition, chapter)
    text = markdown(nb)
    page = parse(edition / "chapters" / f"{chapter.stem}.html")
    decimals = _DECIMAL.findall("".join(page.prose))
    words = prose(text)
    here = edition / "_sources" / "chapters"
    links = [
        href
        for href in re.findall(r"\]\(([^)\s]+)\)", without_code(text))
        if not re.match(r"[a-z]+:", href) and href.split("#")[0]
    ]
    return {
        "links": len(links),
        "dead_links": [h for h in links if not (here / unquote(h.split("#")[0])).is_file()],
        "raw_myst": raw_myst(text),
        "bytes": (edition / "_sources" / "chapters" / f"{chapter.stem}.ipynb").stat().st_size,
        "decimals": len(decimals),
        "decimals_missing": [d for d in decimals if d not in text],
        "cjk": len(_CJK.findall(words)),
        "latin": sum(len(w) for w in _LATIN_WORD.findall(words)),
        "nb": nb,
    }


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
@pytest.mark.parametrize("code", sorted(EDITIONS))
def test_built_reader_notebook(code, chapter, built_editions):
    m = measure(built_editions[code], chapter)
    nb = m["nb"]
    nbformat.validate(nb)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    if code == "zh":
        assert nb.cells[0].cell_type == "markdown"  # the title, then the language cell
        assert nb.cells[0].source.startswith("# ")
        assert nb.cells[1].source == LANGUAGE_CELL.format("zh_CN")
        assert code_cells[0] is nb.cells[1]
        code_cells = code_cells[1:]
        assert m["cjk"] > 2 * m["latin"], (m["cjk"], m["latin"])
    assert [c.source for c in code_cells] == source_code_cells(chapter, myst_extensions())
    assert outputs_are_listings_only(code_cells)
    assert m["raw_myst"] == []
    assert m["decimals"] > 0, "no decimal number found in the page: the test reads the wrong text"
    assert m["decimals_missing"] == []
    assert m["bytes"] < 200_000
    # Links to the references, the API and other chapters lead to files of the published book.
    assert m["dead_links"] == []


def main() -> None:
    """Print the measurements of the built book's reader notebooks."""
    book = ROOT / "_build" / "html"
    for code in sorted(EDITIONS):
        rows = [(c.stem[:2], measure(book / code, c)) for c in CHAPTERS]
        total = {
            key: sum(m[key] for _c, m in rows) for key in ("decimals", "bytes", "cjk", "latin")
        }
        found = total["decimals"] - sum(len(m["decimals_missing"]) for _c, m in rows)
        share = total["cjk"] / max(1, total["cjk"] + total["latin"])
        print(
            f"{code}: raw MyST {sum(len(m['raw_myst']) for _c, m in rows)}; prose decimals "
            f"{found} of {total['decimals']} in the notebooks; {total['bytes']} bytes in all, "
            f"{min(m['bytes'] for _c, m in rows)}-{max(m['bytes'] for _c, m in rows)} each; "
            f"CJK characters / (CJK + Latin letters) of the prose {share:.2f}"
        )
        print(
            f"  links {sum(m['links'] for _c, m in rows)}, dead "
            f"{sum(len(m['dead_links']) for _c, m in rows)}"
        )
        for stem, m in rows:
            print(
                f"  {stem}: decimals {m['decimals'] - len(m['decimals_missing'])}/"
                f"{m['decimals']}, {m['bytes']} B, CJK {m['cjk']}, Latin {m['latin']}, "
                f"missing {m['decimals_missing'][:5]}"
            )


if __name__ == "__main__":
    main()


def heading_problems(markdown: str) -> list[str]:
    """Headings of a Markdown page that swallowed what follows them: a line break or a field
    list inside, or over 1,000 characters (a long signature is allowed; the start of each)."""
    return [
        line[:80]
        for line in markdown.splitlines()
        if line.startswith("#") and ("<br" in line or "**Parameters:**" in line or len(line) > 1000)
    ]


def test_built_markdown_pages_have_plain_headings(notebook_trees):
    """Every page of both notebook trees (references, API, appendices) has headings that are
    headings."""
    for code, tree in notebook_trees.items():
        pages = sorted(tree.rglob("*.md"))
        assert len(pages) > 40, f"{code}: only {len(pages)} Markdown pages in {tree}"
        bad = {
            p.relative_to(tree).as_posix(): heading_problems(p.read_text("utf-8")) for p in pages
        }
        bad = {k: v for k, v in bad.items() if v}
        assert not bad, f"{code}: headings that swallowed their entries: {bad}"


# --------------------------------------------------------------------------------------------------
# The Chinese notebooks, executed headless (nbclient's `jupyter execute`), every chapter: the code
# is the English notebooks' plus the one cell that sets the figures' language, so this also
# runs every English cell. Each run's prose numbers are compared with the book's run.

EXECUTE_TIMEOUT_S = 900


@pytest.mark.slow
def test_chinese_notebooks_execute_headless(notebook_trees, tmp_path):
    import concurrent.futures
    import os
    import shutil

    sys.path.insert(0, str(ROOT / "book"))
    import execute

    from prose_numbers import differing, glued_text

    chapters = sorted((notebook_trees["zh"] / "chapters").glob("*.ipynb"))
    assert len(chapters) == len(CHAPTERS)
    work = tmp_path / "chapters"
    shutil.copytree(notebook_trees["zh"] / "chapters", work)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)  # as a reader's kernel: chapter 12 sets what it needs
    exe = str(Path(sys.executable).parent / "jupyter-execute")

    def run(path: Path) -> tuple[Path, int, str]:
        proc = subprocess.run(
            [exe, "--inplace", f"--timeout={EXECUTE_TIMEOUT_S}", path.name],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=EXECUTE_TIMEOUT_S,
            check=False,
        )
        return path, proc.returncode, proc.stderr[-3000:]

    # Two at a time (two cores), longest first.
    order = sorted(work.glob("*.ipynb"), key=lambda p: -p.stat().st_size)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, order))
    failed = [f"{p.name} (exit {rc}):\n{err}" for p, rc, err in results if rc != 0]
    assert not failed, "\n\n".join(failed)
    problems = []
    for path in sorted(work.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code[0].source == 'from attnbook import i18n; i18n.set_language("zh_CN")'
        assert all(c.execution_count for c in code), f"{path.name}: a cell did not run"
        book = glued_text(execute.executed_notebook(f"chapters/{path.stem}.md"))
        differ = differing(path.stem, glued_text(nb), book)
        if differ:
            problems.append(f"{path.stem}: {differ}")
    assert not problems, "prose numbers a headless run computed differently:\n" + "\n".join(
        problems
    )


def test_timing_allow_list_names_glued_values():
    """Every key of prose_numbers.TIMINGS is glued by its chapter (a renamed value would leave
    a stale entry that excuses nothing, or a new timing unlisted)."""
    from prose_numbers import TIMINGS

    for chapter, keys in TIMINGS.items():
        source = (ROOT / "chapters" / f"{chapter}.md").read_text(encoding="utf-8")
        missing = [k for k in sorted(keys) if f'glue("{k}"' not in source]
        assert not missing, f"{chapter}: TIMINGS names values it does not glue: {missing}"


def test_toy_builder_replaces_only_a_tree_it_wrote(toy):
    """A second build replaces the tree it marked; a folder of that name it did not write
    (no marker) fails the build and keeps its files."""
    root = toy["root"]
    tree = root / "_build" / "en" / "notebooks"
    assert (tree / ".attnbook-notebook-tree").is_file()
    (tree / "stale.md").write_text("a page since removed")
    run = subprocess.run(
        [sys.executable, "build.py", str(root), "en"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert not (tree / "stale.md").exists() and (tree / "chapters/01-toy.ipynb").is_file()
    (tree / ".attnbook-notebook-tree").unlink()
    (tree / "precious.txt").write_text("not the builder's")
    run = subprocess.run(
        [sys.executable, "build.py", str(root), "en"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode != 0 and "is not a notebook tree" in run.stdout + run.stderr
    assert (tree / "precious.txt").read_text() == "not the builder's"
    # Put the toy back as the other tests expect it.
    (tree / "precious.txt").unlink()
    (tree / ".attnbook-notebook-tree").write_text("")
