"""Tests for attnbook.models.

References: parameter counts summed from the built modules (on the meta device) against the
closed form, hand sums and published totals; invariances (causality, padding, permutation)
that must hold for any weights.
"""

import itertools
import math

import numpy as np
import pytest
import torch

from attnbook import layers
from attnbook.models import (
    BASE_TRANSFORMER,
    DecoderOnlyModel,
    EncoderDecoderModel,
    EncoderOnlyModel,
    ModelConfig,
    build_model,
    count_parameters,
    param_count,
)
from attnbook.positional import sinusoidal_encoding
from attnbook.testing import assert_close

D64 = torch.float64


def _meta_count(config):
    with torch.device("meta"):
        return count_parameters(build_model(config))


def test_base_transformer_param_count():
    # By hand, d = 512, d_ff = 2048, vocab 37000 shared by encoder, decoder and output:
    #   attention 4 d^2 + 4 d = 1,050,624; FFN 2 d d_ff + d_ff + d = 2,099,712; LayerNorm 2 d
    #   encoder layer 1,050,624 + 2,099,712 + 2,048 = 3,152,384          (x 6 = 18,914,304)
    #   decoder layer 2 x 1,050,624 + 2,099,712 + 3,072 = 4,204,032      (x 6 = 25,224,192)
    #   embedding 37000 x 512 = 18,944,000                        total = 63,082,496
    expected = 63_082_496
    assert param_count(BASE_TRANSFORMER) == expected
    assert _meta_count(BASE_TRANSFORMER) == expected
    # the paper's table 3 says "65M" for base; the gap is the vocabulary size it does not state
    assert abs(expected - 65e6) / 65e6 < 0.05


_GRID = [
    dict(
        arch=a, ffn=f, norm=n, bias=b, positional=p, tie_embeddings=t, n_kv_heads=kv, norm_first=nf
    )
    for a, f, n, b, p, t, kv, nf in itertools.product(
        ["encoder", "decoder", "encoder-decoder"],
        ["relu", "swiglu"],
        ["layernorm", "rmsnorm"],
        [True, False],
        ["learned", "sinusoidal", "rope"],
        [True, False],
        [None, 1],
        [True, False],
    )
    if not (a == "encoder-decoder" and p == "rope")
]


@pytest.mark.parametrize("i", range(0, len(_GRID), 7))
def test_closed_form_param_count_matches_modules(i):
    kw = _GRID[i]
    cfg = ModelConfig(
        vocab_size=11,
        d_model=8,
        n_heads=2,
        n_layers=2,
        d_ff=12,
        n_encoder_layers=1,
        max_seq_len=16,
        **kw,
    )
    assert param_count(cfg) == _meta_count(cfg), kw


def test_qkv_bias_counted():
    cfg = ModelConfig(
        vocab_size=11,
        d_model=8,
        n_heads=4,
        n_kv_heads=2,
        n_layers=1,
        d_ff=12,
        bias=False,
        qkv_bias=True,
        positional="rope",
        norm="rmsnorm",
        ffn="swiglu",
        tie_embeddings=False,
    )
    # q bias 8 + k, v biases 2 x (2 heads x 2) = 16 more than with qkv_bias=False
    assert param_count(cfg) - param_count(cfg.replace(qkv_bias=False)) == 16
    assert param_count(cfg) == _meta_count(cfg)


