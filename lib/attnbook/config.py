"""Model configurations: ``ModelConfig``, the original base Transformer, and published models.

One configuration dataclass, :class:`ModelConfig`, describes every model of the book — the
original base Transformer (:data:`BASE_TRANSFORMER`), GPT-style and Llama-style decoders, and
the published configurations in :data:`PRESETS` (read from Hugging Face ``config.json`` files by
:meth:`ModelConfig.from_hf_config`, the one place where Hugging Face field names are mapped to
the book's).

This module depends only on :mod:`attnbook.checks` (and not on torch), so the models, the KV
cache, the cost formulas and the explorers can all import it without an import cycle.
:mod:`attnbook.models` and :mod:`attnbook.kv_cache` re-export its names.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .checks import (
    MLA_SIZES,
    check_bool,
    check_choice,
    check_divides,
    check_dropout,
    check_head_counts,
    check_int,
    check_mla_sizes,
    check_real,
    check_rope_dim,
)

__all__ = [
    "ModelConfig",
    "BASE_TRANSFORMER",
    "DTYPE_BYTES",
    "HF_CONFIGS",
    "PRESETS",
]

_ARCHS = ("encoder", "decoder", "encoder-decoder")
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
        positional: ``"sinusoidal"`` (added to the embeddings, which are then scaled by
            ``sqrt(d_model)`` unless ``embed_scale=False``, Vaswani et al. section 3.4),
            ``"learned"``, ``"rope"`` or ``"none"``.
        rope_theta: RoPE base.
        tie_embeddings: the output projection reuses the token embedding
            (``tie_word_embeddings``); in an encoder-decoder model the encoder and decoder also
            share it, as in the original.
        sliding_window: attention window in tokens (Mistral-7B-v0.1: 4096) or ``None``.
        dropout: dropout probability ``P_drop`` in ``[0, 1)``, active in training mode only:
            on the sum of embeddings and positions, on the attention weights, inside the
            feed-forward network and on each sublayer's output before the residual addition
            (Vaswani et al. section 5.4, "Residual Dropout": 0.1 for the base model).
        embed_scale: multiply the token embeddings by ``sqrt(d_model)`` (Vaswani et al.
            section 3.4, "we multiply those weights by sqrt(d_model)"); ``None`` (the default)
            means "iff ``positional == 'sinusoidal'``", the book's earlier behaviour. Resolved
            by :attr:`scales_embeddings`.
        kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim:
            multi-head latent attention (DeepSeek-V2); ``kv_lora_rank=None`` means none (it is
            the switch: the other four are then ignored, so ``replace(kv_lora_rank=None)``
            turns MLA off).
        name: a label.
        source: where the numbers come from (paper, or model and its config.json).

    Sizes accept Python or NumPy integers (stored as ``int``); bools and floats are rejected.
    The fields are checked by :mod:`attnbook.checks` (``TypeError`` for the wrong kind,
    ``ValueError`` for a wrong value).

    Raises:
        TypeError: if a size is not an integer (``2.5``, ``2.0``, ``True``), ``eps``,
            ``rope_theta`` or ``dropout`` is not a real number, or ``embed_scale`` is neither a
            bool nor ``None``.
        ValueError: if a size is below its minimum (1; ``n_encoder_layers``: 0; optional
            sizes such as ``sliding_window`` or ``kv_lora_rank``: 1 or ``None``),
            ``eps`` is not finite and > 0, ``rope_theta`` is not finite and > 1,
            ``dropout`` is not in ``[0, 1)``, a choice
            (``arch``, ``positional``, ``ffn``, ``norm``) is unknown, ``n_heads`` does not
            divide ``d_model`` (without ``head_dim``), ``n_kv_heads`` does not divide
            ``n_heads``, RoPE meets an odd ``head_dim``, an MLA config (``kv_lora_rank``
            set) lacks ``qk_nope_head_dim``, ``qk_rope_head_dim`` or ``v_head_dim`` or has an
            odd ``qk_rope_head_dim`` (:func:`attnbook.checks.check_mla_sizes`).
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
    dropout: float = 0.0
    embed_scale: bool | None = None
    name: str = ""
    source: str = ""

    def __post_init__(self):
        def set_checked(f, minimum):  # NumPy integers become Python ints
            object.__setattr__(self, f, check_int(getattr(self, f), f, minimum))

        for f in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_seq_len"):
            set_checked(f, 1)
        set_checked("n_encoder_layers", 0)
        for f in (
            "n_kv_heads",
            "head_dim",
            "sliding_window",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
        ):
            if getattr(self, f) is not None:
                set_checked(f, 1)
        for f, lo in (("eps", 0.0), ("rope_theta", 1.0)):
            object.__setattr__(self, f, check_real(getattr(self, f), f, minimum=lo, strict=True))
        object.__setattr__(self, "dropout", check_dropout(self.dropout, "dropout"))
        for f in ("norm_first", "bias", "tie_embeddings"):
            object.__setattr__(self, f, check_bool(getattr(self, f), f))
        for f in ("qkv_bias", "embed_scale"):  # None: the default rule
            if getattr(self, f) is not None:
                object.__setattr__(self, f, check_bool(getattr(self, f), f))
        check_choice(self.arch, "arch", _ARCHS)
        check_choice(self.positional, "positional", _POSITIONAL)
        check_choice(self.ffn, "ffn", _FFNS)
        check_choice(self.norm, "norm", _NORMS)
        if self.head_dim is None and self.kv_lora_rank is None:
            check_divides(self.n_heads, "n_heads", self.d_model, "d_model", " (or set head_dim)")
        check_head_counts(self.n_heads, self.kv_heads)
        if self.arch == "encoder-decoder" and self.n_encoder_layers < 1:
            raise ValueError("an encoder-decoder config needs n_encoder_layers >= 1")
        if self.uses_mla:
            missing = [f for f in MLA_SIZES if getattr(self, f) is None]
            if missing:
                raise ValueError(
                    f"an MLA config (kv_lora_rank={self.kv_lora_rank}) needs {', '.join(missing)}"
                )
            check_mla_sizes(*(getattr(self, f) for f in MLA_SIZES), self.q_lora_rank)
        if self.positional == "rope" and not self.uses_mla:
            check_rope_dim(self.head_size)

    @property
    def kv_heads(self) -> int:
        """``n_kv_heads``, resolved (``n_heads`` when unset)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_size(self) -> int:
        """``head_dim``, resolved (``d_model // n_heads`` when unset)."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def scales_embeddings(self) -> bool:
        """``embed_scale``, resolved: True when token embeddings are scaled by ``sqrt(d_model)``.

        By default (``embed_scale=None``) only with sinusoidal positions.
        """
        if self.embed_scale is None:
            return self.positional == "sinusoidal"
        return self.embed_scale

    @property
    def uses_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` set)."""
        return self.kv_lora_rank is not None

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (``dataclasses.replace``).

        Args:
            **changes: new values of fields, by name (e.g. ``n_kv_heads=2``).

        Returns:
            A new :class:`attnbook.config.ModelConfig`, validated like any other; ``self`` is
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
        required = (
            "hidden_size",
            "num_attention_heads",
            "num_hidden_layers",
            "intermediate_size",
            "vocab_size",
        )
        missing = [k for k in required if k not in hf]
        if missing:
            hint = ""
            if isinstance(hf.get("text_config"), Mapping):
                hint = (
                    "; the model nests its language model under 'text_config': pass "
                    "hf['text_config'] instead"
                )
            raise ValueError(f"Hugging Face config lacks {missing}; got keys {sorted(hf)}{hint}")

        def get_int(key, default=None):
            v = hf.get(key, default)
            if v is None and default is None and key not in required:
                return None
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, numbers.Integral) or isinstance(v, (bool, np.bool_)):
                raise ValueError(f"Hugging Face config field {key!r} must be an integer, got {v!r}")
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
            raise ValueError(
                f"Hugging Face config hidden_act {act!r} is not supported; one of "
                "'silu'/'swish' (SwiGLU), 'gelu*' or 'relu'"
            )
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
#: embedding and output projection (section 3.4), a 37000-token shared BPE vocabulary for
#: WMT 2014 English-German (section 5.1) and dropout P_drop 0.1 (section 5.4). The paper reports
#: about 65M parameters (table 3).
BASE_TRANSFORMER = ModelConfig(
    vocab_size=37000,
    d_model=512,
    n_heads=8,
    n_layers=6,
    n_encoder_layers=6,
    d_ff=2048,
    arch="encoder-decoder",
    max_seq_len=512,
    norm="layernorm",
    norm_first=False,
    eps=1e-5,
    ffn="relu",
    bias=True,
    positional="sinusoidal",
    tie_embeddings=True,
    dropout=0.1,
    name="Transformer base",
    source="Vaswani et al., 'Attention Is All You Need' (2017), table 3 and sections 3.4, 5.1, 5.4",
)


