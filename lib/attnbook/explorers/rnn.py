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

Like every explorer of :mod:`attnbook.explorers`, :func:`gradient_decay_explorer` is one call
whose output is a live ipywidgets explorer in JupyterLab and a precomputed static one in the
built book. Also importable from :mod:`attnbook.widgets_rnn`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..checks import check_choice, check_increasing, check_int, check_real
from ..viz import BLUE, EMPTY_TEMPLATE, FONT, GREEN, GREY, ORANGE, axis_style
from .base import Control, Explorer

__all__ = [
    "GAMMA_VALUES",
    "DISTANCE_VALUES",
    "GradientDecay",
    "gradient_decay_data",
    "gradient_decay_figure",
    "gradient_decay_explorer",
]

#: Slider stops of ``gamma = ||W_hh||_2``: vanishing (< 1), the edge (1) and exploding (> 1).
GAMMA_VALUES = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0, 1.01, 1.05, 1.1)
#: Slider stops of the distance ``Δ = L - t`` in steps.
DISTANCE_VALUES = (1, 2, 5, 10, 20, 30, 50, 75, 100)
#: The y axis of the norm panel (log scale), fixed so that settings can be compared.
Y_RANGE = (1e-10, 1e5)

@dataclass(frozen=True)
class GradientDecay:
    """Gradient norms against distance for one ``gamma``, from :func:`gradient_decay_data`.

    Attributes:
        gamma: spectral norm of the recurrent matrix ``W_hh``.
        distances: int64 ``(K + 1,)`` distances ``Δ = 0 .. K``.
        bound: float64 ``(K + 1,)`` ``gamma^Δ``.
        linear: float64 ``(K + 1,)`` measured ``||dh_L/dh_{L-Δ}||_2`` of the linear RNN.
        tanh: float64 ``(K + 1,)`` the same for the tanh RNN.
        hidden_size, input_size, seed: settings (``hidden_size`` is ``d_h``).
    """

    gamma: float
    distances: np.ndarray
    bound: np.ndarray
    linear: np.ndarray
    tanh: np.ndarray
    hidden_size: int
    input_size: int
    seed: int


def _gamma(value, name: str = "gamma") -> float:
    """``value`` as a spectral norm in ``(0, 2]`` (a real number; TypeError otherwise)."""
    value = check_real(value, name, minimum=0.0, strict=True)
    return check_real(value, name, maximum=2.0)


