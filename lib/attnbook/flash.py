"""FlashAttention: exact attention computed tile by tile, without the ``L x S`` score matrix.

Three implementations of the same algorithm, from the most readable to the fastest:

:func:`tiled_attention`
    NumPy, inputs ``(..., L, D)`` like :func:`attnbook.attention.scaled_dot_product_attention`.
    The forward loop of FlashAttention written to be read: for each block of queries it keeps a
    running row maximum ``m``, a running denominator ``l`` and an unnormalised accumulator, and
    rescales both by ``exp(m_old - m_new)`` whenever a new block of keys raises the maximum (the
    *online softmax*). ``on_step`` (or :func:`tiled_attention_steps`) records every step for the
    book's step-by-step figure.
:func:`tiled_attention_torch`
    torch, ``(B, H, L, D)``, differentiable through a ``torch.autograd.Function`` whose
    forward is the same tiled loop and whose backward is FlashAttention-2's: it recomputes the
    probabilities ``P`` block by block from ``Q``, ``K`` and the saved log-sum-exp instead of
    storing them. Runs on any device, CPU included.
:func:`flash_attention`
    The entry point for ``(B, H, L, D)`` torch tensors. ``backend="auto"`` takes the Triton
    kernel (:mod:`attnbook.flash_triton`) for CUDA tensors it supports and the tiled torch path
    otherwise; :func:`select_backend` says which one a call would take and
    :func:`triton_unsupported_reason` says why the kernel was not taken.

Conventions (the notation appendix of the book): queries ``(B, H, L, D)``, keys and values
``(B, H_kv, S, D)`` with ``H_kv`` dividing ``H`` (GQA: query head ``h`` reads key/value head
``h // (H // H_kv)``);
``causal=True`` aligns bottom-right when ``L != S`` (query ``i`` sees keys
``j <= i + (S - L)``); a query that sees no key outputs 0, and its gradient is 0; the default
scale is ``1 / sqrt(D)``. The log-sum-exp of a row is ``log(sum_j exp(s_ij))`` of its scaled,
visible scores, ``-inf`` for a row that sees no key.

Importing this module needs NumPy only: torch is imported inside the torch functions and
Triton (``attnbook.flash_triton``) only when the kernel is used.

Sources: Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with
IO-Awareness" (2022), Algorithm 1 (forward); Dao, "FlashAttention-2: Faster Attention with
Better Parallelism and Work Partitioning" (2023), Algorithm 1 (forward with the final
normalisation and the log-sum-exp) and Algorithm 2 (backward); Milakov & Gimelshein, "Online
normalizer calculation for softmax" (2018), the running maximum and denominator.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .checks import check_qkv as _check_qkv

__all__ = [
    "TileStep",
    "tiled_attention",
    "tiled_attention_steps",
    "tiled_attention_torch",
    "flash_attention",
    "select_backend",
    "triton_unsupported_reason",
    "BACKENDS",
]

#: The values ``flash_attention(..., backend=...)`` accepts.
BACKENDS = ("auto", "triton", "torch")


# --------------------------------------------------------------------------------------------
# NumPy: the algorithm, written to be read
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TileStep:
    """One step of the tiled forward loop: one block of queries meets one block of keys.

    Every array is a copy taken *after* the step, except ``m_old``. Leading dimensions
    ``...`` are the broadcast batch dimensions of the inputs.

    Attributes:
        q_start, q_stop: the query rows of the block, ``q_start <= i < q_stop``.
        k_start, k_stop: the key columns of the block.
        scores: ``(..., bq, bk)`` scaled scores of the block, ``-inf`` where the causal mask
            hides a key.
        m_old: ``(..., bq)`` running row maximum before the step (``-inf`` before any key).
        m_new: ``(..., bq)`` running row maximum after the step.
        rescale: ``(..., bq)`` the factor ``exp(m_old - m_new)`` applied to ``l`` and to the
            accumulator (0 where ``m_old`` was ``-inf``).
        p: ``(..., bq, bk)`` unnormalised probabilities ``exp(scores - m_new)``.
        l: ``(..., bq)`` running denominator after the step.
        acc: ``(..., bq, Dv)`` unnormalised output ``sum_j exp(s_ij - m_new) v_j`` so far.
        out: ``(..., bq, Dv)`` the output so far, ``acc / l`` (0 where ``l`` is 0): exact
            attention over the keys seen up to this step.
    """

    q_start: int
    q_stop: int
    k_start: int
    k_stop: int
    scores: np.ndarray
    m_old: np.ndarray
    m_new: np.ndarray
    rescale: np.ndarray
    p: np.ndarray
    l: np.ndarray  # noqa: E741  (the paper's name for the running denominator)
    acc: np.ndarray
    out: np.ndarray


def _check_block(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def _check_scale(scale, head_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number or None, got {scale!r}")
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    return scale


def _safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, else 0 (the row that saw no key)."""
    out = np.zeros(np.broadcast_shapes(num.shape, den.shape), dtype=num.dtype)
    np.divide(num, den, out=out, where=den > 0)
    return out


