"""Sphinx extension: a chapter figure drawn for the column and for a phone, the browser picks.

:func:`attnbook.mpl_figures.figure_bundle` draws each matplotlib figure twice per edition: for
the book's column (688 px) and for a phone's (358 px, the panels narrower, the text the same
size). MyST-NB's renderer of those outputs (:class:`attnbook.edition_outputs.EditionsMimeRenderer`)
renders both with MyST-NB's own ``render_image`` (so each PNG is written and copied into
``_images/`` as any output image is) and puts the two image nodes in a container of class
:data:`attnbook.edition_outputs.PICTURE_CLASS`. For the HTML builders this extension turns
that container into a :class:`picture` node, written as

.. code-block:: html

    <picture><source media="(max-width: 600px)" srcset="../_images/<phone>.png"
        width="358" height="..."><img alt="..." src="../_images/<column>.png"
        width="699" height="..."></picture>

The ``<img>`` is what docutils writes for the column's image (its alt text and classes), plus
``width`` and ``height`` (read from the file with Sphinx's own ``get_image_size``), as the
``<source>`` has for the phone's, so the page keeps the figure's place before the image has
loaded. The book's stylesheet (``.cell_output img {max-width: 100%; height: auto}``) still
applies. Any other builder keeps the container (the reader notebooks drop outputs anyway).
"""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from typing import Any

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.images import get_image_size

from attnbook.edition_outputs import PICTURE_CLASS

logger = logging.getLogger(__name__)


class picture(nodes.General, nodes.Element):  # noqa: N801 - docutils names nodes in lowercase
    """A figure's column drawing and phone drawing (two ``image`` children, in that order);
    attribute ``media``: the media query under which the phone drawing is shown."""


def _is_picture_container(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and PICTURE_CLASS in node.get("classes", [])


class Pictures(SphinxPostTransform):
    """Each container of :data:`~attnbook.edition_outputs.PICTURE_CLASS` becomes a
    :class:`picture` (HTML builders only; after MyST-NB's ``SelectMimeType``, priority 4)."""

    default_priority = 5
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        for container in list(self.document.findall(_is_picture_container)):
            images = [c for c in container.children if isinstance(c, nodes.image)]
            if len(images) != 2 or len(container.children) != 2:
                logger.warning(
                    "a figure's drawings for the column and a phone are not two images: %s",
                    container.pformat()[:200],
                    location=container,
                    type="attnbook",
                    subtype="picture",
                )
                continue
            container.replace_self(picture("", *images, media=container["media"]))


def _src_and_size(translator, image: nodes.image) -> tuple[str, tuple[int, int] | None]:
    """The URL the page uses for ``image`` (as Sphinx's ``visit_image`` rewrites it, into
    ``_images/``) and the file's size in pixels."""
    olduri = image["uri"]
    src = olduri
    if olduri in translator.builder.images:
        src = posixpath.join(
            translator.builder.imgpath, urllib.parse.quote(translator.builder.images[olduri])
        )
    return src, get_image_size(os.path.join(translator.builder.srcdir, olduri))


def _size_attrs(size: tuple[int, int] | None) -> dict[str, str]:
    return {} if size is None else {"width": str(size[0]), "height": str(size[1])}


def visit_picture_html(translator, node: picture) -> None:
    wide, narrow = node.children
    narrow_src, narrow_size = _src_and_size(translator, narrow)
    wide_src, wide_size = _src_and_size(translator, wide)
    translator.body.append(
        "<picture>"
        + translator.emptytag(
            {}, "source", "", media=node["media"], srcset=narrow_src, **_size_attrs(narrow_size)
        )
        # As docutils writes an image (its ids, classes, and the alt text or else the URL).
        + translator.emptytag(
            wide, "img", "", src=wide_src, alt=wide.get("alt", wide_src), **_size_attrs(wide_size)
        )
        + "</picture>\n"
    )
    raise nodes.SkipNode


def setup(app: Any) -> dict[str, Any]:
    app.add_node(picture, html=(visit_picture_html, None))
    app.add_post_transform(Pictures)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
