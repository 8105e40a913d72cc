"""A figure's column and phone drawings as ``<picture>`` (book/_ext/attnbook_figures.py).

A toy site built by Sphinx with MyST-NB, without the book: one notebook whose output is what a
chapter's matplotlib figure carries in a book build (:func:`attnbook.mpl_figures.figure_bundle`),
rendered by the book's renderer (:class:`attnbook.edition_outputs.EditionsMimeRenderer`, through
MyST-NB's ``render_image``) and written by the extension. Which drawing the browser shows at
which width is measured on the built book (tests/browser/test_browser_phone_figures.py).
"""

from __future__ import annotations

import base64
import io
import re
import sys
from pathlib import Path

import nbformat
import pytest
from toy_site import build_html

ROOT = Path(__file__).resolve().parents[2]
EXT_DIR = ROOT / "book" / "_ext"

CONF = """
import sys
sys.path.insert(0, {ext!r})

extensions = ["myst_nb", "attnbook_figures"]
html_theme = "basic"
nb_execution_mode = "off"
"""


def _size(png: bytes) -> tuple[int, int]:
    from PIL import Image

    return Image.open(io.BytesIO(png)).size


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(built HTML folder, the figure's payload)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnbook import mpl_figures
    from attnbook.edition_outputs import MIME

    fig, ax = plt.subplots(figsize=(6.88, 2.5), dpi=100, layout="constrained")
    ax.plot([0, 1000, 2000], [0, 1, 2])
    ax.set(xlabel="position", title="head 1")
    payload = mpl_figures.figure_bundle(fig, ("en",))
    plt.close(fig)
    # Tick labels almost as wide as a phone's column do not fit it, however the panels are
    # gridded (relaid_out re-grids panels, so many panels alone would fit): no phone drawing.
    fig, ax = plt.subplots(figsize=(6.88, 2.5), dpi=100, layout="constrained")
    ax.plot([0, 1000, 2000], [0, 1, 2])
    ax.set_yticks(
        [0, 2],
        [
            "the attention weight of the key at the first position",
            "the attention weight of the key at the last position",
        ],
    )
    too_wide = mpl_figures.figure_bundle(fig, ("en",))
    plt.close(fig)
    assert too_wide["too_wide"] and too_wide["narrow"] == {} and not payload["too_wide"]
    src = tmp_path_factory.mktemp("toy-figures")
    (src / "conf.py").write_text(CONF.format(ext=str(EXT_DIR)), encoding="utf-8")
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Figures"),
            nbformat.v4.new_code_cell(
                "fig",
                outputs=[
                    nbformat.v4.new_output(
                        "display_data", {"image/png": payload["editions"]["en"], MIME: payload}
                    )
                ],
            ),
            nbformat.v4.new_code_cell(
                "fig2",
                outputs=[
                    nbformat.v4.new_output(
                        "display_data", {"image/png": too_wide["editions"]["en"], MIME: too_wide}
                    )
                ],
            ),
        ]
    )
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, src / "index.ipynb")
    out = build_html(src)
    return out, payload


def test_the_figure_is_one_picture_with_both_drawings_and_their_sizes(site):
    out, payload = site
    html = (out / "index.html").read_text(encoding="utf-8")
    pictures = re.findall(r"<picture>.*?</picture>", html, re.S)
    assert len(pictures) == 1 and html.count("<img") == 2, html
    source = re.fullmatch(
        r'<picture><source height="(\d+)" media="\(max-width: 600px\)" '
        r'srcset="(_images/\w+\.png)" width="(\d+)" />'
        r'<img alt="([^"]*)" height="(\d+)" src="(_images/\w+\.png)" width="(\d+)" />'
        r"</picture>",
        pictures[0],
    )
    assert source, pictures[0]
    n_height, n_src, n_width, alt, w_height, w_src, w_width = source.groups()
    narrow, wide = (out / n_src).read_bytes(), (out / w_src).read_bytes()
    # Each file is the drawing the payload holds, and the attributes are its size.
    assert narrow == base64.b64decode(payload["narrow"]["en"])
    assert wide == base64.b64decode(payload["editions"]["en"])
    assert _size(narrow) == (int(n_width), int(n_height)) and int(n_width) == 358
    assert _size(wide) == (int(w_width), int(w_height)) and int(w_width) > 600
    assert alt == w_src  # what docutils writes for an output image without alt text


def test_the_offline_audit_checks_the_phone_drawing(site):
    sys.path.insert(0, str(EXT_DIR))
    try:
        import attnbook_offline
    finally:
        sys.path.remove(str(EXT_DIR))
    out, _ = site
    assert attnbook_offline.audit_html(out) == []
    html = (out / "index.html").read_text(encoding="utf-8")
    (phone,) = re.findall(r'srcset="(_images/\w+\.png)"', html)
    kept = (out / phone).read_bytes()
    (out / phone).unlink()
    try:
        problems = attnbook_offline.audit_html(out)
    finally:
        (out / phone).write_bytes(kept)
    assert len(problems) == 1 and phone in problems[0], problems


def test_a_figure_too_wide_for_a_phone_scrolls_in_its_own_box(site):
    """Its column drawing alone, in the box the stylesheet lets scroll sideways on a phone."""
    from attnbook.edition_outputs import WIDE_FIGURE_CLASS

    out, _ = site
    html = (out / "index.html").read_text(encoding="utf-8")
    box = re.search(rf'<div class="{WIDE_FIGURE_CLASS}[^"]*">\s*(<img [^>]*>)\s*</div>', html)
    assert box, html
    assert "<picture>" not in box.group(0)
    css = (ROOT / "book" / "_static" / "attnbook.css").read_text(encoding="utf-8")
    rule = re.search(
        r"@media \(max-width: 600px\) \{\s*\.bd-article \.cell_output "
        rf"\.{WIDE_FIGURE_CLASS} \{{\s*overflow-x: auto;",
        css,
    )
    assert rule, "the stylesheet does not let the box scroll on a phone"
