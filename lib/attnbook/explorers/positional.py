"""The position explorer: one frequency of RoPE and of the sinusoidal encoding.

Pick a position ``i``, a frequency pair ``r`` and the base; the figure shows RoPE's rotation of
pair ``r`` (:func:`attnbook.positional.apply_rope`), the sinusoidal encoding's two dimensions
``2r, 2r + 1`` of the same frequency (:func:`attnbook.positional.sinusoidal_encoding`) and the
RoPE score of a query and a key as a function of their offset ``Δ = i - j``. Also importable from
:mod:`attnbook.widgets_heads_pos`.
"""

from __future__ import annotations

import numpy as np

from ..checks import check_choice, check_int, check_real
from ..positional import apply_rope, rope_frequencies, sinusoidal_encoding
from ..viz import BLUE, EMPTY_TEMPLATE, FONT, GREY, ORANGE, axis_style
from .base import Control, Explorer

__all__ = ["POSITION_VALUES", "BASE_VALUES", "position_figure", "position_explorer"]

#: Stops of the position slider of the position explorer.
POSITION_VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 32)
#: RoPE / sinusoidal bases offered by the position explorer (10000 as in Vaswani et al. 2017
#: and RoFormer, 500000 as Llama 3's ``rope_theta``).
BASE_VALUES = (100.0, 10000.0, 500000.0)


