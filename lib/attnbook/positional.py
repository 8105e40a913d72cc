"""Positional information: sinusoidal encodings and rotary position embeddings (RoPE), in NumPy.

Notation (as in the book): ``p`` is a token position, ``i`` and ``j`` are the positions of a
query and a key, ``r`` indexes a pair of dimensions, ``L`` is the number of positions and ``D``
(``head_dim``) the head dimension ``d_k``.

Sinusoidal encoding (Vaswani et al., 2017, section 3.5) in the paper's **interleaved** layout:
dimension ``2r`` holds ``sin(p * base^(-2r/d_model))`` and dimension ``2r + 1`` the cosine
of the same angle. An odd ``d_model`` ends on a sine.

RoPE (Su et al., 2021, eq. 34) rotates pairs of dimensions of a query or key by the angle
``p * theta_r`` with ``theta_r = base^(-2r/D)``, ``r = 0 .. D/2 - 1``. Two pairings are in use
and both are supported:

* ``interleaved=True``: pairs ``(2r, 2r + 1)``, as in the RoFormer paper and Meta's original
  Llama code;
* ``interleaved=False`` (default): pairs ``(r, r + D/2)``, the "rotate-half" layout of Hugging
  Face ``transformers`` (GPT-NeoX, Llama, Qwen2, Mistral).

They are the same rotation of permuted coordinates: for ``D = 4``,
``half_split(x) = interleaved(x[[0, 2, 1, 3]])[[0, 2, 1, 3]]``. Positions are always explicit
integers, so cached decoding passes the offset of the new tokens (the key of the token at
position 3 is rotated by ``3 * theta``, not by 0).

Torch twin: :func:`attnbook.layers.apply_rope` (the same rotation, both pairings), the module
that caches its frequencies, :class:`attnbook.layers.RotaryEmbedding`, and the learned
positions of BERT and GPT-2, :class:`attnbook.layers.LearnedPositionalEmbedding` (torch only).
The torch models add this module's :func:`sinusoidal_encoding` as a fixed table. This module
imports NumPy only.
"""

from __future__ import annotations

import numpy as np

from . import checks
from .attention import compute_dtype

__all__ = [
    "sinusoidal_encoding_core",
    "sinusoidal_encoding",
    "rope_frequencies",
    "rope_angles",
    "apply_rope_core",
    "apply_rope",
    "rope_pair_path",
    "rope_offset_scores",
]


