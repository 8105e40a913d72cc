"""The γ-and-distance explorer of chapter 1: how a gradient shrinks (or grows) over Δ steps.

For a recurrent network ``h_t = tanh(W_hh h_{t-1} + W_ih x_t + b)`` run for ``L`` steps, the
chain rule gives ``dh_L/dh_t = prod_s diag(tanh'(a_s)) W_hh`` over the ``Δ = L - t`` steps
``s = t+1 .. L``, whose spectral norm is at most ``gamma^Δ`` with ``gamma = ||W_hh||_2``
(Bengio et al., 1994; Pascanu et al., 2013, section 2.1).
The explorer lets the reader choose ``gamma`` and the distance ``Δ`` and shows, for a
recurrent matrix ``W_hh = gamma * Q`` (``Q`` orthogonal, so ``||W_hh||_2 = gamma`` exactly):

* the bound ``gamma^Δ`` (:func:`attnbook.rnn.gamma_estimate`);
* ``||dh_L/dh_{L-Δ}||_2`` measured with :func:`attnbook.rnn.jacobian_norms` on a *linear* RNN
  with that ``W_hh`` — every step's Jacobian is ``gamma Q``, so it lies on the bound;
* the same measurement on a *tanh* RNN with that ``W_hh`` — ``tanh' <= 1`` pushes it below;
* the bound at the chosen distance against ``gamma``: the knife-edge at ``gamma = 1`` between
  vanishing and exploding.

The measurement is :func:`attnbook.rnn.gradient_decay_data` (made once per ``gamma``; still
importable from here, its first home). Two steps, as every explorer: :func:`gradient_decay_setting`
computes a setting (the measurement and the curve of the bound against ``gamma``), and
:func:`draw_gradient_decay` draws it with every label made in the reader's language;
:func:`gradient_decay_figure` does both in one call. Like every explorer of
:mod:`attnbook.explorers`, :func:`gradient_decay_explorer` is one call whose output is a live
ipywidgets explorer in JupyterLab and a precomputed static one in the built book.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import i18n
from ..checks import check_choice, check_increasing, check_instance, check_int, check_real
from ..rnn import GradientDecay, gamma_estimate, gradient_decay_data
from ..viz import BLUE, COLUMN_PX, GREEN, GREY, ORANGE
from .base import Control, Explorer
from .layout import panel_grid

# GradientDecay and gradient_decay_data live in attnbook.rnn; importable here, their first home
# (left out of __all__, so the API pages list them once).
__all__ = [
    "GAMMA_VALUES",
    "DISTANCE_VALUES",
    "DecaySetting",
    "gradient_decay_setting",
    "draw_gradient_decay",
    "gradient_decay_figure",
    "gradient_decay_explorer",
]

#: Slider stops of ``gamma = ||W_hh||_2``: vanishing (< 1), the edge (1) and exploding (> 1).
GAMMA_VALUES = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0, 1.01, 1.05, 1.1)
#: Slider stops of the distance ``Δ = L - t`` in steps.
DISTANCE_VALUES = (1, 2, 5, 10, 20, 30, 50, 75, 100)
#: The y axis of the norm panel (log scale), fixed so that settings can be compared.
Y_RANGE = (1e-10, 1e5)


def _gamma(value, name: str = "gamma") -> float:
    """``value`` as a spectral norm in ``(0, 2]`` (a real number; TypeError otherwise)."""
    value = check_real(value, name, minimum=0.0, strict=True)
    return check_real(value, name, maximum=2.0)


def _fmt_norm(x: float) -> str:
    """A norm as a percentage when < 1 (``0.515 %``), plainly otherwise (``117``)."""
    if x >= 1:
        return f"{x:.3g}"
    pct = 100 * x
    return f"{pct:.3g} %" if pct >= 1e-3 else f"{pct:.1e} %"


@dataclass(frozen=True)
class DecaySetting:
    """One setting of the γ-and-distance explorer, computed; :func:`draw_gradient_decay` draws it.

    Attributes:
        data: the measurements for this ``gamma`` (:class:`attnbook.rnn.GradientDecay`).
        distance: the chosen distance ``Δ``, 1 .. ``data.distances[-1]``.
        gamma_range: ``(low, high)`` of the right panel's axis.
        gamma_grid: float64 ``(121,)`` values of ``gamma`` over ``gamma_range``.
        gamma_curve: float64 ``(121,)`` the bound ``gamma^distance`` at each of them.
        at: ``{"bound", "linear", "tanh"}``: the three norms at ``distance`` (floats).
    """

    data: GradientDecay
    distance: int
    gamma_range: tuple
    gamma_grid: np.ndarray
    gamma_curve: np.ndarray
    at: dict


def gradient_decay_setting(
    gamma: float = 0.9,
    distance: int = 50,
    *,
    data: GradientDecay | None = None,
    gamma_range: tuple = (0.5, 1.1),
) -> DecaySetting:
    """Compute one setting of the γ-and-distance explorer.

    Args:
        gamma: ``||W_hh||_2`` in ``(0, 2]``.
        distance: ``Δ``, between 1 and the data's largest distance.
        data: the measurements for this ``gamma`` (default:
            :func:`attnbook.rnn.gradient_decay_data` ``(gamma)``).
        gamma_range: ``(low, high)`` of the right panel's axis, ``0 < low < high``.

    Returns:
        :class:`DecaySetting`.

    Raises:
        TypeError: if ``gamma`` is not a real number, ``distance`` not an integer,
            ``data`` not a :class:`attnbook.rnn.GradientDecay` or ``gamma_range`` not a pair of
            numbers.
        ValueError: if ``gamma`` or ``distance`` is out of range, ``data`` was measured for
            another ``gamma``, or ``gamma_range`` is not increasing and positive.
    """
    gamma = _gamma(gamma)
    data = gradient_decay_data(gamma) if data is None else data
    check_instance(data, GradientDecay, "data", "gradient_decay_data; None computes it")
    if not math.isclose(data.gamma, gamma, rel_tol=1e-12):
        raise ValueError(f"data was measured for gamma={data.gamma}, not gamma={gamma}")
    K = int(data.distances[-1])
    distance = check_int(distance, "distance", 1, K)
    bounds = check_increasing(gamma_range, "gamma_range", minimum=0.0, integer=False)
    if len(bounds) != 2 or bounds[0] <= 0:
        raise ValueError(f"gamma_range must be (low, high) with 0 < low < high, got {gamma_range}")
    lo, hi = bounds
    at = dict(
        bound=float(data.bound[distance]),
        linear=float(data.linear[distance]),
        tanh=float(data.tanh[distance]),
    )
    g_grid = np.linspace(lo, hi, 121)
    g_curve = np.array([gamma_estimate(float(g), distance) for g in g_grid])  # (121,) gamma^Δ
    return DecaySetting(data, distance, (lo, hi), g_grid, g_curve, at)


def draw_gradient_decay(
    setting: DecaySetting, *, language: str | None = None, height: int = 440, width: int = COLUMN_PX
):
    """Draw one setting of the γ-and-distance explorer for ``width`` px, labels in ``language``.

    Left panel (log y): the bound ``gamma^Δ`` against ``Δ``, the measured norms of the linear
    and the tanh RNN, a vertical line at ``distance`` and the three values there. Right panel
    (log y): the bound ``gamma^distance`` against ``gamma`` over ``gamma_range``, with the chosen
    ``gamma`` marked and the level 1 (no change) dotted. Side by side in the book's column, one
    under the other on a phone (:func:`attnbook.explorers.layout.panel_grid`).

    Trace order (the explorer's tests rely on it): 0 the bound, 1 the linear RNN, 2 the tanh RNN,
    3 the three values at ``distance`` (``meta`` holds ``bound``, ``linear``, ``tanh``),
    4 the bound against ``gamma``, 5 the chosen ``gamma`` on it, 6 the level 1. Annotations:
    0 and 1 the panels' titles, 2 the values at ``distance`` (inside the left panel).

    Args:
        setting: from :func:`gradient_decay_setting`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``setting`` is not a :class:`DecaySetting`, or ``height`` or ``width``
            not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(setting, DecaySetting, "setting", "gradient_decay_setting")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    data, distance, at = setting.data, setting.distance, setting.at
    gamma, (lo, hi) = data.gamma, setting.gamma_range
    K = int(data.distances[-1])
    k = data.distances
    floor = Y_RANGE[0] / 10  # log axes cannot show 0: values below the axis are drawn at floor

    def clip(y):
        return np.maximum(np.asarray(y, dtype=np.float64), floor)

    grid = panel_grid(
        width,
        [
            _(
                "‖∂h<sub>L</sub>/∂h<sub>L−Δ</sub>‖ with ‖W<sub>hh</sub>‖ = γ = {gamma}",
                gamma=f"{gamma:g}",
            ),
            _("The bound at Δ = {distance} against γ", distance=distance),
        ],
        column_widths=[0.6, 0.4],
        height=height,
        spacing_px=100,
        bottom=50,
        left=80,
    )
    fig, (left, right) = grid.figure, grid.cells
    norm_hover = "Δ = %{x}<br>‖∂h<sub>L</sub>/∂h<sub>t</sub>‖ = %{y:.3g}"
    fig.add_trace(
        go.Scatter(
            x=k,
            y=clip(data.bound),
            mode="lines",
            name=_("bound γ<sup>Δ</sup>"),
            line=dict(color=GREY, dash="dash", width=2),
            hovertemplate="Δ = %{x}<br>γ<sup>Δ</sup> = %{y:.3g}<extra></extra>",
        ),
        **left,
    )
    fig.add_trace(
        go.Scatter(
            x=k[::5],
            y=clip(data.linear[::5]),
            mode="markers",
            name=_("linear RNN, measured"),
            marker=dict(color=BLUE, size=7),
            hovertemplate=f"{norm_hover}<extra>{_('linear RNN')}</extra>",
        ),
        **left,
    )
    fig.add_trace(
        go.Scatter(
            x=k,
            y=clip(data.tanh),
            mode="lines",
            name=_("tanh RNN, measured"),
            line=dict(color=ORANGE, width=2.5),
            hovertemplate=f"{norm_hover}<extra>{_('tanh RNN')}</extra>",
        ),
        **left,
    )
    fig.add_trace(
        go.Scatter(
            x=[distance] * 3,
            y=clip([at["bound"], at["linear"], at["tanh"]]),
            mode="markers",
            name=_("at Δ = {distance}", distance=distance),
            marker=dict(
                color=[GREY, BLUE, ORANGE], size=12, symbol="circle-open", line=dict(width=3)
            ),
            meta=at,
            showlegend=False,
            hovertemplate="Δ = %{x}: %{y:.3g}<extra></extra>",
        ),
        **left,
    )
    fig.add_trace(
        go.Scatter(
            x=setting.gamma_grid,
            y=clip(setting.gamma_curve),
            mode="lines",
            name=_("γ<sup>{distance}</sup> against γ", distance=distance),
            line=dict(color=GREEN, width=2.5),
            hovertemplate="γ = %{x:.3f}<br>γ<sup>Δ</sup> = %{y:.3g}<extra></extra>",
        ),
        **right,
    )
    fig.add_trace(
        go.Scatter(
            x=[gamma],
            y=clip([at["bound"]]),
            mode="markers",
            name=_("chosen γ"),
            marker=dict(color=GREEN, size=12),
            showlegend=False,
            hovertemplate="γ = %{x}<br>γ<sup>Δ</sup> = %{y:.3g}<extra></extra>",
        ),
        **right,
    )
    fig.add_trace(
        go.Scatter(
            x=[lo, hi],
            y=[1.0, 1.0],
            mode="lines",
            name=_("1 (no change)"),
            line=dict(color=GREY, dash="dot", width=1.5),
            hoverinfo="skip",
        ),
        **right,
    )
    log_range = [math.log10(Y_RANGE[0]), math.log10(Y_RANGE[1])]
    fig.update_yaxes(type="log", range=log_range, exponentformat="power")
    fig.update_xaxes(title_text=_("distance Δ = L − t (steps)"), range=[0, K], **left)
    fig.update_yaxes(title_text=_("gradient norm"), **left)
    fig.update_xaxes(title_text="γ = ‖W<sub>hh</sub>‖₂", range=[lo, hi], **right)
    fig.update_yaxes(title_text=f"γ<sup>{distance}</sup>", **right)
    # The values at the chosen distance, in the left panel's lower left corner (its own
    # coordinates: wherever plotly puts the panel).
    fig.add_annotation(
        text=_(
            "Δ = {distance}:<br>γ<sup>Δ</sup> = {bound}<br>linear RNN {linear}<br>tanh RNN {tanh}",
            distance=distance,
            bound=_fmt_norm(at["bound"]),
            linear=_fmt_norm(at["linear"]),
            tanh=_fmt_norm(at["tanh"]),
        ),
        xref="x domain",
        yref="y domain",
        x=0.01,
        y=0.03,
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        align="left",
        bgcolor="rgba(255,255,255,0.85)",
    )
    fig.add_shape(
        type="line",
        x0=distance,
        x1=distance,
        y0=0,
        y1=1,
        xref="x",
        yref="y domain",
        line=dict(color="#999999", width=1, dash="dot"),
    )
    return fig


def gradient_decay_figure(
    gamma: float = 0.9,
    distance: int = 50,
    *,
    data: GradientDecay | None = None,
    gamma_range: tuple = (0.5, 1.1),
    height: int = 440,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """The γ-and-distance figure of one setting: :func:`draw_gradient_decay` of its data.

    The data is :func:`gradient_decay_setting` ``(gamma, distance, data, gamma_range)``.

    Args:
        gamma: ``||W_hh||_2`` in ``(0, 2]``.
        distance: ``Δ``, between 1 and the data's largest distance.
        data: the measurements for this ``gamma`` (default:
            :func:`attnbook.rnn.gradient_decay_data` ``(gamma)``).
        gamma_range: ``(low, high)`` of the right panel's axis, ``0 < low < high``.
        height: figure height in pixels, >= 10.
        language: see :func:`draw_gradient_decay`.
        width: the width in px the figure is drawn at (see :func:`draw_gradient_decay`).

    Returns:
        ``plotly.graph_objects.Figure`` (trace order as :func:`draw_gradient_decay`).

    Raises:
        TypeError, ValueError: as :func:`gradient_decay_setting` and
            :func:`draw_gradient_decay`.
    """
    setting = gradient_decay_setting(gamma, distance, data=data, gamma_range=gamma_range)
    return draw_gradient_decay(setting, language=language, height=height, width=width)


def gradient_decay_explorer(
    gamma: float = 0.9,
    distance: int = 50,
    *,
    gamma_values: Sequence[float] = GAMMA_VALUES,
    distance_values: Sequence[int] = DISTANCE_VALUES,
    hidden_size: int = 16,
    seed: int = 0,
) -> Explorer:
    """The γ-and-distance explorer (chapter 1).

    Controls: ``gamma`` (a slider over ``gamma_values``) and ``distance`` (a slider over
    ``distance_values``). Each setting is :func:`gradient_decay_setting`, drawn by
    :func:`draw_gradient_decay`; the measurements (:func:`attnbook.rnn.gradient_decay_data` with
    ``max_distance = max(distance_values)``) are made once per ``gamma`` and reused when only
    the distance moves.

    Args:
        gamma: initial ``gamma``, one of ``gamma_values``.
        distance: initial distance, one of ``distance_values``.
        gamma_values: the slider's stops, increasing numbers in ``(0, 2]``.
        distance_values: the slider's stops, increasing integers in ``[1, 400]``.
        hidden_size: the hidden size ``d_h`` of the measured RNNs.
        seed: as :func:`attnbook.rnn.gradient_decay_data`.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`; its static HTML precomputes
        ``len(gamma_values) * len(distance_values)`` settings (90 by default).

    Raises:
        TypeError: naming the argument, if a stop list is not a sequence of numbers (integers
            for ``distance_values``).
        ValueError: naming the argument, if a value is not one of its stops or a stop list is
            empty, not increasing or out of range.
    """
    g_stops = check_increasing(gamma_values, "gamma_values", integer=False)
    g_stops = tuple(_gamma(g, f"gamma_values[{i}]") for i, g in enumerate(g_stops))
    d_stops = check_increasing(distance_values, "distance_values", minimum=1, maximum=400)
    check_choice(gamma, "gamma", g_stops)
    check_choice(distance, "distance", d_stops)
    K = max(d_stops)
    g_range = (min(g_stops), max(g_stops)) if len(g_stops) > 1 else (g_stops[0] / 2, g_stops[0])
    cache: dict[float, GradientDecay] = {}

    def compute(gamma, distance):
        if gamma not in cache:
            cache[gamma] = gradient_decay_data(
                gamma, max_distance=K, hidden_size=hidden_size, seed=seed
            )
        return gradient_decay_setting(gamma, distance, data=cache[gamma], gamma_range=g_range)

    controls = [
        # The figure's axis spells γ out (‖W_hh‖₂); the slider is named by the letter alone.
        Control(
            "gamma",
            "γ = ‖W<sub>hh</sub>‖₂",
            "slider",
            g_stops,
            float(gamma),
            labels=[f"{g:g}" for g in g_stops],
        ),
        Control(
            "distance", "distance Δ", "slider", d_stops, int(distance), plain_label="distance Δ"
        ),
    ]
    return Explorer(
        controls, title="γ-and-distance explorer", compute=compute, draw=draw_gradient_decay
    )
