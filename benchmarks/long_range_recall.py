"""Long-range recall over seeds and distances: when does each model stop solving it?

Runs :func:`attnbook.experiments.long_range_recall_run` (a vanilla RNN, an LSTM and one
attention layer of about the same size learn to recall a signal token ``Δ <= max_k`` steps
back; each trains until it is at least 95% accurate at every ``Δ`` or its budget of updates is
spent) for a grid of ``max_k`` and several seeds, and writes one row per (seed, max_k, model)
to ``benchmarks/results/long_range_recall.csv`` and the settings, the command and the machine
to ``long_range_recall.json`` (the CSV's first line, a ``#`` comment, repeats the command and
the machine). Chapter 1 reads the CSV (the grid takes minutes; the chapter
trains its seed-0, ``max_k = 16`` point live and checks it against its row).

Usage::

    python benchmarks/long_range_recall.py                  # the committed grid
    python benchmarks/long_range_recall.py --max-k 8 --seeds 0 --steps 50 --out /tmp/x
    # the RNN alone, distances up to 32 in sequences of 65 tokens (the length of max_k 64):
    python benchmarks/long_range_recall.py --max-k 32 --seq-len 65 --models rnn \
        --name long_range_recall_len65

One thread (``torch.set_num_threads(1)``): the tensors are tiny. Results are deterministic for
a seed on one thread on a given machine; the seconds are not.

Columns: ``solved_step`` is the number of updates after which the model was solved (empty if
not within ``steps``); ``min_accuracy`` and ``worst_k`` are its lowest held-out accuracy after
its last update and the distance where it occurred (the first, on ties); ``grad_ratio`` is the
signal gradient at ``Δ = 1`` over that at ``Δ = max_k``, before training; ``loss_change`` the
run's convergence check (empty when fewer than two windows were trained); ``accuracy_by_k``
the held-out accuracy after its last update at each distance ``Δ = 1 .. max_k``, separated by
spaces (the per-distance profile behind ``min_accuracy``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIELDS = (
    "seed",
    "max_k",
    "model",
    "solved_step",
    "min_accuracy",
    "worst_k",
    "n_params",
    "hidden_size",
    "grad_ratio",
    "loss_change",
    "accuracy_by_k",
    "steps",
    "seconds",
)
MAX_KS = (8, 16, 24, 32, 64)
SEEDS = (0, 1, 2, 3, 4)
MODELS = ("rnn", "lstm", "attention")


def rows(result) -> list[dict]:
    """One CSV row per model of a :class:`~attnbook.experiments.LongRangeRecallResult`."""
    out = []
    for name in (m for m in MODELS if m in result.accuracy):
        acc = result.accuracy[name]  # (max_k,)
        worst = int(acc.argmin())
        grad = result.signal_gradient[name]  # (max_k,)
        change = float(result.loss_change[name])
        out.append(
            dict(
                seed=result.seed,
                max_k=result.max_k,
                model=name,
                solved_step=("" if result.solved_step[name] is None else result.solved_step[name]),
                min_accuracy=float(acc[worst]),
                worst_k=int(result.ks[worst]),
                n_params=int(result.n_params[name]),
                hidden_size=result.hidden_size.get(name, ""),
                grad_ratio=float(grad[0] / grad[-1]),
                loss_change="" if math.isnan(change) else change,
                accuracy_by_k=" ".join(repr(float(a)) for a in acc),
                steps=result.steps,
                seconds=float(result.time_s[name]),
            )
        )
    return out


def _cpu_name() -> str:
    """The CPU's model name where /proc/cpuinfo gives it, else the platform's."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-k", type=int, nargs="+", default=MAX_KS)
    p.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--seq-len", type=int, default=None, help="default max_k + 1")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--name", default="long_range_recall", help="file name of the CSV and JSON")
    args = p.parse_args(argv)
    # Checked before anything trains: a run that stopped at its second max_k left a partial CSV
    # beside the old JSON.
    if args.seq_len is not None and args.seq_len < max(args.max_k) + 1:
        p.error(
            f"--seq-len {args.seq_len} is shorter than max(--max-k) + 1 = {max(args.max_k) + 1}"
        )
    if args.seq_len is not None and args.name == p.get_default("name"):
        p.error("--seq-len needs its own --name (it would overwrite the committed grid)")

    import torch

    from attnbook import experiments

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python benchmarks/long_range_recall.py", *(argv or sys.argv[1:])])
    machine = _cpu_name()
    header = f"# {command} | {machine}, torch {torch.__version__}, 1 thread\n"
    t0 = time.perf_counter()
    table = []
    for max_k in args.max_k:
        for seed in args.seeds:
            result = experiments.long_range_recall_run(
                max_k=max_k,
                steps=args.steps,
                clip_norm=1.0,
                seed=seed,
                num_threads=1,
                seq_len=args.seq_len,
                models=tuple(args.models),
            )
            table += rows(result)
            print(
                f"max_k {max_k}, seed {seed}: {result.solved_step}, {result.wall_time_s:.0f} s",
                flush=True,
            )
            with open(args.out / f"{args.name}.csv", "w", newline="") as fh:  # each run
                fh.write(header)
                writer = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
                writer.writeheader()
                writer.writerows(table)
    meta = dict(
        command=command,
        max_k=list(args.max_k),
        seeds=list(args.seeds),
        steps=args.steps,
        seq_len=args.seq_len,
        models=list(args.models),
        settings="long_range_recall_run defaults otherwise (clip_norm 1.0)",
        seconds=time.perf_counter() - t0,
        machine=machine,
        python=platform.python_version(),
        torch=torch.__version__,
        num_threads=1,
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    (args.out / f"{args.name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
