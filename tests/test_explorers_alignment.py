"""Tests of the alignment explorer (attnbook.explorers.alignment) without a browser.

The explorer is given a hand-made :class:`attnbook.experiments.CrossAttentionResult` (no
training) with three snapshots, so every value it must draw is known here: the heatmap's ``z``
is the chosen snapshot's map of the chosen head, the circles sit on the mirrored source
positions, the tick labels carry the example's tokens and the caption the step, the held-out
accuracy and the mirror mass.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.experiments import CrossAttentionResult  # noqa: E402
from attnbook.explorers.alignment import (  # noqa: E402
    AlignmentData,
    alignment_data,
    alignment_explorer,
    draw_alignment,
)
from explorer_util import assert_speaks_chinese, live_caption  # noqa: E402

N, H, STEPS = 4, 2, (0, 10, 30)


def fake_result() -> CrossAttentionResult:
    rng = np.random.default_rng(0)
    maps = rng.random((len(STEPS), 1, H, N, N))
    maps /= maps.sum(-1, keepdims=True)  # (n_snapshots, n_layers, H, n, n), rows sum to 1
    mass = np.array([[[0.25, 0.26]], [[0.5, 0.625]], [[0.875, 0.9375]]])  # (3, 1, H)
    source = np.array([3, 1, 4, 1])
    return CrossAttentionResult(
        source=source,
        target=source[::-1].copy(),
        prediction=source[::-1].copy(),
        cross_attention=maps[-1],
        mirror_mass=mass[-1],
        loss=np.zeros(30),
        eval_loss=0.1,
        eval_accuracy=1.0,
        chance_loss=np.log(6),
        n=N,
        vocab=6,
        d_model=8,
        n_heads=H,
        n_layers=1,
        d_ff=16,
        steps=30,
        batch_size=4,
        lr=0.01,
        seed=0,
        n_params=100,
        snapshot_steps=np.array(STEPS),
        snapshots=maps,
        snapshot_mirror_mass=mass,
        snapshot_accuracy=np.array([0.125, 0.375, 0.75]),
    )


def test_alignment_data_picks_the_snapshot_and_the_head():
    r = fake_result()
    d = alignment_data(r, 1, 1)
    assert (d.step, d.steps, d.layer, d.head) == (10, 30, 0, 1)
    assert np.array_equal(d.weights, r.snapshots[1, 0, 1])
    assert not np.array_equal(d.weights, r.snapshots[1, 0, 0])  # the head matters
    assert d.mirror_mass == 0.625 and d.uniform == 0.25 and d.accuracy == 0.375
    assert np.array_equal(d.source, [3, 1, 4, 1]) and np.array_equal(d.target, [1, 4, 1, 3])
    assert alignment_data(r, 2, 0).step == 30 and alignment_data(r, 0, 0).mirror_mass == 0.25


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((3, 0), {}, ValueError, "step_index must be <= 2"),
        ((-1, 0), {}, ValueError, "step_index must be >= 0"),
        ((0, 2), {}, ValueError, "head must be <= 1"),
        ((0, 0), {"layer": 1}, ValueError, "layer must be <= 0"),
        ((1.0, 0), {}, TypeError, "step_index"),
        ((0, True), {}, TypeError, "head"),
    ],
)
def test_alignment_data_rejects_bad_indices(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        alignment_data(fake_result(), *args, **kwargs)


def test_alignment_data_needs_a_run_with_snapshots():
    bare = dataclasses.replace(
        fake_result(), snapshot_steps=None, snapshots=None, snapshot_mirror_mass=None
    )
    with pytest.raises(ValueError, match="no snapshots.*snapshot_steps"):
        alignment_data(bare, 0, 0)
    with pytest.raises(ValueError, match="no snapshots"):  # maps without their accuracies
        alignment_data(dataclasses.replace(fake_result(), snapshot_accuracy=None), 0, 0)
    with pytest.raises(TypeError, match="result must be a CrossAttentionResult"):
        alignment_data("run", 0, 0)
    with pytest.raises(TypeError, match="data must be an? AlignmentData"):
        draw_alignment("data")


@pytest.mark.parametrize(
    "change, match",
    [
        ({"weights": np.full((3, 4), 0.25)}, r"weights has shape \(3, 4\).*4 tokens.*\(4, 4\)"),
        ({"weights": np.full(4, 0.25)}, r"weights has shape \(4,\).*\(4, 4\)"),
        ({"target": np.array([1, 4, 1])}, r"target has shape \(3,\).*4 tokens.*\(4,\)"),
        ({"source": np.zeros((2, 2), int)}, r"source must be one-dimensional.*\(2, 2\)"),
        ({"source": np.array([], int)}, r"source must be one-dimensional.*\(0,\)"),
    ],
)
def test_alignment_data_rejects_arrays_whose_shapes_disagree(change, match):
    # Before the check, a hand-built AlignmentData like these raised an IndexError deep in
    # draw_alignment; now its construction names the field and the shapes.
    good = alignment_data(fake_result(), 1, 0)
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(good, **change)
    assert draw_alignment(AlignmentData(**dataclasses.asdict(good)), language="en").data


@pytest.mark.parametrize(
    "change, exc, match",
    [
        ({"weights": np.full((4, 4), np.nan)}, ValueError, r"weights of shape \(4, 4\).*nan"),
        ({"weights": np.full((4, 4), -0.25)}, ValueError, r"weights must lie in \[0, 1\]"),
        ({"weights": np.full((4, 4), 1.5)}, ValueError, r"weights must lie in \[0, 1\]"),
        ({"weights": np.full((4, 4), "a")}, TypeError, r"weights must be a real numeric"),
        ({"accuracy": None}, TypeError, r"accuracy must be a real number, got None"),
        ({"accuracy": float("nan")}, ValueError, r"accuracy must be finite"),
        ({"mirror_mass": 2.0}, ValueError, r"mirror_mass must be <= 1"),
        ({"step": 10**6}, ValueError, r"AlignmentData.step must be <= "),
        ({"step": -1}, ValueError, r"AlignmentData.step must be >= 0"),
        ({"head": -1}, ValueError, r"AlignmentData.head must be >= 0"),
        ({"layer": 0.0}, TypeError, r"AlignmentData.layer must be an integer"),
        ({"source": "abcd"}, TypeError, r"AlignmentData.source must hold integers"),
        ({"target": np.array([1.0, 2.0, 3.0, 4.0])}, TypeError, r"target must hold integers"),
    ],
)
def test_alignment_data_checks_its_values(change, exc, match):
    # These were accepted and drew nonsense (or failed deep in the drawing).
    good = alignment_data(fake_result(), 1, 0)
    with pytest.raises(exc, match=match):
        dataclasses.replace(good, **change)


def test_alignment_data_converts_its_fields():
    good = alignment_data(fake_result(), 1, 0)
    d = dataclasses.replace(
        good,
        weights=good.weights.astype(np.float32).tolist(),
        source=list(good.source),
        step=np.int64(good.step),
        accuracy=np.float32(0.5),
    )
    assert d.weights.dtype == np.float64 and isinstance(d.source, np.ndarray)
    assert type(d.step) is int and type(d.accuracy) is float
    assert draw_alignment(d, language="en").data


@pytest.mark.parametrize("width", [688, 358])
def test_draw_alignment_draws_the_map_and_marks_the_mirror(width):
    r = fake_result()
    fig = draw_alignment(alignment_data(r, 1, 0), language="en", width=width)
    heat, circles = fig.data
    assert heat.type == "heatmap" and circles.type == "scatter"
    assert np.array_equal(np.array(heat.z), r.snapshots[1, 0, 0])
    # Columns: source position over its token; rows: target position and its token.
    assert list(heat.x) == ["0<br>3", "1<br>1", "2<br>4", "3<br>1"]
    assert list(heat.y) == ["0: 1", "1: 4", "2: 1", "3: 3"]
    # Row i's circle sits on source position n - 1 - i.
    assert list(circles.y) == list(heat.y)
    assert list(circles.x) == ["3<br>1", "2<br>4", "1<br>1", "0<br>3"]
    assert circles.showlegend and "mirrored" in circles.name
    title = fig.layout.title.text
    assert "Step 10 of 30" in title and "head 1" in title
    assert "0.500" in title and "0.250" in title  # the mirror mass, uniform 1/n
    assert "held-out accuracy 0.375" in title
    assert fig.layout.yaxis.autorange == "reversed"  # output position 0 on top


def test_alignment_explorer_moves_through_training_and_speaks_chinese():
    ex = alignment_explorer(fake_result())
    assert "Step 0 of 30" in live_caption(ex) and "0.250" in live_caption(ex)
    ex.controls["step_index"].value = 2
    ex.controls["head"].value = 1
    assert "Step 30 of 30: held-out accuracy 0.750; head 2" in live_caption(ex)
    assert "0.938" in live_caption(ex)
    assert np.array_equal(np.array(ex.figure.data[0].z), fake_result().snapshots[2, 0, 1])
    spec = ex.static_spec("en")
    slider = next(c for c in spec["controls"] if c["name"] == "step_index")
    assert slider["labels"] == ["0", "10", "30"]  # labelled with the number of updates
    assert_speaks_chinese(alignment_explorer(fake_result()))
