"""The √d_k explorer (chapter 3): score variance and softmax saturation against the head dimension.

Two steps, as every explorer: :func:`attnbook.scaling.scaling_data` computes a setting with the
library (the scores' histogram and the softmax's peak, by Monte Carlo), and :func:`draw_scaling`
draws it with every label made in the reader's language. :func:`scaling_figure` does both in one
call.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import fonts, i18n, viz
from ..checks import check_bool, check_choice, check_increasing, check_int, check_real, check_seed
from ..scaling import ScalingData, scaling_data
from .base import Control, Explorer
from .layout import panel_grid

__all__ = [
    "D_K_VALUES",
    "N_KEYS_VALUES",
    "SCALED_X_RANGE",
    "draw_scaling",
    "scaling_figure",
    "scaling_explorer",
]

#: Slider stops of ``d_k`` in the scaling explorer: the powers of two from 1 to 1024.
D_K_VALUES = tuple(2**i for i in range(11))
#: Stops of the number of keys ``n_keys`` in the scaling explorer.
N_KEYS_VALUES = (4, 8, 16, 32, 64)
#: Half-width of the score axis when the scores are scaled (N(0, 1), so 4 standard deviations).
SCALED_X_RANGE = 4.0


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def draw_scaling(
    data: ScalingData,
    *,
    language: str | None = None,
    x_range: float | None = None,
    height: int = 460,
    width: int = viz.COLUMN_PX,
):
    """Draw one setting of the √d_k explorer for ``width`` px, every label in ``language``.

    Left panel: the density histogram of the scores ``q . k`` (or ``q . k / sqrt(d_k)``) with
    their measured variance, and the normal density with the expected variance (``d_k``
    unscaled, 1 scaled) as a dashed line. Right panel: the softmax weights of one query over
    ``n_keys`` keys, sorted in decreasing order and averaged over the draws, with the mean
    largest weight and the mean entropy (nats; uniform is ``ln n_keys``). Source: Vaswani et
    al. (2017), eq. 1 and footnote 4. Side by side in the book's column, one under the other
    on a phone (:func:`attnbook.explorers.layout.panel_grid`); each statistics box sits in its
    panel's top corner, wrapped to the panel's width.

    Trace order (the explorers and tests rely on it): 0 the histogram (``meta`` holds
    ``variance`` and ``expected_variance``), 1 the expected normal density, 2 the mean sorted
    weights (``meta`` holds ``mean_max_weight`` and ``mean_entropy``), 3 the uniform level
    ``1 / n_keys``. Annotations: 0 and 1 the panels' titles, 2 the scores' statistics box,
    3 the weights' statistics box.

    Args:
        data: from :func:`attnbook.scaling.scaling_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        x_range: the score axis shows ``[-x_range, x_range]`` (score units); ``None`` fits the
            data. The explorer fixes it within each mode so that dragging ``d_k`` shows the
            spread.
        height: figure height in px with the panels side by side, >= 10 (plotly's least).
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``height`` or ``width`` is not an integer or ``x_range`` not a real
            number.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels, ``x_range``
            is not finite and positive, or ``language`` is unknown.
    """
    import plotly.graph_objects as go

    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    if x_range is not None:
        x_range = check_real(x_range, "x_range", minimum=0.0, strict=True)
    stats, n_keys, d_k = data.stats, data.n_keys, data.d_k
    ranks = np.arange(1, n_keys + 1)
    traces = [
        go.Bar(
            x=data.centres,
            y=data.density,
            width=data.bin_width,
            name=_("measured scores"),
            marker=dict(color=viz.BLUE, line=dict(width=0)),
            opacity=0.75,
            meta=dict(variance=data.variance, expected_variance=data.expected_variance),
            hovertemplate=_("score %{x:.3g}<br>density %{y:.3g}<extra>measured</extra>"),
        ),
        go.Scatter(
            x=data.expected_x,
            y=data.expected_density,
            mode="lines",
            name=_("expected N(0, 1)")
            if data.scaled
            else _("expected N(0, d<sub>k</sub> = {d_k})", d_k=d_k),
            line=dict(color=viz.ORANGE, dash="dash", width=2),
            hovertemplate=_("score %{x:.3g}<br>density %{y:.3g}<extra>expected</extra>"),
        ),
        go.Bar(
            x=ranks,
            y=stats.mean_sorted_weights,
            name=_("mean weight (sorted)"),
            marker=dict(color=viz.BLUE),
            meta=dict(mean_max_weight=stats.mean_max_weight, mean_entropy=stats.mean_entropy),
            hovertemplate=_("rank %{x}<br>mean weight %{y:.3f}<extra></extra>"),
        ),
        go.Scatter(
            x=[0.5, n_keys + 0.5],
            y=[1 / n_keys] * 2,
            mode="lines",
            name=_("uniform 1/S = {value}", value=_fmt(1 / n_keys)),
            line=dict(color=viz.GREY, dash="dot", width=2),
            hoverinfo="skip",
        ),
    ]
    score_title = (
        _("Scores q·k/√d<sub>k</sub>, d<sub>k</sub> = {d_k}", d_k=d_k)
        if data.scaled
        else _("Scores q·k (unscaled), d<sub>k</sub> = {d_k}", d_k=d_k)
    )
    samples_box = _.ngettext(
        "variance {variance}<br>expected {expected}<br>({n} sample)",
        "variance {variance}<br>expected {expected}<br>({n} samples)",
        len(data.scores),
        variance=_fmt(data.variance),
        expected=_fmt(data.expected_variance),
    )
    draws_box = _.ngettext(
        "mean max weight {max_weight}<br>mean entropy {entropy} nats<br>"
        "(uniform: ln {n_keys} = {uniform})<br>mean of {n} draw",
        "mean max weight {max_weight}<br>mean entropy {entropy} nats<br>"
        "(uniform: ln {n_keys} = {uniform})<br>mean of {n} draws",
        stats.n_draws,
        max_weight=_fmt(stats.mean_max_weight),
        entropy=_fmt(stats.mean_entropy),
        n_keys=n_keys,
        uniform=_fmt(math.log(n_keys)),
    )
    grid = panel_grid(
        width,
        [
            score_title,
            _.ngettext(
                "Softmax weights of one query over S = {n} key",
                "Softmax weights of one query over S = {n} keys",
                n_keys,
            ),
        ],
        height=height,
        spacing_px=70,
        left=60,
        right=20,
        bottom=50,
    )
    fig, cells = grid.figure, grid.cells
    for trace, cell in zip(traces, (cells[0], cells[0], cells[1], cells[1])):
        fig.add_trace(trace, **cell)
    # The statistics boxes sit in their panel's own corner (its domain coordinates), wrapped to
    # a little under half of the panel's width in px at this width.
    lay = fig.layout
    plot_w = width - lay.margin.l - lay.margin.r
    for box, axis, corner in ((samples_box, "", "left"), (draws_box, "2", "right")):
        x0, x1 = lay[f"xaxis{axis}"].domain
        fig.add_annotation(
            text=fonts.wrap_html(box, 0.62 * (x1 - x0) * plot_w, viz.FONT["size"]),
            xref=f"x{axis} domain",
            yref=f"y{axis} domain",
            x=0.01 if corner == "left" else 0.99,
            y=0.97,
            xanchor=corner,
            yanchor="top",
            showarrow=False,
            align=corner,
            bgcolor="rgba(255,255,255,0.8)",
        )
    # Head room over the tallest bar or curve: the statistics box (top left) stays clear of it.
    y_top = 1.5 * max(float(np.max(data.density)), float(np.max(data.expected_density)))
    x_axis = dict(title_text=_("score"), zeroline=True)
    if x_range is not None:
        x_axis["range"] = [-float(x_range), float(x_range)]
    else:
        x_axis["autorange"] = True
    fig.update_xaxes(**x_axis, **cells[0])
    fig.update_yaxes(title_text=_("probability density"), range=[0, y_top], **cells[0])
    fig.update_xaxes(
        title_text=_("rank of the weight (1 = largest)"), range=[0.5, n_keys + 0.5], **cells[1]
    )
    fig.update_yaxes(title_text=_("mean attention weight"), range=[0, 1.05], **cells[1])
    fig.update_layout(bargap=0.05)
    return fig


def scaling_figure(
    d_k: int = 64,
    scaled: bool = True,
    n_keys: int = 16,
    *,
    n_samples: int = 2000,
    n_draws: int = 200,
    seed: int = 0,
    x_range: float | None = None,
    height: int = 460,
    language: str | None = None,
    width: int = viz.COLUMN_PX,
):
    """The √d_k explorer's figure of one setting: :func:`draw_scaling` of its data.

    The data are :func:`attnbook.scaling.scaling_data`'s.

    Args:
        d_k: head dimension, >= 1.
        scaled: divide scores by ``sqrt(d_k)``.
        n_keys: keys per query, >= 1.
        n_samples: scores in the histogram, >= 2.
        n_draws: draws averaged in the softmax panel, >= 1.
        seed: seed of the histogram; the softmax panel uses ``seed + 1``.
        x_range: half-width of the score axis, or ``None`` (see :func:`draw_scaling`).
        height: figure height in px, >= 10.
        language: see :func:`draw_scaling`.
        width: the width in px the figure is drawn at (see :func:`draw_scaling`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError, ValueError: as :func:`attnbook.scaling.scaling_data` and
            :func:`draw_scaling`.
    """
    data = scaling_data(d_k, n_keys, scaled=scaled, n_samples=n_samples, n_draws=n_draws, seed=seed)
    return draw_scaling(data, language=language, x_range=x_range, height=height, width=width)


def scaling_explorer(
    d_k: int = 64,
    scaled: bool = True,
    n_keys: int = 16,
    *,
    d_k_values: Sequence[int] = D_K_VALUES,
    n_keys_values: Sequence[int] = N_KEYS_VALUES,
    n_samples: int = 2000,
    n_draws: int = 200,
    seed: int = 0,
) -> Explorer:
    """The √d_k explorer (chapter 3): score variance and softmax saturation against d_k.

    Controls: ``d_k`` (a slider over ``d_k_values``, 1 to 1024 by default), ``scaled`` (divide
    the scores by ``sqrt(d_k)``, on/off) and ``n_keys`` (keys per query, a slider). Each setting
    is computed by :func:`attnbook.scaling.scaling_data` and drawn by :func:`draw_scaling`: the
    histogram of ``n_samples`` scores with their measured and expected variance (``d_k``
    unscaled, 1 scaled; Vaswani et al., 2017, footnote 4), and the softmax weights of one query
    over ``n_keys`` keys, sorted and averaged over ``n_draws`` draws, with the mean largest
    weight and mean entropy (:func:`attnbook.scaling.saturation_stats`). The score axis is fixed
    within each mode — ``[-4 sqrt(max d_k), 4 sqrt(max d_k)]`` unscaled, ``[-4, 4]`` scaled — so
    dragging ``d_k`` shows the spread growing without scaling and staying put with it.

    Args:
        d_k: initial head dimension, one of ``d_k_values``.
        scaled: initial state of the scaling toggle.
        n_keys: initial number of keys, one of ``n_keys_values``.
        d_k_values: the slider stops, increasing integers in [1, 4096].
        n_keys_values: the stops of ``n_keys``, increasing integers in [1, 1024].
        n_samples: scores per histogram, >= 2 (modest: every grid point is precomputed).
        n_draws: draws averaged in the softmax panel, >= 1.
        seed: random seed (histogram ``seed``, softmax panel ``seed + 1``), the same for every
            setting so that settings differ only by what the controls change.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`; its static HTML precomputes
        ``len(d_k_values) * 2 * len(n_keys_values)`` settings (110 by default, a few seconds).

    Raises:
        TypeError: naming the argument, if ``scaled`` is not a bool, ``n_samples``,
            ``n_draws``, ``seed`` or a stop is not an integer, or a stop list is not a
            sequence.
        ValueError: naming the argument, if ``d_k`` or ``n_keys`` is not one of its stops, a
            stop list is empty, out of range or not increasing, ``n_samples`` < 2,
            ``n_draws`` < 1 or ``seed`` < 0.
    """
    d_k_values = check_increasing(d_k_values, "d_k_values", minimum=1, maximum=4096)
    n_keys_values = check_increasing(n_keys_values, "n_keys_values", minimum=1, maximum=1024)
    check_choice(d_k, "d_k", d_k_values)
    check_choice(n_keys, "n_keys", n_keys_values)
    scaled = check_bool(scaled, "scaled")
    n_samples = check_int(n_samples, "n_samples", 2)  # two samples measure a variance
    n_draws = check_int(n_draws, "n_draws", 1)
    seed = check_seed(seed)
    # The score axis is fixed within each mode, so dragging d_k shows the spread (unscaled) or
    # its absence (scaled): 4 standard deviations of the largest unscaled d_k, or of N(0, 1).
    unscaled_range = 4 * math.sqrt(max(d_k_values))

    def compute(d_k, scaled, n_keys):
        return scaling_data(
            d_k, n_keys, scaled=scaled, n_samples=n_samples, n_draws=n_draws, seed=seed
        )

    def draw(data, *, language, width):
        return draw_scaling(
            data,
            language=language,
            width=width,
            x_range=SCALED_X_RANGE if data.scaled else unscaled_range,
        )

    controls = [
        Control("d_k", "d<sub>k</sub>", "slider", d_k_values, int(d_k), plain_label="d_k"),
        Control(
            "scaled",
            "divide scores by √d<sub>k</sub>",
            "toggle",
            (False, True),
            scaled,
            plain_label="divide scores by √d_k",
        ),
        Control("n_keys", "keys S", "slider", n_keys_values, int(n_keys), plain_label="keys S"),
    ]
    return Explorer(controls, title="√d_k explorer", compute=compute, draw=draw)
