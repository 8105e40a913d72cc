"""Tests of the KV-cache calculator (attnbook.explorers.kv_cache) of chapter 11.

The live path is driven as a reader would: set a control's ``value`` and read the
``FigureWidget``'s data. Expected values are written out here, independently of the explorer
and of ``kv_cache_bytes``: KV-cache bytes as ``2 * layers * kv_heads * head_dim * tokens * batch *
bytes`` from the published ``config.json`` fields, the weights as 2 bytes per parameter of a
published "7B" model. The static path is checked by parsing the JSON embedded in ``text/html``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import cost, kv_cache  # noqa: E402
from attnbook.cost import format_bytes  # noqa: E402
from attnbook.explorers import kv_cache as kvx  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import (  # noqa: E402
    caption_text,
    embedded_spec,
    live_caption,
    static_frame,
    title_text,
    unmoved,
)
from width_checks import check_widths  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
GIB = 2**30
BYTES = {"float32": 4, "bfloat16": 2, "float8": 1, "int4": 0.5}


def shown_title(fig) -> str:
    """The live figure's title as one line (the title annotation, its <br> as spaces)."""
    return title_text(fig.layout.to_plotly_json()).replace("<br>", " ")


def live_title(ex) -> str:
    """A live explorer's title as one line: the caption above its plot (the figure itself has
    none), its text with each <br> as a space."""
    assert title_text(ex.figure.layout.to_plotly_json()) == ""
    return live_caption(ex)


def hand_kv_bytes(model: str, variant: str, tokens: int, batch: int, dtype: str) -> int:
    """KV-cache bytes from the config.json fields, written out (not via kv_cache_bytes)."""
    hf = kv_cache.HF_CONFIGS[model]
    layers = hf["num_hidden_layers"]
    window = hf.get("sliding_window") if hf.get("use_sliding_window", True) else None
    kept = tokens if window is None else min(tokens, window)
    if "kv_lora_rank" in hf:  # MLA (DeepSeek-V2): latent + shared RoPE key; variants d_h = 128
        per_layer = {
            "published": hf["kv_lora_rank"] + hf["qk_rope_head_dim"],
            "MHA": 2 * hf["num_attention_heads"] * hf["v_head_dim"],
            "MQA": 2 * 1 * hf["v_head_dim"],
        }[variant]
    else:
        head_dim = hf["hidden_size"] // hf["num_attention_heads"]
        kv_heads = {
            "published": hf["num_key_value_heads"],
            "MHA": hf["num_attention_heads"],
            "MQA": 1,
        }[variant]
        per_layer = 2 * kv_heads * head_dim
    return layers * per_layer * kept * batch * BYTES[dtype]


def test_kv_variants_change_only_the_kv_heads():
    # kv_variants and weights_bytes live in attnbook.cost, still importable from the explorer.
    assert kvx.kv_variants is cost.kv_variants and kvx.weights_bytes is cost.weights_bytes
    qwen = kv_cache.PRESETS["Qwen2-7B"]
    v = cost.kv_variants(qwen)
    assert list(v) == ["MHA", "published", "MQA"]
    assert [c.kv_heads for c in v.values()] == [28, 4, 1]
    assert v["published"] is qwen
    for c in v.values():
        assert (c.n_layers, c.n_heads, c.head_size, c.d_model) == (28, 28, 128, 3584)
    ds = cost.kv_variants(kv_cache.PRESETS["DeepSeek-V2"])
    assert ds["published"].uses_mla and not ds["MHA"].uses_mla and not ds["MQA"].uses_mla
    assert (ds["MHA"].kv_heads, ds["MHA"].head_size, ds["MQA"].kv_heads) == (128, 128, 1)
    mistral = cost.kv_variants(kv_cache.PRESETS["Mistral-7B"])
    assert all(c.sliding_window == 4096 for c in mistral.values())
    with pytest.raises(TypeError, match="config"):
        cost.kv_variants(kv_cache.HF_CONFIGS["Qwen2-7B"])


def test_attention_kind_from_the_published_heads():
    # From config.json: Llama-2-7B 32 of 32 KV heads, Qwen2-7B 4 of 28, DeepSeek-V2 a latent.
    kinds = {
        m: cost.attention_kind(kv_cache.PRESETS[m])
        for m in ("Llama-2-7B", "Qwen2-7B", "DeepSeek-V2")
    }
    assert kinds == {"Llama-2-7B": "MHA", "Qwen2-7B": "GQA", "DeepSeek-V2": "MLA"}
    assert cost.attention_kind(cost.kv_variants(kv_cache.PRESETS["Qwen2-7B"])["MQA"]) == "MQA"
    with pytest.raises(TypeError, match="config"):
        cost.attention_kind(kv_cache.HF_CONFIGS["Qwen2-7B"])


