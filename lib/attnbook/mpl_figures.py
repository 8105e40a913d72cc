"""Matplotlib figures drawn by chapter code, shown in the reader's language.

The chapters' own plotting code draws in English. This module draws such a figure again with
its labels translated after the fact (:func:`translated_figure`, from the label catalogs of
:mod:`attnbook.i18n`, ``lib/attnbook/locale/zh_CN/ch*.po``), renders it as PNG
(:func:`figure_png`) and hooks both into IPython's display (:func:`install_display`):

* **Live** (JupyterLab): after ``attnbook.i18n.set_language("zh_CN")`` (or with
  ``ATTNBOOK_LANG=zh_CN``) every figure shown is drawn with Chinese labels.
  :func:`attnbook.viz.use_book_style`, which every chapter calls, installs the hook; importing
  this module also makes :func:`attnbook.i18n.set_language` re-install it.
* **The built book**: each figure output carries, next to its English ``image/png``, an
  :data:`attnbook.edition_outputs.MIME` entry with one PNG per edition, and one more per
  edition drawn for a phone's column (:func:`figure_bundle`, :func:`relaid_out`); MyST-NB's
  :class:`attnbook.edition_outputs.EditionsMimeRenderer` shows each edition its own, and the
  browser picks the column's or the phone's drawing (``book/_ext/attnbook_figures.py``).

Chinese text needs a CJK font: :func:`cjk_font_path` is Noto Sans CJK SC (SIL Open Font
License) from the PyPI package ``mplfonts`` — installed with the book, never downloaded.
Matplotlib falls back to it for the glyphs DejaVu Sans lacks; a glyph missing from both
("Glyph ... missing from font(s)") is an error (:class:`MissingGlyphError`), not tofu.

matplotlib is imported lazily, when a figure is drawn.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import re
import unicodedata
import warnings
from pathlib import Path

from . import i18n
from .checks import check_choice, check_instance, check_int, check_strings
from .edition_outputs import MIME
from .fonts import NO_LINE_END, NO_LINE_START

#: How a figure is made, for the message of a ``fig`` that is not one.
_MPL_FIGURE = "matplotlib.pyplot.figure() or plt.subplots()"

__all__ = [
    "MissingGlyphError",
    "translated_figure",
    "figure_png",
    "figure_bundle",
    "relaid_out",
    "LayoutCollapsed",
    "PHONE_PX",
    "MIN_PANEL_PX",
    "cjk_font_path",
    "install_display",
]

#: Width in CSS pixels of the book's text column on a phone (the same number as
#: :data:`attnbook.viz.PHONE_PX`, which imports this module: tests/test_i18n.py checks they
#: agree): :func:`figure_bundle` draws every wider figure again at this width.
PHONE_PX = 358

_MATH = re.compile(r"(?<!\\)\$(?:\\.|[^$\\])*\$")
_saved_png: dict = {}
#: The last figure :func:`_book_png` drew: ``{"image/png": (figure, base64 PNG, glyph messages)}``.
_drawn: dict = {}


class MissingGlyphError(RuntimeError):
    """A figure label has a character that no installed font (CJK font included) can draw."""


def _language(language: str | None) -> str:
    if language is None:
        return i18n.get_language()
    return check_choice(language, "language", i18n.LANGUAGES)


def _delegating_formatter_class():
    """A matplotlib ``Formatter`` that wraps another one: the base of the wrappers below.

    Its tick locations, offset text and axis are the inner formatter's; a subclass changes
    only the labels (``__call__`` and ``format_ticks``). Made once, on first use (matplotlib is
    imported lazily).
    """
    cls = _FORMATTER_CLASS.get("delegating")
    if cls is None:
        from matplotlib.ticker import Formatter

        class DelegatingFormatter(Formatter):
            def __init__(self, inner):
                self.inner = inner

            def set_locs(self, locs):
                self.inner.set_locs(locs)

            def get_offset(self):
                return self.inner.get_offset()

            def set_axis(self, axis):
                super().set_axis(axis)
                self.inner.set_axis(axis)

        cls = _FORMATTER_CLASS["delegating"] = DelegatingFormatter
    return cls


def _translating_formatter_class():
    class TranslatingFormatter(_delegating_formatter_class()):
        """A tick formatter whose labels are another's, translated when the catalog knows them."""

        def __init__(self, inner, language):
            super().__init__(inner)
            self.language = language

        def __call__(self, x, pos=None):
            return i18n.translate(self.inner(x, pos), self.language)

        def format_ticks(self, values):
            return [i18n.translate(s, self.language) for s in self.inner.format_ticks(values)]

    return TranslatingFormatter


def _TranslatingFormatter(inner, language):  # noqa: N802 - a class made on first use
    cls = _FORMATTER_CLASS.get("cls")
    if cls is None:
        cls = _FORMATTER_CLASS["cls"] = _translating_formatter_class()
    return cls(inner, language)


_FORMATTER_CLASS: dict = {}


