"""Tests for attnbook.checks: one behaviour per kind of argument (TypeError for the wrong kind,
ValueError for a wrong value)."""

import math

import numpy as np
import pytest
import torch

from attnbook import checks


def test_check_strings():
    assert checks.check_strings(("a", "b"), "sentences") == ["a", "b"]
    assert checks.check_strings([], "sentences") == []
    with pytest.raises(TypeError, match="sentences must be a list"):
        checks.check_strings("a sentence", "sentences")
    with pytest.raises(TypeError, match=r"sentences\[1\] must be a string"):
        checks.check_strings(["a", 2], "sentences")


def test_check_features():
    x = torch.zeros(2, 5, 3)
    assert checks.check_features(x, "x", 3, ndim=3) is x
    assert checks.check_features(torch.zeros(3), "x", 3) is not None
    with pytest.raises(ValueError, match=r"input_size=4.*\(2, 5, 3\)"):
        checks.check_features(x, "x", 4, size_name="input_size")
    with pytest.raises(ValueError, match="3-D"):
        checks.check_features(torch.zeros(5, 3), "x", 3, ndim=3)
    with pytest.raises(ValueError, match="last dimension"):
        checks.check_features(torch.tensor(1.0), "x", 1)
    with pytest.raises(TypeError, match="floating"):
        checks.check_features(torch.zeros(2, 3, dtype=torch.long), "x", 3)
    with pytest.raises(TypeError, match="Tensor"):
        checks.check_features(np.zeros((2, 3)), "x", 3)


def test_check_token_ids():
    got = checks.check_token_ids([[0, 4], [2, 1]], "ids", vocab_size=5)
    assert isinstance(got, torch.Tensor) and got.tolist() == [[0, 4], [2, 1]]
    assert checks.check_token_ids(np.zeros((1, 0), np.int64)).shape == (1, 0)
    with pytest.raises(TypeError, match="ids must be an integer tensor"):
        checks.check_token_ids(torch.tensor([[1.0]]))
    with pytest.raises(TypeError, match="ids"):
        checks.check_token_ids([[True]])
    with pytest.raises(ValueError, match=r"src must be \(B, T\)"):
        checks.check_token_ids(torch.tensor([1, 2]), "src")
    for bad in ([[5]], [[-1]]):  # at the top and below the bottom of [0, 5)
        with pytest.raises(ValueError, match="vocab_size=5"):
            checks.check_token_ids(bad, vocab_size=5)
    assert checks.check_token_ids([[10**6]]).shape == (1, 1)  # no vocab_size: only >= 0


# --- scalars -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [2.5, True, np.bool_(True), 2.0, "3", None, np.array(2.0)])
def test_check_int_wrong_kind_is_type_error(bad):
    with pytest.raises(TypeError, match="n must be an integer"):
        checks.check_int(bad, "n")


def test_check_int_accepts_numpy_and_0d_integers():
    assert checks.check_int(np.int64(3), "n") == 3
    assert checks.check_int(np.array(3), "n") == 3
    assert checks.check_int(torch.tensor(3), "n") == 3
    assert type(checks.check_int(np.int32(3), "n")) is int


def test_check_int_bounds_are_value_errors():
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        checks.check_int(-1, "n")
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        checks.check_int(0, "n", 1)
    with pytest.raises(ValueError, match="n must be <= 4, got 5"):
        checks.check_int(5, "n", 0, 4)
    assert checks.check_int(-7, "n", None) == -7
    assert checks.check_int(4, "n", 0, 4) == 4  # bounds are inclusive


@pytest.mark.parametrize("bad", ["3", True, None, 1j, np.array([0.5])])
def test_check_real_wrong_kind_is_type_error(bad):
    with pytest.raises(TypeError, match="x must be a real number"):
        checks.check_real(bad, "x")


def test_check_real_accepts_0d_arrays_and_tensors():
    assert checks.check_real(np.array(0.5), "x") == 0.5
    assert checks.check_real(torch.tensor(0.25), "x") == 0.25
    assert checks.check_real(3, "x") == 3.0 and type(checks.check_real(3, "x")) is float


