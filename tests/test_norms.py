"""Tests for attnbook.norms (NumPy) and the norm modules in attnbook.layers.

References: hand-derived values (issue 3), a float64 formula, torch.nn.LayerNorm and
torch.nn.RMSNorm.
"""

import subprocess
import sys

import numpy as np
import pytest
import torch

from attnbook import layers
from attnbook.norms import layer_norm, layer_norm_core, rms_norm, rms_norm_core
from attnbook.testing import assert_close, assert_low_precision_close

# --- hand-derived values --------------------------------------------------------------------


def test_rms_norm_tiny_input_eps_matters():
    # mean(x^2) = 1e-6, + eps 1e-6 = 2e-6, x / sqrt(2e-6) = +-1/sqrt(2)
    y = rms_norm(np.array([1e-3, -1e-3]), eps=1e-6)
    assert_close(y, [0.70710678, -0.70710678], atol=1e-8, rtol=0)


def test_rms_norm_vs_layer_norm_on_1234():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    # RMS = sqrt(30/4) = 2.7386...; LayerNorm: mean 2.5, biased var 1.25
    assert_close(
        rms_norm(x, eps=0.0), [0.36514837, 0.73029674, 1.09544512, 1.46059349], atol=1e-8, rtol=0
    )
    assert_close(
        layer_norm(x, eps=0.0), [-1.34164079, -0.4472136, 0.4472136, 1.34164079], atol=1e-8, rtol=0
    )


def test_layer_norm_one_hot():
    # mean 1/4, biased var 3/16: (1 - 1/4)/sqrt(3/16) = sqrt(3), (-1/4)/sqrt(3/16) = -1/sqrt(3)
    y = layer_norm(np.array([1.0, 0.0, 0.0, 0.0]), eps=0.0)
    assert_close(y, [1.7320508, -0.5773503, -0.5773503, -0.5773503], atol=1e-7, rtol=0)


def test_layer_norm_uses_biased_variance():
    # unbiased variance would give sqrt(3)*sqrt(3/4) = 1.5 for the first entry
    y = layer_norm(np.array([1.0, 0.0, 0.0, 0.0]), eps=0.0)
    assert abs(y[0] - np.sqrt(3.0)) < 1e-12
    assert abs(y[0] - 1.5) > 0.2


# --- the cores against the float64 formula and torch -------------------------------------------


def test_layer_norm_core_matches_formula_and_torch():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(3, 5, 8)) * 2 + 1
    w, b = rng.normal(size=8), rng.normal(size=8)
    mu = x.sum(-1, keepdims=True) / 8
    var = ((x - mu) ** 2).sum(-1, keepdims=True) / 8  # biased, written out
    expected = (x - mu) / np.sqrt(var + 1e-5) * w + b
    got = layer_norm_core(x, w, b, 1e-5)
    assert np.isfinite(got).all()
    assert_close(got, expected, atol=1e-12, rtol=1e-12)
    ref = torch.nn.functional.layer_norm(
        torch.from_numpy(x), (8,), torch.from_numpy(w), torch.from_numpy(b), eps=1e-5
    )
    assert_close(got, ref, atol=1e-12, rtol=1e-12)
    assert_close(layer_norm_core(x), layer_norm(x), atol=0, rtol=0)  # defaults: 1, 0, 1e-5


def test_rms_norm_core_matches_formula_and_torch():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(3, 5, 8))
    w = rng.normal(size=8)
    expected = x / np.sqrt((x**2).sum(-1, keepdims=True) / 8 + 1e-6) * w
    got = rms_norm_core(x, w, 1e-6)
    assert np.isfinite(got).all()
    assert_close(got, expected, atol=1e-12, rtol=1e-12)
    ref = torch.nn.functional.rms_norm(torch.from_numpy(x), (8,), torch.from_numpy(w), eps=1e-6)
    assert_close(got, ref, atol=1e-12, rtol=1e-12)


# --- float16 input: statistics in float32, result in float16 ------------------------------------


def test_rms_norm_float16_large_values():
    # 300**2 = 90000 overflows float16 (max 65504)
    x = np.array([300, 1, 1, 1], np.float16)
    x64 = x.astype(np.float64)
    expected = x64 / np.sqrt(np.mean(x64**2) + 1e-6)
    got = rms_norm(x)
    assert got.dtype == np.float16
    assert_close(got, expected, atol=0, rtol=2e-3)


def test_layer_norm_float16_large_values():
    x = np.array([60000, -60000, 1, 2], np.float16)
    x64 = x.astype(np.float64)
    expected = (x64 - x64.mean()) / np.sqrt(x64.var() + 1e-5)
    got = layer_norm(x)
    assert got.dtype == np.float16
    assert_close(got, expected, atol=1e-3, rtol=2e-3)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_float16_long_rows_within_twice_a_float32_rounding(kind):
    # 70,000 features of size ~10: the float16 sum of squares overflows; the float32 one
    # does not. Error vs float64 <= 2 x the error of rounding the exact answer to float16.
    rng = np.random.default_rng(12)
    x = (rng.normal(size=(2, 70_000)) * 10 + 3).astype(np.float16)
    x64 = x.astype(np.float64)
    if kind == "layer":
        got = layer_norm(x)
        exact = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    else:
        got = rms_norm(x)
        exact = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6)
    assert got.dtype == np.float16 and np.isfinite(got).all()
    # plain: the exact answer rounded to float16
    assert_low_precision_close(
        got, exact, plain=exact.astype(np.float16), floor=np.finfo(np.float16).eps
    )


