"""Small training runs that let the reader watch the book's claims happen, on a laptop CPU.

Each run trains tiny models built from the library's own modules (:mod:`attnbook.layers`,
:mod:`attnbook.blocks`, :mod:`attnbook.models`, :mod:`attnbook.rnn`) on a synthetic task and
returns a plain dataclass of results (Python floats, lists and NumPy arrays, no plotting) that
the chapters plot and glue into the text:

* :func:`scaling_run` (chapter 04): the same model, task, data and initial weights with and
  without the ``1/sqrt(d_k)`` score scale at a large head dimension — loss curves and attention
  entropy over the first steps;
* :func:`norm_placement_run` (chapter 09): a 12-layer decoder, Post-LN against Pre-LN at the same
  learning rate, each without and with a linear warmup — per-layer gradient norms at
  initialisation and loss curves;
* :func:`gradient_norms_at_init` (chapter 09's explorer): the same per-layer gradient norms at
  initialisation, Post-LN and Pre-LN, for a list of depths;
* :func:`long_range_recall_run` (chapter 01): a vanilla RNN, an LSTM and a one-layer attention
  model of similar parameter counts learn to output the token ``k`` positions back, each until
  it is solved at every ``k`` or a budget of updates is spent; the gradient that reaches the
  answer token at initialisation, and accuracy against ``k`` during training;
* :func:`copy_capacity_run` (chapter 01): LSTMs of several hidden sizes and one attention layer
  learn to copy ``n`` tokens; accuracy against ``n`` and the hidden size — what a state of
  fixed size can carry;
* :func:`cross_attention_run` (chapter 05): a tiny encoder-decoder learns to reverse a sequence;
  its cross-attention map on one example;
* :func:`position_extrapolation_run` (chapter 08): one-layer decoders with learned, sinusoidal
  and rotary positions learn to copy the token a few positions back on short sequences, then
  meet positions (and distances) they never saw in training.
* :func:`heads_run` (chapter 07): one attention layer with 1, 2 or 3 heads of the same total
  width learns to output the contents of three marked tokens at once; the unexplained variance
  per number of heads, and each head's weights on a few examples.

Conventions shared by every run:

* **Seeds.** ``torch.manual_seed(seed)`` before a model is built (so the two arms of a
  comparison start from the same weights wherever their parameters have the same shapes), and a
  ``torch.Generator`` seeded with ``seed`` for the training batches (every arm sees the same
  batches in the same order) and one seeded with ``seed + 1`` for the held-out evaluation set.
* **Optimiser.** Adam (Kingma & Ba, 2015) with torch's defaults (betas 0.9/0.999, no weight
  decay), no gradient clipping, no dropout: nothing hides the effect a run shows.
* **Threads.** ``torch.set_num_threads(num_threads)`` for the duration of the run (the
  previous setting is restored afterwards). The default is 1: the tensors are so small that a
  second intra-op thread only adds synchronisation, and on a busy two-core machine OpenMP's
  waiting threads made one training step 40 times slower (0.76 s instead of 18 ms, measured
  for :func:`scaling_run`'s model).
* **Timing.** Each result records ``wall_time_s`` (``time.perf_counter``) and ``cpu_time_s``
  (``time.process_time``, all threads of the process, so it can exceed the wall time).
* **Progress.** ``progress=True`` shows a ``tqdm.auto`` bar (a widget in a notebook, text in
  a terminal).
* **Chance level.** Every task's answer is uniform over ``n`` classes given what a model that
  ignores the input can know, so the best such model has cross-entropy ``log n`` nats and
  accuracy ``1/n``; each result records that ``chance_loss``.

Bad arguments raise ``ValueError`` naming the argument. A run that diverges is *not* an error:
its loss curve then holds ``nan`` or ``inf`` from the step it diverged, which is what the
chapter should show.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import checks
from .attention import entropy
from .blocks import FeedForward
from .config import ModelConfig
from .layers import LayerNorm, MultiHeadAttention
from .models import DecoderOnlyModel, EncoderDecoderModel, count_parameters
from .rnn import LSTM, VanillaRNN

__all__ = [
    "ScaledMultiHeadAttention",
    "kv_recall_batch",
    "copy_batch",
    "delayed_recall_batch",
    "reversal_batch",
    "multi_source_batch",
    "ScalingResult",
    "scaling_run",
    "StepMatch",
    "match_step_gain",
    "STEP_MATCH_TARGETS",
    "NormPlacementResult",
    "norm_placement_run",
    "NORM_PLACEMENT_ARMS",
    "NORM_PLACEMENT_DEPTHS",
    "gradient_norms_at_init",
    "LongRangeRecallResult",
    "long_range_recall_run",
    "relative_loss_change",
    "CopyCapacityResult",
    "copy_capacity_run",
    "CrossAttentionResult",
    "cross_attention_run",
    "first_step_below",
    "score_gradient",
    "offset_copy_batch",
    "POSITION_KINDS",
    "PositionExtrapolationResult",
    "position_extrapolation_run",
    "HeadsResult",
    "heads_run",
]


# --------------------------------------------------------------------------------------------
# Shared machinery
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _run_context(num_threads: int):
    """Set torch's intra-op threads for the run; restore them afterwards. Yields a timer dict."""
    num_threads = checks.check_int(num_threads, "num_threads", 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    clock = {"wall0": time.perf_counter(), "cpu0": time.process_time()}
    try:
        yield clock
    finally:
        clock["wall_time_s"] = time.perf_counter() - clock["wall0"]
        clock["cpu_time_s"] = time.process_time() - clock["cpu0"]
        torch.set_num_threads(previous)


def _steps(steps: int, progress: bool, desc: str):
    if not progress:
        return range(steps)
    from tqdm.auto import tqdm

    return tqdm(range(steps), desc=desc, leave=False)


def _warmup_lambda(warmup_steps: int):
    """Linear warmup: the learning rate of update ``s`` (0-based) is ``lr * min(1, (s+1)/W)``."""

    def factor(step: int) -> float:
        return 1.0 if warmup_steps <= 0 else min(1.0, (step + 1) / warmup_steps)

    return factor


def _train(
    model: nn.Module,
    batch_loss,
    *,
    steps: int,
    lr: float,
    warmup_steps: int = 0,
    progress: bool = False,
    desc: str = "",
    after_backward=None,
    after_step=None,
) -> np.ndarray:
    """Adam on ``batch_loss(step) -> scalar loss``; returns the float64 ``(steps,)`` loss curve.

    The loss recorded for step ``s`` is that of the batch the ``s``-th update is computed
    from, i.e. measured *before* that update. ``after_backward(step)``, if given, runs between
    the backward pass and the update (the gradients are those the update will use);
    ``after_step(step)`` right after the update.
    """
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _warmup_lambda(warmup_steps))
    losses = np.empty(steps, dtype=np.float64)
    model.train()
    for step in _steps(steps, progress, desc):
        loss = batch_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if after_backward is not None:
            after_backward(step)
        opt.step()
        if after_step is not None:
            after_step(step)
        sched.step()
        losses[step] = float(loss.detach())
    model.eval()
    return losses


def first_step_below(curve, threshold: float, *, window: int = 10) -> int | None:
    """First step at which the mean of the last ``window`` values is below ``threshold``.

    For comparing how fast two loss curves fall (e.g. "the unscaled model needs N steps to get
    below half the chance loss") without being fooled by one noisy batch.

    Args:
        curve: 1-D sequence of per-step values (e.g. a loss curve), float.
        threshold: the level to get below.
        window: number of consecutive steps averaged (>= 1); the first candidate is step
            ``window - 1``.

    Returns:
        The step index ``s`` (0-based) such that ``mean(curve[s - window + 1 : s + 1]) <
        threshold`` for the first time, or ``None`` if that never happens. NaN values make
        their windows fail.

    Raises:
        TypeError: if ``curve`` is not numeric, ``threshold`` not a real number or ``window``
            not an integer.
        ValueError: if ``curve`` is not 1-D or ``window < 1``.
    """
    c = checks.as_float_array(curve, "curve").astype(np.float64)
    if c.ndim != 1:
        raise ValueError(f"curve must be 1-D, got shape {c.shape}")
    threshold = checks.check_real(threshold, "threshold", allow_inf=True)
    window = checks.check_int(window, "window", 1)
    if c.size < window:
        return None
    means = np.convolve(c, np.full(window, 1.0 / window), mode="valid")  # (len - window + 1,)
    hits = np.flatnonzero(means < threshold)  # NaN compares False
    return None if hits.size == 0 else int(hits[0]) + window - 1


def _accuracy(logits: torch.Tensor, target: torch.Tensor) -> float:
    return float((logits.argmax(-1) == target).double().mean())


# --------------------------------------------------------------------------------------------
# Attention with a settable scale
# --------------------------------------------------------------------------------------------


class ScaledMultiHeadAttention(MultiHeadAttention):
    """:class:`attnbook.layers.MultiHeadAttention` with scores ``q k^T * scale`` for any ``scale``.

    ``scale=None`` is the default ``1/sqrt(head_dim)`` (Vaswani et al., 2017, eq. 1) and
    ``scale=1.0`` the unscaled dot product.
    :meth:`attnbook.layers.MultiHeadAttention.forward` has no ``scale`` argument, so this
    subclass multiplies the output of the query projection by
    ``scale * sqrt(head_dim)`` (a forward hook on ``q_proj``); the parent then multiplies the
    scores by ``1/sqrt(head_dim)``, and ``(c q) k^T / sqrt(D) = q k^T * scale``. The function
    of the parameters — and hence every gradient — is that of softmax(``q k^T * scale``); RoPE,
    a rotation, commutes with the factor. Parameters and their names are those of the parent.

    With ``qk_lr_gain = g`` the module stores ``W_Q`` and ``W_K`` (and their biases) divided by
    ``g`` and multiplies the two projections' outputs by ``g``: the same function of the input,
    but Adam, whose step does not depend on the scale of the gradient, then moves the effective
    ``W_Q`` and ``W_K`` ``g`` times as far per step — Adam with the learning rate times ``g`` on
    them (up to Adam's ``eps``, which becomes ``eps / g``). The stored ``W_Q`` and ``W_K`` (and
    their biases) are therefore the parent's divided by ``g``: a ``state_dict`` of the plain
    module loaded into one with ``g != 1`` (or the reverse) gives a different function; multiply
    or divide those four tensors by ``g`` to convert. ``repr`` shows the gain.

    Args:
        *args: as :class:`attnbook.layers.MultiHeadAttention`.
        **kwargs: as :class:`attnbook.layers.MultiHeadAttention`.
        scale: score multiplier ``>= 0`` (0 gives uniform weights), or ``None`` for
            ``1/sqrt(head_dim)``.
        qk_lr_gain: the factor ``g`` in ``[1e-3, 1e3]`` on the learning rate of ``W_Q`` and
            ``W_K`` under Adam; 1 (default) is the plain module. Outside that range the
            stored weights (divided by ``g``) would overflow or lose their precision.

    Raises:
        TypeError: if ``scale`` or ``qk_lr_gain`` is not a real number (or ``scale`` ``None``),
            or as the parent.
        ValueError: if ``scale`` is negative or not finite, ``qk_lr_gain`` not finite or not
            in ``[1e-3, 1e3]``, or as the parent.

    Source: Vaswani et al., "Attention Is All You Need" (2017), eq. 1 and footnote 4.
    """

    def __init__(self, *args, scale: float | None = None, qk_lr_gain: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        if scale is None:
            self.scale, self.q_factor = 1.0 / math.sqrt(self.head_dim), 1.0
        else:
            scale = checks.check_real(scale, "scale", minimum=0)
            self.scale, self.q_factor = scale, scale * math.sqrt(self.head_dim)
        gain = checks.check_qk_lr_gain(qk_lr_gain)  # [1e-3, 1e3]: stored weights stay finite
        self.qk_lr_gain = gain
        if gain != 1.0:  # same function; Adam moves W_Q, W_K gain times as far
            with torch.no_grad():
                for proj in (self.q_proj, self.k_proj):
                    for p in proj.parameters():
                        p.div_(gain)
        self.q_proj.register_forward_hook(self._rescale_queries)
        self.k_proj.register_forward_hook(self._rescale_keys)

    def _rescale_queries(self, module, inputs, output):
        factor = self.q_factor * self.qk_lr_gain
        return output if factor == 1.0 else output * factor

    def _rescale_keys(self, module, inputs, output):
        return output if self.qk_lr_gain == 1.0 else output * self.qk_lr_gain

    def extra_repr(self) -> str:
        """The scale, head width and (if not 1) ``qk_lr_gain``, shown in the ``repr``."""
        gain = "" if self.qk_lr_gain == 1.0 else f", qk_lr_gain={self.qk_lr_gain:g}"
        return f"scale={self.scale:g} (head_dim={self.head_dim}){gain}"


# --------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------


def kv_recall_batch(
    batch_size: int, n_pairs: int, n_keys: int, n_values: int, generator: torch.Generator
):
    """Key-value retrieval problems: given ``n_pairs`` (key, value) pairs and a key, its value.

    Keys of one problem are distinct (drawn without replacement from ``n_keys``), values are
    uniform over ``n_values``, and the query is one of the stored keys, chosen uniformly. The
    answer is uniform over ``n_values`` to anyone who does not read the pairs: chance
    cross-entropy ``log(n_values)``.

    Args:
        batch_size: number of problems ``B``.
        n_pairs: pairs per problem ``P`` (``<= n_keys``).
        n_keys, n_values: key and value vocabulary sizes.
        generator: the source of randomness.

    Returns:
        ``(keys (B, P), values (B, P), query (B,), target (B,))``, int64.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1 or ``n_pairs > n_keys``.
    """
    B = checks.check_int(batch_size, "batch_size", 1)
    P = checks.check_int(n_pairs, "n_pairs", 1)
    if P > checks.check_int(n_keys, "n_keys", 1):
        raise ValueError(f"n_pairs {P} must be <= n_keys {n_keys} (keys are distinct)")
    checks.check_int(n_values, "n_values", 1)
    keys = torch.rand(B, n_keys, generator=generator).argsort(dim=-1)[:, :P]  # (B, P) distinct
    values = torch.randint(n_values, (B, P), generator=generator)  # (B, P)
    pick = torch.randint(P, (B,), generator=generator)  # (B,)
    rows = torch.arange(B)
    return keys, values, keys[rows, pick], values[rows, pick]


def copy_batch(batch_size: int, n: int, vocab: int, generator: torch.Generator):
    """Copy task for a decoder-only model: ``x_1 .. x_n SEP x_1 .. x_n``.

    Tokens ``x_i`` are uniform over ``0 .. vocab-1``; ``SEP = vocab``. A next-token model must
    predict the second copy (the first half is noise, unpredictable by construction). Given only
    the positions, each copied token is uniform over ``vocab``: chance cross-entropy
    ``log(vocab)``.

    Args:
        batch_size: ``B``.
        n: tokens to copy.
        vocab: data vocabulary size (the model's vocabulary is ``vocab + 1``).
        generator: the source of randomness.

    Returns:
        ``(ids (B, 2n + 1), targets (B, n))``, int64: ``targets[:, i]`` is the token the model
        must predict at position ``n + i`` (the SEP and the copy so far), i.e. ``x_{i+1}``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1.
    """
    B, n, vocab = (
        checks.check_int(batch_size, "batch_size", 1),
        checks.check_int(n, "n", 1),
        checks.check_int(vocab, "vocab", 1),
    )
    x = torch.randint(vocab, (B, n), generator=generator)  # (B, n)
    sep = torch.full((B, 1), vocab, dtype=torch.long)
    ids = torch.cat([x, sep, x], dim=1)  # (B, 2n + 1)
    return ids, x


def delayed_recall_batch(
    batch_size: int,
    max_k: int,
    n_signal: int,
    n_noise: int,
    generator: torch.Generator,
    k: torch.Tensor | None = None,
    seq_len: int | None = None,
):
    """Recall the token ``k`` positions back: one signal token, ``k - 1`` noise tokens, a query.

    Every sequence has length ``T = max_k + 1`` unless ``seq_len`` is given. Position ``T - 1``
    holds the query token, position ``T - 1 - k`` a signal token uniform over
    ``0 .. n_signal-1``, and every other position a noise token uniform over
    ``n_signal .. n_signal+n_noise-1``. The answer, read at the query,
    is the signal token, ``k`` positions back. Without reading the sequence it is uniform over
    ``n_signal``: chance cross-entropy ``log(n_signal)``, accuracy ``1/n_signal``.

    Args:
        batch_size: ``B``.
        max_k: largest distance; the sequence length is ``max_k + 1`` by default.
        n_signal, n_noise: sizes of the signal and noise vocabularies (query id
            ``n_signal + n_noise``; the model's vocabulary is ``n_signal + n_noise + 1``).
        generator: the source of randomness.
        k: optional int64 ``(B,)`` distances in ``1 .. max_k``; default uniform.
        seq_len: optional sequence length ``T >= max_k + 1``; default ``max_k + 1``. A longer
            ``T`` puts more noise tokens before the signal, at every distance.

    Returns:
        ``(ids (B, T), target (B,), k (B,))``, int64.

    Raises:
        TypeError: if a size is not an integer or ``k`` holds non-integers.
        ValueError: if a size is < 1, a distance is outside ``1 .. max_k`` or ``seq_len`` is
            below ``max_k + 1``.
    """
    B = checks.check_int(batch_size, "batch_size", 1)
    K = checks.check_int(max_k, "max_k", 1)
    checks.check_int(n_signal, "n_signal", 1)
    checks.check_int(n_noise, "n_noise", 1)
    T = K + 1 if seq_len is None else checks.check_int(seq_len, "seq_len", K + 1)
    if k is None:
        k = torch.randint(1, K + 1, (B,), generator=generator)  # (B,)
    else:
        k = checks.check_int_tensor(k, "k").long()
        if k.shape != (B,) or int(k.min()) < 1 or int(k.max()) > K:
            raise ValueError(
                f"k must be (batch_size={B},) with values in 1..{K}; got shape "
                f"{tuple(k.shape)}, range {int(k.min())}..{int(k.max())}"
            )
    ids = n_signal + torch.randint(n_noise, (B, T), generator=generator)  # (B, T) noise
    target = torch.randint(n_signal, (B,), generator=generator)  # (B,)
    rows = torch.arange(B)
    ids[rows, T - 1 - k] = target
    ids[:, -1] = n_signal + n_noise  # the query token
    return ids, target, k


def multi_source_batch(
    batch_size: int, seq_len: int, n_sources: int, content_dim: int, generator: torch.Generator
):
    """Gather several tokens at once: the last token must output the contents of ``n_sources``.

    Each sequence has ``seq_len`` tokens. Token ``j`` carries a content vector ``c_j`` of
    ``content_dim`` independent N(0, 1) numbers and a type: ``0`` filler, ``1`` the query (the
    last token), ``2 .. n_sources + 1`` the sources (one token of each type, at distinct random
    positions before the query). The target is the concatenation of the sources' contents in
    type order, ``(c_{s_1}, ..., c_{s_K})``. Selecting a source is easy (its type is in its
    input); outputting all of them at once is what one attention distribution cannot do: if
    the weights ``p`` do not depend on the contents, one head's output is a linear function of
    the single mix ``sum_j p_j c_j`` of ``content_dim`` numbers, and the best estimate of the
    ``K`` independent sources from it leaves a fraction ``1 - sum_k p_{s_k}^2 / (K sum_j
    p_j^2) >= 1 - 1/K`` of their variance unexplained (Gaussian conditional expectation).

    Args:
        batch_size: number of sequences ``B``.
        seq_len: tokens per sequence ``L`` (``> n_sources``: the sources and the query).
        n_sources: ``K``, the tokens whose contents the query must output.
        content_dim: ``m``, the numbers of content per token.
        generator: the source of randomness.

    Returns:
        ``(x, target, types)``: float32 ``x (B, L, m + K + 2)``, the contents followed by the
        one-hot type; float32 ``target (B, K * m)``; int64 ``types (B, L)``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1 or ``seq_len <= n_sources``.
    """
    B = checks.check_int(batch_size, "batch_size", 1)
    L = checks.check_int(seq_len, "seq_len", 1)
    K = checks.check_int(n_sources, "n_sources", 1)
    m = checks.check_int(content_dim, "content_dim", 1)
    if L <= K:
        raise ValueError(f"seq_len {L} must be > n_sources {K} (the sources and the query)")
    content = torch.randn(B, L, m, generator=generator)  # (B, L, m)
    where = torch.rand(B, L - 1, generator=generator).argsort(dim=-1)[:, :K]  # (B, K) distinct
    types = torch.zeros(B, L, dtype=torch.int64)  # (B, L) fillers
    types[:, -1] = 1  # the query
    types.scatter_(1, where, torch.arange(2, K + 2).expand(B, K))  # source k has type k + 2
    x = torch.cat([content, F.one_hot(types, K + 2).float()], dim=-1)  # (B, L, m + K + 2)
    target = torch.gather(content, 1, where[..., None].expand(B, K, m))  # (B, K, m)
    return x, target.reshape(B, K * m), types


def reversal_batch(batch_size: int, n: int, vocab: int, generator: torch.Generator):
    """Sequence reversal for an encoder-decoder: source ``x_1 .. x_n``, target ``x_n .. x_1``.

    Tokens are uniform over ``0 .. vocab-1``; ``BOS = vocab`` starts the decoder input (teacher
    forcing). Without reading the source each target token is uniform over ``vocab``: chance
    cross-entropy ``log(vocab)``.

    Args:
        batch_size: ``B``.
        n: sequence length.
        vocab: data vocabulary size (the model's vocabulary is ``vocab + 1``).
        generator: the source of randomness.

    Returns:
        ``(src (B, n), tgt_in (B, n), tgt_out (B, n))``, int64; ``tgt_in = [BOS, x_n .. x_2]``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1.
    """
    B, n, vocab = (
        checks.check_int(batch_size, "batch_size", 1),
        checks.check_int(n, "n", 1),
        checks.check_int(vocab, "vocab", 1),
    )
    src = torch.randint(vocab, (B, n), generator=generator)  # (B, n)
    tgt_out = src.flip(1)  # (B, n)
    bos = torch.full((B, 1), vocab, dtype=torch.long)
    tgt_in = torch.cat([bos, tgt_out[:, :-1]], dim=1)  # (B, n)
    return src, tgt_in, tgt_out


# --------------------------------------------------------------------------------------------
# Chapter 04: scaling on vs off
# --------------------------------------------------------------------------------------------


class _RetrievalModel(nn.Module):
    """One Pre-LN Transformer layer over key-value slots, read out at the query slot.

    Slot ``i`` holds ``key_emb[k_i] + value_emb[v_i]`` (a pair as one vector, as token and
    position embeddings are summed); the last slot holds ``key_emb[q] + query_emb``. Then
    ``h = x + attn(norm1(x))``, ``h = h + ffn(norm2(h))``, ``logits = head(norm_f(h))`` at the
    query slot.
    """

    def __init__(self, n_keys, n_values, d_model, head_dim, d_ff, scale, qk_lr_gain=1.0):
        super().__init__()
        self.key_emb = nn.Embedding(n_keys, d_model)
        self.value_emb = nn.Embedding(n_values, d_model)
        self.query_emb = nn.Embedding(1, d_model)
        self.norm1 = LayerNorm(d_model)
        self.attn = ScaledMultiHeadAttention(
            d_model, 1, head_dim=head_dim, scale=scale, qk_lr_gain=qk_lr_gain
        )
        self.norm2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_values)

    def forward(self, keys, values, query):
        pairs = self.key_emb(keys) + self.value_emb(values)  # (B, P, d_model)
        q = self.key_emb(query) + self.query_emb.weight[0]  # (B, d_model)
        x = torch.cat([pairs, q[:, None]], dim=1)  # (B, P + 1, d_model)
        a, weights = self.attn(self.norm1(x), need_weights=True)  # weights (B, 1, P+1, P+1)
        h = x + a
        h = h + self.ffn(self.norm2(h))
        return self.head(self.norm_f(h[:, -1])), weights  # (B, n_values), (B, 1, L, L)