def test_config_validation():
    with pytest.raises(ValueError, match="n_heads 3 must divide d_model 8"):
        ModelConfig(vocab_size=4, d_model=8, n_heads=3, n_layers=1, d_ff=4)
    with pytest.raises(ValueError, match="n_kv_heads 3 must divide n_heads 4"):
        ModelConfig(vocab_size=4, d_model=8, n_heads=4, n_kv_heads=3, n_layers=1, d_ff=4)
    with pytest.raises(ValueError, match="arch"):
        ModelConfig(vocab_size=4, d_model=8, n_heads=2, n_layers=1, d_ff=4, arch="rnn")
    with pytest.raises(ValueError, match="n_encoder_layers"):
        ModelConfig(vocab_size=4, d_model=8, n_heads=2, n_layers=1, d_ff=4, arch="encoder-decoder")
    with pytest.raises(ValueError, match="n_kv_heads must be >= 1"):
        ModelConfig(vocab_size=4, d_model=8, n_heads=2, n_kv_heads=0, n_layers=1, d_ff=4)
    with pytest.raises(ValueError, match="vocab_size"):
        ModelConfig(vocab_size=0, d_model=8, n_heads=2, n_layers=1, d_ff=4)


def _tiny(**kw):
    base = dict(vocab_size=13, d_model=8, n_heads=2, n_layers=2, d_ff=16, max_seq_len=32)
    base.update(kw)
    torch.manual_seed(0)
    return build_model(ModelConfig(**base)).double().eval()


def test_sinusoidal_embedding_scaled_by_sqrt_d_model():
    m = _tiny(arch="decoder", positional="sinusoidal")
    ids = torch.tensor([[3, 5, 7]])
    got = m.embed(ids, torch.arange(3))
    exp = m.embed.tokens.weight[ids].detach().numpy() * math.sqrt(8) + sinusoidal_encoding(3, 8)
    assert_close(got, exp, atol=1e-6, rtol=0)  # PE buffer is float32


@pytest.mark.parametrize("positional", ["rope", "learned", "sinusoidal"])
def test_decoder_only_is_causal(positional):
    m = _tiny(arch="decoder", positional=positional, norm="rmsnorm", ffn="swiglu", n_kv_heads=1)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    ids2 = ids.clone()
    ids2[0, 3:] = torch.tensor([9, 11])
    a, b = m(ids), m(ids2)
    assert a.shape == (1, 5, 13) and torch.isfinite(a).all()
    assert_close(a[:, :3], b[:, :3], atol=1e-12, rtol=0)
    assert (a[:, 3:] - b[:, 3:]).abs().max() > 1e-6


def test_decoder_only_left_padding_with_positions():
    from attnbook.masks import padding_mask, positions_from_attention_mask

    m = _tiny(arch="decoder", positional="rope")
    ref = m(torch.tensor([[4, 5, 6]]))
    am = np.array([[0, 0, 4, 5, 6][i] != 0 for i in range(5)])[None].astype(int)
    ids = torch.tensor([[0, 0, 4, 5, 6]])
    out = m(
        ids,
        positions=torch.from_numpy(positions_from_attention_mask(am)),
        mask=torch.from_numpy(padding_mask(am)),
    )
    assert_close(out[:, 2:], ref, atol=1e-12, rtol=0)


def test_encoder_only_permutation_equivariant_and_ignores_padding():
    m = _tiny(arch="encoder", positional="none")
    ids = torch.tensor([[1, 2, 3, 4]])
    perm = torch.tensor([2, 0, 3, 1])
    assert_close(m(ids[:, perm]), m(ids)[:, perm], atol=1e-12, rtol=0)
    am = torch.tensor([[1, 1, 1, 0]])
    a = m(ids, am)
    b = m(torch.tensor([[1, 2, 3, 9]]), am)
    assert_close(a[:, :3], b[:, :3], atol=1e-12, rtol=0)
    assert_close(a[:, :3], m(ids[:, :3]), atol=1e-12, rtol=0)


