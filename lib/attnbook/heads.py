"""Multi-head attention in NumPy: MHA, grouped-query (GQA) and multi-query (MQA) attention.

Multi-head attention (Vaswani et al., 2017, section 3.2.2) projects the input into ``H`` query,
key and value heads of size ``head_dim``, attends in each head separately and concatenates the
heads before an output projection:

``MultiHead(X) = Concat(head_1, ..., head_H) W^O`` with
``head_h = Attention(X W^Q_h, X W^K_h, X W^V_h)``.

Grouped-query attention (Ainslie et al., 2023) keeps ``H`` query heads but only ``H_kv`` key/value
heads; query head ``h`` reads KV head ``h // (H // H_kv)`` (repeat-interleave, Llama's
``repeat_kv``, torch's ``enable_gqa=True``). ``H_kv = H`` is MHA, ``H_kv = 1`` multi-query
attention (Shazeer, 2019).

Weights here use the math layout ``y = x @ W`` with ``W`` of shape ``(d_in, d_out)`` — the
transpose of ``torch.nn.Linear.weight``.

Torch twin: :mod:`attnbook.layers` holds :func:`~attnbook.layers.split_heads`,
:func:`~attnbook.layers.merge_heads` and :func:`~attnbook.layers.repeat_kv` under the same names,
and the module :class:`~attnbook.layers.MultiHeadAttention` (MHA, GQA, MQA; with
:class:`~attnbook.layers.MultiHeadLatentAttention`, DeepSeek-V2's MLA). This module imports NumPy
only.
"""

from __future__ import annotations

import numpy as np

from . import checks
from .attention import (
    compute_dtype,
    scaled_dot_product_attention,
    scaled_dot_product_attention_core,
)

__all__ = [
    "split_heads_core",
    "split_heads",
    "merge_heads_core",
    "merge_heads",
    "repeat_kv_core",
    "repeat_kv",
    "grouped_query_attention_core",
    "grouped_query_attention",
    "multi_head_attention_core",
    "multi_head_attention",
]


