"""Tests for attnbook.sampling: next-token sampling, generation with and without the KV cache,
attention maps.

References: hand-computed softmax probabilities (frequencies of many draws within a loose
binomial bound), argmax for temperature 0 and top-k = 1, the library's independent greedy
decoder (attnbook.kv_cache.greedy_generate), and a NumPy recomputation of every layer's
attention weights from its own query/key projections.
"""

import math

import numpy as np
import pytest
import torch

from attnbook.kv_cache import greedy_generate
from attnbook.models import DecoderOnlyModel, ModelConfig
from attnbook.sampling import attention_maps, generate, sample_next
from attnbook.training import gpt2_init_


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def small_model(positional="rope", **kw):
    cfg = ModelConfig(
        vocab_size=11,
        d_model=32,
        n_heads=4,
        n_layers=2,
        d_ff=64,
        positional=positional,
        max_seq_len=64,
        **kw,
    )
    torch.manual_seed(0)
    model = DecoderOnlyModel(cfg)
    with torch.no_grad():  # logits spread enough that sampling is not near-uniform
        gpt2_init_(model, std=0.3)
    return model.eval()


# --- sample_next ----------------------------------------------------------------------------


def test_temperature_zero_and_top_k_one_are_greedy():
    logits = torch.randn(6, 9, generator=torch.Generator().manual_seed(0))
    greedy = logits.argmax(-1, keepdim=True)
    torch.testing.assert_close(sample_next(logits, temperature=0.0), greedy)
    for t in (0.5, 1.0, 3.0):
        torch.testing.assert_close(sample_next(logits, temperature=t, top_k=1, seed=1), greedy)


def _frequencies(logits_row, n, **kw):
    logits = torch.as_tensor(logits_row, dtype=torch.float32).expand(n, -1)
    draws = sample_next(logits, seed=0, **kw)[:, 0].numpy()
    return np.bincount(draws, minlength=len(logits_row)) / n


@pytest.mark.parametrize(
    "temperature, top_k, expected",
    [
        (1.0, None, [1 / 6, 2 / 6, 3 / 6]),  # softmax(log [1, 2, 3])
        (2.0, None, np.sqrt([1, 2, 3]) / np.sqrt([1, 2, 3]).sum()),  # p^(1/T), renormalised
        (0.5, None, np.array([1, 4, 9]) / 14),
        (1.0, 2, [0.0, 2 / 5, 3 / 5]),  # the smallest logit is dropped
    ],
)
def test_sampling_frequencies_match_hand_computed_probabilities(temperature, top_k, expected):
    n = 40_000
    freq = _frequencies(np.log([1.0, 2.0, 3.0]), n, temperature=temperature, top_k=top_k)
    expected = np.asarray(expected)
    sigma = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(freq - expected) <= 5 * sigma + 1e-12), (freq, expected)


def test_sample_next_is_reproducible_with_a_seed():
    logits = torch.zeros(50, 7)
    a = sample_next(logits, seed=3)
    torch.testing.assert_close(a, sample_next(logits, seed=3))
    gen = torch.Generator().manual_seed(3)
    torch.testing.assert_close(a, sample_next(logits, generator=gen))


def test_sample_next_rejects_bad_arguments():
    logits = torch.zeros(2, 5)
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=-0.1)
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=math.nan)
    with pytest.raises(ValueError, match="top_k"):
        sample_next(logits, top_k=6)
    with pytest.raises(ValueError, match="top_k"):
        sample_next(logits, top_k=0)
    with pytest.raises(TypeError, match="top_k"):
        sample_next(logits, top_k=2.0)
    with pytest.raises(ValueError, match="logits"):
        sample_next(torch.zeros(5))
    with pytest.raises(TypeError, match="logits"):
        sample_next(torch.zeros(2, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match="seed or generator"):
        sample_next(logits, seed=0, generator=torch.Generator())


# --- generate -------------------------------------------------------------------------------


@pytest.mark.parametrize("positional, window", [("rope", None), ("rope", 6), ("learned", None)])
@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.8, 3)])
def test_generate_with_cache_equals_without(positional, window, temperature, top_k):
    model = small_model(positional, sliding_window=window)
    prompt = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    kw = dict(temperature=temperature, top_k=top_k, seed=7)
    cached = generate(model, prompt, 20, use_cache=True, **kw)
    full = generate(model, prompt, 20, use_cache=False, **kw)
    assert cached.shape == (2, 24)
    torch.testing.assert_close(cached[:, :4], prompt)
    torch.testing.assert_close(cached, full)


def test_greedy_generate_matches_the_kv_cache_greedy_decoder():
    model = small_model()
    prompt = torch.tensor([[3, 1, 4, 1, 5]])
    ours = generate(model, prompt, 15, temperature=0.0)
    torch.testing.assert_close(ours, greedy_generate(model, prompt, 15, use_cache=False))