@contextlib.contextmanager
def translated_figure(fig, language: str | None = None, *, missing: set[str] | None = None):
    """Temporarily set every text of a matplotlib figure to ``language``; restore on exit.

    Titles, axis labels, tick labels, legend entries, annotations and figure texts are all
    ``matplotlib.text.Text`` artists; each is looked up with :func:`attnbook.i18n.translate`.
    Tick labels are often data (the tokens of a sentence a model read): they are translated
    when the catalog has them and never reported missing.

    Args:
        fig: a ``matplotlib.figure.Figure``.
        language: default :func:`attnbook.i18n.get_language`.
        missing: if given, receives the labels that needed a translation and had none.

    Raises:
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    check_instance(fig, Figure, "fig", _MPL_FIGURE)
    language = _language(language)
    sink = missing if missing is not None else set()
    saved = []
    formatters = []
    try:
        if language != "en":
            ticks = {
                id(label)
                for ax in fig.axes
                for axis in (ax.xaxis, ax.yaxis)
                for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                for label in (tick.label1, tick.label2)
            }
            # Tick labels are rewritten by the axis' formatters whenever the figure is drawn:
            # wrap each formatter so that what it writes is translated.
            for ax in fig.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    major, minor = axis.get_major_formatter(), axis.get_minor_formatter()
                    formatters.append(
                        (axis, major, minor, axis.isDefault_majfmt, axis.isDefault_minfmt)
                    )
                    axis.set_major_formatter(_TranslatingFormatter(major, language))
                    axis.set_minor_formatter(_TranslatingFormatter(minor, language))
            for artist in fig.findobj(Text):
                text = artist.get_text()
                if id(artist) in ticks:
                    # Its text is written again at draw time, perhaps in Chinese: the CJK
                    # font as a fallback whatever it says now.
                    saved.append((artist, text, artist.get_fontproperties().copy()))
                    artist.set_fontfamily(_families_for("", artist.get_fontfamily()))
                    new = i18n.translate(text, language)
                else:
                    new = i18n.translate_checked(text, language, sink)
                if new != text:
                    saved.append((artist, text, artist.get_fontproperties().copy()))
                    artist.set_text(new)
                    artist.set_fontfamily(_families_for(new, artist.get_fontfamily()))
        yield fig
    finally:
        for artist, text, props in reversed(saved):
            artist.set_text(text)
            artist.set_fontproperties(props)
        for axis, major, minor, major_default, minor_default in formatters:
            axis.set_major_formatter(major)
            axis.set_minor_formatter(minor)
            # Unit converters (dates, categories) install their own formatter only on an axis
            # whose formatter the user has not set.
            axis.isDefault_majfmt, axis.isDefault_minfmt = major_default, minor_default


def _families_for(text: str, families) -> list[str]:
    """The font families to draw ``text``: the CJK font as a fallback, or first with mathtext.

    Matplotlib falls back from font to font glyph by glyph for plain text, but draws the
    non-math part of a mathtext label (``"头维度 $d_k$"``) with one font only: there the CJK
    font (whose Latin letters are fine) comes first; the math keeps the mathtext font set.
    Generic families (``sans-serif``) stay generic: matplotlib resolves each to the first
    installed font of its list (expanded here, every absent name would log "findfont: Font
    family ... not found" at every draw).
    """
    cjk = _cjk_family()
    rest = [f for f in families if f != cjk]
    has_wide = any(unicodedata.east_asian_width(ch) in ("W", "F") for ch in text)
    if has_wide and _MATH.search(text):
        return [cjk] + rest
    return rest + [cjk]


def cjk_font_path() -> Path:
    """Noto Sans CJK SC Regular, shipped by the ``mplfonts`` package (SIL Open Font License).

    Raises:
        RuntimeError: if ``mplfonts`` (a requirement of the book) is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the CJK font comes from the mplfonts package: pip install mplfonts")
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NotoSansCJKsc-Regular.otf"
    if not path.is_file():
        raise RuntimeError(f"mplfonts has no {path.name} (looked in {path.parent})")
    return path


@functools.lru_cache(maxsize=None)
def _cjk_family() -> str:
    from matplotlib import font_manager

    path = cjk_font_path()
    font_manager.fontManager.addfont(str(path))
    return font_manager.FontProperties(fname=str(path)).get_name()


#: The start of matplotlib's warning when constrained layout cannot fit a figure's axes (and
#: tight layout's, for a figure laid out by it).
_COLLAPSED = ("constrained_layout not applied", "Tight layout not applied")


class LayoutCollapsed(ValueError):
    """A figure's panels and text do not fit the width it was to be laid out at.

    Raised by :func:`relaid_out`: constrained layout would shrink an axes to nothing.
    """


#: The narrowest a panel's axes may be on a phone, in CSS pixels (the box constrained layout
#: gives it, its tick labels and axis labels outside): below it a figure's panels are
#: re-gridded into fewer columns. Two line plots side by side in a phone's 358 px column get
#: about 115 px each, too narrow for a legend beside the data or for their tick labels; small
#: masks (six of them in two columns: about 130 px each) still read well.
MIN_PANEL_PX = 125
#: The least room, in pixels, between two neighbouring tick labels (and between a legend and
#: what it may not cover).
_GAP_PX = 2


@contextlib.contextmanager
def relaid_out(fig, width_px: int):
    """Temporarily lay ``fig`` out ``width_px`` CSS pixels wide; restore it on exit.

    The font sizes stay in points, so the text keeps its size while the axes shrink;
    constrained layout (the book's default) places the panels again, by these rules, each
    measured with matplotlib's renderer at the new width:

    * **Panels:** if a panel's slot would be narrower than :data:`MIN_PANEL_PX`, the panels
      are re-gridded into fewer columns (in reading order, one under the other in the end),
      and the figure grows taller by as many rows as it gained (``_regridded``).
    * **Titles** (of an axes, or the figure's) now wider than their axes (or the figure), and
      axis labels longer than their axes, are broken into lines, between words or between two
      CJK characters (``_wrapped``).
    * **Tick labels** that overlap their neighbours are turned upright if they are names
      (tokens, models) or the chapter had already turned them (drawn smaller, to 80 % at
      least, if that is not enough; a name is never hidden), and numbers are thinned: every
      second (third, ...) one is shown
      (``_fitted_tick_labels``). A panel that shares its y axis shows its tick labels
      when it is the first of its new row.
    * **Legends** wider than their axes (or a figure legend wider than the figure) get fewer
      columns; an axes' legend that covers its data is moved to the best place inside the
      axes and, if no place there is free, below the axes; an axes' legend the chapter placed
      outside its axes (``bbox_to_anchor`` below, above or beside them) is placed below them,
      under their tick labels and x label, and a figure legend beside the panels
      (``"outside right upper"``) under them (``_placed_legends``).

    The height stays what it was in inches (times the rows gained), so a figure drawn for the
    column grows relatively taller on a phone.

    Raises:
        TypeError: if ``fig`` is not a matplotlib ``Figure``.
        ValueError: if ``width_px`` is not a positive integer.
        LayoutCollapsed: if even so the panels and their text do not fit ``width_px`` (its
            layout engine gives up, or leaves a panel narrower than :data:`MIN_PANEL_PX`; the
            figure is restored first), or the figure has no layout engine (its axes were
            placed by hand).
    """
    from matplotlib.figure import Figure

    check_instance(fig, Figure, "fig", _MPL_FIGURE)
    width_px = check_int(width_px, "width_px", minimum=1)
    size = fig.get_size_inches().copy()
    engine = fig.get_layout_engine()
    titles = [(ax.title, ax) for ax in fig.axes]
    if fig.get_suptitle():
        titles.append((fig._suptitle, fig))  # the Text that fig.suptitle made
    # Axis labels: an x label as wide as its axes, a y label (turned) as tall.
    labels = [(axis.label, ax) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)]
    texts = [(text, text.get_text()) for text, _ in titles + labels]
    if engine is None:
        # Its axes were placed by hand, for its own width: nothing can place them again.
        raise LayoutCollapsed(
            f"the figure has no layout engine (its axes were placed by hand); "
            f"it cannot be laid out again at {width_px} px"
        )
    # Where the axes are now: constrained layout starts from there, so the column's next drawing
    # is the same (to the sub-pixel) only if they are put back.
    positions = [(ax, ax._originalPosition.frozen(), ax._position.frozen()) for ax in fig.axes]
    with contextlib.ExitStack() as undo:
        try:
            fig.set_size_inches(width_px / fig.dpi, size[1], forward=False)
            _draw_layout(fig)  # places the axes at the new width
            undo.enter_context(_regridded(fig, size))
            renderer = fig.canvas.get_renderer()
            # Before the labels are broken: a legend wider than the figure squeezes the axes,
            # and the labels would be broken to that width.
            undo.enter_context(_narrowed_legends(fig, renderer))
            # Twice: an x label broken into lines makes its axes shorter, and their y label may
            # then need other breaks (each time from the text as the chapter wrote it).
            for _ in range(2):
                for (text, box), (_, original) in zip(titles + labels, texts):
                    text.set_text(original)
                    if original and text.get_visible():
                        extent = box.get_window_extent(renderer)
                        upright = text.get_rotation() % 180 == 90
                        limit = extent.height if upright else extent.width
                        text.set_text(_wrapped(text, limit, renderer))
                _draw_layout(fig)
            undo.enter_context(_fitted_tick_labels(fig, renderer))
            undo.enter_context(_placed_legends(fig, renderer))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fig.draw_without_rendering()
            if any(str(w.message).startswith(_COLLAPSED) for w in caught):
                raise LayoutCollapsed(
                    f"the figure's panels do not fit {width_px} px with its text at its size "
                    f"(constrained layout collapsed an axes to zero size)"
                )
            panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
            if min(_slot_widths(fig, panels), default=MIN_PANEL_PX) < MIN_PANEL_PX:
                # Fewer columns did not help (or there was one): text drawn inside the axes
                # (in data coordinates) leaves the panel no room.
                raise LayoutCollapsed(
                    f"a panel of the figure is narrower than {MIN_PANEL_PX} px at {width_px} px, "
                    f"in one column, with its text at its size"
                )
            yield fig
        finally:
            for text, original in texts:
                text.set_text(original)
            fig.set_size_inches(size, forward=False)
    for ax, original, active in positions:  # after the grid and the legends are restored
        ax._set_position(original, which="original")
        ax._set_position(active, which="active")


