"""Issue 22: the theme speaks the edition's language, and every page carries the language switch.

A toy Sphinx project in ``tmp_path`` with the book's theme (sphinx-book-theme on
pydata-sphinx-theme, the search field text Jupyter Book sets) is built in Chinese with
``attnbook_i18n`` (and ``attnbook_a11y``, whose components it shares): every interface string of
the themes reads in Chinese, none of the English ones is left, and the search page and both
indices carry the language switch. The same toy without the extensions is the negative control:
it shows the English the book showed before (and the checks below find it). Built in English
with the extensions, the toy keeps the themes' English.

The catalogs (``book/locale``) are checked against the messages the installed themes mark for
translation, so an upgrade that adds one fails here until it is translated.

The built book (``built_editions``): no interface text outside the article of any Chinese page
is English, and search.html, genindex.html and py-modindex.html switch to the other edition.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT_DIR = ROOT / "book" / "_ext"
TEMPLATES = ROOT / "book" / "_templates"
LOCALE = ROOT / "book" / "locale" / "zh_CN" / "LC_MESSAGES"

#: What the Chinese toy must show (the page, the search page, both indices).
CHINESE = (
    'placeholder="搜索本书…"',
    'title="链接到此标题"',
    'title="切换主侧边栏"',
    'title="切换辅助侧边栏"',
    'aria-label="颜色模式"',
    'aria-label="主导航"',
    'aria-label="本页目录"',
    "打印为 PDF",
    "作者：attnbook 编写组",
    "版权所有 © 2026",
    "跳转到正文",
    "返回顶部",
)
#: What the themes showed in the Chinese edition before (issue 22); none may be left.
ENGLISH = (
    "Search this book",
    "Toggle primary sidebar",
    "Toggle secondary sidebar",
    "Color mode",
    "Link to this heading",
    "列印",
    'aria-label="Main"',
    'aria-label="Page"',
    "© Copyright",
    "作者： ",
)
#: The pages Sphinx makes without a document, and the toy's page.
GENERATED = ("search.html", "genindex.html", "py-modindex.html")


# --- What counts as English interface text ---------------------------------------------------

#: Latin words an interface string of the Chinese edition may keep: the book's title
#: (注意力与 Transformer), a term the translation keeps (API 参考), the key on the search button
#: (Ctrl + K), a file format, product names.
KEPT_WORDS = {"Transformer", "API", "Ctrl", "PDF", "JavaScript", "Python"}
#: Code identifiers (the package's modules in the sidebar's toggles) and file extensions
#: (the download menu's .ipynb, .md, .pdf).
_CODE = re.compile(r"\battnbook(?:\.\w+)*|(?<![\w.])\.(?:ipynb|md|pdf|zip|rst|txt)\b")
_WORD = re.compile(r"[A-Za-z]{2,}")
#: Attributes that are read to the reader or shown as a tooltip.
_TEXT_ATTRIBUTES = ("title", "aria-label", "placeholder", "alt", "data-bs-title")
#: What is the book's content, not its interface: the article, page titles listed in the
#: navigation, the page's headings in its contents, the neighbour pages' titles, search results.
_CONTENT = (
    "article.bd-article",
    "nav.bd-docs-nav a",
    "#pst-page-toc-nav a",
    "#jb-print-toc a",
    "#jb-print-docs-body h1",
    ".prev-next-title",
    "#search-results",
)


def english_interface(html: str) -> list[str]:
    """The interface texts of a Chinese page (``<body>``, outside its content, and the titles of
    its headings' permalinks) with an English word: text and the attributes in
    :data:`_TEXT_ATTRIBUTES`. An element marked as another language (``lang="en"``: the switch's
    link to the English edition) is left out.
    """
    from bs4 import BeautifulSoup

    body = BeautifulSoup(html, "html.parser").body
    # The headings' permalinks are interface inside the content.
    texts = [a["title"] for a in body.select("a.headerlink[title]")]
    for node in body.select(", ".join(("script", "style", *_CONTENT))):
        node.decompose()
    for node in body.select("[lang]"):
        if not node["lang"].startswith("zh"):
            node.decompose()
    texts += list(body.stripped_strings)
    texts += [el[a] for el in body.find_all(True) for a in _TEXT_ATTRIBUTES if el.get(a)]
    return sorted(
        {t for t in texts if any(w not in KEPT_WORDS for w in _WORD.findall(_CODE.sub("", t)))}
    )


def switch_targets(html: str) -> list[tuple[str, str]]:
    """``(href, hreflang)`` of every link of the page's language switch."""
    return re.findall(r'<a class="attnbook-lang-link" href="([^"]+)" hreflang="([^"]+)"', html)


# --- The toy -------------------------------------------------------------------------------

CONF = """\
import sys
sys.path.insert(0, {ext!r})
project = "toy"
html_title = {title!r}
author = {author!r}
copyright = "2026"
language = {language!r}
html_theme = "sphinx_book_theme"
# What Jupyter Book sets (jupyter_book/config.py); the book's edition sets the rest.
html_theme_options = {{"search_bar_text": "Search this book..."}}
html_context = {{"default_mode": "light"}}
extensions = {extensions!r}
attnbook_editions = ["en", "zh"]
"""
INDEX = textwrap.dedent("""\
    Toy book
    ========

    First section
    -------------

    Text.

    .. py:module:: toymod

    .. py:function:: toyfunc(x)

       A function.

    Second section
    --------------

    .. toctree::

       other
    """)
OTHER = "Other page\n==========\n\nText.\n\nA section\n---------\n\nMore.\n"


def build_toy(
    root: Path, *, language: str = "zh_CN", extensions: bool = True, author: str = "attnbook 编写组"
) -> Path:
    """Build the toy strictly (``-W``) into ``root/html`` in a fresh interpreter (Sphinx's
    translators are global to a process); return the HTML folder."""
    src = root / "src"
    src.mkdir(parents=True)
    # As in _config.yml: sphinx-book-theme is an extension loaded before ours, so its catalog
    # is registered before the book's is put ahead of it.
    exts = ["sphinx_book_theme"] + (["attnbook_i18n", "attnbook_a11y"] if extensions else [])
    title = "Attention" if language == "en" else "注意力与 Transformer"
    (src / "conf.py").write_text(
        CONF.format(
            ext=str(EXT_DIR), title=title, author=author, language=language, extensions=exts
        ),
        encoding="utf-8",
    )
    (src / "index.rst").write_text(INDEX, encoding="utf-8")
    (src / "other.rst").write_text(OTHER, encoding="utf-8")
    out = root / "html"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT / "lib"), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E", str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def toy_zh(tmp_path_factory) -> Path:
    return build_toy(tmp_path_factory.mktemp("toy-zh"))


