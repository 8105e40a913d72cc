"""Tests of the √d_k explorer (attnbook.explorers.scaling) without a browser.

The live path is driven as a reader would: set a control's ``value`` and read the
``FigureWidget``'s data. Expected values come from independent calls to the library
(``score_samples``, ``saturation_stats``) with the documented seeds, binned here — never from
the explorer's own cache. The static path is checked by parsing the JSON embedded in the
explorer's ``text/html``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

import panel_checks  # noqa: E402
from attnbook import viz  # noqa: E402
from attnbook.explorers import scaling  # noqa: E402
from attnbook.scaling import saturation_stats, scaling_data, score_samples  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import assert_speaks_chinese, embedded_spec, static_frame  # noqa: E402

# Small sample counts keep these tests fast; the defaults are exercised by the size test.
SMALL = dict(n_samples=400, n_draws=60, seed=3)


def small_scaling(**kwargs):
    return scaling.scaling_explorer(**{**SMALL, **kwargs})


def expected_histogram(d_k, scaled, n_samples, seed, n_bins=41):
    """Reference histogram: an independent draw of the same scores, binned here."""
    s = score_samples(d_k, n_samples, scaled=scaled, rng=seed)
    m = np.abs(s).max()
    density, edges = np.histogram(s, bins=np.linspace(-m, m, n_bins + 1), density=True)
    return s, (edges[:-1] + edges[1:]) / 2, density


# ------------------------------------------------------------------------------------------
# Scaling explorer: live
# ------------------------------------------------------------------------------------------


def test_scaling_live_d_k_slider_recomputes():
    ex = small_scaling()
    fig = ex.figure
    assert ex.controls["d_k"].value == 64
    before = np.array(fig.data[2].y)
    ex.controls["d_k"].value = 256
    # Softmax panel: an independent saturation_stats call with the documented seed (seed + 1).
    ref = saturation_stats(256, 16, SMALL["n_draws"], scaled=True, rng=SMALL["seed"] + 1)
    after = np.array(fig.data[2].y)
    assert not np.allclose(before, after), "the figure did not change when d_k changed"
    assert_close(after, ref.mean_sorted_weights, atol=1e-12, rtol=1e-12)
    assert_close(fig.data[2].meta["mean_max_weight"], ref.mean_max_weight, atol=1e-12, rtol=0)
    assert_close(fig.data[2].meta["mean_entropy"], ref.mean_entropy, atol=1e-12, rtol=0)
    # Histogram panel: the same scores, drawn again here and binned with np.histogram.
    s, centres, density = expected_histogram(256, True, SMALL["n_samples"], SMALL["seed"])
    assert_close(np.array(fig.data[0].x), centres, atol=1e-12, rtol=1e-12)
    assert_close(np.array(fig.data[0].y), density, atol=1e-12, rtol=1e-12)
    assert_close(fig.data[0].meta["variance"], np.var(s, ddof=1), atol=0, rtol=1e-12)
    assert fig.data[0].meta["expected_variance"] == 1.0
    # The histogram integrates to 1 (a property of a density, derived by hand).
    assert math.isclose(float(np.sum(fig.data[0].y) * fig.data[0].width), 1.0, rel_tol=1e-9)
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "d<sub>k</sub> = 256" in texts
    assert f"mean max weight {ref.mean_max_weight:.3g}" in texts


def test_scaling_live_toggle_off_gives_variance_d_k():
    ex = small_scaling()
    ex.controls["d_k"].value = 256
    ex.controls["scaled"].value = False
    fig = ex.figure
    s = score_samples(256, SMALL["n_samples"], scaled=False, rng=SMALL["seed"])
    assert fig.data[0].meta["expected_variance"] == 256.0
    assert_close(fig.data[0].meta["variance"], np.var(s, ddof=1), atol=0, rtol=1e-12)
    # Statistical check against the theory (Var(q.k) = d_k): within 5 standard errors.
    se = 256 * math.sqrt(2 / SMALL["n_samples"])
    assert abs(fig.data[0].meta["variance"] - 256) < 5 * se
    ref = saturation_stats(256, 16, SMALL["n_draws"], scaled=False, rng=SMALL["seed"] + 1)
    assert_close(np.array(fig.data[2].y), ref.mean_sorted_weights, atol=1e-12, rtol=1e-12)
    # Unscaled d_k = 256 saturates: the largest weight dominates (hand bound, not a snapshot).
    assert fig.data[2].meta["mean_max_weight"] > 0.8
    # The expected-density curve is N(0, 256): its peak is 1/sqrt(2 pi 256).
    assert_close(max(fig.data[1].y), 1 / math.sqrt(2 * math.pi * 256), atol=0, rtol=1e-3)


def test_scaling_live_n_keys_slider():
    ex = small_scaling()
    ex.controls["n_keys"].value = 4
    fig = ex.figure
    ref = saturation_stats(64, 4, SMALL["n_draws"], scaled=True, rng=SMALL["seed"] + 1)
    assert_close(np.array(fig.data[2].y), ref.mean_sorted_weights, atol=1e-12, rtol=1e-12)
    assert list(fig.data[2].x) == [1, 2, 3, 4]
    assert_close(np.array(fig.data[3].y), [0.25, 0.25], atol=0, rtol=0)
    assert_close(float(np.sum(fig.data[2].y)), 1.0, atol=1e-12, rtol=0)


def test_scaling_controls_and_titles_name_the_key_count_S():
    # Issue 10, one meaning per symbol (appendix/notation.md): S is the number of keys; chapter 3
    # uses n for a sample count, so the explorer must not call the keys n.
    ex = small_scaling(n_keys=8)
    spec = ex._spec("n_keys")
    assert (spec.label, spec.plain_label) == ("keys S", "keys S")
    assert ex.controls["n_keys"].description == "keys S"
    fig = ex.figure
    titles = [a.text.replace("<br>", " ") for a in fig.layout.annotations]  # wrapped titles
    assert "Softmax weights of one query over S = 8 keys" in titles
    assert fig.data[3].name == "uniform 1/S = 0.125"
    assert not any("n =" in t or "1/n" in t for t in titles + [fig.data[3].name])


def test_static_scaling_frames_match_library():
    ex = scaling.scaling_explorer(d_k_values=(1, 16, 256), n_keys_values=(4, 16), d_k=16, **SMALL)
    html = ex.static_html()
    spec = embedded_spec(html)
    assert spec["strides"] == [4, 2, 1]
    assert len(spec["frame_of"]) == 3 * 2 * 2
    for d_k, scaled, n in [(256, False, 4), (1, True, 16)]:
        fr = static_frame(spec, {"d_k": d_k, "scaled": scaled, "n_keys": n})
        ref = saturation_stats(d_k, n, SMALL["n_draws"], scaled=scaled, rng=SMALL["seed"] + 1)
        # Floats are stored with 4 significant digits.
        assert_close(fr["data"][2]["y"], ref.mean_sorted_weights, atol=1e-12, rtol=1e-3)
        s, centres, density = expected_histogram(d_k, scaled, SMALL["n_samples"], SMALL["seed"])
        assert_close(fr["data"][0]["y"], density, atol=1e-12, rtol=1e-3)
        assert_close(fr["data"][0]["x"], centres, atol=1e-9, rtol=1e-3)
        assert_close(fr["data"][0]["meta"]["variance"], np.var(s, ddof=1), atol=0, rtol=1e-3)
        assert fr["data"][0]["meta"]["expected_variance"] == (1 if scaled else d_k)
        # Fixed score axis per mode: 4 sqrt(max d_k) unscaled, 4 (four sigma of N(0, 1)) scaled.
        assert fr["layout"]["xaxis"]["range"] == ([-4, 4] if scaled else [-64, 64])
    # Different settings give different frames; the toggle is part of the grid.
    f1 = static_frame(spec, {"d_k": 256, "scaled": True, "n_keys": 16})
    f2 = static_frame(spec, {"d_k": 256, "scaled": False, "n_keys": 16})
    assert f1["data"][0] != f2["data"][0]


def test_every_setting_speaks_chinese():
    # Legends, panel titles, statistics boxes, hover text and controls of all 110 settings.
    assert_speaks_chinese(small_scaling())


def test_chinese_figure_has_the_english_figures_numbers_and_chinese_labels():
    # One computation, drawn twice: the data are the same in both languages, the words are not.
    data = scaling_data(16, 8, scaled=False, n_samples=400, n_draws=60, seed=3)
    en = scaling.draw_scaling(data, language="en")
    zh = scaling.draw_scaling(data, language="zh_CN")
    for a, b in zip(en.data, zh.data):
        assert_close(np.array(a.y), np.array(b.y), atol=0, rtol=0)
    assert zh.data[0].name == "实测分数" and en.data[0].name == "measured scores"
    assert zh.data[1].name == "理论 N(0, d<sub>k</sub> = 16)"
    # ln 8 = 2.079 (by hand), S = 8 keys, 60 draws averaged.
    box = zh.layout.annotations[3].text
    assert "ln(8) = 2.08" in box and "60 次抽样的平均" in box
    assert zh.layout.annotations[1].text == "单个查询在 S = 8 个键上的 softmax 权重"
    assert zh.layout.xaxis.title.text == "分数" and zh.layout.yaxis2.title.text == "平均注意力权重"


def test_one_key_and_one_draw_read_in_the_singular():
    fig = scaling.scaling_figure(4, True, 1, n_samples=50, n_draws=1, language="en")
    assert fig.layout.annotations[1].text == "Softmax weights of one query over S = 1 key"
    assert fig.layout.annotations[3].text.endswith("mean of 1 draw")
    assert list(fig.data[2].y) == [1.0]  # one key takes all the weight


@pytest.mark.parametrize("d_k,scaled", [(1, False), (1, True), (64, True), (1024, False)])
@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_scaling_statistics_box_has_room_above_the_histogram(d_k, scaled, language):
    # Issue 10: the box (3 lines at 13 px, from 3 % below the top) covered a bar at 1280 px.
    # The panel's height in px is read from the figure drawn for the column and for the phone;
    # every bar and the expected curve must stay under the box there.
    x_range = 4.0 if scaled else 4 * 1024**0.5  # as the explorer fixes it
    data = scaling_data(d_k, 16, scaled=scaled, n_samples=400, n_draws=20, seed=0)
    for width in (viz.COLUMN_PX, viz.PHONE_PX):
        fig = scaling.draw_scaling(data, x_range=x_range, width=width, language=language)
        top = fig.layout.yaxis.range[1]
        box = fig.layout.annotations[2]
        assert box.yref == "y domain" and box.yanchor == "top"
        _, plot_h = panel_checks.plot_px(fig, width)
        (_, (y0, y1)) = panel_checks.panels(fig)["x"]
        panel_px = (y1 - y0) * plot_h
        box_px = (box.text.count("<br>") + 1) * 13 * 1.3 + 4  # lines and the box's padding
        free = box.y - box_px / panel_px  # fraction of the axis under the box
        assert max(fig.data[0].y) <= free * top
        curve = np.array(fig.data[1].y)[np.abs(np.array(fig.data[1].x)) <= x_range]
        assert curve.max() <= free * top


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: scaling.scaling_figure(x_range=0), ValueError, "x_range"),
        (lambda: scaling.scaling_figure(x_range="4"), TypeError, "x_range"),
        # Were plotly's "Invalid value ... for the 'height' property", naming no argument.
        (lambda: scaling.scaling_figure(height=-1), ValueError, "height"),
        (lambda: scaling.scaling_figure(height="x"), TypeError, "height"),
        (lambda: scaling.scaling_figure(n_samples=1), ValueError, "n_samples"),
        (lambda: scaling.scaling_figure(language="fr"), ValueError, "language"),
    ],
)
def test_figure_checks_its_arguments(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(d_k=48), ValueError, "d_k"),
        (dict(d_k=0), ValueError, "d_k"),
        (dict(d_k=True), ValueError, "d_k"),
        (dict(n_keys=5), ValueError, "n_keys"),
        (dict(scaled="yes"), TypeError, "scaled"),
        (dict(scaled=1), TypeError, "scaled"),
        (dict(d_k_values=(4, 2, 8), d_k=4), ValueError, "d_k_values"),
        (dict(d_k_values=(0, 1)), ValueError, "d_k_values"),
        (dict(d_k_values=(1, 2.5)), TypeError, "d_k_values"),
        (dict(n_samples=0), ValueError, "n_samples"),
        (dict(n_samples=1), ValueError, "n_samples"),
        (dict(n_draws=2.5), TypeError, "n_draws"),
        (dict(seed=-1), ValueError, "seed must be >= 0, got -1"),
        (dict(seed="a"), TypeError, "seed must be an integer, got 'a'"),
        (dict(seed=None), TypeError, "seed must be an integer, got None"),
    ],
)
def test_bad_options_raise_naming_the_argument(kwargs, exc, name):
    # A seed of None would draw a different figure on every build.
    with pytest.raises(exc, match=name):
        scaling.scaling_explorer(**kwargs)


# ------------------------------------------------------------------------------------------
# Layout for the width it is drawn at (issue 20): plotly's grid, no hand-placed panels
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("d_k,scaled,n_keys", [(1, False, 4), (1024, False, 64), (64, True, 16)])
def test_figure_is_laid_out_for_the_column_and_the_phone(language, d_k, scaled, n_keys):
    data = scaling_data(d_k, n_keys, scaled=scaled, n_samples=200, n_draws=1000, seed=1)
    wide = scaling.draw_scaling(data, language=language, width=viz.COLUMN_PX)
    phone = scaling.draw_scaling(data, language=language, width=viz.PHONE_PX)
    panel_checks.assert_same_traces(wide, phone)
    panel_checks.assert_side_by_side(wide)
    panel_checks.assert_stacked(phone)
    for fig, width in ((wide, viz.COLUMN_PX), (phone, viz.PHONE_PX)):
        panel_checks.assert_panels_apart(fig)
        panel_checks.assert_titles_fit(fig, width, 2)
        panel_checks.assert_legend_in_container(fig)
        # The statistics boxes: in their own panel's coordinates, as wide as it at most.
        samples, draws = fig.layout.annotations[2:4]
        assert (samples.xref, samples.yref) == ("x domain", "y domain")
        assert (draws.xref, draws.yref) == ("x2 domain", "y2 domain")
        for box in (samples, draws):
            panel_checks.assert_text_fits_its_panel(fig, width, box)
        assert "1000" in draws.text.replace("<br>", " ")
        assert not any(a.xref == "paper" for a in fig.layout.annotations[2:])


def test_no_panel_is_placed_by_hand():
    # Each panel's domain is make_subplots', the same at every setting of the explorer.
    figs = [
        scaling.scaling_figure(d, s, n, n_samples=50, n_draws=5)
        for d, s, n in [(1, True, 4), (1024, False, 64)]
    ]
    assert [panel_checks.panels(f) for f in figs[:1]] == [panel_checks.panels(f) for f in figs[1:]]
    ex = small_scaling(d_k_values=(1, 4), n_keys_values=(4,), d_k=1, n_keys=4)
    assert ex.draws_for_width
    spec = embedded_spec(ex.static_html())
    narrow = static_frame(spec, {"d_k": 4, "scaled": True, "n_keys": 4}, narrow=True)
    wide = static_frame(spec, {"d_k": 4, "scaled": True, "n_keys": 4})
    assert narrow["layout"]["xaxis"]["domain"] == narrow["layout"]["xaxis2"]["domain"]
    assert wide["layout"]["xaxis"]["domain"][1] < wide["layout"]["xaxis2"]["domain"][0]


@pytest.mark.parametrize(
    "width, exc", [(0, ValueError), (40, ValueError), ("688", TypeError), (688.0, TypeError)]
)
def test_a_bad_width_is_named(width, exc):
    # 40 px leaves no room for a panel after the margins.
    with pytest.raises(exc, match="width"):
        scaling.draw_scaling(scaling_data(4, 4, n_samples=20, n_draws=2, seed=0), width=width)
