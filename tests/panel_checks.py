"""Checks of a figure laid out for a width with plotly's subplot grid (no browser).

Shared by the explorers' tests: each reads what the figure's layout says (its axes' domains,
its margins, its annotations' text and the font's real advances, :func:`attnbook.fonts.text_width`)
and asserts a property of the drawing, never a number copied from the code.
"""

from __future__ import annotations

import re

from attnbook import fonts, viz

_AXIS = re.compile(r"^xaxis(\d*)$")


def panels(fig) -> dict[str, tuple[tuple[float, float], tuple[float, float]]]:
    """``{"x": ((x0, x1), (y0, y1)), "x2": ...}``: each panel's rectangle in paper fractions."""
    lay = fig.layout
    out = {}
    for key in sorted(k for k in lay.to_plotly_json() if _AXIS.match(k)):
        n = _AXIS.match(key).group(1)
        xa = lay[key]
        ya = lay[f"yaxis{n}"] if xa.anchor in (None, f"y{n}") else lay["yaxis" + xa.anchor[1:]]
        out[f"x{n}"] = (tuple(xa.domain or (0, 1)), tuple(ya.domain or (0, 1)))
    return out


def plot_px(fig, width: int) -> tuple[float, float]:
    """The plot area's width and height in px (figure size less the margins)."""
    lay = fig.layout
    return width - lay.margin.l - lay.margin.r, lay.height - lay.margin.t - lay.margin.b


def _apart(a, b) -> bool:
    return a[1] <= b[0] + 1e-9 or b[1] <= a[0] + 1e-9


def assert_panels_apart(fig) -> None:
    """No two panels share any area."""
    rects = list(panels(fig).items())
    for i, (na, (xa, ya)) in enumerate(rects):
        for nb, (xb, yb) in rects[i + 1 :]:
            assert _apart(xa, xb) or _apart(ya, yb), f"panels {na} and {nb} overlap"


def assert_stacked(fig) -> None:
    """Every panel spans the plot's width and they are one under the other."""
    rects = panels(fig)
    assert len(rects) > 1
    for name, (x, _) in rects.items():
        assert x == (0.0, 1.0), f"panel {name} spans {x}, not the whole width"
    ys = sorted(y for _, y in rects.values())
    for a, b in zip(ys, ys[1:]):
        assert a[1] < b[0], f"panels at {a} and {b} are not one under the other"


def assert_side_by_side(fig) -> None:
    """Every panel in one row (the same rows) and apart along x."""
    rects = list(panels(fig).values())
    assert len({y for _, y in rects}) == 1
    assert_panels_apart(fig)


def assert_titles_fit(fig, width: int, n_titles: int) -> None:
    """The first ``n_titles`` annotations (make_subplots' titles): each line inside the figure,
    and side-by-side titles do not reach into each other."""
    lay = fig.layout
    plot_w, _ = plot_px(fig, width)
    spans = []
    for a in lay.annotations[:n_titles]:
        assert a.xref == "paper" and a.xanchor == "center"  # make_subplots' own titles
        size = a.font.size or viz.FONT["size"]
        centre = lay.margin.l + a.x * plot_w
        w = max(fonts.text_width(line, size) for line in a.text.split("<br>"))
        assert centre - w / 2 >= 0 and centre + w / 2 <= width, (
            f"title {a.text!r} ({w:.0f} px) reaches past the figure's {width} px"
        )
        spans.append((a.y, centre - w / 2, centre + w / 2))
    for i, (y, l0, r0) in enumerate(spans):
        for y1, l1, r1 in spans[i + 1 :]:
            if abs(y - y1) < 1e-9:
                assert r0 <= l1 or r1 <= l0, "two panel titles overlap"


def assert_text_fits_its_panel(fig, width: int, annotation) -> None:
    """An annotation in a panel's own (domain) coordinates: every line fits the panel's width."""
    axis = annotation.xref.split()[0]
    (x0, x1), _ = panels(fig)[axis]
    plot_w, _ = plot_px(fig, width)
    size = (annotation.font.size if annotation.font else None) or viz.FONT["size"]
    w = max(fonts.text_width(line, size) for line in annotation.text.split("<br>"))
    assert w <= (x1 - x0) * plot_w, f"{annotation.text!r} is {w:.0f} px, wider than its panel"


def assert_colorbars_clear(fig, width: int) -> None:
    """Each colour bar lies inside the figure and over no panel."""
    lay = fig.layout
    plot_w, plot_h = plot_px(fig, width)
    rects = panels(fig)
    for t in fig.data:
        cb = getattr(t, "colorbar", None)
        if cb is None or getattr(t, "showscale", None) is False:
            continue
        horizontal = cb.orientation == "h"
        thick = cb.thickness or 30
        length = cb.len if cb.len is not None else 1
        if horizontal:
            y_lo = cb.y - thick / plot_h if cb.yanchor in ("top", None) else cb.y
            y_hi = y_lo + thick / plot_h
            x_lo = cb.x - length / 2 if cb.xanchor in (None, "center") else cb.x
            x_hi = x_lo + length
        else:
            x_lo = cb.x if cb.xanchor in (None, "left") else cb.x - thick / plot_w
            x_hi = x_lo + (thick + 30) / plot_w  # the bar and its tick labels
            y_lo = (
                cb.y - length / 2
                if cb.yanchor in (None, "middle")
                else (cb.y - length if cb.yanchor == "top" else cb.y)
            )
            y_hi = y_lo + length
        left_px = lay.margin.l + x_lo * plot_w
        right_px = lay.margin.l + x_hi * plot_w
        assert left_px >= 0 and right_px <= width, f"{t.name}'s colour bar leaves the figure"
        for name, (px, py) in rects.items():
            assert _apart((x_lo, x_hi), px) or _apart((y_lo, y_hi), py), (
                f"{t.name}'s colour bar lies over panel {name}"
            )


def assert_same_traces(a, b) -> None:
    """The same trace types and names in the same order."""
    assert [(t.type, t.name) for t in a.data] == [(t.type, t.name) for t in b.data]


def assert_legend_in_container(fig) -> None:
    assert fig.layout.legend.yref == "container"


def assert_title_room_after_caption(fig) -> None:
    """Once the title is taken out as the caption (``take_title``), the top margin still holds
    the top row's panel titles (make_subplots' annotations at the top of the plot)."""
    from attnbook.explorers.base import take_title

    shown, _ = take_title(fig.to_plotly_json())
    top = max(a.y for a in fig.layout.annotations if a.yanchor == "bottom")
    need = max(
        (a.text.count("<br>") + 1) * (a.font.size or 13) * 1.3
        for a in fig.layout.annotations
        if a.yanchor == "bottom" and a.y == top
    )
    assert shown["layout"]["margin"]["t"] >= need, "the caption took the panel titles' room"
