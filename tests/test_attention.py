"""Tests for attnbook.attention: hand-derived values, torch's SDPA, and invariants.

Expected values come from hand derivation (the q = k = 0 trick: every visible key gets equal
weight, so the output is the mean of the visible value rows) or from torch's own
``F.scaled_dot_product_attention`` — never from this module's own output.
"""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnbook.attention import (
    entropy,
    entropy_core,
    masked_softmax,
    masked_softmax_core,
    scaled_dot_product_attention,
    scaled_dot_product_attention_core,
    softmax,
    softmax_core,
    softmax_jacobian,
    softmax_jacobian_core,
)
from attnbook.masks import additive_mask, causal_mask, padding_mask
from attnbook.testing import assert_close, assert_low_precision_close

T, F_ = True, False


def _finite(x):
    assert np.all(np.isfinite(x)), f"non-finite values in {x!r}"


# --- hand-derived cases from the skeleton issue -------------------------------------------


def test_fully_masked_row_gives_zero_output():
    q = np.zeros((2, 2))
    k = np.eye(2)
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    mask = np.array([[T, T], [F_, F_]])
    out, w = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    _finite(out)
    _finite(w)
    # Row 0: q = 0, so both keys score 0 and get weight 1/2: mean of the value rows = [2, 3].
    assert_close(out, [[2.0, 3.0], [0.0, 0.0]], atol=1e-15, rtol=0)
    assert_close(w, [[0.5, 0.5], [0.0, 0.0]], atol=1e-15, rtol=0)


def test_masked_softmax_two_valid_keys():
    scores = np.array([1.0, 2.0, 3.0, 4.0])
    w = masked_softmax(scores, np.array([T, T, F_, F_]))
    # softmax([1, 2]) = [1, e] / (1 + e) = [0.26894142, 0.73105858]
    e = math.e
    assert_close(w, [1 / (1 + e), e / (1 + e), 0.0, 0.0], atol=1e-15, rtol=0)
    assert_close(w, [0.26894142, 0.73105858, 0.0, 0.0], atol=5e-9, rtol=0)


def test_masked_softmax_no_valid_key_is_all_zero_not_uniform():
    w = masked_softmax(np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(4, dtype=bool))
    _finite(w)
    assert w.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_nan_behind_the_mask_does_not_leak():
    scores = np.array([[1.0, np.nan, np.inf]])
    w = masked_softmax(scores, np.array([[T, F_, F_]]))
    assert w.tolist() == [[1.0, 0.0, 0.0]]


def test_float32_large_equal_scores():
    w = softmax(np.array([1000.0, 1000.0], dtype=np.float32))
    assert w.dtype == np.float32
    assert w.tolist() == [0.5, 0.5]


def test_float32_saturated_scores():
    w = softmax(np.array([100.0, 0.0], dtype=np.float32))
    _finite(w)
    assert w[0] == 1.0
    # e^-100 ≈ 3.7e-44 is a float32 subnormal (or 0 under flush-to-zero).
    assert 0.0 <= w[1] < 1e-43
    assert w.sum() == 1.0


def test_keep_mask_polarity_lower_triangular():
    q = np.zeros((3, 1))
    k = np.zeros((3, 1))
    v = np.array([[1.0], [2.0], [3.0]])
    keep = np.tril(np.ones((3, 3), dtype=bool))
    out = scaled_dot_product_attention(q, k, v, keep)
    # Query i averages v[0..i]: 1, (1+2)/2, (1+2+3)/3.
    assert_close(out[:, 0], [1.0, 1.5, 2.0], atol=1e-15, rtol=0)


def test_bottom_right_causal_one_query_over_four_cached_keys():
    out = scaled_dot_product_attention(
        np.zeros((1, 1)), np.zeros((4, 1)), np.array([[1.0], [2.0], [3.0], [4.0]]), causal=True
    )
    # The newest query sees all four keys: mean(1, 2, 3, 4) = 2.5 (top-left alignment gives 1).
    assert_close(out, [[2.5]], atol=1e-15, rtol=0)


def test_bottom_right_causal_two_queries_over_five_keys():
    out = scaled_dot_product_attention(
        np.zeros((2, 1)), np.zeros((5, 1)), np.arange(5.0)[:, None], causal=True
    )
    # Query 0 is position 3 (sees 0..3, mean 1.5), query 1 is position 4 (sees 0..4, mean 2).
    assert_close(out[:, 0], [1.5, 2.0], atol=1e-15, rtol=0)


def test_empty_query_sequence():
    out, w = scaled_dot_product_attention(
        np.zeros((2, 0, 3)), np.ones((2, 5, 3)), np.ones((2, 5, 4)), return_weights=True
    )
    assert out.shape == (2, 0, 4)
    assert w.shape == (2, 0, 5)


def test_empty_key_sequence_gives_zeros():
    out, w = scaled_dot_product_attention(
        np.ones((2, 3)), np.ones((0, 3)), np.ones((0, 4)), return_weights=True
    )
    assert out.shape == (2, 4)
    assert w.shape == (2, 0)
    assert out.tolist() == [[0.0] * 4] * 2


