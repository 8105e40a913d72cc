"""Softmax and scaled dot-product attention in NumPy.

This module is the reference the rest of the book is checked against, so it is written to be
read: one function per idea, every shape named, and the edge cases (rows with no visible key,
empty sequences, low-precision inputs) handled explicitly rather than left to IEEE arithmetic.

Conventions (see ``attnbook`` and the notation appendix of the book): queries ``(..., L, D)``,
keys ``(..., S, D)``, values ``(..., S, Dv)``; boolean masks are keep-masks (``True`` = may
attend); causal masks are aligned bottom-right; a query with no visible key outputs 0.

Source: Vaswani et al., "Attention Is All You Need" (2017), eq. 1:
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``. The additive score of attention's first
use in translation, ``v_a^T tanh(W_q q_i + W_k k_j)``, follows Bahdanau, Cho and Bengio,
"Neural Machine Translation by Jointly Learning to Align and Translate" (ICLR 2015), section 3.1
and appendix A.1.2.

Torch twin: :func:`attnbook.layers.scaled_dot_product_attention` (the same conventions on
``(B, H, L, D)`` tensors, the attention of the book's models). Each building block has its NumPy
version in its concept's module and its torch version under the same name in
:mod:`attnbook.layers`.
"""

from __future__ import annotations

import numpy as np

from . import checks
from .masks import causal_mask

__all__ = [
    "compute_dtype",
    "softmax_core",
    "softmax",
    "masked_softmax_core",
    "masked_softmax",
    "scaled_dot_product_attention_core",
    "scaled_dot_product_attention",
    "attention_head_core",
    "attention_head",
    "softmax_jacobian_core",
    "softmax_jacobian",
    "entropy_core",
    "entropy",
    "additive_scores_core",
    "additive_scores",
    "additive_attention_core",
    "additive_attention",
]


def compute_dtype(*arrays) -> np.dtype:
    """The dtype the NumPy paths compute in: the inputs' common dtype, but at least float32.

    float16 sums overflow at 65504 (a softmax over 70,000 equal scores, a running denominator
    past 2048 tiles), so every reduction runs in float32 or wider and the result is cast back.
    """
    return np.result_type(*arrays, np.float32)


# fmt: off
def softmax_core(x, axis=-1):
    """Softmax along ``axis``: subtract the row max, exponentiate, normalise.

    A row that is ``-inf`` everywhere (nothing visible) gives zeros, not nan.
    """
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)  # all-hidden row: shift by 0
    e = np.exp(x - m)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
# fmt: on


