"""Tests for attnbook.cost, the cost formulas (FLOPs, bytes, parameter counts).

References: ``torch.utils.flop_counter.FlopCounterMode`` counting the matrix-multiply FLOPs of
the very modules the formulas describe (``attnbook.rnn.VanillaRNN``, ``torch.nn.RNN``,
``attnbook.layers.MultiHeadAttention``, the two matmuls of attention); the bytes of tensors
actually allocated (``Tensor.nbytes``); and numbers worked out by hand. The parameter counts
are checked against built modules and published totals in ``test_models.py`` and
``test_kv_cache.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attnbook import cost, kv_cache, models, timing
from attnbook.config import PRESETS, ModelConfig
from attnbook.layers import MultiHeadAttention
from attnbook.rnn import VanillaRNN

KiB, MiB, GiB = 2**10, 2**20, 2**30
TINY = dict(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16)


def counted_flops(fn) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        fn()
    return counter.get_total_flops()


# --- FLOPs -------------------------------------------------------------------------------


@pytest.mark.parametrize("B, n, d", [(1, 7, 8), (2, 5, 16), (3, 1, 4)])
def test_flop_formulas_match_torch_flop_counter_on_the_modules(B, n, d):
    torch.manual_seed(0)
    x = torch.randn(B, n, d)  # (B, n, d_model)
    ours = VanillaRNN(d, d)
    ref = torch.nn.RNN(d, d, batch_first=True)
    attn = MultiHeadAttention(d, 2)
    rnn_expected = cost.rnn_flops(n, d, batch=B)
    assert counted_flops(lambda: ours(x)) == rnn_expected
    assert counted_flops(lambda: ref(x)) == rnn_expected
    assert counted_flops(lambda: attn(x, causal=True)) == cost.attention_layer_flops(n, d, batch=B)


@pytest.mark.parametrize("B, H, n, D", [(1, 1, 5, 8), (2, 4, 7, 3)])
def test_attention_flops_match_the_two_matmuls(B, H, n, D):
    q, k, v = torch.randn(3, B, H, n, D)  # (B, H, n, D) each

    def matmuls():
        p = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # (B, H, n, n)
        return p @ v  # (B, H, n, D)

    assert counted_flops(matmuls) == cost.attention_flops(n, H * D, batch=B)


def test_flop_formulas_by_hand():
    # n = 4, d = 8: RNN 4 * 4 * 64 = 1024; attention 8 * 4 * 64 + 4 * 16 * 8 = 2560.
    assert cost.rnn_flops(4, 8) == 1024
    assert cost.attention_layer_flops(4, 8) == 2560
    assert cost.attention_flops(1000, 512) == 4 * 1000**2 * 512
    assert cost.attention_flops(10, 8, batch=3) == 3 * 4 * 100 * 8
    assert cost.attention_flops(0, 8) == 0
    # Arrays broadcast, batch multiplies; the ratio is 2 + n / d (hand derivation).
    n = np.array([16, 64, 1024])
    ratio = cost.attention_layer_flops(n, 64, batch=3) / cost.rnn_flops(n, 64, batch=3)
    np.testing.assert_allclose(ratio, 2 + n / 64, rtol=1e-15)
    assert cost.rnn_flops(n, 64).dtype == np.int64
    assert isinstance(cost.attention_layer_flops(np.int64(4), 8), int)


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: cost.rnn_flops(-1, 8), ValueError, "seq_len"),
        (lambda: cost.rnn_flops(2.5, 8), TypeError, "seq_len"),
        (lambda: cost.rnn_flops(4, 0), ValueError, "d_model"),
        (lambda: cost.attention_layer_flops([4, -1], 8), ValueError, "seq_len"),
        (lambda: cost.attention_layer_flops([4.0, 1.0], 8), TypeError, "seq_len"),
        (lambda: cost.attention_layer_flops(4, 8, batch=0), ValueError, "batch"),
        (lambda: cost.attention_flops(8, 0), ValueError, "d_model"),
        (lambda: cost.attention_flops(8.0, 4), TypeError, "seq_len"),
        (lambda: cost.attention_flops(8, True), TypeError, "d_model"),
    ],
)
def test_flop_formulas_reject_bad_sizes(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


# --- bytes -------------------------------------------------------------------------------


def test_score_matrix_bytes_equal_the_allocated_scores():
    B, H, n = 2, 3, 17
    scores = torch.empty(B, H, n, n, dtype=torch.bfloat16)  # (B, H, n, n)
    assert cost.score_matrix_bytes(n, H, B, "bfloat16") == scores.nbytes
    assert cost.score_matrix_bytes(2048) == 2048 * 2048 * 4
    assert cost.score_matrix_bytes(32768) / cost.score_matrix_bytes(2048) == 256
    lens = np.array([1, 2, 4])
    assert cost.score_matrix_bytes(lens).tolist() == [4, 16, 64]
    with pytest.raises(ValueError, match="dtype"):
        cost.score_matrix_bytes(8, dtype="fp7")
    with pytest.raises(ValueError, match="seq_len"):
        cost.score_matrix_bytes(-1)


def test_kv_cache_bytes_core_by_hand():
    qwen = PRESETS["Qwen2-7B"]  # 28 layers, 4 KV heads of 128 dims
    # 2 (k and v) * 28 * 4 * 128 * 2 bytes (bfloat16) = 57344 bytes = 56 KiB per token
    assert cost.kv_cache_bytes_core(qwen, 1, 1, "bfloat16") == 56 * KiB
    assert cost.kv_cache_bytes_core(qwen, 131072, 2, "float32") == 28 * GiB
    mistral = PRESETS["Mistral-7B"]  # 32 layers, 8 KV heads of 128, window 4096
    per_token = 2 * 32 * 8 * 128 * 2
    assert cost.kv_cache_bytes_core(mistral, 100, 1, "bfloat16") == 100 * per_token
    assert cost.kv_cache_bytes_core(mistral, 10**6, 1, "bfloat16") == 4096 * per_token
    ds = PRESETS["DeepSeek-V2"]  # MLA: 60 layers, latent 512 + RoPE key 64
    assert cost.kv_cache_bytes_core(ds, 1, 1, "bfloat16") == 60 * (512 + 64) * 2


def test_kv_cache_bytes_equal_a_built_cache():
    cfg = ModelConfig(**TINY, n_kv_heads=1, positional="rope", norm="rmsnorm")
    per_layer = 2 * cfg.kv_heads * cfg.head_size  # a key and a value per KV head
    k = torch.empty(3, cfg.kv_heads, 5, cfg.head_size)  # (B, H_kv, S, D) float32
    caches_bytes = cfg.n_layers * 2 * k.nbytes
    assert cost.kv_cache_bytes(cfg, 5, batch=3, dtype="float32") == caches_bytes
    assert caches_bytes == cfg.n_layers * per_layer * 5 * 3 * 4


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"seq_len": 2.5}, "seq_len"),
        ({"seq_len": True}, "seq_len"),
        ({"seq_len": "10"}, "seq_len"),
        ({"seq_len": math.nan}, "seq_len"),
        ({"seq_len": 10, "batch": 1.5}, "batch"),
    ],
)
def test_kv_cache_bytes_integer_arguments(kwargs, name):
    with pytest.raises(TypeError, match=name):
        cost.kv_cache_bytes(ModelConfig(**TINY), **kwargs)


def test_kv_cache_bytes_numpy_integers_and_errors():
    cfg = ModelConfig(**TINY)  # 1 layer, 2 heads of 4
    # 2 (k and v) * 1 layer * 2 heads * 4 dims * 10 tokens * 2 bytes (bfloat16)
    assert cost.kv_cache_bytes(cfg, np.int64(10), np.int32(1)) == 2 * 1 * 2 * 4 * 10 * 2
    assert cost.kv_cache_bytes(cfg, np.array(10)) == 2 * 1 * 2 * 4 * 10 * 2
    with pytest.raises(TypeError, match="ModelConfig"):
        cost.kv_cache_bytes(dict(TINY), 10)
    with pytest.raises(ValueError, match="dtype"):
        cost.kv_cache_bytes(cfg, 10, dtype="float64x")
    with pytest.raises(ValueError, match="seq_len"):
        cost.kv_cache_bytes(cfg, -1)
    with pytest.raises(ValueError, match="batch"):
        cost.kv_cache_bytes(cfg, 1, batch=0)


def test_param_count_refuses_a_dict_and_mla():
    with pytest.raises(TypeError, match="ModelConfig"):
        cost.param_count(dict(TINY))
    with pytest.raises(ValueError, match="MLA"):
        cost.param_count(PRESETS["DeepSeek-V2"])


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (57344, "56 KiB"),
        (69120, "67.5 KiB"),
        (3 * 2**29, "1.5 GiB"),
        (7 * GiB, "7 GiB"),
        (512 * MiB, "512 MiB"),
        (2**40, "1 TiB"),
    ],
)
def test_format_bytes_by_hand(n, text):
    assert cost.format_bytes(n) == text


@pytest.mark.parametrize(
    "bad, exc", [(-1, ValueError), (math.nan, ValueError), (math.inf, ValueError), ("1", TypeError)]
)
def test_format_bytes_rejects_bad_counts(bad, exc):
    with pytest.raises(exc, match="n must be"):
        cost.format_bytes(bad)


def test_old_import_paths_are_the_same_functions():
    assert kv_cache.kv_cache_bytes is cost.kv_cache_bytes
    assert models.param_count is cost.param_count
    assert timing.rnn_flops is cost.rnn_flops
    assert timing.attention_layer_flops is cost.attention_layer_flops


# --- scores: what grows with the number of heads (chapter 7) ---------------------------------


def test_score_count_by_hand_and_against_the_weights_the_library_returns():
    # By hand: 8 heads of 256 x 256 scores, one head of the same; batch 3, a length array.
    assert cost.score_count(256, 8) == 8 * 256 * 256 == 524288
    assert cost.score_count(256) == 65536
    assert cost.score_count(5, 2, batch=3) == 150
    assert cost.score_count_core(5, 2, 3) == 150
    assert cost.score_count(np.array([0, 1, 4]), 2).tolist() == [0, 2, 32]
    # Independent reference: the weights array the library materialises, one entry per score.
    from attnbook import attention

    B, H, n, D = 2, 3, 7, 4
    q = k = v = np.zeros((B, H, n, D))  # (B, H, n, D)
    _, w = attention.scaled_dot_product_attention(q, k, v, causal=True, return_weights=True)
    assert w.shape == (B, H, n, n) and cost.score_count(n, H, batch=B) == w.size
    # ... and the score matrices' bytes are the count times the bytes per number.
    assert cost.score_matrix_bytes(n, H, B, "bfloat16") == 2 * cost.score_count(n, H, B)


def test_score_count_of_lengths_too_large_for_int64_raises_instead_of_wrapping():
    # 2**40 tokens: 2**80 scores. An int64 array would wrap around to 0 silently.
    with pytest.raises(ValueError, match="seq_len.*int64"):
        cost.score_count(np.array([1, 2**40]))
    with pytest.raises(ValueError, match="seq_len.*int64"):
        cost.score_count(np.array([2**31]), 1024, batch=1024)
    with pytest.raises(ValueError, match="seq_len.*int64"):
        cost.score_matrix_bytes(np.array([2**31]), 1024, 1024)
    assert cost.score_count(2**40) == 2**80  # a Python int is exact
    big = np.array([2**31 - 1])  # the largest n with n**2 in int64 ... times 1 head
    assert cost.score_count(big).tolist() == [(2**31 - 1) ** 2]
    assert cost.score_count(np.array([], dtype=np.int64)).tolist() == []


def test_score_count_grows_with_heads_while_the_matmul_flops_do_not():
    from attnbook import layers

    d, n = 512, 64
    for h in (1, 8):  # h heads of d / h: FlopCounterMode counts the same matmul FLOPs
        q = torch.zeros(1, h, n, d // h)  # (B, H, L, D)
        with FlopCounterMode(display=False) as counter:
            layers.scaled_dot_product_attention(q, q, q)
        assert counter.get_total_flops() == cost.attention_flops(n, d)
    assert cost.score_count(n, 8) == 8 * cost.score_count(n, 1)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"seq_len": 2.0}, TypeError, "seq_len"),
        ({"seq_len": -1}, ValueError, "seq_len"),
        ({"seq_len": 4, "n_heads": 0}, ValueError, "n_heads"),
        ({"seq_len": 4, "n_heads": True}, TypeError, "n_heads"),
        ({"seq_len": 4, "batch": 0}, ValueError, "batch"),
    ],
)
def test_score_count_rejects_bad_sizes(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        cost.score_count(**kwargs)


@pytest.mark.parametrize(
    "fn, args",
    [
        # 4 * 2**40 * (2**12)**2 = 2**66 FLOPs: past int64 (2**63 - 1).
        (cost.rnn_flops, (np.array([1, 2**40]), 2**12)),
        # 4 * (2**31)**2 * 2**10 = 2**74.
        (cost.attention_flops, (np.array([2**31]), 2**10)),
        (cost.attention_layer_flops, (np.array([2**31]), 2**10)),
    ],
)
def test_flop_counts_too_large_for_int64_raise_instead_of_wrapping(fn, args):
    with pytest.raises(ValueError, match="seq_len.*int64"):
        fn(*args)
    # A Python int is exact (hand derivation of the same products).
    n, d = int(args[0].max()), args[1]
    expected = {
        cost.rnn_flops: 4 * n * d * d,
        cost.attention_flops: 4 * n * n * d,
        cost.attention_layer_flops: 8 * n * d * d + 4 * n * n * d,
    }[fn]
    assert fn(n, d) == expected


def test_flop_counts_of_arrays_that_fit_int64_are_unchanged():
    n = np.array([0, 1, 2**20])
    assert cost.rnn_flops(n, 64).tolist() == [4 * x * 64 * 64 for x in n.tolist()]
    assert cost.attention_flops(n, 64).tolist() == [4 * x * x * 64 for x in n.tolist()]


# --- additive (Bahdanau) scores ---------------------------------------------------------------


def test_additive_score_flops_by_hand_and_by_the_flop_counter():
    # L = 3, S = 5, d_q = 4, d_k = 6, d_a = 7: projections 2*3*4*7 = 168 and 2*5*6*7 = 420,
    # the reduction with v_a 2*3*5*7 = 210; total 798.
    assert cost.additive_score_flops(3, 5, 4, 6, 7) == 798
    assert cost.additive_score_flops(3, 5, 4, 6, 7, batch=2) == 2 * 798
    assert cost.additive_score_flops(0, 5, 4, 6, 7) == 420  # keys are still projected
    # The same computation in torch, counted by FlopCounterMode (tanh and + are not counted).
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 6)
    W_q, W_k, v_a = torch.randn(7, 4), torch.randn(7, 6), torch.randn(7, 1)
    counted = counted_flops(
        lambda: torch.tanh((q @ W_q.T)[:, :, None, :] + (k @ W_k.T)[:, None, :, :]) @ v_a
    )
    assert counted == cost.additive_score_flops(3, 5, 4, 6, 7, batch=2)


def test_additive_score_flops_arrays_and_errors():
    n = np.array([1, 2, 8])
    got = cost.additive_score_flops(n, 16, 32, 32, 32)
    assert got.dtype == np.int64
    assert got.tolist() == [2 * 32 * (L * 32 + 16 * 32 + L * 16) for L in (1, 2, 8)]
    with pytest.raises(ValueError, match="seq_len.*int64"):
        cost.additive_score_flops(np.array([2**40]), 2**40, 1, 1, 1)
    # uint64 lengths past int64 would wrap negative in the int64 result (2**63 -> -2**63,
    # and the formula then wrapped to 2); every function with array lengths refuses them.
    huge = np.array([2**63], np.uint64)
    for fn, args in (
        (cost.additive_score_flops, (1, 1, 1, 1)),
        (cost.attention_flops, (1,)),
        (cost.score_count, ()),
        (cost.rnn_flops, (1,)),
    ):
        with pytest.raises(ValueError, match=r"seq_len must be <= 9223372036854775807"):
            fn(huge, *args)
    assert cost.additive_score_flops(np.array([3], np.uint64), 5, 4, 6, 7).tolist() == [798]
    for kwargs, exc, name in (
        (dict(kv_len=-1), ValueError, "kv_len"),
        (dict(d_a=0), ValueError, "d_a"),
        (dict(d_q=2.0), TypeError, "d_q"),
        (dict(batch=0), ValueError, "batch"),
    ):
        args = dict(seq_len=3, kv_len=5, d_q=4, d_k=6, d_a=7) | kwargs
        with pytest.raises(exc, match=name):
            cost.additive_score_flops(**args)


def test_additive_benchmark_runs_one_point(tmp_path):
    # benchmarks/additive_scores.py measures times (never asserted); here only that it runs and
    # that its FLOP columns agree with the formula (equal counts, by hand: 2 d (L d + S d + L S)).
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "additive_scores.py"
    spec = importlib.util.spec_from_file_location("additive_scores_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--L", "8", "16", "--repeat", "1", "--out", str(tmp_path / "a.csv")]) == 0
    row = bench.measure(8, 4, 1)
    assert row["flops_additive"] == row["flops_dot"] == 2 * 4 * (8 * 4 + 8 * 4 + 8 * 8)
    assert row["intermediate_bytes"] == 8 * 8 * 4 * 4 and row["ratio"] > 0
    assert (tmp_path / "a.json").is_file()


# --- HBM traffic and the roofline model -----------------------------------------------------


def traced_hbm_bytes(n, d, size, block_q):
    """Walk the two algorithms' HBM reads and writes tile by tile and add up the bytes.

    Independent of the closed forms: plain = Dao et al. (2022) Algorithm 0 step by step, tiled =
    FlashAttention-2's loop (one program per query block, every key/value block loaded by it).
    """
    plain = 0
    plain += (n * d + n * d) * size  # step 1: read Q and K ...
    plain += n * n * size  # ... write S
    plain += n * n * size + n * n * size  # step 2: read S, write P
    plain += (n * n + n * d) * size + n * d * size  # step 3: read P and V, write O
    tiled = 0
    for q0 in range(0, n, block_q):
        rows = min(block_q, n - q0)
        tiled += rows * d * size  # load this program's queries
        for k0 in range(0, n, 16):  # key blocks of any size: the same bytes in total
            cols = min(16, n - k0)
            tiled += 2 * cols * d * size  # load K and V tiles
        tiled += rows * d * size + rows * 4  # store O and the float32 log-sum-exp
    return plain, tiled


@pytest.mark.parametrize(
    "n, d, dtype, block_q",
    [
        (1, 8, "float32", 128),
        (4, 2, "bfloat16", 2),
        (100, 64, "float16", 128),
        (257, 32, "float32", 64),
        (1000, 16, "bfloat16", 7),
    ],
)
def test_attention_hbm_bytes_match_a_tile_by_tile_trace(n, d, dtype, block_q):
    size = {"float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    plain, tiled = traced_hbm_bytes(n, d, size, block_q)
    got = cost.attention_hbm_bytes(n, d, dtype=dtype, block_q=block_q)
    assert got == {"plain": plain, "tiled": tiled}
    both = cost.attention_hbm_bytes(n, d, n_heads=3, batch=2, dtype=dtype, block_q=block_q)
    assert both == {"plain": 6 * plain, "tiled": 6 * tiled}


def test_attention_hbm_bytes_by_hand():
    # n = 4, d = 2, bfloat16, blocks of 2 queries: plain 2 (4*4*2 + 4*16) = 192 bytes; tiled
    # Q and O 2*(2*8) = 32, two programs read K and V (2*8 numbers) each: 2*2*16 = 64, lse 16
    assert cost.attention_hbm_bytes(4, 2, block_q=2) == {"plain": 192, "tiled": 112}
    # one program (block_q >= n): K and V read once: 32 + 32 + 16
    assert cost.attention_hbm_bytes(4, 2, block_q=4)["tiled"] == 80
    assert cost.attention_hbm_bytes(4, 2, block_q=99)["tiled"] == 80
    # the plain traffic grows as n^2, the tiled one as n^2 d / block_q: at n = 16384, d = 64,
    # block 128 the S/P term 4 n^2 is four times the K/V term 2 n^2 d / block_q = n^2
    big = cost.attention_hbm_bytes(16384, 64, block_q=128)
    assert big["plain"] == 2 * (4 * 16384 * 64 + 4 * 16384**2)
    assert big["tiled"] == 2 * (2 * 16384 * 64 + 128 * 2 * 16384 * 64) + 4 * 16384


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(seq_len=0, head_dim=8), ValueError, "seq_len"),
        (dict(seq_len=8, head_dim=0), ValueError, "head_dim"),
        (dict(seq_len=8, head_dim=8, block_q=0), ValueError, "block_q"),
        (dict(seq_len=8, head_dim=8, n_heads=0), ValueError, "n_heads"),
        (dict(seq_len=8.0, head_dim=8), TypeError, "seq_len"),
        (dict(seq_len=8, head_dim=8, dtype="int8"), ValueError, "dtype"),
    ],
)
def test_attention_hbm_bytes_rejects_bad_arguments(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        cost.attention_hbm_bytes(**kwargs)


def test_roofline_time_by_hand():
    # 10 FLOPs, 5 bytes on a device of 4 FLOP/s and 1 byte/s: arithmetic 2.5 s, memory 5 s
    r = cost.roofline_time(10, 5, 4, 1)
    assert r == (5.0, 2.5, 5.0, 2.0, True)
    # 40 FLOPs over the same 5 bytes: intensity 8 > ridge 4, compute-bound, 10 s
    r = cost.roofline_time(40, 5, 4, 1)
    assert (r.seconds, r.intensity, r.memory_bound) == (10.0, 8.0, False)
    # attainable throughput min(peak, intensity * bandwidth) gives the same times
    for f in (1.0, 20.0, 33.0):
        r = cost.roofline_time(f, 5, 4, 1)
        assert math.isclose(r.seconds, f / min(4, f / 5 * 1))


@pytest.mark.parametrize(
    "args, exc, name",
    [
        ((-1, 5, 4, 1), ValueError, "flops"),
        ((1, 0, 4, 1), ValueError, "hbm_bytes"),
        ((1, 5, 0, 1), ValueError, "peak_flops"),
        ((1, 5, 4, -2), ValueError, "bandwidth"),
        ((1, 5, 4, math.nan), ValueError, "bandwidth"),
        ((1, "5", 4, 1), TypeError, "hbm_bytes"),
    ],
)
def test_roofline_time_rejects_bad_arguments(args, exc, name):
    with pytest.raises(exc, match=name):
        cost.roofline_time(*args)


def test_a100_figures_are_the_datasheet_s():
    gpu = cost.A100_SXM4_40GB
    # datasheet, A100 40GB SXM: BF16 tensor core 312 TFLOPS dense, 1,555 GB/s
    assert (gpu.peak_flops, gpu.hbm_bandwidth, gpu.dtype) == (312e12, 1.555e12, "bfloat16")
    assert math.isclose(gpu.ridge_point, 312 / 1.555)
