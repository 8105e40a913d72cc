"""The book's search (book/_ext/attnbook_search.py): what a reader types, readable snippets.

A Chinese reader types 多头注意力, not "多头 注意力". Checked in Chromium on the page's own search
(``search.html?q=...``, Sphinx's searchtools.js):

* **A toy book** (``tmp_path``, built with Sphinx in a few seconds): a glossary term typed without
  spaces finds the page that contains it, mixed queries (``RoPE旋转``) work, and a character no
  indexed word covers does not empty the result. The negative control builds the same toy with
  Sphinx's stock Chinese search: there the unsegmented query finds nothing (the fault this fixes),
  so the check can fail.
* **The built book**: every Chinese term of the glossary's terms table, typed without spaces,
  finds every page of the Chinese edition whose text contains it (outside code, scripts and
  math); mixed queries (``KV Cache``, ``GQA``, ``RoPE 旋转``) find pages; the English edition's
  search is unchanged (its ``splitQuery`` is Sphinx's own).

Result snippets (``book/_static/attnbook-search.js``) show math as text, not TeX source: on the
toy (``√d_k``, ``softmax(QKᵀ/√d_k) V``; the stock toy shows ``\\sqrt{d_k}``, the negative
control) and on the built book in both editions, where a snippet also no longer begins with the
theme's contents list or the language switch.

``.venv/bin/python tests/browser/test_browser_search.py`` prints, per term, the pages found and
the pages expected.
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # browser
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))

from attnbook_search import GLOSSARY, glossary_terms  # noqa: E402

from browser import CHROMIUM_ARGS, require_chromium, serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser

#: Runs in search.html once the search has finished: the pages listed.
RESULTS_JS = r"""
() => Array.from(document.querySelectorAll('#search-results ul.search li a'))
           .map(a => a.getAttribute('href').split('?')[0].split('#')[0])
"""
FINISHED_JS = r"""
() => { const s = document.querySelector('#search-results .search-summary');
        return s !== null && s.textContent.trim().length > 0; }
"""


#: Runs in search.html: ``[[page, snippet or null], ...]`` once every result has its snippet (a
#: result with a description, an API object, gets none), else null.
SNIPPETS_JS = r"""
() => {
  const items = Array.from(document.querySelectorAll('#search-results ul.search li'));
  if (!items.every((li) => li.querySelector('p.context') || li.querySelector(':scope > span')))
    return null;
  return items.map((li) => [
    li.querySelector('a').getAttribute('href').split('?')[0].split('#')[0],
    li.querySelector('p.context') ? li.querySelector('p.context').textContent : null]);
}
"""

#: TeX in a snippet: a command, a math delimiter, a braced script.
TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|[_^]\{")


def search(page, base_url: str, query: str) -> set[str]:
    """The pages (paths relative to the edition) that the page's search lists for ``query``."""
    page.goto(base_url + "search.html?q=" + urllib.parse.quote(query))
    page.wait_for_function(FINISHED_JS, timeout=30_000)
    return {href.removesuffix(".html") for href in page.evaluate(RESULTS_JS)}


def snippets(page, base_url: str, query: str) -> list[tuple[str, str | None]]:
    """``(page, its snippet or None)`` for each result the page's search lists for ``query``."""
    search(page, base_url, query)
    handle = page.wait_for_function(SNIPPETS_JS, timeout=60_000)
    return [tuple(item) for item in handle.json_value()]


@pytest.fixture(scope="module")
def chromium():
    executable = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# --------------------------------------------------------------------------------------------------
# a toy book, built here


TOY_PAGES = {
    "a": "多头注意力把查询分给几个头，每个头各看一个方面。训练时用教师强制。",
    "b": "生成时键值缓存保存过去的键和值，RoPE 旋转查询和键。",
    "c": "这一页只讲循环神经网络。",
    "d": r"softmax 前先缩放：分数除以 :math:`\sqrt{d_k}`，即 "
    r":math:`\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V`。",
}