# ------------------------------------------------------------------------------------------
# KV-cache explorer: live
# ------------------------------------------------------------------------------------------


def check_kv_figure(fig, model, context, batch, dtype, rtol=0.0):
    variants = ("MHA", "published", "MQA")
    want = [hand_kv_bytes(model, k, context, batch, dtype) for k in variants]
    bars = fig["data"][4] if isinstance(fig, dict) else fig.data[4].to_plotly_json()
    curves = (
        fig["data"][:3] if isinstance(fig, dict) else [t.to_plotly_json() for t in fig.data[:3]]
    )
    if rtol == 0.0:
        assert list(bars["meta"]["bytes"]) == want
        assert list(bars["meta"]["per_token"]) == [
            hand_kv_bytes(model, k, 1, 1, dtype) for k in variants
        ]
    assert_close(np.array(bars["x"], dtype=float), np.array(want) / GIB, atol=0, rtol=rtol or 1e-12)
    assert list(bars["text"]) == [format_bytes(b) for b in want]
    for curve, k in zip(curves, variants):
        xs = [int(t) for t in curve["x"]]
        ref = np.array([hand_kv_bytes(model, k, t, batch, dtype) for t in xs]) / GIB
        assert_close(np.array(curve["y"], dtype=float), ref, atol=0, rtol=rtol or 1e-12)
        assert context in xs
    return want


def test_kv_live_default_is_qwen2_and_the_controls_recompute():
    ex = kvx.kv_cache_explorer()
    assert ex.values == {"model": "Qwen2-7B", "context": 32768, "batch": 1, "dtype": "bfloat16"}
    want = check_kv_figure(ex.figure, "Qwen2-7B", 32768, 1, "bfloat16")
    # GQA with 4 of 28 KV heads keeps exactly one seventh of the MHA cache (hand: 4/28).
    assert want[0] == 7 * want[1] and want[1] == 4 * want[2]
    before = list(ex.figure.data[4].x)
    ex.controls["model"].value = "Llama-3-8B"
    ex.controls["context"].value = 131072
    ex.controls["batch"].value = 4
    ex.controls["dtype"].value = "float32"
    assert list(ex.figure.data[4].x) != before, "the figure did not change"
    want = check_kv_figure(ex.figure, "Llama-3-8B", 131072, 4, "float32")
    assert want[1] == 2 * 32 * 8 * 128 * 131072 * 4 * 4  # 64 GiB, by hand
    assert "Llama-3-8B" in live_title(ex)
    assert np.isfinite(np.array(ex.figure.data[4].x, dtype=float)).all()


def test_kv_live_sliding_window_and_mla():
    ex = kvx.kv_cache_explorer(model="Mistral-7B", context=131072)
    want = check_kv_figure(ex.figure, "Mistral-7B", 131072, 1, "bfloat16")
    # Only the 4096-token window is kept: 2 * 32 * 8 * 128 * 4096 * 2 bytes = 512 MiB.
    assert want[1] == 2 * 32 * 8 * 128 * 4096 * 2 == 512 * 2**20
    ex.controls["model"].value = "DeepSeek-V2"
    want = check_kv_figure(ex.figure, "DeepSeek-V2", 131072, 1, "bfloat16")
    assert want[1] == (512 + 64) * 60 * 131072 * 2
    assert "MLA" in live_title(ex)


# ------------------------------------------------------------------------------------------
# KV-cache explorer: static
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_explorer():
    """The default explorer, shared by the tests that only read it: its static HTML (640
    combinations) takes seconds and is computed once. Its controls must not be moved."""
    yield from unmoved(kvx.kv_cache_explorer())


def test_kv_static_frames_match_hand_formula(default_explorer):
    html = default_explorer.static_html()
    spec = embedded_spec(html)
    assert [c["name"] for c in spec["controls"]] == ["model", "context", "batch", "dtype"]
    assert len(spec["frame_of"]) == 5 * 8 * 4 * 4
    for values in (
        {"model": "Qwen2-7B", "context": 131072, "batch": 1, "dtype": "bfloat16"},
        {"model": "Llama-2-7B", "context": 4096, "batch": 16, "dtype": "float8"},
        {"model": "DeepSeek-V2", "context": 1024, "batch": 64, "dtype": "float32"},
    ):
        fr = static_frame(spec, values)
        # Floats are stored with 4 significant digits; byte counts are integers, kept exactly.
        check_kv_figure(
            fr, values["model"], values["context"], values["batch"], values["dtype"], rtol=1e-3
        )
        assert fr["data"][4]["meta"]["bytes"] == [
            hand_kv_bytes(values["model"], k, values["context"], values["batch"], values["dtype"])
            for k in ("MHA", "published", "MQA")
        ]
    a = static_frame(spec, {"model": "Qwen2-7B", "context": 1024, "batch": 1, "dtype": "bfloat16"})
    b = static_frame(spec, {"model": "Qwen2-7B", "context": 1024, "batch": 4, "dtype": "bfloat16"})
    assert a["data"][4] != b["data"][4]
    # The title (the caption above the plot, not drawn in it) follows the batch.
    assert title_text(a["layout"]) == title_text(b["layout"]) == ""
    assert caption_text(a["caption"]) != caption_text(b["caption"])
    # The legend sits below the panels (inside the left one it hid the MHA curve, issue 10):
    # at the bottom of the figure, under the axis titles (viz.legend_below).
    legend = a["layout"]["legend"]
    assert (legend["yref"], legend["y"], legend["yanchor"]) == ("container", 0, "bottom")
    # Qwen2-7B at 131072 tokens: 7 GiB (the number), shown as a bar label.
    q = static_frame(
        spec, {"model": "Qwen2-7B", "context": 131072, "batch": 1, "dtype": "bfloat16"}
    )
    assert q["data"][4]["text"][1] == "7 GiB"


