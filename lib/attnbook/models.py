"""Encoder-only, decoder-only and encoder-decoder Transformers built from the same blocks.

One configuration dataclass, :class:`ModelConfig`, describes every model of the book — the
original base Transformer (:data:`BASE_TRANSFORMER`), GPT-style and Llama-style decoders, and
the published configurations of :mod:`attnbook.kv_cache` (read from Hugging Face
``config.json`` files by :meth:`ModelConfig.from_hf_config`, the one place where Hugging Face
field names are mapped to the book's).

:func:`param_count` gives the number of parameters in closed form; the tests check it against
the parameters of the modules built here (on the ``meta`` device, so that 7-billion-parameter
configurations cost no memory) and against published totals.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .blocks import EncoderDecoderBlock, TransformerBlock, make_norm
from .nn import RotaryEmbedding, _check_positions
from .positional import sinusoidal_encoding

__all__ = [
    "ModelConfig",
    "BASE_TRANSFORMER",
    "param_count",
    "count_parameters",
    "EncoderOnlyModel",
    "DecoderOnlyModel",
    "EncoderDecoderModel",
    "build_model",
]

_ARCHS = ("encoder", "decoder", "encoder-decoder")


def _is_int(v) -> bool:
    """Python or NumPy integer, not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
_POSITIONAL = ("sinusoidal", "learned", "rope", "none")
_FFNS = ("relu", "gelu", "swiglu")
_NORMS = ("layernorm", "rmsnorm")


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of a Transformer, in the field's names.

    Attributes:
        vocab_size: number of tokens.
        d_model: model width (``hidden_size``).
        n_heads: query heads (``num_attention_heads``).
        n_layers: layers of the decoder (decoder-only and encoder-decoder) or of the encoder
            (encoder-only) (``num_hidden_layers``).
        d_ff: feed-forward hidden width (``intermediate_size``).
        n_kv_heads: key/value heads (``num_key_value_heads``); ``None`` means ``n_heads``.
        head_dim: per-head width; ``None`` means ``d_model // n_heads``.
        n_encoder_layers: encoder layers of an encoder-decoder model.
        arch: ``"encoder"``, ``"decoder"`` or ``"encoder-decoder"``.
        max_seq_len: longest sequence (``max_position_embeddings``); sizes learned position
            tables and sinusoidal buffers.
        norm: ``"layernorm"`` or ``"rmsnorm"``.
        norm_first: Pre-LN (True; then each stack ends in a final norm) or Post-LN (False).
        eps: the norms' epsilon (``rms_norm_eps``).
        ffn: ``"relu"``, ``"gelu"`` or ``"swiglu"``.
        bias: biases in every linear layer and LayerNorm.
        qkv_bias: biases of the query/key/value projections; ``None`` means ``bias``.
        positional: ``"sinusoidal"`` (added to the embeddings, which are scaled by
            ``sqrt(d_model)``, Vaswani et al. section 3.4), ``"learned"``, ``"rope"`` or
            ``"none"``.
        rope_theta: RoPE base.
        tie_embeddings: the output projection reuses the token embedding
            (``tie_word_embeddings``); in an encoder-decoder model the encoder and decoder also
            share it, as in the original.
        sliding_window: attention window in tokens (Mistral-7B-v0.1: 4096) or ``None``.
        kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim:
            multi-head latent attention (DeepSeek-V2); ``kv_lora_rank=None`` means none.
        name: a label.
        source: where the numbers come from (paper, or model and its config.json).

    Sizes accept Python or NumPy integers (stored as ``int``); bools and floats are rejected.

    Raises:
        ValueError: if a size is not a positive integer (``n_encoder_layers``: >= 0; optional
            sizes such as ``sliding_window`` or ``kv_lora_rank``: positive or ``None``),
            ``eps`` is not finite and > 0, ``rope_theta`` is not finite and > 1, a choice
            (``arch``, ``positional``, ``ffn``, ``norm``) is unknown, ``n_heads`` does not
            divide ``d_model`` (without ``head_dim``), ``n_kv_heads`` does not divide
            ``n_heads``, or RoPE meets an odd ``head_dim``.
    """

    vocab_size: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    n_encoder_layers: int = 0
    arch: str = "decoder"
    max_seq_len: int = 512
    norm: str = "layernorm"
    norm_first: bool = True
    eps: float = 1e-5
    ffn: str = "relu"
    bias: bool = True
    qkv_bias: bool | None = None
    positional: str = "sinusoidal"
    rope_theta: float = 10000.0
    tie_embeddings: bool = True
    sliding_window: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    name: str = ""
    source: str = ""

    def __post_init__(self):
        def set_int(f, v):
            object.__setattr__(self, f, int(v))  # NumPy integers become Python ints

        for f in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_seq_len"):
            v = getattr(self, f)
            if not _is_int(v) or v < 1:
                raise ValueError(f"{f} must be a positive integer, got {v!r}")
            set_int(f, v)
        if not _is_int(self.n_encoder_layers) or self.n_encoder_layers < 0:
            raise ValueError(
                f"n_encoder_layers must be an integer >= 0, got {self.n_encoder_layers!r}")
        set_int("n_encoder_layers", self.n_encoder_layers)
        for f in ("n_kv_heads", "head_dim", "sliding_window", "kv_lora_rank", "q_lora_rank",
                  "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            v = getattr(self, f)
            if v is None:
                continue
            if not _is_int(v) or v < 1:
                raise ValueError(f"{f} must be a positive integer or None, got {v!r}")
            set_int(f, v)
        for f, lo in (("eps", 0.0), ("rope_theta", 1.0)):
            v = getattr(self, f)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or \
                    not math.isfinite(v) or v <= lo:
                raise ValueError(f"{f} must be a finite number > {lo:g}, got {v!r}")
            object.__setattr__(self, f, float(v))
        if self.arch not in _ARCHS:
            raise ValueError(f"arch must be one of {_ARCHS}, got {self.arch!r}")
        if self.positional not in _POSITIONAL:
            raise ValueError(f"positional must be one of {_POSITIONAL}, got {self.positional!r}")
        if self.ffn not in _FFNS:
            raise ValueError(f"ffn must be one of {_FFNS}, got {self.ffn!r}")
        if self.norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {self.norm!r}")
        if self.head_dim is None and self.kv_lora_rank is None and self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads {self.n_heads} must divide d_model {self.d_model} (or set head_dim)"
            )
        if self.n_heads % self.kv_heads:
            raise ValueError(f"n_kv_heads {self.kv_heads} must divide n_heads {self.n_heads}")
        if self.arch == "encoder-decoder" and self.n_encoder_layers < 1:
            raise ValueError("an encoder-decoder config needs n_encoder_layers >= 1")
        if self.kv_lora_rank is not None and self.qk_rope_head_dim is None:
            raise ValueError("an MLA config (kv_lora_rank set) needs qk_rope_head_dim")
        if self.positional == "rope" and not self.uses_mla and self.head_size % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions; head_dim must be even, got "
                             f"{self.head_size}")

    @property
    def kv_heads(self) -> int:
        """``n_kv_heads``, resolved (``n_heads`` when unset)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_size(self) -> int:
        """``head_dim``, resolved (``d_model // n_heads`` when unset)."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def uses_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` set)."""
        return self.kv_lora_rank is not None

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (``dataclasses.replace``).

        Args:
            **changes: new values of fields, by name (e.g. ``n_kv_heads=2``).

        Returns:
            A new :class:`attnbook.models.ModelConfig`, validated like any other; ``self`` is
            unchanged (the config is frozen).

        Raises:
            ValueError: if the changed config is inconsistent (as the constructor).
            TypeError: for a name that is not a field.
        """
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_hf_config(cls, hf: dict, *, name: str = "", source: str = "") -> "ModelConfig":
        """Build a decoder-only config from a Hugging Face ``config.json`` dictionary.

        The one place where Hugging Face names are mapped: ``hidden_size -> d_model``,
        ``num_attention_heads -> n_heads``, ``num_key_value_heads -> n_kv_heads`` (default
        ``n_heads``), ``num_hidden_layers -> n_layers``, ``intermediate_size -> d_ff``,
        ``head_dim``, ``max_position_embeddings -> max_seq_len``, ``rms_norm_eps -> eps``,
        ``rope_theta``, ``tie_word_embeddings``, ``sliding_window`` (ignored when
        ``use_sliding_window`` is false, as in Qwen2), ``attention_bias`` (Qwen2's q/k/v biases
        are implied by ``model_type == "qwen2"``), and the MLA fields ``kv_lora_rank``,
        ``q_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``. Models
        with ``hidden_act`` ``"silu"`` get SwiGLU feed-forward networks and RMSNorm, Pre-LN,
        RoPE and no other biases (the Llama family).

        Args:
            hf: the parsed ``config.json``.
            name: label for the config.
            source: citation (model name and config file).

        Returns:
            A :class:`ModelConfig`.

        Raises:
            ValueError: if a required field (``hidden_size``, ``num_attention_heads``,
                ``num_hidden_layers``, ``intermediate_size``, ``vocab_size``) is missing (a
                multimodal config that nests them under ``text_config`` is named as such) or
                is not an integer, ``hidden_act`` is not one of ``silu``/``swish``, a GELU
                variant or ``relu``, ``rope_scaling`` is set (not modelled here), or the
                resulting :class:`ModelConfig` is invalid.
            TypeError: if ``hf`` is not a dictionary.
        """
        if not isinstance(hf, Mapping):
            raise TypeError(f"hf must be a dict (a parsed config.json), got {type(hf).__name__}")
        required = ("hidden_size", "num_attention_heads", "num_hidden_layers",
                    "intermediate_size", "vocab_size")
        missing = [k for k in required if k not in hf]
        if missing:
            hint = ""
            if isinstance(hf.get("text_config"), Mapping):
                hint = ("; the model nests its language model under 'text_config': pass "
                        "hf['text_config'] instead")
            raise ValueError(f"Hugging Face config lacks {missing}; got keys {sorted(hf)}{hint}")

        def get_int(key, default=None):
            v = hf.get(key, default)
            if v is None and default is None and key not in required:
                return None
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not _is_int(v):
                raise ValueError(f"Hugging Face config field {key!r} must be an integer, got "
                                 f"{v!r}")
            return int(v)

        if hf.get("rope_scaling") is not None:
            raise ValueError(
                f"Hugging Face config has rope_scaling={hf['rope_scaling']!r}, which attnbook's "
                "RoPE does not model (e.g. Llama-3.1's frequency rescaling); drop the field "
                "only if positions stay below original_max_position_embeddings"
            )
        window = hf.get("sliding_window")
        if not hf.get("use_sliding_window", True):
            window = None
        qkv_bias = hf.get("attention_bias", hf.get("model_type") == "qwen2")
        act = hf.get("hidden_act", "silu")
        if act in ("silu", "swish"):
            gated, ffn = True, "swiglu"
        elif isinstance(act, str) and act.startswith("gelu"):
            gated, ffn = False, "gelu"
        elif act == "relu":
            gated, ffn = False, "relu"
        else:
            raise ValueError(f"Hugging Face config hidden_act {act!r} is not supported; one of "
                             "'silu'/'swish' (SwiGLU), 'gelu*' or 'relu'")
        head_dim = get_int("head_dim")
        d_model, n_heads = get_int("hidden_size"), get_int("num_attention_heads")
        if head_dim is not None and n_heads and head_dim == d_model // n_heads:
            head_dim = None
        return cls(
            vocab_size=get_int("vocab_size"),
            d_model=d_model,
            n_heads=n_heads,
            n_layers=get_int("num_hidden_layers"),
            d_ff=get_int("intermediate_size"),
            n_kv_heads=hf.get("num_key_value_heads"),
            head_dim=head_dim,
            arch="decoder",
            max_seq_len=get_int("max_position_embeddings", 2048),
            norm="rmsnorm" if gated else "layernorm",
            norm_first=True,
            eps=float(hf.get("rms_norm_eps", hf.get("layer_norm_eps", 1e-6))),
            ffn=ffn,
            bias=bool(hf.get("mlp_bias", False)),
            qkv_bias=bool(qkv_bias),
            positional="rope",
            rope_theta=float(hf.get("rope_theta", 10000.0)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            sliding_window=window,
            kv_lora_rank=hf.get("kv_lora_rank"),
            q_lora_rank=hf.get("q_lora_rank"),
            qk_nope_head_dim=hf.get("qk_nope_head_dim"),
            qk_rope_head_dim=hf.get("qk_rope_head_dim"),
            v_head_dim=hf.get("v_head_dim"),
            name=name,
            source=source,
        )


#: The base model of Vaswani et al. (2017), table 3 — N = 6 encoder and 6 decoder layers,
#: d_model 512, h = 8 heads, d_ff 2048, Post-LN, ReLU, sinusoidal positions, shared source/target
#: embedding and output projection (section 3.4), and a 37000-token shared BPE vocabulary for
#: WMT 2014 English-German (section 5.1). The paper reports about 65M parameters (table 3).
BASE_TRANSFORMER = ModelConfig(
    vocab_size=37000, d_model=512, n_heads=8, n_layers=6, n_encoder_layers=6, d_ff=2048,
    arch="encoder-decoder", max_seq_len=512, norm="layernorm", norm_first=False, eps=1e-5,
    ffn="relu", bias=True, positional="sinusoidal", tie_embeddings=True,
    name="Transformer base",
    source="Vaswani et al., 'Attention Is All You Need' (2017), table 3 and sections 3.4, 5.1",
)


def param_count(config: ModelConfig) -> int:
    """Number of parameters of the model :func:`build_model` builds for ``config``, in closed form.

    Per attention layer ``d (H D) + 2 d (H_kv D) + (H D) d`` weights plus biases; per FFN
    ``2 d d_ff`` (ReLU/GELU) or ``3 d d_ff`` (SwiGLU) plus biases; ``d`` (RMSNorm) or ``2 d``
    (LayerNorm with bias) per norm; ``vocab d`` for the embedding, once more for an untied
    output projection; ``max_seq_len d`` per learned position table.

    Args:
        config: a :class:`ModelConfig` without multi-head latent attention.

    Returns:
        The parameter count (an ``int``). For :data:`BASE_TRANSFORMER` this is 63,082,496.

    Raises:
        ValueError: for MLA configs (their mixture-of-experts layers are not modelled here).

    Source: the module structure of :mod:`attnbook.blocks`; Vaswani et al. (2017), table 3.
    """
    if config.uses_mla:
        raise ValueError(
            f"param_count does not model MLA/mixture-of-experts configs ({config.name or config})"
        )
    d, H, Hkv, D, dff = (config.d_model, config.n_heads, config.kv_heads, config.head_size,
                         config.d_ff)
    qkv_bias = config.bias if config.qkv_bias is None else config.qkv_bias
    attn = d * H * D + 2 * d * Hkv * D + H * D * d
    attn += qkv_bias * (H * D + 2 * Hkv * D) + config.bias * d
    if config.ffn == "swiglu":
        ffn = 3 * d * dff + config.bias * (2 * dff + d)
    else:
        ffn = 2 * d * dff + config.bias * (dff + d)
    norm = d * (2 if (config.norm == "layernorm" and config.bias) else 1)
    self_layer = attn + ffn + 2 * norm
    cross_layer = 2 * attn + ffn + 3 * norm
    final = norm if config.norm_first else 0
    emb = config.vocab_size * d
    pos_table = config.max_seq_len * d if config.positional == "learned" else 0
    if config.arch == "encoder":
        return emb + pos_table + config.n_layers * self_layer + final
    head = 0 if config.tie_embeddings else config.vocab_size * d
    if config.arch == "decoder":
        return emb + pos_table + config.n_layers * self_layer + final + head
    src_emb = 0 if config.tie_embeddings else emb  # untied: separate source embedding
    return (emb + src_emb + 2 * pos_table + config.n_encoder_layers * self_layer + final
            + config.n_layers * cross_layer + final + head)


def count_parameters(module: nn.Module) -> int:
    """Number of distinct parameters of ``module`` (shared tensors counted once).

    Args:
        module: any ``torch.nn.Module``, e.g. the result of :func:`build_model`.

    Returns:
        The number of scalar parameters (an ``int``); a tied embedding and output projection
        count once, so the result equals :func:`param_count` of the model's config.
    """
    return sum(p.numel() for p in module.parameters())


class _Embedding(nn.Module):
    """Token embedding plus absolute positions (sinusoidal or learned) for one stack."""

    def __init__(self, config: ModelConfig, tokens: nn.Embedding):
        super().__init__()
        self.config = config
        self.tokens = tokens
        self.scale = math.sqrt(config.d_model) if config.positional == "sinusoidal" else 1.0
        self.positions = None
        if config.positional == "learned":
            self.positions = nn.Embedding(config.max_seq_len, config.d_model)
        elif config.positional == "sinusoidal":
            pe = torch.from_numpy(sinusoidal_encoding(config.max_seq_len, config.d_model))
            self.register_buffer("pe", pe.float(), persistent=False)  # (max_seq_len, d_model)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        ids = _check_ids(ids, self.config.vocab_size)
        positions = _check_positions(positions, ids.shape[1], ids.shape)
        if positions.ndim == 2 and positions.shape[0] != ids.shape[0]:
            raise ValueError(f"positions of shape {tuple(positions.shape)} do not match the "
                             f"batch of ids of shape {tuple(ids.shape)}")
        if positions.numel() and int(positions.max()) >= self.config.max_seq_len and (
                self.config.positional in ("learned", "sinusoidal")):
            raise ValueError(
                f"position {int(positions.max())} exceeds max_seq_len {self.config.max_seq_len}"
            )
        x = self.tokens(ids) * self.scale  # (B, T, d_model)
        if self.positions is not None:
            x = x + self.positions(positions)
        elif self.config.positional == "sinusoidal":
            x = x + self.pe.to(x.dtype)[positions]
        return x


def _block_kwargs(config: ModelConfig) -> dict:
    return dict(n_kv_heads=config.n_kv_heads, ffn=config.ffn, norm_first=config.norm_first,
                norm=config.norm, eps=config.eps, bias=config.bias, head_dim=config.head_dim)


def _check_ids(ids, vocab_size: int, name: str = "ids") -> torch.Tensor:
    """``(B, T)`` integer token ids in ``[0, vocab_size)``; NumPy arrays and lists accepted."""
    if not isinstance(ids, torch.Tensor):
        try:
            ids = torch.as_tensor(np.asarray(ids))
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be an integer tensor, got {type(ids).__name__}") \
                from None
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be integer token ids, got dtype {ids.dtype}")
    if ids.ndim != 2:
        raise ValueError(f"{name} must be (B, T) token ids; got shape {tuple(ids.shape)} "
                         "(add a batch axis with ids[None])")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(f"{name} must lie in [0, vocab_size={vocab_size}); got values from "
                         f"{int(ids.min())} to {int(ids.max())}")
    return ids


def _padding_keep(attention_mask, shape, device, name: str):
    """``(B, S)`` 0/1 attention mask -> ``(B, 1, 1, S)`` boolean keep-mask, validated."""
    if attention_mask is None:
        return None
    m = attention_mask
    if not isinstance(m, torch.Tensor):
        m = torch.as_tensor(np.asarray(m))
    if m.is_complex():
        raise TypeError(f"{name} must hold 0 and 1, got dtype {m.dtype}")
    if tuple(m.shape) != tuple(shape):
        raise ValueError(f"{name} must be (B, S) = {tuple(shape)} like the token ids; got "
                         f"shape {tuple(m.shape)}")
    if m.dtype != torch.bool:
        if not bool(((m == 0) | (m == 1)).all()):
            raise ValueError(f"{name} must hold only 0 (padding) and 1 (token); got other values "
                             f"(shape {tuple(m.shape)})")
        m = m == 1
    return m.to(device)[:, None, None, :]  # (B, 1, 1, S)


def _rope(config: ModelConfig):
    return RotaryEmbedding(config.rope_theta) if config.positional == "rope" else None


def _default_positions(ids: torch.Tensor, past: int) -> torch.Tensor:
    return torch.arange(past, past + ids.shape[1], device=ids.device)  # (T,)


class EncoderOnlyModel(nn.Module):
    """Encoder-only Transformer (BERT-style): bidirectional self-attention over the input.

    ``forward(ids (B, T), attention_mask=None) -> (B, T, d_model)`` hidden states; the
    optional ``attention_mask`` ``(B, T)`` (1 = token, 0 = padding) hides padding keys.

    Args:
        config: a :class:`attnbook.models.ModelConfig` with ``arch="encoder"``.

    Raises:
        ValueError: if ``config.arch`` is not ``"encoder"``.

    Source: Devlin et al., "BERT" (2019), section 3.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.arch != "encoder":
            raise ValueError(f"EncoderOnlyModel needs arch='encoder', got {config.arch!r}")
        self.config = config
        self.embed = _Embedding(config, nn.Embedding(config.vocab_size, config.d_model))
        self.layers = nn.ModuleList(
            TransformerBlock(config.d_model, config.n_heads, config.d_ff, rope=_rope(config),
                             qkv_bias=config.qkv_bias, **_block_kwargs(config))
            for _ in range(config.n_layers))
        self.norm = (make_norm(config.norm, config.d_model, config.eps, config.bias)
                     if config.norm_first else None)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """Encode token ids into contextual hidden states.

        Args:
            ids: ``(B, T)`` integer token ids, ``T <= max_seq_len`` for absolute positions.
            attention_mask: ``(B, T)`` with 1 (or True) for tokens and 0 for padding (Hugging
                Face's convention), or ``None``; padding keys are hidden from every query.

        Returns:
            ``(B, T, d_model)`` hidden states (after the final norm for Pre-LN), in the
            parameters' dtype (float32 by default).

        Raises:
            ValueError: if ``ids`` is not ``(B, T)`` or holds ids outside
                ``[0, vocab_size)``, ``T`` exceeds ``max_seq_len`` with learned or sinusoidal
                positions, or ``attention_mask`` is not ``(B, T)`` or holds values other than
                0 and 1.
            TypeError: if ``ids`` is not an integer tensor (or array).
        """
        ids = _check_ids(ids, self.config.vocab_size)
        positions = _default_positions(ids, 0)
        x = self.embed(ids, positions)  # (B, T, d_model)
        keep = _padding_keep(attention_mask, ids.shape, ids.device, "attention_mask")
        for layer in self.layers:
            x = layer(x, mask=keep, positions=positions)
        return x if self.norm is None else self.norm(x)


