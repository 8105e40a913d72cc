"""Issue 20: every explorer of the built book speaks its edition's language.

Reads the JSON each static explorer embeds in the built pages (what its script draws from) and
every visible string in it: trace names, titles, annotations, tick labels, hover templates, hover
text, the data a hover shows, and the controls' labels and options. In the Chinese edition none
may show an English word (:func:`attnbook.i18n.untranslated`: math, code and the kept
abbreviations pass, and the tokens a real model read, listed by the explorer as ``kept_words``).
In the English edition none may show Chinese. The build already fails on a label the catalogs
lack; this test reads what the reader gets.
"""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from attnbook import i18n

_PAYLOAD = re.compile(r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', re.S)
_LABEL_KEYS = {
    "name",
    "text",
    "title",
    "hovertemplate",
    "hovertext",
    "ticktext",
    "texttemplate",
    "customdata",
}


def visible_strings(spec: dict) -> set[str]:
    """Every string of a static explorer's JSON that a reader can see."""
    out: set[str] = set()

    def walk(node, key=None, annotation=False):
        # A string is seen when its own key is a label key (a title's "text", a trace's
        # "hovertext" list, ...); "side": "right" under a title is not, nor an annotation's
        # "name" (an identifier plotly never draws).
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k, annotation or k == "annotations")
        elif isinstance(node, list):
            for v in node:
                walk(v, key, annotation)
        elif isinstance(node, str) and key in _LABEL_KEYS and not (annotation and key == "name"):
            out.add(node)

    for key in ("traces", "layout", "narrow_layout", "frames", "patches"):
        walk(spec.get(key))
    for c in spec["controls"]:
        if c["kind"] != "toggle":
            out.update(c["labels"])
    out.update(spec.get("toggle_text", []))
    return out


def explorers(edition_dir):
    pages = sorted((edition_dir / "chapters").glob("*.html"))
    assert len(pages) == 13, f"expected the 13 chapters in {edition_dir}, found {len(pages)}"
    for page in pages:
        for m in _PAYLOAD.finditer(page.read_text(encoding="utf-8")):
            yield page.name, json.loads(m.group(2))


def has_cjk(text: str) -> bool:
    return any(unicodedata.east_asian_width(ch) == "W" and ch.isalpha() for ch in text)


def test_chinese_explorers_show_no_english(built_editions):
    bad, seen = {}, 0
    for page, spec in explorers(built_editions["zh"]):
        seen += 1
        kept = set(spec.get("kept_words") or ())
        for text in visible_strings(spec):
            if i18n.untranslated(text, kept):
                bad.setdefault(page, set()).add(text)
    assert seen >= 13, f"only {seen} explorers found in the Chinese edition"
    assert not bad, "explorer strings left in English in the Chinese edition: " + "; ".join(
        f"{page} ({len(texts)}): {sorted(texts)[:4]}" for page, texts in bad.items()
    )


def test_english_explorers_show_no_chinese(built_editions):
    bad = {
        page: sorted(t for t in visible_strings(spec) if has_cjk(t))[:4]
        for page, spec in explorers(built_editions["en"])
    }
    bad = {page: texts for page, texts in bad.items() if texts}
    assert not bad, f"Chinese in the English edition's explorers: {bad}"


@pytest.mark.parametrize(
    "text, kept, words",
    [
        ("查询 0，键 1：可关注", (), []),
        ("query 0, key 1: may attend", (), ["query", "key", "may", "attend"]),
        ("%{x} 个 token：%{y:.3g} GiB<extra>MHA（28 个 KV 头）</extra>", (), []),
        ("%{x} 个 tokens：%{y:.3g} GiB", (), ["tokens"]),  # token is kept; Chinese has no plural
        ("权重 = masked_softmax(scores, mask)", (), []),
        ("“The king”", ("The", "king"), []),
    ],
)
def test_the_scan_catches_english(text, kept, words):
    """The scan itself: it must flag English words and let math, code and kept words pass."""
    assert i18n.untranslated(text, frozenset(kept)) == words


def test_the_scan_lets_notation_through():
    assert i18n.untranslated("γ = ‖W<sub>hh</sub>‖₂，tanh RNN，s<sub>ij</sub>") == []
    assert i18n.untranslated("W<sub>hh</sub> hidden state") == ["hidden", "state"]