def _draw_layout(fig) -> bool:
    """Lay ``fig`` out (no pixels drawn); whether its layout engine gave up."""
    with warnings.catch_warnings(record=True) as caught:
        # A figure may not fit before the rules below have been applied; checked at the end.
        warnings.simplefilter("always")
        fig.draw_without_rendering()
    return any(str(w.message).startswith(_COLLAPSED) for w in caught)


def _slot_widths(fig, axes) -> list[float]:
    """The widths in pixels of the grid slots constrained layout gave ``axes`` (labels out)."""
    width = fig.get_figwidth() * fig.dpi
    return [ax.get_position(original=True).width * width for ax in axes]


@contextlib.contextmanager
def _regridded(fig, size):
    """Re-grid ``fig``'s panels into fewer columns while one is narrower than MIN_PANEL_PX.

    Every axes that sits in the figure's one grid (``plt.subplots``) is moved, in reading order
    (row by row), to the first free slot of a grid with fewer columns; axes that shared a slot
    (``twinx``) share the new one, a panel that spanned every column spans every new one.
    Colorbars drawn with ``fig.colorbar(..., ax=...)`` follow their axes (constrained layout
    places them next to their parents). The figure's height grows by the rows gained. Only
    for constrained layout; a figure with nested grids, subfigures or a panel spanning
    several rows but not every column keeps its grid. Restores the grid and the height.
    """
    from matplotlib.gridspec import GridSpec
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    grids = {id(ax.get_subplotspec().get_gridspec()) for ax in panels}
    narrow = (
        _draw_layout(fig) or min(_slot_widths(fig, panels), default=MIN_PANEL_PX) < MIN_PANEL_PX
    )
    if (
        not narrow
        or len(grids) != 1
        or fig.subfigs
        or not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    ):
        yield
        return
    grid = panels[0].get_subplotspec().get_gridspec()
    n_rows, n_cols = grid.get_geometry()
    specs = {ax: ax.get_subplotspec() for ax in panels}
    # One slot per distinct place in the grid, in reading order.
    slots: dict[tuple, list] = {}
    for ax in panels:
        spec = specs[ax]
        slots.setdefault(
            (spec.rowspan.start, spec.colspan.start, spec.rowspan.stop, spec.colspan.stop), []
        ).append(ax)
    if any(r1 - r0 > 1 and c1 - c0 < n_cols for r0, c0, r1, c1 in slots):
        yield
        return
    height = size[1]
    relabelled: set = set()
    try:
        for cols in range(n_cols - 1, 0, -1):
            placed, row, col = [], 0, 0
            for (_, c0, _, c1), axes in sorted(slots.items()):
                span = cols if c1 - c0 >= n_cols else min(c1 - c0, cols)
                if col + span > cols:
                    row, col = row + 1, 0
                placed.append((axes, row, col, span))
                col += span
            rows = row + 1
            new = GridSpec(rows, cols, figure=fig)
            for axes, row, col, span in placed:
                for ax in axes:
                    ax.set_subplotspec(new[row, col : col + span])
                    # A panel that shares its y axis had its tick labels hidden where it was
                    # not the row's first (plt.subplots(sharey=True)); first now, it shows them.
                    shown = col == 0 and len(ax.get_shared_y_axes().get_siblings(ax)) > 1
                    if shown and not ax.yaxis.get_tick_params()["labelleft"]:
                        ax.yaxis.set_tick_params(labelleft=True)
                        relabelled.add(ax)
                    elif ax in relabelled and not shown:
                        ax.yaxis.set_tick_params(labelleft=False)
                        relabelled.discard(ax)
            fig.set_size_inches(fig.get_figwidth(), height * rows / n_rows, forward=False)
            if not _draw_layout(fig) and min(_slot_widths(fig, panels)) >= MIN_PANEL_PX:
                break
        yield
    finally:
        for ax in relabelled:
            ax.yaxis.set_tick_params(labelleft=False)
        for ax, spec in specs.items():
            ax.set_subplotspec(spec)
        fig.set_size_inches(fig.get_figwidth(), height, forward=False)


