"""Tests for attnbook.scaling: the Monte Carlo measurements against their closed forms."""

import math

import numpy as np
import pytest

from attnbook.attention import softmax
from attnbook.scaling import (
    saturation_stats,
    saturation_stats_core,
    score_samples,
    score_samples_core,
    score_variance,
)
from attnbook.testing import assert_close


@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_unscaled_variance_is_d_k(d_k):
    n = 40_000
    var = score_variance(d_k, n, scaled=False, rng=0)
    # Var(q.k) = d_k exactly; the estimate's standard error is ~ d_k * sqrt(2 (1 + 2/d_k) / n)
    # (the product of two normals has kurtosis 9). Allow 5 standard errors.
    se = d_k * math.sqrt(2 * (1 + 2 / d_k) / n) * math.sqrt(2)
    assert abs(var - d_k) < 5 * se


@pytest.mark.parametrize("d_k", [4, 512])
def test_scaled_variance_is_one(d_k):
    n = 40_000
    var = score_variance(d_k, n, scaled=True, rng=1)
    assert abs(var - 1.0) < 5 * math.sqrt(2 * 3 / n)


def test_samples_are_seeded_and_chunking_does_not_change_them():
    a = score_samples(8, 1000, rng=5)
    b = score_samples(8, 1000, rng=5)
    assert np.array_equal(a, b)


def test_scores_are_the_dot_products_of_the_drawn_vectors():
    gen = np.random.default_rng(3)
    q = gen.standard_normal((1, 6))
    k = gen.standard_normal((1, 6))
    s = score_samples(6, 1, scaled=True, rng=3)
    assert s[0] == pytest.approx(float(q[0] @ k[0]) / math.sqrt(6), abs=1e-12)


def test_saturation_with_one_dimension_and_two_keys_matches_direct_computation():
    gen = np.random.default_rng(11)
    q = gen.standard_normal((50, 1, 3))
    k = gen.standard_normal((50, 2, 3))
    p = softmax(np.einsum("nid,njd->nj", q, k))
    stats = saturation_stats(3, 2, 50, scaled=False, rng=11)
    assert stats.mean_max_weight == pytest.approx(p.max(axis=1).mean(), abs=1e-12)
    # For two keys the Jacobian is p1 p2 [[1, -1], [-1, 1]] with Frobenius norm 2 p1 p2.
    assert stats.mean_jacobian_norm == pytest.approx((2 * p[:, 0] * p[:, 1]).mean(), abs=1e-12)


def test_scaling_keeps_weights_far_from_one_hot():
    scaled = saturation_stats(512, 16, 2000, scaled=True, rng=0)
    unscaled = saturation_stats(512, 16, 2000, scaled=False, rng=0)
    assert unscaled.mean_max_weight > 0.9 > 0.4 > scaled.mean_max_weight
    assert unscaled.mean_jacobian_norm < scaled.mean_jacobian_norm
    assert scaled.mean_entropy < math.log(16)
    assert scaled.mean_sorted_weights.sum() == pytest.approx(1.0, abs=1e-12)


def test_score_samples_core_is_the_scaled_dot_product_of_its_draws():
    gen = np.random.default_rng(7)
    q, k = gen.standard_normal((5, 4)), gen.standard_normal((5, 4))
    expected = np.array([sum(q[n, t] * k[n, t] for t in range(4)) for n in range(5)])
    got = score_samples_core(4, 5, True, np.random.default_rng(7))
    assert_close(got, expected / 2.0, atol=1e-14, rtol=0)  # sqrt(4) = 2
    got = score_samples_core(4, 5, False, np.random.default_rng(7))
    assert_close(got, expected, atol=1e-14, rtol=0)


def test_saturation_stats_core_on_two_keys_by_hand():
    # q = [1, 0], keys [a, 0] and [0, 0]: scores a and 0, p = [e^a, 1] / (e^a + 1)
    a = np.array([0.0, math.log(3.0)])
    q = np.tile([[[1.0, 0.0]]], (2, 1, 1))  # (2, 1, 2)
    k = np.stack([np.stack([[x, 0.0], [0.0, 0.0]]) for x in a])  # (2, 2, 2)
    max_w, ent, sorted_p, jac = saturation_stats_core(q, k, 1.0)
    p1 = np.array([0.5, 0.75])
    assert_close(max_w, p1, atol=1e-15, rtol=0)
    assert_close(ent, -(p1 * np.log(p1) + (1 - p1) * np.log(1 - p1)), atol=1e-15, rtol=0)
    assert_close(sorted_p, np.stack([p1, 1 - p1], axis=-1), atol=1e-15, rtol=0)
    assert_close(jac, 2 * p1 * (1 - p1), atol=1e-15, rtol=0)  # two keys: ||J||_F = 2 p1 p2


@pytest.mark.parametrize("bad", [0, -3])
def test_dimensions_below_one_are_value_errors(bad):
    with pytest.raises(ValueError, match="d_k must be >= 1"):
        score_samples(bad, 10)
    with pytest.raises(ValueError, match="n_keys must be >= 1"):
        saturation_stats(4, bad, 10)


@pytest.mark.parametrize("bad", [2.5, 2.0, True, "3"])
def test_non_integer_dimensions_are_type_errors(bad):
    # the one check rule: causal_mask(2.5) and score_samples(2.5, 10) fail alike
    with pytest.raises(TypeError, match="d_k must be an integer"):
        score_samples(bad, 10)
    with pytest.raises(TypeError, match="n_draws must be an integer"):
        saturation_stats(4, 4, bad)


def test_score_variance_needs_two_samples():
    with pytest.raises(ValueError, match="n_samples"):
        score_variance(4, 1)


def test_non_bool_flags_rejected():
    with pytest.raises(TypeError, match="scaled"):
        saturation_stats(4, 4, 10, scaled="no")
    with pytest.raises(TypeError, match="scaled"):
        score_samples(4, 10, scaled=1)


@pytest.mark.parametrize("rng,exc", [("x", TypeError), (-1, ValueError), (True, TypeError),
                                     (1.0, TypeError)])
def test_rng_argument(rng, exc):
    with pytest.raises(exc, match="rng"):
        score_samples(4, 10, rng=rng)


def test_rng_accepts_generator_seed_and_0d_array():
    a = score_samples(3, 4, rng=np.random.default_rng(9))
    assert np.array_equal(a, score_samples(3, 4, rng=9))
    assert np.array_equal(a, score_samples(3, 4, rng=np.array(9)))
