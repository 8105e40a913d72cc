"""Tests of the attention-map explorer (attnbook.explorers.lm_attention): figure and explorer.

Expected values: the figure is checked against hand-made maps (which entries are drawn, which
are blank above the diagonal, the argmax and the row sums by hand); the explorer's maps against
an independent reference — the weights each layer's ``MultiHeadAttention`` returns with
``need_weights=True``, collected while the model runs — and against the causal rule (rows sum
to 1 over ``j <= i``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")
torch = pytest.importorskip("torch")

from attnbook.explorers import lm_attention as la  # noqa: E402
from attnbook.models import ModelConfig, build_model  # noqa: E402
from explorer_util import assert_speaks_chinese, embedded_spec, static_frame  # noqa: E402


class _Tok:
    """A character tokenizer for the tests (sorted characters of a text)."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    def encode(self, s):
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


SENTENCES = ["the cat sat.", "a dog, a cat"]
TOK = _Tok("".join(SENTENCES) + "bxyz")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="decoder",
        vocab_size=len(TOK.chars),
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        max_seq_len=32,
        positional="learned",
    )
    return build_model(cfg).eval()


def reference_maps(model, ids) -> np.ndarray:
    """(n_layers, H, T, T) weights from each layer's attention with need_weights=True."""
    got = []
    originals = []
    for layer in model.layers:
        attn = layer.self_attn
        orig = attn.forward

        def forward(*a, _orig=orig, **k):
            k["need_weights"] = True
            out, w = _orig(*a, **k)
            got.append(w.detach()[0].double().numpy())
            return out

        attn.forward = forward
        originals.append((attn, orig))
    try:
        with torch.no_grad():
            model(torch.tensor([ids]))
    finally:
        for attn, orig in originals:
            attn.forward = orig
    return np.stack(got)


def test_show_char_makes_blanks_visible():
    assert la.show_char(" ") == "␣" and la.show_char("\n") == "↵" and la.show_char("a") == "a"
    with pytest.raises(TypeError, match="token"):
        la.show_char(3)


def test_figure_draws_the_lower_triangle_of_the_chosen_head():
    T = 3
    maps = np.zeros((2, 2, T, T))
    maps[1, 0] = [[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.5, 0.2, 0.3]]
    maps[1, 0, 0, 2] = 0.9  # a value above the diagonal: must not be drawn
    fig = la.lm_attention_figure(["a", " ", "b"], maps, layer=1, head=0)
    z = fig.data[0].z
    assert z[1][0] == 0.25 and z[1][1] == 0.75 and z[2][2] == 0.3
    assert z[0][1] is None and z[0][2] is None and z[1][2] is None
    meta = fig.data[0].meta
    assert (meta["layer"], meta["head"]) == (2, 1)  # shown 1-based
    assert meta["argmax"] == [0, 1, 0]
    assert meta["row_sums"] == pytest.approx([1.0, 1.0, 1.0])
    assert list(fig.layout.xaxis.ticktext) == ["a", "␣", "b"]
    assert fig.layout.title.text == "“a␣b”<br>layer 2, head 1"
    assert fig.layout.yaxis.autorange == "reversed"  # query 0 at the top
    # In Chinese: the same numbers and tokens, the labels made in Chinese.
    zh = la.lm_attention_figure(["a", " ", "b"], maps, layer=1, head=0, language="zh_CN")
    assert zh.data[0].z == fig.data[0].z and zh.data[0].meta == meta
    assert list(zh.layout.xaxis.ticktext) == ["a", "␣", "b"]
    assert zh.layout.title.text == "“a␣b”<br>第 2 层，第 1 个头"
    assert zh.data[0].hovertemplate == "查询 %{y}，键 %{x}：权重 %{z:.3f}<extra></extra>"


