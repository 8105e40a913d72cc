"""The attention-map explorer (chapter 13): where each character looks, in a trained model.

Pick a sentence, a layer and a head; the figure is the ``(T, T)`` causal attention matrix of
that head: row ``i`` holds the weights with which the character at position ``i`` (the query)
reads the characters ``j <= i`` (the keys). Two steps, as every explorer: the maps come from
:func:`attnbook.sampling.attention_maps` (one forward pass per sentence, every layer and head,
when the explorer is made), :func:`lm_attention_data` takes one head's map out of them, and
:func:`draw_lm_attention` draws it with every label made in the reader's language;
:func:`lm_attention_figure` does both in one call. The sentences are what the model read: they
stay as they are in both editions (the explorer passes their words as ``kept_words``).
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import fonts, i18n
from ..checks import (
    as_float_array,
    check_finite,
    check_instance,
    check_int,
    check_strings,
    check_text,
)
from ..viz import COLUMN_PX
from .base import MAX_GRID, Control, Explorer
from .layout import AXIS_PX, STACK_BELOW_PX, caption_title, panel_grid

__all__ = [
    "MAX_SENTENCE_CHARS",
    "MIN_TICK_PX",
    "MAX_TICK_PX",
    "MIN_ROW_PX",
    "MAX_ROW_PX",
    "show_char",
    "LMAttentionData",
    "lm_attention_data",
    "draw_lm_attention",
    "lm_attention_figure",
    "lm_attention_explorer",
]

#: Longest sentence the explorer draws, in tokens (characters). At 390 px a phone's plot gives
#: each of 48 columns about 6 px, and longer sentences would make the static page heavy.
MAX_SENTENCE_CHARS = 48

#: Least font size in px of the tick labels (the tokens).
MIN_TICK_PX = 9
#: Largest font size in px of the tick labels.
MAX_TICK_PX = 12
#: Least height in px of a row of the map when the height is not given (a row is as tall as a
#: column is wide, within MIN_ROW_PX and MAX_ROW_PX: a phone's columns are narrower than a
#: legible row).
MIN_ROW_PX = 12
#: Largest height in px of a row of the map when the height is not given.
MAX_ROW_PX = 24
_LINE = 1.3  # a line of text, in font sizes
#: Font size in px of the figure's title (shown as the caption above the plot).
TITLE_PX = 14
#: Room in px under a phone's axis title for the horizontal colour bar and its ticks.
BAR_PX = 46

#: Colour scale of the weights, white (0) to the book's blue (1).
_SCALE = [[0.0, "#ffffff"], [0.25, "#c6d7ee"], [1.0, "#1f5fa8"]]


def show_char(token: str) -> str:
    """A token as the figure writes it: a space as ``␣``, a newline as ``↵``, a tab as ``⇥``.

    Args:
        token: the decoded text of one token (one character for a character tokenizer).

    Returns:
        The same string with blanks made visible.

    Raises:
        TypeError: if ``token`` is not a string.
    """
    check_text(token, "token")
    return token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


@dataclass(frozen=True)
class LMAttentionData:
    """One setting of the attention-map explorer (what :func:`draw_lm_attention` draws).

    Attributes:
        tokens: the ``T`` tokens of the sentence, as text.
        weights: float64 ``(T, T)``: one head's attention weights, rows the queries ``i``,
            columns the keys ``j``; the entries above the diagonal (hidden by the causal mask)
            are not drawn.
        layer: 0-based layer index.
        head: 0-based head index.
        title: the first title line (plain text), or ``None`` for the sentence in quotes.
        row_sums: float64 ``(T,)``: each query's visible weights (``j <= i``) summed.
        argmax: int ``(T,)``: the key each query weights most (among ``j <= i``).
    """

    tokens: tuple[str, ...]
    weights: np.ndarray
    layer: int
    head: int
    title: str | None
    row_sums: np.ndarray
    argmax: np.ndarray


def lm_attention_data(
    tokens: Sequence[str], maps, layer: int = 0, head: int = 0, *, title: str | None = None
) -> LMAttentionData:
    """One head's causal attention map of a sentence, out of every layer's and head's.

    Layers and heads are **0-based** here, as in the array.

    Args:
        tokens: the ``T`` tokens of the sentence, as text.
        maps: float array ``(n_layers, n_heads, T, T)`` of attention weights, as returned by
            :func:`attnbook.sampling.attention_maps` for one sequence.
        layer: 0-based layer index.
        head: 0-based head index.
        title: optional first title line (plain text, shown as given in every language);
            default the sentence in quotes.

    Returns:
        :class:`LMAttentionData`.

    Raises:
        TypeError: if ``tokens`` is not a list or tuple of strings, or ``layer`` or ``head`` is
            not an integer.
        ValueError: if ``maps`` is not ``(n_layers, n_heads, T, T)`` with ``T = len(tokens)``,
            holds a non-finite value, or ``layer`` or ``head`` is out of range.
    """
    tokens = check_strings(tokens, "tokens")
    maps = as_float_array(maps, "maps").astype(np.float64)
    T = len(tokens)
    if maps.ndim != 4 or maps.shape[2:] != (T, T):
        raise ValueError(
            f"maps must have shape (n_layers, n_heads, T, T) with T = {T} tokens, got {maps.shape}"
        )
    check_finite(maps, "maps")
    n_layers, n_heads = maps.shape[:2]
    layer = check_int(layer, "layer", 0, n_layers - 1)
    head = check_int(head, "head", 0, n_heads - 1)
    w = maps[layer, head].copy()  # (T, T): rows queries, columns keys
    visible = np.tril(np.ones((T, T), dtype=bool))  # the causal keep-mask, j <= i
    shown = np.where(visible, w, -np.inf)  # (T, T), hidden keys never the argmax
    return LMAttentionData(
        tokens=tuple(tokens),
        weights=w,
        layer=layer,
        head=head,
        title=None if title is None else str(title),
        row_sums=np.where(visible, w, 0.0).sum(axis=-1),  # (T,)
        argmax=np.argmax(shown, axis=-1),  # (T,)
    )


def draw_lm_attention(
    data: LMAttentionData,
    *,
    language: str | None = None,
    height: int | None = None,
    width: int = COLUMN_PX,
):
    """Draw one setting of the attention-map explorer for ``width`` px, labels in ``language``.

    A heatmap of the ``(T, T)`` weights: row ``i`` (the query, top to bottom) holds the weights
    over the keys ``j`` (left to right); the hidden entries ``j > i`` of the causal mask are left
    blank. The tick labels are the tokens (:func:`show_char`), as the model read them in every
    language, in a font of at least :data:`MIN_TICK_PX` px: where the columns are narrower than
    a token, only every k-th key is labelled (every query keeps its label: the rows are made at
    least :data:`MIN_ROW_PX` px tall). The colour scale is fixed to ``[0, 1]`` so that heads can
    be compared by eye; its bar stands beside the map in the book's column and lies under it
    below :data:`attnbook.explorers.layout.STACK_BELOW_PX`. The title (the caption above the
    plot) shows the layer and head 1-based, as the explorer's sliders do.

    Trace order: one trace, the heatmap (``z`` the ``(T, T)`` weights with ``None`` above the
    diagonal). Its ``meta`` holds ``layer`` and ``head`` (1-based), ``row_sums`` (each query's
    visible weights summed) and ``argmax`` (the key each query weights most).

    Args:
        data: from :func:`lm_attention_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px without the title, >= 10; default: rows as tall as the
            columns are wide (:data:`MIN_ROW_PX` to :data:`MAX_ROW_PX` px).
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`LMAttentionData`, or ``height`` or ``width`` is
            not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the map or ``language`` is
            unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, LMAttentionData, "data", "lm_attention_data")
    _ = i18n.labels(language)
    width = check_int(width, "width", 1)
    if height is not None:
        height = check_int(height, "height", 10)
    T = len(data.tokens)
    w = data.weights  # (T, T)
    shown = [show_char(t) for t in data.tokens]
    ticks = [_html.escape(s) for s in shown]
    z = [[float(w[i, j]) if j <= i else None for j in range(T)] for i in range(T)]
    first = f"“{''.join(shown)}”" if data.title is None else data.title
    hover = _("query {i}, key {key}: weight {weight}", i="%{y}", key="%{x}", weight="%{z:.3f}")
    bar_title = _("weight")
    narrow = width < STACK_BELOW_PX
    # The colour bar takes the right margin in the column and the bottom one on a phone.
    left, right, bottom = (60, 14, BAR_PX) if narrow else (60, 80, 10)
    plot_w = width - left - right
    if plot_w < 20:
        raise ValueError(f"width={width} px leaves no room for the map (margins {left + right} px)")
    col_px = plot_w / T
    row_px = min(MAX_ROW_PX, max(MIN_ROW_PX, col_px))
    if height is None:
        height = round(T * row_px) + 10 + AXIS_PX + bottom
    grid = panel_grid(width, [""], height=height, left=left, right=right, bottom=bottom)
    fig, (cell,) = grid.figure, grid.cells
    lay = fig.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    # Tick labels: as large as the cells allow, never below MIN_TICK_PX; keys labelled every
    # k-th when even that is too wide for one column.
    widest = max(fonts.text_width(t, 1) for t in shown)
    size = max(MIN_TICK_PX, min(MAX_TICK_PX, int((col_px - 2) / widest)))
    k = 1
    while k < T and widest * size + 2 > k * col_px:
        k += 1
    # A label is a line of text, 1.3 font sizes tall: every row labelled when rows are that
    # tall (the default height makes them so), every k-th when a given height is too small.
    y_size = max(MIN_TICK_PX, min(MAX_TICK_PX, int(plot_h / T / _LINE)))
    y_step = 1
    while y_step < T and y_size * _LINE > y_step * plot_h / T:
        y_step += 1
    if narrow:  # horizontal, under the keys' axis title, its title on its right
        bar = dict(
            orientation="h",
            x=0,
            xanchor="left",
            y=0,
            yref="container",
            yanchor="bottom",
            ypad=8,
            thickness=12,
            title=dict(text=bar_title),
            len=1 - (fonts.text_width(bar_title, 13) + 16) / plot_w,
        )
    else:  # beside the map, as tall as it
        bar = dict(
            x=1 + 12 / plot_w,
            xanchor="left",
            y=0.5,
            yanchor="middle",
            len=min(1.0, 300 / plot_h),
            thickness=12,
            title=dict(text=bar_title, side="right"),
        )
    # Beside the map the title stands at the bar's middle: no tick there (plotly placed it over
    # the 0.5 once the page's font had loaded).
    bar.update(tickvals=[0, 0.5, 1] if narrow else [0, 1])
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=list(range(T)),
            y=list(range(T)),
            zmin=0.0,
            zmax=1.0,
            colorscale=_SCALE,
            hovertemplate=hover + "<extra></extra>",
            hoverongaps=False,
            colorbar=bar,
            meta=dict(
                layer=data.layer + 1,
                head=data.head + 1,
                row_sums=[float(x) for x in data.row_sums],
                argmax=[int(j) for j in data.argmax],
            ),
        ),
        **cell,
    )
    title = _(
        "{title}<br>layer {layer}, head {head}",
        title=_html.escape(first),
        layer=data.layer + 1,
        head=data.head + 1,
    )
    # The title becomes the caption above the plot (base.take_title).
    caption_title(fig, title, size=TITLE_PX)
    fig.update_layout(showlegend=False)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(T)),
        ticktext=[t if j % k == 0 else "" for j, t in enumerate(ticks)],
        tickangle=0,
        tickfont=dict(size=size),
        showgrid=False,
        zeroline=False,
        title_text=_("key j (read)"),
        range=[-0.5, T - 0.5],
        **cell,
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(T)),
        ticktext=[t if i % y_step == 0 else "" for i, t in enumerate(ticks)],
        tickfont=dict(size=y_size),
        showgrid=False,
        zeroline=False,
        autorange="reversed",
        title_text=_("query i (reading)"),
        **cell,
    )
    return fig


def lm_attention_figure(
    tokens: Sequence[str],
    maps,
    layer: int = 0,
    head: int = 0,
    *,
    title: str | None = None,
    height: int | None = None,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """The attention-map explorer's figure: :func:`draw_lm_attention` of :func:`lm_attention_data`.

    Layers and heads are **0-based** here, as in the array; the title shows them 1-based, as
    the explorer's sliders do.

    Args:
        tokens: the ``T`` tokens of the sentence, as text.
        maps: float array ``(n_layers, n_heads, T, T)`` of attention weights, as returned by
            :func:`attnbook.sampling.attention_maps` for one sequence.
        layer: 0-based layer index.
        head: 0-based head index.
        title: optional first title line (plain text); default the sentence in quotes.
        height: figure height in pixels without the title; default grows with ``T``.
        language: see :func:`draw_lm_attention`.
        width: the width in px the figure is drawn at (see :func:`draw_lm_attention`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError, ValueError: as :func:`lm_attention_data` and :func:`draw_lm_attention`.
    """
    data = lm_attention_data(tokens, maps, layer, head, title=title)
    return draw_lm_attention(data, language=language, height=height, width=width)


def _default_attention_maps(model, ids):
    from ..sampling import attention_maps

    return attention_maps(model, ids)


def lm_attention_explorer(
    model, tokenizer, sentences: Sequence[str], *, sentence: int = 0, layer: int = 1, head: int = 1
) -> Explorer:
    """The attention-map explorer (chapter 13): a trained language model's heads on a sentence.

    Controls: ``sentence`` (a drop-down over ``sentences``), ``layer`` (a slider over
    ``1 .. n_layers``) and ``head`` (``1 .. n_heads``), layers and heads **1-based**. The maps
    are computed once, when the explorer is made, by :func:`attnbook.sampling.attention_maps`
    (the model in eval mode, no dropout); the controls only choose which one
    :func:`lm_attention_data` takes and :func:`draw_lm_attention` draws. The sentences and their
    tokens are what the model read: the Chinese edition shows them as they are
    (``kept_words``).

    Put your own sentence in the list to see the model read it: every character must be in the
    tokenizer's vocabulary.

    Args:
        model: a :class:`attnbook.models.DecoderOnlyModel`.
        tokenizer: an object with ``encode(text) -> list[int]`` and ``decode(ids) -> str``,
            e.g. :class:`attnbook.text.CharTokenizer`.
        sentences: 1 to 6 sentences, each of 2 to :data:`MAX_SENTENCE_CHARS` tokens and at
            most the model's ``max_seq_len``.
        sentence: initial sentence, 0-based index into ``sentences``.
        layer: initial layer, ``1 .. n_layers``.
        head: initial head, ``1 .. n_heads``.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: if ``sentences`` is not a list or tuple of strings, or an index is not an
            integer.
        ValueError: naming the argument, if ``sentences`` is empty or holds more than six
            sentences, a sentence is too short or too long, or an index is out of range (the
            tokenizer's own error for a character outside its vocabulary).
    """
    sentences = check_strings(sentences, "sentences")
    if not 1 <= len(sentences) <= 6:
        raise ValueError(f"sentences must hold 1 to 6 sentences, got {len(sentences)}")
    sentence = check_int(sentence, "sentence", 0, len(sentences) - 1)
    limit = min(MAX_SENTENCE_CHARS, int(model.config.max_seq_len))
    tokens, maps = [], []
    for i, s in enumerate(sentences):
        ids = list(tokenizer.encode(s))
        if not 2 <= len(ids) <= limit:
            raise ValueError(
                f"sentences[{i}] has {len(ids)} tokens; the explorer draws 2 to {limit} "
                f"(MAX_SENTENCE_CHARS and the model's max_seq_len)"
            )
        tokens.append([tokenizer.decode([t]) for t in ids])
        m = np.asarray(_default_attention_maps(model, ids), dtype=np.float64)
        maps.append(m.reshape(m.shape[-4:]))  # (n_layers, n_heads, T, T)
    n_layers, n_heads = maps[0].shape[:2]
    layer = check_int(layer, "layer", 1, n_layers)
    head = check_int(head, "head", 1, n_heads)
    if len(sentences) * n_layers * n_heads > MAX_GRID:
        raise ValueError(
            f"{len(sentences)} sentences x {n_layers} layers x {n_heads} heads exceed the "
            f"{MAX_GRID} precomputed settings of a static explorer"
        )

    def compute(sentence, layer, head):
        return lm_attention_data(tokens[sentence], maps[sentence], layer - 1, head - 1)

    # The sentences as the model read them: the same menu in every language.
    short = [s if len(s) <= 28 else s[:27] + "…" for s in sentences]
    read = [tok for t in tokens for tok in t] + list(sentences) + short
    kept = {w for text in read for w in i18n.untranslated(text)}
    controls = [
        Control(
            "sentence",
            "sentence",
            "select",
            tuple(range(len(sentences))),
            sentence,
            labels=lambda _: short,
        ),
        Control("layer", "layer", "slider", tuple(range(1, n_layers + 1)), layer),
        Control("head", "head", "slider", tuple(range(1, n_heads + 1)), head),
    ]
    return Explorer(
        controls,
        title="attention-map explorer",
        compute=compute,
        draw=draw_lm_attention,
        kept_words=sorted(kept),
    )
