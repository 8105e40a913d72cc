"""Tests for attnbook.masks.

References: hand-written masks and positions, torch's lower-right causal bias, index formulas
written in the tests, rows of the full causal / sliding-window mask, and one causal attention
pass over the whole prompt (float64).
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right
from torch.testing import assert_close

from attnbook.attention import scaled_dot_product_attention
from attnbook.masks import (
    additive_mask,
    causal_mask,
    causal_mask_core,
    combine_masks,
    combine_masks_core,
    padding_mask,
    padding_mask_core,
    positions_from_attention_mask,
    prefill_chunk_mask,
    sliding_window_mask,
    sliding_window_mask_core,
)
from attnbook.positional import apply_rope


def test_square_causal_mask_is_lower_triangular():
    expected = np.array(
        [[1, 0, 0], [1, 1, 0], [1, 1, 1]],
        dtype=bool,
    )
    assert np.array_equal(causal_mask(3), expected)


def test_rectangular_causal_mask_is_bottom_right_aligned():
    # 2 new queries after 3 cached tokens: positions 3 and 4.
    expected = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    assert np.array_equal(causal_mask(2, 5), expected)


def test_more_queries_than_keys_leaves_leading_rows_empty():
    m = causal_mask(4, 2)
    assert not m[:2].any()
    assert np.array_equal(m[2:], np.array([[1, 0], [1, 1]], dtype=bool))


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@given(st.integers(0, 9), st.integers(0, 9))
def test_causal_mask_matches_torch_lower_right(L, S):
    if L == 0 or S == 0:
        assert causal_mask(L, S).shape == (L, S)
        return
    ref = causal_lower_right(L, S)._materialize(torch.device("cpu")).numpy()
    assert np.array_equal(causal_mask(L, S), ref)


def test_sliding_window_counts_the_query_itself():
    # window 2: each query sees itself and the one before.
    expected = np.array(
        [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]],
        dtype=bool,
    )
    assert np.array_equal(sliding_window_mask(4, 2), expected)


def test_sliding_window_with_cache_is_bottom_right():
    # One query at position 5 over 6 keys, window 3: keys 3, 4, 5.
    assert sliding_window_mask(1, 3, 6).tolist() == [[False, False, False, True, True, True]]


@given(st.integers(1, 8), st.integers(1, 10))
def test_sliding_window_at_least_length_is_causal(L, extra):
    assert np.array_equal(sliding_window_mask(L, L + extra), causal_mask(L))


def test_padding_mask_shape_and_polarity():
    m = padding_mask([[1, 1, 0], [1, 0, 0]])
    assert m.shape == (2, 1, 1, 3)
    assert m.dtype == bool
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_combine_masks_is_logical_and_with_broadcasting():
    pad = padding_mask([[1, 1, 0], [1, 1, 1]])  # (2, 1, 1, 3)
    both = combine_masks(causal_mask(3), pad, None)
    assert both.shape == (2, 1, 3, 3)
    assert both[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert both[1, 0].tolist() == causal_mask(3).tolist()
    assert combine_masks(None, None) is None


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        padding_mask([1, 1, 0])
    with pytest.raises(ValueError, match=r"must hold only 0 and 1; found \[2\]"):
        padding_mask([[1, 2]])
    with pytest.raises(ValueError, match="window must be >= 1"):
        sliding_window_mask(3, 0)
    with pytest.raises(ValueError, match="L must be >= 0"):
        causal_mask(-1)
    with pytest.raises(TypeError, match="L must be an integer"):
        causal_mask(2.5)
    with pytest.raises(ValueError, match=r"do not broadcast together: shapes \(3, 3\), \(2, 4\)"):
        combine_masks(np.ones((3, 3), bool), np.ones((2, 4), bool))
    with pytest.raises(TypeError, match=r"masks\[1\] must be a boolean keep-mask"):
        combine_masks(np.ones((3, 3), bool), np.ones((3, 3)))


# --- the cores against index formulas written here -----------------------------------------


@pytest.mark.parametrize("L, S", [(0, 0), (1, 1), (3, 3), (2, 5), (5, 2), (4, 0)])
def test_causal_mask_core_by_index_formula(L, S):
    expected = np.array([[j - i <= S - L for j in range(S)] for i in range(L)], bool)
    got = causal_mask_core(L, S)
    assert got.dtype == bool and got.shape == (L, S)
    assert np.array_equal(got, expected.reshape(L, S))


@pytest.mark.parametrize("L, window, S", [(4, 2, 4), (1, 3, 6), (3, 1, 5), (5, 9, 5), (6, 2, 3)])
def test_sliding_window_mask_core_by_index_formula(L, window, S):
    expected = np.array([[0 <= (i + S - L) - j < window for j in range(S)] for i in range(L)], bool)
    got = sliding_window_mask_core(L, window, S)
    assert got.dtype == bool and got.shape == (L, S)
    assert np.array_equal(got, expected.reshape(L, S))


def test_padding_mask_core_by_hand():
    got = padding_mask_core(np.array([[1, 1, 0], [0, 1, 1]]))
    assert got.dtype == bool and got.shape == (2, 1, 1, 3)
    assert got[:, 0, 0].tolist() == [[True, True, False], [False, True, True]]


def test_combine_masks_core_is_elementwise_and():
    rng = np.random.default_rng(0)
    a = rng.random((3, 4)) < 0.5  # (L, S)
    b = rng.random((2, 1, 1, 4)) < 0.5  # (B, 1, 1, S)
    got = combine_masks_core(a, b)
    assert got.shape == (2, 1, 3, 4) and got.dtype == bool
    for i0, i in np.ndindex(2, 3):
        for j in range(4):
            assert got[i0, 0, i, j] == (a[i, j] and b[i0, 0, 0, j])


def test_one_check_rule_for_lengths():
    for bad in (2.5, 2.0, True, "3"):
        with pytest.raises(TypeError, match="L must be an integer"):
            causal_mask(bad)
        with pytest.raises(TypeError, match="window must be an integer"):
            sliding_window_mask(3, bad)
    assert causal_mask(np.int64(2)).shape == (2, 2)
    assert causal_mask(np.array(2), np.array(3)).shape == (2, 3)  # 0-d arrays: integers
    with pytest.raises(ValueError, match="S must be >= 0"):
        causal_mask(2, -1)
    with pytest.raises(TypeError, match="attention_mask"):
        padding_mask(np.array([["a", "b"]]))


# --- chunked prefill, left padding and additive masks ----------------------------------------


def _compositions(n):
    """All ordered ways to write n as a sum of positive chunk lengths (2^(n-1) of them)."""
    if n == 0:
        return [[]]
    return [[first] + rest for first in range(1, n + 1) for rest in _compositions(n - first)]


def _chunked(q, k, v, chunks, window=None):
    """Attention over the prompt chunk by chunk: each chunk sees the cache plus itself."""
    outs, start = [], 0
    for n in chunks:
        keep = prefill_chunk_mask(n, start, window)  # (n, start + n)
        outs.append(
            scaled_dot_product_attention(
                q[..., start : start + n, :], k[..., : start + n, :], v[..., : start + n, :], keep
            )
        )
        start += n
    return np.concatenate(outs, axis=-2)


def test_prefill_chunk_mask_by_hand():
    expected = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    assert np.array_equal(prefill_chunk_mask(2, 3), expected)
    expected_w = np.array([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]], dtype=bool)
    assert np.array_equal(prefill_chunk_mask(2, 3, window=2), expected_w)
    assert prefill_chunk_mask(3, 0).shape == (3, 3)


@pytest.mark.parametrize("window", [None, 1, 2, 4])
def test_prefill_chunk_mask_is_rows_of_the_full_mask(window):
    for cache_len in range(5):
        for n in range(1, 4):
            S = cache_len + n
            full = causal_mask(S) if window is None else sliding_window_mask(S, window)
            assert np.array_equal(prefill_chunk_mask(n, cache_len, window), full[cache_len:])


def test_every_chunking_of_five_equals_one_pass():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)) for _ in range(3))
    full = scaled_dot_product_attention(q, k, v, causal=True)
    chunkings = _compositions(5)
    assert len(chunkings) == 16 and [3, 2] in chunkings and [2, 3] in chunkings
    assert [1, 1, 1, 1, 1] in chunkings
    for chunks in chunkings:
        got = _chunked(q, k, v, chunks)
        assert np.isfinite(got).all()
        assert_close(got, full, atol=1e-12, rtol=0)


@settings(max_examples=30)
@given(
    chunks=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    window=st.one_of(st.none(), st.integers(1, 6)),
    seed=st.integers(0, 2**16),
)
def test_any_chunking_equals_one_pass(chunks, window, seed):
    T = sum(chunks)
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(1, 2, T, 3)) for _ in range(3))
    keep = causal_mask(T) if window is None else sliding_window_mask(T, window)
    full = scaled_dot_product_attention(q, k, v, keep)
    assert_close(_chunked(q, k, v, chunks, window), full, atol=1e-12, rtol=0)


def test_positions_from_attention_mask_left_padding():
    am = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    expected = np.array([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 0, 0, 0, 0]])
    pos = positions_from_attention_mask(am)
    assert pos.dtype == np.int64
    assert np.array_equal(pos, expected)
    assert np.array_equal(positions_from_attention_mask(am.astype(bool)), expected)


def test_left_padded_rope_attention_matches_unpadded():
    # a left-padded row with positions from the mask gives the unpadded row's outputs
    rng = np.random.default_rng(1)
    T, pad = 4, 2
    q, k, v = (rng.normal(size=(1, 2, T, 4)) for _ in range(3))
    ref = scaled_dot_product_attention(
        apply_rope(q, np.arange(T)), apply_rope(k, np.arange(T)), v, causal=True
    )
    padded = [np.concatenate([rng.normal(size=(1, 2, pad, 4)) * 50, t], axis=-2) for t in (q, k, v)]
    am = np.array([[0] * pad + [1] * T])
    pos = positions_from_attention_mask(am)[:, None, :]  # (B, 1, S) broadcasts over heads
    keep = combine_masks(causal_mask(T + pad), padding_mask(am))
    out = scaled_dot_product_attention(
        apply_rope(padded[0], pos), apply_rope(padded[1], pos), padded[2], keep
    )
    assert np.isfinite(out).all()
    assert_close(out[..., pad:, :], ref, atol=1e-12, rtol=0)
    assert_close(out[..., :pad, :], np.zeros((1, 2, pad, 4)), atol=0, rtol=0)  # pads see nothing


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_additive_mask_combines_first_and_fills_finfo_min(dtype):
    causal = causal_mask(3)
    pad = padding_mask(np.array([[1, 0, 0]]))  # (1, 1, 1, 3)
    add = additive_mask(causal, pad, dtype=dtype)
    assert add.dtype == dtype and add.shape == (1, 1, 3, 3)
    assert np.isfinite(add).all()
    keep = causal & pad
    assert np.array_equal(add == 0, keep)
    assert (add[~keep] == np.finfo(dtype).min).all()
    if dtype == np.float16:
        with np.errstate(over="ignore"):
            naive = additive_mask(causal, dtype=dtype) + additive_mask(pad, dtype=dtype)
            assert np.isneginf(naive).any()  # the bug the library avoids
            assert np.isneginf(np.float16(np.finfo(np.float16).min) + np.float16(-16))


def test_additive_mask_none_and_errors():
    assert additive_mask(None, dtype=np.float32) is None
    with pytest.raises(TypeError, match="boolean"):
        additive_mask(np.ones((2, 2)), dtype=np.float32)
    with pytest.raises(TypeError, match="floating"):
        additive_mask(causal_mask(2), dtype=np.int32)
    with pytest.raises(ValueError, match="broadcast"):
        additive_mask(causal_mask(2), causal_mask(3), dtype=np.float32)


def test_extension_errors():
    with pytest.raises(ValueError, match="cache_len"):
        prefill_chunk_mask(2, -1)
    with pytest.raises(TypeError, match="chunk_len"):
        prefill_chunk_mask(2.0, 1)
    with pytest.raises(ValueError, match=r"shape \(B, S\).*\(5,\)"):
        positions_from_attention_mask(np.ones(5))
    with pytest.raises(ValueError, match="only 0 and 1"):
        positions_from_attention_mask(np.array([[1, 2]]))


def test_masks_arguments():
    # a huge window is the causal mask (no integer overflow); dtypes that are not NumPy floats
    assert np.array_equal(sliding_window_mask(4, 10**30), causal_mask(4))
    for dtype in (None, "bfloat16", torch.float16):
        with pytest.raises(TypeError, match="dtype"):
            additive_mask(causal_mask(2), dtype=dtype)


@pytest.mark.parametrize(
    "mask",
    [
        torch.tensor([[1.0, 0.0]], dtype=torch.bfloat16),
        torch.tensor([[1.0, 0.0]], requires_grad=True),
    ],
)
def test_a_torch_padding_mask_is_read_like_a_numpy_one(mask):
    assert np.array_equal(padding_mask(mask), padding_mask(np.array([[1, 0]])))


def test_numpy_attention_reads_a_torch_mask_that_requires_grad():
    r = np.random.default_rng(0)
    q, k = r.normal(size=(3, 4)), r.normal(size=(5, 4))
    zeros = torch.zeros(3, 5, requires_grad=True)
    np.testing.assert_array_equal(
        scaled_dot_product_attention(q, k, k, zeros), scaled_dot_product_attention(q, k, k)
    )


def test_a_ragged_mask_is_a_type_error_that_names_it():
    with pytest.raises(TypeError, match="attention_mask must be a numeric array"):
        padding_mask([[1, 1], [1]])
