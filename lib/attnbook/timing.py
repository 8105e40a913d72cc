"""Wall-clock timing: a recurrence's ``n`` sequential steps against one attention call.

A recurrent layer computes ``h_t = f(h_{t-1}, x_t)``: step ``t`` needs the result of step
``t - 1``, so the ``n`` steps of a sequence run one after the other whatever the hardware. A
self-attention layer computes every position from the same inputs at once — a handful of
matrix products over the whole sequence — even though it does more arithmetic
(``O(n^2 d)`` against ``O(n d^2)``; Vaswani et al., 2017, section 4 and table 1). This module
measures both on the machine it runs on:

* :func:`time_call` times any callable (``time.perf_counter``; warm-up calls first, the
  fastest or median of several repeats reported), the way ``timeit`` does;
* :func:`recurrence_vs_attention_timing` times, for each sequence length ``n``, the book's
  :class:`attnbook.rnn.VanillaRNN` (a Python loop over the steps), ``torch.nn.RNN`` (the same
  recurrence with the loop in C++), the same ``torch.nn.RNN`` over the same tokens cut into
  independent one-step sequences (the same arithmetic with no step waiting for another) and
  one causal self-attention layer (:class:`attnbook.layers.MultiHeadAttention`), and counts the
  matrix-multiply FLOPs of each.

Wall-clock times depend on the machine, its load and the thread count, so they are reported
as measured (and the book says so), never asserted in tests. FLOPs are counted, not timed:
``2`` per multiply-add of a matrix product, element-wise work (``tanh``, softmax, biases)
not counted — the convention of ``torch.utils.flop_counter.FlopCounterMode``, which the tests
use as the independent reference. The formulas :func:`rnn_flops` and
:func:`attention_layer_flops` live in :mod:`attnbook.cost` and are importable from here too.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .checks import check_callable, check_divides, check_increasing, check_int
from .cost import attention_layer_flops, rnn_flops  # the formulas live in attnbook.cost

__all__ = [
    "Timing",
    "time_call",
    "rnn_flops",
    "attention_layer_flops",
    "RecurrenceVsAttentionTiming",
    "recurrence_vs_attention_timing",
]


@dataclass(frozen=True)
class Timing:
    """Per-call wall-clock times of one callable, from :func:`time_call`.

    Attributes:
        times_s: tuple of ``repeat`` floats, seconds per call in each repeat (the time of the
            repeat divided by its ``number`` calls).
        number: calls per repeat.
        warmup: untimed calls made before the first repeat.
    """

    times_s: tuple
    number: int
    warmup: int

    @property
    def median_s(self) -> float:
        """Median of :attr:`times_s`, seconds per call (robust to one disturbed repeat)."""
        return float(statistics.median(self.times_s))

    @property
    def min_s(self) -> float:
        """Fastest repeat, seconds per call (the least disturbed by other processes)."""
        return float(min(self.times_s))


def time_call(
    fn: Callable[[], object],
    *,
    repeat: int = 5,
    number: int = 1,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeat`` timed blocks of ``number`` calls.

    Args:
        fn: a callable with no arguments; its return value is ignored.
        repeat: timed blocks (>= 1); report their median or minimum.
        number: calls per block (>= 1); raise it for calls much shorter than a millisecond.
        warmup: untimed calls first (>= 0): lazy initialisation, caches, allocator.
        clock: a monotonic clock returning seconds (default ``time.perf_counter``; tests pass
            a fake one).

    Returns:
        :class:`Timing` with ``repeat`` per-call times in seconds.

    Raises:
        TypeError: if ``fn`` is not callable or a count is not an integer.
        ValueError: if ``repeat`` or ``number`` is < 1 or ``warmup`` < 0.

    Source: the protocol of Python's ``timeit`` (repeat blocks of ``number`` calls; prefer the
    minimum or a robust statistic over the mean).
    """
    check_callable(fn, "fn")
    repeat = check_int(repeat, "repeat", 1)
    number = check_int(number, "number", 1)
    warmup = check_int(warmup, "warmup", 0)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        times.append((clock() - t0) / number)
    return Timing(times_s=tuple(float(t) for t in times), number=number, warmup=warmup)


