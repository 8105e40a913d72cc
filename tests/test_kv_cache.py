"""Tests for attnbook.kv_cache and incremental decoding through attnbook.layers / attnbook.models.

References: the full (uncached) forward pass, hand-derived cache sizes, published parameter
totals of the preset models, and the float64 pass for the float32 low-precision rule.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import layers
from attnbook.kv_cache import (
    HF_CONFIGS,
    PRESETS,
    KVCache,
    LatentCache,
    SlidingWindowCache,
    greedy_generate,
    greedy_generate_core,
    kv_cache_bytes,
)
from attnbook.masks import padding_mask, positions_from_attention_mask
from attnbook.models import (
    DecoderOnlyModel,
    ModelConfig,
    build_model,
    count_parameters,
    param_count,
)
from attnbook.testing import assert_close, assert_low_precision_close

D64 = torch.float64
KiB, MiB, GiB = 2**10, 2**20, 2**30


# --- cache sizes ----------------------------------------------------------------------------


def test_qwen2_7b_cache_size():
    cfg = PRESETS["Qwen2-7B"]
    # 2 (K and V) x 28 layers x 4 KV heads x 128 head_dim x 2 bytes = 57344 B = 56 KiB
    assert kv_cache_bytes(cfg, 1) == 2 * 28 * 4 * 128 * 2 == 56 * KiB
    assert kv_cache_bytes(cfg, 131072) == 7 * GiB  # 56 KiB x 128 Ki tokens = 7.0 GiB
    assert kv_cache_bytes(cfg, 131072, batch=2, dtype="float32") == 28 * GiB


def test_other_presets_cache_size_by_hand():
    assert kv_cache_bytes(PRESETS["Llama-2-7B"], 1) == 2 * 32 * 32 * 128 * 2 == 512 * KiB
    assert kv_cache_bytes(PRESETS["Llama-3-8B"], 1) == 2 * 32 * 8 * 128 * 2 == 128 * KiB
    mistral = PRESETS["Mistral-7B"]
    assert kv_cache_bytes(mistral, 4096) == 4096 * 128 * KiB == 512 * MiB
    assert kv_cache_bytes(mistral, 131072) == 512 * MiB  # ring buffer: 4096 tokens at most
    ds = PRESETS["DeepSeek-V2"]
    # MLA: 60 layers x (512 + 64) x 2 bytes = 69120 B per token, vs MHA 2 x 60 x 128 x 128 x 2
    assert kv_cache_bytes(ds, 1) == 60 * (512 + 64) * 2 == 69120
    mha_equivalent = kv_cache_bytes(ds.replace(kv_lora_rank=None, head_dim=128), 1)
    assert mha_equivalent == 2 * 60 * 128 * 128 * 2
    assert 56 < mha_equivalent / kv_cache_bytes(ds, 1) < 57  # "93.3% smaller" in the paper


def test_kv_cache_bytes_errors():
    with pytest.raises(TypeError, match="ModelConfig"):
        kv_cache_bytes(HF_CONFIGS["Qwen2-7B"], 10)
    with pytest.raises(ValueError, match="dtype"):
        kv_cache_bytes(PRESETS["Qwen2-7B"], 10, dtype="float64x")
    with pytest.raises(ValueError, match="seq_len"):
        kv_cache_bytes(PRESETS["Qwen2-7B"], -1)


def test_from_hf_config_mapping():
    q = PRESETS["Qwen2-7B"]
    assert (q.d_model, q.n_heads, q.kv_heads, q.n_layers, q.d_ff, q.head_size) == (
        3584,
        28,
        4,
        28,
        18944,
        128,
    )
    assert q.sliding_window is None  # use_sliding_window: false
    assert q.qkv_bias is True and q.bias is False and q.ffn == "swiglu" and q.norm == "rmsnorm"
    assert q.rope_theta == 1e6 and q.eps == 1e-6 and not q.tie_embeddings
    assert PRESETS["Mistral-7B"].sliding_window == 4096
    assert PRESETS["Llama-2-7B"].kv_heads == 32 and PRESETS["Llama-3-8B"].kv_heads == 8
    assert PRESETS["DeepSeek-V2"].uses_mla and PRESETS["DeepSeek-V2"].kv_lora_rank == 512
    assert all(p.source for p in PRESETS.values())
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelConfig.from_hf_config(
            {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "vocab_size": 4}
        )


@pytest.mark.parametrize(
    "name,published",
    [
        ("Llama-2-7B", 6_738_415_616),  # safetensors total of meta-llama/Llama-2-7b-hf
        ("Llama-3-8B", 8_030_261_248),  # meta-llama/Meta-Llama-3-8B
        ("Mistral-7B", 7_241_732_096),  # mistralai/Mistral-7B-v0.1
        ("Qwen2-7B", 7_615_616_512),  # Qwen/Qwen2-7B
    ],
)
def test_preset_param_counts_match_published_totals(name, published):
    cfg = PRESETS[name]
    assert param_count(cfg) == published
    with torch.device("meta"):
        assert count_parameters(build_model(cfg)) == published


# --- cached decoding == full pass ------------------------------------------------------------


def _mha(n_kv, window=None, dtype=D64, seed=0):
    torch.manual_seed(seed)
    return (
        layers.MultiHeadAttention(8, 4, n_kv_heads=n_kv, bias=True, rope=layers.RotaryEmbedding())
        .to(dtype)
        .eval()
    )


def _run_chunks(m, x, chunks, cache, window=None):
    outs, start = [], 0
    for n in chunks:
        outs.append(m(x[:, start : start + n], causal=True, window=window, kv_cache=cache))
        start += n
    return torch.cat(outs, dim=1)


def _compositions(n):
    if n == 0:
        return [[]]
    return [[f] + r for f in range(1, n + 1) for r in _compositions(n - f)]


def test_every_chunking_of_five_equals_one_pass():
    m = _mha(2)
    x = torch.randn(2, 5, 8, dtype=D64)
    full = m(x, causal=True)
    for chunks in _compositions(5):  # 5, 4+1, 3+2, 2+3, ..., 1+1+1+1+1
        got = _run_chunks(m, x, chunks, KVCache())
        assert torch.isfinite(got).all()
        assert_close(got, full, atol=1e-12, rtol=0)


@settings(max_examples=20)
@given(
    chunks=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    n_kv=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
)
def test_cached_decoding_equals_full_pass_float64(chunks, n_kv, seed):
    m = _mha(n_kv, seed=seed)
    x = torch.randn(1, sum(chunks), 8, dtype=D64)
    got = _run_chunks(m, x, chunks, KVCache())
    assert_close(got, m(x, causal=True), atol=1e-12, rtol=0)


def test_cached_decoding_float32_within_low_precision_rule():
    m64 = _mha(2)
    m32 = _mha(2, dtype=torch.float32)
    x = torch.randn(2, 7, 8, dtype=D64)
    exact = m64(x, causal=True)
    cached = _run_chunks(m32, x.float(), [3, 1, 1, 2], KVCache())
    plain = m32(x.float(), causal=True)  # same-dtype full pass
    assert_low_precision_close(cached, exact, plain=plain, floor=torch.finfo(torch.float32).eps)


@settings(max_examples=20)
@given(
    chunks=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    window=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_sliding_window_ring_buffer_equals_full_windowed_pass(chunks, window, seed):
    m = _mha(2, seed=seed)
    x = torch.randn(1, sum(chunks), 8, dtype=D64)
    cache = SlidingWindowCache(window)
    got = _run_chunks(m, x, chunks, cache)  # the cache's window is applied automatically
    assert_close(got, m(x, causal=True, window=window), atol=1e-12, rtol=0)
    assert cache.k.shape[2] == window  # never more than `window` tokens stored


def test_ring_buffer_memory_is_constant():
    m = _mha(1)
    cache = SlidingWindowCache(3)
    x = torch.randn(1, 9, 8, dtype=D64)
    sizes = []
    for t in range(9):
        m(x[:, t : t + 1], causal=True, kv_cache=cache)
        sizes.append(cache.nbytes)
    assert len(set(sizes)) == 1 and sizes[0] == 2 * 1 * 1 * 3 * 2 * 8  # K+V, B, H_kv, W, D, 8 B
    assert sorted(cache.slot_positions.tolist()) == [6, 7, 8]
    full = KVCache()
    m(x, causal=True, kv_cache=full)
    assert full.nbytes == 2 * 9 * 2 * 8


def test_window_mismatch_and_cache_shape_errors():
    m = _mha(2)
    with pytest.raises(ValueError, match="window 2 contradicts the cache's window 3"):
        m(torch.randn(1, 2, 8, dtype=D64), causal=True, window=2, kv_cache=SlidingWindowCache(3))
    cache = KVCache()
    cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), torch.arange(3))
    with pytest.raises(ValueError, match=r"does not match the cache"):
        cache.update(torch.zeros(1, 2, 1, 5), torch.zeros(1, 2, 1, 5), torch.tensor([3]))
    with pytest.raises(ValueError, match=r"positions of shape \(3,\) must end in .* 2"):
        cache.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), torch.arange(3))


def test_sliding_window_cache_refuses_a_value_width_change():
    # as KVCache does: a v of another width Dv is named with the shapes, not a torch.cat error
    cache = SlidingWindowCache(4)
    cache.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4), torch.arange(3))
    match = r"new k \(1, 1, 1, 4\) / v \(1, 1, 1, 5\) does not match the buffers "
    with pytest.raises(ValueError, match=match + r"\(1, 1, 4, 4\), \(1, 1, 4, 4\)"):
        cache.update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 5), torch.tensor([3]))
    assert cache.seq_len == 3 and cache.slot_positions.tolist() == [0, 1, 2, -1]  # unchanged


def test_rope_key_in_cache_uses_its_position():
    # one head, D = 2: the cached key of the token at position 3 is [cos 3, sin 3], not [1, 0]
    m = layers.MultiHeadAttention(2, 1, rope=layers.RotaryEmbedding()).double().eval()
    with torch.no_grad():
        for lin in (m.q_proj, m.k_proj, m.v_proj, m.o_proj):
            lin.weight.copy_(torch.eye(2))
    cache = KVCache()
    x = torch.tensor([[[1.0, 0.0]] * 4], dtype=D64)
    m(x[:, :3], causal=True, kv_cache=cache)
    m(x[:, 3:], causal=True, kv_cache=cache)
    assert_close(cache.k[0, 0, 3], [np.cos(3), np.sin(3)], atol=1e-15, rtol=0)


# --- greedy generation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        dict(positional="rope", n_kv_heads=1, norm="rmsnorm", ffn="swiglu"),
        dict(positional="learned", norm_first=False),
        dict(positional="sinusoidal"),
        dict(positional="rope", n_kv_heads=2, sliding_window=3),
    ],
)
def test_greedy_generation_with_and_without_cache_equal(kw):
    cfg = ModelConfig(
        vocab_size=17, d_model=16, n_heads=4, n_layers=2, d_ff=24, max_seq_len=32, **kw
    )
    torch.manual_seed(1)
    model = build_model(cfg).double().eval()
    prompt = torch.tensor([[1, 5, 9], [2, 2, 3]])
    a = greedy_generate(model, prompt, 8, use_cache=False)
    b = greedy_generate(model, prompt, 8, use_cache=True)
    assert a.shape == (2, 11)
    assert torch.equal(a[:, :3], prompt)
    assert torch.equal(a, b)
    # and the cached logits equal the full-pass logits
    caches = model.make_caches()
    full = model(a)
    step = torch.cat(
        [model(a[:, :5], kv_caches=caches)]
        + [model(a[:, t : t + 1], kv_caches=caches) for t in range(5, 11)],
        dim=1,
    )
    assert_close(step, full, atol=1e-12, rtol=0)


def test_left_padded_cached_decoding_matches_unpadded():
    cfg = ModelConfig(
        vocab_size=17,
        d_model=16,
        n_heads=4,
        n_layers=2,
        d_ff=24,
        positional="rope",
        norm="rmsnorm",
        ffn="swiglu",
        n_kv_heads=2,
    )
    torch.manual_seed(2)
    model = build_model(cfg).double().eval()
    ref = model(torch.tensor([[4, 5, 6, 7]]))  # unpadded row
    am = np.array([[0, 0, 1, 1, 1]])
    pos = torch.from_numpy(positions_from_attention_mask(am))  # [[0, 0, 0, 1, 2]]
    caches = model.make_caches()
    out = model(
        torch.tensor([[0, 0, 4, 5, 6]]),
        positions=pos,
        mask=torch.from_numpy(padding_mask(am)),
        kv_caches=caches,
    )
    assert_close(out[:, 2:], ref[:, :3], atol=1e-12, rtol=0)
    am2 = np.concatenate([am, [[1]]], axis=1)
    nxt = model(
        torch.tensor([[7]]),
        positions=torch.tensor([[3]]),
        mask=torch.from_numpy(padding_mask(am2)),
        kv_caches=caches,
    )
    assert_close(nxt[:, 0], ref[:, 3], atol=1e-12, rtol=0)


def test_greedy_generate_errors():
    cfg = ModelConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    model = build_model(cfg).eval()
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        greedy_generate(model, torch.tensor([1, 2]), 3)
    assert torch.equal(greedy_generate(model, torch.tensor([[1, 2]]), 0), torch.tensor([[1, 2]]))


def test_greedy_generate_checks_as_generate_does():
    """greedy_generate refuses what generate refuses, with the same message, returns a new
    tensor and runs in eval mode; its tokens are generate's at temperature 0."""
    from attnbook.sampling import generate

    cfg = ModelConfig(
        vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_seq_len=4, dropout=0.5
    )
    torch.manual_seed(0)
    model = build_model(cfg)
    model.train()  # dropout 0.5 would change the tokens if the call left it on
    bad_calls = [
        (torch.tensor([[1, 7]]), 1, ValueError),  # id 7 >= vocab_size 5
        (torch.tensor([[1, 2]]), 3, ValueError),  # 2 + 3 tokens > max_seq_len 4
        (torch.tensor([[1.0, 2.0]]), 1, TypeError),
    ]
    for ids, n, error in bad_calls:
        with pytest.raises(error) as greedy_error:
            greedy_generate(model, ids, n)
        with pytest.raises(error) as sampled_error:
            generate(model, ids, n, temperature=0.0)
        assert str(greedy_error.value) == str(sampled_error.value)
    with pytest.raises(TypeError, match="decoder-only model"):
        greedy_generate(torch.nn.Linear(2, 2), torch.tensor([[1]]), 1)
    prompt = torch.tensor([[1, 2]])
    same = greedy_generate(model, prompt, 0)
    assert torch.equal(same, prompt) and same is not prompt
    assert same.data_ptr() != prompt.data_ptr()
    for use_cache in (True, False):
        out = greedy_generate(model, prompt, 2, use_cache=use_cache)
        assert model.training  # its mode given back
        ref = generate(model, prompt, 2, temperature=0.0, use_cache=use_cache)
        assert torch.equal(out, ref)


