"""Tests for attnbook.scaling: the Monte Carlo measurements against their closed forms."""

import math

import numpy as np
import pytest

from attnbook.attention import softmax
from attnbook.scaling import saturation_stats, score_samples, score_variance


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


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_dimensions_are_rejected(bad):
    with pytest.raises(ValueError, match="d_k must be a positive integer"):
        score_samples(bad, 10)
