"""What a recurrent state of fixed size can carry: the copy task over n and the hidden size.

Runs :func:`attnbook.experiments.copy_capacity_run` (LSTMs of several hidden sizes ``d_h`` and
one attention layer learn to copy ``n`` tokens, each for the same number of updates on the
same batches) for a grid of ``n`` and ``d_h`` and several seeds, and writes one row per
(seed, model, n) to ``benchmarks/results/copy_capacity.csv`` and the settings, the command and
the machine to ``copy_capacity.json``. Chapter 1 reads the CSV (the grid takes minutes; the
chapter trains one point of it live and checks it against its row).

Usage::

    python benchmarks/copy_capacity.py                      # the committed grid
    python benchmarks/copy_capacity.py --n 4 --hidden 16 --seeds 0 --steps 20 --out /tmp/x

One thread (``OMP_NUM_THREADS=1``): the tensors are tiny. Accuracies are deterministic for a
seed on one thread; the seconds are not.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIELDS = (
    "seed",
    "model",
    "hidden_size",
    "n",
    "accuracy",
    "chance_accuracy",
    "n_params",
    "state_floats",
    "steps",
    "seconds",
)
N_ITEMS = (4, 8, 16, 32)
HIDDEN_SIZES = (16, 32, 64, 128)
SEEDS = (0, 1)


def rows(result, seed: int) -> list[dict]:
    """One CSV row per (model, n) of a :class:`~attnbook.experiments.CopyCapacityResult`."""
    out = []
    for j, n in enumerate(result.n_items):
        for i, h in enumerate(result.hidden_sizes):
            out.append(
                dict(
                    seed=seed,
                    model="lstm",
                    hidden_size=int(h),
                    n=int(n),
                    accuracy=float(result.lstm_accuracy[i, j]),
                    chance_accuracy=result.chance_accuracy,
                    n_params=int(result.lstm_params[i]),
                    state_floats=int(result.lstm_state_floats[i]),
                    steps=result.steps,
                    seconds=float(result.time_s[i, j]),
                )
            )
        out.append(
            dict(
                seed=seed,
                model="attention",
                hidden_size="",
                n=int(n),
                accuracy=float(result.attention_accuracy[j]),
                chance_accuracy=result.chance_accuracy,
                n_params=int(result.attention_params[j]),
                state_floats=int(result.attention_read_floats[j]),
                steps=result.steps,
                seconds=float(result.time_s[-1, j]),
            )
        )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=N_ITEMS)
    p.add_argument("--hidden", type=int, nargs="+", default=HIDDEN_SIZES)
    p.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--out", type=Path, default=HERE / "results")
    args = p.parse_args(argv)

    import torch

    from attnbook import experiments

    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    table = []
    for seed in args.seeds:
        result = experiments.copy_capacity_run(
            n_items=args.n, hidden_sizes=args.hidden, steps=args.steps, seed=seed
        )
        table += rows(result, seed)
        print(f"seed {seed}: {result.wall_time_s:.0f} s", flush=True)
        with open(args.out / "copy_capacity.csv", "w", newline="") as fh:  # after each seed
            writer = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(table)
    meta = dict(
        command="python benchmarks/copy_capacity.py " + " ".join(argv or sys.argv[1:]),
        n_items=list(args.n),
        hidden_sizes=list(args.hidden),
        seeds=list(args.seeds),
        steps=args.steps,
        settings="copy_capacity_run defaults otherwise",
        seconds=time.perf_counter() - t0,
        machine=platform.processor() or platform.machine(),
        python=platform.python_version(),
        torch=torch.__version__,
        num_threads=1,
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    (args.out / "copy_capacity.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
