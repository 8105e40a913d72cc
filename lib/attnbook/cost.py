"""Cost formulas: the FLOPs, bytes and parameter counts of attention layers and models.

Every closed-form cost the book quotes lives here, under one naming convention:

* ``seq_len`` is the number of tokens ``n`` (queries = keys in self-attention);
* ``d_model`` the model width ``d`` (``n_heads * head_dim``), ``n_heads`` the heads ``H``;
* ``batch`` the number of sequences ``B`` (always ``batch``, never ``batch_size``);
* ``dtype`` the name of a storage type, a key of :data:`attnbook.config.DTYPE_BYTES`.

FLOPs count ``2`` per multiply-add of a matrix product; element-wise work (softmax, biases,
activations) is not counted — the convention of ``torch.utils.flop_counter.FlopCounterMode``,
which the tests use as the independent reference. Sizes are checked by
:mod:`attnbook.checks` (``TypeError`` for a non-integer, ``ValueError`` out of range).
``seq_len`` may also be an integer array: the FLOP and score-byte formulas then return an
int64 array of its shape.

The older import paths keep working: :func:`kv_cache_bytes` from :mod:`attnbook.kv_cache`,
:func:`param_count` from :mod:`attnbook.models`, :func:`rnn_flops` and
:func:`attention_layer_flops` from :mod:`attnbook.timing`, :func:`kv_variants` and
:func:`weights_bytes` from :mod:`attnbook.explorers.kv_cache`. This module imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .checks import check_choice, check_int, check_int_array, check_real
from .config import DTYPE_BYTES, ModelConfig

__all__ = [
    "rnn_flops",
    "attention_flops",
    "attention_layer_flops",
    "additive_score_flops",
    "score_count_core",
    "score_count",
    "score_matrix_bytes",
    "kv_cache_bytes_core",
    "kv_cache_bytes",
    "param_count",
    "weights_bytes",
    "attention_kind",
    "kv_variants",
    "format_bytes",
    "GPUSpec",
    "A100_SXM4_40GB",
    "attention_hbm_bytes_core",
    "attention_hbm_bytes",
    "Roofline",
    "roofline_time",
]


def _sizes(seq_len):
    """``seq_len`` (>= 0) as an ``int``, or as an int64 array if it is an array of lengths."""
    if np.ndim(seq_len) == 0:
        return check_int(seq_len, "seq_len", 0)
    return check_int_array(seq_len, "seq_len", 0).astype(np.int64)


def _check_config(config) -> ModelConfig:
    if not isinstance(config, ModelConfig):
        raise TypeError(
            f"config must be an attnbook.config.ModelConfig, got "
            f"{type(config).__name__} (use ModelConfig.from_hf_config for a dict)"
        )
    return config


def rnn_flops(seq_len, d_model: int, *, batch: int = 1):
    """Matrix-multiply FLOPs of a vanilla RNN layer over ``seq_len`` steps: ``4 B n d^2``.

    Each step computes ``x_t W_ih^T`` and ``h_{t-1} W_hh^T`` with input and hidden width
    ``d_model``: ``2 d^2`` multiply-adds per token, ``2`` FLOPs each — linear in the length.

    Args:
        seq_len: sequence length ``n >= 0``, an int or an integer array of lengths.
        d_model: input and hidden width ``d`` (>= 1).
        batch: sequences ``B`` (>= 1).

    Returns:
        FLOPs: an ``int``, or an int64 array of the shape of ``seq_len``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if ``seq_len`` < 0 or ``d_model``/``batch`` < 1.

    Source: Vaswani et al. (2017), table 1 (recurrent layer: ``O(n d^2)`` per layer).
    """
    n = _sizes(seq_len)
    d = check_int(d_model, "d_model", 1)
    b = check_int(batch, "batch", 1)
    if np.ndim(n) and n.size:
        _check_int64(4 * b * int(n.max()) * d * d, "rnn_flops", n.max())
    return 4 * b * n * d * d


def attention_flops(seq_len, d_model: int, batch: int = 1):
    """FLOPs of the two matmuls of one self-attention layer: ``4 B n^2 d``.

    ``Q K^T`` and ``P V`` each take ``n * n * d`` multiply-adds summed over the heads
    (``n_heads * head_dim = d``), 2 FLOPs each. The projections (``8 n d^2``, see
    :func:`attention_layer_flops`) are not counted: they grow only linearly in ``n``. A dense
    causal layer computes every score and hides the future ones, so the mask does not change
    the count.

    Args:
        seq_len: ``n >= 0``, an int or an integer array of lengths.
        d_model: ``n_heads * head_dim`` (>= 1).
        batch: sequences ``B`` (>= 1).

    Returns:
        FLOPs: an ``int``, or an int64 array of the shape of ``seq_len``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if ``seq_len`` < 0 or ``d_model``/``batch`` < 1.

    Source: Vaswani et al. (2017), table 1 (``O(n^2 d)`` per self-attention layer); Dao et
    al. (2022), section 4 (the ``4 n^2 d`` FLOP count).
    """
    n = _sizes(seq_len)
    d = check_int(d_model, "d_model", 1)
    b = check_int(batch, "batch", 1)
    if np.ndim(n) and n.size:
        _check_int64(4 * b * int(n.max()) ** 2 * d, "attention_flops", n.max())
    return 4 * b * n * n * d


def attention_layer_flops(seq_len, d_model: int, *, batch: int = 1):
    """Matrix-multiply FLOPs of one self-attention layer, projections included.

    The four projections ``Q, K, V`` and the output are ``n x d`` by ``d x d`` products,
    ``8 n d^2`` FLOPs together; the scores and the weighted sum add :func:`attention_flops`,
    ``4 n^2 d``. Total ``B (8 n d^2 + 4 n^2 d)``.

    Args:
        seq_len: ``n >= 0``, an int or an integer array of lengths.
        d_model: model width ``d`` (>= 1), equal to ``n_heads * head_dim``.
        batch: sequences ``B`` (>= 1).

    Returns:
        FLOPs: an ``int``, or an int64 array of the shape of ``seq_len``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if ``seq_len`` < 0 or ``d_model``/``batch`` < 1.

    Source: Vaswani et al. (2017), section 3.2 and table 1 (self-attention: ``O(n^2 d)``).
    """
    n = _sizes(seq_len)
    d = check_int(d_model, "d_model", 1)
    b = check_int(batch, "batch", 1)
    if np.ndim(n) and n.size:
        m = int(n.max())
        _check_int64(b * 8 * m * d * d + 4 * b * m * m * d, "attention_layer_flops", m)
    return b * 8 * n * d * d + attention_flops(n, d, b)


def additive_score_flops(seq_len, kv_len: int, d_q: int, d_k: int, d_a: int, *, batch: int = 1):
    """Matrix-multiply FLOPs of additive (Bahdanau) scores: ``2 B d_a (L d_q + S d_k + L S)``.

    :func:`attnbook.attention.additive_scores_core` projects the ``L`` queries
    (``2 L d_q d_a``) and the ``S`` keys (``2 S d_k d_a``), then reduces each of the ``L S``
    vectors ``tanh(W_q q_i + W_k k_j)`` with ``v_a`` (``2 L S d_a``). The ``L S d_a``
    additions and ``tanh`` evaluations between the two are element-wise work and, by this
    module's convention, not counted: by this count the additive score costs exactly what a
    dot product of queries and keys projected to width ``d_a`` costs (``2 L S d_a`` for
    ``Q K^T``, the same projections) — what differs is the element-wise work and the
    ``(L, S, d_a)`` array it goes through, which the FLOP count does not see.

    Args:
        seq_len: queries ``L >= 0``, an int or an integer array of lengths.
        kv_len: keys ``S >= 0``.
        d_q: query width (>= 1).
        d_k: key width (>= 1).
        d_a: alignment width ``d_a``, the rows of ``W_q`` and ``W_k`` (>= 1).
        batch: sequences ``B`` (>= 1).

    Returns:
        FLOPs: an ``int``, or an int64 array of the shape of ``seq_len``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if ``seq_len`` or ``kv_len`` < 0, another size < 1, or ``seq_len`` is an
            array and a count does not fit in int64.

    Source: Bahdanau, Cho and Bengio (2015), appendix A.1.2 (the alignment model
    ``v_a^T tanh(W_a s_{i-1} + U_a h_j)``).
    """
    n = _sizes(seq_len)
    s = check_int(kv_len, "kv_len", 0)
    dq = check_int(d_q, "d_q", 1)
    dk = check_int(d_k, "d_k", 1)
    da = check_int(d_a, "d_a", 1)
    b = check_int(batch, "batch", 1)
    if np.ndim(n) and n.size:
        m = int(n.max())
        _check_int64(2 * b * da * (m * dq + s * dk + m * s), "additive_score_flops", m)
    return 2 * b * da * (n * dq + s * dk + n * s)


def score_count_core(seq_len, n_heads, batch):
    """Scores of one attention layer: one per batch, head, query and key.

    Each is one exponential in the softmax and one stored number in a
    plain implementation.
    """
    return batch * n_heads * seq_len * seq_len  # B * H * L * S, with S = L


def score_count(seq_len, n_heads: int = 1, batch: int = 1):
    """Attention scores of one self-attention layer: ``B * H * n^2``.

    Unlike the matrix-multiply FLOPs (:func:`attention_flops`, the same for ``H`` heads of
    ``d / H`` as for one head of ``d``), this count grows with the number of heads: every head
    scores every (query, key) pair. It is the number of exponentials the softmax evaluates
    (element-wise work, not counted in FLOPs here) and the number of entries of the score
    matrices a plain implementation stores (:func:`score_matrix_bytes` is this count times the
    bytes per number). A dense causal layer computes every score, so the mask does not change
    it. Validates its arguments and calls :func:`score_count_core`.

    Args:
        seq_len: ``n >= 0`` (queries = keys), an int or an integer array of lengths.
        n_heads: heads ``H`` (>= 1).
        batch: sequences ``B`` (>= 1).

    Returns:
        The number of scores: an ``int``, or an int64 array of the shape of ``seq_len``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if ``seq_len`` < 0 or ``n_heads``/``batch`` < 1, or if ``seq_len`` is an
            array and a count does not fit in int64.

    Source: Vaswani et al. (2017), section 3.2.2 (each head computes its own
    ``softmax(Q K^T / sqrt(d_k))``).
    """
    n = _sizes(seq_len)
    h = check_int(n_heads, "n_heads", 1)
    b = check_int(batch, "batch", 1)
    if np.ndim(n) and n.size:
        _check_int64(score_count_core(int(n.max()), h, b), "score_count", n.max())
    return score_count_core(n, h, b)


def _check_int64(largest: int, what: str, seq_len) -> None:
    """Raise if ``largest`` (a Python int) would overflow the int64 result array."""
    if largest > np.iinfo(np.int64).max:
        raise ValueError(
            f"{what} of seq_len up to {int(seq_len)} is {largest}, more than "
            f"int64 holds: pass seq_len as a Python int for an exact count"
        )


def score_matrix_bytes(seq_len, n_heads: int = 1, batch: int = 1, dtype: str = "float32"):
    """Bytes of the attention score matrices of one layer: ``B * H * n * n`` numbers.

    This is what a naive implementation materialises (once for the scores, and usually again
    for the weights); FlashAttention never does.

    Args:
        seq_len: ``n >= 0`` (queries = keys), an int or an integer array of lengths.
        n_heads: heads ``H`` (>= 1).
        batch: sequences ``B`` (>= 1).
        dtype: element type, a key of :data:`attnbook.config.DTYPE_BYTES`.

    Returns:
        Bytes: an ``int``, or an int64 array of the shape of ``seq_len``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: for a size out of range or an unknown dtype, or if ``seq_len`` is an
            array and a count does not fit in int64.
    """
    n = _sizes(seq_len)
    h = check_int(n_heads, "n_heads", 1)
    b = check_int(batch, "batch", 1)
    size = DTYPE_BYTES[check_choice(dtype, "dtype", sorted(DTYPE_BYTES))]
    if np.ndim(n) and n.size:
        _check_int64(b * h * int(n.max()) ** 2 * size, "score_matrix_bytes", n.max())
    total = b * h * n * n * size
    return int(total) if np.ndim(total) == 0 else total.astype(np.int64)


# fmt: off
def kv_cache_bytes_core(config, seq_len, batch, dtype):
    """Bytes of the KV cache of seq_len tokens in each of batch sequences.

    A key and a value per layer, KV head and token (MLA: one latent vector).
    """
    if config.uses_mla:  # the latent c_kv plus the shared RoPE key
        per_token = config.kv_lora_rank + config.qk_rope_head_dim
    else:  # a key and a value of head_dim numbers per KV head
        per_token = 2 * config.kv_heads * config.head_size
    if config.sliding_window is not None:  # a ring buffer keeps the window
        seq_len = min(seq_len, config.sliding_window)
    tokens = seq_len * batch
    return config.n_layers * per_token * tokens * DTYPE_BYTES[dtype]
# fmt: on


def kv_cache_bytes(
    config: ModelConfig, seq_len: int, batch: int = 1, dtype: str = "bfloat16"
) -> int:
    """Memory of the KV cache of a decoder after ``seq_len`` tokens, in bytes.

    Standard (MHA/GQA/MQA) attention caches a key and a value per layer, KV head and token:
    ``2 * n_layers * n_kv_heads * head_dim * bytes`` per token. Multi-head latent attention
    caches ``kv_lora_rank + qk_rope_head_dim`` numbers per layer and token. With a sliding
    window (and a ring-buffer cache) only ``min(seq_len, sliding_window)`` tokens are kept.
    Encoder-decoder models: the decoder's self-attention cache only. Validates its arguments
    and calls :func:`kv_cache_bytes_core`. Also importable from :mod:`attnbook.kv_cache`.

    Qwen2-7B (28 layers, 4 KV heads of 128, bfloat16): 57344 bytes = 56 KiB per token,
    7.0 GiB at 131072 tokens.

    Args:
        config: a :class:`attnbook.config.ModelConfig`, e.g. ``PRESETS["Qwen2-7B"]``.
        seq_len: tokens in the cache (prompt plus generated), >= 0.
        batch: sequences in the batch, >= 1.
        dtype: storage dtype name, a key of :data:`attnbook.config.DTYPE_BYTES`.

    Returns:
        Bytes, an ``int``.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`, or
            ``seq_len`` or ``batch`` is not an integer (bools, floats and strings are
            rejected; NumPy integers are accepted).
        ValueError: for a negative ``seq_len``, ``batch < 1`` or an unknown dtype.

    Source: Pope et al., "Efficiently Scaling Transformer Inference" (2022), section 2;
    DeepSeek-V2 (2024), table 1 for MLA.
    """
    config = _check_config(config)
    seq_len = check_int(seq_len, "seq_len", 0)
    batch = check_int(batch, "batch", 1)
    check_choice(dtype, "dtype", sorted(DTYPE_BYTES))
    return int(kv_cache_bytes_core(config, seq_len, batch, dtype))


def param_count(config: ModelConfig) -> int:
    """Parameters of the model :func:`attnbook.models.build_model` builds for ``config``.

    In closed form: per attention layer ``d (H D) + 2 d (H_kv D) + (H D) d`` weights plus
    biases; per FFN ``2 d d_ff`` (ReLU/GELU) or ``3 d d_ff`` (SwiGLU) plus biases; ``d``
    (RMSNorm) or ``2 d`` (LayerNorm with bias) per norm; ``vocab d`` for the embedding, once
    more for an untied output projection; ``max_seq_len d`` per learned position table.
    Also importable from :mod:`attnbook.models`.

    Args:
        config: a :class:`attnbook.config.ModelConfig` without multi-head latent attention.

    Returns:
        The parameter count (an ``int``). For ``BASE_TRANSFORMER`` this is 63,082,496.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`.
        ValueError: for MLA configs (their mixture-of-experts layers are not modelled here).

    Source: the module structure of :mod:`attnbook.blocks`; Vaswani et al. (2017), table 3.
    """
    config = _check_config(config)
    if config.uses_mla:
        raise ValueError(
            f"param_count does not model MLA/mixture-of-experts configs ({config.name or config})"
        )
    d, H, Hkv, D, dff = (
        config.d_model,
        config.n_heads,
        config.kv_heads,
        config.head_size,
        config.d_ff,
    )
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
    return (
        emb
        + src_emb
        + 2 * pos_table
        + config.n_encoder_layers * self_layer
        + final
        + config.n_layers * cross_layer
        + final
        + head
    )


def weights_bytes(config: ModelConfig) -> int | None:
    """Bytes of a model's weights in bfloat16: ``2 * param_count(config)``.

    Also importable from :mod:`attnbook.explorers.kv_cache`, its first home.

    Args:
        config: an :class:`attnbook.config.ModelConfig`.

    Returns:
        The bytes (an ``int``), or ``None`` for a multi-head latent attention model
        (DeepSeek-V2), whose mixture-of-experts layers :func:`param_count` does not model.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`.
    """
    config = _check_config(config)
    if config.uses_mla:
        return None
    return DTYPE_BYTES["bfloat16"] * param_count(config)


def attention_kind(config: ModelConfig) -> str:
    """What a model's attention caches per layer and token, by its usual name.

    Args:
        config: an :class:`attnbook.config.ModelConfig`.

    Returns:
        ``"MLA"`` (a latent vector, ``kv_lora_rank`` set), ``"MHA"`` (``n_kv_heads =
        n_heads``), ``"MQA"`` (one key/value head) or ``"GQA"`` (any other ``n_kv_heads``).

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`.

    Source: Shazeer (2019) for MQA; Ainslie et al. (2023) for GQA; DeepSeek-V2 (2024) for MLA.
    """
    config = _check_config(config)
    if config.uses_mla:
        return "MLA"
    if config.kv_heads == config.n_heads:
        return "MHA"
    return "MQA" if config.kv_heads == 1 else "GQA"


def kv_variants(config: ModelConfig) -> dict:
    """The published attention of a model next to its MHA and MQA counterparts.

    Every variant keeps the model's layers, head size and sliding window and changes only what
    the KV cache holds per layer and token:

    * ``"MHA"``: ``n_kv_heads = n_heads`` (one key/value head per query head);
    * ``"published"``: the configuration as published (MHA, GQA or MLA);
    * ``"MQA"``: ``n_kv_heads = 1`` (Shazeer, 2019).

    For a multi-head latent attention model (DeepSeek-V2) the MHA and MQA variants use heads of
    ``v_head_dim`` (128), the ``d_h`` of the comparison in DeepSeek-V2's table 1. Also
    importable from :mod:`attnbook.explorers.kv_cache`, its first home.

    Args:
        config: an :class:`attnbook.config.ModelConfig` (e.g. ``PRESETS["Qwen2-7B"]``).

    Returns:
        ``{"MHA": ModelConfig, "published": ModelConfig, "MQA": ModelConfig}`` in that order.

    Raises:
        TypeError: if ``config`` is not a :class:`attnbook.config.ModelConfig`.

    Source: Vaswani et al. (2017), section 3.2.2; Shazeer (2019); Ainslie et al. (2023);
    DeepSeek-AI, "DeepSeek-V2" (2024), table 1.
    """
    config = _check_config(config)
    no_mla = dict(
        kv_lora_rank=None,
        q_lora_rank=None,
        qk_nope_head_dim=None,
        qk_rope_head_dim=None,
        v_head_dim=None,
    )
    if config.uses_mla:
        plain = config.replace(head_dim=config.v_head_dim, **no_mla)
    else:
        plain = config
    return {
        "MHA": plain.replace(n_kv_heads=config.n_heads),
        "published": config,
        "MQA": plain.replace(n_kv_heads=1),
    }


def format_bytes(n) -> str:
    """A byte count in binary units, e.g. ``57344 -> "56 KiB"``, ``3 * 2**29 -> "1.5 GiB"``.

    Args:
        n: number of bytes, an integer or float ``>= 0``.

    Returns:
        ``"<n> B"`` below 1 KiB; otherwise the largest unit of KiB, MiB, GiB, TiB (powers of
        1024) in which the value is at least 1, with no decimals when it is a whole number and
        three significant digits otherwise.

    Raises:
        TypeError: if ``n`` is not a real number.
        ValueError: if ``n`` is negative, NaN or infinite.
    """
    x = check_real(n, "n", minimum=0.0)
    if x < 1024:
        return f"{x:g} B"
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        v = x / 1024**power
        if v >= 1:
            if v.is_integer():
                return f"{int(v)} {unit}"
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------------------------
# The roofline model: time from FLOPs and HBM bytes, for a GPU's published peaks.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPUSpec:
    """The two published peaks of a GPU that the roofline model needs.

    Attributes:
        name: the product, as its datasheet names it.
        peak_flops: peak dense matrix-multiply throughput for ``dtype``, in FLOP/s.
        hbm_bandwidth: peak bandwidth of its HBM, in bytes/s.
        dtype: the element type ``peak_flops`` is quoted for.
        source: the document the two figures come from.
    """

    name: str
    peak_flops: float
    hbm_bandwidth: float
    dtype: str
    source: str

    @property
    def ridge_point(self) -> float:
        """The FLOPs per HBM byte at which the two roofs meet, ``peak_flops / hbm_bandwidth``.

        A kernel doing fewer FLOPs per byte than this is memory-bound in the model.
        """
        return self.peak_flops / self.hbm_bandwidth


#: NVIDIA A100 SXM4 40GB (the GPU of the FlashAttention-2 paper's benchmarks), with 312 TFLOP/s of
#: dense BF16 tensor-core arithmetic (the datasheet's 624 assumes 2:4 structured sparsity and
#: is not used) and 1,555 GB/s of HBM2 bandwidth. Source: NVIDIA, "NVIDIA A100 Tensor Core GPU"
#: datasheet (2021), table "Specifications", column "A100 40GB SXM"
#: (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf).
A100_SXM4_40GB = GPUSpec(
    name="NVIDIA A100 SXM4 40GB",
    peak_flops=312e12,
    hbm_bandwidth=1555e9,
    dtype="bfloat16",
    source="NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB SXM: BF16 Tensor Core "
    "312 TFLOPS (dense), GPU memory bandwidth 1,555 GB/s",
)

#: The element types :func:`attention_hbm_bytes` accepts (attention runs in these).
_ATTENTION_DTYPES = ("float32", "float16", "bfloat16")


# fmt: off
def attention_hbm_bytes_core(seq_len, head_dim, size, block_q):
    """HBM bytes of one head's forward attention, plain and tiled.

    size: bytes per number; block_q: the queries one tiled program keeps on
    chip while every key and value block streams past it.
    """
    n, d = seq_len, head_dim
    # plain: read Q, K, V, write O; write S, read it, write P, read it
    plain = size * (4 * n * d + 4 * n * n)
    programs = -(-n // block_q)  # query blocks, rounded up
    # tiled: read Q, write O once; each program reads all of K and V;
    # write one float32 log-sum-exp per query
    tiled = size * (2 * n * d + programs * 2 * n * d) + 4 * n
    return plain, tiled
# fmt: on


def attention_hbm_bytes(
    seq_len: int,
    head_dim: int,
    *,
    n_heads: int = 1,
    batch: int = 1,
    dtype: str = "bfloat16",
    block_q: int = 128,
) -> dict:
    """Bytes one forward self-attention moves between HBM and the chip, plain and tiled.

    *Plain* is the standard implementation of Dao et al. (2022), Algorithm 0: it reads ``Q``
    and ``K``, writes the ``n x n`` scores ``S`` to HBM, reads them back for the softmax,
    writes ``P``, reads ``P`` and ``V`` and writes ``O``: ``4 n d + 4 n^2`` numbers per head.
    *Tiled* is FlashAttention-2's forward (Dao, 2023, Algorithm 1; the loop of
    :mod:`attnbook.flash_triton`): each program holds ``block_q`` queries on chip, reads its
    block of ``Q`` once, streams all of ``K`` and ``V`` past it and writes its block of ``O``
    and a float32 log-sum-exp per query: ``2 n d + ceil(n / block_q) * 2 n d`` numbers plus
    ``4 n`` bytes per head. No cache is modelled between HBM and the chip: a ``K``/``V`` block
    read by several programs counts every time (``block_q = seq_len`` gives the traffic when
    every re-read hits a cache). Since ``block_q`` is bounded by the on-chip memory ``M`` (about
    ``M / d`` rows), the tiled count is Dao et al.'s ``Theta(n^2 d^2 / M)``. Causal masking
    and the backward pass are not modelled. Validates and calls
    :func:`attention_hbm_bytes_core`.

    Args:
        seq_len: ``n >= 1`` tokens (queries = keys).
        head_dim: ``d >= 1``, the width of a query, key and value.
        n_heads: heads ``H >= 1``.
        batch: sequences ``B >= 1``.
        dtype: element type of ``Q, K, V, S, P, O``: ``"float32"``, ``"float16"`` or
            ``"bfloat16"``.
        block_q: queries per tiled program (>= 1); the library's GPU kernel uses
            ``attnbook.flash_triton.kernel_config(d)["fwd"]["BLOCK_M"]``.

    Returns:
        ``{"plain": bytes, "tiled": bytes}``, Python ints for all ``B * H`` heads.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1 or ``dtype`` is not one of the three.

    Source: Dao et al. (2022), section 3.2 and Theorem 2 (standard attention moves
    ``Theta(n d + n^2)`` numbers, FlashAttention ``Theta(n^2 d^2 / M)``); Dao (2023),
    Algorithm 1 (the query-block-outer loop order counted here).
    """
    n = check_int(seq_len, "seq_len", 1)
    d = check_int(head_dim, "head_dim", 1)
    h = check_int(n_heads, "n_heads", 1)
    b = check_int(batch, "batch", 1)
    bq = check_int(block_q, "block_q", 1)
    size = DTYPE_BYTES[check_choice(dtype, "dtype", _ATTENTION_DTYPES)]
    plain, tiled = attention_hbm_bytes_core(n, d, size, bq)
    return {"plain": b * h * plain, "tiled": b * h * tiled}


class Roofline(NamedTuple):
    """The roofline model's answer for one kernel (all times in seconds)."""

    #: The modelled time, ``max(compute_seconds, memory_seconds)``.
    seconds: float
    #: ``flops / peak_flops``, the time at the arithmetic roof.
    compute_seconds: float
    #: ``hbm_bytes / bandwidth``, the time at the bandwidth roof.
    memory_seconds: float
    #: Arithmetic intensity ``flops / hbm_bytes``, in FLOPs per byte.
    intensity: float
    #: ``memory_seconds > compute_seconds`` (the intensity is below the ridge point
    #: ``peak_flops / bandwidth``).
    memory_bound: bool