def test_data_then_draw_is_the_figure():
    maps = np.zeros((1, 2, 2, 2))
    maps[0, 1] = [[1.0, 0.0], [0.4, 0.6]]
    data = la.lm_attention_data(["x", "y"], maps, 0, 1, title="t")
    np.testing.assert_array_equal(data.weights, maps[0, 1])
    assert list(data.argmax) == [0, 1] and list(data.row_sums) == [1.0, 1.0]
    fig = la.draw_lm_attention(data, language="en", height=300)
    assert (
        fig.to_plotly_json()
        == la.lm_attention_figure(["x", "y"], maps, 0, 1, title="t", height=300).to_plotly_json()
    )
    assert fig.layout.title.text == "t<br>layer 1, head 2"
    # The title is shown as the caption above the plot; the figure without it is as tall as
    # asked (take_title leaves a top margin of at least 20 px).
    from attnbook.explorers.base import take_title

    assert 300 <= take_title(fig.to_plotly_json())[0]["layout"]["height"] <= 320


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: la.lm_attention_figure(["a", "b"], np.zeros((1, 1, 3, 3))), ValueError, "maps"),
        (lambda: la.lm_attention_figure(["a"], np.full((1, 1, 1, 1), np.nan)), ValueError, "maps"),
        (
            lambda: la.lm_attention_figure(["a"], np.zeros((1, 1, 1, 1)), layer=1),
            ValueError,
            "layer",
        ),
        (
            lambda: la.lm_attention_figure(["a"], np.zeros((1, 1, 1, 1)), head=0.0),
            TypeError,
            "head",
        ),
        (lambda: la.lm_attention_figure("ab", np.zeros((1, 1, 2, 2))), TypeError, "tokens"),
        (
            lambda: la.lm_attention_figure(["a"], np.zeros((1, 1, 1, 1)), height=5),
            ValueError,
            "height",
        ),
        (
            lambda: la.lm_attention_figure(["a"], np.zeros((1, 1, 1, 1)), language="fr"),
            ValueError,
            "language",
        ),
    ],
)
def test_figure_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_explorer_maps_equal_the_attention_weights(model):
    ex = la.lm_attention_explorer(model, TOK, SENTENCES, sentence=1, layer=2, head=2)
    ids = TOK.encode(SENTENCES[1])
    ref = reference_maps(model, ids)  # (2, 2, T, T)
    T = len(ids)
    z = np.array([[np.nan if v is None else v for v in row] for row in ex.figure.data[0].z])
    lower = np.tril(np.ones((T, T), dtype=bool))
    np.testing.assert_allclose(z[lower], ref[1, 1][lower], rtol=1e-5, atol=1e-6)
    assert np.isnan(z[~lower]).all()
    # Causal rows: each query's visible weights sum to 1.
    np.testing.assert_allclose(ref.sum(-1), 1.0, atol=1e-5)
    assert np.abs(ref[..., ~lower]).max() == 0.0
    # The live controls recompute: another sentence, another layer.
    ex.controls["sentence"].value = 0
    ex.controls["layer"].value = 1
    ref0 = reference_maps(model, TOK.encode(SENTENCES[0]))
    T0 = len(SENTENCES[0])
    z0 = ex.figure.data[0].z
    assert len(z0) == T0
    assert z0[T0 - 1][0] == pytest.approx(ref0[0, 1][T0 - 1, 0], rel=1e-5, abs=1e-6)
    assert list(ex.figure.layout.xaxis.ticktext)[3] == "␣"


def test_explorer_static_frames(model):
    ex = la.lm_attention_explorer(model, TOK, SENTENCES)
    html = ex.static_html()
    assert len(html) < 1_500_000
    spec = embedded_spec(html)
    assert len(spec["frame_of"]) == 2 * 2 * 2  # sentences x layers x heads
    ids = TOK.encode(SENTENCES[0])
    ref = reference_maps(model, ids)
    frame = static_frame(spec, {"sentence": 0, "layer": 2, "head": 1})
    z = frame["data"][0]["z"]
    assert z[5][2] == pytest.approx(ref[1, 0][5, 2], rel=1e-3)  # floats kept to 4 digits
    assert z[2][5] is None
    other = static_frame(spec, {"sentence": 0, "layer": 1, "head": 1})
    assert other["data"][0]["z"] != z


