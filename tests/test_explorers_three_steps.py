"""Tests of the three steps explorer (attnbook.explorers.three_steps).

Expected values are derived by hand from the documented constants (the query (1, 1), the keys
and values (0, 0), (2, 0), (0, 2), (0, 1), (1, 1)), with math.exp, never from the explorer's
own output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from torch.testing import assert_close  # noqa: E402

import panel_checks  # noqa: E402
from attnbook import fonts, viz  # noqa: E402
from attnbook.explorers import three_steps as ts  # noqa: E402
from explorer_util import embedded_spec, live_caption, static_frame, title_text  # noqa: E402

R2 = math.sqrt(2)


def test_ate_an_apple_by_hand():
    r = ts.three_steps("I ate an apple")  # default scale 1/sqrt(d_k) = 1/sqrt(2)
    assert r.words == ("I", "ate", "an", "apple") and r.target == 3
    assert r.positions == (0, 1, 2, 3)
    assert_close(r.dots, np.array([0.0, 2.0, 0.0, 2.0]), atol=0, rtol=0)
    assert_close(r.scores, np.array([0.0, R2, 0.0, R2]), atol=1e-15, rtol=0)
    e = math.exp(R2)
    w_hi, w_lo = e / (2 + 2 * e), 1 / (2 + 2 * e)  # two scores sqrt(2), two scores 0
    assert_close(r.weights, np.array([w_lo, w_hi, w_lo, w_hi]), atol=1e-15, rtol=0)
    # o = w_hi * v_ate + w_hi * v_apple = w_hi * ((2, 0) + (1, 1)) = (3 w_hi, w_hi)
    assert_close(r.output, np.array([3 * w_hi, w_hi]), atol=1e-15, rtol=0)
    assert_close(r.cos_output, np.array([3, 1]) / math.sqrt(10), atol=1e-15, rtol=0)
    assert_close(r.cos_start, np.array([1, 1]) / R2, atol=1e-15, rtol=0)
    assert np.isfinite(r.output).all()


def test_company_context_and_neutral_context_by_hand():
    r = ts.three_steps("Apple released a new chip")
    e2, e1 = math.exp(R2), math.exp(1 / R2)  # dots 2 (apple, released, chip), 1 (new), 0 (a)
    z = 3 * e2 + e1 + 1
    assert_close(r.weights, np.array([e2, e2, 1, e1, e2]) / z, atol=1e-15, rtol=0)
    # o = (e2 (1, 1) + e2 (0, 2) + e1 (0, 1) + e2 (0, 2)) / z = (e2, 5 e2 + e1) / z
    assert_close(r.output, np.array([e2, 5 * e2 + e1]) / z, atol=1e-15, rtol=0)
    assert r.cos_output[1] > r.cos_output[0]
    # Nothing in "I saw an apple" speaks for either sense: o stays on the diagonal.
    n = ts.three_steps("I saw an apple")
    assert_close(n.cos_output, np.array([1, 1]) / R2, atol=1e-15, rtol=0)


def test_scale_zero_gives_the_mean_and_large_scale_a_near_lookup():
    for name, words in ts.CONTEXTS.items():
        r = ts.three_steps(name, 0.0)
        S = len(words)
        assert_close(r.weights, np.full(S, 1 / S), atol=1e-15, rtol=0)
        mean = np.mean([ts.VALUES[w.lower()] for w in words], axis=0)
        assert_close(r.output, mean, atol=1e-15, rtol=0)
    big = ts.three_steps("Apple's stock fell", 40.0)
    # the two keys with dot 2 ("apple", "stock") share almost all the weight
    assert_close(big.output, (np.array([1, 1]) + np.array([0, 2])) / 2, atol=1e-12, rtol=0)


def test_constants_are_small_integers_and_cover_every_context():
    for table in (ts.KEYS, ts.VALUES):
        for word, vec in table.items():
            assert len(vec) == len(ts.DIMS) and all(
                isinstance(x, int) and abs(x) <= 2 for x in vec
            ), word
    for words in ts.CONTEXTS.values():
        assert sum(w.lower() == ts.WORD for w in words) == 1
        assert all(w.lower() in ts.KEYS and w.lower() in ts.VALUES for w in words)


def test_one_name_per_sense_in_constants_and_figure():
    # The reader sees one pair of names: each sense direction is the axis of the same name,
    # and the plane's axis titles and dashed labels use those names (the chapter text too).
    assert tuple(ts.SENSE_DIRECTIONS) == ts.DIMS == ("fruit", "company")
    assert ts.SENSE_DIRECTIONS == {"fruit": (1, 0), "company": (0, 1)}
    lay = ts.three_steps_figure().layout
    assert (lay.xaxis3.title.text, lay.yaxis3.title.text) == ts.DIMS
    fig = ts.three_steps_figure()
    assert (fig.data[2].text[-1], fig.data[3].text[-1]) == ts.DIMS
    assert all(len(name) <= 7 for name in ts.DIMS)  # short enough for the phone layout


def test_each_language_has_the_example_in_its_own_words():
    # The book's own example: every language names every context, one token per role, the
    # ambiguous word where "apple" is; the Chinese sentence is its tokens written together.
    from attnbook import i18n

    assert set(ts.EXAMPLES) == set(i18n.LANGUAGES)
    for language, ex in ts.EXAMPLES.items():
        assert list(ex.sentences) == list(ts.CONTEXTS) == list(ex.tokens), language
        for name, words in ts.CONTEXTS.items():
            tokens = ex.tokens[name]
            assert len(tokens) == len(words), (language, name)
            # (case aside: English writes "Apple" at the start of a sentence)
            assert [t.lower() for t, w in zip(tokens, words) if w.lower() == ts.WORD] == [
                ex.word.lower()
            ]
    en, zh = ts.EXAMPLES["en"], ts.EXAMPLES["zh_CN"]
    assert dict(en.tokens) == ts.CONTEXTS and en.senses == ts.DIMS and en.word == "apple"
    assert zh.word == "苹果" and zh.senses == ("水果", "公司")
    assert zh.tokens["I ate an apple"] == ("我", "吃了", "一个", "苹果")
    assert zh.tokens["Apple released a new chip"] == ("苹果", "发布了", "一款", "新", "芯片")
    for name in ts.CONTEXTS:
        assert zh.sentences[name] == "".join(zh.tokens[name])
        assert not i18n.untranslated(zh.sentences[name])


def test_chinese_figure_has_the_same_numbers_in_chinese_words():
    # The vectors do not change with the language: the same weights and output, hand-derived,
    # drawn over the Chinese tokens, with the Chinese senses on the plane's axes.
    e = math.exp(R2)
    w_hi, w_lo = e / (2 + 2 * e), 1 / (2 + 2 * e)
    zh = ts.three_steps_figure("I ate an apple", language="zh_CN")
    en = ts.three_steps_figure("I ate an apple", language="en")
    for fig in (zh, en):
        assert_close(
            np.asarray(fig.data[1].y), np.array([w_lo, w_hi, w_lo, w_hi]), atol=1e-15, rtol=0
        )
        assert_close(
            np.asarray(fig.data[6].meta["output"]), np.array([3 * w_hi, w_hi]), atol=1e-15, rtol=0
        )
    assert tuple(zh.layout.xaxis.ticktext) == ("我", "吃了", "一个", "<b>苹果</b>")
    assert tuple(en.layout.xaxis.ticktext) == ("I", "ate", "an", "<b>apple</b>")
    assert zh.data[1].hovertext[1] == f"吃了：权重 {w_hi:.3f}"
    assert (zh.layout.xaxis3.title.text, zh.layout.yaxis3.title.text) == ("水果", "公司")
    assert zh.data[5].text[-1] == "苹果（起点）"
    assert zh.layout.title.text.startswith("“我吃了一个苹果”：")
    # I and an share the value (0, 0): one point, its tokens listed with the Chinese comma.
    assert "我、一个" in zh.data[4].text
    alone = ts.three_steps_figure("I saw an apple", include_self=False, language="zh_CN")
    assert tuple(alone.layout.xaxis.ticktext) == ("我", "看到了", "一个")
    assert "没有方向" in alone.layout.title.text


def test_explorer_speaks_chinese():
    from explorer_util import assert_speaks_chinese

    assert_speaks_chinese(ts.three_steps_explorer())


def test_without_itself_apple_takes_only_the_context():
    # "I ate an apple" without apple's own key: scores (0, sqrt 2, 0) over I, ate, an.
    r = ts.three_steps("I ate an apple", include_self=False)
    assert r.words == ("I", "ate", "an") and r.target is None and r.positions == (0, 1, 2)
    # "Apple" leads the company sentences: without it the others keep their places 1..4.
    assert ts.three_steps("Apple released a new chip", include_self=False).positions == (1, 2, 3, 4)
    e = math.exp(R2)
    assert_close(r.output, np.array([2 * e / (e + 2), 0.0]), atol=1e-15, rtol=0)
    assert_close(r.cos_output, np.array([1.0, 0.0]), atol=1e-15, rtol=0)
    # Nothing in "I saw an apple" but apple itself: without it the output is 0, no direction.
    z = ts.three_steps("I saw an apple", include_self=False)
    assert_close(z.weights, np.full(3, 1 / 3), atol=1e-15, rtol=0)
    assert_close(z.output, np.zeros(2), atol=0, rtol=0)
    assert np.isnan(z.cos_output).all()


def test_explorer_live_and_static():
    ex = ts.three_steps_explorer()
    meta = ex.figure.data[6].meta
    assert_close(np.array(meta["cos_output"]), np.array([3, 1]) / math.sqrt(10), atol=1e-12, rtol=0)
    ex.controls["context"].value = "Apple's stock fell"
    assert_close(
        np.array(ex.figure.data[6].meta["cos_output"]),
        np.array([1, 3]) / math.sqrt(10),
        atol=1e-12,
        rtol=0,
    )  # the mirror image
    ex.controls["context"].value = "I saw an apple"
    ex.controls["include_self"].value = False
    assert ex.figure.data[6].meta["cos_output"] is None
    assert title_text(ex.figure.layout.to_plotly_json()) == ""  # the caption holds the title
    assert "no direction" in live_caption(ex)
    spec = embedded_spec(ex.static_html())
    assert len(spec["frame_of"]) == len(ts.CONTEXTS) * 2
    f = static_frame(spec, {"context": "I ate an apple", "include_self": True})
    e = math.exp(R2)
    assert f["data"][1]["y"] == pytest.approx([1, e, 1, e] / np.float64(2 + 2 * e), rel=1e-3)
    narrow = static_frame(spec, {"context": "I ate an apple", "include_self": True}, narrow=True)
    assert narrow["data"][1]["y"] == f["data"][1]["y"]
    g = static_frame(spec, {"context": "I ate an apple", "include_self": False})
    assert g["data"][1]["y"] == pytest.approx([1, e, 1] / np.float64(2 + e), rel=1e-3)


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: ts.three_steps("I ate a pear"), ValueError, "context"),
        (lambda: ts.three_steps(scale=-1.0), ValueError, "scale"),
        (lambda: ts.three_steps(scale=math.inf), ValueError, "scale"),
        (lambda: ts.three_steps(scale="big"), TypeError, "scale"),
        (lambda: ts.three_steps(include_self=1), TypeError, "include_self"),
        (lambda: ts.three_steps_explorer(include_self="yes"), TypeError, "include_self"),
        (lambda: ts.three_steps_explorer(context="apple"), ValueError, "context"),
        # By hand: the vocabulary's largest |q . k| is 2, so c = 1e308 makes a score 2e308 > the
        # float64 maximum 1.797e308 (the message named attention's q and k, not scale).
        (lambda: ts.three_steps(scale=1e308), ValueError, r"scale must be <= 8\.98847e\+307"),
        (lambda: ts.three_steps_figure(scale=1e308), ValueError, "scale must be"),
        # The figure checks its height as the flash and temperature figures do.
        (lambda: ts.three_steps_figure(height=0), ValueError, "height must be >= 10, got 0"),
        (lambda: ts.three_steps_figure(height=400.0), TypeError, "height must be an integer"),
        (lambda: ts.three_steps_figure(language="fr"), ValueError, "language must be one of"),
    ],
)
def test_bad_input_raises(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


# ------------------------------------------------------------------------------------------
# Layout for the width it is drawn at (issue 20): plotly's grid, no hand-placed panels
# ------------------------------------------------------------------------------------------


def _tick_room(fig, width, axis="xaxis"):
    """Room in px of one token's bar, and the widest token in px."""
    plot_w, _ = panel_checks.plot_px(fig, width)
    x0, x1 = fig.layout[axis].domain
    ticks = fig.layout[axis].ticktext
    return (x1 - x0) * plot_w / len(ticks), max(fonts.text_width(t, 13) for t in ticks)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("context", list(ts.CONTEXTS))
