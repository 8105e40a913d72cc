"""The Chinese edition's message catalogs: status, markup check, and a translator's round trip.

The book's prose is translated with Sphinx's gettext catalogs (one ``.po`` per page under
``locales/zh_CN/LC_MESSAGES/``; see CONTRIBUTING.md, "The Chinese edition"). Code cells, glued
numbers and figures exist once, in the English source; a message is one paragraph, heading, list
item or table cell of it, with its MyST markup intact (math, roles, inline code, links).

Usage (from the repository root, with the project's interpreter)::

    .venv/bin/python book/catalogs.py update            # the pages' messages into the catalogs
    .venv/bin/python book/catalogs.py status            # translated share per catalog
    .venv/bin/python book/catalogs.py check [PO ...]    # markup of every translation preserved
    .venv/bin/python book/catalogs.py prefill [PO ...]  # copy messages that are only markup
    .venv/bin/python book/catalogs.py dump PO > todo.json    # untranslated or fuzzy messages
    .venv/bin/python book/catalogs.py apply PO done.json     # {msgid: msgstr} into the catalog

``check`` exits 1 and names the message when a translation loses or changes a markup token: a
glue role with its key and format, a citation, a cross-reference's target, inline math, inline
code, a link's address. These must be carried over verbatim; the words around them are
translated. A display-math block is copied unchanged but for the words inside its
``\text{...}``. tests/book/test_catalogs.py runs the same check on every catalog.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_pages  # noqa: E402 - book/api_pages.py, beside this script

sys.path.pop(0)

ROOT = Path(__file__).resolve().parent.parent
#: Where Sphinx finds the catalogs (``locale_dirs``, relative to the book's root).
LOCALE_DIR = ROOT / "locales"
#: The edition's language code (Sphinx's ``language``).
LANGUAGE = "zh_CN"
CATALOG_DIR = LOCALE_DIR / LANGUAGE / "LC_MESSAGES"
#: Pages whose catalogs must be complete (every message translated, none fuzzy). The API
#: reference (appendix/api/) stays in English: its first page's own prose is translated and
#: says so, its module table (the docstrings' summaries) is not.
REQUIRED = ("intro", "run", "references", "chapters/*", "appendix/notation", "appendix/glossary")

# Markup that a translation must carry over unchanged. A role's text is kept whole except for
# the explicit-title form ``title <target>`` (the title may be translated, not the target).
_ROLE = re.compile(r"\{([A-Za-z0-9_:+-]+)\}`([^`]*)`")
_MATH_BLOCK = re.compile(r"\$\$.+?\$\$", re.S)
_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+?\$")
_CODE = re.compile(r"(?<![`}])(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: The words of a display-math block (``\text{scores }``): the one part of it a translation
#: changes (the reader of the Chinese edition reads them as prose).
_TEXT_IN_MATH = re.compile(r"\\text\{[^{}]*\}")
#: Math inside those words (``\text{where $i > j$}``, ``\(...\)``): MathJax typesets it.
_MATH_IN_TEXT = re.compile(r"(?<!\\)\$(?:\\.|[^$\\])*\$|\\\(.*?\\\)", re.S)


def markup_tokens(text: str) -> Counter:
    """The markup tokens of one message that a translation must keep, counted.

    Args:
        text: a ``msgid`` or ``msgstr`` (MyST Markdown).

    Returns:
        A ``Counter`` of strings such as ``"role glue:text var64:.2f"``, ``"math $d_k$"``,
        ``"code `x`"``, ``"link https://..."``.
    """
    tokens: Counter = Counter()
    rest = text
    for m in _ROLE.finditer(rest):
        name, body = m.group(1), m.group(2)
        target = re.search(r"<([^<>]+)>\s*$", body)
        if target and name not in ("glue:text", "glue", "glue:md", "math"):
            body = target.group(1)
        tokens[f"role {name} {body}"] += 1
    rest = _ROLE.sub(" ", rest)
    for m in _MATH_BLOCK.finditer(rest):
        tokens["math " + m.group(0)] += 1
    rest = _MATH_BLOCK.sub(" ", rest)
    for m in _CODE.finditer(rest):
        tokens["code " + m.group(0)] += 1
    rest = _CODE.sub(" ", rest)
    for m in _MATH.finditer(rest):
        tokens["math " + m.group(0)] += 1
    for m in _LINK.finditer(rest):
        tokens["link " + m.group(1)] += 1
    return tokens


def is_verbatim(text: str) -> bool:
    """True when a message has no words outside its markup (display math, a bare role, code).

    Such a message reads the same in every language; ``prefill`` copies it into the catalog.
    """
    rest = _ROLE.sub(" ", _MATH_BLOCK.sub(" ", text))
    rest = _MATH.sub(" ", _CODE.sub(" ", rest))
    if text.startswith(("\n", "\\begin{")):  # a display-math block ($$ ... $$, amsmath)
        rest = ""
    return not re.search(r"[A-Za-z]{2,}", rest)


def markup_problems(entry: polib.POEntry) -> list[str]:
    """What a translated entry lost or added of its source's markup (empty when it kept all)."""
    if not entry.msgstr:
        return []
    # A display-math block: MyST's $$ on lines of their own, or an amsmath environment.
    if entry.msgid.startswith(("\n", "\\begin{")):
        if _TEXT_IN_MATH.sub(r"\\text{}", entry.msgstr) != _TEXT_IN_MATH.sub(
            r"\\text{}", entry.msgid
        ):
            return [
                "a display-math block must be copied unchanged but for the words inside "
                "its \\text{...}"
            ]
        # The math inside each \text{...} is the source's (the words around it may change).
        for got, want in zip(
            _TEXT_IN_MATH.findall(entry.msgstr), _TEXT_IN_MATH.findall(entry.msgid)
        ):
            if _MATH_IN_TEXT.findall(got) != _MATH_IN_TEXT.findall(want):
                return [f"math inside a translated \\text{{...}}: {got!r}"]
        return []
    want, got = markup_tokens(entry.msgid), markup_tokens(entry.msgstr)
    missing = want - got
    extra = got - want
    problems = [f"missing {t!r}" for t in sorted(missing.elements())]
    problems += [f"added {t!r}" for t in sorted(extra.elements())]
    return problems