def test_encoder_decoder_padding_and_causality():
    cfg = dict(
        arch="encoder-decoder", n_encoder_layers=2, norm_first=False, positional="sinusoidal"
    )
    m = _tiny(**cfg)
    src = torch.tensor([[1, 2, 3, 0, 0]])
    am = torch.tensor([[1, 1, 1, 0, 0]])
    tgt = torch.tensor([[5, 6, 7]])
    a = m(src, tgt, src_attention_mask=am)
    assert a.shape == (1, 3, 13) and torch.isfinite(a).all()
    b = m(torch.tensor([[1, 2, 3, 8, 9]]), tgt, src_attention_mask=am)
    assert_close(a, b, atol=1e-12, rtol=0)  # padded source tokens are invisible
    assert_close(a, m(src[:, :3], tgt), atol=1e-12, rtol=0)
    c = m(src, torch.tensor([[5, 6, 12]]), src_attention_mask=am)
    assert_close(a[:, :2], c[:, :2], atol=1e-12, rtol=0)  # causal decoder
    # tied: encoder, decoder and output share one matrix (Vaswani et al. 2017, section 3.4)
    assert m.lm_head.weight is m.src_embed.tokens.weight is m.tgt_embed.tokens.weight


def test_model_classes_check_arch():
    cfg = ModelConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, arch="encoder")
    with pytest.raises(ValueError, match="arch='decoder'"):
        DecoderOnlyModel(cfg)
    with pytest.raises(ValueError, match="arch='encoder-decoder'"):
        EncoderDecoderModel(cfg)
    with pytest.raises(ValueError, match="arch='encoder'"):
        EncoderOnlyModel(cfg.replace(arch="decoder"))


# --- argument checks and head_dim (moved from test_robustness.py: A1, A5, A9, A10, B) -------


BASE = dict(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16)


@pytest.mark.parametrize(
    "arch,extra", [("decoder", {}), ("encoder", {}), ("encoder-decoder", {"n_encoder_layers": 1})]
)
def test_a1_head_dim_is_built_and_counted(arch, extra):
    cfg = ModelConfig(**BASE, head_dim=6, arch=arch, **extra)
    assert cfg.head_dim != cfg.d_model // cfg.n_heads
    model = build_model(cfg)
    attns = [m for m in model.modules() if isinstance(m, layers.MultiHeadAttention)]
    assert attns and all(m.head_dim == 6 for m in attns)
    assert count_parameters(model) == param_count(cfg)
    # hand count of one attention layer: q, o: 8*12 each (+12, +8 bias); k, v: 8*12 (+12)
    mha = attns[0]
    assert sum(p.numel() for p in mha.parameters()) == 4 * 8 * 12 + 3 * 12 + 8


def test_a1_odd_head_dim_with_rope_is_rejected():
    with pytest.raises(ValueError, match="head_dim must be even"):
        ModelConfig(**BASE, head_dim=3, positional="rope")


@pytest.mark.parametrize("positional_kind", ["sinusoidal", "learned", "rope"])
def test_a5_negative_positions_in_models(positional_kind):
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8, positional=positional_kind))
    with pytest.raises(ValueError, match="positions must be >= 0"):
        model(torch.tensor([[3]]), positions=torch.tensor([-1]))


@pytest.mark.parametrize("eps", [-1.0, math.nan, 0.0])
def test_a9_model_config_eps_checked(eps):
    with pytest.raises(ValueError, match="eps"):
        ModelConfig(**BASE, eps=eps)


@pytest.mark.parametrize(
    "field,value,exc",
    [
        ("sliding_window", -5, ValueError),
        ("sliding_window", 0, ValueError),
        ("sliding_window", 2.5, TypeError),
        ("kv_lora_rank", -3, ValueError),
        ("kv_lora_rank", 2.5, TypeError),
        ("n_encoder_layers", -1, ValueError),
        ("rope_theta", 0.0, ValueError),
        ("q_lora_rank", 0, ValueError),
        ("v_head_dim", 2.5, TypeError),
        ("d_model", 8.0, TypeError),
        ("n_heads", True, TypeError),
        ("eps", "1e-5", TypeError),
        ("norm", "batchnorm", ValueError),
    ],
)
def test_a10_model_config_checks_optional_sizes(field, value, exc):
    # the one check rule: the wrong kind (2.5, 8.0, True, a string) is a TypeError
    mla = {"qk_rope_head_dim": 2} if field in ("kv_lora_rank", "q_lora_rank", "v_head_dim") else {}
    with pytest.raises(exc, match=f"{field} must be"):
        ModelConfig(**{**BASE, field: value}, **mla)


