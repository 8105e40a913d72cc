"""Transformer blocks in torch: feed-forward networks, residual connections, Pre-LN and Post-LN.

A Transformer layer is two (or, in the decoder of an encoder-decoder model, three) sublayers,
each wrapped in a residual connection and a normalization:

* **Post-LN** (``norm_first=False``, the original Transformer, Vaswani et al., 2017,
  section 3.1): ``x = Norm(x + Sublayer(x))``;
* **Pre-LN** (``norm_first=True``, GPT-2, Llama; Xiong et al., 2020): ``x = x + Sublayer(Norm(x))``.

The sublayers are :class:`attnbook.layers.MultiHeadAttention` and a position-wise feed-forward
network: ``FFN(x) = act(x W1 + b1) W2 + b2`` with ReLU (Vaswani et al., 2017, eq. 2) or GELU
(Hendrycks & Gimpel, 2016), or SwiGLU ``(SiLU(x W_gate) * (x W_up)) W_down`` (Shazeer, 2020,
eq. 6; Llama, Qwen2, Mistral).

Submodule names follow ``torch.nn.TransformerEncoderLayer``/``TransformerDecoderLayer``
(``linear1``, ``linear2``, ``norm1``, ``norm2``, ``norm3``) so weights can be copied across.
All modules take and return ``(B, L, d_model)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_choice, check_int
from .layers import LayerNorm, MultiHeadAttention, RMSNorm, RotaryEmbedding

__all__ = [
    "FeedForward",
    "SwiGLU",
    "make_norm",
    "make_ffn",
    "TransformerBlock",
    "EncoderDecoderBlock",
]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``act(x W1 + b1) W2 + b2``.

    Args:
        d_model: input and output width.
        d_ff: hidden width (2048 for d_model 512 in the original base model).
        activation: ``"relu"`` (the original) or ``"gelu"`` (exact erf form, BERT/GPT-2).
        bias: biases on both linear layers.
        dropout: dropout after the activation, training mode only (as in torch's layers).

    Shapes: ``(..., d_model) -> (..., d_model)``.

    Raises:
        ValueError: for an unknown activation or a size < 1.
        TypeError: if a size is not an integer (bools and floats are rejected).

    Source: Vaswani et al. (2017), eq. 2.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        bias: bool = True,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.activation = check_choice(activation, "activation", sorted(_ACTIVATIONS))
        d_model, d_ff = check_int(d_model, "d_model", 1), check_int(d_ff, "d_ff", 1)
        self.act = _ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    # fmt: off
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``act(x W1 + b1) W2 + b2`` at each position: (..., d_model)."""
        h = self.act(self.linear1(x))  # (..., d_ff)
        return self.linear2(self.dropout(h))  # (..., d_model)
    # fmt: on


class SwiGLU(nn.Module):
    """Gated feed-forward network ``(SiLU(x W_gate) * (x W_up)) W_down``.

    Three matrices instead of two; models keep the parameter count by using ``d_ff`` of about
    ``8/3 d_model`` (Llama-2-7B: 11008 for 4096).

    Args:
        d_model: input and output width.
        d_ff: hidden width (``intermediate_size``).
        bias: biases (Llama-family models use none).

    Shapes: ``(..., d_model) -> (..., d_model)``.

    Raises:
        ValueError: if ``d_model`` or ``d_ff`` is < 1.
        TypeError: if a size is not an integer (bools and floats are rejected).

    Source: Shazeer, "GLU Variants Improve Transformer" (2020), eq. 6.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        d_model, d_ff = check_int(d_model, "d_model", 1), check_int(d_ff, "d_ff", 1)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(SiLU(x W_gate) * (x W_up)) W_down`` at each position."""
        h = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., d_ff)
        return self.down_proj(h)  # (..., d_model)


def make_norm(kind: str, d_model: int, eps: float, bias: bool = True) -> nn.Module:
    """A norm by name: ``"layernorm"`` or ``"rmsnorm"`` (:mod:`attnbook.layers`'s modules).

    Args:
        kind: ``"layernorm"`` (:class:`attnbook.layers.LayerNorm`, Ba et al., 2016) or
            ``"rmsnorm"`` (:class:`attnbook.layers.RMSNorm`, Zhang & Sennrich, 2019).
        d_model: feature size, the last axis the norm normalizes.
        eps: added to the variance (LayerNorm) or the mean square (RMSNorm).
        bias: learn a bias (LayerNorm only; RMSNorm has none and ignores it).

    Returns:
        A fresh ``torch.nn.Module`` mapping ``(..., d_model)`` to the same shape and dtype.

    Raises:
        ValueError: for another ``kind``.
    """
    check_choice(kind, "norm", ("layernorm", "rmsnorm"))
    if kind == "layernorm":
        return LayerNorm(d_model, eps, bias=bias)
    return RMSNorm(d_model, eps)


