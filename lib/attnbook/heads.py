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
transpose of ``torch.nn.Linear.weight``. The torch module is
:class:`attnbook.nn.MultiHeadAttention`. This module imports NumPy only.
"""

from __future__ import annotations

import numpy as np

from .attention import scaled_dot_product_attention
from .checks import as_float_array as _as_float_array

__all__ = [
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "grouped_query_attention",
    "multi_head_attention",
]


def _check_pos_int(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def split_heads(x, n_heads: int) -> np.ndarray:
    """Split the feature axis into heads: ``(..., L, H * D) -> (..., H, L, D)``.

    Args:
        x: ``(..., L, n_heads * head_dim)`` array.
        n_heads: number of heads ``H``; must divide the last axis.

    Returns:
        ``(..., H, L, D)`` view-compatible array (head ``h`` holds features
        ``h*D .. (h+1)*D - 1``, the convention of torch's ``nn.MultiheadAttention``).

    Raises:
        ValueError: if ``x`` has fewer than 2 axes or ``n_heads`` does not divide its last axis.
    """
    x = np.asarray(x)
    n_heads = _check_pos_int(n_heads, "n_heads")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., L, features); got {x.shape}")
    L, F = x.shape[-2], x.shape[-1]
    if F % n_heads:
        raise ValueError(
            f"n_heads {n_heads} must divide the feature size {F} of x (shape {x.shape})"
        )
    x = x.reshape(*x.shape[:-1], n_heads, F // n_heads)  # (..., L, H, D)
    return np.swapaxes(x, -2, -3)  # (..., H, L, D)


def merge_heads(x) -> np.ndarray:
    """Concatenate the heads: ``(..., H, L, D) -> (..., L, H * D)``.

    The inverse of :func:`split_heads`.

    Args:
        x: ``(..., H, L, D)`` array (any dtype), e.g. the per-head attention outputs.

    Returns:
        ``(..., L, H * D)`` array of the same dtype; features ``h*D .. (h+1)*D - 1`` hold head
        ``h`` (Vaswani et al., 2017, section 3.2.2: ``Concat(head_1, ..., head_H)``).

    Raises:
        ValueError: if ``x`` has fewer than 3 axes.
    """
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"x must have shape (..., H, L, D); got {x.shape}")
    H, L, D = x.shape[-3:]
    x = np.swapaxes(x, -2, -3)  # (..., L, H, D)
    return x.reshape(*x.shape[:-2], H * D)  # (..., L, H*D)


def repeat_kv(x, n_rep: int) -> np.ndarray:
    """Repeat each KV head ``n_rep`` times, interleaved.

    ``(..., H_kv, S, D) -> (..., H_kv * n_rep, S, D)``.

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
    n_rep = _check_pos_int(n_rep, "n_rep")
    if x.ndim < 3:
        raise ValueError(f"x must have shape (..., H_kv, S, D); got {x.shape}")
    return np.repeat(x, n_rep, axis=-3)  # (..., H_kv * n_rep, S, D)


def grouped_query_attention(
    q, k, v, mask=None, *, causal: bool = False, scale: float | None = None,
    return_weights: bool = False,
):
    """Attention of ``H`` query heads over ``H_kv`` key/value heads (GQA; MHA and MQA included).

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

    Source: Ainslie et al., "GQA" (2023), section 2.2; Vaswani et al. (2017), eq. 1.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 3:
            raise ValueError(f"{name} must have shape (..., heads, seq, dim); got {arr.shape}")
    H, H_kv = q.shape[-3], k.shape[-3]
    if H < 1:
        raise ValueError(f"q has {H} heads (q.shape={q.shape}); need at least one query head")
    if v.shape[-3] != H_kv:
        raise ValueError(f"k has {H_kv} heads but v has {v.shape[-3]} (k.shape={k.shape}, "
                         f"v.shape={v.shape})")
    if H_kv < 1 or H % H_kv:
        raise ValueError(
            f"n_kv_heads {H_kv} must divide n_heads {H} (q.shape={q.shape}, k.shape={k.shape})"
        )
    k = repeat_kv(k, H // H_kv)  # (..., H, S, D)
    v = repeat_kv(v, H // H_kv)  # (..., H, S, Dv)
    return scaled_dot_product_attention(
        q, k, v, mask, causal=causal, scale=scale, return_weights=return_weights
    )


def _project(x, w, b, name: str, d_in: int) -> np.ndarray:
    w = _as_float_array(w, name)
    if w.ndim != 2 or w.shape[0] != d_in:
        raise ValueError(
            f"{name} must have shape (d_in={d_in}, d_out) in the x @ W layout; got {w.shape}"
        )
    y = x @ w
    if b is not None:
        b = np.asarray(b)
        if b.shape != (w.shape[1],):
            raise ValueError(f"bias of {name} must have shape ({w.shape[1]},); got {b.shape}")
        y = y + b
    return y


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

    Args:
        x: ``(..., L, d_model)`` input of the queries.
        w_q: ``(d_model, n_heads * head_dim)``.
        w_k, w_v: ``(d_model, n_kv_heads * head_dim)``.
        w_o: ``(n_heads * head_dim, d_model)``.
        n_heads: query heads ``H``.
        n_kv_heads: key/value heads ``H_kv`` (default ``H``); must divide ``H``.
        context: ``(..., S, d_model)`` input of keys and values for cross-attention; default
            ``x`` (self-attention).
        mask: keep-mask or additive mask broadcastable to ``(..., H, L, S)``.
        causal: hide future keys (bottom-right aligned).
        b_q, b_k, b_v, b_o: optional biases of matching output size.
        return_weights: also return the ``(..., H, L, S)`` weights.

    Returns:
        ``(..., L, d_model)`` (and the weights). Scores are scaled by ``1/sqrt(head_dim)``.

    Raises:
        ValueError: if a weight has the wrong shape (``w_o`` must map back to ``d_model``),
            ``n_heads`` does not divide ``w_q``'s output, ``n_kv_heads`` does not divide
            ``n_heads``, or the projections give different head dims.
        TypeError: if ``x``, ``context`` or a weight is not a real numeric array.

    Source: Vaswani et al. (2017), section 3.2.2; Ainslie et al. (2023).
    """
    x = _as_float_array(x, "x")
    n_heads = _check_pos_int(n_heads, "n_heads")
    n_kv_heads = n_heads if n_kv_heads is None else _check_pos_int(n_kv_heads, "n_kv_heads")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads {n_kv_heads} must divide n_heads {n_heads}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., L, d_model); got {x.shape}")
    src = x if context is None else _as_float_array(context, "context")
    d_model = x.shape[-1]
    w_o_arr = np.asarray(w_o)
    if w_o_arr.ndim == 2 and w_o_arr.shape[1] != d_model:
        raise ValueError(
            f"w_o must have shape (n_heads * head_dim, d_model={d_model}) to map back to x's "
            f"width; got {w_o_arr.shape}"
        )
    if src.shape[-1] != d_model:
        raise ValueError(f"context has {src.shape[-1]} features but x has {d_model} "
                         f"(x.shape={x.shape}, context.shape={src.shape})")
    q = split_heads(_project(x, w_q, b_q, "w_q", d_model), n_heads)  # (..., H, L, D)
    k = split_heads(_project(src, w_k, b_k, "w_k", d_model), n_kv_heads)  # (..., H_kv, S, D)
    v = split_heads(_project(src, w_v, b_v, "w_v", d_model), n_kv_heads)  # (..., H_kv, S, Dv)
    res = grouped_query_attention(q, k, v, mask, causal=causal, return_weights=return_weights)
    out, weights = res if return_weights else (res, None)
    out = _project(merge_heads(out), w_o, b_o, "w_o", n_heads * v.shape[-1])  # (..., L, d_model)
    return (out, weights) if return_weights else out
