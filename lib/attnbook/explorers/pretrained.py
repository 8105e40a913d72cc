"""The referent explorer (chapter 2): where "it" looks, in every layer and head of a real model.

Two steps, as every explorer: :func:`token_attention_data` takes one layer and head out of the
attention rows that :func:`attnbook.pretrained.attention_of_token` computed (one forward pass of
all-MiniLM-L6-v2 per sentence), and :func:`draw_token_attention` draws them with every label made
in the reader's language. :func:`token_attention_figure` does both in one call. The sentences and
their word pieces are what the model read: they stay English in both editions (the explorer passes
them as ``kept_words``).
"""

from __future__ import annotations

import html as _html
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import i18n, viz
from ..checks import check_finite, check_int, check_strings
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "HIGHLIGHT_COLORS",
    "TokenAttentionData",
    "token_attention_data",
    "draw_token_attention",
    "token_attention_figure",
    "referent_explorer",
]

#: Bar colours of the highlighted tokens of :func:`draw_token_attention`, in order (the first
#: highlighted token orange, the second green, ...); every other token is drawn in light blue.
HIGHLIGHT_COLORS = (viz.ORANGE, "#2e8b57", "#8e44ad", "#c0392b")
_OTHER_BAR = "#9db4d3"


def _first_index(tokens: list[str], token: str, what: str, i: int) -> int:
    try:
        return tokens.index(token)
    except ValueError:
        raise ValueError(
            f"{what} {token!r} is not a token of sentence {i}, whose tokens are {tokens}"
        ) from None


@dataclass(frozen=True)
class TokenAttentionData:
    """One setting of the referent explorer (what :func:`draw_token_attention` draws).

    Attributes:
        tokens: ``n_sentences`` tuples of word pieces (``T_i`` strings each).
        rows: ``n_sentences`` float64 arrays ``(T_i,)``: the query's attention weights over its
            sentence in this layer and head (each sums to 1).
        layer: 0-based layer index.
        head: 0-based head index.
        query: the query word piece.
        query_index: per sentence, the position of the query's first occurrence.
        highlight: the highlighted word pieces (at most :data:`HIGHLIGHT_COLORS` of them).
        highlight_index: per sentence, the position of each highlighted word piece's first
            occurrence, in the order of ``highlight``.
        titles: ``n_sentences`` panel titles (plain text), or ``None`` for "sentence 1", ...
            in the reader's language.
    """

    tokens: tuple[tuple[str, ...], ...]
    rows: tuple[np.ndarray, ...]
    layer: int
    head: int
    query: str
    query_index: tuple[int, ...]
    highlight: tuple[str, ...]
    highlight_index: tuple[tuple[int, ...], ...]
    titles: tuple[str, ...] | None


