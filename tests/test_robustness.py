"""Regression tests for the findings of the hostile review (wrong answers, NaN, bad errors).

Each test names the finding it pins (A1-A16, LOW, B). Expected values come from independent
references: float64 formulas, the q = k trick (equal scores -> the output is the mean of the
visible values), or a per-row loop over the unambiguous 1-D form of the same call.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnbook.flash import flash_attention, tiled_attention_torch
from attnbook.kv_cache import kv_cache_bytes
from attnbook.models import ModelConfig

BASE = dict(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16)


# --- A4: flash paths reject NaN/inf instead of returning 0 ---------------------------------------

@pytest.mark.parametrize("fn", [flash_attention, tiled_attention_torch])
@pytest.mark.parametrize("which,value", [("q", math.nan), ("k", math.inf), ("v", math.nan)])
def test_a4_flash_rejects_nonfinite_inputs(fn, which, value):
    t = {n: torch.randn(1, 1, 4, 16) for n in "qkv"}
    t[which][0, 0, 1, 3] = value
    with pytest.raises(ValueError, match=f"{which} of shape .* contains nan or inf"):
        fn(t["q"], t["k"], t["v"])
    assert "propagate" not in flash_attention.__doc__


# --- A11: kv_cache_bytes integer arguments -------------------------------------------------------

@pytest.mark.parametrize("kwargs,name", [({"seq_len": 2.5}, "seq_len"),
                                         ({"seq_len": True}, "seq_len"),
                                         ({"seq_len": "10"}, "seq_len"),
                                         ({"seq_len": math.nan}, "seq_len"),
                                         ({"seq_len": 10, "batch": 1.5}, "batch")])
def test_a11_kv_cache_bytes_integer_arguments(kwargs, name):
    with pytest.raises(TypeError, match=name):
        kv_cache_bytes(ModelConfig(**BASE), **kwargs)


def test_a11_kv_cache_bytes_numpy_integers():
    cfg = ModelConfig(**BASE)
    # 2 (k and v) * 1 layer * 2 heads * 4 dims * 10 tokens * 2 bytes (bfloat16)
    assert kv_cache_bytes(cfg, np.int64(10), np.int32(1)) == 2 * 1 * 2 * 4 * 10 * 2