def test_float32_additive_mask_keeps_float16_output():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(np.float16) for _ in range(3))
    add = np.where(causal_mask(3), 0.0, np.finfo(np.float32).min).astype(np.float32)
    out = scaled_dot_product_attention(q, k, v, add)
    assert out.dtype == np.float16
    _finite(out)
    ref = scaled_dot_product_attention(
        q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal=True
    )
    assert_close(out, ref, atol=5e-3, rtol=5e-3)


def test_softmax_of_the_chapter_example():
    # [1.0, 4.0, 0.5, 0.2]: compute the reference in float64 from the definition.
    x = np.array([1.0, 4.0, 0.5, 0.2])
    e = np.array([math.exp(v) for v in x])
    assert_close(softmax(x), e / e.sum(), atol=1e-15, rtol=0)
    assert_close(softmax(x), [0.045, 0.907, 0.027, 0.020], atol=5e-4, rtol=0)


# --- comparison with torch ---------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L,S", [(5, 5), (3, 7), (1, 4)])
def test_matches_torch_sdpa_with_keep_mask(causal, L, S):
    rng = np.random.default_rng(1)
    B, H, D = 2, 3, 8
    q = rng.standard_normal((B, H, L, D))
    k = rng.standard_normal((B, H, S, D))
    v = rng.standard_normal((B, H, S, 5))
    pad = np.ones((B, S), dtype=int)
    pad[1, -2:] = 0
    keep = padding_mask(pad)  # (B, 1, 1, S)
    ours = scaled_dot_product_attention(q, k, v, keep, causal=causal)
    full_keep = keep & causal_mask(L, S) if causal else np.broadcast_to(keep, (B, 1, L, S))
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(full_keep.copy()))
    _finite(ours)
    assert_close(ours, ref, atol=1e-12, rtol=1e-12)


def test_matches_torch_sdpa_with_additive_mask_and_scale():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 4, 6))
    k = rng.standard_normal((2, 5, 6))
    v = rng.standard_normal((2, 5, 3))
    add = rng.standard_normal((4, 5))
    ours = scaled_dot_product_attention(q, k, v, add, scale=0.3)
    tq, tk, tv, tm = (torch.from_numpy(a) for a in (q, k, v, add))
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, scale=0.3)
    assert_close(ours, ref, atol=1e-12, rtol=1e-12)


def test_matches_torch_causal_bottom_right():
    # torch's is_causal aligns top-left; its bottom-right variant is the causal_lower_right bias.
    from torch.nn.attention.bias import causal_lower_right

    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 3, 4))
    k = rng.standard_normal((1, 2, 6, 4))
    v = rng.standard_normal((1, 2, 6, 4))
    ours = scaled_dot_product_attention(q, k, v, causal=True)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=causal_lower_right(3, 6))
    assert_close(ours, ref, atol=1e-12, rtol=1e-12)


# --- properties --------------------------------------------------------------------------

finite_scores = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(1, 6)),
    elements=st.floats(-50, 50, allow_nan=False),
)


@given(finite_scores, st.data())
def test_rows_sum_to_one_or_zero(scores, data):
    mask = data.draw(arrays(np.bool_, scores.shape))
    w = masked_softmax(scores, mask)
    _finite(w)
    sums = w.sum(axis=-1)
    visible = mask.any(axis=-1)
    assert_close(sums[visible], np.ones(visible.sum()), atol=1e-12, rtol=0)
    assert np.all(sums[~visible] == 0)
    assert np.all(w[~mask] == 0)


@given(finite_scores, st.floats(-100, 100))
def test_softmax_is_shift_invariant(scores, c):
    assert_close(softmax(scores + c), softmax(scores), atol=1e-12, rtol=0)


@given(st.integers(1, 6), st.integers(0, 3), st.data())
def test_causal_outputs_ignore_future_tokens(L, extra, data):
    S = L + extra
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    q = rng.standard_normal((L, 3))
    k = rng.standard_normal((S, 3))
    v = rng.standard_normal((S, 2))
    out = scaled_dot_product_attention(q, k, v, causal=True)
    # Change every key and value after position t; rows that cannot see them must not move.
    t = data.draw(st.integers(0, S - 1))
    k2, v2 = k.copy(), v.copy()
    k2[t + 1 :] = rng.standard_normal(k2[t + 1 :].shape)
    v2[t + 1 :] = rng.standard_normal(v2[t + 1 :].shape)
    out2 = scaled_dot_product_attention(q, k2, v2, causal=True)
    rows = [i for i in range(L) if i + (S - L) <= t]
    assert_close(out2[rows], out[rows], atol=0, rtol=0)


@given(st.integers(1, 8), st.integers(1, 8), st.data())
def test_q_equals_k_equals_zero_averages_visible_values(L, S, data):
    mask = data.draw(arrays(np.bool_, (L, S)))
    v = np.arange(S, dtype=np.float64)[:, None] * np.array([[1.0, -2.0]])
    out = scaled_dot_product_attention(np.zeros((L, 4)), np.zeros((S, 4)), v, mask)
    for i in range(L):
        expected = v[mask[i]].mean(axis=0) if mask[i].any() else np.zeros(2)
        assert_close(out[i], expected, atol=1e-12, rtol=0)


