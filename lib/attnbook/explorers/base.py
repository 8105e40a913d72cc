"""The explorer machinery: one call, two front-ends — live ipywidgets, static HTML.

An :class:`Explorer` has a few controls (:class:`Control`) and a render function
``render(**values) -> Figure`` (from :mod:`attnbook.viz` or an explorer module of
:mod:`attnbook.explorers`, computed with the library). Displayed, its output bundle carries both

* ``application/vnd.jupyter.widget-view+json`` (with ``text/plain``): an ipywidgets layout of
  the controls and a plotly ``FigureWidget``. Every change of a control calls ``render`` again
  — a fresh computation by ``attnbook`` — and redraws the figure. JupyterLab shows this.
* ``text/html``: a static explorer for the built book. ``render`` is called for every
  combination of control values (the *grid*); the figures are embedded as JSON (floats rounded
  to 4 significant digits, identical traces and frames stored once) next to native HTML
  controls (``<input type="range">`` with a visible value, ``<select>``, a checkbox) that
  redraw with ``Plotly.react``. No kernel is needed.

The static explorer is front-end code kept as package data in ``explorers/static``: its HTML
comes from the Jinja2 template ``explorer.html.j2`` (autoescaped), its behaviour from
``explorer.js`` (``window.attnbookExplorer``: ``mount``, and ``applyPatch``, the twin of
:func:`apply_patch`, tested against it under Node) and its look from ``explorer.css``. The
built book loads the script and the stylesheet once per page (:func:`page_assets`,
``book/_ext/attnbook_explorers.py``), so each explorer there holds only its controls, plot,
JSON and a one-line call to ``attnbookExplorer.mount``, which waits until both
``window.Plotly`` and the script exist (a page may load either later). An output shown anywhere
else (a notebook front end) carries the script and stylesheet inline (``static_html(...,
assets=True)``); the first copy to run on a page is the one all its explorers use. plotly.js is
never inlined and never fetched: the page provides ``window.Plotly`` (the book loads it once
from ``_static``).

Each front-end picks its own representation (MyST-NB's render priority; JupyterLab's widget
renderer), so there is no environment switch.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import hashlib
import html as _html
import inspect
import itertools
import json
import math
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .. import edition_outputs, i18n, viz
from ..checks import check_choice, check_int
from ..printed import columns
from . import layout as _layout

__all__ = [
    "Control",
    "Explorer",
    "take_title",
    "plotly_text_html",
    "MAX_GRID",
    "MIN_TRACK_PX",
    "SLIDER_MAX_PX",
    "LABEL_CHAR_PX",
    "make_patch",
    "apply_patch",
    "page_assets",
]

#: Largest number of grid combinations an explorer precomputes for its static HTML.
MAX_GRID = 2000
#: Shortest track in px of a live slider (a person can drag it).
MIN_TRACK_PX = 150
#: Widest a live slider gets, in px (label, track and value).
SLIDER_MAX_PX = 640
#: Width in px reserved per character of a live slider's label or value (JupyterLab's 13 px
#: UI font averages about 7 px per character; 9 leaves room for wide glyphs).
LABEL_CHAR_PX = 9

_KINDS = ("slider", "toggle", "select")


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _equal_option(a, b) -> bool:
    """``a == b`` as one bool (an array compares element by element)."""
    try:
        return bool(np.all(a == b))
    except (TypeError, ValueError):  # shapes that do not compare
        return False


@dataclass
class Control:
    """One control of an explorer.

    Attributes:
        name: keyword passed to the render function.
        label: visible label (HTML allowed in the static page, plain text in the widget).
        kind: ``"slider"`` (stops over ``options``), ``"toggle"`` (a checkbox; options
            ``(False, True)``) or ``"select"`` (a drop-down).
        options: the values the control can take, in order (JSON-serialisable scalars).
        default: the initial value, one of ``options``.
        labels: text shown for each option (English ``msgid`` s of the label catalogs), or a
            function ``labels(_)`` of the language's :class:`attnbook.i18n.Labels` that returns
            them already in that language (for labels made from numbers, plurals included);
            defaults to ``str(option)``.
        plain_label: the label as plain text (ipywidgets descriptions, aria labels).
    """

    name: str
    label: str
    kind: str
    options: Sequence[Any]
    default: Any
    labels: Sequence[str] | Callable[[Any], Sequence[str]] | None = None
    plain_label: str | None = None

    def __post_init__(self):
        check_choice(self.kind, f"kind of control {self.name!r}", _KINDS)
        self.options = tuple(self.options)
        if self.kind == "toggle" and (
            self.options != (False, True) or not all(isinstance(o, bool) for o in self.options)
        ):
            raise ValueError(f"a toggle's options must be (False, True), got {self.options}")
        if not self.options:
            raise ValueError(f"control {self.name!r} has no options")
        if any(
            _equal_option(a, b) for i, a in enumerate(self.options) for b in self.options[i + 1 :]
        ):
            # (1, True) included: the static page finds a stop by ==, and would show the first
            raise ValueError(f"control {self.name!r} has equal options: {self.options}")
        # ``in`` would take True for 1 and 1 for True: a toggle's default must be a bool
        # (NumPy's too), a slider's 1 must not be True. The default is stored as the option it
        # matches (1.0 or a 0-d array 1 -> the option 1).
        matches = [
            o
            for o in self.options
            if _is_bool(self.default) == _is_bool(o)
            and not (isinstance(self.default, np.ndarray) and self.default.ndim > 0)
            and _equal_option(self.default, o)
        ]
        if not matches:
            raise ValueError(
                f"{self.name}={self.default!r} is not one of the allowed values {self.options}"
            )
        self.default = matches[0]
        if self.labels is None:
            self.labels = tuple(str(o) for o in self.options)
        self._make_labels = self.labels if callable(self.labels) else None
        if self._make_labels is not None:
            self.labels = self._make_labels(i18n.labels("en"))
        self.labels = tuple(self.labels)
        if len(self.labels) != len(self.options):
            raise ValueError(
                f"control {self.name!r} has {len(self.options)} options but "
                f"{len(self.labels)} labels"
            )
        if self.plain_label is None:
            self.plain_label = self.label

    def translated(self, language: str, missing: set | None = None) -> "Control":
        """This control with its label and option labels in ``language`` (a copy).

        Args:
            language: one of :data:`attnbook.i18n.LANGUAGES`.
            missing: if given, receives the labels that had no translation.
        """
        if language == "en":
            return self
        sink = missing if missing is not None else set()
        if self.kind == "toggle":
            # A toggle shows a checkbox and on/off (the static spec's toggle_text), not labels.
            labels = self.labels
        elif self._make_labels is not None:
            with i18n.collect_missing(sink):
                labels = tuple(self._make_labels(i18n.labels(language)))
            if len(labels) != len(self.options):
                raise ValueError(
                    f"control {self.name!r}: its labels function gave "
                    f"{len(labels)} labels for {len(self.options)} options"
                )
        else:
            labels = tuple(_label(t, language, sink) for t in self.labels)
        out = dataclasses.replace(
            self,
            label=_label(self.label, language, sink),
            plain_label=_label(self.plain_label, language, sink),
            labels=labels,
        )
        out._make_labels = None
        return out

    def slider_min_px(self) -> int:
        """Smallest width in px of the live slider (label, longest value and track).

        The track gets :data:`MIN_TRACK_PX`; the label and the value are counted at
        :data:`LABEL_CHAR_PX` px per character.
        """
        label = columns(self.plain_label or "") * LABEL_CHAR_PX + 12
        value = max(columns(t) for t in self.labels) * LABEL_CHAR_PX + 16
        return int(label + value + MIN_TRACK_PX)

    def make_widget(self):
        """The ipywidgets control for the live explorer.

        Returns:
            A new ``ipywidgets.SelectionSlider`` (``kind="slider"``; a row of its own, width
            100 % up to :data:`SLIDER_MAX_PX` px and at least :meth:`slider_min_px`, so its
            track is at least :data:`MIN_TRACK_PX` px), ``ipywidgets.Checkbox`` (``"toggle"``)
            or ``ipywidgets.Dropdown`` (``"select"``), set to the default value and labelled
            with the plain-text label.
        """
        import ipywidgets as w

        style = {"description_width": "initial"}
        layout = w.Layout(width="auto", min_width="220px", margin="2px 24px 2px 0")
        pairs = list(zip(self.labels, self.options))
        if self.kind == "slider":
            # A row of its own, as wide as the output (up to SLIDER_MAX_PX): in a row of
            # auto-width controls the label and the value take most of a 220 px slider and
            # leave a track of a few px.
            return w.SelectionSlider(
                options=pairs,
                value=self.default,
                description=self.plain_label,
                continuous_update=False,
                style=style,
                layout=w.Layout(
                    width="100%",
                    max_width=f"{SLIDER_MAX_PX}px",
                    min_width=f"{self.slider_min_px()}px",
                    margin="2px 0",
                ),
            )
        if self.kind == "toggle":
            return w.Checkbox(
                value=bool(self.default),
                description=self.plain_label,
                indent=False,
                style=style,
                layout=layout,
            )
        return w.Dropdown(
            options=pairs,
            value=self.default,
            description=self.plain_label,
            style=style,
            layout=layout,
        )


_PLOTLY_TAG = re.compile(r"<(/?)([a-zA-Z]+)([^>]*)>")
_COLOR_STYLE = re.compile(r"""style\s*=\s*['"]\s*(color\s*:\s*[#\w(),.%\s]+?)\s*;?\s*['"]""")


