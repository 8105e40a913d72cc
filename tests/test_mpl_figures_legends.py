"""Legends of a matplotlib figure laid out again for a phone (``mpl_figures.relaid_out``).

A chapter places a legend below its axes (``bbox_to_anchor=(0.5, -0.2)``, an offset in axes
fractions), beside them, or under the whole figure (``fig.legend(loc="outside lower center")``),
often in several columns. On a phone the axes are shorter and narrower while the text keeps its
size: such a legend must still cover no tick label, axis label or title, stay inside the
drawing, and keep as many columns as fit.
"""

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnbook import mpl_figures  # noqa: E402

#: The widths a figure is drawn at on a phone: the book's column there, and a whole window.
PHONE_WIDTHS = (mpl_figures.PHONE_PX, 390)
X = np.arange(300)


def _figure(aspect=0.5, n_rows=1):
    return plt.subplots(n_rows, 1, figsize=(6.88, 6.88 * aspect), dpi=100, layout="constrained")


def _heads(ax, n=4, label="head {k} of the layer"):
    for k in range(n):
        ax.plot(X, np.sin(X / 30 + k), label=label.format(k=k))


def _text_boxes(fig, renderer):
    """(what, box) of every drawn tick label, axis label and title, per axes and axis."""
    boxes = []
    for i, ax in enumerate(fig.axes):
        for axis in (ax.xaxis, ax.yaxis):
            box = axis.get_tightbbox(renderer)  # its drawn tick labels and its label
            if box is not None and box.width > 0:
                boxes.append((f"axes {i} {axis.axis_name} axis", box))
        if ax.title.get_visible() and ax.title.get_text():
            boxes.append((f"axes {i} title", ax.title.get_window_extent(renderer)))
    return boxes