def test_softmax_jacobian_matches_finite_differences():
    z = np.array([0.3, -1.2, 2.0, 0.5])
    J = softmax_jacobian(softmax(z))
    h = 1e-6
    fd = np.stack(
        [
            (softmax(z + h * np.eye(4)[j]) - softmax(z - h * np.eye(4)[j])) / (2 * h)
            for j in range(4)
        ],
        axis=1,
    )
    assert_close(J, fd, atol=1e-9, rtol=0)


def test_entropy_of_uniform_and_one_hot():
    assert_close(entropy(np.full(8, 1 / 8)), math.log(8), atol=1e-15, rtol=0)
    assert entropy(np.array([0.0, 1.0, 0.0])) == 0.0


# --- bad input ---------------------------------------------------------------------------


def test_mismatched_head_dims_name_the_shapes():
    with pytest.raises(ValueError, match=r"q has head_dim 64 but k has 32"):
        scaled_dot_product_attention(np.ones((2, 64)), np.ones((3, 32)), np.ones((3, 8)))


def test_mismatched_key_and_value_lengths():
    with pytest.raises(ValueError, match=r"k has 3 keys but v has 4"):
        scaled_dot_product_attention(np.ones((2, 8)), np.ones((3, 8)), np.ones((4, 8)))


def test_mask_that_would_enlarge_the_output_is_rejected():
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 3, 3\) does not broadcast"):
        scaled_dot_product_attention(
            np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), np.ones((2, 1, 3, 3), dtype=bool)
        )


def test_mask_of_wrong_length_is_rejected():
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\)"):
        masked_softmax(np.ones((3, 3)), np.ones((3, 4), dtype=bool))


def test_integer_mask_is_a_type_error():
    with pytest.raises(TypeError, match="keep-mask"):
        masked_softmax(np.ones((2, 2)), np.ones((2, 2), dtype=int))


def test_nan_inputs_are_rejected():
    with pytest.raises(ValueError, match=r"q of shape \(2, 3\) contains nan"):
        scaled_dot_product_attention(np.full((2, 3), np.nan), np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="nan"):
        softmax(np.array([0.0, np.nan]))


def test_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match="do not broadcast"):
        scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((3, 3, 4)), np.ones((3, 3, 4)))


def test_vector_inputs_are_rejected():
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., seq, dim\)"):
        scaled_dot_product_attention(np.ones(4), np.ones((3, 4)), np.ones((3, 4)))


# --- the cores against independent references ---------------------------------------------


