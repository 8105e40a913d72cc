"""Tests of the FlashAttention step-through explorer (attnbook.explorers.flash).

Expected numbers are recomputed here without the tiled loop: the example's q, k, v are drawn
again from the documented generator, the scores by NumPy, and the state of a row after a step
from the *prefix* of its keys seen so far (m_i = the largest visible score among them,
ell_i = sum of exp(s_ij - m_i), a_i = sum of exp(s_ij - m_i) v_j, r_i = exp(m_i before - m_i
after)) -- a formula that has no running rescale in it. A 2 x 2 tile is also worked by hand.
The static path is checked by parsing the JSON embedded in the explorer's text/html.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook import flash  # noqa: E402
from attnbook.explorers import flash as fx  # noqa: E402
from attnbook.explorers.base import MAX_GRID  # noqa: E402
from explorer_util import (  # noqa: E402
    assert_speaks_chinese,
    caption_text,
    embedded_spec,
    static_frame,
    title_text,
)

L = S = 8
SETTINGS = list(itertools.product((2, 4, 8), (2, 4, 8), (False, True)))


def example(seed=0):
    """q, k, v as the docstring of flash_example says: one generator, in this order."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((8, 4))
    k = rng.standard_normal((8, 4))
    v = rng.standard_normal((8, 1))
    return q, k, v


def scores(causal, seed=0):
    q, k, _ = example(seed)
    s = q @ k.T / 2.0  # scale 1 / sqrt(4)
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    return s


def prefix_state(s_row, v, stop):
    """(m, ell, a) of one row after seeing keys 0 .. stop-1; (-inf, 0, 0) before any."""
    if stop == 0:
        return -np.inf, 0.0, 0.0
    seen = s_row[:stop]
    m = seen.max()
    if m == -np.inf:
        return -np.inf, 0.0, 0.0
    e = np.exp(seen - m)  # hidden keys: exp(-inf) = 0
    return m, e.sum(), float(e @ v[:stop, 0])


def plain_attention(causal, seed=0):
    s = scores(causal, seed)
    _, _, v = example(seed)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ v  # (L, 1)