def _tick_labels(axis, side: str = "label1") -> list:
    """The major tick labels ``axis`` draws on one side (visible, not empty, in view), in order."""
    lo, hi = sorted(axis.get_view_interval())
    tol = 1e-9 * (hi - lo)
    locs = axis.get_majorticklocs()
    labels = sorted(
        (
            (loc, getattr(tick, side))
            for loc, tick in zip(locs, axis.get_major_ticks(len(locs)))
            if lo - tol <= loc <= hi + tol
        ),
        key=lambda pair: pair[0],
    )
    return [label for _, label in labels if label.get_visible() and label.get_text()]


def _labels_collide(axis, renderer) -> bool:
    """Whether two neighbouring tick labels of ``axis`` overlap, as drawn now.

    Labels turned by an angle are parallel strips: they collide when their distance across the
    strips (the step along the axis times the sine of the angle) is less than a line of their
    text is thick, one em (their font size; a label's box adds the font's leading).
    """
    import math

    for side in ("label1", "label2"):
        labels = _tick_labels(axis, side)
        boxes = [lab.get_window_extent(renderer) for lab in labels]
        for a, box_a, box_b in zip(labels, boxes, boxes[1:]):
            if axis.axis_name == "y":  # either way up (an image's rows go down)
                if max(box_b.y0 - box_a.y1, box_a.y0 - box_b.y1) < _GAP_PX:
                    return True
                continue
            sine = abs(math.sin(math.radians(a.get_rotation())))
            if sine > 0.1:
                step = abs((box_b.x0 + box_b.x1) - (box_a.x0 + box_a.x1)) / 2
                em = renderer.points_to_pixels(a.get_fontsize())
                # An em holds a glyph and the room above and below it: no gap added.
                if step * sine < em * (a.get_text().count("\n") + 1):
                    return True
            elif max(box_b.x0 - box_a.x1, box_a.x0 - box_b.x1) < _GAP_PX:
                return True
    return False


def _every_nth_formatter_class():
    class EveryNth(_delegating_formatter_class()):
        """Another formatter's tick labels, every ``n``-th one kept and the others empty."""

        def __init__(self, inner, n):
            super().__init__(inner)
            self.n = n

        def __call__(self, x, pos=None):
            return self.inner(x, pos) if pos is None or pos % self.n == 0 else ""

        def format_ticks(self, values):
            labels = self.inner.format_ticks(values)
            return [s if i % self.n == 0 else "" for i, s in enumerate(labels)]

    return EveryNth


