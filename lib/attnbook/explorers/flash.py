"""Step through FlashAttention: the tiled loop's online softmax, one tile at a time.

The explorer replays the steps that :func:`attnbook.flash.tiled_attention_steps` records
(:class:`attnbook.flash.TileStep`) on a small fixed example (:func:`flash_example`: ``L = S = 8``
positions, head width ``D = 4``, one number per value so that a row's accumulator ``a_i`` is
one number). For a block size of queries and of keys, the causal mask on or off and a step,
:func:`flash_step_data` computes (the library's tiled loop and plain attention, language-free)
and :func:`draw_flash_step` draws, every label made in the reader's language
(:func:`flash_step_figure` does both in one call):

* the ``L x S`` score matrix: the tiles already computed shaded, the tile of this step outlined,
  the tiles not yet visited blank (their scores do not exist yet), and in this tile the score
  that raised a row's running maximum;
* for each query row ``i`` of this step's block, the running maximum ``m_i`` and denominator
  ``ell_i`` and the accumulator ``a_i`` before and after the step, and the rescale factor
  ``r_i = exp(m_i - m_i_new)`` that multiplied the old ``ell_i`` and ``a_i``;
* once the last key block of a row block is done, ``max |a_i / ell_i - out_i|`` against plain
  softmax attention (:func:`attnbook.attention.scaled_dot_product_attention`).

The notation is the book's (appendix A: ``m_i``, ``ell_i``; chapter 12: ``r_i``, ``a_i``). This
module imports no torch.

Source: Dao et al., "FlashAttention" (2022), Algorithm 1; Milakov & Gimelshein, "Online
normalizer calculation for softmax" (2018).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fonts, i18n
from ..attention import scaled_dot_product_attention
from ..checks import check_bool, check_choice, check_instance, check_int, check_seed
from ..flash import tiled_attention_steps
from ..viz import COLUMN_PX, GREY, ORANGE
from .base import Control, Explorer
from .layout import caption_title, panel_grid

__all__ = [
    "SEQ_LEN",
    "HEAD_DIM",
    "BLOCK_SIZES",
    "PROGRESS_VALUES",
    "STATE_COLUMNS",
    "flash_example",
    "FlashStepData",
    "flash_step_data",
    "draw_flash_step",
    "flash_step_figure",
    "progress_step",
    "flash_explorer",
]

#: Number of queries ``L`` and of keys ``S`` of the explorer's example.
SEQ_LEN = 8
#: Head width ``D`` of the example's queries and keys (values have one number each).
HEAD_DIM = 4
#: The block sizes offered for the queries (rows of a tile) and the keys (columns).
BLOCK_SIZES = (2, 4, 8)
#: The most steps any setting takes, ``(SEQ_LEN / 2) ** 2`` (tiles of 2 x 2).
MAX_STEPS = (SEQ_LEN // min(BLOCK_SIZES)) ** 2
#: The stops of the progress slider, in sixteenths of the loop (1 .. 16); stop ``p`` shows
#: step ``ceil(p * n / 16)`` of a setting's ``n`` steps (see ``progress_step``).
PROGRESS_VALUES = tuple(range(1, MAX_STEPS + 1))
_PROGRESS_LABELS = tuple(f"{int(100 * p / MAX_STEPS + 0.5)}%" for p in PROGRESS_VALUES)
#: The columns of the state panel, in order (trace 1's ``x``).
STATE_COLUMNS = ("m_old", "m_new", "rescale", "l_old", "l_new", "a_old", "a_new")
_STATE_TICKS = (
    "m<sub>i</sub><br>before",
    "m<sub>i</sub><br>after",
    "r<sub>i</sub>",
    "ℓ<sub>i</sub><br>before",
    "ℓ<sub>i</sub><br>after",
    "a<sub>i</sub><br>before",
    "a<sub>i</sub><br>after",
)
# Status of a score cell (trace 0's z) and its colour.
_NOT_YET, _DONE, _CURRENT, _HIDDEN, _NEW_MAX = 0, 1, 2, 3, 4
_STATUS_COLORS = ("#ffffff", "#e2e2e2", "#fde2c4", "#b5b5b5", "#f0a35e")
# State cell: plain, the row's maximum rose, no number (a row outside this step's block).
_PLAIN, _ROSE, _EMPTY = 0, 1, 2
_STATE_COLORS = ("#eef2f8", "#f0a35e", "#ffffff")
_MINUS = "\u2212"
#: Font size in px of the figure's title (shown as the caption above the plot).
TITLE_PX = 14
#: Font size in px of the numbers in the cells and the state columns' ticks, at most (less
#: when the cells are narrower) and at least.
CELL_FONT_PX, MIN_FONT_PX = 12, 9


def _steps_colorscale(colors) -> list:
    """A plotly colorscale that gives integer ``z = 0, 1, ...`` the colours in order."""
    n = len(colors)
    scale = []
    for i, c in enumerate(colors):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def _num(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals and a true minus sign; ``-inf`` as −∞."""
    if x == -np.inf:
        return _MINUS + "∞"
    text = f"{x:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text.replace("-", _MINUS)


