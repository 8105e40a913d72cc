"""A display-math block in the page's language: its translation put in as LaTeX.

The Chinese edition translates the words of a display formula (``\\text{scores}`` →
``\\text{分数}``) in the page's catalog; ``book/catalogs.py check`` lets a translation change
those words and nothing else. Sphinx's own ``Locale`` transform treats a display-math block as a
literal block: it wraps the translation in ``::`` and parses it again with the page's parser.
For reStructuredText that makes a literal block; for a MyST page it makes a paragraph ``::`` and
an indented code block, so the formula became ``\\[::\\]``. :class:`DisplayMathTranslation` runs
just before ``Locale`` (priority 20), looks the block up in the same catalogs and puts the
translated LaTeX in as the block's text, then marks the block untranslatable so that ``Locale``
leaves it alone. The gettext builder (which extracts the messages) and an English build are not
touched. Registered by ``attnbook_i18n``; ``tests/book/test_display_math_language.py`` builds a
toy MyST page in Chinese with and without it.
"""

from __future__ import annotations

from os import path
from typing import Any

from docutils import nodes
from sphinx.transforms import SphinxTransform


class DisplayMathTranslation(SphinxTransform):
    """Put each translated display-math block's LaTeX in before Sphinx's ``Locale`` runs."""

    default_priority = 19  # sphinx.transforms.i18n.Locale is 20

    def apply(self, **kwargs: Any) -> None:
        if (self.config.language or "en") == "en":
            return
        from sphinx.builders.gettext import MessageCatalogBuilder
        from sphinx.locale import init as init_locale
        from sphinx.util.i18n import docname_to_domain

        if isinstance(self.app.builder, MessageCatalogBuilder):
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        dirs = [path.join(self.env.srcdir, d) for d in self.config.locale_dirs]
        catalog, has_catalog = init_locale(dirs, self.config.language, domain)
        if not has_catalog:
            return
        for node in self.document.findall(nodes.math_block):
            msg = node.rawsource or node.astext()
            msgstr = catalog.gettext(msg)
            if not msgstr.strip() or msgstr == msg:
                continue
            node.children = [nodes.Text(msgstr)]
            node.rawsource = msgstr
            node["translatable"] = False
            node["translated"] = True


def setup(app: Any) -> dict[str, Any]:
    app.add_transform(DisplayMathTranslation)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
