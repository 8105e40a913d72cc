"""Sphinx extension: glue roles resolve inside translated text (``language: zh_CN`` etc.).

The problem (issue 12). With compiled gettext catalogs, Sphinx's ``Locale`` transform replaces
each translatable paragraph by its ``msgstr``, which it parses into a *fresh* document
(``sphinx.transforms.i18n.publish_msgstr``, source ``<path>:<line>:<translated>``). MyST-NB
keeps a page's glue data only on the page's own document, and only while the page is parsed:
``myst_nb.sphinx_.Parser.parse`` sets ``document["nb_renderer"]`` (an ``NbElementRenderer``
whose ``renderer.nb_client.glue_data`` holds the executed notebook's glued outputs) and pops it
when the parse ends. The glue roles and directives look the key up there
(``myst_nb.ext.glue.utils.retrieve_glue_data``). The Locale transform runs after that pop, and
MyST-NB parses a ``<translated>`` source with the plain MyST parser, so in a translation every
``{glue:text}`` warns "No key ... found in glue data for this document" and renders nothing.

The fix. This extension re-registers MyST-NB's parser (same name, ``myst-nb``) as a subclass
that

1. on a page's own parse, keeps the page's ``nb_renderer`` (caught when MyST-NB pops it) in
   ``_KEPT[docname]`` until the page's doctree has been read (``doctree-read``: the transforms,
   the Locale one included, have run), then drops it;
2. on a ``<translated>`` parse of that page (same ``env.docname``), puts the kept renderer on the
   fresh document as ``document["nb_renderer"]`` for the length of the parse, so every glue role
   and directive in the translated text finds the page's own glue data, exactly as in the
   original text.

Nothing else changes: an untranslated build parses exactly as before.

Glued phrases. A ``{glue:text}`` value is usually a number, the same in every edition. Some are
English phrases computed by a chapter ("has no", "1K to 128K tokens"); in an edition other than
English each glued text that has an English word is translated with the figure labels' catalog
(:func:`attnbook.i18n.lookup`, ``lib/attnbook/locale/<language>/*.po``), and one that has no
entry is a warning (an error in the strict build), naming the page and the phrase.

The language switch. When ``attnbook_editions`` is set (``book/editions.py`` sets it), every
page starts with a link to the same page in the other edition (``../zh/<page>.html`` from
``en/<page>.html`` and back, relative, so the book works from any folder and offline), and its
``<head>`` names the other edition with ``<link rel="alternate" hreflang=...>``. The pages Sphinx
generates without a document (search, the general index, the module index) show no body; the
switch is handed to their templates as ``attnbook_lang_switch`` (``book/_templates/search.html``,
``genindex.html``, ``domainindex.html``), so they carry it too. On the search page the link also
keeps the query.

The theme in the page's language (issue 22). The themes' interface is gettext messages of two
domains: ``sphinx`` (Sphinx's templates and HTML writer, pydata-sphinx-theme) and ``booktheme``
(sphinx-book-theme). Sphinx's zh_CN catalog leaves some empty ("Link to this heading"),
pydata-sphinx-theme's ``zh`` catalog lacks some ("Color mode") and keeps others English
("© Copyright"), and sphinx-book-theme's ``zh_CN`` is partly Traditional wording (列印成 PDF).
The book's own catalogs for those domains,
``book/locale/<language>/LC_MESSAGES/<domain>.po``, are compiled in memory (polib) and put ahead
of every other catalog of their domain when the configuration is read (``config-inited``),
before the HTML builder hands Sphinx's translator to the templates' ``_()``; the themes'
catalogs stay behind them as fallbacks (:func:`theme_catalogs_first`). Texts a theme writes in
English without marking them for translation are marked in copies of its components in
``book/_templates``, which this extension puts first (as ``attnbook_a11y`` does). Jupyter
Book's search field text (the theme option ``search_bar_text``) is translated where each page
is written.
"""

from __future__ import annotations

import gettext
import io
from pathlib import Path
from typing import Any

from docutils import nodes
from myst_nb.sphinx_ import Parser as _MystNbParser
from sphinx.transforms import SphinxTransform

