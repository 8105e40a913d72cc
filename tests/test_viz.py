"""Tests of the figure helpers (attnbook.viz): the static display of a figure, the book's figure
style and the figure builders' checks of their arguments.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("plotly")

from attnbook import viz  # noqa: E402


def test_show_bundle():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[4, 1, 2]), layout=dict(title=dict(text="t")))
    bundle = viz.show(fig)._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.plotly.v1+json"}
    assert bundle["application/vnd.plotly.v1+json"]["data"][0]["y"] == [4, 1, 2]
    json.dumps(bundle["application/vnd.plotly.v1+json"])  # serialisable as it must be
    html = bundle["text/html"]
    assert "Plotly.newPlot" in html and "window.Plotly" in html and "<script src" not in html
    assert len(html) < 20_000  # plotly.js is not inlined
    with pytest.raises(TypeError, match="fig"):
        viz.show({"data": []})


def test_axis_style_is_the_book_style_updated_by_the_arguments():
    style = viz.axis_style(title=dict(text="t"), showline=False)
    assert style["gridcolor"] == "#e6e6e6" and style["ticks"] == "outside"
    assert style["title"] == {"text": "t"} and style["showline"] is False
    assert viz.axis_style() is not viz.axis_style()  # a new dict each time
    assert viz.EMPTY_TEMPLATE == {} and viz.FONT["size"] == 13


def test_token_attention_figure_is_read_at_its_old_path():
    # It moved to its explorer's module; its tests are in tests/test_explorers_pretrained.py.
    from attnbook.explorers import pretrained

    assert viz.token_attention_figure is pretrained.token_attention_figure
    assert viz.HIGHLIGHT_COLORS is pretrained.HIGHLIGHT_COLORS
    assert "token_attention_figure" not in viz.__all__


@pytest.mark.parametrize("call, exc, name", [
    (lambda: viz.mask_figure("causal", scores=np.zeros((3, 3))), ValueError, "scores"),
    (lambda: viz.mask_figure("diagonal"), ValueError, "mask_type"),
    (lambda: viz.explorer_keep_mask("causal", 4, window=2.0), TypeError, "window"),
    (lambda: viz.explorer_keep_mask("padding", 4, n_pad=5), ValueError, "n_pad"),
    (lambda: viz.mask_scores(0), ValueError, "seq_len"),
    (lambda: viz.mask_scores(4, seed=None), TypeError, "seed"),
    (lambda: viz.scaling_figure(x_range=0), ValueError, "x_range"),
    (lambda: viz.scaling_figure(x_range="4"), TypeError, "x_range"),
    (lambda: viz.score_histogram([1.0, 2.0], n_bins=0), ValueError, "n_bins"),
    # Were plotly's "Invalid value ... for the 'height' property" / NumPy's "could not convert
    # string to float", naming neither argument.
    (lambda: viz.mask_figure(height=-5), ValueError, "height"),
    (lambda: viz.mask_figure(height="a"), TypeError, "height"),
    (lambda: viz.mask_figure(scores=[["a"] * 8] * 8), TypeError, "scores"),
    (lambda: viz.scaling_figure(height=-1), ValueError, "height"),
    (lambda: viz.scaling_figure(height="x"), TypeError, "height"),
    (lambda: viz.explorer_keep_mask("padding", 4, n_pad=1, pad_side="LEFT"), ValueError,
     "pad_side"),
    (lambda: viz.mask_figure(pad_side=None), ValueError, "pad_side"),
])
def test_figure_builders_check_their_arguments(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_figsize_fills_the_column_at_one_dot_per_css_pixel():
    # Hand derivation: 688 px column at 100 dpi is 6.88 in; aspect 0.5 halves the height.
    assert viz.figsize(0.5) == pytest.approx((6.88, 3.44))
    assert viz.figsize(1.0, width=0.5) == pytest.approx((3.44, 3.44))
    assert viz.FIG_WIDTH_IN * viz.FIG_DPI == pytest.approx(viz.COLUMN_PX)


@pytest.mark.parametrize(
    "kwargs, err",
    [
        (dict(aspect=0), ValueError),
        (dict(aspect=-1.0), ValueError),
        (dict(aspect="wide"), TypeError),
        (dict(aspect=0.5, width=1.5), ValueError),
        (dict(aspect=0.5, width=0), ValueError),
    ],
)
def test_figsize_rejects_bad_arguments(kwargs, err):
    with pytest.raises(err, match="aspect|width"):
        viz.figsize(**kwargs)


def test_use_book_style_draws_column_wide_png():
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    with matplotlib.rc_context():
        viz.use_book_style()
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        assert matplotlib.rcParams["xtick.labelsize"] >= 9
    assert Image.open(io.BytesIO(buf.getvalue())).size[0] == viz.COLUMN_PX


@pytest.mark.parametrize("d_k,scaled", [(1, False), (1, True), (64, True), (1024, False)])
def test_scaling_statistics_box_has_room_above_the_histogram(d_k, scaled):
    # Issue 10: the box (3 lines at 13 px, from 3 % below the top) covered a bar at 1280 px.
    # The plot area is height - t - b = 460 - 50 - 90 = 320 px at the column's width, 230 px
    # stacked on a phone; every bar and the expected curve must stay under the box there.
    x_range = 4.0 if scaled else 4 * 1024**0.5  # as the explorer fixes it
    fig = viz.scaling_figure(d_k, scaled, 16, n_samples=400, n_draws=20, x_range=x_range)
    top = fig.layout.yaxis.range[1]
    box_px = 3 * 13 * 1.3
    for panel_px in (320, 230):
        free = 1 - (box_px + 0.03 * panel_px) / panel_px  # fraction of the axis under the box
        assert max(fig.data[0].y) <= free * top
        curve = np.array(fig.data[1].y)[np.abs(np.array(fig.data[1].x)) <= x_range]
        assert curve.max() <= free * top


def test_mask_weight_numbers_are_readable_at_the_column_width():
    # Issue 10: the weights drawn on the 8 x 8 heatmap were 11 px (digits about 7 px tall) at
    # 1280 px. The weights panel is wider now and draws them at 14 px; the reflow keeps that at
    # the column's width (it only shrinks numbers that do not fit their cells, e.g. on a phone).
    from attnbook.explorers import reflow

    fig = json.loads(viz.mask_figure("causal + padding", n_pad=2, pad_side="left").to_json())
    weights = next(t for t in fig["data"] if t["name"] == "weights")
    assert weights["textfont"]["size"] >= 14
    fitted = reflow.fit_figure(fig, viz.COLUMN_PX)
    weights = next(t for t in fitted["data"] if t["name"] == "weights")
    assert weights["texttemplate"] == "%{z:.2f}" and weights["textfont"]["size"] >= 14
    # Each cell is wide enough for "0.54" at that size (the reflow's own estimate of a digit).
    plot_w = viz.COLUMN_PX - fitted["layout"]["margin"]["l"] - fitted["layout"]["margin"]["r"]
    lo, hi = fitted["layout"]["xaxis2"]["domain"]
    assert plot_w * (hi - lo) / 8 - 4 >= 4 * reflow.CHAR_EM * 14
