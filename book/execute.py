"""Execute the book's notebooks before Sphinx reads them: in parallel, once, and never stale.

``book/editions.py`` calls :func:`execute_book` before it starts the Sphinx builds of the two
editions. Every chapter that needs it runs here, two at a time on two cores (each kernel limited
to its share of the cores), and its executed notebook goes into the jupyter-cache that
``_config.yml`` names (``execute.cache``). Sphinx (MyST-NB, ``execute_notebooks: cache``) then
only reads outputs from that cache, for both editions; ``book/editions.py`` makes an execution
by Sphinx itself an error, so the parallel execution here is the only one.

**What a chapter's outputs depend on, and nothing else.** MyST-NB's cache matches a notebook by
its code cells only. Here each chapter's execution also records what its kernel actually used
(:data:`TRACE_SETUP`, :data:`TRACE_QUERY`):

* every file of the project it imported (the modules of ``lib/attnbook`` in ``sys.modules``)
  or opened for reading (a Python audit hook on ``open``: the label catalogs, the benchmark
  tables), by content hash, and the list of names in each folder it read a file from or listed
  (``os.listdir``, ``os.scandir``, ``glob``; chapter 12 asks whether a GPU table *exists*) —
  not the folders the import system or ``importlib.metadata`` scan;
* the version of every installed distribution one of its imported modules, or a data file it
  read, comes from (``importlib.metadata.packages_distributions``): NumPy, PyTorch, matplotlib,
  the packaged model, text and font, IPython ... — not pytest, ruff, Playwright or any package
  it never used;
* the interpreter's version and the environment variables the library reads
  (:data:`KEY_VARS`).

A chapter is executed again when its code changed (MyST-NB's hash) or any of these did, and only
then: installing a test tool or an unrelated package executes nothing; a one-line change to
``lib/attnbook/heads.py`` executes the chapters that imported that module. A file that changed
while its chapter ran makes the chapter run again in the next build.

Each execution is appended to ``_build/executions.log`` (one JSON line: page, seconds, reason),
which ``benchmarks/build.py`` and the tests count.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import importlib.metadata
import json
import multiprocessing
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
#: One JSON line per chapter execution (page, seconds, reason, when).
EXECUTIONS_LOG = BUILD / "executions.log"
#: Name of the record, inside the cache folder, of what each cached execution depended on.
RECORDS_NAME = "attnbook-dependencies.json"
#: The environment variables the library reads (attnbook.i18n): part of every chapter's key.
#: Others (ATTNBOOK_CHROMIUM and the test switches) do not change what a chapter computes.
KEY_VARS = ("ATTNBOOK_EDITIONS", "ATTNBOOK_LANG")
#: Modules every Python process loads at start-up through a .pth file, used by no chapter.
STARTUP_MODULES = {"_distutils_hack"}
#: Environment variables that limit a kernel's threads (BLAS, OpenMP: NumPy and PyTorch).
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: Run silently in each kernel before its first cell (outside the notebook, so the notebook and
#: its cache key are unchanged): records the project files the kernel opens for reading.
TRACE_SETUP = r"""
def __attnbook_trace(root):
    import os, site, sys, sysconfig
    reads, listed = set(), set()
    # Data of installed packages is found without importing them (the training text, the CJK
    # font): reads in site-packages count too, code files aside (their modules count).
    packages = {os.path.abspath(p) for p in [*site.getsitepackages(),
                                              sysconfig.get_paths()["purelib"]]}
    inside = root + os.sep
    prefixes = tuple(p + os.sep for p in packages)
    code = (".py", ".pyc", ".so", ".pyi", ".pth")
    write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def where(arg):
        try:
            return os.path.abspath(os.fsdecode(os.fspath(arg)))
        except (TypeError, ValueError):
            return None

    def hook(event, args):
        if event == "open":
            if not args or isinstance(args[0], int) or args[0] is None:
                return
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 else 0
            if (isinstance(mode, str) and any(c in mode for c in "wax")) or (flags or 0) & write:
                return
            path = where(args[0])
            if path and (path.startswith(inside) or
                         (path.startswith(prefixes) and not path.endswith(code))):
                reads.add(path)
        elif event in ("os.listdir", "os.scandir", "glob.glob") and args:
            caller = sys._getframe(1).f_code.co_filename.replace(os.sep, "/")
            if "importlib" in caller and ("_bootstrap" in caller or "metadata" in caller):
                # The import system's directory cache, importlib.metadata's scan of sys.path:
                # the modules and distributions found count, not the folders' other names.
                return
            path = where(args[0] if args[0] is not None else ".")
            if event == "glob.glob" and path:
                path = os.path.dirname(path.split("*")[0].split("?")[0].split("[")[0])
            if path and (path + os.sep).startswith(inside):
                listed.add(path)

    sys.addaudithook(hook)
    sys._attnbook_reads = reads
    sys._attnbook_listed = listed

