"""The temperature explorer (chapter 4): one row of scores, its softmax at temperature T.

The softmax at temperature ``T > 0`` is ``softmax(z / T)`` (chapter 4). The explorer fixes one
seeded row of scores and lets the reader move ``T`` over a log-spaced range. Two steps, as every
explorer: :func:`temperature_data` computes a setting with the library
(:func:`attnbook.scaling.temperature_sweep`: the weights, their entropy and the Frobenius norm
of the softmax Jacobian ``J = diag(p) - p p^T``, how much gradient can reach the softmax's input
``z / T``), and :func:`draw_temperature` draws it with every label made in the reader's
language. :func:`temperature_figure` does both in one call.

:func:`~attnbook.scaling.temperature_scores`, :func:`~attnbook.scaling.temperature_sweep` and
:class:`~attnbook.scaling.TemperatureSweep` live in :mod:`attnbook.scaling` and are importable
from here too (their first home).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import i18n, viz
from ..checks import check_choice, check_int, check_real
from ..scaling import TEMPERATURE_SCORE_SETS, temperature_sweep
from ..scaling import TemperatureSweep as TemperatureSweep
from ..scaling import temperature_scores as temperature_scores
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "T_VALUES",
    "SCORE_SETS",
    "TemperatureData",
    "temperature_data",
    "draw_temperature",
    "temperature_figure",
    "temperature_explorer",
]

#: Slider stops of the temperature ``T``, quarter octaves from 1/16 to 32 (37 stops, T = 1 and
#: T = 8 = sqrt(64) among them).
T_VALUES = tuple(2.0 ** (k / 4) for k in range(-16, 21))
#: The fixed rows of scores the explorer offers (:data:`attnbook.scaling.TEMPERATURE_SCORE_SETS`),
#: each name with its menu label, short enough for a phone's column: chapter 2's four scores,
#: and 16 standard-normal scores (seed 0) as they come out of a scaled head (``N(0, 1)``) and,
#: the same draws times 8, out of an unscaled head of ``d_k = 64`` (``N(0, 64)``, chapter 3).
SCORE_SETS = dict(
    zip(
        TEMPERATURE_SCORE_SETS,
        (
            "[1, 4, 0.5, 0.2]",
            "16 scaled, N(0, 1)",
            "same × 8, N(0, 64)",
        ),
    )
)
#: Points of the entropy and Jacobian curves (log-spaced over the slider's range).
_CURVE_POINTS = 121


@dataclass(frozen=True)
class TemperatureData:
    """One setting of the temperature explorer, computed (what :func:`draw_temperature` draws).

    Attributes:
        T: the temperature.
        score_set: the name of the scores (a key of :data:`SCORE_SETS`).
        scores: float64 ``(S,)``, the fixed scores :func:`attnbook.scaling.temperature_scores`.
        t_range: ``(T_min, T_max)`` of the curves.
        curve: :class:`attnbook.scaling.TemperatureSweep` over ``_CURVE_POINTS`` (121)
            log-spaced temperatures from ``T_min`` to ``T_max``.
        at: :class:`attnbook.scaling.TemperatureSweep` at ``T`` alone (``n_T = 1``).
    """

    T: float
    score_set: str
    scores: np.ndarray
    t_range: tuple[float, float]
    curve: TemperatureSweep
    at: TemperatureSweep


def temperature_data(
    T: float = 1.0,
    score_set: str = "chapter 2",
    *,
    t_range: Sequence[float] = (T_VALUES[0], T_VALUES[-1]),
) -> TemperatureData:
    """Compute one setting of the temperature explorer (:func:`attnbook.scaling.temperature_sweep`).

    Args:
        T: the temperature, finite and ``> 0``.
        score_set: a key of :data:`SCORE_SETS`.
        t_range: ``(T_min, T_max)`` of the curves, ``0 < T_min < T_max``.

    Returns:
        :class:`TemperatureData`.

    Raises:
        TypeError: if ``T`` or an end of ``t_range`` is not a real number.
        ValueError: if ``T`` is not finite and positive, ``score_set`` is unknown, or
            ``t_range`` is not two increasing positive numbers.
    """
    T = check_real(T, "T", minimum=0.0, strict=True)
    z = temperature_scores(score_set)  # (S,)
    try:
        lo, hi = (check_real(x, "t_range", minimum=0.0, strict=True) for x in t_range)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"t_range must be two positive numbers (T_min, T_max): {exc}") from None
    if not lo < hi:
        raise ValueError(f"t_range must be increasing, got {tuple(t_range)}")
    grid = np.geomspace(lo, hi, _CURVE_POINTS)  # (n_T,) log-spaced
    return TemperatureData(
        T=T,
        score_set=score_set,
        scores=z,
        t_range=(float(lo), float(hi)),
        curve=temperature_sweep(z, grid),
        at=temperature_sweep(z, [T]),
    )


def _fmt_t(t: float) -> str:
    return f"{t:.3g}"


def draw_temperature(
    data: TemperatureData,
    *,
    language: str | None = None,
    height: int = 430,
    width: int = viz.COLUMN_PX,
):
    """Draw one setting of the temperature explorer for ``width`` px, labels in ``language``.

    Left: the weights ``softmax(z / T)`` of the fixed scores, one bar per key, with the uniform
    level ``1/S`` dotted. Middle: the entropy against ``T`` (log axis) over ``t_range``, the
    chosen ``T`` marked, and its maximum ``ln S`` dashed. Right: the Frobenius norm of the
    softmax Jacobian against ``T``, the chosen ``T`` marked, and the uniform weights' value
    ``sqrt(S - 1) / S`` dash-dotted. Side by side in the book's column, one under the other on
    a phone (:func:`attnbook.explorers.layout.panel_grid`); the figure's title (the numbers at
    ``T``) is prose, shown as the caption above the plot.

    Trace order (the explorer's tests rely on it): 0 the weights (bars; ``meta`` holds ``T``,
    ``entropy`` and ``jacobian_norm`` at ``T``), 1 the uniform level, 2 the entropy curve,
    3 the entropy at ``T``, 4 the line ``ln S``, 5 the Jacobian curve, 6 the Jacobian norm at
    ``T``, 7 the uniform value of the Jacobian norm. Annotations: 0, 1 and 2 the panels'
    titles.

    Args:
        data: from :func:`temperature_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, >= 10 (plotly's least).
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``height`` or ``width`` is not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    z, T, curve = data.scores, data.T, data.curve
    lo, hi = data.t_range
    p, h, jn = data.at.weights[0], float(data.at.entropy[0]), float(data.at.jacobian_norm[0])
    S = len(z)
    ln_s = math.log(S)
    j_uniform = math.sqrt(S - 1) / S
    keys = np.arange(1, S + 1)
    x_ends = [lo, hi]
    entropy_hover = _("T = %{x:.3g}: %{y:.3f} nats<extra></extra>")
    jacobian_hover = _("T = %{x:.3g}: %{y:.3f}<extra></extra>")
    traces = [
        go.Bar(
            x=keys,
            y=p,
            name=_("weights"),
            marker=dict(color=viz.BLUE),
            meta=dict(T=T, entropy=h, jacobian_norm=jn),
            customdata=z,
            hovertemplate=_("key %{x}: score %{customdata:.3g}, weight %{y:.3f}<extra></extra>"),
        ),
        go.Scatter(
            x=[0.5, S + 0.5],
            y=[1 / S] * 2,
            mode="lines",
            name=_("uniform weights (1/S)"),
            line=dict(color=viz.GREY, dash="dot", width=2),
            hoverinfo="skip",
        ),
        go.Scatter(
            x=curve.temperatures,
            y=curve.entropy,
            mode="lines",
            name=_("entropy"),
            line=dict(color=viz.BLUE, width=2),
            showlegend=False,
            hovertemplate=entropy_hover,
        ),
        go.Scatter(
            x=[T],
            y=[h],
            mode="markers",
            name=_("chosen T"),
            marker=dict(size=12, color=viz.ORANGE),
            hovertemplate=entropy_hover,
        ),
        go.Scatter(
            x=x_ends,
            y=[ln_s] * 2,
            mode="lines",
            name=_("largest entropy, ln S"),
            line=dict(color=viz.GREY, dash="dash", width=2),
            hoverinfo="skip",
        ),
        go.Scatter(
            x=curve.temperatures,
            y=curve.jacobian_norm,
            mode="lines",
            name=_("‖J‖<sub>F</sub>"),
            line=dict(color=viz.BLUE, width=2),
            showlegend=False,
            hovertemplate=jacobian_hover,
        ),
        go.Scatter(
            x=[T],
            y=[jn],
            mode="markers",
            name=_("chosen T"),
            showlegend=False,
            marker=dict(size=12, color=viz.ORANGE),
            hovertemplate=jacobian_hover,
        ),
        go.Scatter(
            x=x_ends,
            y=[j_uniform] * 2,
            mode="lines",
            name=_("‖J‖ at uniform weights"),
            line=dict(color=viz.GREY, dash="dashdot", width=2),
            hoverinfo="skip",
        ),
    ]
    grid = panel_grid(
        width,
        [
            _("softmax(z / T), S = {S}", S=S),
            _("entropy (nats)"),
            _("‖J‖<sub>F</sub>, J = diag(p) − p p<sup>T</sup>"),
        ],
        height=height,
        left=60,
        right=20,
        bottom=50,
        spacing_px=60,
    )
    fig, cells = grid.figure, grid.cells
    for trace, panel in zip(traces, (0, 0, 1, 1, 1, 2, 2, 2)):
        fig.add_trace(trace, **cells[panel])
    j_top = 1.15 * max(float(curve.jacobian_norm.max()), j_uniform, jn)
    log_ticks = [t for t in (0.1, 1, 10) if lo <= t <= hi]
    t_axis = dict(
        type="log",
        title_text=_("temperature T"),
        tickvals=log_ticks,
        ticktext=[f"{t:g}" for t in log_ticks],
    )
    fig.update_xaxes(
        title_text=_("key j"), range=[0.5, S + 0.5], dtick=1 if S <= 8 else 5, **cells[0]
    )
    fig.update_yaxes(title_text=_("weight"), range=[0, 1.02], **cells[0])
    fig.update_xaxes(**t_axis, **cells[1])
    fig.update_yaxes(range=[0, 1.1 * ln_s], **cells[1])
    fig.update_xaxes(**t_axis, **cells[2])
    fig.update_yaxes(range=[0, j_top], **cells[2])
    # Prose: the title is the caption above the plot (the browser wraps it).
    title = _(
        "T = {T}: largest weight {max_weight}, entropy {entropy} of ln {S} = {ln_s} nats, "
        "‖J‖<sub>F</sub> = {jacobian_norm}",
        T=_fmt_t(T),
        max_weight=f"{p.max():.3f}",
        entropy=f"{h:.3f}",
        S=S,
        ln_s=f"{ln_s:.3f}",
        jacobian_norm=f"{jn:.3f}",
    )
    fig.update_layout(bargap=0.15)
    return caption_title(fig, title, size=14)


def temperature_figure(
    T: float = 1.0,
    score_set: str = "chapter 2",
    *,
    t_range: Sequence[float] = (T_VALUES[0], T_VALUES[-1]),
    height: int = 430,
    language: str | None = None,
    width: int = viz.COLUMN_PX,
):
    """The temperature explorer's figure of one setting: :func:`draw_temperature` of its data.

    The data are :func:`temperature_data`'s: the weights at ``T``, and the entropy and the
    Jacobian's Frobenius norm over ``t_range`` (see :func:`draw_temperature` for the panels and
    the trace order).

    Args:
        T: the temperature, finite and ``> 0``.
        score_set: a key of :data:`SCORE_SETS`.
        t_range: ``(T_min, T_max)`` of the curves, ``0 < T_min < T_max``.
        height: figure height in pixels (>= 10).
        language: see :func:`draw_temperature`.
        width: the width in px the figure is drawn at (see :func:`draw_temperature`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``T`` or an end of ``t_range`` is not a real number, or ``height`` not
            an integer.
        ValueError: if ``T`` is not finite and positive, ``score_set`` is unknown,
            ``t_range`` is not two increasing positive numbers, ``height`` < 10 or
            ``language`` is unknown.
    """
    height = check_int(height, "height", 10)
    data = temperature_data(T, score_set, t_range=t_range)
    return draw_temperature(data, language=language, height=height, width=width)


def temperature_explorer(T: float = 1.0, score_set: str = "chapter 2") -> Explorer:
    """The temperature explorer (chapter 4): move ``T`` and watch the softmax saturate.

    Controls: ``T`` (a slider over :data:`T_VALUES`, quarter octaves from 1/16 to 32) and
    ``score_set`` (the fixed scores, :data:`SCORE_SETS`). Each setting is computed by
    :func:`temperature_data` and drawn by :func:`draw_temperature`: the weights at ``T``, and
    the entropy and the Jacobian's Frobenius norm against ``T`` with ``T`` marked.

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
    controls = [
        Control(
            "T", "temperature T", "slider", T_VALUES, float(T), labels=[_fmt_t(t) for t in T_VALUES]
        ),
        Control(
            "score_set",
            "scores",
            "select",
            tuple(SCORE_SETS),
            score_set,
            labels=tuple(SCORE_SETS.values()),
        ),
    ]
    return Explorer(
        controls, title="Temperature explorer", compute=temperature_data, draw=draw_temperature
    )
