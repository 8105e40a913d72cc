"""Tests for attnbook.blocks.

References: torch.nn.TransformerEncoderLayer and torch.nn.TransformerDecoderLayer with copied
weights (both norm_first values, ReLU and GELU), float64 NumPy formulas for the feed-forward
networks, and hand-derived residual identities.
"""

import math

import numpy as np
import pytest
import torch

from attnbook import layers
from attnbook.blocks import EncoderDecoderBlock, FeedForward, SwiGLU, TransformerBlock
from attnbook.masks import causal_mask, padding_mask
from attnbook.norms import layer_norm
from attnbook.testing import assert_close

D64 = torch.float64


def _copy_mha(ours, ref):
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.o_proj.weight)
        ref.out_proj.bias.copy_(ours.o_proj.bias)


def _copy_common(ours, ref):
    with torch.no_grad():
        ref.linear1.load_state_dict(ours.ffn.linear1.state_dict())
        ref.linear2.load_state_dict(ours.ffn.linear2.state_dict())
        for i in (1, 2, 3):
            if hasattr(ref, f"norm{i}"):
                getattr(ref, f"norm{i}").load_state_dict(getattr(ours, f"norm{i}").state_dict())


def _randomize(module):
    """Random biases and norm gains, so that a wrongly copied parameter shows."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return module


# --- feed-forward networks -------------------------------------------------------------------


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_matches_formula(activation):
    torch.manual_seed(0)
    ffn = FeedForward(6, 10, activation).double()
    x = torch.randn(2, 3, 6, dtype=D64)
    w1, b1 = ffn.linear1.weight.detach().numpy(), ffn.linear1.bias.detach().numpy()
    w2, b2 = ffn.linear2.weight.detach().numpy(), ffn.linear2.bias.detach().numpy()
    h = x.numpy() @ w1.T + b1
    if activation == "relu":
        h = np.maximum(h, 0.0)
    else:
        h = 0.5 * h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0)))
    assert_close(ffn(x), h @ w2.T + b2, atol=1e-12, rtol=0)


def test_swiglu_matches_formula():
    torch.manual_seed(1)
    ffn = SwiGLU(6, 16).double()
    x = torch.randn(2, 3, 6, dtype=D64)
    g = x.numpy() @ ffn.gate_proj.weight.detach().numpy().T
    u = x.numpy() @ ffn.up_proj.weight.detach().numpy().T
    h = g / (1.0 + np.exp(-g)) * u  # SiLU(g) = g * sigmoid(g)
    assert_close(ffn(x), h @ ffn.down_proj.weight.detach().numpy().T, atol=1e-12, rtol=0)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 6 * 16


def test_bad_ffn_arguments():
    with pytest.raises(ValueError, match="activation"):
        FeedForward(4, 8, "tanh")
    with pytest.raises(ValueError, match="norm"):
        TransformerBlock(8, 2, 16, norm="batchnorm")


# --- against torch's layers -------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_block_matches_torch_encoder_layer(norm_first, activation):
    torch.manual_seed(2)
    ours = TransformerBlock(8, 2, 16, ffn=activation, norm_first=norm_first).double().eval()
    _randomize(ours)
    ref = torch.nn.TransformerEncoderLayer(
        8,
        2,
        16,
        dropout=0.0,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        dtype=D64,
    ).eval()
    _copy_mha(ours.self_attn, ref.self_attn)
    _copy_common(ours, ref)
    x = torch.randn(2, 5, 8, dtype=D64)
    pad = padding_mask(np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))  # (B, 1, 1, S)
    keep = torch.from_numpy(causal_mask(5) & pad)
    out = ours(x, mask=torch.from_numpy(pad), causal=True)
    exp = ref(
        x,
        src_mask=layers.keep_mask_to_mha_mask(torch.from_numpy(causal_mask(5))),
        src_key_padding_mask=layers.keep_mask_to_mha_mask(torch.from_numpy(pad[:, 0, 0])),
    )
    assert torch.isfinite(out).all()
    assert_close(out, exp, atol=1e-12, rtol=1e-12)
    # the same result with the combined keep-mask passed as one mask
    assert_close(ours(x, mask=keep), exp, atol=1e-12, rtol=1e-12)
    # and without masks
    assert_close(ours(x), ref(x), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_decoder_block_matches_torch_decoder_layer(norm_first):
    torch.manual_seed(3)
    ours = EncoderDecoderBlock(8, 2, 16, norm_first=norm_first).double().eval()
    _randomize(ours)
    ref = torch.nn.TransformerDecoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=D64
    ).eval()
    _copy_mha(ours.self_attn, ref.self_attn)
    _copy_mha(ours.cross_attn, ref.multihead_attn)
    _copy_common(ours, ref)
    tgt, memory = torch.randn(2, 4, 8, dtype=D64), torch.randn(2, 6, 8, dtype=D64)
    src_keep = padding_mask(np.array([[1] * 6, [1, 1, 1, 1, 0, 0]]))  # (B, 1, 1, S)
    out = ours(tgt, memory, memory_mask=torch.from_numpy(src_keep))
    exp = ref(
        tgt,
        memory,
        tgt_mask=layers.keep_mask_to_mha_mask(torch.from_numpy(causal_mask(4))),
        memory_key_padding_mask=layers.keep_mask_to_mha_mask(torch.from_numpy(src_keep[:, 0, 0])),
    )
    assert torch.isfinite(out).all()
    assert_close(out, exp, atol=1e-12, rtol=1e-12)


# --- residual connections, by hand -------------------------------------------------------------


def test_residuals_with_zero_sublayers():
    torch.manual_seed(4)
    x = torch.randn(1, 3, 8, dtype=D64) * 3 + 1
    for norm_first in (False, True):
        blk = TransformerBlock(8, 2, 16, norm_first=norm_first).double().eval()
        with torch.no_grad():
            blk.self_attn.o_proj.weight.zero_()
            blk.self_attn.o_proj.bias.zero_()
            blk.ffn.linear2.weight.zero_()
            blk.ffn.linear2.bias.zero_()
        out = blk(x, causal=True)
        if norm_first:  # x + 0 + 0: Pre-LN keeps an identity path
            assert_close(out, x, atol=0, rtol=0)
        else:  # LayerNorm(LayerNorm(x + 0) + 0) with unit gains
            exp = layer_norm(layer_norm(x.numpy(), eps=1e-5), eps=1e-5)
            assert_close(out, exp, atol=1e-12, rtol=0)


def test_llama_style_block_is_causal_and_finite():
    torch.manual_seed(5)
    blk = (
        TransformerBlock(
            8,
            4,
            12,
            n_kv_heads=2,
            ffn="swiglu",
            norm="rmsnorm",
            eps=1e-6,
            norm_first=True,
            bias=False,
            rope=layers.RotaryEmbedding(),
        )
        .double()
        .eval()
    )
    x = torch.randn(1, 5, 8, dtype=D64)
    y = x.clone()
    y[:, 3:] += 5.0
    a, b = blk(x, causal=True), blk(y, causal=True)
    assert torch.isfinite(a).all()
    assert_close(a[:, :3], b[:, :3], atol=1e-12, rtol=0)
    assert (a[:, 3:] - b[:, 3:]).abs().max() > 1e-3
