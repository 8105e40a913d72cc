"""The code a reader sees in the built chapters: every visible code block, and the figures.

Run on a built book (``make book``)::

    .venv/bin/python tests/book/listing_stats.py            # _build/html
    .venv/bin/python tests/book/listing_stats.py PATH/html  # another build

It prints the figures of issue 9: the number of visible library listings, their median and
longest length, the visible blocks longer than 40 lines and the visible code lines wider than
79 columns. ``tests/book/test_listings.py`` asserts the limits on the same blocks.

What counts, read from the HTML that Sphinx and MyST-NB write for ``_build/html/chapters/*.html``:

* A **code block** is an element with a class ``highlight-<language>`` and the ``<pre>`` inside
  it. Text outputs (``print``, a cell's ``text/plain`` result) carry the class ``output`` (or
  the language ``myst-ansi``) and are not code. A block in the prose without a language
  (``highlight-none``) is code too: it must not scroll either.
* A **library listing**, in the figures, is a listing in Python (``highlight-python``, or
  ``highlight-default`` for a ``literalinclude`` without ``:language:``).
* A **listing** is a code block outside a notebook input cell (``div.cell_input``): the library
  code ``attnbook.listing.show_code`` renders (a cell's Markdown output), a ``literalinclude``,
  a fenced block in the prose. A visible **input cell** is code the reader runs.
* A block is **hidden** when it sits inside a collapsed element: a ``<details>`` without
  ``open`` (``show_code``'s full function, MyST-NB's ``hide-input``/``hide-output``, a
  sphinx-design dropdown), a sphinx-togglebutton dropdown (``admonition`` with class
  ``dropdown``, or class ``toggle``) or the input/output of a cell tagged ``hide-input``,
  ``hide-output`` or ``hide-cell`` (``div.cell.tag_hide-*``).
"""

from __future__ import annotations

import html
import statistics
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

#: The limits of issue 9 for what a reader sees open: a listing's lines, any code line's columns.
MAX_LINES = 30
#: The most lines of a visible input cell (a chapter's own code, shown open).
MAX_CELL_LINES = 40
MAX_COLUMNS = 79
#: The figure the issue reported ("visible blocks longer than 40 lines").
LONG_BLOCK = 40

VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
#: Text outputs of cells (``print``, ``text/plain``), not code.
NOT_CODE_LANGUAGES = {"myst-ansi"}
#: Languages of a library listing (``default`` is Sphinx's Python-first highlighter, which a
#: literalinclude without ``:language:`` gets).
PYTHON_LANGUAGES = {"python", "python3", "py", "default"}


@dataclass
class CodeBlock:
    """One code block of a page, with what decides whether and how it is checked."""

    page: str
    language: str
    text: str
    hidden: bool
    in_input_cell: bool

    @property
    def lines(self) -> list[str]:
        return self.text.rstrip("\n").split("\n") if self.text.strip() else []

    @property
    def is_listing(self) -> bool:
        return not self.in_input_cell

    @property
    def title(self) -> str:
        """The first line that names something (``def f(...)``, ``class C``), else line 1."""
        for line in self.lines:
            if line.lstrip().startswith(("def ", "class ", "async def ")):
                return line.strip()
        return self.lines[0].strip() if self.lines else ""


