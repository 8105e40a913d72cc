"""Tests of the norm-placement explorer (attnbook.explorers.block) without a browser.

The reference gradient norms are computed here, independently of the explorer and of
``experiments.norm_placement_run``: the documented model (a ``DecoderOnlyModel`` with the run's
config, built after ``torch.manual_seed(seed)``) and first batch (``copy_batch`` with a generator
seeded with ``seed``) are rebuilt, and each layer's gradient is taken with
``torch.autograd.grad`` and its norm with ``torch.linalg.vector_norm``. The live explorer is
driven by setting its controls; the static one is read from the JSON in its ``text/html``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import experiments  # noqa: E402
from attnbook.experiments import copy_batch  # noqa: E402
from attnbook.explorers import block as wb  # noqa: E402
from attnbook.models import DecoderOnlyModel, ModelConfig  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import assert_speaks_chinese, embedded_spec, live_caption, static_frame  # noqa: E402
from width_checks import check_widths  # noqa: E402

# Tiny sizes keep the tests fast (the run's defaults are for the chapter).
TINY = dict(d_model=16, n_heads=2, d_ff=32, n=3, vocab=5, batch_size=4, seed=3)
DEPTHS = (2, 3, 5)
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@functools.lru_cache(maxsize=None)
def reference_norms(n_layers: int, norm_first: bool) -> np.ndarray:
    """Per-layer gradient norms at initialisation, by autograd on the rebuilt model and batch."""
    t = TINY
    torch.manual_seed(t["seed"])
    model = DecoderOnlyModel(
        ModelConfig(
            vocab_size=t["vocab"] + 1,
            d_model=t["d_model"],
            n_heads=t["n_heads"],
            n_layers=n_layers,
            d_ff=t["d_ff"],
            arch="decoder",
            max_seq_len=2 * t["n"] + 1,
            norm="layernorm",
            norm_first=norm_first,
            ffn="relu",
            bias=True,
            positional="learned",
            tie_embeddings=False,
        )
    )
    ids, x = copy_batch(
        t["batch_size"], t["n"], t["vocab"], torch.Generator().manual_seed(t["seed"])
    )
    logits = model(ids)[:, t["n"] : 2 * t["n"]]  # (B, n, vocab + 1): predictions of the copy
    loss = F.cross_entropy(logits.reshape(-1, t["vocab"] + 1), x.reshape(-1))
    norms = []
    for layer in model.layers:
        grads = torch.autograd.grad(loss, list(layer.parameters()), retain_graph=True)
        norms.append(float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))))
    return np.array(norms)


@pytest.fixture(scope="module")
def grads():
    return experiments.gradient_norms_at_init(DEPTHS, **TINY)


# ------------------------------------------------------------------------------------------
# The measurement
# ------------------------------------------------------------------------------------------


def test_the_measurement_lives_in_experiments_and_keeps_its_old_path():
    # Training runs belong to attnbook.experiments; the explorer module re-exports the name.
    assert wb.gradient_norms_at_init is experiments.gradient_norms_at_init
    assert wb.DEPTH_VALUES == (2, 4, 6, 8, 12, 16, 24, 32, 48)


def test_gradient_norms_match_autograd(grads):
    assert sorted(grads) == list(DEPTHS)
    for L in DEPTHS:
        for key, norm_first in (("post_ln", False), ("pre_ln", True)):
            g = grads[L][key]
            assert g.shape == (L,) and g.dtype == np.float64
            assert np.isfinite(g).all() and (g > 0).all()
            assert_close(g, reference_norms(L, norm_first), atol=0, rtol=1e-5)
    # The two placements are different models: their norms must differ.
    assert not np.allclose(grads[5]["post_ln"], grads[5]["pre_ln"])


# ------------------------------------------------------------------------------------------
# Live explorer
# ------------------------------------------------------------------------------------------


def test_live_depth_slider_and_placement(grads):
    ex = wb.norm_placement_explorer(3, "both", depth_values=DEPTHS, grads=grads)
    fig = ex.figure
    assert len(fig.data) == 6
    assert_close(np.array(fig.data[0].y), reference_norms(3, False), atol=0, rtol=1e-5)
    assert_close(np.array(fig.data[1].y), reference_norms(3, True), atol=0, rtol=1e-5)
    assert list(fig.data[0].x) == [1, 2, 3]
    ex.controls["depth"].value = 5
    assert list(fig.data[0].x) == [1, 2, 3, 4, 5]
    assert_close(np.array(fig.data[0].y), reference_norms(5, False), atol=0, rtol=1e-5)
    assert_close(np.array(fig.data[1].y), reference_norms(5, True), atol=0, rtol=1e-5)
    ratio = reference_norms(5, False)[-1] / reference_norms(5, False)[0]
    assert fig.data[0].meta["ratio_last_first"] == pytest.approx(ratio, rel=1e-5)
    # Right panel: the last layer's norm at every depth, and the current depth marked.
    assert list(fig.data[2].x) == list(DEPTHS)
    assert_close(
        np.array(fig.data[3].y), [reference_norms(L, True)[-1] for L in DEPTHS], atol=0, rtol=1e-5
    )
    assert list(fig.data[4].x) == [5] and list(fig.data[5].x) == [5]
    assert fig.data[5].y[0] == pytest.approx(reference_norms(5, True)[-1], rel=1e-5)
    # Placement: only Post-LN visible, traces kept in place.
    ex.controls["placement"].value = "Post-LN"
    assert [t.visible for t in fig.data] == [True, False, True, False, True, False]
    ex.controls["placement"].value = "Pre-LN"
    assert [t.visible for t in fig.data] == [False, True, False, True, False, True]
    # The ratios are prose: in the caption above the plot, not placed in the figure.
    notes = live_caption(ex)
    assert "Pre-LN: last / first layer" in notes and "Post-LN:" not in notes
    assert not any("last / first" in a.text for a in fig.layout.annotations)


def test_hover_text_names_the_layer_and_its_norm_in_each_language(grads):
    # The issue: "Post-LN, layer 4 of 12: gradient norm 0.542" stayed English in Chinese.
    ref = reference_norms(5, False)
    en = wb.norm_placement_figure(5, "both", grads, language="en")
    zh = wb.norm_placement_figure(5, "both", grads, language="zh_CN")
    assert en.data[0].text[3] == f"Post-LN, layer 4 of 5: gradient norm {ref[3]:.3f}"
    assert zh.data[0].text[3] == f"Post-LN，第 4 层（共 5 层）：梯度范数 {ref[3]:.3f}"
    last = reference_norms(3, True)[-1]
    assert zh.data[3].text[1] == f"Pre-LN，3 层：最后一层的梯度范数 {last:.3f}"
    assert en.data[3].text[1] == f"Pre-LN, 3 layers: last layer's gradient norm {last:.3f}"
    assert zh.layout.title.text.split("<br>")[0] == "初始化时的梯度：Post-LN 与 Pre-LN"
    assert zh.layout.annotations[0].text == "各层的梯度范数（共 5 层）"
    # The numbers are the same in both languages.
    for a, b in zip(en.data, zh.data):
        assert_close(np.array(a.y, dtype=float), np.array(b.y, dtype=float), atol=0, rtol=0)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("depth, placement", [(5, "both"), (2, "Pre-LN")])
def test_figure_is_laid_out_for_the_column_and_for_a_phone(grads, depth, placement, language):
    data = wb.norm_placement_data(depth, placement, grads)
    wide, phone = check_widths(
        lambda w: wb.draw_norm_placement(data, language=language, width=w), n_panels=2
    )
    for fig in (wide, phone):
        lay = fig["layout"]
        assert [t.get("xaxis", "x") for t in fig["data"]] == ["x"] * 2 + ["x2"] * 4
        # Only the panels' titles are annotations; the ratios moved into the caption, as a
        # second line, one per arm shown.
        assert len(lay["annotations"]) == 2
        caption = lay["title"]["text"]
        assert caption.count("<br>") == 1
        second = caption.split("<br>")[1]
        assert "Pre-LN" in second and ("Post-LN" in second) == (placement == "both")
        ratio = f"{data.ratio('pre_ln'):.2f}"
        assert ratio in second
        # Both panels share the y range, so their heights compare (the brief: no panels at
        # different scales for no reason).
        assert lay["yaxis"]["range"] == lay["yaxis2"]["range"]
        # Layer ticks stay legible: no more than 12 numbers on the layer axis.
        assert depth / lay["xaxis"]["dtick"] <= 12


def test_every_setting_speaks_chinese(grads):
    assert_speaks_chinese(wb.norm_placement_explorer(3, depth_values=DEPTHS, grads=grads))


def test_explorer_measures_when_no_grads_are_given(grads):
    ex = wb.norm_placement_explorer(2, depth_values=(2,), **TINY)
    assert_close(np.array(ex.figure.data[0].y), reference_norms(2, False), atol=0, rtol=1e-5)
    assert_close(np.array(ex.figure.data[1].y), reference_norms(2, True), atol=0, rtol=1e-5)


# ------------------------------------------------------------------------------------------
# Static HTML and the display bundle
# ------------------------------------------------------------------------------------------


def test_static_frames_match_reference(grads):
    ex = wb.norm_placement_explorer(3, depth_values=DEPTHS, grads=grads)
    spec = embedded_spec(ex.static_html())
    assert [c["name"] for c in spec["controls"]] == ["depth", "placement"]
    assert len(spec["frame_of"]) == len(DEPTHS) * len(wb.PLACEMENTS)
    for L in DEPTHS:
        fr = static_frame(spec, {"depth": L, "placement": "both"})
        # Floats are embedded with 4 significant digits.
        assert_close(
            np.array(fr["data"][0]["y"], dtype=float), reference_norms(L, False), atol=0, rtol=1e-3
        )
        assert_close(
            np.array(fr["data"][1]["y"], dtype=float), reference_norms(L, True), atol=0, rtol=1e-3
        )
    a = static_frame(spec, {"depth": 2, "placement": "both"})
    b = static_frame(spec, {"depth": 5, "placement": "both"})
    assert a["data"][0]["y"] != b["data"][0]["y"], "the depth slider does not change the data"
    only_pre = static_frame(spec, {"depth": 5, "placement": "Pre-LN"})
    assert [t.get("visible", True) for t in only_pre["data"]] == [False, True] * 3


def test_display_bundle_has_both_front_ends(grads):
    ex = wb.norm_placement_explorer(2, depth_values=DEPTHS, grads=grads)
    bundle = ex._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle
    html = bundle["text/html"]
    assert 'type="range"' in html and "<select" in html
    assert "cdn" not in html.lower() and "<script src" not in html


# ------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(depth=7), ValueError, "depth"),
        (dict(depth=True), ValueError, "depth"),
        (dict(placement="post"), ValueError, "placement"),
        (dict(depth_values=(3, 2)), ValueError, "depth_values"),
        (dict(depth_values=()), ValueError, "depth_values"),
        (dict(depth_values=(2, 200)), ValueError, "depth_values"),
        (dict(depth_values=(2, 3.0)), TypeError, "depth_values"),
        (dict(depth_values=3), TypeError, "depth_values"),
    ],
)
def test_explorer_rejects_bad_arguments(kwargs, exc, name, grads):
    args = dict(depth=2, depth_values=DEPTHS, grads=grads)
    args.update(kwargs)
    with pytest.raises(exc, match=name):
        wb.norm_placement_explorer(**args)


def test_grads_must_cover_the_depths(grads):
    with pytest.raises(ValueError, match="grads"):
        wb.norm_placement_explorer(2, depth_values=(2, 3), grads=grads)
    bad = {L: dict(v) for L, v in grads.items()}
    bad[3]["pre_ln"] = np.array([1.0, np.nan, 1.0])
    with pytest.raises(ValueError, match=r"grads\[3\]\['pre_ln'\]"):
        wb.norm_placement_figure(3, "both", bad)
    with pytest.raises(ValueError, match="depth"):
        wb.norm_placement_figure(4, "both", grads)


@pytest.mark.parametrize("bad", [2.5, [1.0, 2.0], "norms"])
def test_grads_of_the_wrong_kind_raise_a_type_error_naming_grads(bad):
    # Before: 2.5 gave "'float' object is not iterable" from sorted(), naming nothing.
    with pytest.raises(TypeError, match="grads must be a dict"):
        wb.norm_placement_explorer(3, depth_values=DEPTHS, grads=bad)
