"""Explorers of chapters 7 and 8: the KV cache of real configurations, and positions.

* :func:`kv_cache_explorer` (chapter 7): pick a published model (:data:`attnbook.kv_cache.PRESETS`),
  the context length, the batch size and the storage dtype; the figure shows the KV cache in
  GiB, computed by :func:`attnbook.kv_cache.kv_cache_bytes`, for the model as published and for
  the same model with multi-head (``n_kv_heads = n_heads``) and multi-query
  (``n_kv_heads = 1``) attention (:func:`kv_variants`).
* :func:`position_explorer` (chapter 8): pick a position ``m``, a frequency pair ``i`` and the
  base; the figure shows RoPE's rotation of pair ``i`` (:func:`attnbook.positional.apply_rope`),
  the sinusoidal encoding's two dimensions ``2i, 2i + 1`` of the same frequency
  (:func:`attnbook.positional.sinusoidal_encoding`) and the RoPE score of a query and a key as a
  function of their offset.

Both are :class:`attnbook.widgets.Explorer` s: live ipywidgets in JupyterLab, precomputed
plotly frames in the built book. Every number drawn is computed by the library.
"""

from __future__ import annotations

import html as _html
import math
from typing import Sequence

import numpy as np

from . import viz
from .positional import apply_rope, rope_frequencies, sinusoidal_encoding
from .widgets import Control, Explorer

__all__ = [
    "CONTEXT_VALUES",
    "BATCH_VALUES",
    "KV_DTYPES",
    "POSITION_VALUES",
    "BASE_VALUES",
    "format_bytes",
    "kv_variants",
    "kv_cache_figure",
    "kv_cache_explorer",
    "position_figure",
    "position_explorer",
]

#: Stops of the context-length slider, in tokens (1 Ki to 128 Ki).
CONTEXT_VALUES = (1024, 4096, 16384, 32768, 131072)
#: Stops of the batch-size slider (sequences decoded together).
BATCH_VALUES = (1, 4, 16, 64)
#: Storage dtypes offered by the KV-cache explorer (keys of ``kv_cache.DTYPE_BYTES``).
KV_DTYPES = ("float32", "bfloat16", "float8")
#: Stops of the position slider of the position explorer.
POSITION_VALUES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 32)
#: RoPE / sinusoidal bases offered by the position explorer (10000 as in Vaswani et al. 2017
#: and RoFormer, 500000 as Llama 3's ``rope_theta``).
BASE_VALUES = (100.0, 10000.0, 500000.0)

_GIB = 2**30
_GREEN = "#2e7d32"
_VARIANT_COLORS = (viz._ORANGE, viz._BLUE, _GREEN)
# Curve of the KV-cache panel: powers of two from 512 to 131072 tokens.
_CURVE_CONTEXTS = tuple(2**p for p in range(9, 18))