def test_figure_is_laid_out_for_the_column_and_the_phone(language, context):
    data = ts.three_steps(context)
    wide = ts.draw_three_steps(data, language=language, width=viz.COLUMN_PX)
    phone = ts.draw_three_steps(data, language=language, width=viz.PHONE_PX)
    panel_checks.assert_same_traces(wide, phone)
    panel_checks.assert_side_by_side(wide)
    panel_checks.assert_stacked(phone)
    for fig, width in ((wide, viz.COLUMN_PX), (phone, viz.PHONE_PX)):
        panel_checks.assert_panels_apart(fig)
        panel_checks.assert_titles_fit(fig, width, 3)
        panel_checks.assert_title_room_after_caption(fig)
        assert len(fig.layout.annotations) == 3  # the panels' titles, nothing placed by hand
        assert fig.layout.title.text.startswith("“")  # the sentence: prose, in the caption
        # Tokens never overlap: level only where each fits its bar's room, else slanted.
        for axis in ("xaxis", "xaxis2"):
            room, widest = _tick_room(fig, width, axis)
            assert fig.layout[axis].tickangle == -45 or widest <= room
        # The plane keeps one unit as long on both of its axes.
        assert fig.layout.yaxis3.scaleanchor == "x3"
    # On a phone the five tokens of the longest sentence have room to stand level.
    if len(data.words) <= 5:
        assert phone.layout.xaxis.tickangle == 0


