"""Layer normalization and RMS normalization in NumPy.

Both normalize each token's feature vector (the last axis, ``d_model``) on its own:

* LayerNorm subtracts the mean and divides by the standard deviation, with the **biased**
  variance (divide by ``d_model``, not ``d_model - 1``) and ``eps`` inside the square root:
  ``y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` (Ba et al., 2016, eq. 4; the
  form of ``torch.nn.LayerNorm``).
* RMSNorm skips the centring: ``y = x * rsqrt(mean(x^2) + eps) * weight`` (Zhang & Sennrich,
  2019, eq. 4; the form of ``torch.nn.RMSNorm`` and of Llama's ``LlamaRMSNorm``).

Torch twin: the modules :class:`attnbook.layers.LayerNorm` and :class:`attnbook.layers.RMSNorm`
(the same formulas, learnable ``weight`` and ``bias``). This module imports NumPy only.
"""

from __future__ import annotations

import numpy as np

from . import checks
from .attention import compute_dtype

__all__ = ["layer_norm_core", "layer_norm", "rms_norm_core", "rms_norm"]


# fmt: off
def layer_norm_core(x, weight=1.0, bias=0.0, eps=1e-5):
    """LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * w + b.

    x (..., d_model); weight w, bias b (d_model,) or scalars. Biased variance.
    """
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    centred = x - mean  # (..., d_model)
    var = (centred * centred).mean(axis=-1, keepdims=True)  # (..., 1)
    return centred / np.sqrt(var + eps) * weight + bias  # (..., d_model)
# fmt: on


def _affine(param, name: str, x: np.ndarray, default: float, dtype) -> np.ndarray:
    """A gain or shift of shape ``(d_model,)`` in ``dtype``; ``None`` means ``default``."""
    if param is None:
        return np.asarray(default, dtype=dtype)
    p = checks.as_float_array(param, name)
    if p.shape != (x.shape[-1],):
        raise ValueError(
            f"{name} must have shape (d_model,) = ({x.shape[-1]},) to match x of shape "
            f"{x.shape}; got shape {p.shape}"
        )
    return p.astype(dtype, copy=False)


def _check_x(x) -> np.ndarray:
    return checks.check_ndim(checks.as_float_array(x, "x"), "x", "(..., d_model)")


def _zero_rows(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether a finite row of ``x`` gave a non-finite row of ``y`` (a zero denominator)."""
    if x.shape[-1] == 0:
        return False
    return bool((np.isfinite(x).all(axis=-1) & ~np.isfinite(y).all(axis=-1)).any())


def layer_norm(x, weight=None, bias=None, *, eps: float = 1e-5) -> np.ndarray:
    """Layer normalization over the last axis; checks its input and calls :func:`layer_norm_core`.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance
    ``var = mean((x - mean)^2)``.

    Args:
        x: ``(..., d_model)`` real array; integers are promoted to float64.
        weight: optional gain ``(d_model,)`` (``gamma``); ``None`` means 1.
        bias: optional shift ``(d_model,)`` (``beta``); ``None`` means 0.
        eps: added to the variance inside the square root (torch's default 1e-5), a real
            number >= 0.

    Returns:
        ``(..., d_model)`` array in the floating dtype of ``x`` (the statistics are computed in
        at least float32 — float32 for float16 input, float64 for float64 — and the result
        cast back). Each row has mean 0 and (for ``eps = 0``) biased variance 1 before the
        affine map.

    Raises:
        ValueError: if ``x`` is a scalar, ``weight``/``bias`` are not ``(d_model,)``, ``eps``
            is negative or not finite, or (``eps = 0``) a row is constant, whose variance is 0.
        TypeError: for non-numeric input or an ``eps`` that is not a real number.

    Source: Ba, Kiros & Hinton, "Layer Normalization" (2016), eq. 4; matches
    ``torch.nn.LayerNorm``.
    """
    x = _check_x(x)
    eps = checks.check_real(eps, "eps", minimum=0.0)
    dtype = compute_dtype(x)
    weight = _affine(weight, "weight", x, 1.0, dtype)
    bias = _affine(bias, "bias", x, 0.0, dtype)
    xc = x.astype(dtype, copy=False)  # statistics in >= float32
    with np.errstate(divide="ignore", invalid="ignore"):
        y = layer_norm_core(xc, weight, bias, dtype.type(eps))
    if eps == 0 and _zero_rows(xc, y):
        raise ValueError(
            f"layer_norm with eps={eps} of x of shape {x.shape}: a row is constant (variance 0); "
            "use eps > 0"
        )
    return y.astype(x.dtype, copy=False)


# fmt: off
def rms_norm_core(x, weight=1.0, eps=1e-6):
    """RMSNorm over the last axis: ``x / sqrt(mean(x^2) + eps) * weight``.

    x (..., d_model); weight (d_model,) or a scalar. No centring, no bias.
    """
    ms = (x * x).mean(axis=-1, keepdims=True)  # (..., 1) mean square
    return x / np.sqrt(ms + eps) * weight  # (..., d_model)
# fmt: on


def rms_norm(x, weight=None, *, eps: float = 1e-6) -> np.ndarray:
    """RMS normalization over the last axis; checks its input and calls :func:`rms_norm_core`.

    ``y = x * rsqrt(mean(x^2) + eps) * weight``. Unlike LayerNorm there is no centring and no
    bias. With a tiny input such as ``[1e-3, -1e-3]`` and ``eps = 1e-6`` the ``eps`` term is
    as large as ``mean(x^2)``, so the output is ``x / sqrt(2e-6) = [0.7071, -0.7071]`` rather
    than ``[1, -1]``.

    Args:
        x: ``(..., d_model)`` real array; integers are promoted to float64.
        weight: optional gain ``(d_model,)``; ``None`` means 1.
        eps: added to the mean square inside the square root (Llama uses 1e-5 or 1e-6), a
            real number >= 0.

    Returns:
        ``(..., d_model)`` array in the floating dtype of ``x``; the mean square is computed in
        at least float32 (``300**2`` overflows float16) and the result cast back.

    Raises:
        ValueError: if ``x`` is a scalar, ``weight`` is not ``(d_model,)``, ``eps`` is negative
            or not finite, or (``eps = 0``) a row is all zeros.
        TypeError: for non-numeric input or an ``eps`` that is not a real number.

    Source: Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019), eq. 4; matches
    ``torch.nn.RMSNorm``.
    """
    x = _check_x(x)
    eps = checks.check_real(eps, "eps", minimum=0.0)
    dtype = compute_dtype(x)
    weight = _affine(weight, "weight", x, 1.0, dtype)
    xc = x.astype(dtype, copy=False)  # statistics in >= float32
    with np.errstate(divide="ignore", invalid="ignore"):
        y = rms_norm_core(xc, weight, dtype.type(eps))
    if eps == 0 and _zero_rows(xc, y):
        raise ValueError(
            f"rms_norm with eps={eps} of x of shape {x.shape}: a row is all zeros; use eps > 0"
        )
    return y.astype(x.dtype, copy=False)