def tiled_attention(
    q,
    k,
    v,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
    return_lse: bool = False,
    on_step: Callable[[TileStep], None] | None = None,
):
    """Exact attention by FlashAttention's tiled loop with the online softmax (NumPy).

    For each block of ``block_q`` queries, the keys and values are visited ``block_k`` at a
    time. With ``s`` the block's scaled scores, the running statistics are updated as::

        m_new = max(m_old, rowmax(s))
        p     = exp(s - m_new)
        l     = exp(m_old - m_new) * l   + rowsum(p)
        acc   = exp(m_old - m_new) * acc + p @ v_block

    and the output is ``acc / l``. Only ``block_q x block_k`` scores exist at any time; the
    result equals ``softmax(q k^T * scale) v`` up to rounding, for every block size.

    Args:
        q: queries ``(..., L, D)``, real (integers are promoted to float64).
        k: keys ``(..., S, D)``.
        v: values ``(..., S, Dv)``. The leading dimensions of ``q``, ``k`` and ``v`` broadcast.
        causal: hide future keys, aligned bottom-right (query ``i`` sees ``j <= i + S - L``).
        scale: multiplier of the scores; ``None`` means ``1 / sqrt(D)``.
        block_q: queries per block (rows of a tile), >= 1.
        block_k: keys per block (columns of a tile), >= 1.
        return_lse: also return the log-sum-exp of each query's scaled visible scores.
        on_step: called with a :class:`TileStep` after every (query block, key block) step.

    Returns:
        ``out`` ``(..., L, Dv)`` in the common dtype of the inputs (the arithmetic is done in
        that dtype), and when ``return_lse`` also ``lse`` ``(..., L)``: ``m + log(l)``, which is
        ``-inf`` for a query that sees no key. Such a query outputs 0.

    Raises:
        ValueError: if the head dims of ``q`` and ``k`` or the lengths of ``k`` and ``v``
            differ, the leading dimensions do not broadcast, an input is not at least 2-D or
            contains nan/inf, ``scale`` is not finite, or a block size is < 1.
        TypeError: for non-numeric inputs or a non-integer block size.

    Source: Dao et al. (2022), Algorithm 1; Dao (2023), Algorithm 1 (lse = m + log l).
    """
    q, k, v, batch = _check_qkv(q, k, v)
    block_q = _check_block(block_q, "block_q")
    block_k = _check_block(block_k, "block_k")
    L, D = q.shape[-2], q.shape[-1]
    S, Dv = k.shape[-2], v.shape[-1]
    scale = _check_scale(scale, D)

    dtype = np.result_type(q, k, v)
    q = np.broadcast_to(q.astype(dtype, copy=False), (*batch, L, D))  # (..., L, D)
    k = np.broadcast_to(k.astype(dtype, copy=False), (*batch, S, D))  # (..., S, D)
    v = np.broadcast_to(v.astype(dtype, copy=False), (*batch, S, Dv))  # (..., S, Dv)
    scale_t = np.asarray(scale, dtype=dtype)
    neg_inf = np.asarray(-np.inf, dtype=dtype)
    offset = S - L  # bottom-right causal alignment: query i sees keys j <= i + offset

    out = np.zeros((*batch, L, Dv), dtype=dtype)
    lse = np.full((*batch, L), -np.inf, dtype=dtype)
    for q0 in range(0, L, block_q):
        q1 = min(q0 + block_q, L)
        q_blk = q[..., q0:q1, :]  # (..., bq, D)
        m = np.full((*batch, q1 - q0), -np.inf, dtype=dtype)  # running row max
        l = np.zeros((*batch, q1 - q0), dtype=dtype)  # noqa: E741  running denominator
        acc = np.zeros((*batch, q1 - q0, Dv), dtype=dtype)  # running unnormalised output
        for k0 in range(0, S, block_k):
            k1 = min(k0 + block_k, S)
            s = (q_blk @ np.swapaxes(k[..., k0:k1, :], -1, -2)) * scale_t  # (..., bq, bk)
            if causal:
                keep = np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None] + offset
                s = np.where(keep, s, neg_inf)  # replace, so nothing leaks from behind
            m_new = np.maximum(m, s.max(axis=-1))  # (..., bq)
            # A row that has seen no visible key yet has m_new = -inf; shift it by 0 so that
            # exp(-inf - 0) = 0 instead of exp(-inf - (-inf)) = nan.
            m_shift = np.where(np.isneginf(m_new), np.zeros((), dtype), m_new)
            rescale = np.exp(m - m_shift)  # (..., bq); 0 while m_old = -inf
            p = np.exp(s - m_shift[..., None])  # (..., bq, bk)
            l = rescale * l + p.sum(axis=-1)  # noqa: E741
            acc = rescale[..., None] * acc + p @ v[..., k0:k1, :]  # (..., bq, Dv)
            if on_step is not None:
                on_step(
                    TileStep(
                        q_start=q0, q_stop=q1, k_start=k0, k_stop=k1,
                        scores=s.copy(), m_old=m.copy(), m_new=m_new.copy(),
                        rescale=rescale.copy(), p=p.copy(), l=l.copy(), acc=acc.copy(),
                        out=_safe_divide(acc, l[..., None]),
                    )
                )
            m = m_new
        out[..., q0:q1, :] = _safe_divide(acc, l[..., None])
        seen = l > 0
        lse[..., q0:q1] = np.where(seen, m + np.log(np.where(seen, l, 1.0)), neg_inf)
    if return_lse:
        return out, lse
    return out