def softmax(x, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis``; checks its input and calls :func:`softmax_core`.

    Subtracts the row maximum before exponentiating, so large scores (``[1000, 1000]`` in
    float32) do not overflow. A row whose entries are all ``-inf`` (every position hidden)
    returns zeros instead of the ``nan`` that ``-inf - (-inf)`` would produce. The sum runs in
    at least float32 (:func:`compute_dtype`), so a float16 row of 70,000 keys does not overflow.

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
    x = checks.check_ndim(checks.as_float_array(x, "x"), "x", "(..., n)")  # not a scalar
    axis = checks.check_axis(axis, x.ndim, x.shape)
    checks.check_no_nan_or_posinf(
        x, "x", "; softmax is undefined there (hide positions with -inf or a keep-mask instead)"
    )
    if x.shape[axis] == 0:
        return x.copy()
    return softmax_core(x.astype(compute_dtype(x)), axis).astype(x.dtype)


# fmt: off
def masked_softmax_core(scores, keep):
    """Softmax of scores (..., L, S) over the keys where ``keep`` is True."""
    hidden = np.where(keep, scores, -np.inf)  # replace, never add
    return softmax_core(hidden, axis=-1)  # (..., L, S)
# fmt: on


def masked_softmax(scores, mask) -> np.ndarray:
    """Softmax of raw scores under a boolean keep-mask, along the last axis.

    No scaling is applied: this is the softmax step of attention on its own. Hidden
    positions are *replaced* by ``-inf`` (not added to), so whatever score sits behind the mask
    — even ``nan`` — cannot leak into the result. A row with no visible position returns all
    zeros. Checks its input and calls :func:`masked_softmax_core`.

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
    scores = checks.as_float_array(scores, "scores")
    if mask is None:
        return softmax(scores, axis=-1)
    mask = checks.check_keep_mask(mask, "mask", scores.shape)
    visible = np.where(mask, scores, 0.0)  # (..., L, S): what the mask hides cannot leak
    checks.check_no_nan_or_posinf(
        visible, "scores", ", a visible position; softmax is undefined there"
    )
    if scores.ndim == 0 or scores.shape[-1] == 0:
        return np.zeros(np.broadcast_shapes(scores.shape, mask.shape), scores.dtype)
    weights = masked_softmax_core(scores.astype(compute_dtype(scores)), mask)
    return weights.astype(scores.dtype)


# fmt: off
def scaled_dot_product_attention_core(q, k, v, mask=None, scale=None):
    """``softmax(q k^T * scale + mask) v`` and the weights.

    q (..., L, D), k (..., S, D), v (..., S, Dv). A boolean ``mask`` is a
    keep-mask (False hides the key); a float ``mask`` is added to the scores.
    """
    if scale is None:
        scale = 1 / np.sqrt(q.shape[-1])
    scores = q @ np.swapaxes(k, -1, -2) * scale  # (..., L, S)
    if mask is not None and mask.dtype == bool:
        scores = np.where(mask, scores, -np.inf)  # hidden: weight 0
    elif mask is not None:
        scores = scores + mask  # additive mask
    weights = softmax_core(scores, axis=-1)  # (..., L, S)
    return weights @ v, weights  # (..., L, Dv), (..., L, S)
# fmt: on


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

    Checks its arguments, combines the masks, and calls
    :func:`scaled_dot_product_attention_core` in the compute dtype.

    Args:
        q: queries ``(..., L, D)``.
        k: keys ``(..., S, D)``.
        v: values ``(..., S, Dv)``.
        mask: ``None``; a boolean keep-mask (``True`` = may attend), applied by replacing
            hidden scores; or an additive floating-point mask, added to the scaled scores (as
            in torch). Either must broadcast to the scores' shape ``(..., L, S)`` without
            enlarging it; a 1-D mask is therefore ``(S,)``, a key mask (also when
            ``L == S``), and a per-query mask is ``(L, 1)``. A float mask of 0s and 1s is
            *added* (it does not hide anything); pass a boolean array to hide keys. An
            additive mask filled with ``finfo(dtype).min``
            (:func:`attnbook.masks.additive_mask`) is an ordinary, tiny score: a row that is
            ``finfo.min`` everywhere is a plain softmax (uniform when the scores are equal),
            not an empty row — in every dtype, because the scores are computed in at least
            float32.
        causal: hide future keys. Aligned bottom-right: query ``i`` sees keys
            ``j <= i + (S - L)``. Combined with a keep-mask by logical AND. Must be a bool.
        scale: multiplier of the scores (a real number, or a 0-d array); ``None`` means
            ``1 / sqrt(D)``.
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
    q, k, v, batch = checks.check_qkv(q, k, v)
    L, D = q.shape[-2], q.shape[-1]
    S = k.shape[-2]
    scores_shape = (*batch, L, S)
    causal = checks.check_bool(causal, "causal")
    scale = checks.check_scale(scale, D)
    out_dtype = np.result_type(q, k, v)
    dtype = compute_dtype(out_dtype)
    additive = keep = None
    if mask is not None:
        mask = checks.check_mask(checks.as_array(mask, "mask"), "mask", scores_shape)  # NumPy
        if mask.dtype == np.bool_:
            keep = mask
        else:
            additive = mask
            dtype = np.result_type(dtype, mask.dtype)
    if causal:
        keep = causal_mask(L, S) if keep is None else np.logical_and(keep, causal_mask(L, S))

    if S == 0:  # no key at all: every query outputs 0
        out = np.zeros((*batch, L, v.shape[-1]), out_dtype)
        return (out, np.zeros(scores_shape, out_dtype)) if return_weights else out
    qc, kc, vc = (x.astype(dtype, copy=False) for x in (q, k, v))
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        scores = qc @ np.swapaxes(kc, -1, -2) * dtype.type(scale)  # (..., L, S)
    overflow = ~np.isfinite(np.broadcast_to(scores, scores_shape))
    if keep is not None:
        overflow &= keep  # a hidden score may be anything: it is replaced
    if overflow.any():
        raise ValueError(
            f"the scaled scores q k^T * scale (shape {scores_shape}, computed in "
            f"{np.dtype(dtype).name}) overflow to inf for q of shape {q.shape} and k of "
            f"shape {k.shape}; rescale q or k, or pass float64 inputs"
        )
    del scores, overflow  # free the n x n check arrays before the core allocates its own
    mask_c = keep  # a keep-mask, an additive mask, or both folded into one additive mask
    if additive is not None:
        add = additive.astype(dtype, copy=False)
        mask_c = add if keep is None else np.where(keep, add, dtype.type(-np.inf))
    out, weights = scaled_dot_product_attention_core(qc, kc, vc, mask_c, dtype.type(scale))
    out = np.broadcast_to(out, (*batch, L, v.shape[-1])).astype(out_dtype)
    if return_weights:
        return out, np.broadcast_to(weights, scores_shape).astype(out_dtype)
    return out


# fmt: off
def attention_head_core(x, context, w_q, w_k, w_v, mask=None):
    """One attention head; self-attention when ``context`` is ``x``.

    x (..., L, d_model) asks, context (..., S, d_model) is read; w_q and
    w_k (d_model, d_k), w_v (d_model, d_v). Returns (..., L, d_v) and the
    weights (..., L, S).
    """
    q = x @ w_q  # (..., L, d_k): the queries come from x
    k = context @ w_k  # (..., S, d_k): the keys come from the context
    v = context @ w_v  # (..., S, d_v): so do the values
    return scaled_dot_product_attention_core(q, k, v, mask)
# fmt: on


def attention_head(
    x, w_q, w_k, w_v, *, context=None, mask=None, causal: bool = False, return_weights: bool = False
):
    """One attention head with its projections: self-attention, or cross-attention to ``context``.

    ``Q = x W_Q``, ``K = c W_K``, ``V = c W_V`` and ``softmax(Q K^T / sqrt(d_k)) V``, where
    ``c`` is ``context`` (cross-attention) or ``x`` itself (self-attention, the default): the
    two differ only in where the keys and values come from. The steps are those of
    :func:`attention_head_core`; the attention is :func:`scaled_dot_product_attention`, which
    checks and combines ``mask`` and ``causal`` and computes in at least float32.

    Args:
        x: ``(..., L, d_model)``, the sequence the queries come from.
        w_q: ``(d_model, d_k)`` query projection (the ``x @ W`` layout).
        w_k: ``(d_model, d_k)`` key projection.
        w_v: ``(d_model, d_v)`` value projection.
        context: ``None`` (self-attention) or ``(..., S, d_model)``, the sequence the keys and
            values come from (cross-attention; an encoder's output, the *memory*).
        mask: keep-mask or additive mask broadcastable to ``(..., L, S)`` (as in
            :func:`scaled_dot_product_attention`).
        causal: hide later keys; self-attention only.
        return_weights: also return the ``(..., L, S)`` weights.

    Returns:
        ``(..., L, d_v)`` outputs, one per query (and the weights if ``return_weights``).

    Raises:
        TypeError: an input is not a real numeric array, or ``causal`` is not a bool.
        ValueError: ``x`` or ``context`` has rank below 2, their last axes (``d_model``)
            differ, a projection is not 2-d with ``d_model`` rows, ``w_q`` and ``w_k`` differ in
            ``d_k``, ``causal=True`` with a ``context`` (the whole source is known: nothing to
            hide), or as :func:`scaled_dot_product_attention`.

    Source: Vaswani et al. (2017), section 3.2.1 (eq. 1) and 3.2.3 (the decoder's
    encoder-decoder attention: queries from the decoder, keys and values from the encoder).
    """
    x = checks.as_float_array(x, "x")
    causal = checks.check_causal_context(causal, context)
    c = x if context is None else checks.as_float_array(context, "context")
    for name, arr in (("x", x), ("context", c)):
        checks.check_ndim(arr, name, "(..., seq, d_model)")
    if c.shape[-1] != x.shape[-1]:
        raise ValueError(
            f"x has d_model {x.shape[-1]} but context has {c.shape[-1]} "
            f"(x.shape={x.shape}, context.shape={c.shape})"
        )
    d_model = x.shape[-1]
    w_q, w_k, w_v = (
        checks.as_float_array(w, n) for w, n in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v"))
    )
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if w.ndim != 2 or w.shape[0] != d_model:
            raise ValueError(
                f"{name} must have shape (d_model, dim) = ({d_model}, dim); got {w.shape}"
            )
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"w_q gives d_k {w_q.shape[1]} but w_k gives {w_k.shape[1]} "
            f"(w_q.shape={w_q.shape}, w_k.shape={w_k.shape})"
        )
    return scaled_dot_product_attention(
        x @ w_q, c @ w_k, c @ w_v, mask, causal=causal, return_weights=return_weights
    )


# fmt: off
def softmax_jacobian_core(p):
    """Jacobian ``J = diag(p) - p p^T`` of the softmax at its output p.

    p (..., n) -> J (..., n, n) with ``J[i, j] = d p_i / d z_j``.
    """
    eye = np.eye(p.shape[-1], dtype=p.dtype)  # (n, n)
    diag = p[..., :, None] * eye  # (..., n, n) diag(p)
    return diag - p[..., :, None] * p[..., None, :]  # (..., n, n)
# fmt: on


def softmax_jacobian(p) -> np.ndarray:
    """Jacobian of the softmax at output ``p``: ``J = diag(p) - p p^T``.

    Checks its input and calls :func:`softmax_jacobian_core`.

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
    p = checks.check_ndim(checks.as_float_array(p, "p"), "p", "(..., n)")  # not a scalar
    return softmax_jacobian_core(p)


def entropy_core(p, axis=-1):
    """Entropy ``-sum p log p`` (nats) along ``axis``, with 0 log 0 = 0."""
    logp = np.log(np.where(p > 0, p, 1))  # log 1 = 0 where p = 0
    return -np.sum(p * logp, axis=axis)


def entropy(p, axis: int = -1) -> np.ndarray:
    """Shannon entropy ``-sum p log p`` in nats along ``axis`` (``0 log 0 = 0``).

    Checks its input and calls :func:`entropy_core` in at least float32 (a float16 sum over
    many positions loses the tail).

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
    p = checks.check_ndim(checks.as_float_array(p, "p"), "p", "(..., n)")  # not a scalar
    axis = checks.check_axis(axis, p.ndim, p.shape)
    if np.isnan(p).any() or (p < 0).any():
        raise ValueError(
            f"p of shape {p.shape} holds negative or nan entries; it must hold probabilities"
        )
    return entropy_core(p.astype(compute_dtype(p)), axis).astype(p.dtype)


# fmt: off
def additive_scores_core(q, k, W_q, W_k, v_a):
    """Additive (Bahdanau) scores ``v_a^T tanh(W_q q_i + W_k k_j)``.

    q (..., L, d_q), k (..., S, d_k), W_q (d_a, d_q), W_k (d_a, d_k),
    v_a (d_a,) -> scores (..., L, S). Materialises an (..., L, S, d_a) array.
    """
    q_a = q @ W_q.T  # (..., L, d_a)
    k_a = k @ W_k.T  # (..., S, d_a)
    hidden = np.tanh(q_a[..., :, None, :]
                     + k_a[..., None, :, :])  # (..., L, S, d_a)
    return hidden @ v_a  # (..., L, S)
# fmt: on


# fmt: off
def additive_attention_core(q, k, v, W_q, W_k, v_a, keep=None):
    """Additive attention: scores, masked softmax, weighted sum of values.

    v (..., S, d_v); ``keep`` a boolean keep-mask broadcasting to (..., L, S)
    or None. Returns the output (..., L, d_v) and the weights (..., L, S).
    """
    scores = additive_scores_core(q, k, W_q, W_k, v_a)  # (..., L, S)
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)  # hidden: weight 0
    weights = softmax_core(scores, axis=-1)  # (..., L, S)
    return weights @ v, weights  # (..., L, d_v), (..., L, S)
# fmt: on


_NO_V = object()  # additive_scores has no values


def _check_additive(q, k, W_q, W_k, v_a, v=_NO_V):
    """The arrays of :func:`additive_scores` / :func:`additive_attention`, checked.

    Returns ``(q, k, W_q, W_k, v_a, v, batch)`` with ``batch`` the broadcast leading shape.
    """
    named = {"q": q, "k": k, "W_q": W_q, "W_k": W_k, "v_a": v_a}
    if v is not _NO_V:
        named["v"] = v  # None included: as_float_array refuses it, naming v
    arrs = {name: checks.as_float_array(x, name) for name, x in named.items()}
    for name, layout in (
        ("q", "(..., seq, dim)"),
        ("k", "(..., seq, dim)"),
        ("v", "(..., seq, dim)"),
        ("W_q", "(d_a, d_q)"),
        ("W_k", "(d_a, d_k)"),
        ("v_a", "(d_a,)"),
    ):
        if name in arrs:
            checks.check_ndim(arrs[name], name, layout)
    for name, arr in arrs.items():
        checks.check_finite(arr, name)
    q, k, W_q, W_k, v_a = (arrs[n] for n in ("q", "k", "W_q", "W_k", "v_a"))
    if W_q.shape[1] != q.shape[-1]:
        raise ValueError(
            f"W_q has shape {W_q.shape} (d_a, d_q) but q has d_q = {q.shape[-1]} "
            f"(q.shape={q.shape})"
        )
    if W_k.shape[1] != k.shape[-1]:
        raise ValueError(
            f"W_k has shape {W_k.shape} (d_a, d_k) but k has d_k = {k.shape[-1]} "
            f"(k.shape={k.shape})"
        )
    if not W_q.shape[0] == W_k.shape[0] == v_a.shape[0]:
        raise ValueError(
            f"W_q, W_k and v_a disagree on d_a: W_q.shape={W_q.shape}, "
            f"W_k.shape={W_k.shape}, v_a.shape={v_a.shape}"
        )
    v = arrs.get("v")
    if v is not None:
        checks.check_kv_lengths(k, v)
    batch = checks.check_leading_dims(**{n: arrs[n] for n in ("q", "k", "v") if n in arrs})
    return q, k, W_q, W_k, v_a, v, batch


def _additive_overflow(scores_shape, dtype, q, k, where):
    """The ValueError of an additive score that is not finite (overflow, or inf - inf)."""
    return ValueError(
        f"the additive scores v_a^T tanh(W_q q_i + W_k k_j) (shape {scores_shape}, computed "
        f"in {np.dtype(dtype).name}) overflow to inf or are undefined (inf - inf in "
        f"W_q q_i + W_k k_j){where} for q of shape {q.shape} and k of shape {k.shape}; "
        "rescale q, k, W_q, W_k or v_a, or pass float64 inputs"
    )


def additive_scores(q, k, W_q, W_k, v_a) -> np.ndarray:
    """Additive (Bahdanau) attention scores ``s_ij = v_a^T tanh(W_q q_i + W_k k_j)``.

    Checks its arguments and calls :func:`additive_scores_core` in the compute dtype (at least
    float32). Unlike the dot product, queries and keys may have different widths (``d_q`` and
    ``d_k``): both are projected to the alignment width ``d_a`` first. The core materialises
    the ``(..., L, S, d_a)`` array of ``tanh`` arguments before reducing it with ``v_a`` —
    ``d_a`` times the memory of the score matrix. There is no scale: ``tanh`` keeps every
    term in ``[-1, 1]``, so ``|s_ij| <= ||v_a||_1``.

    Args:
        q: queries ``(..., L, d_q)`` (Bahdanau's decoder states ``s_{i-1}``).
        k: keys ``(..., S, d_k)`` (Bahdanau's annotations ``h_j``).
        W_q: ``(d_a, d_q)``, Bahdanau's ``W_a``.
        W_k: ``(d_a, d_k)``, Bahdanau's ``U_a``.
        v_a: ``(d_a,)``, Bahdanau's ``v_a``.

    Returns:
        Scores ``(..., L, S)`` (the leading dimensions of ``q`` and ``k`` broadcast), in the
        common dtype of the inputs.

    Raises:
        TypeError: if an input is not a real numeric array.
        ValueError: if ``q`` or ``k`` has fewer than 2 dimensions, ``W_q``/``W_k`` are not 2-D
            or ``v_a`` not 1-D, ``W_q`` does not match ``d_q`` or ``W_k`` ``d_k``, the three
            parameters disagree on ``d_a``, the leading dimensions do not broadcast, an
            input holds nan or inf, or a score is not finite: it overflows in the compute dtype
            (``|s_ij|`` up to ``||v_a||_1``) or in the output dtype (float16 above 65504), or
            ``W_q q_i + W_k k_j`` meets ``inf - inf``.

    Memory: the core's ``(..., L, S, d_a)`` intermediates take ``L S d_a`` numbers of the
    compute dtype each (4 GiB at ``L = S = 4096``, ``d_a = 64`` in float32); no guard refuses
    a size that does not fit.

    Source: Bahdanau, Cho and Bengio (2015), section 3.1 (``e_ij = a(s_{i-1}, h_j)``) and
    appendix A.1.2 (``a(s_{i-1}, h_j) = v_a^T tanh(W_a s_{i-1} + U_a h_j)``).
    """
    q, k, W_q, W_k, v_a, _, batch = _check_additive(q, k, W_q, W_k, v_a)
    out_dtype = np.result_type(q, k, W_q, W_k, v_a)
    dtype = compute_dtype(out_dtype)
    qc, kc, wq, wk, va = (x.astype(dtype, copy=False) for x in (q, k, W_q, W_k, v_a))
    scores_shape = (*batch, q.shape[-2], k.shape[-2])
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        scores = additive_scores_core(qc, kc, wq, wk, va)  # (..., L, S)
        if not np.isfinite(scores).all():
            raise _additive_overflow(scores_shape, dtype, q, k, "")
        out = np.broadcast_to(scores, scores_shape).astype(out_dtype)
    if not np.isfinite(out).all():  # float16 tops out at 65504
        raise ValueError(
            f"the additive scores (shape {scores_shape}, computed in {np.dtype(dtype).name}) "
            f"reach |s| = {float(np.abs(scores).max()):.6g}, beyond the output dtype "
            f"{np.dtype(out_dtype).name} (max {float(np.finfo(out_dtype).max):.6g}), for q of "
            f"shape {q.shape} and k of shape {k.shape}; scale v_a down or pass float32 inputs"
        )
    return out


def additive_attention(q, k, v, W_q, W_k, v_a, mask=None, *, return_weights: bool = False):
    """Additive (Bahdanau) attention: ``softmax_j(v_a^T tanh(W_q q_i + W_k k_j)) v``.

    Checks its arguments and calls :func:`additive_attention_core` in the compute dtype (at
    least float32), then casts back. The scores are :func:`additive_scores`; a keep-mask is
    applied by replacing the hidden scores, as in :func:`scaled_dot_product_attention`, and a
    query with no visible key (every key hidden, or ``S = 0``) gets output 0 and weights 0.

    Args:
        q: queries ``(..., L, d_q)``.
        k: keys ``(..., S, d_k)``.
        v: values ``(..., S, d_v)`` (Bahdanau uses the annotations themselves, ``v = k``).
        W_q: ``(d_a, d_q)``.
        W_k: ``(d_a, d_k)``.
        v_a: ``(d_a,)``.
        mask: ``None`` or a boolean keep-mask (``True`` = may attend) that broadcasts to the
            scores' shape ``(..., L, S)`` without enlarging it.
        return_weights: also return the attention weights.

    Returns:
        ``out`` ``(..., L, d_v)``, and when ``return_weights`` the weights ``(..., L, S)``, in
        the common dtype of the inputs.

    Raises:
        TypeError: if an input is not a real numeric array, ``mask`` is not boolean, or
            ``return_weights`` is not a bool.
        ValueError: for the shape errors of :func:`additive_scores`, ``k`` and ``v`` of
            different lengths ``S``, a mask that does not broadcast to ``(..., L, S)``, an
            input holding nan or inf, or a visible score that is not finite in the compute
            dtype (overflow, or ``inf - inf`` in ``W_q q_i + W_k k_j``), as in
            :func:`scaled_dot_product_attention`. ``v=None`` is a TypeError naming ``v``.

    Source: Bahdanau, Cho and Bengio (2015), section 3.1, eqs. (5) and (6) (the weights
    ``alpha_ij`` and the context ``c_i = sum_j alpha_ij h_j``) and appendix A.1.2 (the score).
    """
    q, k, W_q, W_k, v_a, v, batch = _check_additive(q, k, W_q, W_k, v_a, v=v)
    return_weights = checks.check_bool(return_weights, "return_weights")
    L, S = q.shape[-2], k.shape[-2]
    scores_shape = (*batch, L, S)
    keep = None if mask is None else checks.check_keep_mask(mask, "mask", scores_shape)
    out_dtype = np.result_type(q, k, v, W_q, W_k, v_a)
    dtype = compute_dtype(out_dtype)
    if S == 0:  # no key at all: every query outputs 0
        out = np.zeros((*batch, L, v.shape[-1]), out_dtype)
        return (out, np.zeros(scores_shape, out_dtype)) if return_weights else out
    qc, kc, vc, wq, wk, va = (x.astype(dtype, copy=False) for x in (q, k, v, W_q, W_k, v_a))
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        out, weights = additive_attention_core(qc, kc, vc, wq, wk, va, keep)
    # A visible score that is nan or +inf, or -inf at every visible key, leaves its row of
    # weights all 0 (softmax_core's empty row); finite scores give a row summing to 1.
    visible = np.ones(scores_shape, bool) if keep is None else np.broadcast_to(keep, scores_shape)
    lost = visible.any(axis=-1) & ~(np.broadcast_to(weights, scores_shape).sum(axis=-1) > 0)
    if lost.any():
        raise _additive_overflow(scores_shape, dtype, q, k, " at a visible position")
    out = np.broadcast_to(out, (*batch, L, v.shape[-1])).astype(out_dtype)
    if return_weights:
        return out, np.broadcast_to(weights, scores_shape).astype(out_dtype)
    return out