def test_sampled_generations_differ_between_seeds_and_agree_within_one():
    model = small_model()
    prompt = torch.tensor([[1, 2]])
    a = generate(model, prompt, 30, temperature=1.0, seed=0)
    assert not torch.equal(a, generate(model, prompt, 30, temperature=1.0, seed=1))
    torch.testing.assert_close(a, generate(model, prompt, 30, temperature=1.0, seed=0))


def test_generate_uses_eval_mode_and_restores_it():
    model = small_model(dropout=0.5).train()
    prompt = torch.tensor([[1, 2, 3]])
    a = generate(model, prompt, 10, temperature=0.0, use_cache=True)
    b = generate(model, prompt, 10, temperature=0.0, use_cache=False)
    torch.testing.assert_close(a, b)  # no dropout noise
    assert model.training


def test_generate_rejects_bad_arguments():
    model = small_model("learned")
    prompt = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="max_seq_len"):
        generate(model, prompt, 62)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, prompt, 2, top_k=12)
    with pytest.raises(ValueError, match="vocab_size"):
        generate(model, [[1, 11]], 2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)
    with pytest.raises(TypeError, match="use_cache"):
        generate(model, prompt, 2, use_cache=1)
    with pytest.raises(TypeError, match="model"):
        generate(torch.nn.Linear(2, 2), prompt, 2)
    torch.testing.assert_close(generate(model, prompt, 0), prompt)


# --- attention maps -------------------------------------------------------------------------


def _numpy_attention(model, ids):
    """Each layer's weights from its own q/k projections, in float64 NumPy (learned positions)."""
    inputs = []
    hooks = [
        layer.norm1.register_forward_hook(lambda m, a, out: inputs.append(out))
        for layer in model.layers
    ]
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    maps = []
    for layer, h in zip(model.layers, inputs, strict=True):
        att = layer.self_attn
        x = h[0].double().numpy()  # (T, d_model)

        def np64(t):
            return t.detach().double().numpy()

        q = x @ np64(att.q_proj.weight).T + np64(att.q_proj.bias)  # (T, H*D)
        k = x @ np64(att.k_proj.weight).T + np64(att.k_proj.bias)
        T, H, D = x.shape[0], att.n_heads, att.head_dim
        q = q.reshape(T, H, D).transpose(1, 0, 2)  # (H, T, D)
        k = k.reshape(T, H, D).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D)  # (H, T, T)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        maps.append(w / w.sum(-1, keepdims=True))
    return np.stack(maps)


def test_attention_maps_match_a_numpy_recomputation():
    model = small_model("learned")
    ids = torch.tensor([[1, 5, 2, 9, 3, 3, 0, 7]])
    maps = attention_maps(model, ids)
    assert maps.shape == (2, 4, 8, 8) and maps.dtype == np.float64
    assert np.isfinite(maps).all()
    np.testing.assert_allclose(maps, _numpy_attention(model, ids), atol=1e-5)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(maps, k=1) == 0)  # causal: nothing above the diagonal
    np.testing.assert_allclose(attention_maps(model, ids[0]), maps)  # (T,) works too


def test_attention_maps_respect_the_sliding_window_and_restore_the_mode():
    model = small_model("rope", sliding_window=3, dropout=0.2).train()
    maps = attention_maps(model, torch.arange(8)[None])
    assert np.all(np.tril(maps, k=-3) == 0)  # keys more than 2 back are hidden
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    assert model.training
    with pytest.raises(ValueError, match="one sequence"):
        attention_maps(model, torch.zeros(2, 4, dtype=torch.int64))


# --- hostile review: bad logits, tiny temperatures, seeds, ids, models ----------------------


@pytest.mark.parametrize("temperature", [1e-40, 1e-300, 5e-324])
def test_tiny_temperatures_draw_the_argmax(temperature):
    # As T -> 0 the softmax of logits / T tends to the one-hot of the argmax; below ~1e-38
    # a float32 division would give 0 / 0 and multinomial would fail.
    logits = torch.tensor([[0.3, 2.0, -1.0, 1.9], [5.0, -5.0, 4.0, 0.0]])
    for seed in range(5):
        out = sample_next(logits, temperature=temperature, seed=seed)
        assert out.tolist() == [[1], [0]]


def test_tiny_temperature_keeps_tied_maxima_and_only_those():
    draws = {
        int(sample_next(torch.tensor([[1.0, 1.0, 0.0]]), temperature=1e-300, seed=s))
        for s in range(40)
    }
    assert draws == {0, 1}  # a uniform draw among the tied maxima