def tiled_attention_steps(q, k, v, **kwargs):
    """Run :func:`tiled_attention` and return its output with the list of every step.

    Args:
        q, k, v: as for :func:`tiled_attention`.
        **kwargs: as for :func:`tiled_attention` (except ``on_step``).

    Returns:
        ``(out, steps)``: ``out`` as :func:`tiled_attention` returns it (a tuple
        ``(out, lse)`` when ``return_lse=True``), and ``steps`` the :class:`TileStep` records
        in the order they happened (query blocks outer, key blocks inner).

    Raises:
        TypeError: if ``on_step`` is passed; otherwise as :func:`tiled_attention`.
    """
    if "on_step" in kwargs:
        raise TypeError("tiled_attention_steps records the steps itself; do not pass on_step")
    steps: list[TileStep] = []
    result = tiled_attention(q, k, v, on_step=steps.append, **kwargs)
    return result, steps


# --------------------------------------------------------------------------------------------
# torch: tiled forward + FlashAttention-2 backward, on any device
# --------------------------------------------------------------------------------------------


def _check_torch_inputs(q, k, v, causal, scale):
    """Validate ``(B, H, L, D)`` / ``(B, H_kv, S, D)`` tensors; return the scale as a float."""
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have shape (B, H, seq, head_dim); got shape {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k and v must be on one device; got {q.device}, {k.device}, {v.device}"
        )
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape (B, H_kv, S, D); got k {tuple(k.shape)} and "
            f"v {tuple(v.shape)}"
        )
    B, H, _, D = q.shape
    if k.shape[0] != B:
        raise ValueError(
            f"q has batch {B} but k has {k.shape[0]} (q {tuple(q.shape)}, k {tuple(k.shape)})"
        )
    if k.shape[-1] != D:
        raise ValueError(
            f"q has head_dim {D} but k has {k.shape[-1]} (q {tuple(q.shape)}, k {tuple(k.shape)})"
        )
    H_kv = k.shape[1]
    if H_kv == 0 or H % H_kv != 0:
        raise ValueError(
            f"n_kv_heads must divide n_heads: q has {H} heads, k and v have {H_kv} "
            f"(q {tuple(q.shape)}, k {tuple(k.shape)})"
        )
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    # The online softmax's empty-row guard would read a nan or -inf running max as "no visible
    # key" and return 0, hiding the corruption; reject non-finite inputs, as the NumPy
    # attention.scaled_dot_product_attention and tiled_attention do.
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.numel() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} of shape {tuple(t.shape)} contains nan or inf")
    return _check_scale(scale, D)


