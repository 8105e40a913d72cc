"""Expected glued values of chapter 2's "three steps" and "apple" sections, computed independently.

Chapter 2's other values are in ``expected_02`` of ``test_chapters.py``, which merges
``expected()`` from here. Two kinds of reference:

* the hand-made vectors (``attnbook.explorers.three_steps``: query (1, 1); keys and values
  (2, 0) for *ate*, (0, 2) for *released*, *chip* and *stock*, (0, 1) for *new*, (1, 1) for
  *apple*, 0 for the other words; scale ``1/sqrt(2)``): closed-form expressions in ``math.exp``
  and ``math.sqrt``, derived by hand below, compared with ``rel_tol=1e-9``;
* the real model (all-MiniLM-L6-v2): the hidden states from ``BertEncoder.hidden_states`` (tested
  against ``transformers`` in ``tests/test_pretrained.py``), anchors averaged and cosines taken
  here with float64 NumPy (not ``sense_similarity`` / ``cosine_similarity``); compared within
  ``1e-5`` (float32 states).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from matchers import Near

#: Tolerance for glued cosines of float32 hidden states recomputed here.
COS_ATOL = 1e-5

CONTEXTS = (
    "I ate an apple.",
    "She peeled the apple.",
    "Apple released a new chip.",
    "Apple's stock fell.",
    "I saw an apple.",
)
TEMPLATES = ("Tell me about the {}.", "This is the {}.", "We talked about the {}.")


def toy() -> dict:
    """The hand-made example, by hand. With s = sqrt(2) (the scaled score of a dot product 2)
    and E = e^s:

    * "I ate an apple": scores (0, s, 0, s) -> weights (1, E, 1, E) / (2E + 2);
      o = E/(2E + 2) * ((2, 0) + (1, 1)) = (3, 1) * E/(2E + 2); cos with (1, 0) = 3/sqrt(10).
    * "Apple's stock fell": the mirror image, cos with company 3/sqrt(10).
    * "Apple released a new chip": dots (2, 2, 0, 1, 2), E1 = e^(1/sqrt 2);
      o = (E, 5E + E1) / (3E + E1 + 1); cos with (0, 1) = (5E + E1) / |(E, 5E + E1)|.
    * "I saw an apple": weights (1, 1, 1, E)/(E + 3); o = (1, 1) E/(E + 3); cos 1/sqrt(2).
    * without apple's own key: "I ate an apple" o = (2E/(E + 2), 0), cos 1; "I saw an apple"
      weights 1/3 each and o = 0.
    """
    s = math.sqrt(2)
    E, E1 = math.exp(s), math.exp(1 / s)
    w_hi = E / (2 * E + 2)
    chip = np.array([E, 5 * E + E1])
    return {
        "ts_dot_hi": 2.0,
        "ts_dot_lo": 0.0,
        "ts_score_hi": s,
        "ts_exp_hi": E,
        "ts_w_hi": w_hi,
        "ts_w_lo": 1 / (2 * E + 2),
        "ts_o_fruit": 3 * w_hi,
        "ts_o_company": w_hi,
        "ts_cos_start": 1 / s,
        "ts_cos_fruit": 3 / math.sqrt(10),
        "ts_cos_company": 1 / math.sqrt(10),
        "ts_stock_cos_company": 3 / math.sqrt(10),
        "ts_chip_cos_company": chip[1] / math.hypot(*chip),
        "ts_saw_o": E / (E + 3),
        "ts_saw_cos": 1 / s,
        "ts_alone_cos_fruit": 1.0,
        "ts_saw_alone_w": 1 / 3,
        "ts_saw_alone_norm": 0.0,
    }


@functools.lru_cache(maxsize=None)
def real_model() -> dict:
    """The "apple" measurements, from hidden states and float64 NumPy."""
    from attnbook import pretrained

    model = pretrained.load_minilm()
    near = functools.partial(Near, atol=COS_ATOL)  # float32 states: cosines known to COS_ATOL

    def vec(sentence: str, word: str) -> np.ndarray:
        tokens, h = model.hidden_states(sentence)  # (7, T, d)
        return h[:, tokens.index(word)].astype(np.float64)  # (7, d)

    anchors = {
        s: np.mean([vec(t.format(s), s) for t in TEMPLATES], axis=0) for s in ("fruit", "company")
    }  # each (7, d)

    def cos(a, b):
        return np.einsum("ld,ld->l", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    sim = {c: {s: cos(vec(c, "apple"), a) for s, a in anchors.items()} for c in CONTEXTS}
    marg = {c: sim[c]["fruit"] - sim[c]["company"] for c in CONTEXTS}  # (7,) each
    chip = sim["Apple released a new chip."]["company"]
    best = int(np.argmax(chip))
    last = [marg[c][-1] for c in CONTEXTS]
    n_pos = sum(int((m > 0).sum()) for m in marg.values())
    n_all = 7 * len(CONTEXTS)
    # does each (sentence, anchor) cosine grow from layer 0 to layer `best`?
    n_rise = sum(int(sim[c][s][best] > sim[c][s][0]) for c in CONTEXTS for s in sim[c])
    n_rise_all = 2 * len(CONTEXTS)
    return {
        "sn_n_contexts": len(CONTEXTS),
        "sn_l0_fruit": near(sim["I ate an apple."]["fruit"][0]),
        "sn_l0_company": near(sim["I ate an apple."]["company"][0]),
        "sn_last_ate": near(marg["I ate an apple."][-1]),
        "sn_last_chip": near(marg["Apple released a new chip."][-1]),
        "sn_last_stock": near(marg["Apple's stock fell."][-1]),
        "sn_last_saw": near(marg["I saw an apple."][-1]),
        "sn_last_min": near(min(last)),
        "sn_last_max": near(max(last)),
        "sn_chip_company_l0": near(chip[0]),
        "sn_chip_company_best_layer": best,
        "sn_chip_company_best": near(chip[best]),
        "sn_saw_company_l0": near(sim["I saw an apple."]["company"][0]),
        "sn_saw_company_at_best": near(sim["I saw an apple."]["company"][best]),
        "sn_rise": (
            f"in all {n_rise_all} (sentence, anchor) pairs"
            if n_rise == n_rise_all
            else f"in {n_rise} of the {n_rise_all} (sentence, anchor) pairs"
        ),
        "sn_chip_marg_at_best": near(marg["Apple released a new chip."][best]),
        "sn_saw_marg_at_best": near(marg["I saw an apple."][best]),
        "sn_ate_marg_at_best": near(marg["I ate an apple."][best]),
        "sn_chip_vs_saw_at_best": near(
            marg["I saw an apple."][best] - marg["Apple released a new chip."][best]
        ),
        "sn_ate_vs_saw_at_best": near(
            marg["I ate an apple."][best] - marg["I saw an apple."][best]
        ),
        "sn_closer_fruit": (
            f"in all {n_all} (sentence, layer) pairs"
            if n_pos == n_all
            else f"in {n_pos} of the {n_all} (sentence, layer) pairs"
        ),
        "sn_flip_verdict": (
            "never flips it: by this measure the model does not pin apple to company"
            if n_pos == n_all
            else "flips it in some layers"
        ),
    }


def expected() -> dict:
    """Every glue name of the two sections, with its independent value."""
    return {**toy(), **real_model()}