__attnbook_trace(%r)
del __attnbook_trace
"""
#: Evaluated (a user expression) after the last cell: what the kernel imported and read.
TRACE_QUERY = (
    "__import__('json').dumps({"
    "'modules': sorted({n.split('.')[0] for n in list(__import__('sys').modules)}), "
    "'files': sorted({getattr(m, '__file__', None) or '' "
    "for m in list(__import__('sys').modules.values())} - {''}), "
    "'reads': sorted(getattr(__import__('sys'), '_attnbook_reads', ())), "
    "'listed': sorted(getattr(__import__('sys'), '_attnbook_listed', ()))})"
)


# --------------------------------------------------------------------------------------------------
# Configuration: _config.yml as Jupyter Book resolves it.


@dataclass
class Settings:
    """The execution settings of ``_config.yml`` (``execute:``), as Jupyter Book maps them."""

    mode: str
    cache: Path
    timeout: int
    in_temp: bool
    allow_errors: bool
    extensions: list[str] = field(default_factory=list)


def settings(root: Path = ROOT) -> Settings:
    """Read the execution settings from ``_config.yml`` through Jupyter Book's own mapping.

    Raises:
        ValueError: if ``_config.yml`` does not ask for MyST-NB's cache mode with a cache folder
            (the only mode in which the pre-executed outputs are what Sphinx shows).
    """
    from jupyter_book.config import get_final_config

    config, _ = get_final_config(
        user_yaml=root / "_config.yml",
        sourcedir=root,
        cli_config={"latex_individualpages": False},
        validate=False,
        use_external_toc=False,
    )
    mode = config.get("nb_execution_mode")
    cache = config.get("nb_execution_cache_path")
    if mode != "cache" or not cache:
        raise ValueError(
            f"_config.yml: execute.execute_notebooks is {mode!r} and execute.cache "
            f"is {cache!r}; book/execute.py needs 'cache' and a folder"
        )
    return Settings(
        mode=mode,
        cache=(root / cache).resolve(),
        timeout=int(config.get("nb_execution_timeout", 30)),
        in_temp=bool(config.get("nb_execution_in_temp", False)),
        allow_errors=bool(config.get("nb_execution_allow_errors", False)),
        extensions=list(config.get("myst_enable_extensions", [])),
    )


def toc_pages(root: Path = ROOT) -> list[Path]:
    """The source file of every page of ``_toc.yml``, in the book's order."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    site = parse_toc_yaml(root / "_toc.yml")
    pages = []
    for docname in site:
        matches = [root / f"{docname}{suffix}" for suffix in (".md", ".ipynb")]
        pages += [p for p in matches if p.is_file()][:1]
    return pages


def read_notebook(path: Path, extensions: list[str]):
    """``path`` read exactly as MyST-NB reads it (so its cache hash is MyST-NB's), or None when
    the page is not a notebook (plain MyST Markdown)."""
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.read import create_nb_reader
    from myst_parser.config.main import MdParserConfig

    text = path.read_text(encoding="utf-8")
    reader = create_nb_reader(
        str(path), MdParserConfig(enable_extensions=set(extensions)), NbParserConfig(), text
    )
    return None if reader is None else reader.read(text)


# --------------------------------------------------------------------------------------------------
# What an execution depended on.


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:20]


#: Folders of the project that hold no input of a chapter (the venv, the build, caches).
_SKIP = {".venv", "_build", ".git", "__pycache__", ".ipynb_checkpoints"}