def test_explorer_speaks_chinese_and_keeps_the_sentences_as_read(model):
    ex = la.lm_attention_explorer(model, TOK, SENTENCES)
    assert_speaks_chinese(ex)
    spec = ex.static_spec("zh_CN")
    # The menu and the tokens are what the model read, in both editions.
    assert spec["controls"][0]["labels"] == SENTENCES
    frame = static_frame(spec, {"sentence": 1, "layer": 2, "head": 2})
    assert frame["layout"]["xaxis"]["ticktext"][:3] == ["a", "␣", "d"]
    ref = reference_maps(model, TOK.encode(SENTENCES[1]))
    assert frame["data"][0]["z"][4][1] == pytest.approx(ref[1, 1][4, 1], rel=1e-3)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(sentences=[]), ValueError, "sentences"),
        (dict(sentences="abc"), TypeError, "sentences"),
        (dict(sentences=["a"]), ValueError, r"sentences\[0\]"),
        (dict(sentences=["abc"] * 7), ValueError, "sentences"),
        (dict(sentences=["x" * 40]), ValueError, r"sentences\[0\]"),  # over max_seq_len 32
        (dict(sentences=["abc"], sentence=1), ValueError, "sentence"),
        (dict(sentences=["abc"], layer=3), ValueError, "layer"),
        (dict(sentences=["abc"], head=0), ValueError, "head"),
    ],
)
def test_explorer_bad_input(model, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        la.lm_attention_explorer(model, TOK, **kwargs)


# The figure laid out for the book's column (688 px) and a phone (358 px)
# ------------------------------------------------------------------------------------------

LONG = "the cat sat on the mat, and the dog sat on a log"  # 48 characters: the longest


def _shown(ticktext):
    """Indices of the labels shown and the step between them (one step, from 0)."""
    shown = [i for i, t in enumerate(ticktext) if t]
    steps = {b - a for a, b in zip(shown, shown[1:])}
    assert shown[0] == 0 and len(steps) <= 1, ticktext
    return shown, (steps.pop() if steps else 1)


@pytest.mark.parametrize("sentence, height", [(LONG, None), ("the cat", None), (LONG, 300)])
def test_figure_fits_the_column_and_a_phone_with_legible_ticks(sentence, height):
    from attnbook import fonts, viz

    T = len(sentence)
    maps = np.random.default_rng(0).random((1, 1, T, T))
    data = la.lm_attention_data(list(sentence), maps)
    figs = {
        w: la.draw_lm_attention(data, width=w, height=height) for w in (viz.COLUMN_PX, viz.PHONE_PX)
    }
    assert [(t.type, t.name) for t in figs[viz.COLUMN_PX].data] == [
        (t.type, t.name) for t in figs[viz.PHONE_PX].data
    ]
    for width, fig in figs.items():
        lay = fig.layout
        plot_w = width - lay.margin.l - lay.margin.r
        plot_h = lay.height - lay.margin.t - lay.margin.b
        (x0, x1), (y0, y1) = lay.xaxis.domain, lay.yaxis.domain
        panel = (
            lay.margin.l + x0 * plot_w,
            lay.margin.t + (1 - y1) * plot_h,
            lay.margin.l + x1 * plot_w,
            lay.margin.t + (1 - y0) * plot_h,
        )
        assert not [a for a in lay.annotations if a.text], "no text placed in the plot"
        # The colour bar: inside the figure and beside (column) or under (phone) the map.
        bar = fig.data[0].colorbar
        title_px = fonts.text_width(bar.title.text, 13)
        if width == viz.PHONE_PX:
            assert bar.orientation == "h" and bar.yref == "container" and bar.y == 0
            left = lay.margin.l + bar.x * plot_w
            assert panel[0] <= left and left + bar.len * plot_w + title_px <= panel[2]
            assert bar.ypad + bar.thickness + 13 * 1.3 <= lay.margin.b - 70  # under the axis
        else:
            left = lay.margin.l + bar.x * plot_w
            assert left >= panel[2] + 4
            assert left + bar.thickness + fonts.text_width("0.5", 13) + 13 * 1.3 <= width
            mid = lay.margin.t + (1 - bar.y) * plot_h
            assert panel[1] - 1 <= mid - bar.len * plot_h / 2
            assert mid + bar.len * plot_h / 2 <= panel[3] + 1
        # Tokens as ticks: 9 px or more, and the labels shown do not overlap (the keys side
        # by side by their widths, the queries one under the other by their line height).
        col, row = (panel[2] - panel[0]) / T, (panel[3] - panel[1]) / T
        xs, k = _shown(lay.xaxis.ticktext)
        ys, k_y = _shown(lay.yaxis.ticktext)
        assert lay.xaxis.tickfont.size >= 9 and lay.yaxis.tickfont.size >= 9
        widest = max(fonts.text_width(t, lay.xaxis.tickfont.size) for t in lay.xaxis.ticktext)
        assert widest < k * col, (width, widest, k, col)
        assert lay.yaxis.tickfont.size * 1.3 <= k_y * row, (width, k_y, row)
        if height is None:
            assert k_y == 1, "every query labelled at the default height"
        if T == 48 and width == viz.PHONE_PX:
            assert k > 1, "48 columns on a phone: every k-th key"
        if T <= 8:
            assert k == 1 and lay.xaxis.tickfont.size >= 11