def token_attention_data(
    tokens,
    weights,
    layer: int = 0,
    head: int = 0,
    *,
    query: str = "it",
    highlight=("animal", "street"),
    titles=None,
) -> TokenAttentionData:
    """One layer and head of the referent explorer: the query's attention row per sentence.

    Nothing is computed here beyond slicing and finding tokens: the weights come from
    :func:`attnbook.pretrained.attention_of_token`.

    Args:
        tokens: ``n_sentences`` lists of word pieces (``T_i`` strings each).
        weights: ``n_sentences`` float arrays ``(n_layers, n_heads, T_i)``: the query's attention
            rows, as returned by :func:`attnbook.pretrained.attention_of_token`; every sentence
            must have the same ``n_layers`` and ``n_heads``.
        layer: 0-based layer index, ``0 <= layer < n_layers``.
        head: 0-based head index, ``0 <= head < n_heads``.
        query: the query word piece.
        highlight: word pieces to highlight (at most :data:`HIGHLIGHT_COLORS` of them).
        titles: optional ``n_sentences`` panel titles (plain text, shown as given in every
            language); default "sentence i", made in the reader's language when drawn.

    Returns:
        :class:`TokenAttentionData`.

    Raises:
        ValueError: if ``tokens`` and ``weights`` (or ``titles``) differ in length or are empty,
            an array is not 3-D, its last dimension differs from its sentence's token count, the
            sentences differ in ``(n_layers, n_heads)``, a weight is not finite, ``layer`` or
            ``head`` is out of range, ``query`` or a ``highlight`` token is not in a sentence,
            or there are more highlights than colours.
        TypeError: if ``layer`` or ``head`` is not an integer.
    """
    tokens = [list(map(str, t)) for t in tokens]
    weights = [np.asarray(w, dtype=np.float64) for w in weights]
    n = len(tokens)
    if n == 0 or len(weights) != n:
        raise ValueError(
            f"tokens and weights must hold the same number (>= 1) of sentences, got "
            f"{len(tokens)} token lists and {len(weights)} weight arrays"
        )
    for i, (t, w) in enumerate(zip(tokens, weights)):
        if w.ndim != 3 or w.shape[-1] != len(t):
            raise ValueError(
                f"weights[{i}] must have shape (n_layers, n_heads, T) with T = {len(t)} "
                f"tokens, got {w.shape}"
            )
        if w.shape[:2] != weights[0].shape[:2]:
            raise ValueError(
                f"every sentence needs the same (n_layers, n_heads): weights[0] has "
                f"{weights[0].shape[:2]}, weights[{i}] has {w.shape[:2]}"
            )
        check_finite(w, f"weights[{i}]")
    n_layers, n_heads = weights[0].shape[:2]
    layer = check_int(layer, "layer", 0, n_layers - 1)
    head = check_int(head, "head", 0, n_heads - 1)
    highlight = tuple(map(str, highlight))
    if len(highlight) > len(HIGHLIGHT_COLORS):
        raise ValueError(
            f"highlight names {len(highlight)} tokens; at most {len(HIGHLIGHT_COLORS)} have colours"
        )
    if titles is not None:
        titles = tuple(str(x) for x in titles)
        if len(titles) != n:
            raise ValueError(f"titles must name {n} sentences, got {len(titles)}")
    query = str(query)
    return TokenAttentionData(
        tokens=tuple(tuple(t) for t in tokens),
        rows=tuple(w[layer, head].copy() for w in weights),  # (T_i,) each
        layer=layer,
        head=head,
        query=query,
        query_index=tuple(_first_index(t, query, "query", i) for i, t in enumerate(tokens)),
        highlight=highlight,
        highlight_index=tuple(
            tuple(_first_index(t, tok, "highlight token", i) for tok in highlight)
            for i, t in enumerate(tokens)
        ),
        titles=titles,
    )


