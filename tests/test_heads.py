"""Tests for attnbook.heads (NumPy, its cores and public functions) and
attnbook.layers.MultiHeadAttention.

References: torch.nn.functional.scaled_dot_product_attention (also enable_gqa=True),
torch.nn.MultiheadAttention with copied weights, float64 formulas written here (a loop over
heads and features), and hand-derived cases from issue 3.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import heads, layers
from attnbook.masks import causal_mask, padding_mask
from attnbook.testing import assert_close, assert_low_precision_close

D64 = torch.float64


def _pair(d_model, n_heads, bias=True, dtype=D64, seed=0):
    """Our MultiHeadAttention and torch's nn.MultiheadAttention with the same weights."""
    torch.manual_seed(seed)
    ours = layers.MultiHeadAttention(d_model, n_heads, bias=bias).to(dtype)
    ref = torch.nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True, dtype=dtype)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.out_proj.weight.copy_(ours.o_proj.weight)
        if bias:
            for lin in (ours.q_proj, ours.k_proj, ours.v_proj, ours.o_proj):
                lin.bias.normal_()
            ref.in_proj_bias.copy_(
                torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
            )
            ref.out_proj.bias.copy_(ours.o_proj.bias)
    return ours.eval(), ref.eval()


def _numpy_weights(m):
    """x @ W layout weights of a layers.MultiHeadAttention (transpose of Linear.weight)."""
    t = lambda lin: lin.weight.detach().double().numpy().T  # noqa: E731
    b = lambda lin: None if lin.bias is None else lin.bias.detach().double().numpy()  # noqa: E731
    return dict(
        w_q=t(m.q_proj),
        w_k=t(m.k_proj),
        w_v=t(m.v_proj),
        w_o=t(m.o_proj),
        b_q=b(m.q_proj),
        b_k=b(m.k_proj),
        b_v=b(m.v_proj),
        b_o=b(m.o_proj),
    )


# --- against torch.nn.MultiheadAttention ---------------------------------------------------------


def test_module_self_attention_causal_matches_torch_mha():
    ours, ref = _pair(16, 4)
    x = torch.randn(2, 5, 16, dtype=D64)
    keep = torch.from_numpy(causal_mask(5))
    out, w = ours(x, causal=True, need_weights=True)
    exp, exp_w = ref(
        x, x, x, attn_mask=layers.keep_mask_to_mha_mask(keep), average_attn_weights=False
    )
    assert torch.isfinite(out).all()
    assert_close(out, exp, atol=1e-12, rtol=1e-12)
    assert_close(w, exp_w, atol=1e-12, rtol=1e-12)


def test_module_cross_attention_with_source_padding_matches_torch_mha():
    ours, ref = _pair(12, 3, seed=1)
    x, ctx = torch.randn(2, 3, 12, dtype=D64), torch.randn(2, 6, 12, dtype=D64)
    am = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    keep = torch.from_numpy(padding_mask(am))  # (B, 1, 1, S)
    out = ours(x, ctx, keep)
    exp, _ = ref(x, ctx, ctx, key_padding_mask=layers.keep_mask_to_mha_mask(keep[:, 0, 0]))
    assert out.shape == (2, 3, 12) and torch.isfinite(out).all()
    assert_close(out, exp, atol=1e-12, rtol=1e-12)


def test_numpy_multi_head_attention_matches_torch_mha():
    ours, ref = _pair(16, 4, seed=2)
    x, ctx = torch.randn(2, 4, 16, dtype=D64), torch.randn(2, 7, 16, dtype=D64)
    out, w = heads.multi_head_attention(
        x.numpy(), **_numpy_weights(ours), n_heads=4, context=ctx.numpy(), return_weights=True
    )
    exp, exp_w = ref(x, ctx, ctx, average_attn_weights=False)
    assert np.isfinite(out).all()
    assert_close(out, exp, atol=1e-12, rtol=1e-12)
    assert_close(w, exp_w, atol=1e-12, rtol=1e-12)
    # the NumPy function and the module agree on the self-attention causal case too
    out2 = heads.multi_head_attention(x.numpy(), **_numpy_weights(ours), n_heads=4, causal=True)
    assert_close(out2, ours(x, causal=True), atol=1e-12, rtol=1e-12)


