"""Figure builders for the book: plotly figures drawn from what ``attnbook`` computes.

Two kinds of things live here:

* :func:`show` wraps a plotly figure in a displayable whose output carries both a static
  ``text/html`` rendering (for the built book, where plotly.js is loaded once per page from
  ``_static`` as ``window.Plotly``) and ``application/vnd.plotly.v1+json`` (for JupyterLab).
* The book's figure style, shared by every figure and explorer: :data:`FONT`, the colours
  :data:`BLUE`, :data:`ORANGE`, :data:`GREY`, :data:`GREEN`, :data:`EMPTY_TEMPLATE` and
  :func:`axis_style`.

Each explorer's figure lives in its explorer module (:mod:`attnbook.explorers`) and what it
computes in the library's core modules; the names that lived here are still readable at their
old path (``attnbook.viz.scaling_figure`` and the others of ``attnbook._aliases.MOVED``).

Nothing here loads plotly.js, inlines it, or points at a CDN: the page provides it.

plotly is imported lazily (``import attnbook`` pulls in nothing but NumPy).
"""

from __future__ import annotations

import json
import re
import uuid

from . import _aliases, fonts
from .checks import check_instance, check_real

__all__ = [
    "StaticFigure",
    "show",
    "when_plotly_ready_js",
    "PLOTLY_WAIT_SECONDS",
    "FONT_WAIT_MS",
    "EMPTY_TEMPLATE",
    "FONT",
    "BLUE",
    "ORANGE",
    "ORANGE_TEXT",
    "GREY",
    "GREEN",
    "axis_style",
    "legend_below",
    "COLUMN_PX",
    "PHONE_PX",
    "FIG_DPI",
    "FIG_WIDTH_IN",
    "figsize",
    "use_book_style",
]

#: Names that moved out of this module (to their concept's module) are still read here,
#: through the one table of old paths, :data:`attnbook._aliases.MOVED`.
__getattr__ = _aliases.moved_getattr(__name__)


#: The template of the book's figures, which is empty. The figures set their style directly in the
#: layout (:data:`FONT`, :func:`axis_style`), because building plotly's stock templates costs
#: ~30 ms per figure, too slow for an explorer's precomputed grid.
EMPTY_TEMPLATE: dict = {}
#: Seconds a static figure waits for ``window.Plotly`` before it says that plotly.js is missing.
PLOTLY_WAIT_SECONDS = 60
#: Milliseconds a static figure waits for the book's web font before it draws without it (the
#: explorers wait as long: FONT_WAIT_MS in explorers/static/explorer.js).
FONT_WAIT_MS = 3000

#: Font of the book's figures (plotly ``layout.font``): the family the built book ships
#: (:mod:`attnbook.fonts`), whose metrics the figures measure their text with.
FONT = dict(family=fonts.CSS_FAMILY, size=13)
#: The book's first data colour (measured values, the published model).
BLUE = "#1f5fa8"
#: The book's second data colour (expected values, the chosen setting).
ORANGE = "#d9730d"
#: The orange of text on white (:data:`ORANGE` is too light for text: contrast 3.3; this is
#: 5.1, WCAG AA), e.g. a warning in an explorer's caption.
ORANGE_TEXT = "#b35300"
#: Reference lines and secondary text.
GREY = "#555555"
#: A third data colour.
GREEN = "#2e7d32"

#: Width in CSS pixels of the book's text column at a 1280 px wide window (the Sphinx Book
#: Theme's article column, measured in Chromium). A figure drawn wider is shrunk on the page,
#: and so is its text.
COLUMN_PX = 688
#: Width in CSS pixels of the book's text column on a phone (a 390 px wide window, measured in
#: Chromium): the explorers draw each figure for it too.
PHONE_PX = 358
#: Dots per inch of the book's matplotlib figures (one dot is one CSS pixel on the page).
FIG_DPI = 100
#: Width in inches of a matplotlib figure that fills the column (``COLUMN_PX / FIG_DPI``).
FIG_WIDTH_IN = COLUMN_PX / FIG_DPI


def figsize(aspect: float = 0.5, *, width: float = 1.0) -> tuple[float, float]:
    """Matplotlib ``figsize`` of a figure shown at its drawn size in the book's column.

    Args:
        aspect: Height over width of the figure, a positive number.
        width: Fraction of the column the figure spans, in (0, 1].

    Returns:
        ``(width_in, height_in)`` in inches, to pass as ``plt.subplots(figsize=...)``.

    Raises:
        TypeError: If ``aspect`` or ``width`` is not a real number.
        ValueError: If ``aspect`` is not positive or ``width`` is outside (0, 1].
    """
    aspect = check_real(aspect, "aspect", minimum=0, strict=True)
    width = check_real(width, "width", minimum=0, strict=True)
    if width > 1:
        raise ValueError(f"width must be in (0, 1] (a fraction of the column), got {width}")
    w = FIG_WIDTH_IN * width
    return (w, w * aspect)


