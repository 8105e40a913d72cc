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
``<head>`` names the other edition with ``<link rel="alternate" hreflang=...>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from myst_nb.sphinx_ import Parser as _MystNbParser

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
        new = i18n.lookup(text, language)
        if new is None:
            logger.warning(f"glued phrase not translated to {language}: {text!r} (add it to "
                           f"lib/attnbook/locale/{language}/)", location=node,
                           type="attnbook", subtype="glue")
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
        "cells compute them again when you run them.":
            ("注：正文中的数字是构建本书时算出的，所用的随机种子与代码中的相同；"
             "运行代码单元会重新计算这些数字。"),
        "Solution": "解答",
        # The sidebar's expand toggles (attnbook_a11y); {title} is the entry's text.
        "Pages under {title}": "{title}下的页面",
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


def _add_switch(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    editions = app.config.attnbook_editions
    if not editions or doctree is None:
        return
    links = switch_links(app.config.language, pagename, editions)
    # The click keeps the reader's place: the section ids are the same in both editions.
    anchors = "".join(
        f'<a class="attnbook-lang-link" href="{href}" hreflang="{lang}" lang="{lang}" '
        f'title="{title}" onclick="this.hash = window.location.hash">{text}</a>'
        for href, lang, text, title in links
    )
    if anchors:
        context["body"] = (f'<nav class="attnbook-lang-switch" aria-label="language">{anchors}'
                           f"</nav>" + context.get("body", ""))
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<link rel="alternate" hreflang="{lang}" href="{href}">'
        for href, lang, _text, _title in links
    )


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("myst_nb")
    app.add_source_parser(I18nGlueParser, override=True)
    app.connect("doctree-read", _forget)
    app.connect("doctree-read", _translate_pasted)
    # Before the toctree collector reads the captions.
    app.connect("doctree-read", _translate_captions, priority=100)
    # URL folders of the editions built side by side (book/editions.py); empty: no switch.
    app.add_config_value("attnbook_editions", [], "html", types=[list])
    app.connect("html-page-context", _add_switch)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