def _tiled_forward_torch(q, k, v, causal: bool, scale: float, block_q: int, block_k: int):
    """Tiled forward on ``(B, H, L, D)`` tensors; returns ``out`` (input dtype) and ``lse``.

    ``lse`` is ``(B, H, L)`` in the compute dtype (float64 for float64 inputs, else float32),
    ``-inf`` for a query with no visible key.
    """
    import torch

    B, H, L, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    G = H // H_kv  # query heads per key/value head
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32  # accumulation dtype
    # Group the G query heads that share a key/value head into one long sequence of G * L
    # queries; pos holds each row's query position for the causal mask.
    qg = q.reshape(B, H_kv, G * L, D)  # (B, H_kv, G*L, D)
    pos = torch.arange(L, device=q.device).repeat(G)  # (G*L,)
    offset = S - L
    out = torch.zeros(B, H_kv, G * L, D, dtype=cdt, device=q.device)
    lse = torch.full((B, H_kv, G * L), -math.inf, dtype=cdt, device=q.device)
    for q0 in range(0, G * L, block_q):
        q1 = min(q0 + block_q, G * L)
        q_blk = qg[:, :, q0:q1].to(cdt)  # (B, H_kv, bq, D)
        m = torch.full((B, H_kv, q1 - q0), -math.inf, dtype=cdt, device=q.device)
        l = torch.zeros(B, H_kv, q1 - q0, dtype=cdt, device=q.device)  # noqa: E741
        acc = torch.zeros(B, H_kv, q1 - q0, D, dtype=cdt, device=q.device)
        last_visible = pos[q0:q1] + offset  # (bq,) the last key each row sees when causal
        for k0 in range(0, S, block_k):
            k1 = min(k0 + block_k, S)
            if causal and k0 > int(last_visible.max()):
                continue  # the whole tile is in the future of every row: nothing to add
            s = (q_blk @ k[:, :, k0:k1].to(cdt).transpose(-1, -2)) * scale  # (B, H_kv, bq, bk)
            if causal:
                keep = torch.arange(k0, k1, device=q.device)[None, :] <= last_visible[:, None]
                s = s.masked_fill(~keep, -math.inf)  # (B, H_kv, bq, bk)
            m_new = torch.maximum(m, s.amax(dim=-1))  # (B, H_kv, bq)
            m_shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
            rescale = torch.exp(m - m_shift)  # 0 while the row has seen no key
            p = torch.exp(s - m_shift[..., None])  # (B, H_kv, bq, bk)
            l = rescale * l + p.sum(dim=-1)  # noqa: E741
            acc = rescale[..., None] * acc + p @ v[:, :, k0:k1].to(cdt)  # (B, H_kv, bq, D)
            m = m_new
        seen = l > 0
        out[:, :, q0:q1] = torch.where(
            seen[..., None], acc / torch.where(seen, l, torch.ones_like(l))[..., None], 0.0
        )
        lse[:, :, q0:q1] = torch.where(
            seen, m + torch.log(torch.where(seen, l, torch.ones_like(l))), -math.inf
        )
    out = out.reshape(B, H, L, D).to(q.dtype)  # (B, H, L, D)
    return out, lse.reshape(B, H, L)  # (B, H, L)


