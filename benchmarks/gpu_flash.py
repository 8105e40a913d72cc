"""GPU benchmark: the Triton FlashAttention kernel vs torch's SDPA (flash backend) vs naive.

bfloat16, B = 4, H = 16, N = 1024 ... 16384 queries and keys, head_dim 64 and 128, causal and
non-causal, forward and forward + backward. The throughput is reported in TFLOP/s of the
attention matmuls: forward ``4 B H N^2 D`` FLOPs (half of it when causal), forward + backward
3.5 times that (the backward does five N x N x D matmuls to the forward's two; FlashAttention-2's
convention, Dao 2023, Section 4). The naive baseline materialises the ``B H N N`` scores and
is skipped where they would not fit in the GPU's free memory.

A correctness check runs first and the script stops (exit 1) if it fails: the kernel's output
and gradients against a float32 reference must be within twice the error of torch's own
bfloat16 SDPA, plus a small floor.

Usage::

    python benchmarks/gpu_flash.py                   # on a CUDA machine, < 5 minutes; writes
                                                     # benchmarks/results/gpu_flash.{csv,json}
    python benchmarks/gpu_flash.py --dry-run-cpu     # no GPU: the same code path on the CPU
                                                     # through Triton's interpreter, tiny sizes

The script needs torch, triton and this repository's ``lib`` (it adds ``lib`` to ``sys.path``
itself, so it also runs on a GPU machine where attnbook is not installed).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TIME_BUDGET_S = 270  # stop measuring (and write what is done) after this long


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--dry-run-cpu",
        action="store_true",
        help="run on the CPU under TRITON_INTERPRET=1 at a tiny size",
    )
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="sequence lengths N")
    p.add_argument("--head-dims", type=int, nargs="+", default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="CSV to write (a JSON with the metadata is written next to it); "
        "default benchmarks/results/gpu_flash.csv on a GPU, none on --dry-run-cpu",
    )
    return p.parse_args(argv)


ARGS = parse_args()
if ARGS.dry_run_cpu:
    # must happen before attnbook.flash_triton (and its @triton.jit) is imported
    os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(HERE.parent / "lib"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

from attnbook.flash import flash_attention, select_backend  # noqa: E402


def naive_attention(q, k, v, causal):
    """Materialised attention: bf16 scores, float32 softmax, bf16 weights."""
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)  # (B, H, N, N)
    if causal:
        n = q.shape[-2]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, -math.inf)
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v  # (B, H, N, D)


def sdpa_flash(q, k, v, causal):
    """torch's SDPA restricted to its FlashAttention backend (any backend on the CPU)."""
    if q.is_cuda:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def triton_attention(q, k, v, causal):
    return flash_attention(q, k, v, causal=causal, backend="triton")


METHODS = {"triton": triton_attention, "sdpa_flash": sdpa_flash, "naive": naive_attention}


def bench_ms(fn, grads_to_none, device) -> float:
    """Median milliseconds of ``fn()``: triton.testing.do_bench on a GPU, a wall clock on CPU."""
    if device == "cuda":
        return float(triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grads_to_none))
    fn()  # warm-up
    times = []
    for _ in range(3):
        for t in grads_to_none:
            t.grad = None
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[1]


def time_method(fn, q, k, v, do, causal, mode, device) -> float:
    """Median milliseconds of one forward (``mode="fwd"``) or forward + backward call."""
    if mode == "fwd":

        def call():
            with torch.no_grad():
                return fn(q, k, v, causal)

        return bench_ms(call, [], device)

    def call():
        fn(q, k, v, causal).backward(do)

    return bench_ms(call, [q, k, v], device)


def correctness_check(device, dtype, head_dims, n, batch, heads) -> list[dict]:
    """Kernel vs float32 reference, judged against torch's own bf16 SDPA error. Raises on fail."""
    report = []
    gen = torch.Generator(device="cpu").manual_seed(0)
    for d in head_dims:
        for causal in (False, True):
            q, k, v, do = (
                torch.randn(batch, heads, n, d, generator=gen).to(device, dtype) for _ in range(4)
            )
            ref_in = [t.float().requires_grad_() for t in (q, k, v)]
            ref = naive_attention(*ref_in, causal)  # float32 throughout
            ref_grads = torch.autograd.grad(ref, ref_in, do.float())
            results = {}
            for name, fn in (("triton", triton_attention), ("sdpa_flash", sdpa_flash)):
                inp = [t.clone().requires_grad_() for t in (q, k, v)]
                out = fn(*inp, causal)
                grads = torch.autograd.grad(out, inp, do)
                results[name] = [out, *grads]
            row = {"head_dim": d, "causal": causal}
            for i, what in enumerate(("out", "dq", "dk", "dv")):
                expected = [ref, *ref_grads][i]
                got = results["triton"][i]
                if not torch.isfinite(got).all():
                    raise SystemExit(
                        f"correctness: triton {what} is not finite (D={d}, causal={causal})"
                    )
                err = (got.float() - expected).abs().max().item()
                err_sdpa = (results["sdpa_flash"][i].float() - expected).abs().max().item()
                floor = 2 * torch.finfo(dtype).eps * max(1.0, expected.abs().max().item())
                row[f"{what}_err"], row[f"{what}_err_sdpa"] = err, err_sdpa
                if err > 2 * err_sdpa + floor:
                    raise SystemExit(
                        f"correctness: triton {what} error {err:.3e} > 2 x SDPA's {err_sdpa:.3e}"
                        f" + {floor:.1e} (D={d}, causal={causal})"
                    )
            report.append(row)
            print(
                f"check D={d:3d} causal={causal!s:5}: "
                + ", ".join(
                    f"{w} {row[w + '_err']:.2e} (sdpa {row[w + '_err_sdpa']:.2e})"
                    for w in ("out", "dq", "dk", "dv")
                ),
                flush=True,
            )
    return report


