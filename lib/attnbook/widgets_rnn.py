"""The γ-and-distance explorer of chapter 1 at its first import path (a thin re-export).

The code now lives in :mod:`attnbook.explorers.rnn`; every name the book has shown keeps
working here (``from attnbook.widgets_rnn import gradient_decay_explorer``).

The ``Y_RANGE as Y_RANGE`` import keeps ``Y_RANGE``, importable here but not in ``__all__``,
importable without documenting it twice.
"""

from __future__ import annotations

from .explorers.rnn import (
    DISTANCE_VALUES,
    GAMMA_VALUES,
    GradientDecay,
    gradient_decay_data,
    gradient_decay_explorer,
    gradient_decay_figure,
)
from .explorers.rnn import Y_RANGE as Y_RANGE

__all__ = [
    "GAMMA_VALUES",
    "DISTANCE_VALUES",
    "GradientDecay",
    "gradient_decay_data",
    "gradient_decay_figure",
    "gradient_decay_explorer",
]
