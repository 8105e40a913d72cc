"""Training a language model end to end: AdamW, warm-up and cosine decay, held-out loss.

:func:`train_language_model` trains any next-token model (``model(ids (B, T)) -> logits
(B, T, V)``, e.g. :class:`attnbook.models.DecoderOnlyModel`) on random windows of a token
array (:func:`attnbook.text.get_batch`) and records the training and held-out loss at regular
evaluation points; :func:`evaluate_loss` is that held-out loss.

The recipe is the one of GPT-style training (Radford et al., 2018, section 4.1; Loshchilov &
Hutter, 2019, for AdamW): AdamW (betas 0.9 and 0.95) with decoupled weight decay on every
parameter with at least 2 dimensions (weight matrices and embeddings; not biases or norm gains,
nanoGPT's grouping), a linear warm-up of the learning rate over ``warmup_steps`` updates, then a
cosine decay to ``min_lr_ratio * lr`` at the last step, and gradients clipped to a global norm
of ``grad_clip``. Dropout is active during the updates (``model.train()``) and off during
evaluation (``model.eval()``). A run is deterministic given ``seed``: the batches come from a
``torch.Generator`` seeded with ``seed`` (evaluation batches from ``seed + 1``), and dropout
draws from torch's global generator, which the run seeds with ``seed`` before the first update.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    check_bool,
    check_fits_positions,
    check_id_sequence,
    check_int,
    check_real,
    check_seed,
    check_warmup_steps,
)
from .text import get_batch

__all__ = [
    "TrainingRun",
    "MAX_LR",
    "gpt2_init_",
    "lr_schedule",
    "evaluate_loss",
    "train_step_core",
    "train_language_model",
]


@dataclass
class TrainingRun:
    """What a run of :func:`train_language_model` recorded.

    Attributes:
        steps: ``(E,)`` int64 update counts at the evaluation points (0 = before training).
        train_loss: ``(E,)`` float64 mean loss on ``eval_batches`` fresh training batches,
            in nats per token.
        val_loss: ``(E,)`` float64 mean held-out loss, in nats per token.
        lr: ``(steps,)`` float64 learning rate of each update.
        seconds: wall-clock seconds of the whole run (evaluations included).
        tokens_seen: tokens in the training batches of all updates
            (``steps * batch_size * block_size``).
    """

    steps: np.ndarray
    train_loss: np.ndarray
    val_loss: np.ndarray
    lr: np.ndarray
    seconds: float
    tokens_seen: int


@torch.no_grad()
def gpt2_init_(model, *, std: float = 0.02):
    """Re-initialise ``model`` in place as GPT-2 does; returns ``model``.

    Every ``nn.Linear`` and ``nn.Embedding`` weight is drawn from ``N(0, std^2)`` (torch's
    global generator: seed it first), biases are set to 0, and the projections that write into
    the residual stream (attention ``o_proj``, the feed-forward ``linear2``/``down_proj``) get
    ``std / sqrt(2 n_layers)``, so the stream's variance does not grow with depth. Norm gains
    stay 1. With a tied output projection the initial logits are then small and the initial
    loss is close to ``log V`` (torch's default ``N(0, 1)`` embedding would make them large).

    Args:
        model: a :class:`attnbook.models.DecoderOnlyModel` (any module with
            ``config.n_layers``).
        std: standard deviation, > 0.

    Returns:
        ``model``.

    Raises:
        TypeError: if ``model`` is not a ``torch.nn.Module`` with a ``config``.
        ValueError: if ``std`` is not finite and > 0.

    Source: Radford et al., "Language Models are Unsupervised Multitask Learners" (2019),
    section 2.3; Karpathy's nanoGPT (``_init_weights``).
    """
    model = _check_model(model)
    if not hasattr(model, "config"):
        raise TypeError(
            f"model must have a config (a DecoderOnlyModel), got {type(model).__name__}"
        )
    std = check_real(std, "std", minimum=0.0, strict=True)
    residual_std = std / math.sqrt(2 * model.config.n_layers)
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            last = name.rsplit(".", 1)[-1]
            s = residual_std if last in ("o_proj", "linear2", "down_proj") else std
            nn.init.normal_(module.weight, 0.0, s)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
    return model


def lr_schedule(
    step: int, *, steps: int, lr: float, warmup_steps: int, min_lr_ratio: float = 0.1
) -> float:
    """Learning rate of update ``step`` (0-based): linear warm-up, then cosine decay.

    ``lr * (step + 1) / warmup_steps`` during the warm-up; afterwards
    ``lr * (r + (1 - r) * (1 + cos(pi * p)) / 2)`` with ``r = min_lr_ratio`` and ``p`` going
    from 0 (first update after the warm-up) to 1 (last update).

    Args:
        step: the update's index, ``0 <= step < steps``.
        steps: number of updates, >= 1.
        lr: peak learning rate, ``0 < lr <= 10``.
        warmup_steps: updates of linear warm-up, ``0 <= warmup_steps < steps`` (0: none).
        min_lr_ratio: final learning rate as a share of ``lr``, in ``[0, 1]``.

    Returns:
        The learning rate (float).

    Raises:
        TypeError: if ``step``, ``steps`` or ``warmup_steps`` is not an integer, or ``lr`` or
            ``min_lr_ratio`` not a real number.
        ValueError: if one is out of its range above (a ``step`` past the last update
            included).

    Source: Loshchilov & Hutter, "SGDR" (2017), eq. 5; Goyal et al. (2017), section 2.2
    (warm-up).
    """
    steps = check_int(steps, "steps", 1)
    step = check_int(step, "step", 0, steps - 1)
    warmup_steps = check_warmup_steps(warmup_steps, steps)
    lr = _check_lr(lr)
    min_lr_ratio = check_real(min_lr_ratio, "min_lr_ratio", minimum=0.0, maximum=1.0)
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    span = max(1, steps - 1 - warmup_steps)
    p = min(1.0, (step - warmup_steps) / span)
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


#: Largest peak learning rate accepted. An AdamW update moves each weight by up to about
#: ``lr``, so a larger rate is a typo, not a setting.
MAX_LR = 10.0


def _check_lr(lr) -> float:
    lr = check_real(lr, "lr", minimum=0.0, strict=True)
    if lr > MAX_LR:
        raise ValueError(
            f"lr must be <= {MAX_LR} (an AdamW update moves each weight by up to "
            f"about lr), got {lr}"
        )
    return lr


def _check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _check_windows(model, ids, name: str, block_size, batch_size):
    """Sizes, then ids long enough for a window and inside the model's vocabulary."""
    block_size = check_int(block_size, "block_size", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    cfg = getattr(model, "config", None)
    check_fits_positions(
        block_size,
        getattr(cfg, "max_seq_len", None),
        getattr(cfg, "positional", None),
        f"block_size {block_size}",
    )
    check_id_sequence(
        ids,
        name,
        block_size + 1,
        getattr(cfg, "vocab_size", None),
        len_hint=f" (block_size {block_size} + 1)",
    )
    return block_size, batch_size


@torch.no_grad()
def evaluate_loss(
    model, ids, *, block_size: int, batch_size: int, n_batches: int, seed: int
) -> float:
    """Mean next-token cross-entropy of ``model`` on random windows of ``ids``, in eval mode.

    The windows come from :func:`attnbook.text.get_batch` with a generator seeded with
    ``seed``, so two calls with the same seed see the same windows. The model's mode is
    restored afterwards.

    Args:
        model: maps ``(B, T)`` int64 ids to ``(B, T, V)`` logits.
        ids: 1-D integer token ids, more than ``block_size`` of them.
        block_size: tokens per window ``T``.
        batch_size: windows per batch ``B``.
        n_batches: batches averaged.
        seed: seed of the windows' generator.

    Returns:
        The mean cross-entropy in nats per token (float).

    Raises:
        TypeError: if ``model`` is not a ``torch.nn.Module`` or a size or ``seed`` is not an
            integer.
        ValueError: as :func:`attnbook.text.get_batch`; if ``n_batches < 1``, ``seed`` is
            outside ``[0, 2**64)``, ``block_size`` exceeds the model's ``max_seq_len`` (learned
            or sinusoidal positions) or an id is outside the model's vocabulary.
    """
    model = _check_model(model)
    block_size, batch_size = _check_windows(model, ids, "ids", block_size, batch_size)
    n_batches = check_int(n_batches, "n_batches", 1)
    gen = torch.Generator().manual_seed(check_seed(seed))
    was_training = model.training
    model.eval()
    total = 0.0
    try:
        for _ in range(n_batches):
            x, y = get_batch(ids, block_size, batch_size, gen)  # (B, T) each
            logits = model(x)  # (B, T, V)
            total += float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))
    finally:
        model.train(was_training)
    return total / n_batches


