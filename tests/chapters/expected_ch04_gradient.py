"""Expected glued values of chapter 4's "What the query receives", computed independently.

The chapter calls ``attnbook.scaling.query_gradient_stats(d, 16, 10_000, threshold=0.99,
rng=d)`` for d_k = 64 and 512. Here the same draws are made from the documented stream (per draw
one block of ``17 * d_k + 16`` standard normals from ``numpy.random.default_rng(d)``: the query,
the 16 keys row by row, the 16 values; the stream does not depend on how it is cut into chunks),
and the gradient of ``l = sum_j p_j v_j`` with respect to the query is taken by
``torch.autograd`` in float64 — no library call. Merged into chapter 4's expected values by
tests/chapters/test_chapters.py.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

N_KEYS, N_DRAWS, THRESHOLD = 16, 10_000, 0.99


def _arm(d_k: int, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(largest weight, ||dl/dq||) per draw, by autograd, in chunks of 500 draws."""
    gen = np.random.default_rng(seed)
    block = (1 + N_KEYS) * d_k + N_KEYS
    max_w, grad = [], []
    for _ in range(N_DRAWS // 500):
        x = torch.from_numpy(gen.standard_normal((500, block)))  # (500, block) float64
        q = x[:, :d_k].clone().requires_grad_(True)  # (500, d_k)
        k = x[:, d_k : (1 + N_KEYS) * d_k].reshape(500, N_KEYS, d_k)  # (500, S, d_k)
        v = x[:, (1 + N_KEYS) * d_k :]  # (500, S)
        p = torch.softmax(scale * (k @ q[:, :, None])[..., 0], dim=-1)  # (500, S)
        (p * v).sum().backward()  # draws are independent: one backward gives each draw's
        max_w.append(p.max(dim=-1).values.detach().numpy())
        grad.append(q.grad.norm(dim=-1).numpy())
    return np.concatenate(max_w), np.concatenate(grad)


@functools.lru_cache(maxsize=None)
def draws() -> dict:
    """{(d_k, arm): (largest weight, ||dl/dq||)} for the chapter's two head dimensions."""
    return {
        (d, arm): _arm(d, 1 / math.sqrt(d) if arm == "scaled" else 1.0, d)
        for d in (64, 512)
        for arm in ("scaled", "unscaled")
    }


def expected() -> dict:
    e: dict = {"qg_threshold": THRESHOLD}
    for (d, arm), (w, g) in draws().items():
        sat = w > THRESHOLD
        e[f"qg_sat_{arm}_{d}"] = float(sat.mean())
        e[f"qg_mean_{arm}_{d}"] = float(g.mean())
        e[f"qg_median_{arm}_{d}"] = float(np.median(g))
        if arm == "unscaled":
            e[f"qg_satshare_unscaled_{d}"] = float(g[sat].sum() / g.sum())
    e["qg_mean_ratio_512"] = e["qg_mean_unscaled_512"] / e["qg_mean_scaled_512"]
    e["qg_median_ratio_512"] = e["qg_median_scaled_512"] / e["qg_median_unscaled_512"]
    w, g = draws()[512, "unscaled"]
    e["mis_n_nonfinite"] = int((~np.isfinite(w) | ~np.isfinite(g)).sum())
    return e
