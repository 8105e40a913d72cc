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

from attnbook import masks, viz  # noqa: E402
from attnbook.attention import masked_softmax  # noqa: E402
from attnbook.explorers.masks import mask_explorer  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import embedded_spec, live_caption, static_frame  # noqa: E402


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
    assert_close(
        np.array(fig.data[1].z),
        reference_weights(scores, np.ones((L, L), bool)),
        atol=1e-12,
        rtol=0,
    )
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
    # The note is prose: a line of the caption above the plot, not text inside it.
    assert "see no key" in live_caption(ex)
    assert not any("see no key" in a.text for a in fig.layout.annotations)


def test_static_mask_frames_match_library_and_dedupe():
    ex = mask_explorer()
    spec = embedded_spec(ex.static_html())
    L = 8
    scores = np.random.default_rng(0).standard_normal((L, L))
    i, j = np.indices((L, L))
    for values, keep in [
        ({"mask_type": "causal", "window": 3, "n_pad": 2, "pad_side": "right"}, j <= i),
        (
            {"mask_type": "padding", "window": 3, "n_pad": 2, "pad_side": "right"},
            np.broadcast_to(j < L - 2, (L, L)),
        ),
        (
            {"mask_type": "padding", "window": 3, "n_pad": 2, "pad_side": "left"},
            np.broadcast_to(j >= 2, (L, L)),
        ),
        (
            {"mask_type": "sliding window", "window": 4, "n_pad": 0, "pad_side": "right"},
            (j <= i) & (j > i - 4),
        ),
    ]:
        fr = static_frame(spec, values)
        assert_close(fr["data"][0]["z"], keep.astype(float), atol=0, rtol=0)
        assert_close(fr["data"][1]["z"], reference_weights(scores, keep), atol=1e-12, rtol=1e-3)
    # Controls that do not matter for a type do not multiply the frames.
    a = static_frame(spec, {"mask_type": "causal", "window": 1, "n_pad": 0, "pad_side": "right"})
    b = static_frame(spec, {"mask_type": "causal", "window": 8, "n_pad": 7, "pad_side": "left"})
    assert a == b
    assert len(spec["frame_of"]) == 5 * 8 * 9 * 2
    # none 1 + causal 1 + padding 9 x 2 sides + causal+padding 9 x 2 + sliding 8 = 46 figures
    assert len(spec["frames"]) == 46
    flat = spec["controls"][0]["options"].index("causal") * spec["strides"][0]
    assert sorted(spec["inactive"][flat]) == ["n_pad", "pad_side", "window"]


def test_left_padding_keep_mask_by_hand():
    # L = 4, one pad token at the start (left padding), causal: query i sees keys 1..i, so
    # query 0 (the pad token itself) sees no key at all.
    want = np.array(
        [
            [0, 0, 0, 0],
            [0, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 1, 1, 1],
        ],
        dtype=bool,
    )
    got = viz.explorer_keep_mask("causal + padding", 4, n_pad=1, pad_side="left")
    assert got.dtype == bool and (got == want).all()
    # Right padding (the default) hides the last key instead; every query sees key 0.
    right = viz.explorer_keep_mask("causal + padding", 4, n_pad=1)
    assert (
        right == np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=bool)
    ).all()
    with pytest.raises(ValueError, match="pad_side"):
        viz.explorer_keep_mask("padding", 4, n_pad=1, pad_side="middle")


def test_mask_explorer_left_padding_shows_the_empty_rows():
    L = 8
    ex = mask_explorer(pad_side="left", n_pad=2)  # the default type: causal + padding
    fig = ex.figure
    keep = np.array(fig.data[0].z, dtype=bool)
    i, j = np.indices((L, L))
    assert (keep == ((j <= i) & (j >= 2))).all()
    w = np.array(fig.data[1].z)
    assert (w[:2] == 0).all(), "the left-padding queries 0 and 1 see no key"
    assert_close(w[2:].sum(axis=-1), np.ones(L - 2), atol=1e-12, rtol=0)
    assert list(fig.data[1].x)[:2] == ["0 pad", "1 pad"]
    assert "queries 0, 1 see no key" in live_caption(ex, br="\n").splitlines()[1]
    # Switching the side live moves the pad keys to the end: no empty row.
    ex.controls["pad_side"].value = "right"
    assert (np.array(fig.data[1].z).sum(axis=-1) > 0.999).all()
    # The side is greyed out when the type has no padding.
    ex.controls["mask_type"].value = "causal"
    assert ex.controls["pad_side"].disabled


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
        (dict(pad_side="top"), ValueError, "pad_side"),
    ],
)
def test_bad_options_raise_naming_the_argument(kwargs, exc, name):
    # A seed of None would draw a different figure on every build; a float window is a typo.
    with pytest.raises(exc, match=name):
        mask_explorer(**kwargs)


