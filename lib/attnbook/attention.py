"""Softmax and scaled dot-product attention in NumPy.

This module is the reference the rest of the book is checked against, so it is written to be
read: one function per idea, every shape named, and the edge cases (rows with no visible key,
empty sequences, low-precision inputs) handled explicitly rather than left to IEEE arithmetic.

Conventions (see ``attnbook`` and STYLE.md): queries ``(..., L, D)``, keys ``(..., S, D)``,
values ``(..., S, Dv)``; boolean masks are keep-masks (``True`` = may attend); causal masks are
aligned bottom-right; a query with no visible key outputs 0.

Source: Vaswani et al., "Attention Is All You Need" (2017), eq. 1:
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.
"""

from __future__ import annotations

import math

import numpy as np

from . import masks as _masks

__all__ = [
    "softmax",
    "masked_softmax",
    "scaled_dot_product_attention",
    "softmax_jacobian",
    "entropy",
]


def _as_float_array(x, name: str) -> np.ndarray:
    """Return ``x`` as a floating-point array; integers and booleans become float64."""
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype object")
    if not np.issubdtype(arr.dtype, np.floating):
        if np.issubdtype(arr.dtype, np.complexfloating):
            raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
    return arr


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    Subtracts the row maximum before exponentiating, so large scores (``[1000, 1000]`` in
    float32) do not overflow. A row whose entries are all ``-inf`` (every position hidden)
    returns zeros instead of the ``nan`` that ``-inf - (-inf)`` would produce.

    Args:
        x: scores, any shape, any real dtype (integers are promoted to float64). Entries may be
            ``-inf`` (hidden); ``nan`` and ``+inf`` are rejected.
        axis: the axis that sums to one.

    Returns:
        An array of the same shape and floating dtype as ``x`` whose slices along ``axis`` sum
        to 1, or are all 0 where every entry was ``-inf``.

    Raises:
        ValueError: if ``x`` contains ``nan`` or ``+inf``, or ``axis`` is out of range.
    """
    x = _as_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis; x is a scalar (shape ())")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {x.shape}")
    if np.isnan(x).any() or np.isposinf(x).any():
        raise ValueError(
            f"x of shape {x.shape} contains nan or +inf; softmax is undefined there "
            "(hide positions with -inf or a keep-mask instead)"
        )
    if x.shape[axis] == 0:
        return x.copy()
    row_max = np.max(x, axis=axis, keepdims=True)
    # A row that is -inf everywhere has max -inf; shift it by 0 instead so that
    # exp(-inf - 0) = 0 rather than exp(-inf - (-inf)) = exp(nan).
    row_max = np.where(np.isneginf(row_max), 0.0, row_max).astype(x.dtype)
    e = np.exp(x - row_max)
    total = np.sum(e, axis=axis, keepdims=True)
    out = np.zeros_like(e)
    np.divide(e, total, out=out, where=total > 0)
    return out


def masked_softmax(scores, mask) -> np.ndarray:
    """Softmax of raw scores under a boolean keep-mask, along the last axis.

    No scaling is applied: this is the softmax step of attention on its own. Hidden
    positions are *replaced* by ``-inf`` (not added to), so whatever score sits behind the mask
    — even ``nan`` — cannot leak into the result. A row with no visible position returns all
    zeros.

    Args:
        scores: ``(..., L, S)`` real scores.
        mask: boolean keep-mask (``True`` = may attend), broadcastable to ``scores.shape``
            without enlarging it; ``None`` means everything is visible.

    Returns:
        ``(..., L, S)`` weights, same dtype as ``scores``; visible entries of each row sum to
        1, hidden entries are exactly 0.

    Raises:
        TypeError: if ``mask`` is not boolean (use an additive float mask with
            :func:`scaled_dot_product_attention` instead).
        ValueError: if ``mask`` does not broadcast to ``scores.shape``, or a visible score is
            ``nan`` or ``+inf``.
    """
    scores = _as_float_array(scores, "scores")
    if mask is None:
        return softmax(scores, axis=-1)
    mask = _masks._check_keep_mask(mask, "mask", scores.shape)
    hidden_fill = np.array(-np.inf, dtype=scores.dtype)
    return softmax(np.where(mask, scores, hidden_fill), axis=-1)


def scaled_dot_product_attention(
    q,
    k,
    v,
    mask=None,
    *,
    causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
):
    """Scaled dot-product attention, ``softmax(q k^T * scale + mask) v``.

    Args:
        q: queries ``(..., L, D)``.
        k: keys ``(..., S, D)``.
        v: values ``(..., S, Dv)``.
        mask: ``None``; a boolean keep-mask (``True`` = may attend), applied by replacing
            hidden scores; or an additive floating-point mask, added to the scaled scores (as
            in torch). Either must broadcast to the scores' shape ``(..., L, S)`` without
            enlarging it.
        causal: hide future keys. Aligned bottom-right: query ``i`` sees keys
            ``j <= i + (S - L)``. Combined with a keep-mask by logical AND.
        scale: multiplier of the scores; ``None`` means ``1 / sqrt(D)``.
        return_weights: also return the attention weights.

    Returns:
        ``out`` of shape ``(..., L, Dv)``, and when ``return_weights`` the weights
        ``(..., L, S)``. The output dtype is the common dtype of ``q``, ``k`` and ``v`` (an
        additive float32 mask on float16 inputs does not promote the output); the arithmetic is
        done in the common dtype of the inputs and the mask. A query with no visible key gets
        output 0 and weights 0.

    Raises:
        ValueError: if ``q`` and ``k`` disagree on ``D``, ``k`` and ``v`` on ``S``, the leading
            (batch) dimensions do not broadcast, the mask does not broadcast to
            ``(..., L, S)``, ``scale`` is not finite, or an input contains nan or inf.
        TypeError: for non-numeric inputs.

    Source: Vaswani et al. (2017), eq. 1.
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (..., seq, dim); got shape {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} of shape {arr.shape} contains nan or inf")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q has head_dim {q.shape[-1]} but k has {k.shape[-1]} "
            f"(q.shape={q.shape}, k.shape={k.shape})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k has {k.shape[-2]} keys but v has {v.shape[-2]} values "
            f"(k.shape={k.shape}, v.shape={v.shape})"
        )
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            "the leading (batch/head) dimensions of q, k and v do not broadcast: "
            f"q.shape={q.shape}, k.shape={k.shape}, v.shape={v.shape}"
        ) from None
    L, D = q.shape[-2], q.shape[-1]
    S = k.shape[-2]
    scores_shape = (*batch, L, S)

    out_dtype = np.result_type(q, k, v)
    compute_dtype = out_dtype
    additive = None
    keep = None
    if mask is not None:
        mask_arr = np.asarray(mask)
        if mask_arr.dtype == np.bool_:
            keep = _masks._check_keep_mask(mask_arr, "mask", scores_shape)
        elif np.issubdtype(mask_arr.dtype, np.floating):
            _masks._check_broadcast(mask_arr, "mask", scores_shape)
            if np.isnan(mask_arr).any() or np.isposinf(mask_arr).any():
                raise ValueError(f"additive mask of shape {mask_arr.shape} contains nan or +inf")
            additive = mask_arr
            compute_dtype = np.result_type(out_dtype, mask_arr.dtype)
        else:
            raise TypeError(
                f"mask must be a boolean keep-mask or a floating additive mask; got dtype "
                f"{mask_arr.dtype} (shape {mask_arr.shape})"
            )
    if causal:
        causal_keep = _masks.causal_mask(L, S)
        keep = causal_keep if keep is None else np.logical_and(keep, causal_keep)

    if scale is None:
        scale = 1.0 / math.sqrt(D) if D > 0 else 1.0
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")

    qc = q.astype(compute_dtype, copy=False)
    kc = k.astype(compute_dtype, copy=False)
    vc = v.astype(compute_dtype, copy=False)

    scores = (qc @ np.swapaxes(kc, -1, -2)) * np.asarray(scale, dtype=compute_dtype)  # (..., L, S)
    scores = np.broadcast_to(scores, scores_shape)
    if additive is not None:
        scores = scores + additive.astype(compute_dtype, copy=False)
    if keep is not None:
        scores = np.where(keep, scores, np.array(-np.inf, dtype=compute_dtype))
    weights = softmax(scores, axis=-1)  # (..., L, S)
    out = (weights @ vc).astype(out_dtype, copy=False)  # (..., L, Dv)
    if return_weights:
        return out, weights.astype(out_dtype, copy=False)
    return out