def plotly_text_html(text: str) -> str:
    """Plotly's pseudo-HTML (a figure title) as safe HTML for the page.

    Kept: ``<br>``, ``<b>``, ``<i>``, ``<em>``, ``<sub>``, ``<sup>`` and a ``<span>``'s colour;
    any other tag is dropped and every other character is escaped (a title may quote tokens a
    model read). The kept tags come out balanced: a tag left open is closed at the end, and a
    closing tag closes the tags opened inside it (one with nothing to close is dropped), so no
    bold or colour runs past the caption into the page.
    """
    out, pos, opened = [], 0, []
    for m in _PLOTLY_TAG.finditer(text):
        out.append(_html.escape(_html.unescape(text[pos : m.start()]), quote=False))
        pos = m.end()
        close, tag, attrs = m.group(1), m.group(2).lower(), m.group(3)
        if tag == "br":
            out.append("<br>")
        elif tag not in ("b", "i", "em", "sub", "sup", "span"):
            continue
        elif close:
            if tag in opened:
                while True:
                    last = opened.pop()
                    out.append(f"</{last}>")
                    if last == tag:
                        break
        elif tag == "span":
            color = _COLOR_STYLE.search(attrs)
            out.append(f'<span style="{_html.escape(color.group(1))}">' if color else "<span>")
            opened.append(tag)
        else:
            out.append(f"<{tag}>")
            opened.append(tag)
    out.append(_html.escape(_html.unescape(text[pos:]), quote=False))
    return "".join(out) + "".join(f"</{t}>" for t in reversed(opened))