def test_check_real_values():
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="x must be finite"):
            checks.check_real(bad, "x")
    assert checks.check_real(float("inf"), "x", allow_inf=True) == float("inf")
    with pytest.raises(ValueError, match="x must be >= 0"):
        checks.check_real(-0.1, "x", minimum=0)
    assert checks.check_real(0.0, "x", minimum=0) == 0.0
    with pytest.raises(ValueError, match="x must be > 0"):
        checks.check_real(0.0, "x", minimum=0, strict=True)
    with pytest.raises(ValueError, match="x must be < 1"):
        checks.check_real(1.0, "x", maximum=1, strict=True)
    with pytest.raises(ValueError, match="x must be <= 1"):
        checks.check_real(1.5, "x", maximum=1)


def test_check_bool():
    assert checks.check_bool(np.bool_(True), "flag") is True
    assert checks.check_bool(np.array(False), "flag") is False
    assert checks.check_bool(torch.tensor(True), "flag") is True
    for bad in (0, 1, "yes", None, np.array([True])):
        with pytest.raises(TypeError, match="flag must be a bool"):
            checks.check_bool(bad, "flag")


def test_check_choice():
    assert checks.check_choice("rope", "positional", ["rope", "learned"]) == "rope"
    for bad in ("ROPE", None, True, np.array(["rope", "rope"])):
        with pytest.raises(ValueError, match="positional must be one of"):
            checks.check_choice(bad, "positional", ["rope", "learned"])


def test_check_seed_and_rng():
    assert checks.check_seed(0) == 0
    with pytest.raises(ValueError, match="seed must be >= 0"):
        checks.check_seed(-1)
    with pytest.raises(TypeError, match="seed must be an integer"):
        checks.check_seed(1.0)
    assert checks.check_seed(2**64 - 1) == 2**64 - 1  # torch.manual_seed's largest
    with pytest.raises(ValueError, match="seed must be <= 18446744073709551615"):
        checks.check_seed(2**64)
    gen = np.random.default_rng(1)
    assert checks.check_rng(gen) is gen
    assert checks.check_rng(5).integers(1000) == np.random.default_rng(5).integers(1000)
    assert checks.check_rng(np.array(5)).integers(1000) == np.random.default_rng(5).integers(1000)
    assert isinstance(checks.check_rng(None), np.random.Generator)
    for bad in (2.5, True, "x"):
        with pytest.raises(TypeError, match="rng must be"):
            checks.check_rng(bad)
    with pytest.raises(ValueError, match="rng seed must be >= 0"):
        checks.check_rng(-1)


def test_check_axis():
    assert checks.check_axis(-1, 3, (2, 3, 4)) == -1
    assert checks.check_axis(np.int64(2), 3, (2, 3, 4)) == 2
    for bad in (1.0, True, "0"):
        with pytest.raises(TypeError, match="axis must be an integer"):
            checks.check_axis(bad, 3, (2, 3, 4))
    for bad in (3, -4):
        with pytest.raises(ValueError, match=r"out of range for x of shape \(2, 3, 4\)"):
            checks.check_axis(bad, 3, (2, 3, 4))


# --- arrays --------------------------------------------------------------------------------


def test_as_float_array():
    f16 = np.ones(3, np.float16)
    assert checks.as_float_array(f16, "x") is f16  # float dtype kept, no copy
    assert checks.as_float_array([1, 2], "x").dtype == np.float64
    assert checks.as_float_array(np.array([True]), "x").dtype == np.float64
    t = torch.ones(2, dtype=torch.bfloat16, requires_grad=True)
    assert checks.as_float_array(t, "x").dtype == np.float32
    for bad in (np.array(["a"]), np.array([1 + 2j]), [object()]):
        with pytest.raises(TypeError, match="x must be"):
            checks.as_float_array(bad, "x")


def test_check_finite():
    checks.check_finite(np.ones(2), "x")
    for bad in (np.array([1.0, np.nan]), torch.tensor([np.inf])):
        with pytest.raises(ValueError, match="x of shape .* contains nan or inf"):
            checks.check_finite(bad, "x")