def test_logits_beyond_float32_and_banned_tokens():
    # exp(1 - 1e40) is 0: the first token surely; a float32 cast would give inf - inf = nan
    big = torch.tensor([[1e40, 1.0]], dtype=torch.float64)
    assert sample_next(big, seed=0).tolist() == [[0]]
    assert sample_next(big, temperature=0.0).tolist() == [[0]]
    # -inf bans a token: p = (1/2, 0, 1/2)
    banned = torch.tensor([[0.0, -math.inf, 0.0]]).expand(200, 3)
    out = sample_next(banned, seed=0)
    assert set(out.flatten().tolist()) == {0, 2}


@pytest.mark.parametrize(
    "row", [[0.0, math.nan, 1.0], [math.nan, 0.0, 1.0], [0.0, math.inf, 1.0], [-math.inf] * 3]
)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sample_next_refuses_nan_inf_and_dead_rows(row, temperature):
    logits = torch.tensor([[0.0, 1.0, 2.0], row])
    with pytest.raises(ValueError, match=r"logits of shape \(2, 3\)"):
        sample_next(logits, temperature=temperature, seed=0)


def test_sample_next_refuses_an_empty_vocabulary_and_huge_seeds():
    with pytest.raises(ValueError, match=r"logits must be \(B, V\) with V >= 1"):
        sample_next(torch.zeros(1, 0), seed=0)
    with pytest.raises(ValueError, match="seed must be <="):
        sample_next(torch.zeros(1, 3), seed=2**64)
    assert sample_next(torch.zeros(1, 3), seed=2**64 - 1).shape == (1, 1)
    with pytest.raises(ValueError, match="seed"):
        generate(small_model(), [[1, 2]], 2, seed=2**64)


def test_generate_refuses_an_encoder_decoder_model():
    from attnbook.models import EncoderDecoderModel

    cfg = ModelConfig(
        vocab_size=11,
        d_model=16,
        n_heads=2,
        n_layers=1,
        n_encoder_layers=1,
        max_seq_len=8,
        d_ff=32,
        arch="encoder-decoder",
    )
    with pytest.raises(TypeError, match="model must be a decoder-only model.*EncoderDecoderModel"):
        generate(EncoderDecoderModel(cfg), [[1, 2]], 2, seed=0)


def test_generate_returns_new_int64_ids_for_any_integer_dtype():
    model = small_model()
    ref = generate(model, torch.tensor([[1, 2, 3]]), 4, seed=5)
    for dtype in (torch.uint8, torch.int16, torch.int32):
        prompt = torch.tensor([[1, 2, 3]], dtype=dtype)
        out = generate(model, prompt, 4, seed=5)
        assert out.dtype == torch.int64
        torch.testing.assert_close(out, ref)
        same = generate(model, prompt, 0)
        assert same is not prompt and same.dtype == torch.int64
        assert same.tolist() == [[1, 2, 3]]
    prompt = torch.tensor([[1, 2, 3]])
    same = generate(model, prompt, 0)
    same[0, 0] = 9  # the caller's prompt is not aliased
    assert prompt.tolist() == [[1, 2, 3]]


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generate_names_a_model_with_nan_logits(use_cache, temperature):
    model = small_model().train()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    with pytest.raises(ValueError, match="the model's next-token logits of shape"):
        generate(model, [[1, 2]], 3, temperature=temperature, use_cache=use_cache, seed=0)
    assert model.training  # mode restored
    assert not model._forward_hooks  # the check's hook is removed


def _boom(*args, **kwargs):
    raise RuntimeError("boom")


def test_attention_maps_restores_the_mode_after_an_exception():
    model = small_model().train()
    model.layers[1].register_forward_pre_hook(_boom)
    with pytest.raises(RuntimeError, match="boom"):
        attention_maps(model, [1, 2, 3])
    assert model.training


def test_attention_maps_rejects_empty_strings_long_and_nan():
    model = small_model("learned")
    with pytest.raises(ValueError, match="T >= 1"):
        attention_maps(model, np.zeros((1, 0), int))
    with pytest.raises(TypeError, match="ids must be an integer tensor"):
        attention_maps(model, "abc")
    with pytest.raises(ValueError, match=r"ids of shape \(1, 65\).*max_seq_len 64"):
        attention_maps(model, np.zeros(65, int))
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    with pytest.raises(ValueError, match="attention weights .* contain nan"):
        attention_maps(model, [1, 2])


def test_generate_and_attention_maps_take_uint64_ids():
    model = small_model()
    ref = generate(model, torch.tensor([[1, 2, 3]]), 4, seed=5)
    torch.testing.assert_close(generate(model, np.array([[1, 2, 3]], np.uint64), 4, seed=5), ref)
    np.testing.assert_array_equal(
        attention_maps(model, np.array([1, 2, 3], np.uint32)), attention_maps(model, [1, 2, 3])
    )
    with pytest.raises(ValueError, match="ids must be <= 9223372036854775807"):
        generate(model, np.array([[2**63]], np.uint64), 2, seed=0)