# fmt: off
def train_step_core(model, opt, x, y, lr, grad_clip):
    """One update: next-token cross-entropy, backward, clip, AdamW step.

    ``x``, ``y``: ``(B, T)`` ids and next ids. Returns the batch loss.
    """
    for group in opt.param_groups:
        group["lr"] = lr
    logits = model(x)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())  # mean over B*T
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.detach()
# fmt: on


def train_language_model(
    model,
    train_ids,
    val_ids,
    *,
    steps: int,
    batch_size: int,
    block_size: int,
    lr: float,
    warmup_steps: int = 0,
    weight_decay: float = 0.1,
    min_lr_ratio: float = 0.1,
    grad_clip: float = 1.0,
    eval_every: int,
    eval_batches: int,
    seed: int,
    progress: bool = False,
    num_threads: int | None = 1,
) -> TrainingRun:
    """Train ``model`` on next-token prediction over ``train_ids``; evaluate on ``val_ids``.

    Each update draws ``batch_size`` random windows of ``block_size`` tokens
    (:func:`attnbook.text.get_batch`) and runs :func:`train_step_core` at the learning rate of
    :func:`lr_schedule`. Before the first update, every ``eval_every`` updates and after the
    last, the mean loss on ``eval_batches`` training and held-out batches is recorded
    (:func:`evaluate_loss`, the same held-out windows each time). The model ends in eval mode.

    Args:
        model: maps ``(B, T)`` int64 ids to ``(B, T, V)`` logits, trained in place.
        train_ids: 1-D integer token ids to train on (see :func:`attnbook.text.split_ids`).
        val_ids: 1-D integer held-out token ids.
        steps: number of updates, >= 1.
        batch_size: windows per batch ``B``.
        block_size: tokens per window ``T`` (at most the model's ``max_seq_len`` with learned
            or sinusoidal positions).
        lr: peak learning rate, ``0 < lr <= 10`` (:data:`MAX_LR`).
        warmup_steps: linear warm-up updates, ``0 <= warmup_steps < steps``.
        weight_decay: AdamW's decoupled weight decay on parameters with >= 2 dimensions.
        min_lr_ratio: final learning rate of the cosine decay, as a share of ``lr``.
        grad_clip: maximal global gradient norm, > 0.
        eval_every: updates between evaluations, >= 1.
        eval_batches: batches per evaluation, >= 1.
        seed: ``0 <= seed < 2**64``; seeds the training batches (``seed``), dropout
            (``torch.manual_seed(seed)``) and the evaluation windows (``seed + 1``; sub-seeds
            wrap modulo ``2**64``).
        progress: show a ``tqdm.auto`` progress bar.
        num_threads: torch's intra-op threads during the run (restored afterwards); ``None``
            leaves them as they are. The default 1 avoids OpenMP's busy-waiting threads, which
            on a shared two-core machine made small steps many times slower (see
            :mod:`attnbook.experiments`).

    Returns:
        A :class:`TrainingRun`.

    Raises:
        TypeError: if ``model`` is not a ``torch.nn.Module``, a count is not an integer, a
            rate is not a real number or ``progress`` is not a bool.
        ValueError: if a count, rate or ``seed`` is out of range (see above); ``block_size``
            exceeds the model's ``max_seq_len``; ``train_ids`` or ``val_ids`` is too short
            for ``block_size`` or holds an id outside the model's vocabulary; or a loss
            becomes nan or infinite during the run (the training diverged; the message
            names the step and its learning rate).

    Source: Radford et al., "Improving Language Understanding by Generative Pre-Training"
    (2018), section 4.1; Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (2019).
    """
    model = _check_model(model)
    steps = check_int(steps, "steps", 1)
    warmup_steps = check_warmup_steps(warmup_steps, steps)
    eval_every = check_int(eval_every, "eval_every", 1)
    eval_batches = check_int(eval_batches, "eval_batches", 1)
    seed = check_seed(seed)
    lr = _check_lr(lr)
    weight_decay = check_real(weight_decay, "weight_decay", minimum=0.0)
    min_lr_ratio = check_real(min_lr_ratio, "min_lr_ratio", minimum=0.0, maximum=1.0)
    grad_clip = check_real(grad_clip, "grad_clip", minimum=0.0, strict=True)
    progress = check_bool(progress, "progress")
    if num_threads is not None:
        num_threads = check_int(num_threads, "num_threads", 1)
    block_size, batch_size = _check_windows(model, train_ids, "train_ids", block_size, batch_size)
    _check_windows(model, val_ids, "val_ids", block_size, batch_size)

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), foreach=True)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # dropout masks
    ev = dict(block_size=block_size, batch_size=batch_size, n_batches=eval_batches)
    at, tr, va, lrs = [], [], [], np.empty(steps)

    def diverged(what, value, step):  # step: updates done; its last at lrs[step - 1]
        rate = f"learning rate {lrs[step - 1]:.3g} at that update" if step else "before training"
        raise ValueError(
            f"the {what} is {value} after {step} of {steps} updates ({rate}; peak "
            f"lr {lr}): the model diverged (or its output is not finite); try a "
            "lower lr"
        )

    def record(step):
        at.append(step)
        tr.append(evaluate_loss(model, train_ids, seed=(seed + 2 + step) % 2**64, **ev))
        va.append(evaluate_loss(model, val_ids, seed=(seed + 1) % 2**64, **ev))
        for what, value in (("training loss", tr[-1]), ("held-out loss", va[-1])):
            if not math.isfinite(value):
                diverged(what, value, step)

    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    t0 = time.perf_counter()
    try:
        record(0)
        it = range(steps)
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(it, desc="training", leave=False)
        model.train()
        for step in it:
            lrs[step] = lr_schedule(
                step, steps=steps, lr=lr, warmup_steps=warmup_steps, min_lr_ratio=min_lr_ratio
            )
            x, y = get_batch(train_ids, block_size, batch_size, gen)  # (B, T) each
            loss = float(train_step_core(model, opt, x, y, lrs[step], grad_clip))
            if not math.isfinite(loss):  # this batch ran on the weights of `step` updates
                diverged(f"batch loss of update {step}", loss, step)
            if (step + 1) % eval_every == 0 or step + 1 == steps:
                record(step + 1)
                model.train()
        model.eval()
    finally:
        torch.set_num_threads(previous_threads)
    return TrainingRun(
        steps=np.asarray(at, dtype=np.int64),
        train_loss=np.asarray(tr, dtype=np.float64),
        val_loss=np.asarray(va, dtype=np.float64),
        lr=lrs,
        seconds=time.perf_counter() - t0,
        tokens_seen=steps * batch_size * block_size,
    )
