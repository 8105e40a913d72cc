"""The cost explorers of chapter 11 at their first import path (a thin re-export).

The code now lives elsewhere: the O(L²) meter (:func:`quadratic_cost_explorer`,
:func:`quadratic_cost_figure`, :data:`SEQ_LEN_VALUES`) in :mod:`attnbook.explorers.quadratic`;
the KV-cache calculator (:func:`kv_cache_explorer`, :func:`kv_cache_figure`,
:data:`CONTEXT_VALUES`) in :mod:`attnbook.explorers.kv_cache` — one calculator for chapters 7
and 11, whose context argument is now named ``context``; and the cost formulas
:func:`score_matrix_bytes` and :func:`attention_flops` in :mod:`attnbook.cost`. Every name the
book has shown keeps working here.
"""

from __future__ import annotations

from .cost import attention_flops, score_matrix_bytes
from .explorers.kv_cache import CONTEXT_VALUES, kv_cache_explorer, kv_cache_figure
from .explorers.quadratic import SEQ_LEN_VALUES, quadratic_cost_explorer, quadratic_cost_figure

__all__ = [
    "score_matrix_bytes",
    "attention_flops",
    "quadratic_cost_figure",
    "quadratic_cost_explorer",
    "kv_cache_figure",
    "kv_cache_explorer",
    "SEQ_LEN_VALUES",
    "CONTEXT_VALUES",
]
