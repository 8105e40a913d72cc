"""What the book's tests add to ``torch.testing.assert_close``: the low-precision rule, mixed kinds.

A plain comparison is ``torch.testing.assert_close``: it fails on NaN (``equal_nan=False``), on
a shape, dtype or device mismatch and on infinities that differ, and names the worst element.
Tests use it directly wherever both sides are of the same kind and dtype. This module keeps
only what it lacks:

* :func:`assert_low_precision_close`, the book's rule for float16, bfloat16 and float32
  results (STYLE, "Low precision"; FlashAttention's ``tests/test_flash_attn.py``): the error
  against an exact reference is at most twice the error of a plain same-dtype implementation,
  plus a small floor — never a hand-tuned ``atol``;
* :func:`assert_close`, ``torch.testing.assert_close`` for two sides of different kinds (a
  float32 tensor against a float64 NumPy reference, an array against a list of hand-derived
  numbers): both are widened to float64 first, then torch compares them.

``to_numpy`` is the widening both use. This module imports torch only when a torch comparison
runs.
"""

from __future__ import annotations

import numpy as np

from . import checks

__all__ = ["assert_low_precision_close", "assert_close", "to_numpy"]


def to_numpy(x) -> np.ndarray:
    """Convert an array-like (NumPy, torch tensor, list) to a float64 NumPy array.

    torch tensors are detached and moved to the CPU; bfloat16 and float16 are widened exactly
    (every value of a narrower float is representable in float64).

    Args:
        x: a NumPy array, a torch tensor (any device, with or without grad), a Python scalar
            or a nested list, of a floating, integer or boolean dtype.

    Returns:
        A float64 ``np.ndarray`` of the shape of ``x``; integers and booleans (``True`` = 1.0)
        are converted to float64 as well.

    Raises:
        TypeError: for any other dtype (complex, strings, objects).
    """
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu()
        if x.is_floating_point():
            x = x.double()
        x = x.numpy()
    arr = np.asarray(x)
    if np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.float64)
    if arr.dtype == np.bool_:
        return arr.astype(np.float64)
    raise TypeError(f"cannot compare values of dtype {arr.dtype}")


def assert_close(actual, expected, *, atol: float, rtol: float) -> None:
    """``torch.testing.assert_close`` of two array-likes of any kinds, both widened to float64.

    Use ``torch.testing.assert_close`` itself when both sides are tensors (or NumPy arrays) of
    one dtype; this is for the comparisons it refuses: a tensor against a NumPy array or a list,
    float32 against float64, integers against floats. The check is torch's,
    ``|actual - expected| <= atol + rtol * |expected|`` element-wise, with NaN never equal.

    Args:
        actual: array-like (NumPy, torch, nested lists, a scalar).
        expected: array-like of the same shape (no broadcasting: a shape mismatch fails).
        atol: absolute tolerance, >= 0.
        rtol: relative tolerance, >= 0.

    Raises:
        AssertionError: from ``torch.testing.assert_close``, if any element is NaN (in either
            argument), the shapes differ, infinities do not match in position and sign, or any
            difference exceeds the tolerance; the message names the mismatched elements and
            the greatest absolute and relative differences.
        ValueError: if ``atol`` or ``rtol`` is negative or not finite.
        TypeError: if ``atol`` or ``rtol`` is not a real number (``None``, strings, bools);
            0-d arrays are accepted, as everywhere in :mod:`attnbook.checks`.

    Note:
        Both sides are converted to float64 first, so integers beyond ``2**53`` are compared
        after rounding (``2**53 + 1`` and ``2**53`` compare equal even with ``atol=0``);
        compare such integers exactly with ``np.array_equal``.
    """
    import torch

    atol = checks.check_real(atol, "atol", minimum=0.0)
    rtol = checks.check_real(rtol, "rtol", minimum=0.0)
    torch.testing.assert_close(
        torch.from_numpy(to_numpy(actual)),
        torch.from_numpy(to_numpy(expected)),
        atol=atol,
        rtol=rtol,
        equal_nan=False,
    )


def assert_low_precision_close(actual, reference, *, plain, floor: float) -> None:
    """Assert ``err(actual) <= 2 * err(plain) + floor``, errors as max abs against ``reference``.

    The book's rule for a low-precision result (STYLE, "Low precision"; the tolerance of
    FlashAttention's ``tests/test_flash_attn.py``): an implementation in float16, bfloat16 or
    float32 is as good as its dtype allows when its error against an exact reference is at most
    twice the error of a plain implementation in the same dtype. ``plain`` is that plain
    implementation's output (the formula computed step by step in the dtype), or the exact
    answer rounded to the dtype where the error to beat is the rounding itself. ``floor``
    covers a plain result that happens to be exact (an ``eps`` of the dtype).

    Args:
        actual: the result under test, array-like (NumPy, torch in any dtype, scalars).
        reference: the exact result (float64, or float32 for a bfloat16 result), the shape of
            ``actual``.
        plain: the plain same-dtype result, the shape of ``actual``.
        floor: the error allowed when ``plain`` is exact, >= 0.

    Raises:
        AssertionError: if the shapes differ, any side has NaN or an infinity (an infinite
            plain error would excuse any error), or the rule fails; the message gives both
            errors and the bound.
        ValueError: if ``floor`` is negative or not finite.
        TypeError: if ``floor`` is not a real number.
    """
    floor = checks.check_real(floor, "floor", minimum=0.0)
    a, r, p = to_numpy(actual), to_numpy(reference), to_numpy(plain)
    if not a.shape == r.shape == p.shape:
        raise AssertionError(
            f"shape mismatch: actual {a.shape}, reference {r.shape}, plain {p.shape}"
        )
    for name, x in (("actual", a), ("reference", r), ("plain", p)):
        if not np.isfinite(x).all():
            raise AssertionError(
                f"{name} is not finite: {int(np.isnan(x).sum())} NaN, "
                f"{int(np.isinf(x).sum())} infinite of {x.size}"
            )
    err = float(np.abs(a - r).max(initial=0.0))
    err_plain = float(np.abs(p - r).max(initial=0.0))
    if not err <= 2 * err_plain + floor:
        raise AssertionError(
            f"error {err:.3e} > 2 x plain error {err_plain:.3e} + floor "
            f"{floor:.1e} = {2 * err_plain + floor:.3e}"
        )
