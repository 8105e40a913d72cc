"""Chapter 13's character-level GPT, trained once for longer and shipped inside the package.

The chapter trains a small decoder-only model on the King James Bible for a few minutes while
the book is built; its held-out loss is still falling when the run stops. This module trains
the same recipe (:func:`attnbook.training.train_language_model`: AdamW, warm-up, cosine decay,
dropout, GPT-2's initialisation), with a wider model and many more steps, until the held-out
loss flattens, and ships the result as package data:

* ``data/char_gpt.pt`` — the weights, a ``torch.save``'d state dict in float16 (the tied
  output projection shares the token embedding's storage, so it is stored once);
* ``data/char_gpt.json`` — the model's configuration, the training settings, the vocabulary,
  the loss curves, the wall-clock seconds, the versions of torch and Python, the number of
  torch threads, the checkpoint's size and SHA-256, and the command that remakes both files.

Remake them (the shipped run took 1206 s on one thread of a shared, loaded two-core machine;
every draw is seeded, and the JSON records the thread count and the versions)::

    OMP_NUM_THREADS=1 python -m attnbook.char_gpt

:func:`load_char_gpt` loads the checkpoint into a float32
:class:`attnbook.models.DecoderOnlyModel` in eval mode.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import hashlib
import json
import platform
import sys
from pathlib import Path

import numpy as np
import torch

from . import text, training
from .checks import check_int
from .config import ModelConfig
from .models import DecoderOnlyModel, build_model, count_parameters

__all__ = [
    "DATA_DIR",
    "CHECKPOINT",
    "METADATA",
    "COMMAND",
    "MODEL",
    "TRAINING",
    "char_gpt_config",
    "train_char_gpt",
    "load_char_gpt",
    "main",
]

#: Where the shipped checkpoint and its description live (package data).
DATA_DIR = Path(__file__).resolve().parent / "data"
#: The weights, a float16 state dict (``torch.save``), 422 KiB for the shipped run.
CHECKPOINT = DATA_DIR / "char_gpt.pt"
#: The description of the run that made :data:`CHECKPOINT` (JSON).
METADATA = DATA_DIR / "char_gpt.json"

#: The command that remakes both files, as recorded in the JSON.
COMMAND = "OMP_NUM_THREADS=1 python -m attnbook.char_gpt"

#: Chapter 13's model (Pre-LN, RoPE, a sliding window as long as the training windows,
#: dropout 0.1, a tied output layer, no sqrt(d_model) embedding scale).
MODEL = dict(
    arch="decoder",
    d_model=64,
    n_heads=4,
    n_layers=4,
    d_ff=256,
    max_seq_len=64,
    positional="rope",
    sliding_window=64,
    norm_first=True,
    dropout=0.1,
    embed_scale=False,
    tie_embeddings=True,
    name="char-GPT",
)

#: The training run, as the arguments of :func:`attnbook.training.train_language_model`.
TRAINING = dict(
    steps=1200,
    batch_size=16,
    block_size=64,
    lr=3e-3,
    warmup_steps=100,
    weight_decay=0.1,
    min_lr_ratio=0.1,
    grad_clip=1.0,
    eval_every=100,
    eval_batches=8,
    seed=0,
)


def char_gpt_config(vocab_size: int) -> ModelConfig:
    """The shipped model's configuration (:data:`MODEL`) for a vocabulary of ``vocab_size``.

    Args:
        vocab_size: number of distinct characters, >= 1.

    Returns:
        A :class:`attnbook.config.ModelConfig`.

    Raises:
        TypeError: if ``vocab_size`` is not an integer.
        ValueError: if ``vocab_size < 1``.
    """
    return ModelConfig(vocab_size=check_int(vocab_size, "vocab_size", 1), **MODEL)


def train_char_gpt(
    out_dir: str | Path = DATA_DIR, *, steps: int | None = None, progress: bool = False
) -> dict:
    """Train the shipped model from scratch and write ``char_gpt.pt`` and ``char_gpt.json``.

    The corpus, tokenizer and split are chapter 13's (:func:`attnbook.text.load_corpus`,
    :class:`attnbook.text.CharTokenizer`, :func:`attnbook.text.split_ids` with 10 % held
    out); the model is :func:`char_gpt_config`, initialised by
    :func:`attnbook.training.gpt2_init_` after ``torch.manual_seed(0)``; the run is
    :data:`TRAINING` on one torch thread.

    Args:
        out_dir: directory to write to (created if missing); by default the package's
            ``data`` directory.
        steps: override ``TRAINING["steps"]`` (a quick try); ``None`` keeps it.
        progress: show a progress bar.

    Returns:
        The metadata written to ``char_gpt.json`` (a dict).

    Raises:
        TypeError: if ``steps`` is not an integer.
        ValueError: if ``steps < 1``, or as :func:`attnbook.training.train_language_model`.
    """
    settings = dict(TRAINING)
    if steps is not None:
        settings["steps"] = check_int(steps, "steps", 1)
        settings["warmup_steps"] = min(settings["warmup_steps"], settings["steps"] // 10)
        settings["eval_every"] = max(1, min(settings["eval_every"], settings["steps"]))
    corpus = text.load_corpus()
    tokenizer = text.CharTokenizer(corpus)
    train_ids, val_ids = text.split_ids(tokenizer.encode(corpus), val_fraction=0.1)
    config = char_gpt_config(tokenizer.vocab_size)
    torch.manual_seed(0)
    model = training.gpt2_init_(build_model(config))
    run = training.train_language_model(
        model, train_ids, val_ids, progress=progress, num_threads=1, **settings
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # float16 halves the file; a copy keeps the trained float32 model intact. The copy's tied
    # weight stays one tensor, so torch.save stores it once.
    state = copy.deepcopy(model).half().state_dict()
    ckpt = out_dir / CHECKPOINT.name
    torch.save(state, ckpt)
    data = ckpt.read_bytes()
    meta = {
        "model": dataclasses.asdict(config),
        "parameters": count_parameters(model),
        "training": settings,
        "corpus": f"{text.CORPUS.title}; {text.CORPUS.package}=={text.CORPUS.version}",
        "chars": tokenizer.chars,
        "val_fraction": 0.1,
        "eval_steps": run.steps.tolist(),
        "val_loss": run.val_loss.tolist(),
        "train_loss": run.train_loss.tolist(),
        "tokens_seen": run.tokens_seen,
        "seconds": run.seconds,
        "torch_threads": 1,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "dtype": "float16",
        "checkpoint": ckpt.name,
        "checkpoint_bytes": len(data),
        "checkpoint_sha256": hashlib.sha256(data).hexdigest(),
        "command": COMMAND if steps is None else f"{COMMAND} --steps {settings['steps']}",
    }
    with open(out_dir / METADATA.name, "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    return meta


def load_char_gpt(directory: str | Path = DATA_DIR) -> tuple[DecoderOnlyModel, dict]:
    """The shipped model in float32 and eval mode, and its metadata.

    Args:
        directory: where ``char_gpt.pt`` and ``char_gpt.json`` are; by default the package's
            ``data`` directory.

    Returns:
        ``(model, meta)``: a :class:`attnbook.models.DecoderOnlyModel` whose vocabulary is
        ``meta["chars"]`` (build the tokenizer as chapter 13 does and compare), and the dict
        of ``char_gpt.json``.

    Raises:
        FileNotFoundError: if either file is missing (remake them with :data:`COMMAND`).
        ValueError: if the checkpoint's SHA-256 differs from the one recorded in the JSON
            (the files do not belong together).
    """
    directory = Path(directory)
    ckpt, meta_path = directory / CHECKPOINT.name, directory / METADATA.name
    for path in (ckpt, meta_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; remake it with `{COMMAND}`")
    with open(meta_path, encoding="utf-8") as fh:
        meta = json.load(fh)
    data = ckpt.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != meta["checkpoint_sha256"]:
        raise ValueError(
            f"{ckpt} has SHA-256 {digest}, but {meta_path} records "
            f"{meta['checkpoint_sha256']}: the files do not belong together"
        )
    model = build_model(ModelConfig(**meta["model"]))
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval(), meta


def main(argv=None) -> dict:
    """Command line: ``python -m attnbook.char_gpt [--out DIR] [--steps N] [--progress]``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=DATA_DIR, help="output directory")
    p.add_argument("--steps", type=int, default=None, help="fewer steps, for a quick try")
    p.add_argument("--progress", action="store_true")
    a = p.parse_args(argv)
    meta = train_char_gpt(a.out, steps=a.steps, progress=a.progress)
    print(
        f"{meta['seconds']:.0f} s; held-out loss {meta['val_loss'][-1]:.3f}; "
        f"{meta['checkpoint_bytes']:,} bytes -> {Path(a.out) / CHECKPOINT.name}",
        file=sys.stderr,
    )
    return meta


if __name__ == "__main__":
    main()