# fmt: off
def sinusoidal_encoding_core(seq_len, d_model, base=10000.0):
    """PE[p, 2r] = sin(p / base^(2r/d_model)), PE[p, 2r+1] = the cosine.

    Returns a float64 (seq_len, d_model) array; an odd d_model ends on a sine.
    """
    pos = np.arange(seq_len)[:, None]  # (L, 1)
    two_r = np.arange(0, d_model, 2)  # (ceil(d_model/2),) the even dims 2r
    angles = pos * base ** (-two_r / d_model)  # (L, ceil(d_model/2))
    pe = np.zeros((seq_len, d_model))  # (L, d_model)
    pe[:, 0::2] = np.sin(angles)  # even dims 2r: sine
    pe[:, 1::2] = np.cos(angles[:, : d_model // 2])  # odd dims 2r+1: cosine
    return pe
# fmt: on


def sinusoidal_encoding(seq_len: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The fixed sinusoidal positional encoding of the original Transformer.

    ``PE[p, 2r] = sin(p / base^(2r / d_model))`` and
    ``PE[p, 2r + 1] = cos(p / base^(2r / d_model))`` for the position ``p`` and the pair ``r``.
    Checks its arguments and calls :func:`sinusoidal_encoding_core`.

    Args:
        seq_len: number of positions ``L`` (``p = 0 .. L - 1``).
        d_model: model width; any positive integer, odd included (the last column is then a
            sine).
        base: the wavelength base, 10000 in the paper.

    Returns:
        float64 array ``(seq_len, d_model)``; every entry lies in ``[-1, 1]``; row 0 is
        ``[0, 1, 0, 1, ...]``.

    Raises:
        TypeError: if ``seq_len`` or ``d_model`` is not an integer or ``base`` not a real number.
        ValueError: if ``seq_len < 0``, ``d_model < 1``, or ``base`` is not finite or ``<= 1``.

    Source: Vaswani et al., "Attention Is All You Need" (2017), section 3.5.
    """
    seq_len = checks.check_int(seq_len, "seq_len", 0)
    d_model = checks.check_int(d_model, "d_model", 1)
    base = checks.check_real(base, "base", minimum=1.0, strict=True)
    return sinusoidal_encoding_core(seq_len, d_model, base)


def rope_frequencies(head_dim: int, *, base: float = 10000.0) -> np.ndarray:
    """RoPE's rotation frequencies ``theta_r = base^(-2r / head_dim)``, ``r = 0 .. head_dim/2 - 1``.

    Args:
        head_dim: the (even) dimension of each query/key head.
        base: Llama-2 uses 10000, Llama-3 500000, Qwen2 1000000 (``rope_theta`` in their
            config.json).

    Returns:
        float64 array ``(head_dim // 2,)`` indexed by the pair ``r``, in radians per position,
        decreasing from 1.

    Raises:
        ValueError: if ``head_dim`` is odd or < 2, or ``base`` is not finite or ``<= 1``.
        TypeError: if ``head_dim`` is not an integer or ``base`` not a real number.

    Source: Su et al., "RoFormer" (2021), eq. 15.
    """
    head_dim = checks.check_rope_dim(checks.check_int(head_dim, "head_dim", 2))
    base = checks.check_real(base, "base", minimum=1.0, strict=True)
    return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (D/2,)


def rope_angles(positions, head_dim: int, *, base: float = 10000.0):
    """Cosines and sines of the RoPE angles ``p * theta_r``, computed in float64.

    Args:
        positions: non-negative integer array ``(..., L)`` of positions ``p``.
        head_dim: even head dimension ``D``.
        base: see :func:`rope_frequencies`.

    Returns:
        ``(cos, sin)``, each float64 ``(..., L, D/2)``: entry ``[..., p, r]`` for the pair ``r``.

    Raises:
        ValueError: as :func:`rope_frequencies`, or for negative positions.
        TypeError: for non-integer positions.
    """
    theta = rope_frequencies(head_dim, base=base)  # (D/2,)
    pos = checks.check_int_array(positions, "positions")
    angles = pos.astype(np.float64)[..., None] * theta  # (..., L, D/2)
    return np.cos(angles), np.sin(angles)


# fmt: off
def apply_rope_core(x, cos, sin, interleaved=False):
    """Rotate each pair (a, b) of x to (a cos - b sin, a sin + b cos).

    x (..., L, D); cos, sin (..., L, D/2) of the angles p * theta_r.
    Pairs (2r, 2r+1) if interleaved, else (r, r + D/2) (half-split).
    """
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]  # (..., L, D/2) each
    else:
        a, b = np.split(x, 2, axis=-1)  # (..., L, D/2) each
    ra = a * cos - b * sin  # (..., L, D/2)
    rb = a * sin + b * cos  # (..., L, D/2)
    if interleaved:
        out = np.stack([ra, rb], axis=-1)  # (..., L, D/2, 2)
        return out.reshape(*out.shape[:-2], 2 * ra.shape[-1])  # (..., L, D)
    return np.concatenate([ra, rb], axis=-1)  # (..., L, D)
# fmt: on


def apply_rope(x, positions, *, base: float = 10000.0, interleaved: bool = False) -> np.ndarray:
    """Rotate queries or keys by their positions (rotary position embedding).

    Each pair ``r`` of coordinates ``(a, b)`` at position ``p`` becomes
    ``(a cos(p theta_r) - b sin(p theta_r), a sin(p theta_r) + b cos(p theta_r))``. The dot
    product of a rotated query at position ``i`` and a rotated key at position ``j`` depends on
    the positions only through the offset ``i - j``. Checks its arguments, computes the angles with
    :func:`rope_angles` and calls :func:`apply_rope_core`.

    Args:
        x: ``(..., L, D)`` queries or keys, e.g. ``(B, H, L, D)``; ``D`` even.
        positions: non-negative integer positions of the ``L`` tokens: ``(L,)`` (the same for
            every row) or ``(B, L)`` (one row per batch element, e.g. a left-padded batch, see
            :func:`attnbook.masks.positions_from_attention_mask`). With a 4-D ``x`` a
            ``(B, L)`` array is applied to every head (read as ``(B, 1, L)``), exactly as
            :func:`attnbook.layers.apply_rope` reads it; any other shape ``(..., L)`` must
            broadcast to ``x.shape[:-1]`` without enlarging it.
        base: the frequency base ``rope_theta``.
        interleaved: pair dimensions ``(2r, 2r + 1)`` (True) or ``(r, r + D/2)`` (False,
            default).

    Returns:
        Array of the shape and floating dtype of ``x`` (integers and bools promoted to
        float64). The angles are computed in float64 and the rotation in at least float32
        (:func:`attnbook.attention.compute_dtype`), then cast back to the dtype of ``x``.
        Position 0 is the identity.

    Raises:
        ValueError: if ``D`` is odd, ``positions`` does not end in ``L`` (e.g. shorter than the
            sequence) or does not broadcast to ``x.shape[:-1]`` (or would enlarge the output),
            a position is negative, or ``base`` is not finite or ``<= 1``.
        TypeError: if ``x`` is not a real numeric array, ``positions`` is not an integer array,
            ``base`` not a real number or ``interleaved`` not a bool.

    Source: Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding" (2021),
    eq. 34; the half-split pairing is ``rotate_half`` in Hugging Face ``transformers``.
    """
    x = checks.as_float_array(x, "x")
    interleaved = checks.check_bool(interleaved, "interleaved")
    checks.check_ndim(x, "x", "(..., L, D)")
    L, D = x.shape[-2], x.shape[-1]
    checks.check_rope_dim(D, detail=f" (x has shape {x.shape})")
    pos = checks.check_positions(positions, L, x.shape)
    pos = pos.reshape(checks.check_rope_positions(pos.shape, x.shape))  # (B, 1, L) if 4-D x
    dtype = compute_dtype(x)
    cos, sin = rope_angles(pos, D, base=base)  # (..., L, D/2), float64
    out = apply_rope_core(
        x.astype(dtype, copy=False), cos.astype(dtype), sin.astype(dtype), interleaved
    )  # (..., L, D)
    return out.astype(x.dtype, copy=False)


def rope_pair_path(positions, pair: int, head_dim: int, *, base: float = 10000.0) -> np.ndarray:
    """Where RoPE takes the pair ``r`` of the unit vector ``e_{2r}``, position by position.

    The unit vector ``e_{2r}`` (1 in dimension ``2r``, 0 elsewhere) rotated by
    :func:`apply_rope` with interleaved pairs: its pair ``(2r, 2r + 1)`` at position ``p`` is
    ``(cos(p theta_r), sin(p theta_r))``, a point on the unit circle at the angle
    ``p * theta_r`` (the position explorer's left panel).

    Args:
        positions: non-negative integer positions ``(L,)``.
        pair: the pair ``r``, ``0 <= r < head_dim / 2``.
        head_dim: even head dimension ``D``.
        base: see :func:`rope_frequencies`.

    Returns:
        float64 ``(L, 2)``: dimensions ``2r`` and ``2r + 1`` of the rotated vector.

    Raises:
        TypeError: if ``pair`` or ``head_dim`` is not an integer, ``positions`` not an integer
            array or ``base`` not a real number.
        ValueError: if ``head_dim`` is odd or < 2, ``pair`` is out of range, a position is
            negative, ``positions`` is not 1-D, or ``base <= 1``.

    Source: Su et al., "RoFormer" (2021), eq. 34.
    """
    rope_frequencies(head_dim, base=base)  # checks head_dim and base
    pair = checks.check_int(pair, "pair", 0, head_dim // 2 - 1)
    pos = checks.check_int_array(positions, "positions", 0, ndim=1)  # (L,)
    e = np.zeros((pos.shape[0], head_dim))
    e[:, 2 * pair] = 1.0  # (L, D): e_{2r} at every position
    rotated = apply_rope(e, pos, base=base, interleaved=True)  # (L, D)
    return rotated[:, 2 * pair : 2 * pair + 2]  # (L, 2)


def rope_offset_scores(offsets, head_dim: int, *, base: float = 10000.0) -> np.ndarray:
    """RoPE score ``R_i q . R_j k / head_dim`` of the all-ones query and key against ``i - j``.

    The query at position ``i = Δ`` and the key at position ``j = 0``; RoPE makes the score a
    function of the offset ``Δ = i - j`` alone, here ``(2 / D) sum_r cos(Δ theta_r)``: 1 at
    offset 0, then a wave that decays with the offset (the position explorer's right panel).

    Args:
        offsets: non-negative integer offsets ``Δ``, shape ``(P,)``.
        head_dim: even head dimension ``D``.
        base: see :func:`rope_frequencies`.

    Returns:
        float64 ``(P,)``: the scores.

    Raises:
        TypeError: if ``head_dim`` is not an integer, ``offsets`` not an integer array or
            ``base`` not a real number.
        ValueError: if ``head_dim`` is odd or < 2, an offset is negative, ``offsets`` is not
            1-D, or ``base <= 1``.

    Source: Su et al., "RoFormer" (2021), eq. 34 and section 3.4.3 (long-term decay).
    """
    rope_frequencies(head_dim, base=base)  # checks head_dim and base
    pos = checks.check_int_array(offsets, "offsets", 0, ndim=1)  # (P,)
    q = apply_rope(
        np.ones((pos.shape[0], head_dim)), pos, base=base, interleaved=True
    )  # (P, D): the query at i = Δ
    k = apply_rope(
        np.ones((1, head_dim)), np.zeros(1, dtype=np.int64), base=base, interleaved=True
    )[0]  # (D,): the key at j = 0
    return q @ k / head_dim  # (P,)
