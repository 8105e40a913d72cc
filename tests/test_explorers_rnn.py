"""Tests of the γ-and-distance explorer (attnbook.explorers.rnn) without a browser.

References: the hand derivation for a linear RNN whose recurrent matrix is ``gamma`` times an
orthogonal matrix (every step's Jacobian is ``gamma Q``, so ``||dh_L/dh_{L-Δ}||_2 = gamma^Δ``
exactly); and, for the tanh RNN, a float64 NumPy computation written here — the hidden states
``h_s``, the per-step Jacobians ``diag(1 - h_s^2) W_hh`` and the spectral norm of their
product — from the weights the documented seeds produce. The live path is driven by setting
control values; the static path is read from the JSON embedded in the explorer's HTML.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import rnn as rnn_core  # noqa: E402
from attnbook.explorers import rnn as rnnx  # noqa: E402
from attnbook.rnn import VanillaRNN  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import assert_speaks_chinese, embedded_spec, static_frame  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
SMALL = dict(gamma_values=(0.9, 1.1), distance_values=(5, 20), hidden_size=8, seed=3)


def reference_tanh_norms(gamma, K, H, d_in, seed):
    """float64 NumPy: ||prod_s diag(1 - h_s^2) W_hh||_2 for k = 0..K, from the documented setup."""
    torch.manual_seed(seed)
    rnn = VanillaRNN(d_in, H)  # W_ih and biases as the library draws them after this seed
    W_ih = rnn.weight_ih.detach().double().numpy()
    b = rnn.bias_ih.detach().double().numpy() + rnn.bias_hh.detach().double().numpy()
    gen = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(H, H, generator=gen, dtype=torch.float64))[0].numpy()
    W_hh = gamma * Q
    x = torch.randn(
        1, K + 1, d_in, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64
    )[0].numpy()  # (K + 1, d_in)
    h = np.zeros(H)
    hs = []
    for t in range(K + 1):
        h = np.tanh(W_ih @ x[t] + W_hh @ h + b)
        hs.append(h)
    norms = [1.0]
    J = np.eye(H)
    for k in range(1, K + 1):  # dh_T/dh_{T-k} = J_T ... J_{T-k+1}, J_s = diag(1 - h_s^2) W_hh
        s = K - k + 1
        J = J @ (np.diag(1 - hs[s] ** 2) @ W_hh)
        norms.append(np.linalg.norm(J, 2))
    return np.array(norms)


# ------------------------------------------------------------------------------------------
# The measurements
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.5, 0.9, 1.0, 1.1])
def test_linear_rnn_lies_on_gamma_power_and_tanh_matches_numpy(gamma):
    d = rnnx.gradient_decay_data(gamma, max_distance=30, hidden_size=6, input_size=3, seed=1)
    k = np.arange(31)
    assert d.distances.tolist() == k.tolist()
    assert_close(d.bound, gamma**k, atol=0, rtol=1e-14)
    assert_close(d.linear, gamma**k, atol=1e-13, rtol=1e-10)  # hand derivation
    ref = reference_tanh_norms(gamma, 30, 6, 3, 1)
    assert_close(d.tanh, ref, atol=1e-13, rtol=1e-9)
    assert np.isfinite(d.tanh).all()
    assert (d.tanh <= gamma**k * (1 + 1e-12)).all()  # tanh' <= 1: below the bound
    assert d.tanh[0] == pytest.approx(1.0, abs=1e-12)


def test_the_book_example_point_nine_to_the_fifty():
    d = rnnx.gradient_decay_data(0.9, max_distance=50)
    # 0.9^50 = exp(50 ln 0.9) = 0.005154 (about 0.52 %).
    assert math.isclose(d.bound[50], math.exp(50 * math.log(0.9)), rel_tol=1e-13)
    assert 0.00515 < d.linear[50] < 0.00516
    assert d.tanh[50] < d.bound[50]


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: rnnx.gradient_decay_data(0.0), ValueError, "gamma"),
        (lambda: rnnx.gradient_decay_data(2.5), ValueError, "gamma"),
        (lambda: rnnx.gradient_decay_data(float("nan")), ValueError, "gamma"),
        (lambda: rnnx.gradient_decay_data(True), TypeError, "gamma"),
        (lambda: rnnx.gradient_decay_data("0.9"), TypeError, "gamma"),
        (lambda: rnnx.gradient_decay_data(0.9, max_distance=0), ValueError, "max_distance"),
        (lambda: rnnx.gradient_decay_data(0.9, hidden_size=2.0), TypeError, "hidden_size"),
        (lambda: rnnx.gradient_decay_data(0.9, seed=-1), ValueError, "seed"),
        (lambda: rnnx.gradient_decay_figure(0.9, 0), ValueError, "distance"),
        (lambda: rnnx.gradient_decay_figure(0.9, 3, data=0.9), TypeError, "data"),
        (lambda: rnnx.gradient_decay_figure(0.9, 3, data={"gamma": 0.9}), TypeError, "data"),
        (
            lambda: rnnx.gradient_decay_figure(
                0.9, 3, data=rnnx.gradient_decay_data(0.8, max_distance=5)
            ),
            ValueError,
            "gamma",
        ),
        (
            lambda: rnnx.gradient_decay_figure(
                0.9, 3, data=rnnx.gradient_decay_data(0.9, max_distance=5), gamma_range=(1.0, 0.5)
            ),
            ValueError,
            "gamma_range",
        ),
        (
            lambda: rnnx.gradient_decay_figure(
                0.9, 3, data=rnnx.gradient_decay_data(0.9, max_distance=5), gamma_range=(0.0, 0.5)
            ),
            ValueError,
            "gamma_range",
        ),
        (lambda: rnnx.gradient_decay_explorer(gamma=0.85), ValueError, "gamma"),
        (lambda: rnnx.gradient_decay_explorer(distance=3), ValueError, "distance"),
        (
            lambda: rnnx.gradient_decay_explorer(gamma_values=(0.9, 0.5), gamma=0.9),
            ValueError,
            "gamma_values",
        ),
        (
            lambda: rnnx.gradient_decay_explorer(gamma_values=(0.9, 3.0), gamma=0.9),
            ValueError,
            "gamma_values",
        ),
        (
            lambda: rnnx.gradient_decay_explorer(distance_values=(0, 5), distance=5),
            ValueError,
            "distance_values",
        ),
        (
            lambda: rnnx.gradient_decay_explorer(distance_values=(), distance=5),
            ValueError,
            "distance_values",
        ),
        (
            lambda: rnnx.gradient_decay_explorer(distance_values=(2.0, 5), distance=5),
            TypeError,
            "distance_values",
        ),
        (
            lambda: rnnx.gradient_decay_explorer(distance_values=5, distance=5),
            TypeError,
            "distance_values",
        ),
    ],
)
def test_bad_options_raise_naming_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


# ------------------------------------------------------------------------------------------
# Live explorer
# ------------------------------------------------------------------------------------------


def test_live_gamma_and_distance_sliders_recompute():
    ex = rnnx.gradient_decay_explorer(0.9, 20, **SMALL)
    fig = ex.figure
    k = np.arange(21)
    assert_close(np.array(fig.data[0].y), np.maximum(0.9**k, 1e-11), atol=0, rtol=1e-12)
    assert fig.data[3].meta["bound"] == pytest.approx(0.9**20, rel=1e-12)
    ex.controls["gamma"].value = 1.1
    # Exploding: the bound and the linear RNN grow like 1.1^k (hand derivation).
    assert_close(np.array(fig.data[0].y), 1.1**k, atol=0, rtol=1e-12)
    assert_close(np.array(fig.data[1].y), 1.1 ** k[::5], atol=0, rtol=1e-9)
    ref = reference_tanh_norms(1.1, 20, 8, 4, 3)
    assert_close(np.array(fig.data[2].y), np.maximum(ref, 1e-11), atol=1e-13, rtol=1e-9)
    assert fig.data[3].meta["tanh"] == pytest.approx(ref[20], rel=1e-9)
    ex.controls["distance"].value = 5
    meta = fig.data[3].meta
    assert meta["bound"] == pytest.approx(1.1**5, rel=1e-12)
    assert meta["linear"] == pytest.approx(1.1**5, rel=1e-9)
    assert meta["tanh"] == pytest.approx(ref[5], rel=1e-9)
    assert list(fig.data[3].x) == [5, 5, 5]
    assert fig.layout.shapes[0].x0 == 5
    # Right panel: gamma^5 over the gamma axis; the chosen gamma marked on it.
    g = np.array(fig.data[4].x)
    assert_close(np.array(fig.data[4].y), np.maximum(g**5, 1e-11), atol=0, rtol=1e-12)
    assert list(fig.data[5].x) == [1.1]
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "Δ = 5:" in texts and "linear RNN 1.61" in texts  # 1.1^5 = 1.61051


def test_labels_use_the_books_notation():
    # The distance is Δ = L - t (the last step is L), not k = T - t.
    ex = rnnx.gradient_decay_explorer(0.9, 20, **SMALL)
    layout = ex.figure.layout.to_plotly_json()
    texts = " ".join(a["text"] for a in layout["annotations"]).replace("<br>", " ")
    assert "‖∂h<sub>L</sub>/∂h<sub>L−Δ</sub>‖ with ‖W<sub>hh</sub>‖ = γ = 0.9" in texts
    assert "The bound at Δ = 20 against γ" in texts
    assert "Δ = 20: γ<sup>Δ</sup> = " in texts
    assert layout["xaxis"]["title"]["text"] == "distance Δ = L − t (steps)"
    assert ex.figure.data[0].name == "bound γ<sup>Δ</sup>"
    assert "∂h<sub>L</sub>/∂h<sub>t</sub>" in ex.figure.data[1].hovertemplate
    assert ex.controls["distance"].description == "distance Δ"
    html = ex.static_html()
    assert '-distance">distance Δ</label>' in html
    frames = json.dumps(embedded_spec(html), ensure_ascii=False)  # every precomputed figure
    shown = texts + frames + " ".join(str(t.hovertemplate) for t in ex.figure.data)
    for old in ("k = ", "T − t", "h_T", "<sub>T", "γ<sup>k</sup>", "distance k"):
        assert old not in shown, old


# ------------------------------------------------------------------------------------------
# Static HTML and the display bundle
# ------------------------------------------------------------------------------------------


def test_static_frames_match_the_hand_derivation_and_numpy():
    ex = rnnx.gradient_decay_explorer(0.9, 20, **SMALL)
    spec = embedded_spec(ex.static_html())
    assert spec["strides"] == [2, 1] and len(spec["frame_of"]) == 4
    assert len(set(spec["frame_of"])) == 4  # every setting draws a different figure
    k = np.arange(21)
    for gamma in (0.9, 1.1):
        ref = reference_tanh_norms(gamma, 20, 8, 4, 3)
        for dist in (5, 20):
            fr = static_frame(spec, {"gamma": gamma, "distance": dist})
            # Floats are stored with 4 significant digits.
            assert_close(fr["data"][0]["y"], np.maximum(gamma**k, 1e-11), atol=0, rtol=1e-3)
            assert_close(fr["data"][2]["y"], np.maximum(ref, 1e-11), atol=0, rtol=1e-3)
            assert_close(fr["data"][3]["meta"]["bound"], gamma**dist, atol=0, rtol=1e-3)
            assert fr["data"][3]["x"] == [dist] * 3
            assert fr["layout"]["shapes"][0]["x0"] == dist


def test_mimebundle_has_both_representations_and_fits_a_page():
    ex = rnnx.gradient_decay_explorer()
    bundle = ex._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle and "text/plain" in bundle
    html = bundle["text/html"]
    assert "<script src" not in html and "cdn" not in html.lower() and "https://" not in html
    assert len(html.encode()) < 500_000
    spec = embedded_spec(html)
    assert len(spec["frame_of"]) == len(rnnx.GAMMA_VALUES) * len(rnnx.DISTANCE_VALUES)
    for name in ("gamma", "distance"):
        m = re.search(rf'id="(attnbook-explorer-[0-9a-f]+-{name})"', html)
        assert m, f"no control {name}"
        assert f'<label for="{m.group(1)}">' in html
    # Defaults: gamma 0.9 and k = 50, the book's example.
    fr = static_frame(spec, {"gamma": 0.9, "distance": 50})
    assert_close(fr["data"][3]["meta"]["bound"], 0.9**50, atol=0, rtol=1e-3)


# ------------------------------------------------------------------------------------------
# Languages, and where the measurement lives
# ------------------------------------------------------------------------------------------


def test_the_measurement_lives_in_the_rnn_module_and_keeps_its_old_path():
    assert rnnx.gradient_decay_data is rnn_core.gradient_decay_data
    assert rnnx.GradientDecay is rnn_core.GradientDecay


def test_chinese_figure_has_the_same_numbers_and_chinese_labels():
    d = rnnx.gradient_decay_data(1.1, max_distance=20, hidden_size=8, seed=3)
    en = rnnx.gradient_decay_figure(1.1, 5, data=d, language="en")
    zh = rnnx.gradient_decay_figure(1.1, 5, data=d, language="zh_CN")
    for a, b in zip(en.data, zh.data):
        assert np.array_equal(np.asarray(a.y, dtype=float), np.asarray(b.y, dtype=float))
    # 1.1^5 = 1.61051 (hand derivation: the linear RNN lies on the bound)
    box = zh.layout.annotations[2].text
    assert box.startswith("Δ = 5：<br>γ<sup>Δ</sup> = 1.61<br>线性 RNN 1.61")
    assert zh.data[1].name == "线性 RNN，实测"
    assert zh.data[1].hovertemplate.endswith("<extra>线性 RNN</extra>")
    assert zh.layout.xaxis.title.text == "距离 Δ = L − t（步）"
    assert en.data[1].hovertemplate.endswith("<extra>linear RNN</extra>")


def test_every_setting_speaks_chinese():
    assert_speaks_chinese(rnnx.gradient_decay_explorer(0.9, 20, **SMALL))
