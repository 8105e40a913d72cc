"""The two built editions (book/editions.py): same numbers, linked page to page, in their language.

Reads ``_build/html/en`` and ``_build/html/zh`` (the ``built_editions`` fixture).
"""

import json
import re
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.md"))
ASSET_DIRS = {"_static", "_images", "_sources", "_downloads", "_sphinx_design_static"}
_CJK = re.compile(r"[\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def pages(html_dir: Path) -> list[str]:
    return sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if p.relative_to(html_dir).parts[0] not in ASSET_DIRS
    )


class _Page(HTMLParser):
    """The parts of a page these tests read."""

    def __init__(self):
        super().__init__()
        self.lang = None
        self.switch: list[tuple[str, str]] = []  # (href, hreflang)
        self.alternates: list[tuple[str, str]] = []
        self.pasted: list[str] = []
        self.prose: list[str] = []
        self._stack: list[tuple[str, bool]] = []
        self._in_switch = self._in_pasted = False
        self._pasted_buf = ""
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "") or ""
        if tag == "html":
            self.lang = a.get("lang")
        if tag == "link" and a.get("rel") == "alternate":
            self.alternates.append((a.get("href"), a.get("hreflang")))
        if tag == "a" and "attnbook-lang-link" in cls:
            self.switch.append((a.get("href"), a.get("hreflang")))
        if tag == "span" and "pasted-text" in cls:
            self._in_pasted, self._pasted_buf = True, ""
        skip = (
            tag in ("script", "style", "pre", "code")
            or "cell_output" in cls
            or "math" in cls
            or "highlight" in cls
        )
        if tag not in ("br", "img", "meta", "link", "input", "hr", "wbr"):
            self._stack.append((tag, skip))
            self._skip += skip

    def handle_endtag(self, tag):
        if tag == "span" and self._in_pasted:
            self.pasted.append(self._pasted_buf)
            self._in_pasted = False
        while self._stack:
            t, skip = self._stack.pop()
            self._skip -= skip
            if t == tag:
                break

    def handle_data(self, data):
        if self._in_pasted:
            self._pasted_buf += data
        if not self._skip and data.strip():
            self.prose.append(data)


def parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def test_landing_page_leads_to_both_editions(built_editions):
    landing = (ROOT / "_build" / "html" / "index.html").read_text(encoding="utf-8")
    hrefs = re.findall(r'href="([^"]+)"', landing)
    assert hrefs == ["en/index.html", "zh/index.html"]
    for href in hrefs:
        assert (ROOT / "_build" / "html" / href).is_file()


def test_both_editions_have_the_same_pages_in_their_language(built_editions):
    en, zh = built_editions["en"], built_editions["zh"]
    assert pages(en) == pages(zh)
    assert parse(en / "intro.html").lang == "en"
    assert parse(zh / "intro.html").lang == "zh-CN"


def test_every_page_switches_to_the_same_page_in_the_other_edition(built_editions):
    en, zh = built_editions["en"], built_editions["zh"]
    wrong = []
    for rel in pages(en):
        # Sphinx's generated pages, and index.html (a redirect to the introduction).
        if rel in ("genindex.html", "search.html", "py-modindex.html", "index.html"):
            continue
        for here, there, lang in ((en, zh, "zh-CN"), (zh, en, "en")):
            page = parse(here / rel)
            if len(page.switch) != 1 or page.switch[0][1] != lang:
                wrong.append((here.name, rel, page.switch))
                continue
            target = ((here / rel).parent / page.switch[0][0]).resolve()
            if not target.is_file() or target != (there / rel).resolve():
                wrong.append((here.name, rel, str(target)))
            if page.alternates != [(page.switch[0][0], lang)]:
                wrong.append((here.name, rel, "alternate", page.alternates))
    assert wrong == []


def _numbers(values: list[str]) -> Counter:
    return Counter(v.strip() for v in values if not _LATIN_WORD.search(v) and not _CJK.search(v))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_glued_numbers_are_identical_in_both_editions(chapter, built_editions):
    en = parse(built_editions["en"] / "chapters" / f"{chapter}.html")
    zh = parse(built_editions["zh"] / "chapters" / f"{chapter}.html")
    assert en.pasted, "no glued value found: the test reads the wrong element"
    assert _numbers(en.pasted) == _numbers(zh.pasted)
    assert len(en.pasted) == len(zh.pasted)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chinese_chapter_prose_is_chinese(chapter, built_editions):
    """Most of a chapter's prose (code, outputs and math left out) is in Chinese characters."""
    page = parse(built_editions["zh"] / "chapters" / f"{chapter}.html")
    text = "".join(page.prose)
    cjk = len(_CJK.findall(text))
    latin = sum(len(w) for w in _LATIN_WORD.findall(text))
    assert cjk > 2 * latin, (cjk, latin)


def test_chinese_edition_figures_are_drawn_again(built_editions):
    """A chapter's matplotlib figures in Chinese are other images than the English ones."""

    def images(html_dir):
        html = (html_dir / "chapters" / "03-scaling-variance.html").read_text(encoding="utf-8")
        return re.findall(r'<img[^>]+src="(\.\./_images/[^"]+\.png)"', html)

    en, zh = images(built_editions["en"]), images(built_editions["zh"])
    assert len(en) == len(zh) >= 2
    assert not set(en) & set(zh)


def test_chinese_search_finds_chinese_words(built_editions):
    index = (built_editions["zh"] / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(index[index.index("(") + 1 : index.rindex(")")])
    for word in ("注意力", "掩码", "缓存"):
        assert word in data["terms"], f"{word!r} is not a search term of the Chinese edition"
    assert data["terms"]["注意力"], "no page is indexed under 注意力"


def test_api_reference_says_it_stays_english(built_editions):
    page = (built_editions["zh"] / "appendix" / "api" / "index.html").read_text(encoding="utf-8")
    assert "API 参考保留英文" in page


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_chapter_output_carries_font_warnings(chapter, built_editions):
    """Drawing each figure in Chinese must not log (the log lands in the page, once per draw)."""
    for code in ("en", "zh"):
        html = (built_editions[code] / "chapters" / f"{chapter}.html").read_text(encoding="utf-8")
        assert "findfont" not in html and "missing from font" not in html, (code, chapter)