def format_bytes(n) -> str:
    """A byte count in binary units, e.g. ``57344 -> "56 KiB"``, ``3 * 2**29 -> "1.5 GiB"``.

    Args:
        n: number of bytes, an integer or float ``>= 0``.

    Returns:
        ``"<n> B"`` below 1 KiB; otherwise the largest unit of KiB, MiB, GiB, TiB (powers of
        1024) in which the value is at least 1, with no decimals when it is a whole number and
        three significant digits otherwise.

    Raises:
        ValueError: if ``n`` is negative, NaN or infinite.
    """
    x = float(n)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"n must be a finite number of bytes >= 0, got {n!r}")
    if x < 1024:
        return f"{x:g} B"
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        v = x / 1024**power
        if v >= 1:
            if v.is_integer():
                return f"{int(v)} {unit}"
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def kv_variants(config) -> dict:
    """The published attention of a model next to its MHA and MQA counterparts.

    Every variant keeps the model's layers, head size and sliding window and changes only what
    the KV cache holds per layer and token:

    * ``"MHA"``: ``n_kv_heads = n_heads`` (one key/value head per query head);
    * ``"published"``: the configuration as published (MHA, GQA or MLA);
    * ``"MQA"``: ``n_kv_heads = 1`` (Shazeer, 2019).

    For a multi-head latent attention model (DeepSeek-V2) the MHA and MQA variants use heads of
    ``v_head_dim`` (128), the ``d_h`` of the comparison in DeepSeek-V2's table 1.

    Args:
        config: an :class:`attnbook.models.ModelConfig` (e.g. ``kv_cache.PRESETS["Qwen2-7B"]``).

    Returns:
        ``{"MHA": ModelConfig, "published": ModelConfig, "MQA": ModelConfig}`` in that order.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.models.ModelConfig`.

    Source: Vaswani et al. (2017), section 3.2.2; Shazeer (2019); Ainslie et al. (2023);
    DeepSeek-AI, "DeepSeek-V2" (2024), table 1.
    """
    from .models import ModelConfig

    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be an attnbook.models.ModelConfig, got "
                        f"{type(config).__name__}")
    no_mla = dict(kv_lora_rank=None, q_lora_rank=None, qk_nope_head_dim=None,
                  qk_rope_head_dim=None, v_head_dim=None)
    if config.uses_mla:
        plain = config.replace(head_dim=config.v_head_dim, **no_mla)
    else:
        plain = config
    return {
        "MHA": plain.replace(n_kv_heads=config.n_heads),
        "published": config,
        "MQA": plain.replace(n_kv_heads=1),
    }


def _describe(config) -> str:
    """One line on what the published model caches per layer and token."""
    if config.uses_mla:
        return (f"MLA: latent {config.kv_lora_rank} + RoPE key {config.qk_rope_head_dim} "
                f"({config.n_heads} heads)")
    kind = ("MHA" if config.kv_heads == config.n_heads
            else "MQA" if config.kv_heads == 1 else "GQA")
    text = (f"{kind}: {config.n_heads} query heads, {config.kv_heads} KV "
            f"head{'s' if config.kv_heads != 1 else ''} of {config.head_size}")
    if config.sliding_window is not None:
        text += f", window {config.sliding_window}"
    return text