def _softmax64(z):
    """float64 softmax written from the definition, one row at a time."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    for idx in np.ndindex(z.shape[:-1]):
        e = np.array([math.exp(x) for x in z[idx]])
        out[idx] = e / e.sum()
    return out


def test_softmax_core_matches_the_definition():
    z = np.random.default_rng(20).standard_normal((3, 4, 6)) * 3
    got = softmax_core(z)
    _finite(got)
    assert_close(got, _softmax64(z), atol=1e-15, rtol=0)
    assert_close(
        softmax_core(z, axis=0),
        np.moveaxis(_softmax64(np.moveaxis(z, 0, -1)), -1, 0),
        atol=1e-15,
        rtol=0,
    )


def test_softmax_core_all_hidden_row_is_zero():
    got = softmax_core(np.array([[-np.inf, -np.inf], [0.0, -np.inf]]))
    assert got.tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_masked_softmax_core_matches_softmax_of_the_visible_scores():
    rng = np.random.default_rng(21)
    scores = rng.standard_normal((5, 7))
    keep = rng.random((5, 7)) < 0.6
    keep[0] = False  # one empty row
    got = masked_softmax_core(scores, keep)
    _finite(got)
    for i in range(5):
        expected = np.zeros(7)
        if keep[i].any():
            expected[keep[i]] = _softmax64(scores[i, keep[i]])
        assert_close(got[i], expected, atol=1e-15, rtol=0)


@pytest.mark.parametrize("kind", ["none", "keep", "additive"])
def test_sdpa_core_matches_torch(kind):
    rng = np.random.default_rng(22)
    q, k, v = (rng.standard_normal((2, 3, n, 8)) for n in (4, 6, 6))
    mask = {
        "none": None,
        "keep": rng.random((2, 1, 4, 6)) < 0.7,
        "additive": rng.standard_normal((4, 6)),
    }[kind]
    if kind == "keep":
        mask[..., 0] = True  # every query sees a key (torch gives nan for an empty row)
    out, w = scaled_dot_product_attention_core(q, k, v, mask, scale=0.3)
    tq, tk, tv = (torch.from_numpy(t) for t in (q, k, v))
    tmask = None if mask is None else torch.from_numpy(mask)
    ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, scale=0.3)
    _finite(out)
    assert_close(out, ref, atol=1e-12, rtol=0)
    assert_close(w.sum(-1), np.ones((2, 3, 4)), atol=1e-12, rtol=0)


def test_sdpa_core_default_scale_is_one_over_sqrt_d():
    rng = np.random.default_rng(23)
    q, k = rng.standard_normal((3, 16)), rng.standard_normal((5, 16))
    v = rng.standard_normal((5, 2))
    out, w = scaled_dot_product_attention_core(q, k, v)
    expected_w = _softmax64(np.array([[q[i] @ k[j] / 4.0 for j in range(5)] for i in range(3)]))
    assert_close(w, expected_w, atol=1e-14, rtol=0)
    assert_close(out, expected_w @ v, atol=1e-14, rtol=0)


def test_softmax_jacobian_core_by_hand():
    p = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    J = softmax_jacobian_core(p)
    expected = np.array(
        [[[p[b, i] * ((i == j) - p[b, j]) for j in range(3)] for i in range(3)] for b in range(2)]
    )
    assert_close(J, expected, atol=1e-16, rtol=0)
    assert not J[1].any()  # one-hot: no gradient at all
    assert softmax_jacobian_core(p.astype(np.float32)).dtype == np.float32


def test_entropy_core_by_hand():
    p = np.array([[0.5, 0.5, 0.0], [0.25, 0.25, 0.5]])
    assert_close(entropy_core(p), [math.log(2), 1.5 * math.log(2)], atol=1e-15, rtol=0)
    assert_close(entropy_core(p.T, axis=0), [math.log(2), 1.5 * math.log(2)], atol=1e-15, rtol=0)


# --- low precision: sums in float32, results in the input's dtype -------------------------


def test_float16_softmax_of_70000_equal_scores():
    # the float16 sum of 70,000 ones overflows (max 65504): a float16 softmax returns zeros
    x = np.full((2, 70_000), 3.0, np.float16)
    w = softmax(x)
    assert w.dtype == np.float16
    _finite(w)
    exact = np.full(w.shape, 1 / 70_000)
    rounding = abs(float(np.float16(1 / 70_000)) - 1 / 70_000)
    assert_low_precision_close(w, exact, plain=exact.astype(np.float16), floor=1e-12)
    assert abs(w.astype(np.float64).sum(-1) - 1).max() < 70_000 * 2 * rounding + 1e-3


def test_float16_masked_softmax_of_70000_visible_equal_scores():
    n, visible = 100_000, 70_000
    scores = np.full((1, n), -2.0, np.float16)
    keep = np.zeros((1, n), bool)
    keep[0, np.random.default_rng(24).permutation(n)[:visible]] = True
    w = masked_softmax(scores, keep)
    assert w.dtype == np.float16
    _finite(w)
    expected = np.where(keep, 1 / visible, 0.0)  # float64 reference
    assert_low_precision_close(w, expected, plain=expected.astype(np.float16), floor=1e-12)
    assert (w[~keep] == 0).all()


def test_float16_sdpa_over_70000_keys():
    # q = k: equal scores, so the output is the mean of v (float64 reference)
    S = 70_000
    rng = np.random.default_rng(25)
    v = rng.standard_normal((S, 2)).astype(np.float16)
    q, k = np.ones((1, 4), np.float16), np.ones((S, 4), np.float16)
    out = scaled_dot_product_attention(q, k, v)
    assert out.dtype == np.float16
    _finite(out)
    exact = v.astype(np.float64).mean(0, keepdims=True)
    assert_low_precision_close(out, exact, plain=exact.astype(np.float16), floor=1e-3)


def test_float16_entropy_of_a_long_distribution():
    # Zipf weights over 70,000 positions: the tail p ~ 1e-6 is subnormal in float16
    n = 70_000
    w = 1 / np.arange(1, n + 1)
    p = (w / w.sum()).astype(np.float16)
    p64 = p.astype(np.float64)
    exact = -np.sum(p64[p64 > 0] * np.log(p64[p64 > 0]))  # float64, from the same p
    got = entropy(p)
    assert got.dtype == np.float16 and np.isfinite(got)
    assert_low_precision_close(got, exact, plain=np.float16(exact), floor=1e-4)
    uniform = np.full(n, 1 / n).astype(np.float16)  # log(70000) = 11.156
    u64 = uniform.astype(np.float64)
    exact_u = -np.sum(u64 * np.log(u64))
    assert_low_precision_close(entropy(uniform), exact_u, plain=np.float16(exact_u), floor=1e-4)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_numpy_sdpa_float16_scores_do_not_overflow(sign):
    q = np.full((2, 4), 200.0, np.float16)
    k = np.full((3, 4), sign * 200.0, np.float16)
    v = np.array([[1.0], [2.0], [6.0]], np.float16)
    out = scaled_dot_product_attention(q, k, v)
    # every score is equal (q . k the same for every key), so the output is the mean of v
    assert out.dtype == np.float16 and np.isfinite(out).all()
    assert_close(out, np.full((2, 1), 3.0), atol=0, rtol=1e-3)


def test_numpy_sdpa_overflow_error_names_the_scores_not_x():
    q = np.full((1, 4), 1e20, np.float32)
    with pytest.raises(ValueError, match="scores") as info:
        scaled_dot_product_attention(q, q, np.ones((1, 1), np.float32))
    assert "x of shape" not in str(info.value)


def test_float16_additive_mask_row_is_plain_softmax():
    q = np.array([[1.0, 0.0]], np.float16)
    # equal scores of -40/sqrt(2): finfo(float16).min + (-28) overflows float16 to -inf
    k = np.array([[-40.0, 0.0], [-40.0, 0.0]], np.float16)
    v = np.array([[1.0], [3.0]], np.float16)
    hidden = np.array([[False, False]])
    for dtype in (np.float16, np.float32):
        out, w = scaled_dot_product_attention(
            q, k, v, additive_mask(hidden, dtype=dtype), return_weights=True
        )
        assert_close(w, [[0.5, 0.5]], atol=1e-3, rtol=0)
        assert_close(out, [[2.0]], atol=1e-3, rtol=0)


# --- arguments: the one check rule (moved from test_robustness.py) ------------------------


def test_non_bool_causal_rejected():
    q = np.ones((2, 4))
    for bad in ("no", 1, None):
        with pytest.raises(TypeError, match="causal"):
            scaled_dot_product_attention(q, q, q, causal=bad)


@pytest.mark.parametrize("p", [[-0.5, 1.5], [math.nan, 1.0]])
def test_entropy_rejects_non_probabilities(p):
    with pytest.raises(ValueError, match="p of shape"):
        entropy(np.array(p))


@pytest.mark.parametrize("axis", [1.5, True, "a"])
def test_softmax_axis_type(axis):
    with pytest.raises(TypeError, match="axis"):
        softmax(np.ones((2, 3)), axis=axis)


@pytest.mark.parametrize("scale", ["abc", np.array([1.0, 2.0]), True])
def test_sdpa_scale_type(scale):
    q = np.ones((2, 4))
    with pytest.raises(TypeError, match="scale"):
        scaled_dot_product_attention(q, q, q, scale=scale)


def test_sdpa_scale_accepts_0d_array_and_rejects_nan():
    rng = np.random.default_rng(26)
    q, k, v = rng.standard_normal((2, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    assert_close(
        scaled_dot_product_attention(q, k, v, scale=np.array(0.5)),
        scaled_dot_product_attention(q, k, v, scale=0.5),
        atol=0,
        rtol=0,
    )
    with pytest.raises(ValueError, match="scale"):
        scaled_dot_product_attention(q, k, v, scale=float("nan"))


def test_numpy_functions_accept_tensors():
    q = torch.randn(2, 4, requires_grad=True)
    out = scaled_dot_product_attention(q, q, q)
    expected = scaled_dot_product_attention(*(q.detach().numpy(),) * 3)
    assert_close(out, expected, atol=0, rtol=0)
    with pytest.raises(TypeError, match="x must be"):
        softmax(np.array(["a", "b"]))


# --- additive (Bahdanau) attention ----------------------------------------------------------
# The reference is an explicit loop over (batch, i, j) in float64, written from Bahdanau et al.
# (2015), appendix A.1.2: e_ij = v_a . tanh(W_a s + U_a h_j), then a softmax over the visible j.

from attnbook.attention import (  # noqa: E402
    additive_attention,
    additive_attention_core,
    additive_scores,
    additive_scores_core,
)


def _additive_loop(q, k, v, W_q, W_k, v_a, keep=None):
    """Float64 additive attention by explicit loops over the batch, queries and keys."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    B, L, _ = q.shape
    S = k.shape[1]
    scores = np.zeros((B, L, S))
    out = np.zeros((B, L, v.shape[-1]))
    weights = np.zeros((B, L, S))
    for b in range(B):
        for i in range(L):
            for j in range(S):
                hidden = [
                    math.tanh(
                        sum(W_q[a, c] * q[b, i, c] for c in range(q.shape[-1]))
                        + sum(W_k[a, c] * k[b, j, c] for c in range(k.shape[-1]))
                    )
                    for a in range(len(v_a))
                ]
                scores[b, i, j] = sum(v_a[a] * hidden[a] for a in range(len(v_a)))
            visible = [j for j in range(S) if keep is None or keep[b, i, j]]
            if not visible:
                continue  # no visible key: output 0, weights 0
            top = max(scores[b, i, j] for j in visible)
            ex = {j: math.exp(scores[b, i, j] - top) for j in visible}
            total = sum(ex.values())
            for j in visible:
                weights[b, i, j] = ex[j] / total
                out[b, i] += weights[b, i, j] * v[b, j]
    return scores, out, weights