def _rows(start: int, stop: int) -> str:
    return f"{start}–{stop - 1}" if stop - start > 1 else str(start)


def flash_example(seed: int = 0):
    """The explorer's fixed example: queries, keys and values drawn from one seeded generator.

    ``rng = numpy.random.default_rng(seed)``; then, in this order, ``q`` =
    ``rng.standard_normal((SEQ_LEN, HEAD_DIM))``, ``k`` the same shape and ``v`` =
    ``rng.standard_normal((SEQ_LEN, 1))``. The scale of the scores is the default
    ``1 / sqrt(HEAD_DIM)``.

    Args:
        seed: seed of the generator, an integer >= 0.

    Returns:
        ``(q, k, v)``: float64 arrays ``(L, D)``, ``(S, D)`` and ``(S, 1)`` with
        ``L = S =`` :data:`SEQ_LEN` and ``D =`` :data:`HEAD_DIM`.

    Raises:
        TypeError: if ``seed`` is not an integer.
        ValueError: if ``seed`` is negative.
    """
    rng = np.random.default_rng(check_seed(seed))
    q = rng.standard_normal((SEQ_LEN, HEAD_DIM))  # (L, D)
    k = rng.standard_normal((SEQ_LEN, HEAD_DIM))  # (S, D)
    v = rng.standard_normal((SEQ_LEN, 1))  # (S, Dv = 1)
    return q, k, v


