"""Tests of the explorer machinery (attnbook.explorers.base): controls, the display bundle,
the static HTML and its size. The explorers of the book serve as the examples.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re

import numpy as np
import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

import plotly.graph_objects as go  # noqa: E402

from attnbook.explorers.base import (  # noqa: E402
    MAX_GRID,
    Control,
    Explorer,
    apply_patch,
    make_patch,
    plotly_text_html,
    take_title,
)
from attnbook.explorers.masks import mask_explorer  # noqa: E402
from attnbook.explorers.scaling import scaling_explorer  # noqa: E402
from explorer_util import embedded_spec  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def masks():
    """The default mask explorer, shared by the tests that only read it (its static HTML is
    computed once). Its controls must not be moved."""
    ex = mask_explorer()
    values = dict(ex.values)
    yield ex
    assert ex.values == values, "a test moved a control of the shared explorer"


def test_mimebundle_has_both_representations(masks):
    ex = masks
    bundle = ex._repr_mimebundle_()
    assert WIDGET_MIME in bundle and "text/html" in bundle and "text/plain" in bundle
    assert bundle[WIDGET_MIME]["model_id"] == ex.widget.model_id
    html = bundle["text/html"]
    # Self-contained: no external script, no CDN, no inlined plotly.js, labelled controls.
    assert "<script src" not in html and "cdn" not in html.lower() and "https://" not in html
    assert "plotly.js v" not in html and len(html) < 400_000
    for name in ("mask_type", "window", "n_pad"):
        m = re.search(rf'id="(attnbook-explorer-[0-9a-f]+-{name})"', html)
        assert m, f"no control {name}"
        assert f'<label for="{m.group(1)}">' in html
    assert "window.Plotly" in html  # waits for plotly.js instead of assuming it
    # Two explorers on one page never share element ids.
    other = mask_explorer()._repr_mimebundle_()["text/html"]
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert ids and not ids & set(re.findall(r'id="([^"]+)"', other))


def test_default_explorers_fit_a_page(masks):
    # Chapter pages must stay < 2 MB; each default explorer gets well under a quarter of that.
    for ex in (scaling_explorer(), masks):
        html = ex.static_html()
        assert len(html.encode()) < 500_000, (ex.title, len(html))
        spec = embedded_spec(html)
        assert len(spec["frame_of"]) == math.prod(len(c["options"]) for c in spec["controls"])
    ex = scaling_explorer()
    assert ex.controls["d_k"].options == tuple((str(2**i), 2**i) for i in range(11))


def test_control_default_is_stored_as_its_option():
    """A default equal to an option (1.0, a 0-d array, NumPy's True) is stored as that option."""
    assert type(Control("x", "x", "slider", (1, 2), 1.0).default) is int
    assert type(Control("x", "x", "slider", (1, 2), np.array(2)).default) is int
    assert Control("x", "x", "toggle", (False, True), np.True_).default is True


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Control("x", "x", "knob", (1, 2), 1), "kind"),
        (lambda: Control("x", "x", "toggle", (0, 1), 0), "toggle"),
        (lambda: Control("x", "x", "slider", (), None), "no options"),
        (lambda: Control("x", "x", "slider", (1, 2), 3), "x=3 is not one of"),
        (lambda: Control("x", "x", "slider", (0, 1, 2), True), "x=True is not one of"),
        (lambda: Control("x", "x", "toggle", (False, True), 1), "x=1 is not one of"),
        (lambda: Control("x", "x", "slider", (0, 1, 2), np.True_), "is not one of"),
        (lambda: Control("x", "x", "slider", (1, True), True), "equal options"),
        (lambda: Control("x", "x", "slider", (1, 1, 2), 1), "equal options"),
        (lambda: Control("x", "x", "slider", (1, 2), np.array([1])), "is not one of"),
        (lambda: Control("x", "x", "slider", (1, 2), 1, labels=("a",)), "2 options but 1 labels"),
    ],
)
def test_control_rejects_bad_specs(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_explorer_rejects_a_grid_too_large_and_duplicate_names():
    def render(**values):
        import plotly.graph_objects as go

        return go.Figure()

    big = [Control(f"c{i}", "c", "slider", tuple(range(10)), 0) for i in range(4)]
    assert 10**4 > MAX_GRID
    with pytest.raises(ValueError, match="combinations"):
        Explorer(big, render, title="big")
    twice = [Control("a", "a", "slider", (1, 2), 1)] * 2
    with pytest.raises(ValueError, match="unique"):
        Explorer(twice, render, title="twice")
    with pytest.raises(ValueError, match="a=3 is not one of"):
        Explorer(twice[:1], render, title="one", values={"a": 3})


# ------------------------------------------------------------------------------------------
# Live sliders a person can drag (issue 10: tracks of 3 px in JupyterLab)
# ------------------------------------------------------------------------------------------


def px(value: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)px", value or "")
    assert m, f"not a px length: {value!r}"
    return float(m.group(1))


@pytest.mark.parametrize("which", ["quadratic", "kv_cache", "masks", "scaling"])
def test_live_sliders_get_a_row_and_a_track_of_150_px(which):
    from attnbook.explorers.kv_cache import kv_cache_explorer
    from attnbook.explorers.quadratic import quadratic_cost_explorer

    ex = {
        "quadratic": quadratic_cost_explorer,
        "kv_cache": kv_cache_explorer,
        "masks": mask_explorer,
        "scaling": lambda: scaling_explorer(n_samples=50, n_draws=5),
    }[which]()
    sliders = [(c, ex.controls[c.name]) for c in ex._specs if c.kind == "slider"]
    assert sliders
    for spec, w in sliders:
        assert w.layout.width == "100%", "a slider shares its row and gets squeezed"
        assert w.style.description_width == "initial"
        # Independent estimate: JupyterLab's 13 px UI font is about 7 px per character; the
        # label and the longest value (e.g. "131,072") are drawn beside the track.
        label_px = 7 * len(w.description) + 10
        value_px = 7 * max(len(t) for t in spec.labels) + 10
        assert px(w.layout.min_width) - label_px - value_px >= 150, (spec.name, w.layout)
        assert px(w.layout.max_width) >= px(w.layout.min_width)
    # Drop-downs and checkboxes keep their natural width.
    for c in ex._specs:
        if c.kind != "slider":
            assert ex.controls[c.name].layout.width == "auto"


# ------------------------------------------------------------------------------------------
# The narrow (phone) variant of the static frames
# ------------------------------------------------------------------------------------------


def test_static_spec_carries_a_stacked_narrow_variant(masks):
    from attnbook.explorers import layout
    from explorer_util import caption_text, static_frame, title_text

    spec = embedded_spec(masks.static_html())
    assert spec["narrow_below"] == layout.STACK_BELOW_PX
    values = {"mask_type": "causal + padding", "window": 3, "n_pad": 2, "pad_side": "left"}
    wide, narrow = static_frame(spec, values), static_frame(spec, values, narrow=True)
    # Same numbers in both variants; the narrow one stacks the two heatmaps.
    for a, b in zip(wide["data"], narrow["data"]):
        assert a["z"] == b["z"]
    assert wide["layout"]["xaxis2"]["domain"][0] > wide["layout"]["xaxis"]["domain"][1]
    assert narrow["layout"]["xaxis"]["domain"] == narrow["layout"]["xaxis2"]["domain"] == [0, 1]
    top, bottom = narrow["layout"]["yaxis"]["domain"], narrow["layout"]["yaxis2"]["domain"]
    assert bottom[1] < top[0]
    assert narrow["layout"]["height"] > wide["layout"]["height"]
    # The note on the empty rows is prose: in both, a line of the caption above the plot, not
    # text placed in the plot.
    for fr in (wide, narrow):
        assert not [a for a in fr["layout"]["annotations"] if "see no key" in a["text"]]
        assert "see no key" in caption_text(fr["caption"], br="\n").splitlines()[-1]
    # The title is not drawn in the plot: it is the caption above it, the same HTML in both
    # variants (the browser wraps it), and it still names the frame's setting.
    for fr in (wide, narrow):
        assert title_text(fr["layout"]) == "" and "title" not in fr["layout"]
    assert narrow["caption"] == wide["caption"]
    assert "at the start" in caption_text(narrow["caption"])


# ------------------------------------------------------------------------------------------
# The live figure's front-end (issue 19: a live explorer that came up blank, or dead)
# ------------------------------------------------------------------------------------------


def test_live_figure_state_is_the_figure_the_controls_left():
    """A view drawn later (a page reload, or a first load that is slow) starts from the synced
    ``_widget_data`` and ``_widget_layout``: after a change they are the figure as it now is,
    not as it was when the explorer was created."""
    import json

    from plotly.utils import PlotlyJSONEncoder

    def as_json(obj):
        return json.dumps(obj, cls=PlotlyJSONEncoder, sort_keys=True)

    from explorer_util import caption_text

    ex = mask_explorer()
    fig = ex.figure
    created = as_json(fig._widget_data)
    ex.controls["n_pad"].value = 5
    ex.controls["pad_side"].value = "left"
    assert as_json(fig._widget_data) != created
    assert as_json(fig._widget_data) == as_json([t.to_plotly_json() for t in fig.data])
    assert as_json(fig._widget_layout) == as_json(fig.layout.to_plotly_json())
    # The title is no longer in the figure: it is the caption widget above the plot, whose
    # synced value a later view reads, and it follows the controls too.
    assert "title" not in fig.layout.to_plotly_json()
    assert "5 pad tokens at the start" in caption_text(ex.caption.get_state(["value"])["value"])


# Runs the live figure's front-end module in Node with a stand-in for plotly's module: two
# figures on one page, as anywidget drives them (initialize, then render a view).
NODE_HARNESS = r"""
import fs from "node:fs";
const toUrl = (src) => "data:text/javascript;base64," + Buffer.from(src).toString("base64");
globalThis.Blob = class { constructor(parts) { this.src = parts.join(""); } };
URL.createObjectURL = (blob) => toUrl(blob.src);
URL.revokeObjectURL = () => {};
const plotly = `globalThis.compiled = (globalThis.compiled ?? 0) + 1;
export default () => { let m; return {
  initialize({ model }) { m = model; },
  render({ el }) { el.drawnFor = m.id; return () => { el.drawnFor = null; }; },
}; };`;
const shim = await import(toUrl(fs.readFileSync(process.argv[2], "utf8")));
const models = [1, 2].map((id) => ({ id, get: (k) => (k === "_plotly_esm" ? plotly : null),
                                     on() {} }));
const widgets = models.map(() => shim.default());
const returned = widgets.map((w, i) => w.initialize({ model: models[i] }));
const compiledBeforeRender = globalThis.compiled ?? 0;
const els = [{}, {}];
const cleanups = await Promise.all(
  widgets.map((w, i) => w.render({ model: models[i], el: els[i] })));
console.log(JSON.stringify({
  returned: returned.map((r) => (r === undefined ? null : String(r))), compiledBeforeRender,
  compiled: globalThis.compiled, drawnFor: els.map((e) => e.drawnFor),
  cleanups: cleanups.map((c) => typeof c),
}));
"""


def test_live_figure_module_is_ready_at_once_and_compiles_plotly_once(tmp_path):
    """anywidget drops every message to a model whose module is not loaded and initialized
    within 2 s; plotly's module (5 MB, plotly.js inside) took about 1 s per figure. The live
    figure's own module is small, returns from ``initialize`` at once, and compiles plotly's
    module (sent as ``_plotly_esm``) when a view is first drawn, once for every figure."""
    import json
    import pathlib
    import shutil
    import subprocess

    import plotly.graph_objects as go

    fig = mask_explorer().figure
    assert isinstance(fig, go.FigureWidget)
    assert len(fig._esm) < 4_000, f"the front-end module is {len(fig._esm)} characters"
    esm = go.FigureWidget._esm
    plotly_module = esm.read_text() if isinstance(esm, pathlib.Path) else str(esm)
    assert fig._plotly_esm == plotly_module and len(plotly_module) > 1_000_000
    assert fig._esm == scaling_explorer().figure._esm  # one module (and key) for every figure
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):  # .ci/run installs nodejs: there a missing node is a failure
            pytest.fail("no Node.js to run the front-end module (apt-get install nodejs)")
        pytest.skip("no Node.js to run the front-end module")
    (tmp_path / "shim.mjs").write_text(fig._esm)
    (tmp_path / "harness.mjs").write_text(NODE_HARNESS)
    run = subprocess.run(
        [node, str(tmp_path / "harness.mjs"), str(tmp_path / "shim.mjs")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["returned"] == [None, None], "initialize must not make anywidget wait"
    assert out["compiledBeforeRender"] == 0 and out["compiled"] == 1, out
    assert out["drawnFor"] == [1, 2], "each view is drawn by plotly's code for its own model"
    assert out["cleanups"] == ["function", "function"]


# ------------------------------------------------------------------------------------------
# plotly's base64 typed arrays: one decoder for the rounded and the plain JSON
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int16", "uint8", "int32"])
def test_typed_arrays_decode_to_the_arrays_plotly_encoded(dtype):
    import numpy as np
    import plotly.graph_objects as go

    from attnbook.explorers.base import _plain_json, _round_json

    rng = np.random.default_rng(0)
    z = (rng.standard_normal((3, 4)) * 100).astype(dtype)
    y = z[0].copy()
    trace = go.Figure(go.Heatmap(z=z, y=y)).to_plotly_json()["data"][0]
    assert "bdata" in trace["z"] and "shape" in trace["z"], "plotly no longer encodes arrays"
    plain = _plain_json(trace)
    assert plain["z"] == z.tolist() and plain["y"] == y.tolist()
    rounded = _round_json(trace)
    want = [[float(f"{v:.4g}") for v in row] for row in z.astype(float).tolist()]
    assert rounded["z"] == want and rounded["y"] == want[0]
    # Not a typed array: a dict that only looks alike is walked as a dict.
    assert _plain_json({"dtype": "f8", "x": [1.5]}) == {"dtype": "f8", "x": [1.5]}


def test_a_label_left_in_english_is_reported_missing():
    """compute/draw: a draw that leaves English in a Chinese label, or a msgid the catalogs lack,
    reports it; math, code, kept abbreviations and the explorer's kept words are fine."""
    import plotly.graph_objects as go

    from attnbook import i18n
    from attnbook.explorers.base import Control, Explorer

    def draw(data, *, language):
        _ = i18n.labels(language)
        hover = data["hover"]
        return go.Figure(
            go.Bar(
                x=[1], y=[data["n"]], name=_("weights"), hovertext=[hover], customdata=[["king"]]
            ),
            layout=dict(title=dict(text="$d_k$ masked_softmax(q, k) KV")),
        )

    def explorer(hover, kept=()):
        return Explorer(
            [Control("n", "window", "slider", (1, 2), 1)],
            title="mask explorer",
            compute=lambda n: {"n": n, "hover": hover},
            draw=draw,
            kept_words=kept,
        )

    missing: set = set()
    explorer("查询 0").static_spec("zh_CN", missing=missing)
    assert missing == {"king"}  # customdata a hover shows is checked too
    missing = set()
    explorer("查询 0", kept=("king",)).static_spec("zh_CN", missing=missing)
    assert missing == set()
    missing = set()
    explorer("query 0 hidden", kept=("king",)).static_spec("zh_CN", missing=missing)
    assert missing == {"query 0 hidden"}
    missing = set()
    explorer("查询 0", kept=("king",)).static_spec("en", missing=missing)
    assert missing == set()

    def draw_missing(data, *, language):
        return go.Figure(
            go.Bar(x=[1], y=[1], name=i18n.labels(language)("no such msgid {n}", n=data))
        )

    missing = set()
    Explorer(
        [Control("n", "window", "slider", (1, 2), 1)],
        title="mask explorer",
        compute=lambda n: n,
        draw=draw_missing,
    ).static_spec("zh_CN", missing=missing)
    assert missing == {"no such msgid {n}"}


def test_explorer_takes_render_or_compute_and_draw():
    from attnbook.explorers.base import Control, Explorer

    ctl = [Control("n", "window", "slider", (1, 2), 1)]
    for kwargs in (
        {},
        {"compute": lambda n: n},
        {"draw": lambda d, language: None},
        {"render": lambda n: None, "compute": lambda n: n, "draw": lambda d, language: None},
    ):
        with pytest.raises(ValueError, match="either render, or compute and draw"):
            Explorer(ctl, title="t", **kwargs)


# ------------------------------------------------------------------------------------------
# The static explorer's HTML: the template (autoescape) and its inline script and stylesheet
# ------------------------------------------------------------------------------------------


def test_static_html_is_escaped_labelled_and_carries_its_assets_only_when_asked():
    import html as html_lib

    import plotly.graph_objects as go

    from attnbook.explorers.base import page_assets

    controls = [
        Control("d", "d<sub>k</sub>", "slider", (1, 2), 1, labels=("1 < 2", "a & b")),
        Control("on", "show", "toggle", (False, True), True),
        Control("kind", "kind", "select", ("x", "y"), "y", labels=("<x>", '"y"')),
    ]
    ex = Explorer(
        controls,
        lambda d, on, kind: go.Figure(go.Bar(y=[d])),
        title='Q & K <script>alert("x")</script>',
    )
    page = ex.static_html(assets=False)
    full = ex.static_html()
    assert full.endswith(page) and full != page
    # Only the page's own copy: no script or stylesheet in the built book's variant.
    assert "applyPatch" not in page and "<style>" not in page
    assert page.count("<script>") == 1 and "attnbookExplorer.mount(uid)" in page
    inline = full[: -len(page)]
    assert inline.count("<style>") == 1 and inline.count("<script>") == 1
    for path in page_assets().values():  # the package's files, every line of them
        assert all(line in inline for line in path.read_text(encoding="utf-8").splitlines())
    assert ":focus-visible" in inline and "global.attnbookExplorer = {" in inline
    for html in (page, full):  # a Markdown renderer would end a raw HTML block at a blank line
        assert not re.search(r"\n[ \t]*\n", html)
    # Autoescape: the title and option labels are text; a control's label is the library's HTML.
    assert "<script>alert" not in page and "Q &amp; K &lt;script&gt;" in page
    assert ">1 &lt; 2</output>" in page and "&lt;x&gt;</option>" in page
    assert "&#34;y&#34;</option>" in page
    assert ">d<sub>k</sub></label>" in page
    # Every control has a visible label tied to it; the group and the figure are named.
    uid = re.search(r'<div class="attnbook-explorer" id="([^"]+)"', page).group(1)
    for name in ("d", "on", "kind"):
        assert f'<label for="{uid}-{name}">' in page and f'id="{uid}-{name}"' in page
    assert re.search(r'role="group" aria-label="Q &amp; K [^"]*: controls"', page)
    label = re.search(rf'id="{uid}-plot"[^>]* role="figure" aria-label="([^"]*)"', page).group(1)
    assert html_lib.unescape(label) == 'Q & K <script>alert("x")</script>'


def test_explorer_values_leave_the_callers_controls_alone_and_figure_json_checks_values():
    controls = [Control("a", "A", "slider", (1, 2, 3), 1)]

    def draw(d, *, language):
        return go.Figure(go.Scatter(x=[0, 1], y=[d, d]))

    ex = Explorer(controls, title="T", compute=lambda a: a, draw=draw, values={"a": 2})
    assert controls[0].default == 1  # shared Control objects keep their default
    assert ex.values == {"a": 2}
    assert Explorer(controls, title="T", compute=lambda a: a, draw=draw).values == {"a": 1}
    with pytest.raises(ValueError, match=r"values\['a'\]=7 is not one of \(1, 2, 3\)"):
        ex.figure_json({"a": 7})
    with pytest.raises(ValueError, match="no control named 'b'"):
        ex.figure_json({"a": 1, "b": 0})
    assert ex.figure_json({})["data"][0]["y"] == [2, 2]  # a control left out: its default


# ------------------------------------------------------------------------------------------
# The title, out of the plot: take_title and plotly_text_html
# ------------------------------------------------------------------------------------------


def titled(text, *, top=120, height=500, size=None):
    title = {"text": text} if size is None else {"text": text, "font": {"size": size}}
    return {
        "data": [{"type": "bar", "y": [1, 2]}],
        "layout": {
            "title": title,
            "margin": {"t": top, "l": 40, "b": 60},
            "height": height,
            "font": {"size": 13},
            "xaxis": {"title": {"text": "x"}},
        },
    }


def test_take_title_removes_the_title_and_gives_back_its_margin():
    import copy

    fig = titled("Weights of <b>it</b>", size=20)
    before = copy.deepcopy(fig)
    out, caption = take_title(fig)
    assert fig == before  # the caller's figure is not changed
    assert "title" not in out["layout"] and caption == "Weights of <b>it</b>"
    given_back = 120 - out["layout"]["margin"]["t"]
    # The figure is shorter by exactly the margin it gave back: the plot area keeps its height.
    assert 500 - out["layout"]["height"] == given_back
    assert 20 <= given_back < 120  # at least the title's one line of 20 px, not the whole margin
    # Nothing else moves: the other margins, the data, an axis title.
    assert out["layout"]["margin"]["l"] == 40 and out["layout"]["margin"]["b"] == 60
    assert out["data"] == before["data"]
    assert out["layout"]["xaxis"] == {"title": {"text": "x"}}


def test_take_title_gives_back_a_line_per_line_of_a_multi_line_title():
    one, _ = take_title(titled("first", top=200, height=600, size=18))
    three, caption = take_title(titled("first<br>second<br />third", top=200, height=600, size=18))
    assert caption == "first<br>second<br>third"
    back_one = 200 - one["layout"]["margin"]["t"]
    back_three = 200 - three["layout"]["margin"]["t"]
    assert 600 - three["layout"]["height"] == back_three
    # Two more lines of an 18 px font: at least 2 x 18 px more given back.
    assert back_three - back_one >= 2 * 18
    # A title that filled a small margin: the margin shrinks but never below zero, and the
    # height by as much.
    small, _ = take_title(titled("a<br>b<br>c<br>d", top=40, height=300))
    assert 0 <= small["layout"]["margin"]["t"] <= 40
    assert 300 - small["layout"]["height"] == 40 - small["layout"]["margin"]["t"]


@pytest.mark.parametrize(
    "layout",
    [
        {"margin": {"t": 50}, "height": 300},
        {"title": {"text": ""}, "margin": {"t": 50}, "height": 300},
        {"title": {"font": {"size": 30}}, "margin": {"t": 50}, "height": 300},
    ],
)
def test_take_title_leaves_a_figure_without_a_title_as_it_was(layout):
    fig = {"data": [{"type": "scatter", "y": [3]}], "layout": layout}
    out, caption = take_title(fig)
    assert caption == ""
    assert out["data"] == fig["data"]
    assert {k: v for k, v in out["layout"].items()} == {
        k: v for k, v in layout.items() if k != "title"
    }
    assert out["layout"]["margin"] == {"t": 50} and out["layout"]["height"] == 300


def test_take_title_of_a_title_given_as_a_string():
    out, caption = take_title(
        {"data": [], "layout": {"title": "Plain & simple", "margin": {"t": 90}, "height": 400}}
    )
    assert caption == "Plain &amp; simple" and "title" not in out["layout"]
    assert 90 - out["layout"]["margin"]["t"] == 400 - out["layout"]["height"] > 0


@pytest.mark.parametrize(
    "text, html",
    [
        # the tags plotly draws are kept as they are
        (
            "a <b>bold</b> and <i>slanted</i>, x<sub>i</sub><sup>2</sup><br>next line",
            "a <b>bold</b> and <i>slanted</i>, x<sub>i</sub><sup>2</sup><br>next line",
        ),
        ("<em>one</em><br/>two<BR>three", "<em>one</em><br>two<br>three"),
        # attributes of a kept tag are dropped
        ('<b onclick="steal()">x</b>', "<b>x</b>"),
        # entities are decoded once, then every &, < and > escaped once
        ("Tom &amp; Jerry, Tom & Jerry", "Tom &amp; Jerry, Tom &amp; Jerry"),
        ("&lt;s&gt; is a token", "&lt;s&gt; is a token"),
        ("&amp;lt; stays one level", "&amp;lt; stays one level"),
        ("didn&#x27;t &#8220;it&#8221;", "didn't \u201cit\u201d"),
        ("q < k and k > 0", "q &lt; k and k &gt; 0"),
        # a coloured span keeps its colour and nothing else
        (
            '<span style="color:#1f5fa8">blue</span> and '
            "<span style='color: rgb(200, 0, 0)'>red</span>",
            '<span style="color:#1f5fa8">blue</span> and '
            '<span style="color: rgb(200, 0, 0)">red</span>',
        ),
        (
            '<span style="color:red" onmouseover="steal()">r</span>',
            '<span style="color:red">r</span>',
        ),
        ('<span style="color:red;background:url(javascript:x)">r</span>', "<span>r</span>"),
        ('<span class="x">plain</span>', "<span>plain</span>"),
        # unbalanced tags are balanced: left open, closed at the end; a stray close dropped
        ('<span style="color:red">open', '<span style="color:red">open</span>'),
        ("stray</span> close", "stray close"),
        ('<span style="color:red"><b>both', '<span style="color:red"><b>both</b></span>'),
        ("<b>x</i>y</b>", "<b>xy</b>"),
        ('<span style="color:red">r<b>x</span>y', '<span style="color:red">r<b>x</b></span>y'),
        ("", ""),
    ],
)
def test_plotly_text_html(text, html):
    assert plotly_text_html(text) == html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>after",
        '<img src=x onerror="alert(1)">after',
        '<a href="javascript:alert(1)">after</a>',
        '<iframe srcdoc="<script>alert(1)</script>">after',
        "&lt;script&gt;alert(1)&lt;/script&gt;after",
        '<svg onload="alert(1)">after',
    ],
)
def test_plotly_text_html_drops_or_escapes_anything_active(text):
    from html.parser import HTMLParser

    html = plotly_text_html(text)

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.attrs = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self.attrs += [name for name, _ in attrs]

    parser = Tags()
    parser.feed(html)
    # What a browser would parse: no element but the kept ones, no attribute at all.
    assert set(parser.tags) <= {"br", "b", "i", "em", "sub", "sup", "span"}, html
    assert parser.attrs == [], html
    assert html.endswith("after"), html


