"""Checks of a figure drawn for a width (an explorer whose ``draw`` takes ``width``), read from
its layout alone: where its panels are, whether their titles fit, where the legend and the
colour bars sit. Shared by tests/test_explorers_*.py; the expected properties are written from
the brief of issue 20, not from the code that lays the figures out.
"""

from __future__ import annotations

from attnbook import fonts

TITLE_PX = 14  # the panels' titles' font size


def as_json(fig) -> dict:
    return fig if isinstance(fig, dict) else fig.to_plotly_json()


def _margins(lay: dict) -> tuple[float, float, float, float]:
    m = lay.get("margin") or {}
    return m.get("l", 80), m.get("r", 80), m.get("t", 100), m.get("b", 80)


def panels(fig) -> list[dict]:
    """Each panel (x axis with its anchored y axis) as a rectangle in px of the figure:
    ``{"x": name, "y": name, "left", "right", "top", "bottom"}`` (top < bottom, y downwards)."""
    lay = as_json(fig)["layout"]
    height = lay["height"]
    ml, mr, mt, mb = _margins(lay)
    out = []
    for key in sorted((k for k in lay if k.startswith("xaxis")), key=lambda k: int(k[5:] or 1)):
        xa = lay[key]
        ykey = "yaxis" + xa.get("anchor", "y")[1:]
        ya = lay.get(ykey, {})
        x0, x1 = xa.get("domain", [0, 1])
        y0, y1 = ya.get("domain", [0, 1])
        out.append(
            dict(x=key, y=ykey, fx=(x0, x1), fy=(y0, y1), height=height, margins=(ml, mr, mt, mb))
        )
    return out


def _px(p: dict, width: float) -> tuple[float, float, float, float]:
    ml, mr, mt, mb = p["margins"]
    pw, ph = width - ml - mr, p["height"] - mt - mb
    return (
        ml + p["fx"][0] * pw,
        ml + p["fx"][1] * pw,
        mt + (1 - p["fy"][1]) * ph,
        mt + (1 - p["fy"][0]) * ph,
    )


def check_layout(fig, width: int, n_panels: int, *, stacked: bool) -> dict:
    """Assert the properties every figure drawn for ``width`` must have; return its layout.

    ``n_panels`` panels that do not overlap (side by side: one row, the same height; stacked:
    one column, each above the next with room between), every line of the first ``n_panels``
    annotations (the panels' titles) no wider than its room and inside the figure, the legend
    in container coordinates, and every colour bar inside the figure and off the other panels.
    """
    fig = as_json(fig)
    lay = fig["layout"]
    ps = panels(fig)
    assert lay.get("width") in (None, width)
    assert len(ps) == n_panels, [p["x"] for p in ps]
    boxes = [_px(p, width) for p in ps]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2]
            assert apart, f"panels overlap at {width} px: {a} and {b}"
    if n_panels > 1:
        if stacked:
            assert all(p["fx"] == ps[0]["fx"] for p in ps), "stacked panels differ in width"
            for a, b in zip(boxes, boxes[1:]):
                assert b[2] - a[3] >= 40, f"no room under a stacked panel: {a}, {b}"
        else:
            assert all(p["fy"] == ps[0]["fy"] for p in ps), "side-by-side panels not in a row"
    titles = (lay.get("annotations") or [])[:n_panels]
    ml, mr, _, _ = _margins(lay)
    for ann, box in zip(titles, boxes):
        assert ann.get("xref", "paper") == "paper"  # make_subplots' own titles
        centre = ml + ann["x"] * (width - ml - mr)
        room = width if stacked or n_panels == 1 else (box[1] - box[0]) + 80
        for line in str(ann["text"]).split("<br>"):
            w = fonts.text_width(line, TITLE_PX)
            assert w <= room, f"title line {line!r} is {w:.0f} px, room {room:.0f}"
            assert centre - w / 2 >= 0 and centre + w / 2 <= width, f"{line!r} leaves the figure"
    legend = lay.get("legend") or {}
    assert legend.get("yref") == "container", legend
    for t in fig["data"]:
        bar = t.get("colorbar") or (t.get("marker") or {}).get("colorbar")
        if bar is None or t.get("showscale") is False:
            continue
        check_colorbar(bar, t, ps, boxes, width)
    return lay


def check_colorbar(bar: dict, trace: dict, ps: list[dict], boxes: list, width: int) -> None:
    """A vertical colour bar placed in paper coordinates: inside the figure, beside its own
    panel, and over no other panel."""
    ml, mr, mt, mb = ps[0]["margins"]
    pw, ph = width - ml - mr, ps[0]["height"] - mt - mb
    assert bar.get("xref", "paper") == "paper" and bar.get("yref", "paper") == "paper"
    thick = bar.get("thickness", 30) + 40  # the bar and its tick labels
    x = ml + bar["x"] * pw
    left = x if bar.get("xanchor", "left") == "left" else x - thick
    right = left + thick
    assert 0 <= left and right <= width, f"colour bar {left:.0f}..{right:.0f} px off the figure"
    ln = bar.get("len", 1) * (ph if bar.get("lenmode", "fraction") == "fraction" else 1)
    yc = mt + (1 - bar.get("y", 0.5)) * ph
    anchor = bar.get("yanchor", "middle")
    top = yc - {"top": 0, "middle": ln / 2, "bottom": ln}[anchor]
    own = "xaxis" + trace.get("xaxis", "x")[1:]
    for p, box in zip(ps, boxes):
        if p["x"] == own:
            continue
        over = not (right <= box[0] or box[1] <= left or top + ln <= box[2] or box[3] <= top)
        assert not over, f"colour bar of {own} over panel {p['x']} at {width} px"


def check_widths(draw, *, n_panels: int) -> tuple[dict, dict]:
    """``draw(width)`` at the column's and the phone's width: both layouts checked, the same
    traces (type and name) in the same order, and the phone's panels stacked."""
    from attnbook import viz

    wide, phone = as_json(draw(viz.COLUMN_PX)), as_json(draw(viz.PHONE_PX))
    check_layout(wide, viz.COLUMN_PX, n_panels, stacked=False)
    check_layout(phone, viz.PHONE_PX, n_panels, stacked=True)
    kinds = [[(t.get("type"), t.get("name")) for t in f["data"]] for f in (wide, phone)]
    assert kinds[0] == kinds[1]
    return wide, phone
