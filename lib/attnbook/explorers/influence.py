"""The influence explorer (chapter 10): change one input token, see which outputs move.

A reader picks an architecture (encoder-only, decoder-only, or encoder-decoder with a change in
the target or in the source) and the position of the token to change, and sees, for every output
position, how far its output vector moved: ``||f(x') - f(x)||`` with ``x'`` the input with that
one token changed. Bidirectional self-attention moves every output; causal self-attention leaves
every output before the changed token exactly where it was (its key is hidden: weight 0); the
encoder-decoder's cross-attention carries a change of the source to every target position.

Two steps, as every explorer: :func:`output_change` runs a model of :mod:`attnbook.models` on
the input and on the changed input (the numbers, no text), and :func:`draw_influence` draws one
setting with every label made in the reader's language. :func:`influence_explorer` computes
every setting once, when it is made.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass

import numpy as np

from .. import i18n
from ..checks import check_choice, check_instance, check_int, check_token_ids
from ..viz import BLUE, COLUMN_PX, GREY, ORANGE
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "CASES",
    "InfluenceData",
    "output_change",
    "influence_data",
    "draw_influence",
    "influence_explorer",
]

#: The settings of the explorer's menu, the model and, for the encoder-decoder, which input
#: holds the changed token.
CASES = (
    "encoder-only",
    "decoder-only",
    "encoder-decoder, target token",
    "encoder-decoder, source token",
)
#: The model of :data:`CASES` each case runs (a key of the explorer's ``models``).
_ARCH = {
    "encoder-only": "encoder",
    "decoder-only": "decoder",
    "encoder-decoder, target token": "encoder-decoder",
    "encoder-decoder, source token": "encoder-decoder",
}


def _model_classes():
    from ..models import DecoderOnlyModel, EncoderDecoderModel, EncoderOnlyModel

    return {
        "encoder": EncoderOnlyModel,
        "decoder": DecoderOnlyModel,
        "encoder-decoder": EncoderDecoderModel,
    }


def _check_ids(ids, name: str, vocab: int):
    import torch

    ids = check_token_ids(ids, name, vocab, min_len=1)  # (B, L) ids in [0, vocab)
    if ids.shape[0] != 1:
        raise ValueError(f"{name} must be one sequence (1, seq_len); got shape {tuple(ids.shape)}")
    return ids.to(torch.long)


def output_change(model, ids, position: int, *, src=None, in_source: bool = False):
    """How far each output position moves when the token at ``position`` is changed.

    The token ``t`` at ``position`` of ``ids`` (or of ``src`` when ``in_source``) becomes
    ``(t + 1) % vocab_size``; the model runs on both inputs (``torch.no_grad``) and the result is
    the Euclidean norm of the difference of each output vector (over the last axis: hidden
    state or logits, whatever the model returns).

    Args:
        model: an :class:`attnbook.models.EncoderOnlyModel` or
            :class:`~attnbook.models.DecoderOnlyModel` (``src`` must be ``None``), or an
            :class:`~attnbook.models.EncoderDecoderModel` (``src`` required), in eval mode for
            a deterministic answer.
        ids: ``(1, L)`` torch.long token ids (the target, for the encoder-decoder).
        position: index of the changed token, ``0 <= position < L`` (``< S`` when
            ``in_source``).
        src: ``(1, S)`` torch.long source ids of the encoder-decoder.
        in_source: change the token in ``src`` instead of ``ids``.

    Returns:
        float64 NumPy ``(L,)``: ``||out'[i] - out[i]||_2`` for each output position ``i``.

    Raises:
        TypeError: ``model`` is not one of the three models, ``ids`` or ``src`` not integer
            token ids, or ``position`` not an integer.
        ValueError: ``ids`` or ``src`` not ``(1, n)`` with ``n >= 1``, ``src`` given to a
            model without an encoder-decoder (or missing for one), ``in_source`` without
            ``src``, ids outside the vocabulary, or ``position`` out of range.
    """
    import torch

    classes = _model_classes()
    if not isinstance(model, tuple(classes.values())):
        raise TypeError(
            f"model must be an EncoderOnlyModel, DecoderOnlyModel or "
            f"EncoderDecoderModel, got {type(model).__name__}"
        )
    two_inputs = isinstance(model, classes["encoder-decoder"])
    if two_inputs != (src is not None):
        raise ValueError(
            f"src must be given for an EncoderDecoderModel and only for it; got "
            f"src={'None' if src is None else tuple(src.shape)} for "
            f"{type(model).__name__}"
        )
    if in_source and src is None:
        raise ValueError("in_source=True needs src (an encoder-decoder's source)")
    vocab = model.config.vocab_size
    ids = _check_ids(ids, "ids", vocab)
    if src is not None:
        src = _check_ids(src, "src", vocab)
    changed = src if in_source else ids
    position = check_int(position, "position", 0, changed.shape[1] - 1)
    new = changed.clone()
    new[0, position] = (changed[0, position] + 1) % vocab
    with torch.no_grad():
        if two_inputs:
            before = model(src, ids)
            after = model(new, ids) if in_source else model(src, new)
        else:
            before, after = model(ids), model(new)
    return torch.linalg.vector_norm((after - before)[0].double(), dim=-1).numpy()  # (L,)


@dataclass(frozen=True)
class InfluenceData:
    """One setting of the influence explorer, computed (what :func:`draw_influence` draws).

    Attributes:
        case: one of :data:`CASES`.
        position: the changed token's position (in the source for the source case).
        change: float64 ``(L,)`` norm of each output's change (:func:`output_change`).
        yrange: ``(bottom, top)`` of the logarithmic y-axis for this case, the same at every
            position so that bars compare (an output that did not move is drawn at the bottom).
    """

    case: str
    position: int
    change: np.ndarray
    yrange: tuple[float, float]

    @property
    def moved(self) -> np.ndarray:
        """Boolean ``(L,)``: the outputs that moved at all (a change > 0)."""
        return self.change > 0


def influence_data(models: dict, ids, src) -> dict:
    """Every setting of the explorer: ``(case, position) -> InfluenceData``.

    Args:
        models: ``{"encoder": EncoderOnlyModel, "decoder": DecoderOnlyModel,
            "encoder-decoder": EncoderDecoderModel}`` (as the chapter builds them with
            :func:`attnbook.models.build_model`).
        ids: ``(1, L)`` torch.long token ids (the input, or the encoder-decoder's target).
        src: ``(1, L)`` torch.long source ids, as long as ``ids`` (one slider picks the
            position in either).

    Returns:
        dict ``(case, position) -> InfluenceData`` for every case of :data:`CASES` and
        ``position`` in ``range(L)``.

    Raises:
        TypeError: ``models`` is not a dict of the three models, or as :func:`output_change`.
        ValueError: ``models`` lacks a key, ``src`` and ``ids`` differ in length, or as
            :func:`output_change`.
    """
    classes = _model_classes()
    if not isinstance(models, dict):
        raise TypeError(
            f"models must be a dict {tuple(classes)} -> model, got {type(models).__name__}"
        )
    for key, cls in classes.items():
        if key not in models:
            raise ValueError(f"models lacks {key!r}; it must have the keys {tuple(classes)}")
        if not isinstance(models[key], cls):
            raise TypeError(
                f"models[{key!r}] must be a {cls.__name__}, got {type(models[key]).__name__}"
            )
    if (
        getattr(src, "shape", None) is None
        or getattr(ids, "shape", None) is None
        or tuple(src.shape) != tuple(ids.shape)
    ):
        raise ValueError(
            f"src and ids must have the same shape (1, L), got "
            f"{tuple(getattr(src, 'shape', ()))} and "
            f"{tuple(getattr(ids, 'shape', ()))}"
        )
    n = ids.shape[1]
    table = {}
    for case in CASES:
        model = models[_ARCH[case]]
        two = _ARCH[case] == "encoder-decoder"
        rows = [
            output_change(
                model, ids, p, src=src if two else None, in_source=case.endswith("source token")
            )
            for p in range(n)
        ]
        both = np.concatenate(rows)
        positive = both[both > 0]
        top = float(positive.max()) if positive.size else 1.0
        bottom = float(positive.min()) if positive.size else 1.0
        yrange = (bottom / 4, top * 2)  # a log axis: room under the smallest bar
        for p, r in enumerate(rows):
            table[case, p] = InfluenceData(case, p, r, yrange)
    return table


def draw_influence(
    data: InfluenceData, *, language: str | None = None, height: int = 380, width: int = COLUMN_PX
):
    """Draw one setting: a bar per output position, its height the size of the change.

    Trace order: 0 the bars of the outputs that moved (the changed position orange when the
    change is in the same sequence, the others blue), 1 markers at 0 for the outputs that did
    not move at all (a difference of exactly 0), drawn at the bottom of the logarithmic axis
    and labelled "0".

    Args:
        data: from :func:`influence_data` (or an :class:`InfluenceData` made by hand).
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: the figure's height in px, without the title, >= 10.
        width: the width in px the figure is drawn at (default :data:`attnbook.viz.COLUMN_PX`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not an :class:`InfluenceData`, or ``height`` or ``width`` not
            an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room or ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, InfluenceData, "data", "influence_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    change, moved = data.change, data.moved
    L, p = len(change), data.position
    in_source = data.case.endswith("source token")
    xs = [str(i) for i in range(L)]
    grid = panel_grid(width, [""], height=height, left=70, right=20, bottom=10)
    fig, (cell,) = grid.figure, grid.cells
    colors = [ORANGE if (i == p and not in_source) else BLUE for i in range(L)]
    fig.add_trace(
        go.Bar(
            x=[xs[i] for i in range(L) if moved[i]],
            y=change[moved],
            marker_color=[colors[i] for i in range(L) if moved[i]],
            name=_("moved"),
            text=[
                _("output {i}: moved by {size}", i=i, size=f"{change[i]:.3g}")
                for i in range(L)
                if moved[i]
            ],
            hovertemplate="%{text}<extra></extra>",
            textposition="none",
        ),
        **cell,
    )
    still = [i for i in range(L) if not moved[i]]
    bottom = data.yrange[0] * 1.15  # the marker's line just above the axis
    fig.add_trace(
        go.Scatter(
            x=[xs[i] for i in still],
            y=[bottom] * len(still),
            mode="markers+text",
            marker=dict(color=GREY, size=9, symbol="line-ew-open", line=dict(width=3)),
            text=["0"] * len(still),
            textposition="top center",
            textfont=dict(color=GREY),
            name=_("unchanged"),
            customdata=[_("output {i}: unchanged (exactly 0)", i=i) for i in still],
            hovertemplate="%{customdata}<extra></extra>",
        ),
        **cell,
    )
    where = {
        "encoder-only": _("encoder-only: token {p} changed", p=p),
        "decoder-only": _("decoder-only: token {p} changed", p=p),
        "encoder-decoder, target token": _("encoder-decoder: target token {p} changed", p=p),
        "encoder-decoder, source token": _("encoder-decoder: source token {p} changed", p=p),
    }[data.case]
    n_moved = int(moved.sum())
    count = _.ngettext(
        "{n} of {total} output moves", "{n} of {total} outputs move", n_moved, total=L
    )
    why = {
        "encoder-only": _("bidirectional self-attention: every output sees every token"),
        "decoder-only": _(
            "causal self-attention: an output sees only the tokens up to its own position"
        ),
        "encoder-decoder, target token": _(
            "the decoder's causal self-attention: an output "
            "sees only the target tokens up to its own position"
        ),
        "encoder-decoder, source token": _(
            "cross-attention: every target position reads the whole source"
        ),
    }[data.case]
    title = (
        f"{_html.escape(where)} — {_html.escape(count)}"
        f"<br><span style='color:{GREY}'>{_html.escape(why)}</span>"
    )
    caption_title(fig, title, size=15)
    fig.update_layout(showlegend=False, bargap=0.25)
    fig.update_xaxes(
        title_text=_("output position i"),
        type="category",
        categoryorder="array",
        categoryarray=xs,
        range=[-0.5, L - 0.5],
        **cell,
    )
    fig.update_yaxes(
        title_text=_("size of the output's change (log scale)"),
        type="log",
        dtick=1,
        range=[np.log10(data.yrange[0]), np.log10(data.yrange[1])],
        **cell,
    )
    return fig


def influence_explorer(
    models: dict, ids, src, *, case: str = "decoder-only", position: int | None = None
) -> Explorer:
    """The influence explorer (chapter 10): change one token, see which outputs move.

    Controls: ``case`` (one of :data:`CASES`) and ``position`` (a slider over the token
    positions). Every setting is computed once, when the explorer is made, by
    :func:`influence_data` (two forward passes per setting), and drawn by
    :func:`draw_influence`.

    Args:
        models: the three models (see :func:`influence_data`).
        ids: ``(1, L)`` torch.long ids, ``L`` in 2..32.
        src: ``(1, L)`` torch.long source ids of the encoder-decoder.
        case: the initial case, one of :data:`CASES`.
        position: the initial position, ``0 <= position < L`` (default ``L // 2``).

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError, ValueError: naming the argument, as :func:`influence_data`, for an unknown
            ``case``, or a ``position`` out of range.
    """
    check_choice(case, "case", CASES)
    n = getattr(ids, "shape", (0, 0))[-1] if getattr(ids, "ndim", 0) == 2 else 0
    if not 2 <= n <= 32:
        raise ValueError(
            f"ids must have shape (1, L) with L in 2..32, got {tuple(getattr(ids, 'shape', ()))}"
        )
    position = n // 2 if position is None else check_int(position, "position", 0, n - 1)
    table = influence_data(models, ids, src)

    def compute(case, position):
        return table[case, position]

    controls = [
        Control("case", "model", "select", CASES, case, plain_label="model"),
        Control(
            "position",
            "token changed",
            "slider",
            tuple(range(n)),
            position,
            plain_label="token changed",
        ),
    ]
    return Explorer(controls, title="influence explorer", compute=compute, draw=draw_influence)