def draw_token_attention(
    data: TokenAttentionData,
    *,
    language: str | None = None,
    height: int | None = None,
    width: int = viz.COLUMN_PX,
):
    """Draw one setting of the referent explorer for ``width`` px, every label in ``language``.

    One bar chart per sentence, one under the other at every width (a bar per word piece
    needs the whole width; :func:`attnbook.explorers.layout.panel_grid` with
    ``stacked=True``): the bars are the attention weights of the query token (e.g. "it") over
    every token of the sentence (a row of the ``(T, T)`` attention matrix, so the bars sum to
    1). The first occurrence of each highlighted token is drawn in its own colour
    (:data:`HIGHLIGHT_COLORS`) and named, with its weight, on the line under the sentence in
    the panel's title (with the first two, their difference); the query's tick label is bold.
    The word pieces are slanted where each has the room of its bar at ``width``, upright
    where not, so that they never overlap. The weight axis is fixed to ``[0, 1]`` so that
    heads can be compared by eye. The title (the caption above the plot) shows the layer and
    head 1-based ("layer 1" is the first layer), as the explorer's sliders do. The word pieces
    are shown as the model read them, in every language.

    Trace order: trace ``i`` is sentence ``i``'s bars (``x`` the token positions ``0 .. T_i-1``,
    ``y`` the weights, ``customdata`` the word pieces); its ``meta`` holds ``layer`` and ``head``
    (1-based), ``sentence`` (0-based), ``query_index`` and ``highlight`` (``{token: weight}``).
    Annotation ``i`` is sentence ``i``'s panel title: the sentence, then the highlighted
    weights after a ``<br>``.

    Args:
        data: from :func:`token_attention_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px, >= 10; default as tall as
            :func:`~attnbook.explorers.layout.panel_grid` makes the stacked panels
            (:data:`~attnbook.explorers.layout.PANEL_PX` each, their titles and tick labels).
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``height`` or ``width`` is not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    _ = i18n.labels(language)
    n = len(data.tokens)
    if height is not None:
        height = check_int(height, "height", 10)
    names = data.titles or tuple(_("sentence {i}", i=i + 1) for i in range(n))
    query = _html.escape(data.query)
    hover = _("“{token}”: weight {weight}", token="%{customdata}", weight="%{y:.3f}")
    panel_titles, traces, tick_axes = [], [], []
    for i, (t, row) in enumerate(zip(data.tokens, data.rows)):
        qi = data.query_index[i]
        hi = dict(zip(data.highlight, data.highlight_index[i]))
        colors = [_OTHER_BAR] * len(t)
        ticks = [_html.escape(tok) for tok in t]
        for (tok, j), color in zip(hi.items(), HIGHLIGHT_COLORS):
            colors[j] = color
            ticks[j] = f"<b><span style='color:{color}'>{_html.escape(tok)}</span></b>"
        ticks[qi] = f"<b>{_html.escape(t[qi])}</b>"
        tick_axes.append((t, ticks))
        # Word pieces and numbers only: the same in every language. Each part is kept on one
        # line (no-break spaces) where the title is wrapped to the width.
        parts = [
            f"<span style='color:{c}'>{_html.escape(tok)}</span>\u00a0{row[j]:.3f}"
            for (tok, j), c in zip(hi.items(), HIGHLIGHT_COLORS)
        ]
        if len(hi) >= 2:
            (t0, j0), (t1, j1) = list(hi.items())[:2]
            parts.append(
                f"{_html.escape(t0)}\u00a0−\u00a0{_html.escape(t1)}\u00a0{row[j0] - row[j1]:+.3f}"
            )
        panel_titles.append(_html.escape(names[i]) + ("<br>" + " · ".join(parts) if parts else ""))
        traces.append(
            go.Bar(
                x=list(range(len(t))),
                y=row,
                marker=dict(color=colors, line=dict(width=0)),
                customdata=list(t),
                name=names[i],
                hovertemplate=hover + "<extra></extra>",
                meta=dict(
                    layer=data.layer + 1,
                    head=data.head + 1,
                    sentence=i,
                    query_index=qi,
                    highlight={tok: float(row[j]) for tok, j in hi.items()},
                ),
            )
        )
    grid = panel_grid(width, panel_titles, stacked=True, left=70, right=20, bottom=20)
    fig, cells = grid.figure, grid.cells
    lay = fig.layout
    plot_w = width - lay.margin.l - lay.margin.r
    size = viz.FONT["size"]
    for trace, cell, (t, ticks) in zip(traces, cells, tick_axes):
        fig.add_trace(trace, **cell)
        # A slanted label needs its bar to be a line height apart from the next across the
        # slant (sin 40°); else it stands upright, a line height wide.
        slot = plot_w / len(t)
        fig.update_xaxes(
            tickmode="array",
            tickvals=list(range(len(t))),
            ticktext=ticks,
            tickangle=-40 if slot * math.sin(math.radians(40)) >= 1.2 * size else -90,
            range=[-0.6, len(t) - 0.4],
            showgrid=False,
            zeroline=False,
            tickfont=dict(size=size),
            **cell,
        )
        fig.update_yaxes(range=[0, 1.0], title_text=_("weight of “{query}”", query=query), **cell)
    if height is not None:
        fig.update_layout(height=height)
    fig.update_layout(showlegend=False, bargap=0.15)
    return caption_title(
        fig,
        _(
            "Attention of “{query}”: layer {layer}, head {head}",
            query=query,
            layer=data.layer + 1,
            head=data.head + 1,
        ),
        size=14,
    )


def token_attention_figure(
    tokens,
    weights,
    layer: int = 0,
    head: int = 0,
    *,
    query: str = "it",
    highlight=("animal", "street"),
    titles=None,
    height: int | None = None,
    language: str | None = None,
    width: int = viz.COLUMN_PX,
):
    """The referent explorer's figure: :func:`draw_token_attention` of :func:`token_attention_data`.

    Layers and heads are **0-based** here, as in the weight arrays; the figure's title shows them
    1-based, as the explorer's sliders do.

    Args:
        tokens: ``n_sentences`` lists of word pieces (``T_i`` strings each).
        weights: ``n_sentences`` float arrays ``(n_layers, n_heads, T_i)`` (see
            :func:`token_attention_data`).
        layer: 0-based layer index.
        head: 0-based head index.
        query: the query word piece (bold on the axis).
        highlight: word pieces to highlight (at most :data:`HIGHLIGHT_COLORS` of them).
        titles: optional ``n_sentences`` panel titles (plain text).
        height: figure height in px; default as :func:`draw_token_attention`.
        language: see :func:`draw_token_attention`.
        width: the width in px the figure is drawn at (see :func:`draw_token_attention`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError, ValueError: as :func:`token_attention_data` and :func:`draw_token_attention`.
    """
    data = token_attention_data(
        tokens, weights, layer, head, query=query, highlight=highlight, titles=titles
    )
    return draw_token_attention(data, language=language, height=height, width=width)


def referent_explorer(
    layer: int = 1,
    head: int = 1,
    *,
    sentences: Sequence[str] | None = None,
    query: str = "it",
    candidates: Sequence[str] = ("animal", "street"),
    model=None,
) -> Explorer:
    """The referent explorer (chapter 2): where "it" looks, in every layer and head of a real model.

    Controls: ``layer`` (a slider over ``1 .. n_layers``) and ``head`` (a slider over
    ``1 .. n_heads``), both **1-based** — "layer 1" is the first layer; the weight arrays of
    :mod:`attnbook.pretrained` are indexed ``layer - 1``, ``head - 1``. Each setting is taken by
    :func:`token_attention_data` and drawn by :func:`draw_token_attention`: for each sentence,
    the attention weights of the ``query`` token over the sentence in that layer and head, with
    the ``candidates`` (the words the query could refer to) highlighted and their weights
    printed.

    The weights are computed once, when the explorer is made, by
    :func:`attnbook.pretrained.attention_of_token` (one forward pass of all-MiniLM-L6-v2 per
    sentence, every layer and head); the sliders only choose which layer and head to draw, in
    the live widget and in the precomputed static frames alike. For all-MiniLM-L6-v2 that is
    6 x 12 = 72 settings. The sentences and their word pieces are what the model read: the
    Chinese edition shows them as they are (``kept_words``).

    Args:
        layer: initial layer, ``1 .. n_layers`` (6 for all-MiniLM-L6-v2).
        head: initial head, ``1 .. n_heads`` (12 for all-MiniLM-L6-v2).
        sentences: the sentences to compare; default :data:`attnbook.pretrained.TIRED` and
            :data:`attnbook.pretrained.WIDE`. Each must contain ``query`` and every candidate as
            word pieces (the first occurrence of each is used).
        query: the query word piece, lower-case as the tokenizer writes it.
        candidates: word pieces to highlight (at most four).
        model: a :class:`attnbook.pretrained.BertEncoder`; default
            :func:`attnbook.pretrained.load_minilm` ``()``.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: if ``layer`` or ``head`` is not an integer, or ``sentences`` is not a list
            or tuple of strings.
        ValueError: naming the argument, if ``layer`` or ``head`` is out of range, a sentence
            lacks ``query`` or a candidate, ``sentences`` is empty, or more than four
            candidates are given.
    """
    from .. import pretrained

    layer = check_int(layer, "layer", 1)
    head = check_int(head, "head", 1)
    if sentences is None:
        sentences = (pretrained.TIRED, pretrained.WIDE)
    sentences = check_strings(sentences, "sentences")
    if not sentences:
        raise ValueError("sentences must hold at least one sentence")
    candidates = tuple(candidates)
    if len(candidates) > len(HIGHLIGHT_COLORS):
        raise ValueError(
            f"candidates names {len(candidates)} tokens; at most {len(HIGHLIGHT_COLORS)} "
            "can be highlighted"
        )
    model = pretrained.load_minilm() if model is None else model
    tokens, weights = [], []
    for s in sentences:
        t, w = pretrained.attention_of_token(s, query, model=model)  # w: (n_layers, H, T)
        for c in candidates:
            if c not in t:
                raise ValueError(
                    f"candidate {c!r} is not a word piece of the sentence {s!r}, whose word "
                    f"pieces are {t}"
                )
        tokens.append(t)
        weights.append(w)
    n_layers, n_heads = weights[0].shape[:2]
    layer = check_int(layer, "layer", 1, n_layers)
    head = check_int(head, "head", 1, n_heads)
    # The sentences as the model read them: the same in every language.
    titles = [f"{i + 1}. “{s}”" for i, s in enumerate(sentences)]
    read = [tok for t in tokens for tok in t] + list(sentences)  # e.g. "[CLS]", "The"
    kept = {w for text in read for w in i18n.untranslated(text)}

    def compute(layer, head):
        return token_attention_data(
            tokens, weights, layer - 1, head - 1, query=query, highlight=candidates, titles=titles
        )

    controls = [
        Control("layer", "layer", "slider", tuple(range(1, n_layers + 1)), layer),
        Control("head", "head", "slider", tuple(range(1, n_heads + 1)), head),
    ]
    return Explorer(
        controls,
        title="referent explorer",
        compute=compute,
        draw=draw_token_attention,
        kept_words=sorted(kept),
    )
