"""The O(L²) meter: the memory and FLOPs of attention's score matrix against sequence length L.

The figure draws :func:`attnbook.cost.score_matrix_bytes` and :func:`attnbook.cost.attention_flops`.
The literature writes the cost O(n²), with ``n`` the sequence length; the book writes ``L``.
Also importable from :mod:`attnbook.widgets_cost`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..checks import check_choice, check_increasing, check_int
from ..cost import attention_flops, format_bytes, score_matrix_bytes
from ..viz import BLUE, EMPTY_TEMPLATE, FONT, GREY, ORANGE, axis_style
from .base import Control, Explorer

__all__ = ["SEQ_LEN_VALUES", "N_HEADS_VALUES", "SCORE_DTYPES", "quadratic_cost_figure",
           "quadratic_cost_explorer"]

#: The slider stops of the sequence length ``L`` in the O(L²) meter, 512 to 131072 tokens.
SEQ_LEN_VALUES = tuple(2**i for i in range(9, 18))
#: The options of the number of heads in the O(L²) meter.
N_HEADS_VALUES = (1, 8, 32)
#: The score dtypes offered by the O(L²) meter.
SCORE_DTYPES = ("float32", "bfloat16")
_GIB = 2**30


def quadratic_cost_figure(seq_len: int = 32768, n_heads: int = 32, dtype: str = "float32", *,
                          head_dim: int = 128, ref_len: int = 2048,
                          seq_lens: Sequence[int] = SEQ_LEN_VALUES, height: int = 430):
    """Figure of the O(L²) meter: score-matrix memory and attention FLOPs against ``L``.

    Left: :func:`attnbook.cost.score_matrix_bytes` (one layer, batch 1) in GiB on log-log
    axes, with the chosen ``L`` marked. Right: the growth factor ``(L / ref_len)**2`` of both
    memory and FLOPs relative to ``ref_len`` (``L₀``; bars), and the factor ``L / ref_len`` a
    linear-cost method would pay (line). Trace order: 0 memory curve, 1 chosen point,
    2 quadratic factor bars, 3 linear factor line. ``meta`` of trace 1 holds the chosen
    point's ``bytes``, ``flops`` (:func:`attnbook.cost.attention_flops` with
    ``d_model = n_heads * head_dim``) and ``factor``.

    Args:
        seq_len: the chosen ``L``, one of ``seq_lens``.
        n_heads: heads of the layer.
        dtype: score dtype, a key of :data:`attnbook.config.DTYPE_BYTES`.
        head_dim: per-head width (for the FLOPs).
        ref_len: the reference length ``L₀`` of the growth factor.
        seq_lens: the lengths drawn, increasing integers >= 1.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if a size is not an integer or ``seq_lens`` not a sequence of integers.
        ValueError: if ``seq_len`` is not one of ``seq_lens``, ``dtype`` is unknown, or a size
            is out of range.
    """
    import plotly.graph_objects as go

    seq_lens = check_increasing(seq_lens, "seq_lens", minimum=1)
    check_choice(seq_len, "seq_len", seq_lens)
    seq_len = int(seq_len)
    ref_len = check_int(ref_len, "ref_len", 1)
    n_heads = check_int(n_heads, "n_heads", 1)
    head_dim = check_int(head_dim, "head_dim", 1)
    mem = score_matrix_bytes(np.array(seq_lens), n_heads, 1, dtype) / _GIB  # (len(seq_lens),)
    chosen_bytes = score_matrix_bytes(seq_len, n_heads, 1, dtype)
    flops = attention_flops(seq_len, n_heads * head_dim)
    factor = (seq_len / ref_len) ** 2
    quad = [(n / ref_len) ** 2 for n in seq_lens]
    lin = [n / ref_len for n in seq_lens]
    labels = [f"{n // 1024}K" if n >= 1024 else str(n) for n in seq_lens]
    colors = [ORANGE if n == seq_len else "#9bb8dc" for n in seq_lens]
    traces = [
        go.Scatter(x=list(seq_lens), y=mem, mode="lines+markers", name="score matrices",
                   line=dict(color=BLUE), xaxis="x", yaxis="y",
                   hovertemplate="L = %{x}: %{y:.3g} GiB<extra></extra>"),
        go.Scatter(x=[seq_len], y=[chosen_bytes / _GIB], mode="markers", name="chosen L",
                   marker=dict(size=14, color=ORANGE), xaxis="x", yaxis="y",
                   meta=dict(bytes=chosen_bytes, flops=flops, factor=factor),
                   hovertemplate="L = %{x}: %{y:.3g} GiB<extra></extra>"),
        go.Bar(x=labels, y=quad, marker=dict(color=colors), name="(L / L₀)²", xaxis="x2",
               yaxis="y2", hovertemplate="L = %{x}: %{y:.4g}× the cost at L₀<extra></extra>"),
        go.Scatter(x=labels, y=lin, mode="lines+markers", name="L / L₀ (linear)",
                   line=dict(color=GREY, dash="dash"), xaxis="x2", yaxis="y2",
                   hovertemplate="linear: %{y:.4g}×<extra></extra>"),
    ]
    title = (f"L = {seq_len:,}: {format_bytes(chosen_bytes)} of scores per layer "
             f"({n_heads} head{'s' if n_heads != 1 else ''}, {dtype})<br>"
             f"{flops / 1e12:.3g} TFLOP per layer, {factor:.4g}× the cost at L₀ = {ref_len:,}")
    layout = go.Layout(
        template=EMPTY_TEMPLATE, font=FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center", font=dict(size=14)),
        margin=dict(l=70, r=20, t=110, b=60),
        xaxis=axis_style(domain=[0.0, 0.44], type="log", title=dict(text="sequence length L"),
                         anchor="y", tickvals=list(seq_lens)[::2],
                         ticktext=labels[::2]),
        yaxis=axis_style(type="log", title=dict(text="GiB of L × L scores (one layer)"),
                         anchor="x", dtick=1, exponentformat="power"),
        xaxis2=axis_style(domain=[0.56, 1.0], type="category",
                          title=dict(text="sequence length L"), anchor="y2"),
        yaxis2=axis_style(type="log", title=dict(text=f"cost relative to L₀ = {ref_len:,}"),
                          anchor="x2", dtick=1, exponentformat="power"),
        legend=dict(orientation="h", x=0.5, xanchor="center", y=1.0, yanchor="bottom",
                    font=dict(size=12)),
        showlegend=True,
    )
    return go.Figure(data=traces, layout=layout)


def quadratic_cost_explorer(seq_len: int = 32768, n_heads: int = 32, dtype: str = "float32",
                            *, head_dim: int = 128, ref_len: int = 2048) -> Explorer:
    """The O(L²) meter (chapter 11): drag ``L`` and watch the score matrix grow as ``L²``.

    Controls: ``seq_len`` (a slider over :data:`SEQ_LEN_VALUES`), ``n_heads``
    (:data:`N_HEADS_VALUES`) and ``dtype`` (:data:`SCORE_DTYPES`). The figure is
    :func:`quadratic_cost_figure`.

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

    def render(seq_len, n_heads, dtype):
        return quadratic_cost_figure(seq_len, n_heads, dtype, head_dim=head_dim, ref_len=ref_len)

    controls = [
        Control("seq_len", "sequence length L", "slider", SEQ_LEN_VALUES, int(seq_len),
                labels=[f"{n:,}" for n in SEQ_LEN_VALUES]),
        Control("n_heads", "heads", "select", N_HEADS_VALUES, int(n_heads)),
        Control("dtype", "score dtype", "select", SCORE_DTYPES, dtype),
    ]
    return Explorer(controls, render, title="O(L²) meter")
