"""Expected glued values of chapter 4's training run over several seeds: a 2x2 design.

The chapter runs ``attnbook.experiments.scaling_run(head_dim=256, steps=300, seed=s,
qk_lr_gain=g_s, small_step_gain=h_s)`` for seeds 0-4, with each seed's gains from
``experiments.match_step_gain``: four arms, {attention starts concentrated (scores sqrt(d_k)
times as spread): no (scaled, big-step) / yes (small-step, unscaled)} x {a step moves the scores
as far as the scaled arm's (scaled, small-step) / as the unscaled arm's (big-step, unscaled)}.
It saves every seed's per-step curves in its executed
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
#: The 2x2 pairs: (glued name, arm, the arm it is compared with).
#: Ratios of step counts within this factor of 1 are "about as many steps".
TIE = 1.05
PAIRS = (
    ("big", "big-step", "scaled"),
    ("us", "unscaled", "small-step"),
    ("small", "small-step", "scaled"),
    ("ub", "unscaled", "big-step"),
    ("unscaled", "unscaled", "scaled"),
)


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

    def early(arm, key):  # per seed: mean of steps 0..(that arm's own step to half of chance)
        return [sum(seed[key][arm][: h[arm] + 1]) / (h[arm] + 1) for seed, h in zip(seeds, halves)]

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
        "run_quarter_chance": math.log(saved["settings"]["n_values"]) / 4,
        "run_sat_big_start_phrase": "none of its first batch's queries saturated"
        if sat_big_start < 0.005
        else f"at most {round(sat_big_start * 100)}% of its first batch's queries saturated",
        "run_sat_small_start_min": min(seed["saturated"]["small-step"][0] for seed in seeds),
        "run_sat_small_start_max": max(seed["saturated"]["small-step"][0] for seed in seeds),
        "run_seed": seeds[drawn]["seed"],
        "run_sat_big_half_min": min(sat_half),
        "run_sat_big_half_max": max(sat_half),
        # After learning: from each seed's step below a quarter of chance, the arms with
        # large steps' mean saturated share and mean loss.
        "run_sat_late_min": min(
            float(np.mean(seed["saturated"][arm][q[arm] :]))
            for seed, q in zip(seeds, quarters)
            for arm in ("unscaled", "big-step")
            if q[arm] is not None
        ),
        "run_loss_late_max": max(
            float(np.mean(seed["loss"][arm][q[arm] :]))
            for seed, q in zip(seeds, quarters)
            for arm in ("unscaled", "big-step")
            if q[arm] is not None
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
    # The 2x2 reading: per pair, the per-seed ratios of step counts at both levels (range and
    # verdict) and the median over the seeds at half of chance.
    verdicts = {}
    for name, a, b in PAIRS:
        both = [h[a] / h[b] for per in (halves, quarters) for h in per]
        out[f"run_r_{name}_min"], out[f"run_r_{name}_max"] = min(both), max(both)
        out[f"run_r_{name}"] = float(statistics.median(h[a] / h[b] for h in halves))
        # A ratio within TIE of 1 is "about as many steps".
        if all(r > TIE for r in both):
            verdicts[name] = "more steps in every seed"
        elif all(r < 1 / TIE for r in both):
            verdicts[name] = "fewer steps in every seed"
        elif all(r < TIE for r in both):
            verdicts[name] = "fewer or about as many steps in every seed"
        elif all(r > 1 / TIE for r in both):
            verdicts[name] = "more or about as many steps in every seed"
        else:
            verdicts[name] = "more steps in some seeds and fewer in others"
        out[f"run_v_{name}"] = verdicts[name]
    # The chapter glues the ranges and verdicts of the first four pairs and every median.
    for key in ("run_r_unscaled_min", "run_r_unscaled_max", "run_v_unscaled"):
        del out[key]
    out["run_tie"] = TIE - 1
    start_costs = verdicts["small"] == verdicts["ub"] == "more steps in every seed"
    # Large steps count as a cost when they cost in every seed or in the median (beyond a tie).
    steps_cost = verdicts["big"] == "more steps in every seed" or out["run_r_big"] > TIE
    if start_costs and not steps_cost:
        out["run_2x2_conclusion"] = (
            "What slowed the unscaled arm here is its concentrated start, not its large steps"
        )
    elif start_costs:
        out["run_2x2_conclusion"] = "A concentrated start cost steps here, and so did large steps"
    else:
        out["run_2x2_conclusion"] = (
            "The design does not single out one cause of the unscaled arm's slower start here"
        )
    out["run_adding_up"] = (
        "Large steps did not add to the cost of a concentrated start: from it, they are a way out"
        if verdicts["us"]
        in ("fewer steps in every seed", "fewer or about as many steps in every seed")
        and out["run_r_us"] < 1 / TIE
        else "Whether large steps add to the cost of a concentrated start, "
        "these seeds do not settle"
    )
    # The lowest held-out accuracy of any arm in any seed.
    out["run_acc_min"] = min(min(seed["eval_accuracy"].values()) for seed in seeds)

    # "Where the gradient comes from": per seed and arm, the mean over steps 0..(that arm's own
    # step to half of chance; the whole run if never) of the saturated share and of the
    # saturated queries' gradient share; the largest over arms and seeds.
    def own_race(seed, h, arm, key):
        last = h[arm] if h[arm] is not None else len(seed[key][arm]) - 1
        return sum(seed[key][arm][: last + 1]) / (last + 1)

    out["run_sat_own_max"] = max(
        own_race(seed, h, arm, "saturated") for seed, h in zip(seeds, halves) for arm in ARMS
    )
    out["run_satshare_own_max"] = max(
        own_race(seed, h, arm, "saturated_grad_share")
        for seed, h in zip(seeds, halves)
        for arm in ARMS
    )

    # The gains, each seed's (match_step_gain's trials, saved): the first trial is the
    # first-order gain sqrt(d_k) (1/sqrt(d_k)); the last is the gain the run used, and its ratio
    # is recomputed here from the run's own saved score changes.
    d_k = saved["settings"]["head_dim"]
    out["run_sqrt_dk"] = math.sqrt(d_k)
    matched = True
    for key, arm, target, gain_name, first_order in (
        ("big", "big-step", "unscaled", "qk_lr_gain", math.sqrt(d_k)),
        ("small", "small-step", "scaled", "small_step_gain", 1 / math.sqrt(d_k)),
    ):
        gains, firsts = [], []
        for seed in seeds:
            m = seed["match"][arm]
            assert math.isclose(m["trials"][0][0], first_order, rel_tol=1e-12), m
            assert m["trials"][-1][0] == seed[gain_name], (m, seed[gain_name])
            first = m["score_steps"]  # matched over the first updates
            ratio = float(np.mean(seed["score_step"][arm][:first])) / float(
                np.mean(seed["score_step"][target][:first])
            )
            assert math.isclose(ratio, m["trials"][-1][1], rel_tol=1e-5), (ratio, m)
            matched &= abs(math.log(ratio)) <= math.log1p(m["rtol"])
            gains.append(seed[gain_name])
            firsts.append(m["trials"][0][1])
        out[f"run_first_{key}_min"], out[f"run_first_{key}_max"] = min(firsts), max(firsts)
    out["run_match_rtol"] = seeds[0]["match"]["big-step"]["rtol"]
    out["run_match_steps"] = seeds[0]["match"]["big-step"]["score_steps"]
    out["run_match_phrase"] = (
        "in every seed both gains matched" if matched else "not every seed's gains matched"
    )
    first = out["run_match_steps"]

    def step(arm, seed, last=first):  # mean |change of a score| over updates 0..last-1
        return float(np.mean(seed["score_step"][arm][:last]))

    # The unscaled arm's step over the scaled arm's: the ratio of their medians over the seeds
    # (first updates).
    out["run_step_ratio"] = statistics.median(step("unscaled", x) for x in seeds) / (
        statistics.median(step("scaled", x) for x in seeds)
    )
    for arm in ARMS:
        # A step over the spread of the scores at the start: the median over the seeds.
        out[f"run_rel_{GLUE_NAME[arm]}"] = statistics.median(
            step(arm, x) / x["score_std_init"][arm] for x in seeds
        )
        # Over the arm's own race to half of chance.
        out[f"run_race_{GLUE_NAME[arm]}"] = statistics.median(
            step(arm, x, h[arm] + 1) for x, h in zip(seeds, halves)
        )
    # The matched pairs over their races: the ratios of the medians, and the small-step phrase.
    out["run_race_ratio_big"] = out["run_race_big"] / out["run_race_unscaled"]
    out["run_race_ratio_small"] = out["run_race_small"] / out["run_race_scaled"]
    # "In absolute terms the small-step arm's steps were no smaller than the scaled arm's;
    # relative to the spread ... about ... times smaller" (the chapter asserts the first).
    assert out["run_race_ratio_small"] > 1 / TIE, out["run_race_ratio_small"]
    out["run_rel_ratio_small"] = out["run_rel_scaled"] / out["run_rel_small"]
    # The unscaled arm is the scaled arm with W_Q, W_K d_k**(1/4) times larger (and their lr).
    out["run_dk_quarter"] = d_k**0.25
    # The drawn seed's held-out accuracy of the two new arms (the saved values; the fresh short
    # run of test_saved_scaling_run_is_the_library_run ties every seed's curves to the library).
    out["run_acc_big"] = seeds[drawn]["eval_accuracy"]["big-step"]
    out["run_acc_small"] = seeds[drawn]["eval_accuracy"]["small-step"]
    # The drawn seed's big-step arm, steps 0..(its step to half of chance): the step with the
    # largest saturated share of the gradient (the first of equals), that share and the share of
    # saturated queries then, and the step to half of chance.
    big = seeds[drawn]
    last = halves[drawn]["big-step"]
    share = [float(x) for x in big["saturated_grad_share"]["big-step"][: last + 1]]
    peak = max(range(len(share)), key=lambda t: (share[t], -t))
    out["run_peak_step_big"] = peak
    out["run_peak_share_big"] = share[peak]
    out["run_peak_sat_big"] = float(big["saturated"]["big-step"][peak])
    out["run_steps_half_big"] = last
    return out
