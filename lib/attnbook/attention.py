"""Softmax and scaled dot-product attention in NumPy.

This module is the reference the rest of the book is checked against, so it is written to be
read: one function per idea, every shape named, and the edge cases (rows with no visible key,
empty sequences, low-precision inputs) handled explicitly rather than left to IEEE arithmetic.

Conventions (see ``attnbook`` and the notation appendix of the book): queries ``(..., L, D)``,
keys ``(..., S, D)``, values ``(..., S, Dv)``; boolean masks are keep-masks (``True`` = may
attend); causal masks are aligned bottom-right; a query with no visible key outputs 0.

Source: Vaswani et al., "Attention Is All You Need" (2017), eq. 1:
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.
"""

from __future__ import annotations

import math
import numbers

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
    """Return ``x`` as a floating-point array; integers and booleans become float64.

    A torch tensor is detached and moved to the CPU first (bfloat16 becomes float32, which
    NumPy lacks), so tensors that require grad are accepted.
    """
    if hasattr(x, "detach") and hasattr(x, "cpu") and not isinstance(x, np.ndarray):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    arr = np.asarray(x)
    if arr.dtype == object:
        raise TypeError(f"{name} must be a numeric array, got dtype object")
    if not np.issubdtype(arr.dtype, np.floating):
        if np.issubdtype(arr.dtype, np.complexfloating):
            raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
        if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
    return arr


def _check_axis(axis, ndim: int, shape) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an integer, got {axis!r} ({type(axis).__name__})")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {shape}")
    return int(axis)


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return bool(value)


def _check_qkv(q, k, v):
    """Validate attention inputs; return them as float arrays and the broadcast batch shape.

    Shared by :func:`scaled_dot_product_attention` and ``attnbook.flash.tiled_attention`` so
    that both reject bad input with the same messages. Raises ``ValueError`` (rank below 2,
    nan/inf, ``q``/``k`` head dims or ``k``/``v`` lengths that differ, batch dimensions that do
    not broadcast) or ``TypeError`` (non-numeric input).
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
    return q, k, v, batch


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
        TypeError: if ``axis`` is not an integer (``True`` and ``1.5`` are rejected).
    """
    x = _as_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis; x is a scalar (shape ())")
    axis = _check_axis(axis, x.ndim, x.shape)
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
            enlarging it. A float mask of 0s and 1s is *added* (it does not hide anything);
            pass a boolean array to hide keys. An additive mask filled with
            ``finfo(dtype).min`` (:func:`attnbook.masks.additive_mask`) is an ordinary, tiny
            score: a row that is ``finfo.min`` everywhere is a plain softmax (uniform when the
            scores are equal), not an empty row — in every dtype, because the scores are
            computed in at least float32.
        causal: hide future keys. Aligned bottom-right: query ``i`` sees keys
            ``j <= i + (S - L)``. Combined with a keep-mask by logical AND. Must be a bool.
        scale: multiplier of the scores (a real number); ``None`` means ``1 / sqrt(D)``.
        return_weights: also return the attention weights.

    Returns:
        ``out`` of shape ``(..., L, Dv)``, and when ``return_weights`` the weights
        ``(..., L, S)``. The output dtype is the common dtype of ``q``, ``k`` and ``v`` (an
        additive float32 mask on float16 inputs does not promote the output). The arithmetic
        is done in the common dtype of the inputs and the mask, but at least float32: float16
        inputs are upcast before ``q k^T``, so scores such as ``64 * 40 * 40`` that overflow
        float16 stay finite, and the result is cast back. A query with no visible key gets
        output 0 and weights 0.

    Raises:
        ValueError: if ``q`` and ``k`` disagree on ``D``, ``k`` and ``v`` on ``S``, the leading
            (batch) dimensions do not broadcast, the mask does not broadcast to
            ``(..., L, S)`` or contains nan or ``+inf``, ``scale`` is not finite, an input
            contains nan or inf, or a visible score overflows to +-inf even in the compute dtype.
        TypeError: for non-numeric inputs, a non-real ``scale`` or a non-bool ``causal``.

    Source: Vaswani et al. (2017), eq. 1.
    """
    q, k, v, batch = _check_qkv(q, k, v)
    L, D = q.shape[-2], q.shape[-1]
    S = k.shape[-2]
    scores_shape = (*batch, L, S)

    causal = _check_bool(causal, "causal")
    out_dtype = np.result_type(q, k, v)
    # float16 scores overflow at 65504 (q = k = 40 with D = 64 already does): compute in at
    # least float32, as torch's math backend effectively does, and cast the result back.
    compute_dtype = np.result_type(out_dtype, np.float32)
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
            compute_dtype = np.result_type(compute_dtype, mask_arr.dtype)
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
    if isinstance(scale, np.ndarray) and scale.ndim == 0:
        scale = scale[()]
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number or None, got {scale!r} "
                        f"({type(scale).__name__})")
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")

    qc = q.astype(compute_dtype, copy=False)
    kc = k.astype(compute_dtype, copy=False)
    vc = v.astype(compute_dtype, copy=False)

    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        scores = (qc @ np.swapaxes(kc, -1, -2)) * np.asarray(scale, dtype=compute_dtype)
    scores = np.broadcast_to(scores, scores_shape)  # (..., L, S)
    overflow = ~np.isfinite(scores)
    if keep is not None:
        overflow &= keep  # a hidden score may be anything: it is replaced below
    if overflow.any():
        raise ValueError(
            f"the scaled scores q k^T * scale (shape {scores_shape}, computed in "
            f"{np.dtype(compute_dtype).name}) overflow to inf for q of shape {q.shape} and k of "
            f"shape {k.shape}; rescale q or k, or pass float64 inputs"
        )
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

    Raises:
        ValueError: if ``p`` is a scalar, ``axis`` is out of range, or ``p`` holds a negative
            or nan entry (not a probability).
        TypeError: if ``axis`` is not an integer or ``p`` is not numeric.
    """
    p = _as_float_array(p, "p")
    if p.ndim == 0:
        raise ValueError("p must have at least one axis; got a scalar")
    axis = _check_axis(axis, p.ndim, p.shape)
    if np.isnan(p).any() or (p < 0).any():
        raise ValueError(f"p of shape {p.shape} holds negative or nan entries; it must hold "
                         "probabilities")
    logp = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logp, axis=axis)