# --- against F.scaled_dot_product_attention --------------------------------------------------


@pytest.mark.parametrize("H,H_kv", [(4, 4), (4, 2), (6, 1)])
def test_sdpa_gqa_matches_torch_enable_gqa(H, H_kv):
    torch.manual_seed(3)
    q = torch.randn(2, H, 5, 8, dtype=D64)
    k, v = torch.randn(2, H_kv, 7, 8, dtype=D64), torch.randn(2, H_kv, 7, 8, dtype=D64)
    keep = torch.rand(2, 1, 5, 7) > 0.3
    keep[..., -1] = True
    exp = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
    got = layers.scaled_dot_product_attention(q, k, v, keep)
    assert torch.isfinite(got).all()
    assert_close(got, exp, atol=1e-12, rtol=1e-12)
    got_np = heads.grouped_query_attention(q.numpy(), k.numpy(), v.numpy(), keep.numpy())
    assert_close(got_np, exp, atol=1e-12, rtol=1e-12)
    # causal (square) and an additive float mask
    exp_c = F.scaled_dot_product_attention(
        q, k[:, :, :5], v[:, :, :5], is_causal=True, enable_gqa=True
    )
    assert_close(
        layers.scaled_dot_product_attention(q, k[:, :, :5], v[:, :, :5], causal=True),
        exp_c,
        atol=1e-12,
        rtol=1e-12,
    )
    add = torch.randn(1, H, 5, 7, dtype=D64)
    exp_a = F.scaled_dot_product_attention(q, k, v, attn_mask=add, enable_gqa=True)
    assert_close(layers.scaled_dot_product_attention(q, k, v, add), exp_a, atol=1e-12, rtol=1e-12)


def test_module_gqa_matches_sdpa_enable_gqa():
    torch.manual_seed(4)
    m = layers.MultiHeadAttention(16, 4, n_kv_heads=2, bias=True).double().eval()
    x = torch.randn(2, 6, 16, dtype=D64)
    q = m.q_proj(x).view(2, 6, 4, 4).transpose(1, 2)
    k = m.k_proj(x).view(2, 6, 2, 4).transpose(1, 2)
    v = m.v_proj(x).view(2, 6, 2, 4).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    exp = m.o_proj(o.transpose(1, 2).reshape(2, 6, 16))
    assert_close(m(x, causal=True), exp, atol=1e-12, rtol=1e-12)


# --- hand-derived cases -----------------------------------------------------------------------


def test_gqa_head_order_is_0011():
    q = np.zeros((1, 4, 1, 2))
    k = np.zeros((1, 2, 3, 2))
    v = np.stack([np.zeros((3, 2)), np.ones((3, 2))])[None]  # KV head 0 all 0, head 1 all 1
    out = heads.grouped_query_attention(q, k, v)
    assert_close(out[0, :, 0, 0], [0, 0, 1, 1], atol=0, rtol=0)
    out_t = layers.scaled_dot_product_attention(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)
    )
    assert_close(out_t[0, :, 0, 0], [0, 0, 1, 1], atol=0, rtol=0)
    assert_close(layers.repeat_kv(torch.from_numpy(v), 2)[0, :, 0, 0], [0, 0, 1, 1], atol=0, rtol=0)


