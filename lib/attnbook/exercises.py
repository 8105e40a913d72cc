"""Checks for the code a reader writes in the exercises: attention, the causal mask, heads.

Each checker runs the reader's function on a handful of cases — square and ``L != S``, with and
without batch and head axes, ``Dv != D``, several heads — compares every result with the
library's own implementation and returns a :class:`CheckResult`: truthy when every case
passed, and a text that says which case failed (the shapes it was given), the expected and the
returned shape, the largest difference and where it sits, and, when the result equals a
typical wrong variant on that case, what the mistake probably is (the scale forgotten, the
softmax over the wrong axis, ``k`` not transposed, a top-left causal mask, ``True`` meaning
"hidden", heads split without the transpose). A stub that still raises
``NotImplementedError`` or returns ``None`` on the first case gets "not written yet", never a
traceback; one that passes some cases first fails on the next (a batched case it cannot
handle is named). A result must be an array of real numbers: complex values, an object
array or a meta tensor fail and say so; a torch tensor is read through float32 when NumPy
lacks its dtype (bfloat16), and a float16 or bfloat16 result is allowed that dtype's
rounding (``LOW_PRECISION_EPS``). An additive float mask (0 keep, -inf hidden) is recognised
and the book's boolean keep-masks recommended.

A mistake is named only when its variant is right on every case the reader's function passed
and reproduces the function's result (or its error) on the failing case; to choose between
two such mistakes, the function is also run on the cases after the failing one. Each call gets
fresh copies of the inputs, with NumPy's warnings silenced (an overflow is judged, not printed).

The text is made in every language of the book (:mod:`attnbook.printed`; the messages are
English ``msgid`` s of the label catalog ``printed-exercises.po``): shown in a notebook, a
result prints in the reader's language, and during a book build it carries every edition's
text. Its :attr:`CheckResult.message`, ``str`` and ``repr`` are the English text.

The reference implementations are :func:`attnbook.attention.scaled_dot_product_attention`,
:func:`attnbook.masks.causal_mask` and :func:`attnbook.heads.split_heads`, so the conventions
are the book's: keep-masks (``True`` = may attend), causal masks aligned bottom-right, head
``h`` holding features ``h*head_dim .. (h+1)*head_dim - 1`` (see the notation appendix).

Of the third-party packages, this module imports NumPy only (a torch tensor the reader returns
is read through the torch already loaded).
"""

from __future__ import annotations

import sys
import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import i18n
from .attention import scaled_dot_product_attention
from .checks import check_callable
from .heads import split_heads
from .masks import causal_mask
from .printed import Printed, columns, say, table, verbatim, wrap_lines

__all__ = ["CheckResult", "check_attention", "check_causal_mask", "check_split_heads"]

#: Tolerances of the comparison with the library (float64 inputs; a float32 result passes).
ATOL, RTOL = 1e-6, 1e-5
#: A float16 or bfloat16 result may also differ by this many of its dtype's epsilons times
#: the largest absolute expected entry (rounding, not a mistake in the steps).
LOW_PRECISION_EPS = 4
#: A float64 result that fails by less than this fraction of the largest expected value gets a
#: hint at a step computed in low precision.
SMALL_RELATIVE = 1e-2
WIDTH = 72  # the result's text is wrapped to this many columns (phones, the 79-column rule)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check of a reader's function; truthy when every case passed.

    Shown in a notebook (or printed) it is a short text: a headline, the failing case with its
    shapes, expected and returned shape, the largest difference and where, and the likely
    mistake.

    Attributes:
        name: the name of the reader's function, e.g. ``"my_attention"``.
        status: ``"passed"``, ``"not written"`` (the stub raises ``NotImplementedError`` or
            returns ``None``), ``"wrong"`` (a result differs from the library's) or
            ``"error"`` (the function raised another exception).
        n_cases: how many cases the check runs.
        n_passed: how many cases passed before the first failure (all of them on success).
        case: the failing case in words, with its shapes (``"q (2, 4), k (5, 4), v (5, 3)"``);
            ``None`` when nothing failed.
        expected_shape: the shape the library returns on the failing case, or ``None``.
        got_shape: the shape the reader's function returned, or ``None``.
        max_abs_diff: the largest absolute difference on the failing case (for a mask, the
            number of entries that differ), or ``None`` when the shapes differ.
        where: the index of that difference (for a mask, the first differing entry), or
            ``None``.
        mistake: a short code of the recognised mistake (``"no_scale"``, ``"softmax_axis"``,
            ``"top_left"``, ...) or ``None``.
        diagnosis: the recognised mistake in words, or ``None``.
        message: the full text in English (also the ``str`` and ``repr``).
        printed: the full text in every language (:class:`attnbook.printed.Printed`); a
            notebook shows it in the reader's language.
    """

    name: str
    status: str
    n_cases: int
    n_passed: int
    case: str | None = None
    expected_shape: tuple | None = None
    got_shape: tuple | None = None
    max_abs_diff: float | None = None
    where: tuple | None = None
    mistake: str | None = None
    diagnosis: str | None = None
    message: str = field(default="", repr=False)
    printed: Printed | None = field(default=None, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        if self.printed is None:
            return {"text/plain": self.message}
        return self.printed._repr_mimebundle_(include, exclude)


# --------------------------------------------------------------------------------------------
# The cases and the typical mistakes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Case:
    label: str  # what the case tests, in words
    args: tuple  # what the reader's function is called with
    shapes: str  # the arguments' shapes, for messages
    batched: bool = False  # the arguments have leading batch (and head) axes


@dataclass(frozen=True)
class _Mistake:
    code: str
    fn: Callable  # the wrong variant, called with the case's arguments
    text: str  # the diagnosis in words (English, a msgid of printed-exercises.po)


def _softmax(x, axis=-1):
    """Stable softmax along ``axis``: the variants differ from the right one only where meant."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _kt(k):
    return np.swapaxes(k, -1, -2)  # (..., D, S)


def _scale(q):
    return 1 / np.sqrt(q.shape[-1])


def _attention_cases(rng) -> list[_Case]:
    def qkv(lead, L, S, D, Dv, size=1.0):
        q = size * rng.standard_normal((*lead, L, D))
        k = size * rng.standard_normal((*lead, S, D))
        v = rng.standard_normal((*lead, S, Dv))
        return q, k, v

    specs = [
        ("one sequence, L = S", (), 3, 3, 4, 4, 1.0),
        ("one sequence, L != S and Dv != D", (), 2, 5, 4, 3, 1.0),
        ("d_k = S, so an untransposed k still multiplies", (), 3, 5, 5, 2, 1.0),
        ("a batch axis", (2,), 3, 6, 4, 5, 1.0),
        ("batch and head axes", (2, 3), 4, 6, 8, 3, 1.0),
        ("large scores, up to about 1000", (), 3, 5, 4, 2, 30.0),
    ]
    cases = []
    for label, lead, L, S, D, Dv, size in specs:
        q, k, v = qkv(lead, L, S, D, Dv, size)
        cases.append(_Case(label, (q, k, v), f"q {q.shape}, k {k.shape}, v {v.shape}", bool(lead)))
    return cases


def _no_max_subtracted(q, k, v):
    e = np.exp(q @ _kt(k) * _scale(q))  # overflows to inf for scores above about 709
    return e / e.sum(axis=-1, keepdims=True) @ v


def _no_keepdims_max(q, k, v):
    s = q @ _kt(k) * _scale(q)
    e = np.exp(s - s.max(axis=-1))
    return e / e.sum(axis=-1, keepdims=True) @ v


def _no_keepdims_sum(q, k, v):
    s = q @ _kt(k) * _scale(q)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1) @ v


