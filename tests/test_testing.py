"""The comparison helpers themselves must fail where they should — the other tests rely on them.

``assert_close`` hands both sides, widened to float64, to ``torch.testing.assert_close``;
``assert_low_precision_close`` is the book's 2x-plain-error rule.
"""

import numpy as np
import pytest
import torch

from attnbook.testing import assert_close, assert_low_precision_close


def test_nan_fails_even_against_a_close_value():
    with pytest.raises(AssertionError, match="absolute difference: nan"):
        assert_close([np.nan, 1.0], [0.0, 1.0], atol=1e9, rtol=1e9)


def test_nan_in_expected_fails():
    with pytest.raises(AssertionError, match="absolute difference: nan"):
        assert_close([0.0], [np.nan], atol=1.0, rtol=0)
    with pytest.raises(AssertionError, match="absolute difference: nan"):
        assert_close([np.nan], [np.nan], atol=1.0, rtol=0)  # NaN is never equal, not even NaN


def test_shape_mismatch_fails_instead_of_broadcasting():
    with pytest.raises(AssertionError, match="'shape' do not match"):
        assert_close(np.zeros((2, 1)), np.zeros((2, 3)), atol=1, rtol=0)


def test_reports_the_greatest_difference_and_where():
    with pytest.raises(AssertionError, match=r"absolute difference: 0\.29+\d* at index \(1,\)"):
        assert_close([1.0, 2.3], [1.0, 2.0], atol=1e-3, rtol=0)


def test_infinities_must_match():
    assert_close([np.inf, -np.inf], [np.inf, -np.inf], atol=0, rtol=0)
    with pytest.raises(AssertionError, match="absolute difference: inf"):
        assert_close([np.inf], [-np.inf], atol=0, rtol=0)
    with pytest.raises(AssertionError, match="absolute difference: inf"):
        assert_close([np.inf], [1.0], atol=1e300, rtol=0)


def test_accepts_torch_tensors_including_bfloat16():
    assert_close(torch.tensor([1.0, 2.0], dtype=torch.bfloat16), [1.0, 2.0], atol=0, rtol=0)


def test_compares_what_torch_refuses_to_compare():
    # torch.testing.assert_close refuses a tensor against an array, and float32 against float64.
    with pytest.raises(TypeError):
        torch.testing.assert_close(torch.ones(2), np.ones(2), atol=0, rtol=0)
    assert_close(torch.ones(2), np.ones(2), atol=0, rtol=0)
    assert_close(np.ones(2, np.float32), np.ones(2), atol=0, rtol=0)
    assert_close(np.arange(3), [0.0, 1.0, 2.0], atol=0, rtol=0)


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
    with pytest.raises(AssertionError, match=r"absolute difference: 1\.0 at index"):
        assert_close(np.array([2048.0], np.float16), [2049.0], atol=0.5, rtol=0)


# --------------------------------------------------------------------------------------------------
# The low-precision rule: err(actual) <= 2 * err(plain) + floor


def test_low_precision_rule_passes_within_twice_the_plain_error():
    exact = np.array([1.0, 2.0])
    assert_low_precision_close([1.0, 2.19], exact, plain=[1.1, 2.0], floor=0.0)  # 0.19 <= 0.2
    assert_low_precision_close(exact, exact, plain=exact, floor=0.0)  # exact everywhere


def test_low_precision_rule_fails_above_twice_the_plain_error():
    exact = np.array([1.0, 2.0])
    with pytest.raises(AssertionError, match=r"error 2\.100e-01 > 2 x plain error 1\.000e-01"):
        assert_low_precision_close([1.0, 2.21], exact, plain=[1.1, 2.0], floor=0.0)
    # The floor is what an exact plain result leaves.
    assert_low_precision_close([1.0, 2.001], exact, plain=exact, floor=1e-3)
    with pytest.raises(AssertionError, match="floor"):
        assert_low_precision_close([1.0, 2.01], exact, plain=exact, floor=1e-3)


def test_low_precision_rule_accepts_torch_low_precision_against_numpy():
    x64 = np.linspace(-3, 3, 101)
    got = torch.from_numpy(x64).to(torch.bfloat16).exp()  # torch's bfloat16 exp
    plain = torch.from_numpy(x64).to(torch.bfloat16).double().exp().to(torch.bfloat16)
    assert_low_precision_close(got, np.exp(x64), plain=plain, floor=0.0)


@pytest.mark.parametrize("side", ["actual", "reference", "plain"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_low_precision_rule_fails_on_nan_and_infinity_on_any_side(side, bad):
    # An infinite plain error would excuse any error; a NaN would compare False either way.
    args = {
        "actual": np.array([1.0, 2.0]),
        "reference": np.array([1.0, 2.0]),
        "plain": np.array([1.0, 2.0]),
    }
    args[side] = np.array([1.0, bad])
    with pytest.raises(AssertionError, match=f"{side} is not finite"):
        assert_low_precision_close(
            args["actual"], args["reference"], plain=args["plain"], floor=1e9
        )


def test_low_precision_rule_needs_one_shape():
    with pytest.raises(AssertionError, match="shape mismatch"):
        assert_low_precision_close(np.zeros(3), np.zeros(3), plain=np.zeros(1), floor=1.0)


@pytest.mark.parametrize(
    ("floor", "exc"),
    [(-1.0, ValueError), (np.nan, ValueError), (None, TypeError), ("1", TypeError)],
)
def test_low_precision_floor_is_checked(floor, exc):
    with pytest.raises(exc, match="floor"):
        assert_low_precision_close([1.0], [1.0], plain=[1.0], floor=floor)