#: Line width of the saved catalogs: sphinx-intl's (Babel's), so the two tools do not rewrap
#: each other's files.
WRAP = 76
#: The gettext build's output: one .pot per page.
POT_DIR = ROOT / "_build" / "gettext"
#: Catalogs kept under appendix/api/ (the rest of the API reference stays English).
API_KEPT = ("index",)


def extract(out: Path = POT_DIR) -> None:
    """Write each page's messages to ``out/<page>.pot`` (Sphinx's gettext builder, no execution).

    The API reference's module pages are generated first (``book/api_pages.py``), as
    ``book/editions.py`` does before a build.

    Raises:
        RuntimeError: if the gettext build fails (its output is in the message).
    """
    api_pages.write()
    script = (
        "import sys; from pathlib import Path; from jupyter_book.sphinx import build_sphinx\n"
        "root = Path(sys.argv[1]); out = Path(sys.argv[2])\n"
        "sys.exit(build_sphinx(root, out, noconfig=True, path_config=root / '_config.yml',"
        " confoverrides={'external_toc_path': '_toc.yml', 'latex_individualpages': False,"
        " 'nb_execution_mode': 'off'}, builder='gettext', doctreedir=out / '.doctrees',"
        " really_quiet=True) or 0)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the gettext build failed:\n{proc.stderr[-3000:]}")


