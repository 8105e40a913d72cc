"""Tests of the cost explorers (attnbook.widgets_cost): live widgets and static frames.

Expected values come from hand formulas (n² numbers of a given byte size; 4 n² d FLOPs; the
KV cache's 2 x layers x KV heads x head_dim x bytes per token, with the layer and head counts
read from the published config.json dicts in attnbook.kv_cache.HF_CONFIGS), not from the
explorers' own output.
"""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import widgets_cost as wc  # noqa: E402
from attnbook.kv_cache import HF_CONFIGS  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, static_frame  # noqa: E402

GIB = 2**30


def hand_kv_bytes(name, seq_len, batch, nbytes):
    hf = HF_CONFIGS[name]
    head_dim = hf["hidden_size"] // hf["num_attention_heads"]
    tokens = min(seq_len, hf["sliding_window"]) if "sliding_window" in hf and hf.get(
        "use_sliding_window", True) else seq_len
    return 2 * hf["num_hidden_layers"] * hf["num_key_value_heads"] * head_dim * nbytes * tokens * batch


def test_cost_formulas_by_hand():
    assert wc.score_matrix_bytes(2048) == 2048 * 2048 * 4
    assert wc.score_matrix_bytes(32768, 32, 2, "bfloat16") == 2 * 32 * 32768**2 * 2
    assert wc.score_matrix_bytes(32768) / wc.score_matrix_bytes(2048) == 256
    assert wc.attention_flops(1000, 512) == 4 * 1000**2 * 512
    assert wc.attention_flops(10, 8, batch=3) == 3 * 4 * 100 * 8


def test_quadratic_meter_live_slider_recomputes():
    ex = wc.quadratic_cost_explorer(seq_len=2048, n_heads=1, dtype="float32")
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
    assert_close(np.array(fig.data[0].y), [32 * (2**i) ** 2 * 4 / GIB for i in range(9, 18)],
                 atol=0, rtol=1e-12)
    assert_close(np.array(fig.data[2].y), [(2**i / 2048) ** 2 for i in range(9, 18)], atol=0,
                 rtol=1e-12)
    assert "256× the cost" in fig.layout.title.text
    ex.controls["dtype"].value = "bfloat16"
    assert fig.data[1].meta["bytes"] == 32 * 32768**2 * 2


def test_quadratic_meter_static_frames():
    spec = embedded_spec(wc.quadratic_cost_explorer().static_html())
    assert len(spec["frame_of"]) == 9 * 3 * 2
    a = static_frame(spec, {"seq_len": 4096, "n_heads": 8, "dtype": "float32"})
    b = static_frame(spec, {"seq_len": 8192, "n_heads": 8, "dtype": "float32"})
    assert a["data"][1]["y"][0] == pytest.approx(8 * 4096**2 * 4 / GIB, rel=1e-3)
    assert b["data"][1]["y"][0] == pytest.approx(4 * a["data"][1]["y"][0], rel=1e-3)
    assert a["data"][1] != b["data"][1]


def test_kv_calculator_live_matches_hand_formula():
    ex = wc.kv_cache_explorer()
    fig = ex.figure
    # Qwen2-7B: 2 x 28 layers x 4 KV heads x 128 x 2 bytes = 57344 B = 56 KiB per token.
    assert fig.data[1].meta["bytes_per_token"] == 57344 == hand_kv_bytes("Qwen2-7B", 1, 1, 2)
    assert fig.data[1].meta["bytes"] == 57344 * 131072  # 7.0 GiB
    assert_close(fig.data[1].y[0], 7.0, atol=0, rtol=1e-12)
    ex.controls["model"].value = "Llama-2-7B"
    ex.controls["seq_len"].value = 4096
    ex.controls["batch"].value = 8
    ex.controls["dtype"].value = "int4"
    assert fig.data[1].meta["bytes"] == hand_kv_bytes("Llama-2-7B", 4096, 8, 0.5)
    assert_close(np.array(fig.data[0].y),
                 [hand_kv_bytes("Llama-2-7B", n, 8, 0.5) / GIB for n in wc.CONTEXT_VALUES],
                 atol=0, rtol=1e-12)
    # weights line: 2 bytes per parameter, about 6.74e9 parameters (published: "7B")
    w = fig.data[2].y[0] * GIB / 2
    assert 6.5e9 < w < 7.0e9


def test_kv_calculator_sliding_window_plateau_and_mla():
    ex = wc.kv_cache_explorer(model="Mistral-7B")
    y = np.array(ex.figure.data[0].y)
    # window 4096: constant from 4K on, = 4096 tokens x 2 x 32 layers x 8 heads x 128 x 2 bytes
    assert_close(y[2:], np.full(len(y) - 2, hand_kv_bytes("Mistral-7B", 4096, 1, 2) / GIB),
                 atol=0, rtol=1e-12)
    assert y[0] < y[1] < y[2]
    ex.controls["model"].value = "DeepSeek-V2"
    fig = ex.figure
    # MLA: (512 + 64) numbers per layer and token, 60 layers, 2 bytes (DeepSeek-V2, table 1)
    assert fig.data[1].meta["bytes_per_token"] == (512 + 64) * 60 * 2
    assert len(fig.data[2].y or []) == 0 and fig.data[1].meta["weights_bytes"] is None


def test_kv_calculator_static_frames_and_size():
    html = wc.kv_cache_explorer()._repr_mimebundle_()["text/html"]
    assert len(html.encode()) < 500_000 and "https://" not in html
    spec = embedded_spec(html)
    fr = static_frame(spec, {"model": "Llama-3-8B", "seq_len": 8192, "batch": 1,
                             "dtype": "bfloat16"})
    assert fr["data"][1]["y"][0] == pytest.approx(hand_kv_bytes("Llama-3-8B", 8192, 1, 2) / GIB,
                                                  rel=1e-3)
    other = static_frame(spec, {"model": "Llama-3-8B", "seq_len": 8192, "batch": 64,
                                "dtype": "bfloat16"})
    assert other["data"][1]["y"][0] == pytest.approx(64 * fr["data"][1]["y"][0], rel=1e-3)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: wc.score_matrix_bytes(-1), ValueError, "seq_len"),
    (lambda: wc.score_matrix_bytes(8, dtype="fp7"), ValueError, "dtype"),
    (lambda: wc.attention_flops(8, 0), ValueError, "d_model"),
    (lambda: wc.attention_flops(8.0, 4), TypeError, "seq_len"),
    (lambda: wc.quadratic_cost_explorer(seq_len=1000), ValueError, "seq_len"),
    (lambda: wc.quadratic_cost_explorer(n_heads=True), ValueError, "n_heads"),
    (lambda: wc.kv_cache_explorer(model="GPT-5"), ValueError, "model"),
    (lambda: wc.kv_cache_explorer(batch=2), ValueError, "batch"),
    (lambda: wc.kv_cache_figure(seq_len=3), ValueError, "seq_len"),
])
def test_bad_options_raise(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