def _names_something(label: str) -> bool:
    """Whether a tick label is a name (it has a letter outside its math) rather than a number."""
    return any(ch.isalpha() for ch in _MATH.sub("", label))


@contextlib.contextmanager
def _fitted_tick_labels(fig, renderer):
    """Tick labels that overlap their neighbours, turned upright or thinned; restored on exit.

    Labels that name something (a token under a heatmap, a model under its bars) and labels
    the chapter already turned are turned to 90 degrees and, if they still collide, drawn
    smaller, down to 80 % of their size; names are never hidden (if they still collide, the
    figure does not fit: :class:`LayoutCollapsed`). Numbers that collide are thinned: only
    every ``n``-th is shown, the smallest ``n`` with no overlap, by a formatter that wraps the
    axis' own (so a label written again at draw time, or translated, stays that one).
    """
    cls = _FORMATTER_CLASS.get("nth")
    if cls is None:
        cls = _FORMATTER_CLASS["nth"] = _every_nth_formatter_class()
    turned, formatters = [], []
    try:
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                if not axis.get_visible() or not _labels_collide(axis, renderer):
                    continue
                labels = _tick_labels(axis)
                names = any(_names_something(lab.get_text()) for lab in labels)
                if axis.axis_name == "x" and (
                    names or any(lab.get_rotation() % 180 for lab in labels)
                ):
                    ticks = axis.get_major_ticks()
                    for lab in [t.label1 for t in ticks] + [t.label2 for t in ticks]:
                        turned.append(
                            (
                                lab,
                                lab.get_rotation(),
                                lab.get_horizontalalignment(),
                                lab.get_rotation_mode(),
                                lab.get_fontsize(),
                            )
                        )
                        lab.set(rotation=90, horizontalalignment="center", rotation_mode="default")
                    _draw_layout(fig)
                    # Every name (a token under a heatmap, a model) is data: smaller, to 80 %.
                    size = labels[0].get_fontsize()
                    while (
                        _labels_collide(axis, renderer)
                        and labels[0].get_fontsize() > 0.8 * size + 0.25
                    ):
                        for lab in [t.label1 for t in ticks] + [t.label2 for t in ticks]:
                            lab.set_fontsize(lab.get_fontsize() - 0.5)
                        _draw_layout(fig)
                    if not _labels_collide(axis, renderer):
                        continue
                if names:
                    raise LayoutCollapsed(
                        f"the tick labels {labels[0].get_text()!r} ... of a panel do not fit "
                        f"next to each other at {fig.get_figwidth() * fig.dpi:.0f} px"
                    )
                inner = axis.get_major_formatter()
                formatters.append((axis, inner, axis.isDefault_majfmt))
                for n in range(2, max(len(labels), 2) + 1):
                    axis.set_major_formatter(cls(inner, n))
                    _draw_layout(fig)
                    if not _labels_collide(axis, renderer):
                        break
        yield
    finally:
        for axis, inner, default in reversed(formatters):
            axis.set_major_formatter(inner)
            axis.isDefault_majfmt = default
        for lab, rotation, ha, mode, size in reversed(turned):
            lab.set(rotation=rotation, horizontalalignment=ha, rotation_mode=mode, fontsize=size)


def _covered(legend, ax, renderer) -> int:
    """How many of ``ax``'s lines, markers and bars ``legend`` covers, as drawn now.

    Counted as matplotlib's ``loc="best"`` counts them: lines that cross the legend's box,
    points and bars inside it.
    """
    box = legend.get_window_extent(renderer).padded(_GAP_PX)
    n = 0
    for line in ax.lines:
        if not line.get_visible():
            continue
        path = line.get_transform().transform_path(line.get_path())
        if line.get_linestyle() in ("None", "none", "", " "):
            n += int(box.count_contains(path.vertices))
        else:
            n += bool(path.intersects_bbox(box, filled=False))
    for patch in ax.patches:
        if patch.get_visible():
            n += bool(box.overlaps(patch.get_window_extent(renderer)))
    for coll in ax.collections:
        if coll.get_visible() and len(coll.get_offsets()):
            n += int(box.count_contains(coll.get_offset_transform().transform(coll.get_offsets())))
    return n


def _legends(fig) -> list:
    """``(legend, parent)`` for each visible legend: the axes' ones, then the figure's."""
    legends = [(leg, ax) for ax in fig.axes if (leg := ax.get_legend()) is not None]
    legends += [(leg, fig) for leg in fig.legends]
    return [(leg, parent) for leg, parent in legends if leg.get_visible()]


@contextlib.contextmanager
def _narrowed_legends(fig, renderer):
    """Legends wider than their axes (the figure) regrouped into fewer columns; restored on exit."""
    saved = []
    try:
        for legend, parent in _legends(fig):
            box = legend._legend_handle_box  # one VPacker per column of entries
            saved.append((legend, box._children))
            if parent is fig:
                room = fig.bbox.width
            else:
                # The axes' width without this legend: a legend wider than its axes makes
                # constrained layout squeeze them, which must not count.
                legend.set_visible(False)
                try:
                    _draw_layout(fig)
                    room = parent.get_window_extent(renderer).width
                finally:
                    legend.set_visible(True)
                _draw_layout(fig)
            columns = len(box._children)
            while columns > 1 and legend.get_window_extent(renderer).width > room:
                columns -= 1
                _regroup_legend(legend, columns)
                _draw_layout(fig)
        yield
    finally:
        for legend, columns in reversed(saved):
            legend._legend_handle_box._children = columns
            legend.stale = True