def test_greedy_generate_names_a_diverged_model():
    """A model whose logits went nan is named, as generate names it, not decoded as token 0."""
    from attnbook.sampling import generate

    cfg = ModelConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    model = build_model(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    for use_cache in (True, False):
        with pytest.raises(ValueError, match="next-token logits.*nan") as greedy_error:
            greedy_generate(model, [[1, 2]], 3, use_cache=use_cache)
        with pytest.raises(ValueError) as sampled_error:
            generate(model, [[1, 2]], 3, temperature=0.0, use_cache=use_cache)
        assert str(greedy_error.value) == str(sampled_error.value)
        assert not model._forward_hooks  # the check's hook is removed again


def test_check_generation_puts_a_list_prompt_on_the_models_device():
    from attnbook.checks import check_generation

    cfg = ModelConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8)
    model = build_model(cfg).to("meta")
    ids, n = check_generation(model, [[1, 2]], 2)
    assert ids.device.type == "meta" and ids.dtype == torch.int64 and n == 2
    with pytest.raises(ValueError, match="model's device meta"):
        check_generation(model, torch.tensor([[1, 2]]), 2)


# --- multi-head latent attention ----------------------------------------------------------------


def _mla(q_lora_rank=None, seed=0):
    torch.manual_seed(seed)
    return (
        layers.MultiHeadLatentAttention(
            16,
            4,
            kv_lora_rank=6,
            qk_nope_head_dim=4,
            qk_rope_head_dim=2,
            v_head_dim=3,
            q_lora_rank=q_lora_rank,
        )
        .double()
        .eval()
    )


