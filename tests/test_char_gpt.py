"""attnbook.char_gpt: the shipped checkpoint of chapter 13's model, its JSON, and its remake."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from attnbook import char_gpt, text  # noqa: E402
from attnbook.char_gpt import (  # noqa: E402
    CHECKPOINT,
    COMMAND,
    METADATA,
    char_gpt_config,
    load_char_gpt,
    train_char_gpt,
)

# Chapter 13's model, restated: d_model, n_heads, n_layers, d_ff, window.
D, H, L, FF, CTX = 64, 4, 4, 256, 64


@pytest.fixture(scope="module")
def corpus_ids():
    corpus = text.load_corpus()
    chars = sorted(set(corpus))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in corpus], dtype=np.int64)
    n_val = round(0.1 * len(ids))  # the last 10 % held out, as the chapter splits
    return "".join(chars), ids[:-n_val], ids[-n_val:]


@pytest.fixture(scope="module")
def shipped():
    return load_char_gpt()


def _fixed_windows(val: np.ndarray, n: int = 24, length: int = CTX):
    """n windows of ``length`` + 1 tokens at evenly spaced offsets of the held-out text."""
    starts = np.linspace(0, len(val) - length - 1, n).astype(np.int64)
    return np.stack([val[s : s + length + 1] for s in starts])  # (n, length + 1)


def _nll(model, windows: np.ndarray) -> float:
    """Mean next-token negative log-likelihood, by hand from log-softmax."""
    x = torch.from_numpy(windows[:, :-1])
    y = torch.from_numpy(windows[:, 1:])
    with torch.no_grad():
        logits = model.eval()(x).double()  # (n, T, V)
        logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
        return float(-logp.gather(-1, y[..., None]).mean())


def _bigram_nll(train: np.ndarray, windows: np.ndarray, V: int) -> float:
    """Add-one bigram loss on the same targets, counted by hand."""
    counts = np.zeros((V, V))
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    p = (counts + 1.0) / (counts.sum(axis=1, keepdims=True) + V)
    return float(-np.log(p[windows[:, :-1], windows[:, 1:]]).mean())


def test_config_is_chapter_13s_without_the_embedding_scale():
    cfg = char_gpt_config(65)
    assert (cfg.vocab_size, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff) == (65, D, H, L, FF)
    assert (cfg.positional, cfg.sliding_window, cfg.max_seq_len) == ("rope", CTX, CTX)
    assert cfg.norm_first and cfg.tie_embeddings and cfg.dropout == 0.1
    assert cfg.scales_embeddings is False
    with pytest.raises(ValueError, match="vocab_size"):
        char_gpt_config(0)
    with pytest.raises(TypeError, match="vocab_size"):
        char_gpt_config("65")


def test_shipped_json_describes_the_shipped_file(corpus_ids, shipped):
    chars, train, _ = corpus_ids
    _, meta = shipped
    raw = CHECKPOINT.read_bytes()
    assert meta["checkpoint"] == CHECKPOINT.name
    assert meta["checkpoint_bytes"] == len(raw) <= 4 * 2**20  # small enough for git
    assert meta["checkpoint_sha256"] == hashlib.sha256(raw).hexdigest()
    assert meta["chars"] == chars and meta["model"]["vocab_size"] == len(chars)
    assert meta["model"] == json.loads(json.dumps(dataclasses.asdict(char_gpt_config(len(chars)))))
    state = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)
    assert {v.dtype for v in state.values()} == {torch.float16} and meta["dtype"] == "float16"
    # Parameters by hand: tied embedding, four blocks, final LayerNorm (RoPE has none) ...
    V = len(chars)
    per_block = (4 * D * D + 4 * D) + (2 * D * FF + FF + D) + 2 * (2 * D)
    n_params = V * D + L * per_block + 2 * D
    assert meta["parameters"] == n_params
    # ... and stored once each: the tied output weight shares the embedding's storage.
    storages = {
        v.untyped_storage().data_ptr(): v.untyped_storage().nbytes() for v in state.values()
    }
    assert sum(storages.values()) == 2 * n_params
    tr = meta["training"]
    assert meta["tokens_seen"] == tr["steps"] * tr["batch_size"] * tr["block_size"]
    assert meta["eval_steps"][0] == 0 and meta["eval_steps"][-1] == tr["steps"]
    assert np.all(np.diff(meta["eval_steps"]) == tr["eval_every"])
    assert len(meta["val_loss"]) == len(meta["train_loss"]) == len(meta["eval_steps"])
    # Before training the loss is close to ln V (GPT-2's small start); it ends far below.
    assert abs(meta["val_loss"][0] - math.log(V)) < 0.1
    assert meta["val_loss"][-1] < meta["val_loss"][0] - 2
    assert meta["command"] == COMMAND == "OMP_NUM_THREADS=1 python -m attnbook.char_gpt"
    assert meta["torch_threads"] == 1 and meta["torch"] and meta["seconds"] > 0
    assert tr == char_gpt.TRAINING and len(train) > 0


def test_loaded_weights_are_the_float16_file_in_float32(shipped):
    model, _ = shipped
    state = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)
    for name, p in model.state_dict().items():
        assert p.dtype == torch.float32
        assert torch.equal(p, state[name].float()), name
    assert not model.training
    assert model.lm_head.weight is model.embed.tokens.weight


def test_checkpoint_beats_the_bigram_model_on_held_out_windows(corpus_ids, shipped):
    chars, train, val = corpus_ids
    model, _ = shipped
    windows = _fixed_windows(val)
    ours, bigram = _nll(model, windows), _bigram_nll(train, windows, len(chars))
    assert 1.0 < ours < bigram - 0.3, (ours, bigram)


@pytest.mark.slow
def test_checkpoint_beats_chapter_13s_short_run(corpus_ids, shipped):
    """The chapter's live run (400 steps, its settings) ends above the checkpoint."""
    from attnbook import training
    from attnbook.models import build_model

    chars, train, val = corpus_ids
    model, _ = shipped
    torch.manual_seed(0)
    short = training.gpt2_init_(build_model(char_gpt_config(len(chars))))
    training.train_language_model(
        short,
        train,
        val,
        steps=400,
        batch_size=16,
        block_size=64,
        lr=3e-3,
        warmup_steps=40,
        weight_decay=0.1,
        grad_clip=1.0,
        eval_every=400,
        eval_batches=1,
        seed=0,
    )
    windows = _fixed_windows(val)
    assert _nll(model, windows) < _nll(short, windows) - 0.05


def test_load_names_the_remake_command_and_catches_a_foreign_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m attnbook.char_gpt"):
        load_char_gpt(tmp_path)
    shutil.copy(CHECKPOINT, tmp_path / CHECKPOINT.name)
    shutil.copy(METADATA, tmp_path / METADATA.name)
    raw = bytearray((tmp_path / CHECKPOINT.name).read_bytes())
    raw[-100] ^= 0xFF
    (tmp_path / CHECKPOINT.name).write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="SHA-256"):
        load_char_gpt(tmp_path)


@pytest.mark.slow
def test_train_writes_files_that_load(tmp_path):
    meta = train_char_gpt(tmp_path, steps=2)
    assert meta["command"] == COMMAND + " --steps 2"
    assert meta["eval_steps"] == [0, 2] and meta["training"]["steps"] == 2
    model, loaded = load_char_gpt(tmp_path)
    assert loaded == meta
    assert sum(p.numel() for p in model.parameters()) == meta["parameters"]
    with pytest.raises(ValueError, match="steps"):
        train_char_gpt(tmp_path, steps=0)