def _no_keepdims_both(q, k, v):
    s = q @ _kt(k) * _scale(q)
    e = np.exp(s - s.max(axis=-1))
    return e / e.sum(axis=-1) @ v


_KEEPDIMS = (
    "A row max or row sum was taken without keepdims=True, so it broadcast along "
    "the wrong axis. Use s.max(axis=-1, keepdims=True) and "
    "e.sum(axis=-1, keepdims=True)."
)

_ATTENTION_MISTAKES = [
    _Mistake(
        "no_scale",
        lambda q, k, v: _softmax(q @ _kt(k)) @ v,
        "The scores were not scaled: divide q k^T by sqrt(d_k), where d_k = q.shape[-1].",
    ),
    _Mistake(
        "scale_by_d",
        lambda q, k, v: _softmax(q @ _kt(k) / q.shape[-1]) @ v,
        "The scores were divided by d_k instead of sqrt(d_k).",
    ),
    _Mistake(
        "scale_times",
        lambda q, k, v: _softmax(q @ _kt(k) * np.sqrt(q.shape[-1])) @ v,
        "The scores were multiplied by sqrt(d_k) instead of divided by it.",
    ),
    _Mistake(
        "scale_dv",
        lambda q, k, v: _softmax(q @ _kt(k) / np.sqrt(v.shape[-1])) @ v,
        "The scores were scaled by the values' width Dv = v.shape[-1]; d_k is the width "
        "of q and k, q.shape[-1].",
    ),
    _Mistake(
        "scale_by_s",
        lambda q, k, v: _softmax(q @ _kt(k) / np.sqrt(k.shape[-2])) @ v,
        "The scores were scaled by sqrt(S), the number of keys; d_k is the last axis of q and k.",
    ),
    _Mistake(
        "softmax_axis",
        lambda q, k, v: _softmax(q @ _kt(k) * _scale(q), axis=-2) @ v,
        "The softmax ran over the queries (axis -2): each query's weights must sum to 1 "
        "over the keys, the last axis (axis=-1).",
    ),
    _Mistake(
        "softmax_axis",
        lambda q, k, v: _softmax(q @ _kt(k) * _scale(q), axis=0) @ v,
        "The softmax ran over axis 0, which is the batch axis once q has leading axes; "
        "use axis=-1 (the keys).",
    ),
    _Mistake(
        "softmax_axis",
        lambda q, k, v: (lambda e: e / e.sum() @ v)(
            np.exp(q @ _kt(k) * _scale(q) - (q @ _kt(k) * _scale(q)).max())
        ),
        "The softmax was normalised over the whole array; each query's row must sum to "
        "1 on its own: e / e.sum(axis=-1, keepdims=True).",
    ),
    _Mistake("keepdims", _no_keepdims_max, _KEEPDIMS),
    _Mistake("keepdims", _no_keepdims_sum, _KEEPDIMS),
    _Mistake("keepdims", _no_keepdims_both, _KEEPDIMS),
    _Mistake(
        "no_softmax",
        lambda q, k, v: (q @ _kt(k) * _scale(q)) @ v,
        "There is no softmax: the scaled scores multiply v directly. Turn each row of "
        "scores into weights that sum to 1 first.",
    ),
    _Mistake(
        "k_not_transposed",
        lambda q, k, v: _softmax(q @ k * _scale(q)) @ v,
        "k was not transposed: the scores are q @ k^T, with k's last two axes swapped "
        "(np.swapaxes(k, -1, -2)).",
    ),
    _Mistake(
        "k_dot_T",
        lambda q, k, v: _softmax(q @ k.T * _scale(q)) @ v,
        "k.T reverses every axis of k, the batch and head axes too; swap only the last "
        "two: np.swapaxes(k, -1, -2) (or k.swapaxes(-1, -2)).",
    ),
    _Mistake(
        "returned_weights",
        lambda q, k, v: _softmax(q @ _kt(k) * _scale(q)),
        "This is the weights matrix (..., L, S): multiply it by v to get the output.",
    ),
    _Mistake(
        "overflow",
        _no_max_subtracted,
        "exp overflowed (np.exp of a score above about 709 is inf, and inf / inf is "
        "nan). Subtract each row's maximum score before np.exp: the softmax does not "
        "change, and the largest exponent becomes exp(0) = 1.",
    ),
    _Mistake(
        "v_at_weights",
        lambda q, k, v: v @ _softmax(q @ _kt(k) * _scale(q)),
        "The product is the wrong way round: the output is weights @ v, (..., L, S) "
        "times (..., S, Dv).",
    ),
]