def test_check_qkv():
    q, k, v, batch = checks.check_qkv(np.ones((2, 1, 3, 4)), np.ones((3, 5, 4)), np.ones((1, 5, 6)))
    assert batch == (2, 3) and q.dtype == np.float64
    with pytest.raises(ValueError, match="q has head_dim 64 but k has 32"):
        checks.check_qkv(np.ones((2, 64)), np.ones((3, 32)), np.ones((3, 8)))
    with pytest.raises(ValueError, match="k has 3 keys but v has 4"):
        checks.check_qkv(np.ones((2, 8)), np.ones((3, 8)), np.ones((4, 8)))
    with pytest.raises(ValueError, match=r"v must have shape \(\.\.\., seq, dim\)"):
        checks.check_qkv(np.ones((2, 8)), np.ones((3, 8)), np.ones(3))
    with pytest.raises(ValueError, match="do not broadcast"):
        checks.check_qkv(np.ones((2, 3, 4)), np.ones((3, 3, 4)), np.ones((3, 3, 4)))
    with pytest.raises(ValueError, match="k of shape"):
        checks.check_qkv(np.ones((2, 4)), np.full((3, 4), np.nan), np.ones((3, 4)))
    with pytest.raises(TypeError, match="q must be"):
        checks.check_qkv(np.array([["a"]]), np.ones((3, 4)), np.ones((3, 4)))


def test_check_scale():
    assert checks.check_scale(None, 16) == 0.25
    assert checks.check_scale(None, 0) == 1.0
    assert checks.check_scale(np.array(0.5), 16) == 0.5
    with pytest.raises(TypeError, match="scale"):
        checks.check_scale("0.5", 16)
    with pytest.raises(ValueError, match="scale must be finite"):
        checks.check_scale(float("inf"), 16)


