"""The KV-cache calculator: the cache of published models against context length.

One explorer, used by chapter 7 (what grouped-query and latent attention save) and chapter 11
(what a long context costs next to the model's weights). Pick a published model
(:data:`attnbook.config.PRESETS`), the context length, the batch size and the storage dtype;
the figure shows the KV cache in GiB, computed by :func:`attnbook.cost.kv_cache_bytes`, for
the model as published and for the same model with multi-head (``n_kv_heads = n_heads``) and
multi-query (``n_kv_heads = 1``) attention (:func:`kv_variants`), next to the memory of the
model's weights in bfloat16 (:func:`attnbook.cost.param_count`).

Also importable from :mod:`attnbook.widgets_heads_pos` and :mod:`attnbook.widgets_cost`. This
module imports no torch.
"""

from __future__ import annotations

import html as _html
import math

from ..checks import check_choice, check_int
from ..config import DTYPE_BYTES, PRESETS, ModelConfig
from ..cost import format_bytes, kv_cache_bytes, param_count
from ..viz import BLUE, EMPTY_TEMPLATE, FONT, GREEN, GREY, ORANGE, axis_style
from .base import Control, Explorer

__all__ = [
    "CONTEXT_VALUES",
    "BATCH_VALUES",
    "KV_DTYPES",
    "kv_variants",
    "weights_bytes",
    "kv_cache_figure",
    "kv_cache_explorer",
]

#: Stops of the context-length slider, in tokens (the powers of two from 1 Ki to 128 Ki).
CONTEXT_VALUES = tuple(2**p for p in range(10, 18))
#: Stops of the batch-size slider (sequences decoded together).
BATCH_VALUES = (1, 4, 16, 64)
#: Storage dtypes offered by the KV-cache calculator (keys of :data:`attnbook.config.DTYPE_BYTES`).
KV_DTYPES = ("float32", "bfloat16", "float8", "int4")

