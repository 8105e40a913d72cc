"""Tests of the Triton FlashAttention kernels (``attnbook.flash_triton``) without a GPU.

The kernels run on CPU tensors through Triton's interpreter: ``tests/conftest.py`` sets
``TRITON_INTERPRET=1`` before this module imports the kernels. The interpreter does no bounds
checking, so masking is proven with inputs that are views into NaN-filled buffers. What the
interpreter cannot catch (dots below 16, shared-memory overflow, type errors of the GPU
compiler) is caught by compiling every kernel for sm_80 and sm_90 in a subprocess without the
interpreter.

References: hand-derived values (q = k = 0: the output is the mean of the visible values), the
float64 NumPy ``scaled_dot_product_attention`` and autograd through plain float64 torch math.
Low precision: the error against the float64 reference is at most twice that of plain
attention computed in the same dtype, plus a small floor (STYLE.md).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from attention_refs import plain_attention
from attnbook import flash_triton as ft
from attnbook.attention import scaled_dot_product_attention
from attnbook.flash import flash_attention, select_backend, triton_unsupported_reason
from attnbook.masks import causal_mask
from attnbook.testing import assert_close, assert_low_precision_close

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


_reference = plain_attention  # in q's dtype: float64 = the reference


def _qkv(B, H, H_kv, L, S, D, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, D, generator=g).to(dtype)
    k = torch.randn(B, H_kv, S, D, generator=g).to(dtype)
    v = torch.randn(B, H_kv, S, D, generator=g).to(dtype)
    return q, k, v


def _assert_within_low_precision_rule(actual, plain, ref, dtype, what):
    """The book's rule, err(actual) <= 2 * err(plain) + floor, against the float64 ``ref``.

    The floor, two ulps of the output's scale, covers a plain result that happens to be exact.
    """
    floor = 2 * torch.finfo(dtype).eps * max(1.0, ref.abs().max().item())
    try:
        assert_low_precision_close(actual, ref, plain=plain, floor=floor)
    except AssertionError as e:
        raise AssertionError(f"{what} ({dtype}): {e}") from None


def test_interpreter_is_on():
    assert os.environ.get("TRITON_INTERPRET") == "1"
    assert ft.INTERPRET, "the kernels were decorated before TRITON_INTERPRET=1 was set"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 8, 17, 100])
def test_equal_scores_at_the_smallest_block(n, causal):
    # q = k = 0, v[j] = j in every dimension, blocks of 16 (the smallest a GPU dot accepts)
    q = torch.zeros(1, 1, n, 16)
    k = torch.zeros(1, 1, n, 16)
    v = torch.arange(n, dtype=torch.float32)[None, None, :, None].expand(1, 1, n, 16)
    out = ft.flash_attention_triton(q, k, v, causal=causal, block_m=16, block_n=16)
    assert torch.isfinite(out).all()
    # non-causal: (n - 1) / 2 (8.0 for n = 17; the padded tail of the last key block leaking in
    # as score 0, value 0 would give 136 / 32 = 4.25); causal row i: i / 2
    rows = torch.arange(n) / 2.0 if causal else torch.full((n,), (n - 1) / 2)
    assert_close(out[0, 0], rows[:, None].expand(n, 16), atol=1e-6, rtol=0)


def test_online_softmax_rescale_across_key_blocks():
    # one query; keys 0..15 (first block of 16) score 0, key 16 (second block) scores 10;
    # v = 1 on the first block, 0 on key 16: out = 16 / (16 + e^10). Without rescaling the
    # first block's accumulator by exp(0 - 10) it would be 16 / 17.
    q = torch.zeros(1, 1, 1, 16)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, 17, 16)
    k[0, 0, 16, 0] = 10.0
    v = torch.zeros(1, 1, 17, 16)
    v[0, 0, :16] = 1.0
    out, lse = ft.attention_forward(q, k, v, scale=1.0, block_m=16, block_n=16)
    expected = 16.0 / (16.0 + math.exp(10.0))
    assert_close(out[0, 0, 0], torch.full((16,), expected), atol=0, rtol=1e-5)
    assert_close(lse.reshape(1), [math.log(16.0 + math.exp(10.0))], atol=0, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "causal,L,S", [(False, 70, 100), (True, 70, 100), (True, 100, 37), (False, 1, 65)]
)
def test_forward_matches_reference(dtype, causal, L, S):
    q, k, v = _qkv(1, 4, 2, L, S, 32, dtype, seed=L + S)  # GQA: 2 query heads per kv head
    out, lse = ft.attention_forward(q, k, v, causal=causal)
    assert out.dtype == dtype and out.shape == q.shape
    ref = _reference(q.double(), k.double(), v.double(), causal=causal)
    plain = _reference(q, k, v, causal=causal)
    _assert_within_low_precision_rule(out, plain, ref, dtype, "forward")
    # independent second reference: the NumPy module, float64
    np_ref = scaled_dot_product_attention(
        q.double().numpy(),
        np.repeat(k.double().numpy(), 2, axis=1),
        np.repeat(v.double().numpy(), 2, axis=1),
        causal=causal,
    )
    assert_close(ref, np_ref, atol=1e-12, rtol=0)
    # log-sum-exp of the scaled visible scores, -inf for rows with no visible key
    s = (q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-1, -2)) / math.sqrt(32)
    if causal:
        s = s.masked_fill(~torch.from_numpy(causal_mask(L, S)), -math.inf)
    ref_lse = torch.logsumexp(s, dim=-1)
    assert (torch.isneginf(lse) == torch.isneginf(ref_lse)).all()
    seen = torch.isfinite(ref_lse)
    assert_close(lse[seen], ref_lse[seen], atol=1e-4 if dtype != torch.float32 else 1e-5, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "causal,L,S,H_kv", [(False, 70, 100, 4), (True, 100, 70, 2), (True, 50, 90, 1)]
)
def test_backward_matches_autograd(dtype, causal, L, S, H_kv):
    q, k, v = _qkv(1, 4, H_kv, L, S, 32, dtype, seed=7)
    do = torch.randn(1, 4, L, 32, generator=torch.Generator().manual_seed(8)).to(dtype)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    out = ft.flash_attention_triton(*inputs, causal=causal)
    grads = torch.autograd.grad(out, inputs, do)
    ref_in = [t.double().requires_grad_() for t in (q, k, v)]
    ref_grads = torch.autograd.grad(_reference(*ref_in, causal=causal), ref_in, do.double())
    plain_in = [t.clone().requires_grad_() for t in (q, k, v)]
    plain_grads = torch.autograd.grad(_reference(*plain_in, causal=causal), plain_in, do)
    for name, g, rg, pg in zip(("dq", "dk", "dv"), grads, ref_grads, plain_grads):
        assert g.dtype == dtype and g.shape == rg.shape
        _assert_within_low_precision_rule(g, pg, rg, dtype, name)
    if causal and L > S:
        assert (grads[0][:, :, : L - S] == 0).all()  # rows with no visible key: gradient 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_gpu_dtype_flow_under_the_interpreter(dtype):
    # upcast=False: no cast to float32 after the loads, so the dots take 16-bit operands and
    # P is rounded to the value dtype before P @ V, as on the GPU (float16 only: the
    # interpreter's bfloat16 arithmetic is wrong)
    L, S, causal = 70, 100, True
    q, k, v = _qkv(1, 4, 2, L, S, 32, dtype, seed=21)
    do = torch.randn(1, 4, L, 32, generator=torch.Generator().manual_seed(22)).to(dtype)
    out, lse = ft.attention_forward(q, k, v, causal=causal, upcast=False)
    dq, dk, dv = ft.attention_backward(do, q, k, v, out, lse, causal=causal, upcast=False)
    ref_in = [t.double().requires_grad_() for t in (q, k, v)]
    ref = _reference(*ref_in, causal=causal)
    ref_grads = torch.autograd.grad(ref, ref_in, do.double())
    plain_in = [t.clone().requires_grad_() for t in (q, k, v)]
    plain = _reference(*plain_in, causal=causal)
    plain_grads = torch.autograd.grad(plain, plain_in, do)
    _assert_within_low_precision_rule(out, plain, ref, dtype, "forward, upcast=False")
    for name, g, rg, pg in zip(("dq", "dk", "dv"), (dq, dk, dv), ref_grads, plain_grads):
        _assert_within_low_precision_rule(g, pg, rg, dtype, f"{name}, upcast=False")


def test_rows_without_visible_key_output_zero():
    q, k, v = _qkv(1, 2, 2, 90, 20, 16, torch.float32, seed=3)  # causal: rows 0..69 see nothing
    out, lse = ft.attention_forward(q, k, v, causal=True)
    assert (out[:, :, :70] == 0).all() and torch.isneginf(lse[:, :, :70]).all()
    assert torch.isfinite(out).all() and torch.isfinite(lse[:, :, 70:]).all()
    ref = _reference(q.double(), k.double(), v.double(), causal=True)
    assert_close(out, ref, atol=1e-5, rtol=0)


def _nan_padded(t, seq_pad, dim_pad, head_pad=1):
    """A view of ``t`` inside a larger NaN-filled buffer (extra heads, rows and lanes)."""
    B, H, N, D = t.shape
    buf = torch.full((B, H + head_pad, N + seq_pad, D + dim_pad), math.nan, dtype=t.dtype)
    view = buf[:, :H, :N, :D]  # strided view: non-contiguous, NaN all around
    view.copy_(t)
    return view


@pytest.mark.parametrize("head_dim", [16, 48, 80, 128])
def test_masking_with_nan_padded_strided_views(head_dim):
    # L = 70, S = 100 with blocks of 64: both sequence tails and (for 48, 80) the head_dim
    # lanes up to the next power of two read from the NaN padding unless masked.
    L, S = 70, 100
    q, k, v = _qkv(1, 2, 1, L, S, head_dim, torch.float32, seed=head_dim)
    do = torch.randn(1, 2, L, head_dim, generator=torch.Generator().manual_seed(1))
    qp, kp, vp, dop = (_nan_padded(t, 64, 64) for t in (q, k, v, do))
    assert not qp.is_contiguous() and torch.isnan(qp._base).any()  # NaN sits right behind
    for causal in (False, True):
        out, lse = ft.attention_forward(qp, kp, vp, causal=causal)
        assert not torch.isnan(out).any(), f"NaN leaked into the output (causal={causal})"
        dq, dk, dv = ft.attention_backward(dop, qp, kp, vp, out, lse, causal=causal)
        for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
            assert not torch.isnan(g).any(), f"NaN leaked into {name} (causal={causal})"
        ref_in = [t.double().requires_grad_() for t in (q, k, v)]
        ref = _reference(*ref_in, causal=causal)
        ref_grads = torch.autograd.grad(ref, ref_in, do.double())
        assert_close(out, ref, atol=1e-5, rtol=0)
        for g, rg in zip((dq, dk, dv), ref_grads):
            assert_close(g, rg, atol=1e-4, rtol=0)


def test_flash_attention_dispatch_under_the_interpreter():
    q, k, v = _qkv(1, 4, 2, 33, 40, 24, torch.float32, seed=11)
    assert select_backend(q, k, v) == "torch"  # "auto" never interprets CPU tensors
    assert select_backend(q, k, v, "triton") == "triton"
    assert triton_unsupported_reason(q, k, v) is None
    out = flash_attention(q, k, v, causal=True, backend="triton")
    ref = _reference(q.double(), k.double(), v.double(), causal=True)
    assert_close(out, ref, atol=1e-5, rtol=0)
    # unsupported inputs name the reason
    assert "float64" in triton_unsupported_reason(q.double(), k.double(), v.double())
    for bad_d in (8, 20, 256):
        qd, kd, vd = _qkv(1, 2, 2, 4, 4, bad_d, torch.float32)
        assert f"head_dim {bad_d}" in triton_unsupported_reason(qd, kd, vd)
        with pytest.raises(ValueError, match=f"head_dim {bad_d} is not supported"):
            flash_attention(qd, kd, vd, backend="triton")
        assert select_backend(qd, kd, vd) == "torch"
    with pytest.raises(ValueError, match="block_m must be a power of two"):
        ft.flash_attention_triton(q, k, v, block_m=24)


def test_compile_for_gpu_refuses_under_the_interpreter():
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        ft.compile_for_gpu(90, torch.float16, False)


_AOT_SCRIPT = r"""
import json, torch
from attnbook import flash_triton as ft
assert not ft.INTERPRET
report = {}
for arch in (80, 90):
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for causal in (False, True):
            res = ft.compile_for_gpu(arch, dtype, causal, head_dim=128)
            report[f"sm_{arch} {dtype} causal={causal}"] = res