def kv_cache_figure(model: str = "Qwen2-7B", context: int = 32768, batch: int = 1,
                    dtype: str = "bfloat16", *, height: int = 440):
    """Figure of the KV-cache explorer: cache size against context, and at one context.

    Left: the KV cache in GiB (log-log) against the context length, 512 to 131072 tokens, for
    the three :func:`kv_variants` of ``model``; a marker at ``context``. Right: the three sizes
    at ``context`` as bars, labelled with :func:`format_bytes`. All sizes are
    :func:`attnbook.kv_cache.kv_cache_bytes` ``(variant, tokens, batch, dtype)``.

    Trace order: 0-2 the curves of ``MHA``, ``published``, ``MQA`` (``x`` tokens, ``y`` GiB),
    3 the markers at ``context``, 4 the bars
    (``x`` GiB, ``meta["bytes"]`` exact, ``meta["per_token"]`` bytes per token per sequence).

    Args:
        model: a key of :data:`attnbook.kv_cache.PRESETS`.
        context: tokens in the cache, >= 1.
        batch: sequences, >= 1.
        dtype: a key of :data:`attnbook.kv_cache.DTYPE_BYTES`.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: for an unknown model or dtype, or ``context``/``batch`` < 1.
    """
    import plotly.graph_objects as go

    from .kv_cache import DTYPE_BYTES, PRESETS, kv_cache_bytes

    if model not in PRESETS:
        raise ValueError(f"model={model!r} is not one of {tuple(PRESETS)}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype={dtype!r} is not one of {tuple(DTYPE_BYTES)}")
    for name, val in (("context", context), ("batch", batch)):
        if isinstance(val, (bool, np.bool_)) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    context, batch = int(context), int(batch)
    config = PRESETS[model]
    variants = kv_variants(config)
    labels = {
        "MHA": f"MHA ({config.n_heads} KV heads)",
        "published": f"as published ({_describe(config).split(':')[0]})",
        "MQA": "MQA (1 KV head)",
    }
    curve_x = sorted(set(_CURVE_CONTEXTS) | {context})
    traces = []
    at_context = {}
    for (key, cfg), color in zip(variants.items(), _VARIANT_COLORS):
        b = [kv_cache_bytes(cfg, t, batch, dtype) for t in curve_x]
        at_context[key] = kv_cache_bytes(cfg, context, batch, dtype)
        traces.append(dict(
            type="scatter", x=curve_x, y=[v / _GIB for v in b], mode="lines", name=labels[key],
            line=dict(color=color, width=3 if key == "published" else 2,
                      dash="solid" if key == "published" else "dot"),
            xaxis="x", yaxis="y",
            hovertemplate="%{x} tokens: %{y:.3g} GiB<extra>" + _html.escape(labels[key])
            + "</extra>",
        ))
    keys = list(variants)
    traces.append(dict(
        type="scatter", x=[context] * 3, y=[at_context[k] / _GIB for k in keys], mode="markers",
        marker=dict(color=list(_VARIANT_COLORS), size=10, line=dict(color="white", width=1)),
        showlegend=False, xaxis="x", yaxis="y", hoverinfo="skip", name="at context",
    ))
    per_token = [kv_cache_bytes(variants[k], 1, 1, dtype) for k in keys]
    traces.append(dict(
        type="bar", y=[labels[k] for k in keys], x=[at_context[k] / _GIB for k in keys],
        orientation="h",
        marker=dict(color=list(_VARIANT_COLORS)), xaxis="x2", yaxis="y2", showlegend=False,
        text=[format_bytes(at_context[k]) for k in keys], textposition="outside",
        cliponaxis=False, name="at context",
        meta={"bytes": [at_context[k] for k in keys], "per_token": per_token},
        hovertemplate="%{y}: %{text}<extra></extra>",
    ))
    pub = at_context["published"]
    ratio = at_context["MHA"] / pub if pub else float("nan")
    title = (f"{_html.escape(model)} — {config.n_layers} layers, "
             f"{_html.escape(_describe(config))}<br><sub>{format_bytes(per_token[1])} per token "
             f"in {dtype}; {context} tokens × batch {batch} = {format_bytes(pub)}"
             + (f" (MHA would need {ratio:.3g}×)" if math.isfinite(ratio) and ratio != 1 else "")
             + "</sub>")
    layout = dict(
        template=viz._EMPTY_TEMPLATE, font=viz._FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center"),
        margin=dict(l=70, r=40, t=90, b=60),
        xaxis=viz._axis(domain=[0.0, 0.42], type="log", title=dict(text="context (tokens)"),
                        anchor="y", dtick=1),
        yaxis=viz._axis(type="log", title=dict(text="KV cache (GiB)"), anchor="x",
                        exponentformat="power", dtick=1),
        xaxis2=viz._axis(domain=[0.68, 0.93], title=dict(text="GiB at the chosen context"),
                         anchor="y2", rangemode="tozero"),
        yaxis2=viz._axis(anchor="x2", autorange="reversed", showgrid=False),
        legend=dict(x=0.0, y=1.0, xanchor="left", yanchor="top", bgcolor="rgba(255,255,255,0.8)"),
        bargap=0.35,
    )
    return go.Figure(data=traces, layout=layout)


def _check_stop(value, name: str, allowed: Sequence) -> None:
    if isinstance(value, (bool, np.bool_)) or value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of the allowed values {tuple(allowed)}")


