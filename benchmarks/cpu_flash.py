"""CPU time and peak memory of attention with and without the n x n matrix.

Four methods on one head (B = H = 1), head_dim 64, float32, n queries and n keys:

``naive``        ``attnbook.attention.scaled_dot_product_attention`` — materialises the n x n
                 scores and weights (the book's reference implementation).
``tiled_numpy``  ``attnbook.flash.tiled_attention`` — the readable FlashAttention loop.
``tiled_torch``  ``attnbook.flash.tiled_attention_torch`` (forward, no autograd graph).
``sdpa``         ``torch.nn.functional.scaled_dot_product_attention`` on the CPU.

Every (method, n) point runs in its own process, so the peak memory is that process's own:
the worker creates the inputs, reads its resident set size (``VmRSS``), resets the kernel's
peak counter (``echo 5 > /proc/self/clear_refs``), runs the method once, and reads the peak
(``VmHWM``). ``extra_bytes`` = peak - resident size before the call: what the method itself
allocated, output included. ``ratio_to_nxn`` = extra_bytes / (n * n * 4), the size of one
float32 n x n matrix. Time: wall-clock seconds of one call (the best of ``repeats`` calls for
n <= 2048). BLAS and torch use one thread each so the methods are compared on equal terms.

Usage::

    python benchmarks/cpu_flash.py                # all points, writes benchmarks/results/
    python benchmarks/cpu_flash.py --n 512 1024   # a subset
    python benchmarks/cpu_flash.py --worker naive 4096   # one point, prints one JSON line

Linux only (``/proc``). Takes a few minutes; the naive method at n = 16384 needs ~4 GB.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
METHODS = ("naive", "tiled_numpy", "tiled_torch", "sdpa")
SIZES = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIM = 64
BLOCK_Q, BLOCK_K = 256, 512  # tiles of the tiled methods: 256 x 512 float32 scores = 0.5 MiB
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# glibc: serve every allocation >= 128 KiB by mmap and give it back on free, with no dynamic
# raise of the threshold, so the resident size before a call holds no freed-but-kept heap that
# the call could reuse unseen.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def worker(method: str, n: int, repeats: int) -> dict:
    """Run one (method, n) point in this process; return its measurements."""
    import numpy as np

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, HEAD_DIM)).astype(np.float32) for _ in range(3))
    if method == "naive":
        from attnbook.attention import scaled_dot_product_attention

        def run():
            return scaled_dot_product_attention(q, k, v)
    elif method == "tiled_numpy":
        from attnbook.flash import tiled_attention

        def run():
            return tiled_attention(q, k, v, block_q=BLOCK_Q, block_k=BLOCK_K)
    elif method in ("tiled_torch", "sdpa"):
        import torch

        torch.set_num_threads(1)
        qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))
        if method == "tiled_torch":
            from attnbook.flash import tiled_attention_torch

            def run():
                with torch.no_grad():
                    return tiled_attention_torch(qt, kt, vt, block_q=BLOCK_Q, block_k=BLOCK_K)
        else:
            import torch.nn.functional as F

            def run():
                with torch.no_grad():
                    return F.scaled_dot_product_attention(qt, kt, vt)
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")

    # warm-up at a small size: one-time library set-up (BLAS buffers, torch's kernels) is not
    # the method's memory
    q_full, k_full, v_full = q, k, v
    q, k, v = (a[..., :256, :].copy() for a in (q_full, k_full, v_full))
    if method in ("tiled_torch", "sdpa"):
        qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))
    run()
    q, k, v = q_full, k_full, v_full
    if method in ("tiled_torch", "sdpa"):
        qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))

    with open("/proc/self/clear_refs", "w") as fh:  # reset the peak (VmHWM) to the current RSS
        fh.write("5")
    rss_before = _status_kib("VmRSS") * 1024
    t0 = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - t0
    peak = _status_kib("VmHWM") * 1024
    for _ in range(repeats - 1):
        del out
        t0 = time.perf_counter()
        out = run()
        seconds = min(seconds, time.perf_counter() - t0)
    out = np.asarray(out)
    extra = max(peak - rss_before, 0)
    return {
        "method": method,
        "n": n,
        "head_dim": HEAD_DIM,
        "seconds": seconds,
        "peak_rss_bytes": peak,
        "rss_before_bytes": rss_before,
        "extra_bytes": extra,
        "nxn_float32_bytes": n * n * 4,
        "ratio_to_nxn": extra / (n * n * 4),
        "output_finite": bool(np.isfinite(out).all()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--out", type=Path, default=RESULTS / "cpu_flash.csv")
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "N"))
    args = parser.parse_args(argv)

    if args.worker:
        method, n = args.worker[0], int(args.worker[1])
        print(json.dumps(worker(method, n, repeats=3 if n <= 2048 else 1)))
        return 0

    env = {**os.environ, **THREAD_ENV, **MALLOC_ENV}
    rows = []
    for n in args.n:
        for method in args.methods:
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", method, str(n)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                raise SystemExit(f"worker {method} n={n} failed with exit {proc.returncode}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"n={n:6d} {method:12s} {row['seconds']:8.3f} s  extra "
                f"{row['extra_bytes'] / 2**20:9.1f} MiB  = {row['ratio_to_nxn']:.4f} x n^2 fp32",
                flush=True,
            )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0])
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    import numpy
    import torch

    meta = {
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
        "threads": 1,
        "dtype": "float32",
        "batch": 1,
        "heads": 1,
        "head_dim": HEAD_DIM,
        "block_q": BLOCK_Q,
        "block_k": BLOCK_K,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    summary = {}
    for method in args.methods:
        big = [r for r in rows if r["method"] == method and r["n"] == max(args.n)]
        if big:
            summary[method] = {
                "n": big[0]["n"],
                "extra_bytes": big[0]["extra_bytes"],
                "ratio_to_nxn": big[0]["ratio_to_nxn"],
                "seconds": big[0]["seconds"],
            }
    meta["summary_at_largest_n"] = summary
    args.out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
