"""Tests of attnbook.explorers.reflow: wrapped text, stacked panels, heatmap numbers, and the
patches the static explorers store their frames as (attnbook.explorers.base)."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest

from attnbook.explorers import reflow
from attnbook.explorers.base import apply_patch, make_patch
from attnbook.explorers.reflow import (
    NARROW_PX,
    PANEL_PX,
    STACK_BELOW_PX,
    fit_figure,
    text_width_px,
    title_text,
    wrap_html,
)

# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def pil_width(text: str, px: float) -> float:
    """Width of plain text in the figure font as FreeType lays it out (an independent reader)."""
    from PIL import ImageFont

    from attnbook.fonts import font_paths

    return ImageFont.truetype(str(font_paths()[0]), 100).getlength(text) * px / 100


def test_wrap_breaks_at_spaces_greedily():
    two, three, one = (pil_width(t, 10) for t in ("aaa bbb", "aaa bbb ccc", "aaa"))
    assert wrap_html("aaa bbb ccc", (two + three) / 2, 10) == "aaa bbb<br>ccc"
    assert wrap_html("aaa bbb ccc", three + 1, 10) == "aaa bbb ccc"
    assert wrap_html("aaa bbb ccc", one + 2, 10) == "aaa<br>bbb<br>ccc"


def test_wrap_keeps_tags_whole_and_existing_breaks():
    text = "<span style='color:#d9730d'>animal</span> 0.123 · street 0.456"
    out = wrap_html(text, 80, 10)  # 13 visible chars per line at most
    assert "<span style='color:#d9730d'>animal</span>" in out  # the tag was not split
    assert re.sub(r"<br>", " ", out) == text
    for line in out.split("<br>"):
        assert text_width_px(line, 10) <= 80 or " " not in reflow.visible_text(line)
    assert wrap_html("one<br>two three", 1000, 10) == "one<br>two three"
    # A word longer than the width stays whole on its own line.
    assert wrap_html("x supercalifragilistic y", 30, 10) == "x<br>supercalifragilistic<br>y"


def test_text_width_measures_the_font_and_small_subscripts():
    # The font's own advances (FreeType through PIL as the independent reader), not a constant
    # per character: "WWWW" is wider than "iiii" by the font's own ratio.
    for text in ("abcd", "WWWW", "iiii", "注意力"):
        assert text_width_px(text, 10) == pytest.approx(pil_width(text, 10), rel=0.02)
    assert text_width_px("WWWW", 10) > 3 * text_width_px("iiii", 10)
    assert text_width_px("<b>abcd</b>", 10) == pytest.approx(text_width_px("abcd", 10))
    # d<sub>k</sub>: "d" full, "k" at 70 %.
    assert text_width_px("d<sub>k</sub>", 10) == pytest.approx(
        pil_width("d", 10) + 0.7 * pil_width("k", 10), rel=0.01)


# --------------------------------------------------------------------------------------------
# Stacking
# --------------------------------------------------------------------------------------------


def two_panels(height=460, t=50, b=90):
    """A figure shaped like the scaling explorer's: two panels side by side."""
    return {
        "data": [
            {"type": "bar", "x": [1, 2], "y": [1, 2], "xaxis": "x", "yaxis": "y", "name": "a"},
            {"type": "scatter", "x": [1, 2], "y": [2, 1], "xaxis": "x2", "yaxis": "y2",
             "name": "b"},
        ],
        "layout": {
            "height": height, "margin": {"l": 60, "r": 20, "t": t, "b": b},
            "xaxis": {"domain": [0.0, 0.43], "anchor": "y"},
            "yaxis": {"anchor": "x"},
            "xaxis2": {"domain": [0.57, 1.0], "anchor": "y2"},
            "yaxis2": {"anchor": "x2"},
            "annotations": [
                {"text": "Left panel title", "x": 0.215, "y": 1.0, "xref": "paper",
                 "yref": "paper", "xanchor": "center", "yanchor": "bottom"},
                {"text": "Right panel title", "x": 0.785, "y": 1.0, "xref": "paper",
                 "yref": "paper", "xanchor": "center", "yanchor": "bottom"},
                {"text": "box", "x": 0.99, "y": 0.97, "xref": "paper", "yref": "paper",
                 "xanchor": "right", "yanchor": "top"},
                {"text": "a caption under the figure", "x": 0.5, "y": -0.3, "xref": "paper",
                 "yref": "paper", "xanchor": "center", "yanchor": "top"},
            ],
            "legend": {"orientation": "h", "x": 0.5, "y": -0.24, "yanchor": "top"},
        },
    }


