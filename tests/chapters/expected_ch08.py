"""Expected glued values of chapter 8 (chapters/08-positional-encoding.md).

``expected()`` returns, for every name the chapter glues, the value recomputed here with the
library on the chapter's inputs (the same seeded generator, drawn in the same order), and asserts
what an independent derivation says:

* Permutation equivariance, the offset map of the sinusoidal encoding, RoPE's relative scores,
  norm preservation and the two pairings related by a permutation are all exact identities, so
  the chapter's differences are returned as :class:`Tiny` bounds (rounding level) — or exactly
  0.0 where no arithmetic is involved (a permutation of coordinates).
* Non-zero values (how much positions change the output, how different the two pairings are)
  are recomputed from the same seeds and checked against float64 formulas written here: the
  sinusoidal table against ``sin/cos(pos * 10000^(-2i/d))``, the RoPE rotation against the
  2 x 2 rotation matrices, wavelengths against ``2 pi base^(2i/D)``.
* Learned positions: the MiniLM table's size against its ``config.json``, the cosine of its rows
  written out row by row; the sinusoidal table's cosine at distance ``k`` from exercise 2's
  identity, ``PE_p . PE_(p+k) / |PE|^2 = (2/d) sum_r cos(k w_r)`` (the same for every ``p``).
* The training run of "Beyond the trained length" (seeded, one thread: deterministic, about
  10 s of CPU) recomputed, the chapter's summaries (means over positions, the last position
  RoPE still solves) derived here from its per-position arrays, and the prose's claims asserted.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
from matchers import Near, Tiny

from attnbook import experiments, heads, kv_cache, positional, pretrained

NUMBER = 8
NAME = "08-positional-encoding"


def _sinusoid(n_pos: int, d: int) -> np.ndarray:
    """The paper's formula, written out: PE[pos, 2i] = sin, PE[pos, 2i + 1] = cos."""
    pe = np.zeros((n_pos, d))
    for pos in range(n_pos):
        for i in range(d // 2):
            w = 10000.0 ** (-2 * i / d)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(pos * w), math.cos(pos * w)
    return pe


def _rope_half(x: np.ndarray, m: int, base: float = 10000.0) -> np.ndarray:
    """RoPE of one vector at position m, half-split pairs (i, i + D/2), by 2 x 2 rotations."""
    D = x.shape[-1]
    out = np.empty(D)
    for i in range(D // 2):
        t = m * base ** (-2 * i / D)
        a, b = x[i], x[i + D // 2]
        out[i] = a * math.cos(t) - b * math.sin(t)
        out[i + D // 2] = a * math.sin(t) + b * math.cos(t)
    return out


@functools.lru_cache(maxsize=None)
def expected() -> dict:
    e: dict = {}
    rng = np.random.default_rng(0)
    d_model = 8
    emb = {w: rng.standard_normal(d_model) for w in ("dog", "bites", "man")}
    w = [rng.standard_normal((d_model, d_model)) / np.sqrt(d_model) for _ in range(4)]

    def enc(words, pe=None):
        x = np.stack([emb[t] for t in words])
        if pe is not None:
            x = x + pe[: len(words)]
        return heads.multi_head_attention(x, *w, n_heads=2)

    a, b = enc(["dog", "bites", "man"]), enc(["man", "bites", "dog"])
    for diff in (a[0] - b[2], a[1] - b[1], a.mean(0) - b.mean(0)):
        assert np.abs(diff).max() <= 1e-12
    e |= {
        "perm_dog_diff": Tiny(1e-12),
        "perm_bites_diff": Tiny(1e-12),
        "perm_mean_diff": Tiny(1e-12),
        "perm_equiv_diff": Tiny(1e-12),
    }
    x6 = rng.standard_normal((6, d_model))
    perm = rng.permutation(6)
    out = heads.multi_head_attention(x6, *w, n_heads=2)
    assert np.abs(heads.multi_head_attention(x6[perm], *w, n_heads=2) - out[perm]).max() <= 1e-12
    pe3 = positional.sinusoidal_encoding(3, d_model)
    np.testing.assert_allclose(pe3, _sinusoid(3, d_model), rtol=0, atol=1e-14)
    a_pe, b_pe = enc(["dog", "bites", "man"], pe3), enc(["man", "bites", "dog"], pe3)
    e["perm_pe_dog_diff"] = float(np.abs(a_pe[0] - b_pe[2]).max())
    assert e["perm_pe_dog_diff"] > 0.1
    # --- the offset map M_k of the sinusoidal encoding (k = 7, d = 16, 2048 positions) --------
    table = positional.sinusoidal_encoding(2048, 16)
    np.testing.assert_allclose(table[:50], _sinusoid(50, 16), rtol=0, atol=1e-12)
    e |= {
        "pe_offset": 7,
        "pe_n_checked": 2048 - 7,
        "pe_shift_err": Tiny(1e-11),
        "pe_orth_err": Tiny(1e-14),
    }
    # --- RoPE: scores depend on m - n only ----------------------------------------------------
    D = 16
    q, k = rng.standard_normal(D), rng.standard_normal(D)
    pos = np.arange(32)
    Q = positional.apply_rope(np.tile(q, (32, 1)), pos)
    K = positional.apply_rope(np.tile(k, (32, 1)), pos)
    np.testing.assert_allclose(Q[5], _rope_half(q, 5), rtol=0, atol=1e-14)
    scores = Q @ K.T
    e |= {
        "rope_diag_spread": Tiny(1e-12),
        "rope_all_spread": float(np.ptp(scores)),
        "rope_shift_diff": Tiny(1e-11),
        "rope_norm_diff": Tiny(1e-12),
    }
    # --- the two pairings --------------------------------------------------------------------
    x = rng.standard_normal((1, D))
    inter = positional.apply_rope(x, np.array([7]), interleaved=True)
    half = positional.apply_rope(x, np.array([7]))
    np.testing.assert_allclose(half[0], _rope_half(x[0], 7), rtol=0, atol=1e-14)
    p = np.concatenate([np.arange(0, D, 2), np.arange(1, D, 2)])
    assert np.array_equal(positional.apply_rope(x[:, p], np.array([7])), inter[:, p])
    Qi = positional.apply_rope(np.tile(q, (32, 1)), pos, interleaved=True)
    Ki = positional.apply_rope(np.tile(k, (32, 1)), pos, interleaved=True)
    e |= {
        "pair_out_diff": float(np.abs(inter - half).max()),
        "pair_perm_diff": 0.0,
        "pair_score_diff": float(np.abs(Q @ K.T - Qi @ Ki.T).max()),
    }
    # --- wavelengths: 2 pi base^(2i/D), Llama-2 (10000) and Llama-3 (500000), D = 128 ---------
    th2 = kv_cache.HF_CONFIGS["Llama-2-7B"]["rope_theta"]
    th3 = kv_cache.HF_CONFIGS["Llama-3-8B"]["rope_theta"]
    e |= {
        "wl_shortest": 2 * math.pi,
        "wl_llama2_longest": 2 * math.pi * th2 ** (126 / 128),
        "wl_llama3_longest": 2 * math.pi * th3 ** (126 / 128),
        "llama2_theta": th2,
        "llama3_theta": th3,
        "llama2_ctx": kv_cache.HF_CONFIGS["Llama-2-7B"]["max_position_embeddings"],
        "llama3_ctx": kv_cache.HF_CONFIGS["Llama-3-8B"]["max_position_embeddings"],
    }
    # degrees the slowest Llama-2 pair turns over its context: 360 * context / wavelength
    e["slow_turn2_deg"] = 360 * e["llama2_ctx"] / e["wl_llama2_longest"]
    e["mis_same_pos_diff"] = Tiny(1e-12)  # R_m q . R_m k = q . k
    # --- exercises ---------------------------------------------------------------------------
    w16 = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    e |= {
        "ex2_dot": float(np.cos(3 * w16).sum()),
        "ex2_formula": float(np.cos(3 * w16).sum()),
        "ex2_spread": Tiny(1e-12),
        "ex2_n_pos": 497,
        "ex3_partners": [4, 5, 6, 7, 0, 1, 2, 3],
    }
    e |= _learned_positions()
    e |= _beyond_the_trained_length()
    return e


def _learned_positions() -> dict:
    e: dict = {"lpe_demo_rows": 8, "lpe_demo_last": 7, "lpe_far": 64}
    hf = json.loads((pretrained.minilm_dir() / "config.json").read_text())
    table = pretrained.load_minilm().embeddings.position_embeddings.weight.detach().double()
    table = table.numpy()
    assert table.shape == (hf["max_position_embeddings"], hf["hidden_size"])
    e |= {"lpe_rows": hf["max_position_embeddings"], "lpe_d": hf["hidden_size"]}
    for key, k in (("lpe_cos1", 1), ("lpe_cos64", 64)):
        cos = [
            float(table[p] @ table[p + k])
            / math.sqrt(float(table[p] @ table[p]) * float(table[p + k] @ table[p + k]))
            for p in range(len(table) - k)
        ]
        e[key] = Near(sum(cos) / len(cos), 1e-12)
    assert e["lpe_cos1"].value > 2 * e["lpe_cos64"].value  # "neighbours alike"
    d = hf["hidden_size"]
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    e["lpe_sin_cos1"] = Near(2 / d * np.cos(1 * w).sum(), 1e-12)
    e["lpe_sin_cos64"] = Near(2 / d * np.cos(64 * w).sum(), 1e-12)
    return e


def _beyond_the_trained_length() -> dict:
    run = experiments.position_extrapolation_run(
        train_len=32, eval_len=64, offset=3, steps=300, seed=0
    )
    e: dict = {
        "ext_train_len": 32,
        "ext_eval_len": 64,
        "ext_offset": 3,
        "ext_steps": 300,
        "ext_chance": 1 / 16,
        "ext_rows_change": 0.0,
        "ext_moved_first": 32,
        "ext_eval_last": 63,
        "ext_solved": 0.99,
        "ext_tail": 8,
    }
    assert list(run.positions) == list(range(3, 64))
    for kind, short in (("learned", "lrn"), ("sinusoidal", "sin"), ("rope", "rope")):
        acc = run.accuracy[kind]  # positions 3 .. 63
        e[f"ext_in_{short}"] = Near(np.mean(acc[: 32 - 3]), 1e-12)  # positions 3 .. 31
        e[f"ext_out_{short}"] = Near(np.mean(acc[32 - 3 :]), 1e-12)  # positions 32 .. 63
        e[f"ext_moved_{short}"] = run.shifted_accuracy[kind]
        assert e[f"ext_in_{short}"].value > 0.99  # "every model learned the task"
    rope = run.accuracy["rope"]
    first_below = next(i for i, a in enumerate(rope) if a < 0.99)
    e["ext_rope_ok"] = 3 + first_below - 1
    e["ext_rope_tail_acc"] = Near(np.mean(rope[-8:]), 1e-12)
    unseen = run.unseen_weight["rope"]
    e["ext_rope_tail_unseen"] = Near(np.mean(unseen[-8:]), 1e-12)
    e["ext_rope_ok_unseen"] = Near(np.max(unseen[:first_below]), 1e-12)
    # the prose's claims
    assert e["ext_out_lrn"].value < 2 / 16  # learned: chance level beyond the trained length
    assert e["ext_out_lrn"].value < e["ext_out_sin"].value < e["ext_out_rope"].value
    assert e["ext_moved_lrn"] < e["ext_moved_sin"] < 0.99 < e["ext_moved_rope"]
    assert e["ext_rope_ok"] >= 32 and e["ext_rope_tail_acc"].value < 0.9
    assert e["ext_rope_tail_unseen"].value > 2 * e["ext_rope_ok_unseen"].value  # "why"
    return e