def _additive_inputs(B=2, L=3, S=5, d_q=4, d_k=6, d_v=2, d_a=7, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((B, L, d_q)),
        rng.standard_normal((B, S, d_k)),
        rng.standard_normal((B, S, d_v)),
        rng.standard_normal((d_a, d_q)) / 2,
        rng.standard_normal((d_a, d_k)) / 2,
        rng.standard_normal(d_a),
    )


def test_additive_attention_matches_an_explicit_loop():
    q, k, v, W_q, W_k, v_a = _additive_inputs()
    ref_s, ref_out, ref_w = _additive_loop(q, k, v, W_q, W_k, v_a)
    s = additive_scores(q, k, W_q, W_k, v_a)
    out, w = additive_attention(q, k, v, W_q, W_k, v_a, return_weights=True)
    assert s.shape == (2, 3, 5) and out.shape == (2, 3, 2) and w.shape == (2, 3, 5)
    for got, want in ((s, ref_s), (out, ref_out), (w, ref_w)):
        _finite(got)
        assert_close(got, want, atol=1e-12, rtol=1e-12)
    # The cores compute the same thing without the checks.
    assert_close(additive_scores_core(q, k, W_q, W_k, v_a), ref_s, atol=1e-12, rtol=1e-12)
    assert_close(
        additive_attention_core(q, k, v, W_q, W_k, v_a)[0], ref_out, atol=1e-12, rtol=1e-12
    )


