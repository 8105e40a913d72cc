"""Regression tests for the findings of the hostile review (wrong answers, NaN, bad errors).

Each test names the finding it pins (A1-A16, LOW, B). Expected values come from independent
references: float64 formulas, the q = k trick (equal scores -> the output is the mean of the
visible values), or a per-row loop over the unambiguous 1-D form of the same call.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnbook import attention, masks, positional, scaling
from attnbook import nn as ann
from attnbook.flash import flash_attention, tiled_attention_torch
from attnbook.kv_cache import (KVCache, LatentCache, SlidingWindowCache, greedy_generate,
                               kv_cache_bytes)
from attnbook.models import (DecoderOnlyModel, EncoderOnlyModel, ModelConfig, build_model,
                             count_parameters, param_count)
from attnbook.testing import assert_close

BASE = dict(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16)


# --- A1: head_dim reaches the attention modules; param_count describes the built model --------

@pytest.mark.parametrize("arch,extra", [("decoder", {}), ("encoder", {}),
                                        ("encoder-decoder", {"n_encoder_layers": 1})])
def test_a1_head_dim_is_built_and_counted(arch, extra):
    cfg = ModelConfig(**BASE, head_dim=6, arch=arch, **extra)
    assert cfg.head_dim != cfg.d_model // cfg.n_heads
    model = build_model(cfg)
    attns = [m for m in model.modules() if isinstance(m, ann.MultiHeadAttention)]
    assert attns and all(m.head_dim == 6 for m in attns)
    assert count_parameters(model) == param_count(cfg)
    # hand count of one attention layer: q, o: 8*12 each (+12, +8 bias); k, v: 8*12 (+12)
    mha = attns[0]
    assert sum(p.numel() for p in mha.parameters()) == 4 * 8 * 12 + 3 * 12 + 8


def test_a1_odd_head_dim_with_rope_is_rejected():
    with pytest.raises(ValueError, match="head_dim must be even"):
        ModelConfig(**BASE, head_dim=3, positional="rope")


def test_a1_kv_cache_bytes_matches_built_cache():
    cfg = ModelConfig(**BASE, head_dim=6, positional="rope")
    model = DecoderOnlyModel(cfg).eval()
    caches = model.make_caches()
    model(torch.tensor([[1, 2, 3]]), kv_caches=caches)
    assert sum(c.nbytes for c in caches) == kv_cache_bytes(cfg, 3, dtype="float32")


# --- A3: fp16 scores must not overflow -----------------------------------------------------------

@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a3_numpy_sdpa_float16_scores_do_not_overflow(sign):
    q = np.full((2, 4), 200.0, np.float16)
    k = np.full((3, 4), sign * 200.0, np.float16)
    v = np.array([[1.0], [2.0], [6.0]], np.float16)
    out = attention.scaled_dot_product_attention(q, k, v)
    # every score is equal (q . k the same for every key), so the output is the mean of v
    assert out.dtype == np.float16 and np.isfinite(out).all()
    assert_close(out, np.full((2, 1), 3.0), atol=0, rtol=1e-3)


def test_a3_numpy_sdpa_overflow_error_names_the_scores_not_x():
    q = np.full((1, 4), 1e20, np.float32)
    with pytest.raises(ValueError, match="scores") as info:
        attention.scaled_dot_product_attention(q, q, np.ones((1, 1), np.float32))
    assert "x of shape" not in str(info.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a3_torch_sdpa_low_precision_scores_do_not_overflow(dtype, sign):
    q = torch.full((1, 1, 2, 64), 40.0, dtype=dtype)
    k = torch.full((1, 1, 3, 64), sign * 40.0, dtype=dtype)
    v = torch.tensor([1.0, 2.0, 6.0], dtype=dtype).view(1, 1, 3, 1)
    out = ann.scaled_dot_product_attention(q, k, v)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert_close(out, torch.full((1, 1, 2, 1), 3.0), atol=0, rtol=1e-2)
    mha_out = ann.MultiHeadAttention(64, 1).to(dtype)(torch.full((1, 2, 64), 40.0, dtype=dtype))
    assert torch.isfinite(mha_out).all()


# --- A4: flash paths reject NaN/inf instead of returning 0 ---------------------------------------

@pytest.mark.parametrize("fn", [flash_attention, tiled_attention_torch])
@pytest.mark.parametrize("which,value", [("q", math.nan), ("k", math.inf), ("v", math.nan)])
def test_a4_flash_rejects_nonfinite_inputs(fn, which, value):
    t = {n: torch.randn(1, 1, 4, 16) for n in "qkv"}
    t[which][0, 0, 1, 3] = value
    with pytest.raises(ValueError, match=f"{which} of shape .* contains nan or inf"):
        fn(t["q"], t["k"], t["v"])
    assert "propagate" not in flash_attention.__doc__


# --- A5: negative positions are rejected everywhere ----------------------------------------------

@pytest.mark.parametrize("positional_kind", ["sinusoidal", "learned", "rope"])
def test_a5_negative_positions_in_models(positional_kind):
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8, positional=positional_kind))
    with pytest.raises(ValueError, match="positions must be >= 0"):
        model(torch.tensor([[3]]), positions=torch.tensor([-1]))


def test_a5_negative_positions_in_torch_functions():
    with pytest.raises(ValueError, match="positions must be >= 0"):
        ann.apply_rope(torch.randn(5, 4), torch.tensor([0, 1, -2, 3, 4]))
    with pytest.raises(ValueError, match="positions must be >= 0"):
        ann.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), positions=torch.tensor([-1, 0, 1]))
    with pytest.raises(ValueError, match="q_positions must be >= 0"):
        ann.position_keep_mask(torch.tensor([-1, 0]), torch.tensor([0, 1]))


# --- A8: torch SDPA scale and additive masks -----------------------------------------------------

def test_a8_torch_sdpa_rejects_nonfinite_scale_and_masks():
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    for scale in (math.nan, math.inf):
        with pytest.raises(ValueError, match="scale must be finite"):
            ann.scaled_dot_product_attention(q, k, v, scale=scale)
    for fill in (math.inf, math.nan):
        with pytest.raises(ValueError, match="additive mask .* nan or \\+inf"):
            ann.scaled_dot_product_attention(q, k, v, torch.full((3, 5), fill))
    with pytest.raises(ValueError, match="additive mask"):
        ann.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), mask=torch.full((3, 3), math.inf))


# --- A9: eps of the torch norms and of ModelConfig -----------------------------------------------

@pytest.mark.parametrize("make", [lambda: ann.LayerNorm(4, eps=-1),
                                  lambda: ann.RMSNorm(4, eps=0.0),
                                  lambda: ann.LayerNorm(4, eps=math.nan)])
def test_a9_torch_norm_eps_checked(make):
    with pytest.raises(ValueError, match="eps"):
        make()


@pytest.mark.parametrize("eps", [-1.0, math.nan, 0.0])
def test_a9_model_config_eps_checked(eps):
    with pytest.raises(ValueError, match="eps"):
        ModelConfig(**BASE, eps=eps)


# --- A10: ModelConfig optional sizes -------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("sliding_window", -5), ("sliding_window", 0), ("sliding_window", 2.5),
    ("kv_lora_rank", -3), ("kv_lora_rank", 2.5), ("n_encoder_layers", -1), ("rope_theta", 0.0),
    ("q_lora_rank", 0), ("v_head_dim", 2.5),
])
def test_a10_model_config_checks_optional_sizes(field, value):
    mla = {"qk_rope_head_dim": 2} if field in ("kv_lora_rank", "q_lora_rank", "v_head_dim") else {}
    with pytest.raises(ValueError, match=f"{field} must be"):
        ModelConfig(**BASE, **{field: value}, **mla)


def test_a10_model_config_accepts_numpy_integers():
    cfg = ModelConfig(**{**BASE, "d_model": np.int64(8)}, sliding_window=np.int32(4))
    assert type(cfg.d_model) is int and cfg.d_model == 8 and type(cfg.sliding_window) is int


# --- A11: kv_cache_bytes integer arguments -------------------------------------------------------

@pytest.mark.parametrize("kwargs,name", [({"seq_len": 2.5}, "seq_len"),
                                         ({"seq_len": True}, "seq_len"),
                                         ({"seq_len": "10"}, "seq_len"),
                                         ({"seq_len": math.nan}, "seq_len"),
                                         ({"seq_len": 10, "batch": 1.5}, "batch")])
def test_a11_kv_cache_bytes_integer_arguments(kwargs, name):
    with pytest.raises(TypeError, match=name):
        kv_cache_bytes(ModelConfig(**BASE), **kwargs)


def test_a11_kv_cache_bytes_numpy_integers():
    cfg = ModelConfig(**BASE)
    # 2 (k and v) * 1 layer * 2 heads * 4 dims * 10 tokens * 2 bytes (bfloat16)
    assert kv_cache_bytes(cfg, np.int64(10), np.int32(1)) == 2 * 1 * 2 * 4 * 10 * 2


# --- A12: a window needs causal ------------------------------------------------------------------

def test_a12_window_without_causal_is_rejected():
    m = ann.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="causal=True"):
        m(torch.randn(1, 3, 8), window=1)
    with pytest.raises(ValueError, match="causal=True"):
        m(torch.randn(1, 3, 8), kv_cache=SlidingWindowCache(2))
    with pytest.raises(ValueError, match="causal=True"):
        ann.position_keep_mask(torch.arange(3), torch.arange(3), causal=False, window=2)


# --- A13: torch apply_rope base and integer input ------------------------------------------------

@pytest.mark.parametrize("base", [0.0, -1.0, 1.0, math.inf])
def test_a13_torch_rope_base_checked(base):
    with pytest.raises(ValueError, match="base"):
        ann.apply_rope(torch.ones(2, 4), torch.arange(2), base=base)


def test_a13_torch_rope_promotes_integer_input():
    x = torch.ones(3, 4, dtype=torch.long)
    got = ann.apply_rope(x, torch.arange(3))
    expected = positional.apply_rope(np.ones((3, 4)), np.arange(3))  # float64 reference
    assert got.is_floating_point()
    assert_close(got, expected, atol=1e-6, rtol=0)


# --- A15: float16 finfo.min additive rows are a plain softmax, as with float32 -------------------

def test_a15_float16_additive_mask_row_is_plain_softmax():
    q = np.array([[1.0, 0.0]], np.float16)
    # equal scores of -40/sqrt(2): finfo(float16).min + (-28) overflows float16 to -inf
    k = np.array([[-40.0, 0.0], [-40.0, 0.0]], np.float16)
    v = np.array([[1.0], [3.0]], np.float16)
    hidden = np.array([[False, False]])
    for dtype in (np.float16, np.float32):
        out, w = attention.scaled_dot_product_attention(
            q, k, v, masks.additive_mask(hidden, dtype=dtype), return_weights=True)
        assert_close(w, [[0.5, 0.5]], atol=1e-3, rtol=0)
        assert_close(out, [[2.0]], atol=1e-3, rtol=0)


# --- A16: LatentCache checks positions and batch -------------------------------------------------

def test_a16_latent_cache_checks_positions_and_batch():
    with pytest.raises(ValueError, match="positions must be"):
        LatentCache().update(torch.zeros(1, 3, 4), torch.zeros(1, 3, 2), torch.arange(7))
    cache = LatentCache()
    cache.update(torch.zeros(1, 3, 4), torch.zeros(1, 3, 2), torch.arange(3))
    with pytest.raises(ValueError, match="do not match the cache"):
        cache.update(torch.zeros(2, 1, 4), torch.zeros(2, 1, 2), torch.tensor([3]))
    with pytest.raises(ValueError, match="rewind"):
        cache.update(torch.zeros(1, 1, 4), torch.zeros(1, 1, 2), torch.tensor([1]))


# --- LOW -----------------------------------------------------------------------------------------

def test_low_kv_cache_positions():
    cache = KVCache()
    with pytest.raises(TypeError, match="positions"):
        cache.update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4), torch.tensor([0.0, 1.0]))
    cache.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4), torch.arange(3))
    with pytest.raises(ValueError, match="rewind"):
        cache.update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), torch.tensor([0]))
    sw = SlidingWindowCache(2)
    sw.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4), torch.arange(3))
    with pytest.raises(ValueError, match="rewind"):
        sw.update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), torch.tensor([1]))


def test_low_score_variance_needs_two_samples():
    with pytest.raises(ValueError, match="n_samples"):
        scaling.score_variance(4, 1)


def test_low_non_bool_flags_rejected():
    with pytest.raises(TypeError, match="scaled"):
        scaling.saturation_stats(4, 4, 10, scaled="no")
    q = np.ones((2, 4))
    with pytest.raises(TypeError, match="causal"):
        attention.scaled_dot_product_attention(q, q, q, causal="no")
    with pytest.raises(TypeError, match="causal"):
        ann.scaled_dot_product_attention(*(torch.ones(1, 1, 2, 4),) * 3, causal="no")


@pytest.mark.parametrize("p", [[-0.5, 1.5], [math.nan, 1.0]])
def test_low_entropy_rejects_non_probabilities(p):
    with pytest.raises(ValueError, match="p of shape"):
        attention.entropy(np.array(p))


# --- B: clear TypeError/ValueError naming the argument -------------------------------------------

@pytest.mark.parametrize("make,exc,name", [
    (lambda: ann.MultiHeadAttention(8, 2.0), TypeError, "n_heads"),
    (lambda: ann.MultiHeadAttention(8.0, 2), TypeError, "d_model"),
    (lambda: ann.MultiHeadAttention(8, True), TypeError, "n_heads"),
    (lambda: ann.MultiHeadAttention(8, 2, head_dim=2.5), TypeError, "head_dim"),
    (lambda: ann.MultiHeadLatentAttention(16, 2, 8.5, 4, 2, 4), TypeError, "kv_lora_rank"),
    (lambda: ann.LayerNorm(2.5), TypeError, "d_model"),
    (lambda: ann.LayerNorm(-1), ValueError, "d_model"),
    (lambda: ann.repeat_kv(torch.zeros(1, 2, 3, 4), 2.5), TypeError, "n_rep"),
    (lambda: ann.repeat_kv(torch.zeros(1, 2, 3, 4), True), TypeError, "n_rep"),
    (lambda: ann.keep_mask_to_additive(torch.ones(2, dtype=torch.bool), dtype=np.float32),
     TypeError, "dtype"),
    (lambda: SlidingWindowCache(2.5), TypeError, "window"),
    (lambda: SlidingWindowCache("3"), TypeError, "window"),
    (lambda: ann.position_keep_mask(torch.arange(3), torch.arange(3), window=2.5), TypeError,
     "window"),
    (lambda: ann.position_keep_mask(torch.zeros(2, 3, dtype=torch.long),
                                    torch.zeros(3, 4, dtype=torch.long)), ValueError, "batch"),
])
def test_b_constructor_and_helper_arguments(make, exc, name):
    with pytest.raises(exc, match=name):
        make()


def test_b_torch_attention_dtypes():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(TypeError, match="share a dtype"):
        ann.scaled_dot_product_attention(q.half(), q, q)
    with pytest.raises(TypeError, match="q must be a floating"):
        ann.scaled_dot_product_attention(q.long(), q, q)
    with pytest.raises(TypeError, match="scale"):
        ann.scaled_dot_product_attention(q, q, q, scale="a")
    with pytest.raises(TypeError, match="dropout_p"):
        ann.scaled_dot_product_attention(q, q, q, dropout_p="a")
    with pytest.raises(ValueError, match="q has 0 heads"):
        ann.scaled_dot_product_attention(torch.zeros(1, 0, 3, 4), torch.zeros(1, 2, 3, 4),
                                         torch.zeros(1, 2, 3, 4))
    with pytest.raises(TypeError, match="x has dtype torch.float64"):
        ann.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8, dtype=torch.float64))


def test_b_position_keep_mask_numpy_and_list_inputs():
    expected = torch.tensor([[True, False], [True, True]])
    for qp, kp in ((np.arange(2), np.arange(2)), ([0, 1], [0, 1])):
        got = ann.position_keep_mask(qp, kp)
        assert got.dtype == torch.bool and torch.equal(got, expected)


def test_b_mla_mask_arguments():
    torch.manual_seed(0)
    m = ann.MultiHeadLatentAttention(16, 2, 8, 4, 2, 4).eval()
    x = torch.randn(1, 3, 16)
    keep = [[True, False, False], [True, True, False], [True, True, True]]
    assert_close(m(x, mask=keep, causal=False), m(x, causal=True), atol=1e-6, rtol=0)
    with pytest.raises(TypeError, match="mask must be a boolean"):
        m(x, mask=torch.ones(3, 3))


def test_b_decoder_forward_arguments():
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8))
    with pytest.raises(ValueError, match=r"ids must be \(B, T\)"):
        model(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="one cache per layer"):
        model(torch.tensor([[1, 2]]), kv_caches=[])
    for bad in (torch.tensor([[11]]), torch.tensor([[-1]])):
        with pytest.raises(ValueError, match="vocab_size"):
            model(bad)
    with pytest.raises(TypeError, match="ids must be integer"):
        model(torch.tensor([[1.0]]))


def test_b_encoder_attention_mask():
    torch.manual_seed(0)
    model = EncoderOnlyModel(ModelConfig(**BASE, arch="encoder")).eval()
    ids = torch.tensor([[1, 2, 3]])
    ref = model(ids, torch.tensor([[1, 1, 0]]))
    assert_close(model(ids, np.array([[1, 1, 0]])), ref, atol=0, rtol=0)
    for bad in ([[1, 2, 0]], [[1, 0.5, 0]]):
        with pytest.raises(ValueError, match="attention_mask must hold only 0"):
            model(ids, torch.tensor(bad))


@pytest.mark.parametrize("hf,exc,match", [
    (None, TypeError, "hf must be a dict"),
    ({"hidden_size": None}, ValueError, "hidden_size"),
    ({"hidden_size": 4096.7}, ValueError, "hidden_size"),
    ({"hidden_act": "tanh"}, ValueError, "hidden_act"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, ValueError, "rope_scaling"),
])
def test_b_from_hf_config(hf, exc, match):
    base = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
            "intermediate_size": 128, "vocab_size": 10}
    with pytest.raises(exc, match=match):
        ModelConfig.from_hf_config(None if hf is None else {**base, **hf})


def test_b_from_hf_config_nested_text_config():
    with pytest.raises(ValueError, match=r"pass hf\['text_config'\]"):
        ModelConfig.from_hf_config({"text_config": {"hidden_size": 64}})


def test_b_greedy_generate_arguments():
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8)).eval()
    for bad in (2.5, True):
        with pytest.raises(TypeError, match="max_new_tokens"):
            greedy_generate(model, torch.tensor([[1]]), bad)
    out = greedy_generate(model, np.array([[1, 2]]), 2)
    assert torch.equal(out, greedy_generate(model, torch.tensor([[1, 2]]), 2))


@pytest.mark.parametrize("axis", [1.5, True, "a"])
def test_b_softmax_axis_type(axis):
    with pytest.raises(TypeError, match="axis"):
        attention.softmax(np.ones((2, 3)), axis=axis)


@pytest.mark.parametrize("scale", ["abc", np.array([1.0, 2.0]), True])
def test_b_numpy_sdpa_scale_type(scale):
    q = np.ones((2, 4))
    with pytest.raises(TypeError, match="scale"):
        attention.scaled_dot_product_attention(q, q, q, scale=scale)


def test_b_numpy_functions_accept_tensors_and_reject_strings():
    q = torch.randn(2, 4, requires_grad=True)
    out = attention.scaled_dot_product_attention(q, q, q)
    expected = attention.scaled_dot_product_attention(*(q.detach().numpy(),) * 3)
    assert_close(out, expected, atol=0, rtol=0)


def test_b_masks_arguments():
    assert np.array_equal(masks.sliding_window_mask(4, 10**30), masks.causal_mask(4))
    for dtype in (None, "bfloat16", torch.float16):
        with pytest.raises(TypeError, match="dtype"):
            masks.additive_mask(masks.causal_mask(2), dtype=dtype)


@pytest.mark.parametrize("atol", [None, "a"])
def test_b_assert_close_tolerance_type(atol):
    with pytest.raises(TypeError, match="atol"):
        assert_close([1.0], [1.0], atol=atol, rtol=0)


@pytest.mark.parametrize("rng,exc", [("x", TypeError), (-1, ValueError), (True, TypeError)])
def test_b_scaling_rng_argument(rng, exc):
    with pytest.raises(exc, match="rng"):
        scaling.score_samples(4, 10, rng=rng)