def test_check_broadcast_and_keep_mask():
    checks.check_broadcast(np.ones((2, 1, 1, 5)), "mask", (2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 2, 4, 5\) does not broadcast"):
        checks.check_broadcast(np.ones((2, 2, 4, 5)), "mask", (2, 3, 4, 5))
    with pytest.raises(ValueError, match="does not broadcast"):  # would enlarge the scores
        checks.check_broadcast(np.ones((2, 4, 5)), "mask", (4, 5))
    keep = checks.check_keep_mask([[True, False]], "mask", (3, 2))
    assert keep.dtype == bool
    for bad in (np.ones((3, 2)), np.ones((3, 2), int)):
        with pytest.raises(TypeError, match="mask must be a boolean keep-mask"):
            checks.check_keep_mask(bad, "mask", (3, 2))
    with pytest.raises(ValueError, match="broadcast"):
        checks.check_keep_mask(np.ones((3, 3), bool), "mask", (3, 2))


def test_check_int_array():
    assert checks.check_int_array([], "ids").dtype == np.int64
    assert checks.check_int_array(np.array([3, 0]), "ids", ndim=1).tolist() == [3, 0]
    for bad in ([1.0, 2.0], [True]):
        with pytest.raises(TypeError, match="ids must hold integers"):
            checks.check_int_array(bad, "ids")
    with pytest.raises(ValueError, match="ids must be >= 0, got min -2"):
        checks.check_int_array([1, -2], "ids")
    with pytest.raises(ValueError, match="ids must be 1-D"):
        checks.check_int_array([[1]], "ids", ndim=1)


def test_check_int_array_refuses_uint64_beyond_int64():
    # 2**63 as int64 wraps to -2**63: callers that cast would see a negative value.
    top = np.iinfo(np.int64).max
    assert checks.check_int_array(np.array([top], np.uint64), "ids").tolist() == [top]
    with pytest.raises(
        ValueError,
        match=r"ids must be <= 9223372036854775807 \(int64\), "
        r"got max 9223372036854775808",
    ):
        checks.check_int_array(np.array([1, 2**63], np.uint64), "ids")


def test_check_text_refuses_lone_surrogates():
    assert checks.check_text("héllo ✓", "sentence") == "héllo ✓"
    with pytest.raises(TypeError, match="sentence must be a string, got None"):
        checks.check_text(None, "sentence")
    with pytest.raises(
        ValueError,
        match=r"sentence holds a lone surrogate '\\ud800' at "
        r"index 1",
    ):
        checks.check_text("a\ud800", "sentence")
    with pytest.raises(ValueError, match=r"sentences\[1\] holds a lone surrogate"):
        checks.check_strings(["ok", "\udfff"], "sentences")


# --- torch ---------------------------------------------------------------------------------


def test_check_int_tensor_converts_wide_unsigned_ids_to_int64():
    import torch

    for arr in (
        np.array([[1, 2]], np.uint16),
        np.array([[1, 2]], np.uint32),
        np.array([[1, 2]], np.uint64),
    ):
        for values in (arr, torch.from_numpy(arr)):
            out = checks.check_int_tensor(values, "ids")
            assert out.dtype == torch.int64 and out.tolist() == [[1, 2]]
    with pytest.raises(ValueError, match=r"ids must be <= 9223372036854775807"):
        checks.check_int_tensor(np.array([2**63], np.uint64), "ids")
    with pytest.raises(ValueError, match=r"ids must lie in \[0, vocab_size=3\)"):
        checks.check_token_ids(np.array([[1, 7]], np.uint64), "ids", 3)


def test_check_tensor_and_input_dtype():
    x = torch.zeros(2, 3)
    assert checks.check_tensor(x, "x", ndim=2) is x
    assert checks.check_tensor(torch.zeros(2, dtype=torch.long), "x", floating=False) is not None
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        checks.check_tensor(np.zeros(2), "x")
    with pytest.raises(TypeError, match="floating-point"):
        checks.check_tensor(torch.zeros(2, dtype=torch.long), "x")
    with pytest.raises(ValueError, match="x must be 3-D"):
        checks.check_tensor(x, "x", ndim=3)
    weight = torch.zeros(3, dtype=torch.float64)
    checks.check_input_dtype(torch.zeros(3, dtype=torch.float64), weight)
    with pytest.raises(TypeError, match="x has dtype torch.float32 but"):
        checks.check_input_dtype(x, weight)


def test_check_int_tensor_and_positions():
    assert checks.check_int_tensor([1, 2], "pos").dtype == torch.int64
    for bad in (torch.tensor([1.0]), torch.tensor([True]), np.array([0.5])):
        with pytest.raises(TypeError, match="pos must be an integer tensor"):
            checks.check_int_tensor(bad, "pos")
    with pytest.raises(ValueError, match="pos must be >= 0"):
        checks.check_int_tensor([-1], "pos")
    got = checks.check_positions(np.arange(4), 4, (1, 4, 8))
    assert isinstance(got, np.ndarray)
    assert isinstance(checks.check_positions(torch.arange(4), 4, (1, 4, 8)), torch.Tensor)
    with pytest.raises(ValueError, match=r"positions of shape \(3,\) must end in .* 4"):
        checks.check_positions(np.arange(3), 4, (1, 4, 8))
    with pytest.raises(TypeError, match="positions"):
        checks.check_positions(np.arange(4.0), 4, (1, 4, 8))


@pytest.mark.parametrize("check", [checks.check_int_tensor, checks.check_int_array])
def test_int_checks_read_python_lists_entry_by_entry(check):
    # an empty list is an empty int64 array (NumPy reads [] as float64)
    assert check([], "positions").dtype in (torch.int64, np.int64)
    assert tuple(check([[]], "positions").shape) == (1, 0)
    # a Python int beyond int64 is the int64-limit error (not "got list" / dtype object)
    with pytest.raises(ValueError, match=r"positions must be <= 9223372036854775807 \(int64\), "):
        check([0, 1, 2**70], "positions")
    with pytest.raises(ValueError, match=r"positions must be >= 0, got min -1 \(shape \(2,\)\)"):
        check([-1, 2**63], "positions")  # NumPy would read it as float64
    with pytest.raises(ValueError, match=r"positions must be >= -9223372036854775808 \(int64\)"):
        check([-(2**70), 1], "positions", None)
    # a bool among ints is refused, as a bool array is (NumPy would read it as 1)
    for bad in ([0, True, 2], (np.False_, 1), [[0, 1], [True, 3]]):
        with pytest.raises(TypeError, match=r"positions must hold integers, got the bool"):
            check(bad, "positions")
    assert check([0, 1, 2], "positions").tolist() == [0, 1, 2]


def test_check_positions_takes_an_empty_list_for_no_tokens():
    for positions in ([], np.array([], dtype=np.int64), torch.zeros(0, dtype=torch.long)):
        got = checks.check_positions(positions, 0, (1, 0, 8), batch=True, increasing=True)
        assert got.shape == (0,)
    got = checks.check_positions(checks.check_int_tensor([], "positions"), 0, (1, 0, 8))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.int64


_X = (2, 3, 8)  # x of shape (B, L, d) = (2, 3, 8)


@pytest.mark.parametrize(
    "positions, kwargs, error, match",
    [
        ([0.0, 1.0, 2.0], {}, TypeError, r"positions must hold integers, got dtype float64"),
        ([0, -1, 2], {}, ValueError, r"positions must be >= 0, got min -1 \(shape \(3,\)\)"),
        (
            [0, 1],
            {},
            ValueError,
            r"positions of shape \(2,\) must end in the sequence length 3 "
            r"\(x has shape \(2, 3, 8\)\)",
        ),
        (
            np.zeros((2, 1, 3), dtype=np.int64),
            {"batch": True},
            ValueError,
            r"positions must be \(L,\) or \(B, L\); got shape \(2, 1, 3\) "
            r"\(x has shape \(2, 3, 8\)\)",
        ),
        (
            np.zeros((3, 3), dtype=np.int64),
            {"batch": True},
            ValueError,
            r"positions of shape \(3, 3\) do not match batch 2 of x \(shape \(2, 3, 8\)\)",
        ),
        (
            np.zeros((2, 3), dtype=np.int64),
            {"batch": True, "shared": True},
            ValueError,
            r"positions must be \(L,\) = \(3,\), one position per token shared by the "
            r"batch; got shape \(2, 3\) \(x has shape \(2, 3, 8\)\)",
        ),
        (
            np.zeros((1, 3), dtype=np.int64),
            {"shared": True},
            ValueError,
            r"positions must be \(L,\) = \(3,\), .* got shape \(1, 3\)",
        ),
        (  # a cache stores tokens in order: (L,) positions strictly increase
            [2, 1, 0],
            {"increasing": True},
            ValueError,
            r"positions must strictly increase \(one position per token, in order\): "
            r"positions\[1\] = 1 comes after positions\[0\] = 2; got positions = "
            r"\[2, 1, 0\] \(x has shape \(2, 3, 8\)\)",
        ),
        (
            [0, 0, 1],
            {"batch": True, "increasing": True},
            ValueError,
            r"positions must strictly increase .*: positions\[1\] = 0 comes after "
            r"positions\[0\] = 0; got positions = \[0, 0, 1\]",
        ),
        (  # per row, a repeat (left padding) passes, a decrease does not
            [[0, 0, 1], [2, 0, 1]],
            {"batch": True, "increasing": True},
            ValueError,
            r"positions must never decrease within a row .*: positions\[1, 1\] = 0 comes "
            r"after positions\[1, 0\] = 2; got positions\[1\] = \[2, 0, 1\] \(x has shape "
            r"\(2, 3, 8\)\)",
        ),
    ],
)
@pytest.mark.parametrize("as_tensor", [False, True])
def test_check_positions_refuses_with_the_name_and_shapes(
    positions, kwargs, error, match, as_tensor
):
    # one rule for every `positions` argument: NumPy and torch get the same message
    if as_tensor:
        positions = torch.as_tensor(np.asarray(positions))
        match = match.replace("must hold integers, got dtype float64", "must be an integer")
    with pytest.raises(error, match=match):
        checks.check_positions(positions, 3, _X, **kwargs)


def test_check_positions_accepts_l_and_per_row_b_l():
    for kwargs in ({}, {"batch": True}, {"shared": True}, {"batch": True, "shared": True}):
        got = checks.check_positions(torch.arange(3), 3, _X, **kwargs)
        assert got.tolist() == [0, 1, 2]
    per_row = torch.tensor([[0, 1, 2], [5, 6, 7]])
    assert checks.check_positions(per_row, 3, _X, batch=True) is per_row
    # without batch, any leading dims (NumPy's (..., L)) pass
    for kwargs in ({"increasing": True}, {"batch": True, "shared": True, "increasing": True}):
        assert checks.check_positions([0, 4, 9], 3, _X, **kwargs).tolist() == [0, 4, 9]
    left_padded = torch.tensor([[0, 0, 0], [0, 1, 2]])  # positions_from_attention_mask's pads
    assert checks.check_positions(left_padded, 3, _X, batch=True, increasing=True) is left_padded
    # out of order is refused only where asked for (RoPE, embeddings: any positions)
    assert checks.check_positions([2, 1, 0], 3, _X, batch=True).tolist() == [2, 1, 0]
    assert checks.check_positions(np.zeros((4, 2, 3), dtype=np.int64), 3, _X).shape == (4, 2, 3)


def test_check_qkv_tensors():
    q, k = torch.zeros(1, 4, 3, 8), torch.zeros(1, 2, 5, 8)
    assert checks.check_qkv_tensors(q, k, k)[0] is q
    with pytest.raises(TypeError, match="torch.Tensor"):
        checks.check_qkv_tensors(q.numpy(), k, k)
    with pytest.raises(TypeError, match="floating-point"):
        checks.check_qkv_tensors(q.long(), k, k)
    with pytest.raises(TypeError, match="share a dtype"):
        checks.check_qkv_tensors(q.double(), k, k)
    with pytest.raises(ValueError, match=r"shape \(B, H, seq, head_dim\)"):
        checks.check_qkv_tensors(q[0], k, k)
    with pytest.raises(ValueError, match="same shape"):
        checks.check_qkv_tensors(q, k, k[:, :, :4])
    with pytest.raises(ValueError, match="batch 1 but k has 2"):
        checks.check_qkv_tensors(q, k.expand(2, -1, -1, -1), k.expand(2, -1, -1, -1))
    with pytest.raises(ValueError, match="head_dim 8 but k has 4"):
        checks.check_qkv_tensors(q, k[..., :4], k[..., :4])
    with pytest.raises(ValueError, match="n_kv_heads 3 must divide n_heads 4"):
        checks.check_qkv_tensors(q, k[:, :1].expand(1, 3, 5, 8), k[:, :1].expand(1, 3, 5, 8))
    bad = k.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="v of shape .* contains nan or inf"):
        checks.check_qkv_tensors(q, k, bad)