@dataclass
class ScalingResult:
    """Result of :func:`scaling_run`; arms are ``"scaled"`` (``1/sqrt(d_k)``) and ``"unscaled"``.

    With ``q_init_gain`` there is a third arm, ``"control"`` (scaled, with ``W_Q`` initialised
    ``q_init_gain`` times larger), with ``qk_lr_gain`` a fourth, ``"big-step"`` (scaled, with the
    learning rate of ``W_Q`` and ``W_K`` ``qk_lr_gain`` times larger), with ``small_step_gain`` a
    fifth, ``"small-step"`` (unscaled, with the learning rate of ``W_Q`` and ``W_K``
    ``small_step_gain`` times as large); every per-arm dict then has their entries too.

    Attributes:
        head_dim: ``d_k``.
        scales: ``{"scaled": 1/sqrt(d_k), "unscaled": 1.0}`` (and ``1/sqrt(d_k)`` for
            ``"control"`` and ``"big-step"``, ``1.0`` for ``"small-step"``).
        loss: per arm, float64 ``(steps,)`` training cross-entropy (nats) of each step's batch.
        entropy: per arm, float64 ``(steps,)`` mean entropy (nats) of the query slot's attention
            weights over that batch, measured in the same forward pass as the loss.
        saturated: per arm, float64 ``(steps,)`` share of that batch's queries whose largest
            attention weight exceeds ``saturation_threshold``.
        saturated_grad_share: per arm, float64 ``(steps,)`` share of the batch's summed
            per-query gradient norm ``||dloss/d(q k^T)||`` (with respect to the raw dot
            products of the query slot's row) that the saturated queries carry; 0 when none is
            saturated.
        saturation_threshold: the largest weight above which a query counts as saturated.
        max_entropy: ``log(n_pairs + 1)``, the entropy of uniform attention over the slots.
        score_std_init: per arm, standard deviation of the query slot's scaled scores at
            initialisation (first batch), before the softmax.
        eval_loss, eval_accuracy: per arm, on a held-out set after training.
        chance_loss: ``log(n_values)``.
        steps, lr, batch_size, n_pairs, n_keys, n_values, d_model, seed: the settings.
        n_params: parameters of the model (the same for both arms).
        wall_time_s, cpu_time_s: the whole run (all arms).
        q_init_gain: the control arm's factor on ``W_Q`` at initialisation; ``None`` without it.
        qk_lr_gain: the big-step arm's factor on the learning rate of ``W_Q`` and ``W_K``; ``None``
            without it.
        small_step_gain: the small-step arm's factor on the learning rate of ``W_Q`` and
            ``W_K``; ``None`` without it.
        score_step: per arm, float64 ``(min(score_steps, steps),)``: after each of the first
            updates, the mean absolute change of the query slot's scores as the softmax sees them
            (``scale * q k^T``, all ``n_pairs + 1`` of them) on a fixed probe batch (the first
            training batch), from before that update to after it.
    """

    head_dim: int
    scales: dict
    loss: dict
    entropy: dict
    saturated: dict
    saturated_grad_share: dict
    saturation_threshold: float
    max_entropy: float
    score_std_init: dict
    eval_loss: dict
    eval_accuracy: dict
    chance_loss: float
    steps: int
    lr: float
    batch_size: int
    n_pairs: int
    n_keys: int
    n_values: int
    d_model: int
    seed: int
    n_params: int
    score_step: dict
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    q_init_gain: float | None = None
    qk_lr_gain: float | None = None
    small_step_gain: float | None = None


def _probe_scores(model: "_RetrievalModel", keys, values, query) -> torch.Tensor:
    """The query slot's scores as the softmax sees them, ``(B, n_pairs + 1)``, without grad.

    ``scale * q k^T``: the attention's query projection carries ``scale * sqrt(head_dim)``
    (:class:`ScaledMultiHeadAttention`), so ``q k^T / sqrt(head_dim)`` is the softmax's input.
    """
    with torch.no_grad():
        captured = {}
        hook = model.attn.register_forward_pre_hook(
            lambda m, args, captured=captured: captured.__setitem__("x", args[0])
        )
        try:
            model(keys, values, query)
        finally:
            hook.remove()
        x = captured["x"]  # (B, L, d_model), the attention's input
        qv = model.attn.q_proj(x)[:, -1]  # (B, D) rescaled by the hook: q * c
        kv = model.attn.k_proj(x)  # (B, L, D)
        return torch.einsum("bd,bld->bl", qv, kv) / math.sqrt(model.attn.head_dim)


def score_gradient(weights: torch.Tensor, grad_weights: torch.Tensor, scale: float) -> torch.Tensor:
    """The gradient with respect to raw dot products ``q k^T``, from the weights' gradient.

    ``weights = softmax(scale * q k^T)`` along the last axis, so by the chain rule through the
    softmax Jacobian ``diag(p) - p p^T`` (symmetric),
    ``dloss/d(q k^T) = scale * p * (g - sum(p * g))`` with ``g = dloss/dweights``.

    Args:
        weights: ``(..., S)`` attention weights ``p`` (rows sum to 1), float.
        grad_weights: ``(..., S)`` the loss gradient with respect to ``weights``, float.
        scale: the factor the dot products were multiplied by before the softmax.

    Returns:
        ``(..., S)`` tensor in the inputs' dtype.

    Raises:
        TypeError: if ``weights`` or ``grad_weights`` is not a floating torch tensor or
            ``scale`` not a real number.
        ValueError: if the two tensors' shapes differ or ``scale`` is not finite.

    Source: the softmax Jacobian, :func:`attnbook.attention.softmax_jacobian` (chapter 04).
    """
    checks.check_tensor(weights, "weights")
    checks.check_tensor(grad_weights, "grad_weights")
    scale = checks.check_real(scale, "scale")
    if weights.shape != grad_weights.shape:
        raise ValueError(
            f"weights and grad_weights must have the same shape, got "
            f"{tuple(weights.shape)} and {tuple(grad_weights.shape)}"
        )
    inner = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (..., 1) p . g
    return scale * weights * (grad_weights - inner)


