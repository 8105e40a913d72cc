"""Tests of attnbook.explorers.layout (panels laid out for a width with make_subplots) and of
explorers whose draw lays its figure out itself (Explorer.draws_for_width)."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

from attnbook import fonts, viz  # noqa: E402
from attnbook.explorers import layout, rnn  # noqa: E402
from attnbook.explorers.base import Explorer  # noqa: E402
from explorer_util import embedded_spec, static_frame  # noqa: E402

LONG = "The bound at the chosen distance against the spectral norm of the recurrent matrix"


def test_column_width_puts_panels_side_by_side_with_the_given_shares():
    grid = layout.panel_grid(
        688, ["left", "right"], column_widths=[0.6, 0.4], spacing_px=100, left=70, right=20
    )
    assert not grid.stacked and grid.cells == [{"row": 1, "col": 1}, {"row": 1, "col": 2}]
    lay = grid.figure.layout
    (a0, a1), (b0, b1) = lay.xaxis.domain, lay.xaxis2.domain
    plot_w = 688 - 70 - 20
    assert (b0 - a1) * plot_w == pytest.approx(100, abs=0.5)  # the gap, in px
    assert (a1 - a0) / (b1 - b0) == pytest.approx(0.6 / 0.4)
    assert lay.yaxis.domain == lay.yaxis2.domain  # one row
    assert lay.height == 440 and lay.legend.yref == "container"


def test_phone_width_stacks_panels_each_panel_px_tall_with_room_between():
    grid = layout.panel_grid(viz.PHONE_PX, ["top panel", LONG], bottom=50)
    assert grid.stacked and grid.cells == [{"row": 1, "col": 1}, {"row": 2, "col": 1}]
    lay = grid.figure.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    (a0, a1), (b0, b1) = lay.yaxis.domain, lay.yaxis2.domain
    assert (a1 - a0) * plot_h == pytest.approx(layout.PANEL_PX, abs=0.5)
    assert (b1 - b0) * plot_h == pytest.approx(layout.PANEL_PX, abs=0.5)
    # The gap holds the upper panel's axis and the lower panel's title (wrapped: two lines).
    title = grid.figure.layout.annotations[1].text
    lines = title.split("<br>")
    assert len(lines) >= 2
    assert all(fonts.text_width(line, 14) <= viz.PHONE_PX - 16 for line in lines)
    assert (a0 - b1) * plot_h >= layout.AXIS_PX + len(lines) * 14 * 1.3
    assert lay.xaxis.domain == lay.xaxis2.domain == (0.0, 1.0)


def test_titles_wrap_to_the_room_of_their_panel_side_by_side():
    grid = layout.panel_grid(688, ["short", LONG], column_widths=[0.6, 0.4])
    title = grid.figure.layout.annotations[1].text
    lay = grid.figure.layout
    plot_w = 688 - lay.margin.l - lay.margin.r
    room = (lay.xaxis2.domain[1] - lay.xaxis2.domain[0]) * plot_w + 0.9 * 80
    assert "<br>" in title
    assert all(fonts.text_width(line, 14) <= room for line in title.split("<br>"))
    # The top margin holds the tallest title.
    assert lay.margin.t >= 2 * 14 * 1.3


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(width=0, titles=["a"]), ValueError, "width"),
        (dict(width=300.5, titles=["a"]), TypeError, "width"),
        (dict(width=688, titles=[]), ValueError, "titles"),
        (dict(width=688, titles=["a", "b"], column_widths=[1.0]), ValueError, "column_widths"),
        (
            dict(width=688, titles=["a", "b"], column_widths=[1.0, -1.0]),
            ValueError,
            "column_widths",
        ),
    ],
)
def test_panel_grid_rejects_bad_arguments_naming_them(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        layout.panel_grid(**kwargs)


# An explorer whose draw takes width: its figures are used as drawn, at both widths
# ------------------------------------------------------------------------------------------

SMALL = dict(gamma_values=(0.9, 1.1), distance_values=(5, 20), hidden_size=8, seed=3)


def test_an_explorer_drawing_for_a_width_stores_what_draw_made_for_each_width():
    ex = rnn.gradient_decay_explorer(0.9, 20, **SMALL)
    assert ex.draws_for_width
    spec = embedded_spec(ex.static_html())
    setting = rnn.gradient_decay_setting(
        0.9,
        20,
        data=rnn.gradient_decay_data(0.9, max_distance=20, hidden_size=8, seed=3),
        gamma_range=(0.9, 1.1),
    )
    for width, narrow in ((viz.COLUMN_PX, False), (viz.PHONE_PX, True)):
        drawn = rnn.draw_gradient_decay(setting, language="en", width=width).to_plotly_json()
        frame = static_frame(spec, {"gamma": 0.9, "distance": 20}, narrow=narrow)
        lay = frame["layout"]
        # Exactly draw's layout (floats rounded to 4 digits when stored), not a refit one.
        assert lay["height"] == drawn["layout"]["height"]
        assert lay["yaxis2"]["domain"] == pytest.approx(
            list(drawn["layout"]["yaxis2"]["domain"]), rel=1e-3
        )
        assert [a["text"] for a in lay["annotations"]] == [
            a["text"] for a in drawn["layout"]["annotations"]
        ]
    wide = static_frame(spec, {"gamma": 0.9, "distance": 20})["layout"]
    phone = static_frame(spec, {"gamma": 0.9, "distance": 20}, narrow=True)["layout"]
    assert wide["yaxis"]["domain"] == wide["yaxis2"]["domain"]  # side by side
    assert phone["yaxis"]["domain"][0] > phone["yaxis2"]["domain"][1]  # stacked


def test_a_draw_without_width_is_still_fitted_afterwards():
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control

    def draw(data, *, language):
        return go.Figure(
            go.Scatter(x=[0, 1], y=[data, data]), layout=dict(title=dict(text="t"), height=300)
        )

    ex = Explorer(
        [Control("v", "v", "slider", (1, 2), 1)],
        title="test explorer",
        compute=lambda v: v,
        draw=draw,
    )
    assert not ex.draws_for_width
    assert ex.figure_json({"v": 2}, "en", width=viz.PHONE_PX)["data"][0]["y"] == [2, 2]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(width=688, titles="Loss"), TypeError, "titles"),
        (dict(width=688, titles=["a", 2]), TypeError, "titles"),
        (dict(width=688, titles=["a", "b"], spacing_px=1000), ValueError, "spacing_px"),
        (dict(width=520, titles=["a", "b"], left=260, right=260), ValueError, "left=260"),
        (
            dict(width=688, titles=["a", "b"], column_widths=[float("inf"), 1]),
            ValueError,
            r"column_widths\[0\]",
        ),
        (
            dict(width=688, titles=["a", "b"], column_widths=["1", 2]),
            TypeError,
            r"column_widths\[0\]",
        ),
        (dict(width=688, titles=["a"], height=10), ValueError, "height"),
        (dict(width=688, titles=["a"], left=-5), ValueError, "left"),
        (dict(width=688, titles=["a"], spacing_px=80.5), TypeError, "spacing_px"),
        # Not sequences: a generator was consumed by the type check (then 'no title'), None or a
        # number failed inside the loop with "'int' object is not iterable".
        (dict(width=688, titles=(t for t in ["a", "b"])), TypeError, "titles"),
        (dict(width=688, titles=None), TypeError, "titles"),
        (dict(width=688, titles=["a", "b"], column_widths=2), TypeError, "column_widths"),
        # A share so small (or a sum so large) that a panel is narrower than 20 px: refused, not
        # drawn 0 px wide.
        (
            dict(width=688, titles=["a", "b"], column_widths=[1e-9, 1]),
            ValueError,
            r"column_widths\[0\]",
        ),
        (
            dict(width=688, titles=["a", "b"], column_widths=[1e308, 1e308]),
            ValueError,
            r"column_widths\[0\]",
        ),
    ],
)
def test_panel_grid_rejects_impossible_layouts_naming_the_argument(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        layout.panel_grid(**kwargs)


def test_titles_never_reach_past_the_figure():
    # Chinese without spaces (stacked) and long English (side by side): every line of every
    # title, centred where plotly puts it, stays inside the figure.
    for width, titles in ((viz.PHONE_PX, ["注意力" * 30, "x"]), (688, ["word " * 40] * 2)):
        grid = layout.panel_grid(width, titles)
        lay = grid.figure.layout
        plot_w = width - lay.margin.l - lay.margin.r
        for ann in lay.annotations:
            centre = lay.margin.l + ann.x * plot_w
            for line in ann.text.split("<br>"):
                half = fonts.text_width(line, 14) / 2
                assert centre - half >= 0 and centre + half <= width, (width, line)


def test_an_explorer_whose_draw_changes_its_traces_with_the_width_is_refused():
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control

    def draw(data, *, language, width):
        traces = [go.Scatter(x=[0, 1], y=[data, data], name="a")]
        if width > 500:
            traces.append(go.Bar(x=[0], y=[1], name="b"))
        return go.Figure(traces)

    ex = Explorer(
        [Control("v", "v", "slider", (1, 2), 1)],
        title="test explorer",
        compute=lambda v: v,
        draw=draw,
    )
    with pytest.raises(ValueError, match="same traces at every width"):
        ex.static_html()
    with pytest.raises(ValueError, match="width"):
        ex.figure_json({"v": 1}, "en", width=0)
    with pytest.raises(TypeError, match="width"):
        ex.figure_json({"v": 1}, "en", width=358.0)


def test_a_caption_title_gives_back_exactly_the_room_it_took():
    from attnbook.explorers.base import take_title

    for text in ("One line of prose", "Two lines<br>of prose"):
        grid = layout.panel_grid(viz.PHONE_PX, ["top", "bottom"])
        before = grid.figure.layout.margin.t, grid.figure.layout.height
        fig = layout.caption_title(grid.figure, text, size=14)
        assert fig.layout.title.text == text and fig.layout.margin.t > before[0]
        shown, caption = take_title(fig.to_plotly_json())
        assert caption
        # Once the caption is taken out, the panels' titles have their room again (within the
        # pixel a rounding may leave).
        assert 0 <= shown["layout"]["margin"]["t"] - before[0] <= 1
        assert shown["layout"]["height"] - before[1] == shown["layout"]["margin"]["t"] - before[0]
    with pytest.raises(TypeError, match="text"):
        layout.caption_title(grid.figure, None)
    with pytest.raises(ValueError, match="size"):
        layout.caption_title(grid.figure, "x", size=0)


def test_stacked_overrides_the_width_rule_and_is_checked():
    wide = layout.panel_grid(688, ["a", "b"], stacked=True)
    assert wide.stacked and wide.cells == [{"row": 1, "col": 1}, {"row": 2, "col": 1}]
    lay = wide.figure.layout
    assert lay.xaxis.domain == lay.xaxis2.domain == (0.0, 1.0)
    assert lay.yaxis.domain[0] > lay.yaxis2.domain[1]
    narrow = layout.panel_grid(
        viz.PHONE_PX, ["a", "b"], stacked=False, left=40, right=10, spacing_px=40
    )
    assert (
        not narrow.stacked
        and narrow.figure.layout.xaxis.domain[1] < narrow.figure.layout.xaxis2.domain[0]
    )
    assert not layout.panel_grid(688, ["one"], stacked=True).stacked  # one panel: nothing to stack
    assert layout.panel_grid(viz.PHONE_PX, ["a", "b"]).stacked  # the default: by width
    with pytest.raises(TypeError, match="stacked"):
        layout.panel_grid(688, ["a", "b"], stacked="yes")


def test_axis_px_makes_room_for_tick_labels_of_two_lines_under_a_stacked_panel():
    # Two-line tick labels ("6<br>pad") and an axis title need more than one line's room:
    # the gap under the upper panel grows by as much as axis_px asks, the panels keep their
    # height, and the lowest panel's margin holds the same room.
    def gap_px(grid):
        lay = grid.figure.layout
        plot_h = lay.height - lay.margin.t - lay.margin.b
        return (lay.yaxis.domain[0] - lay.yaxis2.domain[1]) * plot_h, lay

    plain, _ = gap_px(layout.panel_grid(viz.PHONE_PX, ["a", "b"], bottom=0))
    tall, lay = gap_px(layout.panel_grid(viz.PHONE_PX, ["a", "b"], bottom=0, axis_px=100))
    assert tall == pytest.approx(plain + 100 - layout.AXIS_PX, abs=1)
    assert tall >= 100 + 14 * 1.3
    assert lay.margin.b == 100
    plot_h = lay.height - lay.margin.t - lay.margin.b
    assert (lay.yaxis2.domain[1] - lay.yaxis2.domain[0]) * plot_h == pytest.approx(
        layout.PANEL_PX, abs=0.5
    )
    with pytest.raises(ValueError, match="axis_px"):
        layout.panel_grid(viz.PHONE_PX, ["a", "b"], axis_px=-1)
    with pytest.raises(TypeError, match="axis_px"):
        layout.panel_grid(viz.PHONE_PX, ["a", "b"], axis_px=70.5)


def _figure_functions():
    import numpy as np

    from attnbook.explorers import pretrained, scaling, temperature, three_steps

    tokens = [["the", "animal", "street", "it"], ["it", "was", "animal", "street"]]
    weights = [np.full((2, 2, 4), 0.25), np.full((2, 2, 4), 0.25)]
    return [
        ("temperature_figure", lambda **kw: temperature.temperature_figure(**kw)),
        ("three_steps_figure", lambda **kw: three_steps.three_steps_figure(**kw)),
        (
            "gradient_decay_figure",
            lambda **kw: rnn.gradient_decay_figure(
                0.9, 5, data=rnn.gradient_decay_data(0.9, max_distance=20, hidden_size=8), **kw
            ),
        ),
        ("scaling_figure", lambda **kw: scaling.scaling_figure(n_samples=50, n_draws=5, **kw)),
        (
            "token_attention_figure",
            lambda **kw: pretrained.token_attention_figure(tokens, weights, **kw),
        ),
    ]


@pytest.mark.parametrize(
    "name, make", _figure_functions(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_figure_function_draws_for_a_phone_in_one_call(name, make):
    # mask_figure and flash_step_figure took width (a3ee0fe); these five did not, so a phone's
    # figure could only be made through draw_*; each must pass width on to its draw.
    wide, phone = make(), make(width=viz.PHONE_PX)
    assert [t.type for t in wide.data] == [t.type for t in phone.data]
    assert wide.to_plotly_json()["layout"] != phone.to_plotly_json()["layout"], name
    with pytest.raises(TypeError, match="width"):
        make(width=358.5)


def test_an_empty_caption_title_takes_no_room_since_none_is_given_back():
    # take_title gives nothing back for a figure with no title; caption_title("") added 16 px
    # all the same, so the figure came out 16 px taller with an empty band above the panels.
    from attnbook.explorers.base import take_title

    grid = layout.panel_grid(688, ["a"])
    before = grid.figure.to_plotly_json()["layout"]
    after, caption = take_title(layout.caption_title(grid.figure, "").to_plotly_json())
    assert caption == "" and layout.title_room("", 14) == 0
    assert after["layout"]["height"] == before["height"]
    assert after["layout"]["margin"]["t"] == before["margin"]["t"]


def test_caption_title_refuses_a_figure_without_margins_naming_it():
    import plotly.graph_objects as go

    with pytest.raises(ValueError, match="fig"):  # was: TypeError NoneType + int
        layout.caption_title(go.Figure(), "a title")


def test_each_grid_is_a_copy_the_next_call_does_not_see_changes_to():
    # panel_grid makes each grid once; a draw that adds traces and changes the layout of its
    # copy must not change the grid the next draw gets.
    import plotly.graph_objects as go

    first = layout.panel_grid(688, ["a", "b"])
    first.figure.add_trace(go.Scatter(x=[1], y=[2]), **first.cells[1])
    first.figure.update_layout(height=999, title_text="changed")
    first.figure.update_xaxes(title_text="x", **first.cells[0])
    first.cells[0]["row"] = 7
    again = layout.panel_grid(688, ["a", "b"])
    assert len(again.figure.data) == 0
    assert again.figure.layout.height == 440 and again.figure.layout.title.text is None
    assert again.figure.layout.xaxis.title.text is None
    assert again.cells == [{"row": 1, "col": 1}, {"row": 1, "col": 2}]
