"""PyTorch building blocks with the book's conventions: attention, heads, norms, RoPE.

Each building block has its NumPy version in its concept's module, which teaches the math, and
its torch version here, under the same name, for the models, training, the KV cache and the GPU
path (the name is not ``nn``, so that it never hides ``torch.nn``; the old path
``attnbook.nn`` still imports, through the alias table ``attnbook._aliases``):

* attention: :func:`attnbook.attention.scaled_dot_product_attention` →
  :func:`scaled_dot_product_attention`;
* masks: :mod:`attnbook.masks` (``causal_mask``, ``sliding_window_mask``, ``padding_mask``,
  ``combine_masks``, ``additive_mask``) → :func:`causal_mask`, :func:`sliding_window_mask`,
  :func:`padding_mask`, :func:`combine_masks`, :func:`additive_mask` (earlier name
  ``keep_mask_to_additive``, still served); only torch has :func:`position_keep_mask`
  (keys at any positions, a ring-buffer cache) and :func:`keep_mask_to_mha_mask`;
* heads: :mod:`attnbook.heads` (``split_heads``, ``merge_heads``, ``repeat_kv``,
  ``multi_head_attention``) → :func:`split_heads`, :func:`merge_heads`, :func:`repeat_kv`,
  :class:`MultiHeadAttention`, :class:`MultiHeadLatentAttention`;
* positions: :mod:`attnbook.positional` (``apply_rope``, ``sinusoidal_encoding``) →
  :func:`apply_rope`, :class:`RotaryEmbedding`, :class:`LearnedPositionalEmbedding`;
* norms: :mod:`attnbook.norms` (``layer_norm``, ``rms_norm``) → :class:`LayerNorm`,
  :class:`RMSNorm`.

Conventions (see :mod:`attnbook` and the notation appendix of the book):

* layout ``(B, H, L, D)`` for queries and ``(B, H_kv, S, D)`` for keys and values; the
  modules take and return ``(B, L, d_model)``;
* boolean masks are **keep-masks** (``True`` = may attend), broadcastable to ``(B, H, L, S)``,
  combined by logical AND; causal masks align bottom-right (or follow explicit positions);
* a query that sees no key outputs 0, forward and backward, in every dtype;
* where this module builds an additive mask it combines the keep-masks first and fills once
  with ``torch.finfo(dtype).min`` (:func:`additive_mask`, earlier ``keep_mask_to_additive``);
* ``nn.MultiheadAttention`` uses the opposite boolean polarity (``True`` = *not* allowed); the
  conversion lives in one place, :func:`keep_mask_to_mha_mask`;
* GQA: query head ``h`` reads key/value head ``h // (H // H_kv)`` (:func:`repeat_kv`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    as_array,
    check_bool,
    check_divides,
    check_dropout,
    check_features,
    check_head_counts,
    check_instance,
    check_int,
    check_int_tensor,
    check_keep_mask,
    check_key_mask_length,
    check_kv_cache,
    check_mask,
    check_masks_broadcast,
    check_mla_sizes,
    check_module_input,
    check_ndim,
    check_padding_mask,
    check_positions,
    check_qkv_tensors,
    check_real,
    check_rope_dim,
    check_rope_positions,
    check_scale,
    check_tensor,
    check_window,
)

__all__ = [
    "LayerNorm",
    "RMSNorm",
    "apply_rope",
    "RotaryEmbedding",
    "LearnedPositionalEmbedding",
    "repeat_kv",
    "split_heads",
    "merge_heads",
    "causal_mask",
    "sliding_window_mask",
    "padding_mask",
    "combine_masks",
    "additive_mask",
    "keep_mask_to_mha_mask",
    "position_keep_mask",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
]

_HALF = (torch.float16, torch.bfloat16)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Reductions (norm statistics, softmax) of fp16/bf16 tensors run in float32."""
    return torch.float32 if dtype in _HALF else dtype


# --------------------------------------------------------------------------------------------
# Normalization
# --------------------------------------------------------------------------------------------