def _mask_cases() -> list[_Case]:
    specs = [
        ("L = S", 4, 4),
        ("3 new tokens after 4 cached", 3, 7),
        ("1 new token after 4 cached", 1, 5),
        ("L = S = 2", 2, 2),
    ]
    return [_Case(label, (L, S), f"L={L}, S={S}") for label, L, S in specs]


def _ij(L, S):
    return np.arange(L)[:, None], np.arange(S)[None, :]  # (L, 1), (1, S)


_MASK_MISTAKES = [
    _Mistake(
        "inverted",
        lambda L, S: ~causal_mask(L, S),
        "True marks the hidden keys here. The book's masks are keep-masks: True = may "
        "attend (as in torch's scaled_dot_product_attention).",
    ),
    _Mistake(
        "top_left",
        lambda L, S: _ij(L, S)[1] <= _ij(L, S)[0],
        "The mask is aligned top-left (query i sees keys j <= i). With cached keys "
        "(S > L) the last query is the newest token and must see every key: align "
        "bottom-right, j <= i + (S - L) (np.tril(..., k=S - L)).",
    ),
    _Mistake(
        "inverted_top_left",
        lambda L, S: _ij(L, S)[1] > _ij(L, S)[0],
        "Two things: True marks hidden keys (the book's masks are keep-masks, True = may "
        "attend), and the mask is aligned top-left instead of bottom-right "
        "(j <= i + (S - L)).",
    ),
    _Mistake(
        "diagonal_hidden",
        lambda L, S: _ij(L, S)[1] < _ij(L, S)[0] + (S - L),
        "Each query must also see its own key: the condition is j <= i + (S - L), "
        "with <= (np.tril keeps the diagonal; np.triu(..., k=1) is what is hidden).",
    ),
    _Mistake(
        "diagonal_hidden_top_left",
        lambda L, S: _ij(L, S)[1] < _ij(L, S)[0],
        "Each query must see its own key and, with cached keys (S > L), the mask must "
        "be aligned bottom-right: j <= i + (S - L).",
    ),
    _Mistake(
        "transposed",
        lambda L, S: causal_mask(L, S).T,
        "The mask is transposed: it must have one row per query and one column per "
        "key, shape (L, S), with mask[i, j] = j <= i + (S - L).",
    ),
]


def _split_cases() -> list[_Case]:
    specs = [
        ("one sequence, 2 heads", 1, 4, 6, 2),
        ("a batch, B, L, n_heads and head_dim all different", 2, 5, 12, 3),
        ("L = n_heads, so a missing transpose keeps the shape", 2, 3, 6, 3),
        ("one head", 3, 4, 8, 1),
        ("4 heads of 2", 2, 6, 8, 4),
    ]
    cases = []
    for label, B, L, F, H in specs:
        x = np.arange(B * L * F, dtype=np.float64).reshape(B, L, F)  # each entry its own index
        cases.append(_Case(label, (x, H), f"x {x.shape}, n_heads={H}"))
    return cases


def _bhld(x, H):
    B, L, F = x.shape
    return B, H, L, F // H


