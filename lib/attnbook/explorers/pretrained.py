"""The referent explorer: where "it" looks, in every layer and head of a pretrained model.

The weights come from :func:`attnbook.pretrained.attention_of_token`; the figure is
:func:`attnbook.viz.token_attention_figure`. Also importable from :mod:`attnbook.widgets`.
"""

from __future__ import annotations

from typing import Sequence

from .. import viz
from ..checks import check_int, check_strings
from .base import Control, Explorer

__all__ = ["referent_explorer"]


def referent_explorer(
    layer: int = 1, head: int = 1, *, sentences: Sequence[str] | None = None,
    query: str = "it", candidates: Sequence[str] = ("animal", "street"), model=None,
) -> Explorer:
    """The referent explorer (chapter 2): where "it" looks, in every layer and head of a real model.

    Controls: ``layer`` (a slider over ``1 .. n_layers``) and ``head`` (a slider over
    ``1 .. n_heads``), both **1-based** — "layer 1" is the first layer; the weight arrays of
    :mod:`attnbook.pretrained` are indexed ``layer - 1``, ``head - 1``. The figure is
    :func:`attnbook.viz.token_attention_figure`: for each sentence, the attention weights of the
    ``query`` token over the sentence in that layer and head, with the ``candidates`` (the words
    the query could refer to) highlighted and their weights printed.

    The weights are computed once, when the explorer is made, by
    :func:`attnbook.pretrained.attention_of_token` (one forward pass of all-MiniLM-L6-v2 per
    sentence, every layer and head); the sliders only choose which layer and head to draw, in
    the live widget and in the precomputed static frames alike. For all-MiniLM-L6-v2 that is
    6 x 12 = 72 settings.

    Args:
        layer: initial layer, ``1 .. n_layers`` (6 for all-MiniLM-L6-v2).
        head: initial head, ``1 .. n_heads`` (12 for all-MiniLM-L6-v2).
        sentences: the sentences to compare; default :data:`attnbook.pretrained.TIRED` and
            :data:`attnbook.pretrained.WIDE`. Each must contain ``query`` and every candidate as
            word pieces (the first occurrence of each is used).
        query: the query word piece, lower-case as the tokenizer writes it.
        candidates: word pieces to highlight (at most four).
        model: a :class:`attnbook.pretrained.BertEncoder`; default
            :func:`attnbook.pretrained.load_minilm` ``()``.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: if ``layer`` or ``head`` is not an integer, or ``sentences`` is not a list
            or tuple of strings.
        ValueError: naming the argument, if ``layer`` or ``head`` is out of range, a sentence
            lacks ``query`` or a candidate, ``sentences`` is empty, or more than four
            candidates are given.
    """
    from .. import pretrained

    layer = check_int(layer, "layer", 1)
    head = check_int(head, "head", 1)
    if sentences is None:
        sentences = (pretrained.TIRED, pretrained.WIDE)
    sentences = check_strings(sentences, "sentences")
    if not sentences:
        raise ValueError("sentences must hold at least one sentence")
    candidates = tuple(candidates)
    if len(candidates) > len(viz.HIGHLIGHT_COLORS):
        raise ValueError(
            f"candidates names {len(candidates)} tokens; at most {len(viz.HIGHLIGHT_COLORS)} "
            "can be highlighted"
        )
    model = pretrained.load_minilm() if model is None else model
    tokens, weights = [], []
    for s in sentences:
        t, w = pretrained.attention_of_token(s, query, model=model)  # w: (n_layers, H, T)
        for c in candidates:
            if c not in t:
                raise ValueError(
                    f"candidate {c!r} is not a word piece of the sentence {s!r}, whose word "
                    f"pieces are {t}"
                )
        tokens.append(t)
        weights.append(w)
    n_layers, n_heads = weights[0].shape[:2]
    layer = check_int(layer, "layer", 1, n_layers)
    head = check_int(head, "head", 1, n_heads)
    titles = [f"{i + 1}. “{s}”" for i, s in enumerate(sentences)]

    def render(layer, head):
        return viz.token_attention_figure(
            tokens, weights, layer - 1, head - 1, query=query, highlight=candidates,
            titles=titles,
        )

    controls = [
        Control("layer", "layer", "slider", tuple(range(1, n_layers + 1)), layer),
        Control("head", "head", "slider", tuple(range(1, n_heads + 1)), head),
    ]
    return Explorer(controls, render, title="referent explorer")
