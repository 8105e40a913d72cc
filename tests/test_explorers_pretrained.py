"""Tests of the referent explorer (attnbook.explorers.pretrained) without a browser.

The expected rows are the attention rows of "it" computed for the test by
``attnbook.pretrained.attention_of_token`` (one forward pass per sentence), independently of the
explorer; the live sliders and the static frames must show exactly those rows.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.explorers.pretrained import referent_explorer  # noqa: E402
from attnbook.explorers.reflow import title_text  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, static_frame  # noqa: E402


@pytest.fixture(scope="module")
def it_rows():
    """The attention rows of "it" in both sentences, from the library, computed for the test."""
    pretrained = pytest.importorskip("attnbook.pretrained")
    t1, w1 = pretrained.attention_of_token(pretrained.TIRED, "it")  # (layers, H, T)
    t2, w2 = pretrained.attention_of_token(pretrained.WIDE, "it")
    return (t1, t2), (w1, w2)


@pytest.fixture(scope="module")
def referent():
    return referent_explorer()


def shown_title(fig) -> str:
    """The live figure's title as one line (the title annotation, its <br> as spaces)."""
    return title_text(fig.layout.to_plotly_json()).replace("<br>", " ")


def test_referent_live_sliders_redraw_the_chosen_head(referent, it_rows):
    (t1, t2), (w1, w2) = it_rows
    fig = referent.figure
    # Sliders are 1-based: layer 1..6, head 1..12, starting at (1, 1).
    assert referent.controls["layer"].options == tuple((str(i), i) for i in range(1, 7))
    assert referent.controls["head"].options == tuple((str(i), i) for i in range(1, 13))
    assert (referent.controls["layer"].value, referent.controls["head"].value) == (1, 1)
    assert_close(np.array(fig.data[0].y), w1[0, 0], atol=0, rtol=0)
    for layer, head in [(4, 2), (6, 12), (1, 7)]:
        referent.controls["layer"].value = layer
        referent.controls["head"].value = head
        for i, (t, w) in enumerate([(t1, w1), (t2, w2)]):
            trace = fig.data[i]
            y = np.array(trace.y)
            assert_close(y, w[layer - 1, head - 1], atol=0, rtol=0)  # the same float32 values
            assert np.isfinite(y).all() and abs(y.sum() - 1) < 1e-5  # a softmax row
            assert list(trace.x) == list(range(len(t))) and list(trace.customdata) == t
            meta = trace.meta
            assert (meta["layer"], meta["head"], meta["sentence"]) == (layer, head, i)
            assert meta["query_index"] == t.index("it") == 10
            for word in ("animal", "street"):
                assert meta["highlight"][word] == pytest.approx(
                    float(w[layer - 1, head - 1, t.index(word)]), abs=0)
        assert shown_title(fig) == f"Attention of “it”: layer {layer}, head {head}"
        # The corner annotation prints the two weights and their difference, 3 decimals.
        a = float(w2[layer - 1, head - 1, t2.index("animal")])
        s = float(w2[layer - 1, head - 1, t2.index("street")])
        corner = [an.text for an in fig.layout.annotations if " − " in an.text][1]
        assert f"{a:.3f}" in corner and f"{s:.3f}" in corner and f"{a - s:+.3f}" in corner
    # The two sentences differ in one token, and so do their tick labels.
    assert fig.layout.xaxis.ticktext[13] == "tired" and fig.layout.xaxis2.ticktext[13] == "wide"
    assert "animal" in fig.layout.xaxis.ticktext[2] and "<b>" in fig.layout.xaxis.ticktext[10]


def test_referent_static_frames_are_the_library_rows(referent, it_rows):
    (t1, t2), (w1, w2) = it_rows
    html = referent.static_html()
    assert len(html.encode()) < 500_000
    spec = embedded_spec(html)
    assert [c["name"] for c in spec["controls"]] == ["layer", "head"]
    assert spec["controls"][0]["options"] == list(range(1, 7))
    assert spec["controls"][1]["options"] == list(range(1, 13))
    assert spec["strides"] == [12, 1] and len(spec["frame_of"]) == 72
    assert len(spec["frames"]) == 72  # every head draws something different
    for layer in range(1, 7):
        for head in (1, 5, 12):
            fr = static_frame(spec, {"layer": layer, "head": head})
            for i, w in enumerate((w1, w2)):
                # Floats are stored with 4 significant digits.
                assert_close(np.array(fr["data"][i]["y"], dtype=float),
                             w[layer - 1, head - 1].astype(float), atol=1e-12, rtol=1e-3)
            assert title_text(fr["layout"]).endswith(f"layer {layer}, head {head}")


def test_referent_explorer_starts_where_asked_and_rejects_bad_input(it_rows):
    (_, _), (w1, _) = it_rows
    ex = referent_explorer(layer=4, head=2)
    assert_close(np.array(ex.figure.data[0].y), w1[3, 1], atol=0, rtol=0)
    for kwargs, exc, name in [
        ({"layer": 0}, ValueError, "layer"), ({"layer": 7}, ValueError, "layer"),
        ({"head": 13}, ValueError, "head"), ({"head": True}, TypeError, "head"),
        ({"layer": 2.0}, TypeError, "layer"),
        ({"candidates": ("animal", "moon")}, ValueError, "moon"),
        ({"sentences": ("The cat sat because it was tired.",)}, ValueError, "animal"),
        ({"sentences": ()}, ValueError, "sentences"),
        ({"sentences": "The animal didn't cross the street."}, TypeError, "sentences"),
        ({"sentences": ("It was.", 3)}, TypeError, r"sentences\[1\]"),
        ({"candidates": ("a", "b", "c", "d", "e")}, ValueError, "candidates"),
    ]:
        with pytest.raises(exc, match=name):
            referent_explorer(**kwargs)
