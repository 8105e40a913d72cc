"""Outputs that carry one rendering per edition of the book, and the renderer that picks one.

The book has two editions built from one execution of its chapters (``book/editions.py`` sets
``ATTNBOOK_EDITIONS="en zh_CN"`` for it). Each figure and explorer output then carries, next to
its usual English ``image/png`` / ``text/html`` (what JupyterLab shows), a :data:`MIME` entry
with one rendering per edition: :func:`attnbook.mpl_figures.figure_bundle` for a matplotlib
figure, :func:`editions_html_bundle` for an explorer, :class:`attnbook.printed.Printed` for
printed text and :class:`attnbook.listing.Listing` for a code listing's label.
:class:`EditionsMimeRenderer`, MyST-NB's renderer for that type, shows each edition its own;
a label listed as untranslated fails the strict build of the Chinese edition, naming the page.

The labels themselves are made by :mod:`attnbook.i18n`; the matplotlib drawings by
:mod:`attnbook.mpl_figures`. This module imports neither (nor matplotlib).
"""

from __future__ import annotations

import json

__all__ = [
    "MIME",
    "PHONE_MEDIA",
    "PICTURE_CLASS",
    "TEXT_KINDS",
    "WIDE_FIGURE_CLASS",
    "editions_html_bundle",
    "EditionsMimeRenderer",
]

#: The output MIME type carrying one rendering per edition (see the module docstring).
MIME = "application/vnd.attnbook.editions+json"
#: Payload kinds drawn as text, each with MyST-NB's renderer method (block, inline) for it. An
#: explorer's HTML, a code listing's Markdown (:mod:`attnbook.listing`) and printed text
#: (:mod:`attnbook.printed`) are text; any other kind is an image.
TEXT_KINDS = {
    "text/html": ("render_text_html", "render_text_html_inline"),
    "text/markdown": ("render_markdown", "render_markdown_inline"),
    "text/plain": ("render_text_plain", "render_text_plain_inline"),
}
#: The media query under which the browser shows a figure's phone drawing (the payload's
#: ``narrow`` PNG, 358 px wide): a window up to 600 px wide (a phone, held either way), where the
#: column's 688 px drawing would be shrunk.
PHONE_MEDIA = "(max-width: 600px)"
#: Class of the container of a figure whose panels do not fit a phone (the payload's
#: ``too_wide``): on a phone its column drawing keeps its size and scrolls sideways.
WIDE_FIGURE_CLASS = "attnbook-wide-figure"
#: Class of the container :class:`EditionsMimeRenderer` puts a figure's two drawings in (the
#: column's, then the phone's); ``book/_ext/attnbook_figures.py`` writes it as ``<picture>``.
PICTURE_CLASS = "attnbook-picture"


def editions_html_bundle(render_html, languages: tuple[str, ...]) -> dict:
    """The :data:`MIME` payload of an HTML output drawn once per language.

    Args:
        render_html: ``render_html(language, missing) -> str``.
        languages: the editions.
    """
    missing: set[str] = set()
    out = {lang: render_html(lang, missing) for lang in languages}
    return {"kind": "text/html", "editions": out, "untranslated": sorted(missing)}


class EditionsMimeRenderer:
    """MyST-NB mime renderer: each edition of the built book shows its own rendering.

    Registered in pyproject.toml (entry point group ``myst_nb.mime_renderers``). For the HTML
    builder a :data:`MIME` output outranks ``text/html`` and ``image/png``; its rendering for
    the build's ``language`` (English when it has none) is passed to MyST-NB's own image or HTML
    renderer, so the page holds exactly what an ordinary output would. A figure that also has
    a phone drawing (the payload's ``narrow``) becomes two such images in one container of
    class :data:`PICTURE_CLASS` (media query :data:`PHONE_MEDIA`), which the book's
    ``attnbook_figures`` extension writes as ``<picture>``: the browser picks. A label listed as
    untranslated is a warning on the page (an error in the strict build) in every edition but
    the English one.
    """

    mime_priority_overrides = [("html", MIME, 1)]

    @staticmethod
    def handle_mime(renderer, data, inline):
        """Render ``data`` if it is a :data:`MIME` output, else return None (MyST-NB's API)."""
        import dataclasses

        if data.mime_type != MIME:
            return None
        payload = data.content
        if isinstance(payload, (str, bytes)):
            payload = json.loads(payload)
        env = getattr(renderer.renderer, "sphinx_env", None)
        language = getattr(getattr(env, "config", None), "language", None) or "en"
        renderings = payload.get("editions", {})
        chosen = language if language in renderings else "en"
        if chosen not in renderings:
            return None
        if chosen != language:
            renderer.logger.warning(
                f"this output has no {language} rendering (only {sorted(renderings)}): was the "
                f"book built with ATTNBOOK_EDITIONS naming {language}?",
                subtype="attnbook_label",
                line=data.line,
            )
        for message in payload.get("missing_glyphs", []):
            renderer.logger.warning(
                f"figure has a character no font can draw: {message}",
                subtype="attnbook_glyph",
                line=data.line,
            )
        if language != "en":
            for label in payload.get("untranslated", []):
                renderer.logger.warning(
                    f"label not translated to {language}: {label!r} (add it to "
                    f"lib/attnbook/locale/{language}/)",
                    subtype="attnbook_label",
                    line=data.line,
                )
        kind = payload.get("kind", "text/html")
        inner = dataclasses.replace(data, mime_type=kind, content=renderings[chosen])
        if kind in TEXT_KINDS:
            return getattr(renderer, TEXT_KINDS[kind][1 if inline else 0])(inner)
        wide = renderer.render_image(inner)
        narrow_png = payload.get("narrow", {}).get(chosen)
        if narrow_png is None:
            if payload.get("too_wide"):
                # No phone drawing fits: on a phone the column's drawing keeps its size and
                # scrolls sideways in its own box (book/_static/attnbook.css).
                from docutils import nodes

                return [nodes.container("", *wide, classes=[WIDE_FIGURE_CLASS])]
            return wide
        from docutils import nodes

        narrow = renderer.render_image(
            dataclasses.replace(data, mime_type=kind, content=narrow_png)
        )
        return [nodes.container("", *wide, *narrow, classes=[PICTURE_CLASS], media=PHONE_MEDIA)]