def gradient_decay_data(gamma: float, *, max_distance: int = 100, hidden_size: int = 16,
                        input_size: int = 4, seed: int = 0) -> GradientDecay:
    """Measure ``||dh_L/dh_{L-Δ}||_2`` for ``Δ = 0 .. max_distance``, ``||W_hh||_2 = gamma``.

    Two :class:`attnbook.rnn.VanillaRNN` s in float64 (``nonlinearity="identity"`` and
    ``"tanh"``) share every parameter: ``W_ih`` and the biases from torch's default
    initialisation after ``torch.manual_seed(seed)``, and ``W_hh = gamma * Q`` with ``Q`` the
    orthogonal factor of a seeded standard-normal matrix. Both read the same input
    ``x (1, max_distance + 1, input_size)``, i.i.d. standard normal (seed ``seed + 1``), and
    :func:`attnbook.rnn.jacobian_norms` measures the norms.

    Args:
        gamma: the spectral norm ``||W_hh||_2``, in ``(0, 2]``.
        max_distance: largest distance ``K`` (1..400); the sequences have ``L = K + 1`` steps.
        hidden_size: the hidden size ``d_h`` (1..64).
        input_size: features of ``x_t`` (1..64).
        seed: seed of the weights (``seed``) and the inputs (``seed + 1``), >= 0.

    Returns:
        :class:`GradientDecay` with arrays of length ``max_distance + 1``.

    Raises:
        TypeError: naming the argument, if ``gamma`` is not a real number or a size or
            ``seed`` is not an integer.
        ValueError: naming the argument, if a value is out of range.

    Source: Pascanu, Mikolov & Bengio (2013), eqs. 5-7 (the bound); Bengio et al. (1994).
    """
    import torch

    from ..rnn import VanillaRNN, gamma_estimate, jacobian_norms

    gamma = _gamma(gamma)
    K = check_int(max_distance, "max_distance", 1, 400)
    H = check_int(hidden_size, "hidden_size", 1, 64)
    d_in = check_int(input_size, "input_size", 1, 64)
    seed = check_int(seed, "seed", 0, 2**31 - 1)
    torch.manual_seed(seed)
    tanh_rnn = VanillaRNN(d_in, H, nonlinearity="tanh").double()
    linear_rnn = VanillaRNN(d_in, H, nonlinearity="identity").double()
    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(H, H, generator=gen, dtype=torch.float64))  # (H, H)
    with torch.no_grad():
        tanh_rnn.weight_hh.copy_(gamma * q)
        linear_rnn.load_state_dict(tanh_rnn.state_dict())
    x = torch.randn(1, K + 1, d_in, generator=torch.Generator().manual_seed(seed + 1),
                    dtype=torch.float64)  # (1, K + 1, input_size)
    distances = np.arange(K + 1)
    return GradientDecay(
        gamma=gamma, distances=distances, bound=np.asarray(gamma_estimate(gamma, distances)),
        linear=jacobian_norms(linear_rnn, x), tanh=jacobian_norms(tanh_rnn, x),
        hidden_size=H, input_size=d_in, seed=seed,
    )


def _fmt_norm(x: float) -> str:
    """A norm as a percentage when < 1 (``0.515 %``), plainly otherwise (``117``)."""
    if x >= 1:
        return f"{x:.3g}"
    pct = 100 * x
    return f"{pct:.3g} %" if pct >= 1e-3 else f"{pct:.1e} %"