@dataclass
class RecurrenceVsAttentionTiming:
    """Result of :func:`recurrence_vs_attention_timing`.

    Attributes:
        seq_lens: int64 ``(N,)`` sequence lengths ``n``.
        rnn_s: float64 ``(N,)`` seconds of one forward pass of
            :class:`attnbook.rnn.VanillaRNN` (the loop over the steps in Python).
        torch_rnn_s: float64 ``(N,)`` seconds of ``torch.nn.RNN`` with the same weights (the
            loop in C++).
        torch_rnn_independent_s: float64 ``(N,)`` seconds of the same ``torch.nn.RNN`` on the
            same ``batch_size * n`` tokens as ``batch_size * n`` sequences of one step each
            (input ``(batch_size * n, 1, d_model)``): exactly the FLOPs of ``torch_rnn_s``
            (:func:`rnn_flops`; the ``W_hh h_0`` product is computed though ``h_0 = 0``), in one
            step instead of ``n`` dependent ones.
        attention_s: float64 ``(N,)`` seconds of one causal self-attention layer,
            :class:`attnbook.layers.MultiHeadAttention`, over all ``n`` tokens at once.
        rnn_flops: int64 ``(N,)`` :func:`rnn_flops` of the recurrent layers.
        attention_flops: int64 ``(N,)`` :func:`attention_layer_flops`.
        d_model, n_heads, batch_size, repeat, num_threads, seed: the settings.
        wall_time_s: seconds the whole measurement took.
    """

    seq_lens: np.ndarray
    rnn_s: np.ndarray
    torch_rnn_s: np.ndarray
    torch_rnn_independent_s: np.ndarray
    attention_s: np.ndarray
    rnn_flops: np.ndarray
    attention_flops: np.ndarray
    d_model: int
    n_heads: int
    batch_size: int
    repeat: int
    num_threads: int
    seed: int
    wall_time_s: float = 0.0