def scaling_run(
    *,
    head_dim: int = 256,
    d_model: int = 64,
    d_ff: int = 128,
    n_pairs: int = 8,
    n_keys: int = 16,
    n_values: int = 16,
    steps: int = 400,
    batch_size: int = 64,
    lr: float = 1e-3,
    eval_size: int = 1024,
    seed: int = 0,
    num_threads: int = 1,
    saturation_threshold: float = 0.99,
    q_init_gain: float | None = None,
    qk_lr_gain: float | None = None,
    small_step_gain: float | None = None,
    score_steps: int = 10,
    arms: tuple | list | None = None,
    progress: bool = False,
) -> ScalingResult:
    """Train one attention model with and without ``1/sqrt(d_k)`` on key-value retrieval.

    Task (:func:`kv_recall_batch`): ``n_pairs`` key-value pairs and a query key; predict its
    value. The answer has to be fetched by attention from the query slot to the matching pair,
    so it tests exactly what the scale affects. Model: one Pre-LN layer with a single head of
    width ``head_dim`` (:class:`ScaledMultiHeadAttention`, the library's
    :class:`~attnbook.layers.MultiHeadAttention` with a settable scale), a ReLU feed-forward layer
    and a linear readout at the query slot. Both arms start from the same weights (same seed) and
    see the same batches; they differ only in the scale: ``1/sqrt(head_dim)`` or ``1``.

    With ``q_init_gain`` a third arm, ``"control"``, is trained: scaled by ``1/sqrt(head_dim)``
    like the first, but with the query projection's initial weights multiplied by
    ``q_init_gain``. With ``q_init_gain = sqrt(head_dim)`` its scores at initialisation are the
    unscaled arm's (the same ``q k^T``), and so is its saturation; but a step of ``W_Q`` moves its
    scores only ``1/sqrt(head_dim)`` as far as the same step moves the unscaled arm's — as far as
    it moves the scaled arm's. It separates the two things the scale changes: if the control
    learns as slowly as the unscaled arm, the saturation at the start is what slows it; if as fast
    as the scaled arm, the larger step is.

    The control's ``W_Q`` starts with a large random part that it may have to unlearn, a
    handicap of its own. With ``qk_lr_gain`` a fourth arm, ``"big-step"``, tests the step size
    without it: scaled, from the scaled arm's weights, but with Adam's learning rate on ``W_Q``
    and ``W_K`` times ``qk_lr_gain`` (:class:`ScaledMultiHeadAttention`). With
    ``qk_lr_gain = sqrt(head_dim)`` a step of either moves its scores, to first order, as far as
    the same step moves the unscaled arm's, while its attention starts as unsaturated as the
    scaled arm's.

    With ``small_step_gain`` a fifth arm, ``"small-step"``, is the mirror image: unscaled, from
    the unscaled arm's weights (its scores at initialisation are the unscaled arm's, and saturate
    as much), but with Adam's learning rate on ``W_Q`` and ``W_K`` times ``small_step_gain``.
    With ``small_step_gain = 1/sqrt(head_dim)`` a step of either moves its scores, to first
    order, only as far as the same step moves the scaled arm's. Together the four arms scaled,
    big-step, unscaled and small-step make a 2x2 design: scores that start as spread as the
    scaled arm's or ``sqrt(head_dim)`` times more (attention concentrated at the start), times
    steps that move the scores as far as the scaled or as the unscaled arm's.

    With torch's default ``nn.Linear`` initialisation (uniform, variance ``1/(3 d_model)``) and
    LayerNorm'd inputs, query and key components have variance about 1/3, so an unscaled score
    has standard deviation about ``sqrt(head_dim)/3`` (5.3 at 256) and a scaled one about 1/3;
    the result records the measured value (``score_std_init``).

    After each of the first ``score_steps`` updates it records how far the update moved the
    scores the softmax sees, on a fixed probe batch (``score_step``): the measured premise of
    the 2x2 design (big-step's moves are the unscaled arm's size, small-step's the scaled
    arm's).

    At every step it also records which of the batch's queries are saturated (largest weight
    above ``saturation_threshold``) and what share of the gradient reaching the query's raw
    dot products ``q k^T`` those queries carry (:func:`score_gradient`, from the weights and
    their gradient in the same backward pass as the update's).

    Args:
        head_dim: ``d_k`` of the single head.
        d_model, d_ff: widths of the residual stream and the feed-forward layer.
        n_pairs, n_keys, n_values: task sizes (see :func:`kv_recall_batch`).
        steps, batch_size, lr: Adam updates, problems per update, learning rate.
        eval_size: held-out problems for ``eval_loss``/``eval_accuracy``.
        seed: weights ``torch.manual_seed(seed)``; batches ``Generator(seed)``; held-out set
            ``Generator(seed + 1)``.
        num_threads: torch threads during the run.
        saturation_threshold: a query is saturated when its largest weight exceeds this
            (``0 < saturation_threshold < 1``).
        q_init_gain: if given (``> 0``), also train the ``"control"`` arm described above, whose
            initial ``W_Q`` is this factor times the others'; ``None`` (default): two arms.
        qk_lr_gain: if given (in ``[1e-3, 1e3]``), also train the ``"big-step"`` arm described
            above, whose ``W_Q`` and ``W_K`` learn with this factor times ``lr``; ``None``
            (default): no big-step arm.
        small_step_gain: if given (in ``[1e-3, 1e3]``, usually ``1/sqrt(head_dim)``), also
            train the ``"small-step"`` arm described above, unscaled, whose ``W_Q`` and ``W_K``
            learn with this factor times ``lr``; ``None`` (default): no small-step arm.
        score_steps: how many first updates ``score_step`` covers (``>= 0``; at most
            ``steps`` are recorded).
        arms: which of the arms the settings above define to train (e.g. ``("unscaled",)``),
            in their usual order whatever the order given; ``None`` (default): all of them.
            Every per-arm dict then holds only these; :func:`match_step_gain` uses it.
        progress: show tqdm bars.

    Returns:
        :class:`ScalingResult`.

    Raises:
        TypeError: if a size or ``seed`` is not an integer or ``lr``,
            ``saturation_threshold``, ``q_init_gain``, ``qk_lr_gain`` or ``small_step_gain`` not
            a real number, or ``progress`` not a bool.
        ValueError: if a size is < 1, ``score_steps`` < 0,
            ``n_pairs > n_keys``, ``lr`` is not positive, ``saturation_threshold`` is not
            strictly between 0 and 1, ``q_init_gain`` is not in ``(0, 1000)``, ``qk_lr_gain``
            or ``small_step_gain`` not in ``[1e-3, 1e3]``, ``seed`` is negative, or ``arms`` is
            empty, names an arm twice or one the settings do not define (e.g. ``"big-step"``
            without ``qk_lr_gain``; :func:`attnbook.checks.check_names`).

    Source: Vaswani et al. (2017), section 3.2.1 and footnote 4.
    """
    for name, v in dict(
        head_dim=head_dim,
        d_model=d_model,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        eval_size=eval_size,
    ).items():
        checks.check_int(v, name, 1)
    score_steps = min(checks.check_int(score_steps, "score_steps", 0), steps)
    progress = checks.check_bool(progress, "progress")
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    threshold = checks.check_real(
        saturation_threshold, "saturation_threshold", minimum=0.0, maximum=1.0, strict=True
    )
    seed = checks.check_seed(seed)
    if q_init_gain is not None:
        q_init_gain = checks.check_real(  # 1000: sqrt(d_k) of d_k = 10**6, far past the book's
            q_init_gain, "q_init_gain", minimum=0, maximum=1e3, strict=True
        )
    if qk_lr_gain is not None:
        qk_lr_gain = checks.check_qk_lr_gain(qk_lr_gain)
    if small_step_gain is not None:
        small_step_gain = checks.check_qk_lr_gain(small_step_gain, "small_step_gain")
    gen_eval = torch.Generator().manual_seed((seed + 1) % 2**64)
    eval_batch = kv_recall_batch(eval_size, n_pairs, n_keys, n_values, gen_eval)
    scales = {"scaled": 1.0 / math.sqrt(head_dim), "unscaled": 1.0}
    if q_init_gain is not None:
        scales["control"] = scales["scaled"]
    if qk_lr_gain is not None:
        scales["big-step"] = scales["scaled"]
    if small_step_gain is not None:
        scales["small-step"] = scales["unscaled"]
    if arms is not None:
        chosen = checks.check_names(arms, "arms", list(scales))
        scales = {arm: scale for arm, scale in scales.items() if arm in chosen}
    lr_gains = {"big-step": qk_lr_gain, "small-step": small_step_gain}
    out = {
        name: {}
        for name in (
            "loss",
            "entropy",
            "saturated",
            "saturated_grad_share",
            "score_std_init",
            "eval_loss",
            "eval_accuracy",
            "score_step",
        )
    }
    with _run_context(num_threads) as clock:
        for arm, scale in scales.items():
            torch.manual_seed(seed)
            model = _RetrievalModel(  # scale None: the default; the same weights in every arm
                n_keys,
                n_values,
                d_model,
                head_dim,
                d_ff,
                1.0 if scale == 1.0 else None,
                lr_gains.get(arm, 1.0),
            )
            if arm == "control":  # the same weights, W_Q q_init_gain times larger
                with torch.no_grad():
                    model.attn.q_proj.weight.mul_(q_init_gain)
                    if model.attn.q_proj.bias is not None:
                        model.attn.q_proj.bias.mul_(q_init_gain)
            n_params = count_parameters(model)
            gen = torch.Generator().manual_seed(seed)
            ent, sat, share = (np.empty(steps, dtype=np.float64) for _ in range(3))
            held = {}  # this step's weights, kept for after_backward

            def batch_loss(step, model=model, gen=gen, ent=ent, held=held):
                keys, values, query, target = kv_recall_batch(
                    batch_size, n_pairs, n_keys, n_values, gen
                )
                logits, weights = model(keys, values, query)
                weights.retain_grad()  # dloss/dweights, for the score gradient
                held["weights"] = weights
                w = weights[:, 0, -1].detach().double().numpy()  # (B, P + 1) query row
                ent[step] = float(entropy(w, axis=-1).mean())
                return F.cross_entropy(logits, target)

            def after_backward(step, model=model, sat=sat, share=share, held=held):
                weights = held.pop("weights")
                p = weights.detach()[:, 0, -1].double()  # (B, P + 1) the query's row
                g = score_gradient(p, weights.grad[:, 0, -1].double(), model.attn.scale)
                norms = g.norm(dim=-1)  # (B,) per query
                saturated = p.max(dim=-1).values > threshold
                sat[step] = float(saturated.double().mean())
                total = float(norms.sum())
                share[step] = float(norms[saturated].sum()) / total if total > 0 else 0.0

            # The scores' spread at initialisation, on the first batch (the probe batch).
            probe = kv_recall_batch(
                batch_size, n_pairs, n_keys, n_values, torch.Generator().manual_seed(seed)
            )[:3]
            scores = _probe_scores(model, *probe)  # (B, L)
            out["score_std_init"][arm] = float(scores.double().std())
            moved = np.empty(score_steps, dtype=np.float64)
            last = {"scores": scores}

            def after_step(step, model=model, probe=probe, moved=moved, last=last):
                if step < score_steps:  # how far this update moved the probe's scores
                    now = _probe_scores(model, *probe)
                    moved[step] = float((now - last["scores"]).abs().double().mean())
                    last["scores"] = now

            out["loss"][arm] = _train(
                model,
                batch_loss,
                steps=steps,
                lr=lr,
                progress=progress,
                desc=f"scaling: {arm}",
                after_backward=after_backward,
                after_step=after_step,
            )
            out["score_step"][arm] = moved
            out["entropy"][arm] = ent
            out["saturated"][arm] = sat
            out["saturated_grad_share"][arm] = share
            with torch.no_grad():
                logits, _ = model(*eval_batch[:3])
                out["eval_loss"][arm] = float(F.cross_entropy(logits, eval_batch[3]))
                out["eval_accuracy"][arm] = _accuracy(logits, eval_batch[3])
    return ScalingResult(
        head_dim=head_dim,
        scales=scales,
        saturation_threshold=threshold,
        max_entropy=math.log(n_pairs + 1),
        chance_loss=math.log(n_values),
        steps=steps,
        lr=lr,
        batch_size=batch_size,
        n_pairs=n_pairs,
        n_keys=n_keys,
        n_values=n_values,
        d_model=d_model,
        seed=seed,
        n_params=n_params,
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
        q_init_gain=q_init_gain,
        qk_lr_gain=qk_lr_gain,
        small_step_gain=small_step_gain,
        **out,
    )


#: The arm each learning-rate arm of :func:`scaling_run` is matched to, by :func:`match_step_gain`.
STEP_MATCH_TARGETS = {"big-step": "unscaled", "small-step": "scaled"}


@dataclass
class StepMatch:
    """Result of :func:`match_step_gain`.

    Attributes:
        arm: ``"big-step"`` or ``"small-step"``.
        target: the arm whose steps it was matched to (:data:`STEP_MATCH_TARGETS`).
        gain: the learning-rate gain found (``qk_lr_gain`` or ``small_step_gain`` of
            :func:`scaling_run`), the last one tried.
        ratio: at that gain, the arm's mean score change per update over the target's (the
            means of :attr:`ScalingResult.score_step` over the first ``score_steps`` updates).
        matched: whether ``|log(ratio)| <= log(1 + rtol)``.
        trials: every ``(gain, ratio)`` tried, in order (the first gain is ``sqrt(head_dim)``
            for ``"big-step"``, ``1/sqrt(head_dim)`` for ``"small-step"``, each kept in
            ``[1e-3, 1e3]`` as every later gain is).
        target_step, arm_step: the two mean score changes at the last gain (the units of
            :attr:`ScalingResult.score_step`).
        seed, head_dim, score_steps, rtol: the settings (Python ints and a float).
        wall_time_s: all the short runs together.
    """

    arm: str
    target: str
    gain: float
    ratio: float
    matched: bool
    trials: list
    target_step: float
    arm_step: float
    seed: int
    head_dim: int
    score_steps: int
    rtol: float
    wall_time_s: float


#: The largest ``lr`` :func:`match_step_gain` accepts: Adam moves each weight by about ``lr``.
_MAX_MATCH_LR = 1.0


def _check_score_step(step: float, who: str, lr: float) -> None:
    """A mean score change that a ratio can be taken of: finite and > 0 (else name ``lr``)."""
    if not math.isfinite(step):
        raise ValueError(
            f"the training of {who} diverged at lr={lr:g}: its mean score change per update "
            f"is {step}; lower lr"
        )
    if step <= 0:
        raise ValueError(
            f"the scores of {who} did not move at lr={lr:g} (mean score change per update "
            f"{step:g}): the updates are too small to change the weights; raise lr"
        )


def match_step_gain(
    arm: str,
    *,
    seed: int = 0,
    head_dim: int = 256,
    score_steps: int = 10,
    rtol: float = 0.05,
    max_trials: int = 8,
    **run_kwargs,
) -> StepMatch:
    """The learning-rate gain at which an arm's first updates move the scores as its target's.

    The 2x2 design of :func:`scaling_run` needs the big-step arm's updates to move the scores
    as far as the unscaled arm's, and the small-step arm's as far as the scaled arm's
    (:data:`STEP_MATCH_TARGETS`). The gains ``sqrt(head_dim)`` and ``1/sqrt(head_dim)`` match
    them only to first order: a step changes a raw score ``q . k`` by
    ``dq . k + q . dk + dq . dk``, and a gain ``g`` on the learning rate of both ``W_Q`` and
    ``W_K`` multiplies the last term by ``g**2``. So this measures instead. It trains the
    target arm for ``score_steps`` updates (the same seed, weights and batches as the full run's
    first updates: there is no learning-rate schedule), then the arm itself with a trial gain,
    and compares the means of ``score_step``; the next gain comes from a secant step on
    ``log(ratio)`` against ``log(gain)`` (its slope kept in ``[0.5, 3]``; the first step
    assumes slope 1; every gain is kept in ``[1e-3, 1e3]``, the range :func:`scaling_run`
    accepts), until the ratio is within ``rtol`` of 1 or ``max_trials`` gains were tried.
    One trial costs ``score_steps`` training updates of one arm.

    Args:
        arm: ``"big-step"`` or ``"small-step"``.
        seed, head_dim, score_steps: as :func:`scaling_run` (``score_steps >= 1``).
        rtol: the tolerance, ``0 < rtol < 1``: matched when ``|log(ratio)| <= log(1 + rtol)``.
        max_trials: the most gains to try (``>= 1``).
        **run_kwargs: any other argument of :func:`scaling_run` (task sizes, ``lr`` in
            ``(0, 1]``, ``batch_size``, ``num_threads``, ...), passed to every short run; not
            ``steps``, ``arms``, ``qk_lr_gain``, ``small_step_gain``, ``q_init_gain``,
            ``eval_size`` or ``progress``, which this sets.

    Returns:
        :class:`StepMatch`. A gain that did not match within ``max_trials`` is returned with
        ``matched=False``, not raised: the chapter says so.

    Raises:
        TypeError: if ``arm`` is not a string (``None`` included), a size or ``seed`` not an
            integer, ``rtol`` or ``lr`` not a real number, or a key of ``run_kwargs`` is not
            an argument of :func:`scaling_run`.
        ValueError: if ``arm`` is not one of :data:`STEP_MATCH_TARGETS`, ``head_dim``,
            ``score_steps`` or ``max_trials`` < 1, ``seed`` negative, ``rtol`` not in
            ``(0, 1)``, ``lr`` not finite or not in ``(0, 1]`` (above 1 an Adam update
            outgrows the weights), the target's or the arm's scores did not move at ``lr``
            (updates too small to change the weights: no ratio to take) or their training
            diverged, ``run_kwargs`` sets an argument this function sets, or as
            :func:`scaling_run` raises.

    Source: the design is this book's (chapter 04); Adam's steps are about ``lr`` per
    parameter whatever the gradient's scale (Kingma & Ba, 2015, section 2.1), so a gain on the
    learning rate scales a step, and ``sqrt(head_dim)`` is the first-order match.
    """
    arm = checks.check_name(arm, "arm", list(STEP_MATCH_TARGETS))
    seed = checks.check_seed(seed)
    head_dim = checks.check_int(head_dim, "head_dim", 1)
    score_steps = checks.check_int(score_steps, "score_steps", 1)
    max_trials = checks.check_int(max_trials, "max_trials", 1)
    rtol = checks.check_real(rtol, "rtol", minimum=0.0, maximum=1.0, strict=True)
    lr = run_kwargs.get("lr", inspect.signature(scaling_run).parameters["lr"].default)
    lr = checks.check_real(lr, "lr", minimum=0.0, strict=True)
    if lr > _MAX_MATCH_LR:
        raise ValueError(
            f"lr must be <= {_MAX_MATCH_LR:g} to measure training steps, got {lr:g}: Adam "
            "moves every weight by about lr per update, so above 1 an update outgrows the "
            "weights themselves"
        )
    fixed = {
        "steps",
        "arms",
        "qk_lr_gain",
        "small_step_gain",
        "q_init_gain",
        "eval_size",
        "progress",
    }
    clash = sorted(fixed & set(run_kwargs))
    if clash:
        raise ValueError(f"match_step_gain sets {clash} itself; got them in run_kwargs")
    target = STEP_MATCH_TARGETS[arm]
    gain_name = "qk_lr_gain" if arm == "big-step" else "small_step_gain"
    common = dict(
        seed=seed,
        head_dim=head_dim,
        steps=score_steps,
        score_steps=score_steps,
        eval_size=1,
        **run_kwargs,
    )
    start = time.perf_counter()
    target_step = float(scaling_run(arms=(target,), **common).score_step[target].mean())
    _check_score_step(target_step, f"the {target} arm", lr)
    lo, hi = checks.QK_LR_GAIN_RANGE
    gain = math.sqrt(head_dim) if arm == "big-step" else 1.0 / math.sqrt(head_dim)
    gain = min(max(gain, lo), hi)  # in the allowed range, as every later gain
    trials, slope = [], 1.0
    tol = math.log1p(rtol)
    for _ in range(max_trials):
        run = scaling_run(arms=(arm,), **{gain_name: gain}, **common)
        arm_step = float(run.score_step[arm].mean())
        _check_score_step(arm_step, f"the {arm} arm (gain {gain:g})", lr)
        ratio = arm_step / target_step
        trials.append((gain, ratio))
        if abs(math.log(ratio)) <= tol:
            break
        if len(trials) > 1:  # secant on log(ratio) against log(gain)
            (g0, r0), (g1, r1) = trials[-2], trials[-1]
            if g0 != g1 and r0 != r1:
                slope = math.log(r1 / r0) / math.log(g1 / g0)
            slope = min(max(slope, 0.5), 3.0)
        gain = min(max(gain * math.exp(-math.log(ratio) / slope), lo), hi)
        if gain == trials[-1][0]:  # pinned at the edge of the allowed range
            break
    gain, ratio = trials[-1]
    return StepMatch(
        arm=arm,
        target=target,
        gain=gain,
        ratio=ratio,
        matched=abs(math.log(ratio)) <= tol,
        trials=trials,
        target_step=target_step,
        arm_step=ratio * target_step,
        seed=seed,
        head_dim=head_dim,
        score_steps=score_steps,
        rtol=rtol,
        wall_time_s=time.perf_counter() - start,
    )


# --------------------------------------------------------------------------------------------
# Chapter 09: Post-LN vs Pre-LN
# --------------------------------------------------------------------------------------------


