"""Fit an explorer's plotly figure to the width it is shown at: wrapped text, stacked panels.

The explorers' figures are drawn for the book's column at 1280 px (:data:`attnbook.viz.COLUMN_PX`,
688 px) with their panels side by side. On a phone the column is about 358 px
(:data:`NARROW_PX`): side by side, each panel would be ~130 px wide, the subplot titles would run
into each other and a one-line caption would be cut at both ends. :func:`fit_figure` rewrites a
figure (plotly JSON: ``{"data": [...], "layout": {...}}``) for a given width:

* **Text wraps.** The title, the subplot titles and the captions get explicit ``<br>`` so that
  each line fits its width (:func:`attnbook.fonts.wrap_html`; widths are the advance widths of
  the font the figure is drawn in, :func:`attnbook.fonts.text_width`). Extra lines get extra
  margin, so nothing is clipped.
* **Panels stack** (only when ``width <`` :data:`STACK_BELOW_PX`). A figure whose panels (pairs of
  x/y axes) sit side by side in one row is redrawn as one column: each panel gets the full width
  and :data:`PANEL_PX` px of height, the x/y axis domains are recomputed, every annotation in
  paper coordinates moves with its panel (a subplot title above its panel, a statistics box at
  the same relative place inside it, a caption below the last panel), the legend goes below the
  last panel, colour bars follow their heatmaps, and the figure gets taller. A figure that is
  already one column keeps its panels and only gets the room its wrapped titles need.
* **Numbers drawn on heatmap cells** shrink (down to :data:`MIN_CELL_FONT` px) when they do not
  fit their cell at this width, and are left out (the hover text still gives them) when even
  that is too large.

The static explorers (:class:`attnbook.explorers.base.Explorer`) precompute every frame twice,
fitted to :data:`attnbook.viz.COLUMN_PX` and to :data:`NARROW_PX`, and the page draws the frame
that matches its plot's width (below :data:`STACK_BELOW_PX`: the narrow one), also after a
control moves or the window is resized. Pure Python on JSON dicts: no plotly import.
"""

from __future__ import annotations

import copy
import html as _html
import math
import re

from .. import fonts, viz
from ..checks import check_real
from ..fonts import wrap_html

__all__ = [
    "NARROW_PX",
    "STACK_BELOW_PX",
    "PANEL_PX",
    "MIN_CELL_FONT",
    "visible_text",
    "text_width_px",
    "panels",
    "fit_figure",
    "title_text",
]

#: Width in CSS px of the book's column on a 390 px wide phone (the figure's width there):
#: :data:`attnbook.viz.PHONE_PX`.
NARROW_PX = viz.PHONE_PX
#: A plot narrower than this many px shows the stacked (narrow) layout.
STACK_BELOW_PX = 520
#: Height in px of each panel once the panels are stacked.
PANEL_PX = 230
#: Smallest font (px) for numbers drawn on heatmap cells; below it they are left out.
MIN_CELL_FONT = 9
#: Default font size (px) when a layout sets none (the book's ``viz.FONT``).
_BASE_FONT = 13
#: Space (px) under a panel for one line of tick labels and a one-line x-axis title (ticks
#: outside, the labels, plotly's standoff, the title and a few px clear of what follows).
_AXIS_PX = 70
#: Line height as a multiple of the font size.
_LINE = 1.3

_TAG = re.compile(r"<[^>]*>")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SMALL = re.compile(r"<(sub|sup)>(.*?)</\1>", re.IGNORECASE | re.DOTALL)


def visible_text(text: str) -> str:
    """The characters of plotly pseudo-HTML that are drawn: tags removed, entities decoded."""
    return _html.unescape(_TAG.sub("", str(text)))