def _tiled_backward_torch(do, q, k, v, out, lse, causal, scale, block_q, block_k):
    """FlashAttention-2 backward: recompute P per tile from ``lse``; returns dq, dk, dv."""
    import torch

    B, H, L, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    G = H // H_kv
    cdt = lse.dtype
    qg = q.reshape(B, H_kv, G * L, D).to(cdt)  # (B, H_kv, G*L, D)
    dog = do.reshape(B, H_kv, G * L, D).to(cdt)  # (B, H_kv, G*L, D)
    og = out.reshape(B, H_kv, G * L, D).to(cdt)  # (B, H_kv, G*L, D)
    lseg = lse.reshape(B, H_kv, G * L)  # (B, H_kv, G*L)
    # Rows that saw no key have lse = -inf and P = 0; use +inf so exp(s - lse) = 0, not nan.
    lse_safe = torch.where(torch.isneginf(lseg), torch.full_like(lseg, math.inf), lseg)
    delta = (dog * og).sum(dim=-1)  # (B, H_kv, G*L)  D_i = rowsum(dO_i * O_i)
    pos = torch.arange(L, device=q.device).repeat(G)  # (G*L,)
    offset = S - L
    dq = torch.zeros_like(qg)  # (B, H_kv, G*L, D)
    dk = torch.zeros(B, H_kv, S, D, dtype=cdt, device=q.device)
    dv = torch.zeros(B, H_kv, S, D, dtype=cdt, device=q.device)
    for k0 in range(0, S, block_k):
        k1 = min(k0 + block_k, S)
        k_blk = k[:, :, k0:k1].to(cdt)  # (B, H_kv, bk, D)
        v_blk = v[:, :, k0:k1].to(cdt)  # (B, H_kv, bk, D)
        dk_blk = torch.zeros_like(k_blk)
        dv_blk = torch.zeros_like(v_blk)
        for q0 in range(0, G * L, block_q):
            q1 = min(q0 + block_q, G * L)
            last_visible = pos[q0:q1] + offset  # (bq,)
            if causal and k0 > int(last_visible.max()):
                continue
            s = (qg[:, :, q0:q1] @ k_blk.transpose(-1, -2)) * scale  # (B, H_kv, bq, bk)
            if causal:
                keep = torch.arange(k0, k1, device=q.device)[None, :] <= last_visible[:, None]
                s = s.masked_fill(~keep, -math.inf)
            p = torch.exp(s - lse_safe[:, :, q0:q1, None])  # (B, H_kv, bq, bk)
            do_blk = dog[:, :, q0:q1]  # (B, H_kv, bq, D)
            dv_blk += p.transpose(-1, -2) @ do_blk  # (B, H_kv, bk, D)
            dp = do_blk @ v_blk.transpose(-1, -2)  # (B, H_kv, bq, bk)
            ds = p * (dp - delta[:, :, q0:q1, None])  # (B, H_kv, bq, bk)
            dq[:, :, q0:q1] += (ds @ k_blk) * scale  # (B, H_kv, bq, D)
            dk_blk += (ds.transpose(-1, -2) @ qg[:, :, q0:q1]) * scale  # (B, H_kv, bk, D)
        dk[:, :, k0:k1] = dk_blk
        dv[:, :, k0:k1] = dv_blk
    dq = dq.reshape(B, H, L, D).to(q.dtype)  # (B, H, L, D)
    return dq, dk.to(k.dtype), dv.to(v.dtype)


