"""Expected glued values of chapter 4's training run over several seeds: a 2x2 design.

The chapter runs ``attnbook.experiments.scaling_run(head_dim=256, steps=300, seed=s,
qk_lr_gain=16, small_step_gain=1/16)`` for seeds 0-4: four arms, {attention starts
concentrated (scores sqrt(d_k) times as spread): no (scaled, big-step) / yes (small-step,
unscaled)} x {a step moves the scores as far as the scaled arm's (scaled, small-step) / as the
unscaled arm's (big-step, unscaled)}. It saves every seed's per-step curves in its executed
notebook (``saved["seeds"]``, next to the full record of the drawn seed, the one with the median
unscaled/scaled ratio; see ``saved_scaling_run`` in tests/chapters/test_chapters.py, whose
``test_saved_scaling_run_is_the_library_run`` ties the start of every saved curve to a fresh
library run). Training five seeds again here would take a minute and a half, so the numbers are
derived from the saved curves: the step at which a 10-step running mean first falls below half
(and a quarter of) the chance loss is found by a plain loop (not
``experiments.first_step_below``), the ranges, medians and per-seed ratios with NumPy (or plain
Python), and the wording from the same rules the prose states. Merged into chapter 4's expected
values by tests/chapters/test_chapters.py.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

ARMS = ("scaled", "unscaled", "big-step", "small-step")
#: Each arm's part of the glued names (``run_sat_big_early_min``).
GLUE_NAME = {"scaled": "scaled", "unscaled": "unscaled", "big-step": "big", "small-step": "small"}
WINDOW = 10
#: Two arms are "about as fast" when the median of their per-seed step ratio is within this
#: factor of 1 (at half and at a quarter of the chance loss).
NEAR = 1.15
#: The late phase starts here.
LATE = 120
#: The bottom panel of the figure (the saturated queries' gradient share) shows these first steps.
SHARE_STEPS = 80


def first_below(curve, threshold: float, window: int = WINDOW) -> int | None:
    """The first step ``s`` with ``mean(curve[s - window + 1 : s + 1]) < threshold``, by a loop."""
    curve = [float(x) for x in curve]
    for s in range(window - 1, len(curve)):
        if sum(curve[s - window + 1 : s + 1]) / window < threshold:
            return s
    return None


def steps_to_half(saved: dict, fraction: float = 1 / 2) -> list[dict]:
    """Per saved seed, each arm's step to ``fraction`` of the chance loss ``log(n_values)``."""
    level = math.log(saved["settings"]["n_values"]) * fraction
    return [{arm: first_below(seed["loss"][arm], level) for arm in ARMS} for seed in saved["seeds"]]


