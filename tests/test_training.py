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
    base = dict(
        vocab_size=5, d_model=32, n_heads=2, n_layers=2, d_ff=64, positional="rope", max_seq_len=64
    )
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
    loss = evaluate_loss(model, np.arange(50) % 7, block_size=8, batch_size=4, n_batches=3, seed=0)
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
    kw = dict(
        steps=60,
        batch_size=8,
        block_size=16,
        lr=1e-2,
        warmup_steps=5,
        eval_every=20,
        eval_batches=2,
        seed=0,
    )

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
    kw = dict(steps=5, batch_size=2, block_size=8, lr=1e-3, eval_every=5, eval_batches=1, seed=0)
    with pytest.raises(ValueError, match="warmup_steps=5 must be < steps=5"):
        train_language_model(model, ids, ids, **{**kw, "warmup_steps": 5})
    with pytest.raises(ValueError, match="warmup_steps=50 must be < steps=5"):
        train_language_model(model, ids, ids, **{**kw, "warmup_steps": 50})
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
        bench.main(
            [
                "--steps",
                "2",
                "--d-model",
                "16",
                "--n-layers",
                "1",
                "--block-size",
                "16",
                "--batch-size",
                "2",
                "--new-tokens",
                "5",
                "--repeat",
                "1",
                "--out",
                str(out),
            ]
        )
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
    run = train_language_model(
        model,
        ids,
        ids,
        steps=2,
        batch_size=2,
        block_size=8,
        lr=1e-3,
        eval_every=1,
        eval_batches=1,
        seed=0,
        progress=True,
        num_threads=2,
    )
    assert torch.get_num_threads() == previous
    np.testing.assert_array_equal(run.steps, [0, 1, 2])


# --- hostile review: divergence, learning rates, names, seeds, the mode after an error -----


class NanAfter(nn.Module):
    """Uniform logits, then nan once ``k`` updates have run, as a diverged model's: from the
    ``(k + 1)``-th forward pass in training mode (one per update), and in eval mode after the
    ``k``-th."""

    def __init__(self, k):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3))
        self.k, self.calls = k, 0

    def forward(self, ids):
        if self.training:
            self.calls += 1
        bad = self.calls > self.k if self.training else self.calls >= self.k
        return (self.w * (math.nan if bad else 1.0)).expand(*ids.shape, -1)


def test_a_diverging_run_raises_at_the_first_non_finite_loss():
    ids = np.zeros(100, dtype=np.int64)
    kw = dict(
        steps=40,
        batch_size=2,
        block_size=4,
        lr=0.5,
        warmup_steps=10,
        eval_every=40,
        eval_batches=1,
        seed=0,
    )
    # updates 0, 1, 2 run; the batch of update 3 (after 3 updates, the last at lr 0.15) is nan
    with pytest.raises(
        ValueError,
        match=r"batch loss of update 3 is nan after 3 of 40 "
        r"updates \(learning rate 0.15 at that update; peak "
        r"lr 0.5\): the model diverged",
    ):
        train_language_model(NanAfter(3), ids, ids, **kw)
    # evaluated after every update, the training loss after update 3 is caught first
    with pytest.raises(
        ValueError,
        match=r"training loss is nan after 3 of 40 updates "
        r"\(learning rate 0.15 at that update",
    ):
        train_language_model(NanAfter(3), ids, ids, **{**kw, "eval_every": 1})


@pytest.mark.parametrize("lr", [100.0, 1e300])
def test_absurd_learning_rates_are_refused_up_front(lr):
    model = DecoderOnlyModel(tiny_config())
    ids = np.arange(100) % 5
    with pytest.raises(ValueError, match="lr must be <= 10"):
        train_language_model(
            model,
            ids,
            ids,
            steps=2,
            batch_size=2,
            block_size=8,
            lr=lr,
            eval_every=1,
            eval_batches=1,
            seed=0,
        )
    with pytest.raises(ValueError, match="lr must be <= 10"):
        lr_schedule(0, steps=3, lr=lr, warmup_steps=0)


