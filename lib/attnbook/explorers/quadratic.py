"""The O(L²) meter: the memory and FLOPs of attention's score matrix against sequence length L.

Two steps, as every explorer: :func:`quadratic_data` computes a setting with
:func:`attnbook.cost.score_matrix_bytes` and :func:`attnbook.cost.attention_flops`, and
:func:`draw_quadratic` draws it with every label made in the reader's language;
:func:`quadratic_cost_figure` does both in one call. The literature writes the cost O(n²), with
``n`` the sequence length; the book writes ``L``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import fonts, i18n
from ..checks import check_choice, check_increasing, check_instance, check_int
from ..cost import attention_flops, format_bytes, score_matrix_bytes
from ..viz import BLUE, COLUMN_PX, GREY, ORANGE
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "SEQ_LEN_VALUES",
    "N_HEADS_VALUES",
    "SCORE_DTYPES",
    "QuadraticData",
    "quadratic_data",
    "draw_quadratic",
    "quadratic_cost_figure",
    "quadratic_cost_explorer",
]

#: The slider stops of the sequence length ``L`` in the O(L²) meter, 512 to 131072 tokens.
SEQ_LEN_VALUES = tuple(2**i for i in range(9, 18))
#: The options of the number of heads in the O(L²) meter.
N_HEADS_VALUES = (1, 8, 32)
#: The score dtypes offered by the O(L²) meter.
SCORE_DTYPES = ("float32", "bfloat16")
_GIB = 2**30
#: Font size in px of the bars' length labels.
_TICK_PX = 12


@dataclass(frozen=True)
class QuadraticData:
    """One setting of the O(L²) meter, computed (what :func:`draw_quadratic` draws).

    Attributes:
        seq_len, n_heads, dtype, head_dim, ref_len: the setting (see :func:`quadratic_data`).
        seq_lens: int ``(N,)``, the lengths drawn.
        score_bytes: int64 ``(N,)``, bytes of one layer's score matrices at each length.
        chosen_bytes: bytes at ``seq_len``.
        flops: FLOPs of one layer's attention at ``seq_len``.
        factor: ``(seq_len / ref_len) ** 2``.
        quadratic: float64 ``(N,)``, ``(L / ref_len) ** 2`` at each length.
        linear: float64 ``(N,)``, ``L / ref_len`` at each length.
    """

    seq_len: int
    n_heads: int
    dtype: str
    head_dim: int
    ref_len: int
    seq_lens: np.ndarray
    score_bytes: np.ndarray
    chosen_bytes: int
    flops: int
    factor: float
    quadratic: np.ndarray
    linear: np.ndarray


def quadratic_data(
    seq_len: int = 32768,
    n_heads: int = 32,
    dtype: str = "float32",
    *,
    head_dim: int = 128,
    ref_len: int = 2048,
    seq_lens: Sequence[int] = SEQ_LEN_VALUES,
) -> QuadraticData:
    """Compute one setting of the O(L²) meter.

    Args:
        seq_len: the chosen ``L``, one of ``seq_lens``.
        n_heads: heads of the layer, >= 1.
        dtype: score dtype, a key of :data:`attnbook.config.DTYPE_BYTES`.
        head_dim: per-head width (for the FLOPs), >= 1.
        ref_len: the reference length ``L₀`` of the growth factor, >= 1.
        seq_lens: the lengths drawn, increasing integers >= 1.

    Returns:
        :class:`QuadraticData`: :func:`attnbook.cost.score_matrix_bytes` (one layer, batch 1)
        at every length and at ``seq_len``, :func:`attnbook.cost.attention_flops` at
        ``seq_len`` with ``d_model = n_heads * head_dim``, and the growth factors
        ``(L / ref_len) ** 2`` (memory and FLOPs alike) and ``L / ref_len`` (what a
        linear-cost method would pay).

    Raises:
        TypeError: if a size is not an integer or ``seq_lens`` not a sequence of integers.
        ValueError: if ``seq_len`` is not one of ``seq_lens``, ``dtype`` is unknown, or a size
            is out of range.
    """
    seq_lens = check_increasing(seq_lens, "seq_lens", minimum=1)
    check_choice(seq_len, "seq_len", seq_lens)
    seq_len = int(seq_len)
    ref_len = check_int(ref_len, "ref_len", 1)
    n_heads = check_int(n_heads, "n_heads", 1)
    head_dim = check_int(head_dim, "head_dim", 1)
    lens = np.array(seq_lens, dtype=np.int64)  # (N,)
    return QuadraticData(
        seq_len=seq_len,
        n_heads=n_heads,
        dtype=dtype,
        head_dim=head_dim,
        ref_len=ref_len,
        seq_lens=lens,
        score_bytes=score_matrix_bytes(lens, n_heads, 1, dtype),  # (N,)
        chosen_bytes=score_matrix_bytes(seq_len, n_heads, 1, dtype),
        flops=attention_flops(seq_len, n_heads * head_dim),
        factor=(seq_len / ref_len) ** 2,
        quadratic=(lens / ref_len) ** 2,
        linear=lens / ref_len,  # (N,) each
    )


def _length_text(n: int) -> str:
    """A length as the bars' axis writes it: ``512``, ``1K``, ``128K``."""
    return f"{n // 1024}K" if n >= 1024 else str(n)


