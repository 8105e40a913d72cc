"""Tests for attnbook.exercises: the checks of the code a reader writes.

What a check must do is derived here without the module's own code: the right answers are
written as plain loops over rows, heads and features (and, independently again, as torch's
``F.scaled_dot_product_attention`` and ``attnbook.layers.split_heads``); every typical mistake is
written out in this file as the reader would write it, and must fail *and* be named; the shapes
a message must name are the shapes the reader's function was actually called with, recorded
by a wrapper (the check may call the function on later cases too, to tell two mistakes apart:
the failing call is the one after the ``n_passed`` passing ones).
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnbook import exercises, layers
from attnbook.exercises import (
    CheckResult,
    check_attention,
    check_causal_mask,
    check_split_heads,
)

# ---------------------------------------------------------------------------------------------
# Right answers, written as loops (no matrix product, no library)


def loop_attention(q, k, v):
    lead, (L, D), S, Dv = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    out = np.zeros((*lead, L, Dv))
    for idx in np.ndindex(*lead):
        for i in range(L):
            s = [
                sum(q[idx][i, d] * k[idx][j, d] for d in range(D)) / math.sqrt(D) for j in range(S)
            ]
            top = max(s)
            w = [math.exp(x - top) for x in s]
            total = sum(w)
            for j in range(S):
                out[idx][i] += w[j] / total * v[idx][j]
    return out


def loop_causal_mask(L, S):
    keep = np.zeros((L, S), dtype=bool)
    for i in range(L):
        for j in range(S):
            keep[i, j] = j - (S - L) <= i  # key j is at most as new as query i
    return keep


def loop_split_heads(x, n_heads):
    B, L, F = x.shape
    D = F // n_heads
    out = np.zeros((B, n_heads, L, D))
    for b in range(B):
        for h in range(n_heads):
            for i in range(L):
                for d in range(D):
                    out[b, h, i, d] = x[b, i, h * D + d]
    return out


def torch_attention(q, k, v):
    return F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v))).numpy()


def torch_split_heads(x, n_heads):
    return layers.split_heads(torch.from_numpy(x), n_heads).numpy()


def recording(fn):
    """``fn`` that records the arguments of every call in ``wrapper.calls``."""

    def wrapper(*args):
        wrapper.calls.append(args)
        return fn(*args)

    wrapper.calls = []
    wrapper.__name__ = fn.__name__
    return wrapper


def flat(result) -> str:
    """The result's text with its line breaks and indentation folded into single spaces."""
    return " ".join(result.message.split())


def assert_readable(result):
    """A result is a CheckResult whose text is its repr, in lines that fit a listing."""
    assert isinstance(result, CheckResult)
    assert repr(result) == str(result) == result.message
    assert all(len(line) <= 79 for line in result.message.splitlines()), result.message
    assert "Traceback" not in result.message


# ---------------------------------------------------------------------------------------------
# The right answers pass


@pytest.mark.parametrize("fn", [loop_attention, torch_attention])
def test_right_attention_passes(fn):
    result = check_attention(fn)
    assert_readable(result)
    assert result and result.status == "passed", result.message
    assert result.n_passed == result.n_cases >= 5
    assert result.max_abs_diff < 1e-9
    assert f"all {result.n_cases} cases" in result.message


@pytest.mark.parametrize(
    "fn", [loop_causal_mask, lambda L, S: np.tril(np.ones((L, S), dtype=bool), k=S - L)]
)
def test_right_causal_mask_passes(fn):
    result = check_causal_mask(fn)
    assert_readable(result)
    assert result and result.status == "passed", result.message


@pytest.mark.parametrize("fn", [loop_split_heads, torch_split_heads])
def test_right_split_heads_passes(fn):
    result = check_split_heads(fn)
    assert_readable(result)
    assert result and result.status == "passed", result.message


