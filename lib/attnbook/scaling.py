"""Why scores are divided by sqrt(d_k): the variance of dot products and softmax saturation.

If the components of a query ``q`` and a key ``k`` are independent with mean 0 and variance 1,
each product ``q_i k_i`` has mean 0 and variance 1, so the dot product ``q . k`` — a sum of
``d_k`` of them — has variance ``d_k`` (Vaswani et al., 2017, footnote 4). Dividing by
``sqrt(d_k)`` brings the variance back to 1 whatever the head dimension, and keeps the softmax
out of its saturated, near one-hot regime where its Jacobian, and so the gradient reaching the
scores, is almost zero.

The functions here *measure* these facts by Monte Carlo with a seeded generator; the chapters
and the explorers plot what they return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .attention import entropy, softmax, softmax_jacobian

__all__ = ["score_samples", "score_variance", "SaturationStats", "saturation_stats"]

# Draws are processed in chunks so that d_k = 1024 with 10^4 draws stays within a few MB.
_CHUNK_ELEMENTS = 2_000_000


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return bool(value)


def _rng(seed_or_rng) -> np.random.Generator:
    if isinstance(seed_or_rng, np.random.Generator):
        return seed_or_rng
    if seed_or_rng is not None:
        if isinstance(seed_or_rng, (bool, np.bool_)) or not isinstance(seed_or_rng,
                                                                       (int, np.integer)):
            raise TypeError(f"rng must be a numpy.random.Generator or an integer seed, got "
                            f"{seed_or_rng!r} ({type(seed_or_rng).__name__})")
        if seed_or_rng < 0:
            raise ValueError(f"rng seed must be >= 0, got {seed_or_rng}")
    return np.random.default_rng(seed_or_rng)


def score_samples(d_k: int, n_samples: int, *, scaled: bool = True, rng=0) -> np.ndarray:
    """Draw attention scores ``q . k`` for i.i.d. standard-normal ``q, k`` in ``R^{d_k}``.

    Args:
        d_k: head dimension (the length of ``q`` and ``k``).
        n_samples: number of independent (q, k) pairs.
        scaled: divide each score by ``sqrt(d_k)`` as in Vaswani et al. (2017), eq. 1.
        rng: a ``numpy.random.Generator`` or a seed.

    Returns:
        float64 array ``(n_samples,)`` of scores. Unscaled they have variance ``d_k``, scaled
        variance 1 (in expectation).

    Raises:
        ValueError: if ``d_k`` or ``n_samples`` is not a positive integer, or the seed is
            negative.
        TypeError: if ``scaled`` is not a bool or ``rng`` is neither a Generator nor an
            integer seed.
    """
    d_k = _check_positive_int(d_k, "d_k")
    n_samples = _check_positive_int(n_samples, "n_samples")
    scaled = _check_bool(scaled, "scaled")
    gen = _rng(rng)
    scale = 1.0 / math.sqrt(d_k) if scaled else 1.0
    chunk = max(1, _CHUNK_ELEMENTS // d_k)
    parts = []
    for start in range(0, n_samples, chunk):
        m = min(chunk, n_samples - start)
        q = gen.standard_normal((m, d_k))  # (m, d_k)
        k = gen.standard_normal((m, d_k))  # (m, d_k)
        parts.append(np.einsum("nd,nd->n", q, k) * scale)  # (m,)
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
        ValueError: if ``d_k`` is not a positive integer or ``n_samples`` is not an integer
            >= 2 (a sample variance needs two draws), or the seed is negative.
        TypeError: if ``scaled`` is not a bool or ``rng`` is neither a Generator nor an
            integer seed.
    """
    n_samples = _check_positive_int(n_samples, "n_samples")
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


def saturation_stats(
    d_k: int, n_keys: int = 16, n_draws: int = 10_000, *, scaled: bool = True, rng=0
) -> SaturationStats:
    """Measure softmax saturation for one query against ``n_keys`` random keys.

    ``q`` and every key are drawn i.i.d. standard normal in ``R^{d_k}``; the weights are
    ``softmax(q K^T * scale)`` with ``scale = 1/sqrt(d_k)`` when ``scaled`` else 1.

    Args:
        d_k: head dimension, >= 1.
        n_keys: keys per query, >= 1.
        n_draws: number of independent (q, K) draws averaged over, >= 1.
        scaled: apply the ``1/sqrt(d_k)`` scale.
        rng: a ``numpy.random.Generator`` or a seed.

    Returns:
        :class:`SaturationStats`.

    Raises:
        ValueError: if ``d_k``, ``n_keys`` or ``n_draws`` is not a positive integer, or the
            seed is negative.
        TypeError: if ``scaled`` is not a bool (a string such as ``'no'`` is rejected) or
            ``rng`` is neither a Generator nor an integer seed.
    """
    d_k = _check_positive_int(d_k, "d_k")
    n_keys = _check_positive_int(n_keys, "n_keys")
    n_draws = _check_positive_int(n_draws, "n_draws")
    scaled = _check_bool(scaled, "scaled")
    gen = _rng(rng)
    scale = 1.0 / math.sqrt(d_k) if scaled else 1.0
    chunk = max(1, _CHUNK_ELEMENTS // (d_k * n_keys))
    sum_max = sum_ent = sum_jac = 0.0
    sum_sorted = np.zeros(n_keys)
    for start in range(0, n_draws, chunk):
        m = min(chunk, n_draws - start)
        q = gen.standard_normal((m, 1, d_k))  # (m, 1, d_k)
        k = gen.standard_normal((m, n_keys, d_k))  # (m, n_keys, d_k)
        scores = (q @ np.swapaxes(k, -1, -2))[:, 0, :] * scale  # (m, n_keys)
        p = softmax(scores, axis=-1)  # (m, n_keys)
        sum_max += float(p.max(axis=-1).sum())
        sum_ent += float(entropy(p).sum())
        sum_sorted += -np.sort(-p, axis=-1).sum(axis=0)
        jac = softmax_jacobian(p)  # (m, n_keys, n_keys)
        sum_jac += float(np.sqrt((jac**2).sum(axis=(-2, -1))).sum())
    return SaturationStats(
        d_k=d_k,
        n_keys=n_keys,
        scaled=bool(scaled),
        n_draws=n_draws,
        mean_max_weight=sum_max / n_draws,
        mean_entropy=sum_ent / n_draws,
        mean_sorted_weights=sum_sorted / n_draws,
        mean_jacobian_norm=sum_jac / n_draws,
    )