def test_narrow_figure_stacks_side_by_side_panels():
    fig = two_panels()
    before = copy.deepcopy(fig)
    out = fit_figure(fig, NARROW_PX)
    assert fig == before, "fit_figure changed its input"
    lay = out["layout"]
    # Both panels span the full width, the left one on top, each PANEL_PX px tall.
    assert lay["xaxis"]["domain"] == [0.0, 1.0] and lay["xaxis2"]["domain"] == [0.0, 1.0]
    (a0, a1), (b0, b1) = lay["yaxis"]["domain"], lay["yaxis2"]["domain"]
    assert a1 == pytest.approx(1.0) and b0 == pytest.approx(0.0)
    assert b1 < a0, "the panels overlap"
    paper = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
    assert (a1 - a0) * paper == pytest.approx(PANEL_PX, abs=1)
    assert (b1 - b0) * paper == pytest.approx(PANEL_PX, abs=1)
    # The gap holds the upper panel's axis and the lower panel's title.
    assert (a0 - b1) * paper >= 64 + 13 * 1.3
    ann = {a["text"]: a for a in lay["annotations"]}
    assert ann["Left panel title"]["y"] == pytest.approx(a1)
    assert ann["Right panel title"]["y"] == pytest.approx(b1)
    # Titles span the stacked figure: centred on the figure, not on the plot area (which the
    # wider left margin shifts right), so a line may take the figure's width.
    plot_w = NARROW_PX - lay["margin"]["l"] - lay["margin"]["r"]
    centre = lay["margin"]["l"] + ann["Right panel title"]["x"] * plot_w
    assert ann["Right panel title"]["xanchor"] == "center"
    assert centre == pytest.approx(NARROW_PX / 2, abs=0.5)
    # The box keeps its place relative to its panel: x 0.99 in [0.57, 1] -> 0.42 / 0.43.
    assert ann["box"]["x"] == pytest.approx(0.42 / 0.43, abs=1e-6)
    assert ann["box"]["y"] == pytest.approx(b0 + 0.97 * (b1 - b0), abs=1e-6)
    # Caption and legend go below the last panel; the figure is taller than before.
    assert ann["a caption under the figure"]["y"] < 0 and lay["legend"]["y"] < 0
    assert lay["height"] > 460


def test_wide_figure_keeps_its_panels_side_by_side():
    out = fit_figure(two_panels(), 688)
    lay = out["layout"]
    assert lay["xaxis"]["domain"] == [0.0, 0.43] and lay["xaxis2"]["domain"] == [0.57, 1.0]
    assert "domain" not in lay["yaxis"]
    assert STACK_BELOW_PX > NARROW_PX and fit_figure(two_panels(), STACK_BELOW_PX)[
        "layout"]["xaxis2"]["domain"] == [0.57, 1.0]


def test_long_title_wraps_and_gets_room():
    fig = two_panels()
    title = ("m = 8, i = 1, base 500 000: θ<sub>i</sub> = 0.194 rad/token, angle "
             "m·θ<sub>i</sub> = 1.55 rad, wavelength 2π/θ<sub>i</sub> = 32.4 tokens, "
             "at the position of the query")
    assert text_width_px(title, 14) > 688  # too wide for one line at either width
    fig["layout"]["title"] = {"text": title, "font": {"size": 14}}
    for width in (688, NARROW_PX):
        lay = fit_figure(fig, width)["layout"]
        text = title_text(lay)
        assert re.sub("<br>", " ", text) == title
        lines = text.split("<br>")
        assert len(lines) >= 2
        assert all(text_width_px(line, 14) <= width - 16 for line in lines)
        # The top margin holds every line of the title (and the panel titles below it).
        assert lay["margin"]["t"] >= len(lines) * 14 * 1.3 + 13 * 1.3


