"""Accessibility of the built book in Chromium: axe-core's audit and the explorers' keyboard use.

**axe-core.** The npm package ``axe-core`` (pinned in package.json, installed by ``npm ci``: the
Makefile's test set-up and ``.ci/run`` run it; nothing is downloaded here) is injected into each
built page, opened from disk, and run with its default rules. The chapters, the introduction, the
run page, notation and glossary of both editions, and a sample of API pages, must show no
violation of impact ``serious`` or ``critical``; a failure lists each rule, its impact and the
nodes (CSS selectors) it found. Where ``node_modules/axe-core`` is missing the test skips with
the command that installs it — except under CI (``CI`` set), where that is a failure, as for a
missing browser (tests/browser/browser.py).

**Keyboard.** Every explorer of every chapter, in both editions: each control is reached with Tab
(in document order, from the control before it), a range slider moves with the arrow keys and
the figure redraws (the plot's ``data-grid-index`` follows), a select changes with the arrow
keys, a checkbox with Space, and the focused control shows a focus indicator (a computed outline
or box-shadow) when reached from the keyboard (``:focus-visible``).

``.venv/bin/python tests/browser/test_browser_a11y.py`` prints the serious and critical axe
nodes by edition and rule for the built book (the numbers of the issue's closing note).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import launch, require_chromium  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
BOOK = ROOT / "_build" / "html"
EDITION_CODES = ("en", "zh")
#: What fails the audit (axe's impacts are minor, moderate, serious, critical).
FAILING_IMPACTS = ("serious", "critical")
CHAPTERS = (
    "chapters/01-rnn-bottleneck",
    "chapters/02-queries-keys-values",
    "chapters/03-scaling-variance",
    "chapters/04-softmax-saturation",
    "chapters/05-self-cross-attention",
    "chapters/06-masks",
    "chapters/07-multi-head-gqa",
    "chapters/08-positional-encoding",
    "chapters/09-transformer-block",
    "chapters/10-architectures",
    "chapters/11-quadratic-cost-kv-cache",
    "chapters/12-flashattention",
    "chapters/13-train-and-sample",
)
#: Every page the audit reads, in each edition: the chapters, the front pages, two appendices and
#: a sample of API pages (the index, a module with a long signature list, an explorer module).
PAGES = (
    "intro",
    "run",
    *CHAPTERS,
    "appendix/notation",
    "appendix/glossary",
    "appendix/api/index",
    "appendix/api/attention",
    "appendix/api/explorers/masks",
)
HOW_TO_GET_AXE = (
    f"axe-core is not installed ({AXE.relative_to(ROOT)} is missing): run `npm ci` in the "
    "repository (make test does, from package-lock.json)."
)
TIMEOUT_MS = 60_000


def require_axe() -> Path:
    """Path of axe.min.js; skip the test (fail under CI) when it is not installed."""
    if not AXE.is_file():
        if os.environ.get("CI"):
            pytest.fail("CI is set but axe-core is missing. " + HOW_TO_GET_AXE)
        pytest.skip(HOW_TO_GET_AXE)
    return AXE


def audit(page, url: str) -> list[dict]:
    """axe-core's violations of the page at ``url``: ``[{id, impact, help, nodes: [target]}]``."""
    page.goto(url, wait_until="load")
    # The explorers draw after load (plotly): audit the page the reader sees.
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.attnbook-explorer-plot'))"
        ".every(gd => gd._fullData)",
        timeout=TIMEOUT_MS,
    )
    page.add_script_tag(path=str(AXE))
    result = page.evaluate(
        "async () => { const r = await axe.run(document, {resultTypes: ['violations']});"
        " return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => ({target: n.target.join(' '), impact: n.impact}))})); }"
    )
    return result


def failing(violations: list[dict]) -> list[dict]:
    """The violations (with only their nodes) of a failing impact."""
    out = []
    for v in violations:
        nodes = [n for n in v["nodes"] if (n["impact"] or v["impact"]) in FAILING_IMPACTS]
        if nodes:
            out.append({**v, "nodes": nodes})
    return out


