"""The mask explorer: a keep-mask and the attention weights it produces.

The figure is :func:`attnbook.viz.mask_figure` (masks from :mod:`attnbook.masks`, weights from
:func:`attnbook.attention.masked_softmax`). Also importable from :mod:`attnbook.widgets`.
"""

from __future__ import annotations

from .. import viz
from ..checks import check_choice, check_int, check_seed
from .base import Control, Explorer

__all__ = ["mask_explorer"]


def mask_explorer(
    mask_type: str = "causal + padding", window: int = 3, n_pad: int = 2, *,
    seq_len: int = 8, seed: int = 0, pad_side: str = "right",
) -> Explorer:
    """The mask explorer (chapter 6): a keep-mask and the attention weights it produces.

    Controls: ``mask_type`` (one of :data:`attnbook.viz.MASK_TYPES`: none / causal / padding /
    causal + padding / sliding window), ``window`` (sliding-window size, 1..seq_len) and
    ``n_pad`` (pad tokens, 0..seq_len; a batch of one sequence) and ``pad_side`` (where the
    pad tokens are: ``"right"``, at the end of the keys, or ``"left"``, at the start, as
    decoder-only models pad prompts for generation; :data:`attnbook.viz.PAD_SIDES`). The
    figure is :func:`attnbook.viz.mask_figure`: the keep-mask (:mod:`attnbook.masks`) and
    ``masked_softmax(scores, mask)`` of fixed raw scores
    ``numpy.random.default_rng(seed).standard_normal((seq_len, seq_len))``. Rows with no
    visible key have all-zero weights (under causal + left padding, the first ``n_pad``
    queries). ``window`` is greyed out unless the type is sliding window, ``n_pad`` and
    ``pad_side`` unless it involves padding.

    Args:
        mask_type: initial mask type.
        window: initial window size, 1..seq_len.
        n_pad: initial number of pad tokens, 0..seq_len.
        seq_len: number of tokens, 2..16.
        seed: seed of the scores, >= 0.
        pad_side: initial side of the padding, ``"right"`` (default) or ``"left"``.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: naming the argument, if ``seq_len``, ``window``, ``n_pad`` or ``seed`` is
            not an integer.
        ValueError: naming the argument, for an unknown ``mask_type`` or ``pad_side`` or a
            value out of range.
    """
    seq_len = check_int(seq_len, "seq_len", 2, 16)
    check_choice(mask_type, "mask_type", viz.MASK_TYPES)
    window = check_int(window, "window", 1, seq_len)
    n_pad = check_int(n_pad, "n_pad", 0, seq_len)
    seed = check_seed(seed)
    check_choice(pad_side, "pad_side", viz.PAD_SIDES)
    scores = viz.mask_scores(seq_len, seed)  # (L, S), fixed for every setting

    def render(mask_type, window, n_pad, pad_side):
        return viz.mask_figure(mask_type, window, n_pad, seq_len=seq_len, scores=scores,
                               pad_side=pad_side)

    def active(values):
        names = {"mask_type"}
        if values["mask_type"] == "sliding window":
            names.add("window")
        if "padding" in values["mask_type"]:
            names.update(("n_pad", "pad_side"))
        return names

    controls = [
        Control("mask_type", "mask", "select", viz.MASK_TYPES, mask_type, plain_label="mask"),
        Control("window", "window", "slider", tuple(range(1, seq_len + 1)), window),
        Control("n_pad", "pad tokens", "slider", tuple(range(0, seq_len + 1)), n_pad),
        Control("pad_side", "padding at", "select", viz.PAD_SIDES, pad_side,
                labels=("the end (right)", "the start (left)")),
    ]
    return Explorer(controls, render, title="mask explorer", active=active)
