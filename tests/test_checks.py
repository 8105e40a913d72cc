"""Tests for attnbook.checks: one behaviour per kind of argument (TypeError for the wrong kind,
ValueError for a wrong value)."""

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