def text_width_px(text: str, font_px: float) -> float:
    """Drawn width in px of one line of plotly pseudo-HTML at ``font_px``, in the figure font.

    :func:`attnbook.fonts.text_width`: the advance widths of the font the book's figures are
    drawn in (:data:`attnbook.fonts.FAMILY`); ``<sub>``/``<sup>`` text at 70 %.

    Raises:
        TypeError: if ``text`` is not a string or ``font_px`` not a real number.
        ValueError: if ``font_px`` is not a finite positive number.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    font_px = check_real(font_px, "font_px", minimum=0, strict=True)
    return fonts.text_width(text, font_px)


def _n_lines(text) -> int:
    return len(_BR.split(str(text or ""))) if text else 0


def _font_size(obj: dict | None, default: float) -> float:
    size = ((obj or {}).get("font") or {}).get("size")
    return float(size) if size else float(default)


def _axis_id(name: str) -> str:
    """``"xaxis2"`` -> ``"x2"``, ``"yaxis"`` -> ``"y"``."""
    return name[0] + name[5:]


def _axis_name(ref: str) -> str:
    """``"x2"`` -> ``"xaxis2"``, ``"y"`` -> ``"yaxis"``."""
    return ref[0] + "axis" + ref[1:]


def _check_layout(layout) -> None:
    if not isinstance(layout, dict):
        raise TypeError(f"layout must be a plotly layout dict, got {type(layout).__name__}")


def panels(layout: dict) -> list[dict]:
    """The panels of a layout: each x axis with the y axis it is anchored to.

    Returns:
        One dict per x axis, in axis order: ``{"x": "xaxis2", "y": "yaxis2", "xd": [x0, x1],
        "yd": [y0, y1]}`` (domains in paper coordinates, ``[0, 1]`` where unset). Overlaying
        axes (``overlaying`` set) are not panels of their own.

    Raises:
        TypeError: if ``layout`` is not a dict.
    """
    _check_layout(layout)
    names = sorted((k for k in layout if re.fullmatch(r"xaxis\d*", k)),
                   key=lambda k: int(k[5:] or 1))
    out = []
    for name in names:
        ax = layout[name] or {}
        if ax.get("overlaying"):
            continue
        y_ref = ax.get("anchor") if str(ax.get("anchor", "")).startswith("y") else \
            "y" + name[5:]
        y_name = _axis_name(y_ref)
        yax = layout.get(y_name) or {}
        out.append({"x": name, "y": y_name, "xd": list(ax.get("domain", [0.0, 1.0])),
                    "yd": list(yax.get("domain", [0.0, 1.0]))})
    return out


def _side_by_side(ps: list[dict]) -> bool:
    """At least two panels in one row (overlapping y domains, disjoint x domains)."""
    if len(ps) < 2:
        return False
    for a in ps:
        for b in ps:
            if a is b:
                continue
            if min(a["yd"][1], b["yd"][1]) - max(a["yd"][0], b["yd"][0]) <= 0:
                return False
    xs = sorted(p["xd"] for p in ps)
    return all(x1[0] >= x0[1] - 1e-9 for x0, x1 in zip(xs, xs[1:]))


def _panel_of(ps: list[dict], x: float, y: float | None = None) -> int:
    """Index of the panel whose x domain holds ``x`` (nearest if none; ties by ``y``)."""
    def dist(p):
        dx = max(p["xd"][0] - x, 0.0, x - p["xd"][1])
        dy = 0.0 if y is None else max(p["yd"][0] - y, 0.0, y - p["yd"][1])
        return (round(dx, 9), dy)

    return min(range(len(ps)), key=lambda i: dist(ps[i]))


def _is_paper(a: dict, key: str) -> bool:
    return str(a.get(key, "paper")).split(" ")[0] == "paper"


def _fit_heatmap_text(trace: dict, layout: dict, plot_w: float, plot_h: float,
                      ps: list[dict]) -> None:
    """Shrink or drop the numbers drawn on a heatmap's cells when they do not fit."""
    tt = trace.get("texttemplate")
    z = trace.get("z")
    if not tt or not isinstance(z, list) or not z or not isinstance(z[0], list):
        return
    values = [v for row in z if isinstance(row, list) for v in row
              if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:  # no number to draw (empty rows, only gaps)
        return
    m = re.fullmatch(r"%\{z(?::\.(\d+)f)?\}", tt)
    if not m:
        return
    x_ref = _axis_name(trace.get("xaxis", "x"))
    y_ref = _axis_name(trace.get("yaxis", "y"))
    p = next((p for p in ps if p["x"] == x_ref), None)
    xd = p["xd"] if p else [0.0, 1.0]
    yd = (layout.get(y_ref) or {}).get("domain", [0.0, 1.0])
    n_rows, n_cols = len(z), max(len(r) for r in z if isinstance(r, list))
    cell_w = plot_w * (xd[1] - xd[0]) / n_cols
    cell_h = plot_h * (yd[1] - yd[0]) / n_rows
    digits = m.group(1)
    widest = max(fonts.text_width(f"{v:.{int(digits)}f}" if digits else str(v), 1.0)
                 for v in values)  # in em
    size = _font_size(trace.get("textfont") and {"font": trace["textfont"]},
                      _font_size(layout, _BASE_FONT))
    fits = min((cell_w - 4) / widest, cell_h - 4)
    if fits >= size:
        return
    if fits >= MIN_CELL_FONT:
        trace["textfont"] = {**(trace.get("textfont") or {}), "size": math.floor(fits)}
    else:
        trace["texttemplate"] = ""


def _legend_px(fig: dict, width: float) -> float:
    """Estimated height of a horizontal legend of the figure's named traces at ``width``."""
    font = _font_size(fig["layout"].get("legend"), _font_size(fig["layout"], _BASE_FONT))
    items = [t.get("name", "") for t in fig["data"]
             if t.get("showlegend", True) is not False and t.get("name")
             and t.get("visible", True) is not False]
    if fig["layout"].get("showlegend") is False or not items:
        return 0.0
    # Plotly shows a legend for one trace only when showlegend is set on the layout.
    if len(items) == 1 and fig["layout"].get("showlegend") is not True:
        return 0.0
    rows, used = 1, 0.0
    for name in items:
        w = text_width_px(str(name), font) + 50
        if used and used + w > width:
            rows, used = rows + 1, 0.0
        used += w
    return rows * font * 1.6 + 6


def fit_figure(fig: dict, width: float) -> dict:
    """The figure fitted to ``width`` px: wrapped text, and stacked panels below the threshold.

    Args:
        fig: plotly JSON, ``{"data": [trace dicts], "layout": {...}}`` (as
            ``Figure.to_plotly_json()`` gives it; not modified).
        width: the width in px the figure will be drawn at (> 0).

    Returns:
        A new figure dict. Below :data:`STACK_BELOW_PX` a figure with panels side by side is
        stacked into one column (see the module docstring); at any width the title, the
        subplot titles and the captions are wrapped to fit and the margins grow to hold the
        extra lines; heatmap cell numbers that do not fit are shrunk or left out.

    Raises:
        TypeError: if ``width`` is not a real number, ``fig`` is not a dict or its ``data``
            is not a list of trace dicts.
        ValueError: if ``width`` is not a finite positive number or ``fig`` has no ``layout``.
    """
    width = check_real(width, "width", minimum=0, strict=True)
    if not isinstance(fig, dict):
        raise TypeError(f"fig must be plotly JSON (a dict with 'data' and 'layout'), got "
                        f"{type(fig).__name__}")
    if not isinstance(fig.get("layout"), dict):
        raise ValueError("fig must be plotly JSON: a dict with 'data' and 'layout', got "
                         f"layout {fig.get('layout')!r}")
    data = fig.get("data") or []
    if not isinstance(data, (list, tuple)) or not all(isinstance(t, dict) for t in data):
        raise TypeError("fig['data'] must be a list of trace dicts, got "
                        f"{type(data).__name__} {str(data)[:60]}")
    fig = {"data": copy.deepcopy(list(fig.get("data") or [])),
           "layout": copy.deepcopy(fig["layout"])}
    layout = fig["layout"]
    ps = panels(layout)
    if width < STACK_BELOW_PX and _side_by_side(ps):
        _stack(fig, ps, width)
    else:
        _wrap_in_place(fig, ps, width)
    return fig


def _margin(layout: dict) -> dict:
    m = {"l": 80, "r": 80, "t": 100, "b": 80}
    m.update(layout.get("margin") or {})
    layout["margin"] = m
    return m


def _title(layout: dict) -> dict | None:
    t = layout.get("title")
    if isinstance(t, str):
        t = layout["title"] = {"text": t}
    return t if t and t.get("text") else None


def _title_annotation(title: dict, text: str, size: float, yshift: float) -> dict:
    """The layout title as a paper annotation above the plot area, ``yshift`` px up.

    Plotly anchors a multi-line layout title by its first line (``yanchor`` does not account
    for the other lines), an annotation by its whole box, so the figures' titles are drawn
    as annotations.
    """
    return {"name": "title", "text": text, "x": 0.5, "xanchor": "center", "xref": "paper",
            "yref": "paper",
            "y": 1.0, "yanchor": "bottom", "yshift": round(yshift, 1), "showarrow": False,
            "font": {**(title.get("font") or {}), "size": size}}


def title_text(layout: dict) -> str:
    """The title of a fitted layout: the ``"title"`` annotation's text, else ``title.text``.

    Raises:
        TypeError: if ``layout`` is not a dict.
    """
    _check_layout(layout)
    for a in layout.get("annotations") or []:
        if a.get("name") == "title":
            return str(a.get("text", ""))
    t = layout.get("title")
    return str(t.get("text", "") if isinstance(t, dict) else t or "")


def _wrap_in_place(fig: dict, ps: list[dict], width: float) -> None:
    """Wrap title, subplot titles and captions at ``width``; make room for the extra lines.

    Above the plot area, from the bottom up: the subplot titles of the top row, a legend
    placed above the plot (if any), then the title; the top margin is sized to hold them.
    """
    layout = fig["layout"]
    m = _margin(layout)
    height = float(layout.get("height", 450))
    plot_w = max(width - m["l"] - m["r"], 50.0)
    plot_h = max(height - m["t"] - m["b"], 50.0)
    font = _font_size(layout, _BASE_FONT)
    extra_bottom = 0.0
    growth = _steepen_ticks(layout, ps, plot_w, font) if width < STACK_BELOW_PX else {}
    groups: dict = {}
    top_px = 0.0  # height of what sits right above the plot area (subplot titles)
    for a in layout.get("annotations") or []:
        if not (_is_paper(a, "xref") and _is_paper(a, "yref")) or not a.get("text"):
            continue
        size = _font_size(a, font)
        x, y = float(a.get("x", 0.5)), float(a.get("y", 0.5))
        anchor = a.get("xanchor", "auto")
        if ps:
            p = ps[_panel_of(ps, x, y)]
            above = y >= p["yd"][1] - 1e-9 and a.get("yanchor") == "bottom"
        else:
            p, above = None, False
        if above and anchor == "center":
            avail = plot_w * (p["xd"][1] - p["xd"][0]) + 0.9 * plot_w * _gap_share(ps, p)
        elif anchor == "left":
            avail = plot_w * (1 - x) + m["r"] - 4
        elif anchor == "right":
            avail = plot_w * x + m["l"] - 4
        else:  # centred on x: as far to the left as to the right, the nearer edge decides
            centre = m["l"] + x * plot_w
            avail = 2 * min(centre, width - centre) - 8
        before = _n_lines(a["text"])
        a["text"] = wrap_html(str(a["text"]), max(avail, 60.0), size)
        if _n_lines(a["text"]) > before and anchor in ("left", "right") and "align" not in a:
            a["align"] = anchor  # wrapped lines line up with the anchored edge
        extra = (_n_lines(a["text"]) - before) * size * _LINE
        if above:
            key = (ps.index(p), round(y, 6))
            groups.setdefault(key, []).append((float(a.get("yshift", 0)), a, extra, size))
        elif y < 0 and a.get("yanchor", "auto") in ("top", "auto") and extra:
            extra_bottom = max(extra_bottom, extra)
    # Annotations stacked above one panel (same y, growing yshift) move up by the lines
    # gained below them; the room needed above an inner panel of a column is taken from it.
    for (pi, y), items in groups.items():
        items.sort(key=lambda item: item[0])
        push = 0.0
        for _, a, extra, size in items:
            if push:
                a["yshift"] = float(a.get("yshift", 0)) + push
            push += extra
            if y >= 1 - 1e-9:
                top_px = max(top_px, float(a.get("yshift", 0)) + _n_lines(a["text"]) * size
                             * _LINE)
        if y < 1 - 1e-9:
            # An inner panel of a column: the panel and its titles move down by the lines
            # gained and by what the tick labels of the panel above now need.
            above_panel = min((q for q in ps if q["yd"][0] >= ps[pi]["yd"][1] - 1e-9),
                              key=lambda q: q["yd"][0], default=None)
            need = push + (growth.get(above_panel["x"], 0.0) if above_panel else 0.0)
            if need:
                top = _shrink_panel_top(layout, ps[pi], need / plot_h)
                for _, a, _, _ in items:
                    a["y"] = round(top, 6)
    legend = layout.get("legend") or {}
    if (legend and legend.get("yref", "paper") == "paper" and float(legend.get("y", 1)) >= 1
            and legend.get("yanchor") == "bottom"):
        legend["y"] = round(1 + (top_px + 4) / plot_h, 6)
        top_px += 4 + _legend_px(fig, plot_w)
    title = _title(layout)
    new_t = float(m["t"])
    if title:
        size = _font_size(title, font * 1.4)
        if width < STACK_BELOW_PX:
            size = min(size, 15.0)
        centre = m["l"] + 0.5 * plot_w
        text = wrap_html(str(title["text"]), 2 * min(centre, width - centre) - 8, size)
        layout["title"] = {"text": ""}
        ann = _title_annotation(title, text, size, top_px + 6)
        layout["annotations"] = list(layout.get("annotations") or []) + [ann]
        new_t = top_px + 6 + _n_lines(text) * size * _LINE + 10
    elif top_px + 6 > new_t:
        new_t = top_px + 6
    new_t = round(new_t)
    if new_t != m["t"] or extra_bottom:
        layout["height"] = round(height + new_t - m["t"] + extra_bottom)
        m["t"] = new_t
        m["b"] = round(m["b"] + extra_bottom)
    for trace in fig["data"]:
        if trace.get("type") == "heatmap":
            _fit_heatmap_text(trace, layout, plot_w, plot_h, ps)


def _steepen_ticks(layout: dict, ps: list[dict], plot_w: float, font: float) -> dict:
    """Tick labels too close for their angle get a steeper angle, or a smaller font.

    Slanted labels get the smallest steeper angle whose line height fits the spacing; where
    even upright (90°) labels are too close, and for level labels (angle 0) wider than their
    spacing, the tick font shrinks to fit (down to :data:`MIN_CELL_FONT` px) and, below that,
    only every k-th label is kept.

    Returns:
        ``{x axis name: px}``: how much taller each changed axis's tick labels get.
    """
    growth = {}
    for p in ps:
        ax = layout.get(p["x"]) or {}
        angle = ax.get("tickangle")
        labels = ax.get("ticktext") or ax.get("tickvals")
        # Only plain lists are read: plotly's typed arrays ({"dtype", "bdata"}, what
        # to_plotly_json gives for a NumPy array) and arrays are left as they are.
        if (not isinstance(labels, (list, tuple))
                or not isinstance(ax.get("tickvals") or [], (list, tuple))
                or isinstance(angle, bool) or not isinstance(angle, (int, float))
                or not math.isfinite(angle) or abs(angle) > 90 or not labels
                or p["xd"][1] <= p["xd"][0]):
            continue
        size = _font_size({"font": ax.get("tickfont")}, font)
        spacing = plot_w * (p["xd"][1] - p["xd"][0]) / len(labels)
        widths = [text_width_px(str(t), size) for t in labels]
        longest = max(widths)
        old = abs(angle)
        new = old
        if old:
            for new in (old, 50, 60, 70, 90):
                if new >= old and spacing >= size * _LINE / math.sin(math.radians(new)):
                    break
            if new != old:
                ax["tickangle"] = -new if angle < 0 else new
                growth[p["x"]] = longest * (math.sin(math.radians(new))
                                            - math.sin(math.radians(old)))
        # What one label needs along the axis at 1 px of font: its line height when slanted,
        # its width when level.
        need_per_px = (_LINE / math.sin(math.radians(new)) if new
                       else max(longest / size, 1e-9) + 1 / size)
        if spacing >= size * need_per_px:
            continue
        fit = math.floor(spacing / need_per_px)
        if fit >= MIN_CELL_FONT:
            ax["tickfont"] = {**(ax.get("tickfont") or {}), "size": fit}
            continue
        ax["tickfont"] = {**(ax.get("tickfont") or {}), "size": MIN_CELL_FONT}
        step = math.ceil(MIN_CELL_FONT * need_per_px / spacing)
        values = ax.get("tickvals")
        if values and ax.get("ticktext"):
            ax["tickvals"] = list(values)[::step]
            ax["ticktext"] = list(ax["ticktext"])[::step]
        elif values:  # the values are the labels
            ax["tickvals"] = list(values)[::step]
    return growth


def _gap_share(ps: list[dict], p: dict) -> float:
    """Half of the free paper width on each side of panel ``p`` in its row (for its title)."""
    row = sorted((q["xd"] for q in ps if q["yd"] == p["yd"]))
    i = row.index(p["xd"])
    left = row[i][0] - (row[i - 1][1] if i else 0.0)
    right = (row[i + 1][0] if i + 1 < len(row) else 1.0) - row[i][1]
    return (left + right) / 2


def _shrink_panel_top(layout: dict, p: dict, frac: float) -> float:
    """Lower the top of panel ``p`` by ``frac`` of the paper (at most half the panel)."""
    yax = layout.setdefault(p["y"], {})
    y0, y1 = yax.get("domain", [0.0, 1.0])
    top = max(y0 + 0.5 * (y1 - y0), y1 - frac)
    yax["domain"] = [y0, round(top, 6)]
    return top


def _stack(fig: dict, ps: list[dict], width: float) -> None:
    """Redraw side-by-side panels as one column ``width`` px wide (see :func:`fit_figure`)."""
    layout = fig["layout"]
    m = _margin(layout)
    font = _font_size(layout, _BASE_FONT)
    order = sorted(range(len(ps)), key=lambda i: ps[i]["xd"][0])  # left to right -> top down
    new_l, new_r = min(m["l"], 62), 14
    # A heatmap that prints its numbers on the cells needs no colour bar on a phone: the
    # width goes to the cells (the bar comes back if the numbers do not fit).
    unbarred = [t for t in fig["data"] if t.get("type") == "heatmap" and t.get("colorbar")
                is not None and t.get("showscale", True) is not False
                and "%{z" in str(t.get("texttemplate", ""))]
    for t in unbarred:
        t["showscale"] = False
    if layout.get("coloraxis") or any(t.get("colorbar") and t.get("showscale", True)
                                      for t in fig["data"]):
        new_r = 60
    plot_w = max(width - new_l - new_r, 50.0)  # a tiny width: as _wrap_in_place
    # Titles and captions span the figure: centred on the figure (in paper coordinates of the
    # plot area, which the margins shift right), each line may take the width less a border.
    mid_x = round((width / 2 - new_l) / plot_w, 6)
    annotations = layout.get("annotations") or []
    # Classify the paper annotations: above a panel, inside a panel, or a caption.
    above = {i: [] for i in range(len(ps))}
    inside, below, top_notes = [], [], []
    for a in annotations:
        if not (_is_paper(a, "xref") and _is_paper(a, "yref")):
            continue
        x, y = float(a.get("x", 0.5)), float(a.get("y", 0.5))
        pi = _panel_of(ps, x)
        if y >= 1 - 1e-9 and a.get("yanchor") == "bottom":
            p = ps[pi]
            if p["xd"][0] - 1e-9 <= x <= p["xd"][1] + 1e-9:
                above[pi].append(a)
            else:
                top_notes.append(a)
        elif y < 0:
            below.append(a)
        elif y > 1:
            top_notes.append(a)
        else:
            inside.append((pi, a))
    # Wrap the texts to the full width and measure the room they need.
    above_px = {}
    for i, items in above.items():
        need = 0.0
        for a in sorted(items, key=lambda a: float(a.get("yshift", 0))):
            size = _font_size(a, font)
            a["text"] = wrap_html(str(a["text"]), width - 16, size)
            a.update(x=mid_x, xanchor="center")
            if need:
                a["yshift"] = need + 2
            need += _n_lines(a["text"]) * size * _LINE + 2
        above_px[i] = need
    # The title becomes an annotation above the first panel's title: plotly anchors a
    # multi-line layout title by its first line, an annotation by its whole box.
    title = _title(layout)
    title_ann = None
    title_px = 0.0
    if title:
        size = min(_font_size(title, font * 1.4), 15.0)
        text = wrap_html(str(title["text"]), width - 16, size)
        title_px = _n_lines(text) * size * _LINE + 10
        title_ann = _title_annotation(title, text, size, 0.0)
        title_ann["x"] = mid_x
        layout["title"] = {"text": ""}
    for a in top_notes:
        size = _font_size(a, font)
        a["text"] = wrap_html(str(a["text"]), width - 16, size)
        a["x"], a["xanchor"] = mid_x, "center"
        title_px += _n_lines(a["text"]) * size * _LINE
    # Pixel rows from the top of the plot area: panel, gap (axis + next title), panel, ...
    tops, cursor = [], 0.0
    for k, i in enumerate(order):
        if k:
            cursor += _axis_px(layout, ps[order[k - 1]], font) + above_px[i] + 6
        tops.append(cursor)
        cursor += PANEL_PX
    paper_h = cursor
    new_t = title_px + above_px[order[0]] + 10
    legend = layout.get("legend") or {}
    ly = float(legend.get("y", 1))
    outside_legend = (not 0 <= ly <= 1 or (ly >= 1 and legend.get("yanchor") == "bottom")
                      or (ly <= 0 and legend.get("yanchor") == "top")
                      or legend.get("yref") == "container")
    legend_px = _legend_px(fig, width) if outside_legend or not legend else 0.0
    caption_px = 0.0
    for a in below:
        size = _font_size(a, font)
        a["text"] = wrap_html(str(a["text"]), width - 16, size)
        caption_px += _n_lines(a["text"]) * size * _LINE + 4
    last_axis_px = _axis_px(layout, ps[order[-1]], font)
    new_b = last_axis_px + legend_px + caption_px + 8
    # Axis domains and the panel map (old panel -> new y domain).
    new_yd = {}
    for k, i in enumerate(order):
        y1 = 1 - tops[k] / paper_h
        y0 = 1 - (tops[k] + PANEL_PX) / paper_h
        new_yd[i] = [round(y0, 6), round(y1, 6)]
        layout.setdefault(ps[i]["x"], {})["domain"] = [0.0, 1.0]
        layout.setdefault(ps[i]["y"], {})["domain"] = new_yd[i]
    for i, items in above.items():
        for a in items:
            a["y"] = new_yd[i][1]
    if title_ann is not None:
        title_ann.update(y=1.0, yshift=above_px[order[0]] + 4)
        layout["annotations"] = list(annotations) + [title_ann]
    for i, a in inside:
        p = ps[i]
        x0, x1 = p["xd"]
        y0, y1 = p["yd"]
        fx = (float(a.get("x", 0.5)) - x0) / (x1 - x0) if x1 > x0 else 0.5
        fy = (float(a.get("y", 0.5)) - y0) / (y1 - y0) if y1 > y0 else 0.5
        a["x"] = round(min(max(fx, 0.0), 1.0), 6)
        a["y"] = round(new_yd[i][0] + fy * (new_yd[i][1] - new_yd[i][0]), 6)
    cursor_px = last_axis_px
    if outside_legend or not legend:
        layout["legend"] = {**legend, "orientation": "h", "x": 0.0, "xanchor": "left",
                            "yref": "paper",
                            "y": round(-cursor_px / paper_h, 6), "yanchor": "top"}
        cursor_px += legend_px
    elif legend:
        i = _panel_of(ps, float(legend.get("x", 0.0)))
        p = ps[i]
        fx = (float(legend.get("x", 0.0)) - p["xd"][0]) / max(p["xd"][1] - p["xd"][0], 1e-9)
        fy = (float(legend.get("y", 1.0)) - p["yd"][0]) / max(p["yd"][1] - p["yd"][0], 1e-9)
        legend.update(x=round(min(max(fx, 0.0), 1.0), 6),
                      y=round(new_yd[i][0] + fy * (new_yd[i][1] - new_yd[i][0]), 6))
    for a in below:
        size = _font_size(a, font)
        a.update(x=mid_x, xanchor="center", yanchor="top", y=round(-cursor_px / paper_h, 6))
        a.pop("yshift", None)
        cursor_px += _n_lines(a["text"]) * size * _LINE + 4
    # Colour bars follow their panel.
    for trace in fig["data"]:
        cb = trace.get("colorbar")
        if cb is not None:
            i = next((j for j, p in enumerate(ps) if _axis_id(p["x"]) == trace.get("xaxis", "x")),
                     None)
            if i is not None:
                y0, y1 = new_yd[i]
                cb.update(x=1.0, xanchor="left", xpad=6, y=round((y0 + y1) / 2, 6),
                          yanchor="middle", len=round(y1 - y0, 6), lenmode="fraction")
    # Horizontal bars: their category labels move into the bar text (the tick labels would
    # take a third of a phone's width); the text goes inside the bar where it fits.
    for trace in fig["data"]:
        if trace.get("type") == "bar" and trace.get("orientation") == "h":
            has_text = trace.get("text") is not None or trace.get("texttemplate")
            trace["texttemplate"] = "%{y} %{text}" if has_text else "%{y}"
            trace.update(textposition="auto", insidetextanchor="start", cliponaxis=False)
            y_name = _axis_name(trace.get("yaxis", "y"))
            layout.setdefault(y_name, {})["showticklabels"] = False
    # Dense linear ticks with a fixed step get a coarser step at the panel's new width.
    for i in order:
        ax = layout[ps[i]["x"]]
        rng, dtick = ax.get("range"), ax.get("dtick")
        if (ax.get("type", "linear") == "linear" and isinstance(dtick, (int, float))
                and rng and dtick > 0):
            n = abs(rng[1] - rng[0]) / dtick
            while n > 0 and plot_w / n < 28:
                dtick *= 2
                n /= 2
            ax["dtick"] = dtick
    layout["margin"] = {**m, "l": new_l, "r": new_r, "t": round(new_t), "b": round(new_b)}
    layout["height"] = round(new_t + paper_h + new_b)
    for trace in fig["data"]:
        if trace.get("type") == "heatmap":
            _fit_heatmap_text(trace, layout, plot_w, paper_h, _ps_after(layout, ps))
    for t in unbarred:
        if not t.get("texttemplate"):
            t["showscale"] = True  # the numbers were left out: the colour bar says the values
            layout["margin"]["r"] = 60


def _axis_px(layout: dict, p: dict, font: float) -> float:
    """Room in px under panel ``p`` for its x tick labels and x-axis title.

    :data:`_AXIS_PX` holds one line of tick labels and a one-line title; each extra line of
    the tallest tick label (``"0<br>pad"``) and of the title adds a line.
    """
    ax = layout.get(p["x"]) or {}
    size = _font_size({"font": ax.get("tickfont")}, font)
    tick_lines = max((_n_lines(t) for t in ax.get("ticktext") or []), default=1)
    title = ax.get("title")
    title = title.get("text", "") if isinstance(title, dict) else title or ""
    extra = (tick_lines - 1) * size * _LINE + (max(_n_lines(title), 1) - 1) * font * _LINE
    return _AXIS_PX + extra


def _ps_after(layout: dict, ps: list[dict]) -> list[dict]:
    """The panels with their domains as they are in ``layout`` now."""
    return [dict(p, xd=list(layout[p["x"]].get("domain", [0, 1])),
                 yd=list(layout[p["y"]].get("domain", [0, 1]))) for p in ps]
