"""Expected glued values of chapter 4's training run over several seeds: a 2x2 design.

The chapter runs ``attnbook.experiments.scaling_run(head_dim=256, steps=300, seed=s,
qk_lr_gain=16, small_step_gain=1/16)`` for seeds 0-4: four arms, {attention starts saturated:
no (scaled, big-step) / yes (small-step, unscaled)} x {a step moves the scores as far as the
scaled arm's (scaled, small-step) / as the unscaled arm's (big-step, unscaled)}. It saves every
seed's per-step curves in its executed notebook (``saved["seeds"]``, next to seed 0's full
record; see ``saved_scaling_run`` in tests/chapters/test_chapters.py, whose
``test_saved_scaling_run_is_the_library_run`` ties the start of every saved curve to a fresh
library run). Training five seeds again here would take a minute and a half, so the numbers are
derived from the saved curves: the step at which a 10-step running mean first falls below half
(and a quarter of) the chance loss is found by a plain loop (not
``experiments.first_step_below``), the ranges, medians and ratios with NumPy (or plain Python),
and the wording from the same rules the prose states. Merged into chapter 4's expected values by
tests/chapters/test_chapters.py.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

ARMS = ("scaled", "unscaled", "big-step", "small-step")
#: Each arm's part of the glued names (``run_sat_big_early_min``).
GLUE_NAME = {"scaled": "scaled", "unscaled": "unscaled", "big-step": "big", "small-step": "small"}
WINDOW = 10
#: Two arms are "about as fast" when their median step counts are within this factor.
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
    # Medians by the standard library (the chapter uses NumPy).
    med = {
        (lv, arm): float(statistics.median(h[arm] for h in per_seed))
        for lv, per_seed in (("half", halves), ("q", quarters))
        for arm in ARMS
    }

    def ratios(a, b):
        return [med[lv, a] / med[lv, b] for lv in ("half", "q")]

    def early(arm, key):  # per seed: mean of steps 0..(that seed's scaled step)
        return [
            sum(seed[key][arm][: h["scaled"] + 1]) / (h["scaled"] + 1)
            for seed, h in zip(seeds, halves)
        ]

    place = (
        "is the seed with the largest slow-down"
        if slowdown[0] == max(slowdown)
        else "is the seed with the smallest slow-down"
        if slowdown[0] == min(slowdown)
        else "lies inside this range"
    )
    sat_scaled = max(early("scaled", "saturated"))
    sat_big_start = max(seed["saturated"]["big-step"][0] for seed in seeds)  # first batch
    # Per seed: the first step with more than half of the big-step arm's batch saturated.
    sat_half = []
    for seed in seeds:
        curve = seed["saturated"]["big-step"]
        sat_half.append(next(s for s in range(len(curve)) if curve[s] > 0.5))
    sat_alone = all(r > NEAR for r in ratios("small-step", "scaled"))
    step_alone = all(r > NEAR for r in ratios("big-step", "scaled"))
    both = [
        med[lv, "unscaled"] / max(med[lv, "small-step"], med[lv, "big-step"])
        for lv in ("half", "q")
    ]
    if all(r > NEAR for r in both):
        together = (
            "together they add up: the unscaled arm, which has both, was slower than either arm "
            "with one"
        )
    elif all(r < 1 / NEAR for r in both):
        together = (
            "together they do not add up: the unscaled arm, which has both, was faster than the "
            "slower of the two arms with one"
        )
    elif all(1 / NEAR < r < NEAR for r in both):
        together = (
            "together they do not add up: the unscaled arm, which has both, was about as fast as "
            "the slower of the two arms with one"
        )
    else:
        together = "together they add up at one level and not at the other"
    handicapped = ("unscaled", "big-step", "small-step")
    early_med = {arm: statistics.median(early(arm, "saturated")) for arm in handicapped}
    by_sat = sorted(handicapped, key=lambda arm: early_med[arm])
    by_steps = sorted(handicapped, key=lambda arm: med["half", arm])
    if by_sat == by_steps:  # fewest saturated and fastest first
        pace = "the more of an arm's queries were saturated early on, the slower it learned"
    elif by_sat[0] == by_steps[-1]:
        pace = (
            "the arm with the fewest saturated queries early on learned the slowest: the share of "
            "queries past the threshold is not what sets the pace"
        )
    else:
        pace = "how many of an arm's queries were saturated early on did not order the arms' pace"
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
        "run_seed0_place": f"Seed 0, drawn above, {place}",
        "run_sat_big_half_min": min(sat_half),
        "run_sat_big_half_max": max(sat_half),
        "run_2x2_verdict": {
            (True, True): "A saturated start and large steps each slow learning on their own",
            (True, False): "A saturated start slows learning on its own, and large steps from an "
            "unsaturated start do not",
            (False, True): "Large steps slow learning on their own, and a saturated start with "
            "small steps does not",
            (False, False): "Neither a saturated start nor large steps slows learning on its own",
        }[sat_alone, step_alone],
        "run_2x2_together": together,
        "run_sat_pace": pace,
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
        ("unscaled", "small-step", "unscaled_small"),
        ("unscaled", "big-step", "unscaled_big"),
    ):
        out[f"run_r_{name}"], out[f"run_r_{name}_q"] = ratios(a, b)
    # Seed 0's held-out accuracy of the two new arms (the saved values; the fresh short run of
    # test_saved_scaling_run_is_the_library_run ties seed 0's curves to the library).
    out["run_acc_big"] = seeds[0]["eval_accuracy"]["big-step"]
    out["run_acc_small"] = seeds[0]["eval_accuracy"]["small-step"]
    return out