@pytest.fixture(scope="module")
def toy_zh_plain(tmp_path_factory) -> Path:
    return build_toy(tmp_path_factory.mktemp("toy-plain"), extensions=False)


def _read(folder: Path, page: str) -> str:
    return (folder / page).read_text(encoding="utf-8")


def test_toy_theme_speaks_chinese(toy_zh):
    html = _read(toy_zh, "index.html")
    assert [s for s in CHINESE if s not in html] == []
    for page in ("index.html", *GENERATED):
        html = _read(toy_zh, page)
        assert [s for s in ENGLISH if s in html] == [], page
        assert english_interface(html) == [], page


def test_toy_generated_pages_carry_the_language_switch(toy_zh):
    for page in ("index.html", *GENERATED):
        html = _read(toy_zh, page)
        assert switch_targets(html) == [(f"../en/{page}", "en")], page
        assert '<nav class="attnbook-lang-switch" aria-label="语言">' in html, page
        assert f'<link rel="alternate" hreflang="en" href="../en/{page}">' in html, page
    # The search page's link keeps the query.
    assert "this.search = window.location.search" in _read(toy_zh, "search.html")


def test_toy_module_index_entry_in_chinese(toy_zh):
    html = _read(toy_zh, "genindex.html")
    assert 'href="index.html#module-toymod">模块</a>' in html
    assert ">module<" not in html


def test_toy_without_the_extensions_speaks_english(toy_zh_plain):
    """The negative control: the themes alone, in Chinese, show what issue 22 reported, and the
    checks above see it."""
    html = _read(toy_zh_plain, "index.html")
    assert [s for s in ENGLISH if s not in html] == []
    found = english_interface(html)
    assert "Toggle primary sidebar" in found and "Search this book..." in found
    for page in GENERATED:
        assert switch_targets(_read(toy_zh_plain, page)) == [], page


def test_toy_english_edition_keeps_the_themes_english(tmp_path):
    """Built in English with the extensions, the marked texts read as the themes wrote them."""
    html = _read(build_toy(tmp_path, language="en", author="The attnbook authors"), "index.html")
    for text in (
        'placeholder="Search this book..."',
        'title="Toggle primary sidebar"',
        'aria-label="Main"',
        'aria-label="Page"',
        "By The attnbook authors",
        "© Copyright 2026.",
        'aria-label="Language"',
        'href="../zh/index.html"',
    ):
        assert text in html, text
    switch = '<nav class="attnbook-lang-switch"'
    before, after = html.split(switch)
    assert re.search(r"[\u4e00-\u9fff]", before + after.split("</nav>", 1)[1]) is None


