"""The Chinese edition's catalogs: complete, not fuzzy, markup carried over, in step with the pages.

Reads ``locales/zh_CN/LC_MESSAGES`` through ``book/catalogs.py`` (the contributors' tool) and the
label catalog ``lib/attnbook/locale/zh_CN.po`` of ``attnbook.i18n``.
"""

import re
import sys
from pathlib import Path

import polib
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book"))
import catalogs  # noqa: E402

sys.path.pop(0)

REQUIRED = catalogs.catalogs(catalogs.REQUIRED)


def test_every_page_of_the_book_has_a_catalog():
    pages = {catalogs.page_of(p) for p in REQUIRED}
    chapters = {f"chapters/{p.stem}" for p in (ROOT / "chapters").glob("*.md")}
    assert chapters <= pages, sorted(chapters - pages)
    assert {"intro", "run", "appendix/notation", "appendix/glossary"} <= pages


@pytest.mark.parametrize("po", REQUIRED, ids=catalogs.page_of)
def test_catalog_is_complete_and_not_fuzzy(po):
    row = catalogs.status([po])[catalogs.page_of(po)]
    po_file = polib.pofile(str(po))
    untranslated = [e.msgid[:60] for e in po_file if not e.obsolete and not e.msgstr]
    fuzzy = [e.msgid[:60] for e in po_file if not e.obsolete and "fuzzy" in e.flags]
    assert (untranslated, fuzzy) == ([], []), row


@pytest.mark.parametrize("po", catalogs.catalogs(), ids=catalogs.page_of)
def test_translations_keep_every_markup_token(po):
    problems = [
        (e.msgid[:50], p) for e in polib.pofile(str(po)) for p in catalogs.markup_problems(e)
    ]
    assert problems == []


def test_markup_check_can_fail():
    entry = polib.POEntry(
        msgid="The variance at $d_k = 64$ is {glue:text}`var64:.2f` ({cite}`vaswani2017`).",
        msgstr="方差为 {glue:text}`var64:.3f`（{cite}`vaswani2017`）。",
    )
    problems = catalogs.markup_problems(entry)
    assert "missing 'math $d_k = 64$'" in problems
    assert "missing 'role glue:text var64:.2f'" in problems
    assert "added 'role glue:text var64:.3f'" in problems
    ok = polib.POEntry(
        msgid="see {doc}`chapter 3 <03-x>` and `f(x)`", msgstr="见 {doc}`第 3 章 <03-x>` 与 `f(x)`"
    )
    assert catalogs.markup_problems(ok) == []


def test_markup_only_messages_are_recognised():
    assert catalogs.is_verbatim("\n\\operatorname{softmax}(x)\n")
    assert catalogs.is_verbatim("{glue:text}`n_params:,`")
    assert not catalogs.is_verbatim("The variance is $d_k$.")