#: Bytes per element of the dtypes a KV cache is stored in.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1, "int4": 0.5}


# --------------------------------------------------------------------------------------------
# Published configurations: the config.json fields that matter, verbatim.
# --------------------------------------------------------------------------------------------

# (`:meta hide-value:`: the API reference leaves the long values of these two out.)
#: ``config.json`` fields of published models (Hugging Face Hub), keyed by model name.
#:
#: :meta hide-value:
HF_CONFIGS = {
    # Qwen/Qwen2-7B, config.json; Yang et al., "Qwen2 Technical Report" (2024), table 1.
    "Qwen2-7B": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "num_hidden_layers": 28,
        "vocab_size": 152064,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-06,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "sliding_window": 131072,
        "use_sliding_window": False,
    },
    # meta-llama/Llama-2-7b-hf, config.json; Touvron et al., "Llama 2" (2023).
    "Llama-2-7B": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "num_hidden_layers": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-05,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
    # meta-llama/Meta-Llama-3-8B, config.json; Llama Team, "The Llama 3 Herd of Models" (2024),
    # table 3.
    "Llama-3-8B": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
    # mistralai/Mistral-7B-v0.1, config.json; Jiang et al., "Mistral 7B" (2023), table 1
    # (window_size 4096).
    "Mistral-7B": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-05,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "sliding_window": 4096,
    },
    # deepseek-ai/DeepSeek-V2, config.json; DeepSeek-AI, "DeepSeek-V2" (2024), section 3.1.2
    # (d_c = 512, d_h^R = 64, 128 heads of 128, 60 layers). Its MoE fields (160 routed experts,
    # moe_intermediate_size 1536) are not modelled by attnbook.
    "DeepSeek-V2": {
        "model_type": "deepseek_v2",
        "hidden_size": 5120,
        "intermediate_size": 12288,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "num_hidden_layers": 60,
        "vocab_size": 102400,
        "max_position_embeddings": 163840,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-06,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    },
}

_SOURCES = {
    "Qwen2-7B": "Qwen/Qwen2-7B config.json (Hugging Face Hub); Qwen2 Technical Report (2024)",
    "Llama-2-7B": "meta-llama/Llama-2-7b-hf config.json; Touvron et al., Llama 2 (2023)",
    "Llama-3-8B": "meta-llama/Meta-Llama-3-8B config.json; The Llama 3 Herd of Models (2024)",
    "Mistral-7B": "mistralai/Mistral-7B-v0.1 config.json; Jiang et al., Mistral 7B (2023)",
    "DeepSeek-V2": "deepseek-ai/DeepSeek-V2 config.json; DeepSeek-AI, DeepSeek-V2 (2024)",
}

#: :class:`attnbook.config.ModelConfig` presets built from :data:`HF_CONFIGS` by ``from_hf_config``.
#:
#: :meta hide-value:
PRESETS = {
    name: ModelConfig.from_hf_config(hf, name=name, source=_SOURCES[name])
    for name, hf in HF_CONFIGS.items()
}
