"""The √d_k explorer: score variance and softmax saturation against the head dimension.

The figure is :func:`attnbook.viz.scaling_figure`, computed by :mod:`attnbook.scaling`. Also
importable from :mod:`attnbook.widgets`.
"""

from __future__ import annotations

import math
from typing import Sequence

from .. import viz
from ..checks import check_bool, check_choice, check_increasing, check_int, check_seed
from .base import Control, Explorer

__all__ = ["D_K_VALUES", "N_KEYS_VALUES", "SCALED_X_RANGE", "scaling_explorer"]

#: Slider stops of ``d_k`` in the scaling explorer: the powers of two from 1 to 1024.
D_K_VALUES = tuple(2**i for i in range(11))
#: Stops of the number of keys ``n_keys`` in the scaling explorer.
N_KEYS_VALUES = (4, 8, 16, 32, 64)
#: Half-width of the score axis when the scores are scaled (N(0, 1), so 4 standard deviations).
SCALED_X_RANGE = 4.0


def scaling_explorer(
    d_k: int = 64, scaled: bool = True, n_keys: int = 16, *,
    d_k_values: Sequence[int] = D_K_VALUES, n_keys_values: Sequence[int] = N_KEYS_VALUES,
    n_samples: int = 2000, n_draws: int = 200, seed: int = 0,
) -> Explorer:
    """The √d_k explorer (chapter 3): score variance and softmax saturation against d_k.

    Controls: ``d_k`` (a slider over ``d_k_values``, 1 to 1024 by default), ``scaled`` (divide
    the scores by ``sqrt(d_k)``, on/off) and ``n_keys`` (keys per query, a slider). The figure
    is :func:`attnbook.viz.scaling_figure`: the histogram of ``n_samples`` scores with their
    measured and expected variance (``d_k`` unscaled, 1 scaled; Vaswani et al., 2017, footnote
    4), and the softmax weights of one query over ``n_keys`` keys, sorted and averaged over
    ``n_draws`` draws, with the mean largest weight and mean entropy
    (:func:`attnbook.scaling.saturation_stats`). The score axis is fixed within each mode —
    ``[-4 sqrt(max d_k), 4 sqrt(max d_k)]`` unscaled, ``[-4, 4]`` scaled — so dragging ``d_k``
    shows the spread growing without scaling and staying put with it.

    Args:
        d_k: initial head dimension, one of ``d_k_values``.
        scaled: initial state of the scaling toggle.
        n_keys: initial number of keys, one of ``n_keys_values``.
        d_k_values: the slider stops, increasing integers in [1, 4096].
        n_keys_values: the stops of ``n_keys``, increasing integers in [1, 1024].
        n_samples: scores per histogram, >= 2 (modest: every grid point is precomputed).
        n_draws: draws averaged in the softmax panel, >= 1.
        seed: random seed (histogram ``seed``, softmax panel ``seed + 1``), the same for every
            setting so that settings differ only by what the controls change.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`; its static HTML precomputes
        ``len(d_k_values) * 2 * len(n_keys_values)`` settings (110 by default, a few seconds).

    Raises:
        TypeError: naming the argument, if ``scaled`` is not a bool, ``n_samples``,
            ``n_draws``, ``seed`` or a stop is not an integer, or a stop list is not a
            sequence.
        ValueError: naming the argument, if ``d_k`` or ``n_keys`` is not one of its stops, a
            stop list is empty, out of range or not increasing, ``n_samples`` < 2,
            ``n_draws`` < 1 or ``seed`` < 0.
    """
    d_k_values = check_increasing(d_k_values, "d_k_values", minimum=1, maximum=4096)
    n_keys_values = check_increasing(n_keys_values, "n_keys_values", minimum=1, maximum=1024)
    check_choice(d_k, "d_k", d_k_values)
    check_choice(n_keys, "n_keys", n_keys_values)
    scaled = check_bool(scaled, "scaled")
    n_samples = check_int(n_samples, "n_samples", 2)  # two samples measure a variance
    n_draws = check_int(n_draws, "n_draws", 1)
    seed = check_seed(seed)
    # The score axis is fixed within each mode, so dragging d_k shows the spread (unscaled) or
    # its absence (scaled): 4 standard deviations of the largest unscaled d_k, or of N(0, 1).
    unscaled_range = 4 * math.sqrt(max(d_k_values))

    def render(d_k, scaled, n_keys):
        return viz.scaling_figure(
            d_k, scaled, n_keys, n_samples=n_samples, n_draws=n_draws, seed=seed,
            x_range=SCALED_X_RANGE if scaled else unscaled_range,
        )

    controls = [
        Control("d_k", "d<sub>k</sub>", "slider", d_k_values, int(d_k), plain_label="d_k"),
        Control(
            "scaled", "divide scores by √d<sub>k</sub>", "toggle", (False, True), scaled,
            plain_label="divide scores by √d_k",
        ),
        Control("n_keys", "keys S", "slider", n_keys_values, int(n_keys), plain_label="keys S"),
    ]
    return Explorer(controls, render, title="√d_k explorer")
