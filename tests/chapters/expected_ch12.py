"""Expected glued values of chapter 12 (chapters/12-flashattention.md).

``expected()`` returns, for every name the chapter glues, either

* the value recomputed here: the online-softmax walk-through by hand (running max, rescale
  ``exp(m_old - m_new)``, denominator) and through ``flash.tiled_attention_steps``; the CPU
  benchmark's numbers read from ``benchmarks/results/cpu_flash.csv`` with NumPy's own CSV reader;
  the Triton kernel run again under the interpreter on the same seeded inputs (deterministic
  on the CPU) against a float64 reference; the roofline model from the A100 datasheet's two
  figures and the byte counts written out by hand (Dao et al. 2022, Algorithm 0; Dao 2023,
  Algorithm 1); the retrieval example with linear attention; or
* ``Tiny(bound)`` for a difference that a derivation says is 0 (exact attention, any tiling):
  the glued float must lie in ``[0, bound]``; or
* a :class:`Check` for a wall-clock time: ``check.matches(actual, glued)`` gets the glued value
  and every glued value of the chapter and verifies what the prose relies on.

Both are in tests/chapters/matchers.py.

The tests must run with ``TRITON_INTERPRET=1`` set before ``attnbook.flash_triton`` is imported
(tests/conftest.py does).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
from matchers import Check, Tiny

from attnbook import attention, flash, linear

NUMBER = 12
NAME = "12-flashattention"
ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def expected() -> dict:
    e: dict = {}
    # --- online softmax walk-through, by hand: scores in blocks of two ----------------------
    s = np.array([0.5, 1.0, 3.0, 0.0, 2.0, 4.5, -1.0, 1.5])
    blocks = s.reshape(4, 2)
    m_hand = np.maximum.accumulate(blocks.max(axis=1))  # [1, 3, 4.5, 4.5]
    e["os_n_steps"] = 4
    e["os_m_after_1"], e["os_m_after_2"], e["os_m_after_3"] = 1.0, 3.0, 4.5
    assert m_hand.tolist() == [1.0, 3.0, 4.5, 4.5]
    e["os_rescale_2"] = math.exp(1.0 - 3.0)
    e["os_rescale_3"] = math.exp(3.0 - 4.5)
    e["os_rescale_4"] = 1.0
    v = np.arange(8.0) * 10
    p = np.exp(s - s.max())
    out_hand = float(p @ v / p.sum())  # softmax(s) . v in float64
    _, steps = flash.tiled_attention_steps(
        np.array([[1.0]]), s[:, None], v[:, None], scale=1.0, block_q=1, block_k=2
    )
    assert np.allclose(
        [st.rescale[0] for st in steps[1:]],
        [e["os_rescale_2"], e["os_rescale_3"], 1.0],
        rtol=1e-15,
        atol=0,
    )
    e["os_out_tiled"] = float(steps[-1].out[0, 0])
    assert math.isclose(e["os_out_tiled"], out_hand, rel_tol=1e-14)
    e["os_diff"] = Tiny(1e-12)
    e["tiling_max_diff"] = Tiny(1e-12)
    # --- the explorer's example (attnbook.explorers.flash), from its documented generator ---
    rng = np.random.default_rng(0)
    q8, k8 = rng.standard_normal((8, 4)), rng.standard_normal((8, 4))
    s8 = q8 @ k8.T / 2.0  # (8, 8), scale 1 / sqrt(4)
    blk = s8.reshape(8, 4, 2).max(axis=2)  # (row, key block of 2): the block maxima
    seen = np.maximum.accumulate(blk, axis=1)  # running maximum m_i after each block
    e["fa_n_steps"] = (8 // 2) * (8 // 2)
    e["fa_n_rises"] = int((blk[:, 1:] > seen[:, :-1]).sum())
    e["fa_r_step2_row0"] = math.exp(seen[0, 0] - seen[0, 1])
    assert np.all(seen[:2, 1] > seen[:2, 0])  # the prose: at step 2 both rows rise
    # causal, 2 x 2 tiles: query block a sees no key of key block b > a (6 of the 16 pairs)
    e["fa_causal_hidden"] = sum(1 for a in range(4) for b in range(4) if 2 * b > 2 * a + 1)
    e["fa_n_settings"] = 3 * 3 * 2
    e["fa_max_diff"] = Tiny(1e-12)
    # --- CPU benchmark, read with NumPy's CSV reader ----------------------------------------
    data = np.genfromtxt(
        ROOT / "benchmarks" / "results" / "cpu_flash.csv",
        delimiter=",",
        names=True,
        dtype=None,
        encoding="utf-8",
    )
    n_max = int(data["n"].max())

    def row(method):
        return data[(data["method"] == method) & (data["n"] == n_max)][0]

    naive, tiled = row("naive"), row("tiled_numpy")
    n_prev = int(np.unique(data["n"])[-2])

    def extra_prev(method):
        return int(data[(data["method"] == method) & (data["n"] == n_prev)][0]["extra_bytes"])

    e["cpu_n_max"] = n_max
    e["cpu_naive_mib"] = int(naive["extra_bytes"]) / 2**20
    e["cpu_tiled_mib"] = int(tiled["extra_bytes"]) / 2**20
    e["cpu_ratio"] = int(naive["extra_bytes"]) / int(tiled["extra_bytes"])
    e["cpu_naive_in_nxn"] = int(naive["extra_bytes"]) / (n_max * n_max * 4)
    e["cpu_tiled_pct_nxn"] = 100 * int(tiled["extra_bytes"]) / (n_max * n_max * 4)
    e["cpu_out_pct_tiled"] = 100 * n_max * 64 * 4 / int(tiled["extra_bytes"])  # the output
    e["cpu_naive_growth"] = int(naive["extra_bytes"]) / extra_prev("naive")
    e["cpu_tiled_growth"] = int(tiled["extra_bytes"]) / extra_prev("tiled_numpy")
    assert 3.5 < e["cpu_naive_growth"] < 4.5  # what the prose says: as L^2 predicts
    e["cpu_sdpa_pct_nxn"] = 100 * int(row("sdpa")["extra_bytes"]) / (n_max * n_max * 4)
    # the prose says it allocates even less than the tiled loop
    assert int(row("sdpa")["extra_bytes"]) < int(tiled["extra_bytes"])
    # --- Triton kernel under the interpreter, same seeded inputs ----------------------------
    import torch
    import torch.nn.functional as F

    from attnbook import flash_triton

    assert flash_triton.INTERPRET, "set TRITON_INTERPRET=1 before importing attnbook.flash_triton"
    torch.manual_seed(0)
    qt = torch.randn(1, 4, 80, 32)
    kt, vt = torch.randn(1, 2, 80, 32), torch.randn(1, 2, 80, 32)
    out_kernel = flash.flash_attention(qt, kt, vt, causal=True, backend="triton")
    # float64 reference written out: repeat-interleave the KV heads, bottom-right causal mask
    kr = kt.double().repeat_interleave(2, dim=1)
    vr = vt.double().repeat_interleave(2, dim=1)
    sc = qt.double() @ kr.transpose(-1, -2) / math.sqrt(32)
    sc = sc.masked_fill(~torch.ones(80, 80, dtype=torch.bool).tril(), -math.inf)
    hand64 = torch.softmax(sc, dim=-1) @ vr
    ref64 = F.scaled_dot_product_attention(
        qt.double(), kt.double(), vt.double(), is_causal=True, enable_gqa=True
    )  # the chapter's reference
    assert (hand64 - ref64).abs().max().item() <= 1e-12
    plain32 = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)
    e["tr_n"] = 80
    e["tr_err_kernel"] = (out_kernel.double() - ref64).abs().max().item()
    e["tr_err_plain"] = (plain32.double() - ref64).abs().max().item()
    assert e["tr_err_kernel"] <= 2 * e["tr_err_plain"] + 1e-6  # the low-precision rule
    e["tr_seconds"] = Check(lambda x, g: x > 0, "a positive time")
    ratio = e["tr_err_kernel"] / e["tr_err_plain"]
    e["tr_err_phrase"] = (
        "the same rounding level as" if ratio <= 2 else f"{ratio:.0f} times the error of"
    )
    gpu_csv = ROOT / "benchmarks" / "results" / "gpu_flash.csv"
    e["gpu_phrase"] = "has" if gpu_csv.exists() else "has no"
    # --- roofline model: A100 SXM4 40GB datasheet, 16 heads of 64, bfloat16, forward -------
    peak, bw = 312e12, 1555e9  # FLOP/s (dense BF16 tensor core), bytes/s (HBM2)
    H, d, bq = 16, 64, 128  # bq: kernel_config's forward BLOCK_M for bfloat16, head_dim 64
    lens = [1024, 2048, 4096, 8192, 16384]

    def flops(n):  # Q K^T and P V: 2 n^2 d multiply-adds per head, 2 FLOPs each
        return H * 2 * (2 * n * n * d)

    def plain_bytes(n):  # read Q, K; write S; read S; write P; read P, V; write O (bf16)
        return H * 2 * (n * d + n * d + n * n + n * n + n * n + n * n + n * d + n * d)

    def tiled_bytes(n, block):  # Q, O once; K, V once per query block; float32 lse
        return H * (2 * (n * d + n * d + math.ceil(n / block) * 2 * n * d) + 4 * n)

    def seconds(n, nbytes):  # the roofline: the slower of the two roofs
        return max(flops(n) / peak, nbytes / bw)

    ridge = peak / bw
    ai_plain = [flops(n) / plain_bytes(n) for n in lens]
    ai_tiled = [flops(n) / tiled_bytes(n, bq) for n in lens]
    n = lens[-1]
    e["rf_peak_tflops"], e["rf_bw_gbs"], e["rf_ridge"] = 312.0, 1555.0, ridge
    e["rf_n_heads"], e["rf_head_dim"], e["rf_block_q"] = H, d, bq
    e["rf_n_min"], e["rf_n_max"] = lens[0], n
    e["rf_ai_plain_max"] = max(ai_plain)
    e["rf_ai_tiled_min"], e["rf_ai_tiled_max"] = min(ai_tiled), max(ai_tiled)
    e["rf_plain_mem_over_compute"] = (plain_bytes(n) / bw) / (flops(n) / peak)
    e["rf_ms_plain"] = 1e3 * plain_bytes(n) / bw
    e["rf_ms_tiled"] = 1e3 * tiled_bytes(n, bq) / bw
    e["rf_speedup"] = plain_bytes(n) / tiled_bytes(n, bq)
    e["rf_bytes_ratio"] = plain_bytes(n) / tiled_bytes(n, bq)
    e["rf_gb_plain"] = plain_bytes(n) / 1e9
    e["rf_gb_tiled"] = tiled_bytes(n, bq) / 1e9
    e["rf_ai_once"] = flops(n) / tiled_bytes(n, n)
    e["rf_ms_once"] = 1e3 * flops(n) / peak

    def pct(ai):  # attainable throughput min(peak, intensity * bandwidth) over the peak
        return 100 * min(peak, ai * bw) / peak

    e["rf_pct_plain_max"] = max(pct(a) for a in ai_plain)
    e["rf_pct_tiled_min"] = min(pct(a) for a in ai_tiled)
    e["rf_pct_tiled_max"] = max(pct(a) for a in ai_tiled)
    # what the prose says: both memory-bound at every length (so the model's times are the
    # memory times used above); plain below d / 2 FLOPs per byte and near it at L = 16384;
    # the tiled intensity approaches block_q from below; K and V read once is compute-bound,
    # its time the arithmetic's
    assert all(a < ridge for a in ai_plain + ai_tiled)
    assert all(a < d / 2 for a in ai_plain) and max(ai_plain) > 0.95 * d / 2
    assert 0.85 * bq < min(ai_tiled) < max(ai_tiled) < bq
    assert e["rf_ai_once"] > ridge
    assert seconds(n, tiled_bytes(n, n)) == flops(n) / peak
    assert seconds(n, plain_bytes(n)) == plain_bytes(n) / bw
    assert e["rf_ms_once"] < e["rf_ms_tiled"] < e["rf_ms_plain"]
    # --- linear attention: timings (checks) and the retrieval example (recomputed) ----------
    e["lin_n_factor"] = 8.0
    e["lin_n_min"], e["lin_n_max"] = 512, 4096
    e["lin_growth_soft"] = Check(lambda x, g: x > 0, "a positive ratio of timings")
    e["lin_growth_lin"] = Check(lambda x, g: x > 0, "a positive ratio of timings")
    e["lin_speedup_max"] = Check(lambda x, g: x > 1, "linear attention faster at n = 4096")
    rng = np.random.default_rng(1)
    keys = rng.standard_normal((64, 32))
    query = 0.6 * keys[17:18]
    w_soft = attention.scaled_dot_product_attention(query, keys, np.eye(64))[0]
    sim = linear.elu_feature_map(query) @ linear.elu_feature_map(keys).T  # quadratic form
    e["ret_soft"] = float(w_soft[17])
    e["ret_lin"] = float(sim[0, 17] / sim.sum())
    e["ret_uniform"] = 1 / 64
    e["ret_lin_over_uniform"] = e["ret_lin"] * 64
    assert e["ret_soft"] > 10 * e["ret_lin"] > 10 * e["ret_uniform"]
    e["state_linear"] = 128 * 128 + 128
    e["state_kv_32k"] = 2 * 32768 * 128
    # --- exercises -------------------------------------------------------------------------
    # scores [1, 2] then [4, 0]: after block 1, m = 2, l = e^-1 + 1; block 2 rescales by e^-2
    e["ex1_l_first"] = math.exp(-1) + 1
    e["ex1_rescale"] = math.exp(-2)
    e["ex1_l"] = math.exp(-3) + math.exp(-2) + 1 + math.exp(-4)
    e["ex3_tokens"] = 65  # 2 S 128 > 128^2 + 128  <=>  S > 64.5
    e["ex4_gib"] = 4 * 16384**2 * 2 / 2**30  # 2.0
    # ... at the A100 datasheet's 1,555 GB/s: 2**31 bytes / 1.555e12 B/s = 1.381 ms.
    e["ex4_ms"] = 4 * 16384**2 * 2 / 1555e9 * 1e3
    return e
