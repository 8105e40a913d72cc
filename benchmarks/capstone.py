"""Chapter 13's capstone, measured: training time, held-out loss against the baselines, and the
KV cache's generation speed-up, for one model size and step count.

    .venv/bin/python benchmarks/capstone.py                 # the chapter's settings (~1-3 min)
    .venv/bin/python benchmarks/capstone.py --steps 5 --new-tokens 20 --out /tmp/x.json

Trains a character-level decoder (attnbook.models.DecoderOnlyModel, Pre-LN, RoPE with a sliding
window equal to the training block, dropout 0.1, GPT-2 initialisation) on the King James Bible
(attnbook.text) with attnbook.training.train_language_model, on one torch thread; then generates
``--new-tokens`` characters from a prompt with and without the KV cache (same seed, so the same
characters; checked) and reports the best of ``--repeat`` wall-clock times of each. Writes a JSON
file (default ``benchmarks/results/capstone.json``) with the settings, the machine and the
numbers. The machine is shared and busy: read the times as rough, the ratio as measured once.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from attnbook import text, training
from attnbook.models import DecoderOnlyModel, ModelConfig, count_parameters
from attnbook.sampling import generate

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--new-tokens", type=int, default=300)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS / "capstone.json")
    a = p.parse_args(argv)

    torch.set_num_threads(1)
    corpus = text.load_corpus()
    tok = text.CharTokenizer(corpus)
    train_ids, val_ids = text.split_ids(tok.encode(corpus))
    V = tok.vocab_size
    cfg = ModelConfig(
        vocab_size=V,
        d_model=a.d_model,
        n_heads=a.n_heads,
        n_layers=a.n_layers,
        d_ff=4 * a.d_model,
        positional="rope",
        sliding_window=a.block_size,
        max_seq_len=a.block_size,
        norm_first=True,
        dropout=a.dropout,
    )
    torch.manual_seed(0)
    model = training.gpt2_init_(DecoderOnlyModel(cfg))
    run = training.train_language_model(
        model,
        train_ids,
        val_ids,
        steps=a.steps,
        batch_size=a.batch_size,
        block_size=a.block_size,
        lr=a.lr,
        warmup_steps=a.steps // 10,
        eval_every=max(1, a.steps // 10),
        eval_batches=4,
        seed=0,
    )

    prompt = torch.from_numpy(tok.encode("And the king said unto"))[None]  # (1, T)
    kw = dict(temperature=1.0, top_k=5, seed=3)
    cached = generate(model, prompt, a.new_tokens, use_cache=True, **kw)
    full = generate(model, prompt, a.new_tokens, use_cache=False, **kw)

    def best(use_cache):
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            generate(model, prompt, a.new_tokens, use_cache=use_cache, **kw)
            times.append(time.perf_counter() - t0)
        return min(times)

    t_cache, t_full = best(True), best(False)
    result = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "corpus": f"{text.CORPUS.title}; {text.CORPUS.package}=={text.CORPUS.version}",
        "vocab_size": V,
        "parameters": count_parameters(model),
        "train_seconds": run.seconds,
        "tokens_seen": run.tokens_seen,
        "val_loss": run.val_loss.tolist(),
        "train_loss": run.train_loss.tolist(),
        "eval_steps": run.steps.tolist(),
        "bigram_loss": text.bigram_loss(train_ids, val_ids, V),
        "unigram_loss": text.unigram_loss(train_ids, val_ids, V),
        "log_vocab": float(np.log(V)),
        "same_tokens_with_and_without_cache": bool(torch.equal(cached, full)),
        "generate_seconds_cache": t_cache,
        "generate_seconds_no_cache": t_full,
        "kv_speedup": t_full / t_cache,
        "sample": tok.decode(cached[0]),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "load_average": os.getloadavg(),
        },
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps({k: v for k, v in result.items() if k not in ("train_loss", "sample")}, indent=1)
    )
    print(result["sample"])
    return result


if __name__ == "__main__":
    main()
