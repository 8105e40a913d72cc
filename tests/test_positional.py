"""Tests for attnbook.positional (NumPy) and attnbook.layers.apply_rope (torch).

References: hand-derived RoPE values (issue 3), the paper's formula for the sinusoidal encoding
evaluated entry by entry, rotation-matrix algebra, and the NumPy/torch pair against each other.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import layers, positional
from attnbook.positional import apply_rope, rope_frequencies, sinusoidal_encoding
from attnbook.testing import assert_close, assert_low_precision_close

X = np.array([1.0, 2.0, 3.0, 4.0])
INTERLEAVED_POS1 = [-1.1426397, 1.9220756, 2.9598507, 4.0297995]
HALF_SPLIT_POS1 = [-1.9841106, 1.9599007, 2.4623779, 4.0197997]


# --- sinusoidal -------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [1, 2, 5, 6, 7])
def test_sinusoidal_matches_paper_formula_entrywise(d_model):
    pe = sinusoidal_encoding(6, d_model)
    assert pe.shape == (6, d_model) and pe.dtype == np.float64
    for pos in range(6):
        for dim in range(d_model):
            i = dim // 2
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, dim] - expected) < 1e-12


def test_sinusoidal_odd_ends_on_sine_and_row0():
    pe = sinusoidal_encoding(3, 5)
    assert_close(pe[0], [0, 1, 0, 1, 0], atol=0, rtol=0)
    # last column (dim 4, i = 2): sin(pos / 10000^(4/5))
    assert_close(pe[:, 4], np.sin(np.arange(3) / 10000**0.8), atol=1e-15, rtol=0)


def test_sinusoidal_relative_position_is_linear_map():
    # PE[pos + k] is a fixed rotation of PE[pos] (Vaswani et al. 2017, section 3.5)
    d, k = 8, 3
    pe = sinusoidal_encoding(20, d)
    w = 10000 ** (-np.arange(0, d, 2) / d)
    for pos in (0, 5, 11):
        for i, wi in enumerate(w):
            c, s = math.cos(k * wi), math.sin(k * wi)
            sin_p, cos_p = pe[pos, 2 * i], pe[pos, 2 * i + 1]
            assert abs(pe[pos + k, 2 * i] - (sin_p * c + cos_p * s)) < 1e-12
            assert abs(pe[pos + k, 2 * i + 1] - (cos_p * c - sin_p * s)) < 1e-12


def test_sinusoidal_bad_args():
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding(4, 0)
    with pytest.raises(TypeError, match="seq_len"):
        sinusoidal_encoding(4.0, 8)


# --- RoPE hand values ---------------------------------------------------------------------------


def test_rope_hand_values_interleaved_and_half_split():
    pos = np.array([1])
    assert_close(apply_rope(X[None], pos, interleaved=True)[0], INTERLEAVED_POS1, atol=5e-8, rtol=0)
    assert_close(apply_rope(X[None], pos)[0], HALF_SPLIT_POS1, atol=5e-8, rtol=0)


def test_rope_pairings_differ_by_permutation_0213():
    perm = [0, 2, 1, 3]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4))
    pos = np.arange(5) * 7
    half = apply_rope(x, pos)
    inter = apply_rope(x[:, perm], pos, interleaved=True)[:, perm]
    assert_close(half, inter, atol=1e-14, rtol=0)
    # the hand values: half-split of x equals interleaved of x[perm], permuted back
    assert_close(
        apply_rope(X[perm][None], np.array([1]), interleaved=True)[0][perm],
        HALF_SPLIT_POS1,
        atol=5e-8,
        rtol=0,
    )


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_position_zero_is_identity(interleaved):
    x = np.random.default_rng(1).normal(size=(2, 3, 8))
    out = apply_rope(x, np.zeros(3, dtype=int), interleaved=interleaved)
    assert_close(out, x, atol=0, rtol=0)


def test_rope_cached_key_at_position_3():
    # one frequency (D = 2, theta_0 = 1): the key at position 3 is [cos 3, sin 3], not [1, 0]
    k = apply_rope(np.array([[1.0, 0.0]]), np.array([3]))
    assert_close(k[0], [math.cos(3), math.sin(3)], atol=1e-15, rtol=0)
    assert abs(k[0, 0] - 1.0) > 1.0
    kt = layers.apply_rope(torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.tensor([3]))
    assert_close(kt[0], [math.cos(3), math.sin(3)], atol=1e-15, rtol=0)


def test_rope_frequencies():
    assert_close(rope_frequencies(4), [1.0, 0.01], atol=1e-15, rtol=0)
    with pytest.raises(ValueError, match="even"):
        rope_frequencies(5)


# --- RoPE properties ---------------------------------------------------------------------------


@settings(max_examples=25)
@given(
    m=st.integers(0, 200),
    n=st.integers(0, 200),
    shift=st.integers(0, 500),
    interleaved=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_rope_scores_depend_only_on_m_minus_n(m, n, shift, interleaved, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(1, 8)), rng.normal(size=(1, 8))
    s1 = (
        apply_rope(q, np.array([m]), interleaved=interleaved)
        @ apply_rope(k, np.array([n]), interleaved=interleaved).T
    )
    s2 = (
        apply_rope(q, np.array([m + shift]), interleaved=interleaved)
        @ apply_rope(k, np.array([n + shift]), interleaved=interleaved).T
    )
    assert abs(s1.item() - s2.item()) < 1e-9


def test_rope_preserves_norm():
    x = np.random.default_rng(3).normal(size=(4, 6, 16))
    out = apply_rope(x, np.arange(6) * 13, base=500000.0)
    assert_close(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), atol=1e-12, rtol=0)


@pytest.mark.parametrize("interleaved", [False, True])
def test_torch_rope_matches_numpy(interleaved):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 5, 8))
    pos = np.array([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])  # (B, T): per-row offsets
    expected = apply_rope(x, pos[:, None, :], interleaved=interleaved)
    got = layers.apply_rope(torch.from_numpy(x), torch.from_numpy(pos), interleaved=interleaved)
    assert_close(got, expected, atol=1e-12, rtol=0)
    got32 = layers.apply_rope(
        torch.from_numpy(x).float(), torch.from_numpy(pos), interleaved=interleaved
    )
    assert got32.dtype == torch.float32
    assert_close(got32, expected, atol=1e-5, rtol=0)


# --- errors --------------------------------------------------------------------------------------


def test_rope_positions_shorter_than_sequence():
    with pytest.raises(ValueError, match=r"positions of shape \(3,\).*4.*\(2, 4, 8\)"):
        apply_rope(np.zeros((2, 4, 8)), np.arange(3))
    with pytest.raises(ValueError, match=r"positions of shape \(3,\)"):
        layers.apply_rope(torch.zeros(2, 4, 8), torch.arange(3))


def test_rope_bad_inputs():
    with pytest.raises(ValueError, match="even"):
        apply_rope(np.zeros((4, 5)), np.arange(4))
    with pytest.raises(TypeError, match="integer"):
        apply_rope(np.zeros((4, 4)), np.arange(4.0))
    with pytest.raises(ValueError, match="broadcast"):
        apply_rope(np.zeros((2, 3, 4, 4)), np.zeros((5, 4), dtype=int))


# --- the cores, against independent references ----------------------------------------------


@pytest.mark.parametrize("d_model,base", [(1, 10000.0), (6, 10000.0), (7, 100.0)])
def test_sinusoidal_core_matches_paper_formula_entrywise(d_model, base):
    pe = positional.sinusoidal_encoding_core(5, d_model, base)
    assert pe.shape == (5, d_model) and pe.dtype == np.float64
    for pos in range(5):
        for dim in range(d_model):
            angle = pos / base ** (2 * (dim // 2) / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, dim] - expected) < 1e-12


def _rotate_pairs_float64(x, pos, pairs, base=10000.0):
    """Reference: the 2x2 rotation R(pos * theta_r) applied to each pair r, written out."""
    D = x.shape[-1]
    out = np.array(x, dtype=np.float64)
    for t, m in enumerate(pos):
        for i, (j1, j2) in enumerate(pairs):
            a = m * base ** (-2 * i / D)
            rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
            out[..., t, [j1, j2]] = x[..., t, [j1, j2]] @ rot.T
    return out


@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_rope_core_matches_rotation_matrices(interleaved):
    rng = np.random.default_rng(10)
    x = rng.normal(size=(2, 4, 8))
    pos = np.array([0, 3, 17, 250])
    pairs = [(2 * i, 2 * i + 1) if interleaved else (i, i + 4) for i in range(4)]
    expected = _rotate_pairs_float64(x, pos, pairs)
    cos, sin = positional.rope_angles(pos, 8)
    got = positional.apply_rope_core(x, cos, sin, interleaved)
    assert got.shape == x.shape
    assert_close(got, expected, atol=1e-12, rtol=0)
    assert_close(apply_rope(x, pos, interleaved=interleaved), expected, atol=1e-12, rtol=0)


def test_apply_rope_core_hand_values():
    # D = 4 at position 1: theta = [1, 0.01]; the pairs (a, b) -> (a cos - b sin, a sin + b cos)
    cos, sin = np.cos([1.0, 0.01]), np.sin([1.0, 0.01])
    assert_close(positional.apply_rope_core(X, cos, sin, True), INTERLEAVED_POS1, atol=5e-8, rtol=0)
    assert_close(positional.apply_rope_core(X, cos, sin), HALF_SPLIT_POS1, atol=5e-8, rtol=0)


def test_rope_angles_are_positions_times_frequencies():
    cos, sin = positional.rope_angles(np.array([[0, 2], [5, 7]]), 4, base=100.0)
    angles = np.array([[[0, 0], [2, 0.2]], [[5, 0.5], [7, 0.7]]])  # pos * 100^(-2i/4)
    assert cos.shape == (2, 2, 2)
    assert_close(cos, np.cos(angles), atol=1e-15, rtol=0)
    assert_close(sin, np.sin(angles), atol=1e-15, rtol=0)


# --- low precision ------------------------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_rope_float16_error_within_twice_plain(interleaved):
    rng = np.random.default_rng(11)
    x64 = rng.normal(size=(3, 6, 16))
    pos = np.array([0, 1, 1000, 5000, 20000, 60000])
    exact = apply_rope(x64, pos, interleaved=interleaved)
    x = x64.astype(np.float16)
    got = apply_rope(x, pos, interleaved=interleaved)
    assert got.dtype == np.float16 and np.isfinite(got).all()
    theta = rope_frequencies(16).astype(np.float16)
    angles = pos.astype(np.float16)[:, None] * theta  # plain: angles in float16
    plain = positional.apply_rope_core(x, np.cos(angles), np.sin(angles), interleaved)
    assert_low_precision_close(got, exact, plain=plain, floor=np.finfo(np.float16).eps)
    err = np.abs(got.astype(np.float64) - exact).max()
    # and as good as rounding the exact answer to float16 allows (input rounding included)
    assert err <= 4 * np.finfo(np.float16).eps * np.abs(exact).max()


def test_apply_rope_keeps_float32():
    x = np.random.default_rng(12).normal(size=(3, 4)).astype(np.float32)
    got = apply_rope(x, np.arange(3) * 1000)
    assert got.dtype == np.float32
    assert_close(got, apply_rope(x.astype(np.float64), np.arange(3) * 1000), atol=1e-5, rtol=0)


# --- positions shapes (moved from test_robustness: A6, A7) ------------------------------------


def test_numpy_and_torch_rope_read_bt_positions_per_batch_row():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 3, 5, 4))  # B == H == 3: the ambiguous case
    pos = np.array([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2], [0, 0, 1, 2, 3]])
    expected = np.stack([positional.apply_rope(x[b], pos[b]) for b in range(3)])  # per row
    assert_close(positional.apply_rope(x, pos), expected, atol=1e-12, rtol=0)
    got = layers.apply_rope(torch.from_numpy(x), torch.from_numpy(pos))
    assert_close(got, expected, atol=1e-12, rtol=0)


def test_positions_may_not_enlarge_the_output():
    with pytest.raises(ValueError, match="enlarging"):
        positional.apply_rope(np.zeros((2, 3, 5, 4)), np.zeros((4, 1, 1, 5), int))
    with pytest.raises(ValueError, match="enlarging"):
        layers.apply_rope(torch.zeros(2, 3, 5, 4), torch.zeros(4, 1, 1, 5, dtype=torch.long))


# --- arguments: the one check layer ------------------------------------------------------------


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: sinusoidal_encoding(4, 8, base=1.0), ValueError, "base"),
        (lambda: sinusoidal_encoding(4, 8, base=np.inf), ValueError, "base"),
        (lambda: sinusoidal_encoding(4, 8, base="1e4"), TypeError, "base"),
        (lambda: sinusoidal_encoding(4, 8, base=True), TypeError, "base"),
        (lambda: sinusoidal_encoding(-1, 8), ValueError, "seq_len"),
        (lambda: rope_frequencies(2.0), TypeError, "head_dim"),
        (lambda: rope_frequencies(0), ValueError, "head_dim"),
        (
            lambda: apply_rope(np.zeros((4, 4)), np.arange(4), interleaved=1),
            TypeError,
            "interleaved",
        ),
        (lambda: apply_rope(np.array([["a", "b"]]), np.arange(1)), TypeError, "x"),
        (lambda: apply_rope(np.zeros(4), np.arange(1)), ValueError, r"\(4,\)"),
        (
            lambda: apply_rope(np.zeros((4, 4)), np.array([0, 1, -2, 3])),
            ValueError,
            "positions must be >= 0",
        ),
        (lambda: apply_rope(np.zeros((4, 4)), np.ones(4, dtype=bool)), TypeError, "positions"),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_scalar_arrays_and_numpy_integers_are_accepted():
    expected = sinusoidal_encoding(4, 6, base=100.0)
    assert_close(
        sinusoidal_encoding(np.int64(4), np.array(6), base=np.array(100.0)),
        expected,
        atol=0,
        rtol=0,
    )
    # a boolean x is read as 0/1 numbers (the one rule: as_float_array)
    got = apply_rope(np.ones((2, 4), dtype=bool), np.arange(2))
    assert got.dtype == np.float64
    assert_close(got, apply_rope(np.ones((2, 4)), np.arange(2)), atol=0, rtol=0)


# --- the position explorer's computations -----------------------------------------------------


@pytest.mark.parametrize("pair, base", [(0, 10000.0), (3, 100.0), (7, 500000.0)])
def test_rope_pair_path_is_the_unit_circle_at_p_theta(pair, base):
    # Hand: e_{2r} rotated at position p has pair r = (cos p theta_r, sin p theta_r).
    p = np.array([0, 1, 2, 5, 40])
    theta = base ** (-2 * pair / 16)
    want = np.stack([np.cos(p * theta), np.sin(p * theta)], axis=-1)
    assert_close(positional.rope_pair_path(p, pair, 16, base=base), want, atol=1e-12, rtol=0)


def test_rope_offset_scores_is_the_mean_cosine():
    # Hand: each pair of the all-ones q, k adds (R_d [1, 1]) . [1, 1] = 2 cos(d theta_r).
    d = np.arange(65)
    thetas = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    want = (2 / 16) * np.cos(d[:, None] * thetas).sum(-1)
    got = positional.rope_offset_scores(d, 16)
    assert_close(got, want, atol=1e-12, rtol=0)
    assert got[0] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: positional.rope_pair_path([0, 1], 8, 16), ValueError, "pair"),
        (lambda: positional.rope_pair_path([0, 1], 1.0, 16), TypeError, "pair"),
        (lambda: positional.rope_pair_path([[0, 1]], 1, 16), ValueError, "positions"),
        (lambda: positional.rope_pair_path([-1], 1, 16), ValueError, "positions"),
        (lambda: positional.rope_pair_path([0], 1, 15), ValueError, "head_dim"),
        (lambda: positional.rope_offset_scores([0.5], 16), TypeError, "offsets"),
        (lambda: positional.rope_offset_scores([0], 16, base=1.0), ValueError, "base"),
    ],
)
def test_explorer_computations_refuse_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_rope_positions_that_would_enlarge_x_get_one_message_in_numpy_and_torch():
    x = np.zeros((2, 3, 4))  # (B, L, D): (B, L) positions of another batch enlarge it
    pos = np.zeros((5, 3), dtype=np.int64)
    msg = r"positions of shape \(5, 3\) do not broadcast to x.shape\[:-1\] = \(2, 3\)"
    with pytest.raises(ValueError, match=msg):
        apply_rope(x, pos)
    with pytest.raises(ValueError, match=msg):
        layers.apply_rope(torch.zeros(2, 3, 4), torch.from_numpy(pos))
