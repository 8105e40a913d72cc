"""The explorer of chapter 9: depth and norm placement against per-layer gradient norms.

A Transformer stack can put its LayerNorm after each residual addition (**Post-LN**, the
original Transformer, Vaswani et al., 2017, section 3.1) or inside each residual branch
(**Pre-LN**, GPT-2, Llama; Xiong et al., 2020). Xiong et al. (2020, theorem 1 and figure 3)
show that at initialisation the gradients of a Post-LN stack are largest next to the output,
while those of a Pre-LN stack are about the same in every layer and shrink as the stack gets
deeper. This module lets the reader see it on the library's own models.

The numbers are measured by :func:`attnbook.experiments.gradient_norms_at_init` (the
``grad_norm_init`` of :func:`attnbook.experiments.norm_placement_run`: a
:class:`attnbook.models.DecoderOnlyModel` on the copy task, the same seed, the same first batch),
once, when the explorer is made; moving a control only looks them up, so the live and the static
explorer draw the same numbers. Two steps, as every explorer: :func:`norm_placement_data` picks a
setting's numbers, :func:`draw_norm_placement` draws them with every label made in the reader's
language; :func:`norm_placement_figure` does both in one call and
:func:`norm_placement_explorer` wraps them in an :class:`~attnbook.explorers.base.Explorer`
(controls: depth, placement). ``gradient_norms_at_init`` stays importable from here, its
first home (left out of ``__all__``, so the API pages list it once, in
:mod:`attnbook.experiments`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import i18n
from ..checks import check_choice, check_increasing, check_instance, check_int
from ..experiments import NORM_PLACEMENT_DEPTHS, gradient_norms_at_init
from ..viz import BLUE, COLUMN_PX, GREY, ORANGE
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "DEPTH_VALUES",
    "PLACEMENTS",
    "ARMS",
    "NormPlacementData",
    "norm_placement_data",
    "draw_norm_placement",
    "norm_placement_figure",
    "norm_placement_explorer",
]

#: Depths (number of layers) offered by the explorer's slider
#: (:data:`attnbook.experiments.NORM_PLACEMENT_DEPTHS`).
DEPTH_VALUES = NORM_PLACEMENT_DEPTHS
#: Options of the placement control, in display order.
PLACEMENTS = ("both", "Post-LN", "Pre-LN")
#: The two arms in trace order, each a pair (label, key of ``NormPlacementResult.grad_norm_init``).
ARMS = (("Post-LN", "post_ln"), ("Pre-LN", "pre_ln"))

_COLORS = {"Post-LN": ORANGE, "Pre-LN": BLUE}


@dataclass(frozen=True)
class NormPlacementData:
    """One setting of the norm-placement explorer (what :func:`draw_norm_placement` draws).

    Attributes:
        depth: number of layers shown in the left panel.
        placement: one of :data:`PLACEMENTS`.
        depths: int ``(n_depths,)``, every depth measured (the right panel's x).
        per_layer: ``{"post_ln", "pre_ln"}`` -> float64 ``(depth,)`` gradient norm of each
            layer (index 0 = next to the embedding), dimensionless.
        last: ``{"post_ln", "pre_ln"}`` -> float64 ``(n_depths,)`` the last layer's gradient
            norm at every depth.
        ymax: upper end of both y axes (the largest norm of any depth, plus 8 %).
    """

    depth: int
    placement: str
    depths: np.ndarray
    per_layer: dict
    last: dict
    ymax: float

    def ratio(self, key: str) -> float:
        """Last layer's norm over the first layer's at :attr:`depth` (``key``: an arm)."""
        g = self.per_layer[key]
        return float(g[-1] / g[0])


def _check_grads(grads) -> tuple:
    """The depths of ``grads`` after checking it is shaped as gradient_norms_at_init returns."""
    if not isinstance(grads, dict) or not grads:
        raise ValueError("grads must be the non-empty dict returned by gradient_norms_at_init")
    depths = check_increasing(sorted(grads), "the depths of grads", minimum=1, maximum=96)
    for L in depths:
        for _, key in ARMS:
            g = np.asarray(grads[L].get(key) if isinstance(grads[L], dict) else None)
            if g.shape != (L,) or not np.isfinite(g).all():
                raise ValueError(
                    f"grads[{L}][{key!r}] must be a finite array of shape ({L},), "
                    f"got shape {g.shape}"
                )
    return depths


def norm_placement_data(depth: int, placement: str, grads: dict) -> NormPlacementData:
    """The numbers of one setting of the norm-placement explorer, from measured norms.

    Args:
        depth: number of layers, a key of ``grads``.
        placement: one of :data:`PLACEMENTS` (``"both"``, ``"Post-LN"``, ``"Pre-LN"``).
        grads: the dict of :func:`attnbook.experiments.gradient_norms_at_init`
            (``{L: {"post_ln": (L,), "pre_ln": (L,)}}``).

    Returns:
        :class:`NormPlacementData`.

    Raises:
        ValueError: if ``placement`` is not one of :data:`PLACEMENTS`, ``depth`` is not a key of
            ``grads``, or ``grads`` is not shaped as ``gradient_norms_at_init`` returns (the
            message names the entry, e.g. ``grads[3]['pre_ln']``).
    """
    depths = _check_grads(grads)
    check_choice(placement, "placement", PLACEMENTS)
    check_choice(depth, "depth", depths)
    per_layer = {key: np.asarray(grads[depth][key], dtype=np.float64) for _, key in ARMS}
    last = {
        key: np.array([grads[L][key][-1] for L in depths], dtype=np.float64) for _, key in ARMS
    }  # (n_depths,)
    ymax = 1.08 * max(float(np.max(grads[L][key])) for L in depths for _, key in ARMS)
    return NormPlacementData(int(depth), placement, np.array(depths), per_layer, last, ymax)


def draw_norm_placement(
    data: NormPlacementData,
    *,
    language: str | None = None,
    height: int = 440,
    width: int = COLUMN_PX,
):
    """Draw one setting of the norm-placement explorer for ``width`` px, labels in ``language``.

    Left panel: the gradient norm of every layer (1 = next to the embedding, ``depth`` = next to
    the output). Right panel: the last layer's gradient norm against the depth, over every depth
    measured, with the current depth marked. ``placement`` shows one arm or both; a hidden arm
    keeps its traces (``visible=False``) so that every setting has the same traces in the same
    order. Side by side in the book's column, one under the other on a phone
    (:func:`attnbook.explorers.layout.panel_grid`). The title is the caption above the plot;
    its second line gives, per arm shown, the last layer's norm over the first layer's.

    Trace order: 0 Post-LN per layer, 1 Pre-LN per layer (``x`` the 1-based layer index, ``y``
    the norms), 2 Post-LN last layer against depth, 3 Pre-LN last layer against depth (``x`` the
    depths), 4 Post-LN current depth, 5 Pre-LN current depth (single markers). Traces 0 and 1
    carry ``meta = {"depth", "placement", "ratio_last_first"}``. Hover text is in ``text``.
    Annotations: 0 and 1 the panels' titles.

    Args:
        data: from :func:`norm_placement_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, without the title, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`NormPlacementData`, or ``height`` or
            ``width`` not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, NormPlacementData, "data", "norm_placement_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    depth, depths = data.depth, [int(L) for L in data.depths]
    shown = {label: data.placement in ("both", label) for label, _k in ARMS}
    per_layer, vs_depth, current, notes = [], [], [], []
    for label, key in ARMS:
        g = data.per_layer[key]  # (depth,)
        last = data.last[key]  # (n_depths,)
        ratio = data.ratio(key)
        color = _COLORS[label]
        per_layer.append(
            go.Scatter(
                x=np.arange(1, depth + 1),
                y=g,
                mode="lines+markers",
                name=label,
                line=dict(color=color, width=2.5),
                marker=dict(size=7, color=color),
                visible=shown[label],
                legendgroup=label,
                meta=dict(depth=depth, placement=label, ratio_last_first=ratio),
                text=[
                    _(
                        "{arm}, layer {layer} of {depth}: gradient norm {norm}",
                        arm=label,
                        layer=i + 1,
                        depth=depth,
                        norm=f"{x:.3f}",
                    )
                    for i, x in enumerate(g)
                ],
                hovertemplate="%{text}<extra></extra>",
            )
        )
        vs_depth.append(
            go.Scatter(
                x=np.array(depths),
                y=last,
                mode="lines+markers",
                name=_("{arm}, last layer", arm=label),
                line=dict(color=color, width=2, dash="dot"),
                marker=dict(size=6, color=color),
                visible=shown[label],
                legendgroup=label,
                showlegend=False,
                text=[
                    _.ngettext(
                        "{arm}, {n} layer: last layer's gradient norm {norm}",
                        "{arm}, {n} layers: last layer's gradient norm {norm}",
                        L,
                        arm=label,
                        norm=f"{x:.3f}",
                    )
                    for L, x in zip(depths, last)
                ],
                hovertemplate="%{text}<extra></extra>",
            )
        )
        current.append(
            go.Scatter(
                x=[depth],
                y=[g[-1]],
                mode="markers",
                name=_.ngettext("{arm}, {n} layer", "{arm}, {n} layers", depth, arm=label),
                marker=dict(size=14, color=color, symbol="circle-open", line=dict(width=3)),
                visible=shown[label],
                legendgroup=label,
                showlegend=False,
                hoverinfo="skip",
            )
        )
        if shown[label]:
            notes.append(_("{arm}: last / first layer = {ratio}", arm=label, ratio=f"{ratio:.2f}"))
    grid = panel_grid(
        width,
        [
            _.ngettext(
                "Gradient norm of each layer, {n} layer",
                "Gradient norm of each layer, {n} layers",
                depth,
            ),
            _("Last layer's gradient norm against depth"),
        ],
        height=height,
        spacing_px=70,
        bottom=50,
    )
    fig, (left, right) = grid.figure, grid.cells
    for trace in per_layer:
        fig.add_trace(trace, **left)
    for trace in vs_depth + current:
        fig.add_trace(trace, **right)
    fig.update_xaxes(
        title_text=_("layer (1 = next to the embedding)"),
        range=[0.5, depth + 0.5],
        dtick=max(1, int(math.ceil(depth / (12 if not grid.stacked else 8)))),
        **left,
    )
    fig.update_yaxes(title_text=_("gradient norm of the layer"), range=[0, data.ymax], **left)
    fig.update_xaxes(
        title_text=_("number of layers"),
        type="log",
        tickvals=depths,
        ticktext=[str(L) for L in depths],
        **right,
    )
    fig.update_yaxes(range=[0, data.ymax], **right)
    # The ratios are prose: the caption's second line, in the notes' grey.
    title = _("Gradients at initialisation: Post-LN vs Pre-LN")
    if notes:
        title += f"<br><span style='color:{GREY}'>" + "   ·   ".join(notes) + "</span>"
    caption_title(fig, title)
    return fig


def norm_placement_figure(
    depth: int,
    placement: str,
    grads: dict,
    *,
    height: int = 440,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """The norm-placement figure of one setting: :func:`draw_norm_placement` of its data.

    The data is :func:`norm_placement_data` ``(depth, placement, grads)``.

    Args:
        depth: number of layers, a key of ``grads``.
        placement: one of :data:`PLACEMENTS`.
        grads: the dict of :func:`attnbook.experiments.gradient_norms_at_init`.
        height: figure height in px with the panels side by side, without the title, >= 10.
        language: see :func:`draw_norm_placement`.
        width: the width in px the figure is drawn at (see :func:`draw_norm_placement`).

    Returns:
        ``plotly.graph_objects.Figure`` (trace order as :func:`draw_norm_placement`).

    Raises:
        TypeError, ValueError: as :func:`norm_placement_data` and :func:`draw_norm_placement`.
    """
    return draw_norm_placement(
        norm_placement_data(depth, placement, grads), language=language, height=height, width=width
    )


def norm_placement_explorer(
    depth: int = 12,
    placement: str = "both",
    *,
    depth_values: Sequence[int] = DEPTH_VALUES,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 256,
    n: int = 8,
    vocab: int = 16,
    batch_size: int = 16,
    seed: int = 0,
    grads: dict | None = None,
) -> Explorer:
    """The depth and norm-placement explorer (chapter 9).

    Controls: ``depth`` (a slider over ``depth_values``) and ``placement`` (``"both"``,
    ``"Post-LN"``, ``"Pre-LN"``). Each setting is :func:`norm_placement_data` of the gradient
    norms at initialisation that :func:`attnbook.experiments.gradient_norms_at_init` measures
    once, when the explorer is made (about 5 s for the default depths on one CPU core), drawn by
    :func:`draw_norm_placement`.

    Args:
        depth: initial depth, one of ``depth_values``.
        placement: initial placement, one of :data:`PLACEMENTS`.
        depth_values: the slider's stops, strictly increasing integers in [1, 96].
        d_model: as :func:`attnbook.experiments.gradient_norms_at_init`.
        n_heads: as ``gradient_norms_at_init``.
        d_ff: as ``gradient_norms_at_init``.
        n: as ``gradient_norms_at_init``.
        vocab: as ``gradient_norms_at_init``.
        batch_size: as ``gradient_norms_at_init``.
        seed: as ``gradient_norms_at_init``.
        grads: already measured norms (the dict of ``gradient_norms_at_init`` for exactly
            ``depth_values``), to skip the measurement.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: if ``depth_values`` is not a sequence of integers, or ``grads`` is neither
            ``None`` nor a dict.
        ValueError: naming the argument, if ``depth`` or ``placement`` is not one of its
            options, ``depth_values`` is empty, out of range or not increasing, or ``grads``
            does not cover exactly ``depth_values`` or is not shaped as
            ``gradient_norms_at_init`` returns.
    """
    depths = check_increasing(depth_values, "depth_values", minimum=1, maximum=96)
    check_choice(placement, "placement", PLACEMENTS)
    check_choice(depth, "depth", depths)
    if grads is None:
        grads = gradient_norms_at_init(
            depths,
            d_model=d_model,
            n_heads=n_heads,
            d_ff=d_ff,
            n=n,
            vocab=vocab,
            batch_size=batch_size,
            seed=seed,
        )
    elif not isinstance(grads, dict):
        raise TypeError(
            f"grads must be a dict (depth -> norms, as gradient_norms_at_init returns) or "
            f"None, got {type(grads).__name__}"
        )
    elif tuple(sorted(grads)) != depths:
        raise ValueError(f"grads covers depths {tuple(sorted(grads))} but depth_values is {depths}")
    _check_grads(grads)

    def compute(depth, placement):
        return norm_placement_data(depth, placement, grads)

    controls = [
        Control("depth", "layers", "slider", depths, int(depth), plain_label="layers"),
        Control(
            "placement",
            "norm placement",
            "select",
            PLACEMENTS,
            placement,
            plain_label="norm placement",
        ),
    ]
    return Explorer(
        controls, title="norm placement explorer", compute=compute, draw=draw_norm_placement
    )