_SPLIT_MISTAKES = [
    _Mistake(
        "no_transpose",
        lambda x, H: x.reshape(*_bhld(x, H)),
        "x was reshaped straight to (B, n_heads, L, head_dim): that cuts the sequence, "
        "not each token's features, into heads. Reshape to (B, L, n_heads, head_dim) "
        "first, then swap axes 1 and 2.",
    ),
    _Mistake(
        "heads_after_l",
        lambda x, H: x.reshape(x.shape[0], x.shape[1], H, x.shape[2] // H),
        "The heads axis still comes after L, (B, L, n_heads, head_dim): swap axes 1 and "
        "2 (np.swapaxes(x, 1, 2)).",
    ),
    _Mistake(
        "interleaved",
        lambda x, H: x.reshape(x.shape[0], x.shape[1], x.shape[2] // H, H).transpose(0, 3, 1, 2),
        "Head h took features h, h + n_heads, h + 2 n_heads, ...; in the book (and in "
        "torch's nn.MultiheadAttention) head h holds the consecutive features "
        "h*head_dim .. (h+1)*head_dim - 1: reshape to (B, L, n_heads, head_dim).",
    ),
    _Mistake(
        "l_and_head_dim_swapped",
        lambda x, H: x.reshape(x.shape[0], x.shape[1], H, x.shape[2] // H).transpose(0, 2, 3, 1),
        "The last two axes are (head_dim, L); the layout is (B, n_heads, L, head_dim): "
        "swap only axes 1 and 2 after the reshape.",
    ),
    _Mistake(
        "all_axes_reversed",
        lambda x, H: x.reshape(x.shape[0], x.shape[1], H, x.shape[2] // H).T,
        ".T reverses every axis of a 4-D array; swap only axes 1 and 2 "
        "(np.swapaxes(x, 1, 2) or x.transpose(0, 2, 1, 3)).",
    ),
]


# --------------------------------------------------------------------------------------------
# Running the reader's function
# --------------------------------------------------------------------------------------------


def _wrap(text: str, initial: str = "  ", subsequent: str = "  ") -> list[str]:
    """``text`` in lines of at most :data:`WIDTH` columns (:func:`attnbook.printed.wrap_lines`)."""
    if columns(text) == len(text):  # no wide characters: words break at spaces
        return textwrap.wrap(
            text,
            WIDTH,
            initial_indent=initial,
            subsequent_indent=subsequent,
            break_on_hyphens=False,
        ) or [initial]
    return wrap_lines(text, WIDTH, initial, subsequent)


def _fn_name(fn) -> str:
    try:
        name = getattr(fn, "__name__", None)
    except Exception:  # noqa: BLE001 - an object whose attributes raise
        name = None
    return name if isinstance(name, str) and name else type(fn).__name__


def _call(fn, args):
    """Call ``fn`` on copies of ``args`` with NumPy's warnings silenced (overflow is judged)."""
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def _try(fn, args):
    """``(result, exception)`` of a variant; the variants must not print warnings either."""
    try:
        return _call(fn, args), None
    except Exception as exc:  # noqa: BLE001 - a variant that raises is compared by its error
        return None, exc


@dataclass(frozen=True)
class _Got:
    arr: np.ndarray | None  # the result as a NumPy array of booleans or real numbers
    eps: float = 0.0  # machine epsilon of the dtype it came in (0 for exact dtypes)
    dtype: str = ""  # that dtype's name (a bfloat16 tensor is read as float32)
    problem: Printed | None = None  # why it is not an array of real numbers, after "returned"
    advice: Printed | None = None  # what to do about it


_COMPLEX_ADVICE = (
    "The right result is real. Find the step that made complex numbers "
    "(1j, np.emath.sqrt of a negative, np.fft) and keep every step real; "
    "taking .real at the end would hide the bug."
)


def _read_tensor(got):
    """A torch tensor as ``(NumPy array, eps, dtype name)``; bfloat16 and the like via float32."""
    torch = sys.modules.get("torch")
    t = got.detach().cpu()
    name = str(t.dtype).replace("torch.", "")
    eps = float(torch.finfo(t.dtype).eps) if torch and t.is_floating_point() else 0.0
    try:
        return t.numpy(), eps, name
    except TypeError:  # a dtype NumPy lacks: bfloat16, float8, complex32
        wider = torch.complex64 if t.is_complex() else torch.float32
        return t.to(wider).numpy(), eps, name


def _read_result(got) -> _Got:
    """The reader's result as a NumPy array of real numbers, or why it is not one."""
    eps, name = 0.0, ""
    if hasattr(got, "detach") and hasattr(got, "cpu"):  # a torch tensor
        if str(getattr(got, "device", "")) == "meta":
            return _Got(
                None,
                problem=say("a torch tensor on the meta device (it holds no values)"),
                advice=say(
                    "Return values computed on the CPU, not a tensor made with device='meta'."
                ),
            )
        try:
            got, eps, name = _read_tensor(got)
        except Exception:  # noqa: BLE001 - the reader's tensor, not the check, is at fault
            return _Got(
                None,
                problem=say(
                    "a torch tensor of dtype {dtype} (NumPy cannot read it)", dtype=got.dtype
                ),
            )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.asarray(got)
    except Exception:  # noqa: BLE001 - anything that is not array-like
        arr = None
    numbers = arr is not None and (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number))
    if arr is None or (not numbers and not isinstance(got, np.ndarray)):
        return _Got(None, problem=say("a {type} (not an array)", type=type(got).__name__))
    name = name or str(arr.dtype)
    if np.issubdtype(arr.dtype, np.complexfloating):
        return _Got(
            None,
            problem=say("complex values (dtype {dtype})", dtype=name),
            advice=say(_COMPLEX_ADVICE),
        )
    if arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number):
        if np.issubdtype(arr.dtype, np.floating):
            eps = max(eps, float(np.finfo(arr.dtype).eps))
        return _Got(arr, eps, name)
    advice = (
        say(
            "Return an array of floats. dtype object comes from np.array(..., "
            "dtype=object) or from a list of arrays of different shapes."
        )
        if arr.dtype == object
        else say("Return an array of floats.")
    )
    return _Got(
        None, problem=say("an array of dtype {dtype} (not numbers)", dtype=name), advice=advice
    )


def _as_result_array(got):
    """The reader's result as a NumPy array, or ``None`` when it is not an array of numbers."""
    return _read_result(got).arr


def _tolerance(expected, eps=0.0):
    """How far each entry may be from ``expected``, for a result in a dtype of epsilon ``eps``."""
    tol = ATOL + RTOL * np.abs(expected)
    if eps > RTOL:  # float16, bfloat16: allow for the rounding to so few digits
        eps = min(eps, 2.0**-7)  # not more than bfloat16's (float8 is a precision problem)
        tol = tol + LOW_PRECISION_EPS * eps * np.max(np.abs(expected), initial=0.0)
    return tol


def _close(a, b, eps=0.0) -> bool:
    if a.shape != b.shape:
        return False
    b = b.astype(np.float64)
    with np.errstate(all="ignore"):
        return bool(np.all(np.abs(a.astype(np.float64) - b) <= _tolerance(b, eps)))


def _same(a, b, eps=0.0) -> bool:
    """Equal shapes and values, booleans compared exactly, numbers within the tolerances."""
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        return a.shape == b.shape and bool(np.array_equal(a.astype(bool), b.astype(bool)))
    return _close(a, b, eps)


def _text(exc) -> str:
    """``str(exc)``, or a note when the exception's own ``__str__`` raises."""
    try:
        return str(exc)
    except Exception as err:  # noqa: BLE001 - the reader's exception class is at fault
        return f"(its message cannot be shown: str() raised {type(err).__name__})"


class _Diagnosis:
    """Which typical mistake explains the reader's result on the failing case ``i``.

    A candidate must give the right answer on every case the reader passed, reproduce the
    reader's result (or error) on case ``i`` while being wrong there; among several, the one
    that also reproduces the reader's results on the later cases wins.
    """

    def __init__(self, fn, mistakes, cases, i, reference):
        self.fn, self.cases, self.i, self.reference = fn, cases, i, reference
        self.live = [
            m
            for m in mistakes
            if all(_agrees(_try(m.fn, c.args), (reference(*c.args), None)) for c in cases[:i])
        ]

    def of_result(self, got):
        """The mistake whose variant returns ``got`` on the failing case, or ``None``."""
        case = self.cases[self.i]
        right = (self.reference(*case.args), None)
        matches = []
        for m in self.live:
            theirs = _try(m.fn, case.args)
            if _agrees((got, None), theirs) and not _agrees(theirs, right):
                matches.append(m)  # reproduces the result, and is wrong on this case
        return self._best(matches)

    def of_nonfinite(self, got):
        """The mistake whose variant gives nan or inf exactly where ``got`` does, or ``None``."""
        for m in self.live:
            out, exc = _try(m.fn, self.cases[self.i].args)
            out = None if exc is not None else _as_result_array(out)
            if (
                out is not None
                and out.shape == got.shape
                and np.array_equal(np.isfinite(out), np.isfinite(got))
                and not np.isfinite(out).all()
            ):
                return m
        return None

    def of_exception(self, exc):
        """The mistake whose variant raises the same error on the failing case, or ``None``."""
        case = self.cases[self.i]
        return self._best([m for m in self.live if _agrees((None, exc), _try(m.fn, case.args))])

    def _best(self, matches):
        if len(matches) > 1:
            later = [(c, _try(self.fn, c.args)) for c in self.cases[self.i + 1 :]]
            for m in matches:
                if all(_agrees(theirs, _try(m.fn, c.args)) for c, theirs in later):
                    return m
        return matches[0] if matches else None


def _agrees(a, b) -> bool:
    """Two ``(result, exception)`` pairs agree: equal results, or the same error and text."""
    (ra, ea), (rb, eb) = a, b
    if ea is not None or eb is not None:
        return ea is not None and eb is not None and type(ea) is type(eb) and _text(ea) == _text(eb)
    ga, gb = _read_result(ra), _read_result(rb)
    return ga.arr is not None and gb.arr is not None and _same(ga.arr, gb.arr, max(ga.eps, gb.eps))


def _inputs(case) -> Printed:
    return say("Inputs: {shapes}.", shapes=case.shapes)


def _fails(name, i, n, case) -> Printed:
    return say(
        "✗ {name} differs from attnbook on case {i} of {n} ({case}).",
        name=name,
        i=i + 1,
        n=n,
        case=say(case.label),
    )


def _hint(text: Printed) -> Printed:
    return say("Hint: {hint}", hint=text)


def _lines(parts, language: str) -> list[str]:
    """The headline and body of a result in ``language``, wrapped to :data:`WIDTH`."""
    lines = []
    for k, part in enumerate(parts):
        if isinstance(part, Printed):
            lines.extend(_wrap(part.text(language), "" if k == 0 else "  "))
        else:  # preformatted lines (a mask drawn as 0s and 1s), indented as they are
            for line in part:
                lines.extend(
                    [line]
                    if isinstance(line, str)
                    else ["  " + t for t in line.text(language).splitlines()]
                )
    return lines


def _result(
    fn, status, n, passed, headline: Printed, body=(), *, diagnosis=None, **fields
) -> CheckResult:
    parts = [headline, *body]
    texts = {lang: "\n".join(_lines(parts, lang)) for lang in i18n.LANGUAGES}
    every = [
        p
        for part in parts
        for p in ([part] if isinstance(part, Printed) else part)
        if isinstance(p, Printed)
    ]
    printed = Printed(texts, frozenset().union(*(p.untranslated for p in every)))
    if isinstance(diagnosis, Printed):
        diagnosis = diagnosis.text("en")
    return CheckResult(
        name=_fn_name(fn),
        status=status,
        n_cases=n,
        n_passed=passed,
        message=texts["en"],
        printed=printed,
        diagnosis=diagnosis,
        **fields,
    )


def _not_written(fn, n, what: Printed, how: str):
    name = _fn_name(fn)
    return _result(
        fn,
        "not written",
        n,
        0,
        say("{name} is not written yet ({why}).", name=name, why=what),
        [
            say(
                "Replace the `raise NotImplementedError` line with your code and run the cell "
                "again. The check then calls {name} on {n} cases ({cases}) and compares each "
                "result with attnbook's.",
                name=name,
                n=n,
                cases=say(how),
            )
        ],
    )


def _exception_hint(exc, fn_args) -> Printed | None:
    text = _text(exc)
    if isinstance(exc, TypeError) and "argument" in text:
        return say("The check calls your function as {call}.", call=fn_args)
    if "matmul" in text or "not aligned" in text:
        return say(
            "A matrix product got shapes that do not fit. The scores are q @ k^T with "
            "k's last two axes swapped (np.swapaxes(k, -1, -2); k.T also reverses the "
            "batch axes); the output is weights (..., L, S) @ v (..., S, Dv)."
        )
    if "reshape" in text:
        return say(
            "A reshape must keep the number of entries: (B, L, d_model) has as many "
            "as (B, L, n_heads, d_model // n_heads)."
        )
    if "broadcast" in text:
        return say(
            "Two arrays did not broadcast. A row max or sum needs keepdims=True "
            "to broadcast back over its row."
        )
    return None


_BATCHED = (
    "It works for one sequence (the earlier cases) but not for batched input: the "
    "arguments may have leading batch (and head) axes, (..., L, D). Write it with @ "
    "and np.swapaxes(a, -1, -2), which act on the last two axes whatever comes "
    "before them: no loop over rows, and no .T."
)


def _batched_hint(m) -> Printed:
    """The hint on the first batched case: handle leading axes, then the mistake, if any."""
    if m is None:
        return say(_BATCHED)
    return say("{sentence} {more}", sentence=say(_BATCHED), more=say(m.text))


def _first_batched(cases, i) -> bool:
    """Case ``i`` is the first with leading batch axes."""
    return cases[i].batched and not any(c.batched for c in cases[:i])


def _check(fn, fn_args, cases, reference, mistakes, how, compare) -> CheckResult:
    """Run ``fn`` on every case and compare with ``reference``; stop at the first failure.

    ``compare`` returns the failure, or the largest difference it judged (its pass criterion
    and the reported difference are one computation).
    """
    check_callable(fn, "fn", f" (the function to check, called as fn{fn_args})")
    name, n = _fn_name(fn), len(cases)
    worst = 0.0
    for i, case in enumerate(cases):
        diagnose = lambda i=i: _Diagnosis(fn, mistakes, cases, i, reference)  # noqa: E731
        try:
            got = _call(fn, case.args)
        except Exception as exc:  # noqa: BLE001 - the reader's error is the report
            if isinstance(exc, NotImplementedError):
                if i == 0:
                    return _not_written(fn, n, say("it raises NotImplementedError"), how)
                m = None
                hint = (
                    say(_BATCHED)
                    if _first_batched(cases, i)
                    else say(
                        "It passed {i} cases, then raised NotImplementedError on this "
                        "one: finish the code path this case takes.",
                        i=i,
                    )
                )
            else:
                m = diagnose().of_exception(exc)
                hint = (
                    _batched_hint(m)
                    if _first_batched(cases, i)
                    else say(m.text)
                    if m
                    else _exception_hint(exc, f"{name}{fn_args}")
                )
            text = _text(exc)
            msg = text if len(text) <= 300 else text[:300] + " ..."
            body = [
                _inputs(case),
                verbatim(f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__),
            ]
            if hint:
                body.append(_hint(hint))
            return _result(
                fn,
                "error",
                n,
                i,
                say(
                    "✗ {name} raised {error} on case {i} of {n} ({case}).",
                    name=name,
                    error=type(exc).__name__,
                    i=i + 1,
                    n=n,
                    case=say(case.label),
                ),
                body,
                case=case.shapes,
                mistake=m.code if m else None,
                diagnosis=hint,
            )
        if got is None:
            if i == 0:
                return _not_written(fn, n, say("it returns None"), how)
            hint = say(_BATCHED) if _first_batched(cases, i) else None
            return _result(
                fn,
                "wrong",
                n,
                i,
                say(
                    "✗ {name} returned None on case {i} of {n} ({case}).",
                    name=name,
                    i=i + 1,
                    n=n,
                    case=say(case.label),
                ),
                [_inputs(case), say("Is a `return` missing on some path?")]
                + ([_hint(hint)] if hint else []),
                case=case.shapes,
                diagnosis=hint,
            )
        expected = np.asarray(reference(*case.args))
        res = _read_result(got)
        if res.arr is None:
            body = [
                _inputs(case),
                say("Expected a NumPy array of shape {shape}.", shape=expected.shape),
            ]
            if res.advice:
                body.append(res.advice)
            return _result(
                fn,
                "wrong",
                n,
                i,
                say(
                    "✗ {name} returned {problem} on case {i} of {n} ({case}).",
                    name=name,
                    problem=res.problem,
                    i=i + 1,
                    n=n,
                    case=say(case.label),
                ),
                body,
                case=case.shapes,
                expected_shape=expected.shape,
            )
        outcome = compare(fn, i, n, case, res, expected, diagnose)
        if isinstance(outcome, CheckResult):
            return outcome
        worst = max(worst, outcome)
    close = (
        say("Largest |difference| {worst:.1e}, on:", worst=worst)
        if worst
        else say("The inputs were:")
    )
    return _result(
        fn,
        "passed",
        n,
        n,
        say("✓ {name} agrees with attnbook on all {n} cases.", name=name, n=n),
        [close, [f"    {c.shapes}" for c in cases]],
        max_abs_diff=worst,
    )


def _compare_arrays(fn, i, n, case, res, expected, diagnose):
    """The largest difference if ``res`` equals ``expected``, else the failure.

    The tolerances are those of the result's dtype (see :func:`_tolerance`).
    """
    got, name = res.arr, _fn_name(fn)
    head = _fails(name, i, n, case)
    fields = dict(case=case.shapes, expected_shape=expected.shape, got_shape=got.shape)
    shape_line = say(
        "Expected shape {expected}, got {got}.", expected=expected.shape, got=got.shape
    )
    if got.shape != expected.shape:
        d = diagnose()
        m = d.of_result(got)
        hint = _batched_hint(m) if _first_batched(d.cases, i) else say(m.text) if m else None
        body = [_inputs(case), shape_line]
        if hint:
            body.append(_hint(hint))
        return _result(
            fn, "wrong", n, i, head, body, mistake=m.code if m else None, diagnosis=hint, **fields
        )
    got64 = got.astype(np.float64)
    bad_nonfinite = ~np.isfinite(got64) & np.isfinite(expected)
    if bad_nonfinite.any():
        where = tuple(int(t) for t in np.argwhere(bad_nonfinite)[0])
        m = diagnose().of_nonfinite(got64)
        body = [
            _inputs(case),
            shape_line,
            say(
                "Your result holds {count} nan or inf entries, e.g. at index {where}; the "
                "right result is finite.",
                count=int(bad_nonfinite.sum()),
                where=where,
            ),
        ]
        if m:
            body.append(_hint(say(m.text)))
        return _result(
            fn,
            "wrong",
            n,
            i,
            head,
            body,
            where=where,
            mistake=m.code if m else None,
            diagnosis=m.text if m else None,
            **fields,
        )
    with np.errstate(all="ignore"):
        diff = np.abs(got64 - expected)
        if np.all(diff <= _tolerance(expected, res.eps)):
            return float(np.max(diff, initial=0.0))
    where = tuple(int(t) for t in np.unravel_index(np.nanargmax(diff), diff.shape))
    m = diagnose().of_result(got)
    body = [
        _inputs(case),
        shape_line,
        say(
            "Largest |difference| {diff:.3g} at index {where}: expected {expected:.4g}, "
            "got {got:.4g}.",
            diff=diff[where],
            where=where,
            expected=expected[where],
            got=got64[where],
        ),
    ]
    if m:
        body.append(_hint(say(m.text)))
    elif res.eps > RTOL:
        digits = max(1, round(-np.log10(res.eps)))
        body.append(
            say(
                "Hint: your result is {dtype}, which keeps about {digits} significant digit, and "
                "the difference is more than the check allows for rounding. If each step is "
                "right, compute in float64 (or float32) and convert only the result."
                if digits == 1
                else "Hint: your result is {dtype}, which keeps about {digits} significant "
                "digits, and the difference is more than the check allows for rounding. "
                "If each step is right, compute in float64 (or float32) and convert only the "
                "result.",
                dtype=res.dtype,
                digits=digits,
            )
        )
    elif (rel := float(diff[where] / max(np.max(np.abs(expected)), ATOL))) < SMALL_RELATIVE:
        body.append(
            say(
                "Hint: the difference is small next to the values ({rel:.1g} of the "
                "largest), as when a step is computed in low precision (float16, "
                "bfloat16) and converted back. Keep every step in float64 (or "
                "float32).",
                rel=rel,
            )
        )
    else:
        body.append(say("No typical mistake matches; compare each step with the equation."))
    return _result(
        fn,
        "wrong",
        n,
        i,
        head,
        body,
        max_abs_diff=float(diff[where]),
        where=where,
        mistake=m.code if m else None,
        diagnosis=m.text if m else None,
        **fields,
    )


def _draw(mask) -> list[str]:
    return [" ".join("1" if x else "0" for x in row) for row in mask]


_ADDITIVE = (
    "This is an additive mask (0 = keep, -inf = hidden), the kind added to the "
    "scores before the softmax. The book's masks are boolean keep-masks, True = "
    "may attend: return the comparison itself (or mask == 0)."
)


def _is_additive(got) -> bool:
    """A float mask of 0s (keep) and -inf or large negative numbers (hidden)."""
    if not np.issubdtype(got.dtype, np.floating) or got.size == 0:
        return False
    with np.errstate(all="ignore"):
        return bool(np.all((got == 0) | (got <= -1e4)) and np.any(got < 0))


def _compare_masks(fn, i, n, case, res, expected, diagnose):
    """``0.0`` if ``res`` is the boolean keep-mask ``expected``, else the failure."""
    got, name = res.arr, _fn_name(fn)
    head = _fails(name, i, n, case)
    fields = dict(case=case.shapes, expected_shape=expected.shape, got_shape=got.shape)
    shape_line = say(
        "Expected shape {expected}, got {got}.", expected=expected.shape, got=got.shape
    )
    not_bool = got.dtype != np.bool_
    additive = _is_additive(got)
    pattern = (got == 0 if additive else got != 0) if not_bool else got
    dtype_text = (
        say(_ADDITIVE)
        if additive
        else say(
            "The mask has dtype {dtype}; a keep-mask must be boolean. attnbook (like torch) adds "
            "a float mask to the scores instead of hiding keys (0s and 1s would hide nothing) "
            "and rejects an integer one. Build the mask with a comparison, or .astype(bool).",
            dtype=got.dtype,
        )
    )
    if pattern.shape == expected.shape and np.array_equal(pattern, expected):
        if not not_bool:
            return 0.0
        return _result(
            fn,
            "wrong",
            n,
            i,
            head,
            [
                _inputs(case),
                shape_line,
                say("The pattern is right, but: {problem}", problem=dtype_text),
            ],
            mistake="additive" if additive else "not_boolean",
            diagnosis=dtype_text,
            max_abs_diff=0,
            **fields,
        )
    m = diagnose().of_result(pattern)
    body = [_inputs(case), shape_line]
    extra = {}
    if pattern.shape == expected.shape:
        wrong = pattern != expected
        where = tuple(int(t) for t in np.argwhere(wrong)[0])
        word = {True: say("True (keep)"), False: say("False (hidden)")}
        body.append(
            say(
                "{count} of {size} entries differ; the first at query {query}, key "
                "{key}: expected {expected}, got {got}.",
                count=int(wrong.sum()),
                size=wrong.size,
                query=where[0],
                key=where[1],
                expected=word[bool(expected[where])],
                got=word[bool(pattern[where])],
            )
        )
        if expected.shape[1] <= 12:
            body.append(
                [
                    table(
                        ["expected", "yours"],
                        list(zip(_draw(expected), _draw(pattern))),
                        align="<<",
                    )
                ]
            )
        extra = dict(max_abs_diff=float(wrong.sum()), where=where)
    text = say(m.text) if m else None
    if not_bool:
        text = (
            say("{mistake} Also: {more}", mistake=text, more=dtype_text) if text else (dtype_text)
        )
    L, S = case.args
    if not text and pattern.shape == (L, L) and L != S:
        text = say(
            "The mask is (L, L) = {got}: it needs one row per query and one column "
            "per key, shape (L, S) = {expected}, since a query may attend to the "
            "S - L cached keys too.",
            got=pattern.shape,
            expected=expected.shape,
        )
    body.append(
        _hint(text)
        if text
        else say("No typical mistake matches; compare with mask[i, j] = j <= i + (S - L).")
    )
    return _result(
        fn,
        "wrong",
        n,
        i,
        head,
        body,
        mistake=m.code if m else None,
        diagnosis=text,
        **fields,
        **extra,
    )


# --------------------------------------------------------------------------------------------
# The public checks
# --------------------------------------------------------------------------------------------


def check_attention(fn) -> CheckResult:
    """Check a reader's scaled dot-product attention ``fn(q, k, v)`` against attnbook's.

    Runs ``fn`` on six cases of float64 inputs — one sequence with ``L = S``; ``L != S`` and
    ``Dv != D``; ``d_k = S`` (so that forgetting to transpose ``k`` gives numbers rather than
    an error); a batch axis ``(B, L, D)``; batch and head axes ``(B, H, L, D)``; and scores up
    to about 1000, where a softmax that does not subtract the row maximum overflows — and
    compares each result with :func:`attnbook.attention.scaled_dot_product_attention`
    (tolerance ``ATOL + RTOL * |expected|``, plus ``LOW_PRECISION_EPS`` epsilons of the
    result's dtype times ``max |expected|`` for float16 and bfloat16; the largest difference
    reported on success is the one judged). Stops at the first case that fails.

    Args:
        fn: the reader's function. It is called as ``fn(q, k, v)`` with NumPy float64 arrays
            ``q (..., L, D)``, ``k (..., S, D)``, ``v (..., S, Dv)`` (copies: changing them
            does no harm) and must return ``softmax(q k^T / sqrt(D)) v``, shape
            ``(..., L, Dv)`` (a NumPy array, or anything ``np.asarray`` reads).

    Returns:
        A :class:`CheckResult`, truthy when every case passed. Otherwise its text names the
        case and its shapes, the expected and returned shapes, the largest difference and its
        index, and the mistake when the result equals a typical wrong variant on that case
        (no scale, scale by ``d_k`` or ``Dv``, softmax over the wrong axis, no ``keepdims``,
        ``k`` not transposed, ``k.T`` on batched arrays, no softmax, weights returned,
        overflow), that a function right for one sequence must handle leading axes, or that
        a difference below ``SMALL_RELATIVE`` of the values looks like low precision.
        ``NotImplementedError`` or ``None`` gives status ``"not written"``; any other
        exception is reported, with the case's shapes, as status ``"error"``.

    Raises:
        TypeError: if ``fn`` is not callable.

    Source: Vaswani et al. (2017), eq. 1: ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.
    """
    cases = _attention_cases(np.random.default_rng(0))
    return _check(
        fn,
        "(q, k, v)",
        cases,
        scaled_dot_product_attention,
        _ATTENTION_MISTAKES,
        "square and L != S, batch and head axes, Dv != D, large scores",
        _compare_arrays,
    )


def check_causal_mask(fn) -> CheckResult:
    """Check a reader's causal keep-mask ``fn(L, S)`` against :func:`attnbook.masks.causal_mask`.

    Runs ``fn`` on four cases — ``L = S = 4``; a chunk of 3 queries after 4 cached keys
    (``L = 3, S = 7``); decoding one query after 4 cached keys (``L = 1, S = 5``); and
    ``L = S = 2`` — and compares each result with the book's mask: boolean, ``True`` = may
    attend, aligned bottom-right (query ``i`` sees keys ``j <= i + (S - L)``). Stops at the
    first case that fails.

    Args:
        fn: the reader's function, called as ``fn(L, S)`` with two Python ints; it must return
            a boolean ``(L, S)`` array (or anything ``np.asarray`` reads).

    Returns:
        A :class:`CheckResult`, truthy when every case passed. Otherwise its text names the
        case, the expected and returned shapes, how many entries differ and the first one,
        both masks drawn as 0s and 1s, and the mistake when the result equals a typical
        wrong variant (``True`` meaning hidden, top-left alignment, the diagonal hidden, the
        mask transposed, one column per query: ``(L, L)``) or is a 0/1 mask of numbers
        instead of booleans.
        ``NotImplementedError`` or ``None`` gives status ``"not written"``; any other
        exception is reported, with the case, as status ``"error"``.

    Raises:
        TypeError: if ``fn`` is not callable.

    Source: the bottom-right alignment of torch's ``causal_lower_right`` and of KV-cache
    decoding; the keep-mask polarity of ``torch.nn.functional.scaled_dot_product_attention``.
    """
    return _check(
        fn,
        "(L, S)",
        _mask_cases(),
        causal_mask,
        _MASK_MISTAKES,
        "L = S and L < S, as in decoding with a KV cache",
        _compare_masks,
    )


def check_split_heads(fn) -> CheckResult:
    """Check a reader's ``fn(x, n_heads)`` that splits ``(B, L, d_model)`` into heads.

    Runs ``fn`` on five cases — one sequence with 2 heads; a batch where ``B``, ``L``,
    ``n_heads`` and ``head_dim`` all differ; ``L = n_heads`` (a reshape without the transpose
    then has the right shape and wrong values); one head; four heads — with inputs whose
    entries are their own flat index (so a wrong entry tells where it came from), and
    compares each result with :func:`attnbook.heads.split_heads`, the layout of
    :func:`attnbook.layers.split_heads` and of the book's multi-head attention. Stops at the first
    case that fails.

    Args:
        fn: the reader's function, called as ``fn(x, n_heads)`` with ``x`` a float64
            ``(B, L, d_model)`` array (a copy) and ``n_heads`` an int dividing ``d_model``; it
            must return ``(B, n_heads, L, head_dim)`` with head ``h`` holding features
            ``h*head_dim .. (h+1)*head_dim - 1``.

    Returns:
        A :class:`CheckResult`, truthy when every case passed. Otherwise its text names the
        case, the expected and returned shapes, the largest difference and its index, and
        the mistake when the result equals a typical wrong variant (reshaped to
        ``(B, n_heads, L, head_dim)`` without the transpose, heads axis left after ``L``,
        features interleaved across heads, ``L`` and ``head_dim`` swapped, ``.T`` on a 4-D
        array). ``NotImplementedError`` or ``None`` gives status ``"not written"``; any other
        exception is reported, with the case's shapes, as status ``"error"``.

    Raises:
        TypeError: if ``fn`` is not callable.

    Source: Vaswani et al. (2017), section 3.2.2; the head layout of torch's
    ``nn.MultiheadAttention``.
    """
    return _check(
        fn,
        "(x, n_heads)",
        _split_cases(),
        split_heads,
        _SPLIT_MISTAKES,
        "one and several heads, a batch, L = n_heads",
        _compare_arrays,
    )
