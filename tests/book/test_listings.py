"""Issue 9's "Done when" on the built chapters: what a reader sees open fits the page.

Every listing a reader sees open (library code shown by ``attnbook.listing.show_code``, a
``literalinclude``, a fenced block) has at most 30 lines, every input cell shown open at most 40,
and no visible code line, listing or input cell, is wider than 79 columns. Code inside a
collapsed ``<details>`` or a sphinx-togglebutton dropdown is exempt. The rules and the HTML
they read are described in ``tests/book/listing_stats.py``, which also prints the figures.
"""

from __future__ import annotations

import textwrap

from listing_stats import (
    MAX_CELL_LINES,
    MAX_COLUMNS,
    book_code_blocks,
    code_blocks,
    figures,
    limit_problems,
)


def test_visible_code_fits_the_page(built_book):
    blocks = book_code_blocks(built_book)
    assert any(b.is_listing and not b.hidden for b in blocks), (
        "no visible listing found in the chapters: the HTML structure changed "
        "(see tests/book/listing_stats.py)"
    )
    problems = limit_problems(blocks)
    assert not problems, f"{len(problems)} visible code block(s) over the limits:\n  " + (
        "\n  ".join(problems)
    )


def pre(lines: list[str]) -> str:
    return "<pre>" + "\n".join(lines) + "\n</pre>"


def code(language: str, lines: list[str], extra: str = "") -> str:
    return (
        f'<div class="highlight-{language} notranslate{extra}"><div class="highlight">'
        f"{pre(lines)}</div></div>"
    )


WIDE = "x = " + "1 + " * 20 + "1"  # 85 columns
CORE = ["def f_core(q, k):", '    """Core."""'] + ["    q = q  # (B, H, L, D)"] * 10
LONG = ["def f(q, k):"] + ["    pass"] * 40


def page() -> str:
    """A chapter page with each structure Sphinx and MyST-NB write, hidden and visible."""
    return textwrap.dedent(f"""
        <html><head><meta charset="utf-8"><link rel="stylesheet" href="x.css"></head><body>
        <main><article>
        <!-- show_code: the core open, the full function in a closed <details> -->
        <div class="cell tag_remove-input docutils container">
          <div class="cell_output docutils container">
            {code("python", CORE)}
            <details><summary>The full public function: f</summary>
            {code("python", LONG + [WIDE])}
            </details>
          </div>
        </div>
        <!-- a visible input cell with a wide line, and its text output (not code) -->
        <div class="cell docutils container">
          <div class="cell_input docutils container">{code("ipython3", ["y = 1", WIDE])}</div>
          <div class="cell_output docutils container">
            <div class="output stream highlight-myst-ansi notranslate"><div class="highlight">
            {pre([WIDE] * 50)}</div></div>
          </div>
        </div>
        <!-- a visible listing that is too long -->
        <div class="literal-block-wrapper docutils container">{code("python", LONG)}</div>
        <!-- hidden: togglebutton dropdown, toggle, sphinx-design, hide-input cells -->
        <div class="admonition dropdown"><p class="admonition-title">Solution</p>
          {code("python", LONG + [WIDE])}</div>
        <div class="toggle docutils container">{code("python", LONG)}</div>
        <details class="sd-sphinx-override sd-dropdown"><summary>More</summary>
          {code("python", LONG)}</details>
        <div class="cell tag_hide-input docutils container">
          <div class="cell_input docutils container">{code("ipython3", LONG + [WIDE])}</div>
          <div class="cell_output docutils container">{code("python", ["visible = 1"])}</div>
        </div>
        <details class="hide above-input"><summary>Show code cell source</summary>
          <div class="cell_input docutils container">{code("ipython3", [WIDE])}</div>
        </details>
        <details open><summary>Open</summary>
          {code("python", ["open_details = 1", WIDE])}</details>
        <p>Entities: <br/> &amp; &lt;</p>
        <div class="highlight-python notranslate"><div class="highlight">
        <pre>a = 1 &lt; 2 &amp;&amp; b
</pre></div></div>
        </article></main></body></html>
    """)


def test_code_block_parser_reads_each_structure():
    blocks = code_blocks(page(), "07-x")
    visible = [b for b in blocks if not b.hidden]
    assert [(b.language, len(b.lines), b.is_listing) for b in visible] == [
        ("python", 12, True),  # the core
        ("ipython3", 2, False),  # the input cell (its stream output is not code)
        ("python", 41, True),  # the long literalinclude
        ("python", 1, True),  # the output of the hide-input cell stays visible
        ("python", 2, True),  # an open <details>
        ("python", 1, True),  # entities unescaped
    ]
    assert visible[-1].lines == ["a = 1 < 2 && b"]
    assert visible[0].title == "def f_core(q, k):"
    assert len([b for b in blocks if b.hidden]) == 6


def test_listing_check_can_fail():
    problems = limit_problems(code_blocks(page(), "07-x"))
    assert (
        problems[0]
        == "07-x: input cell `y = 1`, line 2 has 85 columns (at most 79): " + (WIDE.strip()[:60])
    )
    assert "07-x: listing `def f(q, k):` has 41 lines (at most 30)" in problems
    assert "07-x: listing `open_details = 1`, line 2 has 85 columns" in "\n".join(problems)
    assert len(problems) == 3, problems
    assert len(WIDE) == MAX_COLUMNS + 6


def test_input_cell_limit_can_fail():
    """A chapter's own visible cell may have 40 lines (a listing 30); a hidden one any number."""

    def cell(n: int, tag: str = "") -> str:
        return (
            f'<div class="cell {tag} docutils container"><div class="cell_input docutils '
            f'container">{code("ipython3", ["x = 1"] * n)}</div></div>'
        )

    html = f"<html><body>{cell(MAX_CELL_LINES)}{cell(41)}{cell(99, 'tag_hide-input')}</body></html>"
    assert limit_problems(code_blocks(html, "07-x")) == [
        "07-x: input cell `x = 1` has 41 lines (at most 40)"
    ]


def test_figures_count_only_visible_listings():
    numbers = figures(code_blocks(page(), "07-x"))
    assert numbers["visible library listings"] == 5
    assert numbers["median listing length (lines)"] == 2
    assert numbers["longest listing (lines)"] == 41
    assert numbers["longest listing"] == "07-x: def f(q, k):"
    assert numbers["visible blocks longer than 40 lines"] == 1
    assert numbers["visible code lines wider than 79 columns"] == 2
