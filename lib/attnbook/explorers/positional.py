"""The position explorer: one frequency of RoPE and of the sinusoidal encoding.

Pick a position ``i``, a frequency pair ``r`` and the base; the figure shows RoPE's rotation of
pair ``r`` (:func:`attnbook.positional.rope_pair_path`), the sinusoidal encoding's two
dimensions ``2r, 2r + 1`` of the same frequency (:func:`attnbook.positional.sinusoidal_encoding`)
and the RoPE score of a query and a key as a function of their offset ``Δ = i - j``
(:func:`attnbook.positional.rope_offset_scores`).

Two steps, as every explorer: :func:`position_data` computes a setting with the library and
:func:`draw_position` draws it with every label made in the reader's language;
:func:`position_figure` does both in one call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import i18n
from ..checks import check_choice, check_instance, check_int, check_real, check_rope_dim
from ..positional import (
    rope_frequencies,
    rope_offset_scores,
    rope_pair_path,
    sinusoidal_encoding,
)
from ..viz import BLUE, COLUMN_PX, GREY, ORANGE
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "POSITION_VALUES",
    "BASE_VALUES",
    "PositionData",
    "position_data",
    "draw_position",
    "position_figure",
    "position_explorer",
]

#: Stops of the position slider of the position explorer.
POSITION_VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 32)
#: RoPE / sinusoidal bases offered by the position explorer (10000 as in Vaswani et al. 2017
#: and RoFormer, 500000 as Llama 3's ``rope_theta``).
BASE_VALUES = (100.0, 10000.0, 500000.0)


def _base_text(base: float) -> str:
    """A base as the explorer writes it: ``10000.0 -> "10 000"`` (thin groups of three)."""
    return f"{base:,.0f}".replace(",", " ")


@dataclass(frozen=True)
class PositionData:
    """One setting of the position explorer, computed (what :func:`draw_position` draws).

    Attributes:
        position: the query position ``i``.
        pair: the frequency pair ``r``.
        base: the frequency base.
        head_dim: the head dimension ``D``.
        theta: ``theta_r = base^(-2r/D)``, rad per token.
        angle: ``i * theta_r``, rad.
        wavelength: ``2 pi / theta_r``, tokens.
        path: float64 ``(i + 1, 2)``, pair ``r`` of the rotated ``e_{2r}`` at positions ``0 .. i``.
        positions: int ``(P,)``, the positions ``0 .. max_position`` of the right two panels.
        sine: float64 ``(P,)``, dimension ``2r`` of the sinusoidal encoding.
        cosine: float64 ``(P,)``, dimension ``2r + 1``.
        scores: float64 ``(P,)``, the RoPE score against the offset ``Δ = position``.
    """

    position: int
    pair: int
    base: float
    head_dim: int
    theta: float
    angle: float
    wavelength: float
    path: np.ndarray
    positions: np.ndarray
    sine: np.ndarray
    cosine: np.ndarray
    scores: np.ndarray


def position_data(
    position: int = 8,
    pair: int = 1,
    base: float = 10000.0,
    *,
    head_dim: int = 16,
    max_position: int = 64,
) -> PositionData:
    """Compute one setting of the position explorer.

    Args:
        position: ``i``, an integer in ``[0, max_position]``.
        pair: ``r``, an integer in ``[0, head_dim / 2)``.
        base: the frequency base (``rope_theta``), > 1.
        head_dim: even head dimension ``d_k`` (also the encoding's ``d_model``).
        max_position: last position of the middle and right panels, >= 1.

    Returns:
        :class:`PositionData`: :func:`attnbook.positional.rope_frequencies`,
        :func:`attnbook.positional.rope_pair_path` at positions ``0 .. i``,
        :func:`attnbook.positional.sinusoidal_encoding` ``(max_position + 1, head_dim, base)``
        (its dimensions ``2r`` and ``2r + 1``) and
        :func:`attnbook.positional.rope_offset_scores` at offsets ``0 .. max_position``.

    Raises:
        TypeError: if ``position``, ``pair``, ``head_dim`` or ``max_position`` is not an
            integer, or ``base`` is not a real number.
        ValueError: if ``head_dim`` is odd, ``pair`` or ``position`` is out of range, or
            ``base <= 1``.

    Source: Vaswani et al. (2017), section 3.5; Su et al., "RoFormer" (2021), eq. 34.
    """
    head_dim = check_rope_dim(check_int(head_dim, "head_dim", 2))
    max_position = check_int(max_position, "max_position", 1)
    m = check_int(position, "position", 0, max_position)
    pair = check_int(pair, "pair", 0, head_dim // 2 - 1)
    base = check_real(base, "base", minimum=1.0, strict=True)
    theta = float(rope_frequencies(head_dim, base=base)[pair])  # rad per token
    pos = np.arange(max_position + 1)  # (P,)
    pe = sinusoidal_encoding(max_position + 1, head_dim, base=base)  # (P, D)
    return PositionData(
        position=m,
        pair=pair,
        base=base,
        head_dim=head_dim,
        theta=theta,
        angle=m * theta,
        wavelength=2 * math.pi / theta,
        path=rope_pair_path(np.arange(m + 1), pair, head_dim, base=base),  # (i + 1, 2)
        positions=pos,
        sine=pe[:, 2 * pair],
        cosine=pe[:, 2 * pair + 1],
        scores=rope_offset_scores(pos, head_dim, base=base),  # (P,)
    )


def draw_position(
    data: PositionData, *, language: str | None = None, height: int = 450, width: int = COLUMN_PX
):
    """Draw one setting of the position explorer for ``width`` px, every label in ``language``.

    Left: RoPE rotates the coordinate pair ``r`` (interleaved layout, dimensions ``2r, 2r+1``)
    of the unit vector ``e_{2r}`` by ``i * theta_r``; the dots are its positions ``0 .. i``.
    Middle: dimensions ``2r`` (sine) and ``2r + 1`` (cosine) of the sinusoidal encoding — the
    same frequency, against the position ``p``. Right: the RoPE score ``R_i q . R_j k /
    head_dim`` of the all-ones query at position ``i`` and key at position ``j = 0`` against
    their offset ``Δ = i - j`` (it depends on the offset only). Side by side in the book's
    column, one under the other on a phone (:func:`attnbook.explorers.layout.panel_grid`); the
    title (``theta_r``, the angle and the wavelength) is the caption above the plot.

    Trace order: 0 the unit circle, 1 the rotated pair at positions ``0 .. i`` (``x``, ``y``
    its coordinates), 2 the sine curve (dimension ``2r``), 3 the cosine curve (``2r + 1``),
    4 the markers at ``p = i`` on both curves, 5 the score curve over offsets
    ``0 .. max_position``, 6 the marker at offset ``Δ = i``. ``meta`` of trace 1 holds ``theta``
    (rad per token), ``angle`` (``i * theta``, rad) and ``wavelength`` (``2 pi / theta``,
    tokens). Annotations: 0-2 the panels' titles.

    Args:
        data: from :func:`position_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, without the title, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`PositionData`, or ``height`` or ``width`` not
            an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, PositionData, "data", "position_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    m, pos, path = data.position, data.positions, data.path
    circle = np.linspace(0, 2 * np.pi, 121)
    grid = panel_grid(
        width,
        [
            _("RoPE rotates pair r by i·θ<sub>r</sub>"),
            _("sinusoidal encoding, same θ<sub>r</sub>"),
            _("RoPE score q·k vs offset"),
        ],
        column_widths=[1.0, 1.15, 1.15],
        height=height,
        left=60,
        spacing_px=60,
        bottom=50,
    )
    fig, (rot, sin, score) = grid.figure, grid.cells
    fig.add_trace(
        go.Scatter(
            x=np.cos(circle),
            y=np.sin(circle),
            mode="lines",
            line=dict(color="#c8c8c8", width=1),
            hoverinfo="skip",
            showlegend=False,
            name=_("unit circle"),
        ),
        **rot,
    )
    fig.add_trace(
        go.Scatter(
            x=path[:, 0],
            y=path[:, 1],
            mode="lines+markers",
            showlegend=False,
            name=_("rotated pair"),
            line=dict(color=BLUE, width=1),
            marker=dict(size=[6] * m + [13], color=BLUE),
            hovertemplate="(%{x:.3f}, %{y:.3f})<extra></extra>",
            meta={"theta": data.theta, "angle": data.angle, "wavelength": data.wavelength},
        ),
        **rot,
    )
    fig.add_trace(
        go.Scatter(
            x=pos,
            y=data.sine,
            mode="lines",
            name=_("dim 2r: sin(p·θ<sub>r</sub>)"),
            line=dict(color=BLUE, width=2),
        ),
        **sin,
    )
    fig.add_trace(
        go.Scatter(
            x=pos,
            y=data.cosine,
            mode="lines",
            name=_("dim 2r+1: cos(p·θ<sub>r</sub>)"),
            line=dict(color=ORANGE, width=2),
        ),
        **sin,
    )
    fig.add_trace(
        go.Scatter(
            x=[m, m],
            y=[data.sine[m], data.cosine[m]],
            mode="markers",
            showlegend=False,
            name=_("at p = i"),
            marker=dict(size=10, color=[BLUE, ORANGE]),
        ),
        **sin,
    )
    fig.add_trace(
        go.Scatter(
            x=pos,
            y=data.scores,
            mode="lines",
            showlegend=False,
            name=_("score"),
            line=dict(color=GREY, width=2),
            hovertemplate=_("Δ = {offset}: score {score}", offset="%{x}", score="%{y:.3f}")
            + "<extra></extra>",
        ),
        **score,
    )
    fig.add_trace(
        go.Scatter(
            x=[m],
            y=[data.scores[m]],
            mode="markers",
            showlegend=False,
            name=_("at Δ = i"),
            marker=dict(size=10, color=GREY),
        ),
        **score,
    )
    # The circle stays round: one unit is as long on both axes (plotly widens the range of the
    # longer side of the panel).
    fig.update_xaxes(range=[-1.2, 1.2], title_text=_("dim 2r"), zeroline=True, **rot)
    fig.update_yaxes(
        range=[-1.2, 1.2],
        title_text=_("dim 2r+1"),
        zeroline=True,
        scaleanchor="x",
        scaleratio=1,
        **rot,
    )
    fig.update_xaxes(title_text=_("position p"), **sin)
    fig.update_yaxes(range=[-1.1, 1.1], **sin)
    fig.update_xaxes(title_text=_("offset Δ = i − j"), **score)
    fig.update_yaxes(range=[-0.45, 1.05], **score)
    # Only the title changes with the controls (small static frames); the panels are fixed.
    title = _(
        "i = {i}, r = {r}, base {base}: θ<sub>r</sub> = {theta} rad/token, angle "
        "i·θ<sub>r</sub> = {angle} rad, wavelength 2π/θ<sub>r</sub> = {wavelength} "
        "tokens",
        i=m,
        r=data.pair,
        base=_base_text(data.base),
        theta=f"{data.theta:.3g}",
        angle=f"{data.angle:.3g}",
        wavelength=f"{data.wavelength:.3g}",
    )
    caption_title(fig, title)
    return fig


def position_figure(
    position: int = 8,
    pair: int = 1,
    base: float = 10000.0,
    *,
    head_dim: int = 16,
    max_position: int = 64,
    height: int = 450,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """The position explorer's figure of one setting, drawn from its computed data.

    :func:`draw_position` of :func:`position_data`.

    Args:
        position: ``i``, an integer in ``[0, max_position]``.
        pair: ``r``, an integer in ``[0, head_dim / 2)``.
        base: the frequency base (``rope_theta``), > 1.
        head_dim: even head dimension ``d_k`` (also the encoding's ``d_model``).
        max_position: last position drawn in the middle and right panels.
        height: figure height in px with the panels side by side, without the title, >= 10.
        language: see :func:`draw_position`.
        width: the width in px the figure is drawn at (see :func:`draw_position`).

    Returns:
        ``plotly.graph_objects.Figure`` (trace order as in :func:`draw_position`).

    Raises:
        TypeError, ValueError: as :func:`position_data` and :func:`draw_position`.

    Source: Vaswani et al. (2017), section 3.5; Su et al., "RoFormer" (2021), eq. 34.
    """
    data = position_data(position, pair, base, head_dim=head_dim, max_position=max_position)
    return draw_position(data, language=language, height=height, width=width)


def position_explorer(
    position: int = 8, pair: int = 1, base: float = 10000.0, *, head_dim: int = 16
) -> Explorer:
    """The position explorer (chapter 8): positions and frequencies of RoPE and sinusoids.

    Controls: ``position`` ``i`` (a slider over :data:`POSITION_VALUES`), ``pair`` ``r`` (a
    slider over ``0 .. head_dim/2 - 1``) and ``base`` (:data:`BASE_VALUES`). Each setting is
    computed by :func:`position_data` and drawn by :func:`draw_position`.

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
    head_dim = check_rope_dim(check_int(head_dim, "head_dim", 2, 32))
    pairs = tuple(range(head_dim // 2))
    check_choice(position, "position", POSITION_VALUES)
    check_choice(pair, "pair", pairs)
    check_choice(base, "base", BASE_VALUES)

    def compute(position, pair, base):
        return position_data(position, pair, base, head_dim=head_dim, max_position=64)

    controls = [
        Control("position", "position i", "slider", POSITION_VALUES, int(position)),
        Control("pair", "pair r", "slider", pairs, int(pair)),
        Control(
            "base",
            "base",
            "select",
            BASE_VALUES,
            float(base),
            labels=lambda _: [_base_text(b) for b in BASE_VALUES],
        ),
    ]
    return Explorer(controls, title="position explorer", compute=compute, draw=draw_position)
