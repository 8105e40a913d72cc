"""Layer normalization and RMS normalization in NumPy.

Both normalize each token's feature vector (the last axis, ``d_model``) on its own:

* LayerNorm subtracts the mean and divides by the standard deviation, with the **biased**
  variance (divide by ``d_model``, not ``d_model - 1``) and ``eps`` inside the square root:
  ``y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` (Ba et al., 2016, eq. 4; the
  form of ``torch.nn.LayerNorm``).
* RMSNorm skips the centring: ``y = x * rsqrt(mean(x^2) + eps) * weight`` (Zhang & Sennrich,
  2019, eq. 4; the form of ``torch.nn.RMSNorm`` and of Llama's ``LlamaRMSNorm``).

The torch modules with the same names live in :mod:`attnbook.nn` (``LayerNorm``, ``RMSNorm``).
This module imports NumPy only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["layer_norm", "rms_norm"]


def _as_float(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def _compute_dtype(dtype) -> np.dtype:
    """float16 statistics overflow (``300**2`` is inf); compute in at least float32."""
    return np.result_type(dtype, np.float32)


def _check_eps(eps) -> float:
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    return eps


def _check_affine(param, name: str, x: np.ndarray):
    if param is None:
        return None
    p = _as_float(param, name)
    if p.shape != (x.shape[-1],):
        raise ValueError(
            f"{name} must have shape (d_model,) = ({x.shape[-1]},) to match x of shape "
            f"{x.shape}; got shape {p.shape}"
        )
    return p


def layer_norm(x, weight=None, bias=None, *, eps: float = 1e-5) -> np.ndarray:
    """Layer normalization over the last axis.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance
    ``var = mean((x - mean)^2)``.

    Args:
        x: ``(..., d_model)`` real array; integers are promoted to float64.
        weight: optional gain ``(d_model,)`` (``gamma``); ``None`` means 1.
        bias: optional shift ``(d_model,)`` (``beta``); ``None`` means 0.
        eps: added to the variance inside the square root (torch's default 1e-5).

    Returns:
        ``(..., d_model)`` array in the floating dtype of ``x`` (the statistics are computed in
        float32 for float16 input, in float64 for float64, and the result cast back). Each
        row has mean 0 and (for ``eps = 0``) biased variance 1 before the affine map.

    Raises:
        ValueError: if ``x`` is a scalar, ``weight``/``bias`` are not ``(d_model,)``, ``eps``
            is negative, or (``eps = 0``) a row is constant, whose variance is 0.
        TypeError: for non-numeric input.

    Source: Ba, Kiros & Hinton, "Layer Normalization" (2016), eq. 4; matches
    ``torch.nn.LayerNorm``.
    """
    x = _as_float(x, "x")
    if x.ndim == 0:
        raise ValueError("x must have a feature axis (..., d_model); got a scalar")
    eps = _check_eps(eps)
    weight = _check_affine(weight, "weight", x)
    bias = _check_affine(bias, "bias", x)
    xc = x.astype(_compute_dtype(x.dtype), copy=False)  # statistics in >= float32
    mean = xc.mean(axis=-1, keepdims=True)  # (..., 1)
    centred = xc - mean  # (..., d_model)
    var = np.mean(centred * centred, axis=-1, keepdims=True)  # (..., 1) biased variance
    denom = var + np.asarray(eps, dtype=xc.dtype)
    if (denom <= 0).any():
        raise ValueError(
            f"layer_norm with eps={eps} of x of shape {x.shape}: a row is constant (variance 0); "
            "use eps > 0"
        )
    y = centred / np.sqrt(denom)
    if weight is not None:
        y = y * weight.astype(xc.dtype, copy=False)
    if bias is not None:
        y = y + bias.astype(xc.dtype, copy=False)
    return y.astype(x.dtype, copy=False)


def rms_norm(x, weight=None, *, eps: float = 1e-6) -> np.ndarray:
    """RMS normalization over the last axis: ``y = x * rsqrt(mean(x^2) + eps) * weight``.

    Unlike LayerNorm there is no centring and no bias. With a tiny input such as
    ``[1e-3, -1e-3]`` and ``eps = 1e-6`` the ``eps`` term is as large as ``mean(x^2)``, so the
    output is ``x / sqrt(2e-6) = [0.7071, -0.7071]`` rather than ``[1, -1]``.

    Args:
        x: ``(..., d_model)`` real array; integers are promoted to float64.
        weight: optional gain ``(d_model,)``; ``None`` means 1.
        eps: added to the mean square inside the square root (Llama uses 1e-5 or 1e-6).

    Returns:
        ``(..., d_model)`` array in the floating dtype of ``x``; the mean square is computed in
        float32 for float16 input (``300**2`` overflows float16) and the result cast back.

    Raises:
        ValueError: if ``x`` is a scalar, ``weight`` is not ``(d_model,)``, ``eps`` is negative,
            or (``eps = 0``) a row is all zeros.
        TypeError: for non-numeric input.

    Source: Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019), eq. 4; matches
    ``torch.nn.RMSNorm``.
    """
    x = _as_float(x, "x")
    if x.ndim == 0:
        raise ValueError("x must have a feature axis (..., d_model); got a scalar")
    eps = _check_eps(eps)
    weight = _check_affine(weight, "weight", x)
    xc = x.astype(_compute_dtype(x.dtype), copy=False)  # statistics in >= float32
    ms = np.mean(xc * xc, axis=-1, keepdims=True) + np.asarray(eps, dtype=xc.dtype)  # (..., 1)
    if (ms <= 0).any():
        raise ValueError(
            f"rms_norm with eps={eps} of x of shape {x.shape}: a row is all zeros; use eps > 0"
        )
    y = xc / np.sqrt(ms)
    if weight is not None:
        y = y * weight.astype(xc.dtype, copy=False)
    return y.astype(x.dtype, copy=False)
