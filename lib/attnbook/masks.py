"""Attention masks as boolean keep-masks (``True`` = may attend).

Every function here returns a boolean array that broadcasts to the scores' shape
``(B, H, L, S)``: ``(L, S)`` for causal and sliding-window masks, ``(B, 1, 1, S)`` for padding.
Masks combine by logical AND (:func:`combine_masks`). The polarity is torch's
(``F.scaled_dot_product_attention``); ``nn.MultiheadAttention`` uses the opposite one.

Causal masks are aligned **bottom-right** when the number of queries ``L`` differs from the
number of keys ``S``: the last query is the newest token and sees every key, so query ``i`` sees
keys ``j <= i + (S - L)``. With ``S - L`` cached tokens in a KV cache, this is exactly what
incremental decoding and chunked prefill need.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["causal_mask", "padding_mask", "sliding_window_mask", "combine_masks"]


def _check_length(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def _check_broadcast(mask: np.ndarray, name: str, target_shape) -> None:
    """Raise unless ``mask`` broadcasts to ``target_shape`` without enlarging it."""
    target_shape = tuple(target_shape)
    try:
        result = np.broadcast_shapes(mask.shape, target_shape)
    except ValueError:
        result = None
    if result != target_shape:
        raise ValueError(
            f"{name} of shape {mask.shape} does not broadcast to the scores' shape "
            f"{target_shape} (expected e.g. (L, S) or (B, 1, 1, S))"
        )


def _check_keep_mask(mask, name: str, target_shape) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(
            f"{name} must be a boolean keep-mask (True = may attend); got dtype {mask.dtype} "
            f"(shape {mask.shape})"
        )
    _check_broadcast(mask, name, target_shape)
    return mask


def causal_mask(L: int, S: int | None = None) -> np.ndarray:
    """Causal keep-mask, aligned bottom-right.

    Args:
        L: number of queries.
        S: number of keys; defaults to ``L``. With ``S > L`` the first ``S - L`` keys are the
            cached past, visible to every query.

    Returns:
        Boolean ``(L, S)`` array with ``mask[i, j] = j <= i + (S - L)``. When ``L > S`` the
        first ``L - S`` rows are all ``False`` (those queries have no key to see).

    Raises:
        TypeError: if ``L`` or ``S`` is not an integer.
        ValueError: if ``L`` or ``S`` is negative.
    """
    L = _check_length(L, "L")
    S = L if S is None else _check_length(S, "S")
    i = np.arange(L)[:, None]  # (L, 1)
    j = np.arange(S)[None, :]  # (1, S)
    return j <= i + (S - L)  # (L, S)


def sliding_window_mask(L: int, window: int, S: int | None = None) -> np.ndarray:
    """Causal sliding-window keep-mask, aligned bottom-right.

    The window counts the query itself: query ``i`` (absolute position ``p = i + S - L``) sees
    keys ``p - window + 1, ..., p`` — at most ``window`` keys. ``window >= S`` gives the plain
    causal mask. This is the pattern of Mistral-7B's ``sliding_window`` (Jiang et al., 2023).

    Args:
        L: number of queries.
        window: how many keys each query sees, itself included; at least 1.
        S: number of keys; defaults to ``L``.

    Returns:
        Boolean ``(L, S)`` keep-mask.

    Raises:
        TypeError: if an argument is not an integer.
        ValueError: if ``window < 1`` or a length is negative.
    """
    window = _check_length(window, "window")
    if window < 1:
        raise ValueError(f"window must be >= 1 (it counts the query itself), got {window}")
    L = _check_length(L, "L")
    S = L if S is None else _check_length(S, "S")
    window = min(window, S + 1)  # any window >= S is the causal mask; keeps the ints small
    pos = np.arange(L)[:, None] + (S - L)  # (L, 1) absolute position of each query
    j = np.arange(S)[None, :]  # (1, S)
    return (j <= pos) & (j > pos - window)  # (L, S)


def padding_mask(attention_mask) -> np.ndarray:
    """Keep-mask that hides padding keys, from a Hugging Face style ``attention_mask``.

    Args:
        attention_mask: ``(B, S)`` array of 1 (real token) and 0 (padding), integer or
            boolean.

    Returns:
        Boolean ``(B, 1, 1, S)`` keep-mask, ``True`` at real tokens; it broadcasts over heads
        and queries.

    Raises:
        ValueError: if ``attention_mask`` is not 2-D or holds values other than 0 and 1.
    """
    am = np.asarray(attention_mask)
    if am.ndim != 2:
        raise ValueError(
            f"attention_mask must have shape (B, S) with 1 = real token, 0 = pad; "
            f"got shape {am.shape}"
        )
    if am.dtype != np.bool_:
        if not (np.issubdtype(am.dtype, np.integer) or np.issubdtype(am.dtype, np.floating)):
            raise ValueError(f"attention_mask must hold 0 and 1; got dtype {am.dtype}")
        if not np.isin(am, (0, 1)).all():
            bad = np.unique(am[~np.isin(am, (0, 1))])[:5]
            raise ValueError(
                f"attention_mask of shape {am.shape} must hold only 0 and 1; found {bad.tolist()}"
            )
    keep = am.astype(bool)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def combine_masks(*masks) -> np.ndarray | None:
    """Combine keep-masks by logical AND, with broadcasting.

    ``None`` entries are skipped (no constraint); if every entry is ``None`` the result is
    ``None``.

    Args:
        *masks: boolean keep-masks, e.g. a causal ``(L, S)`` and a padding ``(B, 1, 1, S)``.

    Returns:
        The boolean keep-mask of their common broadcast shape (``(B, 1, L, S)`` in the example),
        or ``None``.

    Raises:
        TypeError: if a mask is not boolean.
        ValueError: if the masks do not broadcast together.
    """
    arrays = []
    for idx, m in enumerate(masks):
        if m is None:
            continue
        arr = np.asarray(m)
        if arr.dtype != np.bool_:
            raise TypeError(
                f"masks[{idx}] must be a boolean keep-mask; got dtype {arr.dtype} "
                f"(shape {arr.shape})"
            )
        arrays.append(arr)
    if not arrays:
        return None
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ValueError(
            "masks do not broadcast together: shapes " + ", ".join(str(a.shape) for a in arrays)
        ) from None
    out = np.ones(shape, dtype=bool)
    for a in arrays:
        out &= a
    return out


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
    chunk_len = _check_length(chunk_len, "chunk_len")
    cache_len = _check_length(cache_len, "cache_len")
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
            has no bfloat16 — use :func:`attnbook.nn.keep_mask_to_additive` for torch).

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
            "attnbook.nn.keep_mask_to_additive"
        ) from None
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    keep = combine_masks(*keep_masks)
    if keep is None:
        return None
    return np.where(keep, dtype.type(0), np.finfo(dtype).min).astype(dtype)
