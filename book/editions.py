"""Build the book's two editions, English and Chinese, from one source and one execution.

``make book`` (``make html``) runs this script. It builds

* ``_build/html/en/``: the English edition, from the pages themselves;
* ``_build/html/zh/``: the Chinese edition, the same pages with their prose translated by the
  gettext catalogs of ``locales/zh_CN/`` (code cells, glued numbers and figures are the same);
* ``_build/html/index.html``: a landing page that leads to both;
* ``_build/notebooks/en/``, ``_build/notebooks/zh/``: each edition's notebook tree, its chapters
  as reader notebooks and its other pages as Markdown (``book/_ext/attnbook_reader_notebooks.py``),
  which ``make lab`` opens;
* ``_downloads/attnbook-source.zip`` in each edition: the book's source and both notebook trees,
  written once after both editions are built (``attnbook_notebooks.write_source_archive``).

Every build is strict, as before: Sphinx warnings are errors (``-W``), missing references are
warned (``-n``, nitpicky), every warning is reported before failing (``--keep-going``), and a
cell that raises stops the build (``nb_execution_raise_on_error`` in ``_config.yml``).

**One execution, shared, and never stale.** The chapters execute before either edition is
read: ``book/execute.py`` runs every chapter whose outputs are missing or stale, two at a time,
into MyST-NB's execution cache (``execute.cache`` in ``_config.yml``), keyed on what each
chapter's kernel actually used (its code, the project files it imported or read, the versions of
the packages it imported). Both editions then read their outputs from that cache, side by side;
an execution by Sphinx itself is an error (``attnbook_no_execution``), and a re-executed chapter
is read again even though its source is unchanged (``attnbook_executions``;
``book/_ext/attnbook_execution.py``).

**Generated API pages.** The API reference's page of each module (``appendix/api/``, all but
its index) is written from the package by ``book/api_pages.py`` before either edition is read.

**Incremental, but only from a good state.** An edition is rebuilt incrementally (Sphinx re-reads
only changed pages, catalogs and re-executed chapters) only when its last build succeeded with
the same :func:`build_key` (``_build/editions/<code>/.build-ok`` holds the key): the build's own
code and the versions of the packages it runs; otherwise its environment is discarded and every
page is read and written again. ``--all`` forces that for both editions; ``--execute-all``
executes every chapter again.

Usage::

    .venv/bin/python book/editions.py            # both editions, incremental where safe
    .venv/bin/python book/editions.py --all      # both editions from scratch (CI, tests)
    .venv/bin/python book/editions.py --execute-all  # and every chapter executed again
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_pages  # noqa: E402 - book/api_pages.py, beside this script
import execute  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
#: Published HTML: one folder per edition plus the landing page.
HTML = BUILD / "html"
#: Per edition: html/, notebooks/, .doctrees/, jupyter_execute/, .build-ok.
EDITIONS_DIR = BUILD / "editions"
#: Each edition's notebook tree (``book/_ext/attnbook_reader_notebooks.py``), published: what
#: ``make lab`` opens, ``_build/notebooks/<code>/chapters/NN-topic.ipynb``.
NOTEBOOKS = BUILD / "notebooks"
#: The notebook tree's folder beside an edition's ``html/`` (the builder's ``TREE``).
TREE = "notebooks"
#: (URL folder, Sphinx language, name in its own language, in English).
EDITIONS = (
    ("en", "en", "English", "English"),
    ("zh", "zh_CN", "中文", "Chinese"),
)
#: ``$ATTNBOOK_EDITIONS`` of the chapters' kernels: the one execution draws every figure and
#: explorer in each edition's language (attnbook.i18n, attnbook.mpl_figures).
EDITIONS_ENV = " ".join(lang for _code, lang, *_ in EDITIONS)
#: Per edition other than English: the book's title (the sidebar and every <title>), its authors
#: (the footer's "By ...", a message of book/locale), MyST-NB's words on the buttons that show a
#: hidden cell and sphinx-togglebutton's on a folded solution (configuration values, not
#: messages: sphinx-togglebutton reads its words when it is loaded and has no Chinese).
EDITION_CONFIG = {
    "zh_CN": {
        "html_title": "注意力与 Transformer：一本交互式教科书",
        "author": "attnbook 编写组",
        "nb_code_prompt_show": "显示代码单元",
        "nb_code_prompt_hide": "隐藏代码单元",
        "togglebutton_hint": "点击展开",
        "togglebutton_hint_hide": "点击收起",
    },
}
#: What an edition's HTML depends on besides its pages, the catalogs and the cached outputs
#: (which Sphinx tracks): the build's extensions, their static files and the theme templates
#: they override, the renderer of the edition outputs (attnbook.edition_outputs), the label
#: catalogs' lookup of glued phrases (attnbook.i18n), the static explorers' script and
#: stylesheet (package data that book/_ext/attnbook_explorers.py copies into _static), the
#: figures' web font (attnbook.fonts, subset to the characters of the label catalogs and the
#: explorer modules), the themes' catalogs (book/locale: the theme's interface in each
#: language), the requirement files (globs relative to the root).
BUILD_SOURCES = (
    "book/_ext/*.py",
    "book/_static/**/*",
    "book/_templates/**/*",
    "book/locale/**/*.po",
    "lib/attnbook/i18n.py",
    "lib/attnbook/edition_outputs.py",
    "lib/attnbook/explorers/static/*",
    "lib/attnbook/fonts.py",
    "lib/attnbook/locale/*/*.po",
    "lib/attnbook/explorers/*.py",
    "requirements.txt",
    "pyproject.toml",
)

#: Sphinx options of every edition's build (jupyter-book's CLI names in comments).
STRICT = {
    "warningiserror": True,  # -W
    "keep_going": True,
}  # --keep-going
#: Configuration each edition's build adds to _config.yml.
OVERRIDES = {
    "external_toc_path": "_toc.yml",
    "latex_individualpages": False,
    "nitpicky": True,  # -n
    # The chapters were executed by book/execute.py; MyST-NB executing one is an error.
    "attnbook_no_execution": True,
    # The language switch on every page (book/_ext/attnbook_i18n.py).
    "attnbook_editions": [code for code, *_ in EDITIONS],
}


def requirement_versions(root: Path = ROOT) -> dict[str, str | None]:
    """The installed version of every distribution ``requirements.txt`` asks for, with their
    dependencies (markers and extras applied): what the build runs. Test and lint tools
    (``requirements-test.txt``) and unrelated packages are not in it.
    """
    from packaging.markers import default_environment
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    todo = []
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate():
                todo.append(req)
    seen: dict[str, str | None] = {}
    done: set[tuple[str, frozenset]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in done:
            continue
        done.add((name, frozenset(req.extras)))
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            seen[name] = None
            continue
        seen[name] = dist.version
        for text in dist.requires or []:
            try:
                dep = Requirement(text)
            except InvalidRequirement:
                continue
            extras = [""] + sorted(req.extras)
            if dep.marker is None or any(
                dep.marker.evaluate({**default_environment(), "extra": e}) for e in extras
            ):
                todo.append(dep)
    return dict(sorted(seen.items()))


def build_key(root: Path = ROOT) -> str:
    """A hash of what an edition's HTML depends on besides its pages and the cached outputs.

    The files of :data:`BUILD_SOURCES`, the interpreter's version and
    :func:`requirement_versions`.

    Returns:
        A 16-character hex ``str``.
    """
    h = hashlib.sha256()
    for pattern in BUILD_SOURCES:
        for path in sorted(root.glob(pattern)):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    h.update(sys.version.encode())
    h.update(json.dumps(requirement_versions(root)).encode())
    return h.hexdigest()[:16]


def build_edition(code: str, language: str, *, fresh: bool) -> int:
    """Build one edition strictly with Jupyter Book's Sphinx entry point (in this process): its
    HTML, then its reader notebooks (``_sources/chapters/*.ipynb`` in the HTML).

    Args:
        code: URL folder of the edition (``"en"``, ``"zh"``).
        language: Sphinx ``language`` (``"en"``, ``"zh_CN"``).
        fresh: discard the edition's saved environment and write every page.

    Returns:
        Sphinx's status code (0 on success).
    """
    import execute
    from jupyter_book.sphinx import build_sphinx

    out = EDITIONS_DIR / code / "html"
    if fresh:  # the builder replaces only a tree it marked; a fresh build starts without one
        shutil.rmtree(EDITIONS_DIR / code / TREE, ignore_errors=True)
    overrides = dict(OVERRIDES, language=language, attnbook_executions=execute.executions())
    overrides.update(EDITION_CONFIG.get(language, {}))
    result = build_sphinx(
        ROOT,
        out,
        noconfig=True,
        path_config=ROOT / "_config.yml",
        confoverrides=dict(overrides),
        builder="html",
        freshenv=fresh,
        force_all=fresh,
        **STRICT,
    )
    if isinstance(result, Exception) or result:
        return 1 if isinstance(result, Exception) else int(result)
    # The reader notebooks (book/_ext/attnbook_reader_notebooks.py), into the same HTML folder:
    # the same configuration and doctrees, so Sphinx reads no page again and executes nothing
    # (a copy of the overrides each time: build_sphinx pops keys from them).
    result = build_sphinx(
        ROOT,
        out,
        noconfig=True,
        path_config=ROOT / "_config.yml",
        confoverrides=dict(overrides),
        builder="reader-notebooks",
        **STRICT,
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
    published book), first into a temporary folder that then replaces the old one, and so is its
    notebook tree. Editions not in ``codes`` keep their published copy. Then the source archive
    is written into every published edition, with every published notebook tree.

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
        _replace_tree(EDITIONS_DIR / code / "html", HTML / code)
    (HTML / "index.html").write_text(landing_page(), encoding="utf-8")
    # The notebook trees (the reader notebooks and the pages they link, for `make lab`), then
    # the source archive, written once with both trees and copied into each published edition.
    for code in codes:
        _replace_tree(EDITIONS_DIR / code / TREE, NOTEBOOKS / code)
    trees = {code: NOTEBOOKS / code for code, *_ in EDITIONS if (NOTEBOOKS / code).is_dir()}
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from attnbook_notebooks import write_source_archive

    write_source_archive(
        ROOT, [HTML / code for code, *_ in EDITIONS if (HTML / code).is_dir()], trees
    )


def _replace_tree(source: Path, target: Path) -> None:
    """Copy the folder ``source`` to ``target``, replacing it whole: copied first into a
    temporary folder beside it, which then takes the old one's place."""
    tmp = target.with_name(f".{target.name}.tmp")
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    shutil.rmtree(old, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def reader_copy(dest: Path, source: Path = NOTEBOOKS) -> list[Path]:
    """Copy into ``dest`` every file of the published notebook trees (``source``) it lacks.

    ``make lab`` opens ``dest`` (``notebooks/``), the reader's own copy: a file already there
    is never overwritten (the reader's edits and saved outputs stay), a deleted one comes back.
    Hidden files are not copied. Each file is written to a temporary name and renamed, so an
    interrupted copy leaves no half-written notebook.

    Returns:
        The files copied (paths under ``dest``); none when ``source`` does not exist.
    """
    copied = []
    if not source.is_dir():
        return copied
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        target = dest / rel
        if not path.is_file() or any(p.startswith(".") for p in rel.parts) or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(path, tmp)
        os.replace(tmp, target)
        copied.append(target)
    return copied


def _ok_file(code: str) -> Path:
    return EDITIONS_DIR / code / ".build-ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--all", action="store_true", help="read and write every page of every edition again"
    )
    parser.add_argument(
        "--execute-all",
        action="store_true",
        help="execute every chapter again (default: only those that changed)",
    )
    parser.add_argument(
        "--edition",
        choices=[c for c, *_ in EDITIONS],
        action="append",
        help="build only this edition (repeatable); default: all",
    )
    parser.add_argument("--worker", nargs=2, metavar=("CODE", "FRESH"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--reader-copy",
        metavar="DIR",
        type=Path,
        help="copy the notebooks DIR lacks from _build/notebooks (make lab)",
    )
    args = parser.parse_args(argv)

    if args.reader_copy:
        copied = reader_copy(args.reader_copy)
        print(
            f"make lab: {len(copied)} of the book's notebook files copied into "
            f"{args.reader_copy}/ (the files there are yours: none is overwritten)"
        )
        return 0

    if args.worker:
        code, fresh = args.worker
        language = {c: lang for c, lang, *_ in EDITIONS}[code]
        return build_edition(code, language, fresh=fresh == "1")

    os.environ["ATTNBOOK_EDITIONS"] = EDITIONS_ENV
    start = time.perf_counter()
    # The API reference's module pages, generated from the package once, before both editions
    # read them (the editions build side by side and only read the source tree).
    api_pages.write()
    if execute.execute_book(force=args.execute_all, log=lambda m: print(m, flush=True)):
        print("editions: a chapter failed to execute; no edition was built", file=sys.stderr)
        return 1
    executed = time.perf_counter() - start
    key = build_key()
    wanted = args.edition or [c for c, *_ in EDITIONS]
    running: list[tuple[str, str, subprocess.Popen]] = []
    for code, language, _name, english in EDITIONS:
        if code not in wanted:
            continue
        ok = _ok_file(code)
        fresh = args.all or not ok.is_file() or ok.read_text().strip() != key
        ok.unlink(missing_ok=True)
        print(
            f"editions: building the {english} edition ({language}) "
            f"{'from scratch' if fresh else 'incrementally'}",
            flush=True,
        )
        # Each edition in its own process (Sphinx and its extensions keep global state), all
        # at once: they only read the cache.
        running.append(
            (
                code,
                english,
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", code, "1" if fresh else "0"], cwd=ROOT
                ),
            )
        )
    times = {"execute": executed}
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
