"""Attention masks as boolean keep-masks (``True`` = may attend).

Every function here returns a boolean array that broadcasts to the scores' shape
``(B, H, L, S)``: ``(L, S)`` for causal and sliding-window masks, ``(B, 1, 1, S)`` for padding.
Masks combine by logical AND (:func:`combine_masks`). The polarity is torch's
(``F.scaled_dot_product_attention``); ``nn.MultiheadAttention`` uses the opposite one.

Causal masks are aligned **bottom-right** when the number of queries ``L`` differs from the
number of keys ``S``: the last query is the newest token and sees every key, so query ``i`` sees
keys ``j <= i + (S - L)``. With ``S - L`` cached tokens in a KV cache, this is exactly what
incremental decoding and chunked prefill need.

Torch twin: :mod:`attnbook.layers` has each of these masks under the same name
(:func:`attnbook.layers.causal_mask`, :func:`~attnbook.layers.sliding_window_mask`,
:func:`~attnbook.layers.padding_mask`, :func:`~attnbook.layers.combine_masks`,
:func:`~attnbook.layers.additive_mask`, whose earlier name ``keep_mask_to_additive`` still
works). The torch modules build theirs from positions
(:func:`attnbook.layers.position_keep_mask`: causal, sliding window, cached offsets), and
:func:`attnbook.layers.keep_mask_to_mha_mask` turns a keep-mask into
``nn.MultiheadAttention``'s polarity. This module imports NumPy only.
"""

from __future__ import annotations

import numpy as np

from . import checks

__all__ = [
    "causal_mask_core",
    "causal_mask",
    "padding_mask_core",
    "padding_mask",
    "sliding_window_mask_core",
    "sliding_window_mask",
    "combine_masks_core",
    "combine_masks",
]


# fmt: off
def causal_mask_core(L, S):
    """Causal keep-mask ``(L, S)``: query i sees keys ``j <= i + (S - L)``.

    Aligned bottom-right: the last query sees every key.
    """
    i = np.arange(L)[:, None]  # (L, 1)
    j = np.arange(S)[None, :]  # (1, S)
    return j <= i + (S - L)  # (L, S)
# fmt: on


def causal_mask(L: int, S: int | None = None) -> np.ndarray:
    """Causal keep-mask, aligned bottom-right; checks its input and calls :func:`causal_mask_core`.

    Args:
        L: number of queries, an integer >= 0.
        S: number of keys, an integer >= 0; defaults to ``L``. With ``S > L`` the first
            ``S - L`` keys are the cached past, visible to every query.

    Returns:
        Boolean ``(L, S)`` array with ``mask[i, j] = j <= i + (S - L)``. When ``L > S`` the
        first ``L - S`` rows are all ``False`` (those queries have no key to see).

    Raises:
        TypeError: if ``L`` or ``S`` is not an integer (``2.5``, ``2.0`` and ``True`` too).
        ValueError: if ``L`` or ``S`` is negative.
    """
    L = checks.check_int(L, "L")
    S = L if S is None else checks.check_int(S, "S")
    return causal_mask_core(L, S)


# fmt: off
def sliding_window_mask_core(L, window, S):
    """Sliding-window keep-mask ``(L, S)``, aligned bottom-right.

    Query i sits at position p = i + S - L and sees keys p - window < j <= p.
    """
    p = np.arange(L)[:, None] + (S - L)  # (L, 1) position of each query
    j = np.arange(S)[None, :]  # (1, S)
    return (j <= p) & (j > p - window)  # (L, S)
# fmt: on


def sliding_window_mask(L: int, window: int, S: int | None = None) -> np.ndarray:
    """Causal sliding-window keep-mask, aligned bottom-right.

    The window counts the query itself: query ``i`` (absolute position ``p = i + S - L``) sees
    keys ``p - window + 1, ..., p`` — at most ``window`` keys. ``window >= S`` gives the plain
    causal mask. This is the pattern of Mistral-7B's ``sliding_window`` (Jiang et al., 2023).
    Checks its input and calls :func:`sliding_window_mask_core`.

    Args:
        L: number of queries, an integer >= 0.
        window: how many keys each query sees, itself included; an integer >= 1.
        S: number of keys, an integer >= 0; defaults to ``L``.

    Returns:
        Boolean ``(L, S)`` keep-mask.

    Raises:
        TypeError: if an argument is not an integer.
        ValueError: if ``window < 1`` or a length is negative.
    """
    window = checks.check_int(window, "window", 1)
    L = checks.check_int(L, "L")
    S = L if S is None else checks.check_int(S, "S")
    window = min(window, S + 1)  # any window >= S is the causal mask; keeps the ints small
    return sliding_window_mask_core(L, window, S)


# fmt: off
def padding_mask_core(attention_mask):
    """Keep-mask (B, 1, 1, S) from a (B, S) mask of 1 (token) and 0 (pad)."""
    keep = attention_mask.astype(bool)  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S): for every head and query
# fmt: on


