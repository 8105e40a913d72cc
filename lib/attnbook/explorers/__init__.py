"""The book's explorers, one module per concept: live in JupyterLab, static in the built book.

An explorer is one call whose output is an ipywidgets explorer in JupyterLab (every change of a
control recomputes the figure with ``attnbook``) and a self-contained static explorer in the
built book (the figures for every combination of control values, precomputed by the same
render function). :mod:`attnbook.explorers.base` holds that machinery
(:class:`~attnbook.explorers.base.Control`, :class:`~attnbook.explorers.base.Explorer`); each
other module holds the explorers of one concept, with their figures and slider stops, and
:mod:`attnbook.explorers.layout` lays an explorer's panels out for the width it is drawn at
(side by side in the column, stacked on a phone):

=====================  ======================================================================
module                 explorers
=====================  ======================================================================
``rnn``                :func:`~attnbook.explorers.rnn.gradient_decay_explorer` (γ and distance)
``pretrained``         :func:`~attnbook.explorers.pretrained.referent_explorer` (a real model)
``scaling``            :func:`~attnbook.explorers.scaling.scaling_explorer` (√d_k)
``masks``              :func:`~attnbook.explorers.masks.mask_explorer`
``alignment``          :func:`~attnbook.explorers.alignment.alignment_explorer` (as it is learned)
``heads``              :func:`~attnbook.explorers.heads.heads_explorer` (1 wide head vs several)
``kv_cache``           :func:`~attnbook.explorers.kv_cache.kv_cache_explorer` (the calculator)
``positional``         :func:`~attnbook.explorers.positional.position_explorer`
``block``              :func:`~attnbook.explorers.block.norm_placement_explorer` (Pre/Post-LN)
``influence``          :func:`~attnbook.explorers.influence.influence_explorer` (change a token)
``quadratic``          :func:`~attnbook.explorers.quadratic.quadratic_cost_explorer` (O(L²))
``flash``              :func:`~attnbook.explorers.flash.flash_explorer` (the tiled loop)
``temperature``        :func:`~attnbook.explorers.temperature.temperature_explorer` (T)
``three_steps``        :func:`~attnbook.explorers.three_steps.three_steps_explorer` (apple)
``lm_attention``       :func:`~attnbook.explorers.lm_attention.lm_attention_explorer` (a trained LM)
=====================  ======================================================================

Import the module you need (``from attnbook.explorers.kv_cache import kv_cache_explorer``);
the package itself imports none of them. plotly and ipywidgets are imported when an explorer or
figure is built, torch only by the explorers that train or run a model (``rnn``, ``block``,
``pretrained``, ``influence``, ``heads``, ``alignment``). The first edition's import paths
(``attnbook.widgets`` and four more) still give these very objects, through one alias table
(:ref:`old-import-paths`).
"""

__all__ = [
    "base",
    "layout",
    "rnn",
    "pretrained",
    "scaling",
    "masks",
    "alignment",
    "heads",
    "kv_cache",
    "positional",
    "block",
    "influence",
    "quadratic",
    "temperature",
    "three_steps",
    "lm_attention",
    "flash",
]