# Laid out for the column and for a phone (issue 20)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("model", ["Qwen2-7B", "DeepSeek-V2"])
def test_kv_figure_is_laid_out_for_the_column_and_for_a_phone(model, language):
    from attnbook import fonts, viz

    data = kvx.kv_cache_data(model, 131072, 64, "float32")
    wide, phone = check_widths(
        lambda w: kvx.draw_kv_cache(data, language=language, width=w), n_panels=2
    )
    for fig, width in ((wide, viz.COLUMN_PX), (phone, viz.PHONE_PX)):
        lay = fig["layout"]
        # No panel placed by hand any more: the bars' panel is the second subplot of the grid.
        assert fig["data"][4]["xaxis"] == "x2" and fig["data"][0].get("xaxis", "x") == "x"
        # The bar labels (e.g. "2 TiB") stay inside the bar panel: the axis reaches past the
        # longest bar by at least the label's width, read with the font's advances.
        plot_w = width - lay["margin"]["l"] - lay["margin"]["r"]
        if width == viz.PHONE_PX:  # the names beside the bars widen the left margin
            names = max(
                fonts.text_width(line, 12)
                for t in lay["yaxis2"]["ticktext"]
                for line in t.split("<br>")
            )
            plot_w = width - max(lay["margin"]["l"], names) - lay["margin"]["r"]
        d0, d1 = lay["xaxis2"]["domain"]
        panel_px = (d1 - d0) * plot_w
        longest = max(fig["data"][4]["x"])
        label_px = max(fonts.text_width(t, 13) for t in fig["data"][4]["text"])
        free_px = (lay["xaxis2"]["range"][1] - longest) / lay["xaxis2"]["range"][1] * panel_px
        assert free_px >= label_px, (width, free_px, label_px)
        # The variants' names beside the bars: each line of each name fits the room they have
        # (side by side the gap between the panels, minus the tick marks).
        lines = [line for t in lay["yaxis2"]["ticktext"] for line in t.split("<br>")]
        if width == viz.COLUMN_PX:
            gap = (d0 - lay["xaxis"]["domain"][1]) * plot_w
            assert max(fonts.text_width(line, 12) for line in lines) <= gap - 20
        # The title is prose for the caption (two lines: the model, then the totals).
        assert title_text(lay).count("<br>") == 1
    # The phone's figure is taller (stacked), the column's panels share one row.
    assert phone["layout"]["height"] > wide["layout"]["height"]


def test_the_caption_gives_back_exactly_the_room_the_title_took():
    from attnbook.explorers.base import take_title

    fig = kvx.kv_cache_figure().to_plotly_json()
    bare, caption = take_title(fig)
    assert caption and "Qwen2-7B" in caption
    # What is left above the panels is the room of their titles (one line of 14 px each).
    assert 14 * 1.3 <= bare["layout"]["margin"]["t"] <= 2 * 14 * 1.3 + 12
    assert 300 <= bare["layout"]["height"] <= 520


# Display bundle, size, bad input
# ------------------------------------------------------------------------------------------


def test_mimebundle_is_self_contained_and_fits_a_page(default_explorer):
    ex = default_explorer
    bundle = ex._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle and "text/plain" in bundle
    html = bundle["text/html"]
    assert "<script src" not in html and "https://" not in html
    # Every frame is stored for the column and for a phone (stacked, wrapped: the title
    # alone is ~200 bytes per variant and frame, 640 frames), and each frame's bar axis
    # reaches past its own longest bar's label at each width (~90 bytes a frame): about
    # 0.71 MB.
    assert len(html.encode()) < 760_000, (ex.title, len(html))
    for name in ("model", "context", "batch", "dtype"):
        m = re.search(rf'id="(attnbook-explorer-[0-9a-f]+-{name})"', html)
        assert m, f"no control {name}"
        assert f'<label for="{m.group(1)}">' in html