def test_a10_model_config_accepts_numpy_integers():
    cfg = ModelConfig(**{**BASE, "d_model": np.int64(8)}, sliding_window=np.int32(4))
    assert type(cfg.d_model) is int and cfg.d_model == 8 and type(cfg.sliding_window) is int


def test_b_decoder_forward_arguments():
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8))
    with pytest.raises(ValueError, match=r"ids must be \(B, T\)"):
        model(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="one cache per layer"):
        model(torch.tensor([[1, 2]]), kv_caches=[])
    for bad in (torch.tensor([[11]]), torch.tensor([[-1]])):
        with pytest.raises(ValueError, match="vocab_size"):
            model(bad)
    with pytest.raises(TypeError, match="ids must be an integer tensor"):
        model(torch.tensor([[1.0]]))


def test_b_encoder_attention_mask():
    torch.manual_seed(0)
    model = EncoderOnlyModel(ModelConfig(**BASE, arch="encoder")).eval()
    ids = torch.tensor([[1, 2, 3]])
    ref = model(ids, torch.tensor([[1, 1, 0]]))
    assert_close(model(ids, np.array([[1, 1, 0]])), ref, atol=0, rtol=0)
    for bad in ([[1, 2, 0]], [[1, 0.5, 0]]):
        with pytest.raises(
            ValueError,
            match=r"attention_mask of shape \(1, 3\) must hold "
            r"only 0 and 1; found",
        ):
            model(ids, torch.tensor(bad))


@pytest.mark.parametrize(
    "hf,exc,match",
    [
        (None, TypeError, "hf must be a dict"),
        ({"hidden_size": None}, ValueError, "hidden_size"),
        ({"hidden_size": 4096.7}, ValueError, "hidden_size"),
        ({"hidden_act": "tanh"}, ValueError, "hidden_act"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, ValueError, "rope_scaling"),
    ],
)
def test_b_from_hf_config(hf, exc, match):
    base = {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 1,
        "intermediate_size": 128,
        "vocab_size": 10,
    }
    with pytest.raises(exc, match=match):
        ModelConfig.from_hf_config(None if hf is None else {**base, **hf})


def test_b_from_hf_config_nested_text_config():
    with pytest.raises(ValueError, match=r"pass hf\['text_config'\]"):
        ModelConfig.from_hf_config({"text_config": {"hidden_size": 64}})


# --- dropout and the embedding scale (issue 11) ---------------------------------------------


def _decoder(**kw):
    cfg = dict(
        vocab_size=13,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        positional="learned",
        max_seq_len=16,
    )
    cfg.update(kw)
    torch.manual_seed(0)
    return DecoderOnlyModel(ModelConfig(**cfg))


def test_dropout_acts_in_training_mode_only():
    plain = _decoder(dropout=0.0).eval()
    noisy = _decoder(dropout=0.3)
    noisy.load_state_dict(plain.state_dict())  # same weights
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    noisy.eval()
    assert_close(noisy(ids), plain(ids), atol=0, rtol=0)  # eval: dropout off, same function
    noisy.train()
    torch.manual_seed(1)
    a = noisy(ids)
    b = noisy(ids)
    assert not torch.equal(a, b)  # fresh masks each call
    assert not torch.equal(a, plain(ids))
    p = [m.p for m in noisy.modules() if isinstance(m, torch.nn.Dropout)]
    n_layers = 2  # embedding + (residual x2 + FFN) per layer
    assert p == [0.3] * (1 + 3 * n_layers)
    assert all(layer.self_attn.dropout == 0.3 for layer in noisy.layers)  # attention weights