def test_check_increasing():
    assert checks.check_increasing([1, np.int64(4), 9], "stops", minimum=1) == (1, 4, 9)
    assert checks.check_increasing(np.array([0.5, 1.0]), "g", integer=False) == (0.5, 1.0)
    assert type(checks.check_increasing((2,), "stops")[0]) is int
    with pytest.raises(TypeError, match="stops must be a sequence of integers"):
        checks.check_increasing(5, "stops")
    with pytest.raises(TypeError, match="stops must be a sequence"):
        checks.check_increasing("123", "stops")
    for not_1d in (np.array(2), np.zeros((2, 2), int)):  # len() of a 0-d array is a raw error
        with pytest.raises(TypeError, match=r"stops must be a sequence of integers, got an array"):
            checks.check_increasing(not_1d, "stops")
    with pytest.raises(
        TypeError, match=r"stops must be a sequence of integers, got \{0, 3\} \(set\)"
    ):
        checks.check_increasing({0, 3}, "stops")  # a set has no order
    with pytest.raises(TypeError, match=r"stops\[1\] must be an integer, got 2.0"):
        checks.check_increasing((1, 2.0), "stops")
    with pytest.raises(TypeError, match=r"g\[0\] must be a real number"):
        checks.check_increasing(("a",), "g", integer=False)
    with pytest.raises(ValueError, match="stops must not be empty"):
        checks.check_increasing((), "stops")
    with pytest.raises(ValueError, match=r"stops\[0\] must be >= 1, got 0"):
        checks.check_increasing((0, 1), "stops", minimum=1)
    with pytest.raises(ValueError, match=r"stops\[1\] must be <= 10, got 11"):
        checks.check_increasing((1, 11), "stops", maximum=10)
    with pytest.raises(ValueError, match=r"stops must be strictly increasing, got \(1, 1\)"):
        checks.check_increasing((1, 1), "stops")
    with pytest.raises(ValueError, match="finite"):
        checks.check_increasing((0.5, float("nan")), "g", integer=False)


