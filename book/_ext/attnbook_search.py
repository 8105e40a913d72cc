r"""Sphinx extension: the book's search finds what a reader types and shows readable snippets.

Sphinx indexes a Chinese page with jieba (``sphinx.search.zh``: ``jieba.cut_for_search``, words of
two characters or more), but the page's search script splits the *query* only on spaces and
punctuation (``splitQuery`` in ``searchtools.js``). Chinese readers type no spaces, so
多头注意力 was looked up as one word that the index never held ("没有匹配到文档"), while
"多头 注意力" worked. Two changes put both sides on the same words:

1. **The index knows the book's terms.** Every Chinese term of the glossary's terms table
   (``appendix/glossary.md``, "English and Chinese terms") goes into jieba's user dictionary
   (``html_search_options["dict"]``, which ``SearchChinese.init`` loads), so 多头注意力, 键值缓存 or
   因果掩码 are indexed as words (``cut_for_search`` also indexes their parts: 多头, 注意力,
   缓存), and :meth:`SearchChineseTerms.split` adds every term a text contains, where jieba
   cut it otherwise.
2. **The query is cut against the index's own words.** :data:`JS_SPLITTER` replaces
   ``splitQuery`` in the edition's ``language_data.js`` (``SearchLanguage.js_splitter_code``): a
   run of Chinese characters is cut into the terms of the loaded index (``Search._index``: page
   text and titles) that cover the most characters in the fewest pieces (a dynamic programme,
   not a greedy longest match, which can swallow the first character of the next word);
   characters no indexed word covers are dropped, as the index drops single characters. Latin
   words, numbers and mixed queries (``RoPE 旋转``, ``KV Cache``) are split as before.

The English edition's index and query are untouched: the language registered here is Sphinx's
``zh``, used only when ``language`` is ``zh_CN``. Why this and not a search service or a JavaScript
port of jieba: the book is read offline from files, and the index already holds every word the
query can match, so cutting against it needs no dictionary in the page (tested in Chromium:
``tests/browser/test_browser_search.py``).

**Snippets without TeX (both editions).** ``searchtools.js`` makes a result's snippet from the
result page's HTML, where math is still TeX source (MathJax typesets it only in a loaded page), so
a reader saw ``\(\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V\)``; and with pydata-sphinx-theme
the snippet often began with the page's contents list instead of its text. :data:`SNIPPET_JS`
(``book/_static/attnbook-search.js``), loaded on the search page only, wraps
``Search.htmlToText``: the page's article stands for ``[role="main"]``, each math element reads as
plain text (``softmax(QKᵀ/√d_k) V``), runs of white space are one space. It wraps Sphinx's
function rather than replacing it, so the rest of ``searchtools.js`` (anchors, highlighting)
stays Sphinx's. Not ``html_sourcelink_suffix`` or ``_sources``: Sphinx 7.4's snippets read the
HTML page, and the sources are MyST with the same TeX.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.search.zh import SearchChinese

#: The folder of the book's own static files (``book/_static``; ``attnbook_layout`` adds it too).
STATIC_DIR = Path(__file__).resolve().parent.parent / "_static"

#: The search page's snippet script (in :data:`STATIC_DIR`; see the module docstring, item 3).
SNIPPET_JS = "attnbook-search.js"

#: The glossary page whose terms table (its last table, "English | 中文") feeds jieba.
GLOSSARY = Path("appendix") / "glossary.md"

#: ``splitQuery`` for the Chinese edition (see the module docstring). ``Search`` is
#: searchtools.js's global; the query is split after the index has loaded.
JS_SPLITTER = r"""
var splitQuery = (query) => {
  const parts = query
    .split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)
    .filter((term) => term);
  const index = typeof Search !== "undefined" ? Search._index : null;
  if (!index) return parts;
  if (!splitQuery.words) {
    splitQuery.words = new Set(
      Object.keys(index.terms || {}).concat(Object.keys(index.titleterms || {})));
    splitQuery.longest = Math.max(2, ...Array.from(splitQuery.words, (w) => w.length));
  }
  const words = splitQuery.words;
  const cut = (run) => {
    // best[i]: [characters covered, -pieces, pieces] for run.slice(0, i)
    const best = [[0, 0, []]];
    for (let i = 1; i <= run.length; i++) {
      let top = [best[i - 1][0], best[i - 1][1], best[i - 1][2]];
      for (let j = Math.max(0, i - splitQuery.longest); j <= i - 2; j++) {
        const word = run.slice(j, i);
        if (!words.has(word)) continue;
        const cand = [best[j][0] + word.length, best[j][1] - 1, best[j][2].concat([word])];
        if (cand[0] > top[0] || (cand[0] === top[0] && cand[1] > top[1])) top = cand;
      }
      best.push(top);
    }
    return best[run.length][2];
  };
  const out = [];
  for (const part of parts) {
    for (const run of part.match(/\p{Script=Han}+|[^\p{Script=Han}]+/gu) || []) {
      if (/\p{Script=Han}/u.test(run)) out.push(...cut(run));
      else out.push(run);
    }
  }
  return out;
};
"""


class SearchChineseTerms(SearchChinese):
    """Sphinx's Chinese search language with a query splitter that cuts Chinese against the
    index's words (:data:`JS_SPLITTER`), and the glossary's terms indexed wherever they occur.

    jieba, even with the terms in its dictionary, may cut one across a word boundary its
    statistics prefer (掩码自注意力 → 掩码 / 自 / 注意力), so :meth:`split` also returns every
    glossary term the text contains: a page that contains a term is found by it.
    """

    js_splitter_code = JS_SPLITTER
    #: The glossary's Chinese terms (:func:`glossary_terms`), set when the configuration is read.
    glossary: tuple[str, ...] = ()

    def split(self, input: str) -> list[str]:  # noqa: A002 - Sphinx's signature
        words = super().split(input)
        return words + [term for term in self.glossary if term in input]


_CJK = re.compile(r"[\u3400-\u9fff]")


def glossary_terms(glossary: Path) -> list[str]:
    """The Chinese terms of the glossary's "English | 中文" table, one per entry.

    A cell such as ``掩码、保留掩码`` or ``键值缓存（KV Cache）`` gives each Chinese part
    (``掩码``, ``保留掩码``, ``键值缓存``); parts with a space or no Chinese character
    (``KV Cache``, ``Transformer 块``) are left to jieba's own splitting.

    Raises:
        ValueError: if the page has no such table (the index would silently lose the terms).
    """
    rows = [
        line for line in glossary.read_text(encoding="utf-8").splitlines() if line.startswith("|")
    ]
    try:
        start = next(i for i, row in enumerate(rows) if re.match(r"\|\s*English\s*\|\s*中文", row))
    except StopIteration:
        raise ValueError(f"{glossary} has no 'English | 中文' terms table") from None
    terms: list[str] = []
    for row in rows[start + 2 :]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        for part in re.split(r"[、，,（）()]", cells[1]):
            part = part.strip()
            if len(part) >= 2 and " " not in part and _CJK.search(part) and part not in terms:
                terms.append(part)
    return terms


def _use_glossary_dictionary(app: Sphinx, config: Config) -> None:
    """Write jieba's user dictionary from the glossary and point ``html_search_options`` at it."""
    if not str(config.language or "").startswith("zh"):
        return
    terms = glossary_terms(Path(app.srcdir) / GLOSSARY)
    SearchChineseTerms.glossary = tuple(terms)
    path = Path(app.doctreedir) / "jieba-glossary.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{term}\n" for term in terms)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    config.html_search_options = dict(config.html_search_options or {}, dict=str(path))


def _add_static_path(app: Sphinx, config: Config) -> None:
    """Serve ``book/_static`` (where :data:`SNIPPET_JS` lives) as part of the HTML's ``_static``."""
    if str(STATIC_DIR) not in config.html_static_path:
        config.html_static_path.append(str(STATIC_DIR))


def _add_snippet_script(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object
) -> None:
    """``html-page-context``: load :data:`SNIPPET_JS` on the search page.

    Deferred: the page's ``<head>`` lists it before ``searchtools.js`` (added by the search
    template), and a deferred script runs once the page is parsed, when ``Search`` exists and
    before ``Search.init`` (on ``DOMContentLoaded``) starts the search.
    """
    if pagename == "search":
        app.add_js_file(SNIPPET_JS, loading_method="defer")


def setup(app: Sphinx) -> dict:
    app.add_search_language(SearchChineseTerms)
    app.connect("config-inited", _use_glossary_dictionary)
    app.connect("config-inited", _add_static_path)
    app.connect("html-page-context", _add_snippet_script)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