@contextlib.contextmanager
def _placed_legends(fig, renderer):
    """Axes' legends moved off the data or under their axes; restored on exit.

    (``_narrowed_legends`` gave a legend wider than its axes fewer columns first.) An axes'
    legend inside its axes that covers data is moved where ``loc="best"`` finds no
    data and, if there is no such place, below the axes: centred under its tick labels and
    axis label (an offset in inches, which the layout does not change), where constrained
    layout makes room for it, the figure taller by as much (a legend the chapter anchored
    inside its axes, ``bbox_to_anchor=(1, 0.62)``, too). An axes' legend that the chapter
    anchored outside its axes goes there too: an anchor in axes fractions (``(0.5, -0.2)``)
    is a distance in pixels that shrinks with the axes, while the tick labels and x label
    keep their size, so on a phone (shorter axes, a wrapped x label, a legend with more rows)
    the legend would cover them; beside the axes it would take the panel's width. A figure
    legend beside the panels (``"outside right ..."``, ``"outside left ..."``) goes under them
    (``"outside lower center"``) for the same reason.
    """
    from matplotlib.transforms import ScaledTranslation

    saved = []
    height = fig.get_figheight()
    try:
        for legend, parent in _legends(fig):
            saved.append((legend, legend._loc, legend._bbox_to_anchor, legend._outside_loc))
            if parent is fig:
                # Placed by constrained layout ("outside lower center", ...); one beside the
                # panels would take their width: under them, the figure taller by as much.
                if legend._outside_loc in ("left", "right") and legend._bbox_to_anchor is None:
                    legend._outside_loc, legend._loc = "lower", 8  # "outside lower center"
                    fig.set_size_inches(
                        fig.get_figwidth(),
                        fig.get_figheight() + legend.get_window_extent(renderer).height / fig.dpi,
                        forward=False,
                    )
                    _draw_layout(fig)
                continue
            outside = legend._bbox_to_anchor is not None and not _inside(legend, parent, renderer)
            if not outside:
                if not _covered(legend, parent, renderer):
                    continue
                # "best" over the whole axes (a chapter's anchor inside them is dropped too)
                legend._loc, legend._bbox_to_anchor = 0, None
                _draw_layout(fig)
                if not _covered(legend, parent, renderer):
                    continue
            under = parent.xaxis.get_tightbbox(renderer)  # tick labels and axis label
            below = parent.bbox.y0 - under.y0 if under is not None else 0.0
            drop = (max(below, 0.0) + 2 * _GAP_PX) / fig.dpi
            legend._loc = 9  # "upper center"
            legend.set_bbox_to_anchor(
                (0.5, 0.0),
                transform=parent.transAxes + ScaledTranslation(0, -drop, fig.dpi_scale_trans),
            )
            # The figure grows by the legend's height, so that the axes keep theirs.
            fig.set_size_inches(
                fig.get_figwidth(),
                fig.get_figheight() + drop + legend.get_window_extent(renderer).height / fig.dpi,
                forward=False,
            )
            _draw_layout(fig)
        yield
    finally:
        fig.set_size_inches(fig.get_figwidth(), height, forward=False)
        for legend, loc, anchor, outside in reversed(saved):
            legend._loc = loc
            legend._bbox_to_anchor = anchor
            legend._outside_loc = outside
            legend.stale = True


def _inside(legend, ax, renderer) -> bool:
    """Whether ``legend``, as drawn now, lies (mostly) inside ``ax``'s data area."""
    box = legend.get_window_extent(renderer)
    area = ax.bbox
    x0, x1 = max(box.x0, area.x0), min(box.x1, area.x1)
    y0, y1 = max(box.y0, area.y0), min(box.y1, area.y1)
    common = max(x1 - x0, 0.0) * max(y1 - y0, 0.0)
    return common > 0.5 * box.width * box.height


def _regroup_legend(legend, columns: int) -> None:
    """Lay a drawn legend's entries out in ``columns`` columns, in their order.

    ``Legend.set_ncols`` only takes effect when a legend is made; its entries (handle and
    text) are regrouped here as matplotlib groups them (``Legend._init_legend_box``).
    """
    import numpy as np
    from matplotlib.offsetbox import VPacker

    box = legend._legend_handle_box
    first = box._children[0]
    entries = [entry for column in box._children for entry in column.get_children()]
    box._children = [
        VPacker(pad=0, sep=first.sep, align=first.align, children=list(part))
        for part in np.array_split(np.array(entries, dtype=object), columns)
        if len(part)
    ]
    legend.stale = True


def _pieces(line: str) -> list[tuple[bool, str]]:
    """``(space before, piece)`` pairs: a line may break before each piece.

    A piece is a word, a math span, or one East Asian wide character; closing punctuation
    (:data:`attnbook.fonts.NO_LINE_START`) joins the piece before it and opening punctuation
    (:data:`attnbook.fonts.NO_LINE_END`) the piece after it, so no line starts with "，" or
    "）" or ends with "（".
    """
    out: list[list] = []
    space = False
    for tok in re.findall(r"\s+|(?<!\\)\$(?:\\.|[^$\\])*\$|.", line):
        if tok.isspace():
            space = True
            continue
        wide = len(tok) == 1 and unicodedata.east_asian_width(tok) in ("W", "F")
        if out and not space and not wide and not out[-1][2]:
            out[-1][1] += tok
        else:
            out.append([space, tok, wide])
        space = False
    joined: list[list] = []
    for sp, tok, wide in out:
        if joined and not sp and (tok[0] in NO_LINE_START or joined[-1][1][-1] in NO_LINE_END):
            joined[-1][1] += tok
        else:
            joined.append([sp, tok, wide])
    return [(sp, tok) for sp, tok, _ in joined]


