"""The alignment explorer (chapter 5): cross-attention as a tiny encoder-decoder learns it.

:func:`attnbook.experiments.cross_attention_run` trains an encoder-decoder to reverse a
sequence; with ``snapshot_steps`` it records the decoder's cross-attention on one held-out
example, the held-out weight on the mirrored source position ``S - 1 - i`` and the held-out
accuracy, before training and after chosen numbers of updates (:data:`SNAPSHOT_STEPS` by
default).
:func:`alignment_data` picks one recorded step and one head, :func:`draw_alignment` draws it
with every label made in the reader's language (a heatmap of target position against source
position, the mirrored positions marked), and :func:`alignment_explorer` lets the reader move
through training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fonts, i18n, viz
from ..checks import (
    as_array,
    as_float_array,
    check_finite,
    check_instance,
    check_int,
    check_int_array,
    check_real,
)
from ..viz import COLUMN_PX
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "SNAPSHOT_STEPS",
    "AlignmentData",
    "alignment_data",
    "draw_alignment",
    "alignment_explorer",
]

#: When the explorer's default run records the map, in updates. Every 5 updates up to 60
#: (where the chapter's run, seed 0, learns its alignment), then every 100 up to 400.
SNAPSHOT_STEPS = (*range(0, 61, 5), 100, 200, 300, 400)


@dataclass(frozen=True)
class AlignmentData:
    """One recorded step and one head of a :func:`attnbook.experiments.cross_attention_run`.

    Attributes:
        step: the number of updates done when the snapshot was taken (0: untrained).
        steps: the run's number of updates.
        layer, head: the decoder layer and the head shown, 0-based.
        weights: float64 ``(n, n)``: entry ``[i, j]`` is the weight target position ``i``
            gives source position ``j`` on the example.
        source, target: int64 ``(n,)``: the example's source and target tokens.
        mirror_mass: this head's weight on the mirrored source position ``n - 1 - i`` at this
            step, averaged over target positions and the held-out set.
        uniform: ``1 / n``, what uniform attention gives the mirrored position.
        accuracy: the model's held-out accuracy at this step (all heads together).

    The fields are converted on construction: the indices to ``int``, ``source`` and
    ``target`` to integer arrays, ``weights`` to float64, the three shares to ``float``.

    Raises:
        TypeError: if an index is not an integer, ``source`` or ``target`` does not hold
            integers, ``weights`` is not a real numeric array, or a share (``mirror_mass``,
            ``uniform``, ``accuracy``) is not a real number (``None`` included).
        ValueError: if an index is negative or ``step > steps``; if ``source`` is not
            one-dimensional, or ``target`` or ``weights`` do not match it: ``target`` must
            have the shape of ``source``, ``weights`` be ``(n, n)`` for the ``n`` tokens of
            ``source`` (the message names the field and the shapes); if a token is negative,
            a weight not finite or outside ``[0, 1]``, or a share not finite or outside
            ``[0, 1]``.
    """

    step: int
    steps: int
    layer: int
    head: int
    weights: np.ndarray
    source: np.ndarray
    target: np.ndarray
    mirror_mass: float
    uniform: float
    accuracy: float

    def __post_init__(self):
        def put(field, value):  # the dataclass is frozen
            object.__setattr__(self, field, value)

        put("steps", check_int(self.steps, "AlignmentData.steps", 0))
        put("step", check_int(self.step, "AlignmentData.step", 0, self.steps))
        put("layer", check_int(self.layer, "AlignmentData.layer", 0))
        put("head", check_int(self.head, "AlignmentData.head", 0))
        for field in ("source", "target"):
            name = f"AlignmentData.{field}"
            put(field, check_int_array(as_array(getattr(self, field), name), name))
        source = self.source.shape
        if len(source) != 1 or source[0] < 1:
            raise ValueError(
                f"AlignmentData: source must be one-dimensional with at least one token, "
                f"got shape {source}"
            )
        n = source[0]
        put("weights", as_float_array(self.weights, "AlignmentData.weights").astype(np.float64))
        for field, want in (("target", (n,)), ("weights", (n, n))):
            got = getattr(self, field).shape
            if got != want:
                raise ValueError(
                    f"AlignmentData: {field} has shape {got} but source has {n} tokens, so "
                    f"{field} must be {want}"
                )
        check_finite(self.weights, "AlignmentData.weights")
        if self.weights.min() < 0 or self.weights.max() > 1:
            raise ValueError(
                f"AlignmentData.weights must lie in [0, 1] (attention weights), got values "
                f"from {self.weights.min():g} to {self.weights.max():g}"
            )
        for field in ("mirror_mass", "uniform", "accuracy"):
            value = getattr(self, field)
            put(field, check_real(value, f"AlignmentData.{field}", minimum=0, maximum=1))


def alignment_data(result, step_index: int, head: int, *, layer: int = 0) -> AlignmentData:
    """Pick recorded step ``step_index`` and head ``head`` (of layer ``layer``) of ``result``.

    Args:
        result: an :class:`attnbook.experiments.CrossAttentionResult` of a run with
            ``snapshot_steps`` (its ``snapshots`` recorded).
        step_index: ``0 <= step_index < len(result.snapshot_steps)`` (0: before training).
        head: ``0 <= head < result.n_heads``.
        layer: ``0 <= layer < result.n_layers``.

    Returns:
        :class:`AlignmentData`.

    Raises:
        TypeError: if ``result`` is not a ``CrossAttentionResult`` or an index not an integer.
        ValueError: if ``result`` has no snapshots (or none of their accuracies) or an index
            is out of range.
    """
    from ..experiments import CrossAttentionResult

    check_instance(result, CrossAttentionResult, "result", "cross_attention_run")
    if any(x is None for x in (result.snapshots, result.snapshot_steps, result.snapshot_accuracy)):
        raise ValueError(
            "result has no snapshots: run cross_attention_run with "
            "snapshot_steps=... (e.g. range(0, 401, 25)) to record the map "
            "during training"
        )
    step_index = check_int(step_index, "step_index", 0, len(result.snapshot_steps) - 1)
    head = check_int(head, "head", 0, result.n_heads - 1)
    layer = check_int(layer, "layer", 0, result.n_layers - 1)
    return AlignmentData(
        step=int(result.snapshot_steps[step_index]),
        steps=int(result.steps),
        layer=layer,
        head=head,
        weights=result.snapshots[step_index, layer, head],
        source=result.source,
        target=result.target,
        mirror_mass=float(result.snapshot_mirror_mass[step_index, layer, head]),
        uniform=1.0 / result.n,
        accuracy=float(result.snapshot_accuracy[step_index]),
    )


def draw_alignment(
    data: AlignmentData, *, language: str | None = None, height: int = 480, width: int = COLUMN_PX
):
    """Draw one step and head of the alignment explorer for ``width`` px, labels in ``language``.

    A heatmap of the head's cross-attention on the example: one row per target position
    (top to bottom, its token after the colon), one column per source position (its token
    below), each weight written in its cell where it fits (no colour bar: the cells say it).
    Open circles mark the mirrored source position ``n - 1 - i`` of each row, the one a
    reversal copies. The title (the caption above the plot) gives the step, the held-out
    accuracy at that step and the head's held-out weight on the mirrored position.

    Trace order: 0 the weights heatmap (``z`` is ``(n, n)``), 1 the mirrored positions'
    markers (``n`` points).

    Args:
        data: from :func:`alignment_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px, >= 10 (less on a narrow figure, where the square map
            would leave room empty).
        width: the width in px the figure is drawn at.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not an :class:`AlignmentData`, or ``height`` or ``width``
            not an integer.
        ValueError: if ``height`` < 10, ``width`` or ``height`` leaves no room for the
            panel under its title and margins (:func:`attnbook.explorers.layout.panel_grid`;
            about 175 px of height at the default width), or ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, AlignmentData, "data", "alignment_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    width = check_int(width, "width", 1)
    n = len(data.source)
    cols = [f"{j}<br>{t}" for j, t in enumerate(data.source)]  # position over token
    rows = [f"{i}: {t}" for i, t in enumerate(data.target)]
    mirror = n - 1 - np.arange(n)
    hover = [
        [
            _(
                "output {i} ({out}), source {j} ({src}): weight {weight}",
                i=i,
                out=data.target[i],
                j=j,
                src=data.source[j],
                weight=f"{data.weights[i, j]:.2f}",
            )
            for j in range(n)
        ]
        for i in range(n)
    ]

    grid = panel_grid(width, [""], height=height, left=70, right=20, bottom=40, axis_px=80)
    fig, (cell,) = grid.figure, grid.cells
    margin = fig.layout.margin
    plot_w = width - margin.l - margin.r
    plot_h = min(height - margin.t - margin.b, plot_w)  # a narrow figure: no room left empty
    fig.update_layout(height=plot_h + margin.t + margin.b)
    cell_px = plot_h / n  # about: square cells, automargin takes a little more
    size = next((s for s in (11, 9) if fonts.text_width("0.00", s) + 6 <= cell_px), None)
    fig.add_trace(
        go.Heatmap(
            z=data.weights,
            x=cols,
            y=rows,
            zmin=0,
            zmax=1,
            colorscale="Blues",
            xgap=1,
            ygap=1,
            showscale=False,
            text=hover,
            hovertemplate="%{text}<extra></extra>",
            texttemplate="%{z:.2f}" if size else "",
            textfont=dict(size=size or 9),
            name=_("weights"),
        ),
        **cell,
    )
    fig.add_trace(
        go.Scatter(
            x=[cols[j] for j in mirror],
            y=rows,
            mode="markers",
            name=_("mirrored source position S − 1 − i"),
            marker=dict(
                symbol="circle-open",
                size=max(8, min(26, int(cell_px * 0.8))),
                color=viz.ORANGE,
                line=dict(width=2),
            ),
            hoverinfo="skip",
            showlegend=True,
        ),
        **cell,
    )
    # Square cells: the y axis keeps the x axis' scale, and both shrink their domain (not their
    # range) to fit, so that the axis lines end where the matrix ends.
    fig.update_xaxes(
        title_text=_("source position (token below)"),
        tickangle=0,
        showgrid=False,
        constrain="domain",
        **cell,
    )
    fig.update_yaxes(
        title_text=_("output position: token"),
        autorange="reversed",
        scaleanchor="x",
        scaleratio=1,
        constrain="domain",
        showgrid=False,
        **cell,
    )
    fig.update_layout(showlegend=True)
    title = _(
        "Step {step} of {steps}: held-out accuracy {accuracy}; head {h} puts {mass} of its "
        "weight on the mirrored source position (held-out mean; uniform attention gives "
        "{uniform})",
        step=data.step,
        steps=data.steps,
        accuracy=f"{data.accuracy:.3f}",
        h=data.head + 1,
        mass=f"{data.mirror_mass:.3f}",
        uniform=f"{data.uniform:.3f}",
    )
    caption_title(fig, title)
    return fig


def alignment_explorer(
    result=None, step_index: int = 0, head: int = 0, *, layer: int = 0
) -> Explorer:
    """The alignment explorer (chapter 5): a cross-attention map at each recorded step.

    Controls: ``step_index`` (a slider over the recorded steps, labelled with the number of
    updates done) and ``head``. Each setting is :func:`alignment_data` of ``result``, drawn
    by :func:`draw_alignment`. The static page precomputes every setting: ``n_snapshots *
    n_heads`` figures.

    Args:
        result: an :class:`attnbook.experiments.CrossAttentionResult` with snapshots;
            ``None`` runs the chapter's :func:`attnbook.experiments.cross_attention_run`
            (``n=8, vocab=16, steps=400, seed=0``, snapshots at :data:`SNAPSHOT_STEPS`:
            17 of them, about 10 s on one CPU thread).
        step_index: initial recorded step, 0-based (0: the untrained model).
        head: initial head, 0-based (shown 1-based).
        layer: the decoder layer shown, 0-based.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError, ValueError: as :func:`alignment_data`.
    """
    from ..experiments import cross_attention_run

    if result is None:
        result = cross_attention_run(
            n=8, vocab=16, steps=400, seed=0, snapshot_steps=SNAPSHOT_STEPS
        )
    alignment_data(result, step_index, head, layer=layer)  # checks the arguments
    steps = tuple(int(s) for s in result.snapshot_steps)
    heads = tuple(range(result.n_heads))

    def compute(step_index, head):
        return alignment_data(result, step_index, head, layer=layer)

    controls = [
        Control(
            "step_index",
            "training step",
            "slider",
            tuple(range(len(steps))),
            step_index,
            labels=tuple(str(s) for s in steps),
        ),
        Control(
            "head",
            "head",
            "select",
            heads,
            head,
            labels=lambda _: [_("head {h}", h=h + 1) for h in heads],
        ),
    ]
    return Explorer(controls, title="alignment explorer", compute=compute, draw=draw_alignment)