# --------------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base,new",
    [
        ({"a": 1, "b": [1, 2, 3]}, {"a": 1, "b": [1, 5, 3]}),
        ({"a": 1, "b": {"c": 2}}, {"b": {"c": 3, "d": [1]}}),
        (
            {"annotations": [{"text": "x", "y": 1}]},
            {"annotations": [{"text": "y", "y": 1}, {"text": "z"}]},
        ),
        ({"a": [1, 2]}, {"a": "now a string"}),
        ({"t": {"text": "a"}}, {"t": {"text": ""}, "u": None}),
        ({"a": 1, "b": 2}, {"a": None, "b": 2}),  # a value becomes null
        ([1, 2, 3], [1, None, 3]),
        ({"a": {"b": 1}}, {"a": None}),
        (5, None),
    ],
)
def test_patch_round_trip(base, new):
    p = make_patch(base, new)
    assert apply_patch(base, p) == new
    assert apply_patch(base, json.loads(json.dumps(p))) == new  # survives JSON
    assert make_patch(new, new) is None


def test_patch_never_holds_a_bare_null():
    # The page's applyPatch reads a null patch as "no change" and cannot copy a missing
    # value: a value set to (or added as) null is spelled {"$set": null}.
    assert make_patch({"a": 1}, {"a": None}) == {"a": {"$set": None}}
    assert make_patch({}, {"u": None}) == {"u": {"$set": None}}
    assert make_patch([1, 2], [1, None]) == {"$list": {"1": {"$set": None}}}


def test_patch_of_one_changed_annotation_text_is_small():
    base = {
        "annotations": [{"text": f"title {i}", "x": 0.5, "font": {"size": 14}} for i in range(5)]
    }
    new = copy.deepcopy(base)
    new["annotations"][3]["text"] = "changed"
    assert make_patch(base, new) == {"annotations": {"$list": {"3": {"text": "changed"}}}}
