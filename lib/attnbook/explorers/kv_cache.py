"""The KV-cache calculator: the cache of published models against context length.

One explorer, shown in chapter 11 (what a long context costs next to the model's weights, and
what grouped-query and latent attention save; chapter 7 refers to it). Pick a published model
(:data:`attnbook.config.PRESETS`), the context length, the batch size and the storage dtype;
the figure shows the KV cache in GiB, computed by :func:`attnbook.cost.kv_cache_bytes`, for
the model as published and for the same model with multi-head (``n_kv_heads = n_heads``) and
multi-query (``n_kv_heads = 1``) attention (:func:`attnbook.cost.kv_variants`), next to the
memory of the model's weights in bfloat16 (:func:`attnbook.cost.weights_bytes`).

Two steps, as every explorer: :func:`kv_cache_data` computes a setting with
:mod:`attnbook.cost` and :func:`draw_kv_cache` draws it with every label made in the reader's
language; :func:`kv_cache_figure` does both in one call.
:func:`~attnbook.cost.kv_variants` and :func:`~attnbook.cost.weights_bytes`, first defined here,
live in :mod:`attnbook.cost` and are still importable from here. This module imports no torch.
"""

from __future__ import annotations

import html as _html
import math
from dataclasses import dataclass

import numpy as np

from .. import fonts, i18n
from ..checks import check_choice, check_instance, check_int
from ..config import DTYPE_BYTES, PRESETS, ModelConfig
from ..cost import attention_kind, format_bytes, kv_cache_bytes, kv_variants, weights_bytes
from ..viz import BLUE, COLUMN_PX, GREEN, GREY, ORANGE
from .base import Control, Explorer
from .layout import STACK_BELOW_PX, caption_title, panel_grid

# kv_variants and weights_bytes moved to attnbook.cost; importable from here as before.

__all__ = [
    "CONTEXT_VALUES",
    "BATCH_VALUES",
    "KV_DTYPES",
    "VARIANTS",
    "KVCacheData",
    "kv_cache_data",
    "draw_kv_cache",
    "kv_cache_figure",
    "kv_cache_explorer",
]

#: Stops of the context-length slider, in tokens (the powers of two from 1 Ki to 128 Ki).
CONTEXT_VALUES = tuple(2**p for p in range(10, 18))
#: Stops of the batch-size slider (sequences decoded together).
BATCH_VALUES = (1, 4, 16, 64)
#: Storage dtypes offered by the KV-cache calculator (keys of :data:`attnbook.config.DTYPE_BYTES`).
KV_DTYPES = ("float32", "bfloat16", "float8", "int4")
#: The variants the calculator compares, in drawing order (keys of
#: :func:`attnbook.cost.kv_variants`).
VARIANTS = ("MHA", "published", "MQA")

_GIB = 2**30
_VARIANT_COLORS = (ORANGE, BLUE, GREEN)
# Curve of the KV-cache panel: powers of two from 512 to 131072 tokens.
_CURVE_CONTEXTS = tuple(2**p for p in range(9, 18))


@dataclass(frozen=True)
class KVCacheData:
    """One setting of the KV-cache calculator, computed (what :func:`draw_kv_cache` draws).

    Attributes:
        model, context, batch, dtype: the setting (see :func:`kv_cache_data`).
        config: the published :class:`attnbook.config.ModelConfig` of ``model``.
        kind: its attention, :func:`attnbook.cost.attention_kind` (``"GQA"``, ``"MLA"``, ...).
        tokens: int ``(N,)``, the context lengths of the curves (512 to 131072 and
            ``context``), increasing.
        curves: int64 ``(3, N)``, KV-cache bytes of the :data:`VARIANTS` at each length.
        at_context: int64 ``(3,)``, KV-cache bytes of the variants at ``context``.
        per_token: int64 ``(3,)``, bytes per token of one sequence.
        weights: bytes of the weights in bfloat16, or ``None`` (not modelled for MLA).
    """

    model: str
    context: int
    batch: int
    dtype: str
    config: ModelConfig
    kind: str
    tokens: np.ndarray
    curves: np.ndarray
    at_context: np.ndarray
    per_token: np.ndarray
    weights: int | None

    @property
    def mha_ratio(self) -> float:
        """How many times the published cache the MHA variant needs (nan for an empty cache)."""
        pub = int(self.at_context[1])
        return int(self.at_context[0]) / pub if pub else float("nan")