def test_scale_is_by_head_dim_not_d_model():
    m = layers.MultiHeadAttention(16, 4).double().eval()
    with torch.no_grad():
        for lin in (m.q_proj, m.k_proj, m.v_proj, m.o_proj):
            lin.weight.copy_(torch.eye(16))
    x = torch.zeros(1, 1, 16, dtype=D64)
    x[0, 0, :4] = 1.0  # head 0: q = [1, 1, 1, 1]
    ctx = torch.zeros(1, 2, 16, dtype=D64)
    ctx[0, 0, :4] = 1.0  # k0 = v0 = [1, 1, 1, 1]; token 1: k1 = v1 = 0
    out = m(x, ctx)
    # q.k0 / sqrt(4) = 2 -> weight e^2 / (e^2 + 1) = 0.88079708; sqrt(16) would give 0.73105858
    assert_close(out[0, 0, :4], [0.88079708] * 4, atol=1e-8, rtol=0)
    assert abs(out[0, 0, 0].item() - 0.73105858) > 0.1
    eye = np.eye(16)
    out_np = heads.multi_head_attention(
        x.numpy(), eye, eye, eye, eye, n_heads=4, context=ctx.numpy()
    )
    assert_close(out_np[0, 0, :4], [0.88079708] * 4, atol=1e-8, rtol=0)


def test_dropout_only_in_training():
    m = layers.MultiHeadAttention(1, 1, dropout=0.5).double()
    with torch.no_grad():
        m.q_proj.weight.zero_()
        m.k_proj.weight.zero_()  # q = k = 0: uniform weights
        m.v_proj.weight.fill_(1.0)
        m.o_proj.weight.fill_(1.0)
    x = torch.tensor([[[1.0], [3.0]]], dtype=D64)  # v = [1, 3]
    m.eval()
    for _ in range(5):
        out = m(x)
        assert torch.equal(out, torch.full_like(out, 2.0))
    m.train()
    torch.manual_seed(0)
    seen = set()
    for _ in range(20):
        # each weight 0.5 is dropped (0) or kept and scaled to 1: outputs in {0, 1, 3, 4}
        vals = m(x).flatten().tolist()
        assert all(vv in (0.0, 1.0, 3.0, 4.0) for vv in vals), vals
        seen.update(vals)
    assert len(seen) > 1


# --- low precision and empty rows -----------------------------------------------------------


def test_fp16_filled_masks_use_finfo_min_and_never_minus_inf():
    fmin = torch.finfo(torch.float16).min
    assert torch.isinf(
        torch.tensor(fmin, dtype=torch.float16) + torch.tensor(-16.0, dtype=torch.float16)
    )
    assert torch.isinf(torch.tensor(-1e9, dtype=torch.float16))  # -1e9 is not representable
    causal = torch.from_numpy(causal_mask(4))
    pad = torch.tensor([True, True, False, False])[None, None, None, :]
    add = layers.keep_mask_to_additive(causal, pad, dtype=torch.float16)
    assert add.dtype == torch.float16 and torch.isfinite(add).all()
    assert set(add.unique().tolist()) == {fmin, 0.0}
    naive = layers.keep_mask_to_additive(
        causal, dtype=torch.float16
    ) + layers.keep_mask_to_additive(pad, dtype=torch.float16)
    assert torch.isinf(naive).any()  # what combine-first avoids


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_fully_masked_rows_are_finite_zero(dtype):
    torch.manual_seed(5)
    m = layers.MultiHeadAttention(16, 4, bias=False).to(dtype).eval()
    x = torch.randn(2, 4, 16, dtype=dtype)
    keep = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    keep[0, 0, 1] = False  # query 1 of batch 0 sees nothing
    out = m(x, mask=keep)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert torch.equal(out[0, 1], torch.zeros(16, dtype=dtype))  # no bias: o_proj(0) = 0
    # the library's additive fp16/bf16 mask through torch's own SDPA also stays finite
    q = torch.randn(1, 2, 3, 8, dtype=dtype)
    keep2 = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    add = layers.keep_mask_to_additive(keep2, torch.from_numpy(causal_mask(3)), dtype=dtype)
    assert torch.isfinite(F.scaled_dot_product_attention(q, q, q, attn_mask=add)).all()
    got = layers.scaled_dot_product_attention(q, q, q, keep2, causal=True)
    assert torch.isfinite(got).all()
    assert torch.equal(got[..., 1, :], torch.zeros_like(got[..., 1, :]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_error_within_twice_plain(dtype):
    torch.manual_seed(6)
    q64, k64, v64 = (torch.randn(2, 4, 16, 32, dtype=D64) for _ in range(3))
    exact = heads.grouped_query_attention(q64.numpy(), k64.numpy(), v64.numpy(), causal=True)
    q, k, v = q64.to(dtype), k64.to(dtype), v64.to(dtype)
    got = layers.scaled_dot_product_attention(q, k, v, causal=True)
    assert got.dtype == dtype and torch.isfinite(got).all()
    s = (q @ k.transpose(-1, -2)) / math.sqrt(32)  # plain same-dtype implementation
    s = s.masked_fill(~torch.from_numpy(causal_mask(16)), float("-inf"))
    plain = torch.softmax(s, -1) @ v
    assert_low_precision_close(got, exact, plain=plain, floor=torch.finfo(dtype).eps)


def test_empty_rows_zero_forward_and_finite_backward():
    q = torch.randn(1, 1, 3, 4, dtype=D64, requires_grad=True)
    k = torch.randn(1, 1, 3, 4, dtype=D64, requires_grad=True)
    v = torch.randn(1, 1, 3, 4, dtype=D64, requires_grad=True)
    keep = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    out, w = layers.scaled_dot_product_attention(q, k, v, keep, return_weights=True)
    assert torch.equal(out[0, 0, 1], torch.zeros(4, dtype=D64))
    assert torch.equal(w[0, 0, 1], torch.zeros(3, dtype=D64))
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.equal(q.grad[0, 0, 1], torch.zeros(4, dtype=D64))
    add = torch.tensor([[0.0, -math.inf, -math.inf]]).expand(3, 3).clone()
    add[1] = -math.inf  # every score -inf: also an empty row
    out2 = layers.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), add.double())
    assert torch.equal(out2[0, 0, 1], torch.zeros(4, dtype=D64))
    assert_close(out2[0, 0, 0], v[0, 0, 0], atol=1e-15, rtol=0)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=20)