print(json.dumps(report))
"""


@pytest.mark.slow  # compiles 36 kernels (~74 s on two cores)
def test_kernels_compile_ahead_of_time_for_sm80_and_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run(
        [sys.executable, "-c", _AOT_SCRIPT], env=env, capture_output=True, text=True, timeout=900
    )
    assert res.returncode == 0, res.stderr[-4000:]
    import json

    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(report) == 2 * 3 * 2
    for key, kernels in report.items():
        assert set(kernels) == {"_attn_fwd", "_attn_bwd_dkdv", "_attn_bwd_dq"}, key
        for name, info in kernels.items():
            assert info["cubin_bytes"] > 0 and info["ptx_lines"] > 100, (key, name)
            assert 0 < info["shared"] <= (166912 if "sm_80" in key else 232448), (key, name)


def test_gpu_benchmark_dry_run_on_the_cpu(tmp_path, monkeypatch):
    import csv
    import importlib.util
    import json
    from pathlib import Path

    # The script runs in this process, as `python benchmarks/gpu_flash.py --dry-run-cpu ...`
    # would (it reads sys.argv when it is loaded), without importing torch and triton again.
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_flash.py"
    out = tmp_path / "gpu_flash.csv"
    monkeypatch.setattr(
        sys,
        "argv",
        [str(script), "--dry-run-cpu", "--sizes", "64", "--head-dims", "32", "--out", str(out)],
    )
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script prepends lib/
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # as the script sets it (so does conftest.py)
    spec = importlib.util.spec_from_file_location("gpu_flash_benchmark", script)
    bench = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(bench)
        rc = bench.main()
    except SystemExit as e:  # the correctness check stops the script this way
        pytest.fail(f"benchmarks/gpu_flash.py --dry-run-cpu exited: {e}")
    assert rc == 0
    rows = list(csv.DictReader(out.open()))
    # 2 causal settings x 1 size x 2 modes x 3 methods
    assert len(rows) == 12
    assert {r["method"] for r in rows} == {"triton", "sdpa_flash", "naive"}
    assert all(float(r["ms"]) > 0 for r in rows)
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["dry_run_cpu"] is True and len(meta["correctness"]) == 2
    assert len(meta["triton_over_sdpa"]) == 4