def recurrence_vs_attention_timing(
    seq_lens: Sequence[int] = (16, 64, 256, 1024),
    *,
    d_model: int = 64,
    n_heads: int = 1,
    batch_size: int = 1,
    repeat: int = 5,
    warmup: int = 1,
    seed: int = 0,
    num_threads: int = 1,
) -> RecurrenceVsAttentionTiming:
    """Time a recurrent layer over ``n`` steps and one self-attention layer over ``n`` tokens.

    For each ``n`` in ``seq_lens`` the same float32 input ``x (batch_size, n, d_model)`` goes
    through

    * :class:`attnbook.rnn.VanillaRNN` ``(d_model, d_model)`` — ``n`` dependent steps;
    * ``torch.nn.RNN(d_model, d_model, batch_first=True)`` with the same weights — the same
      ``n`` dependent steps without Python's per-step overhead;
    * the same ``torch.nn.RNN`` on ``x.reshape(batch_size * n, 1, d_model)`` — the same tokens
      and the same arithmetic, but as independent one-step sequences: what the recurrence
      would cost if step ``t`` did not have to wait for step ``t - 1``;
    * :class:`attnbook.layers.MultiHeadAttention` ``(d_model, n_heads)`` with ``causal=True`` —
      one call that computes all ``n`` outputs from matrix products over the whole sequence.

    Every call runs under ``torch.no_grad()`` with ``torch.set_num_threads(num_threads)`` (the
    previous setting is restored) and is timed with :func:`time_call`; the fastest repeat
    (:attr:`Timing.min_s`) is kept, the one least disturbed by other processes on a shared
    machine (``timeit``'s advice).

    Args:
        seq_lens: increasing sequence lengths, each >= 1.
        d_model: input, hidden and model width (>= 1), divisible by ``n_heads``.
        n_heads: attention heads (>= 1).
        batch_size: sequences per call (>= 1).
        repeat: timed blocks, as :func:`time_call`.
        warmup: untimed calls first, as :func:`time_call`.
        seed: ``torch.manual_seed(seed)`` before the models and the inputs are made.
        num_threads: torch intra-op threads during the measurement (>= 1).

    Returns:
        :class:`RecurrenceVsAttentionTiming`. Seconds are machine- and load-dependent.

    Raises:
        ValueError: if ``seq_lens`` is empty, not increasing or holds a length < 1, a size is
            < 1, or ``n_heads`` does not divide ``d_model``.
        TypeError: if a size is not an integer.

    Source: the comparison of Vaswani et al. (2017), section 4 ("Why Self-Attention").
    """
    import torch

    from .layers import MultiHeadAttention
    from .rnn import VanillaRNN

    lens = check_increasing(seq_lens, "seq_lens", minimum=1)
    d_model = check_int(d_model, "d_model", 1)
    n_heads = check_int(n_heads, "n_heads", 1)
    check_divides(n_heads, "n_heads", d_model, "d_model")
    batch_size = check_int(batch_size, "batch_size", 1)
    repeat = check_int(repeat, "repeat", 1)
    warmup = check_int(warmup, "warmup", 0)
    num_threads = check_int(num_threads, "num_threads", 1)
    seed = check_int(seed, "seed", 0)

    previous = torch.get_num_threads()
    t_start = time.perf_counter()
    torch.set_num_threads(num_threads)
    try:
        torch.manual_seed(seed)
        rnn = VanillaRNN(d_model, d_model).eval()
        ref = torch.nn.RNN(d_model, d_model, batch_first=True).eval()
        with torch.no_grad():
            ref.weight_ih_l0.copy_(rnn.weight_ih)
            ref.weight_hh_l0.copy_(rnn.weight_hh)
            ref.bias_ih_l0.copy_(rnn.bias_ih)
            ref.bias_hh_l0.copy_(rnn.bias_hh)
        attn = MultiHeadAttention(d_model, n_heads).eval()
        x_all = torch.randn(batch_size, lens[-1], d_model)  # (B, n_max, d_model)
        out = {"rnn": [], "torch_rnn": [], "torch_rnn_independent": [], "attention": []}
        with torch.no_grad():
            for n in lens:
                x = x_all[:, :n].contiguous()  # (B, n, d_model)
                x_one = x.reshape(-1, 1, d_model)  # (B n, 1, d_model): one step each
                calls = {
                    "rnn": lambda x=x: rnn(x),
                    "torch_rnn": lambda x=x: ref(x),
                    "torch_rnn_independent": lambda x=x_one: ref(x),
                    "attention": lambda x=x: attn(x, causal=True),
                }
                for name, fn in calls.items():
                    out[name].append(time_call(fn, repeat=repeat, warmup=warmup).min_s)
    finally:
        torch.set_num_threads(previous)
    n_arr = np.asarray(lens, dtype=np.int64)
    return RecurrenceVsAttentionTiming(
        seq_lens=n_arr,
        rnn_s=np.asarray(out["rnn"], dtype=np.float64),
        torch_rnn_s=np.asarray(out["torch_rnn"], dtype=np.float64),
        torch_rnn_independent_s=np.asarray(out["torch_rnn_independent"], dtype=np.float64),
        attention_s=np.asarray(out["attention"], dtype=np.float64),
        rnn_flops=np.asarray(rnn_flops(n_arr, d_model, batch=batch_size)),
        attention_flops=np.asarray(attention_layer_flops(n_arr, d_model, batch=batch_size)),
        d_model=d_model,
        n_heads=n_heads,
        batch_size=batch_size,
        repeat=repeat,
        num_threads=num_threads,
        seed=seed,
        wall_time_s=time.perf_counter() - t_start,
    )