def _wrapped(text, limit: float, renderer) -> str:
    """The string of matplotlib ``text`` broken into lines at most ``limit`` px wide.

    A piece (:func:`_pieces`) wider than that stays whole; ``text`` is left as it was.
    """
    original = text.get_text()

    upright = text.get_rotation() % 180 == 90  # a y axis' label: its length is its height

    def width(candidate: str) -> float:
        text.set_text(candidate)
        box = text.get_window_extent(renderer)
        return box.height if upright else box.width

    try:
        if width(original) <= limit:
            return original
        lines = []
        for line in original.split("\n"):
            current = ""
            for space, piece in _pieces(line):
                candidate = current + (" " if space and current else "") + piece
                if current and width(candidate) > limit:
                    lines.append(current)
                    current = piece
                else:
                    current = candidate
            lines.append(current)
        return "\n".join(lines)
    finally:
        text.set_text(original)


def figure_png(
    fig,
    language: str | None = None,
    *,
    missing: set[str] | None = None,
    glyphs: list[str] | None = None,
    width_px: int | None = None,
) -> str:
    """A matplotlib figure drawn with its labels in ``language``, as base64 PNG.

    Drawn as IPython's inline backend draws it (``bbox_inches="tight"``), with Noto Sans CJK SC
    as the fallback font for the glyphs of the default font lacks.

    Args:
        fig: a ``matplotlib.figure.Figure``.
        language: default :func:`attnbook.i18n.get_language`.
        missing: if given, receives the labels that had no translation.
        glyphs: if given, receives matplotlib's "Glyph ... missing from font(s)" messages
            instead of raising.
        width_px: if given, the figure is laid out this many CSS pixels wide for this drawing
            (:func:`relaid_out`: a phone's column), its text in the same points, and the PNG
            is exactly that wide (no ``bbox_inches="tight"``); :class:`LayoutCollapsed` if its
            panels do not fit.

    Returns:
        The base64 ``str`` of the PNG (what a notebook's ``image/png`` output holds).

    Raises:
        MissingGlyphError: if a character of a label is in no font (matplotlib would draw a
            box) and ``glyphs`` is None.
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    import logging

    language = _language(language)
    buf = io.BytesIO()
    # Mathtext reports a missing glyph through logging, plain text through warnings.
    mathtext_log = _MathtextGlyphs()
    logger = logging.getLogger("matplotlib.mathtext")
    logger.addHandler(mathtext_log)
    # The CJK font has one weight: a bold title drawn with it falls back to regular, which
    # matplotlib logs at every draw (into the chapter's output). Expected; not shown.
    fonts_log = logging.getLogger("matplotlib.font_manager")
    fonts_log.addFilter(_no_weight_fallback)
    resize = relaid_out(fig, width_px) if width_px is not None else contextlib.nullcontext(fig)
    try:
        with (
            translated_figure(fig, language, missing=missing),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            # Inside: the warnings of relaid_out's layout pass are caught too (a glyph missing
            # there is missing in the drawing).
            with resize:
                # At a given width the drawing is exactly that wide (constrained layout keeps
                # the text inside); "tight" could make it wider than the phone's column.
                fig.canvas.print_figure(
                    buf, format="png", bbox_inches="tight" if width_px is None else None
                )
    finally:
        logger.removeHandler(mathtext_log)
        fonts_log.removeFilter(_no_weight_fallback)
    if width_px is not None and any(str(w.message).startswith(_COLLAPSED) for w in caught):
        # The layout pass fitted, the drawing did not (its renderer measured the text wider).
        raise LayoutCollapsed(f"the figure's panels do not fit {width_px} px when drawn")
    lost = sorted(
        {str(w.message) for w in caught if "missing from font" in str(w.message)}
        | set(mathtext_log.messages)
    )
    if lost and glyphs is None:
        raise MissingGlyphError(f"figure drawn in {language}: {'; '.join(lost)}")
    if glyphs is not None:
        glyphs.extend(f"{language}: {m}" for m in lost)
    for w in caught:
        if "missing from font" in str(w.message):
            continue  # anything else is the caller's business, as it would have been
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _no_weight_fallback(record) -> bool:
    return "Failed to find font weight" not in record.getMessage()


class _MathtextGlyphs(__import__("logging").Handler):
    """Collects matplotlib.mathtext's "does not have a glyph" messages (a box drawn instead)."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if "does not have a glyph" in msg:
            self.messages.append(f"{msg} (missing from font, in mathtext)")