@pytest.mark.parametrize("q_lora_rank", [None, 5])
def test_mla_cached_decoding_equals_full_pass(q_lora_rank):
    m = _mla(q_lora_rank)
    x = torch.randn(2, 6, 16, dtype=D64)
    full = m(x)
    for chunks in ([6], [3, 3], [1] * 6, [2, 1, 3]):
        cache, outs, s = LatentCache(), [], 0
        for n in chunks:
            outs.append(m(x[:, s : s + n], kv_cache=cache))
            s += n
        assert_close(torch.cat(outs, 1), full, atol=1e-12, rtol=0)
    # the cache holds (kv_lora_rank + qk_rope_head_dim) numbers per token, whatever H is
    assert cache.nbytes == 2 * 6 * (6 + 2) * 8
    assert m.cache_numbers_per_token() == 8
    # multi-head attention with the same heads would cache K (4 x (4 + 2)) and V (4 x 3)
    assert 4 * (4 + 2) + 4 * 3 == 36 > m.cache_numbers_per_token()


def test_mla_is_causal_and_matches_explicit_expansion():
    m = _mla()
    x = torch.randn(1, 5, 16, dtype=D64)
    y = x.clone()
    y[:, 3:] += 3.0
    assert_close(m(x)[:, :3], m(y)[:, :3], atol=1e-12, rtol=0)
    # explicit reference: per-head keys [k_nope ; k_pe] and values from the latent, NumPy
    # attention with the causal mask
    from attnbook.attention import scaled_dot_product_attention as np_sdpa
    from attnbook.positional import apply_rope

    with torch.no_grad():
        q = (x @ m.q_proj.weight.T).view(1, 5, 4, 6).transpose(1, 2).numpy()
        kv_a = (x @ m.kv_a_proj.weight.T).numpy()[0]
        c = kv_a[:, :6]
        c = c / np.sqrt((c**2).mean(-1, keepdims=True) + 1e-6) * m.kv_a_norm.weight.numpy()
        k_pe = apply_rope(kv_a[:, 6:], np.arange(5))  # (5, 2)
        kv = (c @ m.kv_b_proj.weight.numpy().T).reshape(5, 4, 7).transpose(1, 0, 2)
        k = np.concatenate([kv[..., :4], np.broadcast_to(k_pe, (4, 5, 2))], axis=-1)
        qq = np.concatenate([q[0, :, :, :4], apply_rope(q[0, :, :, 4:], np.arange(5))], -1)
        o = np_sdpa(qq, k, kv[..., 4:], causal=True)  # (4, 5, 3)
        exp = o.transpose(1, 0, 2).reshape(5, 12) @ m.o_proj.weight.numpy().T
    assert_close(m(x)[0], exp, atol=1e-12, rtol=0)