def take_title(fig: dict) -> tuple[dict, str]:
    """A figure without its title, and the title as HTML for a caption above the plot.

    A title is prose: in HTML the browser wraps it at the width it is shown, in any language,
    where inside the plot it must be fitted by hand. The top margin that held the title is
    given back (the figure gets shorter by as much, so the plot area keeps its height).

    Args:
        fig: plotly JSON (``{"data", "layout"}``); not changed.

    Returns:
        ``(figure, caption)``: a copy of the figure with no title, and the title as safe HTML
        (:func:`plotly_text_html`; ``""`` when it had none).
    """
    layout = dict(fig.get("layout") or {})
    title = layout.pop("title", None)
    text = (title.get("text") if isinstance(title, dict) else title) or ""
    if not text:
        return {**fig, "layout": layout}, ""
    font = (title.get("font") or {}) if isinstance(title, dict) else {}
    size = float(font.get("size") or (layout.get("font") or {}).get("size") or 13) * (
        1 if font.get("size") else 1.4
    )
    margin = dict(layout.get("margin") or {})
    top = float(margin.get("t", 100))
    margin["t"] = max(20, round(top - _layout.title_room(text, size)))
    layout["margin"] = margin
    layout["height"] = round(float(layout.get("height", 450)) - (top - margin["t"]))
    return {**fig, "layout": layout}, plotly_text_html(text)


def _label(text: str, language: str, missing: set) -> str:
    """A control's or explorer's label (an English ``msgid``) in ``language``.

    Looked up in the gettext catalogs (:class:`attnbook.i18n.Labels`); a label the catalogs lack,
    or whose translation still shows an English word (:func:`attnbook.i18n.untranslated`), is
    added to ``missing``.
    """
    with i18n.collect_missing(isolated=True) as lost:  # resolved below, or added to missing
        out = i18n.labels(language)(text)
    if lost:
        out = i18n.translate_checked(text, language, missing)  # a `{}` pattern entry, if any
    if i18n.untranslated(out):
        missing.add(text)
    return out


#: Keys of a plotly figure's JSON whose strings a reader sees (titles, annotations, legend
#: entries, tick labels, hover text and the data a hover template shows).
_LABEL_KEYS = frozenset(
    {
        "name",
        "text",
        "title",
        "hovertemplate",
        "hovertext",
        "ticktext",
        "texttemplate",
        "customdata",
    }
)


