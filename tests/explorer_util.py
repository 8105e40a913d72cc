"""Reading the static explorers' embedded data in tests (shared by tests/test_explorers_*.py).

An explorer's static HTML embeds its precomputed figures as JSON (``<script
type="application/json" id="...-data">``): the controls with their options, the strides of the
grid, the distinct traces and frames, and which frame each grid point shows. These helpers do what
the page's script does, in Python, so the tests can compare the static frames with the library.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser


def embedded_spec(html: str) -> dict:
    """The JSON a static explorer embeds (the one the page's script reads)."""
    m = re.search(r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', html, re.S)
    assert m, "no embedded JSON found in the static HTML"
    return json.loads(m.group(2).replace("<\\/", "</"))


class _TextOf(HTMLParser):
    def __init__(self, br: str):
        super().__init__(convert_charrefs=True)
        self.br, self.parts = br, []

    def handle_starttag(self, tag, attrs):
        if tag == "br":
            self.parts.append(self.br)

    def handle_data(self, data):
        self.parts.append(data)


def caption_text(html: str, *, br: str = " ") -> str:
    """The text a reader sees in a caption's HTML: tags dropped, entities decoded, each
    ``<br>`` as ``br`` (a space: the browser wraps the caption; ``"\\n"`` to read its lines).

    Parsed with the standard library's HTML parser, not with the code that wrote the HTML.
    """
    parser = _TextOf(br)
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)


def live_caption(explorer, *, br: str = " ") -> str:
    """The text of a live explorer's caption (the figure's title, shown above the plot)."""
    return caption_text(explorer.caption.value, br=br)


def frame_caption(spec: dict, frame: dict) -> str:
    """The caption (the figure's title, HTML above the plot) the page shows with ``frame``."""
    return spec["captions"][frame["caption"]] if spec.get("captions") else ""


def static_frame(spec: dict, values: dict, *, narrow: bool = False) -> dict:
    """The figure (data + layout) the static page draws for ``values`` (option values by name),
    and its ``"caption"`` (the figure's title, shown as HTML above the plot).

    ``narrow=True``: the variant a plot narrower than ``spec["narrow_below"]`` px draws.
    """
    from attnbook.explorers.base import apply_patch

    flat = 0
    for c, stride in zip(spec["controls"], spec["strides"]):
        flat += c["options"].index(values[c["name"]]) * stride
    frame = spec["frames"][spec["frame_of"][flat]]
    if narrow:
        layout = apply_patch(spec["narrow_layout"], frame["narrow_layout"])
        data = [
            spec["traces"][e]
            if isinstance(e, int)
            else apply_patch(spec["traces"][e["t"]], spec["patches"][e["p"]])
            for e in frame.get("narrow_data", frame["data"])
        ]
        return {"data": data, "layout": layout, "caption": frame_caption(spec, frame)}
    layout = apply_patch(spec["layout"], frame["layout"])
    return {
        "data": [spec["traces"][i] for i in frame["data"]],
        "layout": layout,
        "caption": frame_caption(spec, frame),
    }


def unmoved(explorer):
    """Body of a module-scoped fixture that shares one default explorer among the tests that
    only read it (its static HTML takes seconds): yields it, then fails if a test moved one of
    its controls. Use as ``yield from unmoved(make_explorer())``."""
    values = dict(explorer.values)
    yield explorer
    assert explorer.values == values, "a test moved a control of the shared explorer"


def assert_speaks_chinese(explorer) -> None:
    """Every setting of ``explorer`` drawn in Chinese: no label missing, none left in English.

    Goes through the explorer's whole grid (``static_spec("zh_CN")``): a message the label
    catalogs lack, or any label, legend entry, control, option or hover text that still shows an
    English word (:func:`attnbook.i18n.untranslated`, which lets through math, code, the
    abbreviations of :data:`attnbook.i18n.KEPT_WORDS` and the explorer's ``kept_words``), fails.
    Then checks the check: an explorer drawn with its catalogs emptied must fail it.
    """
    from attnbook import i18n

    missing: set = set()
    spec = explorer.static_spec("zh_CN", missing=missing)
    assert not missing, f"{len(missing)} labels not in Chinese, e.g. {sorted(missing)[:8]}"
    kept = frozenset(spec.get("kept_words") or ())  # e.g. a menu of the sentences a model read
    for c in spec["controls"]:
        if c["kind"] == "toggle":  # a checkbox: its labels are not shown (toggle_text is)
            continue
        for text in c["labels"]:
            assert not i18n.untranslated(text, kept), f"control {c['name']}: option {text!r}"


def title_text(layout: dict) -> str:
    """The title drawn inside a figure's plot: an annotation named ``"title"``, else
    ``layout.title``'s text ("" when the figure draws none: its title is the caption above)."""
    for a in layout.get("annotations") or []:
        if a.get("name") == "title":
            return str(a.get("text", ""))
    t = layout.get("title")
    return str(t.get("text", "") if isinstance(t, dict) else t or "")
