"""The explorers of chapters 7 and 8 at their first import path (a thin re-export).

The code now lives in :mod:`attnbook.explorers`: the KV-cache calculator
(:func:`kv_cache_explorer`, :func:`kv_cache_figure`, :func:`kv_variants` and the stops
:data:`CONTEXT_VALUES`, :data:`BATCH_VALUES`, :data:`KV_DTYPES`) in
:mod:`attnbook.explorers.kv_cache` — the one calculator of chapters 7 and 11 —, the position
explorer (:func:`position_explorer`, :func:`position_figure`, :data:`POSITION_VALUES`,
:data:`BASE_VALUES`) in :mod:`attnbook.explorers.positional`, and :func:`format_bytes` in
:mod:`attnbook.cost`. Every name the book has shown keeps working here.
"""

from __future__ import annotations

from .cost import format_bytes
from .explorers.kv_cache import (
    BATCH_VALUES,
    CONTEXT_VALUES,
    KV_DTYPES,
    kv_cache_explorer,
    kv_cache_figure,
    kv_variants,
)
from .explorers.positional import (
    BASE_VALUES,
    POSITION_VALUES,
    position_explorer,
    position_figure,
)

__all__ = [
    "CONTEXT_VALUES",
    "BATCH_VALUES",
    "KV_DTYPES",
    "POSITION_VALUES",
    "BASE_VALUES",
    "format_bytes",
    "kv_variants",
    "kv_cache_figure",
    "kv_cache_explorer",
    "position_figure",
    "position_explorer",
]