# --- argument checks (moved from test_robustness.py: A1, A16, LOW, B) ----------------------


BASE = dict(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16)


def test_a1_kv_cache_bytes_matches_built_cache():
    cfg = ModelConfig(**BASE, head_dim=6, positional="rope")
    model = DecoderOnlyModel(cfg).eval()
    caches = model.make_caches()
    model(torch.tensor([[1, 2, 3]]), kv_caches=caches)
    assert sum(c.nbytes for c in caches) == kv_cache_bytes(cfg, 3, dtype="float32")


def test_a16_latent_cache_checks_positions_and_batch():
    with pytest.raises(ValueError, match=r"positions of shape \(7,\) must end in .* 3"):
        LatentCache().update(torch.zeros(1, 3, 4), torch.zeros(1, 3, 2), torch.arange(7))
    cache = LatentCache()
    cache.update(torch.zeros(1, 3, 4), torch.zeros(1, 3, 2), torch.arange(3))
    with pytest.raises(ValueError, match="do not match the cache"):
        cache.update(torch.zeros(2, 1, 4), torch.zeros(2, 1, 2), torch.tensor([3]))
    with pytest.raises(ValueError, match="rewind"):
        cache.update(torch.zeros(1, 1, 4), torch.zeros(1, 1, 2), torch.tensor([1]))