def padding_mask(attention_mask) -> np.ndarray:
    """Keep-mask that hides padding keys, from a Hugging Face style ``attention_mask``.

    Args:
        attention_mask: ``(B, S)`` array of 1 (real token) and 0 (padding), integer or
            boolean.

    Returns:
        Boolean ``(B, 1, 1, S)`` keep-mask, ``True`` at real tokens; it broadcasts over heads
        and queries. Checks its input and calls :func:`padding_mask_core`.

    Raises:
        TypeError: if ``attention_mask`` is not numeric (strings, objects).
        ValueError: if ``attention_mask`` is not 2-D or holds values other than 0 and 1.
    """
    return padding_mask_core(checks.check_padding_mask(attention_mask))


# fmt: off
def combine_masks_core(*masks):
    """Logical AND of boolean keep-masks, broadcast to their common shape."""
    shape = np.broadcast_shapes(*(m.shape for m in masks))
    keep = np.ones(shape, dtype=bool)  # nothing hidden yet
    for m in masks:
        keep &= m  # hidden as soon as one mask hides it
    return keep
# fmt: on


def combine_masks(*masks) -> np.ndarray | None:
    """Combine keep-masks by logical AND, with broadcasting.

    ``None`` entries are skipped (no constraint); if every entry is ``None`` the result is
    ``None``. Checks the masks and calls :func:`combine_masks_core`.

    Args:
        *masks: boolean keep-masks, e.g. a causal ``(L, S)`` and a padding ``(B, 1, 1, S)``.

    Returns:
        The boolean keep-mask of their common broadcast shape (``(B, 1, L, S)`` in the example),
        or ``None``.

    Raises:
        TypeError: if a mask is not boolean.
        ValueError: if the masks do not broadcast together.
    """
    arrays = [
        checks.check_keep_mask(checks.as_array(m, f"masks[{idx}]"), f"masks[{idx}]")
        for idx, m in enumerate(masks)
        if m is not None
    ]
    if not arrays:
        return None
    checks.check_masks_broadcast(arrays, "masks")
    return combine_masks_core(*arrays)


# --------------------------------------------------------------------------------------------
# Chunked prefill, left padding and filled (additive) masks
# --------------------------------------------------------------------------------------------

__all__ += ["prefill_chunk_mask", "positions_from_attention_mask", "additive_mask"]


def prefill_chunk_mask(chunk_len: int, cache_len: int, window: int | None = None) -> np.ndarray:
    """Keep-mask for a chunk of ``chunk_len`` new tokens after ``cache_len`` cached tokens.

    The chunk's queries are the tokens at positions ``cache_len .. cache_len + chunk_len - 1``;
    the keys are the ``cache_len`` cached tokens followed by the chunk itself, so
    ``S = cache_len + chunk_len``. Query ``i`` sees keys ``j <= cache_len + i`` — the
    bottom-right causal mask ``causal_mask(chunk_len, S)`` — and, with a sliding window, only
    keys ``j > cache_len + i - window``. Processing a prompt of 5 tokens as chunks 3 + 2,
    2 + 3 or 1+1+1+1+1 with these masks gives exactly the rows of one causal pass over 5.

    Args:
        chunk_len: number of new tokens (queries) ``L``.
        cache_len: number of tokens already in the KV cache.
        window: optional sliding-window size (counts the query itself), see
            :func:`sliding_window_mask`.

    Returns:
        Boolean ``(chunk_len, cache_len + chunk_len)`` keep-mask.

    Raises:
        TypeError: if an argument is not an integer.
        ValueError: if a length is negative or ``window < 1``.

    Source: chunked prefill as in Agrawal et al., "SARATHI" (2023); the mask is the
    bottom-right aligned causal mask of this module.
    """
    chunk_len = checks.check_int(chunk_len, "chunk_len")
    cache_len = checks.check_int(cache_len, "cache_len")
    S = cache_len + chunk_len
    if window is None:
        return causal_mask(chunk_len, S)  # (L, S)
    return sliding_window_mask(chunk_len, window, S)  # (L, S)


def positions_from_attention_mask(attention_mask) -> np.ndarray:
    """Token positions for a (left-)padded batch, counted from the first real token.

    With left padding, ``attention_mask = [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]`` gives
    ``[[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]``: the first real token of every row is at position 0,
    as it would be without padding, so RoPE angles and learned position embeddings match the
    unpadded sequence. Padding slots get position 0; their value does not matter because the
    padding keep-mask hides them.

    Args:
        attention_mask: ``(B, S)`` array of 1 (real token) and 0 (padding), integer or
            boolean.

    Returns:
        int64 array ``(B, S)``: ``cumsum(mask) - 1`` at real tokens, 0 at padding.

    Raises:
        TypeError: if ``attention_mask`` is not numeric.
        ValueError: if ``attention_mask`` is not 2-D or holds values other than 0 and 1.
    """
    keep = padding_mask(attention_mask)[:, 0, 0, :]  # (B, S) bool, validated
    pos = np.cumsum(keep, axis=-1, dtype=np.int64) - 1  # (B, S)
    return np.where(keep, pos, 0).astype(np.int64)