def _make_tiled_function():
    import torch

    class TiledAttentionFunction(torch.autograd.Function):
        """Tiled attention forward, FlashAttention-2 backward (Dao, 2023, Algorithms 1-2).

        Saves ``q, k, v, out`` and the log-sum-exp ``(B, H, L)`` — never the ``L x S``
        probabilities, which the backward recomputes tile by tile.
        """

        @staticmethod
        def forward(ctx, q, k, v, causal, scale, block_q, block_k):
            out, lse = _tiled_forward_torch(q, k, v, causal, scale, block_q, block_k)
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.causal, ctx.scale, ctx.block_q, ctx.block_k = causal, scale, block_q, block_k
            return out

        @staticmethod
        def backward(ctx, do):
            q, k, v, out, lse = ctx.saved_tensors
            dq, dk, dv = _tiled_backward_torch(
                do, q, k, v, out, lse, ctx.causal, ctx.scale, ctx.block_q, ctx.block_k
            )
            return dq, dk, dv, None, None, None, None

    return TiledAttentionFunction


_TILED_FUNCTION = None


def tiled_attention_torch(
    q,
    k,
    v,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
):
    """Differentiable tiled attention in torch: tiled forward, FlashAttention-2 backward.

    Float16 and bfloat16 inputs are computed with float32 accumulation, float64 inputs in
    float64 (so ``torch.autograd.gradcheck`` applies). Memory: the forward keeps one
    ``block_q x block_k`` tile of scores per (batch, key/value head) at a time, and autograd
    saves the inputs, the output and the ``(B, H, L)`` log-sum-exp only.

    Args:
        q: queries ``(B, H, L, D)``, floating point.
        k: keys ``(B, H_kv, S, D)``, same dtype and device; ``H_kv`` divides ``H`` (GQA).
        v: values ``(B, H_kv, S, D)``.
        causal: hide future keys, aligned bottom-right.
        scale: multiplier of the scores; ``None`` means ``1 / sqrt(D)``.
        block_q: rows per tile, counted over the ``H // H_kv`` query heads that share a
            key/value head laid end to end; >= 1.
        block_k: keys per tile; >= 1.

    Returns:
        ``out`` ``(B, H, L, D)``, dtype of ``q``; 0 for a query with no visible key (and its
        gradients are 0).

    Raises:
        TypeError: for non-tensor, non-floating or mixed-dtype inputs, or a non-bool ``causal``.
        ValueError: for wrong ranks, mismatched batch/head_dim/lengths, ``H_kv`` not
            dividing ``H``, inputs on different devices, nan or inf in ``q``, ``k`` or ``v``,
            a non-finite ``scale`` or a block < 1.

    Source: Dao (2023), Algorithms 1 and 2.
    """
    global _TILED_FUNCTION
    scale = _check_torch_inputs(q, k, v, causal, scale)
    block_q = _check_block(block_q, "block_q")
    block_k = _check_block(block_k, "block_k")
    if _TILED_FUNCTION is None:
        _TILED_FUNCTION = _make_tiled_function()
    return _TILED_FUNCTION.apply(q, k, v, bool(causal), scale, block_q, block_k)


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------


def _triton_module():
    """Import :mod:`attnbook.flash_triton`, or return the reason it cannot be imported."""
    try:
        from . import flash_triton
    except ImportError as exc:  # triton is not installed
        return None, f"triton cannot be imported ({exc})"
    return flash_triton, None