def test_check_id_sequence_names_the_argument_and_converts_to_int64():
    from attnbook.checks import check_id_sequence

    out = check_id_sequence(torch.tensor([3, 0, 2], dtype=torch.int32), "val_ids", 2, 4)
    assert out.dtype == np.int64 and out.tolist() == [3, 0, 2]
    with pytest.raises(ValueError, match=r"val_ids must hold at least 4 ids \(why\)"):
        check_id_sequence([1, 2, 3], "val_ids", 4, len_hint=" (why)")
    with pytest.raises(ValueError, match=r"train_ids must lie in \[0, vocab_size=3\)"):
        check_id_sequence([0, 3], "train_ids", 1, 3)
    with pytest.raises(ValueError, match="train_ids"):
        check_id_sequence([0, -1], "train_ids")
    with pytest.raises(TypeError, match="train_ids"):
        check_id_sequence([0.5, 1.0], "train_ids")


def test_check_instance_names_the_argument_the_class_and_its_maker():
    from attnbook.checks import check_instance

    class Data:
        pass

    d = Data()
    assert check_instance(d, Data, "data", "make_data") is d
    with pytest.raises(TypeError, match=r"data must be a Data \(from make_data\), got dict"):
        check_instance({}, Data, "data", "make_data")


def test_shared_rules_of_issue_23():
    # heads divide a width
    assert checks.check_divides(4, "n_heads", 16, "d_model") == 4
    with pytest.raises(ValueError, match=r"n_heads 3 must divide d_model 8 \(or set head_dim\)"):
        checks.check_divides(3, "n_heads", 8, "d_model", " (or set head_dim)")
    # nan and +inf refused, -inf allowed, NumPy and torch alike, with the first index
    checks.check_no_nan_or_posinf(np.array([0.0, -np.inf]), "x")
    for arr in (np.array([[0.0, 1.0], [np.inf, 0.0]]), torch.tensor([[0.0, 1.0], [math.nan, 0]])):
        with pytest.raises(
            ValueError, match=r"x of shape \(2, 2\) contains nan or \+inf at index \(1, 0\)"
        ):
            checks.check_no_nan_or_posinf(arr, "x")
    # a torch.Generator
    g = torch.Generator()
    assert checks.check_generator(g) is g
    with pytest.raises(TypeError, match="generator must be a torch.Generator .* got int"):
        checks.check_generator(0)
    # both classes are called Generator: the message must tell them apart
    with pytest.raises(
        TypeError, match=r"must be a torch\.Generator .* got numpy\.random\.Generator$"
    ):
        checks.check_generator(np.random.default_rng(0))
    # (B, T) ids with at least min_len tokens; a padding mask of the ids' shape
    with pytest.raises(ValueError, match=r"ids must be \(B, T\) with T >= 1; got shape \(2, 0\)"):
        checks.check_token_ids(torch.zeros(2, 0, dtype=torch.long), min_len=1)
    with pytest.raises(ValueError, match=r"attention_mask must be \(B, S\) = \(1, 3\) like"):
        checks.check_padding_mask(np.ones((1, 2)), shape=(1, 3))
    # warm-up shorter than the run
    assert checks.check_warmup_steps(0, 1) == 0
    with pytest.raises(ValueError, match="warmup_steps=7 must be < steps=5"):
        checks.check_warmup_steps(7, 5)
    # a 1-D mask is (S,)
    checks.check_key_mask_length(np.ones(5, bool), "mask", 3, 5)
    checks.check_key_mask_length(np.ones((3, 1), bool), "mask", 3, 5)  # (L, 1): per query
    with pytest.raises(ValueError, match=r"1-D mask is a key mask of shape \(S,\) = \(5,\)"):
        checks.check_key_mask_length(np.ones(3, bool), "mask", 3, 5)
    # MLA sizes
    assert checks.check_mla_sizes(8, 4, 2, 4) == (8, 4, 2, 4, None)
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even"):
        checks.check_mla_sizes(8, 4, 3, 4)


