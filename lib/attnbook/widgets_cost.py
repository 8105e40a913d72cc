"""The cost explorers of chapter 11: the O(n²) meter and the KV-cache calculator.

Both are :class:`attnbook.widgets.Explorer` s (live ipywidgets in JupyterLab, precomputed static
HTML in the book) whose render functions draw what the library computes:

* :func:`quadratic_cost_explorer`: the memory of the ``n x n`` score matrix
  (:func:`score_matrix_bytes`) and the FLOPs of the two attention matmuls
  (:func:`attention_flops`) against the sequence length ``n``, with the factor by which both
  grow relative to a reference length.
* :func:`kv_cache_explorer`: the KV-cache size of published models
  (:data:`attnbook.kv_cache.PRESETS`, :func:`attnbook.kv_cache.kv_cache_bytes`) against the
  context length, for a batch size and a storage dtype, next to the memory of the model's
  weights (:func:`attnbook.models.param_count`).

plotly and ipywidgets are imported when an explorer or figure is built.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

from . import viz
from .kv_cache import DTYPE_BYTES, PRESETS, kv_cache_bytes
from .models import param_count
from .widgets import Control, Explorer

__all__ = [
    "score_matrix_bytes",
    "attention_flops",
    "quadratic_cost_figure",
    "quadratic_cost_explorer",
    "kv_cache_figure",
    "kv_cache_explorer",
    "SEQ_LEN_VALUES",
    "CONTEXT_VALUES",
]

#: The slider stops of the sequence length in the O(n²) meter, 512 to 131072 tokens.
SEQ_LEN_VALUES = tuple(2**i for i in range(9, 18))
#: The slider stops of the context length in the KV-cache calculator, 1024 to 131072 tokens.
CONTEXT_VALUES = tuple(2**i for i in range(10, 18))
_GIB = 2**30


def _check_count(value, name: str, lo: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def score_matrix_bytes(seq_len: int, n_heads: int = 1, batch: int = 1,
                       dtype: str = "float32") -> int:
    """Bytes of the attention score matrices of one layer: ``batch * n_heads * n * n`` numbers.

    This is what a naive implementation materialises (once for the scores, and usually again
    for the weights); FlashAttention never does.

    Args:
        seq_len: ``n``, queries = keys (self-attention), >= 0.
        n_heads: heads, >= 1.
        batch: sequences, >= 1.
        dtype: element type, a key of :data:`attnbook.kv_cache.DTYPE_BYTES`.

    Returns:
        Bytes, an ``int``.

    Raises:
        TypeError: for a non-integer count.
        ValueError: for a count out of range or an unknown dtype.
    """
    n = _check_count(seq_len, "seq_len", 0)
    h = _check_count(n_heads, "n_heads")
    b = _check_count(batch, "batch")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(DTYPE_BYTES)}")
    return int(b * h * n * n * DTYPE_BYTES[dtype])


def attention_flops(seq_len: int, d_model: int, batch: int = 1) -> int:
    """FLOPs of the two matmuls of one self-attention layer: ``4 * batch * n**2 * d_model``.

    ``Q K^T`` and ``P V`` each take ``n * n * d_model`` multiply-adds summed over the heads
    (``n_heads * head_dim = d_model``), 2 FLOPs each; the projections (``8 n d_model**2``) are
    not counted — they grow only linearly in ``n``.

    Args:
        seq_len: ``n``, >= 0.
        d_model: ``n_heads * head_dim``, >= 1.
        batch: sequences, >= 1.

    Returns:
        FLOPs, an ``int``.

    Raises:
        TypeError: for a non-integer argument.
        ValueError: for an argument out of range.

    Source: Vaswani et al. (2017), table 1 (``O(n² d)`` per self-attention layer); Dao et al.
    (2022), section 4 (the ``4 n² d`` FLOP count).
    """
    n = _check_count(seq_len, "seq_len", 0)
    d = _check_count(d_model, "d_model")
    b = _check_count(batch, "batch")
    return int(4 * b * n * n * d)


def _fmt_bytes(x: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= size:
            return f"{x / size:.3g} {unit}"
    return f"{x:.3g} B"


def quadratic_cost_figure(seq_len: int = 32768, n_heads: int = 32, dtype: str = "float32", *,
                          head_dim: int = 128, ref_len: int = 2048,
                          seq_lens: Sequence[int] = SEQ_LEN_VALUES, height: int = 430):
    """Figure of the O(n²) meter: score-matrix memory and attention FLOPs against ``n``.

    Left: :func:`score_matrix_bytes` (one layer, batch 1) in GiB on log-log axes, with the
    chosen ``n`` marked. Right: the growth factor ``(n / ref_len)**2`` of both memory and
    FLOPs relative to ``ref_len`` (bars), and the factor ``n / ref_len`` a linear-cost method
    would pay (line). Trace order: 0 memory curve, 1 chosen point, 2 quadratic factor bars,
    3 linear factor line. ``meta`` of trace 1 holds the chosen point's ``bytes``, ``flops``
    (:func:`attention_flops` with ``d_model = n_heads * head_dim``) and ``factor``.

    Args:
        seq_len: the chosen ``n``, one of ``seq_lens``.
        n_heads: heads of the layer.
        dtype: score dtype, a key of :data:`attnbook.kv_cache.DTYPE_BYTES`.
        head_dim: per-head width (for the FLOPs).
        ref_len: the reference length of the growth factor.
        seq_lens: the lengths drawn.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``seq_len`` is not one of ``seq_lens`` or an argument is out of range.
    """
    import plotly.graph_objects as go

    seq_lens = tuple(int(n) for n in seq_lens)
    if seq_len not in seq_lens:
        raise ValueError(f"seq_len={seq_len!r} is not one of {seq_lens}")
    ref_len = _check_count(ref_len, "ref_len")
    mem = np.array([score_matrix_bytes(n, n_heads, 1, dtype) for n in seq_lens]) / _GIB
    chosen_bytes = score_matrix_bytes(seq_len, n_heads, 1, dtype)
    flops = attention_flops(seq_len, n_heads * _check_count(head_dim, "head_dim"))
    factor = (seq_len / ref_len) ** 2
    quad = [(n / ref_len) ** 2 for n in seq_lens]
    lin = [n / ref_len for n in seq_lens]
    labels = [f"{n // 1024}K" if n >= 1024 else str(n) for n in seq_lens]
    colors = [viz._ORANGE if n == seq_len else "#9bb8dc" for n in seq_lens]
    traces = [
        go.Scatter(x=list(seq_lens), y=mem, mode="lines+markers", name="score matrices",
                   line=dict(color=viz._BLUE), xaxis="x", yaxis="y",
                   hovertemplate="n = %{x}: %{y:.3g} GiB<extra></extra>"),
        go.Scatter(x=[seq_len], y=[chosen_bytes / _GIB], mode="markers", name="chosen n",
                   marker=dict(size=14, color=viz._ORANGE), xaxis="x", yaxis="y",
                   meta=dict(bytes=chosen_bytes, flops=flops, factor=factor),
                   hovertemplate="n = %{x}: %{y:.3g} GiB<extra></extra>"),
        go.Bar(x=labels, y=quad, marker=dict(color=colors), name="(n / n₀)²", xaxis="x2",
               yaxis="y2", hovertemplate="n = %{x}: %{y:.4g}× the cost at n₀<extra></extra>"),
        go.Scatter(x=labels, y=lin, mode="lines+markers", name="n / n₀ (linear)",
                   line=dict(color=viz._GREY, dash="dash"), xaxis="x2", yaxis="y2",
                   hovertemplate="linear: %{y:.4g}×<extra></extra>"),
    ]
    title = (f"n = {seq_len:,}: {_fmt_bytes(chosen_bytes)} of scores per layer "
             f"({n_heads} head{'s' if n_heads != 1 else ''}, {dtype})<br>"
             f"{flops / 1e12:.3g} TFLOP per layer, {factor:.4g}× the cost at n₀ = {ref_len:,}")
    layout = go.Layout(
        template=viz._EMPTY_TEMPLATE, font=viz._FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center", font=dict(size=14)),
        margin=dict(l=70, r=20, t=110, b=60),
        xaxis=viz._axis(domain=[0.0, 0.44], type="log", title=dict(text="sequence length n"),
                        anchor="y", tickvals=list(seq_lens)[::2],
                        ticktext=labels[::2]),
        yaxis=viz._axis(type="log", title=dict(text="GiB of n × n scores (one layer)"),
                        anchor="x", dtick=1, exponentformat="power"),
        xaxis2=viz._axis(domain=[0.56, 1.0], type="category",
                         title=dict(text="sequence length n"), anchor="y2"),
        yaxis2=viz._axis(type="log", title=dict(text=f"cost relative to n₀ = {ref_len:,}"),
                         anchor="x2", dtick=1, exponentformat="power"),
        legend=dict(orientation="h", x=0.5, xanchor="center", y=1.0, yanchor="bottom",
                    font=dict(size=12)),
        showlegend=True,
    )
    return go.Figure(data=traces, layout=layout)


def quadratic_cost_explorer(seq_len: int = 32768, n_heads: int = 32, dtype: str = "float32",
                            *, head_dim: int = 128, ref_len: int = 2048) -> Explorer:
    """The O(n²) meter (chapter 11): drag ``n`` and watch the score matrix grow as ``n²``.

    Controls: ``seq_len`` (a slider over :data:`SEQ_LEN_VALUES`), ``n_heads`` (1, 8 or 32) and
    ``dtype`` (float32, bfloat16). The figure is :func:`quadratic_cost_figure`.

    Args:
        seq_len: initial ``n``, one of :data:`SEQ_LEN_VALUES`.
        n_heads: initial number of heads, one of 1, 8, 32.
        dtype: initial score dtype, ``"float32"`` or ``"bfloat16"``.
        head_dim: per-head width for the FLOPs.
        ref_len: reference length of the growth factor.

    Returns:
        :class:`attnbook.widgets.Explorer` (54 precomputed settings).

    Raises:
        ValueError: if an initial value is not one of its control's options.
    """
    heads = (1, 8, 32)
    dtypes = ("float32", "bfloat16")
    for name, value, options in (("seq_len", seq_len, SEQ_LEN_VALUES), ("n_heads", n_heads, heads),
                                 ("dtype", dtype, dtypes)):
        if isinstance(value, (bool, np.bool_)) or value not in options:
            raise ValueError(f"{name}={value!r} is not one of the allowed values {options}")

    def render(seq_len, n_heads, dtype):
        return quadratic_cost_figure(seq_len, n_heads, dtype, head_dim=head_dim, ref_len=ref_len)

    controls = [
        Control("seq_len", "sequence length n", "slider", SEQ_LEN_VALUES, int(seq_len),
                labels=[f"{n:,}" for n in SEQ_LEN_VALUES]),
        Control("n_heads", "heads", "select", heads, int(n_heads)),
        Control("dtype", "score dtype", "select", dtypes, dtype),
    ]
    return Explorer(controls, render, title="O(n²) meter")


def _weights_bytes(config) -> int | None:
    """bfloat16 weights of a preset, or None where param_count does not model it (MLA/MoE)."""
    if config.uses_mla:
        return None
    return 2 * param_count(config)


def kv_cache_figure(model: str = "Qwen2-7B", seq_len: int = 131072, batch: int = 1,
                    dtype: str = "bfloat16", *, seq_lens: Sequence[int] = CONTEXT_VALUES,
                    height: int = 430):
    """Figure of the KV-cache calculator: cache GiB against context length for one model.

    Trace order: 0 the cache size :func:`attnbook.kv_cache.kv_cache_bytes` at every length of
    ``seq_lens`` (GiB), 1 the chosen length (its ``meta`` holds ``bytes``, ``bytes_per_token``
    and ``weights_bytes``), 2 the bfloat16 weights of the model, ``2 * param_count`` bytes, as a
    horizontal line (empty for DeepSeek-V2, whose mixture-of-experts weights
    :func:`attnbook.models.param_count` does not model).

    Args:
        model: a key of :data:`attnbook.kv_cache.PRESETS`.
        seq_len: the chosen context length, one of ``seq_lens``.
        batch: sequences in the batch.
        dtype: cache dtype, a key of :data:`attnbook.kv_cache.DTYPE_BYTES`.
        seq_lens: the context lengths drawn.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: for an unknown model, a ``seq_len`` not in ``seq_lens``, or arguments
            :func:`attnbook.kv_cache.kv_cache_bytes` rejects.
    """
    import plotly.graph_objects as go

    if model not in PRESETS:
        raise ValueError(f"model={model!r} is not one of {tuple(PRESETS)}")
    seq_lens = tuple(int(n) for n in seq_lens)
    if seq_len not in seq_lens:
        raise ValueError(f"seq_len={seq_len!r} is not one of {seq_lens}")
    cfg = PRESETS[model]
    cache = np.array([kv_cache_bytes(cfg, n, batch, dtype) for n in seq_lens]) / _GIB
    chosen = kv_cache_bytes(cfg, seq_len, batch, dtype)
    per_token = kv_cache_bytes(cfg, 1, 1, dtype)
    weights = _weights_bytes(cfg)
    traces = [
        go.Scatter(x=list(seq_lens), y=cache, mode="lines+markers", name="KV cache",
                   line=dict(color=viz._BLUE),
                   hovertemplate="%{x:,} tokens: %{y:.3g} GiB<extra></extra>"),
        go.Scatter(x=[seq_len], y=[chosen / _GIB], mode="markers", name="chosen context",
                   marker=dict(size=14, color=viz._ORANGE),
                   meta=dict(bytes=chosen, bytes_per_token=per_token, weights_bytes=weights),
                   hovertemplate="%{x:,} tokens: %{y:.3g} GiB<extra></extra>"),
        go.Scatter(x=[seq_lens[0], seq_lens[-1]] if weights else [],
                   y=[weights / _GIB] * 2 if weights else [], mode="lines",
                   name="weights (bfloat16)", line=dict(color=viz._GREY, dash="dash"),
                   hovertemplate="weights: %{y:.3g} GiB<extra></extra>"),
    ]
    window = (f"; sliding window {cfg.sliding_window:,}: the cache stops growing"
              if cfg.sliding_window else "")
    title = (f"{model}, {seq_len:,} tokens × batch {batch}, {dtype}:<br>KV cache "
             f"{_fmt_bytes(chosen)} ({_fmt_bytes(per_token)} per token{window})")
    ymax = max(cache.max(), (weights or 0) / _GIB) * 2
    ymin = cache.min() / 2
    layout = go.Layout(
        template=viz._EMPTY_TEMPLATE, font=viz._FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center", font=dict(size=14)),
        margin=dict(l=70, r=20, t=110, b=60),
        xaxis=viz._axis(type="log", title=dict(text="context length (tokens)"),
                        tickvals=list(seq_lens), ticktext=[f"{n // 1024}K" for n in seq_lens]),
        yaxis=viz._axis(type="log", title=dict(text="GiB (log scale)"),
                        range=[math.log10(ymin), math.log10(ymax)], dtick=1,
                        exponentformat="power"),
        legend=dict(orientation="h", x=0.5, xanchor="center", y=1.0, yanchor="bottom",
                    font=dict(size=12)),
        showlegend=True,
    )
    return go.Figure(data=traces, layout=layout)


def kv_cache_explorer(model: str = "Qwen2-7B", seq_len: int = 131072, batch: int = 1,
                      dtype: str = "bfloat16") -> Explorer:
    """The KV-cache calculator (chapter 11): cache size of real models against context length.

    Controls: ``model`` (the :data:`attnbook.kv_cache.PRESETS`), ``seq_len`` (a slider over
    :data:`CONTEXT_VALUES`), ``batch`` (1, 8, 64) and ``dtype`` (bfloat16, float8, int4). The
    figure is :func:`kv_cache_figure`.

    Args:
        model: initial model, a key of :data:`attnbook.kv_cache.PRESETS`.
        seq_len: initial context length, one of :data:`CONTEXT_VALUES`.
        batch: initial batch, one of 1, 8, 64.
        dtype: initial cache dtype, one of ``"bfloat16"``, ``"float8"``, ``"int4"``.

    Returns:
        :class:`attnbook.widgets.Explorer`.

    Raises:
        ValueError: if an initial value is not one of its control's options.
    """
    models = tuple(PRESETS)
    batches = (1, 8, 64)
    dtypes = ("bfloat16", "float8", "int4")
    for name, value, options in (("model", model, models), ("seq_len", seq_len, CONTEXT_VALUES),
                                 ("batch", batch, batches), ("dtype", dtype, dtypes)):
        if isinstance(value, (bool, np.bool_)) or value not in options:
            raise ValueError(f"{name}={value!r} is not one of the allowed values {options}")

    def render(model, seq_len, batch, dtype):
        return kv_cache_figure(model, seq_len, batch, dtype)

    controls = [
        Control("model", "model", "select", models, model),
        Control("seq_len", "context", "slider", CONTEXT_VALUES, int(seq_len),
                labels=[f"{n:,}" for n in CONTEXT_VALUES]),
        Control("batch", "batch", "select", batches, int(batch)),
        Control("dtype", "cache dtype", "select", dtypes, dtype),
    ]
    return Explorer(controls, render, title="KV-cache calculator")
