"""Issue 22: a display-math block's words (``\\text{...}``) in the page's language.

Sphinx translates a display-math block like a literal block: it wraps the translation in
``::`` and parses it again with the page's parser, which for a MyST page makes a paragraph ``::``
and a code block: the formula became ``\\[::\\]`` in the Chinese edition (chapters 6, 9 and 11).
``attnbook_i18n.DisplayMathTranslation`` puts the catalog's LaTeX in as it is, before Sphinx's
own transform. A toy MyST project with one translated formula is built in Chinese with the
extension (the formula carries the Chinese words) and without it (the negative control shows
the ``::`` the book showed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[2]
EXT_DIR = ROOT / "book" / "_ext"

PAGE = """\
# Toy

The cost:

$$
\\text{scores } c\\,QK^\\top : 2 L^2 d_k \\text{ FLOPs}
$$

More text.
"""
MSGID = "\n\\text{scores } c\\,QK^\\top : 2 L^2 d_k \\text{ FLOPs}\n"
MSGSTR = "\n\\text{分数 } c\\,QK^\\top : 2 L^2 d_k \\text{ 次浮点运算}\n"


def build(root: Path, extension: bool) -> str:
    src = root / "src"
    (src / "locales" / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    exts = ["myst_parser"] + (["attnbook_display_math"] if extension else [])
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXT_DIR)!r})\nproject = 'toy'\n"
        f"language = 'zh_CN'\nlocale_dirs = ['locales']\ngettext_compact = False\n"
        f"extensions = {exts!r}\nmyst_enable_extensions = ['dollarmath', 'amsmath']\n",
        encoding="utf-8",
    )
    (src / "index.md").write_text(PAGE, encoding="utf-8")
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "zh_CN"}
    po.append(polib.POEntry(msgid=MSGID, msgstr=MSGSTR))
    po.append(polib.POEntry(msgid="More text.", msgstr="更多文字。"))
    po.save_as_mofile(str(src / "locales" / "zh_CN" / "LC_MESSAGES" / "index.mo"))
    out = root / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "lib")),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (out / "index.html").read_text(encoding="utf-8")


def test_the_formula_carries_the_translated_words(tmp_path):
    html = build(tmp_path, extension=True)
    assert "\\text{分数 } c\\,QK^\\top : 2 L^2 d_k \\text{ 次浮点运算}" in html
    assert "更多文字。" in html  # the rest of the page is translated as before
    assert "::" not in html.split('class="math')[1].split("</div>")[0]


def test_without_the_extension_sphinx_breaks_the_formula(tmp_path):
    html = build(tmp_path, extension=False)
    math = html.split('class="math')[1].split("</div>")[0]
    assert "分数" not in math and "::" in math