def _label_strings(node, key=None, inside=False):
    """Every string of plotly JSON ``node`` that a reader sees (see :data:`_LABEL_KEYS`)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _label_strings(v, k, inside or k in _LABEL_KEYS)
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from _label_strings(v, key, inside)
    elif isinstance(node, str) and inside and key in _LABEL_KEYS | {None}:
        yield node


def _typed_array(obj) -> np.ndarray | None:
    """The array that plotly's base64 typed-array encoding ``obj`` holds, else ``None``.

    plotly (6.x) writes a NumPy array in a figure's JSON as ``{"dtype": "f8", "bdata":
    <base64 of the raw bytes>}``, with ``"shape": "3, 4"`` when it has more than one dimension
    (``_plotly_utils.utils.to_typed_array_spec``). Any other value gives ``None``.
    """
    if not (isinstance(obj, dict) and "bdata" in obj and "dtype" in obj):
        return None
    arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
    if obj.get("shape"):
        arr = arr.reshape([int(n) for n in str(obj["shape"]).split(",")])
    return arr


def _round_json(obj, digits: int = 4):
    """A JSON-ready copy of ``obj`` with floats rounded to ``digits`` significant digits.

    Typed arrays (:func:`_typed_array`) and NumPy arrays become nested lists.
    """
    arr = _typed_array(obj)
    if arr is not None:
        return _round_json(arr, digits)
    if isinstance(obj, dict):
        return {k: _round_json(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_round_json(v, digits) for v in obj]
    if isinstance(obj, np.ndarray):
        return _round_json(obj.tolist(), digits)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if not math.isfinite(x):
            raise ValueError(f"cannot embed the non-finite number {x} in a static explorer")
        r = float(f"{x:.{digits}g}")
        return int(r) if r.is_integer() and abs(r) < 1e15 else r
    return obj


def _plain_json(obj):
    """``obj`` with typed arrays turned into nested lists, values unchanged.

    Plotly's base64 typed arrays (:func:`_typed_array`) and NumPy arrays become lists, which
    is what :func:`make_patch` compares and the static page reads.
    """
    arr = _typed_array(obj)
    if arr is not None:
        return arr.tolist()
    if isinstance(obj, dict):
        return {k: _plain_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def _json_dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


_SET, _LIST, _DEL = "$set", "$list", "$del"


def _same(a, b) -> bool:
    """``a == b`` for JSON values, except that ``true`` is not ``1`` nor ``false`` ``0``.

    Python's ``==`` says ``True == 1`` (also inside lists and dicts); JSON and the page's script
    do not, so a patch must not drop such a change. ``1`` and ``1.0`` are the same JSON number.
    """
    if a is b:
        return True
    if a != b:
        return False
    if isinstance(a, dict):
        return all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        types = list(map(type, a))  # fast path: equal scalars of the same types (a trace's z)
        if types == list(map(type, b)) and not {dict, list, tuple} & set(types):
            return True
        return all(_same(x, y) for x, y in zip(a, b))
    return isinstance(a, bool) == isinstance(b, bool)


def make_patch(base, new):
    """A compact patch that turns JSON value ``base`` into ``new`` (see :func:`apply_patch`).

    Dicts are diffed key by key (``{"$del": 1}`` removes a key), lists of equal length index
    by index (``{"$list": {"3": patch}}``), anything else is replaced (a scalar as itself, a
    dict, list or ``None`` as ``{"$set": value}``: a bare ``None`` means no patch). Equal
    values give ``None`` (no patch); ``True`` and ``1`` are not equal here, as in JSON.
    """
    if _same(base, new):
        return None
    if new is None:  # a bare None would read as "no change"
        return {_SET: None}
    if isinstance(base, dict) and isinstance(new, dict):
        out = {}
        for k, v in new.items():
            if k not in base:
                out[k] = {_SET: v} if isinstance(v, (dict, list)) or v is None else v
            elif not _same(base[k], v):
                out[k] = make_patch(base[k], v)
        for k in base:
            if k not in new:
                out[k] = {_DEL: 1}
        return out
    if isinstance(base, list) and isinstance(new, list) and len(base) == len(new):
        return {
            _LIST: {
                str(i): make_patch(b, n)
                for i, (b, n) in enumerate(zip(base, new))
                if not _same(b, n)
            }
        }
    return {_SET: new} if isinstance(new, (dict, list)) else new


def apply_patch(base, patch):
    """``base`` changed by a patch of :func:`make_patch` (a new value; ``base`` is not changed).

    The static explorers' script applies patches the same way (``applyPatch``).
    """
    if patch is None:
        return json.loads(json.dumps(base))
    if isinstance(patch, dict):
        if _SET in patch:
            return json.loads(json.dumps(patch[_SET]))
        if _LIST in patch:
            out = json.loads(json.dumps(base))
            for i, p in patch[_LIST].items():
                out[int(i)] = apply_patch(out[int(i)], p)
            return out
        out = json.loads(json.dumps(base)) if isinstance(base, dict) else {}
        for k, p in patch.items():
            if isinstance(p, dict) and _DEL in p:
                out.pop(k, None)
            else:
                out[k] = apply_patch(out.get(k), p)
        return out
    return patch


@functools.cache
def _figure_widget_class():
    """The live figure's class: a plotly ``FigureWidget`` ready within anywidget's deadline.

    anywidget (0.9 to 0.11 at least) gives a widget's front-end module 2 s from the model's
    creation to load and initialize; past that it rejects the model's ``ready`` promise and,
    for as long as the page lives, drops every message from the kernel to that model. plotly's
    front-end is one 5 MB module (plotly.js inside), compiled for every figure model on every
    page load: about 1 s per figure on an idle two-core machine, over 2 s while the kernel runs
    a chapter or several figures load at once. When it lost, the figure's data (an update sent
    just after the model is created) was dropped, so the explorer showed empty axes, and so was
    every redraw, so it stayed dead (issue 19).

    The class returned sends a module of a few lines instead (``_FIGURE_WIDGET_JS``): its
    ``initialize`` returns at once; the first view drawn compiles plotly's module (the
    ``_plotly_esm`` trait), once per page for every figure, and hands the model and its views
    to plotly's own code. A model that is never shown costs no compile. Messages that arrive
    before plotly's code has the model change the model's state only, so the figure's
    ``_sync_widget_state`` keeps ``_widget_data`` and ``_widget_layout`` (the state a view
    starts from; plotly sets them only when the figure is created) equal to the figure.

    Returns:
        A subclass of ``plotly.graph_objects.FigureWidget`` (built once, on first use, so that
        importing this module does not import plotly).
    """
    import pathlib

    import plotly
    import plotly.graph_objects as go
    import traitlets

    esm = go.FigureWidget._esm  # anywidget's FileContents (or a path) of plotly's module
    bundle = esm.read_text(encoding="utf-8") if isinstance(esm, pathlib.Path) else str(esm)
    digest = hashlib.sha256(bundle.encode("utf-8")).hexdigest()[:16]
    key = f"plotly-{plotly.__version__}-{digest}"  # one compiled module per page and bundle

    class FigureWidget(go.FigureWidget):
        _esm = _FIGURE_WIDGET_JS.replace("__KEY__", json.dumps(key))
        _plotly_esm = traitlets.Unicode(bundle).tag(sync=True)

        def _sync_widget_state(self) -> None:
            """Set the synced state a new view draws to the figure as it is now."""
            self._widget_data = copy.deepcopy(self._data)
            self._widget_layout = copy.deepcopy(self._layout_obj._props)

    return FigureWidget


# The live figure's front-end module (see _figure_widget_class). ``__KEY__`` names plotly's
# bundle; compiled when a figure is first drawn, it is shared through globalThis by every
# figure of the page.
_FIGURE_WIDGET_JS = r"""
const KEY = __KEY__;
function plotlyWidget(model) {
  const cache = (globalThis[Symbol.for("attnbook.plotly-widget")] ??= new Map());
  let mod = cache.get(KEY);
  if (!mod) {
    const url = URL.createObjectURL(
      new Blob([model.get("_plotly_esm")], { type: "text/javascript" }));
    mod = import(url).finally(() => URL.revokeObjectURL(url));
    mod.catch(() => cache.delete(KEY));  // the next figure tries again
    cache.set(KEY, mod);
  }
  return mod.then((m) => (typeof m.default === "function" ? m.default() : m.default));
}
export default () => {
  let initCtx, widget;
  function load() {  // plotly's widget for this model, initialized once
    widget ??= plotlyWidget(initCtx.model).then(async (w) => {
      await w.initialize?.(initCtx);
      return w;
    });
    widget.catch(() => { widget = undefined; });  // the next view tries again
    return widget;
  }
  return {
    // Returns at once: anywidget drops the model's messages if this takes over 2 s.
    initialize(ctx) {
      initCtx = ctx;
    },
    async render(ctx) {
      let w;
      try {
        w = await load();
      } catch (e) {
        console.error("[attnbook] plotly's figure module did not load", e);
        ctx.el.textContent = "The figure could not be drawn: " + e;
        return undefined;
      }
      return w.render(ctx);
    },
  };
};"""


class Explorer:
    """Controls plus a render function, displayed live (JupyterLab) and static (built book).

    An explorer's figure is made in two steps, so that each setting is computed once and drawn
    in every language (the book's two editions): ``compute(**values)`` runs the library and
    returns the setting's data, ``draw(data, language=...)`` builds the figure from it with every
    label made in ``language`` (:func:`attnbook.i18n.labels`). A label the catalogs lack, or one
    that still shows an English word in another language (:func:`attnbook.i18n.untranslated`),
    is reported as missing, which fails the book's strict build. (An explorer may instead pass
    one ``render(**values)``, whose English figure is translated after it is drawn.)

    Args:
        controls: the :class:`Control` s, in display order.
        render: ``render(**values) -> plotly.graph_objects.Figure``; must return the same
            trace types in the same order for every combination of values.
        title: plain-text name of the explorer (aria label of its control group), an English
            ``msgid`` of the label catalogs.
        compute: ``compute(**values) -> data`` (anything ``draw`` reads), instead of ``render``.
        draw: ``draw(data, *, language) -> plotly.graph_objects.Figure``, with ``compute``;
            must return the same trace types in the same order for every setting. A ``draw``
            that also takes ``width`` (px) lays its figure out for that width itself: it is
            called with :data:`attnbook.viz.COLUMN_PX` and :data:`attnbook.viz.PHONE_PX`
            (same traces in the same order at both; :mod:`attnbook.explorers.layout`); a
            figure drawn for no width is shown as drawn at every width (plotly fits its plot
            area to the page, but nothing stacks its panels or wraps its text).
        kept_words: Latin words that are example data a real model read (its tokens), shown
            as they are in every language.
        active: optional ``active(values) -> set of control names`` that matter for these
            values; the others are greyed out and, when the grid is precomputed, set to their
            default so that equal figures are rendered once.
        values: initial values (defaults: each control's ``default``).

    Attributes:
        controls: dict ``name -> ipywidgets`` control. Setting a control's ``value`` recomputes
            and redraws :attr:`figure`.
        figure: the ``plotly.graph_objects.FigureWidget`` (a subclass whose front-end module is
            small and loads plotly's once per page: see ``_figure_widget_class``).
        widget: the ipywidgets layout (controls above the figure).

    Raises:
        ValueError: if the grid of all combinations exceeds :data:`MAX_GRID`, or a value is not
            one of its control's options.
    """

    def __init__(
        self,
        controls: Sequence[Control],
        render: Callable[..., Any] | None = None,
        *,
        title: str,
        compute: Callable[..., Any] | None = None,
        draw: Callable[..., Any] | None = None,
        active: Callable[[dict], set] | None = None,
        values: dict | None = None,
        kept_words: Sequence[str] = (),
    ):
        import ipywidgets as w

        if (render is None) == (compute is None or draw is None) or (compute is None) != (
            draw is None
        ):
            raise ValueError(
                "an explorer takes either render, or compute and draw "
                f"(got render={render!r}, compute={compute!r}, draw={draw!r})"
            )
        self._specs = list(controls)
        names = [c.name for c in self._specs]
        if len(set(names)) != len(names):
            raise ValueError(f"control names must be unique, got {names}")
        n_grid = math.prod(len(c.options) for c in self._specs)
        if n_grid > MAX_GRID:
            sizes = " x ".join(f"{c.name} {len(c.options)}" for c in self._specs)
            raise ValueError(
                f"the controls span {n_grid} combinations ({sizes}); at most {MAX_GRID} can "
                "be precomputed"
            )
        for name, value in (values or {}).items():
            spec = self._spec(name)
            if value not in spec.options:
                raise ValueError(f"{name}={value!r} is not one of {spec.options}")
            # A copy: the caller's Control (maybe shared by other explorers) keeps its default.
            copy = dataclasses.replace(spec, default=value)
            copy._make_labels = spec._make_labels
            copy.labels = spec.labels
            self._specs[self._specs.index(spec)] = copy
        self._render = render
        self._compute, self._draw = compute, draw
        #: Whether ``draw`` lays its figure out for a width itself (takes ``width``).
        self.draws_for_width = draw is not None and "width" in inspect.signature(draw).parameters
        self._kept = frozenset(kept_words)
        self._data: dict[str, Any] = {}  # canonical values -> compute's result
        self._active = active
        self.title = title
        #: The language of the live explorer's labels (:func:`attnbook.i18n.get_language`).
        self.language = i18n.get_language()
        self._static_html: dict[str, str] = {}
        self._raw_renders: dict[str, dict] = {}
        self.controls = {c.name: c.translated(self.language).make_widget() for c in self._specs}
        self.figure = _figure_widget_class()(self._live_figure())
        for ctl in self.controls.values():
            ctl.observe(self._on_change, names="value")
        self._update_disabled()
        box = w.HBox(
            list(self.controls.values()),
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        #: The figure's title, as HTML above the plot (the browser wraps it in any language).
        self.caption = w.HTML(
            value=self._caption_html(), layout=w.Layout(width="100%", margin="4px 0 0 0")
        )
        self.widget = w.VBox([box, self.caption, self.figure])

    def _spec(self, name: str) -> Control:
        for c in self._specs:
            if c.name == name:
                return c
        names = [c.name for c in self._specs]
        raise ValueError(f"no control named {name!r}; the controls are {names}")

    @property
    def values(self) -> dict:
        """The current value of every control, ``{name: value}``."""
        if not hasattr(self, "controls"):
            return {c.name: c.default for c in self._specs}
        return {name: ctl.value for name, ctl in self.controls.items()}

    def _canonical(self, values: dict) -> dict:
        if self._active is None:
            return dict(values)
        keep = self._active(values)
        return {c.name: (values[c.name] if c.name in keep else c.default) for c in self._specs}

    def _update_disabled(self) -> None:
        if self._active is None:
            return
        keep = self._active(self.values)
        for name, ctl in self.controls.items():
            ctl.disabled = name not in keep

    def figure_json(
        self,
        values: dict,
        language: str = "en",
        *,
        missing: set | None = None,
        width: int | None = None,
    ) -> dict:
        """The figure of a setting in ``language``, as plotly JSON (typed arrays as lists).

        The setting's data is computed once (``compute``, cached per canonical setting) and drawn
        per language (``draw``); with ``render``, the English figure is rendered once and its
        labels translated.

        Args:
            values: ``{control name: value}``, each one of its control's options; a control
                left out takes its default (and controls greyed out by ``active`` are set to
                their default first).
            language: one of :data:`attnbook.i18n.LANGUAGES`.
            missing: if given, receives every label of another language than English that the
                catalogs lack or that still shows an English word.
            width: the width in px to lay the figure out for (default
                :data:`attnbook.viz.COLUMN_PX`); only a ``draw`` that takes ``width`` uses it.

        Raises:
            ValueError: if ``values`` names no control of the explorer, or a value is not one
                of its control's options.
        """
        if not isinstance(values, dict):
            raise TypeError(
                f"values must be a dict {{control name: value}}, got {type(values).__name__}"
            )
        for name, value in values.items():
            spec = self._spec(name)  # an unknown name: ValueError naming the controls
            if value not in spec.options:
                raise ValueError(f"values[{name!r}]={value!r} is not one of {spec.options}")
        values = {c.name: values.get(c.name, c.default) for c in self._specs}
        canon = self._canonical(values)
        key = _json_dumps(canon)
        sink = missing if missing is not None else set()
        if self._draw is None:
            if key not in self._raw_renders:
                self._raw_renders[key] = _plain_json(self._render(**canon).to_plotly_json())
            fig = self._raw_renders[key]
            return fig if language == "en" else i18n.translate_plotly(fig, language, missing=sink)
        if key not in self._data:
            self._data[key] = self._compute(**canon)
        if width is not None:
            width = check_int(width, "width", 1)
        kwargs = {"width": width or viz.COLUMN_PX} if self.draws_for_width else {}
        with i18n.collect_missing() as lost:
            fig = _plain_json(
                self._draw(self._data[key], language=language, **kwargs).to_plotly_json()
            )
        if language != "en":
            sink |= lost
            if not lost:  # (a message the catalogs lack shows up in English again below)
                sink.update(t for t in _label_strings(fig) if i18n.untranslated(t, self._kept))
        return fig

    def _live_figure(self):
        """The figure for the current values, drawn for the book's column width.

        Its title is taken out as the caption above the plot (:func:`take_title`).
        """
        import plotly.graph_objects as go

        fig, self._caption = take_title(self.figure_json(self.values, self.language))
        return go.Figure(fig)

    def _on_change(self, change) -> None:
        self._update_disabled()
        self.redraw()

    def _caption_html(self) -> str:
        return (
            f'<div class="attnbook-explorer-caption" style="text-align:center;'
            f'font-weight:600">{self._caption}</div>'
        )

    def redraw(self) -> None:
        """Recompute the figure for the current values and update :attr:`figure` in place."""
        new = self._live_figure()
        self.caption.value = self._caption_html()
        fig = self.figure
        same_types = [t.type for t in fig.data] == [t.type for t in new.data]
        with fig.batch_update():
            if same_types:
                for trace, new_trace in zip(fig.data, new.data):
                    spec = new_trace.to_plotly_json()
                    spec.pop("type", None)
                    spec.pop("uid", None)
                    trace.update(spec, overwrite=True)
            else:
                fig.data = []
                fig.add_traces(list(new.data))
            layout = new.layout.to_plotly_json()
            layout.pop("template", None)
            fig.layout.update(layout, overwrite=True)
        # The edits above reach the views drawn now; the state a view drawn later starts from
        # (a page reloaded, a slow first load) must be this figure too.
        fig._sync_widget_state()

    # ---------------------------------------------------------------------------------------
    # Static HTML
    # ---------------------------------------------------------------------------------------

    def static_spec(self, language: str = "en", *, missing: set | None = None) -> dict:
        """The precomputed grid as a JSON-ready dict (what the static HTML embeds).

        Args:
            language: the language of its labels (:data:`attnbook.i18n.LANGUAGES`); each
                combination is computed once and drawn per language and width.
            missing: if given, receives the labels that had no translation.

        Keys: ``controls`` (name, kind, labels, options, default index), ``strides`` (the
        grid is flattened in C order over the controls' option indices), ``frame_of`` (grid
        index -> frame index), ``frames`` (each ``{"data": [trace indices], "layout": patch,
        "narrow_layout": patch}`` and, where the narrow traces differ, ``"narrow_data"``: per
        trace an index or ``{"t": trace index, "p": index into patches}``), ``traces`` (the
        distinct traces), ``patches`` (the distinct trace patches),
        ``layout`` (the base layout; a frame's layout is the base changed by its patch, see
        :func:`make_patch`), ``narrow_layout`` (the same for the narrow variant),
        ``narrow_below`` (plot width in px below which the page draws the
        narrow variant), ``inactive`` (per grid index, the names of the controls greyed out)
        and ``config``.

        Every figure is stored twice, for the book's column (:data:`attnbook.viz.COLUMN_PX`)
        and for a phone's (:data:`attnbook.viz.PHONE_PX`), drawn for each width by a ``draw``
        that takes ``width`` (a figure drawn for no width is stored once and its narrow
        variant is the same).

        Returns:
            The dict described above; floats are rounded to 4 significant digits and identical
            traces and frames are stored once.
        """
        specs = self._specs
        sizes = [len(c.options) for c in specs]
        strides = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
        rendered: dict[str, int] = {}  # canonical values -> frame index
        frames: list[dict] = []
        frame_keys: dict[str, int] = {}
        traces: list = []
        trace_index: dict[str, int] = {}
        frame_of: list[int] = []
        inactive: list[list[str]] = []
        base_layout = None
        narrow_layout = None
        patches: list = []  # distinct patches of wide traces into narrow ones
        captions: list[str] = []  # distinct captions (the figures' titles, as HTML)
        caption_index: dict[str, int] = {}
        patch_index: dict[str, int] = {}
        for combo in itertools.product(*(c.options for c in specs)):
            values = dict(zip((c.name for c in specs), combo))
            canon = self._canonical(values)
            key = _json_dumps(canon)
            if self._active is not None:
                act = self._active(values)
                inactive.append([c.name for c in specs if c.name not in act])
            if key not in rendered:
                raw, caption = take_title(self.figure_json(canon, language, missing=missing))
                if self.draws_for_width:  # laid out by draw itself, for each width
                    wide = raw
                    narrow, _ = take_title(
                        self.figure_json(canon, language, missing=missing, width=viz.PHONE_PX)
                    )
                    kinds = [[t.get("type"), t.get("name")] for t in raw["data"]]
                    n_kinds = [[t.get("type"), t.get("name")] for t in narrow["data"]]
                    if kinds != n_kinds:
                        raise ValueError(
                            f"draw must return the same traces at every width; for {canon} "
                            f"it drew {kinds} at {viz.COLUMN_PX} px and {n_kinds} at "
                            f"{viz.PHONE_PX} px"
                        )
                else:  # drawn for no width: the same figure at every width
                    wide = narrow = raw
                wide_data = [
                    _round_json({k: v for k, v in t.items() if k != "uid"}) for t in wide["data"]
                ]
                data = []
                for t in wide_data:
                    s = _json_dumps(t)
                    if s not in trace_index:
                        trace_index[s] = len(traces)
                        traces.append(t)
                    data.append(trace_index[s])
                layout = _round_json(wide["layout"])
                n_layout = _round_json(narrow["layout"])
                if base_layout is None:
                    base_layout, narrow_layout = layout, n_layout
                if caption not in caption_index:
                    caption_index[caption] = len(captions)
                    captions.append(caption)
                frame = {
                    "data": data,
                    "layout": make_patch(base_layout, layout) or {},
                    "narrow_layout": make_patch(narrow_layout, n_layout) or {},
                    "caption": caption_index[caption],
                }
                # A narrow trace is stored as a patch of its wide trace (usually a few keys).
                n_data = []
                for i, t in zip(data, narrow["data"]):
                    t = _round_json({k: v for k, v in t.items() if k != "uid"})
                    p = make_patch(traces[i], t)
                    if p is None:
                        n_data.append(i)
                        continue
                    ps = _json_dumps(p)
                    if ps not in patch_index:
                        patch_index[ps] = len(patches)
                        patches.append(p)
                    n_data.append({"t": i, "p": patch_index[ps]})
                if n_data != data:
                    frame["narrow_data"] = n_data
                fkey = _json_dumps(frame)
                if fkey not in frame_keys:
                    frame_keys[fkey] = len(frames)
                    frames.append(frame)
                rendered[key] = frame_keys[fkey]
            frame_of.append(rendered[key])
        return {
            "controls": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "labels": list(c.translated(language, missing).labels),
                    "options": _round_json(list(c.options)),
                    "default": c.options.index(c.default),
                }
                for c in specs
            ],
            "strides": strides,
            "frame_of": frame_of,
            "frames": frames,
            "traces": traces,
            "layout": base_layout,
            "narrow_layout": narrow_layout,
            "patches": patches,
            "captions": captions,
            "narrow_below": _layout.STACK_BELOW_PX,
            "inactive": inactive if self._active is not None else None,
            # Latin words that are example data a real model read (shown as read).
            "kept_words": sorted(self._kept),
            # Not plotly's "responsive": the page's script fits the plot to its width and
            # draws the phone's figure below narrow_below (explorer.js, onResize).
            "config": {"displaylogo": False, "responsive": False},
            # What a toggle's value reads (off, on).
            "toggle_text": [i18n.translate("off", language), i18n.translate("on", language)],
        }

    def static_html(
        self, language: str = "en", *, missing: set | None = None, assets: bool = True
    ) -> str:
        """The static explorer (computed once per language, then cached).

        Args:
            language: the language of its labels (:data:`attnbook.i18n.LANGUAGES`).
            missing: if given, receives the labels that had no translation.
            assets: carry the explorer's script and stylesheet (:func:`page_assets`) inline,
                before the explorer, for a page that does not load them: a notebook front end,
                a page of your own. Every copy may be on one page; the first that runs defines
                ``window.attnbookExplorer`` and the others do nothing. ``False`` for the built
                book, whose pages load both files once (``book/_ext/attnbook_explorers.py``).

        Element ids start with a random per-instance prefix, so several explorers (or the same
        one displayed twice) can share a page. The prefix is on the outer ``<div>``'s ``id``; the
        plot is ``{prefix}-plot``, the embedded JSON ``{prefix}-data`` and each control
        ``{prefix}-{name}``.

        Returns:
            An HTML ``str``: the controls, the plot ``<div>``, the :meth:`static_spec` JSON and
            a small script that calls ``attnbookExplorer.mount`` once both ``window.Plotly``
            and the explorer's script are there (after ``<style>`` and ``<script>`` with
            :func:`page_assets` when ``assets``). plotly.js itself is never included: the page
            provides ``window.Plotly``.
        """
        if language not in self._static_html:
            lost: set = set()
            self._static_html[language] = self._build_static_html(language, lost)
            self._static_missing = getattr(self, "_static_missing", {})
            self._static_missing[language] = lost
        if missing is not None:
            missing |= self._static_missing[language]
        html = self._static_html[language]
        return _inline_assets() + html if assets else html

    def _build_static_html(self, language: str, missing: set) -> str:
        """The explorer's own HTML, from the template ``static/explorer.html.j2``.

        Its controls, plot ``<div>``, :meth:`static_spec` JSON and the call that mounts it; not
        the script and stylesheet (:func:`page_assets`), which :meth:`static_html` adds inline
        unless the page loads them.
        """
        from markupsafe import Markup

        spec = self.static_spec(language, missing=missing)

        def tr(text: str) -> str:  # the machinery's own words (the template escapes them)
            return i18n.translate(text, language)

        uid = "attnbook-explorer-" + uuid.uuid4().hex[:12]
        first = sum(c["default"] * stride for c, stride in zip(spec["controls"], spec["strides"]))
        controls = [
            # A control's label may hold HTML (Control.label), written by the library.
            {
                "id": f"{uid}-{c.name}",
                "kind": c.kind,
                "label": Markup(c.label),
                "labels": c.labels,
                "index": c.options.index(c.default),
                "checked": bool(c.default),
            }
            for c in (c.translated(language, missing) for c in self._specs)
        ]
        return _template().render(
            uid=uid,
            title=i18n.translate_checked(self.title, language, missing),
            controls=controls,
            caption=Markup(
                spec["captions"][spec["frames"][spec["frame_of"][first]]["caption"]]
                if spec["captions"]
                else ""
            ),
            height=int((spec["layout"] or {}).get("height", 450)),
            # Every "<" escaped: no "</script>", "<!--" or "<script" inside the JSON.
            payload=Markup(_json_dumps(spec).replace("<", "\\u003c")),
            wait_ms=int(viz.PLOTLY_WAIT_SECONDS * 1000),
            text={
                "controls": tr("controls"),
                "on": tr("on"),
                "off": tr("off"),
                "noscript": tr("This explorer needs JavaScript."),
            },
            missing={"plotly": tr(_NO_PLOTLY), "script": tr(_NO_SCRIPT)},
        )

    # ---------------------------------------------------------------------------------------
    # Display
    # ---------------------------------------------------------------------------------------

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = f"<{self.title}: {self.values}>"
        bundle["text/html"] = self.static_html(self.language)
        langs = i18n.editions()
        if langs:  # the built book: one static explorer per edition (attnbook.edition_outputs)
            bundle[edition_outputs.MIME] = edition_outputs.editions_html_bundle(
                lambda lang, missing: self.static_html(lang, missing=missing, assets=False), langs
            )
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle

    def __repr__(self) -> str:
        return f"<{self.title}: {self.values}>"


#: The words of the mount script's message when a file did not load (in the explorer's language).
_NO_PLOTLY = "This figure needs plotly.js, which did not load."
_NO_SCRIPT = "This explorer needs its script (attnbook-explorer.js), which did not load."
#: The static explorer's front end: ``explorer.js``, ``explorer.css``, ``explorer.html.j2``.
_STATIC_DIR = Path(__file__).resolve().parent / "static"


def page_assets() -> dict[str, Path]:
    """The static explorer's script and stylesheet, by the name a page loads them under.

    Both are package data of :mod:`attnbook.explorers` (``static/explorer.js``, which defines
    ``window.attnbookExplorer``, and ``static/explorer.css``). The built book copies them into
    its ``_static`` folder and loads them once on every page that shows an explorer
    (``book/_ext/attnbook_explorers.py``); elsewhere :meth:`Explorer.static_html` carries them
    inline.

    Returns:
        ``{"attnbook-explorer.js": path, "attnbook-explorer.css": path}``.
    """
    return {f"attnbook-{name}": _STATIC_DIR / name for name in ("explorer.js", "explorer.css")}


@functools.cache
def _template():
    """The Jinja2 template of one static explorer (autoescape on; an undefined name fails)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_STATIC_DIR),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("explorer.html.j2")


@functools.cache
def _inline_assets() -> str:
    """:func:`page_assets` as a ``<style>`` and a ``<script>``, for a page that lacks them.

    Blank lines are dropped (a Markdown renderer would end a raw HTML block there). The script
    defines ``window.attnbookExplorer`` only if no other copy has, so every explorer output may
    carry it and the page runs the first.
    """
    files = page_assets()
    css, js = (
        "\n".join(
            line
            for line in files[f"attnbook-explorer.{ext}"].read_text("utf-8").splitlines()
            if line.strip()
        )
        for ext in ("css", "js")
    )
    for text in (css, js):
        if re.search(r"</(script|style)|<!--", text, re.IGNORECASE):
            raise ValueError("the explorer's script or stylesheet would end its inline tag")
    return f"<style>{css}</style><script>{js}</script>"
