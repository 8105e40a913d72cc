"""Shared test configuration.

TRITON_INTERPRET must be set before any module decorated with ``@triton.jit`` is imported (it
is read at decoration time), so it is set here, before test collection imports anything. The
machines that run the suite have no GPU; the interpreter runs the kernels on the CPU.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# These machines are shared and noisy: no per-example deadline, and a modest example count.
settings.register_profile(
    "attnbook",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("attnbook")


# --------------------------------------------------------------------------------------------------
# Markers (declared in pyproject.toml). `make unit` runs `-m "not slow and not browser and not
# book"`: the library's tests alone.

TESTS_DIR = Path(__file__).resolve().parent

#: Tests that take many seconds, marked here because their files are a library module's test file
#: (owned with that module). Paths are relative to tests/. A test marked `@pytest.mark.slow` in its
#: own file needs no entry; an entry that names no existing test function fails the run.
SLOW_TESTS = (
    # Starts benchmarks/cpu_flash.py four times, each importing torch (~12 s).
    "test_flash.py::test_cpu_benchmark_worker_runs_one_point",
)


def defined_tests(path: Path) -> set[str]:
    """Names of the module-level functions of a test file (empty when the file is missing)."""
    if not path.is_file():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def stale_slow_tests(tests_dir: Path = TESTS_DIR, slow_tests=SLOW_TESTS) -> list[str]:
    """The SLOW_TESTS entries whose file or function does not exist (a renamed or moved test)."""
    return [
        entry
        for entry in slow_tests
        if entry.split("::")[1] not in defined_tests(tests_dir / entry.split("::")[0])
    ]


def relative_test_id(item) -> str:
    """``item``'s node id relative to tests/, without parameters: ``test_x.py::test_y``."""
    path = Path(str(item.path)).resolve()
    rel = path.relative_to(TESTS_DIR).as_posix() if path.is_relative_to(TESTS_DIR) else path.name
    return rel + "::" + getattr(item, "originalname", item.name)


def pytest_collection_modifyitems(config, items):
    """Mark `book` every test that uses the ``built_book`` fixture (even through another fixture).

    A test that reaches the built HTML only through ``request.getfixturevalue("built_book")``
    carries ``@pytest.mark.book`` itself. The tests listed in SLOW_TESTS are marked `slow`.
    """
    stale = stale_slow_tests()
    if stale:
        raise pytest.UsageError(f"tests/conftest.py: SLOW_TESTS names no such test: {stale}")
    for item in items:
        if "built_book" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.book)
        if relative_test_id(item) in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


# --------------------------------------------------------------------------------------------------
# The built book, shared by every test that reads the HTML (browser tests and others).

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "_build"
#: The built book: a landing page and one folder per edition (book/editions.py).
BOOK_DIR = BUILD_DIR / "html"
#: The English edition, which most tests read.
HTML_DIR = BOOK_DIR / "en"
#: Each edition's folder: URL folder -> Sphinx language.
EDITIONS = {"en": "en", "zh": "zh_CN"}
#: Written by the Makefile's `html` target (and by `built_book`) only after a successful strict
#: build, so a failed or interrupted build is never reused.
BUILD_OK = BUILD_DIR / ".attnbook-build-ok"
#: The strict build of both editions, the script the Makefile's `html` target runs
#: (tests/book/test_book_config.py checks both): warnings are errors, nitpicky references,
#: every warning reported before failing; ``--all``: every page of both editions rebuilt.
BUILD_COMMAND = ("book/editions.py", "--all")
#: What the HTML is built from; a build older than any of these is rebuilt.
BOOK_SOURCES = (
    "chapters/*.md",
    "appendix/**/*.md",
    "_config.yml",
    "_toc.yml",
    "intro.md",
    "references.md",
    "references.bib",
    "lib/attnbook/**/*.py",
    "lib/attnbook/explorers/static/*",
    "book/_ext/*.py",
    "book/_static/**/*",
    "book/_templates/**/*",
    "book/locale/**/*.po",
    "book/*.py",
    "locales/**/*.po",
    "lib/attnbook/locale/*.po",
)
BUILD_TIMEOUT_S = 1800