def kv_cache_explorer(model: str = "Qwen2-7B", context: int = 32768, batch: int = 1,
                      dtype: str = "bfloat16") -> Explorer:
    """The KV-cache explorer (chapter 7): published configs, context, batch and dtype -> bytes.

    Controls: ``model`` (a drop-down over :data:`attnbook.kv_cache.PRESETS`), ``context`` (a
    slider over :data:`CONTEXT_VALUES`), ``batch`` (:data:`BATCH_VALUES`) and ``dtype``
    (:data:`KV_DTYPES`). The figure is :func:`kv_cache_figure`: the model as published (its
    ``n_heads``, ``n_kv_heads``, MLA latent or sliding window) next to its MHA and MQA
    variants.

    Args:
        model: initial model.
        context: initial context length, one of :data:`CONTEXT_VALUES`.
        batch: initial batch size, one of :data:`BATCH_VALUES`.
        dtype: initial dtype, one of :data:`KV_DTYPES`.

    Returns:
        :class:`attnbook.widgets.Explorer`; its static HTML precomputes
        ``5 * 5 * 4 * 3 = 300`` settings.

    Raises:
        ValueError: naming the argument, if a value is not one of its control's options.
    """
    from .kv_cache import PRESETS

    models = tuple(PRESETS)
    _check_stop(model, "model", models)
    _check_stop(context, "context", CONTEXT_VALUES)
    _check_stop(batch, "batch", BATCH_VALUES)
    _check_stop(dtype, "dtype", KV_DTYPES)
    controls = [
        Control("model", "model", "select", models, model),
        Control("context", "context (tokens)", "slider", CONTEXT_VALUES, int(context),
                labels=[f"{c // 1024}K" for c in CONTEXT_VALUES]),
        Control("batch", "batch", "slider", BATCH_VALUES, int(batch)),
        Control("dtype", "dtype", "select", KV_DTYPES, dtype),
    ]
    return Explorer(controls, kv_cache_figure, title="KV-cache explorer")