def additive_mask(*keep_masks, dtype=np.float32) -> np.ndarray | None:
    """Additive mask: combine keep-masks (AND) first, then fill **once** with ``finfo(dtype).min``.

    This is the float mask for APIs that add a mask to the scores. Filling each mask and
    adding them would give ``finfo.min + finfo.min = -inf`` (and in float16 even
    ``finfo.min - 16`` rounds to ``-inf``), turning a fully hidden row into NaN; ``-1e9`` is
    not representable in float16 at all. A row hidden everywhere becomes ``finfo.min``
    everywhere, which a plain softmax treats as uniform (finite) — callers that need the
    book's "empty row gives 0" rule must also zero such rows.

    Args:
        *keep_masks: boolean keep-masks that broadcast together; ``None`` entries are skipped.
        dtype: floating NumPy dtype of the scores (``np.float16``, ``np.float32``, ...; NumPy
            has no bfloat16 — use :func:`attnbook.layers.additive_mask` for torch).

    Returns:
        Array of the masks' broadcast shape and ``dtype``, or ``None`` if every mask is
        ``None``.

    Raises:
        TypeError: if a mask is not boolean or ``dtype`` is not a floating NumPy dtype
            (``None``, torch dtypes and ``"bfloat16"`` included).
        ValueError: if the masks do not broadcast together.
    """
    if dtype is None:
        raise TypeError("dtype must be a floating NumPy dtype such as np.float32, got None")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"dtype must be a floating NumPy dtype such as np.float16 or np.float32, got "
            f"{dtype!r}; for torch dtypes (bfloat16 included) use "
            "attnbook.layers.additive_mask"
        ) from None
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    keep = combine_masks(*keep_masks)
    if keep is None:
        return None
    return np.where(keep, dtype.type(0), np.finfo(dtype).min).astype(dtype)


# --------------------------------------------------------------------------------------------
# The book's named masks (chapter 6's explorer)
# --------------------------------------------------------------------------------------------

__all__ += ["MASK_TYPES", "PAD_SIDES", "keep_mask_by_name"]

#: The named masks of chapter 6, in the order its explorer offers them.
MASK_TYPES = ("none", "causal", "padding", "causal + padding", "sliding window")
#: Where the padding tokens are, at the end (``"right"``) or at the start (``"left"``).
PAD_SIDES = ("right", "left")


def keep_mask_by_name(
    mask_type: str, seq_len: int, *, window: int = 3, n_pad: int = 0, pad_side: str = "right"
) -> np.ndarray:
    """The ``(seq_len, seq_len)`` keep-mask of one sequence, by the name chapter 6 gives it.

    A batch of one sequence with ``n_pad`` padding keys: the last ones (``pad_side="right"``,
    right padding) or the first ones (``"left"``, left padding, as decoder-only models batch
    prompts for generation). ``"none"`` keeps everything; ``"causal"`` is :func:`causal_mask`;
    ``"padding"`` is :func:`padding_mask` of ``[1] * (seq_len - n_pad) + [0] * n_pad`` (right)
    or ``[0] * n_pad + [1] * (seq_len - n_pad)`` (left); ``"causal + padding"`` combines the two
    with :func:`combine_masks`; ``"sliding window"`` is :func:`sliding_window_mask` with
    ``window``.

    Args:
        mask_type: one of :data:`MASK_TYPES`.
        seq_len: number of tokens (queries = keys), >= 1.
        window: keys each query sees under the sliding window, itself included, 1..seq_len.
        n_pad: number of padding tokens, 0..seq_len (used by the padding types).
        pad_side: where the padding is, one of :data:`PAD_SIDES`.

    Returns:
        Boolean ``(seq_len, seq_len)`` keep-mask (``True`` = may attend). Under causal + left
        padding the first ``n_pad`` queries see no key at all (empty rows).

    Raises:
        TypeError: if ``seq_len``, ``window`` or ``n_pad`` is not an integer.
        ValueError: for an unknown ``mask_type`` or ``pad_side``, or a ``seq_len``, ``window``
            or ``n_pad`` out of range.
    """
    checks.check_choice(mask_type, "mask_type", MASK_TYPES)
    checks.check_choice(pad_side, "pad_side", PAD_SIDES)
    L = checks.check_int(seq_len, "seq_len", 1)
    window = checks.check_int(window, "window", 1, L)
    n_pad = checks.check_int(n_pad, "n_pad", 0, L)
    real, pads = [1] * (L - n_pad), [0] * n_pad
    attention_mask = np.array([real + pads if pad_side == "right" else pads + real])  # (1, S)
    if mask_type == "none":
        keep = np.ones((L, L), dtype=bool)
    elif mask_type == "causal":
        keep = causal_mask(L)  # (L, S)
    elif mask_type == "padding":
        keep = padding_mask(attention_mask)  # (1, 1, 1, S)
    elif mask_type == "causal + padding":
        keep = combine_masks(causal_mask(L), padding_mask(attention_mask))  # (1, 1, L, S)
    else:
        keep = sliding_window_mask(L, window)  # (L, S)
    return np.broadcast_to(keep, (1, 1, L, L))[0, 0].copy()  # (L, S)
