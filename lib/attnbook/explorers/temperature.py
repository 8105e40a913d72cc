"""The temperature explorer: one row of scores, its softmax at temperature T, and saturation.

The softmax at temperature ``T > 0`` is ``softmax(z / T)`` (chapter 4). The explorer fixes one
seeded row of scores and lets the reader move ``T`` over a log-spaced range: the weights, their
entropy and the Frobenius norm of the softmax Jacobian ``J = diag(p) - p p^T`` (how much
gradient can reach the softmax's input ``z / T``; chapter 4) are all computed by
:mod:`attnbook.attention` (:func:`~attnbook.attention.softmax`,
:func:`~attnbook.attention.entropy`, :func:`~attnbook.attention.softmax_jacobian`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import attention
from ..checks import as_float_array, check_choice, check_finite, check_int, check_real
from ..viz import BLUE, EMPTY_TEMPLATE, FONT, GREY, ORANGE, axis_style
from .base import Control, Explorer

__all__ = ["T_VALUES", "SCORE_SETS", "TemperatureSweep", "temperature_scores",
           "temperature_sweep", "temperature_figure", "temperature_explorer"]

#: Slider stops of the temperature ``T``, quarter octaves from 1/16 to 32 (37 stops, T = 1 and
#: T = 8 = sqrt(64) among them).
T_VALUES = tuple(2.0 ** (k / 4) for k in range(-16, 21))
#: The fixed rows of scores the explorer offers, each name with a label short enough for a
#: phone's column. Chapter 2's four scores, and 16 standard-normal scores (seed 0) as they come
#: out of a scaled head (``N(0, 1)``) and, the same draws times 8, out of an unscaled head of
#: ``d_k = 64`` (``N(0, 64)``, chapter 3).
SCORE_SETS = {
    "chapter 2": "[1, 4, 0.5, 0.2]",
    "scaled": "16 scaled, N(0, 1)",
    "unscaled": "same × 8, N(0, 64)",
}
#: Points of the entropy and Jacobian curves (log-spaced over the slider's range).
_CURVE_POINTS = 121


def temperature_scores(score_set: str = "chapter 2") -> np.ndarray:
    """The fixed row of scores named ``score_set`` (a key of :data:`SCORE_SETS`).

    Args:
        score_set: ``"chapter 2"`` (``[1.0, 4.0, 0.5, 0.2]``), ``"scaled"`` (16 draws of
            ``numpy.random.default_rng(0).standard_normal``) or ``"unscaled"`` (the same draws
            times ``sqrt(64) = 8``).

    Returns:
        float64 ``(S,)`` scores.

    Raises:
        ValueError: if ``score_set`` is not a key of :data:`SCORE_SETS`.
    """
    check_choice(score_set, "score_set", tuple(SCORE_SETS))
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
    z = as_float_array(scores, "scores").astype(np.float64)
    t = as_float_array(temperatures, "temperatures").astype(np.float64)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array (S,); got shape {z.shape}")
    if t.ndim != 1:
        raise ValueError(f"temperatures must be a 1-D array (n_T,); got shape {t.shape}")
    check_finite(z, "scores")
    check_finite(t, "temperatures")
    if (t <= 0).any():
        raise ValueError(f"temperatures must be > 0; got minimum {t.min()!r}")
    # softmax(z / T) = softmax((z - max z) / T): the shift keeps z / T from overflowing to
    # +-inf at a tiny T (1e-310), which the softmax would turn into nan. Halving first keeps
    # z - max z finite for scores near 1.8e308; (z - max z) / T <= 0 can then only overflow
    # to -inf where the true value lies below -1.8e308, a weight of exactly 0 in float64.
    half = z / 2 - z.max() / 2  # (S,), (z - max z) / 2
    with np.errstate(over="ignore"):
        shifted = half[None, :] / t[:, None] * 2  # (n_T, S), max 0 per row
    weights = attention.softmax(shifted)  # (n_T, S)
    jac = attention.softmax_jacobian(weights)  # (n_T, S, S)
    jac_norm = np.linalg.norm(jac, axis=(-2, -1))  # (n_T,) Frobenius, per T
    return TemperatureSweep(
        temperatures=t, weights=weights, entropy=attention.entropy(weights),
        jacobian_norm=jac_norm,
        score_jacobian_norm=jac_norm / t,  # d softmax(z / T) / dz = J / T (chain rule)
    )


def _fmt_t(t: float) -> str:
    return f"{t:.3g}"


def temperature_figure(T: float = 1.0, score_set: str = "chapter 2", *,
                       t_range: Sequence[float] = (T_VALUES[0], T_VALUES[-1]),
                       height: int = 430):
    """Figure of the temperature explorer: weights at ``T``; entropy and ``||J||_F`` against T.

    Left: the weights ``softmax(z / T)`` of the fixed scores (:func:`temperature_scores`), one
    bar per key, with the uniform level ``1/S`` dotted. Middle: the entropy against ``T`` (log axis)
    over ``t_range``, the chosen ``T`` marked, and its maximum ``ln S`` dashed. Right: the
    Frobenius norm of the softmax Jacobian against ``T``, the chosen ``T`` marked, and the
    uniform weights' value ``sqrt(S - 1) / S`` dash-dotted. Computed by :func:`temperature_sweep`.

    Trace order (the explorer's tests rely on it): 0 the weights (bars; ``meta`` holds ``T``,
    ``entropy`` and ``jacobian_norm`` at ``T``), 1 the uniform level, 2 the entropy curve,
    3 the entropy at ``T``, 4 the line ``ln S``, 5 the Jacobian curve, 6 the Jacobian norm at
    ``T``, 7 the uniform value of the Jacobian norm.

    Args:
        T: the temperature, finite and ``> 0``.
        score_set: a key of :data:`SCORE_SETS`.
        t_range: ``(T_min, T_max)`` of the curves, ``0 < T_min < T_max``.
        height: figure height in pixels (>= 10).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``T`` or an end of ``t_range`` is not a real number, or ``height`` not
            an integer.
        ValueError: if ``T`` is not finite and positive, ``score_set`` is unknown,
            ``t_range`` is not two increasing positive numbers, or ``height`` < 10.
    """
    import plotly.graph_objects as go

    T = check_real(T, "T", minimum=0.0, strict=True)
    z = temperature_scores(score_set)
    height = check_int(height, "height", 10)
    try:
        lo, hi = (check_real(x, "t_range", minimum=0.0, strict=True) for x in t_range)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"t_range must be two positive numbers (T_min, T_max): {exc}") from None
    if not lo < hi:
        raise ValueError(f"t_range must be increasing, got {tuple(t_range)}")
    S = len(z)
    grid = np.geomspace(lo, hi, _CURVE_POINTS)  # (n_T,) log-spaced
    curve = temperature_sweep(z, grid)
    at = temperature_sweep(z, [T])
    p, h, jn = at.weights[0], float(at.entropy[0]), float(at.jacobian_norm[0])
    ln_s = math.log(S)
    j_uniform = math.sqrt(S - 1) / S
    keys = np.arange(1, S + 1)
    x_ends = [float(lo), float(hi)]
    traces = [
        go.Bar(x=keys, y=p, name="weights", marker=dict(color=BLUE), xaxis="x", yaxis="y",
               meta=dict(T=T, entropy=h, jacobian_norm=jn),
               customdata=z, hovertemplate="key %{x}: score %{customdata:.3g}, "
               "weight %{y:.3f}<extra></extra>"),
        go.Scatter(x=[0.5, S + 0.5], y=[1 / S] * 2, mode="lines", name="uniform weights (1/S)",
                   line=dict(color=GREY, dash="dot", width=2), xaxis="x", yaxis="y",
                   hoverinfo="skip"),
        go.Scatter(x=grid, y=curve.entropy, mode="lines", name="entropy",
                   line=dict(color=BLUE, width=2), xaxis="x2", yaxis="y2", showlegend=False,
                   hovertemplate="T = %{x:.3g}: %{y:.3f} nats<extra></extra>"),
        go.Scatter(x=[T], y=[h], mode="markers", name="chosen T",
                   marker=dict(size=12, color=ORANGE), xaxis="x2", yaxis="y2",
                   hovertemplate="T = %{x:.3g}: %{y:.3f} nats<extra></extra>"),
        go.Scatter(x=x_ends, y=[ln_s] * 2, mode="lines", name="maximum ln S",
                   line=dict(color=GREY, dash="dash", width=2), xaxis="x2", yaxis="y2",
                   hoverinfo="skip"),
        go.Scatter(x=grid, y=curve.jacobian_norm, mode="lines", name="‖J‖_F",
                   line=dict(color=BLUE, width=2), xaxis="x3", yaxis="y3", showlegend=False,
                   hovertemplate="T = %{x:.3g}: %{y:.3f}<extra></extra>"),
        go.Scatter(x=[T], y=[jn], mode="markers", name="chosen T ", showlegend=False,
                   marker=dict(size=12, color=ORANGE), xaxis="x3", yaxis="y3",
                   hovertemplate="T = %{x:.3g}: %{y:.3f}<extra></extra>"),
        go.Scatter(x=x_ends, y=[j_uniform] * 2, mode="lines", name="‖J‖ at uniform weights",
                   line=dict(color=GREY, dash="dashdot", width=2), xaxis="x3", yaxis="y3",
                   hoverinfo="skip"),
    ]
    titles = (
        (f"softmax(z / T), S = {S}", 0.13),
        ("entropy (nats)", 0.5),
        ("‖J‖<sub>F</sub>, J = diag(p) − pp<sup>T</sup>", 0.87),
    )
    annotations = [dict(text=text, x=x, y=1.0, xref="paper", yref="paper", xanchor="center",
                        yanchor="bottom", showarrow=False, font=dict(size=14))
                   for text, x in titles]
    j_top = 1.15 * max(float(curve.jacobian_norm.max()), j_uniform, jn)
    log_ticks = [t for t in (0.1, 1, 10) if lo <= t <= hi]
    t_axis = dict(type="log", title=dict(text="temperature T"), tickvals=log_ticks,
                  ticktext=[f"{t:g}" for t in log_ticks])
    layout = go.Layout(
        template=EMPTY_TEMPLATE, font=FONT, paper_bgcolor="white", plot_bgcolor="white",
        height=height,
        title=dict(text=f"T = {_fmt_t(T)}: largest weight {p.max():.3f}, entropy {h:.3f} of "
                        f"ln {S} = {ln_s:.3f} nats, ‖J‖<sub>F</sub> = {jn:.3f}",
                   x=0.5, xanchor="center", font=dict(size=14)),
        margin=dict(l=60, r=20, t=100, b=110),
        xaxis=axis_style(domain=[0.0, 0.26], title=dict(text="key j"), anchor="y",
                         range=[0.5, S + 0.5], dtick=1 if S <= 8 else 5),
        yaxis=axis_style(title=dict(text="weight"), anchor="x", range=[0, 1.02]),
        xaxis2=axis_style(domain=[0.37, 0.63], anchor="y2", **t_axis),
        yaxis2=axis_style(anchor="x2", range=[0, 1.1 * ln_s]),
        xaxis3=axis_style(domain=[0.74, 1.0], anchor="y3", **t_axis),
        yaxis3=axis_style(anchor="x3", range=[0, j_top]),
        annotations=annotations,
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.3, yanchor="top"),
        bargap=0.15,
    )
    return go.Figure(data=traces, layout=layout)


def temperature_explorer(T: float = 1.0, score_set: str = "chapter 2") -> Explorer:
    """The temperature explorer (chapter 4): move ``T`` and watch the softmax saturate.

    Controls: ``T`` (a slider over :data:`T_VALUES`, quarter octaves from 1/16 to 32) and
    ``score_set`` (the fixed scores, :data:`SCORE_SETS`). The figure is
    :func:`temperature_figure`: the weights at ``T``, and the entropy and the Jacobian's
    Frobenius norm against ``T`` with ``T`` marked.

    Args:
        T: initial temperature, one of :data:`T_VALUES`.
        score_set: initial scores, a key of :data:`SCORE_SETS`.

    Returns:
        :class:`~attnbook.explorers.base.Explorer` (111 precomputed settings).

    Raises:
        ValueError: if ``T`` is not one of :data:`T_VALUES` or ``score_set`` not a key of
            :data:`SCORE_SETS`.
    """
    check_choice(T, "T", T_VALUES)
    check_choice(score_set, "score_set", tuple(SCORE_SETS))

    def render(T, score_set):
        return temperature_figure(T, score_set)

    controls = [
        Control("T", "temperature T", "slider", T_VALUES, float(T),
                labels=[_fmt_t(t) for t in T_VALUES]),
        Control("score_set", "scores", "select", tuple(SCORE_SETS), score_set,
                labels=tuple(SCORE_SETS.values())),
    ]
    return Explorer(controls, render, title="Temperature explorer")