@dataclass
class NormPlacementResult:
    """Result of :func:`norm_placement_run`.

    Arms (:data:`NORM_PLACEMENT_ARMS`): ``"post_ln"`` and ``"pre_ln"`` (no warmup) and
    ``"post_ln_warmup"`` and ``"pre_ln_warmup"`` (learning rate raised linearly over the first
    ``warmup_steps`` updates), all at the same peak ``lr``.

    Attributes:
        grad_norm_init: ``{"post_ln", "pre_ln"}`` -> float64 ``(n_layers,)``: the L2 norm of the
            loss gradient with respect to all parameters of layer ``l`` (attention, FFN and
            norms), at initialisation, on the first batch; layer 0 is next to the embedding.
        loss: per arm, float64 ``(steps,)`` training cross-entropy (nats) on the copied tokens.
        grad_norm_first, grad_norm_last: per arm, float64 ``(steps,)``: the gradient norm (as in
            ``grad_norm_init``) of the first and of the last layer at each step, before its
            update (step 0 is ``grad_norm_init``'s first and last entry for the arms without
            warmup).
        update_first: per arm, float64 ``(steps,)``: the size of each update of the first
            layer relative to its weights, ``||theta_after - theta_before|| / ||theta_before||``
            over all of that layer's parameters.
        ln_rms: per arm, float64 ``(steps, n_layers, 2)``: the RMS of the input of each
            block's two LayerNorms (``[:, l, 0]`` ``norm1``, ``[:, l, 1]`` ``norm2``) in the
            forward pass of each step, before its update. The RMS is that of the input centred
            over the features, ``sqrt(mean((h - mean_features(h))**2))`` over the batch, the
            positions and the features: what the norm divides by, so its Jacobian's gain is
            about ``weight / ln_rms``. In Post-LN the input is the residual sum
            ``x + F(x)``; in Pre-LN it is the residual stream ``x``.
        ln_rms_final: per arm, float64 ``(steps,)``: the same for the final norm of the
            Pre-LN arms (its input is the residual stream after the last layer); ``nan`` for
            the Post-LN arms, which have no final norm.
        probe_steps: int64 ``(n_probe,)``: the steps at which ``top_input_share``,
            ``top_token_share``, ``norm_input_share``, ``norm_input_share_final``,
            ``norm_input_ms``, ``branch_common_rms`` and ``branch_input_share`` were measured,
            before that step's update; the last entry is ``steps``, after the last update.
        top_input_share, top_token_share: per arm, float64 ``(n_probe,)``: how much of the
            states the LM head reads depends on the input, measured on the first
            ``probe_size`` sequences of the held-out set without gradients
            (the private ``_top_state_shares``; after training, in the forward pass that gives
            ``eval_loss``). The states are those
            at the ``n`` positions that predict the copy (Post-LN: the last block's output;
            Pre-LN: the final norm's output). ``top_input_share`` is their variance across the
            held-out sequences (per position, summed over the features) over their mean
            square; ``top_token_share`` the part of that variance explained by the token each
            position must output (between-class variance, classes = that token) over the same
            mean square. A share near 0 means the head sees about the same vector whatever
            the input, so its output cannot depend on the input.
        norm_input_share: per arm, float64 ``(n_probe, n_layers, 2)``: for the input of each
            block's two norms (indexed as ``ln_rms``), in the same forward passes as
            ``top_input_share`` and at the same positions, the share of its mean square that
            varies with the input: the input centred over the features (what the norm divides
            by, as in ``ln_rms``), its variance across the held-out sequences (per position,
            summed over the features) over its mean square. If a norm's input grows by a part
            common to all sequences, this share falls.
        norm_input_ms: per arm, float64 ``(n_probe, n_layers, 2)``: the mean square of the
            same centred inputs (over the probed sequences, positions and features), in the
            same forward passes. With ``m`` the mean over the sequences, the centred input
            ``h = (h - m) + m`` splits without a cross term, so the RMS of the part that varies
            across the sequences is ``sqrt(norm_input_share * norm_input_ms)`` and that of the
            part common to them ``sqrt((1 - norm_input_share) * norm_input_ms)``.
        branch_common_rms: per arm, float64 ``(n_probe, n_layers, 2)``: in the same forward
            passes and at the same positions, the RMS of the part common to the probed
            sequences of what each block's two branches add to the residual stream
            (``[:, l, 0]`` the self-attention's output, ``[:, l, 1]`` the FFN's): the output
            centred over the features, its mean over the sequences, the RMS of that over the
            positions and the features (the same measure as the norms' common part).
        branch_input_share: per arm, float64 ``(n_probe, n_layers, 2)``: for the same branch
            outputs (indexed as ``branch_common_rms``), the share of their mean square that
            varies with the input (the same measure as ``norm_input_share``); 0 if a branch
            adds the same vector to every sequence.
        norm_input_share_final: per arm, float64 ``(n_probe,)``: the same for the final norm
            of the Pre-LN arms; ``nan`` for the Post-LN arms.
        eval_loss, eval_accuracy: per arm, on a held-out set after training (``nan`` loss if
            the run diverged).
        chance_loss: ``log(vocab)``.
        n_layers, d_model, n_heads, d_ff, n, vocab, steps, lr, warmup_steps, batch_size, seed:
            the settings.
        n_params: parameters of the Post-LN model (the Pre-LN one has one more final norm);
            0 if no Post-LN arm was trained.
        wall_time_s, cpu_time_s: the whole run (all its trainings).

    Every per-arm dict holds the arms that were trained (``arms``), in the order of
    :data:`NORM_PLACEMENT_ARMS`; ``grad_norm_init`` those of its two keys whose arm without
    warmup was trained.
    """

    grad_norm_init: dict
    loss: dict
    grad_norm_first: dict
    grad_norm_last: dict
    update_first: dict
    ln_rms: dict
    ln_rms_final: dict
    probe_steps: np.ndarray
    top_input_share: dict
    top_token_share: dict
    norm_input_share: dict
    norm_input_share_final: dict
    norm_input_ms: dict
    branch_common_rms: dict
    branch_input_share: dict
    eval_loss: dict
    eval_accuracy: dict
    chance_loss: float
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    n: int
    vocab: int
    steps: int
    lr: float
    warmup_steps: int
    batch_size: int
    seed: int
    n_params: int
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0


def _copy_loss(model, ids, x):
    n = x.shape[1]
    logits = model(ids)  # (B, 2n + 1, vocab + 1)
    pred = logits[:, n : 2 * n]  # (B, n, vocab + 1) positions SEP .. second-to-last
    return F.cross_entropy(pred.reshape(-1, pred.shape[-1]), x.reshape(-1)), pred


def _grad_norm(layer: nn.Module) -> float:
    """L2 norm of the current gradient over all of ``layer``'s parameters (float64 sums)."""
    return math.sqrt(
        sum(float(p.grad.double().pow(2).sum()) for p in layer.parameters() if p.grad is not None)
    )


def _layer_grad_norms(model, ids, x) -> np.ndarray:
    """float64 ``(n_layers,)``: L2 norm of the copy loss's gradient w.r.t. each layer's params."""
    loss, _ = _copy_loss(model, ids, x)
    model.zero_grad(set_to_none=True)
    loss.backward()
    norms = np.array([_grad_norm(layer) for layer in model.layers])
    model.zero_grad(set_to_none=True)
    return norms


def _centred_rms(h: torch.Tensor) -> float:
    """RMS of ``h`` centred over its last axis, over all entries (float64 sums)."""
    h = h.detach().double()
    return float((h - h.mean(-1, keepdim=True)).pow(2).mean().sqrt())


def _norm_modules(model) -> dict:
    """``{(l, 0): layer l's norm1, (l, 1): its norm2, ..., "final": the final norm (if any)}``."""
    modules = {
        (l, k): norm
        for l, layer in enumerate(model.layers)
        for k, norm in enumerate((layer.norm1, layer.norm2))
    }
    if model.norm is not None:
        modules["final"] = model.norm
    return modules


def _record_norm_inputs(model, into: dict) -> list:
    """Forward pre-hooks that put the centred RMS of each norm's input in ``into``.

    ``into[(l, 0)]`` is layer ``l``'s ``norm1``, ``into[(l, 1)]`` its ``norm2``, ``into["final"]``
    the model's final norm if it has one; overwritten at each forward pass. Returns the hook
    handles (call ``.remove()`` on each when done).
    """

    def hook(key):
        def record(module, args):
            into[key] = _centred_rms(args[0])

        return record

    return [norm.register_forward_pre_hook(hook(key)) for key, norm in _norm_modules(model).items()]


@contextlib.contextmanager
def _probing(model, rows: int, n: int):
    """Keep the inputs of the LM head and of every norm during the forward passes inside.

    Yields a dict, filled at each forward pass: ``"head"`` (the LM head), ``(l, k)`` and
    ``"final"`` (the norms, keyed as :func:`_norm_modules`), each float64 ``(rows, n, d)``:
    the first ``rows`` sequences at the positions ``n .. 2n - 1``, which predict the copy.
    ``("branch", l, 0)`` and ``("branch", l, 1)`` hold layer ``l``'s self-attention's and
    FFN's outputs at the same sequences and positions (what the block adds to its residual).
    """
    kept = {}

    def hook(key):
        def record(module, args):
            kept[key] = args[0][:rows, n : 2 * n].detach().double()

        return record

    def out_hook(key):
        def record(module, args, output):
            kept[key] = output[:rows, n : 2 * n].detach().double()

        return record

    modules = {"head": model.lm_head, **_norm_modules(model)}
    handles = [m.register_forward_pre_hook(hook(key)) for key, m in modules.items()]
    for l, layer in enumerate(model.layers):
        for k, branch in enumerate((layer.self_attn, layer.ffn)):
            handles.append(branch.register_forward_hook(out_hook(("branch", l, k))))
    try:
        yield kept
    finally:
        for handle in handles:
            handle.remove()


def _input_share(h: torch.Tensor) -> float:
    """Variance of ``h`` ``(B, n, d)`` across the sequences / mean square.

    0 if every sequence gave the same ``h``.
    """
    varying = h - h.mean(0)  # each sequence's deviation from the mean
    return float(varying.pow(2).sum() / h.pow(2).sum())


def _top_state_shares(h: torch.Tensor, x: torch.Tensor) -> tuple:
    """``(input share, token share)`` of the states ``h`` ``(B, n, d)`` the LM head reads.

    ``h`` are the head's inputs (float64) at the positions that predict the targets ``x``
    ``(B, n)``. With ``m_i`` the mean over the sequences at position ``i`` and ``m_ic`` that
    over the sequences whose target there is ``c``: input share ``= sum |h_bi - m_i|^2 / sum
    |h_bi|^2``; token share ``= sum_ic N_ic |m_ic - m_i|^2 / sum |h_bi|^2`` (``N_ic``
    sequences in class ``c``). See :class:`NormPlacementResult`.
    """
    mean = h.mean(0)  # (n, d)
    total = float(h.pow(2).sum())
    onehot = F.one_hot(x, int(x.max()) + 1).double()  # (B, n, classes)
    count = onehot.sum(0)  # (n, classes)
    class_mean = torch.einsum("bnc,bnd->ncd", onehot, h) / count.clamp(min=1)[..., None]
    between = float((count[..., None] * (class_mean - mean[:, None]).pow(2)).sum())
    return _input_share(h), between / total


def _probe_shares(kept: dict, x: torch.Tensor, n_layers: int) -> tuple:
    """The shares of what :func:`_probing` kept; ``x`` ``(rows, n)``: the probed targets.

    Returns ``(top input share, top token share, norm shares (n_layers, 2), final norm share
    or nan, norm mean squares (n_layers, 2), branch common RMS (n_layers, 2), branch shares
    (n_layers, 2))``; the norms' inputs and the branches' outputs are centred over the
    features first (what a LayerNorm divides by).
    """

    def centred(h):  # (B, n, d): what a LayerNorm divides by
        return h - h.mean(-1, keepdim=True)

    inputs = [[centred(kept[(l, k)]) for k in range(2)] for l in range(n_layers)]
    norms = np.array([[_input_share(h) for h in pair] for pair in inputs])
    ms = np.array([[float(h.pow(2).mean()) for h in pair] for pair in inputs])
    common = np.array(  # RMS of the mean over the sequences
        [
            [float(centred(kept[("branch", l, k)]).mean(0).pow(2).mean().sqrt()) for k in range(2)]
            for l in range(n_layers)
        ]
    )
    branch = np.array(
        [[_input_share(centred(kept[("branch", l, k)])) for k in range(2)] for l in range(n_layers)]
    )
    final = _input_share(centred(kept["final"])) if "final" in kept else math.nan
    return (*_top_state_shares(kept["head"], x), norms, final, ms, common, branch)


def _copy_model(norm_first: bool, *, vocab, d_model, n_heads, n_layers, d_ff, n, name, seed):
    """The run's ``DecoderOnlyModel`` for one placement, built after ``torch.manual_seed``."""
    config = ModelConfig(
        vocab_size=vocab + 1,
        d_model=d_model,
        n_heads=n_heads,
        n_layers=n_layers,
        d_ff=d_ff,
        arch="decoder",
        max_seq_len=2 * n + 1,
        norm="layernorm",
        norm_first=norm_first,
        ffn="relu",
        bias=True,
        positional="learned",
        tie_embeddings=False,
        name=name,
    )
    torch.manual_seed(seed)
    return DecoderOnlyModel(config)


#: The arms of :func:`norm_placement_run`: name -> (``norm_first``, with warmup).
NORM_PLACEMENT_ARMS = {
    "post_ln": (False, False),
    "pre_ln": (True, False),
    "post_ln_warmup": (False, True),
    "pre_ln_warmup": (True, True),
}


def norm_placement_run(
    *,
    n_layers: int = 12,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 256,
    n: int = 8,
    vocab: int = 16,
    steps: int = 120,
    batch_size: int = 16,
    lr: float = 3e-3,
    warmup_steps: int | None = None,
    eval_size: int = 512,
    probe_steps=(0, 10, 20, 29),
    probe_size: int | None = None,
    arms=None,
    seed: int = 0,
    num_threads: int = 1,
    progress: bool = False,
) -> NormPlacementResult:
    """A deep decoder, Post-LN vs Pre-LN, each without and with a learning-rate warmup.

    Model: :class:`attnbook.models.DecoderOnlyModel` (``n_layers`` of
    :class:`attnbook.blocks.TransformerBlock`, LayerNorm, ReLU, learned positions, untied LM
    head), differing only in ``norm_first``; the weights are the same (same seed). Task:
    :func:`copy_batch` — copy ``n`` random tokens after a separator; the loss is the
    cross-entropy on the copied tokens only. The four arms (:data:`NORM_PLACEMENT_ARMS`) train
    with Adam at the same peak ``lr`` on the same batches; the two warmup arms raise the
    learning rate linearly over the first ``warmup_steps`` updates. Each arm starts from the
    seed alone (its weights, its batches), so ``arms`` may train a subset, e.g. a control of
    one arm at another ``lr``, which records for that arm exactly what the full run would.

    The gradient norms at initialisation are what Xiong et al. analyse: their theorem 1 bounds
    the gradient of the last layer's FFN weights by ``O(d sqrt(ln d))`` for Post-LN, independent
    of the depth ``L``, and by ``O(d sqrt(ln d / L))`` for Pre-LN, and ties the large Post-LN
    gradients near the output to the need for warmup (their figure 3 shows the per-layer norms).
    Here the norm is taken over all parameters of each layer. During training the run records,
    per step, the gradient norms of the first and last layers, the relative size of the
    first layer's update (what Adam does with those gradients) and the RMS of every norm's
    input (a norm divides the gradient passing back through it by about that RMS); at a few
    steps (``probe_steps``) and after training, how much of the states the LM head reads
    depends on the input and on the token to be output, how much of each norm's input
    depends on the input and its mean square (which split it into a part that varies across
    the sequences and a part common to them), and the common part of each branch's output
    (held-out set, no gradients). The
    defaults (12 layers, ``lr = 3e-3``, no clipping) are a regime where the placement decides
    the outcome: measured on seeds 0-2, Post-LN without warmup stays just above the chance
    loss and the three other arms learn the copy; Post-LN alone at ``lr = 7.5e-4``
    (``arms=("post_ln",)``, no warmup) learns it too on the same seeds.

    Args:
        n_layers: depth (>= 1; the chapter's claim is about deep stacks, default 12).
        d_model, n_heads, d_ff: widths (``d_model >= 2``: the shares need two features).
        n, vocab: tokens to copy and data vocabulary size.
        steps, batch_size, lr: Adam updates, sequences per update, peak learning rate (the same
            for every arm).
        warmup_steps: linear-warmup length of the warmup arms; default ``steps // 5`` (0 below
            5 steps: the warmup arms then train as the plain ones).
        eval_size: held-out sequences.
        probe_steps: a strictly increasing sequence of integers ``>= 0`` (checked as
            :func:`cross_attention_run`'s ``snapshot_steps``): the steps at which to measure
            the top states' shares (before that step's update); those ``>= steps`` are skipped
            (so the default also suits short runs; ``result.probe_steps`` lists what was
            measured), and the state after training is always measured last. ``None``: no
            probe during training, only the state after it (as ``snapshot_steps=None``
            records no snapshot).
        probe_size: held-out sequences the shares are measured on (the first ones; at
            least 2 and at most ``eval_size``); default ``min(128, eval_size)``. A forward
            pass of them costs about ``probe_size / (3 * batch_size)`` training steps.
        arms: a list or tuple of names of :data:`NORM_PLACEMENT_ARMS` to train; ``None``: all
            four.
        seed: as :func:`scaling_run`.
        num_threads: torch threads during the run.
        progress: show tqdm bars.

    Returns:
        :class:`NormPlacementResult`.

    Raises:
        TypeError: if a size, ``warmup_steps``, a probe step or ``seed`` is not an integer,
            ``probe_steps`` is not ``None`` or a sequence (a set, an int or a 0-d array is
            refused), ``lr`` not a real number, ``arms`` not a list or tuple of strings, or
            ``progress`` not a bool.
        ValueError: if a size is < 1, ``d_model`` < 2 (a LayerNorm over one feature
            outputs its bias alone: the shares would be 0 / 0), ``probe_size`` < 2 or >
            ``eval_size`` (without a ``probe_size``: ``eval_size`` < 2), ``arms`` is
            empty, names an unknown arm or one twice (:func:`attnbook.checks.check_names`),
            ``lr`` is not positive, ``probe_steps`` is empty or not strictly increasing,
            ``warmup_steps``, a probe step or ``seed`` is negative, or
            ``warmup_steps >= steps`` (the warmup arms would never reach the peak rate).

    Source: Xiong et al., "On Layer Normalization in the Transformer Architecture" (ICML 2020),
    figures 1-3 and section 3 (Post-LN needs warmup, Pre-LN does not); Vaswani et al. (2017),
    section 5.3 (warmup).
    """
    for name, v in dict(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        n=n,
        vocab=vocab,
        steps=steps,
        batch_size=batch_size,
        eval_size=eval_size,
    ).items():
        checks.check_int(v, name, 1)
    if d_model < 2:  # one feature: every norm's input centred over the features is 0
        raise ValueError(
            f"d_model must be >= 2, got {d_model}: a LayerNorm over one feature outputs its "
            "bias whatever the input (the input centred over the features is 0), so the "
            "probed shares would be 0 / 0"
        )
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    seed = checks.check_seed(seed)
    progress = checks.check_bool(progress, "progress")
    if warmup_steps is None:
        warmup_steps = steps // 5
    warmup_steps = checks.check_warmup_steps(warmup_steps, steps)
    if probe_size is None:
        if eval_size < 2:  # the default probe is the held-out batch, or its first 128
            raise ValueError(
                f"eval_size must be >= 2 for the probe of the states' spread, got {eval_size}"
            )
        probe_size = min(128, eval_size)
    probe_size = checks.check_int(probe_size, "probe_size", 1)
    if probe_size < 2:  # one sequence has no spread: its shares are 0.0 by construction
        raise ValueError(
            f"probe_size must be >= 2 (the shares measure the spread across sequences; one "
            f"sequence gives 0.0 by construction), got {probe_size}"
        )
    checks.check_int(
        probe_size,
        f"probe_size (the first of the eval_size={eval_size} held-out sequences)",
        2,
        maximum=eval_size,
    )
    if arms is None:
        arms = tuple(NORM_PLACEMENT_ARMS)
    arms = checks.check_names(arms, "arms", list(NORM_PLACEMENT_ARMS))
    if probe_steps is not None:  # None: no probe during training, as snapshot_steps=None
        probe_steps = checks.check_increasing(probe_steps, "probe_steps", minimum=0)
    probe_steps = [s for s in probe_steps or () if s < steps] + [steps]
    eval_ids, eval_x = copy_batch(
        eval_size, n, vocab, torch.Generator().manual_seed((seed + 1) % 2**64)
    )
    sizes = dict(
        vocab=vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff, n=n, seed=seed
    )
    out = {
        name: {}
        for name in (
            "grad_norm_init",
            "loss",
            "grad_norm_first",
            "grad_norm_last",
            "update_first",
            "ln_rms",
            "ln_rms_final",
            "top_input_share",
            "top_token_share",
            "norm_input_share",
            "norm_input_share_final",
            "norm_input_ms",
            "branch_common_rms",
            "branch_input_share",
            "eval_loss",
            "eval_accuracy",
        )
    }
    n_params = 0
    with _run_context(num_threads) as clock:
        for arm, (norm_first, warm) in NORM_PLACEMENT_ARMS.items():
            if arm not in arms:
                continue
            model = _copy_model(norm_first, name=arm, **sizes)
            if not norm_first:
                n_params = count_parameters(model)
            gen = torch.Generator().manual_seed(seed)
            if not warm:
                ids, x = copy_batch(batch_size, n, vocab, torch.Generator().manual_seed(seed))
                out["grad_norm_init"][arm] = _layer_grad_norms(model, ids, x)

            def batch_loss(step, model=model, gen=gen):
                ids, x = copy_batch(batch_size, n, vocab, gen)
                return _copy_loss(model, ids, x)[0]

            first, last = model.layers[0], model.layers[-1]
            g_first, g_last, upd = (np.empty(steps, dtype=np.float64) for _ in range(3))
            held = {}  # the first layer's weights before this step's update
            rms = np.empty((steps, n_layers, 2), dtype=np.float64)
            rms_final = np.full(steps, np.nan)
            seen = {}  # the norms' input RMS of the latest forward pass
            handles = _record_norm_inputs(model, seen)
            shares = np.empty((len(probe_steps), 2), dtype=np.float64)  # top: input, token
            norm_shares = np.empty((len(probe_steps), n_layers, 2), dtype=np.float64)
            final_shares = np.empty(len(probe_steps), dtype=np.float64)
            norm_ms = np.empty((len(probe_steps), n_layers, 2), dtype=np.float64)
            branch_common = np.empty((len(probe_steps), n_layers, 2), dtype=np.float64)
            branch_shares = np.empty((len(probe_steps), n_layers, 2), dtype=np.float64)

            def probe(
                i,
                kept,
                shares=shares,
                norm_shares=norm_shares,
                final_shares=final_shares,
                norm_ms=norm_ms,
                branch_common=branch_common,
                branch_shares=branch_shares,
            ):
                (
                    *shares[i],
                    norm_shares[i],
                    final_shares[i],
                    norm_ms[i],
                    branch_common[i],
                    branch_shares[i],
                ) = _probe_shares(kept, eval_x[:probe_size], n_layers)

            def after_backward(
                step,
                first=first,
                last=last,
                g_first=g_first,
                g_last=g_last,
                held=held,
                rms=rms,
                rms_final=rms_final,
                seen=seen,
                model=model,
                probe=probe,
            ):
                g_first[step], g_last[step] = _grad_norm(first), _grad_norm(last)
                rms_final[step] = seen.pop("final", np.nan)
                for (layer, k), value in seen.items():
                    rms[step, layer, k] = value
                if step in probe_steps:  # after reading `seen`: this forward overwrites it
                    with _probing(model, probe_size, n) as kept, torch.no_grad():
                        model(eval_ids[:probe_size])
                    probe(probe_steps.index(step), kept)
                held["before"] = torch.cat(
                    [p.detach().flatten().double() for p in first.parameters()]
                )

            def after_step(step, first=first, upd=upd, held=held):
                before = held.pop("before")
                after = torch.cat([p.detach().flatten().double() for p in first.parameters()])
                upd[step] = float((after - before).norm() / before.norm())

            out["loss"][arm] = _train(
                model,
                batch_loss,
                steps=steps,
                lr=lr,
                warmup_steps=warmup_steps if warm else 0,
                progress=progress,
                desc=f"layer norm: {arm}",
                after_backward=after_backward,
                after_step=after_step,
            )
            for handle in handles:
                handle.remove()
            out["ln_rms"][arm], out["ln_rms_final"][arm] = rms, rms_final
            out["grad_norm_first"][arm], out["grad_norm_last"][arm] = g_first, g_last
            out["update_first"][arm] = upd
            # After training: the probe's sequences, from the evaluation's forward pass.
            with _probing(model, probe_size, n) as kept, torch.no_grad():
                loss, pred = _copy_loss(model, eval_ids, eval_x)
                out["eval_loss"][arm] = float(loss)
                out["eval_accuracy"][arm] = _accuracy(pred, eval_x)
            probe(-1, kept)
            out["top_input_share"][arm], out["top_token_share"][arm] = shares.T.copy()
            out["norm_input_share"][arm] = norm_shares
            out["norm_input_share_final"][arm] = final_shares
            out["norm_input_ms"][arm] = norm_ms
            out["branch_common_rms"][arm] = branch_common
            out["branch_input_share"][arm] = branch_shares
    return NormPlacementResult(
        probe_steps=np.array(probe_steps, dtype=np.int64),
        chance_loss=math.log(vocab),
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        n=n,
        vocab=vocab,
        steps=steps,
        lr=lr,
        warmup_steps=warmup_steps,
        batch_size=batch_size,
        seed=seed,
        n_params=n_params,
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
        **out,
    )