@given(
    H_kv=st.sampled_from([1, 2, 4]),
    L=st.integers(1, 4),
    S=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    causal=st.booleans(),
)
def test_gqa_equals_mha_on_repeat_interleaved_kv(H_kv, L, S, seed, causal):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(2, 4, L, 3))
    k, v = rng.normal(size=(2, H_kv, S, 3)), rng.normal(size=(2, H_kv, S, 3))
    got = heads.grouped_query_attention(q, k, v, causal=causal)
    n = 4 // H_kv
    k_rep = np.stack([k[:, h // n] for h in range(4)], axis=1)  # head h reads KV head h // n
    v_rep = np.stack([v[:, h // n] for h in range(4)], axis=1)
    exp = np.stack(
        [
            heads.scaled_dot_product_attention(q[:, h], k_rep[:, h], v_rep[:, h], causal=causal)
            for h in range(4)
        ],
        axis=1,
    )
    assert np.isfinite(got).all()
    assert_close(got, exp, atol=1e-13, rtol=0)
    if H_kv == 4:  # n_kv_heads == n_heads is plain MHA
        assert_close(
            got, heads.scaled_dot_product_attention(q, k, v, causal=causal), atol=0, rtol=0
        )


@settings(max_examples=15)
@given(
    L=st.integers(2, 6),
    cut=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    n_kv=st.sampled_from([1, 2, 4]),
)
def test_causal_outputs_ignore_future_tokens(L, cut, seed, n_kv):
    cut = min(cut, L - 1)
    torch.manual_seed(seed)
    m = (
        layers.MultiHeadAttention(8, 4, n_kv_heads=n_kv, bias=True, rope=layers.RotaryEmbedding())
        .double()
        .eval()
    )
    x = torch.randn(1, L, 8, dtype=D64)
    y = x.clone()
    y[:, cut:] = torch.randn(1, L - cut, 8, dtype=D64) * 10
    a, b = m(x, causal=True), m(y, causal=True)
    assert torch.isfinite(a).all()
    assert_close(a[:, :cut], b[:, :cut], atol=1e-12, rtol=0)


@settings(max_examples=15)
@given(L=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_permutation_equivariance_without_positions(L, seed):
    torch.manual_seed(seed)
    m = layers.MultiHeadAttention(8, 2, n_kv_heads=1, bias=True).double().eval()
    x = torch.randn(2, L, 8, dtype=D64)
    perm = torch.randperm(L)
    assert_close(m(x[:, perm]), m(x)[:, perm], atol=1e-12, rtol=0)


# --- bad input ----------------------------------------------------------------------------------


def test_bad_input_errors_name_the_shapes():
    with pytest.raises(ValueError, match="n_heads 3 must divide d_model 16"):
        layers.MultiHeadAttention(16, 3)
    with pytest.raises(ValueError, match="n_kv_heads 3 must divide n_heads 4"):
        layers.MultiHeadAttention(16, 4, n_kv_heads=3)
    assert layers.MultiHeadAttention(16, 3, head_dim=8).q_proj.out_features == 24
    q = torch.zeros(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"q has head_dim 8 but k has 4"):
        layers.scaled_dot_product_attention(q, torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"q has head_dim 8 but k has 4"):
        heads.grouped_query_attention(q.numpy(), np.zeros((1, 2, 3, 4)), np.zeros((1, 2, 3, 4)))
    with pytest.raises(ValueError, match=r"n_kv_heads 3 must divide n_heads 2"):
        heads.grouped_query_attention(q.numpy(), np.zeros((1, 3, 3, 8)), np.zeros((1, 3, 3, 8)))
    with pytest.raises(ValueError, match=r"mask of shape \(1, 1, 1, 5\).*\(1, 2, 3, 3\)"):
        layers.scaled_dot_product_attention(q, q, q, torch.ones(1, 1, 1, 5, dtype=torch.bool))
    m = layers.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 1, 4\).*\(1, 2, 3, 3\)"):
        m(torch.zeros(1, 3, 8), mask=torch.ones(2, 1, 1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"x must be \(B, L, d_model=8\).*\(1, 3, 6\)"):
        m(torch.zeros(1, 3, 6))
    mr = layers.MultiHeadAttention(8, 2, rope=layers.RotaryEmbedding())
    with pytest.raises(ValueError, match=r"positions of shape \(2,\).*3"):
        mr(torch.zeros(1, 3, 8), positions=torch.arange(2))
    with pytest.raises(ValueError, match="mask"):
        heads.multi_head_attention(
            np.zeros((1, 3, 4)), *[np.eye(4)] * 4, n_heads=2, mask=np.ones((2, 2), dtype=bool)
        )
    with pytest.raises(ValueError, match=r"w_k must have shape \(d_in=4"):
        heads.multi_head_attention(
            np.zeros((1, 3, 4)), np.eye(4), np.eye(3), np.eye(4), np.eye(4), n_heads=2
        )


def test_split_merge_heads_roundtrip_and_layout():
    x = np.arange(2 * 3 * 8).reshape(2, 3, 8)
    s = heads.split_heads(x, 4)
    assert s.shape == (2, 4, 3, 2)
    assert_close(s[0, 1, 0], x[0, 0, 2:4], atol=0, rtol=0)  # head 1 = features 2..3
    assert_close(heads.merge_heads(s), x, atol=0, rtol=0)
    with pytest.raises(ValueError, match="n_heads 3 must divide the feature size 8"):
        heads.split_heads(x, 3)


# --- the cores, against independent references ----------------------------------------------


def _torch_mha(d_model, n_heads, seed):
    """torch's nn.MultiheadAttention (random biases) and its weights in the x @ W layout."""
    torch.manual_seed(seed)
    ref = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=D64).eval()
    with torch.no_grad():
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    w = ref.in_proj_weight.detach().numpy()
    b = ref.in_proj_bias.detach().numpy()
    d = d_model
    params = dict(
        w_q=w[:d].T,
        w_k=w[d : 2 * d].T,
        w_v=w[2 * d :].T,
        w_o=ref.out_proj.weight.detach().numpy().T,
        b_q=b[:d],
        b_k=b[d : 2 * d],
        b_v=b[2 * d :],
        b_o=ref.out_proj.bias.detach().numpy(),
    )
    return ref, params


def test_split_heads_core_matches_index_formula():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 12))
    got = heads.split_heads_core(x, 4)
    assert got.shape == (2, 4, 3, 3)
    for h in range(4):
        for d in range(3):
            # head h, dim d is feature h * D + d (torch's nn.MultiheadAttention convention)
            assert np.array_equal(got[:, h, :, d], x[:, :, h * 3 + d])


def test_merge_heads_core_is_concat_of_heads():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4, 3, 5))  # (B, H, L, D)
    expected = np.concatenate([x[:, h] for h in range(4)], axis=-1)  # Concat(head_1..head_H)
    assert np.array_equal(heads.merge_heads_core(x), expected)
    assert np.array_equal(heads.split_heads_core(expected, 4), x)
    assert heads.merge_heads_core(np.zeros((2, 0, 5))).shape == (0, 10)  # L = 0


def test_repeat_kv_core_interleaves_0011():
    v = np.arange(2).reshape(1, 2, 1, 1) * np.ones((1, 2, 3, 4))  # KV head h is all h
    got = heads.repeat_kv_core(v, 2)
    assert_close(got[0, :, 0, 0], [0, 0, 1, 1], atol=0, rtol=0)
    assert_close(heads.repeat_kv(v, 3)[0, :, 0, 0], [0, 0, 0, 1, 1, 1], atol=0, rtol=0)


@pytest.mark.parametrize("H,H_kv", [(4, 4), (4, 2), (6, 1)])
def test_gqa_core_matches_torch_enable_gqa(H, H_kv):
    torch.manual_seed(7)
    q = torch.randn(2, H, 5, 8, dtype=D64)
    k, v = torch.randn(2, H_kv, 7, 8, dtype=D64), torch.randn(2, H_kv, 7, 6, dtype=D64)
    keep = torch.rand(2, 1, 5, 7) > 0.3
    keep[..., 0] = True
    exp = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
    out, w = heads.grouped_query_attention_core(q.numpy(), k.numpy(), v.numpy(), keep.numpy())
    assert np.isfinite(out).all() and out.shape == (2, H, 5, 6)
    assert_close(out, exp, atol=1e-12, rtol=1e-12)
    assert_close(w.sum(-1), np.ones((2, H, 5)), atol=1e-12, rtol=0)
    add = torch.randn(1, H, 5, 7, dtype=D64)
    exp_a = F.scaled_dot_product_attention(q, k, v, attn_mask=add, scale=0.3, enable_gqa=True)
    out_a, _ = heads.grouped_query_attention_core(q.numpy(), k.numpy(), v.numpy(), add.numpy(), 0.3)
    assert_close(out_a, exp_a, atol=1e-12, rtol=1e-12)


def test_gqa_core_matches_float64_loop_over_heads():
    rng = np.random.default_rng(2)
    q = rng.normal(size=(6, 3, 4))
    k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    out, _ = heads.grouped_query_attention_core(q, k, v)
    for h in range(6):
        g = h // 3  # 6 query heads, 2 KV heads
        s = q[h] @ k[g].T / math.sqrt(4)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        assert_close(out[h], p @ v[g], atol=1e-14, rtol=0)


@pytest.mark.parametrize("cross", [False, True])
def test_mha_core_matches_torch_mha(cross):
    ref, params = _torch_mha(16, 4, seed=8)
    x = torch.randn(2, 4, 16, dtype=D64)
    ctx = torch.randn(2, 7, 16, dtype=D64) if cross else x
    keep = torch.rand(2, 1, 1, ctx.shape[1]) > 0.3
    keep[..., 0] = True
    out, w = heads.multi_head_attention_core(
        x.numpy(), ctx.numpy(), **params, n_heads=4, n_kv_heads=4, mask=keep.numpy()
    )
    exp, exp_w = ref(x, ctx, ctx, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False)
    assert np.isfinite(out).all()
    assert_close(out, exp, atol=1e-12, rtol=1e-12)
    assert_close(w, exp_w, atol=1e-12, rtol=1e-12)
    got = heads.multi_head_attention(
        x.numpy(), **params, n_heads=4, context=ctx.numpy(), mask=keep.numpy()
    )
    assert_close(got, exp, atol=1e-12, rtol=1e-12)


def test_mha_core_gqa_matches_float64_formula():
    # H = 4 query heads over H_kv = 2 KV heads, written out head by head in float64
    rng = np.random.default_rng(3)
    d_model, D = 8, 2
    x, ctx = rng.normal(size=(3, d_model)), rng.normal(size=(5, d_model))
    w_q, w_o = rng.normal(size=(d_model, 4 * D)), rng.normal(size=(4 * D, d_model))
    w_k, w_v = rng.normal(size=(d_model, 2 * D)), rng.normal(size=(d_model, 2 * D))
    zeros = [np.zeros(n) for n in (4 * D, 2 * D, 2 * D, d_model)]
    out, _ = heads.multi_head_attention_core(x, ctx, w_q, w_k, w_v, w_o, *zeros, 4, 2)
    heads_out = []
    for h in range(4):
        g = h // 2
        qh = x @ w_q[:, h * D : (h + 1) * D]
        kh, vh = ctx @ w_k[:, g * D : (g + 1) * D], ctx @ w_v[:, g * D : (g + 1) * D]
        s = qh @ kh.T / math.sqrt(D)
        p = np.exp(s - s.max(-1, keepdims=True))
        heads_out.append(p / p.sum(-1, keepdims=True) @ vh)
    expected = np.concatenate(heads_out, axis=-1) @ w_o
    assert_close(out, expected, atol=1e-12, rtol=0)
    got = heads.multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads=4, n_kv_heads=2, context=ctx)
    assert_close(got, expected, atol=1e-12, rtol=0)


# --- low precision ------------------------------------------------------------------------------


def test_mha_float16_projections_beyond_65504_are_computed_in_float32():
    # q = k = x @ w = 4 * 100 * 200 = 80000 per feature: inf in float16, exact in float32
    x = np.full((1, 2, 4), 100.0, dtype=np.float16)
    w_qk = np.full((4, 4), 200.0, dtype=np.float16)
    w_v = (np.eye(4) / 100).astype(np.float16)  # v = x / 100 = 1
    out = heads.multi_head_attention(x, w_qk, w_qk, w_v, np.eye(4, dtype=np.float16), n_heads=2)
    assert out.dtype == np.float16 and np.isfinite(out).all()
    assert_close(out, np.ones((1, 2, 4)), atol=1e-3, rtol=0)
    with np.errstate(over="ignore"):
        assert np.isinf(x @ w_qk).all()  # what a float16 projection would give


def test_mha_float16_error_within_twice_plain():
    rng = np.random.default_rng(4)
    x64, ctx64 = rng.normal(size=(2, 6, 16)), rng.normal(size=(2, 300, 16))
    w64 = [rng.normal(size=(16, 16)) / 4 for _ in range(4)]
    exact = heads.multi_head_attention(x64, *w64, n_heads=4, context=ctx64)
    x, ctx = x64.astype(np.float16), ctx64.astype(np.float16)
    w = [a.astype(np.float16) for a in w64]
    got = heads.multi_head_attention(x, *w, n_heads=4, context=ctx)
    assert got.dtype == np.float16 and np.isfinite(got).all()
    zeros = [np.zeros(16, np.float16)] * 4
    with np.errstate(all="ignore"):
        plain, _ = heads.multi_head_attention_core(x, ctx, *w, *zeros, 4, 4)  # all float16
    assert_low_precision_close(got, exact, plain=plain, floor=np.finfo(np.float16).eps)


# --- arguments: the one check layer ------------------------------------------------------------


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: heads.split_heads(np.zeros((2, 8)), 2.0), TypeError, "n_heads"),
        (lambda: heads.split_heads(np.zeros((2, 8)), True), TypeError, "n_heads"),
        (lambda: heads.split_heads(np.zeros((2, 8)), 0), ValueError, "n_heads"),
        (lambda: heads.split_heads(np.zeros(8), 2), ValueError, r"\(8,\)"),
        (lambda: heads.merge_heads(np.zeros((2, 8))), ValueError, r"\(2, 8\)"),
        (lambda: heads.repeat_kv(np.zeros((1, 2, 3, 4)), 2.5), TypeError, "n_rep"),
        (lambda: heads.repeat_kv(np.zeros((1, 2, 3, 4)), 0), ValueError, "n_rep"),
        (
            lambda: heads.multi_head_attention(np.zeros((1, 3, 4)), *[np.eye(4)] * 4, n_heads=2.0),
            TypeError,
            "n_heads",
        ),
        (
            lambda: heads.multi_head_attention(
                np.zeros((1, 3, 4)), *[np.eye(4)] * 4, n_heads=2, b_q=np.zeros(3)
            ),
            ValueError,
            r"b_q.*\(4,\)",
        ),
        (
            lambda: heads.multi_head_attention(
                np.zeros((1, 3, 4)), *[np.eye(4)] * 4, n_heads=2, context=np.zeros((1, 3, 5))
            ),
            ValueError,
            "context",
        ),
        (
            lambda: heads.multi_head_attention(
                np.full((1, 3, 4), np.nan), *[np.eye(4)] * 4, n_heads=2
            ),
            ValueError,
            "x .*nan",
        ),
        (
            lambda: heads.multi_head_attention(
                np.zeros((1, 3, 4)), *[np.eye(4)] * 4, n_heads=2, causal=1
            ),
            TypeError,
            "causal",
        ),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_numpy_integer_and_0d_counts_are_accepted():
    x = np.arange(16.0).reshape(2, 8)
    expected = heads.split_heads(x, 4)
    assert np.array_equal(heads.split_heads(x, np.int64(4)), expected)
    assert np.array_equal(heads.split_heads(x, np.array(4)), expected)