def test_panel_titles_grow_upwards_without_overlap():
    fig = two_panels(t=20)  # room for one line of subplot title
    fig["layout"]["annotations"][0]["text"] = (
        "A long subplot title that cannot fit inside its panel at all")
    lay = fit_figure(fig, 688)["layout"]
    a = lay["annotations"][0]
    n = a["text"].count("<br>") + 1
    assert n == 2
    # The top margin grows to hold both lines; the plot area keeps its height.
    assert lay["margin"]["t"] >= n * 13 * 1.3
    assert lay["height"] - lay["margin"]["t"] - lay["margin"]["b"] == 460 - 20 - 90


def heat(n, template="%{z:.2f}"):
    z = [[round(0.1 * (i + j) % 1, 2) for j in range(n)] for i in range(n)]
    return {
        "data": [{"type": "heatmap", "z": z, "xaxis": "x", "yaxis": "y", "texttemplate": template,
                  "textfont": {"size": 11}},
                 {"type": "heatmap", "z": z, "xaxis": "x2", "yaxis": "y2",
                  "texttemplate": template, "colorbar": {"x": 0.95}}],
        "layout": {"height": 430, "margin": {"l": 70, "r": 20, "t": 80, "b": 100},
                   "xaxis": {"domain": [0, 0.43]}, "xaxis2": {"domain": [0.5, 0.93]},
                   "yaxis": {}, "yaxis2": {"anchor": "x2"}},
    }


def test_heatmap_numbers_fit_their_cells_or_are_left_out():
    # 8 x 8 stacked at 358 px: the colour bar goes (the cells print the numbers), and cells
    # of (358 - 62 - 14) / 8 = 35 px hold "0.00" at the 11 px asked for.
    out = fit_figure(heat(8), NARROW_PX)
    t = out["data"][0]
    assert t["texttemplate"] == "%{z:.2f}"
    assert out["layout"]["margin"]["r"] == 14 and out["data"][1]["showscale"] is False
    size = t.get("textfont", {}).get("size", 11)
    cell = (NARROW_PX - out["layout"]["margin"]["l"] - out["layout"]["margin"]["r"]) / 8
    assert size == 11 and pil_width("0.00", size) <= cell - 4
    # 16 x 16: cells of ~17 px cannot hold "0.00" at 9 px: the
    # numbers are left out and the colour bar, next to its (lower) panel, gives the scale.
    out16 = fit_figure(heat(16), NARROW_PX)
    assert out16["data"][0]["texttemplate"] == ""
    assert out16["data"][1]["texttemplate"] == "" and out16["data"][1]["showscale"] is True
    cb = out16["data"][1]["colorbar"]
    y0, y1 = out16["layout"]["yaxis2"]["domain"]
    assert cb["y"] == pytest.approx((y0 + y1) / 2) and cb["len"] == pytest.approx(y1 - y0)
    # Wide (688 px, side by side), 8 x 8: cells of ~32 px keep the numbers at 11 px.
    assert fit_figure(heat(8), 688)["data"][0].get("textfont", {}).get("size") == 11
    # A keep-mask's 0/1 ("%{z}") needs one character: it stays.
    mask = heat(16, "%{z}")
    mask["data"][0]["z"] = [[int(i >= j) for j in range(16)] for i in range(16)]
    assert fit_figure(mask, NARROW_PX)["data"][0]["texttemplate"] == "%{z}"


def test_fit_figure_rejects_bad_input():
    with pytest.raises(ValueError, match="width"):
        fit_figure(two_panels(), 0)
    with pytest.raises(ValueError, match="layout"):
        fit_figure({"data": []}, 358)


@pytest.mark.parametrize("width,exc", [(True, TypeError), ("400", TypeError), (None, TypeError),
                                       (math.nan, ValueError), (math.inf, ValueError),
                                       (-1, ValueError)])
def test_fit_figure_rejects_bad_width_naming_it(width, exc):
    with pytest.raises(exc, match="width"):
        fit_figure(two_panels(), width)


def test_fit_figure_accepts_numpy_widths():
    assert fit_figure(two_panels(), np.int64(358)) == fit_figure(two_panels(), 358)
    assert fit_figure(two_panels(), np.float32(688)) == fit_figure(two_panels(), 688)


@pytest.mark.parametrize("fig", [None, [], "fig"])
def test_fit_figure_rejects_non_dict_figure(fig):
    with pytest.raises(TypeError, match="fig"):
        fit_figure(fig, 358)


