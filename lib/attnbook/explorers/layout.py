"""Panels laid out for the width a figure is drawn at, with plotly's own subplot grid.

An explorer whose ``draw`` takes ``width`` (:class:`attnbook.explorers.base.Explorer`) builds its
figure here: :func:`panel_grid` returns a ``make_subplots`` figure whose panels sit side by side
in the book's column (:data:`attnbook.viz.COLUMN_PX`, 688 px) and one under the other on a phone
(:data:`attnbook.viz.PHONE_PX`, 358 px; any width below :data:`STACK_BELOW_PX`). Plotly places
the panels, their titles and the legend (:func:`attnbook.viz.legend_below`), and ``automargin``
makes room for tick labels and axis titles; the only text this module places is the panels'
titles, wrapped to the room they have with the font's own advance widths
(:func:`attnbook.fonts.wrap_html`). Prose (the figure's title, notes) belongs in the HTML
caption above the plot (:func:`attnbook.explorers.base.take_title`), where the browser wraps it.

The figure a ``draw`` returns must have the same traces in the same order at every width: the
static explorer stores the phone's traces as patches of the column's.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import fonts, viz
from ..checks import check_bool, check_int, check_real, check_text

__all__ = [
    "STACK_BELOW_PX",
    "PANEL_PX",
    "AXIS_PX",
    "PanelGrid",
    "panel_grid",
    "caption_title",
    "title_room",
]

#: A figure drawn narrower than this many px has its panels one under the other (the static
#: explorer switches to its phone drawing below this plot width, too).
STACK_BELOW_PX = 520
#: Height in px of each panel once the panels are stacked.
PANEL_PX = 230
#: Room in px under a stacked panel for one line of tick labels and a one-line x-axis title.
AXIS_PX = 70
#: Line height as a multiple of the font size.
_LINE = 1.3
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


@dataclass
class PanelGrid:
    """A figure of panels and where each panel is.

    Attributes:
        figure: the ``plotly.graph_objects.Figure`` (``make_subplots``), styled as the book's.
        cells: per panel, ``{"row": r, "col": c}`` to pass to ``add_trace``,
            ``update_xaxes`` and ``update_yaxes``.
        stacked: whether the panels are one under the other.
        width: the width in px the figure was laid out for.
    """

    figure: object
    cells: list[dict]
    stacked: bool
    width: int


def _lines(text: str) -> int:
    return len(_BR.split(text)) if text else 0


def panel_grid(
    width: int,
    titles: Sequence[str],
    *,
    column_widths: Sequence[float] | None = None,
    height: int = 440,
    title_size: int = 14,
    left: int = 70,
    right: int = 20,
    bottom: int = 50,
    spacing_px: int = 80,
    axis_px: int = AXIS_PX,
    stacked: bool | None = None,
) -> PanelGrid:
    """Panels side by side (``width >=`` :data:`STACK_BELOW_PX`) or stacked, with titles.

    Side by side, the figure is ``height`` px tall and the panels share the plot width in the
    ratio ``column_widths``, ``spacing_px`` apart. Stacked, each panel is :data:`PANEL_PX` px
    tall and the gap under a panel holds its tick labels, its x-axis title (``axis_px``)
    and the next panel's title; the figure is as tall as that needs. A panel title longer than
    its room is broken into lines (:func:`attnbook.fonts.wrap_html`, the font's advances) and
    the room above the panel grows with it.

    Args:
        width: the figure's width in px (> 0).
        titles: one title per panel (plotly pseudo-HTML, already in the reader's language);
            ``""`` for none.
        column_widths: relative widths of the panels side by side (default: equal).
        height: the figure's height in px when the panels are side by side.
        title_size: the titles' font size in px.
        left: the left margin in px (``automargin`` grows it where the y tick labels and
            axis title need more; at most 62 px once stacked).
        right: the right margin in px (at most 14 px once stacked).
        bottom: room in px under the lowest x-axis title, for the legend
            (:func:`attnbook.viz.legend_below`; plotly adds more if it needs more).
        spacing_px: the gap between side-by-side panels in px.
        axis_px: room in px under a panel for its tick labels and x-axis title (default
            :data:`AXIS_PX`, one line of tick labels; more for tick labels of two lines).
        stacked: ``None`` (default) stacks the panels below :data:`STACK_BELOW_PX`; ``True``
            stacks them at every width (panels too wide to share a row, e.g. one bar per token
            of a sentence); ``False`` keeps them side by side at every width.

    Returns:
        :class:`PanelGrid`.

    Raises:
        TypeError: if ``width``, ``height`` or a size is not an integer, ``titles`` is not a
            sequence of strings, a column width not a real number or ``stacked`` not a bool
            or ``None``.
        ValueError: if ``width`` < 1, a size is negative, there is no title,
            ``column_widths`` does not give one finite positive number per panel, or the
            width or height leaves no room for the panels.
    """
    import plotly.graph_objects as go

    width = check_int(width, "width", 1)
    height = check_int(height, "height", 10)
    title_size = check_int(title_size, "title_size", 1)
    left, right = check_int(left, "left", 0), check_int(right, "right", 0)
    bottom, spacing_px = check_int(bottom, "bottom", 0), check_int(spacing_px, "spacing_px", 0)
    axis_px = check_int(axis_px, "axis_px", 0)
    if (
        isinstance(titles, str)
        or not isinstance(titles, (Sequence, np.ndarray))
        or not all(isinstance(t, str) for t in titles)
    ):
        raise TypeError(f"titles must be a sequence of strings (one per panel), got {titles!r}")
    titles = list(titles)
    n = len(titles)
    if n == 0:
        raise ValueError("titles must name at least one panel (use '' for an untitled one)")
    if column_widths is None:
        column_widths = [1.0] * n
    if isinstance(column_widths, str) or not isinstance(column_widths, (Sequence, np.ndarray)):
        raise TypeError(
            f"column_widths must be a sequence of {n} positive numbers (one per "
            f"title), got {column_widths!r}"
        )
    column_widths = [
        check_real(c, f"column_widths[{i}]", minimum=0, strict=True)
        for i, c in enumerate(column_widths)
    ]
    if len(column_widths) != n:
        raise ValueError(
            f"column_widths must be {n} positive numbers (one per title), got {column_widths}"
        )
    if stacked is not None:
        stacked = check_bool(stacked, "stacked")
    stack = (width < STACK_BELOW_PX if stacked is None else stacked) and n > 1
    side = (min(left, 62) + min(right, 14)) if stack else left + right + (n - 1) * spacing_px
    if width - side < 20 * (1 if stack else n):
        raise ValueError(
            f"width={width} px leaves no room for {n} panel(s) after the margins "
            f"(left={left}, right={right}) and the gaps (spacing_px={spacing_px})"
        )
    # The grid of these arguments is made once (make_subplots and its styling take most of an
    # explorer's drawing time: every setting of every explorer asks for one of a few grids),
    # and each call gets its own copy to add traces to.
    fig, cells = _grid(
        width,
        tuple(titles),
        tuple(column_widths),
        height,
        title_size,
        left,
        right,
        bottom,
        spacing_px,
        axis_px,
        stack,
    )
    return PanelGrid(go.Figure(fig), [dict(c) for c in cells], stack, width)


@functools.lru_cache(maxsize=64)
def _grid(
    width,
    titles,
    column_widths,
    height,
    title_size,
    left,
    right,
    bottom,
    spacing_px,
    axis_px,
    stack,
):
    """The figure and cells of :func:`panel_grid` (arguments already checked); not to change."""
    from plotly.subplots import make_subplots

    n = len(titles)
    line_px = title_size * _LINE
    margin_b = axis_px + bottom  # the lowest panel's tick labels and axis title, the legend
    if stack:
        # Each title is centred on the plot area, which the wider left margin shifts right:
        # a line may take twice the distance from that centre to the nearer edge.
        l_px, r_px = min(left, 62), min(right, 14)
        centre = l_px + (width - l_px - r_px) / 2
        wrapped = [
            fonts.wrap_html(t, 2 * min(centre, width - centre) - 8, title_size) for t in titles
        ]
        # make_subplots spaces the rows evenly: each gap as tall as the tallest one needs.
        gap = max(axis_px + _lines(t) * line_px + 6 for t in wrapped[1:])
        plot_h = n * PANEL_PX + (n - 1) * gap
        fig = make_subplots(rows=n, cols=1, subplot_titles=wrapped, vertical_spacing=gap / plot_h)
        cells = [{"row": i + 1, "col": 1} for i in range(n)]
        top = _lines(wrapped[0]) * line_px + 10
        fig.update_layout(
            height=round(top + plot_h + margin_b),
            margin=dict(l=l_px, r=r_px, t=round(top), b=margin_b),
        )
    else:
        plot_w = width - left - right
        spacing = spacing_px / plot_w if n > 1 else 0.0
        total = float(sum(column_widths))
        share = [float(c) / total for c in column_widths]
        free = plot_w - spacing_px * (n - 1)
        for i, s_i in enumerate(share):
            if not free * s_i >= 20:  # also a share of 0 where the sum overflows to inf
                raise ValueError(
                    f"column_widths[{i}] = {column_widths[i]:g} of "
                    f"{column_widths} leaves panel {i} {free * s_i:.1f} px wide "
                    f"at width={width} px (at least 20 px)"
                )
        room, x0 = [], 0.0
        for s_i in share:  # a title may reach into the gaps beside its panel, not off the figure
            panel = plot_w * (1 - spacing * (n - 1)) * s_i
            centre = left + x0 * plot_w + panel / 2
            room.append(min(panel + spacing_px * 0.9, 2 * min(centre, width - centre) - 8))
            x0 += panel / plot_w + spacing
        wrapped = [fonts.wrap_html(t, r, title_size) for t, r in zip(titles, room)]
        fig = make_subplots(
            rows=1, cols=n, subplot_titles=wrapped, column_widths=share, horizontal_spacing=spacing
        )
        cells = [{"row": 1, "col": i + 1} for i in range(n)]
        top = max(_lines(t) for t in wrapped) * line_px + 10
        if height - top - margin_b < 20:
            raise ValueError(
                f"height={height} px leaves no room for the panels under their "
                f"titles ({top:.0f} px) and above their axes and legend "
                f"({margin_b} px)"
            )
        fig.update_layout(height=height, margin=dict(l=left, r=right, t=round(top), b=margin_b))
    fig.update_annotations(font=dict(size=title_size))  # the titles: make_subplots' annotations
    fig.update_layout(
        template=viz.EMPTY_TEMPLATE,
        font=viz.FONT,
        paper_bgcolor="white",
        plot_bgcolor="white",
        legend=viz.legend_below(),
    )
    fig.update_xaxes(**viz.axis_style())
    fig.update_yaxes(**viz.axis_style())
    return fig, cells


def title_room(text: str, size: float) -> int:
    """Room in px a figure title of ``text`` at ``size`` px takes above the plot.

    Its lines at 1.3 times the size, and 16 px: what :func:`caption_title` adds and
    :func:`attnbook.explorers.base.take_title` gives back once the title is the caption; 0
    for ``""`` (no title: no caption, nothing given back).
    """
    return round(_lines(text) * size * _LINE + 16) if text else 0


def caption_title(fig, text: str, *, size: int = 14):
    """Give ``fig`` the title ``text``, with the room that the explorer's caption gives back.

    An explorer takes a figure's title out and shows it as an HTML caption above the plot
    (:func:`attnbook.explorers.base.take_title`), taking back from the top margin (and the
    height) the room a title of that many lines at ``size`` had there. This adds that room
    first, so that the panels' titles (:func:`panel_grid`) keep theirs once the title is gone.

    Args:
        fig: a ``plotly.graph_objects.Figure`` laid out by :func:`panel_grid` (changed in
            place).
        text: the title, plotly pseudo-HTML (prose, already in the reader's language).
        size: its font size in px.

    Returns:
        ``fig``.

    Raises:
        TypeError: if ``text`` is not a string or ``size`` not an integer.
        ValueError: if ``size`` < 1, or ``fig`` has no top margin and height in px (not laid
            out by :func:`panel_grid`).
    """
    check_text(text, "text")
    size = check_int(size, "size", 1)
    if fig.layout.margin.t is None or fig.layout.height is None:
        raise ValueError(
            f"fig must have a top margin and a height in px (a figure laid out by "
            f"panel_grid), got margin.t={fig.layout.margin.t}, "
            f"height={fig.layout.height}"
        )
    room = title_room(text, size)  # what take_title gives back
    fig.update_layout(
        title=dict(text=text, x=0.5, xanchor="center", font=dict(size=size)),
        margin_t=fig.layout.margin.t + room,
        height=fig.layout.height + room,
    )
    return fig
