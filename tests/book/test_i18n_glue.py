"""Issue 12: a ``{glue:text}`` role inside a translated paragraph shows the page's glued value.

A toy Sphinx project in ``tmp_path`` (MyST-NB, one MyST notebook page that glues ``var64``, a
zh_CN catalog translating the paragraph that pastes it) is built twice: with
``book/_ext/attnbook_i18n.py`` the Chinese sentence carries ``1.23`` and the strict build has no
warning; without it the translation is used but the value is missing and MyST-NB warns.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

EXT_DIR = Path(__file__).resolve().parents[2] / "book" / "_ext"

PAGE = textwrap.dedent(
    """\
    ---
    jupytext:
      text_representation:
        format_name: myst
    kernelspec:
      name: python3
      display_name: Python 3
    ---

    # Variance

    ```{code-cell} python3
    from myst_nb import glue
    glue("var64", 1.2345, display=False)
    ```

    The measured variance is {glue:text}`var64:.2f`, close to the theory.
    """
)

# msgid as Sphinx's gettext builder extracts the MyST paragraph (the raw source line).
PO = textwrap.dedent(
    """\
    msgid ""
    msgstr ""
    "Content-Type: text/plain; charset=UTF-8\\n"
    "Language: zh_CN\\n"

    msgid "Variance"
    msgstr "方差"

    msgid "The measured variance is {glue:text}`var64:.2f`, close to the theory."
    msgstr "测得的方差为 {glue:text}`var64:.2f`，与理论接近。"
    """
)

CONF = textwrap.dedent(
    """\
    import sys
    sys.path.insert(0, {ext_dir!r})
    extensions = {extensions!r}
    language = "zh_CN"
    locale_dirs = ["locale"]
    nb_execution_mode = "force"
    exclude_patterns = ["_build", "locale"]
    """
)


def _build(root: Path, with_extension: bool) -> tuple[subprocess.CompletedProcess, str]:
    extensions = ["myst_nb"] + (["attnbook_i18n"] if with_extension else [])
    (root / "conf.py").write_text(
        CONF.format(ext_dir=str(EXT_DIR), extensions=extensions), encoding="utf-8"
    )
    (root / "index.md").write_text(PAGE, encoding="utf-8")
    messages = root / "locale" / "zh_CN" / "LC_MESSAGES"
    messages.mkdir(parents=True, exist_ok=True)
    (messages / "index.po").write_text(PO, encoding="utf-8")
    with open(messages / "index.po", "rb") as po, open(messages / "index.mo", "wb") as mo:
        write_mo(mo, read_po(po, locale="zh_CN"))
    out = root / "_build" / "html"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", "-q", str(root), str(out)]
    if with_extension:
        cmd[3:3] = ["-W"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    html = (out / "index.html").read_text(encoding="utf-8") if proc.returncode == 0 else ""
    return proc, html


def _paragraph(html: str) -> str:
    """The text of the page's translated paragraph, tags removed."""
    match = re.search(r"<p>(测得的方差为.*?)</p>", html, re.DOTALL)
    assert match, "translated paragraph not in the page"
    return re.sub(r"<[^>]+>", "", match.group(1))


@pytest.mark.slow
def test_glue_text_in_translated_paragraph(tmp_path: Path) -> None:
    proc, html = _build(tmp_path, with_extension=True)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING:" not in proc.stderr, proc.stderr  # a Sphinx warning (-W also fails)
    assert _paragraph(html) == "测得的方差为 1.23，与理论接近。"
    assert "The measured variance" not in html


@pytest.mark.slow
def test_without_extension_the_value_is_missing(tmp_path: Path) -> None:
    proc, html = _build(tmp_path, with_extension=False)
    assert proc.returncode == 0, proc.stderr
    assert "No key 'var64' found in glue data" in proc.stderr
    # the catalog is used, but the glued value is missing
    assert _paragraph(html) == "测得的方差为 ，与理论接近。"


def test_a_glued_phrase_with_curly_quotes_finds_its_translation() -> None:
    """Smart quotes (on for zh_CN) make a glued phrase's apostrophe curly before the extension
    translates it; the label catalogs hold the straight form, as Python wrote it."""
    import polib

    sys.path.insert(0, str(EXT_DIR))
    try:
        import attnbook_i18n
    finally:
        sys.path.remove(str(EXT_DIR))
    from attnbook import i18n

    catalogs = (EXT_DIR.parents[1] / "lib" / "attnbook" / "locale" / "zh_CN").glob("*.po")
    phrases = [
        e.msgid
        for po in sorted(catalogs)
        for e in polib.pofile(str(po))
        if "'" in e.msgid and "{" not in e.msgid and i18n.lookup(e.msgid, "zh_CN")
    ]
    assert phrases, "no catalog phrase with an apostrophe to test with"
    for straight in phrases:
        curly = straight.replace("'", "\u2019")
        assert i18n.lookup(curly, "zh_CN") is None or curly == straight
        assert attnbook_i18n.lookup_pasted(curly, "zh_CN") == i18n.lookup(straight, "zh_CN")
    assert attnbook_i18n.lookup_pasted("no such phrase\u2019s", "zh_CN") is None
