"""FlashAttention forward and backward as Triton kernels, for ``(B, H, L, D)`` tensors.

Written from the algorithm (Dao, 2023, Algorithms 1 and 2), not from a library: one program
instance owns one block of queries (forward, dQ) or one block of keys (dK, dV), streams the
other side through on-chip memory block by block, and keeps the online-softmax statistics (row
max ``m``, denominator ``l``) in registers. The forward writes the output and the log-sum-exp
``(B, H, L)``; the backward recomputes the probabilities from them, so no ``L x S`` matrix is
ever written to global memory.

Supported
    * causal and non-causal attention; causal aligned bottom-right when ``L != S`` (query ``i``
      sees keys ``j <= i + S - L``); whole key blocks above the diagonal are skipped, and the
      forward runs the blocks every row sees fully without any masking work (a second, masked
      stage takes the diagonal and the tail);
    * any sequence lengths ``L, S >= 1`` (the tails of the last blocks are masked);
    * head_dim any multiple of 8 from 16 to 128, padded inside the kernel to the next power of
      two (the padding lanes are masked on every load and store);
    * float16, bfloat16 and float32 inputs, float32 accumulation and softmax statistics; on a
      GPU float16/bfloat16 dots run on tensor cores, float32 dots in full IEEE precision
      (``input_precision="ieee"``, not tf32);
    * GQA / MQA: ``H_kv`` key/value heads dividing ``H``; query head ``h`` reads key/value head
      ``h // (H // H_kv)``; the dK/dV kernel sums over the query heads of a group itself (no
      atomics, no expanded copy of K and V);
    * arbitrary strides (inputs may be views), a query with no visible key outputs 0 with
      gradient 0, and autograd through :func:`flash_attention_triton`;
    * Triton 3.6 and 3.7 (the releases torch 2.11-2.13 pin); only long-standing ``tl`` APIs.

Not supported (``unsupported_reason`` names the condition; :func:`attnbook.flash.flash_attention`
falls back to its torch path on ``backend="auto"``):

    * float64, head_dim > 128 or not a multiple of 8, value head_dim different from the key's;
    * attention masks other than causal (no padding or sliding-window mask), dropout, ALiBi,
      softcapping, variable-length (packed) batches, a KV cache with paging;
    * tensors with 2**31 elements or more (int32 offsets); GPUs older than sm_80.

Testing without a GPU: with ``TRITON_INTERPRET=1`` set *before this module is imported* (it is
read when ``@triton.jit`` decorates the kernels), the kernels run on CPU tensors through
Triton's interpreter. The interpreter does bfloat16 arithmetic on raw bit patterns, so under
it every load is cast to float32 at once (the constexpr ``UPCAST``, off on the GPU). Blocks
default to 64 under the interpreter (each interpreted block step costs milliseconds).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .checks import check_bool, check_qkv_tensors, check_scale

__all__ = [
    "INTERPRET",
    "unsupported_reason",
    "attention_forward",
    "attention_backward",
    "flash_attention_triton",
    "kernel_config",
    "compile_for_gpu",
    "LOG2E",
    "LN2",
]

# (`:meta hide-value:`: the API reference would show Triton's wrapper, constexpr[1.44...].)
#: log2(e). The kernels compute exp(x) as exp2(x * LOG2E) and keep m in log2 units.
#:
#: :meta hide-value:
LOG2E = tl.constexpr(1.4426950408889634)
#: ln(2), which turns the kernels' base-2 log-sum-exp back into a natural log.
#:
#: :meta hide-value:
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _load_kt(
    k_base,
    cols,
    offs_d,
    d_valid,
    S,
    stride_ks,
    stride_kd,
    MASKED: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """The keys ``cols`` as a transposed ``(BLOCK_D, BLOCK_N)`` tile; keys past S read as 0."""
    if MASKED:
        kt_mask = (cols < S)[None, :] & d_valid[:, None]
    else:
        kt_mask = d_valid[:, None]  # only the head_dim padding; broadcast over the keys
    kt = tl.load(
        k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd, mask=kt_mask, other=0.0
    )  # (BLOCK_D, BLOCK_N)
    if UPCAST:
        kt = kt.to(tl.float32)
    return kt


@triton.jit
def _load_v(
    v_base,
    cols,
    offs_d,
    d_valid,
    S,
    stride_vs,
    stride_vd,
    MASKED: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """The values ``cols`` as a ``(BLOCK_N, BLOCK_D)`` tile; values past S read as 0."""
    if MASKED:
        v_mask = (cols < S)[:, None] & d_valid[None, :]
    else:
        v_mask = d_valid[None, :]
    v = tl.load(
        v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd, mask=v_mask, other=0.0
    )  # (BLOCK_N, BLOCK_D)
    if UPCAST:
        v = v.to(tl.float32)
    return v


# fmt: off
@triton.jit
def _attn_fwd_inner(
    acc, l_i, m_i, q, k_base, v_base, stride_ks, stride_kd, stride_vs, stride_vd,
    offs_m, offs_n, offs_d, d_valid, L, S, qk_scale_log2, lo, hi,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """The online-softmax loop over the key blocks starting at lo, lo + BLOCK_N, ... < hi.

    ``MASKED`` blocks may hold hidden keys (the causal diagonal, the padded tail past S); the
    others are fully visible to every row of the query block and skip the masking work.
    Returns the updated ``(acc, l_i, m_i)``. The loop is shown in chapter 12, so its lines
    stay under 80 columns (``listing.show_code(..., between=("for start_n", "m_i = m_new"))``).
    """
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n  # the key positions j of this block
        kt = _load_kt(k_base, cols, offs_d, d_valid, S, stride_ks, stride_kd,
                      MASKED, UPCAST)  # (BLOCK_D, BLOCK_N)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION)  # (BLOCK_M, BLOCK_N)
        s = s * qk_scale_log2  # scores in log2 units: exp2(s) = exp(c q.k)
        if MASKED:
            keep = (cols < S)[None, :]  # the padded tail of the last block
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None] + (S - L))
            s = tl.where(keep, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            # a row that has seen no visible key keeps m = -inf: shift by 0
            m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1))  # every key here is visible
            m_shift = m_new
        alpha = tl.math.exp2(m_i - m_shift)  # the rescale r_i; 0 at the start
        p = tl.math.exp2(s - m_shift[:, None])  # (BLOCK_M, BLOCK_N)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_v(v_base, cols, offs_d, d_valid, S, stride_vs, stride_vd,
                    MASKED, UPCAST)  # (BLOCK_N, BLOCK_D)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new
    return acc, l_i, m_i
# fmt: on


@triton.jit
def _attn_fwd(
    Q,
    K,
    V,
    O,
    LSE,
    stride_qb,
    stride_qh,
    stride_ql,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_ol,
    stride_od,
    H,
    L,
    S,
    HEAD_DIM,
    GROUP,
    qk_scale_log2,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """One program: BLOCK_M queries of one (batch, head); loops over the key blocks."""
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H
    off_hkv = off_h // GROUP  # GQA: the key/value head this query head reads

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows
    offs_n = tl.arange(0, BLOCK_N)  # key columns within a block
    offs_d = tl.arange(0, BLOCK_D)  # head_dim lanes, padded to a power of two
    m_valid = offs_m < L
    d_valid = offs_d < HEAD_DIM

    q_ptrs = (
        Q
        + off_b * stride_qb
        + off_h * stride_qh
        + offs_m[:, None] * stride_ql
        + offs_d[None, :] * stride_qd
    )
    q = tl.load(q_ptrs, mask=m_valid[:, None] & d_valid[None, :], other=0.0)  # (BLOCK_M, BLOCK_D)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = K + off_b * stride_kb + off_hkv * stride_kh
    v_base = V + off_b * stride_vb + off_hkv * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running row max (log2 units)
    l_i = tl.zeros([BLOCK_M], tl.float32)  # running denominator
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running unnormalised output

    # Two stages. Key blocks [0, mid) are visible to every row of this query block: no mask,
    # no -inf guard. Blocks [mid, hi) hold the diagonal (causal) or the padded tail of the last
    # key block, and are masked. Blocks from hi on are in every row's future and are skipped.
    if CAUSAL:
        # row i sees keys j <= i + S - L: the last row bounds what is read, the first row
        # bounds what needs no mask
        hi = tl.minimum(S, (start_m + 1) * BLOCK_M + S - L)
        full = tl.minimum(hi, start_m * BLOCK_M + S - L + 1)
        mid = (tl.maximum(full, 0) // BLOCK_N) * BLOCK_N
    else:
        hi = S
        mid = (S // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_ks,
        stride_kd,
        stride_vs,
        stride_vd,
        offs_m,
        offs_n,
        offs_d,
        d_valid,
        L,
        S,
        qk_scale_log2,
        0,
        mid,
        MASKED=False,
        CAUSAL=CAUSAL,
        BLOCK_N=BLOCK_N,
        UPCAST=UPCAST,
        DOT_PRECISION=DOT_PRECISION,
    )
    acc, l_i, m_i = _attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_ks,
        stride_kd,
        stride_vs,
        stride_vd,
        offs_m,
        offs_n,
        offs_d,
        d_valid,
        L,
        S,
        qk_scale_log2,
        mid,
        hi,
        MASKED=True,
        CAUSAL=CAUSAL,
        BLOCK_N=BLOCK_N,
        UPCAST=UPCAST,
        DOT_PRECISION=DOT_PRECISION,
    )

    seen = l_i > 0.0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc / l_safe[:, None]  # 0 for a row that saw no key (acc is 0 there)
    o_ptrs = (
        O
        + off_b * stride_ob
        + off_h * stride_oh
        + offs_m[:, None] * stride_ol
        + offs_d[None, :] * stride_od
    )
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=m_valid[:, None] & d_valid[None, :])
    lse = tl.where(seen, (m_i + tl.math.log2(l_safe)) * LN2, float("-inf"))
    tl.store(LSE + off_bh * L + offs_m, lse, mask=m_valid)  # natural-log log-sum-exp


@triton.jit
def _attn_bwd_dkdv(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    DK,
    DV,
    stride_qb,
    stride_qh,
    stride_ql,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_vd,
    stride_dob,
    stride_doh,
    stride_dol,
    stride_dod,
    stride_dkb,
    stride_dkh,
    stride_dks,
    stride_dkd,
    stride_dvb,
    stride_dvh,
    stride_dvs,
    stride_dvd,
    H,
    H_KV,
    L,
    S,
    HEAD_DIM,
    GROUP,
    scale,
    qk_scale_log2,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """One program: BLOCK_N keys of one (batch, kv head); loops over its query heads and rows."""
    start_n = tl.program_id(0)
    off_bhkv = tl.program_id(1)
    off_b = off_bhkv // H_KV
    off_hkv = off_bhkv % H_KV

    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)  # key rows of this block
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    n_valid = offs_n < S
    d_valid = offs_d < HEAD_DIM
    kv_mask = n_valid[:, None] & d_valid[None, :]

    k = tl.load(
        K
        + off_b * stride_kb
        + off_hkv * stride_kh
        + offs_n[:, None] * stride_ks
        + offs_d[None, :] * stride_kd,
        mask=kv_mask,
        other=0.0,
    )  # (BLOCK_N, BLOCK_D)
    v = tl.load(
        V
        + off_b * stride_vb
        + off_hkv * stride_vh
        + offs_n[:, None] * stride_vs
        + offs_d[None, :] * stride_vd,
        mask=kv_mask,
        other=0.0,
    )  # (BLOCK_N, BLOCK_D)
    if UPCAST:
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)

    lo = 0
    if CAUSAL:
        # key j is seen by queries i >= j - (S - L); start at the block holding the first one
        lo = (tl.maximum(start_n * BLOCK_N - (S - L), 0) // BLOCK_M) * BLOCK_M
    for g in range(0, GROUP):
        off_h = off_hkv * GROUP + g  # a query head that reads this key/value head
        q_base = Q + off_b * stride_qb + off_h * stride_qh
        do_base = DO + off_b * stride_dob + off_h * stride_doh
        row_base = (off_b * H + off_h) * L
        for start_m in range(lo, L, BLOCK_M):
            rows = start_m + offs_m
            m_valid = rows < L
            q_mask = m_valid[:, None] & d_valid[None, :]
            q = tl.load(
                q_base + rows[:, None] * stride_ql + offs_d[None, :] * stride_qd,
                mask=q_mask,
                other=0.0,
            )  # (BLOCK_M, BLOCK_D)
            do = tl.load(
                do_base + rows[:, None] * stride_dol + offs_d[None, :] * stride_dod,
                mask=q_mask,
                other=0.0,
            )  # (BLOCK_M, BLOCK_D)
            if UPCAST:
                q = q.to(tl.float32)
                do = do.to(tl.float32)
            lse = tl.load(LSE + row_base + rows, mask=m_valid, other=0.0)  # (BLOCK_M,)
            delta = tl.load(DELTA + row_base + rows, mask=m_valid, other=0.0)  # (BLOCK_M,)
            # a row that saw no key has lse = -inf and P = 0: use +inf so exp2 gives 0, not nan
            lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
            st = tl.dot(k, tl.trans(q), input_precision=DOT_PRECISION)  # (BLOCK_N, BLOCK_M)
            pt = tl.math.exp2(st * qk_scale_log2 - lse2[None, :])  # P^T, recomputed
            keep = n_valid[:, None] & m_valid[None, :]
            if CAUSAL:
                keep = keep & (offs_n[:, None] <= rows[None, :] + (S - L))
            pt = tl.where(keep, pt, 0.0)
            dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=DOT_PRECISION)
            dpt = tl.dot(v, tl.trans(do), input_precision=DOT_PRECISION)  # (BLOCK_N, BLOCK_M)
            dst = pt * (dpt - delta[None, :])  # dS^T = P^T * (dP^T - D)
            dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=DOT_PRECISION)
    dk = dk * scale
    tl.store(
        DK
        + off_b * stride_dkb
        + off_hkv * stride_dkh
        + offs_n[:, None] * stride_dks
        + offs_d[None, :] * stride_dkd,
        dk.to(DK.dtype.element_ty),
        mask=kv_mask,
    )
    tl.store(
        DV
        + off_b * stride_dvb
        + off_hkv * stride_dvh
        + offs_n[:, None] * stride_dvs
        + offs_d[None, :] * stride_dvd,
        dv.to(DV.dtype.element_ty),
        mask=kv_mask,
    )


@triton.jit
def _attn_bwd_dq(
    Q,
    K,
    V,
    DO,
    LSE,
    DELTA,
    DQ,
    stride_qb,
    stride_qh,
    stride_ql,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_vd,
    stride_dob,
    stride_doh,
    stride_dol,
    stride_dod,
    stride_dqb,
    stride_dqh,
    stride_dql,
    stride_dqd,
    H,
    L,
    S,
    HEAD_DIM,
    GROUP,
    scale,
    qk_scale_log2,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """One program: BLOCK_M queries of one (batch, head); loops over the key blocks for dQ."""
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H
    off_hkv = off_h // GROUP

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < L
    d_valid = offs_d < HEAD_DIM
    q_mask = m_valid[:, None] & d_valid[None, :]

    q = tl.load(
        Q
        + off_b * stride_qb
        + off_h * stride_qh
        + offs_m[:, None] * stride_ql
        + offs_d[None, :] * stride_qd,
        mask=q_mask,
        other=0.0,
    )  # (BLOCK_M, BLOCK_D)
    do = tl.load(
        DO
        + off_b * stride_dob
        + off_h * stride_doh
        + offs_m[:, None] * stride_dol
        + offs_d[None, :] * stride_dod,
        mask=q_mask,
        other=0.0,
    )  # (BLOCK_M, BLOCK_D)
    if UPCAST:
        q = q.to(tl.float32)
        do = do.to(tl.float32)
    lse = tl.load(LSE + off_bh * L + offs_m, mask=m_valid, other=0.0)
    delta = tl.load(DELTA + off_bh * L + offs_m, mask=m_valid, other=0.0)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    k_base = K + off_b * stride_kb + off_hkv * stride_kh
    v_base = V + off_b * stride_vb + off_hkv * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    hi = S
    if CAUSAL:
        hi = tl.minimum(S, (start_m + 1) * BLOCK_M + S - L)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        n_valid = cols < S
        kv_mask = n_valid[:, None] & d_valid[None, :]
        k = tl.load(
            k_base + cols[:, None] * stride_ks + offs_d[None, :] * stride_kd,
            mask=kv_mask,
            other=0.0,
        )  # (BLOCK_N, BLOCK_D)
        v = tl.load(
            v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd,
            mask=kv_mask,
            other=0.0,
        )  # (BLOCK_N, BLOCK_D)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # (BLOCK_M, BLOCK_N)
        p = tl.math.exp2(s * qk_scale_log2 - lse2[:, None])
        keep = m_valid[:, None] & n_valid[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + (S - L))
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)  # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=DOT_PRECISION)
    dq = dq * scale
    tl.store(
        DQ
        + off_b * stride_dqb
        + off_h * stride_dqh
        + offs_m[:, None] * stride_dql
        + offs_d[None, :] * stride_dqd,
        dq.to(DQ.dtype.element_ty),
        mask=q_mask,
    )


# (`:meta hide-value:`: the value depends on the machine that builds the API reference.)
#: Whether the kernels were decorated under Triton's interpreter (``TRITON_INTERPRET=1``).
#:
#: :meta hide-value:
INTERPRET = type(_attn_fwd).__name__ == "InterpretedFunction"

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_INT32_MAX = 2**31 - 1


def unsupported_reason(q, k, v) -> str | None:
    """Why the kernels cannot run ``q (B, H, L, D)``, ``k, v (B, H_kv, S, D)``, or ``None``.

    Args:
        q: queries ``(B, H, L, D)``, validated by :func:`attnbook.checks.check_qkv_tensors`.
        k: keys ``(B, H_kv, S, D)``.
        v: values ``(B, H_kv, S, D)``.

    Returns:
        A sentence naming the first failed condition (device, interpreter, dtype, head_dim,
        size, GPU generation), or ``None`` when the kernels support the inputs.
    """
    if q.device.type == "cuda":
        if INTERPRET:
            return "Triton's interpreter is on (TRITON_INTERPRET=1); it runs CPU tensors only"
        major, minor = torch.cuda.get_device_capability(q.device)
        if major < 8:
            return f"the kernel needs an sm_80 or newer GPU; this one is sm_{major}{minor}"
    elif q.device.type == "cpu":
        if not INTERPRET:
            return (
                "CPU tensors need Triton's interpreter: set TRITON_INTERPRET=1 before "
                "attnbook.flash_triton is first imported"
            )
    else:
        return (
            f"the kernel runs on CUDA tensors (or CPU ones under the interpreter), not {q.device}"
        )
    if q.dtype not in _DTYPES:
        return f"dtype {q.dtype} is not supported (float16, bfloat16 or float32)"
    D = q.shape[-1]
    if D % 8 != 0 or not 16 <= D <= 128:
        return f"head_dim {D} is not supported (a multiple of 8 from 16 to 128)"
    if v.shape[-1] != D:
        return f"v has head_dim {v.shape[-1]} but q has {D}"
    for name, t in (("q", q), ("k", k), ("v", v)):
        span = 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
        if span > _INT32_MAX:
            return f"{name} spans {span} elements; the kernel uses int32 offsets (< 2**31)"
    return None


def kernel_config(head_dim: int, *, interpret: bool = INTERPRET, dtype=torch.float16) -> dict:
    """Block sizes and launch options for a head_dim.

    Args:
        head_dim: D, a multiple of 8 from 16 to 128.
        interpret: configuration for the interpreter (blocks of 64, one warp) or the GPU.
        dtype: the input dtype (float32 tiles are twice as large in shared memory).

    Returns:
        A dict with ``BLOCK_D`` (head_dim padded to a power of two), ``fwd`` and ``bwd``, each
        ``{"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}``.
    """
    block_d = max(16, triton.next_power_of_2(head_dim))
    if interpret:
        blocks = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 1, "num_stages": 1}
        return {"BLOCK_D": block_d, "fwd": dict(blocks), "bwd": dict(blocks)}
    wide = block_d > 64 or dtype == torch.float32
    fwd = {
        "BLOCK_M": 128,
        "BLOCK_N": 64,
        "num_warps": 8 if wide else 4,
        "num_stages": 2 if wide else 3,
    }
    bwd = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8 if wide else 4, "num_stages": 2}
    if dtype == torch.float32 and block_d > 64:
        fwd["BLOCK_M"] = 64
        bwd["BLOCK_M"] = 32
    return {"BLOCK_D": block_d, "fwd": fwd, "bwd": bwd}


def _dot_precision(dtype) -> str:
    # float32 dots in IEEE precision (a GPU would otherwise use tf32); ignored for 16-bit inputs
    return "ieee" if dtype == torch.float32 else "tf32"


def _strides(t):
    return tuple(t.stride())


def _check(q, k, v):
    why = unsupported_reason(q, k, v)
    if why is not None:
        raise ValueError(f"the Triton kernel cannot run q {tuple(q.shape)} {q.dtype}: {why}")


def attention_forward(
    q,
    k,
    v,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    upcast: bool | None = None,
):
    """Run the forward kernel: ``out`` and the log-sum-exp of each query.

    Args:
        q: ``(B, H, L, D)`` float16/bfloat16/float32, CUDA (or CPU under the interpreter).
        k: keys ``(B, H_kv, S, D)``, same dtype and device, ``H_kv`` dividing ``H``.
        v: values ``(B, H_kv, S, D)``, same dtype and device.
        causal: bottom-right causal mask.
        scale: score multiplier; ``None`` means ``1 / sqrt(D)``.
        block_m: override the query block size (a power of two >= 16).
        block_n: override the key block size (a power of two >= 16).
        upcast: cast every load to float32 (the constexpr ``UPCAST``); ``None`` means exactly
            when running under the interpreter. ``False`` under the interpreter runs the GPU's
            dtype flow (16-bit dot operands, probabilities cast to the value dtype) — valid
            for float16 and float32, not for bfloat16, whose interpreted arithmetic is wrong.

    Returns:
        ``(out, lse)``: ``out`` ``(B, H, L, D)`` contiguous in the dtype of ``q``, ``lse``
        ``(B, H, L)`` float32 natural-log log-sum-exp of the scaled visible scores, ``-inf``
        for a query with no visible key (whose output is 0).

    Raises:
        ValueError: if :func:`unsupported_reason` names a reason.
    """
    _check(q, k, v)
    B, H, L, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    cfg = kernel_config(D, dtype=q.dtype)
    fwd = dict(cfg["fwd"])
    if block_m is not None:
        fwd["BLOCK_M"] = block_m
    if block_n is not None:
        fwd["BLOCK_N"] = block_n
    out = torch.empty((B, H, L, D), dtype=q.dtype, device=q.device)  # (B, H, L, D)
    lse = torch.empty((B, H, L), dtype=torch.float32, device=q.device)  # (B, H, L)
    if L == 0:
        return out, lse
    if S == 0:
        return out.zero_(), lse.fill_(-math.inf)
    grid = (triton.cdiv(L, fwd["BLOCK_M"]), B * H)
    _attn_fwd[grid](
        q,
        k,
        v,
        out,
        lse,
        *_strides(q),
        *_strides(k),
        *_strides(v),
        *_strides(out),
        H,
        L,
        S,
        D,
        H // H_kv,
        scale * LOG2E.value,
        CAUSAL=bool(causal),
        BLOCK_M=fwd["BLOCK_M"],
        BLOCK_N=fwd["BLOCK_N"],
        BLOCK_D=cfg["BLOCK_D"],
        UPCAST=INTERPRET if upcast is None else bool(upcast),
        DOT_PRECISION=_dot_precision(q.dtype),
        num_warps=fwd["num_warps"],
        num_stages=fwd["num_stages"],
    )
    return out, lse


def attention_backward(
    do,
    q,
    k,
    v,
    out,
    lse,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    upcast: bool | None = None,
):
    """Run the backward kernels (FlashAttention-2, Algorithm 2): ``dq, dk, dv``.

    ``delta = rowsum(dO * O)`` is computed with one torch reduction; the dK/dV kernel walks
    the query blocks for each key block (and every query head of its GQA group), the dQ kernel
    the key blocks for each query block — neither needs atomics.

    Args:
        do: ``(B, H, L, D)`` gradient of the output, dtype of ``q``.
        q: the forward's queries ``(B, H, L, D)``.
        k: the forward's keys ``(B, H_kv, S, D)``.
        v: the forward's values ``(B, H_kv, S, D)``.
        out: the output :func:`attention_forward` returned.
        lse: the log-sum-exp :func:`attention_forward` returned.
        causal: as in :func:`attention_forward`.
        scale: as in :func:`attention_forward`.
        block_m: as in :func:`attention_forward`.
        block_n: as in :func:`attention_forward`.
        upcast: as in :func:`attention_forward`.

    Returns:
        ``(dq, dk, dv)`` with the shapes and dtype of ``q``, ``k``, ``v``; ``dk`` and ``dv``
        summed over the query heads of each group.

    Raises:
        ValueError: if :func:`unsupported_reason` names a reason.
    """
    _check(q, k, v)
    B, H, L, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    cfg = kernel_config(D, dtype=q.dtype)
    bwd = dict(cfg["bwd"])
    if block_m is not None:
        bwd["BLOCK_M"] = block_m
    if block_n is not None:
        bwd["BLOCK_N"] = block_n
    dq = torch.zeros_like(q, memory_format=torch.contiguous_format)  # (B, H, L, D)
    dk = torch.zeros_like(k, memory_format=torch.contiguous_format)  # (B, H_kv, S, D)
    dv = torch.zeros_like(v, memory_format=torch.contiguous_format)  # (B, H_kv, S, D)
    if L == 0 or S == 0:
        return dq, dk, dv
    delta = (out.float() * do.float()).sum(dim=-1).contiguous()  # (B, H, L)  D_i
    lse = lse.contiguous()
    common = dict(
        CAUSAL=bool(causal),
        BLOCK_M=bwd["BLOCK_M"],
        BLOCK_N=bwd["BLOCK_N"],
        BLOCK_D=cfg["BLOCK_D"],
        UPCAST=INTERPRET if upcast is None else bool(upcast),
        DOT_PRECISION=_dot_precision(q.dtype),
        num_warps=bwd["num_warps"],
        num_stages=bwd["num_stages"],
    )
    _attn_bwd_dkdv[(triton.cdiv(S, bwd["BLOCK_N"]), B * H_kv)](
        q,
        k,
        v,
        do,
        lse,
        delta,
        dk,
        dv,
        *_strides(q),
        *_strides(k),
        *_strides(v),
        *_strides(do),
        *_strides(dk),
        *_strides(dv),
        H,
        H_kv,
        L,
        S,
        D,
        H // H_kv,
        scale,
        scale * LOG2E.value,
        **common,
    )
    _attn_bwd_dq[(triton.cdiv(L, bwd["BLOCK_M"]), B * H)](
        q,
        k,
        v,
        do,
        lse,
        delta,
        dq,
        *_strides(q),
        *_strides(k),
        *_strides(v),
        *_strides(do),
        *_strides(dq),
        H,
        L,
        S,
        D,
        H // H_kv,
        scale,
        scale * LOG2E.value,
        **common,
    )
    return dq, dk, dv


class _FlashTritonFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, block_m, block_n):
        out, lse = attention_forward(
            q, k, v, causal=causal, scale=scale, block_m=block_m, block_n=block_n
        )
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale = causal, scale
        ctx.block_m, ctx.block_n = block_m, block_n
        return out

    @staticmethod
    def backward(ctx, do):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(
            do,
            q,
            k,
            v,
            out,
            lse,
            causal=ctx.causal,
            scale=ctx.scale,
            block_m=ctx.block_m,
            block_n=ctx.block_n,
        )
        return dq, dk, dv, None, None, None, None


def flash_attention_triton(
    q,
    k,
    v,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
):
    """Differentiable FlashAttention through the Triton kernels.

    Prefer :func:`attnbook.flash.flash_attention` (it validates the shapes and picks the
    backend); this entry point exists for tests and benchmarks that set the block sizes.

    Args:
        q: ``(B, H, L, D)`` queries, float16/bfloat16/float32, CUDA (or CPU under the
            interpreter).
        k: ``(B, H_kv, S, D)`` keys, same dtype and device, ``H_kv`` dividing ``H``.
        v: ``(B, H_kv, S, D)`` values, same dtype and device.
        causal: bottom-right causal mask, as in :func:`attention_forward`.
        scale: score multiplier; ``None`` means ``1 / sqrt(D)``.
        block_m: query block size of the forward and both backward kernels (a power of
            two >= 16); ``None`` takes :func:`kernel_config`.
        block_n: key block size, likewise.

    Returns:
        ``out`` ``(B, H, L, D)`` in the dtype of ``q``, differentiable with respect to ``q``,
        ``k`` and ``v``.

    Raises:
        ValueError: if the shapes disagree, ``block_m``/``block_n`` is not a power of two
            >= 16, or :func:`unsupported_reason` names a reason.
        TypeError: if an input is not a floating-point ``torch.Tensor``, the dtypes differ, or
            ``causal`` is not a bool.

    Source: Dao (2023), Algorithms 1 and 2.
    """
    check_qkv_tensors(q, k, v)
    causal = check_bool(causal, "causal")
    scale = check_scale(scale, q.shape[-1])
    for name, b in (("block_m", block_m), ("block_n", block_n)):
        if b is not None and (b < 16 or b & (b - 1)):
            raise ValueError(f"{name} must be a power of two >= 16, got {b}")
    return _FlashTritonFunction.apply(q, k, v, bool(causal), scale, block_m, block_n)


_SHARED_MEMORY_LIMIT = {80: 166912, 86: 101376, 89: 101376, 90: 232448}  # bytes per block
_TORCH_TO_TRITON = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}


def compile_for_gpu(arch: int, dtype, causal: bool, head_dim: int = 128) -> dict:
    """Compile the three kernels ahead of time for an NVIDIA GPU, without one.

    Mirrors a launch on contiguous tensors: pointers 16-byte aligned, the head_dim stride equal
    to 1, the configuration :func:`kernel_config` gives for ``head_dim`` and ``dtype``. This
    catches what the interpreter lets through (dots with a dimension below 16, loop-carried
    values that change type, shared memory beyond the GPU's limit). ``ptxas`` ships in the
    Triton wheel; no GPU or driver is needed.

    Args:
        arch: compute capability as an integer, 80 (A100) or 90 (H100/H200).
        dtype: ``torch.float16``, ``torch.bfloat16`` or ``torch.float32``.
        causal: compile the causal variant.
        head_dim: D, a multiple of 8 from 16 to 128.

    Returns:
        ``{kernel name: {"shared": bytes of shared memory, "num_warps": int,
        "cubin_bytes": int, "ptx_lines": int}}``.

    Raises:
        RuntimeError: under the interpreter (``TRITON_INTERPRET=1``: the kernels are then
            interpreted functions and cannot be compiled; run this in a separate process), or
            if a kernel needs more shared memory than ``arch`` provides.
    """
    if INTERPRET:
        raise RuntimeError(
            "compile_for_gpu needs a process without TRITON_INTERPRET=1 (the kernels were "
            "decorated as interpreted functions)"
        )
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cfg = kernel_config(head_dim, interpret=False, dtype=dtype)
    elem = _TORCH_TO_TRITON[dtype]
    target = GPUTarget("cuda", arch, 32)
    pointers = {
        "_attn_fwd": {"Q": elem, "K": elem, "V": elem, "O": elem, "LSE": "fp32"},
        "_attn_bwd_dkdv": {
            "Q": elem,
            "K": elem,
            "V": elem,
            "DO": elem,
            "LSE": "fp32",
            "DELTA": "fp32",
            "DK": elem,
            "DV": elem,
        },
        "_attn_bwd_dq": {
            "Q": elem,
            "K": elem,
            "V": elem,
            "DO": elem,
            "LSE": "fp32",
            "DELTA": "fp32",
            "DQ": elem,
        },
    }
    floats = {"qk_scale_log2", "scale"}
    results = {}
    for name, ptrs in pointers.items():
        fn = globals()[name]
        launch = cfg["fwd"] if name == "_attn_fwd" else cfg["bwd"]
        constexprs = {
            "CAUSAL": bool(causal),
            "BLOCK_M": launch["BLOCK_M"],
            "BLOCK_N": launch["BLOCK_N"],
            "BLOCK_D": cfg["BLOCK_D"],
            "UPCAST": False,
            "DOT_PRECISION": _dot_precision(dtype),
        }
        signature, attrs = {}, {}
        for i, arg in enumerate(fn.arg_names):
            if arg in constexprs:
                signature[arg] = "constexpr"
            elif arg in ptrs:
                signature[arg] = "*" + ptrs[arg]
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif arg in floats:
                signature[arg] = "fp32"
            elif arg.startswith("stride_") and arg.endswith("d"):
                signature[arg] = "constexpr"  # contiguous head_dim: the launcher specialises 1
                constexprs[arg] = 1
            else:
                signature[arg] = "i32"
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        kernel = triton.compile(
            src,
            target=target,
            options={"num_warps": launch["num_warps"], "num_stages": launch["num_stages"]},
        )
        shared = int(kernel.metadata.shared)
        limit = _SHARED_MEMORY_LIMIT.get(arch)
        if limit is not None and shared > limit:
            raise RuntimeError(
                f"{name} ({elem}, causal={causal}, head_dim={head_dim}) needs {shared} bytes of "
                f"shared memory; sm_{arch} has {limit}"
            )
        results[name] = {
            "shared": shared,
            "num_warps": launch["num_warps"],
            "cubin_bytes": len(kernel.asm["cubin"]),
            "ptx_lines": kernel.asm["ptx"].count("\n"),
        }
    return results
