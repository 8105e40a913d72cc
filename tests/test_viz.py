"""Tests of the figure helpers (attnbook.viz): the static display of a figure, the book's figure
style and the figure builders' checks of their arguments.
"""

from __future__ import annotations

import json
import re

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


def test_scaling_names_are_read_at_their_old_path():
    # The figure moved to its explorer's module, the data to attnbook.scaling; their tests are
    # in tests/test_explorers_scaling.py and tests/test_scaling.py.
    from attnbook import scaling
    from attnbook.explorers import scaling as scaling_explorer

    assert viz.scaling_figure is scaling_explorer.scaling_figure
    for name in ("ScalingData", "scaling_data", "score_histogram"):
        assert getattr(viz, name) is getattr(scaling, name)
        assert name not in viz.__all__
    assert "scaling_figure" not in viz.__all__


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: viz.mask_figure("causal", scores=np.zeros((3, 3))), ValueError, "scores"),
        (lambda: viz.mask_figure("diagonal"), ValueError, "mask_type"),
        (lambda: viz.explorer_keep_mask("causal", 4, window=2.0), TypeError, "window"),
        (lambda: viz.explorer_keep_mask("padding", 4, n_pad=5), ValueError, "n_pad"),
        (lambda: viz.mask_scores(0), ValueError, "seq_len"),
        (lambda: viz.mask_scores(4, seed=None), TypeError, "seed"),
        # Were plotly's "Invalid value ... for the 'height' property" / NumPy's "could not convert
        # string to float", naming neither argument.
        (lambda: viz.mask_figure(height=-5), ValueError, "height"),
        (lambda: viz.mask_figure(height="a"), TypeError, "height"),
        (lambda: viz.mask_figure(scores=[["a"] * 8] * 8), TypeError, "scores"),
        (
            lambda: viz.explorer_keep_mask("padding", 4, n_pad=1, pad_side="LEFT"),
            ValueError,
            "pad_side",
        ),
        (lambda: viz.mask_figure(pad_side=None), ValueError, "pad_side"),
    ],
)
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


def test_mask_weight_numbers_are_readable_at_the_column_width():
    # Issue 10: the weights drawn on the 8 x 8 heatmap were 11 px (digits about 7 px tall) at
    # 1280 px. The weights panel is the wider one and draws them at 14 px in the column, as
    # drawn for it (draw_mask(width=COLUMN_PX); on a phone they shrink only if they must).
    from attnbook import fonts

    fig = json.loads(
        viz.mask_figure("causal + padding", n_pad=2, pad_side="left", width=viz.COLUMN_PX).to_json()
    )
    weights = next(t for t in fig["data"] if t["name"] == "weights")
    assert weights["texttemplate"] == "%{z:.2f}" and weights["textfont"]["size"] >= 14
    # Each cell is wide enough for "0.54" at that size in the figure font.
    plot_w = viz.COLUMN_PX - fig["layout"]["margin"]["l"] - fig["layout"]["margin"]["r"]
    lo, hi = fig["layout"]["xaxis2"]["domain"]
    assert plot_w * (hi - lo) / 8 - 2 >= fonts.text_width("0.54", 14)


def test_static_figure_draws_once_the_fonts_its_text_needs_have_loaded():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1], y=[2], name="注意力 <b>γ</b>"))
    html = viz.show(fig).to_html()
    call = re.search(r'fonts\.load\(("[^"]*"), ("(?:[^"\\]|\\.)*")\)', html)
    assert call, "the figure does not wait for its font"
    font, text = json.loads(call.group(1)), json.loads(call.group(2))
    assert font == f"{viz.FONT['size']}px {viz.FONT['family']}"
    assert set("注意力γ") <= set(text)  # the Chinese legend's faces are asked for
    assert "<" not in call.group(2)  # written into a <script>: no "</script>" can appear
    assert f"setTimeout(go, {viz.FONT_WAIT_MS})" in html  # and it never waits for ever
    # The bare wrapper (no text given) draws as soon as plotly.js is there.
    assert "fonts.load" not in viz.when_plotly_ready_js("draw();")


def test_legend_below_sits_in_container_coordinates():
    assert viz.legend_below() == dict(
        orientation="h", x=0.5, xanchor="center", yref="container", y=0.0, yanchor="bottom"
    )
    assert viz.legend_below(font=dict(size=11))["font"] == {"size": 11}