def progress_step(progress: int, n_steps: int) -> int:
    """The step that the progress slider's stop ``progress`` shows: ``ceil(progress * n / 16)``.

    ``progress`` counts sixteenths of the loop (:data:`PROGRESS_VALUES`); ``n_steps`` is the
    number of steps ``n`` of a setting, a divisor of 16. Every stop is a real step of every
    tiling, the last stop is step ``n`` and each step gets ``16 / n`` stops.

    Args:
        progress: the stop, 1 .. 16 (sixteenths of the loop).
        n_steps: the number of steps of the tiling, 1, 2, 4, 8 or 16.

    Returns:
        The step, an ``int`` in 1 .. ``n_steps``.

    Raises:
        TypeError: if an argument is not an integer.
        ValueError: if ``progress`` is outside 1 .. 16 or ``n_steps`` does not divide 16.
    """
    progress = check_int(progress, "progress", 1, MAX_STEPS)
    n_steps = check_int(n_steps, "n_steps", 1, MAX_STEPS)
    if MAX_STEPS % n_steps:
        raise ValueError(f"n_steps must divide {MAX_STEPS}, got {n_steps}")
    return -(-progress * n_steps // MAX_STEPS)


def _check_setting(block_q, block_k, causal, step):
    # Integer controls are integers, as step is: 2.0 is a TypeError, not block size 2.
    check_choice(check_int(block_q, "block_q", None), "block_q", BLOCK_SIZES)
    check_choice(check_int(block_k, "block_k", None), "block_k", BLOCK_SIZES)
    causal = check_bool(causal, "causal")
    step = check_int(step, "step", 1, MAX_STEPS)
    return int(block_q), int(block_k), causal, step


@dataclass(frozen=True)
class FlashStepData:
    """One step of the tiled loop, computed (what :func:`draw_flash_step` draws).

    Attributes:
        step: the step shown, ``k`` in 1 .. ``n_steps``.
        n_steps: the number of steps ``n`` of the tiling.
        asked: the step asked for (greater than ``n_steps`` only in a direct call, clamped).
        causal: whether the causal mask applies.
        q_start, q_stop, k_start, k_stop: this step's tile (query rows, key columns), half-open.
        status: int8 ``(L, S)`` status of each score cell (0 not yet computed, 1 computed in an
            earlier step, 2 in this step's tile, 3 hidden by the causal mask, 4 the score in
            this tile that raised its row's running maximum).
        scores: float64 ``(L, S)`` the scores computed so far (``-inf`` where hidden), ``nan``
            where not computed yet.
        state: float64 ``(L, 7)`` the columns :data:`STATE_COLUMNS` for the rows of this
            step's block, ``nan`` for the other rows.
        state_z: int8 ``(L, 7)``: 1 where a row's maximum rose (its ``m_i`` after and ``r_i``),
            2 where the cell is empty, 0 otherwise.
        rose: the rows whose maximum rose in this step.
        max_diff: after the last key block of a query block, ``max |a_i / ell_i - out_i|`` over
            its rows against plain attention, else ``None``.
        first_of_row: this tile is the first key block of its rows.
        hidden_tile: every score of this tile is hidden by the causal mask.
        meta: the numbers unrounded (trace 1's ``meta``; see :func:`flash_step_figure`).
    """

    step: int
    n_steps: int
    asked: int
    causal: bool
    q_start: int
    q_stop: int
    k_start: int
    k_stop: int
    status: np.ndarray
    scores: np.ndarray
    state: np.ndarray
    state_z: np.ndarray
    rose: list
    max_diff: float | None
    first_of_row: bool
    hidden_tile: bool
    meta: dict


def flash_step_data(
    block_q: int = 2, block_k: int = 2, causal: bool = False, step: int = 1, *, seed: int = 0
) -> FlashStepData:
    """Compute one step of the tiled loop on :func:`flash_example`.

    Runs :func:`attnbook.flash.tiled_attention_steps` (``block_q``, ``block_k``, ``causal``,
    default scale) and plain attention
    (:func:`attnbook.attention.scaled_dot_product_attention`), and keeps step
    ``k = min(step, n)`` of the ``n`` steps (steps go through the key blocks of the first query
    block, then of the next, ...).

    Args:
        block_q: queries per block, one of :data:`BLOCK_SIZES`.
        block_k: keys per block, one of :data:`BLOCK_SIZES`.
        causal: apply the causal mask (query ``i`` sees keys ``j <= i``).
        step: the step to show, 1 .. 16; clamped to the number of steps ``n``.
        seed: seed of :func:`flash_example`.

    Returns:
        :class:`FlashStepData`.

    Raises:
        TypeError: if ``block_q``, ``block_k``, ``step`` or ``seed`` is not an integer
            (``2.0`` included) or ``causal`` not a bool.
        ValueError: if a block size is not one of :data:`BLOCK_SIZES`, or ``step`` or ``seed``
            is out of range.
    """
    block_q, block_k, causal, step = _check_setting(block_q, block_k, causal, step)
    q, k, v = flash_example(seed)
    _, steps = tiled_attention_steps(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    plain = scaled_dot_product_attention(q, k, v, causal=causal)  # (L, 1)
    return _step_data(steps, plain, step, causal)


def _step_data(steps, plain, step, causal) -> FlashStepData:
    n = len(steps)
    k_ix = min(step, n)
    st = steps[k_ix - 1]
    L, S = plain.shape[0], SEQ_LEN
    first_of_row = st.k_start == 0
    prev = None if first_of_row else steps[k_ix - 2]
    rows = list(range(st.q_start, st.q_stop))
    m_old, m_new, r = st.m_old, st.m_new, st.rescale  # (bq,)
    l_old = np.zeros_like(st.l) if prev is None else prev.l  # (bq,)
    a_old = np.zeros_like(st.acc[:, 0]) if prev is None else prev.acc[:, 0]  # (bq,)
    a_new = st.acc[:, 0]  # (bq,)
    rose = [i for i, (a, b) in zip(rows, zip(m_old, m_new)) if b > a and not first_of_row]
    last_of_row = st.k_stop == S
    max_diff = float(np.abs(st.out - plain[st.q_start : st.q_stop]).max()) if last_of_row else None

    # Score matrix: what has been computed so far.
    status = np.full((L, S), _NOT_YET, dtype=np.int8)  # (L, S)
    scores = np.full((L, S), np.nan)  # (L, S)
    for s in steps[:k_ix]:
        here = s is st
        scores[s.q_start : s.q_stop, s.k_start : s.k_stop] = s.scores  # (bq, bk)
        tile = status[s.q_start : s.q_stop, s.k_start : s.k_stop]  # (bq, bk) view
        tile[...] = np.where(s.scores == -np.inf, _HIDDEN, _CURRENT if here else _DONE)
    for a, i in enumerate(rows):
        if i in rose:  # the score of this tile that is the row's new maximum
            b = int(np.argmax(st.scores[a]))
            status[i, st.k_start + b] = _NEW_MAX

    # State of the rows of this block: before, after, and the rescale.
    cols = {
        "m_old": m_old,
        "m_new": m_new,
        "rescale": r,
        "l_old": l_old,
        "l_new": st.l,
        "a_old": a_old,
        "a_new": a_new,
    }
    state = np.full((L, len(STATE_COLUMNS)), np.nan)  # (L, 7)
    state_z = np.full((L, len(STATE_COLUMNS)), _EMPTY, dtype=np.int8)  # (L, 7)
    for a, i in enumerate(rows):
        for c, name in enumerate(STATE_COLUMNS):
            state[i, c] = float(cols[name][a])
            state_z[i, c] = _ROSE if (i in rose and name in ("m_new", "rescale")) else _PLAIN
    meta = {
        "step": k_ix,
        "n_steps": n,
        "q_start": st.q_start,
        "q_stop": st.q_stop,
        "k_start": st.k_start,
        "k_stop": st.k_stop,
        "rose": rose,
        "max_diff": max_diff,
    }
    for name in STATE_COLUMNS:
        meta[name] = [None if x == -np.inf else float(x) for x in cols[name]]
    return FlashStepData(
        step=k_ix,
        n_steps=n,
        asked=step,
        causal=causal,
        q_start=st.q_start,
        q_stop=st.q_stop,
        k_start=st.k_start,
        k_stop=st.k_stop,
        status=status,
        scores=scores,
        state=state,
        state_z=state_z,
        rose=rose,
        max_diff=max_diff,
        first_of_row=first_of_row,
        hidden_tile=bool(np.all(st.scores == -np.inf)),
        meta=meta,
    )


def draw_flash_step(
    data: FlashStepData, *, language: str | None = None, height: int = 420, width: int = COLUMN_PX
):
    """Draw one step of the tiled loop for ``width`` px, every label in ``language``.

    Trace 0 (left, the score matrix ``(L, S)``): ``z`` is :attr:`FlashStepData.status`;
    ``text`` is the score ``s_ij`` of every cell computed so far (−∞ where hidden) and empty
    elsewhere. The tile of this step is outlined (``layout.shapes``). Trace 1 (right, one row
    per query ``i``): ``x`` is :data:`STATE_COLUMNS`, ``text`` the numbers (two decimals) for
    the rows of this step's block and empty for the others, ``z`` is
    :attr:`FlashStepData.state_z` and ``meta`` :attr:`FlashStepData.meta`. The panels sit side
    by side in the book's column and one under the other on a phone
    (:func:`attnbook.explorers.layout.panel_grid`); annotations 0 and 1 are their titles. The
    title (the caption above the plot) says on its first line "Step k of n" and which rows
    meet which keys, on the next what the step did, then (after the last key block of the
    rows) the check against plain attention, and last what the colours mean.

    Args:
        data: from :func:`flash_step_data`.
        language: one of :data:`attnbook.i18n.LANGUAGES` (default
            :func:`attnbook.i18n.get_language`).
        height: figure height in px with the panels side by side, >= 10.
        width: the width in px the figure is drawn at (default
            :data:`attnbook.viz.COLUMN_PX`; below
            :data:`attnbook.explorers.layout.STACK_BELOW_PX` the panels are stacked).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``data`` is not a :class:`FlashStepData`, or ``height`` or ``width``
            not an integer.
        ValueError: if ``height`` < 10, ``width`` leaves no room for the panels or
            ``language`` is unknown.
    """
    import plotly.graph_objects as go

    check_instance(data, FlashStepData, "data", "flash_step_data")
    _ = i18n.labels(language)
    height = check_int(height, "height", 10)
    L, S = data.status.shape
    text = [["" if np.isnan(x) else _num(x) for x in row] for row in data.scores]
    t_state = [["" if np.isnan(x) else _num(x) for x in row] for row in data.state]
    keys = [str(j) for j in range(S)]
    queries = [str(i) for i in range(L)]
    state_ticks = [_(t) for t in _STATE_TICKS]

    # One column of cells per key (left) and per state column (right): equal cells.
    grid = panel_grid(
        width,
        [_("scores s<sub>ij</sub> computed so far"), _("running state of this block's rows")],
        column_widths=[S, len(STATE_COLUMNS)],
        height=height,
        title_size=13,
        left=60,
        right=12,
        spacing_px=50,
        bottom=10,
    )
    fig, (left, right) = grid.figure, grid.cells
    lay = fig.layout
    plot_w = width - lay.margin.l - lay.margin.r
    cell_px = min(
        (lay.xaxis.domain[1] - lay.xaxis.domain[0]) * plot_w / S,
        (lay.xaxis2.domain[1] - lay.xaxis2.domain[0]) * plot_w / len(STATE_COLUMNS),
    )
    widest = max(fonts.text_width(t, 1) for row in text + t_state for t in row)
    cell_font = max(MIN_FONT_PX, min(CELL_FONT_PX, int((cell_px - 4) / widest)))
    tick_widest = max(fonts.text_width(line, 1) for t in state_ticks for line in t.split("<br>"))
    tick_font = max(MIN_FONT_PX, min(CELL_FONT_PX, int((cell_px - 4) / tick_widest)))
    fig.add_trace(
        go.Heatmap(
            z=data.status,
            x=keys,
            y=queries,
            zmin=-0.5,
            zmax=len(_STATUS_COLORS) - 0.5,
            colorscale=_steps_colorscale(_STATUS_COLORS),
            showscale=False,
            xgap=1,
            ygap=1,
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=cell_font),
            name=_("scores"),
            hovertemplate=_("query i = %{y}, key j = %{x}: s = %{text}<extra></extra>"),
        ),
        **left,
    )
    fig.add_trace(
        go.Heatmap(
            z=data.state_z,
            x=list(STATE_COLUMNS),
            y=queries,
            zmin=-0.5,
            zmax=len(_STATE_COLORS) - 0.5,
            colorscale=_steps_colorscale(_STATE_COLORS),
            showscale=False,
            xgap=1,
            ygap=1,
            text=t_state,
            texttemplate="%{text}",
            textfont=dict(size=cell_font),
            name=_("running state"),
            meta=data.meta,
            hovertemplate=_("row i = %{y}: %{text}<extra></extra>"),
        ),
        **right,
    )

    # Tile grid and the outline of this step's tile (data coordinates of the category axes).
    bq, bk = data.q_stop - data.q_start, data.k_stop - data.k_start
    line = dict(color="#555555", width=1)
    shapes = [
        dict(
            type="line", xref="x", yref="y", x0=j - 0.5, x1=j - 0.5, y0=-0.5, y1=L - 0.5, line=line
        )
        for j in range(bk, S, bk)
    ]
    shapes += [
        dict(
            type="line", xref="x", yref="y", x0=-0.5, x1=S - 0.5, y0=i - 0.5, y1=i - 0.5, line=line
        )
        for i in range(bq, L, bq)
    ]
    shapes.append(
        dict(
            type="rect",
            xref="x",
            yref="y",
            x0=data.k_start - 0.5,
            x1=data.k_stop - 0.5,
            y0=data.q_start - 0.5,
            y1=data.q_stop - 0.5,
            line=dict(color=ORANGE, width=3),
        )
    )

    # Title: which step, what it did; each line a whole sentence.
    rows_text = _rows(data.q_start, data.q_stop)
    keys_text = _rows(data.k_start, data.k_stop)
    k_ix, n = data.step, data.n_steps
    if data.asked > n:  # only a direct call: the explorer's progress stops are all real steps
        head = _(
            "Step {k} of {n} (asked {asked}, past the end)<br>rows i = {rows}, keys j = {keys}",
            k=k_ix,
            n=n,
            asked=data.asked,
            rows=rows_text,
            keys=keys_text,
        )
    else:
        head = _(
            "Step {k} of {n}: rows i = {rows}, keys j = {keys}",
            k=k_ix,
            n=n,
            rows=rows_text,
            keys=keys_text,
        )
    if data.first_of_row:
        what = _(
            "first key block of these rows: m<sub>i</sub> starts at −∞, so "
            "r<sub>i</sub> = 0 (nothing to rescale)"
        )
    elif data.hidden_tile:
        what = _(
            "all keys of this tile are hidden: nothing changes, r<sub>i</sub> = 1 "
            "(a kernel skips it)"
        )
    elif data.rose:
        what = _.ngettext(
            "m<sub>i</sub> rose in row {rows}: the old ℓ<sub>i</sub> and a<sub>i</sub> are "
            "multiplied by r<sub>i</sub> < 1",
            "m<sub>i</sub> rose in rows {rows}: the old ℓ<sub>i</sub> and a<sub>i</sub> are "
            "multiplied by r<sub>i</sub> < 1",
            len(data.rose),
            rows=", ".join(str(i) for i in data.rose),
        )
    else:
        what = _(
            "no row's maximum rose: r<sub>i</sub> = 1, ℓ<sub>i</sub> and a<sub>i</sub> "
            "only add this tile's terms"
        )
    title = f"{head}<br>{what}"
    if data.max_diff is not None:
        diff = "0" if data.max_diff == 0 else f"{data.max_diff:.1e}".replace("-", _MINUS)
        title += "<br>" + _.ngettext(
            "row {rows} done: a<sub>i</sub> / ℓ<sub>i</sub> equals plain softmax attention, "
            "max |difference| = {diff}",
            "rows {rows} done: a<sub>i</sub> / ℓ<sub>i</sub> equals plain softmax attention, "
            "max |difference| = {diff}",
            bq,
            rows=rows_text,
            diff=diff,
        )
    if data.causal:
        key = _(
            "orange outline: this step's tile · grey: computed in earlier steps · "
            "blank: not computed yet · dark orange: a new row maximum · dark grey: "
            "hidden (causal)"
        )
    else:
        key = _(
            "orange outline: this step's tile · grey: computed in earlier steps · "
            "blank: not computed yet · dark orange: a new row maximum"
        )
    # What the colours mean is prose too: the caption's last line, in grey.
    title += f"<br><span style='color:{GREY}'>{key}</span>"
    # The title becomes the caption above the plot (base.take_title).
    caption_title(fig, title, size=TITLE_PX)
    fig.update_layout(shapes=shapes, showlegend=False)
    fig.update_xaxes(type="category", showgrid=False, tickangle=0)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False, title_text=_("query i"))
    fig.update_xaxes(title_text=_("key j"), **left)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(STATE_COLUMNS),
        ticktext=state_ticks,
        tickfont=dict(size=tick_font),
        **right,
    )
    if not grid.stacked:  # side by side, the rows are the left panel's
        fig.update_yaxes(title_text=None, **right)
    return fig