def test_dropout_reaches_every_stack_of_an_encoder_decoder():
    model = build_model(
        BASE_TRANSFORMER.replace(
            vocab_size=10, d_model=16, n_heads=2, d_ff=32, n_layers=1, n_encoder_layers=1
        )
    )
    p = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    assert p == {0.1}  # Vaswani et al. section 5.4: P_drop = 0.1 for the base model


def test_embed_scale_multiplies_the_token_embedding_by_sqrt_d_model():
    ids = torch.tensor([[3, 1, 4]])
    pos = torch.arange(3)
    for positional, default in (("learned", False), ("sinusoidal", True), ("rope", False)):
        for flag in (None, True, False):
            model = _decoder(positional=positional, embed_scale=flag).eval()
            scaled = default if flag is None else flag
            assert model.config.scales_embeddings is scaled
            tokens = model.embed.tokens.weight.detach()[ids[0]]  # (3, 16)
            expected = tokens * (4.0 if scaled else 1.0)  # sqrt(16)
            if positional == "learned":
                expected = expected + model.embed.positions.weight.detach()[pos]
            elif positional == "sinusoidal":
                expected = expected + torch.from_numpy(sinusoidal_encoding(16, 16)).float()[pos]
            assert_close(model.embed(ids, pos)[0], expected, atol=1e-6, rtol=0)


def test_learned_positions_are_the_library_table_in_every_model():
    # one implementation of learned positions: attnbook.layers.LearnedPositionalEmbedding, under
    # the parameter names the checkpoints use (BERT's position_embeddings.weight)
    from attnbook.pretrained import BertEmbeddings

    kw = dict(
        vocab_size=13,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=16,
        max_seq_len=6,
        positional="learned",
    )
    tables = {
        "decoder": DecoderOnlyModel(ModelConfig(**kw)).embed.positions,
        "encoder": EncoderOnlyModel(ModelConfig(**kw, arch="encoder")).embed.positions,
        "bert": BertEmbeddings(
            ModelConfig(**kw, arch="encoder", norm_first=False), 2
        ).position_embeddings,
    }
    ed = EncoderDecoderModel(ModelConfig(**kw, arch="encoder-decoder", n_encoder_layers=1))
    tables.update(source=ed.src_embed.positions, target=ed.tgt_embed.positions)
    for name, table in tables.items():
        assert isinstance(table, layers.LearnedPositionalEmbedding), name
        assert table.weight.shape == (6, 8), name
    assert "embed.positions.weight" in DecoderOnlyModel(ModelConfig(**kw)).state_dict()


@pytest.mark.parametrize(
    "field, value, exc",
    [
        ("dropout", 1.0, ValueError),
        ("dropout", -0.1, ValueError),
        ("dropout", math.nan, ValueError),
        ("dropout", "0.1", TypeError),
        ("embed_scale", 1, TypeError),
        ("embed_scale", "yes", TypeError),
    ],
)
def test_dropout_and_embed_scale_are_validated(field, value, exc):
    with pytest.raises(exc, match=field):
        ModelConfig(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=8, **{field: value})


def test_dropout_does_not_change_the_parameter_count():
    cfg = BASE_TRANSFORMER.replace(dropout=0.0)
    assert param_count(cfg) == param_count(BASE_TRANSFORMER)
    assert BASE_TRANSFORMER.dropout == 0.1 and BASE_TRANSFORMER.scales_embeddings


@pytest.mark.parametrize(
    "field", ["norm_first", "bias", "tie_embeddings", "qkv_bias", "embed_scale"]
)
def test_model_config_flags_must_be_bools(field):
    # norm_first="False" is truthy: it would build a Pre-LN model from a Post-LN request.
    with pytest.raises(TypeError, match=f"{field} must be a bool"):
        ModelConfig(**{**BASE, field: "False"})


def test_encoder_decoder_names_the_arguments_the_caller_passed():
    cfg = ModelConfig(**{**BASE, "arch": "encoder-decoder", "n_encoder_layers": 1})
    ed = build_model(cfg)
    src, tgt = torch.randint(0, 10, (2, 4)), torch.randint(0, 10, (2, 3))
    with pytest.raises(ValueError, match=r"src and tgt must hold the same number of sequences"):
        ed(src[:1], tgt)
    with pytest.raises(ValueError, match=r"memory must be \(B=2, S, d_model=8\)"):
        ed.decode(tgt, torch.randn(2, 4, 7))


