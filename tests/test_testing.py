"""The comparison helper itself must fail where it should — the other tests rely on it."""

import numpy as np
import pytest
import torch

from attnbook.testing import assert_close


def test_nan_fails_even_against_a_close_value():
    with pytest.raises(AssertionError, match="NaN"):
        assert_close([np.nan, 1.0], [0.0, 1.0], atol=1e9, rtol=1e9)


def test_nan_in_expected_fails():
    with pytest.raises(AssertionError, match="NaN"):
        assert_close([0.0], [np.nan], atol=1.0, rtol=0)


def test_shape_mismatch_fails_instead_of_broadcasting():
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_close(np.zeros((2, 1)), np.zeros((2, 3)), atol=1, rtol=0)


def test_reports_max_and_mean_difference():
    with pytest.raises(AssertionError, match=r"max abs diff 3\.000e-01, mean abs diff 1\.500e-01"):
        assert_close([1.0, 2.3], [1.0, 2.0], atol=1e-3, rtol=0)


def test_infinities_must_match():
    assert_close([np.inf, -np.inf], [np.inf, -np.inf], atol=0, rtol=0)
    with pytest.raises(AssertionError, match="infinities"):
        assert_close([np.inf], [-np.inf], atol=0, rtol=0)
    with pytest.raises(AssertionError, match="infinities"):
        assert_close([np.inf], [1.0], atol=1e300, rtol=0)


def test_accepts_torch_tensors_including_bfloat16():
    assert_close(torch.tensor([1.0, 2.0], dtype=torch.bfloat16), [1.0, 2.0], atol=0, rtol=0)


def test_within_tolerance_passes():
    assert_close([1.0, 2.0], [1.0 + 1e-9, 2.0], atol=1e-8, rtol=0)
    assert_close([100.0], [101.0], atol=0, rtol=0.011)


@pytest.mark.parametrize("atol", [None, "a", True])
def test_tolerance_of_the_wrong_kind_is_a_type_error(atol):
    with pytest.raises(TypeError, match="atol"):
        assert_close([1.0], [1.0], atol=atol, rtol=0)


@pytest.mark.parametrize("rtol", [-1e-3, float("nan"), float("inf")])
def test_tolerance_out_of_range_is_a_value_error(rtol):
    with pytest.raises(ValueError, match="rtol"):
        assert_close([1.0], [1.0], atol=0, rtol=rtol)


def test_zero_d_array_tolerance_is_a_real_number():
    assert_close([1.0], [1.05], atol=np.array(0.1), rtol=0)
    with pytest.raises(AssertionError, match="not close"):
        assert_close([1.0], [1.05], atol=np.array(0.01), rtol=0)


def test_float16_inputs_are_compared_in_float64():
    # 2049 is not a float16 (it rounds to 2048); the difference must be measured exactly
    with pytest.raises(AssertionError, match="max abs diff 1.000e"):
        assert_close(np.array([2048.0], np.float16), [2049.0], atol=0.5, rtol=0)