#: Depths (numbers of layers) :func:`gradient_norms_at_init` measures by default (chapter 9's
#: explorer offers them as slider stops).
NORM_PLACEMENT_DEPTHS = (2, 4, 6, 8, 12, 16, 24, 32, 48)


def gradient_norms_at_init(
    depth_values=NORM_PLACEMENT_DEPTHS,
    *,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 256,
    n: int = 8,
    vocab: int = 16,
    batch_size: int = 16,
    seed: int = 0,
) -> dict:
    """Per-layer gradient norms at initialisation of Post-LN and Pre-LN stacks of several depths.

    For each depth ``L`` this builds :func:`norm_placement_run`'s two models with
    ``n_layers=L`` from the same seed and measures what its ``grad_norm_init`` holds, without
    training: for layer ``l`` (0 = next to the embedding), the L2 norm of the gradient of the
    copy-task loss on the first batch with respect to all of the layer's parameters
    (attention, feed-forward network and norms). The defaults are the run's own, so the
    12-layer entry equals the chapter's training run at initialisation. Chapter 9's explorer
    (:func:`attnbook.explorers.block.norm_placement_explorer`) draws these numbers.

    Args:
        depth_values: strictly increasing depths, integers in [1, 96].
        d_model: model width of every layer.
        n_heads: attention heads of every layer.
        d_ff: hidden width of every feed-forward network.
        n: tokens to copy in the copy task.
        vocab: data vocabulary of the copy task.
        batch_size: sequences in the batch the gradient is taken on.
        seed: weights ``torch.manual_seed(seed)`` and the batch's generator (as the run).

    Returns:
        ``{L: {"post_ln": float64 (L,), "pre_ln": float64 (L,)}}`` for every ``L`` in
        ``depth_values``; the norms are dimensionless (gradient of a loss in nats).

    Raises:
        TypeError: if ``depth_values`` is not a sequence of integers.
        ValueError: if ``depth_values`` is empty, not strictly increasing or outside [1, 96],
            a size is < 1 or ``seed`` is negative.

    Source: Xiong et al., "On Layer Normalization in the Transformer Architecture" (ICML 2020),
    theorem 1 and figure 3.
    """
    depths = checks.check_increasing(depth_values, "depth_values", minimum=1, maximum=96)
    for name, v in dict(
        d_model=d_model, n_heads=n_heads, d_ff=d_ff, n=n, vocab=vocab, batch_size=batch_size
    ).items():
        checks.check_int(v, name, 1)
    seed = checks.check_seed(seed)
    ids, x = copy_batch(batch_size, n, vocab, torch.Generator().manual_seed(seed))
    out = {}
    with _run_context(1):
        for L in depths:
            out[L] = {
                arm: _layer_grad_norms(
                    _copy_model(
                        norm_first,
                        vocab=vocab,
                        d_model=d_model,
                        n_heads=n_heads,
                        n_layers=L,
                        d_ff=d_ff,
                        n=n,
                        name=arm,
                        seed=seed,
                    ),
                    ids,
                    x,
                )
                for arm, norm_first in (("post_ln", False), ("pre_ln", True))
            }
    return out


# --------------------------------------------------------------------------------------------
# Chapter 01: RNN vs LSTM vs attention on long-range recall
# --------------------------------------------------------------------------------------------


