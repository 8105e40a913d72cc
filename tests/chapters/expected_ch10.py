"""Expected glued values of chapter 10 (chapters/10-architectures.md).

``expected()`` returns, for every name the chapter glues, the value recomputed here with the
library on the chapter's inputs, and checks on the way what a hand derivation says:

* the three small models are rebuilt from the same config and seeds, and each one-token change
  is run here without the explorer's ``output_change``; causality is checked by hand (positions
  before a changed token must not move, exactly: hidden keys get weight 0);
* the base model's parameter count is summed here by formula from the paper's sizes, and must
  equal both ``param_count`` and the built modules (``count_parameters`` on the ``meta`` device);
* the real batch is tokenized again with the packaged MiniLM tokenizer, and the targets are
  counted again from the documented seeded draw (``numpy.random.default_rng(0)``), with the
  counts checked against their definitions (every real token but the last; chosen tokens only
  among the non-special ones).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from attnbook import masks, pretrained
from attnbook.models import (
    BASE_TRANSFORMER,
    ModelConfig,
    build_model,
    count_parameters,
    param_count,
)

NUMBER = 10
NAME = "10-architectures"

SENTENCES = [
    pretrained.TIRED,
    pretrained.WIDE,
    "The dominant sequence transduction models are based on complex recurrent or "
    "convolutional neural networks that include an encoder and a decoder.",
    "The best performing models also connect the encoder and decoder through an attention "
    "mechanism.",
    "We propose a new simple network architecture, the Transformer, based solely on attention "
    "mechanisms, dispensing with recurrence and convolutions entirely.",
    "Experiments on two machine translation tasks show these models to be superior in quality "
    "while being more parallelizable and requiring significantly less time to train.",
    "We show that the Transformer generalizes well to other tasks by applying it successfully "
    "to English constituency parsing both with large and limited training data.",
]


def _small_models() -> dict:
    small = ModelConfig(
        vocab_size=50,
        d_model=32,
        n_heads=4,
        n_layers=2,
        n_encoder_layers=2,
        d_ff=128,
        max_seq_len=16,
        positional="learned",
    )
    models = {}
    for arch in ("encoder", "decoder", "encoder-decoder"):
        torch.manual_seed(0)
        models[arch] = build_model(small.replace(arch=arch)).double().eval()
    enc, dec, ed = models["encoder"], models["decoder"], models["encoder-decoder"]
    d = 32
    # A cross-attention sublayer (4 projections with biases) and a third LayerNorm, by hand.
    assert (
        count_parameters(ed.decoder[0]) - count_parameters(enc.layers[0])
        == 4 * d * d + 4 * d + 2 * d
    )
    ids = torch.randint(0, 50, (1, 8), generator=torch.Generator().manual_seed(1))
    src = torch.randint(0, 50, (1, 8), generator=torch.Generator().manual_seed(2))

    def changed(x, p):
        x = x.clone()
        x[0, p] = (x[0, p] + 1) % 50
        return x

    def moved(a, b):  # which positions' outputs differ at all (no norm needed: any != 0)
        return ((a - b) != 0).any(-1)[0].numpy()

    with torch.no_grad():
        c_enc = moved(enc(changed(ids, 5)), enc(ids))
        c_dec = moved(dec(changed(ids, 5)), dec(ids))
        c_tgt = moved(ed(src, changed(ids, 5)), ed(src, ids))
        c_src = [moved(ed(changed(src, p), ids), ed(src, ids)) for p in range(8)]
        dec_rule = [
            np.array_equal(moved(dec(changed(ids, p)), dec(ids)), np.arange(8) >= p)
            for p in range(8)
        ]
        longer = torch.cat([ids, torch.tensor([[7]])], dim=1)
        enc_shift = (enc(longer)[:, :8] - enc(ids)).abs().max().item()
        dec_shift = (dec(longer)[:, :8] - dec(ids)).abs().max().item()
        enc_shape = tuple(enc(ids).shape)
    # Hand derivation: causal positions 0..4 cannot see position 5, nor any position the 9th token.
    # Bidirectional attention and cross-attention reach every position (random weights: no
    # exact cancellation).
    assert not c_dec[:5].any() and not c_tgt[:5].any() and dec_shift == 0.0
    assert c_enc.all() and all(c.all() for c in c_src) and enc_shift > 0
    assert all(dec_rule)
    return {
        "cross_layer_extra": 4 * d * d + 4 * d + 2 * d,
        "inf_L": 8,
        "inf_p": 5,
        "enc_moved": 8,
        "dec_moved": 8 - 5,
        "dec_before_max": 0.0,
        "ed_tgt_moved": 8 - 5,
        "ed_src_moved_min": 8,
        "dec_rule_n": 8,
        "append_enc": enc_shift,
        "append_dec": 0.0,
        "mis_enc_out_shape": enc_shape,
    }


def _base_model() -> dict:
    d, dff, vocab = 512, 2048, 37000  # Vaswani et al. (2017), table 3 and section 5.1
    attn = 4 * d * d + 4 * d
    ffn = 2 * d * dff + dff + d
    ln = 2 * d
    enc_layer, dec_layer = attn + ffn + 2 * ln, 2 * attn + ffn + 3 * ln
    emb = vocab * d  # shared by both stacks and the output projection (section 3.4)
    total = emb + 6 * enc_layer + 6 * dec_layer
    with torch.device("meta"):
        built = count_parameters(build_model(BASE_TRANSFORMER))
    assert param_count(BASE_TRANSFORMER) == built == total
    return {
        "base_formula": total,
        "base_built": total,
        "base_millions": total / 1e6,
        "base_emb_share": emb / total,
        "base_enc": 6 * enc_layer,
        "base_dec": 6 * dec_layer,
        "base_gap_share": (65e6 - total) / 65e6,
        "base_gap_rows": int(round((65e6 - total) / d)),
        "ex2_cross": attn + ln,
        "ex2_cross_share": 6 * (attn + ln) / (6 * dec_layer),
    }


def _density() -> dict:
    encoder = pretrained.load_minilm()
    ids, real, _ = encoder.tokenize(SENTENCES)
    ids, real = ids.numpy(), real.numpy().astype(bool)
    tok = encoder.tokenizer
    special = np.isin(ids, [tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")])
    lengths = real.sum(1)
    assert (special.sum(1) == 2).all()  # one [CLS] and one [SEP] per sentence
    rng = np.random.default_rng(0)
    chosen = real & ~special & (rng.random(ids.shape) < 0.15)
    how = rng.random(ids.shape)
    n_causal = int((lengths - 1).sum())  # every real token but each sentence's last
    n_real = int(real.sum())
    n_candidates = int(n_real - 2 * len(SENTENCES))
    # The padding keep-mask of an MLM encoder keeps every real key (chapter 6's mask); the
    # chapter asserts this instead of gluing it.
    assert bool(masks.padding_mask(real.astype(int))[:, 0, 0][real].all())
    return {
        "dens_batch": 7,
        "dens_T": int(lengths.max()),
        "dens_real": n_real,
        "dens_pad": int(ids.size - n_real),
        "dens_causal": n_causal,
        "dens_causal_frac": n_causal / n_real,
        "dens_candidates": n_candidates,
        "dens_expected_mlm": 0.15 * n_candidates,
        "dens_mlm": int(chosen.sum()),
        "dens_mlm_frac": int(chosen.sum()) / n_real,
        "dens_ratio": n_causal / int(chosen.sum()),
        "dens_n_mask_token": int((chosen & (how < 0.8)).sum()),
        "dens_n_swap": int((chosen & (how >= 0.8) & (how < 0.9)).sum()),
        "dens_n_same": int((chosen & (how >= 0.9)).sum()),
    }


@functools.lru_cache(maxsize=None)
def expected() -> dict:
    """Every glued name of chapter 10 -> its expected value (see the module docstring)."""
    e = {**_small_models(), **_base_model(), **_density()}
    # Exercise 1: lengths 10, 6, 20 by hand: 9 + 5 + 19 targets; 0.15 * (8 + 4 + 18) expected.
    e |= {"ex1_causal": 33, "ex1_mlm": 0.15 * 30}
    return e