def test_bold_closes_in_every_translation():
    """A ``**`` pair must still render as bold in Chinese (CommonMark's flanking rules)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    bad = []
    for po in REQUIRED:
        for e in polib.pofile(str(po)):
            if not e.msgstr or "**" not in e.msgid or e.msgid.startswith("\n"):
                continue
            want = len(re.findall(r"<strong>", md.render(e.msgid)))
            got = len(re.findall(r"<strong>", md.render(e.msgstr)))
            if got < want:
                bad.append((catalogs.page_of(po), e.msgstr[:60]))
    assert bad == []


@pytest.mark.slow
def test_catalogs_hold_every_message_of_the_current_pages(tmp_path):
    """Extract the pages' messages now (Sphinx's gettext builder) and find each in its catalog.

    A sentence changed in an English page is a new message: until it is translated the Chinese
    edition would show it in English, and this test names it.
    """
    catalogs.extract(tmp_path / "pot")
    stale = []
    for po in REQUIRED:
        page = catalogs.page_of(po)
        pot = tmp_path / "pot" / f"{page}.pot"
        assert pot.is_file(), f"no messages extracted for {page}"
        have = {e.msgid for e in polib.pofile(str(po)) if e.msgstr and "fuzzy" not in e.flags}
        stale += [(page, e.msgid[:70]) for e in polib.pofile(str(pot)) if e.msgid not in have]
    assert stale == [], "messages of the pages with no translation (run sphinx-intl update)"


# ------------------------------------------------------------------------------------------
# The label catalog of attnbook.i18n (figure and explorer labels, glued phrases)

LABELS = sorted((ROOT / "lib" / "attnbook" / "locale" / "zh_CN").glob("*.po"))


def test_label_catalog_entries_are_complete_and_keep_placeholders_and_math():
    entries = [e for path in LABELS for e in polib.pofile(str(path))]
    assert len(entries) > 0
    bad = []
    named = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
    for e in entries:
        # A plural entry (ngettext) keeps its translations in msgstr_plural.
        texts = list(e.msgstr_plural.values()) if e.msgid_plural else [e.msgstr]
        for text in texts:
            if not text or "fuzzy" in e.flags:
                bad.append((e.msgid, "untranslated or fuzzy"))
            elif e.msgid.count("{}") != text.count("{}"):
                bad.append((e.msgid, "placeholders differ"))
            elif set(named.findall(e.msgid + (e.msgid_plural or ""))) != set(named.findall(text)):
                bad.append((e.msgid, "named placeholders differ"))
            elif sorted(re.findall(r"\$[^$]*\$", e.msgid)) != sorted(
                re.findall(r"\$[^$]*\$", text)
            ):
                bad.append((e.msgid, "mathtext differs"))
    assert bad == []


def test_every_label_translation_draws_without_a_missing_glyph():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnbook import mpl_figures

    texts = [
        t
        for path in LABELS
        for e in polib.pofile(str(path))
        for t in ([e.msgstr] + list(e.msgstr_plural.values()))
        if t
    ]
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("\n".join(t.replace("{}", "1") for t in texts if "$" not in t)[:20000])
    for i, t in enumerate(t for t in texts if "$" in t):
        ax.text(0, i, t.replace("{}", "1"))
    glyphs: list[str] = []
    with mpl_figures.translated_figure(fig, "en"):
        for artist in fig.findobj(matplotlib.text.Text):
            artist.set_fontfamily(mpl_figures._families_for(artist.get_text(), ["sans-serif"]))
        mpl_figures.figure_png(fig, "en", glyphs=glyphs)
    plt.close(fig)
    assert glyphs == []


def test_markup_check_covers_hyphenated_roles_and_display_math():
    role = polib.POEntry(msgid="get {attnbook-source}`the code`", msgstr="获取代码")
    assert catalogs.markup_problems(role) == ["missing 'role attnbook-source the code'"]
    math = polib.POEntry(msgid="\ns_{ij} = q_i k_j\n", msgstr="\ns_{ji} = q_i k_j\n")
    assert catalogs.markup_problems(math) == [
        "a display-math block must be copied unchanged but for the words inside its \\text{...}"
    ]


def test_display_math_words_inside_text_are_translated_and_nothing_else():
    msgid = "\n\\text{scores } c\\,QK^\\top : 2 L^2 d_k \\text{ FLOPs}\n"
    words = polib.POEntry(
        msgid=msgid, msgstr="\n\\text{分数 } c\\,QK^\\top : 2 L^2 d_k \\text{ 次浮点运算}\n"
    )
    assert catalogs.markup_problems(words) == []
    # The formula around the words is kept: a changed exponent, or a \text moved, is named.
    exponent = polib.POEntry(msgid=msgid, msgstr=words.msgstr.replace("L^2", "L^3"))
    moved = polib.POEntry(msgid=msgid, msgstr="\n\\text{分数 } c\\,QK^\\top : 2 L^2 d_k\n")
    # Math smuggled into the words (\text{若 $i > j$}) would change the formula unchecked.
    smuggled = polib.POEntry(msgid=msgid, msgstr=words.msgstr.replace("分数 ", "分数 $i>j$ "))
    for entry in (exponent, moved, smuggled):
        assert catalogs.markup_problems(entry) != []
    assert catalogs.markup_problems(smuggled) == [
        "math inside a translated \\text{...}: '\\\\text{分数 $i>j$ }'"
    ]


def test_math_inside_text_is_checked_not_forbidden():
    # The words around math in \text{...} are translated, the math kept (was flagged whatever
    # the translation, so such a formula could not be translated at all).
    msgid = "\n\\text{where $x$ is} + \\text{b}\n"
    kept = polib.POEntry(msgid=msgid, msgstr="\n\\text{其中 $x$ 为} + \\text{乙}\n")
    assert catalogs.markup_problems(kept) == []
    escaped = polib.POEntry(msgid="\n\\text{costs \\$5} x\n", msgstr="\n\\text{花费 \\$5} x\n")
    assert catalogs.markup_problems(escaped) == []  # \$ is a dollar sign, not math
    # Math changed, moved to another \text, or written \(...\) is named.
    for msgstr in (
        "\n\\text{其中 $y$ 为} + \\text{乙}\n",
        "\n\\text{其中为} + \\text{乙 $x$}\n",
        "\n\\text{其中 $x$ 为} + \\text{乙 \\(i>j\\)}\n",
    ):
        problems = catalogs.markup_problems(polib.POEntry(msgid=msgid, msgstr=msgstr))
        assert problems and problems[0].startswith("math inside a translated"), msgstr


def test_an_amsmath_environment_is_display_math():
    # MyST's amsmath block has no leading line break: its translation was checked as prose,
    # which has no markup token to lose, so any formula passed.
    msgid = "\\begin{equation}\nw = \\text{weight}\n\\end{equation}"
    ok = polib.POEntry(msgid=msgid, msgstr=msgid.replace("weight", "权重"))
    assert catalogs.markup_problems(ok) == []
    changed = polib.POEntry(msgid=msgid, msgstr=ok.msgstr.replace("w =", "v ="))
    assert catalogs.markup_problems(changed) == [
        "a display-math block must be copied unchanged but for the words inside its \\text{...}"
    ]


def test_catalog_tool_names_a_missing_argument(capsys):
    assert catalogs._main(["apply"]) == 2
    assert "missing PO JSON" in capsys.readouterr().err
    assert catalogs._main(["dump", "/nonexistent.po"]) == 2
    assert "no such file '/nonexistent.po'" in capsys.readouterr().err
