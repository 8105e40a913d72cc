"""Tests for the chunked-prefill, left-padding and additive-mask extensions of attnbook.masks.

References: rows of the full causal / sliding-window mask, hand-written masks and positions,
and one causal attention pass over the whole prompt (float64).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.attention import scaled_dot_product_attention
from attnbook.masks import (
    additive_mask,
    causal_mask,
    combine_masks,
    padding_mask,
    positions_from_attention_mask,
    prefill_chunk_mask,
    sliding_window_mask,
)
from attnbook.positional import apply_rope
from attnbook.testing import assert_close


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
        outs.append(scaled_dot_product_attention(
            q[..., start:start + n, :], k[..., :start + n, :], v[..., :start + n, :], keep))
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
@given(chunks=st.lists(st.integers(1, 4), min_size=1, max_size=5),
       window=st.one_of(st.none(), st.integers(1, 6)), seed=st.integers(0, 2**16))
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
    ref = scaled_dot_product_attention(apply_rope(q, np.arange(T)), apply_rope(k, np.arange(T)),
                                       v, causal=True)
    padded = [np.concatenate([rng.normal(size=(1, 2, pad, 4)) * 50, t], axis=-2)
              for t in (q, k, v)]
    am = np.array([[0] * pad + [1] * T])
    pos = positions_from_attention_mask(am)[:, None, :]  # (B, 1, S) broadcasts over heads
    keep = combine_masks(causal_mask(T + pad), padding_mask(am))
    out = scaled_dot_product_attention(apply_rope(padded[0], pos), apply_rope(padded[1], pos),
                                       padded[2], keep)
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
