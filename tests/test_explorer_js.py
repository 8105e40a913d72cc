"""The static explorer's script (lib/attnbook/explorers/static/explorer.js) under Node.

The script mirrors Python: ``applyPatch`` applies the patches that
:func:`attnbook.explorers.base.make_patch` writes (as :func:`~attnbook.explorers.base.apply_patch`
does), and ``frameFigure`` rebuilds a frame of the embedded spec (as ``tests/explorer_util.py``'s
``static_frame`` does). These tests run the file itself in Node (``node:vm``, no browser, no DOM)
on cases made by Python and compare the results with Python's, so the two cannot drift apart:

* several hundred random pairs of nested JSON values (dicts, lists, scalars, ``None``; keys
  added, deleted and set to ``None``, lists patched index by index or resized), plus the cases of
  ``tests/test_explorers_base.py``; the cases are checked to exercise every rule
  (``$set``, ``$list``, ``$del``, a value set to ``None``, no change);
* every grid point, wide and narrow, of a small explorer's real static spec;
* mutants of the script (one rule broken each) must fail the same comparison, so the comparison
  can fail;
* the bootstrap each explorer's HTML carries mounts the explorer once, only after both
  ``window.Plotly`` and ``window.attnbookExplorer`` exist, and otherwise says which did not load.

Node is required under CI (``.ci/run`` installs nodejs); elsewhere a missing node skips.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import random
import re
import shutil
import subprocess

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.explorers.base import apply_patch, make_patch, page_assets  # noqa: E402
from explorer_util import static_frame  # noqa: E402

SCRIPT = page_assets()["attnbook-explorer.js"]

# Loads one or more copies of explorer.js, each into its own fresh context (no DOM), applies every
# case's patch and rebuilds every requested frame. argv: cases.json, then the scripts.
RUNNER = r"""
const fs = require('node:fs');
const vm = require('node:vm');
const [casesPath, ...scripts] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
const out = scripts.map((path) => {
  const context = vm.createContext({});
  vm.runInContext(fs.readFileSync(path, 'utf8'), context, {filename: path});
  const api = context.attnbookExplorer;
  const patched = cases.patches.map(([base, patch]) => {
    const before = JSON.stringify(base);
    const result = api.applyPatch(base, patch);
    return {result: result === undefined ? '<undefined>' : result,
            base_unchanged: JSON.stringify(base) === before};
  });
  const frames = cases.frames.map(([flat, narrow]) => api.frameFigure(cases.spec, flat, narrow));
  const flats = cases.indices.map((idx) => api.gridIndex(cases.spec, idx));
  return {patched, frames, flats};
});
process.stdout.write(JSON.stringify(out));
"""


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):  # .ci/run installs nodejs: there a missing node is a failure
            pytest.fail("no Node.js to run the static explorer's script (apt-get install nodejs)")
        pytest.skip("no Node.js to run the static explorer's script")
    return node


def same(a, b) -> bool:
    """JSON equality that tells ``true`` from ``1`` (Python's ``True == 1`` does not)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b  # JSON has one number type: JS writes 2.0 as 2
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# ------------------------------------------------------------------------------------------
# Random JSON values and changed copies of them
# ------------------------------------------------------------------------------------------

# Plotly's keys never start with "$" (the patch's own keys); numeric keys are iterated first by JS.
KEYS = ["x", "y", "text", "font", "annotations", "0", "10", "2", "a b", "中文", "domain"]
STRINGS = ["", "a", "title <b>1</b>", "</script>", "键 ‖q‖", "null", "0"]


def scalar(rng: random.Random):
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randint(-5, 5)
    if kind == 1:
        return round(rng.uniform(-3, 3), 3) + 0.5  # never integer-valued: JS writes 2.0 as 2
    if kind == 2:
        return rng.choice(STRINGS)
    if kind == 3:
        return rng.random() < 0.5
    return None if kind == 4 else rng.choice([0, 1, -1])


def value(rng: random.Random, depth: int):
    r = rng.random()
    if depth <= 0 or r < 0.4:
        return scalar(rng)
    if r < 0.75:
        return {rng.choice(KEYS): value(rng, depth - 1) for _ in range(rng.randint(0, 4))}
    return [value(rng, depth - 1) for _ in range(rng.randint(0, 4))]


def changed(rng: random.Random, v, depth: int):
    """A changed copy of ``v``: values replaced or set to None, keys added and deleted, list
    elements changed, lists resized, types changed; sometimes ``v`` itself."""
    r = rng.random()
    if r < 0.1:
        return value(rng, depth)
    if r < 0.15:
        return None
    if r < 0.2:
        return copy.deepcopy(v)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            roll = rng.random()
            if roll < 0.2:
                continue  # deleted
            out[k] = (
                None
                if roll < 0.3
                else changed(rng, x, depth - 1)
                if roll < 0.6
                else copy.deepcopy(x)
            )
        for _ in range(rng.randint(0, 2)):
            out[rng.choice(KEYS)] = value(rng, depth - 1)
        return out
    if isinstance(v, list):
        out = [changed(rng, x, depth - 1) if rng.random() < 0.5 else copy.deepcopy(x) for x in v]
        if rng.random() < 0.15:
            out.append(value(rng, depth - 1))
        return out
    return scalar(rng)


def random_pairs(n: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        base = value(rng, 4)
        pairs.append((base, changed(rng, base, 4)))
    return pairs


# The cases of tests/test_explorers_base.py::test_patch_round_trip and a few by hand.
HAND_PAIRS = [
    ({"a": 1, "b": [1, 2, 3]}, {"a": 1, "b": [1, 5, 3]}),
    ({"a": 1, "b": {"c": 2}}, {"b": {"c": 3, "d": [1]}}),
    (
        {"annotations": [{"text": "x", "y": 1}]},
        {"annotations": [{"text": "y", "y": 1}, {"text": "z"}]},
    ),
    ({"a": [1, 2]}, {"a": "now a string"}),
    ({"t": {"text": "a"}}, {"t": {"text": ""}, "u": None}),
    ({"a": 1, "b": 2}, {"a": None, "b": 2}),
    ([1, 2, 3], [1, None, 3]),
    ({"a": {"b": 1}}, {"a": None}),
    (5, None),
    (None, {"a": 1}),
    ({"a": 1}, {"a": 1}),
    ({"a": [{"b": [1, {"c": None}]}]}, {"a": [{"b": [1, {"c": 0}]}]}),
    ({"a": True}, {"a": 1}),
]


def patch_rules(patch, seen: set) -> set:
    """The rules a patch uses: "$set", "$set None", "$list", "$del", "scalar"."""
    if isinstance(patch, dict):
        if "$set" in patch:
            seen.add("$set None" if patch["$set"] is None else "$set")
            return seen
        if "$list" in patch:
            seen.add("$list")
            for p in patch["$list"].values():
                patch_rules(p, seen)
            return seen
        for p in patch.values():
            if isinstance(p, dict) and "$del" in p:
                seen.add("$del")
            else:
                patch_rules(p, seen)
    elif patch is not None:
        seen.add("scalar")
    return seen


# ------------------------------------------------------------------------------------------
# A small explorer with a narrow variant and greyed-out controls
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_spec():
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control, Explorer
    from attnbook.explorers.layout import panel_grid

    def compute(n, side, show):
        return n, side, show

    def draw(data, *, language, width):
        # Drawn for its width (panels stacked on a phone), so the narrow variants differ.
        n, side, show = data
        z = [[(i * n + j) % 7 / 7 for j in range(n)] for i in range(n)]
        grid = panel_grid(width, ["scores" if show else "weights", "bars"], height=360)
        fig = grid.figure
        fig.add_trace(go.Heatmap(z=z, showscale=False), **grid.cells[0])
        fig.add_trace(go.Bar(y=[n, n / 3, 1 if show else 0.5]), **grid.cells[1])
        fig.update_layout(title=dict(text=f"{n} tokens, padding at the {side}"))
        return fig

    controls = [
        Control("n", "tokens", "slider", (2, 3, 5), 3),
        Control("side", "padding at", "select", ("start", "end"), "end"),
        Control("show", "scores", "toggle", (False, True), True),
    ]
    ex = Explorer(
        controls,
        title="toy explorer",
        compute=compute,
        draw=draw,
        active=lambda v: {"n", "show"} | ({"side"} if v["n"] > 2 else set()),
    )
    return ex.static_spec("en")


# ------------------------------------------------------------------------------------------
# Running the script
# ------------------------------------------------------------------------------------------


def run_scripts(tmp_path, scripts: list, pairs: list, spec: dict) -> tuple[dict, list]:
    """``(the cases sent, Node's results per script)``."""
    cases = {"patches": [(base, make_patch(base, new)) for base, new in pairs], "spec": spec}
    combos = list(itertools.product(*(range(len(c["options"])) for c in spec["controls"])))
    cases["indices"] = [list(c) for c in combos]
    cases["frames"] = [(flat, narrow) for flat in range(len(combos)) for narrow in (False, True)]
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp_path / "runner.js").write_text(RUNNER, encoding="utf-8")
    run = subprocess.run(
        [
            node_or_skip(),
            str(tmp_path / "runner.js"),
            str(tmp_path / "cases.json"),
            *map(str, scripts),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return cases, json.loads(run.stdout)


def disagreements(cases: dict, pairs: list, spec: dict, result: dict) -> list[str]:
    """Where one script's results differ from Python's (empty when they agree)."""
    found = []
    for (base, patch), got in zip(cases["patches"], result["patched"]):
        want = apply_patch(base, patch)
        if not same(got["result"], want):
            found.append(f"applyPatch({base!r}, {patch!r}) = {got['result']!r}, Python: {want!r}")
        if not got["base_unchanged"]:
            found.append(f"applyPatch changed its base {base!r}")
    controls = spec["controls"]
    for idx, flat in zip(cases["indices"], result["flats"]):
        values = {c["name"]: c["options"][i] for c, i in zip(controls, idx)}
        want_flat = sum(i * s for i, s in zip(idx, spec["strides"]))
        if flat != want_flat:
            found.append(f"gridIndex({idx}) = {flat}, Python: {want_flat}")
        for narrow in (False, True):
            got = result["frames"][cases["frames"].index((want_flat, narrow))]
            want = static_frame(spec, values, narrow=narrow)
            if not same(got, want):
                found.append(f"frameFigure({values}, narrow={narrow}) differs from Python")
    return found


# ------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------

N_RANDOM = 600


def test_random_pairs_exercise_every_patch_rule():
    """The cases below are worth something only if they use every rule of the patch format."""
    counts: dict[str, int] = {}
    for base, new in random_pairs(N_RANDOM) + HAND_PAIRS:
        patch = make_patch(base, new)
        assert same(apply_patch(base, patch), new), (base, new, patch)  # Python round trip
        rules = patch_rules(patch, set()) if patch is not None else {"no change"}
        for rule in rules:
            counts[rule] = counts.get(rule, 0) + 1
    for rule in ("$set", "$set None", "$list", "$del", "scalar", "no change"):
        assert counts.get(rule, 0) >= 20, counts


def test_apply_patch_in_js_equals_python(tmp_path, toy_spec):
    pairs = random_pairs(N_RANDOM) + HAND_PAIRS
    cases, results = run_scripts(tmp_path, [SCRIPT], pairs, toy_spec)
    found = disagreements(cases, pairs, toy_spec, results[0])
    assert not found, "\n".join(found[:10])
    # Every patched value is the new value itself, as Python's make_patch promised.
    for (_, new), got in zip(pairs, results[0]["patched"]):
        assert same(got["result"], new)


def test_toy_spec_has_what_the_frame_comparison_needs(toy_spec):
    """The frame comparison means something only if the toy has narrow variants that differ
    and several frames."""
    assert toy_spec["narrow_layout"] != toy_spec["layout"]
    assert len(toy_spec["frames"]) >= 6 and toy_spec["inactive"]
    assert any(f["layout"] for f in toy_spec["frames"][1:])
    # Each (n, side) has its own caption (the title, taken out of the figure), so a frame that
    # shows another frame's caption differs: 3 x 2, less n = 2 at the start (side is inactive
    # at n = 2, drawn at its default, the end).
    assert len(toy_spec["captions"]) == 5 and "title" not in toy_spec["layout"]


# One rule broken per mutant; the comparison must catch each.
MUTANTS = {
    "$del ignored": (
        "if (isObject(v) && DEL in v) { delete out[k]; }",
        "if (isObject(v) && DEL in v) { out[k] = null; }",
    ),
    "$set not special": ("if (SET in p) { return copy(p[SET]); }", "if (false) { }"),
    "$list not special": ("if (LIST in p) {", "if (false) {"),
    "null patch is null": (
        "if (p === null || p === undefined) { return copy(base); }",
        "if (p === null || p === undefined) { return null; }",
    ),
    "patches its base": (
        "out = isObject(base) ? copy(base) : {};",
        "out = isObject(base) ? base : {};",
    ),
    "narrow frame from the wide layout": (
        "var layout = narrow ? applyPatch(spec.narrow_layout",
        "var layout = narrow ? applyPatch(spec.layout",
    ),
    "the first frame's caption": ("spec.captions[frame.caption]", "spec.captions[0]"),
}


def test_the_comparison_catches_a_drifted_script(tmp_path, toy_spec):
    source = SCRIPT.read_text(encoding="utf-8")
    scripts = []
    for name, (old, new) in MUTANTS.items():
        assert source.count(old) == 1, f"mutant {name!r}: {old!r} is not in explorer.js once"
        path = tmp_path / f"mutant-{len(scripts)}.js"
        path.write_text(source.replace(old, new), encoding="utf-8")
        scripts.append(path)
    pairs = random_pairs(200, seed=1) + HAND_PAIRS
    cases, results = run_scripts(tmp_path, scripts, pairs, toy_spec)
    for name, result in zip(MUTANTS, results):
        assert disagreements(cases, pairs, toy_spec, result), f"mutant {name!r} went unnoticed"


# ------------------------------------------------------------------------------------------
# The bootstrap in each explorer's HTML
# ------------------------------------------------------------------------------------------

# Runs an explorer's last <script> (its bootstrap) with a stand-in window and document: plotly.js
# arrives at `plotlyAt` ms, explorer.js at `scriptAt` ms (-1: never); reports the mount calls and
# the plot's text after `endAt` ms.
BOOT_RUNNER = r"""
const fs = require('node:fs');
const vm = require('node:vm');
const [bootPath, plotlyAt, scriptAt, endAt] = process.argv.slice(2).map(
  (x, i) => (i === 0 ? x : Number(x)));
const plot = {textContent: ''};
const calls = [];
const context = vm.createContext({
  setTimeout, Date, document: {getElementById: (id) => (id.endsWith('-plot') ? plot : null)},
});
context.window = context;
if (plotlyAt >= 0) { setTimeout(() => { context.Plotly = {}; }, plotlyAt); }
if (scriptAt >= 0) {
  setTimeout(() => {
    context.attnbookExplorer = {mount: (uid) => calls.push({uid, plotly: !!context.Plotly})};
  }, scriptAt);
}
vm.runInContext(fs.readFileSync(bootPath, 'utf8'), context);
setTimeout(() => process.stdout.write(JSON.stringify({calls, text: plot.textContent})), endAt);
"""


@pytest.fixture(scope="module")
def bootstrap():
    """``(uid, the bootstrap script, its messages)`` of a small explorer that waits 0.4 s."""
    import plotly.graph_objects as go

    from attnbook import viz
    from attnbook.explorers.base import Control, Explorer

    ex = Explorer(
        [Control("n", "n", "slider", (1, 2), 1)],
        lambda n: go.Figure(go.Bar(y=[n])),
        title="toy explorer",
    )
    wait = viz.PLOTLY_WAIT_SECONDS
    viz.PLOTLY_WAIT_SECONDS = 0.4
    try:
        html = ex.static_html(assets=False)
    finally:
        viz.PLOTLY_WAIT_SECONDS = wait
    uid = re.search(r'<div class="attnbook-explorer" id="([^"]+)"', html).group(1)
    boot = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(boot) == 1, "the explorer's HTML has one script, its bootstrap"
    words = {
        "plotly": "This figure needs plotly.js, which did not load.",
        "script": "This explorer needs its script (attnbook-explorer.js), which did not load.",
    }
    return uid, boot[0], words


@pytest.mark.parametrize(
    "plotly_at, script_at, mounted, text",
    [
        (0, 0, True, ""),  # both there at once
        (150, 50, True, ""),  # plotly.js later (a deferred script)
        (50, 150, True, ""),  # explorer.js later (order on the page is not guaranteed)
        (0, -1, False, "script"),  # explorer.js never loads
        (-1, 0, False, "plotly"),  # plotly.js never loads
    ],
)
def test_bootstrap_mounts_once_after_plotly_and_the_script(
    tmp_path, bootstrap, plotly_at, script_at, mounted, text
):
    uid, boot, words = bootstrap
    (tmp_path / "boot.js").write_text(boot, encoding="utf-8")
    (tmp_path / "runner.js").write_text(BOOT_RUNNER, encoding="utf-8")
    run = subprocess.run(
        [
            node_or_skip(),
            str(tmp_path / "runner.js"),
            str(tmp_path / "boot.js"),
            str(plotly_at),
            str(script_at),
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["calls"] == ([{"uid": uid, "plotly": True}] if mounted else []), out
    assert out["text"] == (words[text] if text else ""), out


# The first draw waits for the figure font (explorer.js's whenFontsLoaded): a fake
# document.fonts whose load() resolves when the test says so.
FONTS_RUNNER = r"""
const fs = require('node:fs');
const vm = require('node:vm');
const [script] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function run(scenario) {
  const calls = [];
  let resolveLoad = null;
  const fonts = scenario.noApi ? {} : scenario.throws ? {load: () => { throw new Error('no'); }}
    : {load: (font, text) => {
      calls.push(['load', font, text]);
      return new Promise((r) => { resolveLoad = r; });
    }};
  // setTimeout as the page's: an exception thrown in a callback is the page's uncaught error.
  const timeout = (fn, ms) => setTimeout(() => {
    try { fn(); } catch (e) { calls.push(['uncaught', String(e.message)]); }
  }, ms);
  const context = vm.createContext({document: {fonts}, setTimeout: timeout, clearTimeout});
  vm.runInContext(fs.readFileSync(script, 'utf8'), context);
  context.attnbookExplorer.whenFontsLoaded(scenario.family, 'γ注意', scenario.waitMs, (late) => {
    calls.push(['then', late]);
    if (scenario.drawThrows) { throw new Error('draw failed'); }
  });
  await sleep(scenario.loadAfterMs);
  if (resolveLoad) { resolveLoad([]); }
  await sleep(scenario.waitMs + 30);
  return calls;
}
(async () => {
  const out = {
    inTime: await run({family: 'attnbook-sans, sans-serif', waitMs: 200, loadAfterMs: 10}),
    late: await run({family: 'attnbook-sans, sans-serif', waitMs: 40, loadAfterMs: 120}),
    noFamily: await run({family: null, waitMs: 40, loadAfterMs: 10}),
    noApi: await run({family: 'attnbook-sans', waitMs: 40, loadAfterMs: 10, noApi: true}),
    throws: await run({family: 'attnbook-sans', waitMs: 40, loadAfterMs: 10, throws: true}),
    drawThrows: await run({family: 'attnbook-sans', waitMs: 200, loadAfterMs: 10,
                           drawThrows: true}),
    drawThrowsNoApi: await run({family: null, waitMs: 40, loadAfterMs: 10, drawThrows: true}),
  };
  process.on('unhandledRejection', (e) => { out.rejected = String(e); });
  await sleep(20);
  process.stdout.write(JSON.stringify(out));
})();
"""


def test_first_draw_waits_for_the_figure_font_and_redraws_when_it_comes_late(tmp_path):
    node = node_or_skip()
    runner = tmp_path / "fonts.js"
    runner.write_text(FONTS_RUNNER)
    res = subprocess.run(
        [node, str(runner), str(SCRIPT)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # Loaded within the wait: one draw, after the load, asked for the text's characters.
    assert out["inTime"] == [["load", "13px attnbook-sans, sans-serif", "γ注意"], ["then", False]]
    # Not loaded within the wait: drawn without it, then drawn again once it is there.
    assert out["late"] == [
        ["load", "13px attnbook-sans, sans-serif", "γ注意"],
        ["then", False],
        ["then", True],
    ]
    # No family to wait for, or a browser without the font loading API: drawn at once.
    assert out["noFamily"] == [["then", False]]
    assert out["noApi"] == [["then", False]]
    # A load() that throws: drawn at once, once (not after the wait, not twice).
    assert out["throws"] == [["then", False]]
    # A draw that throws: the page's own uncaught error, on the promise path as on the direct
    # one (not an unhandled rejection, not thrown into the caller).
    assert out["drawThrows"] == [
        ["load", "13px attnbook-sans", "γ注意"],
        ["then", False],
        ["uncaught", "draw failed"],
    ]
    assert out["drawThrowsNoApi"] == [["then", False], ["uncaught", "draw failed"]]
    assert "rejected" not in out
