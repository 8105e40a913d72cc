"""Tests for attnbook.timing.

References: a fake clock whose readings are chosen here, so that every per-call time is
derived by hand; and FLOP counts worked out by hand (the FLOP formulas themselves are tested
against ``torch.utils.flop_counter.FlopCounterMode`` in ``test_cost.py``). Wall-clock speed is
never asserted (STYLE.md: speed is measured, not tested).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from attnbook import timing


class FakeClock:
    """Returns the given readings one after the other (seconds)."""

    def __init__(self, readings):
        self.readings = list(readings)
        self.calls = 0

    def __call__(self) -> float:
        value = self.readings[self.calls]
        self.calls += 1
        return value


def test_time_call_with_a_fake_clock_gives_hand_derived_times():
    calls = []
    # repeat=3 blocks of number=2 calls: clock read at the start and end of each block.
    clock = FakeClock([10.0, 10.4, 20.0, 21.0, 30.0, 30.6])
    t = timing.time_call(lambda: calls.append(1), repeat=3, number=2, warmup=2, clock=clock)
    assert len(calls) == 2 + 3 * 2  # warm-up calls plus the timed ones
    assert clock.calls == 6  # warm-up is not timed
    # Per-call times: 0.4 / 2, 1.0 / 2, 0.6 / 2.
    np.testing.assert_allclose(t.times_s, [0.2, 0.5, 0.3], rtol=1e-12)
    assert math.isclose(t.median_s, 0.3, rel_tol=1e-12)
    assert math.isclose(t.min_s, 0.2, rel_tol=1e-12)
    assert (t.number, t.warmup) == (2, 2)
    assert isinstance(t.median_s, float) and isinstance(t.min_s, float)


def test_time_call_with_the_real_clock_is_positive_and_finite():
    t = timing.time_call(lambda: sum(range(1000)), repeat=4)
    assert len(t.times_s) == 4
    assert all(math.isfinite(x) and x > 0 for x in t.times_s)
    assert t.min_s <= t.median_s


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(repeat=0), ValueError, "repeat"),
        (dict(number=0), ValueError, "number"),
        (dict(warmup=-1), ValueError, "warmup"),
        (dict(repeat=2.5), TypeError, "repeat"),
        (dict(number=True), TypeError, "number"),
    ],
)
def test_time_call_rejects_bad_counts(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        timing.time_call(lambda: None, **kwargs)


def test_time_call_rejects_a_non_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        timing.time_call(42)


def test_flop_formulas_live_in_cost():
    # The FLOP formulas moved to attnbook.cost (tested in test_cost.py); the old import
    # path keeps working, with the one naming convention ``batch``.
    assert timing.rnn_flops(4, 8, batch=2) == 2 * 1024
    assert timing.attention_layer_flops(4, 8) == 2560


def test_recurrence_vs_attention_timing_small():
    threads = torch.get_num_threads()
    r = timing.recurrence_vs_attention_timing(
        (3, 8), d_model=8, n_heads=2, batch_size=2, repeat=2, warmup=0
    )
    assert torch.get_num_threads() == threads  # restored
    assert r.seq_lens.tolist() == [3, 8] and r.seq_lens.dtype == np.int64
    for arr in (r.rnn_s, r.torch_rnn_s, r.torch_rnn_independent_s, r.attention_s):
        assert arr.shape == (2,) and arr.dtype == np.float64
        assert np.isfinite(arr).all() and (arr > 0).all()
    # By hand: RNN 4 B n d^2 = 4 * 2 * n * 64; attention 2 (8 n 64 + 4 n^2 8).
    assert r.rnn_flops.tolist() == [4 * 2 * 3 * 64, 4 * 2 * 8 * 64]
    assert r.attention_flops.tolist() == [
        2 * (8 * 3 * 64 + 4 * 9 * 8),
        2 * (8 * 8 * 64 + 4 * 64 * 8),
    ]
    assert (r.d_model, r.n_heads, r.batch_size, r.repeat, r.num_threads) == (8, 2, 2, 2, 1)
    assert r.wall_time_s > 0


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(seq_lens=()), ValueError, "seq_lens"),
        (dict(seq_lens=(8, 4)), ValueError, "seq_lens"),
        (dict(seq_lens=(0, 4)), ValueError, "seq_lens"),
        (dict(seq_lens=5), TypeError, "seq_lens"),  # not a sequence: the wrong kind
        (dict(seq_lens=(4,), d_model=10, n_heads=3), ValueError, "n_heads"),
        (dict(seq_lens=(4,), batch_size=0), ValueError, "batch_size"),
        (dict(seq_lens=(4,), num_threads=0), ValueError, "num_threads"),
        (dict(seq_lens=(4,), d_model=8.0), TypeError, "d_model"),
    ],
)
def test_recurrence_vs_attention_timing_rejects_bad_arguments(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        timing.recurrence_vs_attention_timing(**kwargs)


def test_independent_steps_do_the_recurrence_s_arithmetic_in_one_step():
    """The input of the 'independent' call: each token its own sequence, from h_0 = 0.

    nn.RNN on (B n, 1, d) gives h_1 = tanh(W_ih x + b) for every token: checked against that
    formula by hand; and its matrix-multiply FLOPs, counted by torch's own FlopCounterMode, equal
    those of the n-step call (the W_hh h_0 product is done though h_0 = 0).
    """
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    ref = torch.nn.RNN(8, 8, batch_first=True)
    x = torch.randn(2, 5, 8)  # (B, n, d)
    with torch.no_grad():
        out, _ = ref(x.reshape(-1, 1, 8))  # (B n, 1, d)
        by_hand = torch.tanh(x @ ref.weight_ih_l0.T + ref.bias_ih_l0 + ref.bias_hh_l0)
        assert_close(out.reshape(2, 5, 8), by_hand, atol=1e-6, rtol=0)
        counts = []
        for inp in (x, x.reshape(-1, 1, 8)):
            with FlopCounterMode(display=False) as fc:
                ref(inp)
            counts.append(fc.get_total_flops())
    assert counts[0] == counts[1] == 4 * 2 * 5 * 8 * 8