def describe(violations: list[dict], limit: int = 8) -> str:
    """One line per rule (id, impact, node count, help), then its first ``limit`` targets."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}, {len(v['nodes'])} nodes): {v['help']}")
        lines += [f"    {n['impact'] or v['impact']}: {n['target']}" for n in v["nodes"][:limit]]
        if len(v["nodes"]) > limit:
            lines.append(f"    ... and {len(v['nodes']) - limit} more")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def audit_page(lab_browser):
    """One tab of the module's Chromium, at the column's width, with external requests aborted."""
    require_axe()
    page = lab_browser.new_page(viewport={"width": 1280, "height": 900})
    outside: list[str] = []

    def route(r):
        if r.request.url.startswith(("file://", "data:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.outside = outside
    yield page
    page.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize("code", EDITION_CODES)
def test_axe_finds_no_serious_or_critical_violation(code, name, built_book, audit_page):
    require_chromium()
    path = BOOK / code / f"{name}.html"
    assert path.is_file(), f"the built book lacks {path}"
    bad = failing(audit(audit_page, path.as_uri()))
    assert not bad, f"axe-core on {code}/{name}.html:\n{describe(bad)}"
    assert not audit_page.outside, f"requests outside the book: {audit_page.outside}"


def test_failing_keeps_serious_and_critical_nodes_only():
    # The filter the audit relies on, against a hand-made result (a node's own impact wins).
    violations = [
        {
            "id": "a",
            "impact": "serious",
            "help": "h",
            "nodes": [{"target": "#x", "impact": "serious"}, {"target": "#y", "impact": "minor"}],
        },
        {"id": "b", "impact": "moderate", "help": "h", "nodes": [{"target": "#z", "impact": None}]},
        {"id": "c", "impact": "critical", "help": "h", "nodes": [{"target": "#w", "impact": None}]},
    ]
    got = failing(violations)
    assert [(v["id"], [n["target"] for n in v["nodes"]]) for v in got] == [
        ("a", ["#x"]),
        ("c", ["#w"]),
    ]
    text = describe(got)
    assert "a (serious, 1 nodes)" in text and "#x" in text and "#w" in text and "#y" not in text


def test_audit_reports_a_mismatched_name(tmp_path, audit_page):
    # Negative control: a page with a button named "Close" that reads "Search" fails the audit.
    page = tmp_path / "bad.html"
    page.write_text(
        '<!doctype html><html lang="en"><head><title>t</title></head><body><main>'
        '<button aria-label="Close">Search</button></main></body></html>',
        encoding="utf-8",
    )
    bad = failing(audit(audit_page, page.as_uri()))
    assert [v["id"] for v in bad] == ["label-content-name-mismatch"], describe(bad)
    assert "button" in describe(bad)


# --------------------------------------------------------------------------------------------------
# Keyboard use of the explorers


def chapters_with_explorers() -> list[str]:
    """The chapters whose source displays an explorer (a call to ``*_explorer(``), as
    tests/browser/test_browser_every_explorer.py finds them."""
    return [
        c
        for c in CHAPTERS
        if re.search(r"\w+_explorer\(", (ROOT / f"{c}.md").read_text(encoding="utf-8"))
    ]


def test_most_chapters_have_an_explorer():
    # Guards the keyboard test's parametrisation against silently collecting nothing.
    assert len(chapters_with_explorers()) >= 8, chapters_with_explorers()


def focus_shown(page) -> dict:
    """The focused element's id, whether it matches ``:focus-visible``, and its focus style."""
    return page.evaluate(
        r"""() => { const el = document.activeElement, cs = getComputedStyle(el);
             const clear = c => c === 'transparent' || /rgba\(.*,\s*0\)$/.test(c);
             const outline = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0
                             && !clear(cs.outlineColor);
             return {id: el.id, visible: el.matches(':focus-visible'),
                     style: outline ? `outline ${cs.outlineStyle} ${cs.outlineWidth} `
                                      + cs.outlineColor
                            : (cs.boxShadow !== 'none' ? `box-shadow ${cs.boxShadow}` : null)};
           }"""
    )


def grid_index(page, uid: str, spec: dict) -> int:
    """The grid point the controls now select (the static explorer's ``currentIndex``)."""
    flat = 0
    for c, stride in zip(spec["controls"], spec["strides"]):
        el = page.locator(f"#{uid}-{c['name']}")
        k = int(el.is_checked()) if c["kind"] == "toggle" else int(el.input_value())
        flat += k * stride
    return flat


def operate_by_keyboard(page, uid: str, control: dict) -> str:
    """Change the focused control with the keyboard; return the key pressed."""
    el = page.locator(f"#{uid}-{control['name']}")
    if control["kind"] == "toggle":
        key = "Space"
    else:
        last = (
            int(el.get_attribute("max"))
            if control["kind"] == "slider"
            else len(control["options"]) - 1
        )
        key = "ArrowLeft" if int(el.input_value()) >= last else "ArrowRight"
        if el.evaluate("e => e.tagName") == "SELECT":
            key = "ArrowUp" if key == "ArrowLeft" else "ArrowDown"
    page.keyboard.press(key)
    return key


def enabled_controls(page, uid: str) -> list[str]:
    """Ids of the explorer's enabled controls, in document order."""
    return page.eval_on_selector_all(
        f"#{uid} .attnbook-controls input, #{uid} .attnbook-controls select",
        "els => els.filter(e => !e.disabled).map(e => e.id)",
    )


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("chapter", chapters_with_explorers())
@pytest.mark.parametrize("code", EDITION_CODES)
def test_every_explorer_works_from_the_keyboard(code, chapter, built_book, lab_browser):
    """Tab reaches each control in turn, with a visible focus; a key changes it; the plot
    redraws the grid point the controls select."""
    require_chromium()
    path = BOOK / code / f"{chapter}.html"
    if 'class="attnbook-explorer"' not in path.read_text("utf-8"):
        pytest.fail(f"{code}/{chapter}.html shows no explorer, though its source makes one")
    page = lab_browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.route(
            "**/*",
            lambda r: (
                r.continue_() if r.request.url.startswith(("file://", "data:")) else r.abort()
            ),
        )
        page.goto(path.as_uri())
        uids = page.eval_on_selector_all(".attnbook-explorer", "els => els.map(e => e.id)")
        assert uids
        for uid in uids:
            spec = json.loads(page.locator(f"#{uid}-data").text_content())
            page.wait_for_function(
                "id => document.getElementById(id + '-plot')._fullData", arg=uid, timeout=TIMEOUT_MS
            )
            # Start sequential navigation at the explorer itself, as a reader's click there does.
            page.evaluate(
                "id => { const r = document.getElementById(id); r.tabIndex = -1; r.focus(); }", uid
            )
            by_id = {f"{uid}-{c['name']}": c for c in spec["controls"]}
            reached = []
            while True:
                enabled = enabled_controls(page, uid)
                after = [
                    i
                    for i in enabled
                    if not reached or list(by_id).index(i) > list(by_id).index(reached[-1])
                ]
                if not after:
                    break
                page.keyboard.press("Tab")
                shown = focus_shown(page)
                where = f"{code}/{chapter} explorer {uid}"
                assert shown["id"] == after[0], (
                    f"{where}: Tab went to {shown['id']!r}, not the next control {after[0]!r}"
                )
                assert shown["visible"] and shown["style"], (
                    f"{where}: {shown['id']} has no visible focus indicator: {shown}"
                )
                reached.append(shown["id"])
                control = by_id[shown["id"]]
                before = page.get_attribute(f"#{uid}-plot", "data-grid-index")
                key = operate_by_keyboard(page, uid, control)
                want = grid_index(page, uid, spec)
                assert str(want) != before, f"{where}: {key} did not change {shown['id']}"
                page.wait_for_function(
                    """([id, flat]) => { const gd = document.getElementById(id + '-plot');
                         return gd.getAttribute('data-grid-index') === String(flat)
                                && gd._fullData && gd._fullData.length > 0; }""",
                    arg=[uid, want],
                    timeout=TIMEOUT_MS,
                )
                assert focus_shown(page)["id"] == shown["id"], f"{where}: {key} moved focus"
            assert reached, f"{code}/{chapter}: explorer {uid} has no control Tab reaches"
    finally:
        page.close()


def test_focus_check_fails_without_an_indicator(tmp_path, lab_browser):
    # Negative control of focus_shown: a range input whose outline is removed shows none.
    require_chromium()
    html = tmp_path / "focus.html"
    html.write_text(
        '<!doctype html><html lang="en"><body><input type="range" id="a">'
        '<input type="range" id="b" style="outline:none">'
        '<input type="checkbox" id="c" style="outline-color:transparent">'
        "</body></html>",
        encoding="utf-8",
    )
    page = lab_browser.new_page()
    try:
        page.goto(html.as_uri())
        page.keyboard.press("Tab")
        first = focus_shown(page)
        page.keyboard.press("Tab")
        second = focus_shown(page)
        page.keyboard.press("Tab")
        third = focus_shown(page)
    finally:
        page.close()
    assert first["id"] == "a" and first["visible"] and first["style"], first
    assert second["id"] == "b" and second["style"] is None, second
    assert third["id"] == "c" and third["style"] is None, third


def main() -> None:
    """Print the serious and critical axe nodes of every audited page, by edition and rule."""
    from playwright.sync_api import sync_playwright

    if not AXE.is_file():
        sys.exit(HOW_TO_GET_AXE)
    totals: dict[str, Counter] = {}
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route(
            "**/*",
            lambda r: (
                r.continue_() if r.request.url.startswith(("file://", "data:")) else r.abort()
            ),
        )
        for code in EDITION_CODES:
            totals[code] = Counter()
            for name in PAGES:
                bad = failing(audit(page, (BOOK / code / f"{name}.html").as_uri()))
                for v in bad:
                    totals[code][(v["id"], v["impact"])] += len(v["nodes"])
                if "-v" in sys.argv and bad:
                    print(f"--- {code}/{name}\n{describe(bad)}")
        browser.close()
    print(
        json.dumps(
            {
                code: {f"{k[0]} ({k[1]})": n for k, n in sorted(c.items())}
                for code, c in totals.items()
            },
            indent=1,
            ensure_ascii=False,
        )
    )
    for code, c in totals.items():
        print(f"{code}: {sum(c.values())} serious or critical nodes on {len(PAGES)} pages")


if __name__ == "__main__":
    main()