#: docname to the NbElementRenderer of that page while its doctree is being read
_KEPT: dict[str, Any] = {}


class _Attributes(dict):
    """A document's attributes dict that remembers the ``nb_renderer`` MyST-NB pops."""

    kept: Any = None

    def pop(self, key: Any, *default: Any) -> Any:
        value = super().pop(key, *default)
        if key == "nb_renderer":
            self.kept = value
        return value


class I18nGlueParser(_MystNbParser):
    """MyST-NB's parser, whose glue data is also seen by the page's translated paragraphs."""

    def parse(self, inputstring: str, document: nodes.document) -> None:
        env = getattr(document.settings, "env", None)
        docname = getattr(env, "docname", None)
        if document.current_source.endswith("<translated>"):
            kept = _KEPT.get(docname)
            if kept is None or "nb_renderer" in document:
                return super().parse(inputstring, document)
            document["nb_renderer"] = kept
            try:
                return super().parse(inputstring, document)
            finally:
                document.attributes.pop("nb_renderer", None)
        attributes = _Attributes(document.attributes)
        document.attributes = attributes
        try:
            return super().parse(inputstring, document)
        finally:
            document.attributes = dict(attributes)
            if attributes.kept is not None and docname is not None:
                _KEPT[docname] = attributes.kept


def _forget(app: Any, doctree: nodes.document) -> None:
    _KEPT.pop(app.env.docname, None)


#: Docutils' smart quotes (on for zh_CN) turn a glued phrase's straight quotes into curly
#: ones before the phrase is translated; the catalogs hold the phrases as Python wrote them.
_STRAIGHT_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def lookup_pasted(text: str, language: str) -> str | None:
    """The translation of a glued phrase as it stands in the doctree (its quotes possibly made
    curly by smart quotes), or None when the label catalogs lack it."""
    from attnbook import i18n

    # As written; with straight apostrophes only (a phrase may quote a sentence in curly
    # double quotes on purpose); with every quote straight.
    for candidate in dict.fromkeys(
        (text, text.replace("\u2019", "'"), text.translate(_STRAIGHT_QUOTES))
    ):
        new = i18n.lookup(candidate, language)
        if new is not None:
            return new
    return None


def _translate_pasted(app: Any, doctree: nodes.document) -> None:
    """Translate the glued phrases of a page (see the module docstring)."""
    language = app.config.language or "en"
    if language == "en":
        return
    from sphinx.util import logging

    from attnbook import i18n

    if language not in i18n.LANGUAGES:
        return
    logger = logging.getLogger(__name__)
    for node in list(doctree.findall(nodes.inline)):
        if "pasted-text" not in node.get("classes", []):
            continue
        text = node.astext()
        if not i18n.needs_translation(text):
            continue
        new = lookup_pasted(text, language)
        if new is None:
            logger.warning(
                f"glued phrase not translated to {language}: {text!r} (add it to "
                f"lib/attnbook/locale/{language}/)",
                location=node,
                type="attnbook",
                subtype="glue",
            )
            continue
        node.children = []
        node += nodes.Text(new)


#: Words the book's own extensions write into pages (attnbook_notebooks's "run it yourself"
#: line and button) and notebooks (attnbook_reader_notebooks), per language other than English.
UI_TEXT = {
    "zh_CN": {
        "Run this chapter yourself: download the notebook ": "自己运行本章：下载笔记本",
        "the book's code (zip)": "本书的代码（zip）",
        "how to run it": "如何运行",
        "Run this chapter: how to run it as a notebook": "运行本章：如何以笔记本形式运行",
        # The reader notebooks (attnbook_reader_notebooks).
        "The numbers in this text are those of the book's own run (the same seeds); the code "
        "cells compute them again when you run them.": (
            "注：正文中的数字是构建本书时算出的，所用的随机种子与代码中的相同；"
            "运行代码单元会重新计算这些数字。"
        ),
        "Solution": "解答",
        # The sidebar's expand toggles (attnbook_a11y); {title} is the entry's text.
        "Pages under {title}": "{title}下的页面",
        # The name of the language switch's navigation (below).
        "Language": "语言",
    },
}