def test_the_cases_cover_what_the_issue_asks():
    """Square and L != S, leading axes, Dv != D, d_k = S, several heads, L = n_heads."""
    att = recording(loop_attention)
    assert check_attention(att)
    shapes = [(q.shape, k.shape, v.shape) for q, k, v in att.calls]
    assert any(q[-2] == k[-2] for q, k, _ in shapes)
    assert any(q[-2] != k[-2] for q, k, _ in shapes)
    assert any(len(q) == 3 for q, _, _ in shapes) and any(len(q) == 4 for q, _, _ in shapes)
    assert any(v[-1] != q[-1] for q, _, v in shapes)
    assert any(q[-1] == k[-2] for q, k, _ in shapes)  # q @ k (untransposed) runs
    mask = recording(loop_causal_mask)
    assert check_causal_mask(mask)
    assert {L == S for L, S in mask.calls} == {True, False}
    split = recording(loop_split_heads)
    assert check_split_heads(split)
    assert any(H > 1 for _, H in split.calls) and any(H == 1 for _, H in split.calls)
    assert any(x.shape[1] == H for x, H in split.calls)


# ---------------------------------------------------------------------------------------------
# Typical mistakes fail and are named


def rows_softmax(s, axis=-1):
    e = np.exp(s - np.max(s, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def kt(k):
    return np.swapaxes(k, -1, -2)


def no_scale(q, k, v):
    return rows_softmax(np.einsum("...ld,...sd->...ls", q, k)) @ v


def divided_by_d(q, k, v):
    return rows_softmax(q @ kt(k) / q.shape[-1]) @ v


def times_sqrt_d(q, k, v):
    return rows_softmax(q @ kt(k) * math.sqrt(q.shape[-1])) @ v


def scaled_by_dv(q, k, v):
    return rows_softmax(q @ kt(k) / math.sqrt(v.shape[-1])) @ v


def softmax_over_queries(q, k, v):
    return rows_softmax(q @ kt(k) / math.sqrt(q.shape[-1]), axis=-2) @ v


def softmax_over_axis0(q, k, v):
    return rows_softmax(q @ kt(k) / math.sqrt(q.shape[-1]), axis=0) @ v


def sum_without_keepdims(q, k, v):
    s = q @ kt(k) / math.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1)) @ v


def no_softmax(q, k, v):
    return q @ kt(k) / math.sqrt(q.shape[-1]) @ v


def k_not_transposed(q, k, v):
    return rows_softmax(q @ k / math.sqrt(q.shape[-1])) @ v


def k_dot_t(q, k, v):
    return rows_softmax(q @ k.T / math.sqrt(q.shape[-1])) @ v


def weights_only(q, k, v):
    return rows_softmax(q @ kt(k) / math.sqrt(q.shape[-1]))


def no_max_subtracted(q, k, v):
    e = np.exp(q @ kt(k) / math.sqrt(q.shape[-1]))
    return e / e.sum(-1, keepdims=True) @ v


def slightly_off(q, k, v):
    return loop_attention(q, k, v) + 0.1  # above 1e-2 of the largest value: not rounding


ATTENTION_MISTAKES = [
    (no_scale, "no_scale", "sqrt(d_k)"),
    (divided_by_d, "scale_by_d", "instead of sqrt(d_k)"),
    (times_sqrt_d, "scale_times", "multiplied"),
    (scaled_by_dv, "scale_dv", "Dv"),
    (softmax_over_queries, "softmax_axis", "axis=-1"),
    (softmax_over_axis0, "softmax_axis", "axis"),
    (sum_without_keepdims, "keepdims", "keepdims=True"),
    (no_softmax, "no_softmax", "no softmax"),
    (k_not_transposed, "k_not_transposed", "transposed"),
    (k_dot_t, "k_dot_T", "k.T reverses"),
    (weights_only, "returned_weights", "multiply it by v"),
    (no_max_subtracted, "overflow", "maximum"),
]