def test_additive_scores_by_hand():
    # d_a = 1, W_q = [[1]], W_k = [[2]], v_a = [3]: s_ij = 3 tanh(q_i + 2 k_j).
    q = np.array([[0.0], [0.5]])
    k = np.array([[0.0], [-0.25], [1.0]])
    s = additive_scores(q, k, [[1.0]], [[2.0]], [3.0])
    want = [
        [0.0, 3 * math.tanh(-0.5), 3 * math.tanh(2.0)],
        [3 * math.tanh(0.5), 0.0, 3 * math.tanh(2.5)],
    ]
    assert_close(s, want, atol=1e-15, rtol=0)
    # |s_ij| <= ||v_a||_1 whatever the inputs: tanh saturates.
    big = additive_scores(
        1e6 * np.ones((2, 1)), np.ones((3, 1)), [[1.0], [-1.0]], [[1.0], [1.0]], [2.0, -0.5]
    )
    assert np.abs(big).max() <= 2.5 and np.isfinite(big).all()


def test_additive_attention_keep_mask_and_all_hidden_row():
    q, k, v, W_q, W_k, v_a = _additive_inputs(seed=1)
    keep = np.ones((2, 3, 5), dtype=bool)
    keep[0, 1, [0, 3]] = False
    keep[1, 2, :] = False  # query 2 of batch 1 sees nothing
    _, ref_out, ref_w = _additive_loop(q, k, v, W_q, W_k, v_a, keep)
    out, w = additive_attention(q, k, v, W_q, W_k, v_a, keep, return_weights=True)
    _finite(out)
    _finite(w)
    assert_close(out, ref_out, atol=1e-12, rtol=1e-12)
    assert_close(w, ref_w, atol=1e-12, rtol=1e-12)
    assert np.all(w[~keep] == 0.0)
    assert np.all(out[1, 2] == 0.0) and np.all(w[1, 2] == 0.0)
    # A padding mask (S,) broadcasts; hiding keys equals leaving them out.
    pad = np.array([True, True, True, False, False])
    out_pad = additive_attention(q, k, v, W_q, W_k, v_a, pad)
    out_cut = additive_attention(q, k[:, :3], v[:, :3], W_q, W_k, v_a)
    assert_close(out_pad, out_cut, atol=1e-12, rtol=1e-12)


def test_additive_attention_equal_scores_average_the_values():
    # v_a = 0 makes every score 0: each visible key gets weight 1/(visible keys).
    q, k, v, W_q, W_k, _ = _additive_inputs(seed=2)
    out = additive_attention(q, k, v, W_q, W_k, np.zeros(7))
    assert_close(out, np.repeat(v.mean(axis=1, keepdims=True), 3, axis=1), atol=1e-12, rtol=1e-12)


def test_additive_attention_empty_keys_and_dtype():
    q, k, v, W_q, W_k, v_a = _additive_inputs()
    out, w = additive_attention(q, k[:, :0], v[:, :0], W_q, W_k, v_a, return_weights=True)
    assert out.shape == (2, 3, 2) and w.shape == (2, 3, 0) and not out.any()
    q32, k32, v32 = (x.astype(np.float32) for x in (q, k, v))
    out32 = additive_attention(
        q32, k32, v32, W_q.astype(np.float32), W_k.astype(np.float32), v_a.astype(np.float32)
    )
    assert out32.dtype == np.float32
    _, ref_out, _ = _additive_loop(q, k, v, W_q, W_k, v_a)
    assert_close(out32, ref_out, atol=1e-5, rtol=1e-5)
    # A single head without batch dims, and leading dims that broadcast.
    out2 = additive_attention(q[0], k[0], v[0], W_q, W_k, v_a)
    assert_close(out2, ref_out[0], atol=1e-12, rtol=1e-12)
    out3 = additive_attention(q[:1], k, v, W_q, W_k, v_a)
    assert out3.shape == (2, 3, 2)


