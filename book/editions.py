"""Build the book's two editions, English and Chinese, from one source and one execution.

``make book`` (``make html``) runs this script. It builds

* ``_build/html/en/``: the English edition, from the pages themselves;
* ``_build/html/zh/``: the Chinese edition, the same pages with their prose translated by the
  gettext catalogs of ``locales/zh_CN/`` (code cells, glued numbers and figures are the same);
* ``_build/html/index.html``: a landing page that leads to both.

Every build is strict, as before: Sphinx warnings are errors (``-W``), missing references are
warned (``-n``, nitpicky), every warning is reported before failing (``--keep-going``), and a
cell that raises stops the build (``nb_execution_raise_on_error`` in ``_config.yml``).

**One execution, shared, and never stale.** The chapters run once, through MyST-NB's execution
cache (jupyter-cache) in ``_build/.jupyter_cache``, which both editions read. MyST-NB keys a
notebook by its code cells only, so a change to the library would otherwise show stale outputs.
This script keys the whole cache on :func:`execution_key` — the library's source
(``lib/attnbook``), the requirement files, the interpreter and every installed package's version
— and empties it when the key changes. A changed chapter's code re-executes that chapter only
(MyST-NB's own key); a changed sentence re-executes nothing.

**Incremental, but only from a good state.** An edition is rebuilt incrementally (Sphinx re-reads
only changed pages and catalogs) only when its last build succeeded with the same execution key
(``_build/editions/<code>/.build-ok`` holds the key); otherwise its environment is discarded and
every page is read and written again. ``--all`` forces that for both editions.

Usage::

    .venv/bin/python book/editions.py            # both editions, incremental where safe
    .venv/bin/python book/editions.py --all      # both editions from scratch (CI, tests)
    .venv/bin/python book/editions.py --edition en

Each edition is built in ``_build/editions/<code>/`` (its ``html``, doctrees and MyST-NB's
``jupyter_execute`` folder, which must stay outside the published HTML) and, once its build has
succeeded, copied to ``_build/html/<code>``.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
#: Published HTML: one folder per edition plus the landing page.
HTML = BUILD / "html"
#: Per edition: html/, .doctrees/, jupyter_execute/, .build-ok.
EDITIONS_DIR = BUILD / "editions"
#: MyST-NB's execution cache, shared by both editions.
CACHE = BUILD / ".jupyter_cache"
#: The execution key the cache was filled under.
CACHE_KEY = BUILD / ".jupyter_cache.key"

#: (URL folder, Sphinx language, name in its own language, in English). English comes first:
#: it executes the chapters (filling the cache) and the Chinese edition reads them.
EDITIONS = (
    ("en", "en", "English", "English"),
    ("zh", "zh_CN", "中文", "Chinese"),
)
#: Per edition other than English: the book's title (the sidebar and every <title>) and
#: MyST-NB's words on the buttons that show a hidden cell.
EDITION_CONFIG = {
    "zh_CN": {
        "html_title": "注意力与 Transformer：一本交互式教科书",
        "nb_code_prompt_show": "显示代码单元",
        "nb_code_prompt_hide": "隐藏代码单元",
    },
}
#: What the execution key covers besides the installed packages (globs relative to the root).
#: (benchmarks/results: chapter 12 reads the measured tables, and whether a GPU table exists.)
KEY_SOURCES = ("lib/attnbook/**/*.py", "lib/attnbook/locale/**/*.po", "benchmarks/results/*",
               "requirements.txt", "pyproject.toml")

#: Sphinx options of every edition's build (jupyter-book's CLI names in comments).
STRICT = {"warningiserror": True,  # -W
          "keep_going": True}      # --keep-going
#: Configuration each edition's build adds to _config.yml.
OVERRIDES = {
    "external_toc_path": "_toc.yml",
    "latex_individualpages": False,
    "nitpicky": True,  # -n
    # One execution for both editions, keyed by execution_key() (see the module docstring).
    "nb_execution_mode": "cache",
    "nb_execution_cache_path": str(CACHE),
    # The language switch on every page (book/_ext/attnbook_i18n.py).
    "attnbook_editions": [code for code, *_ in EDITIONS],
}


def execution_key(root: Path = ROOT) -> str:
    """A hash of everything a chapter's outputs depend on besides its own code.

    The library's source, the requirement files, the interpreter's version, every installed
    distribution's name and version, and the ``ATTNBOOK_*`` environment variables.

    Returns:
        A 16-character hex ``str``.
    """
    h = hashlib.sha256()
    for pattern in KEY_SOURCES:
        for path in sorted(root.glob(pattern)):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    h.update(sys.version.encode())
    dists = sorted(f"{d.metadata['Name']}=={d.version}"
                   for d in importlib.metadata.distributions() if d.metadata["Name"])
    h.update("\n".join(dists).encode())
    env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("ATTNBOOK_"))
    h.update("\n".join(env).encode())
    return h.hexdigest()[:16]


def prepare_cache(key: str) -> bool:
    """Empty the shared execution cache if it was filled under another key.

    Returns:
        True when the cache was kept (same key), False when it was emptied.
    """
    if CACHE_KEY.is_file() and CACHE_KEY.read_text().strip() == key and CACHE.is_dir():
        return True
    shutil.rmtree(CACHE, ignore_errors=True)
    CACHE_KEY.parent.mkdir(parents=True, exist_ok=True)
    CACHE_KEY.write_text(key + "\n")
    return False


def build_edition(code: str, language: str, *, fresh: bool) -> int:
    """Build one edition strictly with Jupyter Book's Sphinx entry point (in this process).

    Args:
        code: URL folder of the edition (``"en"``, ``"zh"``).
        language: Sphinx ``language`` (``"en"``, ``"zh_CN"``).
        fresh: discard the edition's saved environment and write every page.

    Returns:
        Sphinx's status code (0 on success).
    """
    from jupyter_book.sphinx import build_sphinx

    out = EDITIONS_DIR / code / "html"
    overrides = dict(OVERRIDES, language=language, attnbook_read_marker=str(_read_marker(code)))
    overrides.update(EDITION_CONFIG.get(language, {}))
    result = build_sphinx(
        ROOT, out, noconfig=True, path_config=ROOT / "_config.yml",
        confoverrides=overrides, builder="html", freshenv=fresh, force_all=fresh, **STRICT,
    )
    if isinstance(result, Exception):
        return 1
    return int(result)


def landing_page() -> str:
    """The HTML of ``_build/html/index.html``: the book's title and a link to each edition."""
    links = "\n".join(
        f'<li><a href="{code}/index.html" hreflang="{lang.replace("_", "-")}" '
        f'lang="{lang.replace("_", "-")}">{html.escape(name)}</a></li>'
        for code, lang, name, _english in EDITIONS
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Attention and the Transformer · 注意力与 Transformer</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 36rem; margin: 3rem auto;
       padding: 0 1rem; line-height: 1.5; color: #222; }}
h1 {{ font-size: 1.6rem; }}
ul {{ list-style: none; padding: 0; }}
li a {{ display: block; font-size: 1.3rem; padding: .8rem 1rem; margin: .6rem 0;
        border: 1px solid #ccc; border-radius: .4rem; text-decoration: none; }}
li a:hover, li a:focus {{ background: #f2f6fb; }}
</style>
</head>
<body>
<h1>Attention and the Transformer: an interactive textbook</h1>
<p lang="zh-CN">注意力与 Transformer：一本交互式教科书</p>
<ul>
{links}
</ul>
</body>
</html>
"""


def publish(codes: list[str], key: str) -> None:
    """Copy the editions ``codes`` into ``_build/html/<code>`` and write the landing page.

    Only an edition whose last build succeeded under ``key`` is published, as a copy (Sphinx
    rewrites its output files in place, so a later build, even a failed one, must not reach the
    published book), first into a temporary folder that then replaces the old one. Editions not
    in ``codes`` keep their published copy.

    Raises:
        RuntimeError: if an edition of ``codes`` has no successful build under ``key``.
    """
    if HTML.is_symlink() or HTML.is_file():
        HTML.unlink()
    HTML.mkdir(parents=True, exist_ok=True)
    for code in codes:
        ok = _ok_file(code)
        if not ok.is_file() or ok.read_text().strip() != key:
            raise RuntimeError(f"the {code} edition has no successful build to publish")
        tmp = HTML / f".{code}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(EDITIONS_DIR / code / "html", tmp)
        old = HTML / f".{code}.old"
        shutil.rmtree(old, ignore_errors=True)
        if (HTML / code).exists():
            os.replace(HTML / code, old)
        os.replace(tmp, HTML / code)
        shutil.rmtree(old, ignore_errors=True)
    (HTML / "index.html").write_text(landing_page(), encoding="utf-8")


def _ok_file(code: str) -> Path:
    return EDITIONS_DIR / code / ".build-ok"


def _read_marker(code: str) -> Path:
    return EDITIONS_DIR / code / ".read-done"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true",
                        help="read and write every page of every edition again")
    parser.add_argument("--edition", choices=[c for c, *_ in EDITIONS], action="append",
                        help="build only this edition (repeatable); default: all")
    parser.add_argument("--worker", nargs=2, metavar=("CODE", "FRESH"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        code, fresh = args.worker
        language = {c: lang for c, lang, *_ in EDITIONS}[code]
        return build_edition(code, language, fresh=fresh == "1")

    # The one execution both editions share draws every figure and explorer in each edition's
    # language (attnbook.i18n reads this in the chapters' kernels).
    os.environ["ATTNBOOK_EDITIONS"] = " ".join(lang for _code, lang, *_ in EDITIONS)
    key = execution_key()
    kept = prepare_cache(key)
    print(f"editions: execution key {key} "
          f"({'cache kept' if kept else 'cache emptied: outputs will be recomputed'})",
          flush=True)
    wanted = args.edition or [c for c, *_ in EDITIONS]
    start = time.perf_counter()
    running: list[tuple[str, str, subprocess.Popen]] = []
    for code, language, _name, english in EDITIONS:
        if code not in wanted:
            continue
        ok = _ok_file(code)
        fresh = args.all or not ok.is_file() or ok.read_text().strip() != key
        ok.unlink(missing_ok=True)
        marker = _read_marker(code)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        if running:
            # The chapters execute while the first edition reads its pages; once it has read
            # them all, the cache holds every output and the next edition can start beside the
            # first one's writing phase (two processes on two cores).
            prev_code, prev_english, prev = running[-1]
            while prev.poll() is None and not _read_marker(prev_code).is_file():
                time.sleep(0.5)
            if prev.poll() not in (None, 0):
                print(f"editions: the {prev_english} edition failed (exit {prev.returncode})",
                      file=sys.stderr)
                return prev.returncode
        print(f"editions: building the {english} edition ({language}) "
              f"{'from scratch' if fresh else 'incrementally'}", flush=True)
        # Each edition in its own process: Sphinx and its extensions keep global state.
        running.append((code, english, subprocess.Popen(
            [sys.executable, __file__, "--worker", code, "1" if fresh else "0"], cwd=ROOT)))
    times = {}
    failed = 0
    for code, english, proc in running:
        rc = proc.wait()
        times[code] = time.perf_counter() - start
        if rc != 0:
            print(f"editions: the {english} edition failed (exit {rc})", file=sys.stderr)
            failed = failed or rc or 1
            continue
        _ok_file(code).write_text(key + "\n")
    if failed:
        return failed
    publish([code for code, _english, _proc in running], key)
    summary = ", ".join(f"{c} done after {t:.0f} s" for c, t in times.items())
    print(f"editions: built ({summary}); the book: {HTML / 'index.html'}")
    (BUILD / "editions" / "times.json").write_text(json.dumps(times) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
