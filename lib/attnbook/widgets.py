"""Explorers: one call, two front-ends — live ipywidgets in JupyterLab, static HTML in the book.

An :class:`Explorer` has a few controls and a render function ``render(**values) -> Figure``
(from :mod:`attnbook.viz`, computed with the library). Displayed, its output bundle carries both

* ``application/vnd.jupyter.widget-view+json`` (with ``text/plain``): an ipywidgets layout of
  the controls and a plotly ``FigureWidget``. Every change of a control calls ``render`` again
  — a fresh computation by ``attnbook`` — and redraws the figure. JupyterLab shows this.
* ``text/html``: a self-contained static explorer for the built book. ``render`` is called for
  every combination of control values (the *grid*); the figures are embedded as JSON (floats
  rounded to 4 significant digits, identical traces and frames stored once) next to native
  HTML controls (``<input type="range">`` with a visible value, ``<select>``, a checkbox) that
  redraw with ``Plotly.react``. No kernel is needed. plotly.js is not inlined and not fetched:
  the page provides ``window.Plotly`` (the book loads it once from ``_static``), possibly after
  the explorer's script has run, so the script waits for it.

Each front-end picks its own representation (MyST-NB's render priority; JupyterLab's widget
renderer), so there is no environment switch.

The book's explorers are :func:`scaling_explorer` (chapter 3), :func:`mask_explorer`
(chapter 6) and :func:`referent_explorer` (chapter 2: a real model's attention).
"""

from __future__ import annotations

import base64
import html as _html
import itertools
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import viz

__all__ = ["Control", "Explorer", "scaling_explorer", "mask_explorer", "referent_explorer",
           "D_K_VALUES"]

#: Slider stops of ``d_k`` in the scaling explorer: the powers of two from 1 to 1024.
D_K_VALUES = tuple(2**i for i in range(11))
#: Stops of the number of keys ``n_keys`` in the scaling explorer.
N_KEYS_VALUES = (4, 8, 16, 32, 64)
#: Half-width of the score axis when the scores are scaled (N(0, 1): 4 standard deviations).
SCALED_X_RANGE = 4.0
#: Largest number of grid combinations an explorer precomputes for its static HTML.
MAX_GRID = 2000