def main() -> int:
    if ARGS.dry_run_cpu:
        device = "cpu"
        sizes = ARGS.sizes or [64, 128]
        head_dims = ARGS.head_dims or [64]
        batch, heads = ARGS.batch or 1, ARGS.heads or 2
        out_path = ARGS.out
    else:
        if not torch.cuda.is_available():
            print(
                "no CUDA device: run with --dry-run-cpu to exercise the script on the CPU",
                file=sys.stderr,
            )
            return 2
        device = "cuda"
        sizes = ARGS.sizes or [1024, 2048, 4096, 8192, 16384]
        head_dims = ARGS.head_dims or [64, 128]
        batch, heads = ARGS.batch or 4, ARGS.heads or 16
        out_path = ARGS.out or RESULTS / "gpu_flash.csv"
    dtype = torch.bfloat16
    start = time.perf_counter()

    probe = torch.zeros(1, 1, 16, head_dims[0], device=device, dtype=dtype)
    assert select_backend(probe, probe, probe, "triton") == "triton"
    check = correctness_check(device, dtype, head_dims, n=min(sizes[0], 1000) - 3, batch=2, heads=4)

    rows = []
    stopped_early = False
    for d in head_dims:
        for causal in (False, True):
            for n in sizes:
                for mode in ("fwd", "fwd_bwd"):
                    if time.perf_counter() - start > TIME_BUDGET_S:
                        stopped_early = True
                        break
                    gen = torch.Generator(device="cpu").manual_seed(n)
                    q, k, v = (
                        torch.randn(batch, heads, n, d, generator=gen)
                        .to(device, dtype)
                        .requires_grad_(mode == "fwd_bwd")
                        for _ in range(3)
                    )
                    do = torch.randn_like(q)
                    flops = 4 * batch * heads * n * n * d * (0.5 if causal else 1.0)
                    flops *= 3.5 if mode == "fwd_bwd" else 1.0
                    for method, fn in METHODS.items():
                        row = {
                            "n": n,
                            "head_dim": d,
                            "causal": causal,
                            "mode": mode,
                            "method": method,
                            "batch": batch,
                            "heads": heads,
                            "ms": "",
                            "tflops": "",
                            "skipped": "",
                        }
                        if method == "naive":
                            # bf16 scores + fp32 softmax + bf16 weights; about three
                            # times that with autograd
                            need = batch * heads * n * n * (2 + 4 + 4 + 2)
                            need *= 3 if mode == "fwd_bwd" else 1
                            free = torch.cuda.mem_get_info()[0] if device == "cuda" else 8 * 2**30
                            if need > 0.8 * free:
                                row["skipped"] = (
                                    f"needs ~{need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free"
                                )
                                rows.append(row)
                                continue
                        try:
                            ms = time_method(fn, q, k, v, do, causal, mode, device)
                        except torch.cuda.OutOfMemoryError:
                            torch.cuda.empty_cache()
                            row["skipped"] = "out of memory"
                            rows.append(row)
                            continue
                        row["ms"] = float(f"{ms:.5g}")
                        row["tflops"] = float(f"{flops / (ms * 1e-3) / 1e12:.4g}")
                        rows.append(row)
                        print(
                            f"D={d:3d} causal={causal!s:5} N={n:5d} {mode:7s} {method:10s} "
                            f"{ms:9.3f} ms {row['tflops']:8.2f} TFLOP/s",
                            flush=True,
                        )
                    del q, k, v, do
                    if device == "cuda":
                        torch.cuda.empty_cache()

    # Triton / SDPA throughput ratios, from the times (same FLOPs); target: forward >= 0.9
    ratios = []
    for r in rows:
        if r["method"] != "triton" or r["tflops"] == "":
            continue
        ref = [
            s
            for s in rows
            if s["method"] == "sdpa_flash"
            and s["tflops"] != ""
            and all(s[key] == r[key] for key in ("n", "head_dim", "causal", "mode"))
        ]
        if ref:
            ratios.append(
                {key: r[key] for key in ("n", "head_dim", "causal", "mode")}
                | {"triton_over_sdpa": round(ref[0]["ms"] / r["ms"], 3)}
            )
    fwd = [x["triton_over_sdpa"] for x in ratios if x["mode"] == "fwd"]
    if fwd:
        print(
            f"Triton forward / SDPA flash forward: min {min(fwd):.2f}, "
            f"median {sorted(fwd)[len(fwd) // 2]:.2f} (target >= 0.9)"
        )
    print(
        f"total {time.perf_counter() - start:.1f} s" + (" (stopped early)" if stopped_early else "")
    )

    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        meta = {
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)",
            "dry_run_cpu": ARGS.dry_run_cpu,
            "torch": torch.__version__,
            "triton": triton.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "dtype": "bfloat16",
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "stopped_early": stopped_early,
            "correctness": check,
            "triton_over_sdpa": ratios,
            "rows": rows,
        }
        out_path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"wrote {out_path} and {out_path.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