@pytest.mark.parametrize("data", [{"type": "bar"}, [None], ["x"]])
def test_fit_figure_rejects_data_that_is_not_trace_dicts(data):
    with pytest.raises(TypeError, match=r"fig\['data'\]"):
        fit_figure({"data": data, "layout": {}}, 358)


@pytest.mark.parametrize("z", [[[]], [[None, None]], [[1, 2], None]])
def test_fit_figure_heatmap_without_numbers_to_draw(z):
    # Empty rows, gaps only, a missing row: nothing to measure, the figure is still fitted.
    fig = heat(4)
    fig["data"][0]["z"] = z
    out = fit_figure(fig, NARROW_PX)
    assert out["data"][0]["texttemplate"] == "%{z:.2f}"


def test_fit_figure_tiny_width_keeps_ticks_sane():
    # Below the margins the plot width is floored (as unstacked figures are): the tick step
    # stays a small number, not 2 ** 1000.
    fig = two_panels()
    for ax in ("xaxis", "xaxis2"):
        fig["layout"][ax].update(range=[0, 100], dtick=1)
    for width in (1, 10):
        out = fit_figure(fig, width)
        assert out["layout"]["xaxis"]["dtick"] <= 128
        json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("args,exc,name", [
    ((None, 100), TypeError, "text"), ((5, 100), TypeError, "text"),
    (("a b c", math.nan), ValueError, "max_px"), (("a b c", "100"), TypeError, "max_px"),
    (("a b c", 100, 0), ValueError, "font_px"), (("a b c", 100, -1), ValueError, "font_px"),
    (("a b c", 100, math.nan), ValueError, "font_px"),
])
def test_wrap_html_rejects_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        wrap_html(*args)


@pytest.mark.parametrize("args,exc,name", [
    ((None, 13), TypeError, "text"), (("abc", math.nan), ValueError, "font_px"),
    (("abc", -1), ValueError, "font_px"), (("abc", True), TypeError, "font_px"),
])
def test_text_width_px_rejects_bad_input(args, exc, name):
    with pytest.raises(exc, match=name):
        text_width_px(*args)


@pytest.mark.parametrize("layout", [None, "title", ["xaxis"]])
def test_title_text_and_panels_reject_non_dict_layouts(layout):
    with pytest.raises(TypeError, match="layout"):
        title_text(layout)
    with pytest.raises(TypeError, match="layout"):
        reflow.panels(layout)


# --------------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base,new",
    [
        ({"a": 1, "b": [1, 2, 3]}, {"a": 1, "b": [1, 5, 3]}),
        ({"a": 1, "b": {"c": 2}}, {"b": {"c": 3, "d": [1]}}),
        ({"annotations": [{"text": "x", "y": 1}]}, {"annotations": [{"text": "y", "y": 1},
                                                                    {"text": "z"}]}),
        ({"a": [1, 2]}, {"a": "now a string"}),
        ({"t": {"text": "a"}}, {"t": {"text": ""}, "u": None}),
        ({"a": 1, "b": 2}, {"a": None, "b": 2}),  # a value becomes null
        ([1, 2, 3], [1, None, 3]),
        ({"a": {"b": 1}}, {"a": None}),
        (5, None),
    ],
)
def test_patch_round_trip(base, new):
    p = make_patch(base, new)
    assert apply_patch(base, p) == new
    assert apply_patch(base, json.loads(json.dumps(p))) == new  # survives JSON
    assert make_patch(new, new) is None


def test_patch_never_holds_a_bare_null():
    # The page's applyPatch reads a null patch as "no change" and cannot copy a missing
    # value: a value set to (or added as) null is spelled {"$set": null}.
    assert make_patch({"a": 1}, {"a": None}) == {"a": {"$set": None}}
    assert make_patch({}, {"u": None}) == {"u": {"$set": None}}
    assert make_patch([1, 2], [1, None]) == {"$list": {"1": {"$set": None}}}


def test_patch_of_one_changed_annotation_text_is_small():
    base = {"annotations": [{"text": f"title {i}", "x": 0.5, "font": {"size": 14}}
                            for i in range(5)]}
    new = copy.deepcopy(base)
    new["annotations"][3]["text"] = "changed"
    assert make_patch(base, new) == {"annotations": {"$list": {"3": {"text": "changed"}}}}