_KINDS = ("slider", "toggle", "select")


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
        labels: text shown for each option; defaults to ``str(option)``.
        plain_label: the label as plain text (ipywidgets descriptions, aria labels).
    """

    name: str
    label: str
    kind: str
    options: Sequence[Any]
    default: Any
    labels: Sequence[str] | None = None
    plain_label: str | None = None

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(
                f"kind of control {self.name!r} must be one of {_KINDS}, got {self.kind!r}"
            )
        self.options = tuple(self.options)
        if self.kind == "toggle" and self.options != (False, True):
            raise ValueError(f"a toggle's options must be (False, True), got {self.options}")
        if not self.options:
            raise ValueError(f"control {self.name!r} has no options")
        if self.default not in self.options:
            raise ValueError(
                f"{self.name}={self.default!r} is not one of the allowed values {self.options}"
            )
        if self.labels is None:
            self.labels = tuple(str(o) for o in self.options)
        self.labels = tuple(self.labels)
        if len(self.labels) != len(self.options):
            raise ValueError(
                f"control {self.name!r} has {len(self.options)} options but "
                f"{len(self.labels)} labels"
            )
        if self.plain_label is None:
            self.plain_label = self.label

    def make_widget(self):
        """The ipywidgets control for the live explorer.

        Returns:
            A new ``ipywidgets.SelectionSlider`` (``kind="slider"``), ``ipywidgets.Checkbox``
            (``"toggle"``) or ``ipywidgets.Dropdown`` (``"dropdown"``), set to the default
            value and labelled with the plain-text label.
        """
        import ipywidgets as w

        style = {"description_width": "initial"}
        layout = w.Layout(width="auto", min_width="220px", margin="2px 24px 2px 0")
        pairs = list(zip(self.labels, self.options))
        if self.kind == "slider":
            return w.SelectionSlider(
                options=pairs, value=self.default, description=self.plain_label,
                continuous_update=False, style=style, layout=layout,
            )
        if self.kind == "toggle":
            return w.Checkbox(
                value=bool(self.default), description=self.plain_label, indent=False,
                style=style, layout=layout,
            )
        return w.Dropdown(
            options=pairs, value=self.default, description=self.plain_label, style=style,
            layout=layout,
        )


def _round_json(obj, digits: int = 4):
    """A JSON-ready copy of ``obj`` with floats rounded to ``digits`` significant digits."""
    if isinstance(obj, dict):
        if "bdata" in obj and "dtype" in obj:  # plotly's base64 typed-array encoding of NumPy
            arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
            if obj.get("shape"):
                arr = arr.reshape([int(n) for n in str(obj["shape"]).split(",")])
            return _round_json(arr, digits)
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


def _json_dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


class Explorer:
    """Controls plus a render function, displayed live (JupyterLab) and static (built book).

    Args:
        controls: the :class:`Control` s, in display order.
        render: ``render(**values) -> plotly.graph_objects.Figure``; must return the same
            trace types in the same order for every combination of values.
        title: plain-text name of the explorer (aria label of its control group).
        active: optional ``active(values) -> set of control names`` that matter for these
            values; the others are greyed out and, when the grid is precomputed, set to their
            default so that equal figures are rendered once.
        values: initial values (defaults: each control's ``default``).

    Attributes:
        controls: dict ``name -> ipywidgets`` control. Setting a control's ``value`` recomputes
            and redraws :attr:`figure`.
        figure: the ``plotly.graph_objects.FigureWidget``.
        widget: the ipywidgets layout (controls above the figure).

    Raises:
        ValueError: if the grid of all combinations exceeds :data:`MAX_GRID`, or a value is not
            one of its control's options.
    """

    def __init__(
        self, controls: Sequence[Control], render: Callable[..., Any], *, title: str,
        active: Callable[[dict], set] | None = None, values: dict | None = None,
    ):
        import ipywidgets as w
        import plotly.graph_objects as go

        self._specs = list(controls)
        names = [c.name for c in self._specs]
        if len(set(names)) != len(names):
            raise ValueError(f"control names must be unique, got {names}")
        n_grid = math.prod(len(c.options) for c in self._specs)
        if n_grid > MAX_GRID:
            raise ValueError(
                f"the controls span {n_grid} combinations; at most {MAX_GRID} can be precomputed"
            )
        for name, value in (values or {}).items():
            spec = self._spec(name)
            if value not in spec.options:
                raise ValueError(f"{name}={value!r} is not one of {spec.options}")
            spec.default = value
        self._render = render
        self._active = active
        self.title = title
        self._static_html: str | None = None
        self.controls = {c.name: c.make_widget() for c in self._specs}
        self.figure = go.FigureWidget(render(**self.values))
        for ctl in self.controls.values():
            ctl.observe(self._on_change, names="value")
        self._update_disabled()
        box = w.HBox(
            list(self.controls.values()),
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        self.widget = w.VBox([box, self.figure])

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

    def _on_change(self, change) -> None:
        self._update_disabled()
        self.redraw()

    def redraw(self) -> None:
        """Recompute the figure for the current values and update :attr:`figure` in place."""
        new = self._render(**self.values)
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

    # ---------------------------------------------------------------------------------------
    # Static HTML
    # ---------------------------------------------------------------------------------------

    def static_spec(self) -> dict:
        """The precomputed grid as a JSON-ready dict (what the static HTML embeds).

        Keys: ``controls`` (name, kind, labels, options, default index), ``strides`` (the
        grid is flattened in C order over the controls' option indices), ``frame_of`` (grid
        index -> frame index), ``frames`` (each ``{"data": [trace indices], "layout": diff}``),
        ``traces`` (the distinct traces), ``layout`` (the base layout; a frame's layout is the
        base updated with its diff, ``null`` removing a key), ``inactive`` (per grid index, the
        names of the controls greyed out) and ``config``.

        Returns:
            The dict described above; floats are rounded to 4 significant digits and identical
            traces and frames are stored once.
        """
        specs = self._specs
        sizes = [len(c.options) for c in specs]
        strides = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
        rendered: dict[str, int] = {}  # canonical values -> frame index
        frames: list[dict] = []
        frame_keys: dict[str, int] = {}
        traces: list = []
        trace_index: dict[str, int] = {}
        frame_of: list[int] = []
        inactive: list[list[str]] = []
        base_layout = None
        for combo in itertools.product(*(c.options for c in specs)):
            values = dict(zip((c.name for c in specs), combo))
            canon = self._canonical(values)
            key = _json_dumps(canon)
            if self._active is not None:
                act = self._active(values)
                inactive.append([c.name for c in specs if c.name not in act])
            if key not in rendered:
                fig = self._render(**canon).to_plotly_json()
                data = []
                for t in fig["data"]:
                    t = _round_json({k: v for k, v in t.items() if k != "uid"})
                    s = _json_dumps(t)
                    if s not in trace_index:
                        trace_index[s] = len(traces)
                        traces.append(t)
                    data.append(trace_index[s])
                layout = _round_json(fig["layout"])
                if base_layout is None:
                    base_layout = layout
                diff = {k: v for k, v in layout.items() if base_layout.get(k) != v}
                diff.update({k: None for k in base_layout if k not in layout})
                frame = {"data": data, "layout": diff}
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
                    "labels": list(c.labels),
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
            "inactive": inactive if self._active is not None else None,
            "config": {"displaylogo": False, "responsive": True},
        }

    def static_html(self) -> str:
        """The self-contained static explorer (computed once, then cached).

        Element ids start with a random per-instance prefix, so several explorers (or the same
        one displayed twice) can share a page. The prefix is on the outer ``<div>``'s ``id``; the
        plot is ``{prefix}-plot``, the embedded JSON ``{prefix}-data`` and each control
        ``{prefix}-{name}``.

        Returns:
            An HTML ``str``: the controls, the plot ``<div>``, the :meth:`static_spec` JSON and
            the script that redraws the plot on input (plotly.js itself is not included).
        """
        if self._static_html is None:
            self._static_html = self._build_static_html()
        return self._static_html

    def _build_static_html(self) -> str:
        spec = self.static_spec()
        uid = "attnbook-explorer-" + uuid.uuid4().hex[:12]
        rows = []
        for c in self._specs:
            cid = f"{uid}-{c.name}"
            idx = c.options.index(c.default)
            if c.kind == "slider":
                rows.append(
                    f'<div class="attnbook-ctl"><label for="{cid}">{c.label}</label>'
                    f'<input type="range" id="{cid}" min="0" max="{len(c.options) - 1}" '
                    f'step="1" value="{idx}" aria-valuetext="{_html.escape(c.labels[idx])}">'
                    f'<output id="{cid}-value" for="{cid}" aria-live="polite">'
                    f"{_html.escape(c.labels[idx])}</output></div>"
                )
            elif c.kind == "toggle":
                checked = " checked" if c.default else ""
                rows.append(
                    f'<div class="attnbook-ctl"><input type="checkbox" id="{cid}"{checked}>'
                    f'<label for="{cid}">{c.label}</label>'
                    f'<output id="{cid}-value" for="{cid}" aria-live="polite">'
                    f'{"on" if c.default else "off"}</output></div>'
                )
            else:
                opts = "".join(
                    f'<option value="{i}"{" selected" if i == idx else ""}>'
                    f"{_html.escape(lab)}</option>"
                    for i, lab in enumerate(c.labels)
                )
                rows.append(
                    f'<div class="attnbook-ctl"><label for="{cid}">{c.label}</label>'
                    f'<select id="{cid}">{opts}</select></div>'
                )
        payload = _json_dumps(spec).replace("</", "<\\/")
        body = _STATIC_JS.replace("__UID__", json.dumps(uid))
        script = viz.when_plotly_ready_js(body, target_id=f"{uid}-plot")
        height = (spec["layout"] or {}).get("height", 450)
        return (
            f'<div class="attnbook-explorer" id="{uid}">'
            f"<style>{_STATIC_CSS}</style>"
            f'<div class="attnbook-controls" role="group" '
            f'aria-label="{_html.escape(self.title)}: controls">{"".join(rows)}</div>'
            f'<div id="{uid}-plot" class="attnbook-explorer-plot plotly-graph-div" '
            f'style="width:100%;height:{int(height)}px" role="figure" '
            f'aria-label="{_html.escape(self.title)}"></div>'
            f"<noscript>This explorer needs JavaScript.</noscript>"
            f'<script type="application/json" id="{uid}-data">{payload}</script>'
            f"<script>{script}</script>"
            f"</div>"
        )

    # ---------------------------------------------------------------------------------------
    # Display
    # ---------------------------------------------------------------------------------------

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = f"<{self.title}: {self.values}>"
        bundle["text/html"] = self.static_html()
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle

    def __repr__(self) -> str:
        return f"<{self.title}: {self.values}>"


_STATIC_CSS = (
    ".attnbook-explorer{margin:1em 0;}"
    ".attnbook-explorer .attnbook-controls{display:flex;flex-wrap:wrap;gap:.4em 1.6em;"
    "align-items:center;font-size:.95em;margin-bottom:.3em;}"
    ".attnbook-explorer .attnbook-ctl{display:flex;align-items:center;gap:.45em;}"
    ".attnbook-explorer .attnbook-ctl input[type=range]{width:12em;}"
    ".attnbook-explorer .attnbook-ctl output{min-width:2.5em;font-variant-numeric:tabular-nums;"
    "font-weight:600;}"
    ".attnbook-explorer .attnbook-ctl.attnbook-inactive{opacity:.45;}"
)

# The static explorer's script (runs once window.Plotly exists). It only looks values up in the
# embedded JSON: every number it draws was computed in Python by attnbook.
_STATIC_JS = r"""
var uid = __UID__;
var root = document.getElementById(uid);
var plot = document.getElementById(uid + '-plot');
var spec = JSON.parse(document.getElementById(uid + '-data').textContent);
function copy(x) { return JSON.parse(JSON.stringify(x)); }
function currentIndex() {
  var flat = 0;
  spec.controls.forEach(function (c, i) {
    var el = document.getElementById(uid + '-' + c.name);
    var k = c.kind === 'toggle' ? (el.checked ? 1 : 0) : parseInt(el.value, 10);
    flat += k * spec.strides[i];
  });
  return flat;
}
function frameFigure(flat) {
  var frame = spec.frames[spec.frame_of[flat]];
  var layout = copy(spec.layout);
  Object.keys(frame.layout).forEach(function (k) {
    if (frame.layout[k] === null) { delete layout[k]; } else { layout[k] = copy(frame.layout[k]); }
  });
  var data = frame.data.map(function (i) { return copy(spec.traces[i]); });
  return {data: data, layout: layout};
}
function syncLabels(flat) {
  spec.controls.forEach(function (c) {
    var el = document.getElementById(uid + '-' + c.name);
    var out = document.getElementById(uid + '-' + c.name + '-value');
    if (c.kind === 'slider') {
      var text = c.labels[parseInt(el.value, 10)];
      out.textContent = text;
      el.setAttribute('aria-valuetext', text);
    } else if (c.kind === 'toggle') {
      out.textContent = el.checked ? 'on' : 'off';
    }
    var off = spec.inactive ? spec.inactive[flat].indexOf(c.name) >= 0 : false;
    el.disabled = off;
    el.parentNode.classList.toggle('attnbook-inactive', off);
  });
}
var shown = -1;
function draw(first) {
  var flat = currentIndex();
  syncLabels(flat);
  if (flat === shown) { return; }
  shown = flat;
  plot.setAttribute('data-grid-index', String(flat));
  plot.setAttribute('data-frame', String(spec.frame_of[flat]));
  var fig = frameFigure(flat);
  if (first) { Plotly.newPlot(plot, fig.data, fig.layout, spec.config); }
  else { Plotly.react(plot, fig.data, fig.layout, spec.config); }
}
spec.controls.forEach(function (c) {
  var el = document.getElementById(uid + '-' + c.name);
  el.addEventListener('input', function () { draw(false); });
  el.addEventListener('change', function () { draw(false); });
});
draw(true);
"""


# --------------------------------------------------------------------------------------------
# The book's explorers
# --------------------------------------------------------------------------------------------


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_choice(value, name: str, allowed: Sequence) -> None:
    if isinstance(value, (bool, np.bool_)) != isinstance(allowed[0], bool) or value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of the allowed values {tuple(allowed)}")


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_seed(value, name: str = "seed") -> int:
    """A reproducible seed: a non-negative integer (``None`` would draw a new figure each time)."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _check_stops(values, name: str, lo: int, hi: int) -> tuple:
    try:
        stops = tuple(values)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of integers, got {values!r}") from None
    if not stops:
        raise ValueError(f"{name} must not be empty")
    for v in stops:
        if not _is_int(v) or not lo <= v <= hi:
            raise ValueError(f"{name} must hold integers in [{lo}, {hi}], got {stops}")
    if any(b <= a for a, b in zip(stops, stops[1:])):
        raise ValueError(f"{name} must be strictly increasing, got {stops}")
    return tuple(int(v) for v in stops)


def scaling_explorer(
    d_k: int = 64, scaled: bool = True, n_keys: int = 16, *,
    d_k_values: Sequence[int] = D_K_VALUES, n_keys_values: Sequence[int] = N_KEYS_VALUES,
    n_samples: int = 2000, n_draws: int = 200, seed: int = 0,
) -> Explorer:
    """The √d_k explorer (chapter 3): score variance and softmax saturation against d_k.

    Controls: ``d_k`` (a slider over ``d_k_values``, 1 to 1024 by default), ``scaled`` (divide
    the scores by ``sqrt(d_k)``, on/off) and ``n_keys`` (keys per query, a slider). The figure
    is :func:`attnbook.viz.scaling_figure`: the histogram of ``n_samples`` scores with their
    measured and expected variance (``d_k`` unscaled, 1 scaled; Vaswani et al., 2017, footnote
    4), and the softmax weights of one query over ``n_keys`` keys, sorted and averaged over
    ``n_draws`` draws, with the mean largest weight and mean entropy
    (:func:`attnbook.scaling.saturation_stats`). The score axis is fixed within each mode —
    ``[-4 sqrt(max d_k), 4 sqrt(max d_k)]`` unscaled, ``[-4, 4]`` scaled — so dragging ``d_k``
    shows the spread growing without scaling and staying put with it.

    Args:
        d_k: initial head dimension, one of ``d_k_values``.
        scaled: initial state of the scaling toggle.
        n_keys: initial number of keys, one of ``n_keys_values``.
        d_k_values: the slider stops, increasing integers in [1, 4096].
        n_keys_values: the stops of ``n_keys``, increasing integers in [1, 1024].
        n_samples: scores per histogram (modest: every grid point is precomputed).
        n_draws: draws averaged in the softmax panel.
        seed: random seed (histogram ``seed``, softmax panel ``seed + 1``), the same for every
            setting so that settings differ only by what the controls change.

    Returns:
        :class:`Explorer`; its static HTML precomputes ``len(d_k_values) * 2 *
        len(n_keys_values)`` settings (110 by default, a few seconds).

    Raises:
        ValueError: naming the argument, if a value is not one of its stops, a stop list is not
            increasing integers in range, ``n_samples``/``n_draws`` is not a positive integer,
            or ``seed`` is not a non-negative integer.
    """
    d_k_values = _check_stops(d_k_values, "d_k_values", 1, 4096)
    n_keys_values = _check_stops(n_keys_values, "n_keys_values", 1, 1024)
    _check_choice(d_k, "d_k", d_k_values)
    _check_choice(n_keys, "n_keys", n_keys_values)
    if not isinstance(scaled, (bool, np.bool_)):
        raise ValueError(f"scaled must be True or False, got {scaled!r}")
    n_samples = _check_positive_int(n_samples, "n_samples")
    n_draws = _check_positive_int(n_draws, "n_draws")
    seed = _check_seed(seed)
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2 to measure a variance, got {n_samples}")
    # The score axis is fixed within each mode, so dragging d_k shows the spread (unscaled) or
    # its absence (scaled): 4 standard deviations of the largest unscaled d_k, or of N(0, 1).
    unscaled_range = 4 * math.sqrt(max(d_k_values))

    def render(d_k, scaled, n_keys):
        return viz.scaling_figure(
            d_k, scaled, n_keys, n_samples=n_samples, n_draws=n_draws, seed=seed,
            x_range=SCALED_X_RANGE if scaled else unscaled_range,
        )

    controls = [
        Control("d_k", "d<sub>k</sub>", "slider", d_k_values, int(d_k), plain_label="d_k"),
        Control(
            "scaled", "divide scores by √d<sub>k</sub>", "toggle", (False, True), bool(scaled),
            plain_label="divide scores by √d_k",
        ),
        Control("n_keys", "keys n", "slider", n_keys_values, int(n_keys), plain_label="keys n"),
    ]
    return Explorer(controls, render, title="√d_k explorer")


def mask_explorer(
    mask_type: str = "causal + padding", window: int = 3, n_pad: int = 2, *,
    seq_len: int = 8, seed: int = 0,
) -> Explorer:
    """The mask explorer (chapter 6): a keep-mask and the attention weights it produces.

    Controls: ``mask_type`` (one of :data:`attnbook.viz.MASK_TYPES`: none / causal / padding /
    causal + padding / sliding window), ``window`` (sliding-window size, 1..seq_len) and
    ``n_pad`` (pad tokens at the end of the keys, 0..seq_len; a batch of one sequence). The
    figure is :func:`attnbook.viz.mask_figure`: the keep-mask (:mod:`attnbook.masks`) and
    ``masked_softmax(scores, mask)`` of fixed raw scores
    ``numpy.random.default_rng(seed).standard_normal((seq_len, seq_len))``. Rows with no
    visible key have all-zero weights. ``window`` is greyed out unless the type is sliding
    window, ``n_pad`` unless it involves padding.

    Args:
        mask_type: initial mask type.
        window: initial window size, 1..seq_len.
        n_pad: initial number of pad tokens, 0..seq_len.
        seq_len: number of tokens, 2..16.
        seed: seed of the scores.

    Returns:
        :class:`Explorer`.

    Raises:
        ValueError: naming the argument, for an unknown ``mask_type``, a value out of range or
            not an integer, or a ``seed`` that is not a non-negative integer.
    """
    if not _is_int(seq_len) or not 2 <= seq_len <= 16:
        raise ValueError(f"seq_len must be an integer in [2, 16], got {seq_len!r}")
    seq_len = int(seq_len)
    if mask_type not in viz.MASK_TYPES:
        raise ValueError(f"mask_type={mask_type!r} is not one of {viz.MASK_TYPES}")
    for name, value, allowed in (("window", window, range(1, seq_len + 1)),
                                 ("n_pad", n_pad, range(0, seq_len + 1))):
        if not _is_int(value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        _check_choice(value, name, tuple(allowed))
    seed = _check_seed(seed)
    scores = viz.mask_scores(seq_len, seed)  # (L, S), fixed for every setting

    def render(mask_type, window, n_pad):
        return viz.mask_figure(mask_type, window, n_pad, seq_len=seq_len, scores=scores)

    def active(values):
        names = {"mask_type"}
        if values["mask_type"] == "sliding window":
            names.add("window")
        if "padding" in values["mask_type"]:
            names.add("n_pad")
        return names

    controls = [
        Control("mask_type", "mask", "select", viz.MASK_TYPES, mask_type, plain_label="mask"),
        Control("window", "window", "slider", tuple(range(1, seq_len + 1)), int(window)),
        Control("n_pad", "pad tokens", "slider", tuple(range(0, seq_len + 1)), int(n_pad)),
    ]
    return Explorer(controls, render, title="mask explorer", active=active)


def referent_explorer(
    layer: int = 1, head: int = 1, *, sentences: Sequence[str] | None = None,
    query: str = "it", candidates: Sequence[str] = ("animal", "street"), model=None,
) -> Explorer:
    """The referent explorer (chapter 2): where "it" looks, in every layer and head of a real model.

    Controls: ``layer`` (a slider over ``1 .. n_layers``) and ``head`` (a slider over
    ``1 .. n_heads``), both **1-based** — "layer 1" is the first layer; the weight arrays of
    :mod:`attnbook.pretrained` are indexed ``layer - 1``, ``head - 1``. The figure is
    :func:`attnbook.viz.token_attention_figure`: for each sentence, the attention weights of the
    ``query`` token over the sentence in that layer and head, with the ``candidates`` (the words
    the query could refer to) highlighted and their weights printed.

    The weights are computed once, when the explorer is made, by
    :func:`attnbook.pretrained.attention_of_token` (one forward pass of all-MiniLM-L6-v2 per
    sentence, every layer and head); the sliders only choose which layer and head to draw, in
    the live widget and in the precomputed static frames alike. For all-MiniLM-L6-v2 that is
    6 x 12 = 72 settings.

    Args:
        layer: initial layer, ``1 .. n_layers`` (6 for all-MiniLM-L6-v2).
        head: initial head, ``1 .. n_heads`` (12 for all-MiniLM-L6-v2).
        sentences: the sentences to compare; default :data:`attnbook.pretrained.TIRED` and
            :data:`attnbook.pretrained.WIDE`. Each must contain ``query`` and every candidate as
            word pieces (the first occurrence of each is used).
        query: the query word piece, lower-case as the tokenizer writes it.
        candidates: word pieces to highlight (at most four).
        model: a :class:`attnbook.pretrained.BertEncoder`; default
            :func:`attnbook.pretrained.load_minilm` ``()``.

    Returns:
        :class:`Explorer`.

    Raises:
        ValueError: naming the argument, if ``layer`` or ``head`` is out of range or not an
            integer, a sentence lacks ``query`` or a candidate, ``sentences`` is empty, or more
            than four candidates are given.
        TypeError: if ``sentences`` is not a list or tuple of strings.
    """
    from . import pretrained

    for name, value in (("layer", layer), ("head", head)):
        if not _is_int(value):
            raise ValueError(f"{name} must be an integer (1-based), got {value!r}")
    if sentences is None:
        sentences = (pretrained.TIRED, pretrained.WIDE)
    if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)):
        raise TypeError(
            f"sentences must be a list or tuple of strings, got {type(sentences).__name__}"
        )
    if not sentences:
        raise ValueError("sentences must hold at least one sentence")
    candidates = tuple(candidates)
    if len(candidates) > len(viz.HIGHLIGHT_COLORS):
        raise ValueError(
            f"candidates names {len(candidates)} tokens; at most {len(viz.HIGHLIGHT_COLORS)} "
            "can be highlighted"
        )
    model = pretrained.load_minilm() if model is None else model
    tokens, weights = [], []
    for s in sentences:
        t, w = pretrained.attention_of_token(s, query, model=model)  # w: (n_layers, H, T)
        for c in candidates:
            if c not in t:
                raise ValueError(
                    f"candidate {c!r} is not a word piece of the sentence {s!r}, whose word "
                    f"pieces are {t}"
                )
        tokens.append(t)
        weights.append(w)
    n_layers, n_heads = weights[0].shape[:2]
    layers, heads = tuple(range(1, n_layers + 1)), tuple(range(1, n_heads + 1))
    _check_choice(layer, "layer", layers)
    _check_choice(head, "head", heads)
    titles = [f"{i + 1}. “{s}”" for i, s in enumerate(sentences)]

    def render(layer, head):
        return viz.token_attention_figure(
            tokens, weights, layer - 1, head - 1, query=query, highlight=candidates,
            titles=titles,
        )

    controls = [
        Control("layer", "layer", "slider", layers, int(layer)),
        Control("head", "head", "slider", heads, int(head)),
    ]
    return Explorer(controls, render, title="referent explorer")