def flash_step_figure(
    block_q: int = 2,
    block_k: int = 2,
    causal: bool = False,
    step: int = 1,
    *,
    seed: int = 0,
    height: int = 420,
    language: str | None = None,
    width: int = COLUMN_PX,
):
    """Figure of the FlashAttention explorer: one step of the tiled loop on :func:`flash_example`.

    :func:`draw_flash_step` of :func:`flash_step_data`: step ``k = min(step, n)`` of the ``n``
    steps of the tiling (the title then says which step was asked for). Trace 1's ``meta``
    holds the numbers unrounded: ``step``, ``n_steps``, ``q_start``, ``q_stop``, ``k_start``,
    ``k_stop``, the seven columns of :data:`STATE_COLUMNS` as lists over the block's rows
    (``m_old`` is ``None`` for −∞), ``rose`` (the rows whose maximum rose) and ``max_diff``.

    Args:
        block_q: queries per block, one of :data:`BLOCK_SIZES`.
        block_k: keys per block, one of :data:`BLOCK_SIZES`.
        causal: apply the causal mask (query ``i`` sees keys ``j <= i``).
        step: the step to show, 1 .. 16; clamped to the number of steps ``n`` of this setting.
        seed: seed of :func:`flash_example`.
        height: figure height in pixels, >= 10.
        language: see :func:`draw_flash_step`.
        width: the width in px the figure is drawn at (see :func:`draw_flash_step`).

    Returns:
        ``plotly.graph_objects.Figure``.

    Raises:
        TypeError: if ``block_q``, ``block_k``, ``step``, ``seed`` or ``height`` is not an
            integer (``2.0`` included) or ``causal`` not a bool.
        ValueError: if a block size is not one of :data:`BLOCK_SIZES`, or ``step``, ``seed``
            or ``height`` is out of range.
    """
    block_q, block_k, causal, step = _check_setting(block_q, block_k, causal, step)
    height = check_int(height, "height", 10)
    data = flash_step_data(block_q, block_k, causal, step, seed=seed)
    return draw_flash_step(data, language=language, height=height, width=width)