class _RecurrentClassifier(nn.Module):
    """Token embedding, a recurrent layer, a linear readout of the last hidden state.

    The layer is :class:`attnbook.rnn.VanillaRNN` or :class:`attnbook.rnn.LSTM`; the readout
    has no bias, like the attention model's LM head.
    """

    def __init__(self, cell: str, vocab_size: int, d_model: int, hidden_size: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.rnn = VanillaRNN(d_model, hidden_size) if cell == "rnn" else LSTM(d_model, hidden_size)
        self.head = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(self, ids):
        _, state = self.rnn(self.embed(ids))  # ids (B, T) -> embeddings (B, T, d_model)
        return self.head(self.rnn.hidden(state))  # (B, vocab)


def _recurrent_params(cell: str, vocab_size: int, d_model: int, H: int) -> int:
    gates = 1 if cell == "rnn" else 4
    return vocab_size * d_model + gates * (H * d_model + H * H + 2 * H) + H * vocab_size


def _matching_hidden_size(cell: str, vocab_size: int, d_model: int, target: int) -> int:
    """The hidden size whose recurrent model has the parameter count nearest ``target``."""
    sizes = np.arange(1, 4097)
    counts = np.array([_recurrent_params(cell, vocab_size, d_model, int(h)) for h in sizes])
    return int(sizes[np.argmin(np.abs(counts - target))])


@dataclass
class LongRangeRecallResult:
    """Result of :func:`long_range_recall_run`; models ``"rnn"``, ``"lstm"``, ``"attention"``.

    Attributes:
        ks: int64 ``(max_k,)`` distances ``1 .. max_k``.
        seq_len: the length of every sequence (``max_k + 1`` unless the run was given one).
        accuracy: per model, float64 ``(max_k,)`` held-out accuracy at each distance after
            the last update.
        eval_steps: per model, int64 ``(n_evals,)``: the numbers of updates after which the
            held-out accuracy was measured (0, ``eval_every``, ``2 * eval_every``, ...).
        accuracy_history: per model, float64 ``(n_evals, max_k)`` held-out accuracy at each
            measurement and distance.
        steps_to_solve: per model, float64 ``(max_k,)``: the first measured number of updates
            after which the accuracy at that distance was at least ``solve_accuracy``
            (``nan`` if never within the budget).
        solved_step: per model, the number of updates after which the accuracy was at least
            ``solve_accuracy`` at every distance at once (training stopped there), or ``None``
            if that did not happen within ``steps``.
        signal_gradient: per model, float64 ``(max_k,)``: at initialisation (before the first
            update), the mean over the held-out sequences at each distance of the norm of the
            gradient of the sequence's cross-entropy with respect to the embedding of its
            signal token — how much training signal reaches the token that holds the answer.
        loss: per model, float64 ``(steps_run,)`` training cross-entropy (nats).
        loss_change: per model, the convergence check: relative change of the mean training
            loss from the previous ``window`` updates to the last ``window`` updates,
            ``mean(last) / mean(previous) - 1`` (``nan`` if fewer than ``2 * window`` updates).
        eval_loss: per model, held-out cross-entropy over all distances after the last update.
        n_params: per model, parameter count (embedding and readout included).
        hidden_size: per trained recurrent model (``"rnn"``, ``"lstm"`` among ``models``),
            the hidden size chosen to match the attention model's parameter count (which
            depends on ``seq_len``).
        chance_loss, chance_accuracy: ``log(n_signal)`` and ``1/n_signal``.
        time_s: per model, wall-clock seconds of its training (evaluations included).
        max_k, n_signal, n_noise, d_model, steps, batch_size, lr, clip_norm, eval_every,
            eval_per_k, solve_accuracy, window, seed: settings (``steps`` is the budget).
        wall_time_s, cpu_time_s: the whole run.
    """

    ks: np.ndarray
    seq_len: int
    accuracy: dict
    eval_steps: dict
    accuracy_history: dict
    steps_to_solve: dict
    solved_step: dict
    signal_gradient: dict
    loss: dict
    loss_change: dict
    eval_loss: dict
    n_params: dict
    hidden_size: dict
    chance_loss: float
    chance_accuracy: float
    time_s: dict
    max_k: int
    n_signal: int
    n_noise: int
    d_model: int
    steps: int
    batch_size: int
    lr: float
    clip_norm: float | None
    eval_every: int
    eval_per_k: int
    solve_accuracy: float
    window: int
    seed: int
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0


def relative_loss_change(curve, window: int) -> float:
    """Convergence check: ``mean(curve[-window:]) / mean(curve[-2 window:-window]) - 1``.

    A value near 0 means the loss no longer moves (a plateau); ``-0.3`` means the last
    ``window`` steps averaged 30 % less than the ``window`` before them (still learning).

    Args:
        curve: 1-D sequence of per-step losses, float.
        window: number of steps in each of the two windows compared (>= 1).

    Returns:
        The relative change as a Python float; ``nan`` if ``curve`` has fewer than
        ``2 * window`` values; ``0.0`` if both windows average exactly 0.

    Raises:
        TypeError: if ``curve`` is not numeric or ``window`` not an integer.
        ValueError: if ``curve`` is not 1-D, holds nan or inf, or the earlier window
            averages 0 while the later one does not (no relative change), or ``window < 1``.
    """
    c = checks.as_float_array(curve, "curve").astype(np.float64)
    if c.ndim != 1:
        raise ValueError(f"curve must be 1-D, got shape {c.shape}")
    checks.check_finite(c, "curve")
    window = checks.check_int(window, "window", 1)
    if c.size < 2 * window:
        return math.nan
    last, before = c[-window:].mean(), c[-2 * window : -window].mean()
    if before == 0:
        if last == 0:
            return 0.0
        raise ValueError(
            f"curve's earlier window (values {c.size - 2 * window}.."
            f"{c.size - window - 1}) averages 0 and its last {window} average "
            f"{last:.3g}: the relative change is undefined"
        )
    return float(last / before - 1.0)


def _token_embedding(model: nn.Module) -> nn.Embedding:
    """The token embedding of a recall model (recurrent classifier or decoder-only model)."""
    return model.embed if isinstance(model.embed, nn.Embedding) else model.embed.tokens


def _signal_gradient(model: nn.Module, read, ids, target, k, max_k: int) -> np.ndarray:
    """Mean norm of d(loss_b)/d(embedding of the signal token of b) per distance 1 .. max_k.

    ids (N, T); target and k (N,). The losses are summed, so each sequence's gradient
    is that of its own loss.
    """
    store = {}

    def keep(module, inputs, output):
        output.retain_grad()
        store["e"] = output  # (N, T, d_model)

    handle = _token_embedding(model).register_forward_hook(keep)
    try:
        with torch.enable_grad():
            model.zero_grad(set_to_none=True)
            F.cross_entropy(read(model, ids), target, reduction="sum").backward()
    finally:
        handle.remove()
    model.zero_grad(set_to_none=True)
    rows = torch.arange(len(ids))
    g = store["e"].grad[rows, ids.shape[1] - 1 - k].norm(dim=-1)  # (N,) at the signal
    sums = torch.zeros(max_k, dtype=torch.float64).index_add_(0, k - 1, g.double())
    counts = torch.bincount(k - 1, minlength=max_k).double()
    return (sums / counts).numpy()  # (max_k,)


def long_range_recall_run(
    *,
    max_k: int = 16,
    n_signal: int = 8,
    n_noise: int = 8,
    d_model: int = 32,
    n_heads: int = 2,
    d_ff: int = 64,
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 3e-3,
    clip_norm: float | None = 1.0,
    eval_every: int = 25,
    eval_per_k: int = 64,
    solve_accuracy: float = 0.95,
    window: int = 50,
    seed: int = 0,
    num_threads: int = 1,
    progress: bool = False,
    models=("rnn", "lstm", "attention"),
    seq_len: int | None = None,
) -> LongRangeRecallResult:
    """A vanilla RNN, an LSTM and one attention layer learn to recall the token ``k`` back.

    Task (:func:`delayed_recall_batch`): a signal token, then ``k - 1`` noise tokens, then a
    query; the answer is the signal token. ``k`` is uniform over ``1 .. max_k`` during training.
    Every ``eval_every`` updates the held-out accuracy is measured separately at every ``k`` on
    ``eval_per_k`` fixed sequences; a model stops training at the first measurement at which it
    is at least ``solve_accuracy`` at every distance (the task is solved), or after ``steps``
    updates (the budget). For a model that used the whole budget, ``loss_change`` says whether
    its loss was still moving (:func:`relative_loss_change`).

    Models, each trained on the same batches in the same order with the same Adam ``lr`` and
    the same gradient clipping:

    * ``"attention"``: :class:`attnbook.models.DecoderOnlyModel` with one Pre-LN layer
      (``n_heads`` heads, ReLU FFN of width ``d_ff``, learned positions), read at the query;
    * ``"rnn"``: embedding -> :class:`attnbook.rnn.VanillaRNN` (tanh) -> readout of ``h_T``;
    * ``"lstm"``: embedding -> :class:`attnbook.rnn.LSTM` -> readout of ``h_T``.

    The recurrent models' hidden sizes are chosen so that their parameter counts (embedding of
    width ``d_model`` and readout included) are as close as possible to the attention model's.

    Args:
        max_k: largest distance (sequence length ``max_k + 1`` unless ``seq_len``).
        n_signal, n_noise: vocabulary sizes of the answer and the filler.
        d_model: embedding width (all models) and attention width.
        n_heads, d_ff: the attention layer's heads and feed-forward width.
        steps: the budget: at most this many Adam updates per model.
        batch_size, lr: sequences per update, learning rate.
        clip_norm: ``torch.nn.utils.clip_grad_norm_`` threshold applied before every update,
            or ``None`` for no clipping.
        eval_every: updates between two held-out measurements.
        eval_per_k: held-out sequences per distance.
        solve_accuracy: accuracy in (0, 1) that counts as solved at a distance.
        window: steps per window of the convergence check.
        seed: as :func:`scaling_run`.
        num_threads: torch threads during the run.
        progress: show tqdm bars.
        models: the models to train, a non-empty list or tuple of distinct names from
            ``("rnn", "lstm", "attention")`` (:func:`attnbook.checks.check_names`), in any
            order (trained in that canonical order); the result's per-model dicts hold these
            only. A model's run does not depend on which others are trained (same seed,
            same batches; the recurrent hidden sizes are matched to the attention model, which
            is built either way).
        seq_len: the length of every sequence, training and held-out (at least
            ``max_k + 1``, the default): a longer one separates the length of the sequences
            from the largest distance. It also changes the recurrent hidden sizes: the
            attention model's learned positions grow with it, and the sizes are matched to
            that model's parameter count.

    Returns:
        :class:`LongRangeRecallResult`.

    Raises:
        TypeError: if a size or ``seed`` is not an integer, ``lr``, ``clip_norm`` or
            ``solve_accuracy`` not a real number, ``progress`` not a bool, or ``models`` not a
            list or tuple of strings.
        ValueError: if a size is < 1, ``lr`` or ``clip_norm`` is not positive,
            ``solve_accuracy`` is outside (0, 1), ``seed`` is negative or ``models`` is empty,
            names an unknown model or one twice.

    Source: the task is the "remember a symbol over a gap" setting of Hochreiter & Schmidhuber
    (1997), section 5; the gradient argument Bengio et al. (1994) and Pascanu et al. (2013),
    whose clipping rule (section 3.2) every model gets.
    """
    for name, v in dict(
        max_k=max_k,
        n_signal=n_signal,
        n_noise=n_noise,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        eval_every=eval_every,
        eval_per_k=eval_per_k,
        window=window,
    ).items():
        checks.check_int(v, name, 1)
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    if clip_norm is not None:
        clip_norm = checks.check_real(clip_norm, "clip_norm", minimum=0, strict=True)
    solve_accuracy = checks.check_real(
        solve_accuracy, "solve_accuracy", minimum=0, maximum=1, strict=True
    )
    seed = checks.check_seed(seed)
    progress = checks.check_bool(progress, "progress")
    known = ("rnn", "lstm", "attention")  # the canonical order of training
    chosen = tuple(checks.check_names(models, "models", known))
    vocab_size = n_signal + n_noise + 1
    T = max_k + 1 if seq_len is None else checks.check_int(seq_len, "seq_len", max_k + 1)
    ks = np.arange(1, max_k + 1)
    k_eval = torch.arange(1, max_k + 1).repeat_interleave(eval_per_k)  # (max_k * eval_per_k,)
    eval_ids, eval_target, _ = delayed_recall_batch(
        len(k_eval),
        max_k,
        n_signal,
        n_noise,
        torch.Generator().manual_seed((seed + 1) % 2**64),
        k=k_eval,
        seq_len=T,
    )
    out = {
        name: {}
        for name in (
            "accuracy",
            "eval_steps",
            "accuracy_history",
            "steps_to_solve",
            "solved_step",
            "signal_gradient",
            "loss",
            "loss_change",
            "eval_loss",
            "n_params",
            "hidden_size",
            "time_s",
        )
    }
    with _run_context(num_threads) as clock:
        config = ModelConfig(
            vocab_size=vocab_size,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=1,
            d_ff=d_ff,
            arch="decoder",
            max_seq_len=T,
            norm="layernorm",
            norm_first=True,
            ffn="relu",
            bias=True,
            positional="learned",
            tie_embeddings=False,
        )
        torch.manual_seed(seed)
        attention = DecoderOnlyModel(config)
        target_params = count_parameters(attention)
        builders = {"attention": lambda: attention}
        for cell in ("rnn", "lstm"):
            H = _matching_hidden_size(cell, vocab_size, d_model, target_params)
            if cell in chosen:  # the result describes the trained models only
                out["hidden_size"][cell] = H
            builders[cell] = lambda cell=cell, H=H: _RecurrentClassifier(
                cell, vocab_size, d_model, H
            )
        for name in (m for m in known if m in chosen):
            torch.manual_seed(seed)
            model = builders[name]()
            out["n_params"][name] = count_parameters(model)
            read = (
                (lambda m, ids: m(ids)[:, -1]) if name == "attention" else (lambda m, ids: m(ids))
            )

            def evaluate(model=model, read=read):
                model.eval()
                with torch.no_grad():
                    logits = read(model, eval_ids)  # (N, vocab)
                    hit = (logits.argmax(-1) == eval_target).double().view(max_k, eval_per_k)
                    loss = float(F.cross_entropy(logits, eval_target))
                model.train()
                return hit.mean(dim=1).numpy(), loss  # (max_k,), nats

            model.train()
            out["signal_gradient"][name] = _signal_gradient(
                model, read, eval_ids, eval_target, k_eval, max_k
            )
            gen = torch.Generator().manual_seed(seed)
            opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
            losses, history, at = [], [], []
            t0 = time.perf_counter()
            model.train()
            bar = _steps(steps, progress, f"recall: {name}")
            solved = None
            for step in range(steps + 1):
                if step % eval_every == 0 or step == steps:
                    acc, _ = evaluate()
                    history.append(acc)
                    at.append(step)
                    if (acc >= solve_accuracy).all():
                        solved = step
                        break
                if step == steps:
                    break
                ids, target, _ = delayed_recall_batch(
                    batch_size, max_k, n_signal, n_noise, gen, seq_len=T
                )
                loss = F.cross_entropy(read(model, ids), target)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if clip_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                opt.step()
                losses.append(float(loss.detach()))
                if progress:
                    bar.update(1)
            if progress:
                bar.close()
            model.eval()
            out["time_s"][name] = time.perf_counter() - t0
            hist = np.array(history)  # (n_evals, max_k)
            at = np.array(at, dtype=np.int64)  # (n_evals,)
            reached = hist >= solve_accuracy  # (n_evals, max_k)
            first = np.where(reached.any(0), at[np.argmax(reached, axis=0)], np.nan)
            out["accuracy"][name], out["eval_loss"][name] = evaluate()
            out["eval_steps"][name], out["accuracy_history"][name] = at, hist
            out["steps_to_solve"][name] = first.astype(np.float64)  # (max_k,)
            out["solved_step"][name] = solved
            out["loss"][name] = np.array(losses, dtype=np.float64)
            out["loss_change"][name] = relative_loss_change(out["loss"][name], window)
    return LongRangeRecallResult(
        ks=ks,
        seq_len=T,
        chance_loss=math.log(n_signal),
        chance_accuracy=1.0 / n_signal,
        max_k=max_k,
        n_signal=n_signal,
        n_noise=n_noise,
        d_model=d_model,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        clip_norm=clip_norm,
        eval_every=eval_every,
        eval_per_k=eval_per_k,
        solve_accuracy=solve_accuracy,
        window=window,
        seed=seed,
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
        **out,
    )


# --------------------------------------------------------------------------------------------
# Chapter 01: what a state of fixed size can carry
# --------------------------------------------------------------------------------------------


class _RecurrentTagger(nn.Module):
    """Token embedding, :class:`attnbook.rnn.LSTM`, a linear readout of every ``h_t``."""

    def __init__(self, vocab_size: int, d_model: int, hidden_size: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.rnn = LSTM(d_model, hidden_size)
        self.head = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(self, ids):
        outputs, _ = self.rnn(self.embed(ids))  # ids (B, T) -> (B, T, hidden_size)
        return self.head(outputs)  # (B, T, vocab)


@dataclass
class CopyCapacityResult:
    """Result of :func:`copy_capacity_run`.

    Attributes:
        n_items: int64 ``(N,)`` numbers of tokens to copy ``n``.
        hidden_sizes: int64 ``(M,)`` LSTM hidden sizes ``d_h``.
        lstm_accuracy: float64 ``(M, N)`` held-out accuracy per copied token of the LSTM with
            hidden size ``hidden_sizes[i]`` on ``n_items[j]`` tokens, after ``steps`` updates.
        attention_accuracy: float64 ``(N,)`` the same for the attention model.
        lstm_params: int64 ``(M,)`` parameter counts of the LSTM models (embedding and readout
            included; independent of ``n``).
        attention_params: int64 ``(N,)`` parameter counts of the attention models (their
            learned positions grow with the sequence length ``2n + 1``).
        lstm_state_floats: int64 ``(M,)`` numbers the LSTM carries from step to step,
            ``2 d_h`` (``h`` and ``c``), whatever ``n``.
        attention_read_floats: int64 ``(N,)`` numbers the attention layer can read when it
            predicts the last copied token: the key and the value of each of the ``2n``
            positions, ``2 * 2n * d_model`` (its KV cache).
        chance_accuracy: ``1 / vocab``.
        time_s: float64 ``(M + 1, N)`` wall-clock seconds of each training (the last row is
            attention).
        vocab, d_model, n_heads, d_ff, steps, batch_size, lr, clip_norm, eval_size, seed:
            settings.
        wall_time_s, cpu_time_s: the whole run.
    """

    n_items: np.ndarray
    hidden_sizes: np.ndarray
    lstm_accuracy: np.ndarray
    attention_accuracy: np.ndarray
    lstm_params: np.ndarray
    attention_params: np.ndarray
    lstm_state_floats: np.ndarray
    attention_read_floats: np.ndarray
    chance_accuracy: float
    time_s: np.ndarray
    vocab: int
    d_model: int
    n_heads: int
    d_ff: int
    steps: int
    batch_size: int
    lr: float
    clip_norm: float | None
    eval_size: int
    seed: int
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0


def _int_tuple(values, name: str) -> tuple:
    """A non-empty, strictly increasing tuple of integers >= 1."""
    try:
        out = tuple(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {values!r}") from None
    if not out:
        raise ValueError(f"{name} must not be empty")
    out = tuple(checks.check_int(v, f"{name} entry", 1) for v in out)
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"{name} must be strictly increasing, got {out}")
    return out


def copy_capacity_run(
    *,
    n_items=(4, 16),
    hidden_sizes=(16, 64),
    vocab: int = 4,
    d_model: int = 32,
    n_heads: int = 1,
    d_ff: int = 64,
    steps: int = 400,
    batch_size: int = 32,
    lr: float = 1e-2,
    clip_norm: float | None = 1.0,
    eval_size: int = 256,
    seed: int = 0,
    num_threads: int = 1,
    progress: bool = False,
) -> CopyCapacityResult:
    """LSTMs of several hidden sizes and one attention layer learn to copy ``n`` tokens.

    Task (:func:`copy_batch`): ``x_1 .. x_n SEP x_1 .. x_n`` with ``x_i`` uniform over
    ``vocab`` tokens; at positions ``n .. 2n - 1`` (the SEP and the copy so far) the model
    predicts the next token of the copy. Teacher forcing gives nothing away: ``x_{i+1}`` was
    seen only in the first half, ``n - i`` positions or more back. A recurrent model must
    therefore hold all ``n`` tokens (``n log2 vocab`` bits) in its state when it reaches SEP; an
    attention layer reads them back from the positions that hold them.

    For every ``n`` in ``n_items``, each model starts from ``torch.manual_seed(seed)`` and is
    trained on the same batches (``Generator(seed)``) with Adam and the same gradient clipping
    for ``steps`` updates; accuracy per copied token is then measured on ``eval_size`` held-out
    sequences (``Generator(seed + 1)``). Models:

    * for each ``d_h`` in ``hidden_sizes``: embedding (``d_model``) ->
      :class:`attnbook.rnn.LSTM` ``(d_model, d_h)`` -> linear readout of every ``h_t``;
    * :class:`attnbook.models.DecoderOnlyModel` with one causal Pre-LN layer (``n_heads``
      heads of width ``d_model``, ReLU FFN of width ``d_ff``, learned positions up to
      ``2n + 1``).

    Args:
        n_items: strictly increasing numbers of tokens to copy, each >= 1.
        hidden_sizes: strictly increasing LSTM hidden sizes, each >= 1.
        vocab: tokens to copy from (>= 2); SEP is token ``vocab``.
        d_model: embedding width (all models) and attention width.
        n_heads, d_ff: the attention layer's heads (dividing ``d_model``) and FFN width.
        steps, batch_size, lr: Adam updates per model, sequences per update, learning rate.
        clip_norm: ``clip_grad_norm_`` threshold before every update, or ``None``.
        eval_size: held-out sequences per ``n``.
        seed: as :func:`scaling_run`.
        num_threads: torch threads during the run.
        progress: show tqdm bars.

    Returns:
        :class:`CopyCapacityResult`.

    Raises:
        TypeError: if a size or ``seed`` is not an integer, ``lr`` or ``clip_norm`` not a real
            number, ``progress`` not a bool, or ``n_items``/``hidden_sizes`` not a sequence.
        ValueError: if a size is < 1 (``vocab`` < 2), a sequence is empty or not increasing,
            ``n_heads`` does not divide ``d_model``, ``lr`` or ``clip_norm`` is not positive or
            ``seed`` is negative.

    Source: the copy task of Graves et al. (2014) in the form of Jelassi et al. (2024), whose
    theorem says that a model with a state of fixed size cannot copy strings longer than that
    state can encode; compare the associative-recall sweeps of Arora et al. (2024).
    """
    ns = _int_tuple(n_items, "n_items")
    hs = _int_tuple(hidden_sizes, "hidden_sizes")
    for name, v in dict(
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        eval_size=eval_size,
    ).items():
        checks.check_int(v, name, 1)
    vocab = checks.check_int(vocab, "vocab", 2)
    if d_model % n_heads:
        raise ValueError(f"n_heads {n_heads} must divide d_model {d_model}")
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    if clip_norm is not None:
        clip_norm = checks.check_real(clip_norm, "clip_norm", minimum=0, strict=True)
    seed = checks.check_seed(seed)
    progress = checks.check_bool(progress, "progress")
    acc = np.empty((len(hs) + 1, len(ns)), dtype=np.float64)
    secs = np.empty_like(acc)
    params = np.empty((len(hs) + 1, len(ns)), dtype=np.int64)
    with _run_context(num_threads) as clock:
        for j, n in enumerate(ns):
            eval_ids, eval_target = copy_batch(
                eval_size, n, vocab, torch.Generator().manual_seed((seed + 1) % 2**64)
            )
            config = ModelConfig(
                vocab_size=vocab + 1,
                d_model=d_model,
                n_heads=n_heads,
                n_layers=1,
                d_ff=d_ff,
                arch="decoder",
                max_seq_len=2 * n + 1,
                norm="layernorm",
                norm_first=True,
                ffn="relu",
                bias=True,
                positional="learned",
                tie_embeddings=False,
            )
            builders = [lambda h=h: _RecurrentTagger(vocab + 1, d_model, h) for h in hs]
            builders.append(lambda config=config: DecoderOnlyModel(config))
            for i, build in enumerate(builders):
                torch.manual_seed(seed)
                model = build()
                params[i, j] = count_parameters(model)
                gen = torch.Generator().manual_seed(seed)
                opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
                t0 = time.perf_counter()
                model.train()
                for _ in _steps(steps, progress, f"copy {n}: model {i + 1}/{len(builders)}"):
                    ids, target = copy_batch(batch_size, n, vocab, gen)  # (B, 2n+1), (B, n)
                    logits = model(ids)[:, n : 2 * n]  # (B, n, vocab + 1)
                    loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    if clip_norm is not None:
                        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                    opt.step()
                model.eval()
                with torch.no_grad():
                    logits = model(eval_ids)[:, n : 2 * n]  # (eval_size, n, vocab + 1)
                    acc[i, j] = _accuracy(logits, eval_target)
                secs[i, j] = time.perf_counter() - t0
    n_arr, h_arr = np.asarray(ns, dtype=np.int64), np.asarray(hs, dtype=np.int64)
    return CopyCapacityResult(
        n_items=n_arr,
        hidden_sizes=h_arr,
        lstm_accuracy=acc[:-1],
        attention_accuracy=acc[-1],
        lstm_params=params[:-1, 0].copy(),
        attention_params=params[-1].copy(),
        lstm_state_floats=2 * h_arr,
        attention_read_floats=2 * 2 * n_arr * d_model,
        chance_accuracy=1.0 / vocab,
        time_s=secs,
        vocab=vocab,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        clip_norm=clip_norm,
        eval_size=eval_size,
        seed=seed,
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
    )


# --------------------------------------------------------------------------------------------
# Chapter 05: cross-attention alignment
# --------------------------------------------------------------------------------------------


@dataclass
class CrossAttentionResult:
    """Result of :func:`cross_attention_run`.

    Attributes:
        source, target: int64 ``(n,)`` the example's source tokens and the reversed target.
        prediction: int64 ``(n,)`` the model's greedy prediction of each target token under
            teacher forcing.
        cross_attention: float64 ``(n_layers, n_heads, n, n)`` the decoder's cross-attention
            weights on the example: entry ``[l, h, i, j]`` is how much target position ``i``
            attends to source position ``j`` in layer ``l``, head ``h``.
        mirror_mass: float64 ``(n_layers, n_heads)``: the mean, over target positions and
            held-out examples, of the weight on the mirrored source position ``n - 1 - i``
            (the token being copied); ``1/n`` for uniform attention.
        loss: float64 ``(steps,)`` training cross-entropy (nats) per target token.
        eval_loss, eval_accuracy: held-out per-token cross-entropy and accuracy.
        chance_loss: ``log(vocab)``.
        n, vocab, d_model, n_heads, n_layers, d_ff, steps, batch_size, lr, seed: settings.
        n_params: parameter count.
        wall_time_s, cpu_time_s: the whole run.
        snapshot_steps: int64 ``(n_snapshots,)``, the numbers of updates after which the
            snapshots were taken, as the run was asked (its ``snapshot_steps``); ``None``
            unless it was asked for snapshots.
        snapshots: float64 ``(n_snapshots, n_layers, n_heads, n, n)``: ``cross_attention``
            of the example after ``snapshot_steps[k]`` updates (a snapshot at 0 updates is the
            untrained model's, one at ``steps`` equals ``cross_attention``); ``None`` without
            snapshots.
        snapshot_mirror_mass: float64 ``(n_snapshots, n_layers, n_heads)``: ``mirror_mass``
            after ``snapshot_steps[k]`` updates (on the same held-out set); ``None`` without
            snapshots.
        snapshot_accuracy: float64 ``(n_snapshots,)``: the held-out accuracy after
            ``snapshot_steps[k]`` updates (the last equals ``eval_accuracy``); ``None``
            without snapshots.
        ablation_accuracy: ``None`` unless the run was asked for ``ablations``; then a dict
            of the trained model's held-out accuracy with every decoder cross-attention's
            weights replaced by a fixed map, the rest of the model unchanged:
            ``"mirror"`` (all weight on the mirrored source position ``n - 1 - i``),
            ``"shifted"`` (all weight on ``(n - 2 - i) mod n``, the mirror moved one
            position, a wrong permutation) and ``"uniform"`` (``1/n`` on every position).
        ablation_copied: ``None`` unless the run was asked for ``ablations``; then, for the
            two one-hot maps (``"mirror"``, ``"shifted"``), the share of the held-out
            predictions that equal the source token at the position the map points to.
    """

    source: np.ndarray
    target: np.ndarray
    prediction: np.ndarray
    cross_attention: np.ndarray
    mirror_mass: np.ndarray
    loss: np.ndarray
    eval_loss: float
    eval_accuracy: float
    chance_loss: float
    n: int
    vocab: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    steps: int
    batch_size: int
    lr: float
    seed: int
    n_params: int
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    snapshot_steps: np.ndarray | None = None
    snapshots: np.ndarray | None = None
    snapshot_mirror_mass: np.ndarray | None = None
    snapshot_accuracy: np.ndarray | None = None
    ablation_accuracy: dict | None = None
    ablation_copied: dict | None = None


def _cross_attention_weights(model: EncoderDecoderModel, src, tgt_in):
    """Run the model once; return its logits and the ``(B, n_layers, H, T, S)`` cross-attention.

    Pre-hooks record each decoder layer's cross-attention inputs; the weights are then
    recomputed by calling the same module with ``need_weights=True``.
    """
    inputs, hooks = {}, []
    for idx, layer in enumerate(model.decoder):
        hooks.append(
            layer.cross_attn.register_forward_pre_hook(
                lambda m, args, idx=idx: inputs.__setitem__(idx, args)
            )
        )
    try:
        logits = model(src, tgt_in)  # (B, T, vocab)
    finally:
        for h in hooks:
            h.remove()
    weights = []
    for idx, layer in enumerate(model.decoder):
        _, w = layer.cross_attn(*inputs[idx], need_weights=True)  # (B, H, T, S)
        weights.append(w)
    return logits, torch.stack(weights, dim=1)  # (B, n_layers, H, T, S)


def _logits_with_cross_attention(model: EncoderDecoderModel, src, tgt_in, weights):
    """The model's logits with every decoder cross-attention's weights replaced by ``weights``.

    ``weights`` broadcasts to ``(B, n_layers, H, T, S)`` (e.g. one ``(T, S)`` map for every
    example, layer and head). Forward hooks replace each cross-attention's output by
    ``o_proj(merge_heads(weights @ v))``, ``v`` its own value projection of the memory; the
    queries, keys and any mask are ignored. Given the weights the model computes itself
    (:func:`_cross_attention_weights`), the logits are the model's own.
    """
    from .layers import merge_heads, repeat_kv, split_heads  # the head reshapes

    B, T, S = src.shape[0], tgt_in.shape[1], src.shape[1]
    H = model.decoder[0].cross_attn.n_heads
    w = torch.broadcast_to(torch.as_tensor(weights), (B, len(model.decoder), H, T, S))

    def replace(module, args, kwargs, output, idx):
        context = args[1] if len(args) > 1 else kwargs["context"]  # (B, S, d_model)
        v = split_heads(module.v_proj(context), module.n_kv_heads)  # (B, H_kv, S, D)
        v = repeat_kv(v, module.n_heads // module.n_kv_heads)  # (B, H, S, D)
        out = w[:, idx].to(v.dtype) @ v  # (B, H, T, D)
        return module.o_proj(merge_heads(out))  # (B, T, d_model)

    hooks = [
        layer.cross_attn.register_forward_hook(
            lambda m, a, k, o, idx=idx: replace(m, a, k, o, idx), with_kwargs=True
        )
        for idx, layer in enumerate(model.decoder)
    ]
    try:
        return model(src, tgt_in)  # (B, T, vocab)
    finally:
        for h in hooks:
            h.remove()


def cross_attention_run(
    *,
    n: int = 8,
    vocab: int = 16,
    d_model: int = 64,
    n_heads: int = 2,
    n_layers: int = 1,
    d_ff: int = 128,
    steps: int = 400,
    batch_size: int = 64,
    lr: float = 1e-3,
    eval_size: int = 512,
    seed: int = 0,
    num_threads: int = 1,
    snapshot_steps=None,
    ablations: bool = False,
    progress: bool = False,
) -> CrossAttentionResult:
    """Train a tiny encoder-decoder to reverse sequences; return its cross-attention map.

    Model: :class:`attnbook.models.EncoderDecoderModel` (``n_layers`` encoder and decoder layers
    of :mod:`attnbook.blocks`, Pre-LN, ReLU, learned positions, untied embeddings and output
    projection). The original ties them (section 3.4); with ``nn.Embedding``'s N(0, 1)
    initialisation a tied head starts with logits of standard deviation about ``sqrt(d_model)``
    (a first loss of 44 nats at d_model 64, seed 0, against ``log 17 = 2.8`` for uniform
    logits), and that run stalled above chance, so the head is untied here. Task:
    :func:`reversal_batch`, trained with teacher forcing. Output position ``i`` must copy source
    position ``n - 1 - i``, so a model that has learned the task by attention can be expected to
    put its cross-attention there; the result reports what it does (``cross_attention``,
    ``mirror_mass``).

    With ``snapshot_steps``, the run also records how that map is learned: the example's
    cross-attention and the held-out mirror mass after each of those numbers of updates
    (``snapshots``, ``snapshot_mirror_mass``; 0 is the untrained model). Each snapshot is one
    forward pass over the held-out set without gradients, in evaluation mode; it draws no random
    numbers, so the training itself (the loss curve, the final model) is the same with and
    without snapshots, and costs a small fraction of the run (one forward pass, no backward).
    Each snapshot also records the held-out accuracy (``snapshot_accuracy``).

    With ``ablations``, the trained model is also evaluated on the held-out set with its
    cross-attention weights replaced by fixed maps (``ablation_accuracy``): the exact mirror
    map, the mirror moved by one position and uniform weights; for the two one-hot maps it also
    records how often a prediction is the source token the map points to
    (``ablation_copied``). If the model finds the token it copies through the alignment it
    learned, the exact mirror keeps its accuracy and the other two maps lose it. Three forward
    passes, no random numbers: the run is the same with and without.

    Args:
        n, vocab: sequence length and data vocabulary.
        d_model, n_heads, n_layers, d_ff: model sizes.
        steps, batch_size, lr: Adam updates, sequences per update, learning rate.
        eval_size: held-out sequences.
        seed: as :func:`scaling_run`; the example shown is the first held-out sequence.
        num_threads: torch threads during the run.
        snapshot_steps: ``None`` (default: no snapshots) or a strictly increasing sequence of
            integers in ``[0, steps]``: the numbers of updates after which to record a
            snapshot, e.g. ``range(0, steps + 1, 25)``.
        ablations: also record ``ablation_accuracy`` and ``ablation_copied``; needs ``n >= 2``.
        progress: show tqdm bars.

    Returns:
        :class:`CrossAttentionResult`.

    Raises:
        TypeError: if a size or ``seed`` is not an integer, ``lr`` not a real number,
            ``snapshot_steps`` not a sequence of integers (a set or a 0-d array included), or
            ``ablations`` or ``progress`` not a bool.
        ValueError: if a size is < 1, ``lr`` is not positive, ``seed`` is negative,
            ``ablations`` is asked for with ``n < 2``, or ``snapshot_steps`` is empty, not
            strictly increasing or outside ``[0, steps]``.

    Source: Bahdanau et al. (2015), figure 3 (alignments); Vaswani et al. (2017), section 3.2.3.
    """
    for name, v in dict(
        n=n,
        vocab=vocab,
        d_model=d_model,
        n_heads=n_heads,
        n_layers=n_layers,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        eval_size=eval_size,
    ).items():
        checks.check_int(v, name, 1)
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    seed = checks.check_seed(seed)
    ablations = checks.check_bool(ablations, "ablations")
    progress = checks.check_bool(progress, "progress")
    if ablations and n < 2:  # with one position the shifted map is the mirror map
        raise ValueError(
            f"ablations need n >= 2 (with n={n} the shifted map equals the mirror map), got n={n}"
        )
    if snapshot_steps is not None:
        snapshot_steps = checks.check_increasing(
            snapshot_steps, "snapshot_steps", minimum=0, maximum=steps
        )
    src_e, tgt_in_e, tgt_out_e = reversal_batch(
        eval_size, n, vocab, torch.Generator().manual_seed((seed + 1) % 2**64)
    )
    i = torch.arange(n)

    def held_out():
        """The held-out logits, the example's map and the mirror mass, without gradients."""
        training = model.training
        model.eval()
        with torch.no_grad():
            logits, weights = _cross_attention_weights(model, src_e, tgt_in_e)
        model.train(training)
        mirror = weights[..., i, n - 1 - i]  # (B, n_layers, H, n)
        return (
            logits,
            weights[0].double().numpy(),
            mirror.double().mean(dim=(0, 3)).numpy(),
        )  # (n_layers, H)

    maps, masses, accuracies = [], [], []

    def snapshot(step):  # after update ``step`` (0-based): step + 1 updates done
        if step + 1 in snapshot_steps:
            logits, cross, mass = held_out()
            maps.append(cross)
            masses.append(mass)
            accuracies.append(_accuracy(logits, tgt_out_e))

    with _run_context(num_threads) as clock:
        config = ModelConfig(
            vocab_size=vocab + 1,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            n_encoder_layers=n_layers,
            d_ff=d_ff,
            arch="encoder-decoder",
            max_seq_len=n,
            norm="layernorm",
            norm_first=True,
            ffn="relu",
            bias=True,
            positional="learned",
            tie_embeddings=False,
        )
        torch.manual_seed(seed)
        model = EncoderDecoderModel(config)
        gen = torch.Generator().manual_seed(seed)

        def batch_loss(step):
            src, tgt_in, tgt_out = reversal_batch(batch_size, n, vocab, gen)
            logits = model(src, tgt_in)  # (B, n, vocab + 1)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))

        recorded = snapshot_steps is not None
        if recorded:
            snapshot(-1)  # the untrained model: 0 updates
        losses = _train(
            model,
            batch_loss,
            steps=steps,
            lr=lr,
            progress=progress,
            desc="cross-attention: reversal",
            after_step=snapshot if recorded else None,
        )
        logits, cross, mirror_mass = held_out()
        with torch.no_grad():
            eval_loss = float(
                F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out_e.reshape(-1))
            )
            eval_acc = _accuracy(logits, tgt_out_e)
            ablated = copied = None
            if ablations:
                pointed = {"mirror": n - 1 - i, "shifted": (n - 2 - i) % n}  # (n,) each
                fixed = {k: torch.zeros(n, n) for k in pointed}  # (L, S)
                for k, j in pointed.items():
                    fixed[k][i, j] = 1.0
                fixed["uniform"] = torch.full((n, n), 1.0 / n)
                preds = {
                    k: _logits_with_cross_attention(model, src_e, tgt_in_e, w).argmax(-1)
                    for k, w in fixed.items()
                }  # (B, n) each
                ablated = {k: float((p == tgt_out_e).double().mean()) for k, p in preds.items()}
                copied = {
                    k: float((preds[k] == src_e[:, j]).double().mean()) for k, j in pointed.items()
                }
    return CrossAttentionResult(
        source=src_e[0].numpy(),
        target=tgt_out_e[0].numpy(),
        prediction=logits[0].argmax(-1).numpy(),
        cross_attention=cross,
        mirror_mass=mirror_mass,
        loss=losses,
        eval_loss=eval_loss,
        eval_accuracy=eval_acc,
        chance_loss=math.log(vocab),
        n=n,
        vocab=vocab,
        d_model=d_model,
        n_heads=n_heads,
        n_layers=n_layers,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        n_params=count_parameters(model),
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
        snapshot_steps=np.array(snapshot_steps, dtype=np.int64) if recorded else None,
        snapshots=np.stack(maps) if recorded else None,
        snapshot_mirror_mass=np.stack(masses) if recorded else None,
        snapshot_accuracy=np.array(accuracies, dtype=np.float64) if recorded else None,
        ablation_accuracy=ablated,
        ablation_copied=copied,
    )


# --------------------------------------------------------------------------------------------
# Chapter 08: positions beyond the trained length
# --------------------------------------------------------------------------------------------


def offset_copy_batch(
    batch_size: int, seq_len: int, offset: int, vocab: int, generator: torch.Generator
):
    """Copy the token ``offset`` positions back: a task that needs positions and nothing else.

    Tokens are uniform over ``0 .. vocab-1``. At every position ``t >= offset`` a next-token
    model must output the token at ``t - offset``; which token that is, only the positions can
    tell (without them attention sees a set). Given everything but the token ``offset`` back,
    the answer is uniform over ``vocab``: chance cross-entropy ``log(vocab)``, accuracy
    ``1/vocab``.

    Args:
        batch_size: ``B``.
        seq_len: tokens per sequence ``T`` (``> offset``).
        offset: how far back the answer lies, ``>= 1``.
        vocab: vocabulary size (the model's vocabulary too).
        generator: the source of randomness.

    Returns:
        ``(ids (B, T), targets (B, T - offset))``, int64: ``targets[:, t - offset]`` is the
        answer at position ``t``, i.e. ``ids[:, t - offset]``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1 or ``seq_len <= offset``.
    """
    B = checks.check_int(batch_size, "batch_size", 1)
    k = checks.check_int(offset, "offset", 1)
    T = checks.check_int(seq_len, "seq_len", 1)
    V = checks.check_int(vocab, "vocab", 1)
    if T <= k:
        raise ValueError(f"seq_len {T} must be > offset {k} (no position would have an answer)")
    ids = torch.randint(V, (B, T), generator=generator)  # (B, T)
    return ids, ids[:, : T - k]  # (B, T), (B, T - offset)


#: The kinds of positions :func:`position_extrapolation_run` compares (chapter 08).
POSITION_KINDS = ("learned", "sinusoidal", "rope")


@dataclass
class PositionExtrapolationResult:
    """Result of :func:`position_extrapolation_run`; one entry per kind of positions.

    Attributes:
        kinds: the kinds of positions compared (``config.positional`` values).
        positions: int64 ``(eval_len - offset,)``: the positions ``t = offset .. eval_len-1``
            at which an answer is asked.
        accuracy: per kind, float64 ``(eval_len - offset,)``: held-out accuracy at each
            position of sequences of ``eval_len`` tokens at positions ``0 .. eval_len-1``.
        inside_accuracy, beyond_accuracy: per kind, the mean of ``accuracy`` over the
            positions ``< train_len`` (seen in training) and ``>= train_len`` (never seen).
        shifted_accuracy: per kind, held-out accuracy on sequences of ``train_len`` tokens
            (the first ``train_len`` tokens of the same sequences) placed at positions
            ``eval_len - train_len .. eval_len - 1``: every distance between two tokens was
            seen in training, the positions were not (when ``eval_len >= 2 * train_len``).
        unseen_weight: per kind, float64 ``(eval_len - offset,)``: at each query position of
            the long evaluation, the attention weight (mean over sequences and heads) on keys
            at least ``train_len`` positions back, distances never seen in training.
        untrained_rows_change: the largest ``|change|`` of the learned table's rows
            ``train_len .. eval_len-1`` from initialisation to the end of training (0: no
            update ever reached them); ``None`` without ``"learned"`` in ``kinds``.
        loss: per kind, float64 ``(steps,)`` training cross-entropy (nats).
        n_params: per kind, parameter count.
        chance_loss, chance_accuracy: ``log(vocab)`` and ``1/vocab``.
        train_len, eval_len, offset, vocab, d_model, n_heads, d_ff, steps, batch_size, lr,
            eval_size, seed: settings.
        wall_time_s, cpu_time_s: the whole run.
    """

    kinds: tuple
    positions: np.ndarray
    accuracy: dict
    inside_accuracy: dict
    beyond_accuracy: dict
    shifted_accuracy: dict
    unseen_weight: dict
    untrained_rows_change: float | None
    loss: dict
    n_params: dict
    chance_loss: float
    chance_accuracy: float
    train_len: int
    eval_len: int
    offset: int
    vocab: int
    d_model: int
    n_heads: int
    d_ff: int
    steps: int
    batch_size: int
    lr: float
    eval_size: int
    seed: int
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0


def _self_attention_weights(model: DecoderOnlyModel, ids, positions):
    """Logits and the first layer's ``(B, H, T, T)`` self-attention weights, in one pass.

    A pre-hook records the self-attention's inputs; the weights are then recomputed by
    calling the same module with ``need_weights=True``.
    """
    seen = {}
    hook = model.layers[0].self_attn.register_forward_pre_hook(
        lambda m, args, kwargs: seen.update(args=args, kwargs=kwargs), with_kwargs=True
    )
    try:
        logits = model(ids, positions=positions)  # (B, T, vocab)
    finally:
        hook.remove()
    _, weights = model.layers[0].self_attn(*seen["args"], **seen["kwargs"], need_weights=True)
    return logits, weights  # (B, T, vocab), (B, H, T, T)


def position_extrapolation_run(
    *,
    train_len: int = 32,
    eval_len: int = 64,
    offset: int = 3,
    vocab: int = 16,
    d_model: int = 32,
    n_heads: int = 2,
    d_ff: int = 64,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 3e-3,
    eval_size: int = 256,
    kinds=POSITION_KINDS,
    embed_scale: bool = False,
    seed: int = 0,
    num_threads: int = 1,
    progress: bool = False,
) -> PositionExtrapolationResult:
    """Train on short sequences, test on later positions: learned, sinusoidal and RoPE.

    One model per kind of positions, each a one-layer Pre-LN decoder of
    :class:`attnbook.models.DecoderOnlyModel` (ReLU, biases, untied head, no dropout) with
    ``positional=kind`` and ``max_seq_len=eval_len``, so the learned table has ``eval_len``
    rows of which training reaches only the first ``train_len``. By default the token
    embeddings are not scaled by ``sqrt(d_model)`` in any arm (``embed_scale=False``): with the
    paper's scaling the sinusoidal arm's positions are small next to the tokens, and at the
    default settings it had not learned the task after 300 updates (``embed_scale=True``,
    seed 0: held-out accuracy 0.25 at the trained positions). Task:
    :func:`offset_copy_batch` (output the token ``offset`` back), trained on sequences of
    ``train_len`` tokens with a loss at every position ``t >= offset``. Then two held-out
    tests: sequences of ``eval_len`` tokens (positions and distances beyond training), and
    sequences of ``train_len`` tokens moved to the last ``train_len`` positions (positions
    beyond training, distances seen). Every arm starts from ``torch.manual_seed(seed)`` and
    sees the same batches.

    Args:
        train_len: tokens per training sequence (``> offset``).
        eval_len: tokens per long held-out sequence (``> train_len``); also the learned
            table's ``max_seq_len``.
        offset: how far back the answer lies.
        vocab: vocabulary size.
        d_model, n_heads, d_ff: model sizes.
        steps, batch_size, lr: Adam updates, sequences per update, learning rate.
        eval_size: held-out sequences.
        kinds: a non-empty subset of ``("learned", "sinusoidal", "rope", "none")``, in order.
        embed_scale: multiply the token embeddings by ``sqrt(d_model)`` in every arm.
        seed: as :func:`scaling_run`.
        num_threads: torch threads during the run.
        progress: show tqdm bars.

    Returns:
        :class:`PositionExtrapolationResult`.

    Raises:
        TypeError: if a size or ``seed`` is not an integer, ``lr`` not a real number,
            ``embed_scale`` not a bool, or ``kinds`` not a sequence of strings.
        ValueError: if a size is < 1, ``train_len <= offset``, ``eval_len <= train_len``,
            ``lr`` is not positive, ``seed`` is negative, or ``kinds`` is empty, repeats a kind
            or names an unknown one.

    Source: Vaswani et al. (2017), section 3.5 (learned and sinusoidal positions; the hope that
    sinusoids "extrapolate to sequence lengths longer than the ones encountered during
    training"); Su et al. (2021) (RoPE); Press et al., "Train Short, Test Long" (2022), who
    measured extrapolation of these encodings in language models.
    """
    for name, v in dict(
        train_len=train_len,
        eval_len=eval_len,
        offset=offset,
        vocab=vocab,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        eval_size=eval_size,
    ).items():
        checks.check_int(v, name, 1)
    if train_len <= offset:
        raise ValueError(f"train_len {train_len} must be > offset {offset}")
    if eval_len <= train_len:
        raise ValueError(f"eval_len {eval_len} must be > train_len {train_len}")
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    seed = checks.check_seed(seed)
    embed_scale = checks.check_bool(embed_scale, "embed_scale")
    if isinstance(kinds, str) or not all(isinstance(k, str) for k in kinds):
        raise TypeError(f"kinds must be a sequence of strings, got {kinds!r}")
    kinds = tuple(kinds)
    allowed = ("learned", "sinusoidal", "rope", "none")
    if not kinds or len(set(kinds)) != len(kinds) or not set(kinds) <= set(allowed):
        raise ValueError(f"kinds must be distinct names from {allowed}, got {kinds!r}")
    ids_e, target_e = offset_copy_batch(
        eval_size, eval_len, offset, vocab, torch.Generator().manual_seed((seed + 1) % 2**64)
    )
    t = torch.arange(offset, eval_len)  # (eval_len - offset,) positions with an answer
    distance = torch.arange(eval_len)[:, None] - torch.arange(eval_len)  # (T, T): i - j
    unseen = distance >= train_len  # (T, T): keys at distances never seen in training
    shifted = torch.arange(eval_len - train_len, eval_len)  # (train_len,)
    out = {
        name: {}
        for name in ("accuracy", "inside", "beyond", "shifted", "unseen", "loss", "n_params")
    }
    rows_change = None
    with _run_context(num_threads) as clock:
        for kind in kinds:
            config = ModelConfig(
                vocab_size=vocab,
                d_model=d_model,
                n_heads=n_heads,
                n_layers=1,
                d_ff=d_ff,
                arch="decoder",
                max_seq_len=eval_len,
                norm="layernorm",
                norm_first=True,
                ffn="relu",
                bias=True,
                positional=kind,
                tie_embeddings=False,
                embed_scale=embed_scale,
            )
            torch.manual_seed(seed)
            model = DecoderOnlyModel(config)
            if kind == "learned":
                table0 = model.embed.positions.weight.detach().clone()  # (eval_len, d_model)
            gen = torch.Generator().manual_seed(seed)

            def batch_loss(step, model=model, gen=gen):
                ids, target = offset_copy_batch(batch_size, train_len, offset, vocab, gen)
                logits = model(ids)[:, offset:]  # (B, train_len - offset, vocab)
                return F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1))

            out["loss"][kind] = _train(
                model, batch_loss, steps=steps, lr=lr, progress=progress, desc=f"positions: {kind}"
            )
            out["n_params"][kind] = count_parameters(model)
            with torch.no_grad():
                logits, w = _self_attention_weights(model, ids_e, torch.arange(eval_len))
                hit = (logits[:, offset:].argmax(-1) == target_e).double()  # (N, T - offset)
                acc = hit.mean(0).numpy()  # (eval_len - offset,)
                mass = (w.double() * unseen).sum(-1).mean(dim=(0, 1))  # (T,)
                short = model(ids_e[:, :train_len], positions=shifted)[:, offset:]
                out["shifted"][kind] = _accuracy(short, target_e[:, : train_len - offset])
            out["accuracy"][kind] = acc
            inside = t.numpy() < train_len
            out["inside"][kind] = float(acc[inside].mean())
            out["beyond"][kind] = float(acc[~inside].mean())
            out["unseen"][kind] = mass[offset:].numpy()
            if kind == "learned":
                rows_change = float(
                    (model.embed.positions.weight.detach() - table0)[train_len:].abs().max()
                )
    return PositionExtrapolationResult(
        kinds=kinds,
        positions=t.numpy(),
        accuracy=out["accuracy"],
        inside_accuracy=out["inside"],
        beyond_accuracy=out["beyond"],
        shifted_accuracy=out["shifted"],
        unseen_weight=out["unseen"],
        untrained_rows_change=rows_change,
        loss=out["loss"],
        n_params=out["n_params"],
        chance_loss=math.log(vocab),
        chance_accuracy=1.0 / vocab,
        train_len=train_len,
        eval_len=eval_len,
        offset=offset,
        vocab=vocab,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        eval_size=eval_size,
        seed=seed,
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
    )