@pytest.mark.parametrize(
    "change, exc, words",
    [
        (dict(W_q=np.ones((7, 5))), ValueError, "W_q"),
        (dict(W_k=np.ones((7, 4))), ValueError, "W_k"),
        (dict(v_a=np.ones(6)), ValueError, "d_a"),
        (dict(v_a=np.ones((7, 1))), ValueError, "v_a"),
        (dict(W_q=np.ones(4)), ValueError, "W_q"),
        (dict(v=np.ones((2, 4, 2))), ValueError, "v has 4 values"),
        (dict(q=np.ones(4)), ValueError, "q must have shape"),
        (dict(k=np.ones((3, 5, 6))), ValueError, "do not broadcast"),
        (dict(q=np.full((2, 3, 4), np.nan)), ValueError, "q of shape"),
        (dict(v_a=["a"] * 7), TypeError, "v_a"),
        (dict(mask=np.ones((3, 5))), TypeError, "mask"),
        (dict(mask=np.ones((4, 5), dtype=bool)), ValueError, "mask"),
        (dict(return_weights=1), TypeError, "return_weights"),
    ],
)
def test_additive_attention_bad_arguments_are_named(change, exc, words):
    q, k, v, W_q, W_k, v_a = _additive_inputs()
    args = dict(q=q, k=k, v=v, W_q=W_q, W_k=W_k, v_a=v_a) | change
    with pytest.raises(exc, match=words):
        additive_attention(**args)


def test_additive_scores_names_bad_shapes():
    q, k, _, W_q, W_k, v_a = _additive_inputs()
    with pytest.raises(ValueError, match=r"W_k has shape \(7, 6\).*d_k = 3"):
        additive_scores(q, k[..., :3], W_q, W_k, v_a)


def test_additive_attention_v_none_is_a_type_error_naming_v():
    q, k, _, W_q, W_k, v_a = _additive_inputs()
    with pytest.raises(TypeError, match=r"^v must be"):
        additive_attention(q, k, None, W_q, W_k, v_a)


def test_additive_overflowing_scores_are_refused_not_zeroed():
    # By hand: d_a = 2, W_q = W_k = [[1], [1]], q = k_j = 1, so tanh(2) > 0 in both
    # components and s_j = 2e308 tanh(2) ~ 1.9e308, beyond float64's 1.8e308 for both keys.
    # The true weights are defined but not computable in float64; SDPA raises there too.
    one = np.ones
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no NumPy overflow warning leaks
        with pytest.raises(
            ValueError,
            match=r"shape \(1, 2\).*q of shape \(1, 1\) and k of "
            r"shape \(2, 1\)",
        ):
            additive_attention(
                one((1, 1)),
                one((2, 1)),
                np.array([[1.0], [2.0]]),
                one((2, 1)),
                one((2, 1)),
                np.array([1e308, 1e308]),
                return_weights=True,
            )
        with pytest.raises(ValueError, match="additive scores"):
            additive_scores(
                one((1, 1)), one((2, 1)), one((2, 1)), one((2, 1)), np.array([1e308, 1e308])
            )
        # W_q q = 1e400 = +inf and W_k k_0 = -inf: tanh(inf - inf) is nan, not a score.
        big = np.array([[1e200]])
        with pytest.raises(ValueError, match=r"inf - inf"):
            additive_scores(big, -big, big, big, one(1))
        with pytest.raises(ValueError, match="visible position"):
            additive_attention(
                big, np.array([[-1e200], [1.0]]), np.array([[5.0], [7.0]]), big, big, one(1)
            )
        # Hidden behind the mask, the undefined score is replaced: key 1 alone, weight 1.
        out, w = additive_attention(
            big,
            np.array([[-1e200], [1.0]]),
            np.array([[5.0], [7.0]]),
            big,
            big,
            one(1),
            np.array([[False, True]]),
            return_weights=True,
        )
        assert out.tolist() == [[7.0]] and w.tolist() == [[0.0, 1.0]]
        # float16 scores: 2 * 60000 * tanh(2) ~ 115700 > 65504 would become inf on the cast.
        h = np.float16
        with pytest.raises(ValueError, match=r"float16 \(max 65504\)"):
            additive_scores(
                one((1, 2), h), one((1, 2), h), one((2, 2), h), one((2, 2), h), np.full(2, 60000, h)
            )
        # The same float16 inputs in additive_attention: the softmax runs in float32, where
        # the scores are finite, and the weights are 1/2 each (two equal scores).
        _, w16 = additive_attention(
            one((1, 2), h),
            one((2, 2), h),
            one((2, 1), h),
            one((2, 2), h),
            one((2, 2), h),
            np.full(2, 60000, h),
            return_weights=True,
        )
        assert w16.dtype == h and w16.tolist() == [[0.5, 0.5]]


# --------------------------------------------------------------------------------------------
# attention_head: one head with its projections, self- or cross-attention


def _head_reference(x, c, w_q, w_k, w_v, keep=None):
    """float64 formula written out row by row: softmax(x W_Q (c W_K)^T / sqrt(d_k)) c W_V."""
    q, k, v = x @ w_q, c @ w_k, c @ w_v
    out = np.zeros((x.shape[0], w_v.shape[1]))
    weights = np.zeros((x.shape[0], c.shape[0]))
    for i in range(x.shape[0]):
        s = np.array([q[i] @ k[j] / math.sqrt(w_q.shape[1]) for j in range(c.shape[0])])
        seen = np.ones(c.shape[0], bool) if keep is None else keep[i]
        e = np.where(seen, np.exp(s - s[seen].max()), 0.0)
        weights[i] = e / e.sum()
        out[i] = weights[i] @ v
    return out, weights