_GIB = 2**30
_VARIANT_COLORS = (ORANGE, BLUE, GREEN)
# Curve of the KV-cache panel: powers of two from 512 to 131072 tokens.
_CURVE_CONTEXTS = tuple(2**p for p in range(9, 18))


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
        config: an :class:`attnbook.config.ModelConfig` (e.g. ``PRESETS["Qwen2-7B"]``).

    Returns:
        ``{"MHA": ModelConfig, "published": ModelConfig, "MQA": ModelConfig}`` in that order.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`.

    Source: Vaswani et al. (2017), section 3.2.2; Shazeer (2019); Ainslie et al. (2023);
    DeepSeek-AI, "DeepSeek-V2" (2024), table 1.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be an attnbook.config.ModelConfig, got "
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


def weights_bytes(config: ModelConfig) -> int | None:
    """Bytes of a model's weights in bfloat16: ``2 * param_count(config)``.

    Args:
        config: an :class:`attnbook.config.ModelConfig`.

    Returns:
        The bytes (an ``int``), or ``None`` for a multi-head latent attention model
        (DeepSeek-V2), whose mixture-of-experts layers :func:`attnbook.cost.param_count` does
        not model.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be an attnbook.config.ModelConfig, got "
                        f"{type(config).__name__}")
    if config.uses_mla:
        return None
    return DTYPE_BYTES["bfloat16"] * param_count(config)


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
                    dtype: str = "bfloat16", *, height: int = 520):
    """Figure of the KV-cache calculator: cache size against context, and at one context.

    Left: the KV cache in GiB (log-log) against the context length, 512 to 131072 tokens, for
    the three :func:`kv_variants` of ``model``, with a marker at ``context``, and the model's
    weights in bfloat16 (:func:`weights_bytes`) as a dashed line. Right: the three sizes at
    ``context`` as bars, labelled with :func:`attnbook.cost.format_bytes`. All sizes are
    :func:`attnbook.cost.kv_cache_bytes` ``(variant, tokens, batch, dtype)``.

    Trace order: 0-2 the curves of ``MHA``, ``published``, ``MQA`` (``x`` tokens, ``y`` GiB),
    3 the markers at ``context``, 4 the bars (``x`` GiB, ``meta["bytes"]`` exact,
    ``meta["per_token"]`` bytes per token per sequence), 5 the weights line (empty for
    DeepSeek-V2; ``meta["weights_bytes"]`` the bytes or ``None``).

    Args:
        model: a key of :data:`attnbook.config.PRESETS`.
        context: tokens in the cache, >= 1.
        batch: sequences, >= 1.
        dtype: a key of :data:`attnbook.config.DTYPE_BYTES`.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``context`` or ``batch`` is not an integer.
        ValueError: for an unknown model or dtype, or ``context``/``batch`` < 1.
    """
    import plotly.graph_objects as go

    check_choice(model, "model", tuple(PRESETS))
    check_choice(dtype, "dtype", tuple(DTYPE_BYTES))
    context = check_int(context, "context", 1)
    batch = check_int(batch, "batch", 1)
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
    weights = weights_bytes(config)
    ends = [curve_x[0], curve_x[-1]]
    traces.append(dict(
        type="scatter", x=ends if weights else [], y=[weights / _GIB] * 2 if weights else [],
        mode="lines", name="weights (bfloat16)", line=dict(color=GREY, dash="dash", width=2),
        xaxis="x", yaxis="y", meta={"weights_bytes": weights},
        hovertemplate="weights: %{y:.3g} GiB<extra></extra>",
    ))
    pub = at_context["published"]
    ratio = at_context["MHA"] / pub if pub else float("nan")
    window = (f"; window {config.sliding_window}: the cache stops growing"
              if config.sliding_window else "")
    title = (f"{_html.escape(model)} — {config.n_layers} layers, "
             f"{_html.escape(_describe(config))}<br><sub>{format_bytes(per_token[1])} per token "
             f"in {dtype}; {context} tokens × batch {batch} = {format_bytes(pub)}"
             + (f" (MHA would need {ratio:.3g}×)" if math.isfinite(ratio) and ratio != 1 else "")
             + window + "</sub>")
    layout = dict(
        template=EMPTY_TEMPLATE, font=FONT, paper_bgcolor="white",
        plot_bgcolor="white", height=height,
        title=dict(text=title, x=0.5, xanchor="center"),
        margin=dict(l=70, r=40, t=90, b=130),
        xaxis=axis_style(domain=[0.0, 0.42], type="log", title=dict(text="context (tokens)"),
                         anchor="y", dtick=1),
        yaxis=axis_style(type="log", title=dict(text="GiB"), anchor="x",
                         exponentformat="power", dtick=1),
        xaxis2=axis_style(domain=[0.68, 0.93], title=dict(text="GiB at the chosen context"),
                          anchor="y2", rangemode="tozero"),
        yaxis2=axis_style(anchor="x2", autorange="reversed", showgrid=False),
        # Below the panels: inside the left panel it would hide the MHA curve.
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.25, yanchor="top"),
        bargap=0.35,
    )
    return go.Figure(data=traces, layout=layout)

def kv_cache_explorer(model: str = "Qwen2-7B", context: int = 32768, batch: int = 1,
                      dtype: str = "bfloat16") -> Explorer:
    """The KV-cache calculator (chapters 7 and 11): published configs, context, batch, dtype.

    Controls: ``model`` (a drop-down over :data:`attnbook.config.PRESETS`), ``context`` (a
    slider over :data:`CONTEXT_VALUES`), ``batch`` (:data:`BATCH_VALUES`) and ``dtype``
    (:data:`KV_DTYPES`). The figure is :func:`kv_cache_figure`: the model as published (its
    ``n_heads``, ``n_kv_heads``, MLA latent or sliding window) next to its MHA and MQA
    variants and the memory of its weights.

    Args:
        model: initial model, a key of :data:`attnbook.config.PRESETS`.
        context: initial context length, one of :data:`CONTEXT_VALUES`.
        batch: initial batch size, one of :data:`BATCH_VALUES`.
        dtype: initial dtype, one of :data:`KV_DTYPES`.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`; its static HTML precomputes
        ``5 * 8 * 4 * 4 = 640`` settings.

    Raises:
        ValueError: naming the argument, if a value is not one of its control's options.
    """
    models = tuple(PRESETS)
    check_choice(model, "model", models)
    check_choice(context, "context", CONTEXT_VALUES)
    check_choice(batch, "batch", BATCH_VALUES)
    check_choice(dtype, "dtype", KV_DTYPES)
    controls = [
        Control("model", "model", "select", models, model),
        Control("context", "context (tokens)", "slider", CONTEXT_VALUES, int(context),
                labels=[f"{c // 1024}K" for c in CONTEXT_VALUES]),
        Control("batch", "batch", "slider", BATCH_VALUES, int(batch)),
        Control("dtype", "dtype", "select", KV_DTYPES, dtype),
    ]
    return Explorer(controls, kv_cache_figure, title="KV-cache calculator")