def make_ffn(kind: str, d_model: int, d_ff: int, bias: bool, dropout: float) -> nn.Module:
    """A feed-forward network by name: ``"relu"``/``"gelu"`` or ``"swiglu"``.

    Args:
        kind: ``"relu"`` or ``"gelu"`` for :class:`FeedForward` with that activation
            (Vaswani et al., 2017, eq. 2), ``"swiglu"`` for :class:`SwiGLU` (Shazeer, 2020,
            eq. 6).
        d_model: input and output width.
        d_ff: hidden width.
        bias: biases on the linear layers.
        dropout: dropout after the activation (:class:`FeedForward` only; :class:`SwiGLU`
            has none).

    Returns:
        A fresh ``torch.nn.Module`` mapping ``(..., d_model)`` to ``(..., d_model)``.

    Raises:
        ValueError: for another ``kind`` or a size < 1.
        TypeError: if a size is not an integer.
    """
    check_choice(kind, "ffn", ("relu", "gelu", "swiglu"))
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, bias=bias)
    return FeedForward(d_model, d_ff, kind, bias=bias, dropout=dropout)


class TransformerBlock(nn.Module):
    """One encoder layer (or, with ``causal=True`` at call time, one decoder-only layer).

    Post-LN (``norm_first=False``)::

        x = norm1(x + dropout(self_attn(x)))
        x = norm2(x + dropout(ffn(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout(self_attn(norm1(x)))
        x = x + dropout(ffn(norm2(x)))

    With ``norm="layernorm"``, ``ffn="relu"``/``"gelu"`` and ``bias=True`` this computes exactly
    what ``torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, activation,
    norm_first=norm_first, batch_first=True)`` computes.

    Args:
        d_model, n_heads, d_ff: widths.
        n_kv_heads: key/value heads (GQA/MQA), default ``n_heads``.
        dropout: residual, attention and FFN dropout (training mode only).
        ffn: ``"relu"``, ``"gelu"`` or ``"swiglu"``.
        norm_first: Pre-LN if True, Post-LN if False.
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        eps: the norms' epsilon.
        bias: biases in attention, FFN and LayerNorm.
        rope: optional :class:`attnbook.layers.RotaryEmbedding`.
        qkv_bias: biases of the query/key/value projections (default ``bias``; Qwen2 has
            them while its other layers have none: ``bias=False, qkv_bias=True``).
        head_dim: per-head width of the attention, default ``d_model // n_heads`` (see
            :class:`attnbook.layers.MultiHeadAttention`).

    ``forward(x, mask=None, *, causal=False, window=None, positions=None, kv_cache=None)``
    maps ``x (B, L, d_model)`` to ``(B, L, d_model)`` in the dtype of ``x``:

    * ``mask``: boolean keep-mask (``True`` = may attend) or additive float mask,
      broadcastable to ``(B, n_heads, L, S_total)``, e.g. ``(B, 1, 1, S)`` padding.
    * ``causal``: hide later positions (decoder-only models), bottom-right aligned.
    * ``window``: sliding-window size (the query itself included), with ``causal``.
    * ``positions``: integer ``(L,)`` or ``(B, L)`` positions of the queries (RoPE angles and
      causal mask); default continues after the tokens in ``kv_cache``.
    * ``kv_cache``: a cache of this layer's keys and values (see :mod:`attnbook.kv_cache`), or
      ``None``.

    It raises as :meth:`attnbook.layers.MultiHeadAttention.check_inputs` (shapes, positions,
    masks, a window that contradicts the cache's).

    Raises:
        ValueError: as :class:`attnbook.layers.MultiHeadAttention`, or for an unknown
            ``ffn``/``norm``.
        TypeError: as :class:`attnbook.layers.MultiHeadAttention` (a size that is not an
            integer).

    Source: Vaswani et al. (2017), section 3.1; Xiong et al., "On Layer Normalization in the
    Transformer Architecture" (2020), figure 1.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        n_kv_heads: int | None = None,
        dropout: float = 0.0,
        ffn: str = "relu",
        norm_first: bool = False,
        norm: str = "layernorm",
        eps: float = 1e-5,
        bias: bool = True,
        rope: RotaryEmbedding | None = None,
        qkv_bias: bool | None = None,
        head_dim: int | None = None,
    ):
        super().__init__()
        self.norm_first = bool(norm_first)
        qkv_bias = bias if qkv_bias is None else qkv_bias
        self.self_attn = MultiHeadAttention(
            d_model,
            n_heads,
            n_kv_heads,
            head_dim,
            bias=qkv_bias,
            dropout=dropout,
            rope=rope,
            out_bias=bias,
        )
        self.ffn = make_ffn(ffn, d_model, d_ff, bias, dropout)
        self.norm1 = make_norm(norm, d_model, eps, bias)
        self.norm2 = make_norm(norm, d_model, eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    # fmt: off
    def forward(self, x, mask=None, *, causal=False, window=None,
                positions=None, kv_cache=None):
        """One layer: ``(B, L, d_model) -> (B, L, d_model)``.

        The arguments go to the self-attention (see the class docstring).
        """

        def attn(h):  # self-attention with the caller's mask, positions, cache
            return self.self_attn(h, mask=mask, causal=causal, window=window,
                                  positions=positions, kv_cache=kv_cache)

        if self.norm_first:  # Pre-LN: x + Sublayer(Norm(x))
            x = x + self.dropout1(attn(self.norm1(x)))
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:  # Post-LN: Norm(x + Sublayer(x))
            x = self.norm1(x + self.dropout1(attn(x)))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x  # (B, L, d_model)
    # fmt: on


class EncoderDecoderBlock(nn.Module):
    """Decoder layer of an encoder-decoder Transformer: causal self-attention, cross-attention, FFN.

    Post-LN (``norm_first=False``)::

        x = norm1(x + self_attn(x, causal))
        x = norm2(x + cross_attn(x, memory))
        x = norm3(x + ffn(x))

    Pre-LN applies each norm to the sublayer's input instead. With LayerNorm, ReLU/GELU and
    biases this equals ``torch.nn.TransformerDecoderLayer(..., batch_first=True)``.

    No RoPE: the original model adds sinusoidal encodings to the embeddings.

    Args:
        d_model: model width (512 in the base model).
        n_heads: number of attention heads of both attentions (8 in the base model).
        d_ff: hidden width of the feed-forward network (2048 in the base model).
        n_kv_heads: key/value heads (GQA/MQA) of both attentions, default ``n_heads``.
        dropout: residual, attention and FFN dropout (training mode only).
        ffn: ``"relu"``, ``"gelu"`` or ``"swiglu"``.
        norm_first: Pre-LN if True, Post-LN (the original) if False.
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        eps: the norms' epsilon.
        bias: biases in attention, FFN and LayerNorm.
        head_dim: per-head width of both attentions, default ``d_model // n_heads``.

    ``forward(x, memory, *, self_mask=None, memory_mask=None, causal=True, kv_cache=None)``
    maps ``x (B, L, d_model)`` to ``(B, L, d_model)`` in the dtype of ``x``:

    * ``x``: decoder input (target embeddings or the previous layer's output).
    * ``memory``: ``(B, S, d_model)`` encoder output that the cross-attention reads.
    * ``self_mask``: keep-mask for the self-attention, broadcastable to
      ``(B, H, L, L_total)``.
    * ``memory_mask``: keep-mask for the cross-attention, e.g. source padding
      ``(B, 1, 1, S)``.
    * ``causal``: causal self-attention (default True).
    * ``kv_cache``: cache of the self-attention (the cross-attention keys are recomputed).

    It raises as :meth:`attnbook.layers.MultiHeadAttention.check_inputs`, e.g. if ``memory`` is
    not ``(B, S, d_model)`` with the batch of ``x``.

    Raises:
        ValueError: as :class:`attnbook.layers.MultiHeadAttention`, or for an unknown
            ``ffn``/``norm``.
        TypeError: as :class:`attnbook.layers.MultiHeadAttention` (a size that is not an
            integer).

    Source: Vaswani et al. (2017), section 3.1 ("Decoder") and figure 1.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        n_kv_heads: int | None = None,
        dropout: float = 0.0,
        ffn: str = "relu",
        norm_first: bool = False,
        norm: str = "layernorm",
        eps: float = 1e-5,
        bias: bool = True,
        head_dim: int | None = None,
    ):
        super().__init__()
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, n_kv_heads, head_dim, bias=bias, dropout=dropout
        )
        self.cross_attn = MultiHeadAttention(
            d_model, n_heads, n_kv_heads, head_dim, bias=bias, dropout=dropout
        )
        self.ffn = make_ffn(ffn, d_model, d_ff, bias, dropout)
        self.norm1 = make_norm(norm, d_model, eps, bias)
        self.norm2 = make_norm(norm, d_model, eps, bias)
        self.norm3 = make_norm(norm, d_model, eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    # fmt: off
    def forward(self, x, memory, *, self_mask=None, memory_mask=None,
                causal=True, kv_cache=None):
        """Decode ``x`` (B, L, d_model) against the encoder output ``memory``.

        Returns ``(B, L, d_model)``; the arguments are in the class docstring.
        """

        def self_attn(h):  # causal self-attention over the decoder's tokens
            return self.self_attn(h, mask=self_mask, causal=causal,
                                  kv_cache=kv_cache)

        def cross_attn(h):  # queries from h, keys and values from memory
            return self.cross_attn(h, memory, memory_mask)

        if self.norm_first:  # Pre-LN: x + Sublayer(Norm(x))
            x = x + self.dropout1(self_attn(self.norm1(x)))
            x = x + self.dropout2(cross_attn(self.norm2(x)))
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:  # Post-LN: Norm(x + Sublayer(x))
            x = self.norm1(x + self.dropout1(self_attn(x)))
            x = self.norm2(x + self.dropout2(cross_attn(x)))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x  # (B, L, d_model)
    # fmt: on