@pytest.mark.parametrize(
    "fn, code, words",
    ATTENTION_MISTAKES,
    ids=[m[1] + "-" + m[0].__name__ for m in ATTENTION_MISTAKES],
)
def test_attention_mistake_fails_and_is_named(fn, code, words):
    rec = recording(fn)
    result = check_attention(rec)
    assert_readable(result)
    assert not result and result.status in ("wrong", "error"), result.message
    assert result.mistake == code, result.message
    assert words in result.diagnosis and result.diagnosis in flat(result)
    q, k, v = rec.calls[result.n_passed]  # the failing case: the shapes the function was given
    assert f"q {q.shape}, k {k.shape}, v {v.shape}" in result.message
    assert len(rec.calls) > result.n_passed


def test_k_dot_t_is_caught_only_where_it_matters():
    """``k.T`` is right on 2-D arrays: the check passes those and fails on the first batch."""
    rec = recording(k_dot_t)
    result = check_attention(rec)
    passed, failing = rec.calls[: result.n_passed], rec.calls[result.n_passed]
    assert all(q.ndim == 2 for q, _, _ in passed) and failing[0].ndim > 2
    assert result.status == "error" and "ValueError" in result.message


def test_nan_is_not_called_an_overflow_unless_it_is_one():
    """nan everywhere (not where exp overflows) fails on the first case, with no diagnosis."""
    result = check_attention(lambda q, k, v: np.full((*q.shape[:-1], v.shape[-1]), np.nan))
    assert not result and result.n_passed == 0
    assert result.mistake is None and "nan or inf" in result.message


def test_an_unrecognised_mistake_fails_without_a_diagnosis():
    result = check_attention(slightly_off)
    assert not result and result.mistake is None and result.diagnosis is None
    assert result.max_abs_diff == pytest.approx(0.1)
    assert "No typical mistake matches" in result.message


def bool_lower(L, S, k):
    return np.tril(np.ones((L, S), dtype=bool), k=k)


MASK_MISTAKES = [
    (lambda L, S: bool_lower(L, S, 0), "top_left", "bottom-right"),
    (lambda L, S: ~bool_lower(L, S, S - L), "inverted", "True = may"),
    (lambda L, S: np.triu(np.ones((L, S), dtype=bool), k=1), "inverted_top_left", "Two things"),
    (lambda L, S: bool_lower(L, S, S - L - 1), "diagonal_hidden", "its own key"),
    (lambda L, S: bool_lower(S, L, L - S).T, "transposed", "transposed"),
    (lambda L, S: np.tril(np.ones((L, S)), k=S - L), "not_boolean", "boolean"),
    (lambda L, S: np.tril(np.ones((L, S), dtype=int), k=S - L), "not_boolean", "integer"),
    (lambda L, S: 1 - np.tril(np.ones((L, S), dtype=int), k=S - L), "inverted", "boolean"),
]


@pytest.mark.parametrize("fn, code, words", MASK_MISTAKES, ids=[m[1] for m in MASK_MISTAKES])
def test_mask_mistake_fails_and_is_named(fn, code, words):
    rec = recording(fn)
    result = check_causal_mask(rec)
    assert_readable(result)
    assert not result and result.mistake == code, result.message
    assert words in result.diagnosis
    L, S = rec.calls[result.n_passed]
    assert f"L={L}, S={S}" in result.message
    assert f"Expected shape {(L, S)}" in result.message


def test_top_left_mask_is_caught_on_a_case_with_cached_keys():
    rec = recording(lambda L, S: bool_lower(L, S, 0))
    result = check_causal_mask(rec)
    L, S = rec.calls[result.n_passed]
    assert all(a == b for a, b in rec.calls[: result.n_passed]) and S > L
    # the first wrong entry, found here by a loop: a key of the past that query 0 must see
    right, got = loop_causal_mask(L, S), bool_lower(L, S, 0)
    first = next((i, j) for i in range(L) for j in range(S) if right[i, j] != got[i, j])
    assert result.where == first
    assert result.max_abs_diff == (right != got).sum()
    assert "expected True (keep), got False (hidden)" in flat(result)


