"""Why scores are divided by sqrt(d_k): the variance of dot products and softmax saturation.

If the components of a query ``q`` and a key ``k`` are independent with mean 0 and variance 1,
each product ``q_i k_i`` has mean 0 and variance 1, so the dot product ``q . k`` — a sum of
``d_k`` of them — has variance ``d_k`` (Vaswani et al., 2017, footnote 4). Dividing by
``sqrt(d_k)`` brings the variance back to 1 whatever the head dimension, and keeps the softmax
out of its saturated, near one-hot regime where its Jacobian, and so the gradient reaching the
scores, is almost zero.

The functions here *measure* these facts by Monte Carlo with a seeded generator; the chapters
and the explorers plot what they return: :func:`scaling_data` is one setting of the √d_k
explorer (chapter 3, :mod:`attnbook.explorers.scaling`), :func:`temperature_sweep` the softmax
of one row of scores at several temperatures (chapter 4, :mod:`attnbook.explorers.temperature`),
the other knob that moves a softmax between uniform and saturated. :func:`query_gradient_stats`
follows the gradient one step further than the Jacobian, to what a learner changes: the query.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import checks
from .attention import (
    entropy,
    entropy_core,
    softmax,
    softmax_core,
    softmax_jacobian,
    softmax_jacobian_core,
)

__all__ = [
    "score_samples_core",
    "score_samples",
    "score_variance",
    "SaturationStats",
    "saturation_stats_core",
    "saturation_stats",
    "QueryGradientStats",
    "query_gradient_core",
    "query_gradient_stats",
    "score_histogram",
    "ScalingData",
    "scaling_data",
    "TEMPERATURE_SCORE_SETS",
    "temperature_scores",
    "TemperatureSweep",
    "temperature_sweep",
]

# Draws are processed in chunks so that d_k = 1024 with 10^4 draws stays within a few MB.
_CHUNK_ELEMENTS = 2_000_000


# fmt: off
def score_samples_core(d_k, n_samples, scaled, rng):
    """Scores q . k of ``n_samples`` pairs of i.i.d. standard-normal vectors.

    Divided by ``sqrt(d_k)`` when ``scaled``. Returns shape (n_samples,).
    """
    q = rng.standard_normal((n_samples, d_k))  # (n, d_k)
    k = rng.standard_normal((n_samples, d_k))  # (n, d_k)
    scores = np.einsum("nd,nd->n", q, k)  # (n,) one dot product per pair
    return scores * (1 / np.sqrt(d_k)) if scaled else scores
# fmt: on


def score_samples(d_k: int, n_samples: int, *, scaled: bool = True, rng=0) -> np.ndarray:
    """Draw attention scores ``q . k`` for i.i.d. standard-normal ``q, k`` in ``R^{d_k}``.

    Checks its arguments and calls :func:`score_samples_core` on chunks of draws, so that a
    large ``d_k * n_samples`` stays within a few MB (the chunk size depends on ``d_k`` only,
    so a seed always gives the same scores).

    Args:
        d_k: head dimension (the length of ``q`` and ``k``), an integer >= 1.
        n_samples: number of independent (q, k) pairs, an integer >= 1.
        scaled: divide each score by ``sqrt(d_k)`` as in Vaswani et al. (2017), eq. 1.
        rng: a ``numpy.random.Generator`` or an integer seed >= 0.

    Returns:
        float64 array ``(n_samples,)`` of scores. Unscaled they have variance ``d_k``, scaled
        variance 1 (in expectation).

    Raises:
        TypeError: if ``d_k`` or ``n_samples`` is not an integer (``2.5``, ``True``), ``scaled``
            is not a bool or ``rng`` is neither a Generator nor an integer seed.
        ValueError: if ``d_k`` or ``n_samples`` is below 1, or the seed is negative.

    Source: Vaswani et al. (2017), footnote 4.
    """
    d_k = checks.check_int(d_k, "d_k", 1)
    n_samples = checks.check_int(n_samples, "n_samples", 1)
    scaled = checks.check_bool(scaled, "scaled")
    gen = checks.check_rng(rng)
    chunk = max(1, _CHUNK_ELEMENTS // d_k)  # draws per chunk: memory stays bounded
    parts = [
        score_samples_core(d_k, min(chunk, n_samples - start), scaled, gen)
        for start in range(0, n_samples, chunk)
    ]
    return np.concatenate(parts)


def score_variance(d_k: int, n_samples: int = 20_000, *, scaled: bool = False, rng=0) -> float:
    """Measured variance of ``q . k`` (optionally scaled) over ``n_samples`` draws.

    The expected value is ``d_k`` unscaled and 1 scaled; the Monte Carlo standard error of the
    estimate is about ``variance * sqrt(2 / n_samples)``.

    Args:
        d_k: head dimension (the length of ``q`` and ``k``).
        n_samples: number of independent (q, k) pairs drawn.
        scaled: divide each score by ``sqrt(d_k)`` (Vaswani et al., 2017, eq. 1). Default
            False, the unscaled variance of footnote 4.
        rng: a ``numpy.random.Generator`` or a seed (default 0, reproducible).

    Returns:
        The sample variance (ddof = 1), a float.

    Raises:
        TypeError: if ``d_k`` or ``n_samples`` is not an integer, ``scaled`` is not a bool or
            ``rng`` is neither a Generator nor an integer seed.
        ValueError: if ``d_k < 1``, ``n_samples < 2`` (a sample variance needs two draws), or
            the seed is negative.
    """
    n_samples = checks.check_int(n_samples, "n_samples")
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2 for a sample variance (ddof=1), got {n_samples}")
    return float(np.var(score_samples(d_k, n_samples, scaled=scaled, rng=rng), ddof=1))


@dataclass(frozen=True)
class SaturationStats:
    """How peaked the softmax of one query over ``n_keys`` random keys is, averaged over draws.

    Attributes:
        d_k: head dimension.
        n_keys: number of keys per query.
        scaled: whether scores were divided by ``sqrt(d_k)``.
        n_draws: number of independent queries (each with its own keys).
        mean_max_weight: mean over draws of the largest attention weight; ``1 / n_keys`` is
            uniform, 1 is one-hot.
        mean_entropy: mean entropy of the weights, nats; ``log(n_keys)`` is uniform.
        mean_sorted_weights: ``(n_keys,)`` mean of the weights sorted in decreasing order.
        mean_jacobian_norm: mean Frobenius norm of the softmax Jacobian ``diag(p) - p p^T``;
            it goes to 0 as the softmax saturates.
    """

    d_k: int
    n_keys: int
    scaled: bool
    n_draws: int
    mean_max_weight: float
    mean_entropy: float
    mean_sorted_weights: np.ndarray
    mean_jacobian_norm: float


# fmt: off
def saturation_stats_core(q, k, scale):
    """How peaked each query's softmax over its own keys is.

    q (m, 1, d_k), k (m, n, d_k). Returns, per draw, the largest weight, the
    entropy (nats), the weights sorted in decreasing order and ||J||_F.
    """
    scores = (q @ np.swapaxes(k, -1, -2))[:, 0, :] * scale  # (m, n)
    p = softmax_core(scores)  # (m, n)
    jac = softmax_jacobian_core(p)  # (m, n, n)
    jac_norm = np.sqrt((jac**2).sum(axis=(-2, -1)))  # (m,) Frobenius norm
    sorted_p = -np.sort(-p, axis=-1)  # (m, n) decreasing
    return p.max(axis=-1), entropy_core(p), sorted_p, jac_norm
# fmt: on


def saturation_stats(
    d_k: int, n_keys: int = 16, n_draws: int = 10_000, *, scaled: bool = True, rng=0
) -> SaturationStats:
    """Measure softmax saturation for one query against ``n_keys`` random keys.

    ``q`` and every key are drawn i.i.d. standard normal in ``R^{d_k}``; the weights are
    ``softmax(q K^T * scale)`` with ``scale = 1/sqrt(d_k)`` when ``scaled`` else 1. Checks its
    arguments, draws in chunks (bounded memory), calls :func:`saturation_stats_core` on each
    chunk and averages over the draws.

    Args:
        d_k: head dimension, an integer >= 1.
        n_keys: keys per query, an integer >= 1.
        n_draws: number of independent (q, K) draws averaged over, an integer >= 1.
        scaled: apply the ``1/sqrt(d_k)`` scale.
        rng: a ``numpy.random.Generator`` or an integer seed >= 0.

    Returns:
        :class:`SaturationStats`.

    Raises:
        TypeError: if ``d_k``, ``n_keys`` or ``n_draws`` is not an integer, ``scaled`` is not
            a bool (a string such as ``'no'`` is rejected) or ``rng`` is neither a Generator
            nor an integer seed.
        ValueError: if ``d_k``, ``n_keys`` or ``n_draws`` is below 1, or the seed is negative.
    """
    d_k = checks.check_int(d_k, "d_k", 1)
    n_keys = checks.check_int(n_keys, "n_keys", 1)
    n_draws = checks.check_int(n_draws, "n_draws", 1)
    scaled = checks.check_bool(scaled, "scaled")
    gen = checks.check_rng(rng)
    scale = 1 / np.sqrt(d_k) if scaled else 1.0
    chunk = max(1, _CHUNK_ELEMENTS // (d_k * n_keys))  # draws per chunk: bounded memory
    sum_max = sum_ent = sum_jac = 0.0
    sum_sorted = np.zeros(n_keys)
    for start in range(0, n_draws, chunk):
        m = min(chunk, n_draws - start)
        q = gen.standard_normal((m, 1, d_k))  # (m, 1, d_k)
        k = gen.standard_normal((m, n_keys, d_k))  # (m, n_keys, d_k)
        max_w, ent, sorted_p, jac_norm = saturation_stats_core(q, k, scale)
        sum_max += float(max_w.sum())
        sum_ent += float(ent.sum())
        sum_sorted += sorted_p.sum(axis=0)
        sum_jac += float(jac_norm.sum())
    return SaturationStats(
        d_k=d_k,
        n_keys=n_keys,
        scaled=scaled,
        n_draws=n_draws,
        mean_max_weight=sum_max / n_draws,
        mean_entropy=sum_ent / n_draws,
        mean_sorted_weights=sum_sorted / n_draws,
        mean_jacobian_norm=sum_jac / n_draws,
    )


@dataclass(frozen=True)
class QueryGradientStats:
    """The gradient a query receives, with and without the scale, over the same draws.

    Both arms (``"scaled"``: scores ``q . k / sqrt(d_k)``; ``"unscaled"``: ``q . k``) are
    computed from the same queries, keys and values; the dicts below are keyed by arm.

    Attributes:
        d_k: head dimension.
        n_keys: keys per query.
        n_draws: number of independent draws (a query, its keys and their values).
        threshold: a draw is *saturated* when its largest weight exceeds this.
        max_weight: ``{arm: float64 (n_draws,)}`` the largest attention weight of each draw.
        grad_norm: ``{arm: float64 (n_draws,)}`` ``||d loss / d q||`` of each draw, for the loss
            ``sum_j p_j v_j``.
        saturated_share: ``{arm: float}`` fraction of draws whose largest weight exceeds
            ``threshold``.
        mean_grad_norm: ``{arm: float}`` mean of ``grad_norm`` over the draws.
        median_grad_norm: ``{arm: float}`` median of ``grad_norm``.
        saturated_grad_share: ``{arm: float}`` the saturated draws' share of the summed gradient
            norm, ``sum(grad_norm[saturated]) / sum(grad_norm)`` (0 when no draw is saturated).
    """

    d_k: int
    n_keys: int
    n_draws: int
    threshold: float
    max_weight: dict
    grad_norm: dict
    saturated_share: dict
    mean_grad_norm: dict
    median_grad_norm: dict
    saturated_grad_share: dict


# fmt: off
def query_gradient_core(q, k, v, scale):
    """Largest weight and ||dl/dq|| per draw for the loss l = sum_j p_j v_j.

    q (m, d_k), k (m, n, d_k), v (m, n): per draw a query, its keys and one
    value per key; the scores are z = scale * (q . k_j).
    """
    z = np.einsum("mnd,md->mn", k, q) * scale  # (m, n) scores
    p = softmax_core(z)  # (m, n) weights
    jac = softmax_jacobian_core(p)  # (m, n, n) dp/dz, symmetric
    grad_z = (jac @ v[..., None])[..., 0]  # (m, n) dl/dz = J dl/dp, dl/dp = v
    grad_q = scale * np.einsum("mn,mnd->md", grad_z, k)  # (m, d_k) dz/dq
    return p.max(axis=-1), np.sqrt((grad_q**2).sum(axis=-1))
# fmt: on


def query_gradient_stats(
    d_k: int, n_keys: int = 16, n_draws: int = 10_000, *, threshold: float = 0.99, rng=0
) -> QueryGradientStats:
    """Measure the gradient that reaches the query, scaled and unscaled, on the same draws.

    Each draw is a query ``q`` and ``n_keys`` keys, i.i.d. standard normal in ``R^{d_k}``, and
    one standard-normal value ``v_j`` per key. The loss is the attention output read out
    linearly, ``l = sum_j p_j v_j`` with ``p = softmax(scale * K q)`` (a head with one value
    dimension, read out with weight 1). Its gradient with respect to the query is, by the chain
    rule, ``scale * K^T J v`` with ``J = diag(p) - p p^T``; :func:`query_gradient_core` computes
    it for ``scale = 1/sqrt(d_k)`` and ``scale = 1`` from the same draws. With ``q = W_Q x`` the
    projection receives ``(dl/dq) x^T``, of norm ``||dl/dq|| ||x||``: the same factor in both
    arms. The draws are taken in chunks (bounded memory), each draw as one block of
    ``(1 + n_keys) * d_k + n_keys`` normals from ``rng`` — ``q``, then the keys row by row,
    then the values — so the numbers do not depend on the chunk size.

    Args:
        d_k: head dimension, an integer >= 1.
        n_keys: keys per query, an integer >= 1.
        n_draws: number of independent draws, an integer >= 1.
        threshold: a draw counts as saturated when its largest weight exceeds this; a real
            number with ``0 < threshold < 1``.
        rng: a ``numpy.random.Generator`` or an integer seed >= 0.

    Returns:
        :class:`QueryGradientStats` (float64 per-draw arrays and their summaries, per arm).

    Raises:
        TypeError: if ``d_k``, ``n_keys`` or ``n_draws`` is not an integer, ``threshold`` is not
            a real number, or ``rng`` is neither a Generator nor an integer seed.
        ValueError: if ``d_k``, ``n_keys`` or ``n_draws`` is below 1, ``threshold`` is not
            strictly between 0 and 1 (or is nan), or the seed is negative.

    Source: the softmax Jacobian and the chain rule through ``z_j = scale * q . k_j``;
    Vaswani et al. (2017), eq. 1 and footnote 4, for the scale.
    """
    d_k = checks.check_int(d_k, "d_k", 1)
    n_keys = checks.check_int(n_keys, "n_keys", 1)
    n_draws = checks.check_int(n_draws, "n_draws", 1)
    threshold = checks.check_real(threshold, "threshold", minimum=0.0, maximum=1.0, strict=True)
    gen = checks.check_rng(rng)
    arms = {"scaled": 1 / np.sqrt(d_k), "unscaled": 1.0}
    block = (1 + n_keys) * d_k + n_keys  # normals per draw
    chunk = max(1, _CHUNK_ELEMENTS // block)  # draws per chunk: bounded memory
    max_w = {arm: [] for arm in arms}
    grad = {arm: [] for arm in arms}
    for start in range(0, n_draws, chunk):
        m = min(chunk, n_draws - start)
        x = gen.standard_normal((m, block))  # (m, block), one row per draw
        q = x[:, :d_k]  # (m, d_k)
        k = x[:, d_k : d_k + n_keys * d_k].reshape(m, n_keys, d_k)  # (m, n_keys, d_k)
        v = x[:, d_k + n_keys * d_k :]  # (m, n_keys)
        for arm, scale in arms.items():
            w, g = query_gradient_core(q, k, v, scale)
            max_w[arm].append(w)
            grad[arm].append(g)
    max_w = {arm: np.concatenate(parts) for arm, parts in max_w.items()}
    grad = {arm: np.concatenate(parts) for arm, parts in grad.items()}
    saturated = {arm: max_w[arm] > threshold for arm in arms}
    total = {arm: float(grad[arm].sum()) for arm in arms}
    return QueryGradientStats(
        d_k=d_k,
        n_keys=n_keys,
        n_draws=n_draws,
        threshold=threshold,
        max_weight=max_w,
        grad_norm=grad,
        saturated_share={arm: float(saturated[arm].mean()) for arm in arms},
        mean_grad_norm={arm: float(grad[arm].mean()) for arm in arms},
        median_grad_norm={arm: float(np.median(grad[arm])) for arm in arms},
        saturated_grad_share={
            arm: float(grad[arm][saturated[arm]].sum()) / total[arm] if total[arm] > 0 else 0.0
            for arm in arms
        },
    )


def score_histogram(scores, n_bins: int = 41) -> tuple[np.ndarray, np.ndarray, float]:
    """Density histogram of scores over ``n_bins`` equal bins spanning ``[-m, m]``.

    ``m`` is the largest ``|score|``, so the bins are symmetric about 0 and hold every sample.

    Args:
        scores: ``(n,)`` real scores.
        n_bins: number of bins, >= 1.

    Returns:
        ``(centres, density, width)``: bin centres ``(n_bins,)``, probability densities
        ``(n_bins,)`` (``sum(density) * width == 1``) and the bin width.

    Raises:
        TypeError: if ``n_bins`` is not an integer or ``scores`` is not a real numeric array.
        ValueError: if ``n_bins`` < 1.
    """
    n_bins = checks.check_int(n_bins, "n_bins", 1)
    scores = checks.as_float_array(scores, "scores").astype(np.float64)
    m = float(np.max(np.abs(scores))) if scores.size else 1.0
    m = m if m > 0 else 1.0
    edges = np.linspace(-m, m, n_bins + 1)  # (n_bins + 1,)
    density, edges = np.histogram(scores, bins=edges, density=True)
    centres = (edges[:-1] + edges[1:]) / 2  # (n_bins,)
    return centres, density, float(edges[1] - edges[0])


@dataclass(frozen=True)
class ScalingData:
    """One setting of the √d_k explorer (chapter 3), as :func:`scaling_data` computes it.

    Attributes:
        d_k: head dimension.
        scaled: whether scores are divided by ``sqrt(d_k)``.
        n_keys: keys per query in the softmax panel.
        scores: float64 ``(n_samples,)`` scores from
            ``score_samples(d_k, n_samples, scaled=scaled, rng=seed)``.
        variance: sample variance of ``scores`` (ddof = 1), as :func:`score_variance`
            computes it.
        expected_variance: ``1`` when scaled, else ``d_k`` (Vaswani et al., 2017, footnote 4).
        stats: ``saturation_stats(d_k, n_keys, n_draws, scaled=scaled, rng=seed + 1)``.
        centres, density, bin_width: :func:`score_histogram` of ``scores``: bin centres
            ``(n_bins,)``, densities ``(n_bins,)`` and the bin width (score units).
        expected_x, expected_density: the normal density with the expected variance,
            ``(81,)`` points over ``[-5 sigma, 5 sigma]``.
    """

    d_k: int
    scaled: bool
    n_keys: int
    scores: np.ndarray
    variance: float
    expected_variance: float
    stats: SaturationStats
    centres: np.ndarray
    density: np.ndarray
    bin_width: float
    expected_x: np.ndarray
    expected_density: np.ndarray


def scaling_data(
    d_k: int,
    n_keys: int = 16,
    *,
    scaled: bool = True,
    n_samples: int = 2000,
    n_draws: int = 200,
    seed: int = 0,
    n_bins: int = 41,
) -> ScalingData:
    """Compute one setting of the √d_k explorer: the scores' histogram and the softmax's peak.

    Args:
        d_k: head dimension, >= 1.
        n_keys: keys per query for the softmax panel, >= 1.
        scaled: divide scores by ``sqrt(d_k)``.
        n_samples: number of (q, k) pairs in the score histogram, >= 2 (a sample variance).
        n_draws: number of (q, K) draws averaged in the softmax panel, >= 1.
        seed: the histogram uses ``rng=seed``, the softmax panel ``rng=seed + 1``; >= 0.
        n_bins: bins of the histogram (:func:`score_histogram`), >= 1.

    Returns:
        :class:`ScalingData`.

    Raises:
        TypeError: if an argument is not an integer (``scaled``: not a bool).
        ValueError: if ``d_k``, ``n_keys``, ``n_draws`` or ``n_bins`` is < 1, ``n_samples``
            < 2 or ``seed`` < 0.

    Source: Vaswani et al. (2017), eq. 1 and footnote 4.
    """
    n_samples = checks.check_int(n_samples, "n_samples", 2)
    seed = checks.check_seed(seed)
    scores = score_samples(d_k, n_samples, scaled=scaled, rng=seed)  # (n_samples,)
    stats = saturation_stats(d_k, n_keys, n_draws, scaled=scaled, rng=seed + 1)
    centres, density, width = score_histogram(scores, n_bins)
    expected = 1.0 if scaled else float(d_k)
    x = np.linspace(-5 * np.sqrt(expected), 5 * np.sqrt(expected), 81)  # (81,)
    pdf = np.exp(-(x**2) / (2 * expected)) / np.sqrt(2 * np.pi * expected)  # (81,)
    return ScalingData(
        d_k=int(d_k),
        scaled=bool(scaled),
        n_keys=int(n_keys),
        scores=scores,
        variance=float(np.var(scores, ddof=1)),
        expected_variance=expected,
        stats=stats,
        centres=centres,
        density=density,
        bin_width=width,
        expected_x=x,
        expected_density=pdf,
    )


# --------------------------------------------------------------------------------------------
# Temperature: the softmax of one row of scores at several T (chapter 4)
# --------------------------------------------------------------------------------------------

#: The names of the fixed rows of scores of :func:`temperature_scores`.
TEMPERATURE_SCORE_SETS = ("chapter 2", "scaled", "unscaled")


def temperature_scores(score_set: str = "chapter 2") -> np.ndarray:
    """The fixed row of scores named ``score_set`` (one of :data:`TEMPERATURE_SCORE_SETS`).

    Args:
        score_set: ``"chapter 2"`` (``[1.0, 4.0, 0.5, 0.2]``), ``"scaled"`` (16 draws of
            ``numpy.random.default_rng(0).standard_normal``, as a scaled head's scores,
            ``N(0, 1)``) or ``"unscaled"`` (the same draws times ``sqrt(64) = 8``, as an
            unscaled head's of ``d_k = 64``, ``N(0, 64)``).

    Returns:
        float64 ``(S,)`` scores.

    Raises:
        ValueError: if ``score_set`` is not one of :data:`TEMPERATURE_SCORE_SETS`.
    """
    checks.check_choice(score_set, "score_set", TEMPERATURE_SCORE_SETS)
    if score_set == "chapter 2":
        return np.array([1.0, 4.0, 0.5, 0.2])
    z = np.random.default_rng(0).standard_normal(16)  # (S,) = (16,)
    return z if score_set == "scaled" else 8.0 * z


@dataclass(frozen=True)
class TemperatureSweep:
    """The softmax of one row of scores at several temperatures, from :func:`temperature_sweep`.

    Attributes:
        temperatures: float64 ``(n_T,)``, the temperatures ``T``.
        weights: float64 ``(n_T, S)``, ``softmax(z / T)`` for each ``T``.
        entropy: float64 ``(n_T,)``, entropy of each row of weights in nats (at most ``ln S``).
        jacobian_norm: float64 ``(n_T,)``, Frobenius norm of ``diag(p) - p p^T`` for each row
            (the Jacobian with respect to the softmax's input ``z / T``).
        score_jacobian_norm: float64 ``(n_T,)``, Frobenius norm of the Jacobian with respect
            to the raw scores ``z``, ``(diag(p) - p p^T) / T``: ``jacobian_norm / T``, which
            tends to 0 as ``T`` grows.
    """

    temperatures: np.ndarray
    weights: np.ndarray
    entropy: np.ndarray
    jacobian_norm: np.ndarray
    score_jacobian_norm: np.ndarray


def temperature_sweep(scores, temperatures) -> TemperatureSweep:
    """Softmax weights, entropy and Jacobian norm of ``scores`` at each temperature.

    Computes ``p = softmax(z / T)`` (:func:`attnbook.attention.softmax`), its entropy
    (:func:`attnbook.attention.entropy`, nats) and ``||diag(p) - p p^T||_F``
    (:func:`attnbook.attention.softmax_jacobian`) for every ``T``, in float64, and that norm
    divided by ``T`` (the Jacobian with respect to ``z`` rather than ``z / T``). As ``T -> 0``
    the weights tend to one-hot on the largest score (entropy and Jacobian to 0); as
    ``T -> inf`` to uniform (entropy ``ln S``, Jacobian norm ``sqrt(S - 1) / S``). The
    softmax's input is ``(z - max z) / T``, equal to ``z / T`` up to the shift the softmax
    ignores, so that any positive ``T`` (even ``1e-310``) gives a distribution.

    Args:
        scores: ``(S,)`` finite real scores, ``S >= 1``.
        temperatures: ``(n_T,)`` finite temperatures, each ``> 0``.

    Returns:
        :class:`TemperatureSweep`.

    Raises:
        TypeError: if ``scores`` or ``temperatures`` is not a real numeric array.
        ValueError: if ``scores`` is not a non-empty 1-D array, ``temperatures`` is not 1-D, or
            an entry is nan, infinite, or (a temperature) not positive.

    Source: Hinton, Vinyals and Dean (2015), section 2 (softmax with temperature); the
    Jacobian as derived in chapter 4.
    """
    z = checks.as_float_array(scores, "scores").astype(np.float64)
    t = checks.as_float_array(temperatures, "temperatures").astype(np.float64)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array (S,); got shape {z.shape}")
    if t.ndim != 1:
        raise ValueError(f"temperatures must be a 1-D array (n_T,); got shape {t.shape}")
    checks.check_finite(z, "scores")
    checks.check_finite(t, "temperatures")
    if (t <= 0).any():
        raise ValueError(f"temperatures must be > 0; got minimum {t.min()!r}")
    # softmax(z / T) = softmax((z - max z) / T): the shift keeps z / T from overflowing to
    # +-inf at a tiny T (1e-310), which the softmax would turn into nan. Halving first keeps
    # z - max z finite for scores near 1.8e308; (z - max z) / T <= 0 can then only overflow
    # to -inf where the true value lies below -1.8e308, a weight of exactly 0 in float64.
    half = z / 2 - z.max() / 2  # (S,), (z - max z) / 2
    with np.errstate(over="ignore"):
        shifted = half[None, :] / t[:, None] * 2  # (n_T, S), max 0 per row
    weights = softmax(shifted)  # (n_T, S)
    jac = softmax_jacobian(weights)  # (n_T, S, S)
    jac_norm = np.linalg.norm(jac, axis=(-2, -1))  # (n_T,) Frobenius, per T
    return TemperatureSweep(
        temperatures=t,
        weights=weights,
        entropy=entropy(weights),
        jacobian_norm=jac_norm,
        score_jacobian_norm=jac_norm / t,  # d softmax(z / T) / dz = J / T (chain rule)
    )
