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
"""

from __future__ import annotations

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


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("myst_nb")
    app.add_source_parser(I18nGlueParser, override=True)
    app.connect("doctree-read", _forget)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