class _Norm(nn.Module):
    """What :class:`LayerNorm` and :class:`RMSNorm` share: the checks, the gain, the upcast.

    A subclass defines ``normalize(x)``, the statistics of its norm, on an input already in
    the compute dtype.
    """

    def __init__(self, d_model: int, eps: float):
        super().__init__()
        self.d_model = check_int(d_model, "d_model", 1)
        self.eps = check_real(eps, "eps", minimum=0.0, strict=True)
        self.weight = nn.Parameter(torch.ones(self.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``x`` over its last axis.

        Args:
            x: ``(..., d_model)`` input, any floating dtype (fp16/bf16 computed in float32).

        Returns:
            ``(..., d_model)``, same dtype as ``x``.

        Raises:
            ValueError: if ``x`` is 0-d or its last axis is not ``d_model``.
            TypeError: if ``x`` is not a floating-point tensor.
        """
        check_features(
            x, f"{type(self).__name__}({self.d_model}) input x", self.d_model, size_name="d_model"
        )
        y = self.normalize(x.to(_compute_dtype(x.dtype)))  # (..., d_model)
        return y.to(x.dtype)


class LayerNorm(_Norm):
    """Layer normalization over the last axis (biased variance, ``eps`` inside the sqrt).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias``; same parameters and result as
    ``torch.nn.LayerNorm(d_model, eps)``. fp16/bf16 inputs are normalized in float32.

    Args:
        d_model: feature size (last axis of the input).
        eps: added to the variance, default 1e-5 (torch's).
        bias: learn a bias (``False`` gives the bias-free LayerNorm of some newer models).

    Shapes: input ``(..., d_model)``, output the same shape and dtype.

    Raises:
        ValueError: if ``d_model < 1``, ``eps`` is not finite and > 0 (``eps = 0`` would give
            NaN for a constant row, which the forward cannot check without a device sync), or
            the input's last axis is not ``d_model``.
        TypeError: if ``d_model`` is not an integer (bools and floats are rejected),
            ``eps`` is not a real number, or the input is not a floating-point tensor.

    Source: Ba, Kiros & Hinton (2016), eq. 4.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__(d_model, eps)
        bias = check_bool(bias, "bias")
        self.bias = nn.Parameter(torch.zeros(self.d_model)) if bias else None

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis of ``x``."""
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1) biased variance
        y = (x - mean) * torch.rsqrt(var + self.eps)
        y = y * self.weight.to(y.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y

    def extra_repr(self) -> str:
        """The settings shown in the module's ``repr``."""
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(_Norm):
    """RMS normalization over the last axis: ``y = x * rsqrt(mean(x^2) + eps) * weight``.

    Same parameters and result as ``torch.nn.RMSNorm(d_model, eps=eps)`` and Llama's
    ``LlamaRMSNorm``. fp16/bf16 inputs are normalized in float32.

    Args:
        d_model: feature size.
        eps: added to the mean square, default 1e-6 (``rms_norm_eps`` of Qwen2-7B).

    Shapes: input ``(..., d_model)``, output the same shape and dtype.

    Raises:
        ValueError: if ``d_model < 1``, ``eps`` is not finite and > 0 (``eps = 0`` gives NaN
            for an all-zero row), or the input's last axis is not ``d_model``.
        TypeError: if ``d_model`` is not an integer, ``eps`` is not a real number, or the
            input is not a floating-point tensor.

    Source: Zhang & Sennrich (2019), eq. 4.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__(d_model, eps)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``x * rsqrt(mean(x^2) + eps) * weight`` over the last axis of ``x``."""
        y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return y * self.weight.to(y.dtype)

    def extra_repr(self) -> str:
        """The settings shown in the module's ``repr``."""
        return f"{self.d_model}, eps={self.eps}"


# --------------------------------------------------------------------------------------------
# Rotary position embedding
# --------------------------------------------------------------------------------------------


def apply_rope(
    x: torch.Tensor, positions, *, base: float = 10000.0, interleaved: bool = False
) -> torch.Tensor:
    """Rotary position embedding in torch; same math as :func:`attnbook.positional.apply_rope`.

    Args:
        x: ``(..., L, D)`` queries or keys, e.g. ``(B, H, L, D)``; ``D`` even. Integer tensors
            are promoted to float32 (rotating in the integer dtype would truncate).
        positions: non-negative integer positions ``(L,)`` (the same for every row) or
            ``(B, L)`` (one row per batch element, e.g. for a left-padded batch). With a 4-D
            ``x`` a ``(B, L)`` tensor is applied to every head (read as ``(B, 1, L)``); any
            other shape must broadcast to ``x.shape[:-1]`` without enlarging it. The NumPy
            :func:`attnbook.positional.apply_rope` reads shapes the same way.
        base: the frequency base ``rope_theta``, finite and > 1.
        interleaved: pairs ``(2r, 2r+1)`` if True, else ``(r, r + D/2)`` (default), for pair
            index ``r``.

    Returns:
        Tensor of the shape of ``x`` and its floating dtype (float32 for integer ``x``);
        angles are computed in float32 (float64 for float64 input).

    Raises:
        ValueError: if ``D`` is odd, ``positions`` does not end in ``L``, is negative, or
            does not broadcast to ``x.shape[:-1]`` (or would enlarge the output), or ``base``
            is not finite and > 1.
        TypeError: if ``x`` is not a real tensor, ``positions`` is not an integer tensor or
            ``interleaved`` is not a bool.

    Source: Su et al. (2021), eq. 34.
    """
    check_tensor(x, "x", floating=False)
    if x.dtype == torch.bool or x.is_complex():
        raise TypeError(f"x must be a real tensor, got dtype {x.dtype}")
    if not x.is_floating_point():
        x = x.to(torch.float32)
    check_ndim(x, "x", "(..., L, D)")
    base = check_real(base, "base", minimum=1.0, strict=True)
    interleaved = check_bool(interleaved, "interleaved")  # 1 or "no" refused, as in NumPy
    L, D = x.shape[-2], x.shape[-1]
    check_rope_dim(D, "head_dim", f" (x has shape {tuple(x.shape)})")
    pos = check_positions(check_int_tensor(positions, "positions"), L, x.shape).to(x.device)
    pos = pos.reshape(check_rope_positions(pos.shape, x.shape))  # (B, 1, L) if 4-D x
    cdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    theta = base ** (-torch.arange(0, D, 2, dtype=cdt, device=x.device) / D)  # (D/2,)
    angles = pos.to(cdt)[..., None] * theta  # (..., L, D/2)
    cos, sin = angles.cos(), angles.sin()
    xc = x.to(cdt)
    if interleaved:
        a, b = xc[..., 0::2], xc[..., 1::2]  # (..., L, D/2)
    else:
        a, b = xc[..., : D // 2], xc[..., D // 2 :]  # (..., L, D/2)
    ra, rb = a * cos - b * sin, a * sin + b * cos  # (..., L, D/2)
    if interleaved:
        out = torch.stack((ra, rb), dim=-1).flatten(-2)  # (..., L, D) pairs (2r, 2r+1)
    else:
        out = torch.cat((ra, rb), dim=-1)  # (..., L, D) pairs (r, r + D/2)
    return out.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """RoPE settings for :class:`MultiHeadAttention` (no parameters).

    Args:
        base: ``rope_theta`` (10000 in RoFormer and Llama-2), finite and > 1.
        interleaved: pairing, see :func:`apply_rope`.

    Raises:
        ValueError: if ``base`` is not finite and > 1.
        TypeError: if ``base`` is not a real number.
    """

    def __init__(self, base: float = 10000.0, interleaved: bool = False):
        super().__init__()
        self.base = check_real(base, "base", minimum=1.0, strict=True)
        self.interleaved = check_bool(interleaved, "interleaved")

    def forward(self, x: torch.Tensor, positions) -> torch.Tensor:
        """Rotate ``x`` by its positions with this module's ``base`` and pairing.

        Args:
            x: ``(..., L, D)`` queries or keys, e.g. ``(B, H, L, D)``; ``D`` even.
            positions: integer positions ``(L,)`` or ``(B, L)``.

        Returns:
            Tensor of the shape and dtype of ``x`` (see :func:`apply_rope`).

        Raises:
            ValueError: as :func:`apply_rope` (odd ``D``, positions that do not fit ``x``).
            TypeError: if ``positions`` is not an integer tensor.
        """
        return apply_rope(x, positions, base=self.base, interleaved=self.interleaved)

    def extra_repr(self) -> str:
        """The settings shown in the module's ``repr``."""
        return f"base={self.base}, interleaved={self.interleaved}"


# --------------------------------------------------------------------------------------------
# Learned absolute position embedding
# --------------------------------------------------------------------------------------------


class LearnedPositionalEmbedding(nn.Module):
    """Learned absolute position embeddings: a trained table with one row per position.

    Position ``p`` is represented by row ``p`` of a ``(max_seq_len, d_model)`` parameter, added
    to the token's embedding; the rows are learned by gradient descent with the rest of the
    model, exactly like word embeddings. Nothing ties row ``p`` to row ``p + 1``: a row that
    training never used keeps its initial random values, and a position ``>= max_seq_len`` has
    no row at all, so asking for it raises (as GPT-2 cannot read more than its 1024 positions).

    The table is initialised N(0, 1), as ``torch.nn.Embedding`` is (and with the same random
    draws, so a model that used ``nn.Embedding`` for its positions starts from the same
    weights); BERT and GPT-2 draw N(0, 0.02²) (``initializer_range`` in their config.json).
    Used by every ``positional="learned"`` model of :mod:`attnbook.models` and by BERT's
    embedding (:class:`attnbook.pretrained.BertEmbeddings`).

    Args:
        max_seq_len: rows of the table, the longest sequence the model can read
            (``max_position_embeddings``: 512 in BERT, ``n_positions`` 1024 in GPT-2).
        d_model: width of each row (the token embedding's width).

    Attributes:
        weight: the table, a float32 parameter ``(max_seq_len, d_model)``.

    Raises:
        TypeError: if ``max_seq_len`` or ``d_model`` is not an integer.
        ValueError: if ``max_seq_len`` or ``d_model`` is < 1.

    Source: Gehring et al., "Convolutional Sequence to Sequence Learning" (2017), section 3.1;
    Vaswani et al. (2017), section 3.5 and table 3 row (E); Devlin et al., "BERT" (2019),
    section 3.2; Radford et al., "Language Models are Unsupervised Multitask Learners" (2019)
    (GPT-2's ``wpe``).
    """

    def __init__(self, max_seq_len: int, d_model: int):
        super().__init__()
        self.max_seq_len = check_int(max_seq_len, "max_seq_len", 1)
        self.d_model = check_int(d_model, "d_model", 1)
        self.weight = nn.Parameter(torch.empty(self.max_seq_len, self.d_model))
        nn.init.normal_(self.weight)  # N(0, 1), the draws of nn.Embedding

    # fmt: off
    def forward(self, positions) -> torch.Tensor:
        """Rows of the table for the given positions.

        Args:
            positions: non-negative integer positions, any shape, e.g. ``(L,)`` or
                ``(B, L)`` (a list or NumPy array is converted).

        Returns:
            ``positions.shape + (d_model,)``, the dtype and device of ``weight``.

        Raises:
            TypeError: if ``positions`` is not an integer tensor.
            ValueError: if a position is negative or ``>= max_seq_len`` (the
                table has no row for it).
        """
        pos = check_int_tensor(positions, "positions")  # (...,) integers >= 0
        last = self.max_seq_len - 1
        if pos.numel() and int(pos.max()) > last:
            raise ValueError(
                f"positions of shape {tuple(pos.shape)} reach position "
                f"{int(pos.max())}, but the table has max_seq_len = "
                f"{self.max_seq_len} rows (positions 0 to {last}); a learned "
                "embedding has no row for a later position")
        pos = pos.to(self.weight.device)
        return F.embedding(pos, self.weight)  # (..., d_model): row p for p
    # fmt: on

    def extra_repr(self) -> str:
        """The table's size, shown in the module's ``repr``."""
        return f"max_seq_len={self.max_seq_len}, d_model={self.d_model}"


# --------------------------------------------------------------------------------------------
# Masks and attention
# --------------------------------------------------------------------------------------------


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each key/value head ``n_rep`` times, interleaved.

    ``(B, H_kv, S, D) -> (B, H_kv * n_rep, S, D)``.

    Head ``h`` of the result is head ``h // n_rep`` of the input, so query heads
    ``[0, 1, 2, 3]`` with 2 KV heads read KV heads ``[0, 0, 1, 1]`` (not ``[0, 1, 0, 1]``, the
    result of ``x.repeat(1, n_rep, 1, 1)``). Same as Llama's ``repeat_kv`` and
    ``torch.repeat_interleave(x, n_rep, dim=1)``.

    Args:
        x: ``(B, H_kv, S, D)`` keys or values, any dtype.
        n_rep: query heads per KV head, ``n_heads // n_kv_heads``; >= 1.

    Returns:
        ``(B, H_kv * n_rep, S, D)`` tensor of the same dtype; ``x`` itself when ``n_rep == 1``.

    Raises:
        ValueError: if ``x`` is not 4-D or ``n_rep < 1``.
        TypeError: if ``n_rep`` is not an integer (bools and floats are rejected).

    Source: Ainslie et al., "GQA" (2023), section 2.2.
    """
    check_ndim(x, "x", "(B, H_kv, S, D)")
    n_rep = check_int(n_rep, "n_rep", 1)
    if n_rep == 1:
        return x
    B, H_kv, S, D = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, S, D).reshape(B, H_kv * n_rep, S, D)  # (B, H, S, D)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Split the feature axis into heads: ``(B, L, H * D) -> (B, H, L, D)``.

    The torch twin of :func:`attnbook.heads.split_heads`: head ``h`` holds features
    ``h * D .. (h + 1) * D - 1``.

    Args:
        x: ``(B, L, H * D)`` tensor, e.g. the output of a query projection.
        n_heads: number of heads ``H``; must divide the last axis.

    Returns:
        ``(B, H, L, D)`` view of ``x``.

    Raises:
        ValueError: if ``x`` is not 3-D or ``n_heads`` does not divide its last axis.
        TypeError: if ``x`` is not a torch tensor (for NumPy use
            :func:`attnbook.heads.split_heads`) or ``n_heads`` is not an integer >= 1.
    """
    n_heads = check_int(n_heads, "n_heads", 1)
    check_tensor(x, "x", floating=False)  # a NumPy array: use attnbook.heads.split_heads
    check_ndim(x, "x", "(B, L, H*D)")
    check_divides(  # the errors of the NumPy twin, heads.split_heads
        n_heads, "n_heads", x.shape[-1], "the feature size", f" of x (shape {tuple(x.shape)})"
    )
    B, L, HD = x.shape
    return x.view(B, L, n_heads, HD // n_heads).transpose(1, 2)  # (B, H, L, D)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads: ``(B, H, L, D) -> (B, L, H * D)``; inverse of :func:`split_heads`.

    Args:
        x: ``(B, H, L, D)`` tensor, e.g. the per-head attention outputs.

    Returns:
        ``(B, L, H * D)`` tensor.

    Raises:
        ValueError: if ``x`` is not 4-D.
    """
    check_ndim(x, "x", "(B, H, L, D)")
    B, H, L, D = x.shape
    return x.transpose(1, 2).reshape(B, L, H * D)  # (B, L, H*D)


def additive_mask(*keep_masks, dtype: torch.dtype) -> torch.Tensor | None:
    """Combine boolean keep-masks (AND) and turn the result into one additive float mask.

    The torch twin of :func:`attnbook.masks.additive_mask` (same name, same rule);
    ``keep_mask_to_additive`` is its earlier name.

    Hidden entries get ``torch.finfo(dtype).min`` — filled **once**, after combining. Adding two
    filled masks instead would give ``finfo.min + finfo.min = -inf`` (and in fp16 even
    ``finfo.min - 16`` rounds to ``-inf``), which turns a fully hidden row into NaN; ``-1e9`` is
    not representable in fp16 at all.

    Args:
        *keep_masks: boolean tensors (``True`` = may attend) that broadcast together; ``None``
            entries are skipped. Arrays and lists are accepted; every mask moves to the
            device of the first tensor among them (e.g. a CPU padding mask joins a CUDA
            causal mask on the GPU).
        dtype: floating dtype of the scores the mask will be added to.

    Returns:
        Float tensor of the broadcast shape, on the first tensor mask's device: 0 where every
        mask keeps, ``finfo(dtype).min`` elsewhere; ``None`` if every mask is ``None``.

    Raises:
        TypeError: if a mask is not boolean (a string or other non-array included) or
            ``dtype`` is not floating.
        ValueError: if the masks do not broadcast together.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"dtype must be a floating torch.dtype (e.g. torch.float16), got "
            f"{dtype!r}; for NumPy use attnbook.masks.additive_mask"
        )
    keep = _combine_keep(*keep_masks)
    if keep is None:
        return None
    out = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    return out.masked_fill(~keep, torch.finfo(dtype).min)


#: The earlier name of :func:`additive_mask` (the API appendix and chapters may use it).
keep_mask_to_additive = additive_mask


def keep_mask_to_mha_mask(keep: torch.Tensor) -> torch.Tensor:
    """Convert a keep-mask to the polarity of ``torch.nn.MultiheadAttention``.

    The library's masks say ``True`` = may attend (as ``F.scaled_dot_product_attention``).
    ``nn.MultiheadAttention``'s boolean ``attn_mask`` and ``key_padding_mask`` and
    ``nn.Transformer*Layer``'s ``src_mask``/``tgt_mask`` say the opposite: ``True`` = *not*
    allowed. This is the one place where the library converts between the two.

    Args:
        keep: boolean keep-mask of any shape, e.g. ``(L, S)`` or ``(B, S)`` padding.

    Returns:
        ``~keep``, boolean, same shape.

    Raises:
        TypeError: if ``keep`` is not boolean.
    """
    return ~check_keep_mask(torch.as_tensor(keep), "keep")


def _combine_keep(*masks) -> torch.Tensor | None:
    # Arrays and lists are checked as NumPy arrays first (a string gets the NumPy twin's
    # TypeError, not torch's "new()"); every mask then moves to the device of the first
    # tensor mask, as scaled_dot_product_attention moves a CPU mask to q's device.
    keep, device = [], None
    for idx, m in enumerate(masks):
        if m is None:
            continue
        name = f"keep_masks[{idx}]"
        if isinstance(m, torch.Tensor):
            device = m.device if device is None else device
        else:
            m = torch.as_tensor(check_keep_mask(as_array(m, name), name))
        keep.append(check_keep_mask(m, name))
    if not keep:
        return None
    check_masks_broadcast(keep, "keep_masks")
    if device is not None:
        keep = [m.to(device) for m in keep]
    out = keep[0]
    for m in keep[1:]:
        out = out & m  # hidden as soon as one mask hides it
    return out


def combine_masks(*masks) -> torch.Tensor | None:
    """Combine keep-masks by logical AND, with broadcasting (torch twin of the NumPy one).

    The same rule as :func:`attnbook.masks.combine_masks`: ``None`` entries are skipped, and
    every entry ``None`` gives ``None``.

    Args:
        *masks: boolean keep-masks (tensors, arrays or nested lists), e.g. a causal
            ``(L, S)`` and a padding ``(B, 1, 1, S)``. Every mask moves to the device of the
            first tensor among them (arrays and lists alone give a CPU tensor).

    Returns:
        The boolean keep-mask of their broadcast shape, or ``None``.

    Raises:
        TypeError: if a mask is not boolean (a string or other non-array included).
        ValueError: if the masks do not broadcast together.
    """
    return _combine_keep(*masks)


def causal_mask(L: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Causal keep-mask ``(L, S)``, aligned bottom-right (torch twin of the NumPy one).

    ``mask[i, j] = j <= i + (S - L)``, as :func:`attnbook.masks.causal_mask`; for keys at
    arbitrary positions (a ring-buffer cache) use :func:`position_keep_mask`.

    Args:
        L: number of queries, an integer >= 0.
        S: number of keys, an integer >= 0; defaults to ``L``.
        device: the tensor's device (default: torch's).

    Returns:
        Boolean ``(L, S)`` tensor.

    Raises:
        TypeError: if ``L`` or ``S`` is not an integer.
        ValueError: if ``L`` or ``S`` is negative.
    """
    L = check_int(L, "L")
    S = L if S is None else check_int(S, "S")
    i = torch.arange(L, device=device)[:, None]  # (L, 1)
    j = torch.arange(S, device=device)[None, :]  # (1, S)
    return j <= i + (S - L)  # (L, S)


def sliding_window_mask(L: int, window: int, S: int | None = None, *, device=None):
    """Causal sliding-window keep-mask ``(L, S)``, aligned bottom-right (torch twin).

    Query ``i`` (position ``p = i + S - L``) sees keys ``p - window + 1, ..., p``, as
    :func:`attnbook.masks.sliding_window_mask`.

    Args:
        L: number of queries, an integer >= 0.
        window: keys each query sees, itself included; an integer >= 1.
        S: number of keys, an integer >= 0; defaults to ``L``.
        device: the tensor's device (default: torch's).

    Returns:
        Boolean ``(L, S)`` tensor.

    Raises:
        TypeError: if an argument is not an integer.
        ValueError: if ``window < 1`` or a length is negative.
    """
    window = check_int(window, "window", 1)
    keep = causal_mask(L, S, device=device)  # (L, S)
    window = min(window, keep.shape[1] + 1)  # any window > S is causal; keeps torch's ints small
    p = torch.arange(keep.shape[0], device=keep.device)[:, None] + (keep.shape[1] - L)
    j = torch.arange(keep.shape[1], device=keep.device)[None, :]  # (1, S)
    return keep & (j > p - window)  # (L, S)


def padding_mask(attention_mask, *, device=None) -> torch.Tensor:
    """Keep-mask ``(B, 1, 1, S)`` that hides padding keys (torch twin of the NumPy one).

    From a Hugging Face style ``attention_mask`` of 1 (token) and 0 (pad), as
    :func:`attnbook.masks.padding_mask`.

    Args:
        attention_mask: ``(B, S)`` of 0 and 1 (integers, floats or bools; tensor or array).
        device: the tensor's device (default: that of a tensor input, else torch's).

    Returns:
        Boolean ``(B, 1, 1, S)`` tensor.

    Raises:
        TypeError: if ``attention_mask`` is not numeric.
        ValueError: if it is not 2-D or holds a value other than 0 and 1.
    """
    if device is None and isinstance(attention_mask, torch.Tensor):
        device = attention_mask.device
    am = check_padding_mask(attention_mask)
    keep = torch.as_tensor(am.astype(bool), device=device)  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def position_keep_mask(
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    *,
    causal: bool = True,
    window: int | None = None,
) -> torch.Tensor:
    """Keep-mask from absolute positions.

    Causal: ``k_pos <= q_pos``; window: ``k_pos > q_pos - window``.

    With ``q_positions = arange(S - L, S)`` and ``k_positions = arange(S)`` this is the
    bottom-right causal mask of :func:`attnbook.masks.causal_mask`; it also covers a KV cache
    whose keys are not contiguous (a sliding-window ring buffer).

    Args:
        q_positions: non-negative integer ``(L,)`` or ``(B, L)`` (tensor, NumPy array or list).
        k_positions: non-negative integer ``(S,)`` or ``(B, S)``.
        causal: hide keys after the query.
        window: if given, each query sees at most ``window`` keys (itself included); a sliding
            window is causal by definition here, so it needs ``causal=True``.

    Returns:
        Boolean ``(L, S)`` or ``(B, 1, L, S)`` keep-mask (on the device of ``q_positions``).

    Raises:
        ValueError: if ``window < 1``, ``window`` is given with ``causal=False``, a position is
            negative, a positions tensor is not 1-D or 2-D, or the batch sizes of 2-D
            positions differ.
        TypeError: if the positions are not integers or ``window`` is not an integer.
    """
    causal = check_bool(causal, "causal")
    window = check_window(window, causal)
    q_positions = check_int_tensor(q_positions, "q_positions")
    k_positions = check_int_tensor(k_positions, "k_positions").to(q_positions.device)
    for name, t in (("q_positions", q_positions), ("k_positions", k_positions)):
        if t.ndim not in (1, 2):
            raise ValueError(f"{name} must be (L,) or (B, L); got shape {tuple(t.shape)}")
    if (
        q_positions.ndim == 2
        and k_positions.ndim == 2
        and q_positions.shape[0] != k_positions.shape[0]
    ):
        raise ValueError(
            f"q_positions of shape {tuple(q_positions.shape)} and k_positions of shape "
            f"{tuple(k_positions.shape)} disagree on the batch size"
        )
    qp = q_positions[..., :, None]  # (..., L, 1)
    kp = k_positions[..., None, :]  # (..., 1, S)
    keep = torch.ones(
        torch.broadcast_shapes(qp.shape, kp.shape), dtype=torch.bool, device=qp.device
    )
    if causal:
        keep = keep & (kp <= qp)
    if window is not None:
        keep = keep & (kp > qp - window)
    if keep.ndim == 3:
        keep = keep[:, None]  # (B, 1, L, S)
    return keep


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    return_weights: bool = False,
):
    """Scaled dot-product attention in torch, with GQA and the book's mask conventions.

    ``softmax(q k^T * scale + mask) v``, computed explicitly (no fused kernel), so that it can
    be checked against ``torch.nn.functional.scaled_dot_product_attention``.

    Args:
        q: ``(B, H, L, D)`` queries, floating point.
        k: ``(B, H_kv, S, D)`` keys, same dtype; ``H_kv`` must divide ``H`` (GQA: query head
            ``h`` reads KV head ``h // (H // H_kv)``, like ``enable_gqa=True``).
        v: ``(B, H_kv, S, Dv)`` values, same dtype.
        mask: ``None``, a boolean keep-mask or an additive float mask, broadcastable to
            ``(B, H, L, S)``; a 1-D mask is therefore ``(S,)``, a key mask (also when
            ``L == S``), and a per-query mask is ``(L, 1)``. As in torch, a float mask is
            *added* to the scores: a float mask of 0s and 1s hides nothing — pass a boolean
            keep-mask to hide keys. An additive mask may hold ``-inf`` but not nan or ``+inf``.
        causal: hide future keys, aligned bottom-right; ANDed with a keep-mask. A bool.
        scale: score multiplier (a finite real number), default ``1 / sqrt(D)``.
        dropout_p: dropout probability on the weights (the caller passes 0 in eval mode).
        return_weights: also return the ``(B, H, L, S)`` weights.

    Returns:
        ``(B, H, L, Dv)`` in the dtype of ``q`` (and the weights, in that dtype, if asked).
        fp16/bf16 inputs are upcast to float32 *before* ``q k^T`` (scores such as
        ``64 * 40 * 40`` overflow float16), the softmax and ``weights @ v`` run in float32, and
        the output is cast back. Hidden scores are replaced by ``finfo.min`` (so the backward
        stays finite) and rows with no visible key (every key hidden, or every score ``-inf``)
        get weight 0 and output 0.

    Raises:
        ValueError: if the tensors are not 4-D or lie on different devices, the batch sizes
            or head dims disagree, ``q`` has no heads, ``H_kv`` does not divide ``H``, ``k``
            and ``v`` disagree on ``(B, H_kv, S)`` (all by
            :func:`attnbook.checks.check_qkv_tensors`), the mask does not broadcast to
            ``(B, H, L, S)`` or (additive) holds nan or ``+inf``, ``scale`` is not finite,
            ``dropout_p`` is outside ``[0, 1)``, or the scores of finite ``q`` and ``k``
            overflow to infinity (nan or infinite inputs are passed through: a nan row gives a
            nan output).
        TypeError: if ``q``, ``k``, ``v`` are not floating tensors of one dtype, the mask is
            neither boolean nor floating, ``scale``/``dropout_p`` are not real numbers, or
            ``causal``/``return_weights`` is not a bool.

    Source: Vaswani et al. (2017), eq. 1; GQA: Ainslie et al. (2023).
    """
    check_qkv_tensors(q, k, v, same_value_dim=False, finite=False)
    B, H, L, D = q.shape
    H_kv, S = k.shape[1], k.shape[2]
    causal = check_bool(causal, "causal")
    return_weights = check_bool(return_weights, "return_weights")
    dropout_p = check_dropout(dropout_p, "dropout_p")
    scale = check_scale(scale, D)
    k = repeat_kv(k, H // H_kv)  # (B, H, S, D)
    v = repeat_kv(v, H // H_kv)  # (B, H, S, Dv)

    cdt = _compute_dtype(q.dtype)
    # upcast before the matmul: fp16 q k^T overflows at 65504 (-> -inf hides every key, +inf
    # gives NaN); float32 holds any product of fp16/bf16 values.
    scores = (q.to(cdt) @ k.to(cdt).transpose(-1, -2)) * scale  # (B, H, L, S)
    if not bool(torch.isfinite(scores).all()) and all(
        bool(torch.isfinite(t).all()) for t in (q, k)
    ):
        raise ValueError(
            f"the scores q k^T * scale overflow to inf in {cdt} although q and k are finite "
            f"(largest |q| {q.abs().max().item():.3g}, |k| {k.abs().max().item():.3g}, "
            f"scale {scale:.3g}); rescale the inputs or compute in float64"
        )
    keep = None
    if mask is not None:
        mask = check_mask(mask, "mask", (B, H, L, S), device=q.device)
        if mask.dtype == torch.bool:
            keep = mask
        else:
            scores = scores + mask.to(cdt)
    if causal:
        keep = _combine_keep(keep, causal_mask(L, S, device=q.device))  # (L, S) bottom-right
    # A score of -inf (from an additive mask) hides its key as well.
    finite_keep = ~torch.isneginf(scores)
    keep = finite_keep if keep is None else (keep & finite_keep)  # (B, H, L, S)
    scores = scores.masked_fill(~keep, torch.finfo(cdt).min)  # replace, do not add
    weights = torch.softmax(scores, dim=-1)  # (B, H, L, S)
    weights = weights * keep.any(dim=-1, keepdim=True)  # empty rows -> 0
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = (weights @ v.to(cdt)).to(q.dtype)  # (B, H, L, Dv)
    if return_weights:
        return out, weights.to(q.dtype)
    return out


class MultiHeadAttention(nn.Module):
    """Multi-head attention (MHA, GQA or MQA), self- or cross-attention, optional KV cache.

    ``n_kv_heads == n_heads`` is multi-head attention (Vaswani et al., 2017, section 3.2.2),
    ``n_kv_heads == 1`` multi-query attention (Shazeer, 2019), anything in between grouped-query
    attention (Ainslie et al., 2023), where query head ``h`` reads KV head
    ``h // (n_heads // n_kv_heads)``.

    Args:
        d_model: model width (input and output features).
        n_heads: number of query heads ``H``.
        n_kv_heads: number of key/value heads ``H_kv``; must divide ``n_heads``; default
            ``n_heads``.
        head_dim: per-head dimension ``D``; default ``d_model // n_heads`` (then ``n_heads``
            must divide ``d_model``). Scores are scaled by ``1/sqrt(head_dim)``, not
            ``1/sqrt(d_model)``.
        bias: biases on the projections.
        dropout: dropout on the attention weights, applied only in training mode.
        rope: a :class:`RotaryEmbedding` (self-attention only) or ``None``.
        out_bias: bias on the output projection; default ``bias`` (Qwen2 has q/k/v biases but
            none on the output, ``out_bias=False``).

    Parameters: ``q_proj (H*D, d_model)``, ``k_proj``/``v_proj`` ``(H_kv*D, d_model)``,
    ``o_proj (d_model, H*D)`` (``torch.nn.Linear`` layout, ``y = x W^T + b``).

    ``forward(x, context=None, mask=None, *, causal=False, window=None, positions=None,
    kv_cache=None, need_weights=False)`` returns ``(B, L, d_model)``, and the
    ``(B, n_heads, L, S_total)`` weights too if ``need_weights``. Its arguments:

    * ``x``: ``(B, L, d_model)`` queries' input, in the parameters' dtype.
    * ``context``: ``(B, S, d_model)`` keys'/values' input for cross-attention; ``None`` for
      self-attention.
    * ``mask``: boolean keep-mask or additive float mask broadcastable to
      ``(B, n_heads, L, S_total)``, e.g. ``(B, 1, 1, S)`` source padding. With a KV cache
      ``S_total`` counts the cached keys plus the new ones. A 2-D mask is read as ``(L, S)``:
      pass Hugging Face style ``(B, S)`` padding as ``(B, 1, 1, S)`` (when ``B == L`` a
      ``(B, S)`` mask would silently be taken for ``(L, S)``). A float mask is added to the
      scores (0s and 1s hide nothing).
    * ``causal``: hide later positions. Positions are ``positions`` for the queries and the
      cache's key positions; without either, bottom-right alignment.
    * ``window``: sliding-window size (itself included); needs ``causal=True`` (a sliding
      window is causal here), or comes from a sliding-window cache.
    * ``positions``: non-negative integer ``(L,)`` or ``(B, L)`` positions of the queries (RoPE
      angles and causal mask); default ``arange(past, past + L)``, where ``past`` is the
      number of tokens already in ``kv_cache``.
    * ``kv_cache``: an object with ``seq_len``, ``window`` and
      ``update(k, v, positions) -> (k_all, v_all, key_positions)`` (see
      :mod:`attnbook.kv_cache`); self-attention only.
    * ``need_weights``: also return the weights.

    ``forward`` checks its arguments with :meth:`check_inputs` (the errors are listed there)
    and builds the attention's mask with :meth:`attention_mask`.

    Raises:
        ValueError: if ``n_heads`` does not divide ``d_model`` (and no ``head_dim`` is given),
            ``n_kv_heads`` does not divide ``n_heads``, a size is < 1, or ``dropout`` is
            outside ``[0, 1)``.
        TypeError: if a size is not an integer (bools and floats such as ``2.0`` are
            rejected; NumPy integers are accepted) or ``dropout`` is not a real number.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = False,
        dropout: float = 0.0,
        rope: RotaryEmbedding | None = None,
        *,
        out_bias: bool | None = None,
    ):
        super().__init__()
        d_model = check_int(d_model, "d_model", 1)
        n_heads = check_int(n_heads, "n_heads", 1)
        n_kv_heads = n_heads if n_kv_heads is None else check_int(n_kv_heads, "n_kv_heads", 1)
        if head_dim is not None:
            head_dim = check_int(head_dim, "head_dim", 1)
        dropout = check_dropout(dropout, "dropout")
        check_head_counts(
            n_heads, n_kv_heads, " (each KV head serves n_heads // n_kv_heads query heads)"
        )
        if head_dim is None:  # >= 1: n_heads divides d_model >= 1
            head_dim = check_divides(
                n_heads, "n_heads", d_model, "d_model", " (or pass head_dim explicitly)"
            )
        if rope is not None:
            check_instance(
                rope, RotaryEmbedding, "rope", "attnbook.layers.RotaryEmbedding, or None"
            )
            check_rope_dim(head_dim)
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = (
            int(d_model),
            int(n_heads),
            int(n_kv_heads),
            int(head_dim),
        )
        self.dropout = float(dropout)
        self.rope = rope
        bias = check_bool(bias, "bias")
        out_bias = bias if out_bias is None else check_bool(out_bias, "out_bias")
        self.q_proj = nn.Linear(d_model, n_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * head_dim, d_model, bias=out_bias)

    def forward(
        self,
        x,
        context=None,
        mask=None,
        *,
        causal=False,
        window=None,
        positions=None,
        kv_cache=None,
        need_weights=False,
    ):
        """Attend from ``x`` (B, L, d_model) to itself, or to ``context``.

        Returns ``(B, L, d_model)`` (and the weights if ``need_weights``).
        Arguments: the class docstring; errors: :meth:`check_inputs`.
        """
        positions, window = self.check_inputs(x, context, mask, causal, window, positions, kv_cache)
        need_weights = check_bool(need_weights, "need_weights")
        src = x if context is None else context  # keys' and values' input
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, L, D)
        k = split_heads(self.k_proj(src), self.n_kv_heads)  # (B, H_kv, S, D)
        v = split_heads(self.v_proj(src), self.n_kv_heads)  # (B, H_kv, S, D)
        if self.rope is not None:  # rotate by position
            q, k = self.rope(q, positions), self.rope(k, positions)
        k_positions = positions  # self-attention: keys at the queries' places
        if kv_cache is not None:  # append the new keys; read all cached ones
            k, v, k_positions = kv_cache.update(k, v, positions)
        mask = self.attention_mask(mask, positions, k_positions, causal, window)
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, mask, dropout_p=p, return_weights=True
        )  # (B, H, L, D)
        out = self.o_proj(merge_heads(out))  # (B, L, H*D) -> (B, L, d_model)
        return (out, weights) if need_weights else out

    def check_inputs(self, x, context, mask, causal, window, positions, kv_cache):
        """Check the arguments of :meth:`forward`; return its positions and window.

        Args:
            x: ``(B, L, d_model)`` queries' input.
            context: ``None`` or ``(B, S, d_model)`` keys'/values' input.
            mask: the caller's mask (checked later by :meth:`attention_mask`).
            causal: hide later positions (a bool).
            window: ``None`` or the sliding-window size.
            positions: ``None`` or integer ``(L,)`` / ``(B, L)`` query positions.
            kv_cache: ``None`` or a cache with ``seq_len``, ``window`` and ``update``.

        Returns:
            ``(positions, window)``: the queries' positions as an integer tensor on the device
            of ``x`` (default ``arange(past, past + L)``, ``past`` the tokens already in
            ``kv_cache``), and the window (the cache's, for a sliding-window cache).

        Raises:
            ValueError: for inputs whose last axis is not ``d_model``, batch sizes that differ,
                positions that do not match ``L`` or are negative, a cache, RoPE or a
                causal/window mask with cross-attention, a window without ``causal=True``, or
                a window that contradicts the cache's.
            TypeError: if ``x`` (or ``context``) is not a tensor in the parameters' dtype,
                ``causal`` is not a bool, ``window`` is not an integer or ``positions`` are
                not integers.
        """
        check_module_input(x, self.q_proj.weight, self.d_model, "x")
        B, L, _ = x.shape
        causal = check_bool(causal, "causal")
        if context is not None:
            check_module_input(
                context,
                self.k_proj.weight,
                self.d_model,
                "context",
                batch=B,
                seq="S",
                detail=f" with x of shape {tuple(x.shape)}",
            )
            if kv_cache is not None or self.rope is not None:
                raise ValueError("kv_cache and rope apply to self-attention only (context given)")
            if causal or window is not None:
                raise ValueError("causal/window masks apply to self-attention only")
        check_kv_cache(kv_cache)
        past = 0 if kv_cache is None else int(kv_cache.seq_len)
        if positions is None:
            positions = torch.arange(past, past + L, device=x.device)  # (L,)
        positions = check_positions(
            check_int_tensor(positions, "positions"), L, x.shape, batch=True
        )
        window = check_window(window, causal)
        cache_window = None if kv_cache is None else getattr(kv_cache, "window", None)
        if cache_window is not None:
            if window is not None and window != cache_window:
                raise ValueError(f"window {window} contradicts the cache's window {cache_window}")
            window = check_window(cache_window, causal, "the kv_cache's window")
        return positions.to(x.device), window

    def attention_mask(self, mask, q_positions, k_positions, causal, window):
        """The mask :meth:`forward` gives the attention: ``mask`` AND the causal/window mask.

        Args:
            mask: ``None``, a boolean keep-mask or an additive float mask broadcastable to
                ``(B, n_heads, L, S)``.
            q_positions: ``(L,)`` or ``(B, L)`` integer positions of the queries.
            k_positions: ``(S,)`` or ``(B, S)`` integer positions of the keys.
            causal: hide keys at later positions than the query.
            window: ``None`` or the sliding-window size (with ``causal``).

        Returns:
            ``None``, a boolean keep-mask, or (for an additive ``mask``) a float mask with
            ``-inf`` where the causal/window mask hides a key (hidden by replacement, so a
            large additive value cannot undo it).

        Raises:
            ValueError: if ``mask`` does not broadcast to the scores' shape ``(., ., L, S)``.
            TypeError: if ``mask`` is neither boolean nor floating.
        """
        keep = None
        if causal or window is not None:
            keep = position_keep_mask(
                q_positions, k_positions.to(q_positions.device), causal=causal, window=window
            )
        if mask is None:
            return keep
        mask = check_mask(mask, "mask", device=q_positions.device)
        if keep is None:
            return mask  # scaled_dot_product_attention checks its shape
        check_key_mask_length(mask, "mask", *keep.shape[-2:])  # 1-D: (S,)
        try:
            shape = torch.broadcast_shapes(tuple(mask.shape), tuple(keep.shape))
        except RuntimeError:
            shape = None
        if shape is None or shape[-2:] != keep.shape[-2:] or len(shape) > 4:
            L, S = keep.shape[-2:]
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                f"(B, H, L={L}, S={S}); use e.g. (L, S), (B, 1, 1, S) or (B, 1, L, S)"
            )
        if mask.dtype == torch.bool:
            return _combine_keep(keep, mask)
        return torch.where(keep, mask, -math.inf)  # hide by replacement, not by adding


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (MLA): keys and values from a cached low-rank latent.

    Per token the cache holds only the compressed latent ``c_kv`` (``kv_lora_rank`` numbers,
    after an RMSNorm) and one RoPE key ``k_pe`` shared by all heads (``qk_rope_head_dim``
    numbers) — ``kv_lora_rank + qk_rope_head_dim`` per layer instead of
    ``2 * n_heads * head_dim`` for multi-head attention. The per-head keys
    ``[k_nope ; k_pe]`` and values are re-expanded from ``c_kv`` by ``kv_b_proj``.

    Args:
        d_model: model width (``hidden_size``).
        n_heads: number of heads.
        kv_lora_rank: latent size ``d_c`` (512 in DeepSeek-V2).
        qk_nope_head_dim: per-head query/key dimension without position (128 in DeepSeek-V2).
        qk_rope_head_dim: per-head RoPE dimension, key part shared across heads (64).
        v_head_dim: per-head value dimension (128).
        q_lora_rank: latent size of the query (1536 in DeepSeek-V2), or ``None`` for a plain
            query projection.
        rope_base: ``rope_theta``.
        eps: epsilon of the latents' RMSNorm.

    Scores are scaled by ``1/sqrt(qk_nope_head_dim + qk_rope_head_dim)``.

    Raises:
        ValueError: if a size is < 1 or ``qk_rope_head_dim`` is odd.
        TypeError: if a size is not an integer (bools and floats are rejected).

    Source: DeepSeek-AI, "DeepSeek-V2" (2024), section 2.1, eqs. 9-19.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        rope_base: float = 10000.0,
        eps: float = 1e-6,
    ):
        super().__init__()
        d_model, n_heads = check_int(d_model, "d_model", 1), check_int(n_heads, "n_heads", 1)
        kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, q_lora_rank = check_mla_sizes(
            kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, q_lora_rank
        )
        self.d_model, self.n_heads = d_model, n_heads
        self.kv_lora_rank, self.qk_nope_head_dim = kv_lora_rank, qk_nope_head_dim
        self.qk_rope_head_dim, self.v_head_dim = qk_rope_head_dim, v_head_dim
        self.q_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.rope = RotaryEmbedding(rope_base)
        if q_lora_rank is None:
            self.q_proj = nn.Linear(d_model, n_heads * self.q_head_dim, bias=False)
        else:
            self.q_proj = nn.Sequential(
                nn.Linear(d_model, q_lora_rank, bias=False),
                RMSNorm(q_lora_rank, eps),
                nn.Linear(q_lora_rank, n_heads * self.q_head_dim, bias=False),
            )
        self.kv_a_proj = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=False)
        self.kv_a_norm = RMSNorm(kv_lora_rank, eps)
        self.kv_b_proj = nn.Linear(
            kv_lora_rank, n_heads * (qk_nope_head_dim + v_head_dim), bias=False
        )
        self.o_proj = nn.Linear(n_heads * v_head_dim, d_model, bias=False)

    def cache_numbers_per_token(self) -> int:
        """Numbers cached per token by this layer: ``kv_lora_rank + qk_rope_head_dim``.

        Returns:
            The count (an ``int``; multiply by the element size for bytes). DeepSeek-V2's
            512 + 64 = 576, against ``2 * n_heads * head_dim`` for multi-head attention.
        """
        return self.kv_lora_rank + self.qk_rope_head_dim

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        causal: bool = True,
        positions: torch.Tensor | None = None,
        kv_cache=None,
    ) -> torch.Tensor:
        """Self-attention of ``x (B, L, d_model)``; returns ``(B, L, d_model)``.

        Args:
            x: ``(B, L, d_model)`` input.
            mask: boolean keep-mask (``True`` = may attend) broadcastable to
                ``(B, n_heads, L, S_total)``, e.g. ``(B, 1, 1, S_total)`` padding; or ``None``.
            causal: hide keys at later positions than the query (default True).
            positions: integer ``(L,)`` or ``(B, L)`` positions of the queries (RoPE angles and
                causal mask); default ``arange(past, past + L)``, ``past`` the tokens already in
                ``kv_cache``.
            kv_cache: ``None`` or an object with ``seq_len`` and
                ``update(c_kv, k_pe, positions) -> (c_kv_all, k_pe_all, key_positions)``
                holding ``(B, S, kv_lora_rank)`` and ``(B, S, qk_rope_head_dim)`` (see
                :class:`attnbook.kv_cache.LatentCache`).

        Returns:
            ``(B, L, d_model)``, same dtype as ``x``.

        Raises:
            ValueError: if ``x`` is not ``(B, L, d_model)``, ``positions`` does not end in
                ``L`` or is negative, or the mask does not broadcast.
            TypeError: if ``x`` is not a tensor in the parameters' dtype, ``positions`` is not
                an integer tensor or the mask is not boolean (a string or other non-array
                included).
        """
        check_module_input(x, self.kv_a_proj.weight, self.d_model, "x")
        causal = check_bool(causal, "causal")
        B, L, _ = x.shape
        H = self.n_heads
        check_kv_cache(kv_cache)
        past = 0 if kv_cache is None else int(kv_cache.seq_len)
        if positions is None:
            positions = torch.arange(past, past + L, device=x.device)  # (L,)
        positions = check_positions(
            check_int_tensor(positions, "positions"), L, x.shape, batch=True
        )
        q = self.q_proj(x).view(B, L, H, self.q_head_dim).transpose(1, 2)  # (B, H, L, Dq)
        q_nope, q_pe = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        q_pe = self.rope(q_pe, positions)  # (B, H, L, Dr)
        kv_a = self.kv_a_proj(x)  # (B, L, d_c + Dr)
        c_kv, k_pe = kv_a.split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        c_kv = self.kv_a_norm(c_kv)  # (B, L, d_c)
        k_pe = self.rope(k_pe, positions)  # (B, L, Dr), one RoPE key shared by all heads
        k_positions = positions  # self-attention: keys at the queries' places
        if kv_cache is not None:
            c_kv, k_pe, k_positions = kv_cache.update(c_kv, k_pe, positions)  # (B, S, .)
        S = c_kv.shape[1]
        kv = self.kv_b_proj(c_kv).view(B, S, H, self.qk_nope_head_dim + self.v_head_dim)
        kv = kv.transpose(1, 2)  # (B, H, S, Dn + Dv)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k = torch.cat((k_nope, k_pe[:, None].expand(B, H, S, self.qk_rope_head_dim)), dim=-1)
        q = torch.cat((q_nope, q_pe), dim=-1)  # (B, H, L, Dq)
        keep = None
        if causal:
            keep = position_keep_mask(positions.to(x.device), k_positions.to(x.device))
        if mask is not None:
            if not isinstance(mask, torch.Tensor):  # a string gets the NumPy twin's TypeError
                mask = check_keep_mask(as_array(mask, "mask"), "mask")
            mask = check_keep_mask(torch.as_tensor(mask, device=x.device), "mask", (B, H, L, S))
            keep = _combine_keep(keep, mask)
        out = scaled_dot_product_attention(q, k, v, keep)  # (B, H, L, Dv)
        out = out.transpose(1, 2).reshape(B, L, H * self.v_head_dim)  # (B, L, H*Dv)
        return self.o_proj(out)