def use_book_style() -> None:
    """Set matplotlib's defaults to the book's: column-wide figures at one dot per CSS pixel.

    At :data:`FIG_DPI` one point is 100/72 CSS pixels, so tick labels (10 pt) are 14 px on the
    page and labels, titles and legends 14-18 px, when a figure is drawn with :func:`figsize` —
    the size at which the book shows it. Layout is ``constrained`` so labels do not collide.
    Call it once, in a chapter's first code cell.
    """
    import matplotlib as mpl

    mpl.rcParams.update(
        {
            "figure.figsize": figsize(0.5),
            "figure.dpi": FIG_DPI,
            "savefig.dpi": FIG_DPI,
            "font.size": 11,
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "xtick.labelsize": 10,
            "ytick.labelsize": 10,
            "legend.fontsize": 10,
            "figure.titlesize": 13,
            "figure.constrained_layout.use": True,
        }
    )
    # Figures in the reader's language: Chinese labels in the Chinese edition.
    from . import mpl_figures

    mpl_figures.install_display()


def axis_style(**kwargs) -> dict:
    """The axis style of the book's figures, for a plotly ``layout.xaxis``/``yaxis`` entry.

    A light grid, a dark axis line and ticks outside, with ``automargin`` on; every figure of
    :mod:`attnbook.viz` and :mod:`attnbook.explorers` draws its axes with it.

    Args:
        **kwargs: plotly axis properties (``domain``, ``title``, ``type``, ``range``, ...);
            they are added to the style and override it where they overlap.

    Returns:
        A new ``dict`` of axis properties.
    """
    style = dict(
        gridcolor="#e6e6e6",
        zerolinecolor="#b0b0b0",
        linecolor="#444444",
        showline=True,
        ticks="outside",
        tickcolor="#444444",
        automargin=True,
    )
    style.update(kwargs)
    return style


def legend_below(**kwargs) -> dict:
    """A horizontal legend centred at the bottom of the figure, under the x-axis titles.

    The legend is placed in container coordinates (``yref="container"``, ``y=0``): plotly
    reserves its height below the plot area, under the tick labels and axis titles that
    ``automargin`` already makes room for, however tall those turn out in the reader's font.
    A legend placed in paper coordinates (``y=-0.2``) sits at a fixed fraction of the plot
    height instead, and lands on the x-axis title when the font or the height changes.

    Args:
        **kwargs: plotly legend properties; they override the placement where they overlap.

    Returns:
        A new ``dict`` for plotly's ``layout.legend``.
    """
    legend = dict(
        orientation="h", x=0.5, xanchor="center", yref="container", y=0.0, yanchor="bottom"
    )
    legend.update(kwargs)
    return legend


# --------------------------------------------------------------------------------------------
# Static display of plain figures
# --------------------------------------------------------------------------------------------


def when_plotly_ready_js(
    body: str, *, target_id: str | None = None, font_text: str | None = None
) -> str:
    """Wrap JavaScript so that it runs once ``window.Plotly`` (and the figure font) is there.

    Pages may load plotly.js with ``defer`` (after inline scripts have run), so an inline
    script that calls ``Plotly`` straight away would fail. The wrapper runs ``body`` at once when
    plotly.js is already there, and otherwise polls every 50 ms for up to
    :data:`PLOTLY_WAIT_SECONDS`; after that it writes a message into the element ``target_id``
    (if given) instead of failing silently.

    With ``font_text``, ``body`` also waits (at most :data:`FONT_WAIT_MS` ms) until the faces
    of :data:`FONT`'s family that those characters need have loaded: plotly measures each
    label once, when it draws, and labels measured in the fallback font overlap once the
    book's web font arrives. A page without that font (a notebook) draws at once.

    Args:
        body: JavaScript statements.
        target_id: id of the element that receives the "plotly.js did not load" message.
        font_text: the characters the figure draws (any order, repeats allowed).

    Returns:
        A self-contained JavaScript statement (an immediately invoked function).

    Raises:
        TypeError: if ``body``, ``target_id`` or ``font_text`` is not a string (or ``None``
            where allowed).
    """
    for name, value, optional in (
        ("body", body, False),
        ("target_id", target_id, True),
        ("font_text", font_text, True),
    ):
        if not (isinstance(value, str) or (optional and value is None)):
            raise TypeError(
                f"{name} must be a string{' or None' if optional else ''}, got "
                f"{type(value).__name__}"
            )
    target = json.dumps(target_id).replace("<", "\\u003c")  # written into a <script>
    tries = int(PLOTLY_WAIT_SECONDS * 1000 / 50)
    if font_text is None:
        run = "  function run() {\n" + body + "\n  }\n"
    else:
        run = (
            "  function draw() {\n" + body + "\n  }\n"
            "  function run() {\n"
            "    var fonts = document.fonts, done = false;\n"
            "    function go() { if (!done) { done = true; draw(); } }\n"
            "    if (!fonts || typeof fonts.load !== 'function') { go(); return; }\n"
            f"    setTimeout(go, {FONT_WAIT_MS});\n"
            f"    fonts.load({json.dumps(str(FONT['size']) + 'px ' + FONT['family'])}, "
            + json.dumps(font_text).replace("<", "\\u003c")
            + ").then(go, go);\n"
            "  }\n"
        )
    return (
        "(function () {\n" + run + "  if (window.Plotly) { run(); return; }\n"
        "  var tries = 0;\n"
        "  var timer = setInterval(function () {\n"
        "    if (window.Plotly) { clearInterval(timer); run(); }\n"
        f"    else if (++tries > {tries}) {{\n"
        "      clearInterval(timer);\n"
        f"      var el = {target} && document.getElementById({target});\n"
        "      if (el) { el.textContent = 'This figure needs plotly.js, which did not load.'; }\n"
        "    }\n"
        "  }, 50);\n"
        "})();"
    )