def test_low_kv_cache_positions():
    cache = KVCache()
    with pytest.raises(TypeError, match="positions"):
        cache.update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4), torch.tensor([0.0, 1.0]))
    cache.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4), torch.arange(3))
    with pytest.raises(ValueError, match="rewind"):
        cache.update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), torch.tensor([0]))
    sw = SlidingWindowCache(2)
    sw.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4), torch.arange(3))
    with pytest.raises(ValueError, match="rewind"):
        sw.update(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4), torch.tensor([1]))


_KV = torch.zeros(2, 1, 3, 4)  # k and v (B, H_kv, L, D) = (2, 1, 3, 4)
_C_KV, _K_PE = torch.zeros(2, 3, 4), torch.zeros(2, 3, 2)  # MLA: (B, L, d_c), (B, L, D_rope)
_BAD_POSITIONS = {  # refused by every cache: (positions, error, message)
    "float": (torch.tensor([0.0, 1.0, 2.0]), TypeError, r"positions must be an integer tensor"),
    "negative": (torch.tensor([0, -1, 2]), ValueError, r"positions must be >= 0, got min -1"),
    "length": (torch.arange(4), ValueError, r"positions of shape \(4,\) must end in .* 3 "),
    "three axes": (torch.zeros(2, 1, 3, dtype=torch.long), ValueError, None),
    "decreasing": (
        torch.tensor([2, 1, 0]),
        ValueError,
        r"positions must strictly increase .*: positions\[1\] = 1 comes after positions\[0\] "
        r"= 2; got positions = \[2, 1, 0\]",
    ),
    "shuffled": (
        [2, 0, 1],
        ValueError,
        r"positions must strictly increase .*: positions\[1\] = 0 comes after positions\[0\] "
        r"= 2; got positions = \[2, 0, 1\]",
    ),
    "repeated": (
        np.array([0, 0, 1]),
        ValueError,
        r"positions must strictly increase .*: positions\[1\] = 0 comes after positions\[0\] "
        r"= 0",
    ),
}


