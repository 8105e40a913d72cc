"""Figure builders for the book: plotly figures drawn from what ``attnbook`` computes.

Two kinds of things live here:

* :func:`show` wraps a plotly figure in a displayable whose output carries both a static
  ``text/html`` rendering (for the built book, where plotly.js is loaded once per page from
  ``_static`` as ``window.Plotly``) and ``application/vnd.plotly.v1+json`` (for JupyterLab).
* The book's figure style, shared by every figure and explorer: :data:`FONT`, the colours
  :data:`BLUE`, :data:`ORANGE`, :data:`GREY`, :data:`GREEN`, :data:`EMPTY_TEMPLATE` and
  :func:`axis_style`.
* The *render functions* of the explorers in :mod:`attnbook.explorers`:
  :func:`scaling_figure`. It takes the explorer's control values and returns a
  ``plotly.graph_objects.Figure`` computed with the library (``attnbook.scaling``); the live
  widgets and the precomputed static frames call the same function, so the two front-ends
  cannot drift apart. The other explorers' figures live in their explorer modules (names that
  moved are still readable here).

Nothing here loads plotly.js, inlines it, or points at a CDN: the page provides it.

plotly is imported lazily (``import attnbook`` pulls in nothing but NumPy).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass

import numpy as np

from .checks import check_int, check_real
from .scaling import SaturationStats, saturation_stats, score_samples

__all__ = [
    "StaticFigure",
    "show",
    "when_plotly_ready_js",
    "EMPTY_TEMPLATE",
    "FONT",
    "BLUE",
    "ORANGE",
    "GREY",
    "GREEN",
    "axis_style",
    "COLUMN_PX",
    "FIG_DPI",
    "FIG_WIDTH_IN",
    "figsize",
    "use_book_style",
    "ScalingData",
    "scaling_data",
    "score_histogram",
    "scaling_figure",
]

#: Names that lived here and moved to their concept's module: ``name -> (module, name)``.
#: Reading one here still works (:func:`__getattr__`).
_MOVED = {
    "MASK_TYPES": ("attnbook.masks", "MASK_TYPES"),
    "PAD_SIDES": ("attnbook.masks", "PAD_SIDES"),
    "explorer_keep_mask": ("attnbook.masks", "keep_mask_by_name"),
    "mask_scores": ("attnbook.explorers.masks", "mask_scores"),
    "mask_figure": ("attnbook.explorers.masks", "mask_figure"),
    "HIGHLIGHT_COLORS": ("attnbook.explorers.pretrained", "HIGHLIGHT_COLORS"),
    "token_attention_figure": ("attnbook.explorers.pretrained", "token_attention_figure"),
}


def __getattr__(name: str):
    """A name that moved to its concept's module (:data:`_MOVED`), read at its old path."""
    if name in _MOVED:
        import importlib

        module, attr = _MOVED[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The template of the book's figures, which is empty. The figures set their style directly in the
#: layout (:data:`FONT`, :func:`axis_style`), because building plotly's stock templates costs
#: ~30 ms per figure, too slow for an explorer's precomputed grid.
EMPTY_TEMPLATE: dict = {}
#: Seconds a static figure waits for ``window.Plotly`` before it says that plotly.js is missing.
PLOTLY_WAIT_SECONDS = 60

#: Font of the book's figures (plotly ``layout.font``).
FONT = dict(family="Helvetica, Arial, sans-serif", size=13)
#: The book's first data colour (measured values, the published model).
BLUE = "#1f5fa8"
#: The book's second data colour (expected values, the chosen setting).
ORANGE = "#d9730d"
#: Reference lines and secondary text.
GREY = "#555555"
#: A third data colour.
GREEN = "#2e7d32"

#: Width in CSS pixels of the book's text column at a 1280 px wide window (the Sphinx Book
#: Theme's article column, measured in Chromium). A figure drawn wider is shrunk on the page,
#: and so is its text.
COLUMN_PX = 688
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
    # Figures in the reader's language: Chinese labels in the Chinese edition (attnbook.i18n).
    from . import i18n

    i18n.install_display()


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
        gridcolor="#e6e6e6", zerolinecolor="#b0b0b0", linecolor="#444444", showline=True,
        ticks="outside", tickcolor="#444444", automargin=True,
    )
    style.update(kwargs)
    return style