def expected(saved: dict) -> dict:
    """The glued keys of the seeds and the 2x2 design, from the saved curves."""
    seeds = saved["seeds"]
    halves = steps_to_half(saved)
    quarters = steps_to_half(saved, 1 / 4)
    n = {arm: [h[arm] for h in halves] for arm in ARMS}
    slowdown = [u / s for u, s in zip(n["unscaled"], n["scaled"])]

    def ratios(a, b):  # median over the seeds of a's steps over b's, at 1/2 and 1/4 of chance
        return [
            float(statistics.median(h[a] / h[b] for h in per_seed))
            for per_seed in (halves, quarters)
        ]

    # The drawn seed: the median of the per-seed slow-down (the first of equals in sorted order).
    drawn = sorted(range(len(seeds)), key=lambda i: slowdown[i])[len(seeds) // 2]

    def early(arm, key):  # per seed: mean of steps 0..(that seed's scaled step)
        return [
            sum(seed[key][arm][: h["scaled"] + 1]) / (h["scaled"] + 1)
            for seed, h in zip(seeds, halves)
        ]

    sat_scaled = max(early("scaled", "saturated"))
    sat_big_start = max(seed["saturated"]["big-step"][0] for seed in seeds)  # first batch
    # Per seed: the first step with more than half of the big-step arm's batch saturated.
    sat_half = []
    for seed in seeds:
        curve = seed["saturated"]["big-step"]
        sat_half.append(next(s for s in range(len(curve)) if curve[s] > 0.5))
    out = {
        "run_n_seeds": len(seeds),
        "run_slowdown_min": min(slowdown),
        "run_slowdown_max": max(slowdown),
        "run_slowdown_median": float(statistics.median(slowdown)),
        "run_near": NEAR - 1,
        "run_quarter_chance": math.log(saved["settings"]["n_values"]) / 4,
        "run_sat_scaled_early_phrase": "the scaled arm had none"
        if sat_scaled < 0.005
        else f"the scaled arm had at most {round(sat_scaled * 100)}%",
        "run_satshare_unscaled_early_max": max(early("unscaled", "saturated_grad_share")),
        "run_sat_big_start_phrase": "none of its first batch's queries saturated"
        if sat_big_start < 0.005
        else f"at most {round(sat_big_start * 100)}% of its first batch's queries saturated",
        "run_sat_small_start_min": min(seed["saturated"]["small-step"][0] for seed in seeds),
        "run_sat_small_start_max": max(seed["saturated"]["small-step"][0] for seed in seeds),
        "run_seed": seeds[drawn]["seed"],
        "run_satshare_early_max": max(max(early(arm, "saturated_grad_share")) for arm in ARMS),
        "run_sat_big_half_min": min(sat_half),
        "run_sat_big_half_max": max(sat_half),
        "run_late_step": LATE,
        "run_share_steps": SHARE_STEPS,
        "run_sat_late_min": min(
            float(np.mean(seed["saturated"][arm][LATE:]))
            for seed in seeds
            for arm in ("unscaled", "big-step")
        ),
        "run_loss_late_max": max(
            float(np.mean(seed["loss"][arm][LATE:]))
            for seed in seeds
            for arm in ("unscaled", "big-step")
        ),
    }
    for arm in ("scaled", "unscaled"):
        out[f"run_steps_{arm}_min"] = min(n[arm])
        out[f"run_steps_{arm}_max"] = max(n[arm])
        out[f"run_steps_{arm}_median"] = float(statistics.median(n[arm]))
    for arm in ("unscaled", "big-step", "small-step"):
        sat = early(arm, "saturated")
        out[f"run_sat_{GLUE_NAME[arm]}_early_min"] = min(sat)
        out[f"run_sat_{GLUE_NAME[arm]}_early_max"] = max(sat)
    for a, b, name in (
        ("small-step", "scaled", "small"),
        ("big-step", "scaled", "big"),
        ("unscaled", "scaled", "unscaled"),
        ("unscaled", "big-step", "unscaled_big"),
    ):
        out[f"run_r_{name}"], out[f"run_r_{name}_q"] = ratios(a, b)
    # If the two costs multiplied: large steps' (big-step) times a concentrated start's
    # (small-step), at half of chance.
    out["run_r_product"] = out["run_r_big"] * out["run_r_small"]
    # Unscaled against big-step, seed by seed, at both levels.
    unscaled_big = [h["unscaled"] / h["big-step"] for per in (halves, quarters) for h in per]
    out["run_r_unscaled_big_min"] = min(unscaled_big)
    out["run_r_unscaled_big_max"] = max(unscaled_big)
    # The lowest held-out accuracy of any arm in any seed.
    out["run_acc_min"] = min(min(seed["eval_accuracy"].values()) for seed in seeds)

    # The bottom panel of the figure (drawn seed, first SHARE_STEPS steps): the highest running
    # mean of the saturated queries' gradient share (over steps 0..t while t < WINDOW).
    def running_means(curve):
        curve = [float(x) for x in curve]
        return [
            sum(curve[max(0, t - WINDOW + 1) : t + 1]) / min(t + 1, WINDOW)
            for t in range(len(curve))
        ]

    out["run_satshare_peak"] = max(
        max(running_means(seeds[drawn]["saturated_grad_share"][arm][:SHARE_STEPS])) for arm in ARMS
    )

    # How far a step moved the softmax's scores (probe batch, first updates): per seed the mean
    # over the recorded steps, then the median over the seeds of the per-seed ratio.
    def move(a, b):
        return float(
            statistics.median(
                float(np.mean(seed["score_step"][a])) / float(np.mean(seed["score_step"][b]))
                for seed in seeds
            )
        )

    out["run_move_steps"] = len(seeds[drawn]["score_step"]["scaled"])
    out["run_sqrt_dk"] = math.sqrt(saved["settings"]["head_dim"])
    out["run_move_small"] = move("small-step", "scaled")
    out["run_move_unscaled"] = move("unscaled", "scaled")
    out["run_move_big"] = move("big-step", "scaled")
    out["run_move_big_unscaled"] = move("big-step", "unscaled")
    small_match = 1 / NEAR < out["run_move_small"] < NEAR
    big_match = 1 / NEAR < out["run_move_big_unscaled"] < NEAR
    if small_match and big_match:
        out["run_move_verdict"] = "both columns match: the design's premise holds"
    elif small_match:
        further = "further" if out["run_move_big_unscaled"] > 1 else "less far"
        out["run_move_verdict"] = (
            "the small steps match and the large ones do not: the big-step arm's scores moved "
            f"{further} than the unscaled arm's"
        )
    elif big_match:
        out["run_move_verdict"] = "the large steps match and the small ones do not"
    else:
        out["run_move_verdict"] = "neither column matches"
    # The drawn seed's held-out accuracy of the two new arms (the saved values; the fresh short
    # run of test_saved_scaling_run_is_the_library_run ties every seed's curves to the library).
    out["run_acc_big"] = seeds[drawn]["eval_accuracy"]["big-step"]
    out["run_acc_small"] = seeds[drawn]["eval_accuracy"]["small-step"]
    return out