def build_toy(root: Path, *, our_search: bool) -> Path:
    """A three-page Chinese Sphinx project with the glossary table; returns its HTML folder."""
    src = root / "src"
    (src / GLOSSARY.parent).mkdir(parents=True)
    (src / GLOSSARY).write_text(
        "| English | 中文 |\n| --- | --- |\n| multi-head attention | 多头注意力 |\n"
        "| KV cache | 键值缓存（KV Cache） |\n| teacher forcing | 教师强制 |\n",
        encoding="utf-8",
    )
    extensions = ["attnbook_search"] if our_search else []
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        f"extensions = {extensions!r}\nlanguage = 'zh_CN'\nhtml_theme = 'basic'\n"
        "exclude_patterns = ['appendix']\n",
        encoding="utf-8",
    )
    (src / "index.rst").write_text(
        "首页\n====\n\n.. toctree::\n\n   a\n   b\n   c\n", encoding="utf-8"
    )
    for name, text in TOY_PAGES.items():
        (src / f"{name}.rst").write_text(f"{name.upper()} 页\n====\n\n{text}\n", encoding="utf-8")
    out = root / "html"
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(out)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def toy_books(tmp_path_factory):
    root = tmp_path_factory.mktemp("search-toy")
    return {
        ours: build_toy(root / ("ours" if ours else "stock"), our_search=ours)
        for ours in (True, False)
    }


@pytest.mark.parametrize(
    "query, pages",
    [
        ("多头注意力", {"a"}),
        ("教师强制", {"a"}),
        ("键值缓存", {"b"}),
        ("缓存", {"b"}),
        ("RoPE旋转", {"b"}),
        ("RoPE 旋转", {"b"}),
        ("的多头注意力", {"a"}),  # 的 is no indexed word: dropped, as the index drops it
        ("循环神经网络", {"c"}),
    ],
)
def test_toy_search_finds_terms_typed_without_spaces(chromium, toy_books, query, pages):
    page = chromium.new_page()
    try:
        with serve(toy_books[True]) as url:
            assert search(page, url, query) == pages
    finally:
        page.close()


def test_toy_stock_search_misses_them(chromium, toy_books):
    """The negative control: Sphinx's own Chinese search, the same pages and queries."""
    page = chromium.new_page()
    try:
        with serve(toy_books[False]) as url:
            assert search(page, url, "多头注意力") == set()
            assert search(page, url, "多头 注意力") == {"a"}
    finally:
        page.close()


def test_toy_snippet_shows_math_as_text(chromium, toy_books):
    page = chromium.new_page()
    try:
        with serve(toy_books[True]) as url:
            shown = snippets(page, url, "缩放")
        with serve(toy_books[False]) as url:
            stock = snippets(page, url, "缩放")
    finally:
        page.close()
    assert [name for name, _ in shown] == ["d.html"]
    text = shown[0][1]
    assert "分数除以 √d_k，即 softmax(QKᵀ/√d_k) V。" in text, text
    assert not TEX.search(text), text
    # The negative control: Sphinx's own snippet shows the TeX source.
    assert "\\sqrt{d_k}" in stock[0][1], stock


def test_glossary_terms_are_read_from_the_table(tmp_path):
    glossary = tmp_path / "glossary.md"
    glossary.write_text(
        "| a | b |\n| --- | --- |\n| x | 无关 |\n\n| English | 中文 |\n"
        "| --- | --- |\n| mask, keep-mask | 掩码、保留掩码 |\n"
        "| KV cache | 键值缓存（KV Cache） |\n| block | Transformer 块 |\n"
        "| softmax | softmax |\n",
        encoding="utf-8",
    )
    assert glossary_terms(glossary) == ["掩码", "保留掩码", "键值缓存"]
    glossary.write_text("| English | Deutsch |\n| --- | --- |\n", encoding="utf-8")
    with pytest.raises(ValueError, match="terms table"):
        glossary_terms(glossary)


# --------------------------------------------------------------------------------------------------
# the built book

_SKIP_BLOCKS = re.compile(
    r"<(script|style|pre|code|mjx-container|math)\b.*?</\1>|<div class=\"(?:math|highlight)[^\"]*\""
    r"[^>]*>.*?</div>",
    re.S,
)


def page_text(path: Path) -> str:
    """The text of a built page's article, outside code, scripts and math."""
    source = path.read_text(encoding="utf-8")
    start = source.find("<article")
    end = source.find("</article>")
    body = source[start:end] if start >= 0 and end > start else source
    body = _SKIP_BLOCKS.sub(" ", body)
    # A block or a table cell ends a run of text (头 in one cell, 维度 in the next are no
    # word); inline markup (a glued number's span) does not.
    body = re.sub(
        r"</?(?:p|div|li|td|th|tr|h[1-6]|br|dt|dd|caption|figcaption|section)\b[^>]*>", "\n", body
    )
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def book_pages(html_dir: Path) -> dict[str, str]:
    """``{page path without .html: its text}`` for every content page of an edition."""
    skip = {"search", "genindex", "py-modindex", "index"}
    return {
        str(p.relative_to(html_dir).with_suffix("")): page_text(p)
        for p in sorted(html_dir.rglob("*.html"))
        if not any(part.startswith("_") for part in p.relative_to(html_dir).parts)
        and str(p.relative_to(html_dir).with_suffix("")) not in skip
    }