def gradient_decay_figure(gamma: float = 0.9, distance: int = 50, *,
                          data: GradientDecay | None = None,
                          gamma_range: tuple = (0.5, 1.1), height: int = 440):
    """Figure of the γ-and-distance explorer.

    Left panel (log y): the bound ``gamma^Δ`` against ``Δ``, the measured norms of the linear
    and the tanh RNN (:func:`gradient_decay_data`), a vertical line at ``distance`` and the
    three values there. Right panel (log y): the bound ``gamma^distance`` against ``gamma`` over
    ``gamma_range``, with the chosen ``gamma`` marked and the level 1 (no change) dotted.

    Trace order (the explorer's tests rely on it): 0 the bound, 1 the linear RNN, 2 the tanh RNN,
    3 the three values at ``distance`` (``meta`` holds ``bound``, ``linear``, ``tanh``),
    4 the bound against ``gamma``, 5 the chosen ``gamma`` on it, 6 the level 1.

    Args:
        gamma: ``||W_hh||_2`` in ``(0, 2]``.
        distance: ``Δ``, between 1 and the data's largest distance.
        data: the measurements for this ``gamma`` (default: :func:`gradient_decay_data`
            ``(gamma)``).
        gamma_range: ``(low, high)`` of the right panel's axis, ``0 < low < high``.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``gamma`` is not a real number, ``distance`` not an integer,
            ``data`` not a :class:`GradientDecay` or ``gamma_range`` not a pair of numbers.
        ValueError: if ``gamma`` or ``distance`` is out of range, ``data`` was measured for
            another ``gamma``, or ``gamma_range`` is not increasing and positive.
    """
    import plotly.graph_objects as go

    from ..rnn import gamma_estimate

    gamma = _gamma(gamma)
    data = gradient_decay_data(gamma) if data is None else data
    if not isinstance(data, GradientDecay):
        raise TypeError(f"data must be a GradientDecay (from gradient_decay_data) or None, got "
                        f"{type(data).__name__}")
    if not math.isclose(data.gamma, gamma, rel_tol=1e-12):
        raise ValueError(f"data was measured for gamma={data.gamma}, not gamma={gamma}")
    K = int(data.distances[-1])
    distance = check_int(distance, "distance", 1, K)
    bounds = check_increasing(gamma_range, "gamma_range", minimum=0.0, integer=False)
    if len(bounds) != 2 or bounds[0] <= 0:
        raise ValueError(f"gamma_range must be (low, high) with 0 < low < high, got {gamma_range}")
    lo, hi = bounds
    k = data.distances
    floor = Y_RANGE[0] / 10  # log axes cannot show 0: values below the axis are drawn at floor

    def clip(y):
        return np.maximum(np.asarray(y, dtype=np.float64), floor)

    at = dict(bound=float(data.bound[distance]), linear=float(data.linear[distance]),
              tanh=float(data.tanh[distance]))
    g_grid = np.linspace(lo, hi, 121)
    g_curve = np.array([gamma_estimate(float(g), distance) for g in g_grid])  # (121,) gamma^Δ
    traces = [
        go.Scatter(x=k, y=clip(data.bound), mode="lines", name="bound γ<sup>Δ</sup>",
                   line=dict(color=GREY, dash="dash", width=2), xaxis="x", yaxis="y",
                   hovertemplate="Δ = %{x}<br>γ<sup>Δ</sup> = %{y:.3g}<extra></extra>"),
        go.Scatter(x=k[::5], y=clip(data.linear[::5]), mode="markers",
                   name="linear RNN, measured", marker=dict(color=BLUE, size=7),
                   xaxis="x", yaxis="y",
                   hovertemplate="Δ = %{x}<br>‖∂h<sub>L</sub>/∂h<sub>t</sub>‖ = %{y:.3g}"
                   "<extra>linear</extra>"),
        go.Scatter(x=k, y=clip(data.tanh), mode="lines", name="tanh RNN, measured",
                   line=dict(color=ORANGE, width=2.5), xaxis="x", yaxis="y",
                   hovertemplate="Δ = %{x}<br>‖∂h<sub>L</sub>/∂h<sub>t</sub>‖ = %{y:.3g}"
                   "<extra>tanh</extra>"),
        go.Scatter(x=[distance] * 3, y=clip([at["bound"], at["linear"], at["tanh"]]),
                   mode="markers", name=f"at Δ = {distance}",
                   marker=dict(color=[GREY, BLUE, ORANGE], size=12,
                               symbol="circle-open", line=dict(width=3)),
                   xaxis="x", yaxis="y", meta=at, showlegend=False,
                   hovertemplate="Δ = %{x}: %{y:.3g}<extra></extra>"),
        go.Scatter(x=g_grid, y=clip(g_curve), mode="lines",
                   name=f"γ<sup>{distance}</sup> against γ",
                   line=dict(color=GREEN, width=2.5), xaxis="x2", yaxis="y2",
                   hovertemplate="γ = %{x:.3f}<br>γ<sup>Δ</sup> = %{y:.3g}<extra></extra>"),
        go.Scatter(x=[gamma], y=clip([at["bound"]]), mode="markers", name="chosen γ",
                   marker=dict(color=GREEN, size=12), xaxis="x2", yaxis="y2",
                   showlegend=False, hovertemplate="γ = %{x}<br>γ<sup>Δ</sup> = %{y:.3g}"
                   "<extra></extra>"),
        go.Scatter(x=[lo, hi], y=[1.0, 1.0], mode="lines", name="1 (no change)",
                   line=dict(color=GREY, dash="dot", width=1.5), xaxis="x2", yaxis="y2",
                   hoverinfo="skip"),
    ]
    log_lo, log_hi = math.log10(Y_RANGE[0]), math.log10(Y_RANGE[1])
    annotations = [
        dict(text=f"‖∂h<sub>L</sub>/∂h<sub>L−Δ</sub>‖ with ‖W<sub>hh</sub>‖ = γ = {gamma:g}",
             x=0.27, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
             showarrow=False, font=dict(size=14)),
        dict(text=f"The bound at Δ = {distance} against γ",
             x=0.83, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
             showarrow=False, font=dict(size=14)),
        dict(text=(f"Δ = {distance}:<br>γ<sup>Δ</sup> = {_fmt_norm(at['bound'])}"
                   f"<br>linear RNN {_fmt_norm(at['linear'])}"
                   f"<br>tanh RNN {_fmt_norm(at['tanh'])}"),
             x=0.01, y=0.03, xref="paper", yref="paper", xanchor="left", yanchor="bottom",
             showarrow=False, align="left", bgcolor="rgba(255,255,255,0.85)"),
    ]
    layout = go.Layout(
        template=EMPTY_TEMPLATE, font=FONT, paper_bgcolor="white", plot_bgcolor="white",
        height=height, margin=dict(l=70, r=20, t=50, b=90),
        xaxis=axis_style(domain=[0.0, 0.56], title=dict(text="distance Δ = L − t (steps)"),
                         range=[0, K], anchor="y"),
        yaxis=axis_style(type="log", range=[log_lo, log_hi], exponentformat="power",
                         title=dict(text="gradient norm"), anchor="x"),
        xaxis2=axis_style(domain=[0.68, 1.0], title=dict(text="γ = ‖W<sub>hh</sub>‖₂"),
                          range=[lo, hi], anchor="y2"),
        yaxis2=axis_style(type="log", range=[log_lo, log_hi], exponentformat="power",
                          title=dict(text=f"γ<sup>{distance}</sup>"), anchor="x2"),
        shapes=[dict(type="line", x0=distance, x1=distance, y0=0, y1=1, xref="x",
                     yref="y domain", line=dict(color="#999999", width=1, dash="dot"))],
        annotations=annotations,
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.2, yanchor="top"),
    )
    return go.Figure(data=traces, layout=layout)