# --- The catalogs against the themes' messages -----------------------------------------------


def _template_messages(folder: Path, keywords: tuple[str, ...]) -> set[str]:
    """The messages the Jinja templates under ``folder`` pass to the functions ``keywords``
    (``{% trans %}`` is a call of ``gettext`` or ``ngettext``)."""
    from jinja2.ext import babel_extract

    found = set()
    for path in folder.rglob("*.html"):
        with path.open("rb") as f:
            for _line, _func, message, _comments in babel_extract(
                f, keywords, [], {"extensions": "jinja2.ext.i18n"}
            ):
                messages = message if isinstance(message, tuple) else (message,)
                found |= {m for m in messages if isinstance(m, str) and m}
    return found


def _catalog(domain: str) -> dict[str, str]:
    import polib

    return {e.msgid: e.msgstr for e in polib.pofile(str(LOCALE / f"{domain}.po")) if e.translated()}


def test_catalogs_translate_every_message_of_the_themes():
    import polib
    import pydata_sphinx_theme
    import sphinx_book_theme

    pst = Path(pydata_sphinx_theme.__file__).parent
    sbt = Path(sphinx_book_theme.__file__).parent
    # "sphinx": pydata-sphinx-theme's template (its own docs' messages left out), its templates,
    # and the components the book overrides.
    wanted = {
        e.msgid
        for e in polib.pofile(str(pst / "locale" / "sphinx.pot"))
        if any(not path.startswith("docs/") for path, _ in e.occurrences)
    }
    sphinx_calls = ("_", "gettext", "ngettext")
    wanted |= _template_messages(pst / "theme", sphinx_calls)
    wanted |= _template_messages(TEMPLATES, sphinx_calls)
    wanted |= {"Link to this heading", "Search this book..."}
    assert sorted(wanted - set(_catalog("sphinx"))) == []
    # "booktheme": the theme's own zh_CN catalog, its templates and its Python code.
    own = sbt / "theme" / "sphinx_book_theme" / "static" / "locales" / "zh_CN" / "LC_MESSAGES"
    wanted = {e.msgid for e in polib.pofile(str(own / "booktheme.po")) if e.msgid}
    wanted |= _template_messages(sbt / "theme", ("translate",))
    for path in sbt.rglob("*.py"):
        wanted |= set(re.findall(r'translation\("([^"]+)"\)', path.read_text(encoding="utf-8")))
    assert sorted(wanted - set(_catalog("booktheme"))) == []


def test_catalogs_keep_placeholders_and_mainland_wording():
    for domain in ("sphinx", "booktheme"):
        for msgid, msgstr in _catalog(domain).items():
            assert sorted(re.findall(r"%\(\w+\)s", msgid)) == sorted(
                re.findall(r"%\(\w+\)s", msgstr)
            ), msgid
            # Traditional or Taiwanese wording the themes' catalogs carried.
            assert not re.search("列印|檔案|設定|搜尋|視窗|資料", msgstr), msgid


# --- The built book --------------------------------------------------------------------------


def _pages(folder: Path) -> list[Path]:
    skip = {"_static", "_images", "_sources", "_downloads", "_sphinx_design_static"}
    return sorted(p for p in folder.rglob("*.html") if p.relative_to(folder).parts[0] not in skip)


def test_built_chinese_interface_has_no_english(built_editions):
    zh = built_editions["zh"]
    found = {}
    for path in _pages(zh):
        html = path.read_text(encoding="utf-8")
        if "<body" not in html:  # index.html: a redirect
            continue
        texts = english_interface(html)
        # sphinx-togglebutton's words on a folded solution, set in <head> (EDITION_CONFIG).
        texts += re.findall(r"let toggleHint\w+ = '([^']*[A-Za-z][^']*)'", html)
        for text in texts:
            found.setdefault(text, path.relative_to(zh).as_posix())
    assert found == {}


def test_built_generated_pages_carry_the_language_switch(built_editions):
    for here, there, lang in (("en", "zh", "zh-CN"), ("zh", "en", "en")):
        for page in GENERATED:
            path = built_editions[here] / page
            links = switch_targets(path.read_text(encoding="utf-8"))
            assert links == [(f"../{there}/{page}", lang)], (here, page, links)
            assert (path.parent / links[0][0]).resolve() == (built_editions[there] / page).resolve()
