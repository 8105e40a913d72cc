"""FlashAttention: exact attention computed tile by tile, without the ``L x S`` score matrix.

Three implementations of the same algorithm, from the most readable to the fastest:

:func:`tiled_attention`
    NumPy, inputs ``(..., L, D)`` like :func:`attnbook.attention.scaled_dot_product_attention`.
    The forward loop of FlashAttention written to be read (:func:`tiled_attention_core`, which
    the public function validates for and calls in at least float32): for each block of
    queries it keeps a running row maximum ``m``, a running denominator ``l`` and an
    unnormalised accumulator, and rescales both by ``exp(m_old - m_new)`` whenever a new block
    of keys raises the maximum (the *online softmax*). ``on_step`` (or
    :func:`tiled_attention_steps`) records every step for the book's step-by-step figure.
:func:`tiled_attention_torch`
    torch, ``(B, H, L, D)``, differentiable through a ``torch.autograd.Function`` whose
    forward is the same tiled loop and whose backward is FlashAttention-2's
    (:func:`tiled_attention_backward_core`): it recomputes the probabilities ``P`` block by
    block from ``Q``, ``K`` and the saved log-sum-exp instead of storing them. Runs on any
    device, CPU included.
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
Triton (``attnbook.flash_triton``) only when the kernel is used; ``flash_triton`` does not
import this module (both validate through :func:`attnbook.checks.check_qkv_tensors`).

Sources: Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with
IO-Awareness" (2022), Algorithm 1 (forward); Dao, "FlashAttention-2: Faster Attention with
Better Parallelism and Work Partitioning" (2023), Algorithm 1 (forward with the final
normalisation and the log-sum-exp) and Algorithm 2 (backward); Milakov & Gimelshein, "Online
normalizer calculation for softmax" (2018), the running maximum and denominator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .attention import compute_dtype
from .checks import (
    check_bool,
    check_choice,
    check_int,
    check_qkv,
    check_qkv_tensors,
    check_scale,
)

__all__ = [
    "TileStep",
    "tiled_attention_core",
    "tiled_attention",
    "tiled_attention_steps",
    "tiled_attention_backward_core",
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


# fmt: off
def tiled_attention_core(q, k, v, scale, causal, bq, bk, on_step=None):
    """Attention in tiles of bq queries x bk keys: out and log-sum-exp lse.

    q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv), (..., L)
    """
    L, S = q.shape[-2], k.shape[-2]
    kt = k.swapaxes(-1, -2) * scale  # (..., D, S), scaled keys
    out = np.zeros(q.shape[:-1] + v.shape[-1:], q.dtype)  # (..., L, Dv)
    lse = np.zeros(q.shape[:-1], q.dtype)  # (..., L)
    for i in range(0, L, bq):
        m = np.full_like(q[..., i:i + bq, :1], -np.inf)  # (..., bq, 1) max
        l = np.zeros_like(m)  # noqa: E741  (..., bq, 1) running denominator
        acc = np.zeros(m.shape[:-1] + v.shape[-1:], q.dtype)  # (..., bq, Dv)
        for j in range(0, S, bk):
            s = q[..., i:i + bq, :] @ kt[..., j:j + bk]  # (..., bq, bk) scores
            if causal:  # query r sees key c <= r + S - L
                rows = np.arange(i, i + s.shape[-2])[:, None] + S - L
                s = np.where(np.arange(j, j + s.shape[-1]) <= rows, s, -np.inf)
            m_old, m = m, np.maximum(m, s.max(axis=-1, keepdims=True))
            m_safe = np.where(m == -np.inf, 0, m)  # no visible key yet: 0
            rescale = np.exp(m_old - m_safe)  # (..., bq, 1); 0 at the start
            p = np.exp(s - m_safe)  # (..., bq, bk)
            l = rescale * l + p.sum(axis=-1, keepdims=True)  # noqa: E741
            acc = rescale * acc + p @ v[..., j:j + bk, :]  # (..., bq, Dv)
            if on_step is not None:  # record the step (the book's figure)
                on_step(i, j, s, m_old, m, rescale, p, l, acc)
        l_safe = np.where(l > 0, l, 1)  # a row that saw no key: acc = 0
        out[..., i:i + bq, :] = acc / l_safe  # (..., bq, Dv)
        lse[..., i:i + bq] = (m + np.log(l_safe))[..., 0]  # -inf if no key
    return out, lse
# fmt: on


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
    Validates its arguments and calls :func:`tiled_attention_core` in at least float32 (a
    float16 running denominator would stop growing at 2048 one-key tiles).

    Args:
        q: queries ``(..., L, D)``, real (integers are promoted to float64).
        k: keys ``(..., S, D)``.
        v: values ``(..., S, Dv)``. The leading dimensions of ``q``, ``k`` and ``v`` broadcast.
        causal: hide future keys, aligned bottom-right (query ``i`` sees ``j <= i + S - L``).
        scale: multiplier of the scores (a real number, 0-d arrays accepted); ``None``
            means ``1 / sqrt(D)``.
        block_q: queries per block (rows of a tile), >= 1.
        block_k: keys per block (columns of a tile), >= 1.
        return_lse: also return the log-sum-exp of each query's scaled visible scores.
        on_step: called with a :class:`TileStep` after every (query block, key block) step.

    Returns:
        ``out`` ``(..., L, Dv)`` in the common dtype of the inputs (computed in at least
        float32 and cast back), and when ``return_lse`` also ``lse`` ``(..., L)``:
        ``m + log(l)``, which is ``-inf`` for a query that sees no key. Such a query
        outputs 0. The :class:`TileStep` records hold the compute dtype.

    Raises:
        TypeError: for non-numeric inputs, a non-integer block size, a ``scale`` that is
            not a real number, or a non-bool ``causal``/``return_lse``.
        ValueError: if the head dims of ``q`` and ``k`` or the lengths of ``k`` and ``v``
            differ, the leading dimensions do not broadcast, an input is not at least 2-D or
            contains nan/inf, ``scale`` is not finite, or a block size is < 1.

    Source: Dao et al. (2022), Algorithm 1; Dao (2023), Algorithm 1 (lse = m + log l).
    """
    q, k, v, batch = check_qkv(q, k, v)
    block_q = check_int(block_q, "block_q", 1)
    block_k = check_int(block_k, "block_k", 1)
    causal = check_bool(causal, "causal")
    return_lse = check_bool(return_lse, "return_lse")
    L, D = q.shape[-2], q.shape[-1]
    S, Dv = k.shape[-2], v.shape[-1]
    dtype = np.result_type(q, k, v)
    cdt = compute_dtype(q, k, v)  # at least float32: sums of many tiles
    scale = np.asarray(check_scale(scale, D), dtype=cdt)
    q = np.broadcast_to(q.astype(cdt, copy=False), (*batch, L, D))  # (..., L, D)
    k = np.broadcast_to(k.astype(cdt, copy=False), (*batch, S, D))  # (..., S, D)
    v = np.broadcast_to(v.astype(cdt, copy=False), (*batch, S, Dv))  # (..., S, Dv)
    if D == 0:  # every score is 0: the same as one zero dimension
        q, k = np.zeros((*batch, L, 1), cdt), np.zeros((*batch, S, 1), cdt)

    record = None
    if on_step is not None:

        def record(i, j, s, m_old, m_new, rescale, p, l, acc):  # noqa: E741
            on_step(
                TileStep(
                    q_start=i,
                    q_stop=i + s.shape[-2],
                    k_start=j,
                    k_stop=j + s.shape[-1],
                    scores=s.copy(),
                    m_old=m_old[..., 0].copy(),
                    m_new=m_new[..., 0].copy(),
                    rescale=rescale[..., 0].copy(),
                    p=p.copy(),
                    l=l[..., 0].copy(),
                    acc=acc.copy(),
                    out=acc / np.where(l > 0, l, 1),
                )
            )

    out, lse = tiled_attention_core(q, k, v, scale, causal, block_q, block_k, on_step=record)
    out, lse = out.astype(dtype), lse.astype(dtype)
    if return_lse:
        return out, lse
    return out