_SCRIPT_RE = re.compile(r"<script([^>]*)>(.*?)</script>", re.DOTALL)


class StaticFigure:
    """A plotly figure displayed as static HTML (book) and as plotly JSON (JupyterLab).

    Create it with :func:`show`. Its IPython output bundle holds:

    * ``text/html``: ``fig.to_html(include_plotlyjs=False, full_html=False)`` whose drawing
      script is wrapped by :func:`when_plotly_ready_js`, so it works whether plotly.js is loaded
      before or after the figure (``defer``). plotly.js is never inlined.
    * ``application/vnd.plotly.v1+json``: the figure's data, layout and config, rendered by
      JupyterLab's plotly renderer.
    * ``text/plain``: a one-line description.

    Attributes:
        figure: the ``plotly.graph_objects.Figure``.
        config: plotly config dict used for both renderings: ``{"displaylogo": False,
            "responsive": True}`` updated with the ``config`` passed in.

    Raises:
        TypeError: if ``figure`` is not a ``plotly.graph_objects.Figure``.
    """

    def __init__(self, figure, config: dict | None = None):
        import plotly.graph_objects as go

        check_instance(figure, go.Figure, "figure", "plotly.graph_objects.Figure()")
        self.figure = figure
        self.config = {"displaylogo": False, "responsive": True, **(config or {})}

    def to_html(self) -> str:
        """The static HTML fragment (no plotly.js inside; it expects ``window.Plotly``).

        Returns:
            An HTML ``str``: the figure's ``<div>`` (a fresh ``attnbook-fig-<hex>`` id on each
            call) and its one drawing script, wrapped by :func:`when_plotly_ready_js`.

        Raises:
            RuntimeError: if plotly's ``to_html`` output does not hold exactly one
                ``Plotly.newPlot`` script (a changed plotly template), rather than ship a blank
                figure.
        """
        div_id = "attnbook-fig-" + uuid.uuid4().hex[:12]
        raw = self.figure.to_html(
            include_plotlyjs=False, full_html=False, div_id=div_id, config=self.config
        )
        n_wrapped = 0
        # Every character the figure may draw (its JSON holds more, which costs nothing).
        drawn = json.dumps(json.loads(self.figure.to_json()), ensure_ascii=False)
        font_text = "".join(sorted(set(drawn)))

        def wrap(match: re.Match) -> str:
            nonlocal n_wrapped
            attrs, body = match.group(1), match.group(2)
            if "Plotly.newPlot" not in body:
                return match.group(0)
            n_wrapped += 1
            script = when_plotly_ready_js(body, target_id=div_id, font_text=font_text)
            return f"<script{attrs}>{script}</script>"

        out = _SCRIPT_RE.sub(wrap, raw)
        if n_wrapped != 1:  # plotly changed its HTML template: better fail than ship a blank figure
            raise RuntimeError(
                f"expected one Plotly.newPlot script in plotly's to_html output, found {n_wrapped}"
            )
        return out

    def _plotly_json(self) -> dict:
        spec = json.loads(self.figure.to_json())  # plotly's encoder turns NumPy into lists
        spec["config"] = dict(self.config)
        return spec

    def _repr_mimebundle_(self, include=None, exclude=None):
        title = self.figure.layout.title.text or "untitled"
        bundle = {
            "text/plain": f"<plotly figure: {title}>",
            "text/html": self.to_html(),
            "application/vnd.plotly.v1+json": self._plotly_json(),
        }
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle


def show(fig, *, config: dict | None = None) -> StaticFigure:
    """Return a displayable for a non-interactive plotly figure in a chapter.

    Make it the last expression of a cell (or pass it to ``IPython.display.display``). The built
    book renders its ``text/html`` (plotly.js comes from the page's ``_static``), JupyterLab its
    ``application/vnd.plotly.v1+json``.

    Args:
        fig: a ``plotly.graph_objects.Figure``.
        config: extra plotly config (merged over ``{"displaylogo": False, "responsive": True}``).

    Returns:
        :class:`StaticFigure`.

    Raises:
        TypeError: if ``fig`` is not a plotly ``Figure``.
    """
    return StaticFigure(fig, config)