# --------------------------------------------------------------------------------------------
# Static display of plain figures
# --------------------------------------------------------------------------------------------


def when_plotly_ready_js(body: str, *, target_id: str | None = None) -> str:
    """Wrap JavaScript so that it runs once ``window.Plotly`` exists.

    Pages may load plotly.js with ``defer`` (after inline scripts have run), so an inline
    script that calls ``Plotly`` straight away would fail. The wrapper runs ``body`` at once when
    plotly.js is already there, and otherwise polls every 50 ms for up to
    :data:`PLOTLY_WAIT_SECONDS`; after that it writes a message into the element ``target_id``
    (if given) instead of failing silently.

    Args:
        body: JavaScript statements.
        target_id: id of the element that receives the "plotly.js did not load" message.

    Returns:
        A self-contained JavaScript statement (an immediately invoked function).
    """
    target = json.dumps(target_id)
    tries = int(PLOTLY_WAIT_SECONDS * 1000 / 50)
    return (
        "(function () {\n"
        "  function run() {\n" + body + "\n  }\n"
        "  if (window.Plotly) { run(); return; }\n"
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

        if not isinstance(figure, go.Figure):
            raise TypeError(
                f"figure must be a plotly.graph_objects.Figure, got {type(figure).__name__}"
            )
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

        def wrap(match: re.Match) -> str:
            nonlocal n_wrapped
            attrs, body = match.group(1), match.group(2)
            if "Plotly.newPlot" not in body:
                return match.group(0)
            n_wrapped += 1
            return f"<script{attrs}>{when_plotly_ready_js(body, target_id=div_id)}</script>"

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


# --------------------------------------------------------------------------------------------
# The scaling explorer's figure: score variance and softmax saturation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingData:
    """What the scaling explorer draws for one setting, all computed by :mod:`attnbook.scaling`.

    Attributes:
        d_k: head dimension.
        scaled: whether scores are divided by ``sqrt(d_k)``.
        n_keys: keys per query in the softmax panel.
        scores: float64 ``(n_samples,)`` scores from
            ``score_samples(d_k, n_samples, scaled=scaled, rng=seed)``.
        variance: sample variance of ``scores`` (ddof = 1), as
            :func:`attnbook.scaling.score_variance` computes it.
        expected_variance: ``1`` when scaled, else ``d_k`` (Vaswani et al., 2017, footnote 4).
        stats: ``saturation_stats(d_k, n_keys, n_draws, scaled=scaled, rng=seed + 1)``.
    """

    d_k: int
    scaled: bool
    n_keys: int
    scores: np.ndarray
    variance: float
    expected_variance: float
    stats: SaturationStats


def scaling_data(
    d_k: int, n_keys: int = 16, *, scaled: bool = True, n_samples: int = 2000,
    n_draws: int = 200, seed: int = 0,
) -> ScalingData:
    """Compute the scaling explorer's numbers for one setting.

    Args:
        d_k: head dimension, >= 1.
        n_keys: keys per query for the softmax panel, >= 1.
        scaled: divide scores by ``sqrt(d_k)``.
        n_samples: number of (q, k) pairs in the score histogram.
        n_draws: number of (q, K) draws averaged in the softmax panel.
        seed: the histogram uses ``rng=seed``, the softmax panel ``rng=seed + 1``.

    Returns:
        :class:`ScalingData`.

    Raises:
        ValueError: if an argument is not a positive integer (from :mod:`attnbook.scaling`).
    """
    scores = score_samples(d_k, n_samples, scaled=scaled, rng=seed)
    stats = saturation_stats(d_k, n_keys, n_draws, scaled=scaled, rng=seed + 1)
    return ScalingData(
        d_k=int(d_k),
        scaled=bool(scaled),
        n_keys=int(n_keys),
        scores=scores,
        variance=float(np.var(scores, ddof=1)) if scores.size > 1 else 0.0,
        expected_variance=1.0 if scaled else float(d_k),
        stats=stats,
    )


def score_histogram(scores, n_bins: int = 41) -> tuple[np.ndarray, np.ndarray, float]:
    """Density histogram of scores over ``n_bins`` equal bins spanning ``[-m, m]``.

    ``m`` is the largest ``|score|``, so the bins are symmetric about 0 and hold every sample.

    Args:
        scores: ``(n,)`` real scores.
        n_bins: number of bins, >= 1.

    Returns:
        ``(centres, density, width)``: bin centres ``(n_bins,)``, probability densities
        ``(n_bins,)`` (``sum(density) * width == 1``) and the bin width.

    Raises:
        TypeError: if ``n_bins`` is not an integer.
        ValueError: if ``n_bins`` < 1.
    """
    n_bins = check_int(n_bins, "n_bins", 1)
    scores = np.asarray(scores, dtype=np.float64)
    m = float(np.max(np.abs(scores))) if scores.size else 1.0
    m = m if m > 0 else 1.0
    edges = np.linspace(-m, m, n_bins + 1)
    density, edges = np.histogram(scores, bins=edges, density=True)
    centres = (edges[:-1] + edges[1:]) / 2
    return centres, density, float(edges[1] - edges[0])


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def scaling_figure(
    d_k: int = 64, scaled: bool = True, n_keys: int = 16, *, n_samples: int = 2000,
    n_draws: int = 200, seed: int = 0, x_range: float | None = None, height: int = 460,
):
    """Figure of the scaling explorer: the score distribution and the softmax weights.

    Left panel: density histogram of ``q . k`` (or ``q . k / sqrt(d_k)``) for i.i.d.
    standard-normal ``q, k`` in ``R^{d_k}``, with the measured variance, and the normal density
    with the expected variance (``d_k`` unscaled, 1 scaled) as a dashed line. Right panel: the
    softmax weights of one query over ``n_keys`` keys, sorted in decreasing order and averaged
    over ``n_draws`` draws, with the mean largest weight and the mean entropy (nats; uniform is
    ``log n_keys``). Source: Vaswani et al. (2017), eq. 1 and footnote 4.

    Trace order (the explorers and tests rely on it): 0 the histogram (``meta`` holds
    ``variance`` and ``expected_variance``), 1 the expected normal density, 2 the mean sorted
    weights (``meta`` holds ``mean_max_weight`` and ``mean_entropy``), 3 the uniform level
    ``1 / n_keys``.

    Args:
        d_k: head dimension, >= 1.
        scaled: divide scores by ``sqrt(d_k)``.
        n_keys: keys per query, >= 1.
        n_samples: scores in the histogram (see :func:`scaling_data`).
        n_draws: draws averaged in the softmax panel (see :func:`scaling_data`).
        seed: seed of the histogram; the softmax panel uses ``seed + 1``.
        x_range: the score axis shows ``[-x_range, x_range]``; ``None`` fits the data. The
            explorer fixes it within each mode so that dragging ``d_k`` shows the spread.
        height: figure height in pixels.

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``d_k``, ``n_keys``, ``n_samples``, ``n_draws`` or ``height`` is not an
            integer, or ``x_range`` is not a real number.
        ValueError: if ``d_k``, ``n_keys``, ``n_samples`` or ``n_draws`` is < 1, ``height``
            < 10 (plotly's least), or ``x_range`` is not a finite positive number.
    """
    import plotly.graph_objects as go

    height = check_int(height, "height", 10)
    if x_range is not None:
        x_range = check_real(x_range, "x_range", minimum=0.0, strict=True)
    data = scaling_data(
        d_k, n_keys, scaled=scaled, n_samples=n_samples, n_draws=n_draws, seed=seed
    )
    stats = data.stats
    centres, density, width = score_histogram(data.scores)
    sigma = math.sqrt(data.expected_variance)
    grid = np.linspace(-5 * sigma, 5 * sigma, 81)
    pdf = np.exp(-(grid**2) / (2 * data.expected_variance)) / math.sqrt(
        2 * math.pi * data.expected_variance
    )
    ranks = np.arange(1, data.n_keys + 1)
    score_name = "q·k/√d<sub>k</sub>" if data.scaled else "q·k (unscaled)"
    expected_name = "N(0, 1)" if data.scaled else f"N(0, d<sub>k</sub> = {data.d_k})"

    traces = [
        go.Bar(
            x=centres, y=density, width=width, name="measured scores",
            marker=dict(color=BLUE, line=dict(width=0)), opacity=0.75,
            xaxis="x", yaxis="y",
            meta=dict(variance=data.variance, expected_variance=data.expected_variance),
            hovertemplate="score %{x:.3g}<br>density %{y:.3g}<extra>measured</extra>",
        ),
        go.Scatter(
            x=grid, y=pdf, mode="lines", name=f"expected {expected_name}",
            line=dict(color=ORANGE, dash="dash", width=2), xaxis="x", yaxis="y",
            hovertemplate="score %{x:.3g}<br>density %{y:.3g}<extra>expected</extra>",
        ),
        go.Bar(
            x=ranks, y=stats.mean_sorted_weights, name="mean weight (sorted)",
            marker=dict(color=BLUE), xaxis="x2", yaxis="y2",
            meta=dict(mean_max_weight=stats.mean_max_weight, mean_entropy=stats.mean_entropy),
            hovertemplate="rank %{x}<br>mean weight %{y:.3f}<extra></extra>",
        ),
        go.Scatter(
            x=[0.5, data.n_keys + 0.5], y=[1 / data.n_keys] * 2, mode="lines",
            name=f"uniform 1/S = {_fmt(1 / data.n_keys)}",
            line=dict(color=GREY, dash="dot", width=2), xaxis="x2", yaxis="y2",
            hoverinfo="skip",
        ),
    ]
    annotations = [
        dict(
            text=f"Scores {score_name}, d<sub>k</sub> = {data.d_k}",
            x=0.215, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
            showarrow=False, font=dict(size=14),
        ),
        dict(
            text=f"Softmax weights of one query over S = {data.n_keys} keys",
            x=0.785, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
            showarrow=False, font=dict(size=14),
        ),
        dict(
            text=(
                f"variance {_fmt(data.variance)}<br>expected {_fmt(data.expected_variance)}"
                f"<br>({len(data.scores)} samples)"
            ),
            x=0.01, y=0.97, xref="paper", yref="paper", xanchor="left", yanchor="top",
            showarrow=False, align="left", bgcolor="rgba(255,255,255,0.8)",
        ),
        dict(
            text=(
                f"mean max weight {_fmt(stats.mean_max_weight)}"
                f"<br>mean entropy {_fmt(stats.mean_entropy)} nats"
                f"<br>(uniform: log {data.n_keys} = {_fmt(math.log(data.n_keys))})"
                f"<br>mean of {stats.n_draws} draws"
            ),
            x=0.99, y=0.97, xref="paper", yref="paper", xanchor="right", yanchor="top",
            showarrow=False, align="right", bgcolor="rgba(255,255,255,0.8)",
        ),
    ]
    # Head room over the tallest bar or curve: the statistics box (top left) stays clear of it.
    y_top = 1.5 * max(float(np.max(density)), float(np.max(pdf)))
    x_axis = axis_style(domain=[0.0, 0.43], title=dict(text="score"), zeroline=True, anchor="y")
    if x_range is not None:
        x_axis["range"] = [-float(x_range), float(x_range)]
    else:
        x_axis["autorange"] = True
    layout = go.Layout(
        template=EMPTY_TEMPLATE,
        font=FONT,
        paper_bgcolor="white",
        plot_bgcolor="white",
        height=height,
        margin=dict(l=60, r=20, t=50, b=90),
        xaxis=x_axis,
        yaxis=axis_style(title=dict(text="probability density"), anchor="x",
                         range=[0, y_top]),
        xaxis2=axis_style(
            domain=[0.57, 1.0], title=dict(text="rank of the weight (1 = largest)"),
            anchor="y2", range=[0.5, data.n_keys + 0.5],
        ),
        yaxis2=axis_style(title=dict(text="mean attention weight"), anchor="x2", range=[0, 1.02]),
        annotations=annotations,
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.24, yanchor="top"),
        bargap=0.05,
    )
    return go.Figure(data=traces, layout=layout)

