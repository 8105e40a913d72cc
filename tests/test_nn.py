"""Tests for the mask helpers and attention function of attnbook.nn.

References: torch.nn.functional.scaled_dot_product_attention, torch.repeat_interleave, the NumPy
attention of attnbook.attention (float64) and hand-written masks.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import nn as ann
from attnbook.attention import scaled_dot_product_attention as np_sdpa
from attnbook.masks import causal_mask, sliding_window_mask
from attnbook.testing import assert_close

D64 = torch.float64


def test_repeat_kv_equals_repeat_interleave():
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(ann.repeat_kv(x, 4), torch.repeat_interleave(x, 4, dim=1))
    assert ann.repeat_kv(x, 1) is x
    with pytest.raises(ValueError, match=r"\(B, H_kv, S, D\)"):
        ann.repeat_kv(torch.zeros(3, 4, 5), 2)


def test_mha_mask_polarity_is_inverted_once():
    keep = torch.from_numpy(causal_mask(3))
    mha = ann.keep_mask_to_mha_mask(keep)
    assert torch.equal(mha, torch.tensor([[False, True, True], [False, False, True],
                                          [False, False, False]]))
    with pytest.raises(TypeError, match="boolean"):
        ann.keep_mask_to_mha_mask(torch.zeros(2, 2))


def test_keep_mask_to_additive():
    keep = torch.tensor([[True, False], [False, False]])
    add = ann.keep_mask_to_additive(keep, None, dtype=torch.bfloat16)
    fmin = torch.finfo(torch.bfloat16).min
    assert torch.equal(add, torch.tensor([[0.0, fmin], [fmin, fmin]], dtype=torch.bfloat16))
    assert ann.keep_mask_to_additive(None, dtype=torch.float32) is None
    with pytest.raises(ValueError, match=r"\(2, 2\) and \(3,\)"):
        ann.keep_mask_to_additive(keep, torch.ones(3, dtype=torch.bool), dtype=torch.float32)
    with pytest.raises(TypeError, match="floating"):
        ann.keep_mask_to_additive(keep, dtype=torch.int32)


@pytest.mark.parametrize("L,S,window", [(3, 3, None), (2, 5, None), (4, 6, 2), (5, 5, 3)])
def test_position_keep_mask_matches_numpy_masks(L, S, window):
    got = ann.position_keep_mask(torch.arange(S - L, S), torch.arange(S), window=window)
    exp = causal_mask(L, S) if window is None else sliding_window_mask(L, window, S)
    assert torch.equal(got, torch.from_numpy(exp))
    per_row = ann.position_keep_mask(torch.arange(S - L, S)[None].expand(2, L),
                                     torch.arange(S)[None].expand(2, S), window=window)
    assert per_row.shape == (2, 1, L, S) and torch.equal(per_row[1, 0], torch.from_numpy(exp))


@settings(max_examples=20)
@given(L=st.integers(1, 5), S=st.integers(1, 6), seed=st.integers(0, 2**16),
       H_kv=st.sampled_from([1, 2]))
def test_bottom_right_causal_matches_torch_with_explicit_mask(L, S, seed, H_kv):
    # torch's is_causal aligns top-left when L != S; the book aligns bottom-right, so the
    # reference gets the mask explicitly
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2, L, 4, dtype=D64, generator=g)
    k = torch.randn(1, H_kv, S, 4, dtype=D64, generator=g)
    v = torch.randn(1, H_kv, S, 3, dtype=D64, generator=g)
    keep = torch.from_numpy(causal_mask(L, S))
    got = ann.scaled_dot_product_attention(q, k, v, causal=True)
    assert torch.isfinite(got).all()
    exp_np = np_sdpa(q.numpy(), ann.repeat_kv(k, 2 // H_kv).numpy(),
                     ann.repeat_kv(v, 2 // H_kv).numpy(), causal=True)
    assert_close(got, exp_np, atol=1e-12, rtol=0)
    if L <= S:  # every row sees a key; torch's SDPA is defined there
        exp = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
        assert_close(got, exp, atol=1e-12, rtol=0)


def test_weights_rows_sum_to_one_or_zero():
    q = torch.randn(2, 2, 4, 8, dtype=D64)
    keep = torch.rand(2, 1, 4, 4) > 0.5
    _, w = ann.scaled_dot_product_attention(q, q, q, keep, return_weights=True)
    sums = w.sum(-1)
    visible = keep.expand(2, 2, 4, 4).any(-1)
    assert_close(sums, visible.double(), atol=1e-12, rtol=0)
    assert torch.equal(w[~keep.expand(2, 2, 4, 4)], torch.zeros_like(w[~keep.expand(2, 2, 4, 4)]))


def test_sdpa_argument_errors():
    q = torch.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"q must be 4-D .*\(2, 3, 4\)"):
        ann.scaled_dot_product_attention(q[0], q, q)
    with pytest.raises(ValueError, match=r"k and v must agree"):
        ann.scaled_dot_product_attention(q, q, torch.zeros(1, 2, 5, 4))
    with pytest.raises(ValueError, match="dropout_p"):
        ann.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    with pytest.raises(TypeError, match="keep-mask or an additive"):
        ann.scaled_dot_product_attention(q, q, q, torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="batch"):
        ann.scaled_dot_product_attention(q, torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 3, 4))


def test_module_argument_errors():
    with pytest.raises(ValueError, match="dropout"):
        ann.MultiHeadAttention(8, 2, dropout=1.5)
    with pytest.raises(TypeError, match="RotaryEmbedding"):
        ann.MultiHeadAttention(8, 2, rope=10000.0)
    with pytest.raises(ValueError, match="even head_dim"):
        ann.MultiHeadAttention(6, 2, rope=ann.RotaryEmbedding())
    m = ann.MultiHeadAttention(8, 2, rope=ann.RotaryEmbedding())
    with pytest.raises(ValueError, match="self-attention only"):
        m(torch.zeros(1, 2, 8), torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match=r"context must be \(B=1, S, d_model=8\)"):
        ann.MultiHeadAttention(8, 2)(torch.zeros(1, 2, 8), torch.zeros(2, 3, 8))
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even"):
        ann.MultiHeadLatentAttention(8, 2, 4, 4, 3, 4)


def test_rotary_embedding_module_matches_function():
    x = torch.randn(1, 2, 5, 8, dtype=D64)
    pos = torch.arange(3, 8)
    rope = ann.RotaryEmbedding(base=500000.0, interleaved=True)
    assert torch.equal(rope(x, pos), ann.apply_rope(x, pos, base=500000.0, interleaved=True))
    assert list(rope.parameters()) == []


def test_module_additive_mask_combined_with_causal():
    torch.manual_seed(7)
    m = ann.MultiHeadAttention(8, 2, bias=True).double().eval()
    x = torch.randn(2, 4, 8, dtype=D64)
    pad = torch.tensor([[True] * 4, [True, True, True, False]])[:, None, None, :]  # (B, 1, 1, S)
    add = ann.keep_mask_to_additive(pad, dtype=D64)  # (B, 1, 1, S) float
    exp = m(x, mask=pad, causal=True)
    got = m(x, mask=add, causal=True)
    assert torch.isfinite(got).all()
    assert_close(got, exp, atol=1e-12, rtol=0)