# --- moved from test_robustness (A14, B) --------------------------------------------------------


def test_w_o_width_checked():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 8))
    w = [rng.normal(size=(8, 8)) for _ in range(3)]
    with pytest.raises(ValueError, match="w_o"):
        heads.multi_head_attention(x, *w, rng.normal(size=(8, 3)), n_heads=2)


def test_numpy_functions_accept_tensors_and_reject_strings():
    w = np.ones((2, 2))
    with pytest.raises(TypeError, match="x"):
        heads.multi_head_attention(np.array([["a", "b"]]), w, w, w, w, n_heads=1)
    with pytest.raises(ValueError, match="q has 0 heads"):
        heads.grouped_query_attention(np.zeros((0, 3, 4)), np.zeros((2, 3, 4)), np.zeros((2, 3, 4)))
    q = torch.randn(2, 3, 4, dtype=D64, requires_grad=True)
    got = heads.grouped_query_attention(q, q, q)
    assert_close(got, heads.grouped_query_attention(*(q.detach().numpy(),) * 3), atol=0, rtol=0)


def test_multi_head_attention_refuses_causal_cross_attention():
    r = np.random.default_rng(0)
    x, c = r.normal(size=(3, 8)), r.normal(size=(5, 8))
    w = [r.normal(size=(8, 8)) for _ in range(4)]
    with pytest.raises(ValueError, match="causal=True needs self-attention"):
        heads.multi_head_attention(x, *w, n_heads=2, context=c, causal=True)
    with pytest.raises(TypeError, match="return_weights"):
        heads.multi_head_attention(x, *w, n_heads=2, return_weights="no")