def test_attention_head_self_and_cross_match_the_formula():
    from attnbook.attention import attention_head

    rng = np.random.default_rng(5)
    x, c = rng.standard_normal((3, 6)), rng.standard_normal((4, 6))
    w_q, w_k, w_v = (
        rng.standard_normal((6, 2)),
        rng.standard_normal((6, 2)),
        rng.standard_normal((6, 5)),
    )
    out, w = attention_head(x, w_q, w_k, w_v, context=c, return_weights=True)
    ref_out, ref_w = _head_reference(x, c, w_q, w_k, w_v)
    assert out.shape == (3, 5) and w.shape == (3, 4) and np.isfinite(out).all()
    assert_close(out, ref_out, atol=1e-12, rtol=1e-12)
    assert_close(w, ref_w, atol=1e-12, rtol=1e-12)
    # Self-attention is cross-attention to the sequence itself.
    out_s, w_s = attention_head(x, w_q, w_k, w_v, return_weights=True)
    assert w_s.shape == (3, 3)
    assert_close(out_s, attention_head(x, w_q, w_k, w_v, context=x), atol=0, rtol=0)
    assert_close(out_s, _head_reference(x, x, w_q, w_k, w_v)[0], atol=1e-12, rtol=1e-12)
    # Causal self-attention: the lower-triangular keep-mask of the formula.
    out_c = attention_head(x, w_q, w_k, w_v, causal=True)
    ref_c = _head_reference(x, x, w_q, w_k, w_v, np.tril(np.ones((3, 3), bool)))[0]
    assert_close(out_c, ref_c, atol=1e-12, rtol=1e-12)


def test_attention_head_with_zero_query_projection_averages_the_values():
    # q = 0: every score 0, every visible key weight 1/S: the output is the mean value row.
    from attnbook.attention import attention_head

    rng = np.random.default_rng(6)
    x, c = rng.standard_normal((2, 4)), rng.standard_normal((7, 4))
    w_v = rng.standard_normal((4, 3))
    out = attention_head(x, np.zeros((4, 2)), rng.standard_normal((4, 2)), w_v, context=c)
    assert_close(out, np.broadcast_to((c @ w_v).mean(axis=0), (2, 3)), atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        (dict(context=np.ones((4, 5)), causal=True), ValueError, "causal"),
        (dict(context=np.ones((4, 3))), ValueError, "context"),
        (dict(w_q=np.ones((5, 3))), ValueError, "w_q"),
        (dict(w_k=np.ones((6, 3))), ValueError, "w_k"),
        (dict(w_v=np.ones(6)), ValueError, "w_v"),
        (dict(x=np.ones(6)), ValueError, "x"),
        (dict(causal="yes"), TypeError, "causal"),
        (dict(x=np.array([["a"] * 6])), TypeError, "x"),
    ],
)
def test_attention_head_bad_input_names_the_argument(kwargs, error, name):
    from attnbook.attention import attention_head

    args = dict(x=np.ones((2, 6)), w_q=np.ones((6, 2)), w_k=np.ones((6, 2)), w_v=np.ones((6, 4)))
    args.update(kwargs)
    x, w_q, w_k, w_v = (args.pop(k) for k in ("x", "w_q", "w_k", "w_v"))
    with pytest.raises(error, match=name):
        attention_head(x, w_q, w_k, w_v, **args)


def test_one_d_mask_is_a_key_mask_also_when_L_equals_S():
    # The rule (attnbook's conventions): a 1-D mask broadcasts from the last axis, so it is
    # (S,), a key mask, even where (L,) would also fit.
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    keep = np.array([True, False, True])
    out, w = scaled_dot_product_attention(q, k, v, keep, return_weights=True)
    exp, w_exp = scaled_dot_product_attention(q, k, v, keep[None, :], return_weights=True)
    torch.testing.assert_close(out, exp)
    assert np.isfinite(out).all()
    assert (w[:, 1] == 0).all()  # the hidden key, for every query
    torch.testing.assert_close(w, w_exp)


def test_one_d_mask_of_the_query_length_is_refused_with_the_shapes():
    q, k, v = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    msg = r"1-D mask is a key mask of shape \(S,\) = \(5,\).*L=3, S=5.*got shape \(3,\)"
    with pytest.raises(ValueError, match=msg):
        scaled_dot_product_attention(q, k, v, np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=msg):
        scaled_dot_product_attention(q, k, v, np.zeros(3))  # additive: the same rule
    # S == 1: a (L,) mask would have broadcast to (L, L) before it was refused
    with pytest.raises(ValueError, match=r"1-D mask .*\(1,\).*got shape \(3,\)"):
        scaled_dot_product_attention(q, k[:1], v[:1], np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=r"1-D mask .*\(5,\)"):
        masked_softmax(np.ones((3, 5)), np.ones(3, dtype=bool))