def test_fits_positions_is_one_rule_for_every_table_of_positions():
    checks.check_fits_positions(64, 64, "learned", "block_size 64")
    checks.check_fits_positions(10**6, 64, "rope", "block_size")  # RoPE has no table
    checks.check_fits_positions(10**6, None, "learned", "block_size")  # no max_seq_len
    msg = r"position 64 exceeds the model's max_seq_len 64 \(sinusoidal positions\)"
    with pytest.raises(ValueError, match=msg):
        checks.check_fits_positions(65, 64, "sinusoidal", "position 64")


def test_check_name_refuses_a_non_string_with_a_type_error():
    allowed = ["big-step", "small-step"]
    assert checks.check_name("small-step", "arm", allowed) == "small-step"
    for bad in (None, 1, ["big-step"]):
        with pytest.raises(TypeError, match=r"arm must be a string, one of \['big-step', "):
            checks.check_name(bad, "arm", allowed)
    with pytest.raises(ValueError, match=r"arm must be one of .* got 'scaled'"):
        checks.check_name("scaled", "arm", allowed)


def test_check_names_one_rule_for_which_arms_or_models_a_run_trains():
    from attnbook.checks import check_names

    allowed = ("rnn", "lstm", "attention")
    assert check_names(("lstm", "rnn"), "models", allowed) == ["lstm", "rnn"]
    for bad, error, match in (
        ("lstm", TypeError, "list or tuple"),  # a bare string
        ({"lstm"}, TypeError, "list or tuple"),
        ((), ValueError, "at least one"),
        (("lstm", "gru"), ValueError, r"models\[1\]"),
        (("lstm", "lstm"), ValueError, "twice"),
    ):
        with pytest.raises(error, match=match):
            check_names(bad, "models", allowed)
