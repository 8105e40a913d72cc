"""Tests for the mask helpers and attention function of attnbook.layers.

References: torch.nn.functional.scaled_dot_product_attention, torch.repeat_interleave, the NumPy
attention of attnbook.attention (float64) and hand-written masks.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import layers, positional
from attnbook.attention import scaled_dot_product_attention as np_sdpa
from attnbook.kv_cache import SlidingWindowCache
from attnbook.masks import causal_mask, sliding_window_mask
from attnbook.testing import assert_close

D64 = torch.float64


def test_repeat_kv_equals_repeat_interleave():
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(layers.repeat_kv(x, 4), torch.repeat_interleave(x, 4, dim=1))
    assert layers.repeat_kv(x, 1) is x
    with pytest.raises(ValueError, match=r"\(B, H_kv, S, D\)"):
        layers.repeat_kv(torch.zeros(3, 4, 5), 2)


def test_mha_mask_polarity_is_inverted_once():
    keep = torch.from_numpy(causal_mask(3))
    mha = layers.keep_mask_to_mha_mask(keep)
    assert torch.equal(
        mha, torch.tensor([[False, True, True], [False, False, True], [False, False, False]])
    )
    with pytest.raises(TypeError, match="boolean"):
        layers.keep_mask_to_mha_mask(torch.zeros(2, 2))


def test_keep_mask_to_additive():
    keep = torch.tensor([[True, False], [False, False]])
    add = layers.keep_mask_to_additive(keep, None, dtype=torch.bfloat16)
    fmin = torch.finfo(torch.bfloat16).min
    assert torch.equal(add, torch.tensor([[0.0, fmin], [fmin, fmin]], dtype=torch.bfloat16))
    assert layers.keep_mask_to_additive(None, dtype=torch.float32) is None
    with pytest.raises(ValueError, match=r"shapes \(2, 2\), \(3,\)"):
        layers.keep_mask_to_additive(keep, torch.ones(3, dtype=torch.bool), dtype=torch.float32)
    with pytest.raises(TypeError, match="floating"):
        layers.keep_mask_to_additive(keep, dtype=torch.int32)


@pytest.mark.parametrize("L,S,window", [(3, 3, None), (2, 5, None), (4, 6, 2), (5, 5, 3)])
def test_position_keep_mask_matches_numpy_masks(L, S, window):
    got = layers.position_keep_mask(torch.arange(S - L, S), torch.arange(S), window=window)
    exp = causal_mask(L, S) if window is None else sliding_window_mask(L, window, S)
    assert torch.equal(got, torch.from_numpy(exp))
    per_row = layers.position_keep_mask(
        torch.arange(S - L, S)[None].expand(2, L), torch.arange(S)[None].expand(2, S), window=window
    )
    assert per_row.shape == (2, 1, L, S) and torch.equal(per_row[1, 0], torch.from_numpy(exp))


@settings(max_examples=20)
@given(
    L=st.integers(1, 5),
    S=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    H_kv=st.sampled_from([1, 2]),
)
def test_bottom_right_causal_matches_torch_with_explicit_mask(L, S, seed, H_kv):
    # torch's is_causal aligns top-left when L != S; the book aligns bottom-right, so the
    # reference gets the mask explicitly
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2, L, 4, dtype=D64, generator=g)
    k = torch.randn(1, H_kv, S, 4, dtype=D64, generator=g)
    v = torch.randn(1, H_kv, S, 3, dtype=D64, generator=g)
    keep = torch.from_numpy(causal_mask(L, S))
    got = layers.scaled_dot_product_attention(q, k, v, causal=True)
    assert torch.isfinite(got).all()
    exp_np = np_sdpa(
        q.numpy(),
        layers.repeat_kv(k, 2 // H_kv).numpy(),
        layers.repeat_kv(v, 2 // H_kv).numpy(),
        causal=True,
    )
    assert_close(got, exp_np, atol=1e-12, rtol=0)
    if L <= S:  # every row sees a key; torch's SDPA is defined there
        exp = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
        assert_close(got, exp, atol=1e-12, rtol=0)


def test_weights_rows_sum_to_one_or_zero():
    q = torch.randn(2, 2, 4, 8, dtype=D64)
    keep = torch.rand(2, 1, 4, 4) > 0.5
    _, w = layers.scaled_dot_product_attention(q, q, q, keep, return_weights=True)
    sums = w.sum(-1)
    visible = keep.expand(2, 2, 4, 4).any(-1)
    assert_close(sums, visible.double(), atol=1e-12, rtol=0)
    assert torch.equal(w[~keep.expand(2, 2, 4, 4)], torch.zeros_like(w[~keep.expand(2, 2, 4, 4)]))


def test_sdpa_argument_errors():
    q = torch.zeros(1, 2, 3, 4)
    with pytest.raises(
        ValueError, match=r"q must have shape \(B, H, seq, head_dim\); got shape \(2, 3, 4\)"
    ):
        layers.scaled_dot_product_attention(q[0], q, q)
    with pytest.raises(ValueError, match=r"k and v must agree"):
        layers.scaled_dot_product_attention(q, q, torch.zeros(1, 2, 5, 4))
    with pytest.raises(ValueError, match="dropout_p"):
        layers.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    with pytest.raises(TypeError, match="keep-mask or an additive"):
        layers.scaled_dot_product_attention(q, q, q, torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="batch"):
        layers.scaled_dot_product_attention(q, torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 3, 4))


def test_module_argument_errors():
    with pytest.raises(ValueError, match="dropout"):
        layers.MultiHeadAttention(8, 2, dropout=1.5)
    with pytest.raises(TypeError, match="RotaryEmbedding"):
        layers.MultiHeadAttention(8, 2, rope=10000.0)
    with pytest.raises(ValueError, match="head_dim must be even"):
        layers.MultiHeadAttention(6, 2, rope=layers.RotaryEmbedding())
    m = layers.MultiHeadAttention(8, 2, rope=layers.RotaryEmbedding())
    with pytest.raises(ValueError, match="self-attention only"):
        m(torch.zeros(1, 2, 8), torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match=r"context must be \(B=1, S, d_model=8\)"):
        layers.MultiHeadAttention(8, 2)(torch.zeros(1, 2, 8), torch.zeros(2, 3, 8))
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even"):
        layers.MultiHeadLatentAttention(8, 2, 4, 4, 3, 4)


def test_rotary_embedding_module_matches_function():
    x = torch.randn(1, 2, 5, 8, dtype=D64)
    pos = torch.arange(3, 8)
    rope = layers.RotaryEmbedding(base=500000.0, interleaved=True)
    assert torch.equal(rope(x, pos), layers.apply_rope(x, pos, base=500000.0, interleaved=True))
    assert list(rope.parameters()) == []


# ---- learned absolute positions ---------------------------------------------------------------
# References: a table whose entries are known by construction (weight[p, c] = 100 p + c), the
# hand-counted gradient of a sum, torch.nn.Embedding's own draws, and the state-dict names of
# Hugging Face's BertEmbeddings.


def _numbered_table(max_seq_len, d_model):
    emb = layers.LearnedPositionalEmbedding(max_seq_len, d_model)
    with torch.no_grad():  # row p holds 100 p + c in column c
        emb.weight.copy_(100.0 * torch.arange(max_seq_len)[:, None] + torch.arange(d_model))
    return emb


def test_learned_positions_look_up_row_p_for_position_p():
    emb = _numbered_table(6, 3)
    pos = torch.tensor([[3, 0, 2], [5, 5, 1]])  # (B, L), a repeated position included
    expected = torch.tensor(
        [
            [[300.0, 301, 302], [0, 1, 2], [200, 201, 202]],
            [[500, 501, 502], [500, 501, 502], [100, 101, 102]],
        ]
    )
    out = emb(pos)
    assert out.shape == (2, 3, 3) and out.dtype == torch.float32
    assert torch.equal(out, expected)
    assert torch.equal(emb(np.array([4])), torch.tensor([[400.0, 401, 402]]))  # NumPy input
    assert emb(torch.zeros(0, dtype=torch.long)).shape == (0, 3)  # no positions, no rows
    assert emb.double()(torch.tensor([1])).dtype == D64  # follows the table's dtype


def test_learned_positions_are_a_parameter_drawn_like_nn_embedding():
    torch.manual_seed(3)
    emb = layers.LearnedPositionalEmbedding(7, 5)
    torch.manual_seed(3)
    ref = torch.nn.Embedding(7, 5)
    assert torch.equal(emb.weight, ref.weight)  # same N(0, 1) draws
    assert [name for name, _ in emb.named_parameters()] == ["weight"]
    assert emb.weight.requires_grad and emb.weight.shape == (7, 5)
    assert "max_seq_len=7, d_model=5" in repr(emb)


def test_learned_positions_gradient_reaches_only_the_rows_used():
    emb = layers.LearnedPositionalEmbedding(5, 2)
    emb(torch.tensor([[0, 2, 2], [2, 0, 3]])).sum().backward()
    # d(sum)/d weight[p, c] = number of times position p was looked up (counted by hand)
    expected = torch.tensor([[2.0, 2], [0, 0], [3, 3], [1, 1], [0, 0]])
    assert torch.equal(emb.weight.grad, expected)


def test_learned_positions_rows_never_used_stay_as_initialised():
    torch.manual_seed(0)
    emb = layers.LearnedPositionalEmbedding(8, 4)
    before = emb.weight.detach().clone()
    target = torch.randn(5, 4)
    opt = torch.optim.Adam(emb.parameters(), lr=0.1)
    for _ in range(20):  # fit rows 0..4 only
        opt.zero_grad()
        ((emb(torch.arange(5)) - target) ** 2).sum().backward()
        opt.step()
    assert (emb.weight[:5] - before[:5]).abs().min() > 0  # trained rows moved
    assert torch.equal(emb.weight[5:], before[5:])  # rows 5..7: exactly the initial draws


def test_learned_positions_reject_a_position_without_a_row():
    emb = layers.LearnedPositionalEmbedding(4, 2)
    assert emb(torch.tensor([3])).shape == (1, 2)  # the last row exists
    with pytest.raises(ValueError, match=r"position 4.*max_seq_len = 4.*0 to 3"):
        emb(torch.arange(5))
    with pytest.raises(ValueError, match="positions"):
        emb(torch.tensor([-1, 0]))
    with pytest.raises(TypeError, match="positions"):
        emb(torch.tensor([0.0, 1.0]))


@pytest.mark.parametrize(
    "args, exc, name",
    [
        ((0, 4), ValueError, "max_seq_len"),
        ((4, 0), ValueError, "d_model"),
        ((4.0, 4), TypeError, "max_seq_len"),
        ((4, True), TypeError, "d_model"),
    ],
)
def test_learned_positions_constructor_arguments(args, exc, name):
    with pytest.raises(exc, match=name):
        layers.LearnedPositionalEmbedding(*args)


def test_module_additive_mask_combined_with_causal():
    torch.manual_seed(7)
    m = layers.MultiHeadAttention(8, 2, bias=True).double().eval()
    x = torch.randn(2, 4, 8, dtype=D64)
    pad = torch.tensor([[True] * 4, [True, True, True, False]])[:, None, None, :]  # (B, 1, 1, S)
    add = layers.keep_mask_to_additive(pad, dtype=D64)  # (B, 1, 1, S) float
    exp = m(x, mask=pad, causal=True)
    got = m(x, mask=add, causal=True)
    assert torch.isfinite(got).all()
    assert_close(got, exp, atol=1e-12, rtol=0)


# --- argument checks and low precision (moved from test_robustness.py: A3-A13, LOW, B) ---


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a3_torch_sdpa_low_precision_scores_do_not_overflow(dtype, sign):
    q = torch.full((1, 1, 2, 64), 40.0, dtype=dtype)
    k = torch.full((1, 1, 3, 64), sign * 40.0, dtype=dtype)
    v = torch.tensor([1.0, 2.0, 6.0], dtype=dtype).view(1, 1, 3, 1)
    out = layers.scaled_dot_product_attention(q, k, v)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert_close(out, torch.full((1, 1, 2, 1), 3.0), atol=0, rtol=1e-2)
    mha_out = layers.MultiHeadAttention(64, 1).to(dtype)(torch.full((1, 2, 64), 40.0, dtype=dtype))
    assert torch.isfinite(mha_out).all()


def test_a5_negative_positions_in_torch_functions():
    with pytest.raises(ValueError, match="positions must be >= 0"):
        layers.apply_rope(torch.randn(5, 4), torch.tensor([0, 1, -2, 3, 4]))
    with pytest.raises(ValueError, match="positions must be >= 0"):
        layers.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), positions=torch.tensor([-1, 0, 1]))
    with pytest.raises(ValueError, match="q_positions must be >= 0"):
        layers.position_keep_mask(torch.tensor([-1, 0]), torch.tensor([0, 1]))


def test_a8_torch_sdpa_rejects_nonfinite_scale_and_masks():
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    for scale in (math.nan, math.inf):
        with pytest.raises(ValueError, match="scale must be finite"):
            layers.scaled_dot_product_attention(q, k, v, scale=scale)
    for fill in (math.inf, math.nan):
        with pytest.raises(ValueError, match="additive mask .* nan or \\+inf"):
            layers.scaled_dot_product_attention(q, k, v, torch.full((3, 5), fill))
    with pytest.raises(ValueError, match="additive mask"):
        layers.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), mask=torch.full((3, 3), math.inf))


@pytest.mark.parametrize(
    "make",
    [
        lambda: layers.LayerNorm(4, eps=-1),
        lambda: layers.RMSNorm(4, eps=0.0),
        lambda: layers.LayerNorm(4, eps=math.nan),
    ],
)
def test_a9_torch_norm_eps_checked(make):
    with pytest.raises(ValueError, match="eps"):
        make()


def test_a12_window_without_causal_is_rejected():
    m = layers.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="causal=True"):
        m(torch.randn(1, 3, 8), window=1)
    with pytest.raises(ValueError, match="causal=True"):
        m(torch.randn(1, 3, 8), kv_cache=SlidingWindowCache(2))
    with pytest.raises(ValueError, match="causal=True"):
        layers.position_keep_mask(torch.arange(3), torch.arange(3), causal=False, window=2)


@pytest.mark.parametrize("base", [0.0, -1.0, 1.0, math.inf])
def test_a13_torch_rope_base_checked(base):
    with pytest.raises(ValueError, match="base"):
        layers.apply_rope(torch.ones(2, 4), torch.arange(2), base=base)


def test_a13_torch_rope_promotes_integer_input():
    x = torch.ones(3, 4, dtype=torch.long)
    got = layers.apply_rope(x, torch.arange(3))
    expected = positional.apply_rope(np.ones((3, 4)), np.arange(3))  # float64 reference
    assert got.is_floating_point()
    assert_close(got, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "make,exc,name",
    [
        (lambda: layers.MultiHeadAttention(8, 2.0), TypeError, "n_heads"),
        (lambda: layers.MultiHeadAttention(8.0, 2), TypeError, "d_model"),
        (lambda: layers.MultiHeadAttention(8, True), TypeError, "n_heads"),
        (lambda: layers.MultiHeadAttention(8, 2, head_dim=2.5), TypeError, "head_dim"),
        (lambda: layers.MultiHeadLatentAttention(16, 2, 8.5, 4, 2, 4), TypeError, "kv_lora_rank"),
        (lambda: layers.LayerNorm(2.5), TypeError, "d_model"),
        (lambda: layers.LayerNorm(-1), ValueError, "d_model"),
        (lambda: layers.repeat_kv(torch.zeros(1, 2, 3, 4), 2.5), TypeError, "n_rep"),
        (lambda: layers.repeat_kv(torch.zeros(1, 2, 3, 4), True), TypeError, "n_rep"),
        (
            lambda: layers.keep_mask_to_additive(torch.ones(2, dtype=torch.bool), dtype=np.float32),
            TypeError,
            "dtype",
        ),
        (lambda: SlidingWindowCache(2.5), TypeError, "window"),
        (lambda: SlidingWindowCache("3"), TypeError, "window"),
        (
            lambda: layers.position_keep_mask(torch.arange(3), torch.arange(3), window=2.5),
            TypeError,
            "window",
        ),
        (
            lambda: layers.position_keep_mask(
                torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long)
            ),
            ValueError,
            "batch",
        ),
    ],
)
def test_b_constructor_and_helper_arguments(make, exc, name):
    with pytest.raises(exc, match=name):
        make()


def test_b_torch_attention_dtypes():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(TypeError, match="share a dtype"):
        layers.scaled_dot_product_attention(q.half(), q, q)
    with pytest.raises(TypeError, match="q must be a floating"):
        layers.scaled_dot_product_attention(q.long(), q, q)
    with pytest.raises(TypeError, match="scale"):
        layers.scaled_dot_product_attention(q, q, q, scale="a")
    with pytest.raises(TypeError, match="dropout_p"):
        layers.scaled_dot_product_attention(q, q, q, dropout_p="a")
    with pytest.raises(ValueError, match="q has 0 heads"):
        layers.scaled_dot_product_attention(
            torch.zeros(1, 0, 3, 4), torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)
        )
    with pytest.raises(TypeError, match="x has dtype torch.float64"):
        layers.MultiHeadAttention(8, 2)(torch.randn(1, 3, 8, dtype=torch.float64))


def test_b_position_keep_mask_numpy_and_list_inputs():
    expected = torch.tensor([[True, False], [True, True]])
    for qp, kp in ((np.arange(2), np.arange(2)), ([0, 1], [0, 1])):
        got = layers.position_keep_mask(qp, kp)
        assert got.dtype == torch.bool and torch.equal(got, expected)


def test_b_mla_mask_arguments():
    torch.manual_seed(0)
    m = layers.MultiHeadLatentAttention(16, 2, 8, 4, 2, 4).eval()
    x = torch.randn(1, 3, 16)
    keep = [[True, False, False], [True, True, False], [True, True, True]]
    assert_close(m(x, mask=keep, causal=False), m(x, causal=True), atol=1e-6, rtol=0)
    with pytest.raises(TypeError, match="mask must be a boolean"):
        m(x, mask=torch.ones(3, 3))
    with pytest.raises(TypeError, match="mask must be a boolean keep-mask.*<U3"):
        m(x, mask="abc")  # was torch's raw "new(): invalid data type 'str'"


def test_low_non_bool_flags_rejected():
    with pytest.raises(TypeError, match="causal"):
        layers.scaled_dot_product_attention(*(torch.ones(1, 1, 2, 4),) * 3, causal="no")


# --- split_heads / merge_heads ---------------------------------------------------------------


def test_split_and_merge_heads_match_numpy_heads():
    from attnbook import heads

    x = torch.randn(2, 5, 12, dtype=D64)
    got = layers.split_heads(x, 3)
    assert got.shape == (2, 3, 5, 4)
    assert_close(got, heads.split_heads(x.numpy(), 3), atol=0, rtol=0)
    assert torch.equal(layers.merge_heads(got), x)
    with pytest.raises(ValueError, match="n_heads 5 must divide the feature size 12"):
        layers.split_heads(x, 5)
    with pytest.raises(TypeError, match="n_heads"):
        layers.split_heads(x, 3.0)
    with pytest.raises(ValueError, match=r"\(B, H, L, D\)"):
        layers.merge_heads(x)


def test_mha_forward_with_cache_equals_full_causal_pass():
    # the forward's cache branch: prefill 3 tokens, then 2 single steps == one causal pass
    from attnbook.kv_cache import KVCache

    torch.manual_seed(4)
    m = layers.MultiHeadAttention(16, 4, 2, rope=layers.RotaryEmbedding()).double().eval()
    x = torch.randn(2, 5, 16, dtype=D64)
    full, w_full = m(x, causal=True, need_weights=True)
    cache = KVCache()
    parts = [m(x[:, :3], causal=True, kv_cache=cache)]
    for t in (3, 4):
        out, w = m(x[:, t : t + 1], causal=True, kv_cache=cache, need_weights=True)
        parts.append(out)
    assert w.shape == (2, 4, 1, 5)
    assert_close(torch.cat(parts, 1), full, atol=1e-12, rtol=0)
    assert_close(w[:, :, 0], w_full[:, :, 4], atol=1e-12, rtol=0)


def test_mha_attention_mask_combines_and_checks():
    m = layers.MultiHeadAttention(8, 2)
    pos = torch.arange(3)
    keep = m.attention_mask(None, pos, pos, True, None)
    assert torch.equal(keep, torch.from_numpy(causal_mask(3)))
    pad = torch.tensor([True, True, False])
    assert torch.equal(m.attention_mask(pad, pos, pos, True, None), keep & pad)
    add = m.attention_mask(torch.zeros(3, 3), pos, pos, True, None)
    assert torch.equal(torch.isneginf(add), ~keep)
    with pytest.raises(ValueError, match="does not broadcast"):
        m.attention_mask(torch.ones(4, 4, dtype=torch.bool), pos, pos, True, None)
    with pytest.raises(TypeError, match="keep-mask or an additive"):
        m.attention_mask(torch.ones(3, 3, dtype=torch.long), pos, pos, True, None)


# ---------------------------------------------------------------- bad input found by review


@pytest.mark.parametrize(
    "make",
    [
        lambda: layers.MultiHeadAttention(8, 2, bias="no"),
        lambda: layers.MultiHeadAttention(8, 2, out_bias="no"),
        lambda: layers.LayerNorm(4, bias="no"),
        lambda: layers.RotaryEmbedding(interleaved="no"),
    ],
)
def test_a_flag_that_is_not_a_bool_is_refused(make):
    # "no" is truthy: read as a bool it would build the layer the caller did not ask for.
    with pytest.raises(TypeError, match="must be a bool"):
        make()


def test_flags_of_the_call_must_be_bools():
    q = torch.randn(1, 1, 2, 4)
    with pytest.raises(TypeError, match="return_weights"):
        layers.scaled_dot_product_attention(q, q, q, return_weights="no")
    m = layers.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="need_weights"):
        m(torch.randn(1, 3, 8), need_weights="no")


@pytest.mark.parametrize("shape", [(2, 0, 8), (0, 3, 8)])
def test_multi_head_attention_takes_an_empty_batch_or_sequence(shape):
    m = layers.MultiHeadAttention(8, 2)
    assert m(torch.randn(*shape)).shape == shape
    assert m(torch.randn(*shape), causal=True).shape == shape


def test_cross_attention_to_an_empty_source_outputs_zeros():
    m = layers.MultiHeadAttention(8, 2)  # no bias: an empty source gives exactly 0
    out = m(torch.randn(2, 3, 8), torch.randn(2, 0, 8))
    assert out.shape == (2, 3, 8) and torch.equal(out, torch.zeros(2, 3, 8))


def test_scores_that_overflow_are_an_error_not_nan():
    q = torch.randn(1, 1, 2, 4)
    with pytest.raises(ValueError, match="overflow to inf"):
        layers.scaled_dot_product_attention(q, q, q, scale=1e38)
    big = torch.full((1, 1, 2, 2), 1e20)
    with pytest.raises(ValueError, match="overflow to inf"):
        layers.scaled_dot_product_attention(big, big, torch.ones(1, 1, 2, 2))
    # nan inputs are passed through, as documented (finite=False): no error, a nan output
    bad = q.clone()
    bad[0, 0, 0, 0] = float("nan")
    assert torch.isnan(layers.scaled_dot_product_attention(bad, q, q)[0, 0, 0]).all()


def test_latent_attention_names_the_positions_the_caller_passed():
    m = layers.MultiHeadLatentAttention(8, 2, 4, 2, 2, 2)
    with pytest.raises(ValueError, match=r"positions of shape \(3, 3\)"):
        m(torch.randn(2, 3, 8), positions=torch.zeros(3, 3, dtype=torch.long))


def test_window_and_cache_are_checked_before_they_are_compared():
    m, x = layers.MultiHeadAttention(8, 2), torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match="window"):
        m(x, causal=True, window="3", kv_cache=SlidingWindowCache(3))
    with pytest.raises(TypeError, match="window"):
        m(x, causal=True, window=3.5, kv_cache=SlidingWindowCache(3))
    with pytest.raises(TypeError, match="kv_cache must be None or a cache"):
        m(x, kv_cache=object())
    with pytest.raises(ValueError, match="the kv_cache's window=3 requires causal=True"):
        m(x, kv_cache=SlidingWindowCache(3))


def test_rope_needs_a_pair_of_dimensions_in_torch_as_in_numpy():
    with pytest.raises(ValueError, match="head_dim must be >= 2"):
        layers.apply_rope(torch.randn(2, 3, 0), torch.arange(3))
    with pytest.raises(ValueError, match="head_dim must be >= 2"):
        positional.apply_rope(np.zeros((3, 0)), np.arange(3))


def test_positions_with_three_axes_are_refused():
    m = layers.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"positions must be \(L,\) or \(B, L\)"):
        m(torch.randn(1, 2, 8), positions=torch.zeros(1, 1, 2, dtype=torch.long))


@pytest.mark.parametrize("mask", ["causal", [[True], [True, False]]])
def test_a_mask_that_is_no_array_is_a_type_error_that_names_it(mask):
    q = torch.randn(1, 1, 2, 4)
    with pytest.raises(TypeError, match="mask must be"):
        layers.scaled_dot_product_attention(q, q, q, mask)


def test_one_d_mask_is_a_key_mask_in_torch_as_in_numpy():
    # L == S: the 1-D mask is (S,), the same answer as the NumPy path and as mask[None, :]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 4, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.tensor([True, False, True])
    out, w = layers.scaled_dot_product_attention(q, k, v, keep, return_weights=True)
    exp = layers.scaled_dot_product_attention(q, k, v, keep[None, :])
    torch.testing.assert_close(out, exp)
    assert torch.isfinite(out).all()
    assert (w[..., 1] == 0).all()
    np_out = np_sdpa(q.numpy(), k.numpy(), v.numpy(), keep.numpy())
    torch.testing.assert_close(out, torch.from_numpy(np_out))


def test_one_d_mask_of_the_query_length_is_refused_in_torch():
    q, k, v = torch.ones(1, 2, 3, 4), torch.ones(1, 2, 5, 4), torch.ones(1, 2, 5, 4)
    msg = r"1-D mask is a key mask of shape \(S,\) = \(5,\).*L=3, S=5.*got shape \(3,\)"
    with pytest.raises(ValueError, match=msg):
        layers.scaled_dot_product_attention(q, k, v, torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=msg):
        layers.scaled_dot_product_attention(q, k, v, torch.zeros(3))
    m = layers.MultiHeadAttention(8, 2)
    x, ctx = torch.randn(1, 3, 8), torch.randn(1, 5, 8)
    with pytest.raises(ValueError, match=msg):  # cross-attention: the mask goes to sdpa
        m(x, ctx, mask=torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"1-D mask .*\(S,\) = \(3,\).*got shape \(2,\)"):
        m(x, mask=torch.ones(2, dtype=torch.bool), causal=True)  # combined with causal


def test_mla_checks_its_sizes_at_construction_with_named_errors():
    sizes = dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
    for field, value, exc, msg in [
        ("kv_lora_rank", 0, ValueError, "kv_lora_rank must be >= 1"),
        ("qk_nope_head_dim", 2.0, TypeError, "qk_nope_head_dim must be an integer"),
        ("qk_rope_head_dim", 3, ValueError, "qk_rope_head_dim must be even"),
        ("qk_rope_head_dim", 0, ValueError, "qk_rope_head_dim must be >= 1"),
        ("v_head_dim", True, TypeError, "v_head_dim must be an integer"),
        ("q_lora_rank", -1, ValueError, "q_lora_rank must be >= 1"),
    ]:
        with pytest.raises(exc, match=msg):
            layers.MultiHeadLatentAttention(16, 2, **{**sizes, field: value})


@pytest.mark.parametrize("L,S", [(4, 4), (2, 5), (5, 2), (0, 3), (3, 0)])
def test_torch_masks_have_the_numpy_names_and_values(L, S):
    # the same name for the same mask on both sides (the NumPy masks are the reference)
    from attnbook import masks

    np.testing.assert_array_equal(layers.causal_mask(L, S).numpy(), masks.causal_mask(L, S))
    for w in (1, 2, 10):
        np.testing.assert_array_equal(
            layers.sliding_window_mask(L, w, S).numpy(), masks.sliding_window_mask(L, w, S)
        )
    assert layers.causal_mask(L, S).dtype == torch.bool
    np.testing.assert_array_equal(layers.causal_mask(3).numpy(), masks.causal_mask(3))


def test_torch_padding_combine_and_additive_masks_match_numpy():
    from attnbook import masks

    am = np.array([[1, 1, 0], [0, 1, 1]])
    pad = layers.padding_mask(torch.from_numpy(am))
    assert pad.shape == (2, 1, 1, 3) and pad.dtype == torch.bool
    np.testing.assert_array_equal(pad.numpy(), masks.padding_mask(am))
    both = layers.combine_masks(layers.causal_mask(3), None, pad)
    np.testing.assert_array_equal(
        both.numpy(), masks.combine_masks(masks.causal_mask(3), None, masks.padding_mask(am))
    )
    assert layers.combine_masks(None, None) is None
    add = layers.additive_mask(layers.causal_mask(3), pad, dtype=torch.float32)
    np.testing.assert_array_equal(
        add.numpy(),
        masks.additive_mask(masks.causal_mask(3), masks.padding_mask(am), dtype=np.float32),
    )
    assert layers.keep_mask_to_additive is layers.additive_mask  # the earlier name still works
    with pytest.raises(ValueError, match="attention_mask .* must hold only 0 and 1"):
        layers.padding_mask(torch.tensor([[2, 1]]))
    with pytest.raises(TypeError, match="L must be an integer"):
        layers.causal_mask(2.0)
    with pytest.raises(ValueError, match="window must be >= 1"):
        layers.sliding_window_mask(3, 0)
    with pytest.raises(ValueError, match="do not broadcast together"):
        layers.combine_masks(torch.ones(2, dtype=torch.bool), torch.ones(3, dtype=torch.bool))


def test_combine_and_additive_masks_move_every_mask_to_the_first_tensor_masks_device():
    # A NumPy (or CPU) padding mask with a CUDA causal mask used to raise torch's raw
    # "same device" RuntimeError; the meta device reproduces that on a CPU-only machine.
    causal = torch.ones(3, 3, dtype=torch.bool, device="meta")
    for other in (torch.ones(3, 3, dtype=torch.bool), np.ones((3, 3), bool)):
        both = layers.combine_masks(causal, other)
        assert both.device.type == "meta" and both.shape == (3, 3)
        add = layers.additive_mask(causal, None, other, dtype=torch.float32)
        assert add.device.type == "meta" and add.dtype == torch.float32
    # without a tensor among them, arrays and lists give a CPU tensor, as before
    assert layers.combine_masks(np.ones((3, 3), bool), [True, False, True]).device.type == "cpu"


@pytest.mark.parametrize("call", ["combine", "additive"])
def test_combine_and_additive_masks_refuse_a_string_like_the_numpy_twins(call):
    fn = {
        "combine": layers.combine_masks,
        "additive": lambda *m: layers.additive_mask(*m, dtype=torch.float32),
    }[call]
    with pytest.raises(TypeError, match=r"keep_masks\[1\] must be a boolean keep-mask.*<U3"):
        fn(layers.causal_mask(3), "abc")


def test_sliding_window_mask_with_a_huge_window_is_the_causal_mask_as_in_numpy():
    # 10**30 overflowed torch's int64 (OverflowError); the NumPy twin clamps to S + 1
    from attnbook import masks

    for L, S in ((3, 3), (5, 3), (2, 6)):
        for window in (10**30, 2**63 - 1, S + 1):
            got = layers.sliding_window_mask(L, window, S)
            np.testing.assert_array_equal(got.numpy(), masks.sliding_window_mask(L, window, S))
            np.testing.assert_array_equal(got.numpy(), masks.causal_mask(L, S))


def test_torch_apply_rope_refuses_a_non_bool_interleaved_like_the_numpy_twin():
    x = torch.randn(3, 4)
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match="interleaved must be a bool"):
            layers.apply_rope(x, torch.arange(3), interleaved=bad)
        with pytest.raises(TypeError, match="interleaved must be a bool"):
            positional.apply_rope(x.numpy(), np.arange(3), interleaved=bad)
    assert_close(
        layers.apply_rope(x, torch.arange(3), interleaved=np.bool_(True)),
        layers.apply_rope(x, torch.arange(3), interleaved=True),
        atol=0,
        rtol=0,
    )


def test_torch_split_heads_says_it_needs_a_torch_tensor():
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got ndarray"):
        layers.split_heads(np.ones((2, 4, 6)), 2)  # was AttributeError: no attribute 'view'


def test_split_heads_errors_are_those_of_the_numpy_twin():
    from attnbook import heads

    for split, x in (
        (layers.split_heads, torch.zeros(2, 3, 8)),
        (heads.split_heads, np.zeros((2, 3, 8))),
    ):
        with pytest.raises(ValueError, match=r"n_heads 3 must divide the feature size 8 of x"):
            split(x, 3)
    with pytest.raises(ValueError, match=r"x must have shape \(B, L, H\*D\); got shape \(3, 8\)"):
        layers.split_heads(torch.zeros(3, 8), 2)