def test_slanted_ticks_that_collide_on_a_phone_get_steeper_and_the_panel_below_moves():
    # Two panels in one column (the referent explorer's shape), 13 slanted category labels.
    labels = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because",
              "it", "was", "tired"]
    axis = {"tickangle": -40, "ticktext": labels, "tickvals": list(range(13))}
    fig = {
        "data": [{"type": "bar", "y": [0.1] * 13, "xaxis": "x", "yaxis": "y"},
                 {"type": "bar", "y": [0.1] * 13, "xaxis": "x2", "yaxis": "y2"}],
        "layout": {
            "height": 710, "margin": {"l": 70, "r": 20, "t": 110, "b": 70},
            "xaxis": dict(axis, anchor="y"), "xaxis2": dict(axis, anchor="y2"),
            "yaxis": {"anchor": "x", "domain": [0.62, 1.0]},
            "yaxis2": {"anchor": "x2", "domain": [0.0, 0.38]},
            "annotations": [{"text": "second sentence", "x": 0.0, "y": 0.38, "xref": "paper",
                             "yref": "paper", "xanchor": "left", "yanchor": "bottom"}],
        },
    }
    wide = fit_figure(fig, 688)["layout"]
    assert wide["xaxis"]["tickangle"] == -40  # 41 px per label at 688 px is enough
    narrow = fit_figure(fig, NARROW_PX)["layout"]
    # (358 - 90) / 13 = 20.6 px per label; at 13 px a line is 16.9 px, so the slant must be
    # at least asin(16.9 / 20.6) = 55 degrees: the first stop that fits is 60.
    assert narrow["xaxis"]["tickangle"] == -60
    # The lower panel's top moves down by what the upper ticks gained, and its title with it.
    top = narrow["yaxis2"]["domain"][1]
    assert top < 0.38 and narrow["annotations"][0]["y"] == pytest.approx(top)


def ticks_fig(labels, angle, width_frac=1.0):
    axis = {"tickangle": angle, "ticktext": labels, "tickvals": list(range(len(labels))),
            "anchor": "y", "domain": [0.0, width_frac]}
    return {"data": [{"type": "bar", "y": [0.1] * len(labels)}],
            "layout": {"height": 400, "margin": {"l": 70, "r": 20, "t": 40, "b": 70},
                       "xaxis": axis, "yaxis": {"anchor": "x"}}}


def test_upright_ticks_still_too_close_get_a_smaller_font():
    # 17 tokens upright in (358 - 90) px: 15.8 px apart, less than a 13 px line (16.9 px).
    labels = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because",
              "it", "was", "too", "tired", ".", "[SEP]", "x"]
    ax = fit_figure(ticks_fig(labels, -90), NARROW_PX)["layout"]["xaxis"]
    spacing = (NARROW_PX - 90) / 17
    size = ax["tickfont"]["size"]
    assert size * 1.3 <= spacing and size >= reflow.MIN_CELL_FONT
    assert ax["ticktext"] == labels  # every label kept
    # At 688 px they fit at 13 px: nothing changes.
    assert "tickfont" not in fit_figure(ticks_fig(labels, -90), 688)["layout"]["xaxis"]


def test_level_ticks_wider_than_their_spacing_shrink_then_thin_out():
    # The attention map's character ticks (angle 0): each label must fit its own column.
    plot_w = NARROW_PX - 90
    chars = list("The quick brown fox jumps over the lazy dog, again ")  # 51 characters
    ax = fit_figure(ticks_fig(chars, 0), NARROW_PX)["layout"]["xaxis"]
    # 5.3 px per character is too little even at the smallest font: every k-th label stays.
    step = ax["tickvals"][1] - ax["tickvals"][0]
    assert step > 1 and ax["tickvals"] == list(range(len(chars)))[::step]
    assert ax["ticktext"] == chars[::step]
    assert ax["tickfont"]["size"] == reflow.MIN_CELL_FONT
    widest = max(text_width_px(c, reflow.MIN_CELL_FONT) for c in chars)
    assert widest + 1 <= plot_w / len(chars) * step
    # Few enough characters in a narrow panel: all of them stay, at a smaller font.
    word = list("attention")
    ax = fit_figure(ticks_fig(word, 0, width_frac=0.3), NARROW_PX)["layout"]["xaxis"]
    assert ax["ticktext"] == word
    size = ax["tickfont"]["size"]
    assert reflow.MIN_CELL_FONT <= size < 13
    assert max(text_width_px(c, size) for c in word) + 1 <= plot_w * 0.3 / len(word)