def figure_bundle(fig, languages: tuple[str, ...]) -> dict:
    """The editions payload (:data:`~attnbook.edition_outputs.MIME`) of a matplotlib figure.

    Each edition gets the figure as drawn for the column and, if it is wider than a phone's
    column (:data:`PHONE_PX`), drawn again for the phone (:func:`relaid_out`: the panels
    narrower, the text the same size), unless its panels do not fit there
    (:class:`LayoutCollapsed`: then no edition gets a phone drawing). The book's renderer
    gives the browser both, and it shows the phone drawing in a narrow window.

    Returns:
        ``{"kind": "image/png", "editions": {language: base64 PNG}, "narrow": {language:
        base64 PNG, PHONE_PX wide} (empty for a figure no wider than that), "too_wide": whether
        its panels do not fit a phone (then "narrow" is empty and the page lets the column's
        drawing scroll sideways on a phone), "untranslated": [labels], "missing_glyphs":
        [matplotlib's messages]}``; the book's renderer turns the
        last two into build warnings (errors in the strict build).

    Raises:
        TypeError: if ``fig`` is not a matplotlib ``Figure`` or ``languages`` is not a tuple or
            list of language codes (a single string is refused, not read letter by letter).
        ValueError: if a language is not one of :data:`attnbook.i18n.LANGUAGES`.
    """
    from matplotlib.figure import Figure

    check_instance(fig, Figure, "fig", _MPL_FIGURE)
    for i, lang in enumerate(check_strings(languages, "languages")):
        check_choice(lang, f"languages[{i}]", i18n.LANGUAGES)
    missing: set[str] = set()
    glyphs: list[str] = []
    drawn = _drawn.pop("image/png", None)
    out, narrow, too_wide = {}, {}, False
    for lang in languages:
        if drawn is not None and drawn[0] is fig and not fig.stale and lang == "en":
            # The English drawing this output's image/png already holds: not drawn again.
            out[lang] = drawn[1]
            glyphs.extend(drawn[2])
        else:
            out[lang] = figure_png(fig, lang, missing=missing, glyphs=glyphs)
    if fig.get_figwidth() * fig.dpi > PHONE_PX:
        try:
            for lang in languages:
                narrow[lang] = figure_png(
                    fig, lang, missing=missing, glyphs=glyphs, width_px=PHONE_PX
                )
        except LayoutCollapsed:
            # Too many panels or too much text for a phone's column: the phone shows the
            # column's drawing at its own size, in a box that scrolls sideways (every edition).
            narrow, too_wide = {}, True
    return {
        "kind": "image/png",
        "editions": out,
        "narrow": narrow,
        "too_wide": too_wide,
        "untranslated": sorted(missing),
        "missing_glyphs": list(dict.fromkeys(glyphs)),
    }


def _book_png(fig) -> str:
    """The ``image/png`` of a figure in a book build: the English drawing.

    Kept for :func:`figure_bundle` (which IPython calls next, for the same output), so that
    each edition's rendering is drawn once.
    """
    glyphs: list[str] = []
    png = figure_png(fig, "en", glyphs=glyphs)
    _drawn["image/png"] = (fig, png, glyphs)
    # Drawn as it is now: any change to one of its artists marks it stale again (matplotlib
    # passes the flag up to the figure), and figure_bundle then draws it anew.
    fig.stale = False
    return png


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def install_display() -> bool:
    """Make matplotlib figures shown in this IPython kernel carry the edition renderings.

    In a book build (:func:`attnbook.i18n.editions` not empty) a figure's output gets a
    :data:`~attnbook.edition_outputs.MIME` entry with one PNG per edition (its usual English
    ``image/png`` stays, for JupyterLab). Live, with :func:`attnbook.i18n.get_language` not
    English, the ``image/png`` itself is drawn in that language. Called by
    :func:`attnbook.viz.use_book_style` and, once this module is imported, by
    :func:`attnbook.i18n.set_language`; a no-op outside IPython.

    Returns:
        True when a formatter was installed.
    """
    ip = _ipython()
    if ip is None or not hasattr(ip, "display_formatter"):
        return False
    from IPython.core.formatters import BaseFormatter
    from matplotlib.figure import Figure
    from traitlets import Unicode

    _load_inline_backend()
    formatters = ip.display_formatter.formatters
    langs = i18n.editions()
    if langs:
        if MIME not in formatters:

            class _EditionsFormatter(BaseFormatter):
                format_type = Unicode(MIME)
                _return_type = (dict,)
                print_method = Unicode("_repr_attnbook_editions_")

            formatters[MIME] = _EditionsFormatter(parent=ip.display_formatter)
        formatters[MIME].for_type(Figure, lambda fig: figure_bundle(fig, langs))
        if "en" in langs and "image/png" in formatters:
            # Runs before the MIME formatter (IPython calls them in the order they were added).
            formatters["image/png"].for_type(Figure, _book_png)
        return True
    language = i18n.get_language()
    png = formatters.get("image/png")
    if png is None:
        return False
    if language == "en":
        if "png" in _saved_png:  # back to the formatter the figure had before
            old = _saved_png.pop("png")
            if old is None:
                png.pop(Figure, None)
            else:
                png.for_type(Figure, old)
        return False
    old = png.for_type(Figure, lambda fig: figure_png(fig, language))
    _saved_png.setdefault("png", old)
    return True


def _load_inline_backend() -> None:
    """Load IPython's inline matplotlib backend now, if it is the backend.

    The inline backend, when pyplot first loads it, removes every display formatter of
    ``Figure`` but its own (``IPython.core.pylabtools.select_figure_formats``): loaded after
    :func:`install_display`, it would silently drop the edition renderings.
    """
    import matplotlib as mpl

    backend = mpl.get_backend()
    if "inline" in backend.lower():
        import matplotlib.pyplot as plt

        plt.switch_backend(backend)


# attnbook.i18n.set_language re-installs the display hook for the new language.
i18n.on_language_change(install_display)