def _legend_problems(fig) -> list[str]:
    """What each legend of ``fig``, as drawn now, covers or how far it leaves the drawing."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    problems = []
    for legend in legends + list(fig.legends):
        box = legend.get_window_extent(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
            problems.append(f"legend {box.extents.round()} leaves the {width}x{height} drawing")
        problems += [
            f"legend covers {what}" for what, b in _text_boxes(fig, renderer) if box.overlaps(b)
        ]
        problems += [
            f"legend covers the data area of axes {i}"
            for i, ax in enumerate(fig.axes)
            if ax is not legend.axes and box.overlaps(ax.bbox)
        ]
    return problems


def _png_width(fig, width_px) -> int:
    from PIL import Image

    png = base64.b64decode(mpl_figures.figure_png(fig, "en", width_px=width_px))
    return Image.open(io.BytesIO(png)).size[0]


def _below(ncols, xlabel="position", aspect=0.5):
    fig, ax = _figure(aspect)
    _heads(ax)
    ax.set(xlabel=xlabel, ylabel="score", title="Scores")
    legend = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=ncols)
    return fig, ax, legend


def test_the_legend_problem_finder_can_fail():
    fig, ax = _figure()
    _heads(ax)
    ax.set(xlabel="position", title="Scores")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02))  # on the tick labels
    fig.legend(loc="lower left", bbox_to_anchor=(-0.5, 0.0))  # half out of the figure
    found = _legend_problems(fig)
    assert "legend covers axes 0 x axis" in found
    assert any("leaves the" in p for p in found)
    plt.close(fig)


@pytest.mark.parametrize("width_px", PHONE_WIDTHS)
@pytest.mark.parametrize("ncols", [2, 3])
@pytest.mark.parametrize(
    "xlabel", ["position", "the position of the query token in the sequence, counted from zero"]
)
def test_a_legend_anchored_below_its_axes_covers_no_text_on_a_phone(width_px, ncols, xlabel):
    """An anchor 0.2 axes heights below the axes clears the x label in the column; on a phone
    the axes are shorter, the x label may wrap and the legend has more rows: it is placed under
    the x label by its size (and restored after)."""
    fig, ax, legend = _below(ncols, xlabel)
    assert _legend_problems(fig) == []  # the chapter's own drawing is clean
    loc, anchor = legend._loc, legend._bbox_to_anchor
    with mpl_figures.relaid_out(fig, width_px):
        assert _legend_problems(fig) == []
        assert len(ax.xaxis.label.get_text().split("\n")) <= 2  # not squeezed by the legend
    assert legend._loc == loc and legend._bbox_to_anchor is anchor
    assert len(legend._legend_handle_box.get_children()) == ncols
    assert _png_width(fig, width_px) == width_px
    plt.close(fig)


@pytest.mark.parametrize("width_px", PHONE_WIDTHS)
def test_a_legend_beside_its_axes_goes_below_them_on_a_phone(width_px):
    """Beside the axes it would leave the panel too narrow (LayoutCollapsed); below them it fits."""
    fig, ax = _figure()
    _heads(ax)
    ax.set(xlabel="position")
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    with mpl_figures.relaid_out(fig, width_px):
        assert _legend_problems(fig) == []
        assert legend.get_window_extent().y1 < ax.xaxis.get_tightbbox().y0
        assert ax.bbox.width >= mpl_figures.MIN_PANEL_PX
    plt.close(fig)


@pytest.mark.parametrize("width_px", PHONE_WIDTHS)
def test_a_figure_legend_beside_the_panels_goes_under_them_on_a_phone(width_px):
    """``"outside right upper"`` would leave the panel too narrow at 358 px (LayoutCollapsed)."""
    fig, ax = _figure()
    _heads(ax)
    ax.set(xlabel="position")
    legend = fig.legend(loc="outside right upper")
    with mpl_figures.relaid_out(fig, width_px):
        assert _legend_problems(fig) == []
        assert legend.get_window_extent().y1 < ax.xaxis.get_tightbbox().y0
        assert ax.bbox.width >= mpl_figures.MIN_PANEL_PX
    assert legend._outside_loc == "right"
    assert _legend_problems(fig) == []
    plt.close(fig)


def _covers_lines(legend, ax) -> bool:
    """Whether any of ``ax``'s lines passes through ``legend``'s box (sampled densely)."""
    box = legend.get_window_extent()
    for line in ax.lines:
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        t = np.linspace(0, len(x) - 1, 4000)
        points = np.column_stack([np.interp(t, np.arange(len(x)), v) for v in (x, y)])
        if box.count_contains(line.get_transform().transform(points)):
            return True
    return False


def _recall_like():
    """Chapter 1's recall grid: lines at the top and bottom, one that stops half-way at 0.85,
    the legend anchored at the right between them (``bbox_to_anchor=(1, 0.62)``)."""
    fig, ax = _figure(0.6)
    d = np.arange(1, 65)
    for k in range(5):
        ax.plot(d, np.full(64, 1.0 - 0.005 * k), label=f"RNN, Δ ≤ {8 * (k + 1)}")
        ax.plot(d, np.full(64, 0.25 + 0.01 * k))
    ax.plot(d[:32], np.full(32, 0.85), "-.", label="RNN, Δ ≤ 32, 65 tokens")
    ax.plot(d, np.full(64, 0.99), "--", label="LSTM, Δ ≤ 64")
    ax.set(xlabel="distance Δ", ylabel="held-out accuracy", xlim=(1, 64), ylim=(0, 1.05))
    legend = ax.legend(loc="center right", bbox_to_anchor=(1, 0.62))
    return fig, ax, legend


@pytest.mark.parametrize("width_px", PHONE_WIDTHS)
def test_a_legend_anchored_inside_its_axes_moves_off_the_data_on_a_phone(width_px):
    fig, ax, legend = _recall_like()
    fig.canvas.draw()
    assert not _covers_lines(legend, ax)  # the chapter's place, in the column
    anchor = legend._bbox_to_anchor
    with mpl_figures.relaid_out(fig, width_px):
        fig.canvas.draw()
        assert not _covers_lines(legend, ax)
        assert _legend_problems(fig) == []
    assert legend._bbox_to_anchor is anchor
    fig.canvas.draw()
    assert not _covers_lines(legend, ax)
    plt.close(fig)


def test_a_multi_column_legend_keeps_the_columns_that_fit_its_axes():
    """Three columns are wider than the phone's axes, two are not: two, not one. (Measured with
    the legend left out: a legend wider than its axes squeezes them, which must not count.)"""
    fig, ax = _figure()
    _heads(ax, 6, "max_k = {k}")
    ax.set(xlabel="distance")
    legend = ax.legend(ncols=3, loc="lower left")
    with mpl_figures.relaid_out(fig, 390):
        assert len(legend._legend_handle_box.get_children()) == 2
        assert legend.get_window_extent().width <= ax.bbox.width
        assert _legend_problems(fig) == []
    assert len(legend._legend_handle_box.get_children()) == 3
    plt.close(fig)


def _chapter_4_figure():
    """Chapter 4's training figure, as the chapter draws it: four stacked panels, one figure
    legend of six entries in two columns under them (mathtext in the labels)."""
    arms = (
        r"scaled by $1/\sqrt{d_k}$",
        "unscaled",
        r"big-step: scaled, $\sqrt{d_k} \times$ lr",
        r"small-step: unscaled, lr $/ \sqrt{d_k}$",
    )
    fig, axes = _figure(1.5, n_rows=4)
    for i, label in enumerate(arms):
        curve = np.exp(-X / (50 + 30 * i))
        axes[0].plot(X, curve, lw=2, label=label)
        for ax in axes[1:]:
            ax.plot(X, curve, lw=2)
    axes[0].axhline(1.0, color="0.4", ls="--", label="chance")
    axes[0].axhline(0.5, color="0.6", ls=":", label="half of chance")
    titles = (
        "Loss, $d_k = 64$, one head, seed 0",
        "Entropy of the query's attention (dashed: uniform)",
        "Saturated: largest weight > 0.9",
        "Saturated queries' gradient share, 10-step mean",
    )
    for ax, title in zip(axes, titles):
        ax.set(title=title, ylabel="share of queries")
    axes[2].set(xlabel="training step")
    axes[3].set(xlabel="training step (the first 80)")
    for ax in axes[:2]:
        ax.tick_params(labelbottom=False)
    legend = fig.legend(loc="outside lower center", ncols=2, fontsize=9)
    return fig, axes, legend


@pytest.mark.parametrize("width_px", PHONE_WIDTHS)
def test_chapter_4s_stacked_panels_and_figure_legend_fit_a_phone(width_px):
    fig, axes, legend = _chapter_4_figure()
    assert _legend_problems(fig) == []
    with mpl_figures.relaid_out(fig, width_px):
        assert _legend_problems(fig) == []
        assert legend.get_window_extent().y1 < axes[3].xaxis.get_tightbbox().y0
        assert min(ax.bbox.width for ax in axes) >= mpl_figures.MIN_PANEL_PX
    assert len(legend._legend_handle_box.get_children()) == 2
    assert _png_width(fig, width_px) == width_px
    plt.close(fig)
