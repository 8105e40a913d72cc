"""Tests of the mask explorer (attnbook.explorers.masks) without a browser.

The live path is driven as a reader would: set a control's ``value`` and read the
``FigureWidget``'s data. Expected keep-masks are written out with ``np.indices``, expected
weights by a float64 softmax over the visible entries written here, and checked once more
through ``masks`` and ``masked_softmax`` independently of the explorer. The static path is
checked by parsing the JSON embedded in the explorer's ``text/html``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import masks  # noqa: E402
from attnbook.attention import masked_softmax  # noqa: E402
from attnbook.explorers.masks import mask_explorer  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, static_frame  # noqa: E402


def reference_weights(scores, keep):
    """float64 softmax over the visible entries of each row, written out; empty rows -> 0."""
    out = np.zeros_like(scores)
    for i in range(scores.shape[0]):
        vis = np.flatnonzero(keep[i])
        if vis.size:
            e = np.exp(scores[i, vis] - scores[i, vis].max())
            out[i, vis] = e / e.sum()
    return out


def test_mask_live_causal_plus_padding():
    ex = mask_explorer(mask_type="none", n_pad=0, seed=5)
    fig = ex.figure
    L = 8
    scores = np.random.default_rng(5).standard_normal((L, L))  # the documented scores
    assert_close(np.array(fig.data[1].z), reference_weights(scores, np.ones((L, L), bool)),
                 atol=1e-12, rtol=0)
    ex.controls["mask_type"].value = "causal + padding"
    ex.controls["n_pad"].value = 3
    # Keep-mask by hand: lower triangle (query i sees j <= i) and not one of the last 3 keys.
    i, j = np.indices((L, L))
    keep = (j <= i) & (j < L - 3)
    assert_close(np.array(fig.data[0].z), keep.astype(float), atol=0, rtol=0)
    # And through the library, independently of the explorer.
    lib_keep = masks.combine_masks(
        masks.causal_mask(L), masks.padding_mask(np.array([[1] * 5 + [0] * 3]))
    )
    lib_weights = masked_softmax(scores[None, None], lib_keep)[0, 0]  # (L, S)
    z = np.array(fig.data[1].z)
    assert_close(z, lib_weights, atol=1e-12, rtol=0)
    assert_close(z, reference_weights(scores, keep), atol=1e-12, rtol=0)
    assert np.isfinite(z).all()
    assert list(fig.data[1].x)[-3:] == ["5 pad", "6 pad", "7 pad"]
    assert not ex.controls["n_pad"].disabled and ex.controls["window"].disabled


def test_mask_live_sliding_window_and_empty_rows():
    ex = mask_explorer()
    fig = ex.figure
    L = 8
    ex.controls["mask_type"].value = "sliding window"
    ex.controls["window"].value = 2
    i, j = np.indices((L, L))
    band = (j <= i) & (j > i - 2)
    assert_close(np.array(fig.data[0].z), band.astype(float), atol=0, rtol=0)
    assert ex.controls["n_pad"].disabled and not ex.controls["window"].disabled
    # Every key is padding: no query sees a key, so every weight is 0 (not 1/8, not NaN).
    ex.controls["mask_type"].value = "padding"
    ex.controls["n_pad"].value = L
    z = np.array(fig.data[1].z)
    assert np.isfinite(z).all() and (z == 0).all()
    assert all("sees no key" in t for row in fig.data[1].text for t in row)
    assert any("see no key" in a.text for a in fig.layout.annotations)


def test_static_mask_frames_match_library_and_dedupe():
    ex = mask_explorer()
    spec = embedded_spec(ex.static_html())
    L = 8
    scores = np.random.default_rng(0).standard_normal((L, L))
    i, j = np.indices((L, L))
    for values, keep in [
        ({"mask_type": "causal", "window": 3, "n_pad": 2}, j <= i),
        ({"mask_type": "padding", "window": 3, "n_pad": 2}, np.broadcast_to(j < L - 2, (L, L))),
        ({"mask_type": "sliding window", "window": 4, "n_pad": 0}, (j <= i) & (j > i - 4)),
    ]:
        fr = static_frame(spec, values)
        assert_close(fr["data"][0]["z"], keep.astype(float), atol=0, rtol=0)
        assert_close(fr["data"][1]["z"], reference_weights(scores, keep), atol=1e-12, rtol=1e-3)
    # Controls that do not matter for a type do not multiply the frames.
    a = static_frame(spec, {"mask_type": "causal", "window": 1, "n_pad": 0})
    b = static_frame(spec, {"mask_type": "causal", "window": 8, "n_pad": 7})
    assert a == b
    assert len(spec["frame_of"]) == 5 * 8 * 9
    # none 1 + causal 1 + padding 9 + causal+padding 9 + sliding 8 = 28 distinct figures
    assert len(spec["frames"]) == 28
    flat = spec["controls"][0]["options"].index("causal") * spec["strides"][0]
    assert sorted(spec["inactive"][flat]) == ["n_pad", "window"]



@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(mask_type="diagonal"), ValueError, "mask_type"),
        (dict(window=0), ValueError, "window"),
        (dict(window=9), ValueError, "window"),
        (dict(window=2.0), TypeError, "window must be an integer, got 2.0"),
        (dict(n_pad=-1), ValueError, "n_pad"),
        (dict(n_pad=1.0), TypeError, "n_pad must be an integer, got 1.0"),
        (dict(seq_len=1, window=1, n_pad=0), ValueError, "seq_len"),
        (dict(seq_len=17), ValueError, "seq_len"),
        (dict(seed=None), TypeError, "seed must be an integer, got None"),
    ],
)
def test_bad_options_raise_naming_the_argument(kwargs, exc, name):
    # A seed of None would draw a different figure on every build; a float window is a typo.
    with pytest.raises(exc, match=name):
        mask_explorer(**kwargs)