def flash_explorer(
    block_q: int = 2, block_k: int = 2, causal: bool = False, step: int = 2, *, seed: int = 0
) -> Explorer:
    """Step through FlashAttention (chapter 12): the online softmax of the tiled loop, tile by tile.

    Controls: ``block_q`` and ``block_k`` (sliders over :data:`BLOCK_SIZES`), ``causal`` (a
    checkbox) and ``progress`` (a slider over :data:`PROGRESS_VALUES`, sixteenths of the loop
    shown as 6% .. 100%): stop ``p`` shows step :func:`progress_step` ``(p, n)`` of the
    setting's ``n`` steps, so every stop is a real step of every tiling, 100% is the last step
    and the title says "Step k of n". The figure is :func:`flash_step_figure` on
    :func:`flash_example`; the static page precomputes all 288 settings (98 distinct figures,
    one per step of each tiling and mask).

    Args:
        block_q: initial query block size, one of :data:`BLOCK_SIZES`.
        block_k: initial key block size, one of :data:`BLOCK_SIZES`.
        causal: initial state of the causal mask.
        step: initial step of the initial tiling, 1 .. 16, clamped to its ``n`` steps; the
            slider starts at the stop ``16 * step / n`` (the first stop that shows it).
        seed: seed of :func:`flash_example`.

    Returns:
        :class:`~attnbook.explorers.base.Explorer`.

    Raises:
        TypeError: if ``block_q``, ``block_k``, ``step`` or ``seed`` is not an integer or
            ``causal`` not a bool.
        ValueError: if a block size is not one of :data:`BLOCK_SIZES`, or ``step`` or
            ``seed`` is out of range.
    """
    block_q, block_k, causal, step = _check_setting(block_q, block_k, causal, step)
    seed = check_seed(seed)
    q, k, v = flash_example(seed)
    runs: dict = {}
    computed: dict = {}

    def compute(block_q, block_k, causal, progress):
        key = (block_q, block_k, causal)
        if key not in runs:  # one run of the tiled loop per setting
            _, steps = tiled_attention_steps(
                q, k, v, causal=causal, block_q=block_q, block_k=block_k
            )
            runs[key] = steps, scaled_dot_product_attention(q, k, v, causal=causal)
        steps, plain = runs[key]
        step = progress_step(progress, len(steps))
        if (*key, step) not in computed:  # 16 / n stops show each step
            computed[(*key, step)] = _step_data(steps, plain, step, causal)
        return computed[(*key, step)]

    n0 = (SEQ_LEN // block_q) * (SEQ_LEN // block_k)
    progress0 = MAX_STEPS * min(step, n0) // n0

    controls = [
        Control("block_q", "query block (rows)", "slider", BLOCK_SIZES, block_q),
        Control("block_k", "key block (columns)", "slider", BLOCK_SIZES, block_k),
        Control("causal", "causal mask", "toggle", (False, True), causal),
        Control(
            "progress", "progress", "slider", PROGRESS_VALUES, progress0, labels=_PROGRESS_LABELS
        ),
    ]
    return Explorer(
        controls, title="FlashAttention, step by step", compute=compute, draw=draw_flash_step
    )