def gradient_decay_explorer(
    gamma: float = 0.9, distance: int = 50, *, gamma_values: Sequence[float] = GAMMA_VALUES,
    distance_values: Sequence[int] = DISTANCE_VALUES, hidden_size: int = 16, seed: int = 0,
) -> Explorer:
    """The γ-and-distance explorer (chapter 1).

    Controls: ``gamma`` (a slider over ``gamma_values``) and ``distance`` (a slider over
    ``distance_values``). The figure is :func:`gradient_decay_figure`; the measurements
    (:func:`gradient_decay_data` with ``max_distance = max(distance_values)``) are made once
    per ``gamma`` and reused when only the distance moves.

    Args:
        gamma: initial ``gamma``, one of ``gamma_values``.
        distance: initial distance, one of ``distance_values``.
        gamma_values: the slider's stops, increasing numbers in ``(0, 2]``.
        distance_values: the slider's stops, increasing integers in ``[1, 400]``.
        hidden_size: the hidden size ``d_h`` of the measured RNNs.
        seed: as :func:`gradient_decay_data`.

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

    def render(gamma, distance):
        if gamma not in cache:
            cache[gamma] = gradient_decay_data(gamma, max_distance=K, hidden_size=hidden_size,
                                               seed=seed)
        return gradient_decay_figure(gamma, distance, data=cache[gamma], gamma_range=g_range)

    controls = [
        Control("gamma", "γ = ‖W<sub>hh</sub>‖₂", "slider", g_stops, float(gamma),
                labels=[f"{g:g}" for g in g_stops], plain_label="γ = ‖W_hh‖₂"),
        Control("distance", "distance Δ", "slider", d_stops, int(distance),
                plain_label="distance Δ"),
    ]
    return Explorer(controls, render, title="γ-and-distance explorer")