def test_the_static_explorer_stores_a_stacked_phone_figure():
    ex = ts.three_steps_explorer()
    assert ex.draws_for_width
    spec = embedded_spec(ex.static_html("zh_CN"))
    values = {"context": "Apple released a new chip", "include_self": True}
    narrow = static_frame(spec, values, narrow=True)["layout"]
    wide = static_frame(spec, values)["layout"]
    assert narrow["xaxis"]["domain"] == narrow["xaxis2"]["domain"]
    assert narrow["yaxis"]["domain"][0] > narrow["yaxis2"]["domain"][1]
    assert wide["xaxis"]["domain"][1] < wide["xaxis2"]["domain"][0]


@pytest.mark.parametrize(
    "width, exc", [(0, ValueError), (40, ValueError), ("688", TypeError), (688.0, TypeError)]
)
def test_a_bad_width_is_named(width, exc):
    # 40 px leaves no room for a panel after the margins.
    with pytest.raises(exc, match="width"):
        ts.draw_three_steps(ts.three_steps(), width=width)


def test_shown_gives_each_editions_word_sense_and_sentence():
    assert ts.shown("ate").texts == {"en": "ate", "zh_CN": "吃了"}
    assert ts.shown("apple").texts == {"en": "apple", "zh_CN": "苹果"}
    assert ts.shown("company").texts == {"en": "company", "zh_CN": "公司"}
    assert ts.shown("I ate an apple").texts == {"en": "I ate an apple", "zh_CN": "我吃了一个苹果"}
    # Every role of KEYS that a context uses has a word in every language.
    used = {w.lower() for words in ts.CONTEXTS.values() for w in words}
    assert used == set(ts.KEYS)
    for role in used:
        assert all(ts.shown(role).texts.values())
    with pytest.raises(ValueError, match="got 'pear'"):
        ts.shown("pear")