def position_figure(position: int = 8, pair: int = 1, base: float = 10000.0, *,
                    head_dim: int = 16, max_position: int = 64, height: int = 450):
    """Figure of the position explorer: one frequency of RoPE and of the sinusoidal encoding.

    Left: RoPE rotates the coordinate pair ``r`` (interleaved layout, dimensions ``2r, 2r+1``)
    of the unit vector ``e_{2r}`` by ``i * theta_r`` with ``theta_r = base^(-2r/head_dim)``;
    the dots are :func:`attnbook.positional.apply_rope` at positions ``0 .. i``. Middle:
    dimensions ``2r`` (sine) and ``2r + 1`` (cosine) of
    :func:`attnbook.positional.sinusoidal_encoding` ``(max_position + 1, head_dim, base)`` — the
    same frequency, against the position ``p``. Right: the RoPE score ``R_i q . R_j k / head_dim``
    of the all-ones query at position ``i`` and key at position ``j = 0`` against their offset
    ``Δ = i - j`` (it depends on the offset only).

    Trace order: 0 the unit circle, 1 the rotated pair at positions ``0 .. i`` (``x``, ``y``
    its coordinates), 2 the sine curve (dimension ``2r``), 3 the cosine curve (``2r + 1``),
    4 the markers at ``p = i`` on both curves, 5 the score curve over offsets
    ``0 .. max_position``, 6 the marker at offset ``Δ = i``. ``meta`` of trace 1 holds ``theta``
    (rad per token), ``angle`` (``i * theta``, rad) and ``wavelength`` (``2 pi / theta``,
    tokens).

    Args:
        position: ``i``, an integer in ``[0, max_position]``.
        pair: ``r``, an integer in ``[0, head_dim / 2)``.
        base: the frequency base (``rope_theta``), > 1.
        head_dim: even head dimension ``d_k`` (also the encoding's ``d_model``).
        max_position: last position drawn in the middle and right panels.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``position``, ``pair``, ``head_dim`` or ``max_position`` is not an
            integer, or ``base`` is not a real number.
        ValueError: if ``head_dim`` is odd, ``pair`` or ``position`` is out of range, or
            ``base <= 1``.

    Source: Vaswani et al. (2017), section 3.5; Su et al., "RoFormer" (2021), eq. 34.
    """
    import plotly.graph_objects as go

    head_dim = check_int(head_dim, "head_dim", 2)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs), got {head_dim}")
    max_position = check_int(max_position, "max_position", 1)
    m = check_int(position, "position", 0, max_position)
    pair = check_int(pair, "pair", 0, head_dim // 2 - 1)
    base = check_real(base, "base", minimum=1.0, strict=True)
    theta = rope_frequencies(head_dim, base=base)[pair]  # rad per token
    # The unit vector e_{2r} (r = pair) at positions 0..m, rotated by RoPE (interleaved pairs).
    e = np.zeros((m + 1, head_dim))
    e[:, 2 * pair] = 1.0  # (m + 1, D)
    rotated = apply_rope(e, np.arange(m + 1), base=base, interleaved=True)  # (m + 1, D)
    px, py = rotated[:, 2 * pair], rotated[:, 2 * pair + 1]
    pe = sinusoidal_encoding(max_position + 1, head_dim, base=base)  # (P, D)
    pos = np.arange(max_position + 1)
    # Score of the all-ones query at position m (i) with the all-ones key at position 0 (j).
    ones = np.ones((max_position + 1, head_dim))
    q_rot = apply_rope(ones, pos, base=base, interleaved=True)  # (P, D)
    k0 = apply_rope(np.ones((1, head_dim)), np.array([0]), base=base, interleaved=True)[0]
    score = q_rot @ k0 / head_dim  # (P,)
    circle = np.linspace(0, 2 * np.pi, 121)
    wavelength = 2 * np.pi / theta
    traces = [
        dict(type="scatter", x=np.cos(circle), y=np.sin(circle), mode="lines", xaxis="x",
             yaxis="y", line=dict(color="#c8c8c8", width=1), hoverinfo="skip",
             showlegend=False, name="unit circle"),
        dict(type="scatter", x=px, y=py, mode="lines+markers", xaxis="x", yaxis="y",
             showlegend=False, name="rotated pair", line=dict(color=BLUE, width=1),
             marker=dict(size=[6] * m + [13], color=BLUE),
             hovertemplate="(%{x:.3f}, %{y:.3f})<extra></extra>",
             meta={"theta": float(theta), "angle": float(m * theta),
                   "wavelength": float(wavelength)}),
        dict(type="scatter", x=pos, y=pe[:, 2 * pair], mode="lines", xaxis="x2", yaxis="y2",
             name="dim 2r: sin(p·θ<sub>r</sub>)", line=dict(color=BLUE, width=2)),
        dict(type="scatter", x=pos, y=pe[:, 2 * pair + 1], mode="lines", xaxis="x2",
             yaxis="y2", name="dim 2r+1: cos(p·θ<sub>r</sub>)",
             line=dict(color=ORANGE, width=2)),
        dict(type="scatter", x=[m, m], y=[pe[m, 2 * pair], pe[m, 2 * pair + 1]],
             mode="markers", xaxis="x2", yaxis="y2", showlegend=False, name="at p = i",
             marker=dict(size=10, color=[BLUE, ORANGE])),
        dict(type="scatter", x=pos, y=score, mode="lines", xaxis="x3", yaxis="y3",
             showlegend=False, name="score", line=dict(color=GREY, width=2),
             hovertemplate="Δ = %{x}: score %{y:.3f}<extra></extra>"),
        dict(type="scatter", x=[m], y=[score[m]], mode="markers", xaxis="x3", yaxis="y3",
             showlegend=False, name="at Δ = i", marker=dict(size=10, color=GREY)),
    ]

    def head(text, x):
        return dict(text=text, x=x, y=1.0, xref="paper", yref="paper", xanchor="center",
                    yanchor="bottom", showarrow=False, font=dict(size=14))

    base_txt = f"{base:,.0f}".replace(",", " ")
    # Only the title changes with the controls (small static frames); the panels are fixed.
    title = (f"i = {m}, r = {pair}, base {base_txt}: θ<sub>r</sub> = {theta:.3g} rad/token, "
             f"angle i·θ<sub>r</sub> = {m * theta:.3g} rad, wavelength "
             f"2π/θ<sub>r</sub> = {wavelength:.3g} tokens")
    layout = dict(
        template=EMPTY_TEMPLATE, font=FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center", font=dict(size=14)),
        margin=dict(l=50, r=20, t=90, b=120),
        xaxis=axis_style(domain=[0.0, 0.26], range=[-1.2, 1.2], anchor="y",
                         title=dict(text="dim 2r"), zeroline=True),
        yaxis=axis_style(range=[-1.2, 1.2], anchor="x", scaleanchor="x", scaleratio=1,
                         title=dict(text="dim 2r+1"), zeroline=True),
        xaxis2=axis_style(domain=[0.36, 0.64], anchor="y2", title=dict(text="position p")),
        yaxis2=axis_style(anchor="x2", range=[-1.1, 1.1]),
        xaxis3=axis_style(domain=[0.74, 1.0], anchor="y3", title=dict(text="offset Δ = i − j")),
        yaxis3=axis_style(anchor="x3", range=[-0.45, 1.05]),
        annotations=[
            head("RoPE rotates pair r by i·θ<sub>r</sub>", 0.13),
            head("sinusoidal encoding, same θ<sub>r</sub>", 0.5),
            head("RoPE score q·k vs offset", 0.87),
        ],
        legend=dict(x=0.5, y=-0.3, xanchor="center", yanchor="top", orientation="h"),
    )
    return go.Figure(data=traces, layout=layout)


def position_explorer(position: int = 8, pair: int = 1, base: float = 10000.0, *,
                      head_dim: int = 16) -> Explorer:
    """The position explorer (chapter 8): positions and frequencies of RoPE and sinusoids.

    Controls: ``position`` ``i`` (a slider over :data:`POSITION_VALUES`), ``pair`` ``r`` (a
    slider over ``0 .. head_dim/2 - 1``) and ``base`` (:data:`BASE_VALUES`). The figure is
    :func:`position_figure`.

    Args:
        position: initial position, one of :data:`POSITION_VALUES`.
        pair: initial frequency pair, in ``[0, head_dim / 2)``.
        base: initial base, one of :data:`BASE_VALUES`.
        head_dim: even head dimension, 2..32.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`; its static HTML precomputes
        ``10 * (head_dim / 2) * 3`` settings (240 for ``head_dim = 16``).

    Raises:
        TypeError: if ``head_dim`` is not an integer.
        ValueError: naming the argument, for a value that is not one of its control's options
            or an odd or out-of-range ``head_dim``.
    """
    head_dim = check_int(head_dim, "head_dim", 2, 32)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs), got {head_dim}")
    pairs = tuple(range(head_dim // 2))
    check_choice(position, "position", POSITION_VALUES)
    check_choice(pair, "pair", pairs)
    check_choice(base, "base", BASE_VALUES)

    def render(position, pair, base):
        return position_figure(position, pair, base, head_dim=head_dim,
                               max_position=64)

    controls = [
        Control("position", "position i", "slider", POSITION_VALUES, int(position)),
        Control("pair", "pair r", "slider", pairs, int(pair)),
        Control("base", "base", "select", BASE_VALUES, float(base),
                labels=[f"{b:,.0f}".replace(",", " ") for b in BASE_VALUES]),
    ]
    return Explorer(controls, render, title="position explorer")
