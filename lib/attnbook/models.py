"""Encoder-only, decoder-only and encoder-decoder Transformers built from the same blocks.

One configuration dataclass, :class:`ModelConfig`, describes every model of the book — the
original base Transformer (:data:`BASE_TRANSFORMER`), GPT-style and Llama-style decoders, and
the published configurations of :mod:`attnbook.kv_cache` (read from Hugging Face
``config.json`` files by :meth:`attnbook.config.ModelConfig.from_hf_config`, the one place
where Hugging Face field names are mapped to the book's).

:func:`param_count` (from :mod:`attnbook.cost`) gives the number of parameters in closed
form; the tests check it against the parameters of the modules built here (on the ``meta``
device, so that 7-billion-parameter configurations cost no memory) and against published
totals.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .blocks import EncoderDecoderBlock, TransformerBlock, make_norm
from .checks import (
    check_fits_positions,
    check_int_tensor,
    check_kv_caches,
    check_module_input,
    check_padding_mask,
    check_positions,
    check_token_ids,
)
from .config import BASE_TRANSFORMER, ModelConfig
from .cost import param_count  # the closed form lives in attnbook.cost
from .layers import LearnedPositionalEmbedding, RotaryEmbedding
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
    """Token embedding plus absolute positions (sinusoidal or learned) for one stack.

    ``dropout(tokens(ids) * scale + position)``: ``scale`` is ``sqrt(d_model)`` when
    ``config.scales_embeddings`` (Vaswani et al. section 3.4) and 1 otherwise; the dropout
    (``config.dropout``, training mode only) is the paper's dropout "to the sums of the
    embeddings and the positional encodings" (section 5.4).
    """

    def __init__(self, config: ModelConfig, tokens: nn.Embedding):
        super().__init__()
        self.config = config
        self.tokens = tokens
        self.scale = math.sqrt(config.d_model) if config.scales_embeddings else 1.0
        self.dropout = nn.Dropout(config.dropout)
        self.positions = None
        if config.positional == "learned":
            self.positions = LearnedPositionalEmbedding(config.max_seq_len, config.d_model)
        elif config.positional == "sinusoidal":
            pe = torch.from_numpy(sinusoidal_encoding(config.max_seq_len, config.d_model))
            self.register_buffer("pe", pe.float(), persistent=False)  # (max_seq_len, d_model)

    @property
    def device(self) -> torch.device:
        """The device of the token table: the ids must be on it."""
        return self.tokens.weight.device

    def forward(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        ids = check_token_ids(ids, "ids", self.config.vocab_size, device=self.device)
        positions = check_positions(
            check_int_tensor(positions, "positions"),
            ids.shape[1],
            ids.shape,
            batch=True,
            x_name="ids",
        )
        if positions.numel():
            last = int(positions.max())  # 0-based: needs last + 1 rows
            check_fits_positions(
                last + 1, self.config.max_seq_len, self.config.positional, f"position {last}"
            )
        x = self.tokens(ids) * self.scale  # (B, T, d_model)
        if self.positions is not None:
            x = x + self.positions(positions)
        elif self.config.positional == "sinusoidal":
            x = x + self.pe.to(x.dtype)[positions]
        return self.dropout(x)  # (B, T, d_model)


def _block_kwargs(config: ModelConfig) -> dict:
    return dict(
        n_kv_heads=config.n_kv_heads,
        ffn=config.ffn,
        norm_first=config.norm_first,
        norm=config.norm,
        eps=config.eps,
        bias=config.bias,
        head_dim=config.head_dim,
        dropout=config.dropout,
    )


def _self_attention_stack(config: ModelConfig):
    """``config.n_layers`` self-attention blocks, and the final norm (Pre-LN only, else None)."""
    layers = nn.ModuleList(
        TransformerBlock(
            config.d_model,
            config.n_heads,
            config.d_ff,
            rope=_rope(config),
            qkv_bias=config.qkv_bias,
            **_block_kwargs(config),
        )
        for _ in range(config.n_layers)
    )
    norm = (
        make_norm(config.norm, config.d_model, config.eps, config.bias)
        if config.norm_first
        else None
    )
    return layers, norm


def _padding_keep(attention_mask, shape, device, name: str):
    """``(B, S)`` 0/1 attention mask -> ``(B, 1, 1, S)`` boolean keep-mask, validated."""
    if attention_mask is None:
        return None
    m = attention_mask
    if isinstance(m, torch.Tensor):
        m = m.detach().cpu()
        m = m.float() if m.dtype == torch.bfloat16 else m  # NumPy has no bfloat16
    m = check_padding_mask(m, name, shape)  # (B, S) of 0 and 1, the ids' shape
    keep = torch.from_numpy(np.ascontiguousarray(m == 1))  # (B, S) bool
    return keep.to(device)[:, None, None, :]  # (B, 1, 1, S)


def _rope(config: ModelConfig):
    return RotaryEmbedding(config.rope_theta) if config.positional == "rope" else None


def _default_positions(ids: torch.Tensor, past: int) -> torch.Tensor:
    return torch.arange(past, past + ids.shape[1], device=ids.device)  # (T,)


class EncoderOnlyModel(nn.Module):
    """Encoder-only Transformer (BERT-style): bidirectional self-attention over the input.

    ``forward(ids (B, T), attention_mask=None) -> (B, T, d_model)`` hidden states (after the
    final norm for Pre-LN), in the parameters' dtype:

    * ``ids``: ``(B, T)`` integer token ids, ``T <= max_seq_len`` for absolute positions.
    * ``attention_mask``: ``(B, T)`` with 1 (or True) for tokens and 0 for padding (Hugging
      Face's convention), or ``None``; padding keys are hidden from every query.

    ``forward`` raises ``ValueError`` if ``ids`` is not ``(B, T)``, holds ids outside
    ``[0, vocab_size)`` or is a tensor on another device than the model, ``T`` exceeds
    ``max_seq_len`` with learned or sinusoidal positions, or ``attention_mask`` is not
    ``(B, T)`` or holds values other than 0 and 1; ``TypeError`` if ``ids`` is not an integer
    tensor (or array).

    Args:
        config: a :class:`attnbook.config.ModelConfig` with ``arch="encoder"``.

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
        self.layers, self.norm = _self_attention_stack(config)

    # fmt: off
    def forward(self, ids, attention_mask=None):
        """Hidden states ``(B, T, d_model)`` for the token ids ``(B, T)``.

        The arguments and errors are described in the class docstring.
        """
        ids = check_token_ids(ids, "ids", self.config.vocab_size,
                              device=self.embed.device)
        positions = _default_positions(ids, 0)  # (T,)
        x = self.embed(ids, positions)  # (B, T, d_model)
        keep = _padding_keep(attention_mask, ids.shape, ids.device,
                             "attention_mask")  # (B, 1, 1, T): hide padding keys
        for layer in self.layers:  # bidirectional: no causal mask
            x = layer(x, mask=keep, positions=positions)
        return x if self.norm is None else self.norm(x)
    # fmt: on


class DecoderOnlyModel(nn.Module):
    """Decoder-only (GPT/Llama-style) language model: causal self-attention and an LM head.

    ``forward(ids (B, T), *, positions=None, kv_caches=None, mask=None) -> logits (B, T, vocab)``
    (unnormalized, in the parameters' dtype):

    * ``ids``: ``(B, T)`` integer token ids: the whole sequence, or with ``kv_caches`` only the
      tokens not yet cached (the prompt at prefill, one token per decoding step).
    * ``positions``: integer ``(T,)`` or ``(B, T)`` absolute positions of ``ids``; default
      ``arange(past, past + T)``, ``past`` the number of cached tokens.
    * ``kv_caches``: ``None``, or the list from :meth:`make_caches` (one cache per layer),
      updated in place: the call processes only the new tokens and appends their keys and
      values.
    * ``mask``: extra boolean keep-mask broadcastable to ``(B, n_heads, T, S_total)``, e.g.
      left padding ``(B, 1, 1, S_total)``; ANDed with the causal (and sliding-window) mask.

    ``forward`` raises as :meth:`check_inputs`, and for a position that is negative or exceeds
    ``max_seq_len`` with absolute positions, or as
    :meth:`attnbook.layers.MultiHeadAttention.forward` (masks, positions).

    Args:
        config: a :class:`attnbook.config.ModelConfig` with ``arch="decoder"`` and no
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
            raise ValueError(
                "DecoderOnlyModel does not build MLA layers; use "
                "attnbook.layers.MultiHeadLatentAttention directly"
            )
        self.config = config
        self.embed = _Embedding(config, nn.Embedding(config.vocab_size, config.d_model))
        self.layers, self.norm = _self_attention_stack(config)
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

    # fmt: off
    def forward(self, ids, *, positions=None, kv_caches=None, mask=None):
        """Next-token logits ``(B, T, vocab_size)`` for the token ids ``(B, T)``.

        The arguments are described in the class docstring, the errors in
        :meth:`check_inputs`.
        """
        ids, positions = self.check_inputs(ids, positions, kv_caches)
        x = self.embed(ids, positions)  # (B, T, d_model)
        for i, layer in enumerate(self.layers):
            cache = None if kv_caches is None else kv_caches[i]
            x = layer(x, mask=mask, causal=True, positions=positions,
                      window=self.config.sliding_window, kv_cache=cache)
        if self.norm is not None:  # Pre-LN ends in a final norm
            x = self.norm(x)
        return self.lm_head(x)  # (B, T, vocab_size)
    # fmt: on

    def check_inputs(self, ids, positions, kv_caches):
        """Check the arguments of :meth:`forward`; return its ids and positions.

        Args:
            ids: ``(B, T)`` integer token ids (tensor, array or nested list).
            positions: ``None`` or the tokens' positions (checked by the embedding).
            kv_caches: ``None`` or one cache per layer.

        Returns:
            ``(ids, positions)``: the ids as a ``(B, T)`` integer tensor and the positions,
            by default ``arange(past, past + T)`` with ``past`` the number of cached tokens.

        Raises:
            ValueError: if ``kv_caches`` does not hold one cache per layer, or ``ids`` is not
                ``(B, T)``, holds ids outside ``[0, vocab_size)`` or is a tensor on another
                device than the model (a list or array is created on the model's device).
            TypeError: if ``ids`` is not an integer tensor (or array).
        """
        ids = check_token_ids(ids, "ids", self.config.vocab_size, device=self.embed.device)
        check_kv_caches(kv_caches, len(self.layers))
        past = 0 if kv_caches is None else int(kv_caches[0].seq_len)
        if positions is None:
            positions = _default_positions(ids, past)
        return ids, positions


class EncoderDecoderModel(nn.Module):
    """Encoder-decoder Transformer (the original architecture, Vaswani et al., 2017, figure 1).

    ``forward(src (B, S), tgt (B, T), *, src_attention_mask=None) -> logits (B, T, vocab)``:
    the encoder reads ``src`` bidirectionally, the decoder reads ``tgt`` causally and attends
    to the encoder output; ``src_attention_mask`` ``(B, S)`` (1 = token) hides source padding
    in the encoder and in the cross-attention.

    Args:
        config: a :class:`attnbook.config.ModelConfig` with ``arch="encoder-decoder"`` and
            absolute (sinusoidal, learned or no) positions, e.g.
            :data:`attnbook.models.BASE_TRANSFORMER`.

    Raises:
        ValueError: if ``config.arch`` is not ``"encoder-decoder"`` or
            ``config.positional`` is ``"rope"``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.arch != "encoder-decoder":
            raise ValueError(
                f"EncoderDecoderModel needs arch='encoder-decoder', got {config.arch!r}"
            )
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
            TransformerBlock(
                config.d_model, config.n_heads, config.d_ff, qkv_bias=config.qkv_bias, **kw
            )
            for _ in range(config.n_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            EncoderDecoderBlock(config.d_model, config.n_heads, config.d_ff, **kw)
            for _ in range(config.n_layers)
        )
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
            ValueError: if ``src`` is not ``(B, S)`` ids in ``[0, vocab_size)`` on the
                model's device or ``src_attention_mask`` is not ``(B, S)`` of 0s and 1s.
            TypeError: if ``src`` is not an integer tensor (or array).
        """
        src = check_token_ids(src, "src", self.config.vocab_size, device=self.src_embed.device)
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
            ValueError: if ``tgt`` is not ``(B, T)`` ids in ``[0, vocab_size)`` on the model's
                device, ``memory`` is not ``(B, S, d_model)``, ``src_attention_mask`` is not
                ``(B, S)`` of 0s and 1s, or ``kv_caches`` does not hold one cache per decoder
                layer.
            TypeError: if ``tgt`` is not an integer tensor (or array).
        """
        tgt = check_token_ids(tgt, "tgt", self.config.vocab_size, device=self.tgt_embed.device)
        check_kv_caches(kv_caches, len(self.decoder), "decoder layer")
        check_module_input(
            memory,
            self.lm_head.weight,
            self.config.d_model,
            "memory",
            batch=tgt.shape[0],
            seq="S",
            detail=f" with tgt of shape {tuple(tgt.shape)}",
        )
        keep = _padding_keep(
            src_attention_mask, memory.shape[:2], memory.device, "src_attention_mask"
        )
        return self.decode_core(tgt, memory, keep, kv_caches)

    # fmt: off
    def decode_core(self, tgt, memory, keep, kv_caches=None):
        """The decoder stack: ids ``tgt (B, T)`` against ``memory (B, S, d)``.

        ``keep``: ``(B, 1, 1, S)`` source keep-mask or ``None``. Returns
        ``(B, T, vocab_size)`` logits. Called by :meth:`decode`, which checks.
        """
        past = 0 if kv_caches is None else int(kv_caches[0].seq_len)
        x = self.tgt_embed(tgt, _default_positions(tgt, past))  # (B, T, d)
        for i, layer in enumerate(self.decoder):
            cache = None if kv_caches is None else kv_caches[i]
            x = layer(x, memory, memory_mask=keep, kv_cache=cache)  # (B, T, d)
        if self.decoder_norm is not None:  # Pre-LN ends in a final norm
            x = self.decoder_norm(x)
        return self.lm_head(x)  # (B, T, vocab_size)
    # fmt: on

    def forward(self, src, tgt, *, src_attention_mask=None):
        """Encode ``src`` and decode ``tgt`` against it (teacher forcing).

        Args:
            src: ``(B, S)`` integer source token ids.
            tgt: ``(B, T)`` integer target token ids (shifted right).
            src_attention_mask: ``(B, S)`` with 1 for source tokens and 0 for padding, or
                ``None``; hides source padding in the encoder and the cross-attention.

        Returns:
            ``(B, T, vocab_size)`` logits (unnormalized); position ``t`` sees ``tgt[:, :t+1]``.

        Raises:
            ValueError: if ``src`` or ``tgt`` is not ``(B, .)`` ids in ``[0, vocab_size)`` on
                the model's device, their batch sizes differ, or ``src_attention_mask`` is not
                ``(B, S)`` of 0s and 1s.
            TypeError: if ``src`` or ``tgt`` is not an integer tensor (or array).
        """
        src = check_token_ids(src, "src", self.config.vocab_size, device=self.src_embed.device)
        tgt = check_token_ids(tgt, "tgt", self.config.vocab_size, device=self.tgt_embed.device)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src and tgt must hold the same number of sequences B; got src of shape "
                f"{tuple(src.shape)} and tgt of shape {tuple(tgt.shape)}"
            )
        return self.decode(tgt, self.encode(src, src_attention_mask), src_attention_mask)


def build_model(config: ModelConfig) -> nn.Module:
    """The model class for ``config.arch``: encoder-only, decoder-only or encoder-decoder.

    Args:
        config: a :class:`attnbook.config.ModelConfig`.

    Returns:
        A freshly initialized :class:`attnbook.models.EncoderOnlyModel`,
        :class:`attnbook.models.DecoderOnlyModel` or :class:`attnbook.models.EncoderDecoderModel`
        (parameters in the default dtype, float32 unless changed).

    Raises:
        ValueError: as the chosen class (e.g. a decoder config with MLA).
    """
    cls = {
        "encoder": EncoderOnlyModel,
        "decoder": DecoderOnlyModel,
        "encoder-decoder": EncoderDecoderModel,
    }[config.arch]
    return cls(config)
