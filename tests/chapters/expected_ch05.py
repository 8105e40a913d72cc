"""Expected glued values of chapter 5 (chapters/05-self-cross-attention.md), computed independently.

``expected()`` returns, for every name the chapter glues, either

* a value — from a hand derivation (shapes, ``1 / n``, ``log(vocab)``, ``m (m - 1) / 2``, the
  blocks of a causal mask) or recomputed here with the library on the chapter's stated inputs
  and seeds (the seeded, deterministic training run ``cross_attention_run``, about 10 s of CPU);
  compare with ``rel_tol=1e-9``; or
* a :class:`Check` — for differences that a hand derivation says are 0 up to rounding:
  ``check.matches(actual, glued)`` must be True (``glued``: every value the chapter glued).
"""

from __future__ import annotations

import functools
import math

import numpy as np

NUMBER = 5
NAME = "05-self-cross-attention"


class Check:
    """A glued value checked by a predicate instead of equality.

    Args:
        predicate: ``predicate(actual, glued) -> bool``; ``glued`` holds every glued value.
        why: what the predicate encodes (shown when it fails).
    """

    def __init__(self, predicate, why: str):
        self.predicate = predicate
        self.why = why

    def matches(self, actual, glued: dict) -> bool:
        return bool(self.predicate(actual, glued))

    def __repr__(self) -> str:
        return f"Check({self.why})"


def tiny(bound: float = 1e-12) -> Check:
    """A difference that a hand derivation says is 0: a float in [0, bound]."""
    return Check(lambda v, g: isinstance(v, float) and 0.0 <= v <= bound,
                 f"0 up to rounding (<= {bound:g})")


@functools.lru_cache(maxsize=None)
def expected() -> dict:
    from attnbook import experiments

    e: dict = {}
    # Shapes (n = 3 queries, m = 5 or 7 source tokens, d_v = 4) by hand.
    e |= {"sh_self_weights": (3, 3), "sh_cross_weights": (3, 5), "sh_self_out": (3, 4),
          "sh_cross_out": (3, 4), "sh_m7_weights": (3, 7), "sh_m7_out": (3, 4),
          # rows of a softmax sum to 1; a sum does not depend on the order of its terms;
          # each query's row depends only on that query.
          "sh_row_sum_dev": tiny(1e-12), "sh_perm_diff": tiny(1e-12), "sh_q2_diff": tiny(1e-12)}
    # The torch module: (B, H, n, n), (B, H, n, m), (B, n, d_model) with B = 1, H = 2, d = 16.
    e |= {"mha_self_w": (1, 2, 3, 3), "mha_cross_w": (1, 2, 3, 5), "mha_cross_out": (1, 3, 16)}
    # The reversal run (seeded, one thread: deterministic), recomputed.
    run = experiments.cross_attention_run(n=8, vocab=16, steps=400, seed=0)
    cross = run.cross_attention[0]                      # (H, n, n)
    mirror = 8 - 1 - np.arange(8)
    hits = cross.argmax(axis=-1) == mirror              # (H, n)
    e |= {"ca_n": 8, "ca_vocab": 16, "ca_steps": 400, "ca_params": run.n_params,
          "ca_accuracy": run.eval_accuracy, "ca_eval_loss": run.eval_loss,
          "ca_chance_loss": math.log(16), "ca_uniform": 1 / 8,
          "ca_mirror_h1": float(run.mirror_mass[0, 0]),
          "ca_mirror_h2": float(run.mirror_mass[0, 1]),
          "ca_argmax_hits": int(hits.sum()), "ca_argmax_total": 2 * 8,
          "ca_min_mirror_example": float(cross[:, np.arange(8), mirror].min()),
          "ca_steps_half": experiments.first_step_below(run.loss, math.log(16) / 2, window=10)}
    # Decoder-only: the blocks of the causal mask over [prompt (5) | answer (3)], by hand.
    e |= {"do_m": 5, "do_n": 3,
          # hidden keys get weight exactly 0, so the restricted softmax is the cross-attention's
          "do_equiv_diff": tiny(1e-12)}
    # Exercises: (B, H, n, m) and (B, n, d_model); the prefix mask adds m (m - 1) / 2 pairs.
    e |= {"ex1_w_shape": (1, 8, 7, 12), "ex1_out_shape": (1, 7, 512),
          "ex4_added": 5 * 4 // 2}
    return e