def n_steps(bq, bk):
    return (L // bq) * (S // bk)


def meta_of(fig):
    return fig.data[1].meta


def shown_title(fig) -> str:
    return title_text(fig.layout.to_plotly_json()).replace("<br>", " ")


@pytest.fixture(scope="module")
def static_html():
    return fx.flash_explorer().static_html()


@pytest.fixture(scope="module")
def spec(static_html):
    return embedded_spec(static_html)


# ------------------------------------------------------------------------------------------
# The numbers of the figure
# ------------------------------------------------------------------------------------------


def test_example_is_the_documented_one():
    for a, b in zip(fx.flash_example(3), example(3)):
        assert a.shape == b.shape and np.array_equal(a, b)


def test_two_by_two_tile_by_hand():
    # Step 1 of 2 x 2 tiles: rows 0, 1 meet keys 0, 1. For row i, m_i = max(s_i0, s_i1),
    # ell_i = 1 + exp(-|s_i0 - s_i1|), a_i = (v_argmax + exp(-|s_i0 - s_i1|) v_other) and r_i = 0.
    q, k, v = example()
    fig = fx.flash_step_figure(2, 2, False, 1)
    meta = meta_of(fig)
    assert (meta["q_start"], meta["q_stop"], meta["k_start"], meta["k_stop"]) == (0, 2, 0, 2)
    for i in (0, 1):
        s0, s1 = float(q[i] @ k[0]) / 2, float(q[i] @ k[1]) / 2
        gap = abs(s0 - s1)
        hi, lo = (0, 1) if s0 >= s1 else (1, 0)
        assert meta["m_old"][i] is None  # -inf before the first key block
        assert meta["m_new"][i] == pytest.approx(max(s0, s1), rel=1e-14)
        assert meta["rescale"][i] == 0.0
        assert meta["l_old"][i] == 0.0 and meta["a_old"][i] == 0.0
        assert meta["l_new"][i] == pytest.approx(1 + math.exp(-gap), rel=1e-14)
        assert meta["a_new"][i] == pytest.approx(v[hi, 0] + math.exp(-gap) * v[lo, 0], rel=1e-13)
    # The next step (keys 2, 3) rescales by exp(m before - m after) where the maximum rose.
    meta2 = meta_of(fx.flash_step_figure(2, 2, False, 2))
    for i in (0, 1):
        s4 = [float(q[i] @ k[j]) / 2 for j in range(4)]
        want = math.exp(max(s4[:2]) - max(s4))
        assert meta2["rescale"][i] == pytest.approx(want, rel=1e-14)
        if max(s4[2:]) > max(s4[:2]):
            assert i in meta2["rose"]


@pytest.mark.parametrize("bq, bk, causal", SETTINGS)
def test_every_step_equals_the_prefix_formula_and_the_tile_records(bq, bk, causal):
    s = scores(causal)
    _, _, v = example()
    _, records = flash.tiled_attention_steps(
        *fx.flash_example(), causal=causal, block_q=bq, block_k=bk
    )
    assert len(records) == n_steps(bq, bk)
    for k_ix in range(1, n_steps(bq, bk) + 1):
        fig = fx.flash_step_figure(bq, bk, causal, k_ix)
        meta, rec = meta_of(fig), records[k_ix - 1]
        assert meta["step"] == k_ix and meta["n_steps"] == n_steps(bq, bk)
        # the tile: query blocks in order, key blocks in order within each
        qb, kb = divmod(k_ix - 1, S // bk)
        assert (meta["q_start"], meta["k_start"]) == (qb * bq, kb * bk)
        assert (rec.q_start, rec.k_start) == (qb * bq, kb * bk)
        rose = []
        for a, i in enumerate(range(qb * bq, (qb + 1) * bq)):
            m0, l0, a0 = prefix_state(s[i], v, kb * bk)
            m1, l1, a1 = prefix_state(s[i], v, (kb + 1) * bk)
            r = 0.0 if m0 == -np.inf else math.exp(m0 - m1)
            got = {c: meta[c][a] for c in fx.STATE_COLUMNS}
            assert got["m_old"] == (None if m0 == -np.inf else pytest.approx(m0, rel=1e-14))
            assert got["m_new"] == pytest.approx(m1, rel=1e-14)
            assert got["rescale"] == pytest.approx(r, rel=1e-13, abs=1e-300)
            assert got["l_old"] == pytest.approx(l0, rel=1e-13)
            assert got["l_new"] == pytest.approx(l1, rel=1e-13)
            assert got["a_old"] == pytest.approx(a0, rel=1e-12, abs=1e-14)
            assert got["a_new"] == pytest.approx(a1, rel=1e-12, abs=1e-14)
            # ... and the same numbers as the library's own TileStep record
            assert got["m_new"] == rec.m_new[a] and got["rescale"] == rec.rescale[a]
            assert got["l_new"] == rec.l[a] and got["a_new"] == rec.acc[a, 0]
            if kb > 0 and m1 > m0:
                rose.append(i)
            # the text drawn in the state panel: two decimals of the same numbers
            text = fig.data[1].text[i]
            assert text[1] == f"{m1:.2f}".replace("-", "\u2212")
            assert text[4] == f"{l1:.2f}"
        assert meta["rose"] == rose
        # rows outside this block have no numbers
        others = [i for i in range(L) if not qb * bq <= i < (qb + 1) * bq]
        assert all(t == "" for i in others for t in fig.data[1].text[i])


@pytest.mark.parametrize("bq, bk, causal", SETTINGS)
def test_last_step_of_a_row_block_equals_plain_attention(bq, bk, causal):
    plain = plain_attention(causal)
    for k_ix in range(1, n_steps(bq, bk) + 1):
        fig = fx.flash_step_figure(bq, bk, causal, k_ix)
        meta = meta_of(fig)
        rows = slice(meta["q_start"], meta["q_stop"])
        if meta["k_stop"] < S:
            assert meta["max_diff"] is None
            assert "done" not in shown_title(fig)
            continue
        out = np.array(meta["a_new"]) / np.array(meta["l_new"])
        assert np.all(np.isfinite(out))
        assert np.abs(out - plain[rows, 0]).max() <= 1e-13
        assert 0.0 <= meta["max_diff"] <= 1e-13
        assert f"rows {meta['q_start']}\u2013{meta['q_stop'] - 1} done" in shown_title(fig)


def test_score_panel_shows_what_has_been_computed():
    s = scores(True)
    # causal, 4 x 2 tiles, step 6: rows 4-7 meet keys 2-3 (query block 2, key block 2)
    fig = fx.flash_step_figure(4, 2, True, 6)
    z = np.array(fig.data[0].z)
    text = np.array(fig.data[0].text)
    computed = np.zeros((L, S), bool)
    computed[:4, :] = True  # the first query block, all four key blocks
    computed[4:, :4] = True  # the second query block, key blocks 1 and 2
    assert np.array_equal(z != 0, computed)
    assert np.all(text[~computed] == "")
    assert np.all(text[computed & np.isinf(s)] == "\u2212\u221e")
    assert np.all(z[computed & np.isinf(s)] == 3)
    tile = np.zeros((L, S), bool)
    tile[4:8, 2:4] = True
    assert set(z[tile & ~np.isinf(s)]) <= {2, 4}
    assert np.all(z[computed & ~tile & ~np.isinf(s)] == 1)
    # a dark-orange cell is the new maximum of a row whose maximum rose, nowhere else
    for i in range(4, 8):
        row_max_before = s[i, :2].max()
        new = s[i, 2:4].max() > row_max_before
        assert (4 in z[i]) == new
        if new:
            assert z[i, 2 + int(np.argmax(s[i, 2:4]))] == 4
    # the outline is the tile of this step
    rect = [sh for sh in fig.layout.shapes if sh.type == "rect"]
    assert len(rect) == 1
    assert (rect[0].x0, rect[0].x1, rect[0].y0, rect[0].y1) == (1.5, 3.5, 3.5, 7.5)


# ------------------------------------------------------------------------------------------
# The progress control: every stop is a real step of every tiling
# ------------------------------------------------------------------------------------------


def stop_to_step(p, n):
    """Stop p of 16 (the loop p/16 done) falls in step k when (k-1)/n < p/16 <= k/n."""
    return next(k for k in range(1, n + 1) if (k - 1) * 16 < p * n <= k * 16)


def test_progress_step_by_hand():
    assert [fx.progress_step(p, 4) for p in range(1, 17)] == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    assert [fx.progress_step(p, 1) for p in (1, 8, 16)] == [1, 1, 1]
    assert [fx.progress_step(p, 16) for p in range(1, 17)] == list(range(1, 17))
    assert [fx.progress_step(p, 2) for p in (1, 8, 9, 16)] == [1, 1, 2, 2]
    with pytest.raises(ValueError, match="progress"):
        fx.progress_step(17, 4)
    with pytest.raises(ValueError, match="n_steps"):
        fx.progress_step(1, 3)
    with pytest.raises(TypeError, match="progress"):
        fx.progress_step(1.0, 4)


def test_direct_call_past_the_end_is_clamped_and_says_so():
    fig = fx.flash_step_figure(8, 8, False, 16)
    assert meta_of(fig)["step"] == 1 and meta_of(fig)["n_steps"] == 1
    lines = title_text(fig.layout.to_plotly_json()).split("<br>")
    assert lines[0] == "Step 1 of 1 (asked 16, past the end)"
    assert lines[1] == "rows i = 0\u20137, keys j = 0\u20137"
    fig4 = fx.flash_step_figure(4, 4, True, 4)
    assert "past the end" not in shown_title(fig4)
    assert meta_of(fx.flash_step_figure(4, 4, True, 9)) == meta_of(fig4)


def test_static_progress_stops_are_real_steps_of_every_tiling(spec):
    names = [c["name"] for c in spec["controls"]]
    assert names == ["block_q", "block_k", "causal", "progress"]
    ctl = spec["controls"][3]
    assert ctl["options"] == list(range(1, 17))
    assert ctl["labels"][0] == "6%" and ctl["labels"][7] == "50%" and ctl["labels"][-1] == "100%"
    assert len(spec["frame_of"]) == 3 * 3 * 2 * 16 <= MAX_GRID
    # one distinct figure per step of every setting and no other (no "past the end" frames)
    assert len(spec["frames"]) == 2 * sum(n_steps(bq, bk) for bq in (2, 4, 8) for bk in (2, 4, 8))
    for bq, bk, causal in SETTINGS:
        n = n_steps(bq, bk)
        shown = []
        for p in range(1, 17):
            frame = static_frame(spec, dict(block_q=bq, block_k=bk, causal=causal, progress=p))
            meta = frame["data"][1]["meta"]
            k = stop_to_step(p, n)
            assert (meta["step"], meta["n_steps"]) == (k, n)
            assert title_text(frame["layout"]) == ""  # the title is the caption above the plot
            title = caption_text(frame["caption"])
            assert title.startswith(f"Step {k} of {n}: rows i = ")
            assert "past the end" not in title
            shown.append(meta["step"])
        assert sorted(set(shown)) == list(range(1, n + 1)) and shown[-1] == n


def test_title_is_a_caption_the_browser_wraps_at_both_widths(spec):
    """The title is not fitted into the plot at either width (it was, by hand, and its head had
    to stay one line): it is the caption above the plot, free text the browser wraps. Both
    variants show the same caption, with the figure's own line breaks and no others, the
    head on its first line."""
    # 4 x 4 and 8 x 8 are the tilings the newcomer saw; 2 x 2 step 16 has the widest head
    for values in (
        dict(block_q=4, block_k=4, causal=True, progress=16),
        dict(block_q=8, block_k=8, causal=False, progress=16),
        dict(block_q=2, block_k=2, causal=False, progress=16),
        dict(block_q=2, block_k=8, causal=True, progress=5),
    ):
        meta = static_frame(spec, values)["data"][1]["meta"]
        head = f"Step {meta['step']} of {meta['n_steps']}: rows i = "
        raw = fx.flash_step_figure(
            values["block_q"], values["block_k"], values["causal"], meta["step"]
        ).layout.title.text
        captions = set()
        for narrow in (False, True):
            frame = static_frame(spec, values, narrow=narrow)
            assert title_text(frame["layout"]) == "" and "title" not in frame["layout"]
            lines = caption_text(frame["caption"], br="\n").split("\n")
            assert lines[0].startswith(head) and lines[0].endswith(
                f"keys j = {meta['k_start']}\u2013{meta['k_stop'] - 1}"
            ), (narrow, lines)
            assert len(lines) == raw.count("<br>") + 1, (narrow, lines)
            captions.add(frame["caption"])
        assert len(captions) == 1


def test_initial_step_is_a_stop_of_the_initial_tiling():
    ex = fx.flash_explorer(block_q=4, block_k=4, step=3)
    assert ex.controls["progress"].value == 12
    assert meta_of(ex.figure)["step"] == 3 and meta_of(ex.figure)["n_steps"] == 4
    ex = fx.flash_explorer(block_q=8, block_k=8, step=5)  # past the end: the last step
    assert ex.controls["progress"].value == 16
    assert meta_of(fx.flash_explorer().figure)["step"] == 2


def test_live_control_and_figure_agree():
    ex = fx.flash_explorer()
    for bq, bk, causal in [(4, 4, False), (8, 8, True), (2, 4, True)]:
        n = n_steps(bq, bk)
        for name, value in dict(block_q=bq, block_k=bk, causal=causal).items():
            ex.controls[name].value = value
        for p in (1, 7, 16):
            ex.controls["progress"].value = p
            assert meta_of(ex.figure)["step"] == stop_to_step(p, n)
            assert meta_of(ex.figure)["n_steps"] == n


def test_static_frames_equal_the_live_figure(spec):
    ex = fx.flash_explorer()
    for values, step in (
        (dict(block_q=2, block_k=2, causal=False, progress=2), 2),
        (dict(block_q=4, block_k=2, causal=True, progress=12), 6),
        (dict(block_q=8, block_k=4, causal=False, progress=9), 2),
    ):
        for name, value in values.items():
            ex.controls[name].value = value
        live = ex.figure
        frame = static_frame(spec, values)
        for t_live, t_static in zip(live.data, frame["data"]):
            assert [list(r) for r in t_live.text] == t_static["text"]
            assert np.array_equal(np.array(t_live.z), np.array(t_static["z"]))
        narrow = static_frame(spec, values, narrow=True)
        # the phone's frame keeps every number of the state panel
        assert narrow["data"][1]["text"] == frame["data"][1]["text"]
        assert frame["data"][1]["meta"]["step"] == step


def test_static_payload_is_modest(static_html):
    m = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', static_html, re.S)
    assert len(m.group(1).encode()) < 600_000  # the browser tests refuse 1.5 MB


def test_labels_use_the_books_notation():
    fig = fx.flash_step_figure(2, 2, False, 2)
    layout = fig.layout.to_plotly_json()
    ticks = layout["xaxis2"]["ticktext"]
    assert ticks[0] == "m<sub>i</sub><br>before" and ticks[2] == "r<sub>i</sub>"
    assert ticks[4] == "ℓ<sub>i</sub><br>after" and ticks[6] == "a<sub>i</sub><br>after"
    assert layout["xaxis"]["title"]["text"] == "key j"
    assert layout["yaxis"]["title"]["text"] == "query i"
    assert list(fig.data[1].x) == list(fx.STATE_COLUMNS)
    assert shown_title(fig).startswith("Step 2 of 16: rows i = 0\u20131, keys j = 2\u20133")


def test_chinese_figure_has_the_same_numbers_and_whole_chinese_sentences():
    # causal, 2 x 2 tiles, step 4: rows 0-1 meet keys 6-7, all hidden (keys > queries), and it
    # is the last key block of these rows.
    en = fx.flash_step_figure(2, 2, True, 4, language="en")
    zh = fx.flash_step_figure(2, 2, True, 4, language="zh_CN")
    for a, b in zip(en.data, zh.data):
        assert np.array_equal(np.array(a.z), np.array(b.z))
        assert [list(r) for r in a.text] == [list(r) for r in b.text]
    assert meta_of(zh) == meta_of(en)
    lines = title_text(zh.layout.to_plotly_json()).split("<br>")
    assert lines[0] == "第 4 步（共 16 步）：行 i = 0\u20131，键 j = 6\u20137"
    assert lines[1].startswith("此分块的键全部被遮蔽")
    assert lines[2].startswith("第 0\u20131 行完成")
    assert zh.data[0].hovertemplate.startswith("查询 i = %{y}，键 j = %{x}")
    assert list(zh.layout.xaxis2.ticktext)[0] == "m<sub>i</sub><br>之前"


def test_every_setting_speaks_chinese():
    assert_speaks_chinese(fx.flash_explorer())


# ------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(block_q=3), ValueError, "block_q"),
        (dict(block_k=16), ValueError, "block_k"),
        (dict(block_k="4"), TypeError, "block_k must be an integer"),
        # Integer controls refuse floats alike (block_q=2.0 was taken for 2, step=1.0 refused).
        (dict(block_q=2.0), TypeError, "block_q must be an integer"),
        (dict(block_k=np.float64(4)), TypeError, "block_k must be an integer"),
        (dict(step=1.0), TypeError, "step must be an integer"),
        (dict(step=0), ValueError, "step"),
        (dict(step=17), ValueError, "step"),
        (dict(step=2.5), TypeError, "step"),
        (dict(causal="yes"), TypeError, "causal"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(seed=1.5), TypeError, "seed"),
    ],
)
def test_bad_input_is_named(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        fx.flash_explorer(**kwargs)
    with pytest.raises(exc, match=words):
        fx.flash_step_figure(**kwargs)


def test_bad_height_and_seed_of_the_example():
    with pytest.raises(ValueError, match="height"):
        fx.flash_step_figure(height=0)
    with pytest.raises(TypeError, match="seed"):
        fx.flash_example("0")


# ------------------------------------------------------------------------------------------
# The figure laid out for the book's column (688 px) and a phone (358 px)
# ------------------------------------------------------------------------------------------


def _box(lay, n, width):
    """Panel n's (1 or 2) rectangle in px from the figure's left and top."""
    plot_w = width - lay.margin.l - lay.margin.r
    plot_h = lay.height - lay.margin.t - lay.margin.b
    x0, x1 = lay[f"xaxis{'' if n == 1 else n}"].domain
    y0, y1 = lay[f"yaxis{'' if n == 1 else n}"].domain
    return (
        lay.margin.l + x0 * plot_w,
        lay.margin.t + (1 - y1) * plot_h,
        lay.margin.l + x1 * plot_w,
        lay.margin.t + (1 - y0) * plot_h,
    )


@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("setting", [(2, 2, False, 2), (2, 2, True, 4), (8, 8, True, 1)])
def test_figure_fits_the_column_and_a_phone(setting, language):
    from attnbook import fonts, viz

    data = fx.flash_step_data(*setting)
    figs = {
        w: fx.draw_flash_step(data, language=language, width=w)
        for w in (viz.COLUMN_PX, viz.PHONE_PX)
    }
    kinds = {w: [(t.type, t.name) for t in f.data] for w, f in figs.items()}
    assert kinds[viz.COLUMN_PX] == kinds[viz.PHONE_PX]
    for width, fig in figs.items():
        lay = fig.layout
        a, b = _box(lay, 1, width), _box(lay, 2, width)
        assert a[2] <= b[0] or a[3] <= b[1], "the panels do not overlap"
        if width == viz.PHONE_PX:
            assert a[3] < b[1] and (a[0], a[2]) == (b[0], b[2]), "stacked on a phone"
        else:
            assert a[1] == b[1] and a[2] < b[0], "side by side in the column"
        # Only the panels' titles are text in the plot; each line fits the figure and the
        # room of its panel and the gap beside it.
        assert len(lay.annotations) == 2
        plot_w = width - lay.margin.l - lay.margin.r
        for ann, box in zip(lay.annotations, (a, b)):
            centre = lay.margin.l + ann.x * plot_w
            for line in ann.text.split("<br>"):
                w = fonts.text_width(line, ann.font.size)
                assert 0 <= centre - w / 2 and centre + w / 2 <= width, (width, line)
                assert w <= box[2] - box[0] + 50, (width, line)
        # The numbers fit their cells, in a font of 9 px or more; so do the state ticks.
        for trace, box, n_cols in ((fig.data[0], a, S), (fig.data[1], b, 7)):
            cell = (box[2] - box[0]) / n_cols
            size = trace.textfont.size
            assert size >= 9
            assert max(fonts.text_width(t, size) for row in trace.text for t in row) < cell
        cell = (b[2] - b[0]) / 7
        size = lay.xaxis2.tickfont.size
        assert size >= 9
        assert all(
            fonts.text_width(line, size) < cell
            for t in lay.xaxis2.ticktext
            for line in t.split("<br>")
        )
        # What the colours mean is the caption's last line, not a note under the plot.
        assert (
            lay.title.text.split("<br>")[-1].count(
                "orange outline" if language == "en" else "橙色边框"
            )
            == 1
        )