#: The front matter every chapter carries: the one JupyterLab leaves as it is (a chapter opened
#: and saved there is unchanged: tests/browser/test_browser_lab.py checks it on chapter 1;
#: tests/book/test_book_config.py checks every chapter, and the toy books of the tests use it).
#: JupyterLab writes the kernel's own display name ("Python 3 (ipykernel)") into the notebook;
#: Jupytext's version stays out (jupytext.toml).
CHAPTER_HEADER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
---
"""


def book_sources(root: Path = ROOT) -> list[Path]:
    """The files the book is built from (see BOOK_SOURCES)."""
    return sorted({p for pattern in BOOK_SOURCES for p in root.glob(pattern) if p.is_file()})


def build_is_fresh(root: Path = ROOT) -> bool:
    """True when a successful strict build exists that is newer than every source file."""
    ok = root / "_build" / ".attnbook-build-ok"
    if not ok.is_file() or not all(
        (root / "_build" / "html" / sub / "index.html").is_file() for sub in ("", *EDITIONS)
    ):
        return False
    built = ok.stat().st_mtime
    return all(p.stat().st_mtime < built for p in book_sources(root))


def jupyter_book_executable() -> str:
    """The jupyter-book next to the running interpreter (the project's .venv)."""
    exe = Path(sys.executable).parent / "jupyter-book"
    if not exe.is_file():
        pytest.fail(
            f"jupyter-book is not installed next to {sys.executable}: make test installs it"
        )
    return str(exe)


def build_book(root: Path = ROOT) -> Path:
    """Run the strict build of both editions (as `make html` does); return the English path."""
    ok = root / "_build" / ".attnbook-build-ok"
    ok.unlink(missing_ok=True)
    jupyter_book_executable()  # fails the test with a clear message when it is not installed
    cmd = [sys.executable, *BUILD_COMMAND]
    proc = subprocess.run(
        cmd, cwd=root, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + "\n" + proc.stderr).splitlines()[-80:])
        pytest.fail(
            f"the strict book build failed ({' '.join(cmd)}), exit {proc.returncode}:\n{tail}"
        )
    ok.touch()
    return root / "_build" / "html" / "en"


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Path of ``_build/html/en`` (the English edition), built strictly if needed.

    Reuses the build that `make book` / `make test` just made if it succeeded and is newer than
    every source; otherwise runs ``book/editions.py --all`` (the Makefile's script) and fails the
    requesting test, with the end of the build log, if that build fails.
    """
    if build_is_fresh(ROOT):
        return HTML_DIR
    return build_book(ROOT)


@pytest.fixture(scope="session", params=sorted(EDITIONS))
def edition_book(request, built_book) -> Path:
    """Each built edition in turn (``_build/html/en``, ``_build/html/zh``): the checks every
    edition must pass (offline, console, math, explorers) take this instead of ``built_book``."""
    return BOOK_DIR / request.param


@pytest.fixture(scope="session")
def notebook_trees(built_book) -> dict[str, Path]:
    """Each edition's notebook tree, what `make lab` opens: ``{"en": _build/notebooks/en, ...}``."""
    return {code: ROOT / "_build" / "notebooks" / code for code in EDITIONS}


@pytest.fixture(scope="session")
def built_editions(built_book) -> dict[str, Path]:
    """The built editions: ``{"en": _build/html/en, "zh": _build/html/zh}``."""
    return {code: BOOK_DIR / code for code in EDITIONS}


# The JupyterLab browser tests' shared server (tests/browser/test_browser_reader_lab.py and
# test_browser_lab_reload.py). Here, not in a tests/browser/conftest.py: a second conftest
# module would shadow this one for the tests that import from it.


@pytest.fixture(scope="session")
def lab(notebook_trees, tmp_path_factory):
    """One JupyterLab server on a copy of both notebook trees, as `make lab` starts it (the
    reader-notebook test and the reloads of a live explorer share it; tests/browser/)."""
    sys.path.insert(0, str(TESTS_DIR / "browser"))
    import shutil

    from test_browser_lab import LabServer

    from browser import require_chromium

    require_chromium()
    work = tmp_path_factory.mktemp("reader-lab")
    root = work / "notebooks"
    for code, tree in notebook_trees.items():
        shutil.copytree(tree, root / code)
    server = LabServer(
        root,
        work,
        jupytext=False,
        extra_args=(
            f"--LabApp.app_settings_dir={ROOT / 'jupyter' / 'reader'}",
            "--LabApp.expose_app_in_browser=True",
        ),
    )
    try:
        server.wait_ready()
        server.root = root
        yield server
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lab_browser():
    """Chromium for one test module (Playwright's sync API allows one at a time: the other
    browser tests start their own)."""
    sys.path.insert(0, str(TESTS_DIR / "browser"))
    from playwright.sync_api import sync_playwright

    from browser import launch

    with sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()