def tiled_attention_steps(q, k, v, **kwargs):
    """Run :func:`tiled_attention` and return its output with the list of every step.

    Args:
        q: queries, as for :func:`tiled_attention`.
        k: keys, as for :func:`tiled_attention`.
        v: values, as for :func:`tiled_attention`.
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


# fmt: off
def tiled_attention_backward_core(q, k, v, out, lse, do, scale, causal,
                                  bq, bk):
    """FlashAttention-2 backward: dq, dk, dv, recomputing P tile by tile.

    q, out, do (..., L, D); k, v (..., S, D); lse (..., L) from the forward,
    +inf for a row that saw no key (its P is then 0). x.mT is x^T.
    """
    import torch  # (this module needs only NumPy until a torch path runs)

    L, S = q.shape[-2], k.shape[-2]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    delta = (do * out).sum(dim=-1)  # (..., L)  D_i = rowsum(dO_i * O_i)
    for j in range(0, S, bk):
        kj, vj = k[..., j:j + bk, :], v[..., j:j + bk, :]  # (..., bk, D)
        for i in range(0, L, bq):
            qi, doi = q[..., i:i + bq, :], do[..., i:i + bq, :]  # (..., bq, D)
            s = qi @ kj.mT * scale  # (..., bq, bk)
            if causal:  # query r sees key c <= r + S - L
                r = torch.arange(i, i + s.shape[-2], device=s.device)[:, None]
                c = torch.arange(j, j + s.shape[-1], device=s.device)
                s = s.masked_fill(c > r + S - L, -math.inf)
            p = torch.exp(s - lse[..., i:i + bq, None])  # (..., bq, bk)
            dv[..., j:j + bk, :] += p.mT @ doi  # (..., bk, D)
            dp = doi @ vj.mT  # (..., bq, bk)
            ds = p * (dp - delta[..., i:i + bq, None])  # (..., bq, bk)
            dq[..., i:i + bq, :] += ds @ kj * scale  # (..., bq, D)
            dk[..., j:j + bk, :] += ds.mT @ qi * scale  # (..., bk, D)
    return dq, dk, dv
# fmt: on


def _tiled_backward_torch(do, q, k, v, out, lse, causal, scale, block_q, block_k):
    """The autograd backward: GQA heads expanded, float32/64, then the core."""
    cdt = lse.dtype
    G = q.shape[1] // k.shape[1]  # query heads per key/value head
    qc, do, out = q.to(cdt), do.to(cdt), out.to(cdt)  # (B, H, L, D)
    kx = k.to(cdt).repeat_interleave(G, dim=1)  # (B, H, S, D)
    vx = v.to(cdt).repeat_interleave(G, dim=1)  # (B, H, S, D)
    lse = lse.masked_fill(lse == -math.inf, math.inf)  # no key seen: P = 0
    dq, dk, dv = tiled_attention_backward_core(
        qc, kx, vx, out, lse, do, scale, causal, block_q, block_k
    )
    B, H_kv, S, D = k.shape
    dk = dk.reshape(B, H_kv, G, S, D).sum(dim=2)  # (B, H_kv, S, D)
    dv = dv.reshape(B, H_kv, G, S, D).sum(dim=2)  # (B, H_kv, S, D)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


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
    check_qkv_tensors(q, k, v)
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    block_q = check_int(block_q, "block_q", 1)
    block_k = check_int(block_k, "block_k", 1)
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
        q: queries ``(B, H, L, D)`` as for :func:`flash_attention` (shapes validated).
        k: keys ``(B, H_kv, S, D)``.
        v: values ``(B, H_kv, S, D)``.

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
        q: queries ``(B, H, L, D)``, as for :func:`flash_attention`.
        k: keys ``(B, H_kv, S, D)``.
        v: values ``(B, H_kv, S, D)``.
        backend: ``"auto"``, ``"triton"`` or ``"torch"``.

    Returns:
        ``"triton"`` or ``"torch"``.

    Raises:
        ValueError: if ``backend`` is not one of :data:`BACKENDS`, or ``backend="triton"`` and
            the kernel does not support the inputs (the message gives the reason).
    """
    check_choice(backend, "backend", BACKENDS)
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


def flash_attention(
    q, k, v, *, causal: bool = False, scale: float | None = None, backend: str = "auto"
):
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
    check_qkv_tensors(q, k, v)
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    chosen = select_backend(q, k, v, backend)
    if chosen == "triton":
        from . import flash_triton

        return flash_triton.flash_attention_triton(q, k, v, causal=bool(causal), scale=scale)
    return tiled_attention_torch(q, k, v, causal=causal, scale=scale)
