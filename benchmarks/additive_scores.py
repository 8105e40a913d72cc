"""CPU time of additive (Bahdanau) scores against dot-product scores of the same width.

Both methods score ``L`` queries against ``S = L`` keys after projecting them to the same width
``d_a`` (float32, one head, NumPy, one BLAS thread):

``additive``  ``attnbook.attention.additive_scores_core`` — ``v_a^T tanh(W_q q_i + W_k k_j)``:
              the two projections, then an ``(L, S, d_a)`` array of sums, its ``tanh``, and a
              reduction with ``v_a``.
``dot``       ``(q W_q^T) (k W_k^T)^T`` — the same two projections, then one ``L x d_a`` by
              ``d_a x S`` matrix product.

By the matrix-multiply FLOP count (``attnbook.cost.additive_score_flops``) the two are equal:
``2 d_a (L d_q + S d_k + L S)``. What differs is the element-wise work (``L S d_a`` additions
and ``tanh`` evaluations) and the ``(L, S, d_a)`` array it passes through — ``d_a`` times the
bytes of the ``L x S`` score matrix. The script measures the time ratio additive / dot with
``attnbook.timing.time_call`` (best of ``repeat`` calls) and writes it, with the FLOPs and the
bytes of that array, to ``results/additive_scores.csv`` and ``.json``.

Usage::

    python benchmarks/additive_scores.py            # L = 64 ... 1024, about 30 s on one core
    python benchmarks/additive_scores.py --L 64 128 # a subset

Times are wall-clock on a shared machine: read the ratios, not the seconds.
"""

from __future__ import annotations

import os

# One BLAS thread, set before NumPy is imported: the methods are compared on equal terms.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "lib"))  # runs from a checkout without installing

from attnbook import attention, cost, timing  # noqa: E402

RESULTS = HERE / "results"
SIZES = (64, 128, 256, 512, 1024)
D_MODEL = 64  # d_q = d_k = d_a


def inputs(L: int, d: int, seed: int = 0):
    """float32 q (L, d), k (L, d), W_q, W_k (d, d) and v_a (d,), seeded."""
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((L, d), dtype=np.float32) for _ in range(2))
    W_q, W_k = (
        rng.standard_normal((d, d), dtype=np.float32) / np.float32(np.sqrt(d)) for _ in range(2)
    )
    v_a = rng.standard_normal(d, dtype=np.float32)
    return q, k, W_q, W_k, v_a


def dot_scores(q, k, W_q, W_k):
    """Dot-product scores of the projected queries and keys: (q W_q^T)(k W_k^T)^T."""
    return (q @ W_q.T) @ (k @ W_k.T).T  # (L, d_a) @ (d_a, S) -> (L, S)


def measure(L: int, d: int, repeat: int) -> dict:
    q, k, W_q, W_k, v_a = inputs(L, d)
    add = timing.time_call(
        lambda: attention.additive_scores_core(q, k, W_q, W_k, v_a), repeat=repeat
    ).min_s
    dot = timing.time_call(lambda: dot_scores(q, k, W_q, W_k), repeat=repeat).min_s
    return {
        "L": L,
        "S": L,
        "d_a": d,
        "additive_s": add,
        "dot_s": dot,
        "ratio": add / dot,
        "flops_additive": cost.additive_score_flops(L, L, d, d, d),
        "flops_dot": 2 * d * (L * d + L * d) + 2 * L * L * d,  # projections + Q K^T
        "intermediate_bytes": L * L * d * 4,  # the (L, S, d_a) float32 array
        "score_bytes": L * L * 4,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--L", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "additive_scores.csv")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for L in args.L:
        row = measure(L, D_MODEL, args.repeat)
        rows.append(row)
        print(
            f"L = S = {L:5d}, d_a = {D_MODEL}: additive {row['additive_s'] * 1e3:9.3f} ms, "
            f"dot {row['dot_s'] * 1e3:8.3f} ms, ratio {row['ratio']:7.1f}",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    meta = {
        "machine": platform.machine(),
        "cpu_model": platform.processor(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "threads": 1,
        "dtype": "float32",
        "d_q": D_MODEL,
        "d_k": D_MODEL,
        "d_a": D_MODEL,
        "repeat": args.repeat,
        "statistic": "min",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_time_s": time.perf_counter() - t0,
        "rows": rows,
    }
    args.out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