# ------------------------------------------------------------------------------------------
# The weights line (chapter 11) and the dtypes of both chapters
# ------------------------------------------------------------------------------------------


def test_weights_line_is_two_bytes_per_parameter_and_int4_halves_float8():
    ex = kvx.kv_cache_explorer(model="Llama-2-7B", context=4096, batch=16, dtype="int4")
    fig = ex.figure
    want = check_kv_figure(fig, "Llama-2-7B", 4096, 16, "int4")
    assert want[1] == 2 * 32 * 32 * 128 * 4096 * 16 // 2  # half a byte per number, by hand
    weights = fig.data[5].meta["weights_bytes"]
    # 2 bytes per parameter, about 6.74e9 parameters (published: "7B").
    assert 6.5e9 < weights / 2 < 7.0e9
    assert_close(np.array(fig.data[5].y), [weights / GIB] * 2, atol=0, rtol=1e-12)
    ex.controls["dtype"].value = "float8"
    assert list(fig.data[4].meta["bytes"]) == [2 * w for w in want]
    ex.controls["model"].value = "DeepSeek-V2"  # MoE weights are not modelled: no line
    assert fig.data[5].meta["weights_bytes"] is None and len(fig.data[5].y or []) == 0


def test_weights_bytes_and_kv_variants_refuse_a_dict():
    assert cost.weights_bytes(kv_cache.PRESETS["DeepSeek-V2"]) is None
    for fn in (cost.weights_bytes, cost.kv_variants):
        with pytest.raises(TypeError, match="config"):
            fn(kv_cache.HF_CONFIGS["Qwen2-7B"])


def test_sliding_window_plateau_on_the_curve():
    fig = kvx.kv_cache_figure("Mistral-7B", 1024)
    x, y = np.array(fig.data[1].x), np.array(fig.data[1].y)
    # window 4096: constant from 4K on, = 4096 tokens x 2 x 32 layers x 8 heads x 128 x 2 bytes
    plateau = hand_kv_bytes("Mistral-7B", "published", 4096, 1, "bfloat16") / GIB
    assert_close(y[x >= 4096], np.full((x >= 4096).sum(), plateau), atol=0, rtol=1e-12)
    assert (np.diff(y[x <= 4096]) > 0).all()
    assert "the cache stops growing" in shown_title(fig)


def test_kv_cache_calculator_speaks_chinese(default_explorer):
    """Every label, legend entry and hover text of every setting is Chinese in Chinese; model
    and dtype names stay as they are."""
    from explorer_util import assert_speaks_chinese

    assert_speaks_chinese(default_explorer)
    values = {"model": "Qwen2-7B", "context": 131072, "batch": 1, "dtype": "bfloat16"}
    zh = default_explorer.figure_json(values, "zh_CN")
    # The issue's example: the bars' labels were English beside a Chinese legend.
    assert zh["data"][4]["y"] == ["MHA（28 个 KV 头）", "实际配置（GQA）", "MQA（1 个 KV 头）"]
    assert [t["name"] for t in zh["data"][:3]] == zh["data"][4]["y"]
    assert zh["data"][0]["hovertemplate"].startswith("%{x} 个 token：%{y:.3g} GiB")
    title = title_text(zh["layout"])
    assert title.startswith("Qwen2-7B — 28 层，GQA：28 个查询头，4 个 128 维 KV 头")
    assert "131072 个 token × 批大小 1 = 7 GiB（MHA 需要 7 倍）" in title  # 28 / 4, by hand
    # One computation drawn twice: the same bytes in both editions.
    en = default_explorer.figure_json(values)
    assert zh["data"][4]["meta"] == en["data"][4]["meta"]
    mistral = default_explorer.figure_json(dict(values, model="Mistral-7B"), "zh_CN")
    assert "超过窗口 4096 后缓存不再增长" in title_text(mistral["layout"])


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: kvx.kv_cache_explorer(model="GPT-5"), ValueError, "model"),
        (lambda: kvx.kv_cache_explorer(context=1000), ValueError, "context"),
        (lambda: kvx.kv_cache_explorer(batch=True), ValueError, "batch"),
        (lambda: kvx.kv_cache_explorer(dtype="float64"), ValueError, "dtype"),
        (lambda: kvx.kv_cache_figure(model="GPT-5"), ValueError, "model"),
        (lambda: kvx.kv_cache_figure(dtype="fp7"), ValueError, "dtype"),
        (lambda: kvx.kv_cache_figure(context=0), ValueError, "context"),
        (lambda: kvx.kv_cache_figure(batch=-2), ValueError, "batch"),
        (lambda: kvx.kv_cache_figure(context=2.0), TypeError, "context"),
        (lambda: kvx.kv_cache_figure(batch=True), TypeError, "batch"),
    ],
)
def test_bad_options_raise_naming_the_argument(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