class CodeBlockParser(HTMLParser):
    """Collect the code blocks of one HTML page (see the module docstring for the rules)."""

    def __init__(self, page: str = "") -> None:
        super().__init__(convert_charrefs=False)
        self.page = page
        self.blocks: list[CodeBlock] = []
        # One entry per open element: (tag, hides its content, is a cell input, hide tags of a
        # notebook cell, language of a code block or None).
        self._stack: list[tuple[str, bool, bool, frozenset, str | None]] = []
        self._text: list[str] | None = None  # the <pre> text being read

    def _inside(self, index: int) -> bool:
        return any(entry[index] for entry in self._stack)

    def handle_starttag(self, tag: str, attrs) -> None:
        attr = dict(attrs)
        classes = set((attr.get("class") or "").split())
        hides = (
            (tag == "details" and "open" not in attr)
            or ("dropdown" in classes and ("admonition" in classes or "sd-dropdown" in classes))
            or "toggle" in classes
        )
        cell_tags = frozenset(
            c.removeprefix("tag_")
            for c in classes
            if c in ("tag_hide-input", "tag_hide-output", "tag_hide-cell")
        )
        enclosing = next((e[3] for e in reversed(self._stack) if e[3]), frozenset())
        if "cell_input" in classes and enclosing & {"hide-input", "hide-cell"}:
            hides = True
        if "cell_output" in classes and enclosing & {"hide-output", "hide-cell"}:
            hides = True
        language = None
        for cls in classes:
            if cls.startswith("highlight-") and "output" not in classes:
                language = cls.removeprefix("highlight-")
        if language in NOT_CODE_LANGUAGES:
            language = None
        if tag == "pre" and self._text is None and any(e[4] for e in self._stack):
            self._text = []
        if tag not in VOID:
            self._stack.append((tag, hides, "cell_input" in classes, cell_tags, language))

    def handle_startendtag(self, tag: str, attrs) -> None:
        pass  # <br/> and the like: no content

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        while self._stack:
            entry = self._stack.pop()
            if entry[0] == "pre" and self._text is not None:
                language = next(e[4] for e in reversed(self._stack) if e[4])
                self.blocks.append(
                    CodeBlock(
                        self.page,
                        language,
                        "".join(self._text),
                        hidden=self._inside(1),
                        in_input_cell=self._inside(2),
                    )
                )
                self._text = None
            if entry[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_entityref(self, name: str) -> None:
        self.handle_data(html.unescape(f"&{name};"))

    def handle_charref(self, name: str) -> None:
        self.handle_data(html.unescape(f"&#{name};"))


def code_blocks(page_html: str, page: str = "") -> list[CodeBlock]:
    parser = CodeBlockParser(page)
    parser.feed(page_html)
    parser.close()
    return parser.blocks


def chapter_pages(html_dir: Path) -> list[Path]:
    return sorted((html_dir / "chapters").glob("*.html"))


def book_code_blocks(html_dir: Path) -> list[CodeBlock]:
    """Every code block of every built chapter page."""
    return [
        block
        for path in chapter_pages(html_dir)
        for block in code_blocks(path.read_text(encoding="utf-8"), path.stem)
    ]


def limit_problems(blocks: list[CodeBlock]) -> list[str]:
    """Visible listings over MAX_LINES lines, visible input cells over MAX_CELL_LINES lines,
    visible code lines over MAX_COLUMNS columns."""
    problems = []
    for block in blocks:
        if block.hidden:
            continue
        kind = "listing" if block.is_listing else "input cell"
        limit = MAX_LINES if block.is_listing else MAX_CELL_LINES
        if len(block.lines) > limit:
            problems.append(
                f"{block.page}: {kind} `{block.title}` has {len(block.lines)} lines "
                f"(at most {limit})"
            )
        for number, line in enumerate(block.lines, 1):
            if len(line) > MAX_COLUMNS:
                problems.append(
                    f"{block.page}: {kind} `{block.title}`, line {number} has "
                    f"{len(line)} columns (at most {MAX_COLUMNS}): {line.strip()[:60]}"
                )
    return problems


def figures(blocks: list[CodeBlock]) -> dict:
    """The issue's figures for what a reader sees open."""
    visible = [b for b in blocks if not b.hidden]
    listings = [b for b in visible if b.is_listing and b.language in PYTHON_LANGUAGES]
    lengths = [len(b.lines) for b in listings]
    longest = max(listings, key=lambda b: len(b.lines), default=None)
    return {
        "visible library listings": len(listings),
        "median listing length (lines)": statistics.median(lengths) if lengths else 0,
        "longest listing (lines)": len(longest.lines) if longest else 0,
        "longest listing": f"{longest.page}: {longest.title}" if longest else "",
        f"visible blocks longer than {LONG_BLOCK} lines": sum(
            len(b.lines) > LONG_BLOCK for b in visible
        ),
        f"visible code lines wider than {MAX_COLUMNS} columns": sum(
            len(line) > MAX_COLUMNS for b in visible for line in b.lines
        ),
        "visible input cells": sum(not b.is_listing for b in visible),
        "hidden code blocks": len(blocks) - len(visible),
    }


def main(argv: list[str]) -> int:
    default = Path(__file__).resolve().parents[2] / "_build" / "html"
    html_dir = Path(argv[1]) if len(argv) > 1 else default
    if not chapter_pages(html_dir):
        print(f"no chapter pages under {html_dir}/chapters: build the book first (make book)")
        return 2
    blocks = book_code_blocks(html_dir)
    for name, value in figures(blocks).items():
        print(f"{name}: {value}")
    problems = limit_problems(blocks)
    print(
        f"over the limits ({MAX_LINES} lines a listing, {MAX_CELL_LINES} a cell, "
        f"{MAX_COLUMNS} columns): {len(problems)}"
    )
    for problem in problems:
        print("  " + problem)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
