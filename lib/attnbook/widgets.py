"""The explorers of chapters 2, 3 and 6 at their first import path (a thin re-export).

The code now lives in :mod:`attnbook.explorers`, one module per concept:
``Control``, ``Explorer`` and ``MAX_GRID`` in :mod:`attnbook.explorers.base`,
:func:`scaling_explorer` in :mod:`attnbook.explorers.scaling`, :func:`mask_explorer` in
:mod:`attnbook.explorers.masks` and :func:`referent_explorer` in
:mod:`attnbook.explorers.pretrained`. Every name the book has shown keeps working here
(``from attnbook.widgets import scaling_explorer``).

The ``X as X`` imports keep the names that were importable here but not in ``__all__``
(``MAX_GRID``, ``N_KEYS_VALUES``, ``SCALED_X_RANGE``) importable, without documenting them
twice.
"""

from __future__ import annotations

from .explorers.base import MAX_GRID as MAX_GRID
from .explorers.base import Control, Explorer
from .explorers.masks import mask_explorer
from .explorers.pretrained import referent_explorer
from .explorers.scaling import D_K_VALUES, scaling_explorer
from .explorers.scaling import N_KEYS_VALUES as N_KEYS_VALUES
from .explorers.scaling import SCALED_X_RANGE as SCALED_X_RANGE

__all__ = ["Control", "Explorer", "scaling_explorer", "mask_explorer", "referent_explorer",
           "D_K_VALUES"]