# --------------------------------------------------------------------------------------------
# Chapter 07: several heads against one wide head
# --------------------------------------------------------------------------------------------


@dataclass
class HeadsResult:
    """Result of :func:`heads_run`.

    Attributes:
        n_heads: int ``(A,)`` the arms' numbers of heads (each with ``head_dim = d_model / H``).
        seeds: int ``(R,)`` the seeds, one run per arm and seed.
        unexplained: float64 ``(A, R)`` held-out fraction of variance unexplained,
            ``sum (prediction - target)^2 / sum (target - mean target)^2`` over all held-out
            sequences and target numbers (0 = perfect, 1 = no better than the mean).
        unexplained_se: float64 ``(A, R)`` the standard error of each ``unexplained`` value
            as an estimate from ``eval_size`` random held-out sequences (the ratio of two
            sums over the sequences; delta method, computed by the private ``_unexplained_se``).
        unexplained_by_source: float64 ``(A, R, K)`` the same per source.
        bound: float64 ``(A,)`` ``1 - min(H, K) / K``: the least a layer whose weights ignore
            the contents can leave unexplained (see :func:`multi_source_batch`).
        loss: float64 ``(A, R, steps)`` training loss (mean squared error per target number).
        n_params: int ``(A,)`` parameters of each arm's model (equal: the projections' shapes
            do not depend on ``H``).
        weights: per arm, float64 ``(E, H, L)``: the query's attention weights in each head on
            the first ``E`` held-out sequences (the first seed's model).
        prediction: float64 ``(A, E, K, m)`` those sequences' outputs (first seed's models).
        target: float64 ``(E, K, m)`` their targets.
        types: int64 ``(E, L)`` their tokens' types (see :func:`multi_source_batch`).
        seq_len, n_sources, content_dim, d_model, steps, batch_size, lr: settings.
        wall_time_s, cpu_time_s: the whole run.
    """

    n_heads: np.ndarray
    seeds: np.ndarray
    unexplained: np.ndarray
    unexplained_se: np.ndarray
    unexplained_by_source: np.ndarray
    bound: np.ndarray
    loss: np.ndarray
    n_params: np.ndarray
    weights: list
    prediction: np.ndarray
    target: np.ndarray
    types: np.ndarray
    seq_len: int
    n_sources: int
    content_dim: int
    d_model: int
    steps: int
    batch_size: int
    lr: float
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0


