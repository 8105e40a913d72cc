"""Tests of the referent explorer (attnbook.explorers.pretrained) without a browser.

The expected rows are the attention rows of "it" computed for the test by
``attnbook.pretrained.attention_of_token`` (one forward pass per sentence), independently of the
explorer; the live sliders and the static frames must show exactly those rows, in both
languages. The figure itself is checked on hand-made rows (no model needed).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

import panel_checks  # noqa: E402
from attnbook import viz  # noqa: E402
from attnbook.explorers import pretrained as ep  # noqa: E402
from attnbook.explorers.pretrained import referent_explorer  # noqa: E402
from attnbook.testing import assert_close  # noqa: E402
from explorer_util import (  # noqa: E402
    assert_speaks_chinese,
    caption_text,
    embedded_spec,
    live_caption,
    static_frame,
    title_text,
)


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


def shown_title(ex) -> str:
    """The live explorer's title as one line: the caption above its plot (the figure itself
    has none), its text with each <br> as a space."""
    assert title_text(ex.figure.layout.to_plotly_json()) == ""
    return live_caption(ex)


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
                    float(w[layer - 1, head - 1, t.index(word)]), abs=0
                )
        assert shown_title(referent) == f"Attention of “it”: layer {layer}, head {head}"
        # The panel title prints the two weights and their difference, 3 decimals.
        a = float(w2[layer - 1, head - 1, t2.index("animal")])
        s = float(w2[layer - 1, head - 1, t2.index("street")])
        corner = [
            an.text.replace("\u00a0", " ")
            for an in fig.layout.annotations
            if "\u00a0−\u00a0" in an.text
        ][1]
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
                assert_close(
                    np.array(fr["data"][i]["y"], dtype=float),
                    w[layer - 1, head - 1].astype(float),
                    atol=1e-12,
                    rtol=1e-3,
                )
            # The title is the caption above the plot.
            assert title_text(fr["layout"]) == ""
            assert caption_text(fr["caption"]).endswith(f"layer {layer}, head {head}")


def test_referent_explorer_starts_where_asked_and_rejects_bad_input(it_rows):
    (_, _), (w1, _) = it_rows
    ex = referent_explorer(layer=4, head=2)
    assert_close(np.array(ex.figure.data[0].y), w1[3, 1], atol=0, rtol=0)
    for kwargs, exc, name in [
        ({"layer": 0}, ValueError, "layer"),
        ({"layer": 7}, ValueError, "layer"),
        ({"head": 13}, ValueError, "head"),
        ({"head": True}, TypeError, "head"),
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


def test_referent_explorer_speaks_chinese_and_keeps_what_the_model_read(referent, it_rows):
    assert_speaks_chinese(referent)
    (t1, _), (w1, _) = it_rows
    fig = referent.figure_json({"layer": 4, "head": 2}, "zh_CN")
    # The same numbers in Chinese; the word pieces and the sentences stay as the model read them.
    assert_close(np.array(fig["data"][0]["y"], dtype=float), w1[3, 1].astype(float), atol=0, rtol=0)
    assert fig["layout"]["title"]["text"] == "“it”的注意力：第 4 层，第 2 个头"
    assert fig["data"][0]["customdata"] == t1
    assert fig["data"][0]["hovertemplate"] == "“%{customdata}”：权重 %{y:.3f}<extra></extra>"
    assert (
        fig["data"][0]["name"] == "1. “The animal didn't cross the street because it was "
        "too tired.”"
    )
    assert fig["layout"]["yaxis"]["title"]["text"] == "“it”的权重"


# --------------------------------------------------------------------------------------------
# The figure on hand-made rows (no model)

TOKENS = ["[CLS]", "it", "animal", "street", "[SEP]"]


def hand_weights():
    """(2 layers, 3 heads, 5 tokens): uniform rows, and one row chosen by hand."""
    w = np.full((2, 3, 5), 0.2)
    w[1, 2] = [0.1, 0.2, 0.3, 0.15, 0.25]
    return w


def test_token_attention_figure_draws_the_chosen_row():
    fig = ep.token_attention_figure([TOKENS], [hand_weights()], 1, 2)
    bar = fig.data[0]
    assert list(bar.y) == [0.1, 0.2, 0.3, 0.15, 0.25] and list(bar.customdata) == TOKENS
    assert (bar.meta["layer"], bar.meta["head"], bar.meta["query_index"]) == (2, 3, 1)
    assert bar.meta["highlight"] == {"animal": 0.3, "street": 0.15}
    # animal orange, street green, every other bar light blue.
    assert list(bar.marker.color) == [
        "#9db4d3",
        "#9db4d3",
        ep.HIGHLIGHT_COLORS[0],
        ep.HIGHLIGHT_COLORS[1],
        "#9db4d3",
    ]
    assert fig.layout.title.text == "Attention of “it”: layer 2, head 3"
    # The panel's title: the sentence's name, then the highlighted weights under it.
    name, corner = fig.layout.annotations[0].text.replace("\u00a0", " ").split("<br>", 1)
    assert "0.300" in corner and "0.150" in corner and "animal − street +0.150" in corner
    assert name == "sentence 1"
    zh = ep.token_attention_figure([TOKENS], [hand_weights()], 1, 2, language="zh_CN")
    assert list(zh.data[0].y) == list(bar.y)
    assert zh.layout.title.text == "“it”的注意力：第 2 层，第 3 个头"
    assert zh.layout.annotations[0].text.split("<br>")[0] == "句子 1"


def test_token_attention_data_then_draw_is_the_figure():
    data = ep.token_attention_data(
        [TOKENS, TOKENS], [hand_weights(), np.full((2, 3, 5), 0.2)], 1, 2, titles=["a", "b"]
    )
    assert data.query_index == (1, 1) and data.highlight_index == ((2, 3), (2, 3))
    assert_close(data.rows[0], hand_weights()[1, 2], atol=0, rtol=0)
    one = ep.draw_token_attention(data, language="en").to_plotly_json()
    two = ep.token_attention_figure(
        [TOKENS, TOKENS], [hand_weights(), np.full((2, 3, 5), 0.2)], 1, 2, titles=["a", "b"]
    ).to_plotly_json()
    assert one == two and [t["name"] for t in one["data"]] == ["a", "b"]


def test_token_attention_figure_rejects_bad_input():
    t, w = TOKENS, hand_weights()
    for call, exc, name in [
        (lambda: ep.token_attention_figure([t], [w[..., :4]], 0, 0), ValueError, "weights"),
        (lambda: ep.token_attention_figure([t], [w[0]], 0, 0), ValueError, "weights"),
        (lambda: ep.token_attention_figure([t, t], [w], 0, 0), ValueError, "tokens"),
        (lambda: ep.token_attention_figure([t, t], [w, w[:1]], 0, 0), ValueError, "n_layers"),
        (lambda: ep.token_attention_figure([t], [w], 2, 0), ValueError, "layer"),
        (lambda: ep.token_attention_figure([t], [w], 0, -1), ValueError, "head"),
        (
            lambda: ep.token_attention_figure([t], [w * np.nan], 0, 0),
            ValueError,
            r"weights\[0\] of shape .* contains nan or inf",
        ),
        (lambda: ep.token_attention_figure([t], [w], 0, 0, query="they"), ValueError, "query"),
        (
            lambda: ep.token_attention_figure([t], [w], 0, 0, highlight=("moon",)),
            ValueError,
            "moon",
        ),
        (
            lambda: ep.token_attention_figure([t], [w], 0, 0, highlight="abcde"),
            ValueError,
            "highlight",
        ),
        (
            lambda: ep.token_attention_figure([t], [w], 0, 0, titles=["a", "b"]),
            ValueError,
            "titles",
        ),
        (lambda: ep.token_attention_figure([t], [w], 0.0, 0), TypeError, "layer"),
        (lambda: ep.token_attention_figure([t], [w], 0, 0, height=5), ValueError, "height"),
        (lambda: ep.token_attention_figure([t], [w], 0, 0, height="a"), TypeError, "height"),
        (lambda: ep.token_attention_figure([t], [w], 0, 0, language="fr"), ValueError, "language"),
    ]:
        with pytest.raises(exc, match=name):
            call()


# ------------------------------------------------------------------------------------------
# Layout for the width it is drawn at (issue 20): plotly's grid, no hand-placed panels
# ------------------------------------------------------------------------------------------

# Two sentences as a WordPiece tokenizer cuts them (hand-made: no model needed), 16 pieces each.
LONG = [
    [
        "[CLS]",
        "the",
        "animal",
        "didn",
        "'",
        "t",
        "cross",
        "the",
        "street",
        "because",
        "it",
        "was",
        "too",
        "tired",
        ".",
        "[SEP]",
    ],
    [
        "[CLS]",
        "the",
        "animal",
        "didn",
        "'",
        "t",
        "cross",
        "the",
        "street",
        "because",
        "it",
        "was",
        "too",
        "wide",
        ".",
        "[SEP]",
    ],
]


def long_data():
    rng = np.random.default_rng(0)
    w = [rng.dirichlet(np.ones(16), size=(2, 3)) for _ in LONG]  # (2, 3, 16) rows summing to 1
    titles = [f"{i + 1}. “{' '.join(t[1:-1])}”" for i, t in enumerate(LONG)]
    return ep.token_attention_data(LONG, w, 1, 2, titles=titles)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_figure_is_laid_out_for_the_column_and_the_phone(language):
    data = long_data()
    wide = ep.draw_token_attention(data, language=language, width=viz.COLUMN_PX)
    phone = ep.draw_token_attention(data, language=language, width=viz.PHONE_PX)
    panel_checks.assert_same_traces(wide, phone)
    for fig, width in ((wide, viz.COLUMN_PX), (phone, viz.PHONE_PX)):
        # One bar per word piece needs the whole width: stacked at both widths.
        panel_checks.assert_stacked(fig)
        panel_checks.assert_panels_apart(fig)
        panel_checks.assert_titles_fit(fig, width, 2)
        panel_checks.assert_title_room_after_caption(fig)
        assert len(fig.layout.annotations) == 2  # the panels' titles, nothing placed by hand
        assert not fig.layout.showlegend
        # A weight is never split from its word piece where the title wraps.
        for a in fig.layout.annotations:
            for line in a.text.split("<br>")[1:]:
                assert not line.lstrip().startswith(("0.", "+0.", "-0.", "−"))
        # The word pieces never overlap: slanted labels are a line height apart across the
        # slant, upright ones a line height apart along the axis; and legible (>= 9 px).
        plot_w, _ = panel_checks.plot_px(fig, width)
        for axis in ("xaxis", "xaxis2"):
            ax = fig.layout[axis]
            size = ax.tickfont.size
            assert size >= 9
            slot = plot_w / len(ax.ticktext)
            across = slot if ax.tickangle == -90 else slot * abs(np.sin(np.radians(ax.tickangle)))
            assert across >= size * 1.2, (width, ax.tickangle, slot)
    # In the column the pieces have room to slant; on a phone they must stand upright.
    assert wide.layout.xaxis.tickangle != -90 and phone.layout.xaxis.tickangle == -90


def test_the_explorer_draws_for_its_width(referent):
    assert referent.draws_for_width
    spec = embedded_spec(referent.static_html())
    narrow = static_frame(spec, {"layer": 2, "head": 3}, narrow=True)["layout"]
    wide = static_frame(spec, {"layer": 2, "head": 3})["layout"]
    assert narrow["xaxis"]["tickangle"] == -90 and wide["xaxis"]["tickangle"] == -40


@pytest.mark.parametrize(
    "width, exc", [(0, ValueError), (40, ValueError), ("688", TypeError), (688.0, TypeError)]
)
def test_a_bad_width_is_named(width, exc):
    # 40 px leaves no room for a panel after the margins.
    with pytest.raises(exc, match="width"):
        ep.draw_token_attention(long_data(), width=width)
