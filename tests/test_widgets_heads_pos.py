"""Tests of the explorers of chapters 7 and 8 (attnbook.widgets_heads_pos), without a browser.

The live path is driven as a reader would: set a control's ``value`` and read the
``FigureWidget``'s data. Expected values are written out here, independently of the explorer
and of ``kv_cache_bytes``: KV-cache bytes as ``2 * layers * kv_heads * head_dim * tokens * batch *
bytes`` from the published ``config.json`` fields, RoPE angles as ``m * base^(-2i/D)``, the
sinusoidal curves as ``sin/cos(pos * base^(-2i/D))`` and the RoPE score of the all-ones query and
key as ``(2/D) * sum_i cos(m theta_i)`` (each pair contributes ``(R_m [1, 1]) . [1, 1] =
2 cos(m theta_i)``). The static path is checked by parsing the JSON embedded in ``text/html``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import kv_cache  # noqa: E402
from attnbook import widgets_heads_pos as whp  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, static_frame  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
GIB = 2**30
BYTES = {"float32": 4, "bfloat16": 2, "float8": 1}


def hand_kv_bytes(model: str, variant: str, tokens: int, batch: int, dtype: str) -> int:
    """KV-cache bytes from the config.json fields, written out (not via kv_cache_bytes)."""
    hf = kv_cache.HF_CONFIGS[model]
    layers = hf["num_hidden_layers"]
    window = hf.get("sliding_window") if hf.get("use_sliding_window", True) else None
    kept = tokens if window is None else min(tokens, window)
    if "kv_lora_rank" in hf:  # MLA (DeepSeek-V2): latent + shared RoPE key; variants d_h = 128
        per_layer = {"published": hf["kv_lora_rank"] + hf["qk_rope_head_dim"],
                     "MHA": 2 * hf["num_attention_heads"] * hf["v_head_dim"],
                     "MQA": 2 * 1 * hf["v_head_dim"]}[variant]
    else:
        head_dim = hf["hidden_size"] // hf["num_attention_heads"]
        kv_heads = {"published": hf["num_key_value_heads"], "MHA": hf["num_attention_heads"],
                    "MQA": 1}[variant]
        per_layer = 2 * kv_heads * head_dim
    return layers * per_layer * kept * batch * BYTES[dtype]


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (57344, "56 KiB"), (69120, "67.5 KiB"),
    (3 * 2**29, "1.5 GiB"), (7 * 2**30, "7 GiB"), (512 * 2**20, "512 MiB"), (2**40, "1 TiB"),
])
def test_format_bytes_by_hand(n, text):
    assert whp.format_bytes(n) == text


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_format_bytes_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="n must be"):
        whp.format_bytes(bad)


def test_kv_variants_change_only_the_kv_heads():
    qwen = kv_cache.PRESETS["Qwen2-7B"]
    v = whp.kv_variants(qwen)
    assert list(v) == ["MHA", "published", "MQA"]
    assert [c.kv_heads for c in v.values()] == [28, 4, 1]
    assert v["published"] is qwen
    for c in v.values():
        assert (c.n_layers, c.n_heads, c.head_size, c.d_model) == (28, 28, 128, 3584)
    ds = whp.kv_variants(kv_cache.PRESETS["DeepSeek-V2"])
    assert ds["published"].uses_mla and not ds["MHA"].uses_mla and not ds["MQA"].uses_mla
    assert (ds["MHA"].kv_heads, ds["MHA"].head_size, ds["MQA"].kv_heads) == (128, 128, 1)
    mistral = whp.kv_variants(kv_cache.PRESETS["Mistral-7B"])
    assert all(c.sliding_window == 4096 for c in mistral.values())
    with pytest.raises(TypeError, match="config"):
        whp.kv_variants(kv_cache.HF_CONFIGS["Qwen2-7B"])


# ------------------------------------------------------------------------------------------
# KV-cache explorer: live
# ------------------------------------------------------------------------------------------


def check_kv_figure(fig, model, context, batch, dtype, rtol=0.0):
    variants = ("MHA", "published", "MQA")
    want = [hand_kv_bytes(model, k, context, batch, dtype) for k in variants]
    bars = fig["data"][4] if isinstance(fig, dict) else fig.data[4].to_plotly_json()
    curves = (fig["data"][:3] if isinstance(fig, dict)
              else [t.to_plotly_json() for t in fig.data[:3]])
    if rtol == 0.0:
        assert list(bars["meta"]["bytes"]) == want
        assert list(bars["meta"]["per_token"]) == [
            hand_kv_bytes(model, k, 1, 1, dtype) for k in variants]
    assert_close(np.array(bars["x"], dtype=float), np.array(want) / GIB, atol=0, rtol=rtol or 1e-12)
    assert list(bars["text"]) == [whp.format_bytes(b) for b in want]
    for curve, k in zip(curves, variants):
        xs = [int(t) for t in curve["x"]]
        ref = np.array([hand_kv_bytes(model, k, t, batch, dtype) for t in xs]) / GIB
        assert_close(np.array(curve["y"], dtype=float), ref, atol=0, rtol=rtol or 1e-12)
        assert context in xs
    return want


def test_kv_live_default_is_qwen2_and_the_controls_recompute():
    ex = whp.kv_cache_explorer()
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
    assert "Llama-3-8B" in ex.figure.layout.title.text
    assert np.isfinite(np.array(ex.figure.data[4].x, dtype=float)).all()


def test_kv_live_sliding_window_and_mla():
    ex = whp.kv_cache_explorer(model="Mistral-7B", context=131072)
    want = check_kv_figure(ex.figure, "Mistral-7B", 131072, 1, "bfloat16")
    # Only the 4096-token window is kept: 2 * 32 * 8 * 128 * 4096 * 2 bytes = 512 MiB.
    assert want[1] == 2 * 32 * 8 * 128 * 4096 * 2 == 512 * 2**20
    ex.controls["model"].value = "DeepSeek-V2"
    want = check_kv_figure(ex.figure, "DeepSeek-V2", 131072, 1, "bfloat16")
    assert want[1] == (512 + 64) * 60 * 131072 * 2
    assert "MLA" in ex.figure.layout.title.text


# ------------------------------------------------------------------------------------------
# KV-cache explorer: static
# ------------------------------------------------------------------------------------------


def test_kv_static_frames_match_hand_formula():
    ex = whp.kv_cache_explorer()
    html = ex.static_html()
    spec = embedded_spec(html)
    assert [c["name"] for c in spec["controls"]] == ["model", "context", "batch", "dtype"]
    assert len(spec["frame_of"]) == 5 * 5 * 4 * 3
    for values in (
        {"model": "Qwen2-7B", "context": 131072, "batch": 1, "dtype": "bfloat16"},
        {"model": "Llama-2-7B", "context": 4096, "batch": 16, "dtype": "float8"},
        {"model": "DeepSeek-V2", "context": 1024, "batch": 64, "dtype": "float32"},
    ):
        fr = static_frame(spec, values)
        # Floats are stored with 4 significant digits; byte counts are integers, kept exactly.
        check_kv_figure(fr, values["model"], values["context"], values["batch"],
                        values["dtype"], rtol=1e-3)
        assert fr["data"][4]["meta"]["bytes"] == [
            hand_kv_bytes(values["model"], k, values["context"], values["batch"], values["dtype"])
            for k in ("MHA", "published", "MQA")]
    a = static_frame(spec, {"model": "Qwen2-7B", "context": 1024, "batch": 1, "dtype": "bfloat16"})
    b = static_frame(spec, {"model": "Qwen2-7B", "context": 1024, "batch": 4, "dtype": "bfloat16"})
    assert a["data"][4] != b["data"][4] and a["layout"]["title"] != b["layout"]["title"]
    # Qwen2-7B at 131072 tokens: 7 GiB (the number), shown as a bar label.
    q = static_frame(spec, {"model": "Qwen2-7B", "context": 131072, "batch": 1,
                            "dtype": "bfloat16"})
    assert q["data"][4]["text"][1] == "7 GiB"


# ------------------------------------------------------------------------------------------
# Position explorer
# ------------------------------------------------------------------------------------------


def hand_theta(pair, base, D=16):
    return base ** (-2 * pair / D)


def check_position_figure(data, m, pair, base, D=16, rtol=1e-12, atol=1e-12):
    theta = hand_theta(pair, base, D)
    trail_x, trail_y = np.array(data[1]["x"], float), np.array(data[1]["y"], float)
    p = np.arange(m + 1)
    assert_close(trail_x, np.cos(p * theta), atol=atol, rtol=rtol)
    assert_close(trail_y, np.sin(p * theta), atol=atol, rtol=rtol)
    assert_close(data[1]["meta"]["angle"], m * theta, atol=atol, rtol=rtol)
    assert_close(data[1]["meta"]["wavelength"], 2 * math.pi / theta, atol=0, rtol=rtol or 1e-12)
    pos = np.arange(65)
    assert_close(np.array(data[2]["y"], float), np.sin(pos * theta), atol=atol, rtol=rtol)
    assert_close(np.array(data[3]["y"], float), np.cos(pos * theta), atol=atol, rtol=rtol)
    thetas = base ** (-np.arange(0, D, 2) / D)
    score = (2 / D) * np.cos(pos[:, None] * thetas).sum(-1)
    assert_close(np.array(data[5]["y"], float), score, atol=atol, rtol=rtol)
    assert_close(np.array(data[6]["y"], float), score[m:m + 1], atol=atol, rtol=rtol)
    assert list(data[4]["x"]) == [m, m]


def test_position_live_controls_recompute():
    ex = whp.position_explorer()
    assert ex.values == {"position": 8, "pair": 1, "base": 10000.0}
    data = [t.to_plotly_json() for t in ex.figure.data]
    check_position_figure(data, 8, 1, 10000.0)
    before = list(ex.figure.data[1].x)
    ex.controls["position"].value = 32
    ex.controls["pair"].value = 0
    ex.controls["base"].value = 500000.0
    assert list(ex.figure.data[1].x) != before
    data = [t.to_plotly_json() for t in ex.figure.data]
    check_position_figure(data, 32, 0, 500000.0)
    # Pair 0 turns by exactly 1 rad per token whatever the base (theta_0 = base^0).
    assert ex.figure.data[1].meta["theta"] == 1.0
    ex.controls["pair"].value = 7
    data = [t.to_plotly_json() for t in ex.figure.data]
    check_position_figure(data, 32, 7, 500000.0)
    assert ex.figure.data[1].meta["angle"] < 0.01  # the slowest pair barely moves
    assert all(np.isfinite(np.array(t.y, float)).all() for t in ex.figure.data)


def test_position_static_frames_match_hand_formula():
    spec = embedded_spec(whp.position_explorer().static_html())
    assert [c["name"] for c in spec["controls"]] == ["position", "pair", "base"]
    assert len(spec["frame_of"]) == 10 * 8 * 3
    for m, pair, base in [(0, 0, 100.0), (12, 3, 10000.0), (32, 7, 500000.0)]:
        fr = static_frame(spec, {"position": m, "pair": pair, "base": base})
        check_position_figure(fr["data"], m, pair, base, rtol=1e-3, atol=1e-4)
    a = static_frame(spec, {"position": 4, "pair": 2, "base": 100.0})
    b = static_frame(spec, {"position": 4, "pair": 2, "base": 10000.0})
    assert a["data"][1] != b["data"][1] and a["data"][5] != b["data"][5]


# ------------------------------------------------------------------------------------------
# Display bundle, size, bad input
# ------------------------------------------------------------------------------------------


def test_mimebundles_are_self_contained_and_fit_a_page():
    for ex, names in ((whp.kv_cache_explorer(), ("model", "context", "batch", "dtype")),
                      (whp.position_explorer(), ("position", "pair", "base"))):
        bundle = ex._repr_mimebundle_()
        assert WIDGET_MIME in bundle and "text/html" in bundle and "text/plain" in bundle
        html = bundle["text/html"]
        assert "<script src" not in html and "https://" not in html
        assert len(html.encode()) < 500_000, (ex.title, len(html))
        for name in names:
            m = re.search(rf'id="(attnbook-explorer-[0-9a-f]+-{name})"', html)
            assert m, f"no control {name}"
            assert f'<label for="{m.group(1)}">' in html


@pytest.mark.parametrize("call, name", [
    (lambda: whp.kv_cache_explorer(model="GPT-5"), "model"),
    (lambda: whp.kv_cache_explorer(context=1000), "context"),
    (lambda: whp.kv_cache_explorer(batch=True), "batch"),
    (lambda: whp.kv_cache_explorer(dtype="float64"), "dtype"),
    (lambda: whp.kv_cache_figure(context=0), "context"),
    (lambda: whp.kv_cache_figure(batch=-2), "batch"),
    (lambda: whp.position_explorer(position=7), "position"),
    (lambda: whp.position_explorer(pair=8), "pair"),
    (lambda: whp.position_explorer(base=2.0), "base"),
    (lambda: whp.position_explorer(head_dim=15), "head_dim"),
    (lambda: whp.position_figure(position=65), "position"),
    (lambda: whp.position_figure(head_dim=9), "head_dim"),
    (lambda: whp.position_figure(base=1.0), "base"),
])
def test_bad_options_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