def _updates():
    """Each cache's update with the k/v (or c_kv/k_pe) above, and the name of that tensor."""
    return {
        "KVCache": (lambda p: KVCache().update(_KV, _KV, p), r"k has shape \(2, 1, 3, 4\)"),
        "SlidingWindowCache": (
            lambda p: SlidingWindowCache(2).update(_KV, _KV, p),
            r"k has shape \(2, 1, 3, 4\)",
        ),
        "LatentCache": (
            lambda p: LatentCache().update(_C_KV, _K_PE, p),
            r"c_kv has shape \(2, 3, 4\)",
        ),
    }


@pytest.mark.parametrize("cache", ["KVCache", "SlidingWindowCache", "LatentCache"])
@pytest.mark.parametrize("bad", list(_BAD_POSITIONS))
def test_every_cache_refuses_bad_positions_with_the_positions_check(cache, bad):
    # the rule of attnbook.checks.check_positions, one message for one mistake in every cache
    update, x_shape = _updates()[cache]
    positions, error, match = _BAD_POSITIONS[bad]
    if bad == "length":
        match += r"\(" + x_shape
    if bad == "three axes":  # KVCache names (L,) or (B, L); the others (L,) only
        per_row = r"positions must be \(L,\) or \(B, L\); got shape \(2, 1, 3\) \("
        shared = r"positions must be \(L,\) = \(3,\), one position per token shared by the "
        shared += r"batch; got shape \(2, 1, 3\) \("
        match = (per_row if cache == "KVCache" else shared) + x_shape
    with pytest.raises(error, match=match):
        update(positions)