class DecoderOnlyModel(nn.Module):
    """Decoder-only (GPT/Llama-style) language model: causal self-attention and an LM head.

    ``forward(ids (B, T), *, positions=None, kv_caches=None, mask=None) -> logits (B, T, vocab)``.
    With ``kv_caches`` (one cache per layer, see :meth:`DecoderOnlyModel.make_caches`) the call
    processes only the new tokens and appends their keys and values; ``positions`` default to
    the tokens' places after the cached ones. ``mask`` is an extra keep-mask broadcastable to
    ``(B, H, T, S_total)`` (e.g. left padding), ANDed with the causal (and sliding-window) mask.

    Args:
        config: a :class:`attnbook.models.ModelConfig` with ``arch="decoder"`` and no
            multi-head latent attention.

    Raises:
        ValueError: if ``config.arch`` is not ``"decoder"`` or the config uses MLA
            (``kv_lora_rank`` set).

    Source: Radford et al., "Language Models are Unsupervised Multitask Learners" (GPT-2,
    2019), section 2.3; Touvron et al., "Llama 2" (2023), section 2.2.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.arch != "decoder":
            raise ValueError(f"DecoderOnlyModel needs arch='decoder', got {config.arch!r}")
        if config.uses_mla:
            raise ValueError("DecoderOnlyModel does not build MLA layers; use "
                             "attnbook.nn.MultiHeadLatentAttention directly")
        self.config = config
        self.embed = _Embedding(config, nn.Embedding(config.vocab_size, config.d_model))
        self.layers = nn.ModuleList(
            TransformerBlock(config.d_model, config.n_heads, config.d_ff, rope=_rope(config),
                             qkv_bias=config.qkv_bias, **_block_kwargs(config))
            for _ in range(config.n_layers))
        self.norm = (make_norm(config.norm, config.d_model, config.eps, config.bias)
                     if config.norm_first else None)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.tokens.weight

    def make_caches(self) -> list:
        """One empty KV cache per layer: full, or a ring buffer when ``sliding_window`` is set.

        Returns:
            A list of ``n_layers`` fresh :class:`attnbook.kv_cache.KVCache` or (with
            ``config.sliding_window``) :class:`attnbook.kv_cache.SlidingWindowCache` objects,
            to pass as ``kv_caches``.
        """
        from .kv_cache import KVCache, SlidingWindowCache

        if self.config.sliding_window is not None:
            return [SlidingWindowCache(self.config.sliding_window) for _ in self.layers]
        return [KVCache() for _ in self.layers]

    def forward(self, ids, *, positions=None, kv_caches=None, mask=None):
        """Next-token logits for every position of ``ids``.

        Args:
            ids: ``(B, T)`` integer token ids: the whole sequence, or with ``kv_caches`` only
                the tokens not yet cached (the prompt at prefill, one token per decoding step).
            positions: integer ``(T,)`` or ``(B, T)`` absolute positions of ``ids``; default
                ``arange(past, past + T)``, ``past`` the number of cached tokens.
            kv_caches: ``None``, or the list from :meth:`make_caches` (one cache per layer),
                updated in place.
            mask: extra boolean keep-mask broadcastable to ``(B, n_heads, T, S_total)``, e.g.
                left padding ``(B, 1, 1, S_total)``; ANDed with the causal mask.

        Returns:
            ``(B, T, vocab_size)`` logits (unnormalized), in the parameters' dtype.

        Raises:
            ValueError: if ``kv_caches`` does not hold one cache per layer, ``ids`` is not
                ``(B, T)`` or holds ids outside ``[0, vocab_size)``, a position is negative or
                exceeds ``max_seq_len`` with absolute positions, or as
                :meth:`attnbook.nn.MultiHeadAttention.forward` (masks, positions).
            TypeError: if ``ids`` or ``positions`` is not an integer tensor (or array).
        """
        ids = _check_ids(ids, self.config.vocab_size)
        if kv_caches is not None and len(kv_caches) != len(self.layers):
            raise ValueError(f"need one cache per layer: {len(self.layers)}, got {len(kv_caches)}")
        past = 0 if kv_caches is None else int(kv_caches[0].seq_len)
        if positions is None:
            positions = _default_positions(ids, past)
        x = self.embed(ids, positions)  # (B, T, d_model)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask=mask, causal=True, window=self.config.sliding_window,
                      positions=positions, kv_cache=None if kv_caches is None else kv_caches[i])
        if self.norm is not None:
            x = self.norm(x)
        return self.lm_head(x)  # (B, T, vocab)


class EncoderDecoderModel(nn.Module):
    """Encoder-decoder Transformer (the original architecture, Vaswani et al., 2017, figure 1).

    ``forward(src (B, S), tgt (B, T), *, src_attention_mask=None) -> logits (B, T, vocab)``:
    the encoder reads ``src`` bidirectionally, the decoder reads ``tgt`` causally and attends
    to the encoder output; ``src_attention_mask`` ``(B, S)`` (1 = token) hides source padding
    in the encoder and in the cross-attention.

    Args:
        config: a :class:`attnbook.models.ModelConfig` with ``arch="encoder-decoder"`` and
            absolute (sinusoidal, learned or no) positions, e.g.
            :data:`attnbook.models.BASE_TRANSFORMER`.

    Raises:
        ValueError: if ``config.arch`` is not ``"encoder-decoder"`` or
            ``config.positional`` is ``"rope"``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.arch != "encoder-decoder":
            raise ValueError(f"EncoderDecoderModel needs arch='encoder-decoder', got "
                             f"{config.arch!r}")
        if config.positional == "rope":
            raise ValueError("EncoderDecoderModel uses absolute positions (sinusoidal/learned)")
        self.config = config
        tokens = nn.Embedding(config.vocab_size, config.d_model)
        if config.tie_embeddings:
            self.src_embed = _Embedding(config, tokens)
            self.tgt_embed = _Embedding(config, tokens)  # shared, section 3.4
        else:
            self.src_embed = _Embedding(config, tokens)
            self.tgt_embed = _Embedding(config, nn.Embedding(config.vocab_size, config.d_model))
        kw = _block_kwargs(config)
        self.encoder = nn.ModuleList(
            TransformerBlock(config.d_model, config.n_heads, config.d_ff,
                             qkv_bias=config.qkv_bias, **kw)
            for _ in range(config.n_encoder_layers))
        self.decoder = nn.ModuleList(
            EncoderDecoderBlock(config.d_model, config.n_heads, config.d_ff, **kw)
            for _ in range(config.n_layers))
        make = lambda: make_norm(config.norm, config.d_model, config.eps, config.bias)  # noqa: E731
        self.encoder_norm = make() if config.norm_first else None
        self.decoder_norm = make() if config.norm_first else None
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = tokens.weight

    def encode(self, src, src_attention_mask=None):
        """Run the encoder: ``src (B, S) -> memory (B, S, d_model)``.

        Args:
            src: ``(B, S)`` integer source token ids, ``S <= max_seq_len``.
            src_attention_mask: ``(B, S)`` with 1 for tokens and 0 for padding, or ``None``;
                padding keys are hidden from every query.

        Returns:
            ``(B, S, d_model)`` encoder output (``memory``), after the final norm for Pre-LN.

        Raises:
            ValueError: if ``src`` is not ``(B, S)`` ids in ``[0, vocab_size)`` or
                ``src_attention_mask`` is not ``(B, S)`` of 0s and 1s.
            TypeError: if ``src`` is not an integer tensor (or array).
        """
        src = _check_ids(src, self.config.vocab_size, "src")
        x = self.src_embed(src, _default_positions(src, 0))
        keep = _padding_keep(src_attention_mask, src.shape, src.device, "src_attention_mask")
        for layer in self.encoder:
            x = layer(x, mask=keep)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def decode(self, tgt, memory, src_attention_mask=None, *, kv_caches=None):
        """Run the decoder: ``tgt (B, T)``, ``memory (B, S, d_model) -> logits (B, T, vocab)``.

        Args:
            tgt: ``(B, T)`` integer target token ids (shifted right for teacher forcing), or
                with ``kv_caches`` only the tokens not yet cached.
            memory: ``(B, S, d_model)`` encoder output from :meth:`encode`.
            src_attention_mask: ``(B, S)`` with 1 for source tokens and 0 for padding, or
                ``None``; hides source padding in the cross-attention.
            kv_caches: ``None``, or one :class:`attnbook.kv_cache.KVCache` per decoder layer
                for the self-attention (updated in place).

        Returns:
            ``(B, T, vocab_size)`` logits (unnormalized).

        Raises:
            ValueError: if ``tgt`` is not ``(B, T)`` ids in ``[0, vocab_size)``, ``memory`` is
                not ``(B, S, d_model)``, ``src_attention_mask`` is not ``(B, S)`` of 0s and 1s,
                or ``kv_caches`` does not hold one cache per decoder layer.
            TypeError: if ``tgt`` is not an integer tensor (or array).
        """
        tgt = _check_ids(tgt, self.config.vocab_size, "tgt")
        if kv_caches is not None and len(kv_caches) != len(self.decoder):
            raise ValueError(f"need one cache per decoder layer: {len(self.decoder)}, got "
                             f"{len(kv_caches)}")
        past = 0 if kv_caches is None else int(kv_caches[0].seq_len)
        x = self.tgt_embed(tgt, _default_positions(tgt, past))
        if memory.ndim != 3 or memory.shape[0] != tgt.shape[0]:
            raise ValueError(f"memory must be (B={tgt.shape[0]}, S, d_model); got shape "
                             f"{tuple(memory.shape)}")
        keep = _padding_keep(src_attention_mask, memory.shape[:2], memory.device,
                             "src_attention_mask")
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, memory_mask=keep,
                      kv_cache=None if kv_caches is None else kv_caches[i])
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self.lm_head(x)

    def forward(self, src, tgt, *, src_attention_mask=None):
        """Encode ``src`` and decode ``tgt`` against it (teacher forcing).

        Args:
            src: ``(B, S)`` integer source token ids.
            tgt: ``(B, T)`` integer target token ids (shifted right).
            src_attention_mask: ``(B, S)`` with 1 for source tokens and 0 for padding, or
                ``None``; hides source padding in the encoder and the cross-attention.

        Returns:
            ``(B, T, vocab_size)`` logits (unnormalized); position ``t`` sees ``tgt[:, :t+1]``.
        """
        return self.decode(tgt, self.encode(src, src_attention_mask), src_attention_mask)


def build_model(config: ModelConfig) -> nn.Module:
    """The model class for ``config.arch``: encoder-only, decoder-only or encoder-decoder.

    Args:
        config: a :class:`attnbook.models.ModelConfig`.

    Returns:
        A freshly initialized :class:`attnbook.models.EncoderOnlyModel`,
        :class:`attnbook.models.DecoderOnlyModel` or :class:`attnbook.models.EncoderDecoderModel`
        (parameters in the default dtype, float32 unless changed).

    Raises:
        ValueError: as the chosen class (e.g. a decoder config with MLA).
    """
    cls = {"encoder": EncoderOnlyModel, "decoder": DecoderOnlyModel,
           "encoder-decoder": EncoderDecoderModel}[config.arch]
    return cls(config)