def term_report(html_dir: Path, page, url: str) -> dict[str, tuple[set[str], set[str]]]:
    """``{term: (pages found, pages whose text contains it)}`` for the glossary's terms."""
    texts = book_pages(html_dir)
    report = {}
    for term in glossary_terms(ROOT / GLOSSARY):
        expected = {name for name, text in texts.items() if term in text}
        report[term] = (search(page, url, term), expected)
    return report


def test_chinese_search_finds_every_page_with_a_glossary_term(chromium, built_editions):
    html_dir = built_editions["zh"]
    page = chromium.new_page()
    try:
        with serve(html_dir) as url:
            report = term_report(html_dir, page, url)
    finally:
        page.close()
    assert len(report) >= 20
    missed = {
        term: sorted(expected - found)
        for term, (found, expected) in report.items()
        if expected - found
    }
    assert not missed, f"pages containing the term that its search does not list: {missed}"
    empty = [term for term, (found, expected) in report.items() if expected and not found]
    assert not empty


@pytest.mark.parametrize(
    "query, must_find",
    [
        ("KV Cache", "chapters/11-quadratic-cost-kv-cache"),
        ("GQA", "chapters/07-multi-head-gqa"),
        ("RoPE 旋转", "chapters/08-positional-encoding"),
        ("RoPE旋转", "chapters/08-positional-encoding"),
        ("因果掩码", "chapters/06-masks"),
    ],
)
def test_chinese_search_mixed_queries(chromium, built_editions, query, must_find):
    page = chromium.new_page()
    try:
        with serve(built_editions["zh"]) as url:
            assert must_find in search(page, url, query)
    finally:
        page.close()


def test_english_search_is_sphinx_own(chromium, built_editions):
    data = (built_editions["en"] / "_static" / "language_data.js").read_text(encoding="utf-8")
    assert "Search._index" not in data  # our splitter is the Chinese edition's only
    page = chromium.new_page()
    try:
        with serve(built_editions["en"]) as url:
            assert "chapters/07-multi-head-gqa" in search(page, url, "multi-head attention")
    finally:
        page.close()


#: (edition, query, text some snippet must contain): the queries of the reports (softmax, 缩放).
SNIPPET_QUERIES = [
    ("en", "softmax", "1/√d_k"),
    ("en", "scaled dot-product", "√d_k"),
    ("zh", "缩放", "1/√d_k"),
    ("zh", "softmax", "softmax"),
]


def snippet_faults(shown: list[tuple[str, str | None]], must: str) -> list[str]:
    """What is wrong with a search's snippets: TeX, the theme's chrome at the start, no text."""
    texts = [text for _, text in shown if text is not None]
    faults = [f"TeX in {name}: {text}" for name, text in shown if text and TEX.search(text)]
    faults += [
        f"{name} begins with the page's chrome: {text[:60]}"
        for name, text in shown
        if text and text.lstrip(".").startswith(("Contents", "目录", "中文", "English"))
    ]
    if not texts:
        faults.append("no snippet")
    elif not any(must in text for text in texts):
        faults.append(f"no snippet contains {must!r}")
    return faults


@pytest.mark.parametrize("edition, query, must", SNIPPET_QUERIES)
def test_built_book_snippets_show_math_as_text(chromium, built_editions, edition, query, must):
    page = chromium.new_page()
    try:
        with serve(built_editions[edition]) as url:
            shown = snippets(page, url, query)
    finally:
        page.close()
    assert not snippet_faults(shown, must)


if __name__ == "__main__":  # pragma: no cover
    from playwright.sync_api import sync_playwright

    zh = ROOT / "_build" / "html" / "zh"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
        tab = browser.new_page()
        with serve(zh) as base:
            for term, (found, expected) in term_report(zh, tab, base).items():
                print(
                    f"{term}: found {len(found)}, expected {len(expected)}; "
                    f"missed {sorted(expected - found)}"
                )
        browser.close()