def test_mask_explorer_speaks_chinese():
    """Every label, option and hover text of every setting is Chinese in the Chinese edition."""
    from explorer_util import assert_speaks_chinese

    assert_speaks_chinese(mask_explorer())
    zh = mask_explorer().figure_json(
        {"mask_type": "causal", "window": 3, "n_pad": 2, "pad_side": "right"}, "zh_CN"
    )
    assert "查询 0，键 0：可关注" in zh["data"][0]["text"][0]
    assert "。" not in "".join(zh["data"][0]["text"][0])  # hover text is short, no sentence end


# The figure laid out for the book's column (688 px) and a phone (358 px)
# ------------------------------------------------------------------------------------------

from attnbook import fonts  # noqa: E402
from attnbook.explorers.masks import draw_mask, mask_data  # noqa: E402

SETTINGS = [
    dict(),
    dict(mask_type="causal + padding", n_pad=2, pad_side="left"),
    dict(mask_type="causal + padding", n_pad=5, seq_len=16),
]


def _px(lay, width):
    """Plot area width and height in px."""
    return width - lay.margin.l - lay.margin.r, lay.height - lay.margin.t - lay.margin.b


def _box(lay, n, width):
    """Panel n's (1 or 2) rectangle in px from the figure's left and top."""
    plot_w, plot_h = _px(lay, width)
    (x0, x1) = lay[f"xaxis{'' if n == 1 else n}"].domain
    (y0, y1) = lay[f"yaxis{'' if n == 1 else n}"].domain
    return (
        lay.margin.l + x0 * plot_w,
        lay.margin.t + (1 - y1) * plot_h,
        lay.margin.l + x1 * plot_w,
        lay.margin.t + (1 - y0) * plot_h,
    )


def _apart(a, b):
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


@pytest.mark.parametrize("kwargs", SETTINGS)
@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_mask_figure_fits_the_column_and_a_phone(kwargs, language):
    data = mask_data(**kwargs)
    L = data.keep.shape[0]
    figs = {w: draw_mask(data, width=w, language=language) for w in (viz.COLUMN_PX, viz.PHONE_PX)}
    # Same traces (type, name) in the same order at both widths.
    kinds = {w: [(t.type, t.name) for t in f.data] for w, f in figs.items()}
    assert kinds[viz.COLUMN_PX] == kinds[viz.PHONE_PX]
    for width, fig in figs.items():
        lay = fig.layout
        a, b = _box(lay, 1, width), _box(lay, 2, width)
        assert _apart(a, b), (width, a, b)
        if width == viz.PHONE_PX:
            assert a[3] < b[1] and a[0] == b[0], "stacked: the keep-mask above the weights"
        else:
            assert a[1] == b[1] and a[2] < b[0], "side by side in the column"
        # Panel titles: each line inside the figure and no wider than its panel and the gap.
        plot_w, plot_h = _px(lay, width)
        for ann, box in zip(lay.annotations[:2], (a, b)):
            assert ann.xref == "paper" and ann.yref == "paper"  # make_subplots' own titles
            centre = lay.margin.l + ann.x * plot_w
            for line in ann.text.split("<br>"):
                w = fonts.text_width(line, ann.font.size)
                assert centre - w / 2 >= 0 and centre + w / 2 <= width, (width, line)
                assert w <= box[2] - box[0] + 60, (width, line)
        assert len(lay.annotations) == 2, "no prose inside the plot"
        # The colour bar: inside the figure, over no panel.
        bar = fig.data[1].colorbar
        ticks_px = fonts.text_width("0.8", 13)
        if width == viz.PHONE_PX:
            assert bar.orientation == "h" and bar.yref == "container" and bar.y == 0
            left = lay.margin.l + bar.x * plot_w
            right = left + bar.len * plot_w + fonts.text_width(bar.title.text, 13)
            assert b[0] <= left and right <= b[2]
            # From the figure's bottom up: ypad, the bar, its tick labels; then the axis.
            top_from_bottom = bar.ypad + bar.thickness + 13 * 1.3
            assert top_from_bottom <= lay.margin.b - 70
        else:
            left = lay.margin.l + bar.x * plot_w
            assert left >= b[2] + 4, "beside the weights panel"
            assert left + bar.thickness + ticks_px + 13 * 1.3 <= width, "inside the figure"
            y_mid = lay.margin.t + (1 - bar.y) * plot_h
            assert (
                b[1] - 1 <= y_mid - bar.len * plot_h / 2
                and y_mid + bar.len * plot_h / 2 <= b[3] + 1
            ), "as tall as its panel"
        # Dense ticks stay legible: >= 9 px, and the labels shown do not overlap.
        for ax, box in ((lay.xaxis, a), (lay.xaxis2, b)):
            cell = (box[2] - box[0]) / L
            size = ax.tickfont.size
            assert size >= 9
            shown = [j for j, t in enumerate(ax.ticktext) if t]
            assert shown[0] == 0
            gaps = {j - i for i, j in zip(shown, shown[1:])}
            assert len(gaps) <= 1
            k = gaps.pop() if gaps else 1
            widest = max(
                fonts.text_width(line, size) for t in ax.ticktext for line in t.split("<br>")
            )
            assert widest < k * cell, (width, size, k, cell)
        # A value written in a cell fits it; otherwise none is written (the hover has it).
        for tr, box, widest in ((fig.data[0], a, "0"), (fig.data[1], b, "0.00")):
            cell = (box[2] - box[0]) / L
            if tr.texttemplate:
                assert tr.textfont.size >= 9
                assert fonts.text_width(widest, tr.textfont.size) < cell
            elif L <= 8:
                pytest.fail(f"{L} cells at {width} px have room for their values")


