"""Comparison helpers for the test suite and the chapters.

``assert_close`` fails on any NaN, on a shape mismatch and on infinities that do not match,
and reports the largest and mean absolute difference so a failure tells how far off it was.
It never relies on ``max(0.0, nan)``-style reductions, which silently drop NaN.
"""

from __future__ import annotations

import numpy as np

from . import checks

__all__ = ["assert_close", "to_numpy"]


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
    """Assert ``|actual - expected| <= atol + rtol * |expected|`` element-wise.

    Args:
        actual: array-like (NumPy, torch, nested lists).
        expected: array-like of the same shape (no broadcasting: a shape mismatch fails).
        atol: absolute tolerance, >= 0.
        rtol: relative tolerance, >= 0.

    Raises:
        AssertionError: if any element is NaN (in either argument), the shapes differ,
            infinities do not match in position and sign, or any difference exceeds the
            tolerance. The message gives the max and mean absolute difference, the number of
            mismatches and the worst index.
        ValueError: if ``atol`` or ``rtol`` is negative or not finite.
        TypeError: if ``atol`` or ``rtol`` is not a real number (``None``, strings, bools);
            0-d arrays are accepted, as everywhere in :mod:`attnbook.checks`.

    Note:
        Both sides are converted to float64 first, so integers beyond ``2**53`` are compared
        after rounding (``2**53 + 1`` and ``2**53`` compare equal even with ``atol=0``);
        compare such integers exactly with ``np.array_equal``.
    """
    atol = checks.check_real(atol, "atol", minimum=0.0)
    rtol = checks.check_real(rtol, "rtol", minimum=0.0)
    a = to_numpy(actual)
    e = to_numpy(expected)
    if a.shape != e.shape:
        raise AssertionError(f"shape mismatch: actual {a.shape} vs expected {e.shape}")
    n_nan_a = int(np.isnan(a).sum())
    n_nan_e = int(np.isnan(e).sum())
    if n_nan_a or n_nan_e:
        raise AssertionError(
            f"NaN found: {n_nan_a} in actual, {n_nan_e} in expected (shape {a.shape})"
        )
    inf_a, inf_e = np.isinf(a), np.isinf(e)
    if (inf_a != inf_e).any() or (np.sign(a[inf_a]) != np.sign(e[inf_e])).any():
        raise AssertionError(f"infinities differ between actual and expected (shape {a.shape})")
    finite = ~inf_a
    if a.size == 0:
        return
    diff = np.zeros_like(a)
    diff[finite] = np.abs(a[finite] - e[finite])
    tol = atol + rtol * np.abs(np.where(finite, e, 0.0))
    bad = ~(diff <= tol)  # NaN-safe: a NaN difference counts as bad
    max_diff = float(diff.max())
    mean_diff = float(diff.mean())
    if bad.any():
        worst = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), a.shape)
        raise AssertionError(
            f"not close: {int(bad.sum())} of {a.size} elements exceed atol={atol}, rtol={rtol}; "
            f"max abs diff {max_diff:.3e}, mean abs diff {mean_diff:.3e}; worst at index "
            f"{tuple(int(i) for i in worst)}: actual {a[worst]!r}, expected {e[worst]!r}"
        )
