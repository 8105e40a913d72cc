"""The explorer of chapter 9: depth and norm placement against per-layer gradient norms.

A Transformer stack can put its LayerNorm after each residual addition (**Post-LN**, the
original Transformer, Vaswani et al., 2017, section 3.1) or inside each residual branch
(**Pre-LN**, GPT-2, Llama; Xiong et al., 2020). Xiong et al. (2020, theorem 1 and figure 3)
show that at initialisation the gradients of a Post-LN stack are largest next to the output,
while those of a Pre-LN stack are about the same in every layer and shrink as the stack gets
deeper. This module lets the reader see it on the library's own models:

* :func:`gradient_norms_at_init` measures, for a list of depths, the L2 norm of the loss
  gradient with respect to each layer's parameters at initialisation, for both placements. The
  numbers are those of :func:`attnbook.experiments.norm_placement_run` (its
  ``grad_norm_init``): a :class:`attnbook.models.DecoderOnlyModel` on the copy task, the same
  seed, the same first batch.
* :func:`norm_placement_figure` draws them (plotly): the per-layer norms at one depth, and the
  last layer's norm against the depth.
* :func:`norm_placement_explorer` wraps the two in an
  :class:`~attnbook.explorers.base.Explorer` (controls: depth, placement), live in JupyterLab
  and precomputed in the HTML book.

The gradients are computed once, when the explorer is made; moving a control only looks them
up, so the live and the static explorer draw the same numbers. Also importable from
:mod:`attnbook.widgets_block`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..checks import check_choice, check_increasing
from ..viz import BLUE, EMPTY_TEMPLATE, FONT, GREY, ORANGE, axis_style
from .base import Control, Explorer

__all__ = [
    "DEPTH_VALUES",
    "PLACEMENTS",
    "ARMS",
    "gradient_norms_at_init",
    "norm_placement_figure",
    "norm_placement_explorer",
]

#: Depths (number of layers) offered by the explorer's slider.
DEPTH_VALUES = (2, 4, 6, 8, 12, 16, 24, 32, 48)
#: Options of the placement control, in display order.
PLACEMENTS = ("both", "Post-LN", "Pre-LN")
#: The two arms in trace order, each a pair (label, key of ``NormPlacementResult.grad_norm_init``).
ARMS = (("Post-LN", "post_ln"), ("Pre-LN", "pre_ln"))

_COLORS = {"Post-LN": ORANGE, "Pre-LN": BLUE}


def gradient_norms_at_init(
    depth_values: Sequence[int] = DEPTH_VALUES, *, d_model: int = 64, n_heads: int = 4,
    d_ff: int = 256, n: int = 8, vocab: int = 16, batch_size: int = 16, seed: int = 0,
) -> dict:
    """Per-layer gradient norms at initialisation of Post-LN and Pre-LN stacks of several depths.

    For each depth ``L`` this calls :func:`attnbook.experiments.norm_placement_run` with
    ``n_layers=L`` and one training step (the norms are measured before any update) and keeps its
    ``grad_norm_init``: for layer ``l`` (0 = next to the embedding), the L2 norm of the gradient of
    the copy-task loss on the first batch with respect to all of the layer's parameters
    (attention, feed-forward network and norms). The defaults are the run's own, so the 12-layer
    entry equals the chapter's training run at initialisation.

    Args:
        depth_values: strictly increasing depths, integers in [1, 96].
        d_model: model width of every layer.
        n_heads: attention heads of every layer.
        d_ff: hidden width of every feed-forward network.
        n: tokens to copy in the copy task.
        vocab: data vocabulary of the copy task.
        batch_size: sequences in the batch the gradient is taken on.
        seed: weights ``torch.manual_seed(seed)`` and the batch's generator (as the run).

    Returns:
        ``{L: {"post_ln": float64 (L,), "pre_ln": float64 (L,)}}`` for every ``L`` in
        ``depth_values``; the norms are dimensionless (gradient of a loss in nats).

    Raises:
        TypeError: if ``depth_values`` is not a sequence of integers.
        ValueError: if ``depth_values`` is empty, not strictly increasing or outside [1, 96],
            or (from the run) a size is < 1.

    Source: Xiong et al., "On Layer Normalization in the Transformer Architecture" (ICML 2020),
    theorem 1 and figure 3.
    """
    from ..experiments import norm_placement_run

    depths = check_increasing(depth_values, "depth_values", minimum=1, maximum=96)
    out = {}
    for L in depths:
        r = norm_placement_run(n_layers=L, d_model=d_model, n_heads=n_heads, d_ff=d_ff, n=n,
                               vocab=vocab, steps=1, batch_size=batch_size, eval_size=1,
                               seed=seed)
        out[L] = {key: np.asarray(r.grad_norm_init[key], dtype=np.float64) for _, key in ARMS}
    return out


def norm_placement_figure(depth: int, placement: str, grads: dict, *, height: int = 480):
    """Figure of the norm-placement explorer, drawn from precomputed gradient norms.

    Left panel: the gradient norm of every layer (1 = next to the embedding, ``depth`` = next to
    the output) of the ``depth``-layer stacks. Right panel: the last layer's gradient norm against
    the depth, over every depth in ``grads``, with the current depth marked. ``placement`` shows
    one arm or both; a hidden arm keeps its traces (``visible=False``) so that every setting has
    the same traces in the same order.

    Trace order: 0 Post-LN per layer, 1 Pre-LN per layer (``x`` the 1-based layer index, ``y``
    the norms), 2 Post-LN last layer against depth, 3 Pre-LN last layer against depth (``x`` the
    depths), 4 Post-LN current depth, 5 Pre-LN current depth (single markers). Traces 0 and 1
    carry ``meta = {"depth", "placement", "ratio_last_first"}``.

    Args:
        depth: number of layers, a key of ``grads``.
        placement: one of :data:`PLACEMENTS` (``"both"``, ``"Post-LN"``, ``"Pre-LN"``).
        grads: the dict of :func:`gradient_norms_at_init`.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``placement`` is not one of :data:`PLACEMENTS`, ``depth`` is not a key of
            ``grads``, or ``grads`` is not shaped as :func:`gradient_norms_at_init` returns
            (the message names the entry, e.g. ``grads[3]['pre_ln']``).
    """
    import plotly.graph_objects as go

    if not isinstance(grads, dict) or not grads:
        raise ValueError("grads must be the non-empty dict returned by gradient_norms_at_init")
    depths = check_increasing(sorted(grads), "the depths of grads", minimum=1, maximum=96)
    for L in depths:
        for _, key in ARMS:
            g = np.asarray(grads[L].get(key) if isinstance(grads[L], dict) else None)
            if g.shape != (L,) or not np.isfinite(g).all():
                raise ValueError(f"grads[{L}][{key!r}] must be a finite array of shape ({L},), "
                                 f"got shape {g.shape}")
    check_choice(placement, "placement", PLACEMENTS)
    check_choice(depth, "depth", depths)
    depth = int(depth)
    shown = {label: placement in ("both", label) for label, _ in ARMS}
    ymax = 1.08 * max(float(np.max(grads[L][key])) for L in depths for _, key in ARMS)
    per_layer, vs_depth, current, notes = [], [], [], []
    for label, key in ARMS:
        g = grads[depth][key]  # (depth,)
        last = np.array([grads[L][key][-1] for L in depths])  # (n_depths,)
        ratio = float(g[-1] / g[0])
        color = _COLORS[label]
        per_layer.append(go.Scatter(
            x=np.arange(1, depth + 1), y=g, mode="lines+markers", name=label,
            line=dict(color=color, width=2.5), marker=dict(size=7, color=color),
            visible=shown[label], legendgroup=label, xaxis="x", yaxis="y",
            meta=dict(depth=depth, placement=label, ratio_last_first=ratio),
            hovertemplate=f"{label}, layer %{{x}} of {depth}: gradient norm %{{y:.3f}}"
                          "<extra></extra>",
        ))
        vs_depth.append(go.Scatter(
            x=np.array(depths), y=last, mode="lines+markers", name=f"{label}, last layer",
            line=dict(color=color, width=2, dash="dot"), marker=dict(size=6, color=color),
            visible=shown[label], legendgroup=label, showlegend=False, xaxis="x2", yaxis="y2",
            hovertemplate=f"{label}, %{{x}} layers: last layer's gradient norm %{{y:.3f}}"
                          "<extra></extra>",
        ))
        current.append(go.Scatter(
            x=[depth], y=[g[-1]], mode="markers", name=f"{label}, {depth} layers",
            marker=dict(size=14, color=color, symbol="circle-open", line=dict(width=3)),
            visible=shown[label], legendgroup=label, showlegend=False, xaxis="x2", yaxis="y2",
            hoverinfo="skip",
        ))
        if shown[label]:
            notes.append(f"{label}: last / first layer = {ratio:.2f}")
    annotations = [
        dict(text=f"Gradient norm of each layer, {depth} layers", x=0.22, y=1.0,
             xref="paper", yref="paper", xanchor="center", yanchor="bottom", showarrow=False,
             font=dict(size=14)),
        dict(text="Last layer's gradient norm against depth", x=0.79, y=1.0, xref="paper",
             yref="paper", xanchor="center", yanchor="bottom", showarrow=False,
             font=dict(size=14)),
        dict(text="   ·   ".join(notes), x=0.5, y=-0.26, xref="paper", yref="paper",
             xanchor="center", yanchor="top", showarrow=False, font=dict(color=GREY)),
    ]
    layout = go.Layout(
        template=EMPTY_TEMPLATE, font=FONT, paper_bgcolor="white", plot_bgcolor="white",
        height=height,
        title=dict(text="Gradients at initialisation: Post-LN vs Pre-LN", x=0.5,
                   xanchor="center", y=0.98, yanchor="top"),
        margin=dict(l=70, r=20, t=110, b=110),
        xaxis=axis_style(domain=[0.0, 0.44], title=dict(text="layer (1 = next to the embedding)"),
                         anchor="y", range=[0.5, depth + 0.5],
                         dtick=max(1, int(math.ceil(depth / 12)))),
        yaxis=axis_style(title=dict(text="gradient norm of the layer"), anchor="x",
                         range=[0, ymax]),
        xaxis2=axis_style(domain=[0.56, 1.0], title=dict(text="number of layers"), anchor="y2",
                          type="log", tickvals=list(depths), ticktext=[str(L) for L in depths]),
        yaxis2=axis_style(anchor="x2", range=[0, ymax]),
        annotations=annotations,
        legend=dict(orientation="h", x=0.5, y=1.09, xanchor="center", yanchor="bottom"),
        showlegend=True,
    )
    return go.Figure(data=per_layer + vs_depth + current, layout=layout)


def norm_placement_explorer(
    depth: int = 12, placement: str = "both", *, depth_values: Sequence[int] = DEPTH_VALUES,
    d_model: int = 64, n_heads: int = 4, d_ff: int = 256, n: int = 8, vocab: int = 16,
    batch_size: int = 16, seed: int = 0, grads: dict | None = None,
) -> Explorer:
    """The depth and norm-placement explorer (chapter 9).

    Controls: ``depth`` (a slider over ``depth_values``) and ``placement`` (``"both"``,
    ``"Post-LN"``, ``"Pre-LN"``). The figure is :func:`norm_placement_figure` of the gradient
    norms at initialisation that :func:`gradient_norms_at_init` measures once, when the explorer
    is made (about 5 s for the default depths on one CPU core).

    Args:
        depth: initial depth, one of ``depth_values``.
        placement: initial placement, one of :data:`PLACEMENTS`.
        depth_values: the slider's stops, strictly increasing integers in [1, 96].
        d_model: as :func:`gradient_norms_at_init`.
        n_heads: as :func:`gradient_norms_at_init`.
        d_ff: as :func:`gradient_norms_at_init`.
        n: as :func:`gradient_norms_at_init`.
        vocab: as :func:`gradient_norms_at_init`.
        batch_size: as :func:`gradient_norms_at_init`.
        seed: as :func:`gradient_norms_at_init`.
        grads: already measured norms (the dict of :func:`gradient_norms_at_init` for exactly
            ``depth_values``), to skip the measurement.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: if ``depth_values`` is not a sequence of integers, or ``grads`` is neither
            ``None`` nor a dict.
        ValueError: naming the argument, if ``depth`` or ``placement`` is not one of its
            options, ``depth_values`` is empty, out of range or not increasing, or ``grads``
            does not cover exactly ``depth_values`` or is not shaped as
            :func:`gradient_norms_at_init` returns.
    """
    depths = check_increasing(depth_values, "depth_values", minimum=1, maximum=96)
    check_choice(placement, "placement", PLACEMENTS)
    check_choice(depth, "depth", depths)
    if grads is None:
        grads = gradient_norms_at_init(depths, d_model=d_model, n_heads=n_heads, d_ff=d_ff, n=n,
                                       vocab=vocab, batch_size=batch_size, seed=seed)
    elif not isinstance(grads, dict):
        raise TypeError(
            f"grads must be a dict (depth -> norms, as gradient_norms_at_init returns) or "
            f"None, got {type(grads).__name__}")
    elif tuple(sorted(grads)) != depths:
        raise ValueError(
            f"grads covers depths {tuple(sorted(grads))} but depth_values is {depths}")

    def render(depth, placement):
        return norm_placement_figure(depth, placement, grads)

    controls = [
        Control("depth", "layers", "slider", depths, int(depth), plain_label="layers"),
        Control("placement", "norm placement", "select", PLACEMENTS, placement,
                plain_label="norm placement"),
    ]
    return Explorer(controls, render, title="norm placement explorer")
