"""Tests of the explorer machinery (attnbook.explorers.base): controls, the display bundle,
the static HTML and its size. The explorers of the book serve as the examples.
"""

from __future__ import annotations

import math
import re

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.explorers.base import MAX_GRID, Control, Explorer  # noqa: E402
from attnbook.explorers.masks import mask_explorer  # noqa: E402
from attnbook.explorers.scaling import scaling_explorer  # noqa: E402
from explorer_util import embedded_spec  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_mimebundle_has_both_representations():
    ex = mask_explorer()
    bundle = ex._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle and "text/plain" in bundle
    assert bundle[WIDGET_MIME]["model_id"] == ex.widget.model_id
    html = bundle["text/html"]
    # Self-contained: no external script, no CDN, no inlined plotly.js, labelled controls.
    assert "<script src" not in html and "cdn" not in html.lower() and "https://" not in html
    assert "plotly.js v" not in html and len(html) < 400_000
    for name in ("mask_type", "window", "n_pad"):
        m = re.search(rf'id="(attnbook-explorer-[0-9a-f]+-{name})"', html)
        assert m, f"no control {name}"
        assert f'<label for="{m.group(1)}">' in html
    assert "window.Plotly" in html  # waits for plotly.js instead of assuming it
    # Two explorers on one page never share element ids.
    other = mask_explorer()._repr_mimebundle_()["text/html"]
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert ids and not ids & set(re.findall(r'id="([^"]+)"', other))


def test_default_explorers_fit_a_page():
    # Chapter pages must stay < 2 MB; each default explorer gets well under a quarter of that.
    for ex in (scaling_explorer(), mask_explorer()):
        html = ex.static_html()
        assert len(html.encode()) < 500_000, (ex.title, len(html))
        spec = embedded_spec(html)
        assert len(spec["frame_of"]) == math.prod(len(c["options"]) for c in spec["controls"])
    ex = scaling_explorer()
    assert ex.controls["d_k"].options == tuple((str(2**i), 2**i) for i in range(11))




@pytest.mark.parametrize("make, match", [
    (lambda: Control("x", "x", "knob", (1, 2), 1), "kind"),
    (lambda: Control("x", "x", "toggle", (0, 1), 0), "toggle"),
    (lambda: Control("x", "x", "slider", (), None), "no options"),
    (lambda: Control("x", "x", "slider", (1, 2), 3), "x=3 is not one of"),
    (lambda: Control("x", "x", "slider", (1, 2), 1, labels=("a",)), "2 options but 1 labels"),
])
def test_control_rejects_bad_specs(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_explorer_rejects_a_grid_too_large_and_duplicate_names():
    def render(**values):
        import plotly.graph_objects as go

        return go.Figure()

    big = [Control(f"c{i}", "c", "slider", tuple(range(10)), 0) for i in range(4)]
    assert 10**4 > MAX_GRID
    with pytest.raises(ValueError, match="combinations"):
        Explorer(big, render, title="big")
    twice = [Control("a", "a", "slider", (1, 2), 1)] * 2
    with pytest.raises(ValueError, match="unique"):
        Explorer(twice, render, title="twice")
    with pytest.raises(ValueError, match="a=3 is not one of"):
        Explorer(twice[:1], render, title="one", values={"a": 3})
