"""The mask explorer (chapter 6): a keep-mask and the attention weights it produces.

Two steps, as every explorer: :func:`mask_data` computes a setting with the library (the
keep-mask of :func:`attnbook.masks.keep_mask_by_name`, the weights of
:func:`attnbook.attention.masked_softmax`), and :func:`draw_mask` draws it with every label
made in the reader's language. :func:`mask_figure` does both in one call.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass

import numpy as np

from .. import fonts, i18n, viz
from ..attention import masked_softmax
from ..checks import as_float_array, check_choice, check_instance, check_int, check_seed
from ..masks import MASK_TYPES, PAD_SIDES, keep_mask_by_name
from ..viz import COLUMN_PX
from .base import MAX_GRID, Control, Explorer
from .layout import AXIS_PX, STACK_BELOW_PX, caption_title, panel_grid

__all__ = ["MaskData", "mask_scores", "mask_data", "draw_mask", "mask_figure", "mask_explorer"]


def mask_scores(seq_len: int = 8, seed: int = 0) -> np.ndarray:
    """The mask explorer's fixed raw scores: ``default_rng(seed).standard_normal((L, L))``.

    Args:
        seq_len: ``L``, number of tokens, >= 1.
        seed: seed of ``numpy.random.default_rng``.

    Returns:
        float64 ``(seq_len, seq_len)`` scores (query rows, key columns).

    Raises:
        TypeError: if ``seq_len`` or ``seed`` is not an integer.
        ValueError: if ``seq_len`` < 1 or ``seed`` < 0.
    """
    seq_len = check_int(seq_len, "seq_len", 1)
    rng = np.random.default_rng(check_seed(seed))
    return rng.standard_normal((seq_len, seq_len))  # (L, S)


@dataclass(frozen=True)
class MaskData:
    """One setting of the mask explorer, computed (what :func:`draw_mask` draws).

    Attributes:
        mask_type, window, n_pad, pad_side: the setting (see :func:`mask_data`).
        keep: boolean ``(L, S)`` keep-mask (``True`` = may attend).
        weights: float64 ``(L, S)`` attention weights; a row with no visible key is all 0.
        is_pad: boolean ``(S,)``, which keys are padding.
    """

    mask_type: str
    window: int
    n_pad: int
    pad_side: str
    keep: np.ndarray
    weights: np.ndarray
    is_pad: np.ndarray

    @property
    def empty(self) -> np.ndarray:
        """Boolean ``(L,)``: the queries that see no key."""
        return ~self.keep.any(axis=-1)


def mask_data(
    mask_type: str = "causal",
    window: int = 3,
    n_pad: int = 2,
    *,
    pad_side: str = "right",
    seq_len: int = 8,
    seed: int = 0,
    scores=None,
) -> MaskData:
    """Compute one setting of the mask explorer.

    Args:
        mask_type: one of :data:`attnbook.masks.MASK_TYPES`.
        window: sliding-window size, 1..seq_len (used by ``"sliding window"``).
        n_pad: padding tokens, 0..seq_len (used by the types with padding).
        pad_side: ``"right"`` (padding at the end) or ``"left"`` (at the start).
        seq_len: number of tokens ``L`` (queries = keys).
        seed: seed of :func:`mask_scores` when ``scores`` is not given.
        scores: optional float ``(seq_len, seq_len)`` raw scores, used as they are (no scaling).

    Returns:
        :class:`MaskData`: the keep-mask of :func:`attnbook.masks.keep_mask_by_name` and
        ``masked_softmax(scores, keep)``.

    Raises:
        TypeError: if a size or ``seed`` is not an integer, or ``scores`` is not a real numeric
            array.
        ValueError: for an unknown ``mask_type`` or ``pad_side``, an argument out of range, or
            ``scores`` of the wrong shape.
    """
    keep = keep_mask_by_name(
        mask_type, seq_len, window=window, n_pad=n_pad, pad_side=pad_side
    )  # (L, S)
    L = keep.shape[0]
    scores = mask_scores(L, seed) if scores is None else as_float_array(scores, "scores")
    if scores.shape != (L, L):
        raise ValueError(
            f"scores must have shape (seq_len, seq_len) = {(L, L)}, got {scores.shape}"
        )
    uses_pad = mask_type in ("padding", "causal + padding")
    j = np.arange(L)
    is_pad = uses_pad & ((j >= L - n_pad) if pad_side == "right" else (j < n_pad))  # (S,)
    return MaskData(
        mask_type,
        int(window),
        int(n_pad),
        pad_side,
        keep,
        masked_softmax(scores.astype(np.float64), keep),
        is_pad,
    )


#: Font size in px of the weights written in their cells, at most (smaller when cells are).
#: The longest sequence :func:`mask_explorer` can precompute: its controls span every mask type,
#: window (1..L), pad count (0..L) and pad side, at most ``MAX_GRID`` settings in all.
MAX_SEQ_LEN = max(
    n for n in range(2, 64) if len(MASK_TYPES) * len(PAD_SIDES) * n * (n + 1) <= MAX_GRID
)
CELL_FONT_PX = 14
#: Font size in px of the figure's title (shown as the caption above the plot).
TITLE_PX = 16
#: Room in px under a phone's lowest axis title for the horizontal colour bar and its ticks.
BAR_PX = 46
#: Smallest font size in px of a tick label or a cell value; below it labels are thinned out
#: (every k-th tick) and values left to the hover text.
MIN_FONT_PX = 9


def _tick_step(labels, room_px: float, size: int) -> int:
    """Show every k-th of ``labels`` so that each fits the ``room_px`` its k cells give it."""
    widest = max(fonts.text_width(line, size) for t in labels for line in t.split("<br>"))
    k = 1
    while k < len(labels) and widest + 4 > k * room_px:
        k += 1
    return k


def draw_mask(
    data: MaskData, *, language: str | None = None, height: int = 430, width: int = COLUMN_PX
):
    """Draw one setting of the mask explorer for ``width`` px, every label in ``language``.

    Left (top on a phone): the keep-mask (1 = may attend). Right (below): the weights, with a
    colour bar beside the panel (under it once the panels are stacked). A query with no visible
    key has all-zero weights (the book's convention); its hover text says so, and so does a
    second line of the title (the caption above the plot).

    Trace order: 0 the keep-mask heatmap (``z`` is 0/1), 1 the weights heatmap (``z`` is the
    ``(L, S)`` weights, rows = queries). Annotations: 0 and 1 the panels' titles.

    Args:
        data: from :func:`mask_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, >= 10 (plotly's least).
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`MaskData`, or ``height`` or ``width`` not an
            integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, MaskData, "data", "mask_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    width = check_int(width, "width", 1)
    keep, weights, is_pad, empty = data.keep, data.weights, data.is_pad, data.empty
    L = keep.shape[0]
    keys = [_("{j} pad", j=j) if is_pad[j] else str(j) for j in range(L)]
    key_ticks = [_("{j}<br>pad", j=j) if is_pad[j] else str(j) for j in range(L)]
    queries = [str(i) for i in range(L)]
    mask_text = [
        [
            _("query {i}, key {key}: may attend", i=i, key=keys[j])
            if keep[i, j]
            else _("query {i}, key {key}: hidden", i=i, key=keys[j])
            for j in range(L)
        ]
        for i in range(L)
    ]
    weight_text = [
        [
            _("query {i} sees no key: all its weights are 0", i=i)
            if empty[i]
            else _(
                "query {i}, key {key}: weight {weight}",
                i=i,
                key=keys[j],
                weight=f"{weights[i, j]:.3f}",
            )
            if keep[i, j]
            else _(
                "query {i}, key {key}: weight {weight} (hidden)",
                i=i,
                key=keys[j],
                weight=f"{weights[i, j]:.3f}",
            )
            for j in range(L)
        ]
        for i in range(L)
    ]

    # Side by side the colour bar takes the right margin; stacked it lies under the weights.
    # The weights panel is the wider: its cells hold numbers (issue 10: 14 px, legible).
    grid = panel_grid(
        width,
        [_("Keep-mask (1 = may attend)"), _("Weights = masked_softmax(scores, mask)")],
        column_widths=[0.8, 1.0],
        height=height,
        spacing_px=50,
        left=70,
        right=20 if width < STACK_BELOW_PX else 76,
        bottom=0 if width < STACK_BELOW_PX else 20,
        axis_px=AXIS_PX + (20 if is_pad.any() else 0),
    )  # "6<br>pad": two lines of ticks
    fig, (left, right), stacked = grid.figure, grid.cells, grid.stacked
    lay = fig.layout
    plot_w = width - lay.margin.l - lay.margin.r
    plot_h = lay.height - lay.margin.t - lay.margin.b
    (wx0, wx1), (wy0, wy1) = lay.xaxis2.domain, lay.yaxis2.domain
    # The room of one cell in px (the y tick labels may widen the left margin a little); a
    # value that does not fit with a gap is left to the hover text.
    cell_px = (wx1 - wx0) * plot_w / L - 1
    mask_px = (lay.xaxis.domain[1] - lay.xaxis.domain[0]) * plot_w / L - 1
    # At least 1 px (plotly refuses a smaller size): a value of fewer than MIN_FONT_PX is hidden.
    cell_font = max(1, min(CELL_FONT_PX, int((cell_px - 2) / fonts.text_width("0.00", 1))))
    mask_font = max(1, min(CELL_FONT_PX, int((mask_px - 2) / fonts.text_width("0", 1))))
    widest = max(fonts.text_width(line, 1) for t in key_ticks for line in t.split("<br>"))
    tick_size = max(MIN_FONT_PX, min(13, int((mask_px - 4) / widest)))
    step = _tick_step(key_ticks, mask_px, tick_size)  # every step-th key labelled
    row_px = (wy1 - wy0) * plot_h / L
    y_tick_size = max(MIN_FONT_PX, min(13, int(row_px * 0.8)))

    bar_title = _("weight")
    if stacked:  # horizontal, under the weights panel's axis title, its title on its right
        bar_px = (wx1 - wx0) * plot_w - (fonts.text_width(bar_title, 13) + 16)
        if bar_px < 20:  # plotly refuses a colour bar of length <= 0
            raise ValueError(
                f"width={width} px leaves the colour bar {bar_px:.0f} px beside "
                f"its title under the weights panel (at least 20 px)"
            )
        bar = dict(
            orientation="h",
            x=wx0,
            xanchor="left",
            y=0,
            yref="container",
            yanchor="bottom",
            ypad=8,
            thickness=12,
            title=dict(text=bar_title),
            len=wx1 - wx0 - (fonts.text_width(bar_title, 13) + 16) / plot_w,
        )
    else:  # beside the weights panel, as tall as it
        bar = dict(
            x=wx1 + 12 / plot_w,
            xanchor="left",
            y=(wy0 + wy1) / 2,
            yanchor="middle",
            len=wy1 - wy0,
            thickness=14,
            title=dict(text=bar_title, side="right"),
        )
    fig.add_trace(
        go.Heatmap(
            z=keep.astype(np.int8),
            x=keys,
            y=queries,
            zmin=0,
            zmax=1,
            showscale=False,
            xgap=1,
            ygap=1,
            colorscale=[[0, "#e6e6e6"], [0.5, "#e6e6e6"], [0.5, viz.BLUE], [1, viz.BLUE]],
            text=mask_text,
            texttemplate="%{z}" if mask_font >= MIN_FONT_PX else "",
            textfont=dict(size=mask_font),
            hovertemplate="%{text}<extra></extra>",
            name=_("keep-mask"),
        ),
        **left,
    )
    fig.add_trace(
        go.Heatmap(
            z=weights,
            x=keys,
            y=queries,
            zmin=0,
            zmax=1,
            colorscale="Blues",
            xgap=1,
            ygap=1,
            colorbar=bar,
            text=weight_text,
            texttemplate="%{z:.2f}" if cell_font >= MIN_FONT_PX else "",
            textfont=dict(size=cell_font),
            hovertemplate="%{text}<extra></extra>",
            name=_("weights"),
        ),
        **right,
    )
    if stacked:  # room under the lowest axis title for the colour bar and its tick labels
        fig.update_layout(height=lay.height + BAR_PX, margin=dict(b=lay.margin.b + BAR_PX))

    n = data.n_pad
    pad_text = (
        _.ngettext("{n} pad token at the end", "{n} pad tokens at the end", n)
        if data.pad_side == "right"
        else _.ngettext("{n} pad token at the start", "{n} pad tokens at the start", n)
    )
    detail = {
        "none": _("no mask"),
        "causal": _("causal"),
        "padding": _("padding ({pad})", pad=pad_text),
        "causal + padding": _("causal + padding ({pad})", pad=pad_text),
        "sliding window": _(
            "sliding window of {window} (the query itself included)", window=data.window
        ),
    }[data.mask_type]
    title = _.ngettext(
        "Mask: {detail}, {n} token", "Mask: {detail}, {n} tokens", L, detail=_html.escape(detail)
    )
    if empty.any():  # prose: a second line of the caption, not text in the plot
        rows = np.flatnonzero(empty)
        note = _.ngettext(
            "query {rows} sees no key: its weights are all 0",
            "queries {rows} see no key: their weights are all 0",
            len(rows),
            rows=", ".join(str(i) for i in rows),
        )
        title += f"<br><span style='color:{viz.ORANGE_TEXT}'>{_html.escape(note)}</span>"
    # The title becomes the caption above the plot (base.take_title).
    caption_title(fig, title, size=TITLE_PX)
    fig.update_layout(showlegend=False)
    shown = [t if j % step == 0 else "" for j, t in enumerate(key_ticks)]
    for cell in (left, right):
        fig.update_xaxes(
            title_text=_("key position j"),
            type="category",
            showgrid=False,
            tickmode="array",
            tickvals=keys,
            ticktext=shown,
            tickangle=0,
            tickfont=dict(size=tick_size),
            **cell,
        )
        fig.update_yaxes(
            type="category",
            autorange="reversed",
            showgrid=False,
            tickfont=dict(size=y_tick_size),
            **cell,
        )
    fig.update_yaxes(title_text=_("query position i"), **left)
    if stacked:  # one under the other, both panels show the queries
        fig.update_yaxes(title_text=_("query position i"), **right)
    return fig


def mask_figure(
    mask_type: str = "causal",
    window: int = 3,
    n_pad: int = 2,
    *,
    seq_len: int = 8,
    seed: int = 0,
    scores=None,
    height: int = 430,
    pad_side: str = "right",
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """The mask explorer's figure of one setting: :func:`draw_mask` of :func:`mask_data`.

    Args:
        mask_type: one of :data:`attnbook.masks.MASK_TYPES` (see :func:`mask_data`).
        window: sliding-window size, 1..seq_len.
        n_pad: padding tokens, 0..seq_len.
        seq_len: number of tokens.
        seed: seed of :func:`mask_scores` when ``scores`` is not given.
        scores: optional ``(seq_len, seq_len)`` raw scores.
        height: figure height in px, >= 10.
        pad_side: ``"right"`` or ``"left"``.
        language: see :func:`draw_mask`.
        width: the width in px the figure is drawn at (see :func:`draw_mask`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError, ValueError: as :func:`mask_data` and :func:`draw_mask`.
    """
    data = mask_data(
        mask_type, window, n_pad, pad_side=pad_side, seq_len=seq_len, seed=seed, scores=scores
    )
    return draw_mask(data, language=language, height=height, width=width)


def mask_explorer(
    mask_type: str = "causal + padding",
    window: int = 3,
    n_pad: int = 2,
    *,
    seq_len: int = 8,
    seed: int = 0,
    pad_side: str = "right",
) -> Explorer:
    """The mask explorer (chapter 6): a keep-mask and the attention weights it produces.

    Controls: ``mask_type`` (one of :data:`attnbook.masks.MASK_TYPES`: none / causal / padding
    / causal + padding / sliding window), ``window`` (sliding-window size, 1..seq_len),
    ``n_pad`` (pad tokens, 0..seq_len; a batch of one sequence) and ``pad_side`` (where the pad
    tokens are: ``"right"``, at the end of the keys, or ``"left"``, at the start, as
    decoder-only models pad prompts for generation; :data:`attnbook.masks.PAD_SIDES`). Each
    setting is computed by :func:`mask_data` from fixed raw scores
    ``numpy.random.default_rng(seed).standard_normal((seq_len, seq_len))`` and drawn by
    :func:`draw_mask`. Rows with no visible key have all-zero weights (under causal + left
    padding, the first ``n_pad`` queries). ``window`` is greyed out unless the type is sliding
    window, ``n_pad`` and ``pad_side`` unless it involves padding.

    Args:
        mask_type: initial mask type.
        window: initial window size, 1..seq_len.
        n_pad: initial number of pad tokens, 0..seq_len.
        seq_len: number of tokens, 2..13 (the grid of every mask type, window, pad count and
            pad side must stay within :data:`~attnbook.explorers.base.MAX_GRID` settings).
        seed: seed of the scores, >= 0.
        pad_side: initial side of the padding, ``"right"`` (default) or ``"left"``.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: naming the argument, if ``seq_len``, ``window``, ``n_pad`` or ``seed`` is
            not an integer.
        ValueError: naming the argument, for an unknown ``mask_type`` or ``pad_side`` or a
            value out of range.
    """
    seq_len = check_int(seq_len, "seq_len", 2, MAX_SEQ_LEN)
    check_choice(mask_type, "mask_type", MASK_TYPES)
    window = check_int(window, "window", 1, seq_len)
    n_pad = check_int(n_pad, "n_pad", 0, seq_len)
    seed = check_seed(seed)
    check_choice(pad_side, "pad_side", PAD_SIDES)
    scores = mask_scores(seq_len, seed)  # (L, S), fixed for every setting

    def compute(mask_type, window, n_pad, pad_side):
        return mask_data(
            mask_type, window, n_pad, pad_side=pad_side, seq_len=seq_len, scores=scores
        )

    def active(values):
        names = {"mask_type"}
        if values["mask_type"] == "sliding window":
            names.add("window")
        if "padding" in values["mask_type"]:
            names.update(("n_pad", "pad_side"))
        return names

    controls = [
        Control("mask_type", "mask", "select", MASK_TYPES, mask_type, plain_label="mask"),
        Control("window", "window", "slider", tuple(range(1, seq_len + 1)), window),
        Control("n_pad", "pad tokens", "slider", tuple(range(0, seq_len + 1)), n_pad),
        Control(
            "pad_side",
            "padding at",
            "select",
            PAD_SIDES,
            pad_side,
            labels=("the end (right)", "the start (left)"),
        ),
    ]
    return Explorer(controls, title="mask explorer", compute=compute, draw=draw_mask, active=active)