def draw_quadratic(
    data: QuadraticData, *, language: str | None = None, height: int = 430, width: int = COLUMN_PX
):
    """Draw one setting of the O(L²) meter for ``width`` px, every label in ``language``.

    Left panel: the score matrices' memory in GiB on log-log axes, with the chosen ``L``
    marked. Right panel: the growth factor ``(L / L₀)²`` of both memory and FLOPs relative to
    ``ref_len`` (``L₀``; bars), and the factor ``L / L₀`` a linear-cost method would pay
    (line). Side by side in the book's column, one under the other on a phone
    (:func:`attnbook.explorers.layout.panel_grid`); the title (the chosen point's bytes, FLOPs
    and factor) is the caption above the plot.

    Trace order: 0 memory curve, 1 chosen point, 2 quadratic factor bars, 3 linear factor line.
    ``meta`` of trace 1 holds the chosen point's ``bytes``, ``flops`` and ``factor``.
    Annotations: 0 and 1 the panels' titles.

    Args:
        data: from :func:`quadratic_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, without the title, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`QuadraticData`, or ``height`` or ``width``
            not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, QuadraticData, "data", "quadratic_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    seq_lens = [int(n) for n in data.seq_lens]
    seq_len, ref_len = data.seq_len, data.ref_len
    labels = [_length_text(n) for n in seq_lens]
    colors = [ORANGE if n == seq_len else "#9bb8dc" for n in seq_lens]
    size_hover = _("L = {L}: {size} GiB", L="%{x}", size="%{y:.3g}") + "<extra></extra>"
    grid = panel_grid(
        width,
        [
            _("Memory of the score matrices"),
            _("Growth relative to L₀ = {ref_len}", ref_len=f"{ref_len:,}"),
        ],
        height=height,
        spacing_px=90,
        bottom=50,
    )
    fig, (left, right) = grid.figure, grid.cells
    fig.add_trace(
        go.Scatter(
            x=seq_lens,
            y=data.score_bytes / _GIB,
            mode="lines+markers",
            name=_("score matrices"),
            line=dict(color=BLUE),
            hovertemplate=size_hover,
        ),
        **left,
    )
    fig.add_trace(
        go.Scatter(
            x=[seq_len],
            y=[data.chosen_bytes / _GIB],
            mode="markers",
            name=_("chosen L"),
            marker=dict(size=14, color=ORANGE),
            meta=dict(bytes=data.chosen_bytes, flops=data.flops, factor=data.factor),
            hovertemplate=size_hover,
        ),
        **left,
    )
    fig.add_trace(
        go.Bar(
            x=labels,
            y=data.quadratic,
            marker=dict(color=colors),
            name="(L / L₀)²",
            hovertemplate=_("L = {L}: {factor}× the cost at L₀", L="%{x}", factor="%{y:.4g}")
            + "<extra></extra>",
        ),
        **right,
    )
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=data.linear,
            mode="lines+markers",
            name=_("L / L₀ (linear)"),
            line=dict(color=GREY, dash="dash"),
            hovertemplate=_("linear: {factor}×", factor="%{y:.4g}") + "<extra></extra>",
        ),
        **right,
    )
    # One tick label per bar where they fit side by side in the panel, else every other one
    # (the panel's width in px read from the grid's domain).
    lay = fig.layout
    d0, d1 = lay.xaxis2.domain
    slot = (d1 - d0) * (width - lay.margin.l - lay.margin.r) / len(labels)
    step = 1 if max(fonts.text_width(t, _TICK_PX) for t in labels) + 6 <= slot else 2
    fig.update_xaxes(
        type="log",
        title_text=_("sequence length L"),
        tickvals=seq_lens[::2],
        ticktext=labels[::2],
        **left,
    )
    fig.update_yaxes(
        type="log",
        title_text=_("GiB of L × L scores (one layer)"),
        dtick=1,
        exponentformat="power",
        **left,
    )
    fig.update_xaxes(
        type="category",
        title_text=_("sequence length L"),
        tickangle=0,
        tickvals=labels[::step],
        ticktext=labels[::step],
        tickfont=dict(size=_TICK_PX),
        **right,
    )
    fig.update_yaxes(
        type="log",
        title_text=_("cost relative to L₀ = {ref_len}", ref_len=f"{ref_len:,}"),
        dtick=1,
        exponentformat="power",
        **right,
    )
    title = _.ngettext(
        "L = {L}: {size} of scores per layer ({n} head, {dtype})<br>{tflop} TFLOP per layer, "
        "{factor}× the cost at L₀ = {ref_len}",
        "L = {L}: {size} of scores per layer ({n} heads, {dtype})<br>{tflop} TFLOP per layer, "
        "{factor}× the cost at L₀ = {ref_len}",
        data.n_heads,
        L=f"{seq_len:,}",
        size=format_bytes(data.chosen_bytes),
        dtype=data.dtype,
        tflop=f"{data.flops / 1e12:.3g}",
        factor=f"{data.factor:.4g}",
        ref_len=f"{ref_len:,}",
    )
    caption_title(fig, title)
    return fig


def quadratic_cost_figure(
    seq_len: int = 32768,
    n_heads: int = 32,
    dtype: str = "float32",
    *,
    head_dim: int = 128,
    ref_len: int = 2048,
    seq_lens: Sequence[int] = SEQ_LEN_VALUES,
    height: int = 430,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """Figure of the O(L²) meter: score-matrix memory and attention FLOPs against ``L``.

    :func:`draw_quadratic` of :func:`quadratic_data` (trace order and ``meta`` as there).

    Args:
        seq_len: the chosen ``L``, one of ``seq_lens``.
        n_heads: heads of the layer.
        dtype: score dtype, a key of :data:`attnbook.config.DTYPE_BYTES`.
        head_dim: per-head width (for the FLOPs).
        ref_len: the reference length ``L₀`` of the growth factor.
        seq_lens: the lengths drawn, increasing integers >= 1.
        height: figure height in px with the panels side by side, without the title, >= 10.
        language: see :func:`draw_quadratic`.
        width: the width in px the figure is drawn at (see :func:`draw_quadratic`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError, ValueError: as :func:`quadratic_data` and :func:`draw_quadratic`.
    """
    data = quadratic_data(
        seq_len, n_heads, dtype, head_dim=head_dim, ref_len=ref_len, seq_lens=seq_lens
    )
    return draw_quadratic(data, language=language, height=height, width=width)


def quadratic_cost_explorer(
    seq_len: int = 32768,
    n_heads: int = 32,
    dtype: str = "float32",
    *,
    head_dim: int = 128,
    ref_len: int = 2048,
) -> Explorer:
    """The O(L²) meter (chapter 11): drag ``L`` and watch the score matrix grow as ``L²``.

    Controls: ``seq_len`` (a slider over :data:`SEQ_LEN_VALUES`), ``n_heads``
    (:data:`N_HEADS_VALUES`) and ``dtype`` (:data:`SCORE_DTYPES`). Each setting is computed by
    :func:`quadratic_data` and drawn by :func:`draw_quadratic`.

    Args:
        seq_len: initial ``L``, one of :data:`SEQ_LEN_VALUES`.
        n_heads: initial number of heads, one of :data:`N_HEADS_VALUES`.
        dtype: initial score dtype, one of :data:`SCORE_DTYPES`.
        head_dim: per-head width for the FLOPs.
        ref_len: reference length of the growth factor.

    Returns:
        :class:`~attnbook.explorers.base.Explorer` (54 precomputed settings).

    Raises:
        TypeError: if ``head_dim`` or ``ref_len`` is not an integer.
        ValueError: if an initial value is not one of its control's options, or ``head_dim``
            or ``ref_len`` is < 1.
    """
    check_choice(seq_len, "seq_len", SEQ_LEN_VALUES)
    check_choice(n_heads, "n_heads", N_HEADS_VALUES)
    check_choice(dtype, "dtype", SCORE_DTYPES)
    head_dim = check_int(head_dim, "head_dim", 1)
    ref_len = check_int(ref_len, "ref_len", 1)

    def compute(seq_len, n_heads, dtype):
        return quadratic_data(seq_len, n_heads, dtype, head_dim=head_dim, ref_len=ref_len)

    controls = [
        Control(
            "seq_len",
            "sequence length L",
            "slider",
            SEQ_LEN_VALUES,
            int(seq_len),
            labels=lambda _: [f"{n:,}" for n in SEQ_LEN_VALUES],
        ),
        Control("n_heads", "heads", "select", N_HEADS_VALUES, int(n_heads)),
        Control(
            "dtype", "score dtype", "select", SCORE_DTYPES, dtype, labels=lambda _: SCORE_DTYPES
        ),  # names, the same in every language
    ]
    # Written as they are in both editions: the dtypes' names and the units TFLOP and TiB
    # (attnbook.i18n.KEPT_WORDS has FLOP and GiB but not these).
    return Explorer(
        controls,
        title="O(L²) meter",
        compute=compute,
        draw=draw_quadratic,
        kept_words=SCORE_DTYPES + ("TFLOP", "TiB"),
    )