def test_lr_schedule_checks_its_arguments():
    kw = dict(steps=3, lr=1.0, warmup_steps=0)
    with pytest.raises(ValueError, match="step must be >= 0"):
        lr_schedule(-5, **kw)
    with pytest.raises(ValueError, match="step must be <= 2"):
        lr_schedule(3, **kw)  # past the last update
    with pytest.raises(ValueError, match="min_lr_ratio must be >= 0"):
        lr_schedule(2, **kw, min_lr_ratio=-5)
    with pytest.raises(ValueError, match="min_lr_ratio must be <= 1"):
        lr_schedule(2, **kw, min_lr_ratio=1.5)
    with pytest.raises(ValueError, match="lr must be finite"):
        lr_schedule(0, steps=3, lr=math.nan, warmup_steps=0)
    with pytest.raises(ValueError, match="lr must be > 0"):
        lr_schedule(0, steps=3, lr=0.0, warmup_steps=0)
    with pytest.raises(ValueError, match="warmup_steps=3 must be < steps=3"):
        lr_schedule(0, steps=3, lr=1.0, warmup_steps=3)
    with pytest.raises(ValueError, match="warmup_steps=10 must be < steps=3"):
        lr_schedule(0, steps=3, lr=1.0, warmup_steps=10)  # longer than the run
    with pytest.raises(ValueError, match="warmup_steps must be >= 0"):
        lr_schedule(0, steps=3, lr=1.0, warmup_steps=-1)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        lr_schedule(0, steps=0, lr=1.0, warmup_steps=0)
    with pytest.raises(TypeError, match="step must be an integer"):
        lr_schedule(1.0, **kw)


def test_train_language_model_errors_name_the_argument():
    model = DecoderOnlyModel(tiny_config(positional="learned", max_seq_len=16))
    ids = np.arange(100) % 5
    kw = dict(steps=1, batch_size=2, lr=1e-3, eval_every=1, eval_batches=1, seed=0)
    with pytest.raises(ValueError, match=r"val_ids must hold at least 17 ids \(block_size 16"):
        train_language_model(model, ids, ids[:16], block_size=16, **kw)
    with pytest.raises(ValueError, match=r"train_ids must hold at least 17 ids"):
        train_language_model(model, ids[:16], ids, block_size=16, **kw)
    with pytest.raises(ValueError, match="block_size 17 exceeds the model's max_seq_len 16"):
        train_language_model(model, ids, ids, block_size=17, **kw)
    with pytest.raises(ValueError, match="block_size 17 exceeds the model's max_seq_len 16"):
        evaluate_loss(model, ids, block_size=17, batch_size=2, n_batches=1, seed=0)
    with pytest.raises(ValueError, match=r"val_ids must lie in \[0, vocab_size=5\)"):
        train_language_model(model, ids, ids + 1, block_size=8, **kw)
    # RoPE has no max_seq_len limit: a longer block is fine
    rope = DecoderOnlyModel(tiny_config(max_seq_len=8))
    run = train_language_model(rope, ids, ids, block_size=12, **kw)
    assert run.steps.tolist() == [0, 1]


def test_seeds_up_to_2_to_the_64_are_accepted_and_beyond_refused():
    ids = np.arange(100) % 5
    kw = dict(steps=1, batch_size=2, block_size=4, lr=1e-3, eval_every=1, eval_batches=1)

    def run(seed):
        torch.manual_seed(0)
        return train_language_model(DecoderOnlyModel(tiny_config()), ids, ids, seed=seed, **kw)

    a, b = run(2**64 - 1), run(2**64 - 1)  # seed + 1 and seed + 2 + step wrap around
    np.testing.assert_array_equal(a.val_loss, b.val_loss)
    with pytest.raises(ValueError, match="seed must be <="):
        run(2**64)
    with pytest.raises(ValueError, match="seed must be <="):
        evaluate_loss(
            ConstantLogits(torch.zeros(5)), ids, block_size=4, batch_size=2, n_batches=1, seed=2**64
        )


class Raises(nn.Module):
    def forward(self, ids):
        raise RuntimeError("boom")


def test_evaluate_loss_restores_the_mode_after_an_exception():
    model = Raises().train()
    with pytest.raises(RuntimeError, match="boom"):
        evaluate_loss(model, np.arange(20) % 5, block_size=4, batch_size=2, n_batches=1, seed=0)
    assert model.training