def softmax_jacobian(p) -> np.ndarray:
    """Jacobian of the softmax at output ``p``: ``J = diag(p) - p p^T``.

    ``J[i, j] = d p_i / d z_j``. When ``p`` is close to one-hot (a saturated softmax) every
    entry of ``J`` is close to 0, which is why saturated attention passes almost no gradient
    back to its scores.

    Args:
        p: ``(..., n)`` softmax outputs (non-negative, summing to 1 along the last axis).

    Returns:
        ``(..., n, n)`` Jacobians, same dtype as ``p``.

    Raises:
        ValueError: if ``p`` is a scalar.
    """
    p = _as_float_array(p, "p")
    if p.ndim == 0:
        raise ValueError("p must have at least one axis; got a scalar")
    eye = np.eye(p.shape[-1], dtype=p.dtype)
    return p[..., :, None] * eye - p[..., :, None] * p[..., None, :]  # (..., n, n)


def entropy(p, axis: int = -1) -> np.ndarray:
    """Shannon entropy ``-sum p log p`` in nats along ``axis`` (``0 log 0 = 0``).

    A uniform distribution over ``n`` positions has entropy ``log n``; a one-hot one has 0.

    Args:
        p: probabilities, any shape.
        axis: the axis that sums to one.

    Returns:
        The entropies, with ``axis`` removed; units: nats.
    """
    p = _as_float_array(p, "p")
    logp = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logp, axis=axis)