def roofline_time(flops, hbm_bytes, peak_flops, bandwidth) -> Roofline:
    """The roofline model's time of a kernel: the slower of its arithmetic and its traffic.

    A kernel that does ``flops`` FLOPs and moves ``hbm_bytes`` bytes can finish no sooner than
    ``flops / peak_flops`` (every arithmetic unit busy) nor than ``hbm_bytes / bandwidth``
    (memory streaming at its peak); the model takes the larger as the time, i.e. attainable
    throughput ``min(peak_flops, intensity * bandwidth)``. It is a bound, not a measurement:
    it ignores latency, caches, launch overhead and imperfect overlap.

    Args:
        flops: FLOPs of the kernel (>= 0, a real number).
        hbm_bytes: bytes it moves to and from HBM (> 0).
        peak_flops: the device's peak arithmetic throughput, FLOP/s (> 0).
        bandwidth: the device's peak memory bandwidth, bytes/s (> 0).

    Returns:
        A :class:`Roofline` of Python floats and a bool.

    Raises:
        TypeError: if an argument is not a real number.
        ValueError: if ``flops`` < 0, another argument <= 0, or any is NaN or infinite.

    Source: Williams, Waterman and Patterson (2009), "Roofline: an insightful visual
    performance model for multicore architectures", Communications of the ACM 52(4).
    """
    f = check_real(flops, "flops", minimum=0.0)
    q = check_real(hbm_bytes, "hbm_bytes", minimum=0.0, strict=True)
    peak = check_real(peak_flops, "peak_flops", minimum=0.0, strict=True)
    bw = check_real(bandwidth, "bandwidth", minimum=0.0, strict=True)
    compute, memory = f / peak, q / bw
    return Roofline(max(compute, memory), compute, memory, f / q, memory > compute)