def test_mask_note_for_a_query_without_keys_is_in_the_caption_in_orange():
    data = mask_data("causal + padding", n_pad=2, pad_side="left")
    for width in (viz.COLUMN_PX, viz.PHONE_PX):
        title = draw_mask(data, width=width).layout.title.text
        first, note = title.split("<br>")
        assert "queries 0, 1 see no key" in note and viz.ORANGE_TEXT in note
    assert "<br>" not in draw_mask(mask_data("causal"), width=viz.PHONE_PX).layout.title.text


@pytest.mark.parametrize("width", [viz.COLUMN_PX, viz.PHONE_PX])
def test_mask_figure_with_cells_too_small_for_any_number(width):
    # mask_data takes any seq_len; 64 keys leave cells of about 3 px, where the cell values'
    # font size came out 0 and plotly refused the figure. The values are left to the hover.
    from attnbook.explorers.masks import mask_figure

    fig = mask_figure("causal", seq_len=64, width=width)
    for trace in fig.data:
        assert trace.textfont.size >= 1
        assert trace.texttemplate == ""


def test_a_width_too_narrow_for_the_colour_bar_is_refused_naming_width():
    # Below about 130 px the phone's horizontal colour bar came out of negative length and
    # plotly raised about heatmap.colorbar.len.
    from attnbook.explorers.masks import mask_figure

    with pytest.raises(ValueError, match="width=100"):
        mask_figure("causal", width=100)
    mask_figure("causal", width=160)


def test_mask_explorer_names_seq_len_when_its_grid_would_not_fit():
    """The longest sequence whose every setting can be precomputed builds; one token more is
    refused by ``seq_len``'s own check, not by the grid's count (which names no argument)."""
    from attnbook.explorers.base import MAX_GRID
    from attnbook.explorers.masks import MAX_SEQ_LEN, mask_explorer
    from attnbook.masks import MASK_TYPES, PAD_SIDES

    def n_settings(n):  # mask type x window 1..n x pads 0..n x pad side
        return len(MASK_TYPES) * n * (n + 1) * len(PAD_SIDES)

    assert n_settings(MAX_SEQ_LEN) <= MAX_GRID < n_settings(MAX_SEQ_LEN + 1)
    mask_explorer(seq_len=MAX_SEQ_LEN)
    with pytest.raises(ValueError, match="seq_len"):
        mask_explorer(seq_len=MAX_SEQ_LEN + 1)
