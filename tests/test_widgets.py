"""Tests of the explorers (attnbook.widgets) and figure builders (attnbook.viz) without a browser.

The live path is driven as a reader would: set a control's ``value`` and read the
``FigureWidget``'s data. Expected values come from independent calls to the library
(``score_samples``, ``saturation_stats``, ``masks``, ``masked_softmax``) and, for the masks,
from a float64 NumPy formula written here — never from the explorer's own cache.
The static path is checked by parsing the JSON embedded in the explorer's ``text/html``.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import masks, viz, widgets  # noqa: E402
from attnbook.attention import masked_softmax  # noqa: E402
from attnbook.scaling import saturation_stats, score_samples  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, static_frame  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# Small sample counts keep these tests fast; the defaults are exercised by the size test.
SMALL = dict(n_samples=400, n_draws=60, seed=3)


def small_scaling(**kwargs):
    return widgets.scaling_explorer(**{**SMALL, **kwargs})


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


# ------------------------------------------------------------------------------------------
# Mask explorer: live
# ------------------------------------------------------------------------------------------


def reference_weights(scores, keep):
    """float64 softmax over the visible entries of each row, written out; empty rows -> 0."""
    out = np.zeros_like(scores)
    for i in range(scores.shape[0]):
        vis = np.flatnonzero(keep[i])
        if vis.size:
            e = np.exp(scores[i, vis] - scores[i, vis].max())
            out[i, vis] = e / e.sum()
    return out


def test_mask_live_causal_plus_padding():
    ex = widgets.mask_explorer(mask_type="none", n_pad=0, seed=5)
    fig = ex.figure
    L = 8
    scores = np.random.default_rng(5).standard_normal((L, L))  # the documented scores
    assert_close(np.array(fig.data[1].z), reference_weights(scores, np.ones((L, L), bool)),
                 atol=1e-12, rtol=0)
    ex.controls["mask_type"].value = "causal + padding"
    ex.controls["n_pad"].value = 3
    # Keep-mask by hand: lower triangle (query i sees j <= i) and not one of the last 3 keys.
    i, j = np.indices((L, L))
    keep = (j <= i) & (j < L - 3)
    assert_close(np.array(fig.data[0].z), keep.astype(float), atol=0, rtol=0)
    # And through the library, independently of the explorer.
    lib_keep = masks.combine_masks(
        masks.causal_mask(L), masks.padding_mask(np.array([[1] * 5 + [0] * 3]))
    )
    lib_weights = masked_softmax(scores[None, None], lib_keep)[0, 0]  # (L, S)
    z = np.array(fig.data[1].z)
    assert_close(z, lib_weights, atol=1e-12, rtol=0)
    assert_close(z, reference_weights(scores, keep), atol=1e-12, rtol=0)
    assert np.isfinite(z).all()
    assert list(fig.data[1].x)[-3:] == ["5 pad", "6 pad", "7 pad"]
    assert not ex.controls["n_pad"].disabled and ex.controls["window"].disabled


def test_mask_live_sliding_window_and_empty_rows():
    ex = widgets.mask_explorer()
    fig = ex.figure
    L = 8
    ex.controls["mask_type"].value = "sliding window"
    ex.controls["window"].value = 2
    i, j = np.indices((L, L))
    band = (j <= i) & (j > i - 2)
    assert_close(np.array(fig.data[0].z), band.astype(float), atol=0, rtol=0)
    assert ex.controls["n_pad"].disabled and not ex.controls["window"].disabled
    # Every key is padding: no query sees a key, so every weight is 0 (not 1/8, not NaN).
    ex.controls["mask_type"].value = "padding"
    ex.controls["n_pad"].value = L
    z = np.array(fig.data[1].z)
    assert np.isfinite(z).all() and (z == 0).all()
    assert all("sees no key" in t for row in fig.data[1].text for t in row)
    assert any("see no key" in a.text for a in fig.layout.annotations)


# ------------------------------------------------------------------------------------------
# Static HTML and the display bundle
# ------------------------------------------------------------------------------------------


def test_static_scaling_frames_match_library():
    ex = widgets.scaling_explorer(
        d_k_values=(1, 16, 256), n_keys_values=(4, 16), d_k=16, **SMALL
    )
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


def test_static_mask_frames_match_library_and_dedupe():
    ex = widgets.mask_explorer()
    spec = embedded_spec(ex.static_html())
    L = 8
    scores = np.random.default_rng(0).standard_normal((L, L))
    i, j = np.indices((L, L))
    for values, keep in [
        ({"mask_type": "causal", "window": 3, "n_pad": 2}, j <= i),
        ({"mask_type": "padding", "window": 3, "n_pad": 2}, np.broadcast_to(j < L - 2, (L, L))),
        ({"mask_type": "sliding window", "window": 4, "n_pad": 0}, (j <= i) & (j > i - 4)),
    ]:
        fr = static_frame(spec, values)
        assert_close(fr["data"][0]["z"], keep.astype(float), atol=0, rtol=0)
        assert_close(fr["data"][1]["z"], reference_weights(scores, keep), atol=1e-12, rtol=1e-3)
    # Controls that do not matter for a type do not multiply the frames.
    a = static_frame(spec, {"mask_type": "causal", "window": 1, "n_pad": 0})
    b = static_frame(spec, {"mask_type": "causal", "window": 8, "n_pad": 7})
    assert a == b
    assert len(spec["frame_of"]) == 5 * 8 * 9
    # none 1 + causal 1 + padding 9 + causal+padding 9 + sliding 8 = 28 distinct figures
    assert len(spec["frames"]) == 28
    flat = spec["controls"][0]["options"].index("causal") * spec["strides"][0]
    assert sorted(spec["inactive"][flat]) == ["n_pad", "window"]


def test_mimebundle_has_both_representations():
    ex = widgets.mask_explorer()
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
    other = widgets.mask_explorer()._repr_mimebundle_()["text/html"]
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert ids and not ids & set(re.findall(r'id="([^"]+)"', other))


def test_default_explorers_fit_a_page():
    # Chapter pages must stay < 2 MB; each default explorer gets well under a quarter of that.
    for ex in (widgets.scaling_explorer(), widgets.mask_explorer()):
        html = ex.static_html()
        assert len(html.encode()) < 500_000, (ex.title, len(html))
        spec = embedded_spec(html)
        assert len(spec["frame_of"]) == math.prod(len(c["options"]) for c in spec["controls"])
    ex = widgets.scaling_explorer()
    assert ex.controls["d_k"].options == tuple((str(2**i), 2**i) for i in range(11))


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


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: widgets.scaling_explorer(d_k=48), "d_k"),
        (lambda: widgets.scaling_explorer(d_k=0), "d_k"),
        (lambda: widgets.scaling_explorer(d_k=True), "d_k"),
        (lambda: widgets.scaling_explorer(n_keys=5), "n_keys"),
        (lambda: widgets.scaling_explorer(scaled="yes"), "scaled"),
        (lambda: widgets.scaling_explorer(d_k_values=(4, 2, 8), d_k=4), "d_k_values"),
        (lambda: widgets.scaling_explorer(d_k_values=(0, 1)), "d_k_values"),
        (lambda: widgets.scaling_explorer(n_samples=0), "n_samples"),
        (lambda: widgets.scaling_explorer(n_draws=2.5), "n_draws"),
        (lambda: widgets.mask_explorer(mask_type="diagonal"), "mask_type"),
        (lambda: widgets.mask_explorer(window=0), "window"),
        (lambda: widgets.mask_explorer(window=9), "window"),
        (lambda: widgets.mask_explorer(n_pad=-1), "n_pad"),
        (lambda: widgets.mask_explorer(seq_len=1, window=1, n_pad=0), "seq_len"),
        (lambda: viz.mask_figure("causal", scores=np.zeros((3, 3))), "scores"),
    ],
)
def test_bad_options_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------------------------------------
# Referent explorer (chapter 2): a real model's attention of "it", per layer and head
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def it_rows():
    """The attention rows of "it" in both sentences, from the library, computed for the test."""
    pretrained = pytest.importorskip("attnbook.pretrained")
    t1, w1 = pretrained.attention_of_token(pretrained.TIRED, "it")  # (layers, H, T)
    t2, w2 = pretrained.attention_of_token(pretrained.WIDE, "it")
    return (t1, t2), (w1, w2)


@pytest.fixture(scope="module")
def referent():
    return widgets.referent_explorer()


def test_referent_live_sliders_redraw_the_chosen_head(referent, it_rows):
    (t1, t2), (w1, w2) = it_rows
    fig = referent.figure
    # Sliders are 1-based: layer 1..6, head 1..12, starting at (1, 1).
    assert referent.controls["layer"].options == tuple((str(i), i) for i in range(1, 7))
    assert referent.controls["head"].options == tuple((str(i), i) for i in range(1, 13))
    assert (referent.controls["layer"].value, referent.controls["head"].value) == (1, 1)
    assert_close(np.array(fig.data[0].y), w1[0, 0], atol=0, rtol=0)
    for layer, head in [(4, 2), (6, 12), (1, 7)]:
        referent.controls["layer"].value = layer
        referent.controls["head"].value = head
        for i, (t, w) in enumerate([(t1, w1), (t2, w2)]):
            trace = fig.data[i]
            y = np.array(trace.y)
            assert_close(y, w[layer - 1, head - 1], atol=0, rtol=0)  # the same float32 values
            assert np.isfinite(y).all() and abs(y.sum() - 1) < 1e-5  # a softmax row
            assert list(trace.x) == list(range(len(t))) and list(trace.customdata) == t
            meta = trace.meta
            assert (meta["layer"], meta["head"], meta["sentence"]) == (layer, head, i)
            assert meta["query_index"] == t.index("it") == 10
            for word in ("animal", "street"):
                assert meta["highlight"][word] == pytest.approx(
                    float(w[layer - 1, head - 1, t.index(word)]), abs=0)
        assert fig.layout.title.text == f"Attention of “it”: layer {layer}, head {head}"
        # The corner annotation prints the two weights and their difference, 3 decimals.
        a = float(w2[layer - 1, head - 1, t2.index("animal")])
        s = float(w2[layer - 1, head - 1, t2.index("street")])
        corner = [an.text for an in fig.layout.annotations if " − " in an.text][1]
        assert f"{a:.3f}" in corner and f"{s:.3f}" in corner and f"{a - s:+.3f}" in corner
    # The two sentences differ in one token, and so do their tick labels.
    assert fig.layout.xaxis.ticktext[13] == "tired" and fig.layout.xaxis2.ticktext[13] == "wide"
    assert "animal" in fig.layout.xaxis.ticktext[2] and "<b>" in fig.layout.xaxis.ticktext[10]


def test_referent_static_frames_are_the_library_rows(referent, it_rows):
    (t1, t2), (w1, w2) = it_rows
    html = referent.static_html()
    assert len(html.encode()) < 500_000
    spec = embedded_spec(html)
    assert [c["name"] for c in spec["controls"]] == ["layer", "head"]
    assert spec["controls"][0]["options"] == list(range(1, 7))
    assert spec["controls"][1]["options"] == list(range(1, 13))
    assert spec["strides"] == [12, 1] and len(spec["frame_of"]) == 72
    assert len(spec["frames"]) == 72  # every head draws something different
    for layer in range(1, 7):
        for head in (1, 5, 12):
            fr = static_frame(spec, {"layer": layer, "head": head})
            for i, w in enumerate((w1, w2)):
                # Floats are stored with 4 significant digits.
                assert_close(np.array(fr["data"][i]["y"], dtype=float),
                             w[layer - 1, head - 1].astype(float), atol=1e-12, rtol=1e-3)
            assert fr["layout"]["title"]["text"].endswith(f"layer {layer}, head {head}")


def test_referent_explorer_starts_where_asked_and_rejects_bad_input(it_rows):
    (_, _), (w1, _) = it_rows
    ex = widgets.referent_explorer(layer=4, head=2)
    assert_close(np.array(ex.figure.data[0].y), w1[3, 1], atol=0, rtol=0)
    for kwargs, name in [({"layer": 0}, "layer"), ({"layer": 7}, "layer"), ({"head": 13}, "head"),
                         ({"head": True}, "head"), ({"layer": 2.0}, "layer"),
                         ({"candidates": ("animal", "moon")}, "moon"),
                         ({"sentences": ("The cat sat because it was tired.",)}, "animal"),
                         ({"sentences": ()}, "sentences"),
                         ({"candidates": ("a", "b", "c", "d", "e")}, "candidates")]:
        with pytest.raises(ValueError, match=name):
            widgets.referent_explorer(**kwargs)
    with pytest.raises(TypeError, match="sentences"):
        widgets.referent_explorer(sentences="The animal didn't cross the street.")


def test_token_attention_figure_rejects_bad_input():
    t = ["[CLS]", "it", "animal", "street", "[SEP]"]
    w = np.full((2, 3, 5), 0.2)
    fig = viz.token_attention_figure([t], [w], 1, 2)
    assert list(fig.data[0].y) == [0.2] * 5 and fig.data[0].meta["layer"] == 2
    for call, name in [
        (lambda: viz.token_attention_figure([t], [w[..., :4]], 0, 0), "weights"),
        (lambda: viz.token_attention_figure([t], [w[0]], 0, 0), "weights"),
        (lambda: viz.token_attention_figure([t, t], [w], 0, 0), "tokens"),
        (lambda: viz.token_attention_figure([t, t], [w, w[:1]], 0, 0), "n_layers"),
        (lambda: viz.token_attention_figure([t], [w], 2, 0), "layer"),
        (lambda: viz.token_attention_figure([t], [w], 0, -1), "head"),
        (lambda: viz.token_attention_figure([t], [w * np.nan], 0, 0), "non-finite"),
        (lambda: viz.token_attention_figure([t], [w], 0, 0, query="they"), "query"),
        (lambda: viz.token_attention_figure([t], [w], 0, 0, highlight=("moon",)), "moon"),
        (lambda: viz.token_attention_figure([t], [w], 0, 0, titles=["a", "b"]), "titles"),
    ]:
        with pytest.raises(ValueError, match=name):
            call()


@pytest.mark.parametrize(
    "make, kwargs, match",
    [
        ("scaling_explorer", dict(seed=-1), "seed must be a non-negative integer, got -1"),
        ("scaling_explorer", dict(seed="a"), "seed must be a non-negative integer, got 'a'"),
        ("mask_explorer", dict(seed=None), "seed must be a non-negative integer, got None"),
        ("mask_explorer", dict(window=2.0), "window must be an integer, got 2.0"),
        ("mask_explorer", dict(n_pad=1.0), "n_pad must be an integer, got 1.0"),
    ],
)
def test_seeds_and_sizes_are_checked(make, kwargs, match):
    # A seed of None would draw a different figure on every build; a float window is a typo.
    with pytest.raises(ValueError, match=re.escape(match)):
        getattr(widgets, make)(**kwargs)
