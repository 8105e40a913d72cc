"""Expected glued values of chapter 4's training run over several seeds, with its control arm.

The chapter runs ``attnbook.experiments.scaling_run(head_dim=256, steps=300, seed=s,
q_init_gain=16)`` for seeds 0-4 and saves every seed's per-step curves in its executed notebook
(``saved["seeds"]``, next to seed 0's full record; see ``saved_scaling_run`` in
tests/chapters/test_chapters.py, whose ``test_saved_scaling_run_is_the_library_run`` ties the
start of every saved curve to a fresh library run). Training five seeds again here would take a
minute, so the numbers are derived from the saved curves: the step at which a 10-step running
mean first falls below half the chance loss is found by a plain loop (not
``experiments.first_step_below``), the ranges, medians and ratios with NumPy, and the wording
from the same rules the prose states. Merged into chapter 4's expected values by
tests/chapters/test_chapters.py.
"""

from __future__ import annotations

import math

import numpy as np

ARMS = ("scaled", "unscaled", "control")
WINDOW = 10
#: The control "learned as slowly as" an arm when its median step count is within this factor.
NEAR = 1.15


def first_below(curve, threshold: float, window: int = WINDOW) -> int | None:
    """The first step ``s`` with ``mean(curve[s - window + 1 : s + 1]) < threshold``, by a loop."""
    curve = [float(x) for x in curve]
    for s in range(window - 1, len(curve)):
        if sum(curve[s - window + 1 : s + 1]) / window < threshold:
            return s
    return None


def steps_to_half(saved: dict) -> list[dict]:
    """Per saved seed, each arm's step to half the chance loss ``log(n_values) / 2``."""
    half = math.log(saved["settings"]["n_values"]) / 2
    return [{arm: first_below(seed["loss"][arm], half) for arm in ARMS} for seed in saved["seeds"]]


def expected(saved: dict) -> dict:
    """The glued keys of the seeds and the control, from the saved curves."""
    seeds = saved["seeds"]
    halves = steps_to_half(saved)
    n = {arm: np.array([h[arm] for h in halves], dtype=np.float64) for arm in ARMS}
    slowdown = n["unscaled"] / n["scaled"]
    vs_unscaled = n["control"] / n["unscaled"]

    def early(arm, key):  # per seed: mean of steps 0..(that seed's scaled step)
        return np.array(
            [np.mean(seed[key][arm][: h["scaled"] + 1]) for seed, h in zip(seeds, halves)]
        )

    med = {arm: float(np.median(n[arm])) for arm in ARMS}
    near = {
        arm: max(med["control"], med[arm]) / min(med["control"], med[arm]) < NEAR
        for arm in ("scaled", "unscaled")
    }
    like = (
        "unscaled"
        if near["unscaled"] and not near["scaled"]
        else "scaled"
        if near["scaled"] and not near["unscaled"]
        else "between"
    )
    place = (
        "is the seed with the largest slow-down"
        if slowdown[0] == slowdown.max()
        else "is the seed with the smallest slow-down"
        if slowdown[0] == slowdown.min()
        else "lies inside this range"
    )
    out = {
        "run_n_seeds": len(seeds),
        "run_slowdown_min": float(slowdown.min()),
        "run_slowdown_max": float(slowdown.max()),
        "run_slowdown_median": float(np.median(slowdown)),
        "run_control_vs_unscaled_min": float(vs_unscaled.min()),
        "run_control_vs_unscaled_max": float(vs_unscaled.max()),
        "run_std_init_control": seeds[0]["score_std_init"]["control"],
        "run_sat_scaled_early_max": float(early("scaled", "saturated").max()),
        "run_sat_unscaled_early_min": float(early("unscaled", "saturated").min()),
        "run_sat_unscaled_early_max": float(early("unscaled", "saturated").max()),
        "run_satshare_unscaled_early_max": float(early("unscaled", "saturated_grad_share").max()),
        "run_sat_control_early_min": float(early("control", "saturated").min()),
        "run_sat_control_early_max": float(early("control", "saturated").max()),
        "run_satshare_control_early_max": float(early("control", "saturated_grad_share").max()),
        "run_seed0_place": f"Seed 0, drawn above, {place}",
        "run_control_verdict": {
            "unscaled": "It learned as slowly as the unscaled arm: the saturation at the start, "
            "not the larger step, is what slowed the unscaled arm down",
            "scaled": "It learned as fast as the scaled arm: the larger step, not the "
            "saturation, is what slowed the unscaled arm down",
            "between": "It fell between the two arms: neither effect alone explains the slower "
            "unscaled arm",
        }[like],
        "run_control_summary": {
            "unscaled": "learned about as slowly: the saturation, not the step size, made the "
            "difference",
            "scaled": "learned as fast as the scaled head: the step size, not the saturation, "
            "made the difference",
            "between": "fell between the two: neither the saturation nor the step size alone "
            "made the difference",
        }[like],
    }
    for arm in ARMS:
        out[f"run_steps_{arm}_min"] = int(n[arm].min())
        out[f"run_steps_{arm}_max"] = int(n[arm].max())
        out[f"run_steps_{arm}_median"] = float(np.median(n[arm]))
    return out
