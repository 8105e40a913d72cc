"""Tests of the temperature explorer (attnbook.explorers.temperature) without a browser.

Expected values are independent of the explorer: the limits T -> 0 and T -> inf worked out by
hand (one-hot: entropy 0, J = 0; uniform: entropy ln S, ||J||_F = sqrt(S - 1) / S), and a
float64 formula for every other T — the softmax written out, the entropy as -sum p ln p, and
||J||_F from the entries J_ij = p_i (delta_ij - p_j) summed in a Python loop — never the
library's softmax, entropy or softmax_jacobian. The sweep itself lives in attnbook.scaling and
is read here at its first path, attnbook.explorers.temperature (chapter 4 imports it there).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

import panel_checks  # noqa: E402
from attnbook import scaling, viz  # noqa: E402
from attnbook.explorers import temperature as tx  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import (  # noqa: E402
    assert_speaks_chinese,
    embedded_spec,
    live_caption,
    static_frame,
    title_text,
    unmoved,
)

Z2 = np.array([1.0, 4.0, 0.5, 0.2])  # chapter 2's scores
T_MIN = tx.T_VALUES[0]


def reference(z, T):
    """Float64 formula: weights, entropy (nats) and ||diag(p) - p p^T||_F at temperature T."""
    x = np.asarray(z, dtype=np.float64) / T
    e = np.exp(x - x.max())
    p = e / e.sum()
    nz = p[p > 0]
    h = float(-(nz * np.log(nz)).sum())
    sq = sum((p[i] * ((i == j) - p[j])) ** 2 for i in range(len(p)) for j in range(len(p)))
    return p, h, math.sqrt(sq)


def test_frobenius_formula_of_the_reference_by_hand():
    # Two keys at 1/2: J = [[1/4, -1/4], [-1/4, 1/4]], ||J||_F = 1/2.
    _, h, j = reference([0.0, 0.0], 1.0)
    assert math.isclose(j, 0.5, rel_tol=1e-15) and math.isclose(h, math.log(2), rel_tol=1e-15)


def test_sweep_limits_by_hand():
    for z in (Z2, tx.temperature_scores("scaled")):
        S = len(z)
        hot = tx.temperature_sweep(z, [1e6])
        assert_close(hot.weights[0], np.full(S, 1 / S), atol=1e-5, rtol=0)
        assert abs(hot.entropy[0] - math.log(S)) < 1e-9
        assert abs(hot.jacobian_norm[0] - math.sqrt(S - 1) / S) < 1e-6
        cold = tx.temperature_sweep(z, [1e-3])
        one_hot = np.zeros(S)
        one_hot[np.argmax(z)] = 1.0
        assert_close(cold.weights[0], one_hot, atol=1e-12, rtol=0)
        assert cold.entropy[0] < 1e-9 and cold.jacobian_norm[0] < 1e-9


def test_sweep_matches_the_float64_formula():
    temps = np.geomspace(0.05, 40, 17)
    for z in (Z2, tx.temperature_scores("unscaled")):
        sw = tx.temperature_sweep(z, temps)
        assert sw.weights.shape == (17, len(z))
        for i, T in enumerate(temps):
            p, h, j = reference(z, T)
            assert_close(sw.weights[i], p, atol=1e-13, rtol=1e-12)
            assert_close(sw.entropy[i], h, atol=1e-12, rtol=1e-12)
            assert_close(sw.jacobian_norm[i], j, atol=1e-12, rtol=1e-12)


def test_score_jacobian_is_the_derivative_with_respect_to_z():
    # d softmax(z / T) / dz by central finite differences of the float64 formula, column by
    # column: its Frobenius norm is score_jacobian_norm, and it tends to 0 as T grows.
    z, h = tx.temperature_scores("scaled"), 1e-6
    temps = [0.25, 1.0, 4.0, 32.0]
    sw = tx.temperature_sweep(z, temps)
    for i, T in enumerate(temps):
        cols = []
        for j in range(len(z)):
            e = np.zeros(len(z))
            e[j] = h
            cols.append((reference(z + e, T)[0] - reference(z - e, T)[0]) / (2 * h))
        fd = math.sqrt(sum(float(c @ c) for c in cols))
        assert_close(sw.score_jacobian_norm[i], fd, atol=1e-8, rtol=1e-6)
    # Hot: the weights are nearly uniform, ||J||_F near sqrt(S - 1) / S, and divided by T.
    hot = tx.temperature_sweep(z, [1e6])
    assert abs(hot.score_jacobian_norm[0] - math.sqrt(15) / 16 / 1e6) < 1e-11


def test_unscaled_scores_at_T_8_equal_scaled_scores_at_T_1():
    # The unscaled set is the scaled one times sqrt(64): dividing by T = 8 undoes it.
    a = tx.temperature_sweep(tx.temperature_scores("unscaled"), [8.0])
    b = tx.temperature_sweep(tx.temperature_scores("scaled"), [1.0])
    assert_close(a.weights, b.weights, atol=1e-15, rtol=1e-14)
    z = np.random.default_rng(0).standard_normal(16)
    assert_close(tx.temperature_scores("scaled"), z, atol=0, rtol=0)


def test_live_slider_recomputes():
    ex = tx.temperature_explorer()
    fig = ex.figure
    assert ex.values == {"T": 1.0, "score_set": "chapter 2"}
    p, h, j = reference(Z2, 1.0)
    assert_close(np.array(fig.data[0].y), p, atol=1e-12, rtol=1e-12)
    T = tx.T_VALUES[4]  # 1/8
    ex.controls["T"].value = T
    p, h, j = reference(Z2, T)
    assert_close(np.array(fig.data[0].y), p, atol=1e-12, rtol=1e-12)
    assert_close(fig.data[3].y[0], h, atol=1e-12, rtol=1e-12)
    assert_close(fig.data[6].y[0], j, atol=1e-12, rtol=1e-12)
    assert fig.data[3].x[0] == T and fig.data[6].x[0] == T
    assert_close(fig.data[4].y[0], math.log(4), atol=0, rtol=1e-15)  # the ln S line
    assert_close(fig.data[7].y[0], math.sqrt(3) / 4, atol=0, rtol=1e-15)
    ex.controls["score_set"].value = "scaled"
    assert len(fig.data[0].y) == 16
    assert_close(fig.data[4].y[0], math.log(16), atol=0, rtol=1e-15)


def test_curves_span_the_slider_range_and_saturate_at_both_ends():
    fig = tx.temperature_figure(1.0, "chapter 2")
    x = np.array(fig.data[2].x)
    assert math.isclose(x[0], tx.T_VALUES[0]) and math.isclose(x[-1], tx.T_VALUES[-1])
    ent, jac = np.array(fig.data[2].y), np.array(fig.data[5].y)
    assert ent[0] < 0.01 and ent[-1] > 0.99 * math.log(4)
    assert np.all(np.diff(ent) > 0)  # entropy grows with T for distinct scores
    assert jac[0] < 0.01
    # 16 scores: the Jacobian norm is not largest at uniform weights (sqrt(15)/16, by hand)
    # but at a T in between, where a few keys share the weight.
    jac16 = np.array(tx.temperature_figure(1.0, "scaled").data[5].y)
    peak = int(np.argmax(jac16))
    assert 0 < peak < len(jac16) - 1
    assert jac16[peak] > 1.2 * math.sqrt(15) / 16


@pytest.fixture(scope="module")
def default_explorer():
    """The default explorer, shared by the tests that only read it: its static HTML (111
    combinations) takes seconds and is computed once. Its controls must not be moved."""
    yield from unmoved(tx.temperature_explorer())


def test_static_frames_hold_the_library_values(default_explorer):
    spec = embedded_spec(default_explorer.static_html())
    assert len(spec["frame_of"]) == len(tx.T_VALUES) * len(tx.SCORE_SETS) == 111
    for T, name in ((0.25, "chapter 2"), (4.0, "scaled"), (8.0, "unscaled")):
        frame = static_frame(spec, {"T": T, "score_set": name})
        p, h, j = reference(tx.temperature_scores(name), T)
        assert_close(np.array(frame["data"][0]["y"]), p, atol=0, rtol=1e-3)  # 4 digits kept
        assert frame["data"][3]["y"][0] == pytest.approx(h, rel=1e-3)
        assert frame["data"][6]["y"][0] == pytest.approx(j, rel=1e-3)
    a = static_frame(spec, {"T": 8.0, "score_set": "unscaled"})
    b = static_frame(spec, {"T": 1.0, "score_set": "scaled"})
    assert a["data"][0]["y"] == b["data"][0]["y"]


def test_labels_use_the_books_notation(default_explorer):
    ex = default_explorer
    fig = ex.figure
    # The two grey reference lines have their own legend entries and line styles: the
    # weights panel's 1/S and the Jacobian panel's value at uniform weights.
    assert fig.data[1].name == "uniform weights (1/S)" and fig.data[1].showlegend is not False
    assert fig.data[7].name == "‖J‖ at uniform weights" and fig.data[7].showlegend is not False
    assert fig.data[1].line.dash != fig.data[7].line.dash
    layout = fig.layout.to_plotly_json()
    assert layout["xaxis2"]["title"]["text"] == "temperature T"
    assert ex.controls["T"].description == "temperature T"
    assert title_text(layout) == ""  # the title is the caption above the plot
    assert "of ln 4 = 1.386 nats" in live_caption(ex)
    assert '-T">temperature T</label>' in ex.static_html()


def test_the_sweep_lives_in_attnbook_scaling_and_is_read_at_its_first_path():
    assert tx.temperature_sweep is scaling.temperature_sweep
    assert tx.temperature_scores is scaling.temperature_scores
    assert tx.TemperatureSweep is scaling.TemperatureSweep
    assert tuple(tx.SCORE_SETS) == scaling.TEMPERATURE_SCORE_SETS


def test_every_setting_speaks_chinese(default_explorer):
    assert_speaks_chinese(default_explorer)


def test_chinese_labels_and_the_same_numbers():
    # One computation drawn in both languages: equal data, Chinese words.
    data = tx.temperature_data(0.5, "chapter 2")
    en = tx.draw_temperature(data, language="en")
    zh = tx.draw_temperature(data, language="zh_CN")
    for a, b in zip(en.data, zh.data):
        assert_close(np.array(a.y, dtype=float), np.array(b.y, dtype=float), atol=0, rtol=0)
    p, h, j = reference(Z2, 0.5)
    # ln 4 = 1.386 (by hand); the title carries the weights' largest, entropy and ||J||_F.
    assert zh.layout.title.text == (
        f"T = 0.5：最大权重 {p.max():.3f}，熵 {h:.3f}（上限 ln(4) = 1.386 奈特），"
        f"‖J‖<sub>F</sub> = {j:.3f}"
    )
    assert zh.data[4].name == "熵的上限 ln(S)" and zh.layout.xaxis2.title.text == "温度 T"
    assert zh.data[0].hovertemplate.startswith("键 %{x}：分数")


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: tx.temperature_figure(language="fr"), ValueError, "language"),
        (lambda: tx.temperature_data(1.0, "mine"), ValueError, "score_set"),
        (lambda: tx.temperature_explorer(T=3.0), ValueError, "T"),
        (lambda: tx.temperature_explorer(score_set="mine"), ValueError, "score_set"),
        (lambda: tx.temperature_figure(T=0.0), ValueError, "T"),
        (lambda: tx.temperature_figure(T="1"), TypeError, "T"),
        (lambda: tx.temperature_figure(t_range=(2.0, 1.0)), ValueError, "t_range"),
        (lambda: tx.temperature_figure(t_range=(0.0, 1.0)), ValueError, "t_range"),
        (lambda: tx.temperature_figure(height=2.5), TypeError, "height"),
        (lambda: tx.temperature_sweep([1.0, 2.0], [1.0, -1.0]), ValueError, "temperatures"),
        (lambda: tx.temperature_sweep([1.0, np.inf], [1.0]), ValueError, "scores"),
        (lambda: tx.temperature_sweep([], [1.0]), ValueError, "scores"),
        (lambda: tx.temperature_sweep([[1.0]], [1.0]), ValueError, "scores"),
        (lambda: tx.temperature_sweep([1.0], [[1.0]]), ValueError, "temperatures"),
        (lambda: tx.temperature_sweep(["a"], [1.0]), TypeError, "scores"),
    ],
)
def test_bad_arguments_are_named(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_tiny_and_huge_temperatures_give_a_distribution():
    # By hand: as T -> 0 the weights are one-hot on the largest score; at T = 1e-310 the
    # quotients z / T overflowed (-1 / 1e-310 = -inf for both keys) and the row came out 0,
    # or nan for mixed signs (refused with a message about an internal x).
    assert tx.temperature_sweep([-1.0, -2.0], [1e-310]).weights.tolist() == [[1.0, 0.0]]
    assert tx.temperature_sweep([3.0, 1.0, 2.0], [1e-310]).weights.tolist() == [[1, 0, 0]]
    fig = tx.temperature_figure(T=1e-310)
    assert list(fig.data[0].y) == [0.0, 1.0, 0.0, 0.0]  # chapter 2's scores, 4 the largest
    # Scores near float64's limit: z - max z = -2e308 is not representable, yet at T = 1e308
    # the quotient is -2, so the weights are 1 / (1 + e^-2) and e^-2 / (1 + e^-2).
    w = tx.temperature_sweep([1e308, -1e308], [1e308]).weights[0]
    assert_close(
        w, [1 / (1 + math.exp(-2)), math.exp(-2) / (1 + math.exp(-2))], atol=1e-15, rtol=1e-14
    )


# ------------------------------------------------------------------------------------------
# Layout for the width it is drawn at (issue 20): plotly's grid, no hand-placed panels
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("T,score_set", [(1.0, "chapter 2"), (T_MIN, "unscaled"), (32.0, "scaled")])
def test_figure_is_laid_out_for_the_column_and_the_phone(language, T, score_set):
    data = tx.temperature_data(T, score_set)
    wide = tx.draw_temperature(data, language=language, width=viz.COLUMN_PX)
    phone = tx.draw_temperature(data, language=language, width=viz.PHONE_PX)
    panel_checks.assert_same_traces(wide, phone)
    panel_checks.assert_side_by_side(wide)
    panel_checks.assert_stacked(phone)
    assert len(panel_checks.panels(phone)) == 3
    for fig, width in ((wide, viz.COLUMN_PX), (phone, viz.PHONE_PX)):
        panel_checks.assert_panels_apart(fig)
        panel_checks.assert_titles_fit(fig, width, 3)
        panel_checks.assert_title_room_after_caption(fig)
        panel_checks.assert_legend_in_container(fig)
        # Three panel titles and nothing placed on the paper by hand; the numbers are prose,
        # in the title (the caption above the plot).
        assert len(fig.layout.annotations) == 3
        assert "‖J‖<sub>F</sub> = " in fig.layout.title.text
        # Each trace is drawn in its own panel: the weights in the first, the curves against T
        # in the second and third (on a log axis).
        axes = [t.xaxis or "x" for t in fig.data]
        assert axes == ["x", "x", "x2", "x2", "x2", "x3", "x3", "x3"]
        assert fig.layout.xaxis2.type == fig.layout.xaxis3.type == "log"


def test_the_static_explorer_stores_a_stacked_phone_figure(default_explorer):
    assert default_explorer.draws_for_width
    spec = embedded_spec(default_explorer.static_html())
    narrow = static_frame(spec, {"T": 1.0, "score_set": "chapter 2"}, narrow=True)["layout"]
    wide = static_frame(spec, {"T": 1.0, "score_set": "chapter 2"})["layout"]
    assert narrow["xaxis"]["domain"] == narrow["xaxis3"]["domain"] == [0, 1]
    assert narrow["yaxis"]["domain"][0] > narrow["yaxis3"]["domain"][1]
    assert wide["xaxis"]["domain"][1] < wide["xaxis2"]["domain"][0]


@pytest.mark.parametrize(
    "width, exc", [(0, ValueError), (40, ValueError), ("688", TypeError), (688.0, TypeError)]
)
def test_a_bad_width_is_named(width, exc):
    # 40 px leaves no room for a panel after the margins.
    with pytest.raises(exc, match="width"):
        tx.draw_temperature(tx.temperature_data(1.0), width=width)