# --- NumPy vs torch's modules ------------------------------------------------------------------


def test_numpy_layer_norm_matches_torch_layernorm():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 8)) * 3 + 1
    w, b = rng.normal(size=8), rng.normal(size=8)
    ref = torch.nn.LayerNorm(8, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(w))
        ref.bias.copy_(torch.from_numpy(b))
    expected = ref(torch.from_numpy(x))
    assert_close(layer_norm(x, w, b, eps=1e-5), expected, atol=1e-12, rtol=1e-12)


def test_numpy_rms_norm_matches_torch_rmsnorm():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 8))
    w = rng.normal(size=8)
    ref = torch.nn.RMSNorm(8, eps=1e-6, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(w))
    assert_close(rms_norm(x, w, eps=1e-6), ref(torch.from_numpy(x)), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_layernorm_module_matches_torch(dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16, dtype=dtype) * 2 + 0.5
    ours = layers.LayerNorm(16, eps=1e-5).to(dtype)
    ref = torch.nn.LayerNorm(16, eps=1e-5, dtype=dtype)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(16))
        ours.bias.copy_(torch.randn(16))
        ref.weight.copy_(ours.weight)
        ref.bias.copy_(ours.bias)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    out = ours(x)
    assert out.dtype == dtype
    assert_close(out, ref(x), atol=tol, rtol=tol)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_rmsnorm_module_matches_torch(dtype):
    torch.manual_seed(1)
    x = torch.randn(2, 5, 16, dtype=dtype)
    ours = layers.RMSNorm(16, eps=1e-6).to(dtype)
    ref = torch.nn.RMSNorm(16, eps=1e-6, dtype=dtype)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(16))
        ref.weight.copy_(ours.weight)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert_close(ours(x), ref(x), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_low_precision_within_twice_plain_error(dtype, kind):
    # STYLE.md: error vs float64 <= 2 x the error of a plain same-dtype implementation + floor
    torch.manual_seed(2)
    x64 = torch.randn(4, 7, 32, dtype=torch.float64) * 4 + 2
    x = x64.to(dtype)
    if kind == "layer":
        mod = layers.LayerNorm(32, eps=1e-5).to(dtype)
        exact = torch.from_numpy(layer_norm(x.double().numpy(), eps=1e-5))

        def plain(t):
            m = t.mean(-1, keepdim=True)
            return (t - m) / torch.sqrt(((t - m) ** 2).mean(-1, keepdim=True) + 1e-5)
    else:
        mod = layers.RMSNorm(32, eps=1e-6).to(dtype)
        exact = torch.from_numpy(rms_norm(x.double().numpy(), eps=1e-6))

        def plain(t):
            return t / torch.sqrt((t * t).mean(-1, keepdim=True) + 1e-6)

    out = mod(x)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert_low_precision_close(out, exact, plain=plain(x), floor=torch.finfo(dtype).eps)


# --- errors -------------------------------------------------------------------------------------


def test_weight_shape_error_names_shapes():
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\)"):
        layer_norm(np.ones((2, 4)), weight=np.ones(3))
    with pytest.raises(ValueError, match="weight"):
        rms_norm(np.ones((2, 4)), weight=np.ones((4, 1)))


def test_zero_variance_without_eps_raises():
    with pytest.raises(ValueError, match="constant"):
        layer_norm(np.ones(4), eps=0.0)
    with pytest.raises(ValueError, match="all zeros"):
        rms_norm(np.zeros(4), eps=0.0)
    with pytest.raises(ValueError, match="eps"):
        rms_norm(np.ones(4), eps=-1.0)


@pytest.mark.parametrize("fn", [layer_norm, rms_norm])
def test_eps_follows_the_one_check_rule(fn):
    with pytest.raises(TypeError, match="eps"):
        fn(np.ones(4), eps="1e-5")
    with pytest.raises(ValueError, match="eps"):
        fn(np.ones(4), eps=float("nan"))
    assert np.isfinite(fn(np.array([1.0, 2.0]), eps=np.array(1e-5))).all()  # 0-d array: a real
    with pytest.raises(TypeError, match="x must be"):
        fn(np.array(["a", "b"]))


def test_torch_module_rejects_wrong_width():
    with pytest.raises(ValueError, match=r"LayerNorm\(8\).*\(2, 4\)"):
        layers.LayerNorm(8)(torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"RMSNorm\(8\)"):
        layers.RMSNorm(8)(torch.ones(2, 4))


def test_numpy_modules_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import attnbook.norms, attnbook.positional, attnbook.heads\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