def ui_text(language: str | None, text: str) -> str:
    """``text`` (one of the book's own interface strings) in ``language``."""
    return UI_TEXT.get(language or "en", {}).get(text, text)


def _translate_captions(app: Any, doctree: nodes.document) -> None:
    """Translate the captions of the toctrees sphinx-external-toc inserts (from _toc.yml).

    They are added after Sphinx's Locale transform has translated the page, so they would stay
    English; the page's own catalog (e.g. ``intro.po``: "Start here", "Chapters") has them.
    """
    language = app.config.language or "en"
    if language == "en":
        return
    from sphinx import addnodes
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    toctrees = [n for n in doctree.findall(addnodes.toctree) if n.get("caption")]
    if not toctrees:
        return
    domain = docname_to_domain(app.env.docname, app.config.gettext_compact)
    dirs = [str(Path(app.srcdir) / d) for d in app.config.locale_dirs]
    catalog, _found = init_locale(dirs, language, domain)
    for node in toctrees:
        node["caption"] = catalog.gettext(node["caption"])


#: Sphinx language -> (URL folder of its edition, the link text that leads *to* it, the
#: sentence said by that link's title, in the language of the page it leads to).
EDITIONS = {
    "en": ("en", "English", "This page in English"),
    "zh_CN": ("zh", "中文", "本页的中文版"),
}


def switch_links(language: str, pagename: str, editions: list[str]) -> list[tuple[str, ...]]:
    """The other editions of a page: ``(href, hreflang, text, title)`` per edition.

    Args:
        language: the page's Sphinx language (a key of :data:`EDITIONS`).
        pagename: the page's name, e.g. ``chapters/03-scaling-variance``.
        editions: the URL folders built side by side (``attnbook_editions``).
    """
    up = "../" * (pagename.count("/") + 1)
    out = []
    for lang, (folder, text, title) in EDITIONS.items():
        if lang == language or folder not in editions:
            continue
        out.append((f"{up}{folder}/{pagename}.html", lang.replace("_", "-"), text, title))
    return out


def switch_html(language: str, pagename: str, editions: list[str]) -> str:
    """The language switch of a page: a ``<nav>`` with a link to each other edition, or ``""``.

    The click keeps the reader's place (the section ids are the same in both editions) and, on
    the search page, the query.
    """
    keep = "this.hash = window.location.hash"
    if pagename == "search":
        keep = "this.search = window.location.search; " + keep
    anchors = "".join(
        f'<a class="attnbook-lang-link" href="{href}" hreflang="{lang}" lang="{lang}" '
        f'title="{title}" onclick="{keep}">{text}</a>'
        for href, lang, text, title in switch_links(language, pagename, editions)
    )
    if not anchors:
        return ""
    name = ui_text(language, "Language")
    return f'<nav class="attnbook-lang-switch" aria-label="{name}">{anchors}</nav>'


def _add_switch(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """``html-page-context``: the language switch at the top of the page, and the other editions
    named in its ``<head>``.

    A page made from a document gets the switch at the top of its body; the pages Sphinx makes
    without one (search, genindex, py-modindex) get it as ``attnbook_lang_switch``, which their
    templates in ``book/_templates`` show.
    """
    editions = app.config.attnbook_editions
    if not editions:
        return
    language = app.config.language or "en"
    switch = switch_html(language, pagename, editions)
    if not switch:
        return
    if doctree is not None:
        context["body"] = switch + context.get("body", "")
    else:
        context["attnbook_lang_switch"] = switch
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<link rel="alternate" hreflang="{lang}" href="{href}">'
        for href, lang, _text, _title in switch_links(language, pagename, editions)
    )


#: The book's catalogs of the themes' message domains (see the module docstring).
THEME_LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
#: The message domains of Sphinx with pydata-sphinx-theme, and of sphinx-book-theme.
THEME_DOMAINS = ("sphinx", "booktheme")