def update() -> None:
    """Extract the messages, merge them into the catalogs (``sphinx-intl update``), prefill."""
    extract()
    # The gettext build also writes the messages of the theme components in book/_templates
    # (sphinx.pot, Sphinx's own domain): they are the theme's, translated in book/locale/
    # (book/_ext/attnbook_i18n.py), not a page's catalog.
    (POT_DIR / "sphinx.pot").unlink(missing_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx_intl",
            "update",
            "-p",
            str(POT_DIR),
            "-l",
            LANGUAGE,
            "-d",
            str(LOCALE_DIR),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    api = CATALOG_DIR / "appendix" / "api"
    for path in sorted(api.rglob("*.po")) if api.is_dir() else []:
        if path.relative_to(api).with_suffix("").as_posix() not in API_KEPT:
            path.unlink()
    for sub in sorted((p for p in api.rglob("*") if p.is_dir()), reverse=True):
        if not any(sub.iterdir()):
            sub.rmdir()
    for path in catalogs():
        prefill(path)


def prefill(path: Path) -> int:
    """Copy each untranslated message that is only markup (:func:`is_verbatim`) into ``msgstr``."""
    po = polib.pofile(str(path), wrapwidth=WRAP)
    n = 0
    for e in po:
        if not e.obsolete and not e.msgstr and is_verbatim(e.msgid):
            e.msgstr = e.msgid
            n += 1
    if n:
        po.save(str(path))
    return n


def catalogs(patterns: tuple[str, ...] | None = None) -> list[Path]:
    """The catalogs under :data:`CATALOG_DIR` (all, or those matching page ``patterns``)."""
    found = sorted(CATALOG_DIR.rglob("*.po"))
    if patterns is None:
        return found
    return [
        p
        for p in found
        if any(p.relative_to(CATALOG_DIR).with_suffix("").match(g) for g in patterns)
    ]


def page_of(po_path: Path) -> str:
    """The page (Sphinx docname) a catalog translates, e.g. ``chapters/03-scaling-variance``."""
    return po_path.relative_to(CATALOG_DIR).with_suffix("").as_posix()


def status(paths: list[Path]) -> dict[str, dict[str, int]]:
    """Per page: ``total``, ``translated`` (non-empty, not fuzzy), ``fuzzy``, ``untranslated``."""
    out = {}
    for path in paths:
        po = polib.pofile(str(path))
        entries = [e for e in po if not e.obsolete]
        fuzzy = sum(1 for e in entries if "fuzzy" in e.flags)
        done = sum(1 for e in entries if e.msgstr and "fuzzy" not in e.flags)
        out[page_of(path)] = {
            "total": len(entries),
            "translated": done,
            "fuzzy": fuzzy,
            "untranslated": len(entries) - done - fuzzy,
        }
    return out


def _main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("update", "status", "check", "prefill", "dump", "apply"):
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    needed = {"dump": ["PO"], "apply": ["PO", "JSON"]}.get(cmd, [])
    if len(args) < len(needed):
        print(
            f"catalogs.py {cmd}: missing {' '.join(needed[len(args) :])} "
            f"(usage: catalogs.py {cmd} {' '.join(needed)})",
            file=sys.stderr,
        )
        return 2
    for arg in args:
        if not Path(arg).is_file():
            print(f"catalogs.py {cmd}: no such file {arg!r}", file=sys.stderr)
            return 2
    if cmd == "status":
        rows = status(catalogs())
        total = sum(r["total"] for r in rows.values())
        done = sum(r["translated"] for r in rows.values())
        for page, r in rows.items():
            print(f"{page:45s} {r['translated']:4d}/{r['total']:4d}  fuzzy {r['fuzzy']}")
        print(f"{'all catalogs':45s} {done:4d}/{total:4d} ({100 * done / max(total, 1):.1f}%)")
        return 0
    if cmd == "check":
        paths = [Path(a) for a in args] or catalogs()
        bad = 0
        for path in paths:
            for e in polib.pofile(str(path)):
                for problem in markup_problems(e):
                    bad += 1
                    print(f"{path}: {e.msgid[:70]!r}: {problem}")
        print(f"{bad} markup problems in {len(paths)} catalogs")
        return 1 if bad else 0
    if cmd == "prefill":
        for path in [Path(a) for a in args] or catalogs():
            print(f"{path}: {prefill(path)} markup-only messages copied")
        return 0
    if cmd == "update":
        update()
        return _main(["status"])
    if cmd == "dump":
        po = polib.pofile(args[0])
        todo = {
            e.msgid: e.msgstr for e in po if not e.obsolete and (not e.msgstr or "fuzzy" in e.flags)
        }
        json.dump(todo, sys.stdout, ensure_ascii=False, indent=1)
        print()
        return 0
    po = polib.pofile(args[0], wrapwidth=WRAP)
    done = json.loads(Path(args[1]).read_text(encoding="utf-8"))
    n = 0
    for e in po:
        if e.msgid in done and done[e.msgid]:
            e.msgstr = done[e.msgid]
            if "fuzzy" in e.flags:
                e.flags.remove("fuzzy")
            e.previous_msgid = None
            n += 1
    po.save(args[0])
    print(f"{n} messages written to {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