def test_centred_caption_wraps_to_the_room_on_its_nearer_side():
    # Centred on the plot area (x = 0.5), which the 70 px left margin shifts right: a line may
    # be twice as wide as the distance to the right edge, not the figure's width.
    text = "orange outline: this step's tile · grey: computed in earlier steps · blank: not yet"
    fig = {"data": [{"type": "scatter", "x": [0, 1], "y": [0, 1]}],
           "layout": {"height": 400, "margin": {"l": 70, "r": 20, "t": 40, "b": 60},
                      "xaxis": {"anchor": "y"}, "yaxis": {"anchor": "x"},
                      "annotations": [{"text": text, "x": 0.5, "y": -0.2, "xref": "paper",
                                       "yref": "paper", "xanchor": "center",
                                       "yanchor": "top"}]}}
    width = 520  # the text (476 px) fits the figure less a border, not the room on the right
    out = fit_figure(fig, width)["layout"]["annotations"][0]["text"]
    centre = 70 + 0.5 * (width - 90)
    room = 2 * min(centre, width - centre)
    lines = re.split(r"<br>", out)
    assert len(lines) >= 2
    assert all(text_width_px(line, 13) <= room - 8 + 1e-6 for line in lines), lines


def test_stacked_figure_keeps_a_container_legend_below_the_last_panel():
    from attnbook import viz

    fig = two_panels()
    fig["layout"]["legend"] = viz.legend_below()
    lay = fit_figure(fig, NARROW_PX)["layout"]
    assert lay["legend"]["yref"] == "paper" and lay["legend"]["y"] < 0
    assert lay["legend"]["yanchor"] == "top"
    # The wide figure keeps it where viz put it: plotly reserves its height under the axes.
    assert fit_figure(fig, 688)["layout"]["legend"] == viz.legend_below()


def test_stacked_panels_make_room_for_two_line_tick_labels():
    plain = fit_figure(two_panels(), NARROW_PX)["layout"]
    fig = two_panels()
    fig["layout"]["xaxis"].update(tickvals=[0, 1], ticktext=["0<br>pad", "1<br>pad"])
    tall = fit_figure(fig, NARROW_PX)["layout"]

    def gap_px(lay):
        paper = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
        return (lay["yaxis"]["domain"][0] - lay["yaxis2"]["domain"][1]) * paper

    assert gap_px(tall) == pytest.approx(gap_px(plain) + 13 * 1.3, abs=1.5)


def test_fit_figure_leaves_typed_tick_arrays_alone_rather_than_misread_them():
    # plotly 6 writes NumPy tick lists as {"dtype", "bdata"}; fit_figure reads plain lists
    # only (the explorers pass it plain JSON) and must not slice the dict as if it were one.
    import plotly.graph_objects as go

    labels = [f"token{i}" for i in range(30)]
    fig = go.Figure(go.Bar(x=np.arange(30), y=np.ones(30)),
                    layout=dict(xaxis=dict(tickvals=np.arange(30), ticktext=labels,
                                           tickangle=-90, anchor="y"),
                                yaxis=dict(anchor="x"), height=400,
                                margin=dict(l=70, r=20, t=40, b=70)))
    before = fig.to_plotly_json()["layout"]["xaxis"]
    ax = fit_figure(fig.to_plotly_json(), NARROW_PX)["layout"]["xaxis"]
    assert ax["tickvals"] == before["tickvals"] and list(ax["ticktext"]) == labels
    # The same axis as plain lists is fitted: every k-th token at 9 px.
    plain = fig.to_plotly_json()
    plain["layout"]["xaxis"]["tickvals"] = list(range(30))
    ax = fit_figure(plain, NARROW_PX)["layout"]["xaxis"]
    step = ax["tickvals"][1] - ax["tickvals"][0]
    assert ax["tickvals"] == list(range(30))[::step] and ax["ticktext"] == labels[::step]


def test_a_container_legend_is_not_moved_in_container_coordinates():
    from attnbook import viz

    fig = two_panels()
    fig["layout"]["legend"] = viz.legend_below(y=1.0, yanchor="bottom")
    fig["layout"]["title"] = {"text": "a title"}
    assert fit_figure(fig, 688)["layout"]["legend"]["y"] == 1.0