def triton_unsupported_reason(q, k, v) -> str | None:
    """Why the Triton kernel cannot run these inputs, or ``None`` if it can.

    The kernel needs: triton importable; CUDA tensors, or CPU tensors when Triton's interpreter
    is on (``TRITON_INTERPRET=1`` set before :mod:`attnbook.flash_triton` was imported); dtype
    float16, bfloat16 or float32; head_dim a multiple of 8 from 16 to 128.

    Args:
        q, k, v: tensors as for :func:`flash_attention` (already validated shapes).

    Returns:
        A sentence naming the failed condition, or ``None``.
    """
    mod, why = _triton_module()
    if mod is None:
        return why
    return mod.unsupported_reason(q, k, v)


def select_backend(q, k, v, backend: str = "auto") -> str:
    """The backend :func:`flash_attention` takes for these inputs: ``"triton"`` or ``"torch"``.

    ``"auto"`` picks ``"triton"`` for CUDA tensors the kernel supports
    (:func:`triton_unsupported_reason` is ``None``) and ``"torch"`` otherwise — CPU tensors
    always go to the torch path, even under the interpreter, which is far slower.

    Args:
        q, k, v: the inputs of :func:`flash_attention`.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``"triton"`` or ``"torch"``.

    Raises:
        ValueError: if ``backend`` is not one of :data:`BACKENDS`, or ``backend="triton"`` and
            the kernel does not support the inputs (the message gives the reason).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "torch":
        return "torch"
    if backend == "auto":
        if not q.is_cuda:
            return "torch"
        return "torch" if triton_unsupported_reason(q, k, v) is not None else "triton"
    why = triton_unsupported_reason(q, k, v)
    if why is not None:
        raise ValueError(
            f"backend='triton' cannot run q {tuple(q.shape)} {q.dtype} on {q.device}: {why}"
        )
    return "triton"


def flash_attention(q, k, v, *, causal: bool = False, scale: float | None = None,
                    backend: str = "auto"):
    """FlashAttention for ``(B, H, L, D)`` torch tensors, differentiable, with GQA.

    Computes ``softmax(q k^T * scale) v`` without materialising the ``L x S`` matrix.

    Backends:
        ``"auto"``: the Triton kernel for CUDA tensors it supports, the tiled torch path for
        everything else (CPU tensors, float64, head_dim > 128, ...). Call
        :func:`select_backend` with the same arguments to see the choice, and
        :func:`triton_unsupported_reason` for the reason the kernel was passed over.
        ``"triton"``: force the kernel (:mod:`attnbook.flash_triton`); on CPU tensors it needs
        Triton's interpreter (``TRITON_INTERPRET=1`` before the kernel module is imported),
        which is how CI tests it.
        ``"torch"``: force :func:`tiled_attention_torch`.

    Args:
        q: queries ``(B, H, L, D)``; float16, bfloat16, float32 (float64 on the torch path).
        k: keys ``(B, H_kv, S, D)``, same dtype and device; ``H_kv`` divides ``H`` — query
            head ``h`` reads key/value head ``h // (H // H_kv)``.
        v: values ``(B, H_kv, S, D)``.
        causal: hide future keys, aligned bottom-right when ``L != S``.
        scale: multiplier of the scores; ``None`` means ``1 / sqrt(D)``.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``out`` ``(B, H, L, D)``, dtype of ``q``; a query with no visible key gets 0.

    Raises:
        TypeError: for non-tensor, non-floating or mixed-dtype inputs.
        ValueError: for wrong shapes (see :func:`tiled_attention_torch`), nan or inf in
            ``q``, ``k`` or ``v`` (checked on every backend, which costs one device sync; the
            online softmax would otherwise turn a nan row into 0), an unknown ``backend``, or
            ``backend="triton"`` with inputs the kernel does not support.

    Source: Dao et al. (2022); Dao (2023).
    """
    scale = _check_torch_inputs(q, k, v, causal, scale)
    chosen = select_backend(q, k, v, backend)
    if chosen == "triton":
        from . import flash_triton

        return flash_triton.flash_attention_triton(q, k, v, causal=bool(causal), scale=scale)
    return tiled_attention_torch(q, k, v, causal=causal, scale=scale)

