"""The three steps explorer: dot product, softmax, weighted sum — and "apple" pinned by its context.

A reader picks a context for the ambiguous word "apple" and sees, for that word's query, the
three steps of scaled dot-product attention (Vaswani et al., 2017, eq. 1): the scores
``c q . k_j`` with every key, the softmax weights, and the weighted sum of the values, which
moves the word's vector from its ambiguous start towards the *fruit* or the *company*
direction.

The vectors are hand-made and tiny so that every number can be checked by hand: two named
dimensions, ``fruit`` and ``company``, small integers (:data:`DIMS`, :data:`QUERY`,
:data:`KEYS`, :data:`VALUES`). In this toy the projections :math:`W_Q, W_K, W_V` are already
applied: each word simply *has* a key and a value. The two senses are the two axes, the
*fruit* direction (1, 0) and the *company* direction (0, 1) (:data:`SENSE_DIRECTIONS`).

The example is the book's own, so each edition shows it in its reader's language: the words
of :data:`CONTEXTS` are the *roles* that pick a key and a value, and :data:`EXAMPLES` holds,
per language, the sentence and the tokens the reader sees, one token per role (the Chinese
edition reads 我 / 吃了 / 一个 / 苹果 with the vectors of I / ate / an / apple). The numbers
are the same in every language.

Two steps, as every explorer: :func:`three_steps` computes a context with the library
(:func:`attnbook.attention.scaled_dot_product_attention`; no text), and
:func:`draw_three_steps` draws it with every label made in the reader's language.
:func:`three_steps_figure` does both in one call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import attention, fonts, i18n
from ..checks import check_bool, check_choice, check_int, check_real
from ..printed import Printed
from ..viz import BLUE, COLUMN_PX, FONT, GREEN, GREY, ORANGE
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "DIMS",
    "WORD",
    "QUERY",
    "KEYS",
    "VALUES",
    "CONTEXTS",
    "SENSE_DIRECTIONS",
    "Example",
    "EXAMPLES",
    "shown",
    "ThreeSteps",
    "three_steps",
    "draw_three_steps",
    "three_steps_figure",
    "three_steps_explorer",
]

#: The named dimensions of every hand-made vector, (fruit, company), one per sense.
DIMS = ("fruit", "company")
#: The ambiguous word whose query is followed (its role is a key of :data:`KEYS`).
WORD = "apple"
#: The query of "apple". It asks equally for fruit and for company, (fruit, company) = (1, 1).
QUERY = (1, 1)
#: The key of each word (lower case), (fruit, company), or how strongly it answers a query for
#: fruit or for company. Words that say nothing about either have the key (0, 0).
KEYS = {
    "apple": (1, 1),
    "ate": (2, 0),
    "peeled": (2, 0),
    "released": (0, 2),
    "new": (0, 1),
    "chip": (0, 2),
    "stock": (0, 2),
    "i": (0, 0),
    "an": (0, 0),
    "she": (0, 0),
    "the": (0, 0),
    "a": (0, 0),
    "'s": (0, 0),
    "fell": (0, 0),
    "saw": (0, 0),
}
#: The value of each word, (fruit, company), or what it hands over when attended to. The value of
#: "apple" is its starting vector (1, 1). On its own the word is as much fruit as company.
VALUES = {
    "apple": (1, 1),
    "ate": (2, 0),
    "peeled": (2, 0),
    "released": (0, 2),
    "new": (0, 1),
    "chip": (0, 2),
    "stock": (0, 2),
    "i": (0, 0),
    "an": (0, 0),
    "she": (0, 0),
    "the": (0, 0),
    "a": (0, 0),
    "'s": (0, 0),
    "fell": (0, 0),
    "saw": (0, 0),
}
#: The contexts the explorer offers, by name, as words; each word, lower-cased, is its role (a
#: key of :data:`KEYS` and :data:`VALUES`). "apple" attends to every word, itself included
#: (self-attention).
CONTEXTS = {
    "I ate an apple": ("I", "ate", "an", "apple"),
    "She peeled the apple": ("She", "peeled", "the", "apple"),
    "Apple released a new chip": ("Apple", "released", "a", "new", "chip"),
    "Apple's stock fell": ("Apple", "'s", "stock", "fell"),
    "I saw an apple": ("I", "saw", "an", "apple"),
}
#: The two senses as directions of the (fruit, company) plane, its two axes.
SENSE_DIRECTIONS = {"fruit": (1, 0), "company": (0, 1)}


@dataclass(frozen=True)
class Example:
    """The example as a reader of one language sees it; the vectors are the same in every one.

    Attributes:
        word: the ambiguous word (the role ``"apple"``), as shown.
        senses: the names of the two senses, the dimensions :data:`DIMS` (fruit, company).
        sentences: context name (a key of :data:`CONTEXTS`) -> the sentence shown.
        tokens: context name -> the sentence's tokens, one per word of
            ``CONTEXTS[name]``, in its order and with its role (so its key and value).
    """

    word: str
    senses: tuple[str, str]
    sentences: dict[str, str]
    tokens: dict[str, tuple[str, ...]]


#: The example in each language of :data:`attnbook.i18n.LANGUAGES`. Chinese: 苹果 is a fruit
#: after 吃了 (ate) or 削了 (peeled) and the company before 发布了 (released) or 的股价 (its
#: stock); 我看到了一个苹果 says nothing either way.
#:
#: :meta hide-value:
EXAMPLES = {
    "en": Example(
        word="apple",
        senses=DIMS,
        sentences={name: name for name in CONTEXTS},
        tokens=dict(CONTEXTS),
    ),
    "zh_CN": Example(
        word="苹果",
        senses=("水果", "公司"),
        sentences={
            "I ate an apple": "我吃了一个苹果",
            "She peeled the apple": "她削了那个苹果",
            "Apple released a new chip": "苹果发布了一款新芯片",
            "Apple's stock fell": "苹果的股价下跌了",
            "I saw an apple": "我看到了一个苹果",
        },
        tokens={
            "I ate an apple": ("我", "吃了", "一个", "苹果"),
            "She peeled the apple": ("她", "削了", "那个", "苹果"),
            "Apple released a new chip": ("苹果", "发布了", "一款", "新", "芯片"),
            "Apple's stock fell": ("苹果", "的", "股价", "下跌了"),
            "I saw an apple": ("我", "看到了", "一个", "苹果"),
        },
    ),
}


def shown(name: str) -> Printed:
    """A word, a sense or a context of the example as each edition's reader sees it.

    For printing the example with :func:`attnbook.printed.say` or :func:`~attnbook.printed.table`:
    ``shown("ate")`` is "ate" in English and 吃了 in Chinese.

    Args:
        name: a role (a key of :data:`KEYS`, e.g. ``"ate"``), a sense (``"fruit"`` or
            ``"company"``, :data:`DIMS`) or a context (a key of :data:`CONTEXTS`).

    Returns:
        A :class:`attnbook.printed.Printed` with the text of every language.

    Raises:
        ValueError: if ``name`` is none of these, or no context of :data:`CONTEXTS` uses the
            role.
    """
    texts = {}
    for lang, ex in EXAMPLES.items():
        if name in CONTEXTS:
            texts[lang] = ex.sentences[name]
        elif name in DIMS:
            texts[lang] = ex.senses[DIMS.index(name)]
        else:
            found = [
                tok
                for ctx, words in CONTEXTS.items()
                for word, tok in zip(words, ex.tokens[ctx])
                if word.lower() == name
            ]
            if not found:
                raise ValueError(
                    f"name must be a role of KEYS used in CONTEXTS, a sense of "
                    f"DIMS {DIMS} or a context of CONTEXTS; got {name!r}"
                )
            texts[lang] = ex.word if name == WORD else found[0]
    return Printed(texts)


@dataclass(frozen=True)
class ThreeSteps:
    """Every number of the three steps for one context (no text but the context's roles).

    Attributes:
        context: the context's name (a key of :data:`CONTEXTS`).
        words: the ``S`` words whose keys and values "apple" attends to: the context's words,
            "apple" itself included unless ``include_self`` was false.
        positions: ``S`` indices of ``words`` in ``CONTEXTS[context]`` (where each sits among
            the tokens of :data:`EXAMPLES`).
        target: index of "apple" among ``words``, or ``None`` if it does not attend to itself.
        scale: the score multiplier ``c``.
        query: ``(2,)`` the query of "apple".
        keys: ``(S, 2)`` the keys, one row per word.
        values: ``(S, 2)`` the values, one row per word.
        dots: ``(S,)`` the dot products ``q . k_j``.
        scores: ``(S,)`` the scores ``c q . k_j``.
        weights: ``(S,)`` the softmax of the scores (sums to 1).
        output: ``(2,)`` the output ``o = sum_j weights_j v_j``.
        start: ``(2,)`` the value of "apple" itself, its starting vector.
        cos_start: ``(2,)`` cosine of ``start`` with the fruit and company directions.
        cos_output: ``(2,)`` cosine of ``output`` with the fruit and company directions (nan
            for a zero output, which has no direction).
    """

    context: str
    words: tuple[str, ...]
    positions: tuple[int, ...]
    target: int | None
    scale: float
    query: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    dots: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    output: np.ndarray
    start: np.ndarray
    cos_start: np.ndarray
    cos_output: np.ndarray


def _cos_senses(x: np.ndarray) -> np.ndarray:
    """Cosine of ``x (2,)`` with each sense direction, ``(2,)``; nan for the zero vector."""
    d = np.array(list(SENSE_DIRECTIONS.values()), dtype=np.float64)  # (2 senses, 2)
    n = float(np.linalg.norm(x))
    return d @ x / (np.linalg.norm(d, axis=1) * n) if n > 0 else np.full(len(d), np.nan)


def three_steps(
    context: str = "I ate an apple", scale: float | None = None, *, include_self: bool = True
) -> ThreeSteps:
    """The three steps of attention for the query of "apple" in one context.

    ``dots = K q``, ``scores = c dots``, ``weights = softmax(scores)``, ``output = weights V``;
    the weights and the output come from
    :func:`attnbook.attention.scaled_dot_product_attention` with ``scale=c``.

    Args:
        context: a key of :data:`CONTEXTS`.
        scale: the multiplier ``c`` of the dot products, finite and >= 0; ``None`` for
            ``1/sqrt(d_k) = 1/sqrt(2)``.
        include_self: whether "apple" attends to itself too, as in self-attention (its own
            key and value among the others); ``False`` leaves only the other words.

    Returns:
        A :class:`ThreeSteps` (float64 arrays).

    Raises:
        ValueError: if ``context`` is not a key of :data:`CONTEXTS`, or ``scale`` is negative,
            not finite, or so large that a score ``c q . k_j`` overflows float64.
        TypeError: if ``scale`` is not a real number or ``include_self`` not a bool.

    Source: Vaswani et al. (2017), eq. 1.
    """
    check_choice(context, "context", tuple(CONTEXTS))
    d_k = len(DIMS)
    scale = 1 / math.sqrt(d_k) if scale is None else check_real(scale, "scale", minimum=0.0)
    top = max(abs(float(np.dot(QUERY, kv))) for kv in KEYS.values())  # largest |q . k|
    if scale * top > np.finfo(np.float64).max:  # scale * top overflows to inf
        raise ValueError(
            f"scale must be <= {np.finfo(np.float64).max / top:.6g} (the scores "
            f"c q . k_j, up to {top:g} c, overflow float64 beyond), got {scale}"
        )
    include_self = check_bool(include_self, "include_self")
    positions = tuple(
        i for i, w in enumerate(CONTEXTS[context]) if include_self or w.lower() != WORD
    )
    words = tuple(CONTEXTS[context][i] for i in positions)
    lower = [w.lower() for w in words]
    q = np.array(QUERY, dtype=np.float64)  # (d_k,)
    k = np.array([KEYS[w] for w in lower], dtype=np.float64)  # (S, d_k)
    v = np.array([VALUES[w] for w in lower], dtype=np.float64)  # (S, d_v)
    out, w = attention.scaled_dot_product_attention(
        q[None], k, v, scale=scale, return_weights=True
    )  # (1, d_v), (1, S)
    dots = k @ q  # (S,)
    start = np.array(VALUES[WORD], dtype=np.float64)  # (d_v,)
    target = lower.index(WORD) if include_self else None
    return ThreeSteps(
        context,
        words,
        positions,
        target,
        float(scale),
        q,
        k,
        v,
        dots,
        scale * dots,
        w[0],
        out[0],
        start,
        _cos_senses(start),
        _cos_senses(out[0]),
    )


def _scale_label(c: float) -> str:
    return "1/√2" if math.isclose(c, 1 / math.sqrt(2)) else f"{c:g}"


def draw_three_steps(
    data: ThreeSteps, *, language: str | None = None, height: int = 400, width: int = COLUMN_PX
):
    """Draw the three steps of one context for ``width`` px, labels and example in ``language``.

    Left: the scores ``c q . k_j`` of "apple"'s query with every token it attends to. Middle:
    their softmax, the weights. Right: the (fruit, company) plane with the values of the other
    tokens (grey points), the fruit and company directions (dashed), the starting vector of
    "apple" (its own value, grey arrow) and the output ``o`` (orange arrow). The tokens, the
    sentence and the sense names are those of ``EXAMPLES[language]``. Side by side in the
    book's column, one under the other on a phone
    (:func:`attnbook.explorers.layout.panel_grid`); the tokens are slanted only where they do
    not fit their bar's width level. The figure's title (the sentence and ``o``) is prose,
    shown as the caption above the plot.

    Trace order: 0 scores, 1 weights, 2 fruit direction, 3 company direction, 4 values,
    5 start, 6 output; ``meta`` of trace 6 holds ``output``, ``cos_output`` (``None`` for a
    zero output) and ``cos_start`` (fruit, company). Annotations: 0, 1 and 2 the panels'
    titles.

    Args:
        data: from :func:`three_steps`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``height`` or ``width`` is not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    ex, r = EXAMPLES[_.language], data
    tokens = [ex.tokens[r.context][i] for i in r.positions]
    sentence = ex.sentences[r.context]
    x = list(range(len(tokens)))
    ticks = [f"<b>{t}</b>" if i == r.target else t for i, t in enumerate(tokens)]
    colors = [ORANGE if i == r.target else BLUE for i in x]
    lim = 2.4
    # Group the other tokens whose values coincide, so that each point has one label.
    groups: dict[tuple, list[str]] = {}
    for i, (token, val) in enumerate(zip(tokens, r.values)):
        if i != r.target:
            groups.setdefault(tuple(val), []).append(token)
    pts = list(groups)
    # TRANSLATORS: separates the tokens that share one point, "I, an".
    names = [_(", ").join(groups[p]) for p in pts]
    traces = [
        go.Bar(
            x=x,
            y=r.scores,
            marker=dict(color=colors),
            name=_("scores"),
            text=[f"{s:.2f}" for s in r.scores],
            textposition="outside",
            cliponaxis=False,
            showlegend=False,
            hovertext=[
                _("{token}: score {score}", token=t, score=f"{s:.3f}")
                for t, s in zip(tokens, r.scores)
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
        go.Bar(
            x=x,
            y=r.weights,
            marker=dict(color=colors),
            name=_("weights"),
            text=[f"{a:.2f}" for a in r.weights],
            textposition="outside",
            cliponaxis=False,
            showlegend=False,
            hovertext=[
                _("{token}: weight {weight}", token=t, weight=f"{a:.3f}")
                for t, a in zip(tokens, r.weights)
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
    ]
    for name, d, color in zip(ex.senses, SENSE_DIRECTIONS.values(), (GREEN, "#8e44ad")):
        end = np.array(d, dtype=float) * lim / np.linalg.norm(d)
        traces.append(
            go.Scatter(
                x=[0, end[0]],
                y=[0, end[1]],
                mode="lines+text",
                name=name,
                text=["", name],
                textposition="top left" if d[0] > 0 else "middle right",
                line=dict(color=color, dash="dash", width=2),
                textfont=dict(color=color),
                showlegend=False,
                hoverinfo="skip",
            )
        )
    finite = bool(np.isfinite(r.cos_output).all())
    start_label = _("{word} (start)", word=ex.word)
    traces += [
        go.Scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="markers+text",
            name=_("values"),
            text=names,
            textposition="bottom right",
            marker=dict(color=GREY, size=8),
            textfont=dict(color=GREY, size=11),
            showlegend=False,
            hovertext=[
                _("{tokens}: value ({x}, {y})", tokens=n, x=f"{p[0]:g}", y=f"{p[1]:g}")
                for n, p in zip(names, pts)
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
        go.Scatter(
            x=[0, r.start[0]],
            y=[0, r.start[1]],
            mode="lines+markers+text",
            name=_("start"),
            text=["", start_label],
            textposition="top center",
            line=dict(color=GREY, width=2),
            textfont=dict(color=GREY, size=11),
            marker=dict(symbol="arrow", angleref="previous", size=[0, 12], color=GREY),
            showlegend=False,
            hovertext=2
            * [
                _(
                    "{word} (start): ({x}, {y})",
                    word=ex.word,
                    x=f"{r.start[0]:.2f}",
                    y=f"{r.start[1]:.2f}",
                )
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
        go.Scatter(
            x=[0, r.output[0]],
            y=[0, r.output[1]],
            mode="lines+markers+text",
            name=_("output"),
            text=["", "o"],
            textposition="middle right",
            line=dict(color=ORANGE, width=3),
            textfont=dict(color=ORANGE, size=14),
            # a zero output has no direction: a ring at the origin, not an arrow
            marker=dict(
                symbol="arrow" if finite else "circle-open",
                angleref="previous",
                size=[0, 14],
                color=ORANGE,
            ),
            showlegend=False,
            meta=dict(
                output=r.output.tolist(),
                cos_output=r.cos_output.tolist() if finite else None,
                cos_start=r.cos_start.tolist(),
            ),
            hovertemplate="o = (%{x:.3f}, %{y:.3f})<extra></extra>",
        ),
    ]
    ox, oy = f"{r.output[0]:.2f}", f"{r.output[1]:.2f}"
    if finite:
        title = _(
            "“{sentence}”: o = ({x}, {y}); cos to {fruit} {cos_fruit}, to {company} {cos_company}",
            sentence=sentence,
            x=ox,
            y=oy,
            fruit=ex.senses[0],
            company=ex.senses[1],
            cos_fruit=f"{r.cos_output[0]:.2f}",
            cos_company=f"{r.cos_output[1]:.2f}",
        )
    else:
        title = _(
            "“{sentence}”: o = ({x}, {y}), no direction: the other words carry nothing",
            sentence=sentence,
            x=ox,
            y=oy,
        )
    grid = panel_grid(
        width,
        [
            _("1. scores {c}·q·k<sub>j</sub>", c=_scale_label(r.scale)),
            _("2. weights α<sub>j</sub> (softmax)"),
            "3. o = Σ α<sub>j</sub> v<sub>j</sub>",
        ],  # math only: no words
        height=height,
        title_size=13,
        left=50,
        right=20,
        bottom=10,
        spacing_px=60,
    )
    fig, cells = grid.figure, grid.cells
    for trace, panel in zip(traces, (0, 1, 2, 2, 2, 2, 2)):
        fig.add_trace(trace, **cells[panel])
    # The score axis depends on c only (the largest dot product of the vocabulary is 2), so
    # that switching the context changes the bars, not the axis.
    top_dot = max(float(np.dot(QUERY, k)) for k in KEYS.values())
    s_top = max(r.scale * top_dot, 0.5)
    # Tokens stay level where each has the room of its bar at this width, else slant.
    plot_w = width - fig.layout.margin.l - fig.layout.margin.r
    x0, x1 = fig.layout.xaxis.domain
    slot = (x1 - x0) * plot_w / len(x)
    widest = max(fonts.text_width(t, FONT["size"]) for t in ticks)
    word_axis = dict(
        tickmode="array",
        tickvals=x,
        ticktext=ticks,
        tickangle=0 if widest <= 0.9 * slot else -45,
        range=[-0.6, len(x) - 0.4],
        showgrid=False,
        zeroline=False,
    )
    fig.update_xaxes(**word_axis, **cells[0])
    fig.update_yaxes(range=[0, 1.3 * s_top], title_text=_("score"), **cells[0])
    fig.update_xaxes(**word_axis, **cells[1])
    fig.update_yaxes(range=[0, 1.15], title_text=_("weight"), **cells[1])
    # The plane keeps one unit as long on both axes, in the middle of its panel.
    fig.update_xaxes(
        range=[-0.3, lim + 0.2],
        title_text=ex.senses[0],
        zeroline=True,
        dtick=1,
        constrain="domain",
        **cells[2],
    )
    fig.update_yaxes(
        range=[-0.3, lim + 0.2],
        title_text=ex.senses[1],
        zeroline=True,
        dtick=1,
        scaleanchor="x3",
        scaleratio=1,
        constrain="domain",
        **cells[2],
    )
    # Prose: the title is the caption above the plot (the browser wraps it).
    fig.update_layout(bargap=0.3, showlegend=False)
    return caption_title(fig, title, size=13)


def three_steps_figure(
    context: str = "I ate an apple",
    include_self: bool = True,
    *,
    scale: float | None = None,
    height: int = 400,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """Figure of the three steps explorer: :func:`draw_three_steps` of :func:`three_steps`.

    Args:
        context: a key of :data:`CONTEXTS`.
        include_self: whether "apple" attends to itself (see :func:`three_steps`).
        scale: the multiplier ``c`` (default ``1/sqrt(2)``).
        height: figure height in px (>= 10).
        language: see :func:`draw_three_steps`.
        width: the width in px the figure is drawn at (see :func:`draw_three_steps`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        As :func:`three_steps`; also TypeError if ``height`` is not an integer and
        ValueError if it is < 10 or ``language`` is unknown.
    """
    height = check_int(height, "height", 10)
    data = three_steps(context, scale, include_self=include_self)
    return draw_three_steps(data, language=language, height=height, width=width)


def three_steps_explorer(context: str = "I ate an apple", include_self: bool = True) -> Explorer:
    """The three steps explorer (chapter 2): pick a context, watch "apple" move.

    Controls: ``context`` (a drop-down over :data:`CONTEXTS`, each shown as its sentence in
    the reader's language, :data:`EXAMPLES`) and ``include_self`` (a checkbox: "apple" attends
    to itself too, as in self-attention; off, only the other words count). The scale is the
    Transformer's ``1/sqrt(d_k) = 1/sqrt(2)``. Each setting is computed by :func:`three_steps`
    and drawn by :func:`draw_three_steps`.

    Args:
        context: initial context, a key of :data:`CONTEXTS`.
        include_self: initial state of the checkbox.

    Returns:
        :class:`~attnbook.explorers.base.Explorer` (``5 x 2 = 10`` precomputed settings).

    Raises:
        ValueError: if ``context`` is not a key of :data:`CONTEXTS`.
        TypeError: if ``include_self`` is not a bool.
    """
    check_choice(context, "context", tuple(CONTEXTS))
    include_self = check_bool(include_self, "include_self")

    def compute(context, include_self):
        return three_steps(context, include_self=include_self)

    controls = [
        Control(
            "context",
            "context",
            "select",
            tuple(CONTEXTS),
            context,
            labels=lambda _: [EXAMPLES[_.language].sentences[c] for c in CONTEXTS],
        ),
        Control("include_self", "apple attends to itself", "toggle", (False, True), include_self),
    ]
    return Explorer(controls, title="three steps explorer", compute=compute, draw=draw_three_steps)