def test_mla_config_checks_its_latent_sizes_at_construction():
    mla = dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
    cfg = ModelConfig(**BASE, **mla, q_lora_rank=np.int64(6))
    assert cfg.uses_mla and type(cfg.q_lora_rank) is int
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even, got 3"):
        ModelConfig(**BASE, **{**mla, "qk_rope_head_dim": 3})
    with pytest.raises(ValueError, match=r"MLA config \(kv_lora_rank=8\) needs v_head_dim"):
        ModelConfig(**BASE, **{**mla, "v_head_dim": None})
    with pytest.raises(ValueError, match="needs qk_nope_head_dim, qk_rope_head_dim"):
        ModelConfig(**BASE, kv_lora_rank=8, v_head_dim=4)
    # kv_lora_rank is the switch: without it the other sizes are ignored (MLA off)
    assert not ModelConfig(**BASE, qk_rope_head_dim=3, v_head_dim=4).uses_mla
    with pytest.raises(TypeError, match="qk_nope_head_dim must be an integer"):
        ModelConfig(**BASE, **{**mla, "qk_nope_head_dim": 4.0})


def test_kv_caches_are_checked_by_one_rule_in_both_models():
    model = DecoderOnlyModel(ModelConfig(**BASE, max_seq_len=8))
    with pytest.raises(
        ValueError, match=r"kv_caches must hold one cache per layer: need \d+, got 0"
    ):
        model(torch.tensor([[1, 2]]), kv_caches=[])
    with pytest.raises(TypeError, match=r"kv_caches\[0\] must be None or a cache"):
        model(torch.tensor([[1, 2]]), kv_caches=["cache"] * len(model.layers))


@pytest.mark.parametrize("arch", ["decoder", "encoder", "encoder-decoder"])
def test_ids_on_another_device_than_the_model_get_a_named_error(arch):
    # They raised torch's raw index_select error from inside the embedding; the meta device
    # stands in for CUDA on a CPU-only machine.
    cfg = ModelConfig(**{**BASE, "arch": arch, "n_encoder_layers": 1})
    model = build_model(cfg).eval()
    meta_ids = torch.ones(1, 3, dtype=torch.long, device="meta")
    args = {"decoder": ("ids",), "encoder": ("ids",), "encoder-decoder": ("src", "tgt")}[arch]
    for i, name in enumerate(args):
        call = [torch.ones(1, 3, dtype=torch.long) for _ in args]
        call[i] = meta_ids
        with pytest.raises(
            ValueError, match=rf"{name} must be on the model's device cpu; got .* meta"
        ):
            model(*call)
    # lists and arrays are created on the model's device, as before on the CPU
    assert model(*([[1, 2, 3]] for _ in args)).shape[:2] == (1, 3)


def test_kv_caches_refuse_none_entries_and_caches_of_different_lengths():
    # Both were accepted: a None entry left that layer without a cache while the others
    # cached, and the positions of the new tokens were read from kv_caches[0] alone.
    model = DecoderOnlyModel(ModelConfig(**{**BASE, "n_layers": 2}, max_seq_len=8)).eval()
    ids = torch.tensor([[1, 2]])
    caches = model.make_caches()
    with pytest.raises(ValueError, match=r"kv_caches\[1\] is None: pass a cache for every"):
        model(ids, kv_caches=[caches[0], None])
    model(ids[:, :1], kv_caches=[caches[0], model.make_caches()[1]])  # caches[0] now holds 1
    with pytest.raises(
        ValueError, match=r"kv_caches\[1\] holds 0 tokens but kv_caches\[0\] holds 1"
    ):
        model(ids, kv_caches=caches)
