"""Expected glued values of chapter 4's temperature explorer section, computed independently.

The chapter sweeps 121 log-spaced temperatures from 1/16 to 32 over 16 standard-normal scores
(``numpy.random.default_rng(0)``) with ``attnbook.explorers.temperature.temperature_sweep``.
Here the same sweep is written out in float64: the softmax of ``z / T`` by hand, and
``||diag(p) - p p^T||_F`` from its entries ``p_i (delta_ij - p_j)`` — no library call. The
uniform value is the hand derivation ``sqrt(S - 1) / S``; the norms with respect to ``z`` divide
by ``T`` (chain rule). Merged into chapter 4's expected values by tests/chapters/test_chapters.py.
"""

from __future__ import annotations

import math

import numpy as np


def expected() -> dict:
    z = np.random.default_rng(0).standard_normal(16)  # (S,)
    temps = np.geomspace(1 / 16, 32, 121)  # (n_T,)
    x = z[None, :] / temps[:, None]  # (n_T, S)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)  # (n_T, S)
    eye = np.eye(16)
    jac = np.sqrt(((p[:, :, None] * (eye[None] - p[:, None, :])) ** 2).sum(axis=(1, 2)))
    peak = int(np.argmax(jac))
    return {
        "tx_n_keys": 16,
        "tx_peak_T": float(temps[peak]),
        "tx_peak_jac": float(jac[peak]),
        "tx_peak_pmax": float(p[peak].max()),
        "tx_cold_jac": float(jac[0]),
        "tx_hot_jac": float(jac[-1]),
        "tx_uniform_jac": math.sqrt(15) / 16,
        # d softmax(z / T) / dz = J / T by the chain rule: the norm with respect to z.
        "tx_peak_jac_z": float(jac[peak] / temps[peak]),
        "tx_hot_jac_z": float(jac[-1] / 32),
    }
