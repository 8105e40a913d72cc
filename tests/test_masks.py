"""Tests for attnbook.masks, against hand-written masks and torch's causal biases."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right

from attnbook.masks import causal_mask, combine_masks, padding_mask, sliding_window_mask


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