@pytest.mark.parametrize("cache", ["SlidingWindowCache", "LatentCache"])
def test_shared_position_caches_refuse_per_row_positions(cache):
    # a ring buffer (and MLA's cache) keeps one position per slot: (B, L) is refused, not read
    update, x_shape = _updates()[cache]
    per_row = torch.tensor([[0, 1, 2], [4, 5, 6]])
    match = r"positions must be \(L,\) = \(3,\), one position per token shared by the batch; "
    with pytest.raises(ValueError, match=match + r"got shape \(2, 3\) \(" + x_shape):
        update(per_row)


def test_kv_cache_refuses_per_row_positions_of_another_batch():
    with pytest.raises(
        ValueError, match=r"positions of shape \(3, 3\) do not match batch 2 of k \(shape "
    ):
        KVCache().update(_KV, _KV, torch.zeros(3, 3, dtype=torch.long))


def test_sliding_window_cache_keeps_every_token_of_an_ordered_call():
    # [2, 1, 0] used to pass and lose position 2; in order, the last `window` tokens stay
    sw = SlidingWindowCache(2)
    with pytest.raises(ValueError, match=r"positions must strictly increase"):
        sw.update(_KV, _KV, [2, 1, 0])
    assert sw.k is None and sw.seq_len == 0  # nothing stored by the refused call
    sw.update(_KV, _KV, [0, 1, 2])
    assert sorted(sw.slot_positions.tolist()) == [1, 2]


def test_kv_cache_per_row_positions_may_repeat_at_left_pads_but_not_decrease():
    kv = torch.zeros(2, 1, 4, 4)
    left_padded = torch.tensor([[0, 0, 0, 1], [0, 1, 2, 3]])  # positions_from_attention_mask
    cache = KVCache()
    assert cache.update(kv, kv, left_padded)[2] is left_padded
    match = r"positions must never decrease within a row .*: positions\[0, 2\] = 0 comes after "
    match += r"positions\[0, 1\] = 2; got positions\[0\] = \[1, 2, 0, 0\] \(k has shape "
    with pytest.raises(ValueError, match=match):  # right padding: the pads go back to 0
        KVCache().update(kv, kv, torch.tensor([[1, 2, 0, 0], [0, 1, 2, 3]]))


def test_caches_read_position_lists_as_the_checks_do():
    # [] for no tokens; a bool or an int beyond int64 in a list is named, as in arrays
    empty = torch.zeros(1, 1, 0, 4)
    assert KVCache().update(empty, empty, [])[2].dtype == torch.int64
    for update, _ in _updates().values():
        with pytest.raises(TypeError, match=r"positions must hold integers, got the bool True"):
            update([0, True, 2])
        with pytest.raises(ValueError, match=r"positions must be <= 9223372036854775807 \(int64\)"):
            update([0, 1, 2**70])