def kv_cache_data(
    model: str = "Qwen2-7B", context: int = 32768, batch: int = 1, dtype: str = "bfloat16"
) -> KVCacheData:
    """Compute one setting of the KV-cache calculator.

    Every size is :func:`attnbook.cost.kv_cache_bytes` ``(variant, tokens, batch, dtype)`` of
    the :func:`attnbook.cost.kv_variants` of the model; the weights are
    :func:`attnbook.cost.weights_bytes`.

    Args:
        model: a key of :data:`attnbook.config.PRESETS`.
        context: tokens in the cache, >= 1.
        batch: sequences, >= 1.
        dtype: a key of :data:`attnbook.config.DTYPE_BYTES`.

    Returns:
        :class:`KVCacheData`.

    Raises:
        TypeError: if ``context`` or ``batch`` is not an integer.
        ValueError: for an unknown model or dtype, or ``context``/``batch`` < 1.
    """
    check_choice(model, "model", tuple(PRESETS))
    check_choice(dtype, "dtype", tuple(DTYPE_BYTES))
    context = check_int(context, "context", 1)
    batch = check_int(batch, "batch", 1)
    config = PRESETS[model]
    variants = [kv_variants(config)[k] for k in VARIANTS]
    tokens = sorted(set(_CURVE_CONTEXTS) | {context})
    return KVCacheData(
        model=model,
        context=context,
        batch=batch,
        dtype=dtype,
        config=config,
        kind=attention_kind(config),
        tokens=np.array(tokens),
        curves=np.array(
            [[kv_cache_bytes(c, t, batch, dtype) for t in tokens] for c in variants], dtype=np.int64
        ),  # (3, N)
        at_context=np.array(
            [kv_cache_bytes(c, context, batch, dtype) for c in variants], dtype=np.int64
        ),  # (3,)
        per_token=np.array(
            [kv_cache_bytes(c, 1, 1, dtype) for c in variants], dtype=np.int64
        ),  # (3,)
        weights=weights_bytes(config),
    )


def _attention_text(data: KVCacheData, _) -> str:
    """What the published model caches per layer and token, in the language of ``_``."""
    c = data.config
    if data.kind == "MLA":
        return _(
            "MLA: latent {rank} + RoPE key {rope} ({heads} heads)",
            rank=c.kv_lora_rank,
            rope=c.qk_rope_head_dim,
            heads=c.n_heads,
        )
    values = dict(
        kind=data.kind, heads=c.n_heads, kv=c.kv_heads, dim=c.head_size, window=c.sliding_window
    )
    if c.sliding_window is None:
        return _.ngettext(
            "{kind}: {heads} query heads, {kv} KV head of {dim}",
            "{kind}: {heads} query heads, {kv} KV heads of {dim}",
            c.kv_heads,
            **values,
        )
    return _.ngettext(
        "{kind}: {heads} query heads, {kv} KV head of {dim}, window {window}",
        "{kind}: {heads} query heads, {kv} KV heads of {dim}, window {window}",
        c.kv_heads,
        **values,
    )


def _summary_text(data: KVCacheData, _) -> str:
    """The title's second line: bytes per token, the total, and what MHA or a window change."""
    ratio = data.mha_ratio
    shows_ratio = math.isfinite(ratio) and ratio != 1
    window = data.config.sliding_window
    values = dict(
        per_token=format_bytes(int(data.per_token[1])),
        dtype=data.dtype,
        context=data.context,
        batch=data.batch,
        total=format_bytes(int(data.at_context[1])),
        ratio=f"{ratio:.3g}",
        window=window,
    )
    n = data.context
    if shows_ratio and window:
        return _.ngettext(
            "{per_token} per token in {dtype}; {context} token × batch {batch} = {total} (MHA "
            "would need {ratio}×); window {window}: the cache stops growing",
            "{per_token} per token in {dtype}; {context} tokens × batch {batch} = {total} (MHA "
            "would need {ratio}×); window {window}: the cache stops growing",
            n,
            **values,
        )
    if shows_ratio:
        return _.ngettext(
            "{per_token} per token in {dtype}; {context} token × batch {batch} = {total} (MHA "
            "would need {ratio}×)",
            "{per_token} per token in {dtype}; {context} tokens × batch {batch} = {total} (MHA "
            "would need {ratio}×)",
            n,
            **values,
        )
    if window:
        return _.ngettext(
            "{per_token} per token in {dtype}; {context} token × batch {batch} = {total}; "
            "window {window}: the cache stops growing",
            "{per_token} per token in {dtype}; {context} tokens × batch {batch} = {total}; "
            "window {window}: the cache stops growing",
            n,
            **values,
        )
    return _.ngettext(
        "{per_token} per token in {dtype}; {context} token × batch {batch} = {total}",
        "{per_token} per token in {dtype}; {context} tokens × batch {batch} = {total}",
        n,
        **values,
    )


