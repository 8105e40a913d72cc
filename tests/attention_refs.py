"""Plain attention for the flash tests: one formula, written independently of the tiled code.

``plain_attention`` computes in the dtype of ``q``: in float64 it is the reference; in float16,
bfloat16 or float32 it is the "plain same-dtype implementation" of the book's low-precision rule
(:func:`attnbook.testing.assert_low_precision_close`). It materialises the scores, repeats the
K/V heads for GQA, and gives 0 to a row with no visible key. Differentiable.
"""

from __future__ import annotations

import math

import torch

from attnbook.masks import causal_mask


def plain_attention(q, k, v, *, causal=False, scale=None):
    """(B, H, L, D) x (B, H_kv, S, D) x (B, H_kv, S, Dv) -> (B, H, L, Dv), in q's dtype."""
    G = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(G, dim=1)  # (B, H, S, D)
    v = v.repeat_interleave(G, dim=1)  # (B, H, S, Dv)
    L, S, D = q.shape[2], k.shape[2], q.shape[3]
    scale = 1 / math.sqrt(D) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale  # (B, H, L, S)
    if causal:
        s = s.masked_fill(~torch.from_numpy(causal_mask(L, S)), -math.inf)
    m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    den = e.sum(dim=-1, keepdim=True)
    return (e / torch.where(den > 0, den, torch.ones_like(den))) @ v  # (B, H, L, Dv)


def reference_attention_torch(q, k, v, *, causal=False, scale=None):
    """:func:`plain_attention` in float64: the reference (with autograd)."""
    return plain_attention(q.double(), k.double(), v.double(), causal=causal, scale=scale)