def test_caches_take_positions_as_before():
    # valid input is unchanged: lists and arrays become integer tensors, (B, L) per row in KVCache
    for positions in ([0, 1, 2], np.arange(3), torch.arange(3, dtype=torch.int32)):
        for update, _ in _updates().values():
            got = update(positions)[2]
            assert isinstance(got, torch.Tensor) and got.tolist() == [0, 1, 2]
    per_row = torch.tensor([[0, 1, 2], [4, 5, 6]])
    cache = KVCache()
    assert cache.update(_KV, _KV, per_row)[2] is per_row
    assert cache.update(_KV[:, :, :1], _KV[:, :, :1], [7])[2].tolist() == [
        [0, 1, 2, 7],
        [4, 5, 6, 7],
    ]


def test_b_greedy_generate_arguments():
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8)).eval()
    for bad in (2.5, True):
        with pytest.raises(TypeError, match="max_new_tokens"):
            greedy_generate(model, torch.tensor([[1]]), bad)
    out = greedy_generate(model, np.array([[1, 2]]), 2)
    assert torch.equal(out, greedy_generate(model, torch.tensor([[1, 2]]), 2))


# --- the decode-step core --------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["rope", "learned"])
def test_greedy_generate_core_equals_full_pass_argmax(positional):
    # reference: the argmax of the uncached model over the whole sequence, step by step
    torch.manual_seed(3)
    cfg = ModelConfig(
        vocab_size=11,
        d_model=16,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=32,
        max_seq_len=16,
        positional=positional,
        norm="rmsnorm",
        ffn="swiglu",
    )
    model = DecoderOnlyModel(cfg).double().eval()
    ids = torch.tensor([[1, 5, 2], [7, 0, 3]])
    expected = ids
    with torch.no_grad():
        for _ in range(5):
            nxt = model(expected)[:, -1].argmax(dim=-1, keepdim=True)
            expected = torch.cat((expected, nxt), dim=1)
    got = greedy_generate_core(model, ids, 5)
    assert got.shape == (2, 8) and torch.equal(got, expected)
    assert torch.equal(greedy_generate(model, ids, 5), expected)
    assert torch.equal(greedy_generate(model, ids, 5, use_cache=False), expected)


def test_greedy_generate_core_fills_max_seq_len_exactly():
    # T + max_new_tokens == max_seq_len: the last token is never fed, so no position overflows
    model = DecoderOnlyModel(
        ModelConfig(
            vocab_size=5,
            d_model=8,
            n_heads=2,
            n_layers=1,
            d_ff=8,
            max_seq_len=4,
            positional="learned",
        )
    ).eval()
    assert greedy_generate_core(model, torch.tensor([[1, 2]]), 2).shape == (1, 4)


def test_kv_cache_update_appends_and_check_update_refuses_mismatch():
    cache = KVCache()
    k1, v1 = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 5)
    k2, v2 = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 5)
    cache.update(k1, v1, torch.arange(3))
    k, v, pos = cache.update(k2, v2, torch.tensor([3]))
    assert torch.equal(k, torch.cat((k1, k2), 2)) and torch.equal(v, torch.cat((v1, v2), 2))
    assert pos.tolist() == [0, 1, 2, 3] and cache.seq_len == 4
    with pytest.raises(ValueError, match="does not match the cache"):
        cache.update(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 5), torch.tensor([4]))
    # per-row positions after shared ones: both become (B, S + L)
    cache = KVCache()
    cache.update(torch.zeros(2, 1, 2, 4), torch.zeros(2, 1, 2, 4), torch.arange(2))
    _, _, pos = cache.update(
        torch.zeros(2, 1, 1, 4), torch.zeros(2, 1, 1, 4), torch.tensor([[2], [5]])
    )
    assert pos.tolist() == [[0, 1, 2], [0, 1, 5]]
