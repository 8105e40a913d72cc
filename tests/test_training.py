"""Tests for attnbook.training: the schedule, the held-out loss, GPT-2 initialisation, a run.

References: hand-computed learning rates, a model with constant logits (whose cross-entropy is
log V exactly), and a periodic text that a tiny model must learn to predict far better than
chance.
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

from attnbook.models import DecoderOnlyModel, ModelConfig
from attnbook.training import (
    TrainingRun,
    evaluate_loss,
    gpt2_init_,
    lr_schedule,
    train_language_model,
)


class ConstantLogits(nn.Module):
    """Ignores its input: every position gets the same logits."""

    def __init__(self, logits):
        super().__init__()
        self.logits = nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))

    def forward(self, ids):
        return self.logits.expand(*ids.shape, -1)


def tiny_config(**kw):
    base = dict(vocab_size=5, d_model=32, n_heads=2, n_layers=2, d_ff=64, positional="rope",
                max_seq_len=64)
    base.update(kw)
    return ModelConfig(**base)


def test_lr_schedule_warmup_then_cosine_to_the_floor():
    kw = dict(steps=11, lr=1.0, warmup_steps=4, min_lr_ratio=0.1)
    assert [lr_schedule(s, **kw) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_schedule(4, **kw) == pytest.approx(1.0)  # the cosine starts at the peak
    assert lr_schedule(7, **kw) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway: cos(pi/2) = 0
    assert lr_schedule(10, **kw) == pytest.approx(0.1)  # the last update
    assert lr_schedule(0, steps=3, lr=2.0, warmup_steps=0) == pytest.approx(2.0)


def test_evaluate_loss_of_uniform_logits_is_log_v():
    model = ConstantLogits(torch.zeros(7))
    loss = evaluate_loss(model, np.arange(50) % 7, block_size=8, batch_size=4, n_batches=3,
                         seed=0)
    assert loss == pytest.approx(math.log(7), rel=1e-6)


def test_evaluate_loss_of_known_probabilities():
    p = np.array([0.5, 0.25, 0.25])
    model = ConstantLogits(np.log(p))
    ids = np.zeros(40, dtype=np.int64)  # every target is token 0
    loss = evaluate_loss(model, ids, block_size=5, batch_size=2, n_batches=2, seed=3)
    assert loss == pytest.approx(math.log(2), rel=1e-6)


def test_evaluate_loss_uses_eval_mode_and_restores_the_mode():
    torch.manual_seed(0)
    model = DecoderOnlyModel(tiny_config(dropout=0.5))
    ids = np.arange(200) % 5
    model.train()
    a = evaluate_loss(model, ids, block_size=16, batch_size=4, n_batches=2, seed=0)
    b = evaluate_loss(model, ids, block_size=16, batch_size=4, n_batches=2, seed=0)
    assert a == b  # no dropout noise: eval mode
    assert model.training


def test_gpt2_init_gives_small_logits_and_scaled_residual_projections():
    torch.manual_seed(0)
    cfg = tiny_config(vocab_size=50, d_model=64, n_layers=4, d_ff=256)
    model = gpt2_init_(DecoderOnlyModel(cfg), std=0.02)
    w = model.layers[0].self_attn.q_proj.weight
    assert float(w.detach().std()) == pytest.approx(0.02, rel=0.1)
    w = model.layers[0].self_attn.o_proj.weight
    assert float(w.detach().std()) == pytest.approx(0.02 / math.sqrt(8), rel=0.1)
    assert float(model.layers[0].ffn.linear1.bias.detach().abs().max()) == 0.0
    ids = np.random.default_rng(0).integers(0, 50, 500)
    loss = evaluate_loss(model, ids, block_size=32, batch_size=4, n_batches=2, seed=0)
    assert abs(loss - math.log(50)) < 0.05  # near-uniform predictions at the start
    with pytest.raises(ValueError, match="std"):
        gpt2_init_(model, std=0.0)


def test_training_learns_a_periodic_text_and_is_deterministic():
    ids = np.tile([0, 1, 2, 3, 4, 2, 1], 60)  # period 7: predictable from 2 tokens back
    kw = dict(steps=60, batch_size=8, block_size=16, lr=1e-2, warmup_steps=5, eval_every=20,
              eval_batches=2, seed=0)

    def run():
        torch.manual_seed(0)
        model = gpt2_init_(DecoderOnlyModel(tiny_config(dropout=0.1)))
        return train_language_model(model, ids[:300], ids[300:], **kw), model

    r1, model = run()
    r2, _ = run()
    assert isinstance(r1, TrainingRun)
    np.testing.assert_array_equal(r1.steps, [0, 20, 40, 60])
    assert r1.val_loss[0] > 1.4  # about log 5 = 1.61 at the start
    assert r1.val_loss[-1] < 0.3 * r1.val_loss[0]
    np.testing.assert_array_equal(r1.val_loss, r2.val_loss)  # same seed, same run
    np.testing.assert_array_equal(r1.train_loss, r2.train_loss)
    assert r1.tokens_seen == 60 * 8 * 16 and r1.lr.shape == (60,) and r1.seconds > 0
    assert not model.training


def test_train_language_model_rejects_bad_arguments():
    model = DecoderOnlyModel(tiny_config())
    ids = np.arange(100) % 5
    kw = dict(steps=5, batch_size=2, block_size=8, lr=1e-3, eval_every=5, eval_batches=1,
              seed=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        train_language_model(model, ids, ids, **{**kw, "warmup_steps": 5})
    with pytest.raises(ValueError, match="lr"):
        train_language_model(model, ids, ids, **{**kw, "lr": 0.0})
    with pytest.raises(ValueError, match="ids"):
        train_language_model(model, ids, ids[:5], **kw)
    with pytest.raises(TypeError, match="model"):
        train_language_model("model", ids, ids, **kw)
    with pytest.raises(TypeError, match="progress"):
        train_language_model(model, ids, ids, **kw, progress=1)


def test_capstone_benchmark_runs_one_tiny_point(tmp_path):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "capstone.py"
    spec = importlib.util.spec_from_file_location("capstone_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "capstone.json"
    previous = torch.get_num_threads()
    try:
        bench.main(["--steps", "2", "--d-model", "16", "--n-layers", "1", "--block-size", "16",
                    "--batch-size", "2", "--new-tokens", "5", "--repeat", "1",
                    "--out", str(out)])
    finally:
        torch.set_num_threads(previous)
    result = json.loads(out.read_text())
    assert result["same_tokens_with_and_without_cache"] is True
    assert len(result["val_loss"]) == 3  # before training, after step 1, after step 2
    assert result["bigram_loss"] < result["unigram_loss"] < result["log_vocab"]


def test_progress_bar_and_thread_setting_are_restored():
    torch.set_num_threads(1)
    previous = torch.get_num_threads()
    model = DecoderOnlyModel(tiny_config())
    ids = np.arange(100) % 5
    run = train_language_model(model, ids, ids, steps=2, batch_size=2, block_size=8, lr=1e-3,
                               eval_every=1, eval_batches=1, seed=0, progress=True,
                               num_threads=2)
    assert torch.get_num_threads() == previous
    np.testing.assert_array_equal(run.steps, [0, 1, 2])
