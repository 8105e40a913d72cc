"""The heads explorer (chapter 7): one wide head against several narrow ones, trained.

:func:`attnbook.experiments.heads_run` trains one attention layer with 1, 2 or 3 heads of the
same total width to output, at its last token, the contents of three marked tokens
(:func:`attnbook.experiments.multi_source_batch`). :func:`heads_data` picks one arm and one
held-out sequence of such a run, and :func:`draw_heads` draws it with every label made in the
reader's language: each head's attention weights from the last token (left) and the output
against the target (right). :func:`heads_explorer` lets the reader switch between them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import i18n, viz
from ..checks import check_choice, check_instance, check_int
from ..viz import COLUMN_PX
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = ["HeadsData", "heads_data", "draw_heads", "heads_explorer"]


@dataclass(frozen=True)
class HeadsData:
    """One arm and one held-out sequence of a :func:`attnbook.experiments.heads_run` result.

    Attributes:
        n_heads: ``H``; ``head_dim``: ``d_model // H``.
        example: index of the held-out sequence.
        weights: float64 ``(H, L)``, each head's attention weights from the last token.
        types: int64 ``(L,)``: 0 filler, 1 the query, ``k + 2`` source ``k``.
        prediction, target: float64 ``(K, m)`` the layer's output and the sources' contents.
        unexplained: the arm's held-out fraction of variance unexplained (first seed, the
            model shown).
        bound: ``1 - min(H, K) / K``, the least that weights ignoring the contents leave.
    """

    n_heads: int
    head_dim: int
    example: int
    weights: np.ndarray
    types: np.ndarray
    prediction: np.ndarray
    target: np.ndarray
    unexplained: float
    bound: float


def heads_data(result, n_heads: int, example: int = 0) -> HeadsData:
    """Pick the arm with ``n_heads`` heads and held-out sequence ``example`` of ``result``.

    Args:
        result: an :class:`attnbook.experiments.HeadsResult`.
        n_heads: one of ``result.n_heads``.
        example: ``0 <= example < len(result.types)``.

    Returns:
        :class:`HeadsData`.

    Raises:
        TypeError: if ``result`` is not a ``HeadsResult`` or ``example`` not an integer.
        ValueError: if ``n_heads`` is not one of the result's arms or ``example`` is out of
            range.
    """
    from ..experiments import HeadsResult

    check_instance(result, HeadsResult, "result", "heads_run")
    arms = [int(h) for h in result.n_heads]
    check_choice(n_heads, "n_heads", arms)
    example = check_int(example, "example", 0, len(result.types) - 1)
    a = arms.index(n_heads)
    return HeadsData(
        int(n_heads),
        result.d_model // int(n_heads),
        example,
        result.weights[a][example],
        result.types[example],
        result.prediction[a, example],
        result.target[example],
        float(result.unexplained[a, 0]),
        float(result.bound[a]),
    )


def _source_name(k: int) -> str:
    return chr(ord("A") + k)


def draw_heads(
    data: HeadsData, *, language: str | None = None, height: int = 400, width: int = COLUMN_PX
):
    """Draw one arm and sequence of the heads explorer for ``width`` px, labels in ``language``.

    Left (top on a phone): a heatmap of each head's attention weights from the last token (the
    query, "Q") over the sequence's tokens, each weight written in its cell where it fits (no
    colour bar: the cells say it); the sources are labelled A, B, C, fillers "·".
    Right (below): the output (bars) against the target (diamonds), the ``m`` numbers of each
    source side by side. The title (the caption above the plot) gives the arm's held-out
    unexplained variance.

    Trace order: 0 the weights heatmap (``z`` is ``(H, L)``), 1 the output bars, 2 the target
    markers (``y`` is the ``K * m`` numbers, source by source).

    Args:
        data: from :func:`heads_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, >= 10.
        width: the width in px the figure is drawn at (stacked below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`HeadsData`, or ``height`` or ``width`` not an
            integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, HeadsData, "data", "heads_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    width = check_int(width, "width", 1)
    H, L = data.weights.shape
    K, m = data.target.shape
    names = ["·", _("Q")] + [_source_name(k) for k in range(K)]
    ticks = [f"{names[t]}<br>{j}" for j, t in enumerate(data.types)]  # type over position
    heads = [_("head {h}", h=h + 1) for h in range(H)]
    hover = [
        [
            _(
                "head {h}, token {j} ({name}): weight {weight}",
                h=h + 1,
                j=j,
                name=names[t],
                weight=f"{data.weights[h, j]:.2f}",
            )
            for j, t in enumerate(data.types)
        ]
        for h in range(H)
    ]
    numbers = [f"{_source_name(k)}{i + 1}" for k in range(K) for i in range(m)]

    grid = panel_grid(
        width,
        [_("Each head's weights from the query Q"), _("Output (bars) and target (◆)")],
        column_widths=[1.0, 1.0],
        height=height,
        spacing_px=90,
        left=70,
        right=20,
        bottom=40,
        axis_px=90,
    )
    fig, (left, right), stacked = grid.figure, grid.cells, grid.stacked
    plot_w = width - fig.layout.margin.l - fig.layout.margin.r
    cell_px = plot_w / (1 if stacked else 2) / L  # about: the panels share the plot width
    fig.add_trace(
        go.Heatmap(
            z=data.weights,
            x=ticks,
            y=heads,
            zmin=0,
            zmax=1,
            colorscale="Blues",
            xgap=1,
            ygap=1,
            showscale=False,
            text=hover,
            hovertemplate="%{text}<extra></extra>",
            texttemplate="%{z:.2f}" if cell_px >= 34 else "",
            textfont=dict(size=11),
            name=_("weights"),
        ),
        **left,
    )
    fig.update_yaxes(autorange="reversed", **left)
    fig.update_xaxes(title_text=_("token (type, position)"), tickangle=0, **left)
    palette = (viz.BLUE, viz.ORANGE, viz.GREEN)
    colors = [palette[k % len(palette)] for k in range(K) for _i in range(m)]
    fig.add_trace(
        go.Bar(
            x=numbers,
            y=data.prediction.reshape(-1),
            marker_color=colors,
            name=_("output"),
            hovertemplate="%{x}: " + _("output") + " %{y:.2f}<extra></extra>",
            showlegend=False,
        ),
        **right,
    )
    fig.add_trace(
        go.Scatter(
            x=numbers,
            y=data.target.reshape(-1),
            mode="markers",
            name=_("target"),
            marker=dict(symbol="diamond", size=9, color="black"),
            hovertemplate="%{x}: " + _("target") + " %{y:.2f}<extra></extra>",
            showlegend=False,
        ),
        **right,
    )
    fig.update_xaxes(
        title_text=_("the sources' numbers"),
        tickangle=0,
        tickfont=dict(size=10 if plot_w / (1 if stacked else 2) / (K * m) >= 18 else 8),
        **right,
    )
    fig.update_yaxes(title_text=_("value"), **right)
    title = _.ngettext(
        "{n} head of {d}: the output misses {pct} % of the targets' variance",
        "{n} heads of {d}: the output misses {pct} % of the targets' variance",
        H,
        d=data.head_dim,
        pct=f"{100 * data.unexplained:.0f}",
    )
    caption_title(fig, title)
    return fig


def heads_explorer(result=None, n_heads: int | None = None, example: int = 0) -> Explorer:
    """The heads explorer (chapter 7): what one wide head and several narrow ones attend to.

    Controls: ``n_heads`` (the arms of ``result``) and ``example`` (its held-out sequences,
    shown 1-based). Each setting is :func:`heads_data` of ``result``, drawn by
    :func:`draw_heads`.

    Args:
        result: an :class:`attnbook.experiments.HeadsResult`; ``None`` runs
            :func:`attnbook.experiments.heads_run` with its defaults (about a minute on one
            CPU thread).
        n_heads: initial number of heads, one of ``result.n_heads`` (default: the first).
        example: initial held-out sequence, 0-based.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError, ValueError: as :func:`heads_data`.
    """
    from ..experiments import heads_run

    if result is None:
        result = heads_run()
    arms = tuple(int(h) for h in result.n_heads)
    n_heads = arms[0] if n_heads is None else n_heads
    heads_data(result, n_heads, example)  # checks the arguments
    n_examples = len(result.types)

    def compute(n_heads, example):
        return heads_data(result, n_heads, example)

    controls = [
        Control(
            "n_heads",
            "heads",
            "select",
            arms,
            n_heads,
            labels=lambda _: [
                _.ngettext("{n} head of {d}", "{n} heads of {d}", h, d=result.d_model // h)
                for h in arms
            ],
        ),
        Control(
            "example",
            "sequence",
            "slider",
            tuple(range(n_examples)),
            example,
            labels=tuple(str(e + 1) for e in range(n_examples)),
        ),
    ]
    return Explorer(controls, title="heads explorer", compute=compute, draw=draw_heads)