class _GatherModel(nn.Module):
    """Input projection, one :class:`attnbook.layers.MultiHeadAttention` layer, linear read-out.

    Only the last token's output is read; the read-out maps it to the ``K * m`` target numbers.
    """

    def __init__(self, d_in: int, d_model: int, n_heads: int, d_out: int):
        super().__init__()
        self.embed = nn.Linear(d_in, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.readout = nn.Linear(d_model, d_out)

    def forward(self, x, need_weights: bool = False):
        out, weights = self.attn(self.embed(x), need_weights=True)  # (B, L, d), (B, H, L, L)
        y = self.readout(out[:, -1])  # (B, K * m): the query's output
        return (y, weights[:, :, -1]) if need_weights else y  # weights (B, H, L)


def _unexplained(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Fraction of variance unexplained over all entries (float64)."""
    pred, target = pred.double(), target.double()
    return float(((pred - target) ** 2).sum() / ((target - target.mean(0)) ** 2).sum())


def _unexplained_se(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Standard error of :func:`_unexplained` over the rows (sequences) it sums, float64.

    The estimate is ``sum a_i / sum b_i`` with ``a_i`` row ``i``'s squared error and ``b_i``
    its squared deviation from the mean target; the delta method for a ratio of sums of
    independent rows gives ``sqrt(n / (n - 1) * sum (a_i - r b_i)^2) / sum b_i``.
    """
    pred, target = pred.double(), target.double()
    a = ((pred - target) ** 2).sum(-1)  # (E,) per sequence
    b = ((target - target.mean(0)) ** 2).sum(-1)  # (E,)
    n, r = len(a), float(a.sum() / b.sum())
    return float(torch.sqrt(n / (n - 1) * ((a - r * b) ** 2).sum()) / b.sum())


def heads_run(
    *,
    n_heads=(1, 2, 3),
    seeds=(0, 1, 2),
    seq_len: int = 8,
    n_sources: int = 3,
    content_dim: int = 4,
    d_model: int = 24,
    steps: int = 200,
    batch_size: int = 128,
    lr: float = 1e-2,
    eval_size: int = 2048,
    n_examples: int = 6,
    num_threads: int = 1,
    progress: bool = False,
) -> HeadsResult:
    """One attention layer with ``H`` heads of ``d_model / H`` learns to gather ``K`` tokens.

    Task: :func:`multi_source_batch` — the last token of each sequence must output the contents
    of ``n_sources`` tokens that its type marks. Model (the same for every arm but ``H``): a
    linear input projection to ``d_model``, one :class:`attnbook.layers.MultiHeadAttention` layer
    with ``H`` heads of ``head_dim = d_model // H`` (so the same parameter count), and a linear
    read-out of the last token's output; no residual path, no feed-forward layer, so everything
    the read-out gets has passed through the attention. Loss: mean squared error. Each arm is
    trained from every seed with the conventions of this module (its initial weights and
    batches from the seed, the held-out set from ``seed + 1``).

    Args:
        n_heads: the arms' numbers of heads; each must divide ``d_model``.
        seeds: one run per arm and seed.
        seq_len, n_sources, content_dim: the task (see :func:`multi_source_batch`).
        d_model: model width.
        steps, batch_size, lr: Adam updates, sequences per update, learning rate.
        eval_size: held-out sequences, at least 2 (for the standard error).
        n_examples: held-out sequences whose weights and outputs are kept (the first seed's).
        num_threads: torch threads during the run.
        progress: show tqdm bars.

    Returns:
        :class:`HeadsResult`.

    Raises:
        TypeError: if ``n_heads`` or ``seeds`` is not a list or tuple, a size or seed is not
            an integer, ``lr`` not a real number or ``progress`` not a bool.
        ValueError: if a size is < 1, no arm or seed is given, an ``H`` does not divide
            ``d_model``, ``seq_len <= n_sources``, ``eval_size < 2``,
            ``n_examples > eval_size``, ``lr`` is not positive or a seed is negative.

    Source: Vaswani et al. (2017), section 3.2.2 ("multi-head attention allows the model to
    jointly attend to information from different representation subspaces at different
    positions. With a single attention head, averaging inhibits this.").
    """
    for name, values in (("n_heads", n_heads), ("seeds", seeds)):
        if not isinstance(values, (list, tuple, range)):  # an int would fail deep inside
            raise TypeError(f"{name} must be a list or tuple of integers, got {values!r}")
    arms = [checks.check_int(h, f"n_heads[{i}]", 1) for i, h in enumerate(n_heads)]
    seeds = [checks.check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]
    progress = checks.check_bool(progress, "progress")
    if not arms or not seeds:
        raise ValueError(f"n_heads and seeds need at least one value, got {n_heads}, {seeds}")
    for name, v in dict(
        seq_len=seq_len,
        n_sources=n_sources,
        content_dim=content_dim,
        d_model=d_model,
        steps=steps,
        batch_size=batch_size,
        eval_size=eval_size,
        n_examples=n_examples,
    ).items():
        checks.check_int(v, name, 1)
    for h in arms:
        if d_model % h:
            raise ValueError(f"n_heads {h} must divide d_model {d_model}")
    if seq_len <= n_sources:
        raise ValueError(f"seq_len {seq_len} must be > n_sources {n_sources}")
    if eval_size < 2:  # the standard error divides by eval_size - 1
        raise ValueError(
            f"eval_size must be >= 2 (the standard error of the missed variance needs two "
            f"held-out sequences), got {eval_size}"
        )
    if n_examples > eval_size:
        raise ValueError(f"n_examples {n_examples} must be <= eval_size {eval_size}")
    lr = checks.check_real(lr, "lr", minimum=0, strict=True)
    K, m = n_sources, content_dim
    A, R = len(arms), len(seeds)
    unexplained = np.empty((A, R))
    unexplained_se = np.empty((A, R))
    by_source = np.empty((A, R, K))
    losses = np.empty((A, R, steps))
    n_params = np.empty(A, dtype=np.int64)
    weights, predictions = [], np.empty((A, n_examples, K, m))
    with _run_context(num_threads) as clock:
        for r, seed in enumerate(seeds):
            x_e, y_e, types_e = multi_source_batch(
                eval_size, seq_len, K, m, torch.Generator().manual_seed((seed + 1) % 2**64)
            )
            for a, h in enumerate(arms):
                torch.manual_seed(seed)
                model = _GatherModel(m + K + 2, d_model, h, K * m)
                n_params[a] = count_parameters(model)
                gen = torch.Generator().manual_seed(seed)

                def batch_loss(step, model=model, gen=gen):
                    x, y, _ = multi_source_batch(batch_size, seq_len, K, m, gen)
                    return F.mse_loss(model(x), y)

                losses[a, r] = _train(
                    model,
                    batch_loss,
                    steps=steps,
                    lr=lr,
                    progress=progress,
                    desc=f"{h} heads, seed {seed}",
                )
                with torch.no_grad():
                    pred, w = model(x_e, need_weights=True)  # (E, K m), (E, H, L)
                unexplained[a, r] = _unexplained(pred, y_e)
                unexplained_se[a, r] = _unexplained_se(pred, y_e)
                by_source[a, r] = [
                    _unexplained(pred[:, k * m : (k + 1) * m], y_e[:, k * m : (k + 1) * m])
                    for k in range(K)
                ]
                if r == 0:
                    weights.append(w[:n_examples].double().numpy())
                    predictions[a] = pred[:n_examples].double().reshape(-1, K, m).numpy()
            if r == 0:
                target = y_e[:n_examples].double().reshape(-1, K, m).numpy()
                types = types_e[:n_examples].numpy()
    arms_np = np.array(arms)
    return HeadsResult(
        n_heads=arms_np,
        seeds=np.array(seeds),
        unexplained=unexplained,
        unexplained_se=unexplained_se,
        unexplained_by_source=by_source,
        bound=1 - np.minimum(arms_np, K) / K,
        loss=losses,
        n_params=n_params,
        weights=weights,
        prediction=predictions,
        target=target,
        types=types,
        seq_len=seq_len,
        n_sources=K,
        content_dim=m,
        d_model=d_model,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        wall_time_s=clock["wall_time_s"],
        cpu_time_s=clock["cpu_time_s"],
    )
