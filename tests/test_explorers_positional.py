"""Tests of the position explorer (attnbook.explorers.positional) of chapter 8, without a browser.

The live path is driven as a reader would: set a control's ``value`` and read the
``FigureWidget``'s data. Expected values are written out here, independently of the explorer
(``m`` below is the chosen position, the book's ``i``, and ``pair`` the book's ``r``):
RoPE angles as ``m * base^(-2 pair/D)``, the sinusoidal curves as
``sin/cos(pos * base^(-2 pair/D))`` and the RoPE score of the all-ones query and key as
``(2/D) * sum_r cos(m theta_r)`` (each pair contributes ``(R_m [1, 1]) . [1, 1] =
2 cos(m theta_r)``). The static path is checked by parsing the JSON embedded in ``text/html``.
The labels are checked against the book's notation (appendix A).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.explorers import positional as posx  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import (  # noqa: E402
    embedded_spec,
    live_caption,
    static_frame,
    title_text,
    unmoved,
)
from width_checks import check_widths  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def hand_theta(pair, base, D=16):
    return base ** (-2 * pair / D)


def check_position_figure(data, m, pair, base, D=16, rtol=1e-12, atol=1e-12):
    theta = hand_theta(pair, base, D)
    trail_x, trail_y = np.array(data[1]["x"], float), np.array(data[1]["y"], float)
    p = np.arange(m + 1)
    assert_close(trail_x, np.cos(p * theta), atol=atol, rtol=rtol)
    assert_close(trail_y, np.sin(p * theta), atol=atol, rtol=rtol)
    assert_close(data[1]["meta"]["angle"], m * theta, atol=atol, rtol=rtol)
    assert_close(data[1]["meta"]["wavelength"], 2 * math.pi / theta, atol=0, rtol=rtol or 1e-12)
    pos = np.arange(65)
    assert_close(np.array(data[2]["y"], float), np.sin(pos * theta), atol=atol, rtol=rtol)
    assert_close(np.array(data[3]["y"], float), np.cos(pos * theta), atol=atol, rtol=rtol)
    thetas = base ** (-np.arange(0, D, 2) / D)
    score = (2 / D) * np.cos(pos[:, None] * thetas).sum(-1)
    assert_close(np.array(data[5]["y"], float), score, atol=atol, rtol=rtol)
    assert_close(np.array(data[6]["y"], float), score[m : m + 1], atol=atol, rtol=rtol)
    assert list(data[4]["x"]) == [m, m]


def test_position_live_controls_recompute():
    ex = posx.position_explorer()
    assert ex.values == {"position": 8, "pair": 1, "base": 10000.0}
    data = [t.to_plotly_json() for t in ex.figure.data]
    check_position_figure(data, 8, 1, 10000.0)
    before = list(ex.figure.data[1].x)
    ex.controls["position"].value = 32
    ex.controls["pair"].value = 0
    ex.controls["base"].value = 500000.0
    assert list(ex.figure.data[1].x) != before
    data = [t.to_plotly_json() for t in ex.figure.data]
    check_position_figure(data, 32, 0, 500000.0)
    # Pair 0 turns by exactly 1 rad per token whatever the base (theta_0 = base^0).
    assert ex.figure.data[1].meta["theta"] == 1.0
    ex.controls["pair"].value = 7
    data = [t.to_plotly_json() for t in ex.figure.data]
    check_position_figure(data, 32, 7, 500000.0)
    assert ex.figure.data[1].meta["angle"] < 0.01  # the slowest pair barely moves
    assert all(np.isfinite(np.array(t.y, float)).all() for t in ex.figure.data)


@pytest.fixture(scope="module")
def default_explorer():
    """The default explorer, shared by the tests that only read it: its static HTML (240
    combinations) takes seconds and is computed once. Its controls must not be moved."""
    yield from unmoved(posx.position_explorer())


def test_position_static_frames_match_hand_formula(default_explorer):
    spec = embedded_spec(default_explorer.static_html())
    assert [c["name"] for c in spec["controls"]] == ["position", "pair", "base"]
    assert len(spec["frame_of"]) == 10 * 8 * 3
    for m, pair, base in [(0, 0, 100.0), (12, 3, 10000.0), (32, 7, 500000.0)]:
        fr = static_frame(spec, {"position": m, "pair": pair, "base": base})
        check_position_figure(fr["data"], m, pair, base, rtol=1e-3, atol=1e-4)
    a = static_frame(spec, {"position": 4, "pair": 2, "base": 100.0})
    b = static_frame(spec, {"position": 4, "pair": 2, "base": 10000.0})
    assert a["data"][1] != b["data"][1] and a["data"][5] != b["data"][5]


def test_mimebundle_is_self_contained_and_fits_a_page(default_explorer):
    ex = default_explorer
    bundle = ex._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle and "text/plain" in bundle
    html = bundle["text/html"]
    assert "<script src" not in html and "https://" not in html
    assert len(html.encode()) < 500_000, (ex.title, len(html))
    for name in ("position", "pair", "base"):
        m = re.search(rf'id="(attnbook-explorer-[0-9a-f]+-{name})"', html)
        assert m, f"no control {name}"
        assert f'<label for="{m.group(1)}">' in html


def test_labels_use_the_books_notation(default_explorer):
    # Position i (query), key j, offset i - j, pair r, theta_r; not RoFormer's m, n and i.
    ex = posx.position_explorer(position=12, pair=3)
    layout = ex.figure.layout.to_plotly_json()
    # The title is the caption above the plot (HTML): its text, and θ's r as a subscript.
    assert title_text(layout) == ""
    title = live_caption(ex)
    assert title.startswith("i = 12, r = 3, base 10 000: θr = ")
    assert "angle i·θr = " in title and "2π/θr = " in title
    for part in (
        "base 10 000: θ<sub>r</sub> = ",
        "angle i·θ<sub>r</sub> = ",
        "2π/θ<sub>r</sub> = ",
    ):
        assert part in ex.caption.value
    heads = " ".join(a["text"] for a in layout["annotations"]).replace("<br>", " ")
    assert "RoPE rotates pair r by i·θ<sub>r</sub>" in heads
    assert "sinusoidal encoding, same θ<sub>r</sub>" in heads
    assert layout["xaxis"]["title"]["text"] == "dim 2r"
    assert layout["yaxis"]["title"]["text"] == "dim 2r+1"
    assert layout["xaxis2"]["title"]["text"] == "position p"
    assert layout["xaxis3"]["title"]["text"] == "offset Δ = i − j"
    assert [t.name for t in ex.figure.data[2:4]] == [
        "dim 2r: sin(p·θ<sub>r</sub>)",
        "dim 2r+1: cos(p·θ<sub>r</sub>)",
    ]
    assert ex.controls["position"].description == "position i"
    assert ex.controls["pair"].description == "pair r"
    # The static HTML holds every combination whatever the initial values: the shared
    # default explorer's has the same labels and frames.
    html = default_explorer.static_html()
    assert '-position">position i</label>' in html and '-pair">pair r</label>' in html
    frames = json.dumps(embedded_spec(html), ensure_ascii=False)  # every precomputed figure
    shown = title + heads + frames
    for old in ("m = ", "m·θ", "θ<sub>i</sub>", "m − n", "pair i", "position m", "dim 2i"):
        assert old not in shown, old


def test_position_explorer_speaks_chinese(default_explorer):
    """Every label, legend entry and hover text of every setting is Chinese in Chinese."""
    from explorer_util import assert_speaks_chinese

    assert_speaks_chinese(default_explorer)
    zh = default_explorer.figure_json({"position": 12, "pair": 3, "base": 10000.0}, "zh_CN")
    assert zh["layout"]["title"]["text"].startswith("i = 12，r = 3，基数 10 000：")
    assert zh["data"][5]["hovertemplate"].startswith("Δ = %{x}：分数 %{y:.3f}")
    assert zh["layout"]["xaxis3"]["title"]["text"] == "偏移量 Δ = i − j"
    # The numbers are the setting's, whatever the language: the same data is drawn twice.
    en = default_explorer.figure_json({"position": 12, "pair": 3, "base": 10000.0})
    assert zh["data"][1]["y"] == en["data"][1]["y"]
    check_position_figure(zh["data"], 12, 3, 10000.0)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_figure_is_laid_out_for_the_column_and_for_a_phone(language):
    from attnbook import viz

    data = posx.position_data(32, 7, 500000.0)
    wide, phone = check_widths(
        lambda w: posx.draw_position(data, language=language, width=w), n_panels=3
    )
    for fig in (wide, phone):
        lay = fig["layout"]
        assert [t.get("xaxis", "x") for t in fig["data"]] == ["x"] * 2 + ["x2"] * 3 + ["x3"] * 2
        # The circle stays a circle: one unit as long on both axes of its panel.
        assert lay["yaxis"]["scaleanchor"] == "x" and lay["yaxis"]["scaleratio"] == 1
        # No hand-placed text: the only annotations are the three panels' titles.
        assert len(lay["annotations"]) == 3
        assert all(a["yref"] == "paper" for a in lay["annotations"])
    # Stacked, top to bottom in reading order: rotation, encoding, score.
    ys = [phone["layout"][k]["domain"][0] for k in ("yaxis", "yaxis2", "yaxis3")]
    assert ys[0] > ys[1] > ys[2]
    assert wide["layout"]["height"] < phone["layout"]["height"]
    assert viz.PHONE_PX < viz.COLUMN_PX


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: posx.position_explorer(position=7), ValueError, "position"),
        (lambda: posx.position_explorer(pair=8), ValueError, "pair"),
        (lambda: posx.position_explorer(base=2.0), ValueError, "base"),
        (lambda: posx.position_explorer(head_dim=15), ValueError, "head_dim"),
        (lambda: posx.position_explorer(head_dim=34), ValueError, "head_dim"),
        (lambda: posx.position_explorer(head_dim=16.0), TypeError, "head_dim"),
        (lambda: posx.position_figure(position=65), ValueError, "position"),
        (lambda: posx.position_figure(position=2.0), TypeError, "position"),
        (lambda: posx.position_figure(pair=8), ValueError, "pair"),
        (lambda: posx.position_figure(head_dim=9), ValueError, "head_dim"),
        (lambda: posx.position_figure(base=1.0), ValueError, "base"),
        (lambda: posx.position_figure(base="10000"), TypeError, "base"),
        (lambda: posx.position_figure(max_position=0), ValueError, "max_position"),
    ],
)
def test_bad_options_raise_naming_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