def position_figure(position: int = 8, pair: int = 1, base: float = 10000.0, *,
                    head_dim: int = 16, max_position: int = 64, height: int = 450):
    """Figure of the position explorer: one frequency of RoPE and of the sinusoidal encoding.

    Left: RoPE rotates the coordinate pair ``i`` (interleaved layout, dimensions ``2i, 2i+1``)
    of the unit vector ``e_{2i}`` by ``m * theta_i`` with ``theta_i = base^(-2i/head_dim)``;
    the dots are :func:`attnbook.positional.apply_rope` at positions ``0 .. m``. Middle:
    dimensions ``2i`` (sine) and ``2i + 1`` (cosine) of
    :func:`attnbook.positional.sinusoidal_encoding` ``(max_position + 1, head_dim, base)`` — the
    same frequency. Right: the RoPE score ``R_m q . R_0 k / head_dim`` of the all-ones query and
    key against their offset ``m`` (it depends on the offset only).

    Trace order: 0 the unit circle, 1 the rotated pair at positions ``0 .. m`` (``x``, ``y``
    its coordinates), 2 the sine curve (dimension ``2i``), 3 the cosine curve (``2i + 1``),
    4 the markers at ``m`` on both curves, 5 the score curve over offsets
    ``0 .. max_position``, 6 the marker at offset ``m``. ``meta`` of trace 1 holds ``theta``
    (rad per token), ``angle`` (``m * theta``, rad) and ``wavelength`` (``2 pi / theta``,
    tokens).

    Args:
        position: ``m``, an integer in ``[0, max_position]``.
        pair: ``i``, an integer in ``[0, head_dim / 2)``.
        base: the frequency base (``rope_theta``), > 1.
        head_dim: even head dimension ``D`` (also the encoding's ``d_model``).
        max_position: last position drawn in the middle and right panels.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``head_dim`` is odd, ``pair`` or ``position`` is out of range, or
            ``base <= 1``.

    Source: Vaswani et al. (2017), section 3.5; Su et al., "RoFormer" (2021), eq. 34.
    """
    import plotly.graph_objects as go

    for name, val, lo, hi in (("head_dim", head_dim, 2, None),
                              ("max_position", max_position, 1, None)):
        if isinstance(val, (bool, np.bool_)) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {val!r}")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs), got {head_dim}")
    for name, val, hi in (("position", position, max_position), ("pair", pair, head_dim // 2 - 1)):
        if isinstance(val, (bool, np.bool_)) or not isinstance(val, (int, np.integer)) \
                or not 0 <= val <= hi:
            raise ValueError(f"{name} must be an integer in [0, {hi}], got {val!r}")
    theta = rope_frequencies(head_dim, base=base)[pair]  # rad per token
    m = int(position)
    # The unit vector e_{2i} at positions 0..m, rotated by RoPE (interleaved pairs).
    e = np.zeros((m + 1, head_dim))
    e[:, 2 * pair] = 1.0  # (m + 1, D)
    rotated = apply_rope(e, np.arange(m + 1), base=base, interleaved=True)  # (m + 1, D)
    px, py = rotated[:, 2 * pair], rotated[:, 2 * pair + 1]
    pe = sinusoidal_encoding(max_position + 1, head_dim, base=base)  # (P, D)
    pos = np.arange(max_position + 1)
    # Score of the all-ones query at position m with the all-ones key at position 0.
    ones = np.ones((max_position + 1, head_dim))
    q_rot = apply_rope(ones, pos, base=base, interleaved=True)  # (P, D)
    k0 = apply_rope(np.ones((1, head_dim)), np.array([0]), base=base, interleaved=True)[0]
    score = q_rot @ k0 / head_dim  # (P,)
    circle = np.linspace(0, 2 * np.pi, 121)
    wavelength = 2 * np.pi / theta
    traces = [
        dict(type="scatter", x=np.cos(circle), y=np.sin(circle), mode="lines", xaxis="x",
             yaxis="y", line=dict(color="#c8c8c8", width=1), hoverinfo="skip",
             showlegend=False, name="unit circle"),
        dict(type="scatter", x=px, y=py, mode="lines+markers", xaxis="x", yaxis="y",
             showlegend=False, name="rotated pair", line=dict(color=viz._BLUE, width=1),
             marker=dict(size=[6] * m + [13], color=viz._BLUE),
             hovertemplate="(%{x:.3f}, %{y:.3f})<extra></extra>",
             meta={"theta": float(theta), "angle": float(m * theta),
                   "wavelength": float(wavelength)}),
        dict(type="scatter", x=pos, y=pe[:, 2 * pair], mode="lines", xaxis="x2", yaxis="y2",
             name="dim 2i: sin(pos·θ<sub>i</sub>)", line=dict(color=viz._BLUE, width=2)),
        dict(type="scatter", x=pos, y=pe[:, 2 * pair + 1], mode="lines", xaxis="x2",
             yaxis="y2", name="dim 2i+1: cos(pos·θ<sub>i</sub>)",
             line=dict(color=viz._ORANGE, width=2)),
        dict(type="scatter", x=[m, m], y=[pe[m, 2 * pair], pe[m, 2 * pair + 1]],
             mode="markers", xaxis="x2", yaxis="y2", showlegend=False, name="at m",
             marker=dict(size=10, color=[viz._BLUE, viz._ORANGE])),
        dict(type="scatter", x=pos, y=score, mode="lines", xaxis="x3", yaxis="y3",
             showlegend=False, name="score", line=dict(color=viz._GREY, width=2),
             hovertemplate="offset %{x}: score %{y:.3f}<extra></extra>"),
        dict(type="scatter", x=[m], y=[score[m]], mode="markers", xaxis="x3", yaxis="y3",
             showlegend=False, name="at offset m", marker=dict(size=10, color=viz._GREY)),
    ]

    def head(text, x):
        return dict(text=text, x=x, y=1.0, xref="paper", yref="paper", xanchor="center",
                    yanchor="bottom", showarrow=False, font=dict(size=14))

    base_txt = f"{base:,.0f}".replace(",", " ")
    # Only the title changes with the controls (small static frames); the panels are fixed.
    title = (f"m = {m}, i = {pair}, base {base_txt}: θ<sub>i</sub> = {theta:.3g} rad/token, "
             f"angle m·θ<sub>i</sub> = {m * theta:.3g} rad, wavelength "
             f"2π/θ<sub>i</sub> = {wavelength:.3g} tokens")
    layout = dict(
        template=viz._EMPTY_TEMPLATE, font=viz._FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center", font=dict(size=14)),
        margin=dict(l=50, r=20, t=90, b=120),
        xaxis=viz._axis(domain=[0.0, 0.26], range=[-1.2, 1.2], anchor="y",
                        title=dict(text="dim 2i"), zeroline=True),
        yaxis=viz._axis(range=[-1.2, 1.2], anchor="x", scaleanchor="x", scaleratio=1,
                        title=dict(text="dim 2i+1"), zeroline=True),
        xaxis2=viz._axis(domain=[0.36, 0.64], anchor="y2", title=dict(text="position")),
        yaxis2=viz._axis(anchor="x2", range=[-1.1, 1.1]),
        xaxis3=viz._axis(domain=[0.74, 1.0], anchor="y3", title=dict(text="offset m − n")),
        yaxis3=viz._axis(anchor="x3", range=[-0.45, 1.05]),
        annotations=[
            head("RoPE rotates pair i by m·θ<sub>i</sub>", 0.13),
            head("sinusoidal encoding, same θ<sub>i</sub>", 0.5),
            head("RoPE score q·k vs offset", 0.87),
        ],
        legend=dict(x=0.5, y=-0.3, xanchor="center", yanchor="top", orientation="h"),
    )
    return go.Figure(data=traces, layout=layout)


def position_explorer(position: int = 8, pair: int = 1, base: float = 10000.0, *,
                      head_dim: int = 16) -> Explorer:
    """The position explorer (chapter 8): positions and frequencies of RoPE and sinusoids.

    Controls: ``position`` ``m`` (a slider over :data:`POSITION_VALUES`), ``pair`` ``i`` (a
    slider over ``0 .. head_dim/2 - 1``) and ``base`` (:data:`BASE_VALUES`). The figure is
    :func:`position_figure`.

    Args:
        position: initial position, one of :data:`POSITION_VALUES`.
        pair: initial frequency pair, in ``[0, head_dim / 2)``.
        base: initial base, one of :data:`BASE_VALUES`.
        head_dim: even head dimension, 2..32.

    Returns:
        :class:`attnbook.widgets.Explorer`; its static HTML precomputes
        ``10 * (head_dim / 2) * 3`` settings (240 for ``head_dim = 16``).

    Raises:
        ValueError: naming the argument, for a value that is not one of its control's options
            or an odd or out-of-range ``head_dim``.
    """
    if isinstance(head_dim, (bool, np.bool_)) or not isinstance(head_dim, (int, np.integer)) \
            or head_dim % 2 or not 2 <= head_dim <= 32:
        raise ValueError(f"head_dim must be an even integer in [2, 32], got {head_dim!r}")
    pairs = tuple(range(head_dim // 2))
    _check_stop(position, "position", POSITION_VALUES)
    _check_stop(pair, "pair", pairs)
    _check_stop(base, "base", BASE_VALUES)

    def render(position, pair, base):
        return position_figure(position, pair, base, head_dim=int(head_dim),
                               max_position=64)

    controls = [
        Control("position", "position m", "slider", POSITION_VALUES, int(position)),
        Control("pair", "pair i", "slider", pairs, int(pair)),
        Control("base", "base", "select", BASE_VALUES, float(base),
                labels=[f"{b:,.0f}".replace(",", " ") for b in BASE_VALUES]),
    ]
    return Explorer(controls, render, title="position explorer")