# fmt: off
def split_heads_core(x, n_heads):
    """Split the features into heads: ``(..., L, H*D) -> (..., H, L, D)``."""
    *lead, L, F = x.shape
    x = x.reshape(*lead, L, n_heads, F // n_heads)  # (..., L, H, D)
    return np.swapaxes(x, -2, -3)  # (..., H, L, D)
# fmt: on


def split_heads(x, n_heads: int) -> np.ndarray:
    """Split the feature axis into heads: ``(..., L, H * D) -> (..., H, L, D)``.

    Checks its arguments and calls :func:`split_heads_core`.

    Args:
        x: ``(..., L, n_heads * head_dim)`` array (any dtype).
        n_heads: number of heads ``H``; a positive integer that divides the last axis.

    Returns:
        ``(..., H, L, D)`` array of the dtype of ``x`` (head ``h`` holds features
        ``h*D .. (h+1)*D - 1``, the convention of torch's ``nn.MultiheadAttention``).

    Raises:
        TypeError: if ``n_heads`` is not an integer.
        ValueError: if ``n_heads < 1``, ``x`` has fewer than 2 axes or ``n_heads`` does not
            divide its last axis.

    Source: Vaswani et al. (2017), section 3.2.2.
    """
    x = np.asarray(x)
    n_heads = checks.check_int(n_heads, "n_heads", 1)
    checks.check_ndim(x, "x", "(..., L, features)")
    checks.check_divides(
        n_heads, "n_heads", x.shape[-1], "the feature size", f" of x (shape {x.shape})"
    )
    return split_heads_core(x, n_heads)


# fmt: off
def merge_heads_core(x):
    """Concatenate the heads: ``(..., H, L, D) -> (..., L, H*D)``."""
    x = np.swapaxes(x, -2, -3)  # (..., L, H, D)
    *lead, L, H, D = x.shape
    return x.reshape(*lead, L, H * D)  # (..., L, H*D)
# fmt: on


def merge_heads(x) -> np.ndarray:
    """Concatenate the heads: ``(..., H, L, D) -> (..., L, H * D)``.

    The inverse of :func:`split_heads`; checks its input and calls :func:`merge_heads_core`.

    Args:
        x: ``(..., H, L, D)`` array (any dtype), e.g. the per-head attention outputs.

    Returns:
        ``(..., L, H * D)`` array of the same dtype; features ``h*D .. (h+1)*D - 1`` hold head
        ``h`` (Vaswani et al., 2017, section 3.2.2: ``Concat(head_1, ..., head_H)``).

    Raises:
        ValueError: if ``x`` has fewer than 3 axes.
    """
    x = np.asarray(x)
    checks.check_ndim(x, "x", "(..., H, L, D)")
    return merge_heads_core(x)


# fmt: off
def repeat_kv_core(x, n_rep):
    """Repeat each KV head n_rep times, interleaved: head h reads h // n_rep.

    ``(..., H_kv, S, D) -> (..., H_kv * n_rep, S, D)``.
    """
    return np.repeat(x, n_rep, axis=-3)  # (..., H_kv*n_rep, S, D)
# fmt: on


def repeat_kv(x, n_rep: int) -> np.ndarray:
    """Repeat each KV head ``n_rep`` times, interleaved.

    ``(..., H_kv, S, D) -> (..., H_kv * n_rep, S, D)``. Checks its arguments and calls
    :func:`repeat_kv_core`.

    Output head ``h`` is input head ``h // n_rep``: with 2 KV heads and ``n_rep = 2`` the
    query heads read KV heads ``[0, 0, 1, 1]``. Tiling (``np.tile``, torch's ``.repeat``) would
    give ``[0, 1, 0, 1]``, which is wrong for checkpoints trained with GQA.

    Args:
        x: ``(..., H_kv, S, D)`` keys or values (any dtype).
        n_rep: how many query heads share each KV head, ``H // H_kv``; an integer >= 1.

    Returns:
        ``(..., H_kv * n_rep, S, D)`` array of the same dtype (a copy).

    Raises:
        TypeError: if ``n_rep`` is not an integer.
        ValueError: if ``x`` has fewer than 3 axes or ``n_rep < 1``.

    Source: Ainslie et al. (2023); Llama's ``repeat_kv``.
    """
    x = np.asarray(x)
    n_rep = checks.check_int(n_rep, "n_rep", 1)
    checks.check_ndim(x, "x", "(..., H_kv, S, D)")
    return repeat_kv_core(x, n_rep)


# fmt: off
def grouped_query_attention_core(q, k, v, mask=None, scale=None):
    """Attention of H query heads over H_kv shared key/value heads.

    q (..., H, L, D), k (..., H_kv, S, D), v (..., H_kv, S, Dv); query head
    h reads KV head h // (H // H_kv). Returns the output and the weights.
    """
    n_rep = q.shape[-3] // k.shape[-3]  # query heads per KV head
    k = repeat_kv_core(k, n_rep)  # (..., H, S, D)
    v = repeat_kv_core(v, n_rep)  # (..., H, S, Dv)
    return scaled_dot_product_attention_core(q, k, v, mask, scale)
# fmt: on


def grouped_query_attention(
    q,
    k,
    v,
    mask=None,
    *,
    causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
):
    """Attention of ``H`` query heads over ``H_kv`` key/value heads (GQA; MHA and MQA included).

    The steps of :func:`grouped_query_attention_core`: checks the head counts, repeats the
    key/value heads with :func:`repeat_kv_core`, and calls
    :func:`attnbook.attention.scaled_dot_product_attention`, which checks the rest (shapes,
    masks, scale), combines ``mask`` with ``causal``, computes in at least float32 and calls
    its core.

    Args:
        q: ``(..., H, L, D)`` queries.
        k: ``(..., H_kv, S, D)`` keys; ``H_kv`` must divide ``H``.
        v: ``(..., H_kv, S, Dv)`` values.
        mask: boolean keep-mask or additive float mask broadcastable to ``(..., H, L, S)``,
            e.g. ``(L, S)`` or ``(B, 1, 1, S)``.
        causal: hide future keys (bottom-right aligned).
        scale: default ``1 / sqrt(D)`` — the head dimension, not ``d_model``.
        return_weights: also return the ``(..., H, L, S)`` weights.

    Returns:
        ``(..., H, L, Dv)`` outputs (and weights). Query head ``h`` attends with KV head
        ``h // (H // H_kv)``.

    Raises:
        ValueError: if an input has fewer than 3 axes, ``H_kv`` does not divide ``H``, ``k``
            and ``v`` disagree on ``H_kv``, and everything
            :func:`attnbook.attention.scaled_dot_product_attention` rejects (head dims, masks).
        TypeError: if an input is not a real numeric array, and everything
            :func:`attnbook.attention.scaled_dot_product_attention` rejects as a wrong kind.

    Source: Ainslie et al., "GQA" (2023), section 2.2; Vaswani et al. (2017), eq. 1.
    """
    q, k, v = (checks.as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    for name, arr in (("q", q), ("k", k), ("v", v)):
        checks.check_ndim(arr, name, "(..., heads, seq, dim)")
    H, H_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != H_kv:
        raise ValueError(
            f"k has {H_kv} heads but v has {v.shape[-3]} (k.shape={k.shape}, v.shape={v.shape})"
        )
    checks.check_head_counts(H, H_kv, f" (q.shape={q.shape}, k.shape={k.shape})")
    k = repeat_kv_core(k, H // H_kv)  # (..., H, S, D)
    v = repeat_kv_core(v, H // H_kv)  # (..., H, S, Dv)
    return scaled_dot_product_attention(
        q, k, v, mask, causal=causal, scale=scale, return_weights=return_weights
    )


# fmt: off
def multi_head_attention_core(x, context, w_q, w_k, w_v, w_o,
                              b_q, b_k, b_v, b_o, n_heads, n_kv_heads,
                              mask=None):
    """Project, split into heads, attend, merge, project: Concat(heads) W^O.

    x (..., L, d_model), context (..., S, d_model); weights in the x @ W
    layout, w_q (d_model, H*D). Returns (..., L, d_model) and the weights.
    """
    q = split_heads_core(x @ w_q + b_q, n_heads)  # (..., H, L, D)
    k = split_heads_core(context @ w_k + b_k, n_kv_heads)  # (..., H_kv, S, D)
    v = split_heads_core(context @ w_v + b_v, n_kv_heads)  # (..., H_kv, S, Dv)
    out, attn = grouped_query_attention_core(q, k, v, mask)  # (..., H, L, Dv)
    out = merge_heads_core(out)  # (..., L, H*Dv)
    return out @ w_o + b_o, attn  # (..., L, d_model), (..., H, L, S)
# fmt: on


def multi_head_attention(
    x,
    w_q,
    w_k,
    w_v,
    w_o,
    *,
    n_heads: int,
    n_kv_heads: int | None = None,
    context=None,
    mask=None,
    causal: bool = False,
    b_q=None,
    b_k=None,
    b_v=None,
    b_o=None,
    return_weights: bool = False,
):
    """Multi-head (or grouped-query) attention with projections, ``Concat(heads) W^O``.

    Checks the arguments, computes in at least float32
    (:func:`attnbook.attention.compute_dtype`) and runs the steps of
    :func:`multi_head_attention_core` — project,
    :func:`split_heads_core`, attend, :func:`merge_heads_core`, project — with
    :func:`grouped_query_attention` as the attention step, so that ``mask`` and ``causal``
    are checked and combined as in :func:`attnbook.attention.scaled_dot_product_attention`.

    Args:
        x: ``(..., L, d_model)`` input of the queries.
        w_q: ``(d_model, n_heads * head_dim)``.
        w_k: ``(d_model, n_kv_heads * head_dim)``.
        w_v: ``(d_model, n_kv_heads * head_dim_v)`` (the value heads may have another size).
        w_o: ``(n_heads * head_dim_v, d_model)``.
        n_heads: query heads ``H``.
        n_kv_heads: key/value heads ``H_kv`` (default ``H``); must divide ``H``.
        context: ``(..., S, d_model)`` input of keys and values for cross-attention; default
            ``x`` (self-attention).
        mask: keep-mask or additive mask broadcastable to ``(..., H, L, S)``.
        causal: hide future keys (bottom-right aligned).
        b_q: optional bias ``(n_heads * head_dim,)`` of the query projection.
        b_k: optional bias ``(n_kv_heads * head_dim,)`` of the key projection.
        b_v: optional bias ``(n_kv_heads * head_dim_v,)`` of the value projection.
        b_o: optional bias ``(d_model,)`` of the output projection.
        return_weights: also return the ``(..., H, L, S)`` weights.

    Returns:
        ``(..., L, d_model)`` in the common dtype of the inputs (and the weights). Scores are
        scaled by ``1/sqrt(head_dim)``.

    Raises:
        ValueError: if a weight or bias has the wrong shape (``w_o`` must map back to
            ``d_model``), ``n_heads`` does not divide ``w_q``'s output, ``n_kv_heads`` does
            not divide ``n_heads`` or ``w_k``'s output, the projections give different head
            dims, an input holds nan or inf, ``mask`` is rejected by
            :func:`attnbook.attention.scaled_dot_product_attention`, or ``causal`` is True
            with a ``context`` (a cross-attention source has no later key to hide).
        TypeError: if ``n_heads`` or ``n_kv_heads`` is not an integer, ``causal`` or
            ``return_weights`` not a bool, or ``x``, ``context``, a weight or a bias is not a
            real numeric array.

    Source: Vaswani et al. (2017), section 3.2.2; Ainslie et al. (2023).
    """
    x = checks.as_float_array(x, "x")
    n_heads = checks.check_int(n_heads, "n_heads", 1)
    n_kv_heads = n_heads if n_kv_heads is None else checks.check_int(n_kv_heads, "n_kv_heads", 1)
    checks.check_head_counts(n_heads, n_kv_heads)
    checks.check_ndim(x, "x", "(..., L, d_model)")
    causal = checks.check_causal_context(causal, context)
    return_weights = checks.check_bool(return_weights, "return_weights")
    src = x if context is None else checks.as_float_array(context, "context")
    d_model = x.shape[-1]
    if src.ndim < 2 or src.shape[-1] != d_model:
        raise ValueError(
            f"context must have shape (..., S, d_model={d_model}) like x "
            f"(x.shape={x.shape}); got {src.shape}"
        )
    w = {
        n: checks.as_float_array(a, n)
        for n, a in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o))
    }
    for name in ("w_q", "w_k", "w_v"):
        if w[name].ndim != 2 or w[name].shape[0] != d_model:
            raise ValueError(
                f"{name} must have shape (d_in={d_model}, d_out) in the x @ W "
                f"layout; got {w[name].shape}"
            )
    for name, h in (("w_q", n_heads), ("w_k", n_kv_heads), ("w_v", n_kv_heads)):
        h_name = "n_heads" if name == "w_q" else "n_kv_heads"
        checks.check_divides(h, h_name, w[name].shape[1], "the output size", f" of {name}")
    D, D_k = w["w_q"].shape[1] // n_heads, w["w_k"].shape[1] // n_kv_heads
    if D != D_k:
        raise ValueError(
            f"q has head_dim {D} but k has {D_k} (w_q.shape={w['w_q'].shape}, "
            f"w_k.shape={w['w_k'].shape})"
        )
    Dv = w["w_v"].shape[1] // n_kv_heads
    if w["w_o"].shape != (n_heads * Dv, d_model):
        raise ValueError(
            f"w_o must have shape (n_heads * head_dim={n_heads * Dv}, "
            f"d_model={d_model}) to map back to x's width; got {w['w_o'].shape}"
        )
    b = {}
    for name, bias in (("b_q", b_q), ("b_k", b_k), ("b_v", b_v), ("b_o", b_o)):
        w_name = "w" + name[1:]
        d_out = w[w_name].shape[1]
        b[name] = (
            np.zeros(d_out, w[w_name].dtype) if bias is None else checks.as_float_array(bias, name)
        )
        if b[name].shape != (d_out,):
            raise ValueError(f"bias {name} must have shape ({d_out},); got {b[name].shape}")
    for name, arr in (("x", x), ("context", src), *w.items(), *b.items()):
        checks.check_finite(arr, name)
    out_dtype = np.result_type(x, src, *w.values(), *b.values())
    c = {
        n: a.astype(compute_dtype(out_dtype), copy=False)
        for n, a in (("x", x), ("context", src), *w.items(), *b.items())
    }
    q = split_heads_core(c["x"] @ c["w_q"] + c["b_q"], n_heads)  # (..., H, L, D)
    k = split_heads_core(c["context"] @ c["w_k"] + c["b_k"], n_kv_heads)  # (..., H_kv, S, D)
    v = split_heads_core(c["context"] @ c["w_v"] + c["b_v"], n_kv_heads)  # (..., H_kv, S, Dv)
    out, weights = grouped_query_attention(q, k, v, mask, causal=causal, return_weights=True)
    out = (merge_heads_core(out) @ c["w_o"] + c["b_o"]).astype(out_dtype)  # (..., L, d_model)
    return (out, weights.astype(out_dtype)) if return_weights else out
