"""Tests of the heads explorer (attnbook.explorers.heads) without a browser.

The explorer is given a hand-made :class:`attnbook.experiments.HeadsResult` (no training), so
every value it must draw is known here: the heatmap's ``z`` is the chosen arm's weights, the bars
its outputs, the diamonds the targets, and the tick labels name each token's type.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.experiments import HeadsResult  # noqa: E402
from attnbook.explorers.heads import draw_heads, heads_data, heads_explorer  # noqa: E402
from explorer_util import assert_speaks_chinese, live_caption  # noqa: E402

L, K, M, E_ = 6, 3, 2, 2


def fake_result() -> HeadsResult:
    rng = np.random.default_rng(0)
    types = np.array([[2, 0, 3, 4, 0, 1], [0, 4, 3, 0, 2, 1]])  # (E, L): sources, fillers, Q
    weights = []
    for h in (1, 3):
        w = rng.random((E_, h, L))
        weights.append(w / w.sum(-1, keepdims=True))
    return HeadsResult(
        n_heads=np.array([1, 3]),
        seeds=np.array([0]),
        unexplained=np.array([[0.6], [0.001]]),
        unexplained_se=np.array([[0.004], [0.0001]]),
        unexplained_by_source=np.zeros((2, 1, K)),
        bound=np.array([2 / 3, 0.0]),
        loss=np.zeros((2, 1, 3)),
        n_params=np.array([10, 10]),
        weights=weights,
        prediction=rng.standard_normal((2, E_, K, M)),
        target=rng.standard_normal((E_, K, M)),
        types=types,
        seq_len=L,
        n_sources=K,
        content_dim=M,
        d_model=24,
        steps=3,
        batch_size=4,
        lr=0.01,
    )


def test_heads_data_picks_the_arm_and_the_sequence():
    r = fake_result()
    d = heads_data(r, 3, 1)
    assert d.n_heads == 3 and d.head_dim == 8 and d.unexplained == 0.001
    assert np.array_equal(d.weights, r.weights[1][1])
    assert np.array_equal(d.prediction, r.prediction[1, 1])
    assert np.array_equal(d.target, r.target[1])
    with pytest.raises(ValueError, match="n_heads"):
        heads_data(r, 2)
    with pytest.raises(ValueError, match="example"):
        heads_data(r, 1, 2)
    with pytest.raises(TypeError, match="result"):
        heads_data("run", 1)


@pytest.mark.parametrize("width", [688, 390])
def test_draw_heads_draws_the_weights_outputs_and_targets(width):
    r = fake_result()
    fig = draw_heads(heads_data(r, 3, 0), language="en", width=width)
    heat, bars, diamonds = fig.data
    assert np.array_equal(np.array(heat.z), r.weights[1][0])
    assert list(heat.y) == ["head 1", "head 2", "head 3"]
    # Sequence 0: types [A, ·, B, C, ·, Q] over positions 0..5.
    assert list(heat.x) == ["A<br>0", "·<br>1", "B<br>2", "C<br>3", "·<br>4", "Q<br>5"]
    assert list(bars.x) == ["A1", "A2", "B1", "B2", "C1", "C2"]
    assert np.array_equal(np.array(bars.y), r.prediction[1, 0].reshape(-1))
    assert np.array_equal(np.array(diamonds.y), r.target[0].reshape(-1))
    assert "3 heads of 8" in fig.layout.title.text and "0 %" in fig.layout.title.text


def test_heads_explorer_switches_arms_and_speaks_chinese():
    ex = heads_explorer(fake_result())
    assert "1 head of 24" in live_caption(ex) and "60 %" in live_caption(ex)
    ex.controls["n_heads"].value = 3
    assert len(ex.figure.data[0].z) == 3
    assert_speaks_chinese(heads_explorer(fake_result()))