def _rel(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` if it is a project file the outputs can depend on.

    Inside the project by its own name (a symbolic link in the project to a file elsewhere is a
    project file; its target's content is what is hashed).
    """
    try:
        rel = Path(os.path.abspath(path)).relative_to(root)
    except ValueError:
        return None
    if _SKIP & set(rel.parts) or not path.is_file():
        return None
    return rel.as_posix()


#: Names in a folder that no chapter reads: hidden files, editor backups and locks.
def _ignored_name(name: str) -> bool:
    return name.startswith((".", "#")) or name.endswith(("~", ".swp", ".swo", ".pyc"))


def _listing(folder: Path) -> str:
    names = sorted(p.name for p in folder.iterdir() if not _ignored_name(p.name))
    return _sha("\n".join(names).encode())


def environment_state() -> dict:
    """The interpreter and the environment variables the library reads (:data:`KEY_VARS`)."""
    return {"python": sys.version, "env": {k: os.environ[k] for k in KEY_VARS if k in os.environ}}


def _site_dirs() -> list[Path]:
    import site
    import sysconfig

    dirs = {Path(p).resolve() for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]}
    return sorted(dirs, key=lambda p: -len(p.parts))


def _owner(path: Path, site_dirs: list[Path], by_module: dict) -> list[str]:
    """The installed distributions a file of site-packages belongs to (by its top folder)."""
    for base in site_dirs:
        try:
            top = Path(path).resolve().relative_to(base).parts[0]
        except (ValueError, IndexError):
            continue
        if top.endswith((".dist-info", ".egg-info")):
            return [top.rsplit("-", 1)[0] if "-" in top else top.split(".")[0]]
        return list(by_module.get(top.split(".")[0], []))
    return []


def dependencies(trace: dict, root: Path = ROOT, *, since_ns: int | None = None) -> dict:
    """Turn a kernel's trace (modules, module files, files read, folders listed) into a
    dependency record.

    Args:
        trace: what the kernel reported (:data:`TRACE_QUERY`).
        root: the project.
        since_ns: when the execution started (``time.time_ns()``): a project file modified
            after it was maybe read in its old state, and is listed under ``"raced"``.

    Returns:
        ``{"python", "env", "files": {path: hash}, "dirs": {folder: hash of its names},
        "dists": {distribution: version}, "raced": [paths]}``, paths relative to ``root``.
    """
    files: dict[str, str] = {}
    dirs: dict[str, str] = {}
    raced: list[str] = []
    by_module = importlib.metadata.packages_distributions()
    site_dirs = _site_dirs()
    owners: set[str] = set()
    for name in [*trace.get("files", []), *trace.get("reads", [])]:
        rel = _rel(Path(name), root)
        if rel is None:
            if name in trace.get("reads", []):
                owners.update(_owner(Path(name), site_dirs, by_module))
            continue
        if rel.endswith(".pyc"):
            continue
        path = root / rel
        files[rel] = _sha(path.read_bytes())
        if since_ns is not None and path.stat().st_mtime_ns > since_ns:
            raced.append(rel)
        if not rel.endswith(".py"):  # data: a file added beside it may change the outputs
            folder = path.parent
            dirs[folder.relative_to(root).as_posix()] = _listing(folder)
    for name in trace.get("listed", []):
        try:
            rel = Path(name).relative_to(root)
        except ValueError:
            continue
        if not _SKIP & set(rel.parts) and (root / rel).is_dir():
            dirs[rel.as_posix()] = _listing(root / rel)
    for module in trace.get("modules", []):
        if module not in STARTUP_MODULES:
            owners.update(by_module.get(module, []))
    dists = {}
    for dist in owners:
        try:
            dists[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        **environment_state(),
        "files": dict(sorted(files.items())),
        "dirs": dict(sorted(dirs.items())),
        "dists": dict(sorted(dists.items())),
        "raced": sorted(raced),
    }


def changes(record: dict, root: Path = ROOT) -> list[str]:
    """What changed since ``record`` was made (empty: the cached outputs are still right)."""
    out = [f"{rel} (changed while the chapter ran)" for rel in record.get("raced", [])]
    state = environment_state()
    if record.get("python") != state["python"]:
        out.append("the Python interpreter")
    if record.get("env") != state["env"]:
        out.append("the environment variables " + ", ".join(KEY_VARS))
    for rel, digest in record.get("files", {}).items():
        path = root / rel
        if not path.is_file() or _sha(path.read_bytes()) != digest:
            out.append(rel)
    for rel, digest in record.get("dirs", {}).items():
        folder = root / rel
        if not folder.is_dir() or _listing(folder) != digest:
            out.append(f"the files in {rel}/")
    for dist, version in record.get("dists", {}).items():
        try:
            now = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            now = None
        if now != version:
            out.append(f"{dist} {version} -> {now}")
    return out


# --------------------------------------------------------------------------------------------------
# Executing one notebook (in a worker process).


def _client_class():
    from nbclient import NotebookClient
    from nbclient.util import ensure_async, run_sync

    class TracingClient(NotebookClient):
        """nbclient's ``async_execute``, plus the silent trace before and after the cells."""

        trace: dict = {}
        root: str = str(ROOT)

        async def _silent(self, code: str, expressions: dict | None = None) -> dict:
            msg_id = self.kc.execute(
                code, silent=True, store_history=False, user_expressions=expressions or {}
            )
            reply = await self.async_wait_for_reply(msg_id)
            content = (reply or {}).get("content", {})
            if content.get("status") != "ok":
                raise RuntimeError(f"the dependency trace failed in the kernel: {content}")
            return content

        async def async_execute(self, reset_kc: bool = False, **kwargs):
            self.reset_execution_trackers()
            async with self.async_setup_kernel(**kwargs):
                msg_id = await ensure_async(self.kc.kernel_info())
                info_msg = await self.async_wait_for_reply(msg_id)
                if info_msg is not None and "language_info" in info_msg["content"]:
                    self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
                await self._silent(TRACE_SETUP % self.root)
                for index, cell in enumerate(self.nb.cells):
                    await self.async_execute_cell(
                        cell, index, execution_count=self.code_cells_executed + 1
                    )
                self.set_widgets_metadata()
                content = await self._silent("", {"trace": TRACE_QUERY})
                result = content["user_expressions"]["trace"]
                if result.get("status") != "ok":
                    raise RuntimeError(f"the dependency trace failed in the kernel: {result}")
                self.trace = json.loads(ast.literal_eval(result["data"]["text/plain"]))
            return self.nb

        # nbclient binds its sync ``execute`` to its own ``async_execute``.
        execute = run_sync(async_execute)

    return TracingClient


def run_notebook(
    path: str,
    cwd: str,
    timeout: int,
    allow_errors: bool,
    threads: int,
    extensions: list[str],
    root: str = str(ROOT),
) -> dict:
    """Execute one notebook in a fresh kernel (runs in a worker process).

    Returns:
        ``{"path", "seconds", "notebook": nbformat JSON, "trace": {...}}`` on success, or
        ``{"path", "seconds", "error": traceback text}``.
    """
    import nbformat

    start = time.perf_counter()
    started_ns = time.time_ns()
    try:
        nb = read_notebook(Path(path), extensions)
        env = dict(os.environ, **{var: str(threads) for var in THREAD_VARS})
        client = _client_class()(
            nb,
            timeout=timeout,
            allow_errors=allow_errors,
            record_timing=False,
            resources={"metadata": {"path": cwd}},
        )
        client.root = root
        client.execute(env=env)
        return {
            "path": path,
            "seconds": time.perf_counter() - start,
            "started_ns": started_ns,
            "notebook": nbformat.writes(nb),
            "trace": client.trace,
        }
    except Exception as exc:  # noqa: BLE001 - reported with its traceback, the build fails
        text = (
            str(exc)
            if exc.__class__.__name__
            in ("CellExecutionError", "CellTimeoutError", "DeadKernelError")
            else traceback.format_exc()
        )
        return {"path": path, "seconds": time.perf_counter() - start, "error": _ANSI.sub("", text)}


#: Terminal colour codes (IPython's tracebacks carry them).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _die_with_parent() -> None:
    """Worker initializer: end this worker when the build's process dies (a kill, not only
    Ctrl-C); its kernel then ends too (ipykernel watches its parent)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# --------------------------------------------------------------------------------------------------
# The book.


@dataclass
class Plan:
    """Which notebooks run, and why."""

    run: list[tuple[Path, str]]
    kept: list[Path]


def _load_records(cache: Path, log=None) -> dict:
    path = cache / RECORDS_NAME
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        if log:
            log(f"execute: {path} is unreadable ({err}); every chapter runs again")
        return {}


def _save_records(cache: Path, records: dict) -> None:
    tmp = cache / (RECORDS_NAME + ".tmp")
    tmp.write_text(json.dumps(records, indent=1) + "\n")
    os.replace(tmp, cache / RECORDS_NAME)


def plan(root: Path = ROOT, conf: Settings | None = None, *, force: bool = False) -> Plan:
    """Decide which notebooks of the book must execute: ``(path, reason)`` for each."""
    from jupyter_cache import get_cache

    conf = conf or settings(root)
    cache = get_cache(str(conf.cache))
    records = _load_records(conf.cache)
    run, kept = [], []
    hashes: dict[str, Path] = {}
    for path in toc_pages(root):
        nb = read_notebook(path, conf.extensions)
        if nb is None:
            continue
        rel = path.relative_to(root).as_posix()
        _, nb_hash = cache.create_hashed_notebook(nb)
        if nb_hash in hashes:
            # jupyter-cache keys an execution by the code alone: both pages would show the
            # outputs of whichever ran last, from its own working directory and files.
            raise ValueError(
                f"{hashes[nb_hash].relative_to(root)} and {rel} have the same code "
                "cells; MyST-NB's cache cannot tell their executions apart (make "
                "one differ, e.g. by a comment)"
            )
        hashes[nb_hash] = path
        record = records.get(rel)
        try:
            cached = cache.match_cache_notebook(nb).uri == str(path)
        except KeyError:
            cached = False
        if force:
            reason = "asked for (--execute-all)"
        elif not cached or record is None:
            reason = "not in the cache"
        elif record.get("nb_hash") != nb_hash:
            reason = "its code changed"  # and a cached execution of that code exists (undo)
        else:
            changed = changes(record, root)
            reason = (
                (
                    "changed: "
                    + ", ".join(changed[:4])
                    + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
                )
                if changed
                else ""
            )
        if reason:
            run.append((path, reason))
        else:
            kept.append(path)
    return Plan(run, kept)


def _order(run: list[tuple[Path, str]], records: dict, root: Path) -> list[tuple[Path, str]]:
    """Longest first (the last measured time, else the length of the code), so that two lanes
    finish together."""

    def cost(item):
        rel = item[0].relative_to(root).as_posix()
        seconds = (records.get(rel) or {}).get("seconds")
        return seconds if seconds is not None else item[0].stat().st_size / 1000

    return sorted(run, key=cost, reverse=True)


def execute_book(
    root: Path = ROOT, *, jobs: int | None = None, force: bool = False, log=print
) -> int:
    """Execute every notebook of the book that needs it, ``jobs`` at a time, into the cache.

    Returns:
        The number of notebooks that failed (0: every notebook's outputs are in the cache).
    """
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    conf = settings(root)
    conf.cache.mkdir(parents=True, exist_ok=True)
    records = _load_records(conf.cache, log)
    todo = plan(root, conf, force=force)
    cores = os.cpu_count() or 1
    jobs = max(1, min(jobs or cores, len(todo.run) or 1))
    threads = max(1, cores // jobs)
    log(
        f"execute: {len(todo.run)} notebook(s) to run, {len(todo.kept)} unchanged in the cache"
        + (f"; {jobs} at a time, {threads} thread(s) each" if todo.run else "")
    )
    for path, reason in todo.run:
        log(f"execute:   {path.relative_to(root)}: {reason}")
    if not todo.run:
        return 0
    cache = get_cache(str(conf.cache))
    failed = 0
    start = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=jobs, mp_context=ctx, initializer=_die_with_parent
    ) as pool:
        futures = {}
        for path, reason in _order(todo.run, records, root):
            cwd = str(path.parent)
            if conf.in_temp:
                raise ValueError("_config.yml: execute.run_in_temp is not supported")
            fut = pool.submit(
                run_notebook,
                str(path),
                cwd,
                conf.timeout,
                conf.allow_errors,
                threads,
                conf.extensions,
                str(root),
            )
            futures[fut] = (path, reason)
        for fut in concurrent.futures.as_completed(futures):
            path, reason = futures[fut]
            rel = path.relative_to(root).as_posix()
            result = fut.result()
            if "error" in result:
                failed += 1
                log(f"execute: {rel} FAILED after {result['seconds']:.1f} s:\n{result['error']}")
                continue
            nb = nbformat.reads(result["notebook"], as_version=4)
            _, nb_hash = cache.create_hashed_notebook(nb)
            new = cache.cache_notebook_bundle(
                CacheBundleIn(nb, str(path), data={"execution_seconds": result["seconds"]}),
                check_validity=False,
                overwrite=True,
            )
            for old in cache.list_cache_records():  # one cached execution per page
                if old.uri == str(path) and old.pk != new.pk:
                    cache.remove_cache(old.pk)
            records[rel] = {
                "nb_hash": nb_hash,
                "seconds": round(result["seconds"], 2),
                "at": time.time(),
                **dependencies(result["trace"], root, since_ns=result["started_ns"]),
            }
            if records[rel]["raced"]:
                log(
                    f"execute: {rel}: {', '.join(records[rel]['raced'])} changed while it ran; "
                    "it runs again in the next build"
                )
            _save_records(conf.cache, records)
            log_file = root / EXECUTIONS_LOG.relative_to(ROOT)
            log_file.parent.mkdir(parents=True, exist_ok=True)
            with log_file.open("a", encoding="utf-8") as fh:
                fh.write(
                    json.dumps(
                        {
                            "page": rel,
                            "seconds": round(result["seconds"], 2),
                            "reason": reason,
                            "at": time.time(),
                        }
                    )
                    + "\n"
                )
            log(f"execute: {rel} done in {result['seconds']:.1f} s")
    log(
        f"execute: {len(todo.run) - failed} of {len(todo.run)} notebook(s) executed in "
        f"{time.perf_counter() - start:.0f} s" + (f", {failed} failed" if failed else "")
    )
    return failed


def executions(root: Path = ROOT) -> dict[str, float]:
    """``{docname: when its cached execution was made}`` (``attnbook_executions`` of the
    Sphinx builds: a page whose execution is newer than the one Sphinx read is read again)."""
    records = _load_records(settings(root).cache)
    return {rel.rsplit(".", 1)[0]: rec["at"] for rel, rec in records.items() if "at" in rec}


def executed_notebook(page: str | Path, root: Path = ROOT):
    """The executed notebook of ``page`` (e.g. ``"chapters/03-scaling-variance.md"``), as the
    book shows it: the page read as MyST-NB reads it, with the cached outputs merged in.

    MyST-NB writes the page without outputs into ``jupyter_execute/`` when it takes them from
    the cache; the tests read the executed chapters through this function instead.

    Raises:
        KeyError: if the page has no execution in the cache (the book was not built).
    """
    from jupyter_cache import get_cache

    conf = settings(root)
    nb = read_notebook(root / page, conf.extensions)
    if nb is None:
        raise ValueError(f"{page} is not a notebook")
    _, merged = get_cache(str(conf.cache)).merge_match_into_notebook(nb)
    return merged


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="execute every notebook again")
    parser.add_argument(
        "--jobs", type=int, default=None, help="notebooks at a time (default: the number of cores)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say which notebooks would run, and why; run none"
    )
    args = parser.parse_args(argv)
    import editions  # the languages the one execution draws for (as `make book` sets them)

    os.environ["ATTNBOOK_EDITIONS"] = editions.EDITIONS_ENV
    if args.dry_run:
        todo = plan(force=args.all)
        for path, reason in todo.run:
            print(f"{path.relative_to(ROOT)}: {reason}")
        print(f"{len(todo.run)} to run, {len(todo.kept)} unchanged")
        return 0
    return 1 if execute_book(jobs=args.jobs, force=args.all) else 0


if __name__ == "__main__":
    sys.exit(main())
