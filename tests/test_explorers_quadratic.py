"""Tests of the O(L²) meter (attnbook.explorers.quadratic): live widgets and static frames.

Expected values come from hand formulas (L² numbers of a given byte size; 4 L² d FLOPs), not
from the explorer's own output. The labels are checked against the book's notation (the
sequence length is L, appendix A).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.explorers import quadratic as qx  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, live_caption, static_frame  # noqa: E402
from width_checks import check_widths  # noqa: E402

GIB = 2**30


def shown_title(ex) -> str:
    """The live explorer's title as one line: the caption above its plot (the figure itself
    has none), its text with each <br> as a space."""
    assert "title" not in ex.figure.layout.to_plotly_json()
    return live_caption(ex)


def test_quadratic_meter_live_slider_recomputes():
    ex = qx.quadratic_cost_explorer(seq_len=2048, n_heads=1, dtype="float32")
    fig = ex.figure
    assert fig.data[1].meta["factor"] == 1.0
    assert fig.data[1].meta["bytes"] == 2048**2 * 4
    ex.controls["seq_len"].value = 32768
    ex.controls["n_heads"].value = 32
    assert fig.data[1].meta["factor"] == 256.0  # (32768 / 2048)² by hand
    assert fig.data[1].meta["bytes"] == 32 * 32768**2 * 4
    assert fig.data[1].meta["flops"] == 4 * 32768**2 * (32 * 128)
    assert_close(fig.data[1].y[0], 32 * 32768**2 * 4 / GIB, atol=0, rtol=1e-12)  # 128 GiB
    assert list(fig.data[0].x) == [2**i for i in range(9, 18)]
    assert_close(
        np.array(fig.data[0].y),
        [32 * (2**i) ** 2 * 4 / GIB for i in range(9, 18)],
        atol=0,
        rtol=1e-12,
    )
    assert_close(
        np.array(fig.data[2].y), [(2**i / 2048) ** 2 for i in range(9, 18)], atol=0, rtol=1e-12
    )
    assert "256× the cost" in shown_title(ex)
    ex.controls["dtype"].value = "bfloat16"
    assert fig.data[1].meta["bytes"] == 32 * 32768**2 * 2


def test_quadratic_meter_static_frames():
    spec = embedded_spec(qx.quadratic_cost_explorer().static_html())
    assert len(spec["frame_of"]) == 9 * 3 * 2
    a = static_frame(spec, {"seq_len": 4096, "n_heads": 8, "dtype": "float32"})
    b = static_frame(spec, {"seq_len": 8192, "n_heads": 8, "dtype": "float32"})
    assert a["data"][1]["y"][0] == pytest.approx(8 * 4096**2 * 4 / GIB, rel=1e-3)
    assert b["data"][1]["y"][0] == pytest.approx(4 * a["data"][1]["y"][0], rel=1e-3)
    assert a["data"][1] != b["data"][1]


def test_labels_use_the_books_notation():
    # The sequence length is L (the literature's n appears only in the chapter's prose).
    ex = qx.quadratic_cost_explorer(seq_len=32768, n_heads=32, dtype="float32")
    layout = ex.figure.layout.to_plotly_json()
    title = shown_title(ex)
    assert title.startswith("L = 32,768: ")
    assert title.endswith("the cost at L₀ = 2,048")
    assert layout["xaxis"]["title"]["text"] == "sequence length L"
    assert layout["xaxis2"]["title"]["text"] == "sequence length L"
    assert layout["yaxis"]["title"]["text"] == "GiB of L × L scores (one layer)"
    assert layout["yaxis2"]["title"]["text"] == "cost relative to L₀ = 2,048"
    assert [t.name for t in ex.figure.data] == [
        "score matrices",
        "chosen L",
        "(L / L₀)²",
        "L / L₀ (linear)",
    ]
    assert ex.controls["seq_len"].description == "sequence length L"
    assert ex.title == "O(L²) meter"
    html = ex.static_html()
    assert '-seq_len">sequence length L</label>' in html
    frames = json.dumps(embedded_spec(html), ensure_ascii=False)  # every precomputed figure
    shown = title + frames + " ".join(str(t.hovertemplate) for t in ex.figure.data)
    for old in ("n = ", "n₀", "length n", "n × n", "chosen n", "O(n"):
        assert old not in shown, old


def test_quadratic_meter_speaks_chinese():
    """Every label, legend entry and hover text of every setting is Chinese in Chinese."""
    from explorer_util import assert_speaks_chinese

    ex = qx.quadratic_cost_explorer()
    assert_speaks_chinese(ex)
    values = {"seq_len": 32768, "n_heads": 1, "dtype": "bfloat16"}
    zh = ex.figure_json(values, "zh_CN")
    # One head of 32768² bfloat16 scores: 2 GiB, by hand; 256× the cost at 2048 = (32768/2048)².
    assert zh["layout"]["title"]["text"] == (
        "L = 32,768：每层分数占 2 GiB（1 个头，bfloat16）<br>每层 0.55 TFLOP，"
        "代价是 L₀ = 2,048 时的 256 倍"
    )
    assert [t["name"] for t in zh["data"]] == ["分数矩阵", "所选 L", "(L / L₀)²", "L / L₀（线性）"]
    assert zh["data"][0]["hovertemplate"].startswith("L = %{x}：%{y:.3g} GiB")
    # The same numbers in both editions (one computation, drawn twice).
    en = ex.figure_json(values)
    assert zh["data"][1]["meta"] == en["data"][1]["meta"]
    assert en["data"][1]["meta"]["bytes"] == 32768**2 * 2


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_figure_is_laid_out_for_the_column_and_for_a_phone(language):
    from attnbook import fonts, viz

    data = qx.quadratic_data(131072, 32, "float32")
    wide, phone = check_widths(
        lambda w: qx.draw_quadratic(data, language=language, width=w), n_panels=2
    )
    for fig, width in ((wide, viz.COLUMN_PX), (phone, viz.PHONE_PX)):
        lay = fig["layout"]
        assert [t.get("xaxis", "x") for t in fig["data"]] == ["x", "x", "x2", "x2"]
        # The bars' length labels do not overlap: the labels shown, spread over the bar
        # panel's width, each have room for their text.
        d0, d1 = lay["xaxis2"]["domain"]
        panel_px = (d1 - d0) * (width - lay["margin"]["l"] - lay["margin"]["r"])
        shown = lay["xaxis2"].get("ticktext") or fig["data"][2]["x"]
        every = len(fig["data"][2]["x"]) / len(shown)
        size = lay["xaxis2"].get("tickfont", {}).get("size", 13)
        assert size >= 9
        assert max(fonts.text_width(t, size) for t in shown) + 4 <= panel_px / 9 * every
        # The legend is below the panels, in container coordinates (it sat on the panels'
        # titles at paper y = 1).
        assert lay["legend"]["y"] == 0 and lay["legend"]["yanchor"] == "bottom"
    assert phone["layout"]["height"] > wide["layout"]["height"]


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: qx.quadratic_cost_explorer(seq_len=1000), ValueError, "seq_len"),
        (lambda: qx.quadratic_cost_explorer(n_heads=True), ValueError, "n_heads"),
        (lambda: qx.quadratic_cost_explorer(dtype="int4"), ValueError, "dtype"),
        (lambda: qx.quadratic_cost_explorer(head_dim=0), ValueError, "head_dim"),
        (lambda: qx.quadratic_cost_explorer(ref_len=2048.0), TypeError, "ref_len"),
        (lambda: qx.quadratic_cost_figure(seq_len=3), ValueError, "seq_len"),
        (lambda: qx.quadratic_cost_figure(ref_len=2048.0), TypeError, "ref_len"),
        (lambda: qx.quadratic_cost_figure(n_heads=0), ValueError, "n_heads"),
        (lambda: qx.quadratic_cost_figure(dtype="fp7"), ValueError, "dtype"),
        (lambda: qx.quadratic_cost_figure(512, seq_lens=(1024, 512)), ValueError, "seq_lens"),
    ],
)
def test_bad_options_raise(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