def test_mask_message_draws_both_masks():
    result = check_causal_mask(lambda L, S: ~bool_lower(L, S, S - L))
    L, S = 4, 4  # the first case is square and inversion already fails it
    drawn = [
        " ".join("1" if loop_causal_mask(L, S)[i, j] else "0" for j in range(S)) for i in range(L)
    ]
    assert all(row in result.message for row in drawn)


def no_transpose(x, n_heads):
    B, L, F = x.shape
    return x.reshape(B, n_heads, L, F // n_heads)


def heads_after_l(x, n_heads):
    B, L, F = x.shape
    return x.reshape(B, L, n_heads, F // n_heads)


def interleaved(x, n_heads):
    B, L, F = x.shape
    out = np.zeros((B, n_heads, L, F // n_heads))
    for h in range(n_heads):
        out[:, h] = x[:, :, h::n_heads]  # features h, h + H, h + 2H, ...
    return out


def l_and_d_swapped(x, n_heads):
    B, L, F = x.shape
    return np.moveaxis(x.reshape(B, L, n_heads, F // n_heads), 1, 3)  # (B, H, D, L)


def dot_t(x, n_heads):
    B, L, F = x.shape
    return x.reshape(B, L, n_heads, F // n_heads).T


SPLIT_MISTAKES = [
    (no_transpose, "no_transpose", "without"),
    (heads_after_l, "heads_after_l", "after L"),
    (interleaved, "interleaved", "consecutive"),
    (l_and_d_swapped, "l_and_head_dim_swapped", "(head_dim, L)"),
    (dot_t, "all_axes_reversed", ".T reverses"),
]


@pytest.mark.parametrize("fn, code, words", SPLIT_MISTAKES, ids=[m[1] for m in SPLIT_MISTAKES])
def test_split_mistake_fails_and_is_named(fn, code, words):
    rec = recording(fn)
    result = check_split_heads(rec)
    assert_readable(result)
    assert not result and result.mistake == code, result.message
    x, H = rec.calls[result.n_passed]
    B, L, F = x.shape
    assert f"x {x.shape}, n_heads={H}" in result.message
    assert result.expected_shape == (B, H, L, F // H)
    assert result.got_shape == np.shape(fn(x, H))
    assert f"Expected shape {(B, H, L, F // H)}, got {np.shape(fn(x, H))}" in result.message


def test_missing_transpose_is_caught_by_value_when_the_shape_is_right():
    """With L = n_heads, a reshape to (B, L, H, D) has the right shape: values must catch it."""
    calls = []

    def only_wrong_when_shapes_agree(x, n_heads):
        calls.append((x, n_heads))
        if x.shape[1] == n_heads and n_heads > 1:
            return heads_after_l(x, n_heads)
        return loop_split_heads(x, n_heads)

    result = check_split_heads(only_wrong_when_shapes_agree)
    assert not result and result.got_shape == result.expected_shape
    assert result.mistake is None  # it passed case 1, where that mistake changes the shape
    x, H = calls[result.n_passed]
    right, got = loop_split_heads(x, H), heads_after_l(x, H)
    assert result.max_abs_diff == np.abs(right - got).max()
    assert result.where == np.unravel_index(np.abs(right - got).argmax(), right.shape)


# ---------------------------------------------------------------------------------------------
# Stubs, exceptions, bad results, bad arguments


def stub_attention(q, k, v):
    # your code here
    raise NotImplementedError


def empty_attention(q, k, v):
    pass


@pytest.mark.parametrize("check", [check_attention, check_causal_mask, check_split_heads])
@pytest.mark.parametrize(
    "stub, why", [(stub_attention, "raises NotImplementedError"), (empty_attention, "returns None")]
)
def test_a_stub_is_not_written_yet(check, stub, why):
    result = check(lambda *args: stub(*args[:1], None, None))
    assert_readable(result)
    assert not result and result.status == "not written"
    assert "not written yet" in result.message and why in result.message
    assert result.n_passed == 0 and result.case is None


def test_none_after_a_passed_case_is_wrong_not_unwritten():
    def sometimes_none(L, S):
        return None if L != S else loop_causal_mask(L, S)

    result = check_causal_mask(sometimes_none)
    assert result.status == "wrong" and "returned None" in result.message
    assert "return" in result.message


def test_an_exception_is_reported_with_the_case_shapes():
    rec = recording(lambda q, k, v: loop_attention(q, k, v) if q.ndim == 2 else 1 / 0)
    result = check_attention(rec)
    assert_readable(result)
    assert not result and result.status == "error"
    q, k, v = rec.calls[result.n_passed]
    assert "ZeroDivisionError: division by zero" in result.message
    assert f"q {q.shape}, k {k.shape}, v {v.shape}" in result.message


def test_a_wrong_signature_is_explained():
    result = check_attention(lambda q, k: q)
    assert result.status == "error" and "(q, k, v)" in result.diagnosis


def test_a_result_that_is_not_an_array_is_reported():
    result = check_split_heads(lambda x, n_heads: "heads")
    assert result.status == "wrong" and "returned a str" in result.message


def test_shapes_in_the_message_are_what_the_function_was_given():
    rec = recording(weights_only)
    result = check_attention(rec)
    q, k, v = rec.calls[result.n_passed]
    expected = (*q.shape[:-1], v.shape[-1])  # (..., L, Dv)
    got = (*q.shape[:-1], k.shape[-2])  # (..., L, S)
    assert result.expected_shape == expected and result.got_shape == got
    assert f"Expected shape {expected}, got {got}" in result.message


def test_where_points_at_the_wrong_entry():
    target = (1, 2, 3, 1)

    def off_by_one_entry(q, k, v):
        out = loop_attention(q, k, v)
        if out.ndim == 4:
            out[target] += 0.5
        return out

    result = check_attention(off_by_one_entry)
    assert result.where == target and result.max_abs_diff == pytest.approx(0.5)
    assert f"at index {target}" in result.message


def test_inputs_are_copies():
    """A function that scribbles on its inputs cannot change the reference it is compared to."""

    def scribbles(q, k, v):
        out = loop_attention(q, k, v)
        q[...] = 0
        v[...] = 0
        return out

    assert check_attention(scribbles)


def test_truthiness_of_the_result():
    passed = check_causal_mask(loop_causal_mask)
    failed = check_causal_mask(lambda L, S: bool_lower(L, S, 0))
    assert bool(passed) is True and bool(failed) is False
    assert [r.status for r in (passed, failed) if r] == ["passed"]


@pytest.mark.parametrize("check", [check_attention, check_causal_mask, check_split_heads])
@pytest.mark.parametrize("bad", [None, 3, "my_attention", np.zeros(3)])
def test_fn_must_be_callable(check, bad):
    with pytest.raises(TypeError, match=r"^fn must be"):
        check(bad)


def test_tolerances_accept_float32_and_reject_a_real_difference():
    assert check_attention(lambda q, k, v: loop_attention(q, k, v).astype(np.float32))
    assert exercises.ATOL < 1e-3
    assert not check_attention(lambda q, k, v: loop_attention(q, k, v) * (1 + 1e-3))


# ---------------------------------------------------------------------------------------------
# Results of the wrong kind: complex, low precision, torch dtypes, object arrays, odd errors


@pytest.mark.parametrize(
    "check, fn",
    [
        (check_attention, lambda q, k, v: loop_attention(q, k, v) + 5j),
        (check_attention, lambda q, k, v: loop_attention(q, k, v) + 0j),
        (check_attention, lambda q, k, v: torch.from_numpy(loop_attention(q, k, v) + 1j)),
        (check_split_heads, lambda x, n_heads: loop_split_heads(x, n_heads) + 1e9j),
    ],
)
def test_a_complex_result_fails(check, fn):
    """Only the real part used to be compared: + 5j passed with "Largest |difference| 5"."""
    result = check(fn)
    assert_readable(result)
    assert not result and result.status == "wrong", result.message
    assert "returned complex values" in result.message and "✓" not in result.message
    assert result.n_passed == 0


def test_a_passed_check_reports_the_difference_it_judged():
    """The pass criterion and the reported difference are one computation."""
    result = check_attention(lambda q, k, v: loop_attention(q, k, v) + 5e-7)
    assert result and result.max_abs_diff == pytest.approx(5e-7, rel=1e-3)
    assert "5.0e-07" in result.message
    tolerance = exercises.ATOL + exercises.RTOL * 0  # the smallest allowed difference
    result = check_attention(lambda q, k, v: loop_attention(q, k, v) + 2 * tolerance + 1e-3)
    assert not result and result.max_abs_diff == pytest.approx(2 * tolerance + 1e-3)


@pytest.mark.parametrize("dtype", [np.float16, torch.float16, torch.bfloat16])
def test_a_right_low_precision_result_passes(dtype):
    """Rounding the right answer to float16 or bfloat16 is not a mistake in the steps."""
    if isinstance(dtype, torch.dtype):
        fn = lambda q, k, v: torch.from_numpy(loop_attention(q, k, v)).to(dtype)  # noqa: E731
    else:
        fn = lambda q, k, v: loop_attention(q, k, v).astype(dtype)  # noqa: E731
    result = check_attention(fn)
    assert_readable(result)
    assert result, result.message


@pytest.mark.parametrize("dtype", [np.float16, torch.bfloat16])
def test_a_wrong_low_precision_result_fails(dtype):
    def wrong(q, k, v):  # 5 % too large: far beyond float16's and bfloat16's rounding
        out = loop_attention(q, k, v) * 1.05 + 0.05
        if isinstance(dtype, torch.dtype):
            return torch.from_numpy(out).to(dtype)
        return out.astype(dtype)

    result = check_attention(wrong)
    assert_readable(result)
    assert not result and result.status == "wrong"


def test_attention_computed_in_float16_passes_and_a_float16_mistake_is_named():
    def in_float16(q, k, v, scale=True):
        q, k, v = (a.astype(np.float16) for a in (q, k, v))
        s = q @ np.swapaxes(k, -1, -2)
        if scale:
            s = s / np.float16(math.sqrt(q.shape[-1]))
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True) @ v

    assert check_attention(in_float16)
    result = check_attention(lambda q, k, v: in_float16(q, k, v, scale=False))
    assert not result and result.mistake == "no_scale", result.message


def test_a_float16_result_that_is_off_names_the_precision():
    result = check_attention(lambda q, k, v: (loop_attention(q, k, v) * 1.02).astype(np.float16))
    assert_readable(result)
    assert not result, result.message
    assert "float16" in result.message and "No typical mistake" not in result.message


def test_a_float8_result_is_a_precision_problem():
    """float8 keeps about one digit: the check must not widen its tolerance that far."""
    result = check_attention(
        lambda q, k, v: torch.from_numpy(loop_attention(q, k, v)).to(torch.float8_e4m3fn)
    )
    assert_readable(result)
    assert not result and "float8_e4m3fn" in result.message


def test_a_meta_tensor_is_reported_not_raised():
    result = check_attention(
        lambda q, k, v: torch.empty(q.shape[:-1] + v.shape[-1:], device="meta")
    )
    assert_readable(result)
    assert not result and result.status == "wrong" and "meta" in result.message


@pytest.mark.parametrize(
    "dtype, words", [(object, "dtype object"), ("datetime64[s]", "dtype datetime64")]
)
def test_an_array_of_non_numbers_names_its_dtype(dtype, words):
    def fn(q, k, v):
        out = loop_attention(q, k, v)
        return out.astype(dtype) if dtype is object else np.zeros(out.shape, dtype)

    result = check_attention(fn)
    assert_readable(result)
    assert not result and words in result.message, result.message
    assert "returned a ndarray, not an array" not in result.message


def test_not_implemented_on_a_batched_case_is_a_failure_on_that_case():
    rec = recording(
        lambda q, k, v: (
            loop_attention(q, k, v)
            if q.ndim == 2
            else (_ for _ in ()).throw(NotImplementedError("batched"))
        )
    )
    result = check_attention(rec)
    assert_readable(result)
    assert result.status == "error" and "not written" not in result.message
    assert result.n_passed == 3 and rec.calls[3][0].ndim == 3
    assert "batched input" in result.message


def test_an_additive_float_mask_is_recognised():
    def additive(L, S):  # 0 where a key is kept, -inf where it is hidden
        return np.where(loop_causal_mask(L, S), 0.0, -np.inf)

    result = check_causal_mask(additive)
    assert_readable(result)
    assert not result and result.mistake == "additive"
    assert "keep-mask" in result.diagnosis and "True marks the hidden" not in result.message


def test_an_additive_mask_with_another_mistake_names_both():
    def additive_diagonal_hidden(L, S):
        i, j = np.arange(L)[:, None], np.arange(S)[None, :]
        return np.where(j < i + (S - L), 0.0, -np.inf)

    result = check_causal_mask(additive_diagonal_hidden)
    assert not result and result.mistake == "diagonal_hidden"
    assert "additive" in result.diagnosis and "own key" in result.diagnosis


def test_an_exception_whose_text_cannot_be_shown_is_reported():
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    def fn(q, k, v):
        raise Unprintable

    result = check_attention(fn)
    assert_readable(result)
    assert result.status == "error" and "Unprintable" in result.message


# ---------------------------------------------------------------------------------------------
# Hints that must send a beginner the right way (newcomer review)


def row_by_row(q, k, v):
    """Right for one sequence: a loop over the rows of q, which only 2-D inputs allow."""
    out = []
    for i in range(q.shape[0]):
        s = q[i] @ k.T / math.sqrt(q.shape[-1])  # (S,)
        w = np.exp(s - s.max())
        out.append(w / w.sum() @ v)
    return np.array(out)


def row_by_row_swapaxes(q, k, v):
    """The same loop with np.swapaxes: no error on a batch, a (B, B, L, Dv) result."""
    out = []
    for i in range(q.shape[0]):
        s = q[i] @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
        w = np.exp(s - s.max(-1, keepdims=True))
        out.append(w / w.sum(-1, keepdims=True) @ v)
    return np.array(out)


@pytest.mark.parametrize("fn", [row_by_row, row_by_row_swapaxes])
def test_a_row_loop_is_told_to_handle_leading_axes(fn):
    rec = recording(fn)
    result = check_attention(rec)
    assert_readable(result)
    assert not result and result.n_passed == 3 and rec.calls[3][0].ndim == 3
    text = flat(result)
    assert "works for one sequence" in text and "no loop over rows" in text
    assert "np.swapaxes(a, -1, -2)" in result.diagnosis


def square_mask(L, S):
    """One column per query: np.tril of an (L, L) block."""
    return np.tril(np.ones((L, L), dtype=bool))


def test_an_l_by_l_mask_is_told_it_needs_one_column_per_key():
    result = check_causal_mask(square_mask)
    assert_readable(result)
    assert not result and result.n_passed == 1  # right for L = S = 4
    assert "one column per key" in flat(result) and "(L, S) = (3, 7)" in flat(result)
    assert "No typical mistake matches" not in result.message


def scores_in_float16(q, k, v):
    """Right steps, but the scores rounded to float16 and back: off by about 1e-4."""
    s = (q @ np.swapaxes(k, -1, -2)).astype(np.float16).astype(np.float64)
    s = s / math.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v


def test_a_float64_result_off_by_rounding_is_hinted_at_low_precision():
    result = check_attention(scores_in_float16)
    assert_readable(result)
    assert not result and result.max_abs_diff < 1e-3
    assert "low precision" in flat(result) and "float16" in flat(result)
    assert "No typical mistake matches" not in result.message


# ---------------------------------------------------------------------------------------------
# Every language: a result prints in the reader's language (printed-exercises.po)


def _columns(line: str) -> int:
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)


READERS_FUNCTIONS = [
    (check_attention, stub_attention),
    (check_attention, empty_attention),
    (check_attention, lambda q, k, v: q @ np.swapaxes(k, -1, -2) @ v),  # no softmax
    (check_attention, lambda q, k: q),  # wrong signature
    (check_attention, lambda q, k, v: loop_attention(q, k, v).astype(np.float16) + 0.01),
    (check_attention, lambda q, k, v: np.full(q.shape[:-1] + v.shape[-1:], np.nan)),
    (check_causal_mask, lambda L, S: bool_lower(L, S, 0)),  # top-left
    (check_causal_mask, lambda L, S: bool_lower(L, S, S - L).astype(int)),  # not boolean
    (check_causal_mask, lambda L, S: np.where(bool_lower(L, S, S - L), 0.0, -np.inf)),
    (check_causal_mask, lambda L, S: bool_lower(L, L, 0)),  # (L, L)
    (check_causal_mask, lambda L, S: None if L != S else bool_lower(L, S, 0)),
    (check_causal_mask, lambda L, S: "mask"),
    (check_causal_mask, lambda L, S: np.ones((L, S), dtype=complex)),
    (check_causal_mask, loop_causal_mask),
    (check_split_heads, no_transpose),
    (check_split_heads, lambda x, n_heads: x.reshape(*x.shape[:2], n_heads, -1)),
]


@pytest.mark.parametrize("check, fn", READERS_FUNCTIONS)
def test_a_result_is_made_in_every_language_from_the_catalog(check, fn):
    result = check(fn)
    printed = result.printed
    assert printed.untranslated == frozenset()
    assert printed.text("en") == result.message
    zh = printed.text("zh_CN")
    assert (
        zh != result.message
        and "\u4e00" <= max(zh)
        and all(_columns(line) <= 79 for line in zh.splitlines())
    ), zh
    # Names, shapes and code are the same in both: the case's shapes appear in each.
    if result.case:
        assert result.case in zh


def test_a_result_shows_in_the_readers_language(monkeypatch):
    from attnbook import i18n

    monkeypatch.delenv("ATTNBOOK_EDITIONS", raising=False)
    result = check_causal_mask(lambda L, S: stub_attention(L, S, None))
    monkeypatch.setitem(i18n._state, "language", None)
    monkeypatch.delenv("ATTNBOOK_LANG", raising=False)
    assert result._repr_mimebundle_()["text/plain"] == result.message
    i18n.set_language("zh_CN")
    shown = result._repr_mimebundle_()["text/plain"]
    assert shown.startswith("<lambda> 还没有写（它抛出 NotImplementedError）。")
    assert repr(result) == result.message  # the API's text stays English


def test_chinese_text_wraps_between_characters_and_keeps_punctuation_on_its_line():
    text = "提示：" + "这是一个很长的句子，" * 12 + "np.swapaxes(k, -1, -2)。"
    lines = exercises._wrap(text)
    assert "".join(line[2:] for line in lines) == text.replace("  ", " ")
    assert all(_columns(line) <= exercises.WIDTH + 2 for line in lines)
    assert not any(line[2:3] in "，。" for line in lines[1:])