#: Font size in px of the bar panel's variant names (its y tick labels).
_TICK_PX = 12
#: Widest line in px of a variant name beside the bars, side by side and stacked (longer
#: names are wrapped; on a phone the names take room from both panels' width).
_NAME_PX = (118, 84)


def draw_kv_cache(
    data: KVCacheData, *, language: str | None = None, height: int = 460, width: int = COLUMN_PX
):
    """Draw one setting of the KV-cache calculator for ``width`` px, every label in ``language``.

    Left panel: the KV cache in GiB (log-log) against the context length, 512 to 131072
    tokens, for the three :data:`VARIANTS`, with a marker at ``context``, and the model's
    weights in bfloat16 as a dashed line. Right panel: the three sizes at ``context`` as bars,
    labelled with :func:`attnbook.cost.format_bytes`. Side by side in the book's column, one
    under the other on a phone (:func:`attnbook.explorers.layout.panel_grid`). The title (the
    model and its attention, then the bytes per token and the total) is the caption above the
    plot.

    Trace order: 0-2 the curves of ``MHA``, ``published``, ``MQA`` (``x`` tokens, ``y`` GiB),
    3 the markers at ``context``, 4 the bars (``y`` the variants' names, ``x`` GiB,
    ``meta["bytes"]`` exact, ``meta["per_token"]`` bytes per token per sequence), 5 the weights
    line (empty for DeepSeek-V2; ``meta["weights_bytes"]`` the bytes or ``None``).
    Annotations: 0 and 1 the panels' titles.

    Args:
        data: from :func:`kv_cache_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, without the title, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`KVCacheData`, or ``height`` or ``width`` not
            an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, KVCacheData, "data", "kv_cache_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    config = data.config
    names = [
        _.ngettext("MHA ({n} KV head)", "MHA ({n} KV heads)", config.n_heads),
        _("as published ({kind})", kind=data.kind),
        _("MQA (1 KV head)"),
    ]
    # The variants' names beside the bars, wrapped to _NAME_PX; side by side, the gap between
    # the panels holds them, stacked the left margin (automargin).
    room = _NAME_PX[check_int(width, "width", 1) < STACK_BELOW_PX]
    ticktext = [fonts.wrap_html(_html.escape(n), room, _TICK_PX) for n in names]
    name_px = max(fonts.text_width(line, _TICK_PX) for t in ticktext for line in t.split("<br>"))
    grid = panel_grid(
        width,
        [
            _("KV cache against the context length"),
            _.ngettext(
                "At {context} token", "At {context} tokens", data.context, context=data.context
            ),
        ],
        column_widths=[0.56, 0.44],
        height=height,
        spacing_px=round(name_px) + 40,
        bottom=60,
    )
    fig, (left, right) = grid.figure, grid.cells
    tokens = [int(t) for t in data.tokens]
    for i, (name, color) in enumerate(zip(names, _VARIANT_COLORS)):
        published = VARIANTS[i] == "published"
        fig.add_trace(
            go.Scatter(
                x=tokens,
                y=(data.curves[i] / _GIB).tolist(),
                mode="lines",
                name=name,
                line=dict(
                    color=color, width=3 if published else 2, dash="solid" if published else "dot"
                ),
                hovertemplate=_("{tokens} tokens: {size} GiB", tokens="%{x}", size="%{y:.3g}")
                + "<extra>"
                + _html.escape(name)
                + "</extra>",
            ),
            **left,
        )
    at_context = [int(b) for b in data.at_context]
    fig.add_trace(
        go.Scatter(
            x=[data.context] * 3,
            y=[b / _GIB for b in at_context],
            mode="markers",
            marker=dict(color=list(_VARIANT_COLORS), size=10, line=dict(color="white", width=1)),
            showlegend=False,
            hoverinfo="skip",
            name=_("at context"),
        ),
        **left,
    )
    text = [format_bytes(b) for b in at_context]
    fig.add_trace(
        go.Bar(
            y=names,
            x=[b / _GIB for b in at_context],
            orientation="h",
            marker=dict(color=list(_VARIANT_COLORS)),
            showlegend=False,
            text=text,
            textposition="outside",
            cliponaxis=False,
            name=_("at context"),
            meta={"bytes": at_context, "per_token": [int(b) for b in data.per_token]},
            hovertemplate=_("{variant}: {size}", variant="%{y}", size="%{text}")
            + "<extra></extra>",
        ),
        **right,
    )
    weights = data.weights
    ends = [tokens[0], tokens[-1]]
    fig.add_trace(
        go.Scatter(
            x=ends if weights else [],
            y=[weights / _GIB] * 2 if weights else [],
            mode="lines",
            name=_("weights (bfloat16)"),
            line=dict(color=GREY, dash="dash", width=2),
            meta={"weights_bytes": weights},
            hovertemplate=_("weights: {size} GiB", size="%{y:.3g}") + "<extra></extra>",
        ),
        **left,
    )
    fig.update_xaxes(type="log", title_text=_("context (tokens)"), dtick=1, **left)
    fig.update_yaxes(type="log", title_text="GiB", exponentformat="power", dtick=1, **left)
    # The bars' labels stand right of the bars: the axis reaches far enough to hold the
    # longest one inside the panel (its width in px read from the grid's domain).
    lay = fig.layout
    l_px = max(lay.margin.l, name_px + 16) if grid.stacked else lay.margin.l  # automargin
    panel_px = (lay.xaxis2.domain[1] - lay.xaxis2.domain[0]) * (width - l_px - lay.margin.r)
    text_px = max(fonts.text_width(t, 13) for t in text) + 8
    top = max(at_context) / _GIB or 1.0
    reach = top / max(1 - text_px / max(panel_px, 2 * text_px), 0.5)
    fig.update_xaxes(title_text="GiB", range=[0, reach], **right)
    fig.update_yaxes(
        autorange="reversed",
        showgrid=False,
        tickvals=names,
        ticktext=ticktext,
        tickfont=dict(size=_TICK_PX),
        **right,
    )
    fig.update_layout(bargap=0.35)
    heading = _.ngettext(
        "{model} — {layers} layer, {attention}",
        "{model} — {layers} layers, {attention}",
        config.n_layers,
        model=data.model,
        layers=config.n_layers,
        attention=_attention_text(data, _),
    )
    caption_title(
        fig, _html.escape(heading) + "<br><sub>" + _html.escape(_summary_text(data, _)) + "</sub>"
    )
    return fig


def kv_cache_figure(
    model: str = "Qwen2-7B",
    context: int = 32768,
    batch: int = 1,
    dtype: str = "bfloat16",
    *,
    height: int = 460,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """Figure of the KV-cache calculator: cache size against context, and at one context.

    :func:`draw_kv_cache` of :func:`kv_cache_data` (trace order and ``meta`` as there).

    Args:
        model: a key of :data:`attnbook.config.PRESETS`.
        context: tokens in the cache, >= 1.
        batch: sequences, >= 1.
        dtype: a key of :data:`attnbook.config.DTYPE_BYTES`.
        height: figure height in px with the panels side by side, without the title, >= 10.
        language: see :func:`draw_kv_cache`.
        width: the width in px the figure is drawn at (see :func:`draw_kv_cache`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError, ValueError: as :func:`kv_cache_data` and :func:`draw_kv_cache`.
    """
    return draw_kv_cache(
        kv_cache_data(model, context, batch, dtype), language=language, height=height, width=width
    )


def kv_cache_explorer(
    model: str = "Qwen2-7B", context: int = 32768, batch: int = 1, dtype: str = "bfloat16"
) -> Explorer:
    """The KV-cache calculator (chapter 11): published configs, context, batch, dtype.

    Controls: ``model`` (a drop-down over :data:`attnbook.config.PRESETS`), ``context`` (a
    slider over :data:`CONTEXT_VALUES`), ``batch`` (:data:`BATCH_VALUES`) and ``dtype``
    (:data:`KV_DTYPES`). Each setting is computed by :func:`kv_cache_data` and drawn by
    :func:`draw_kv_cache`: the model as published (its ``n_heads``, ``n_kv_heads``, MLA latent
    or sliding window) next to its MHA and MQA variants and the memory of its weights.

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
        # Model and dtype names are the same in every language.
        Control("model", "model", "select", models, model, labels=lambda _: models),
        Control(
            "context",
            "context (tokens)",
            "slider",
            CONTEXT_VALUES,
            int(context),
            labels=lambda _: [f"{c // 1024}K" for c in CONTEXT_VALUES],
        ),
        Control("batch", "batch", "slider", BATCH_VALUES, int(batch)),
        Control("dtype", "dtype", "select", KV_DTYPES, dtype, labels=lambda _: KV_DTYPES),
    ]
    # Written as they are in both editions: the published models' names, the dtypes' names and
    # the unit TiB (attnbook.i18n.KEPT_WORDS has GiB but not TiB).
    kept = models + KV_DTYPES + ("TiB",)
    return Explorer(
        controls,
        title="KV-cache calculator",
        compute=kv_cache_data,
        draw=draw_kv_cache,
        kept_words=kept,
    )
