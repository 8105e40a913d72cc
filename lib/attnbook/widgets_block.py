"""The norm-placement explorer of chapter 9 at its first import path (a thin re-export).

The code now lives in :mod:`attnbook.explorers.block`; every name the book has shown keeps
working here (``from attnbook.widgets_block import norm_placement_explorer``).
"""

from __future__ import annotations

from .explorers.block import (
    ARMS,
    DEPTH_VALUES,
    PLACEMENTS,
    gradient_norms_at_init,
    norm_placement_explorer,
    norm_placement_figure,
)

__all__ = [
    "DEPTH_VALUES",
    "PLACEMENTS",
    "ARMS",
    "gradient_norms_at_init",
    "norm_placement_figure",
    "norm_placement_explorer",
]
