"""Tests for attnbook.scaling: the Monte Carlo measurements against their closed forms."""

import math

import numpy as np
import pytest

from attnbook.attention import softmax
from attnbook.scaling import (
    query_gradient_core,
    query_gradient_stats,
    saturation_stats,
    saturation_stats_core,
    scaling_data,
    score_histogram,
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


@pytest.mark.parametrize(
    "rng,exc", [("x", TypeError), (-1, ValueError), (True, TypeError), (1.0, TypeError)]
)
def test_rng_argument(rng, exc):
    with pytest.raises(exc, match="rng"):
        score_samples(4, 10, rng=rng)


def test_rng_accepts_generator_seed_and_0d_array():
    a = score_samples(3, 4, rng=np.random.default_rng(9))
    assert np.array_equal(a, score_samples(3, 4, rng=9))
    assert np.array_equal(a, score_samples(3, 4, rng=np.array(9)))


def test_score_histogram_by_hand():
    # Scores -1, 0.5 and 1 over 2 bins on [-1, 1]: edges -1, 0, 1 (width 1); one score in the
    # left bin and two in the right, so the densities are 1/3 and 2/3 (they integrate to 1).
    centres, density, width = score_histogram([-1.0, 0.5, 1.0], n_bins=2)
    assert width == 1.0
    assert_close(centres, [-0.5, 0.5], atol=0, rtol=0)
    assert_close(density, [1 / 3, 2 / 3], atol=1e-15, rtol=0)
    # All-zero scores: the bins span [-1, 1] rather than collapsing to a point.
    centres, density, width = score_histogram(np.zeros(4), n_bins=1)
    assert (width, float(centres[0]), float(density[0])) == (2.0, 0.0, 0.5)


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: score_histogram([1.0, 2.0], n_bins=0), ValueError, "n_bins"),
        (lambda: score_histogram([1.0, 2.0], n_bins=2.0), TypeError, "n_bins"),
        (lambda: score_histogram(["a", "b"]), TypeError, "scores"),
        (lambda: scaling_data(4, n_samples=1), ValueError, "n_samples"),
        (lambda: scaling_data(4, seed=-1), ValueError, "seed"),
        (lambda: scaling_data(0), ValueError, "d_k"),
        (lambda: scaling_data(4, 0), ValueError, "n_keys"),
    ],
)
def test_scaling_data_and_histogram_check_their_arguments(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


@pytest.mark.parametrize("d_k, scaled", [(16, False), (256, True)])
def test_scaling_data_is_the_seeded_draws_binned(d_k, scaled):
    # Independent calls with the documented seeds (histogram seed, softmax panel seed + 1).
    data = scaling_data(d_k, 8, scaled=scaled, n_samples=300, n_draws=40, seed=5)
    s = score_samples(d_k, 300, scaled=scaled, rng=5)
    assert_close(data.scores, s, atol=0, rtol=0)
    assert data.variance == pytest.approx(float(np.var(s, ddof=1)), rel=1e-14)
    m = np.abs(s).max()
    density, edges = np.histogram(s, bins=np.linspace(-m, m, 42), density=True)
    assert_close(data.density, density, atol=1e-15, rtol=1e-12)
    assert_close(data.centres, (edges[1:] + edges[:-1]) / 2, atol=1e-12, rtol=1e-12)
    stats = saturation_stats(d_k, 8, 40, scaled=scaled, rng=6)
    assert_close(data.stats.mean_sorted_weights, stats.mean_sorted_weights, atol=0, rtol=0)
    # The expected density is N(0, sigma^2), sigma^2 = 1 scaled and d_k unscaled: its peak is
    # 1 / sqrt(2 pi sigma^2), it spans 5 sigma each side and integrates to 1 (to 1e-6 there).
    var = 1.0 if scaled else float(d_k)
    assert data.expected_variance == var
    assert data.expected_density.max() == pytest.approx(1 / math.sqrt(2 * math.pi * var))
    assert data.expected_x[-1] == pytest.approx(5 * math.sqrt(var))
    area = float(
        np.sum(
            np.diff(data.expected_x) * (data.expected_density[1:] + data.expected_density[:-1]) / 2
        )
    )
    assert area == pytest.approx(1.0, abs=1e-5)


# --- query_gradient_stats: the gradient that reaches the query --------------------------------


def _draws(d_k, n_keys, n_draws, seed):
    """The documented draw stream: per draw one block of (1 + n_keys) d_k + n_keys normals."""
    x = np.random.default_rng(seed).standard_normal((n_draws, (1 + n_keys) * d_k + n_keys))
    q = x[:, :d_k]
    k = x[:, d_k : (1 + n_keys) * d_k].reshape(n_draws, n_keys, d_k)
    return q, k, x[:, (1 + n_keys) * d_k :]


def _autograd_query_gradient(q, k, v, scale):
    """||d l / d q|| and the largest weight by torch.autograd, float64, l = sum_j p_j v_j."""
    import torch

    qt = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    kt, vt = torch.tensor(k, dtype=torch.float64), torch.tensor(v, dtype=torch.float64)
    p = torch.softmax(scale * torch.einsum("mnd,md->mn", kt, qt), dim=-1)
    (p * vt).sum().backward()  # the draws are independent: one backward gives every draw's
    return p.max(dim=-1).values.detach().numpy(), qt.grad.norm(dim=-1).numpy()


@pytest.mark.parametrize("d_k, n_keys", [(1, 2), (8, 5), (64, 16)])
def test_query_gradient_matches_torch_autograd_on_the_documented_draws(d_k, n_keys):
    n, seed, thr = 300, 4, 0.9
    got = query_gradient_stats(d_k, n_keys, n, threshold=thr, rng=seed)
    q, k, v = _draws(d_k, n_keys, n, seed)
    for arm, scale in (("scaled", 1 / math.sqrt(d_k)), ("unscaled", 1.0)):
        max_w, grad = _autograd_query_gradient(q, k, v, scale)
        assert_close(got.max_weight[arm], max_w, atol=1e-14, rtol=0)
        assert_close(got.grad_norm[arm], grad, atol=1e-13, rtol=1e-12)
        sat = max_w > thr
        assert got.saturated_share[arm] == pytest.approx(sat.mean(), abs=1e-15)
        assert got.mean_grad_norm[arm] == pytest.approx(grad.mean(), rel=1e-12)
        assert got.median_grad_norm[arm] == pytest.approx(np.median(grad), rel=1e-12)
        assert got.saturated_grad_share[arm] == pytest.approx(
            grad[sat].sum() / grad.sum(), rel=1e-12, abs=1e-15
        )
    # d_k = 1: 1/sqrt(1) = 1, so the two arms are the same computation.
    if d_k == 1:
        assert np.array_equal(got.grad_norm["scaled"], got.grad_norm["unscaled"])


def test_query_gradient_core_on_two_keys_by_hand():
    # d_k = 1, q = [1], keys [ln 3] and [0], values [1, 0]: l = p_1 = sigmoid(c ln 3), and
    # dl/dq = p_1 (1 - p_1) c (k_1 - k_2) = p_1 (1 - p_1) c ln 3.
    q = np.array([[1.0]])
    k = np.array([[[math.log(3.0)], [0.0]]])
    v = np.array([[1.0, 0.0]])
    max_w, grad = query_gradient_core(q, k, v, 1.0)
    assert_close(max_w, [0.75], atol=1e-15, rtol=0)
    assert_close(grad, [0.75 * 0.25 * math.log(3.0)], atol=1e-15, rtol=0)
    p1 = math.sqrt(3.0) / (math.sqrt(3.0) + 1)  # c = 1/2: e^(ln 3 / 2) = sqrt(3)
    max_w, grad = query_gradient_core(q, k, v, 0.5)
    assert_close(max_w, [p1], atol=1e-15, rtol=0)
    assert_close(grad, [p1 * (1 - p1) * 0.5 * math.log(3.0)], atol=1e-15, rtol=0)


def test_query_gradient_of_a_saturated_draw_is_tiny_and_shares_add_up():
    # Keys [40] and [0], q = [1]: p_1 = 1 - e^-40 to double precision, so dl/dq ~ 40 e^-40.
    max_w, grad = query_gradient_core(
        np.array([[1.0]]), np.array([[[40.0], [0.0]]]), np.array([[1.0, -1.0]]), 1.0
    )
    assert max_w[0] == 1.0 and 0 < grad[0] < 1e-15
    stats = query_gradient_stats(512, 16, 400, rng=1)
    assert stats.saturated_share["scaled"] == 0.0 == stats.saturated_grad_share["scaled"]
    assert 0 < stats.saturated_share["unscaled"] < 1
    assert 0 <= stats.saturated_grad_share["unscaled"] < stats.saturated_share["unscaled"]


def test_query_gradient_draws_do_not_depend_on_the_chunk_size(monkeypatch):
    import attnbook.scaling as scaling_module

    whole = query_gradient_stats(16, 4, 50, rng=2)
    monkeypatch.setattr(scaling_module, "_CHUNK_ELEMENTS", 3 * (17 * 4 + 4))  # 3 draws a chunk
    chunked = query_gradient_stats(16, 4, 50, rng=2)
    for arm in ("scaled", "unscaled"):
        assert np.array_equal(whole.grad_norm[arm], chunked.grad_norm[arm])
        assert np.array_equal(whole.max_weight[arm], chunked.max_weight[arm])


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"d_k": 0}, ValueError, "d_k must be >= 1"),
        ({"d_k": 2.0}, TypeError, "d_k must be an integer"),
        ({"n_keys": 0}, ValueError, "n_keys must be >= 1"),
        ({"n_draws": True}, TypeError, "n_draws must be an integer"),
        ({"threshold": 1.0}, ValueError, "threshold must be < 1"),
        ({"threshold": 0}, ValueError, "threshold must be > 0"),
        ({"threshold": float("nan")}, ValueError, "threshold must be finite"),
        ({"threshold": "0.9"}, TypeError, "threshold must be a real number"),
        ({"rng": -1}, ValueError, "rng"),
    ],
)
def test_query_gradient_stats_names_a_bad_argument(kwargs, exc, name):
    args = {"d_k": 4, "n_keys": 4, "n_draws": 10, **kwargs}
    with pytest.raises(exc, match=name):
        query_gradient_stats(args.pop("d_k"), args.pop("n_keys"), args.pop("n_draws"), **args)