def theme_catalog(language: str, domain: str) -> gettext.GNUTranslations | None:
    """The book's catalog of ``domain`` in ``language``, compiled in memory; ``None`` if the
    book has none (``book/locale/<language>/LC_MESSAGES/<domain>.po``).

    Fuzzy, obsolete and untranslated entries are left out, so the message falls through to the
    theme's own catalog.
    """
    import polib

    path = THEME_LOCALE_DIR / language / "LC_MESSAGES" / f"{domain}.po"
    if not path.is_file():
        return None
    source = polib.pofile(str(path))
    compiled = polib.POFile()
    compiled.metadata = source.metadata
    for entry in source.translated_entries():
        compiled.append(entry)
    return gettext.GNUTranslations(io.BytesIO(compiled.to_binary()))


def theme_catalogs_first(app: Any, config: Any) -> None:
    """``config-inited``: put the book's catalogs of the themes' domains ahead of all others.

    Sphinx keeps one translator per domain (``sphinx.locale.translators``); a catalog registered
    later (``app.add_message_catalog``, as the themes do) becomes a fallback of the first. The
    book's catalog becomes the first and the translator found so far its fallback, so a message
    it lacks still comes from Sphinx's or the theme's catalog, and a theme that registers its
    catalog after this (pydata-sphinx-theme, loaded with the HTML theme) only adds a fallback.
    For ``sphinx`` the translator is also ``app.translator``, which the HTML builder installs in
    the templates (``_()``, ``{% trans %}``) after this event.
    """
    from sphinx import locale

    language = config.language or "en"
    for domain in THEME_DOMAINS:
        ours = theme_catalog(language, domain)
        if ours is None:
            continue
        key = ("general", domain)
        theirs = app.translator if domain == "sphinx" else locale.translators.get(key)
        if theirs is not None and theirs.__class__ is not gettext.NullTranslations:
            ours.add_fallback(theirs)
        locale.translators[key] = ours
        if domain == "sphinx":
            app.translator = ours


class ModuleIndexEntries(SphinxTransform):
    """The general index's word "module" under each module in the page's language.

    Sphinx's Python domain writes the index entry of a module as ``"module; <name>"`` in
    English (``sphinx.domains.python.PyModule``, not a message); its catalogs translate the word
    ``module`` itself. Runs before the index domain collects the page's entries (priority 850).
    """

    default_priority = 840

    def apply(self, **kwargs: Any) -> None:
        if (self.config.language or "en") == "en":
            return
        from sphinx import addnodes
        from sphinx.locale import _

        word = str(_("module"))
        for node in self.document.findall(addnodes.index):
            node["entries"] = [
                (kind, f"{word}; {value[len('module; ') :]}", *rest)
                if kind == "pair" and value.startswith("module; ")
                else (kind, value, *rest)
                for kind, value, *rest in node["entries"]
            ]


def _translate_theme_text(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """``html-page-context``: the search field's text (the theme option ``search_bar_text``,
    which Jupyter Book sets to "Search this book...") in the page's language."""
    from sphinx.locale import get_translator

    text = context.get("theme_search_bar_text")
    if text:
        context["theme_search_bar_text"] = get_translator("sphinx").gettext(str(text))


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("myst_nb")
    app.setup_extension("attnbook_display_math")
    app.add_source_parser(I18nGlueParser, override=True)
    app.connect("doctree-read", _forget)
    app.connect("doctree-read", _translate_pasted)
    # Before the toctree collector reads the captions.
    app.connect("doctree-read", _translate_captions, priority=100)
    # URL folders of the editions built side by side (book/editions.py); empty: no switch.
    app.add_config_value("attnbook_editions", [], "html", types=[list])
    app.connect("html-page-context", _add_switch)
    # The themes' interface in the page's language: the book's catalogs first, before the HTML
    # builder gives the templates their translator; the components that mark the themes'
    # English texts (book/_templates) before the themes' own.
    from attnbook_a11y import templates_first

    app.connect("config-inited", theme_catalogs_first)
    app.connect("config-inited", templates_first)
    # After sphinx-book-theme's handler, which sets the search field's text (priority 500).
    app.connect("html-page-context", _translate_theme_text, priority=600)
    app.add_transform(ModuleIndexEntries)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
