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
