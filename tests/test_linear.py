"""Tests of attnbook.linear (linear attention, Katharopoulos et al., 2020).

The reference is the *quadratic* form of the same model, written here in float64: the full
``L x S`` matrix of similarities ``phi(q_i) . phi(k_j)`` (with the feature map written out by
hand as ``x + 1`` / ``exp(x)``), masked bottom-right when causal, each row divided by its sum.
The library computes the factored (linear) form, chunked when causal — an independent route.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnbook import linear
from attnbook.testing import assert_close, assert_low_precision_close


def phi_by_hand(x):
    x = np.asarray(x, dtype=np.float64)
    rows = x.reshape(-1, x.shape[-1])
    return np.array([[xx + 1 if xx > 0 else math.exp(xx) for xx in row] for row in rows]).reshape(
        x.shape
    )


def quadratic_reference(q, k, v, causal):
    """float64 quadratic form for 2-D q (L, D), k (S, D), v (S, Dv); empty rows -> 0."""
    L, S = q.shape[0], k.shape[0]
    sim = phi_by_hand(q) @ phi_by_hand(k).T  # (L, S)
    if causal:
        i, j = np.indices((L, S))
        sim = np.where(j <= i + (S - L), sim, 0.0)
    out = np.zeros((L, v.shape[1]))
    for i in range(L):
        if sim[i].sum() > 0:
            out[i] = sim[i] @ v / sim[i].sum()
    return out


def test_feature_map_by_hand():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    assert_close(
        linear.elu_feature_map(x), [math.exp(-2), math.exp(-0.5), 1.0, 1.5, 4.0], atol=0, rtol=1e-15
    )
    assert (linear.elu_feature_map(np.array([-700.0, 700.0])) > 0).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L, S", [(7, 7), (5, 9), (9, 4), (1, 6), (16, 16)])
@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_matches_quadratic_form(causal, L, S, chunk):
    rng = np.random.default_rng(L * 100 + S + chunk)
    q, k, v = rng.standard_normal((L, 4)), rng.standard_normal((S, 4)), rng.standard_normal((S, 3))
    out = linear.linear_attention(q, k, v, causal=causal, chunk_size=chunk)
    ref = quadratic_reference(q, k, v, causal)
    assert np.isfinite(out).all()
    assert out.shape == (L, 3)
    assert_close(out, ref, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("L, S", [(7, 7), (5, 9), (9, 4)])
def test_core_matches_quadratic_form(L, S):
    rng = np.random.default_rng(L + 10 * S)
    q, k, v = (
        rng.standard_normal((2, L, 4)),
        rng.standard_normal((2, S, 4)),
        rng.standard_normal((2, S, 3)),
    )
    out = linear.linear_attention_core(q, k, v)
    assert out.shape == (2, L, 3) and np.isfinite(out).all()
    for b in range(2):
        assert_close(out[b], quadratic_reference(q[b], k[b], v[b], False), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("chunk", [1, 2, 5, 64])
def test_causal_core_matches_quadratic_form(chunk):
    rng = np.random.default_rng(chunk)
    q, k, v = (
        rng.standard_normal((2, 11, 4)),
        rng.standard_normal((2, 11, 4)),
        rng.standard_normal((2, 11, 3)),
    )
    out = linear.linear_attention_causal_core(q, k, v, chunk)
    assert out.shape == (2, 11, 3) and np.isfinite(out).all()
    for b in range(2):
        assert_close(out[b], quadratic_reference(q[b], k[b], v[b], True), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_float16_sums_past_65504(causal):
    # q = k = 0: phi = 1, every visible key has weight 1, the normaliser counts the keys:
    # 70,000 overflows float16 (max 65504). Reference: the float64 mean of the visible values.
    n = 70_000
    rng = np.random.default_rng(6)
    v = rng.standard_normal((n, 2)).astype(np.float16)
    z = np.zeros((n, 2), np.float16)
    q = z[-3:] if not causal else z
    out = linear.linear_attention(q, z, v, causal=causal, chunk_size=512)
    assert out.dtype == np.float16 and np.isfinite(out).all()
    v64 = v.astype(np.float64)
    if causal:
        exact = np.cumsum(v64, axis=0) / np.arange(1, n + 1)[:, None]
    else:
        exact = np.broadcast_to(v64.mean(0), (3, 2))
    assert_low_precision_close(out, exact, plain=exact.astype(np.float16), floor=1e-3)


def test_causal_with_fewer_keys_than_queries_gives_zero_rows():
    # L = 5, S = 2: offset -3, queries 0, 1, 2 see no key (hand derivation: j <= i - 3).
    rng = np.random.default_rng(0)
    out = linear.linear_attention(
        rng.standard_normal((5, 3)),
        rng.standard_normal((2, 3)),
        rng.standard_normal((2, 2)),
        causal=True,
    )
    assert (out[:3] == 0).all() and np.isfinite(out).all() and (out[3:] != 0).all()


def test_equal_queries_and_keys_give_the_mean_of_visible_values():
    # q = k = 0: phi = 1 everywhere, every visible key gets equal weight.
    v = np.arange(6.0)[:, None]  # values 0..5
    out = linear.linear_attention(np.zeros((6, 2)), np.zeros((6, 2)), v, causal=True)
    assert_close(out[:, 0], [np.mean(np.arange(i + 1)) for i in range(6)], atol=1e-15, rtol=0)
    full = linear.linear_attention(np.zeros((3, 2)), np.zeros((6, 2)), v)
    assert_close(full[:, 0], [2.5] * 3, atol=1e-15, rtol=0)


@given(
    L=st.integers(1, 12),
    S=st.integers(1, 12),
    chunk=st.integers(1, 13),
    seed=st.integers(0, 10_000),
)
def test_causal_chunking_never_changes_the_result(L, S, chunk, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((L, 3)), rng.standard_normal((S, 3)), rng.standard_normal((S, 2))
    one = linear.linear_attention(q, k, v, causal=True, chunk_size=chunk)
    assert np.isfinite(one).all()
    assert_close(one, quadratic_reference(q, k, v, True), atol=1e-12, rtol=1e-12)


def test_batched_and_broadcast_leading_dims():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 3, 6, 4))  # (B, H, L, D)
    k = rng.standard_normal((2, 1, 6, 4))  # broadcast over heads
    v = rng.standard_normal((2, 1, 6, 5))
    for causal in (False, True):
        out = linear.linear_attention(q, k, v, causal=causal, chunk_size=4)
        assert out.shape == (2, 3, 6, 5)
        for b in range(2):
            for h in range(3):
                assert_close(
                    out[b, h],
                    quadratic_reference(q[b, h], k[b, 0], v[b, 0], causal),
                    atol=1e-12,
                    rtol=1e-12,
                )


def test_causal_outputs_do_not_depend_on_future_tokens():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((8, 4)) for _ in range(3))
    a = linear.linear_attention(q, k, v, causal=True, chunk_size=3)
    k2, v2 = k.copy(), v.copy()
    k2[5:], v2[5:] = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    b = linear.linear_attention(q, k2, v2, causal=True, chunk_size=3)
    assert np.array_equal(a[:5], b[:5])


def test_float32_error_within_twice_a_plain_float32_quadratic_form():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((64, 16)) for _ in range(3))
    ref = quadratic_reference(q, k, v, True)
    out32 = linear.linear_attention(
        q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal=True, chunk_size=16
    )
    assert out32.dtype == np.float32
    f = lambda x: linear.elu_feature_map(x.astype(np.float32))  # noqa: E731
    sim = np.tril(f(q) @ f(k).T)  # plain float32 quadratic form
    plain = (sim @ v.astype(np.float32)) / sim.sum(-1, keepdims=True)
    assert_low_precision_close(
        out32, ref, plain=plain, floor=4 * np.finfo(np.float32).eps * np.abs(ref).max()
    )


def test_state_size():
    assert linear.linear_state_size(64) == 64 * 64 + 64
    assert linear.linear_state_size(4, 3) == 16
    with pytest.raises(ValueError, match="head_dim"):
        linear.linear_state_size(0)
    with pytest.raises(TypeError, match="value_dim"):
        linear.linear_state_size(4, True)


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        (
            (np.zeros((3, 4)), np.zeros((3, 5)), np.zeros((3, 2))),
            {},
            ValueError,
            "head_dim 4 but k has 5",
        ),
        (
            (np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((2, 2))),
            {},
            ValueError,
            "3 keys but v has 2",
        ),
        ((np.zeros(4), np.zeros((3, 4)), np.zeros((3, 2))), {}, ValueError, "q must have shape"),
        (
            (np.zeros((2, 3, 4)), np.zeros((3, 3, 4)), np.zeros((3, 3, 2))),
            {},
            ValueError,
            "broadcast",
        ),
        ((np.zeros((3, 4)),) * 3, {"causal": True, "chunk_size": 0}, ValueError, "chunk_size"),
        ((np.zeros((3, 4)),) * 3, {"chunk_size": 2.0}, TypeError, "chunk_size"),
        ((np.zeros((3, 4)),) * 3, {"chunk_size": True}, TypeError, "chunk_size"),
        ((np.zeros((3, 4)),) * 3, {"causal": 1}, TypeError, "causal"),
        (
            (np.full((3, 4), np.nan), np.zeros((3, 4)), np.zeros((3, 4))),
            {},
            ValueError,
            "q of shape .* contains nan",
        ),
        ((np.array([["a"]], dtype=object),) * 3, {}, TypeError, "q must be a real numeric"),
    ],
)
def test_errors_name_the_argument(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        linear.linear_attention(*args, **kwargs)
