"""The build is strict, offline by configuration, and the commands the README names exist.

Issue 2, section 1: "A test checks that `_config.yml` has no escape hatch (no `allow_errors`, no
suppressed warnings, no `raises-exception` tags, execution not switched off)". The files are
parsed (YAML, the Makefile's rules and variables, the shell script's commands, the chapters as
notebooks through Jupytext), never grepped. Each checker returns a list of problems; the tests
run it on the real file (expecting none) and on a small broken example (expecting the fault to
be named), so every check is shown to be able to fail.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import sys
from pathlib import Path

import jupytext
import pytest
import yaml

from conftest import BUILD_COMMAND, CHAPTER_HEADER, build_is_fresh, stale_slow_tests

ROOT = Path(__file__).resolve().parents[2]
#: What every build of an edition must pass to Sphinx (book/editions.py STRICT, OVERRIDES):
#: -W, --keep-going, -n.
STRICT_SETTINGS = {"warningiserror": True, "keep_going": True, "nitpicky": True}
#: Cell tags that let a chapter cell fail, or not run, without failing the build.
FORBIDDEN_TAGS = {"raises-exception", "skip-execution"}
#: Sphinx/MyST/MyST-NB settings that silence warnings or exempt documents from execution.
SILENCERS = {
    "suppress_warnings",
    "myst_suppress_warnings",
    "nitpick_ignore",
    "nitpick_ignore_regex",
    "nb_execution_excludepatterns",
}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def load_yaml(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------------
# _config.yml


def config_escape_hatches(config: dict) -> list[str]:
    """Everything in a Jupyter Book config that lets a failing cell or a warning pass."""
    problems = []
    execute = config.get("execute") or {}
    sphinx_config = (config.get("sphinx") or {}).get("config") or {}
    if execute.get("allow_errors", False) is not False:
        problems.append(f"execute.allow_errors is {execute['allow_errors']!r}")
    if sphinx_config.get("nb_execution_allow_errors", False) is not False:
        problems.append("sphinx.config.nb_execution_allow_errors is set")
    # YAML reads a bare `off` as False.
    # Every chapter executes (book/execute.py, before Sphinx reads it) into the cache MyST-NB
    # reads in "cache" mode; "off" or "auto" would let a page go unexecuted, "force" would
    # execute every chapter again in Sphinx, serially, in each edition.
    mode = execute.get("execute_notebooks", "auto")
    if mode is False or str(mode).lower() == "off":
        problems.append("execution is switched off (execute.execute_notebooks)")
    elif mode != "cache":
        problems.append(f"execute.execute_notebooks is {mode!r}, not 'cache'")
    if not str(execute.get("cache", "")).startswith("_build/"):
        problems.append(f"execute.cache is {execute.get('cache')!r}, not a folder of _build/")
    if "nb_execution_mode" in sphinx_config or "nb_execution_cache_path" in sphinx_config:
        problems.append(
            "sphinx.config sets nb_execution_mode or nb_execution_cache_path "
            "(execute: is the one place)"
        )
    if sphinx_config.get("nb_execution_raise_on_error") is not True:
        problems.append("sphinx.config.nb_execution_raise_on_error is not true")
    if execute.get("raise_on_error", True) is not True:
        problems.append("execute.raise_on_error is not true")
    if execute.get("exclude_patterns"):
        problems.append(f"execute.exclude_patterns skips {execute['exclude_patterns']!r}")
    for key in sorted(SILENCERS):
        if key in config or key in sphinx_config:
            problems.append(f"{key} is set")
    return problems


def config_offline_problems(config: dict) -> list[str]:
    """Settings of the offline design (section 2) that are missing or wrong."""
    problems = []
    sphinx = config.get("sphinx") or {}
    sphinx_config = sphinx.get("config") or {}
    extensions = list(sphinx_config.get("extensions") or []) + list(
        sphinx.get("extra_extensions") or []
    )
    for needed in ("sphinx-mathjax-offline", "attnbook_offline", "sphinxcontrib.bibtex"):
        if needed not in extensions:
            problems.append(f"extension {needed} is not loaded")
    if "sphinx_thebe" in extensions:
        problems.append("sphinx_thebe is loaded")
    if "attnbook_offline" not in (sphinx.get("local_extensions") or {}):
        problems.append("attnbook_offline is not registered in sphinx.local_extensions")
    if sphinx_config.get("nb_ipywidgets_js") != {}:
        problems.append("nb_ipywidgets_js is not {} (require.js from a CDN)")
    overrides = [list(o) for o in sphinx_config.get("nb_mime_priority_overrides") or []]
    if ["html", WIDGET_VIEW, None] not in overrides:
        problems.append(f"the html builder may still choose {WIDGET_VIEW}")
    launch = config.get("launch_buttons") or {}
    if launch.get("thebe") is not False:
        problems.append("launch_buttons.thebe is not false")
    for key in ("binderhub_url", "jupyterhub_url", "colab_url", "deepnote_url"):
        if launch.get(key, "") != "":
            problems.append(f"launch_buttons.{key} is set")
    if "mathjax_path" in sphinx_config:
        problems.append("mathjax_path is set by hand (sphinx-mathjax-offline sets it)")
    return problems


def test_config_has_no_escape_hatch():
    assert config_escape_hatches(load_yaml("_config.yml")) == []


def with_setting(config: dict, path: tuple[str, ...], value) -> dict:
    """A deep copy of ``config`` with ``config[path[0]][path[1]]… = value``."""
    config = copy.deepcopy(config)
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise TypeError(f"{key} is not a mapping in the config")
    node[path[-1]] = value
    return config


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("execute", "allow_errors"), True, "allow_errors"),
        (("sphinx", "config", "nb_execution_allow_errors"), True, "allow_errors"),
        (("execute", "execute_notebooks"), False, "switched off"),  # YAML's bare `off`
        (("execute", "execute_notebooks"), "off", "switched off"),
        (("execute", "execute_notebooks"), "force", "not 'cache'"),
        (("execute", "execute_notebooks"), "auto", "not 'cache'"),
        (("execute", "cache"), "/tmp/elsewhere", "not a folder of _build/"),
        (("sphinx", "config", "nb_execution_mode"), "off", "nb_execution_mode"),
        (("execute", "exclude_patterns"), ["chapters/*"], "exclude_patterns"),
        (("sphinx", "config", "nb_execution_raise_on_error"), False, "raise_on_error"),
        (("execute", "raise_on_error"), False, "raise_on_error"),
        (("suppress_warnings",), ["myst.header"], "suppress_warnings is set"),
        (("sphinx", "config", "suppress_warnings"), ["ref"], "suppress_warnings is set"),
        (("sphinx", "config", "nitpick_ignore"), [["py:class", "x"]], "nitpick_ignore is set"),
    ],
)
def test_config_escape_hatch_check_can_fail(path, value, expected):
    problems = config_escape_hatches(with_setting(load_yaml("_config.yml"), path, value))
    assert any(expected in p for p in problems), problems


def test_config_is_set_up_for_offline_html():
    assert config_offline_problems(load_yaml("_config.yml")) == []


def test_config_offline_check_can_fail():
    config = load_yaml("_config.yml")
    config["sphinx"]["config"]["nb_ipywidgets_js"] = {"https://cdn/require.js": {}}
    config["sphinx"]["config"]["extensions"] = ["sphinx_thebe"]
    config["launch_buttons"] = {"thebe": True, "colab_url": "https://colab.research.google.com"}
    problems = "\n".join(config_offline_problems(config))
    for expected in (
        "nb_ipywidgets_js",
        "sphinx-mathjax-offline is not loaded",
        "sphinx_thebe is loaded",
        "thebe is not false",
        "colab_url",
    ):
        assert expected in problems, problems


def test_bibliography_is_configured():
    config = load_yaml("_config.yml")
    for bib in config["bibtex_bibfiles"]:
        assert (ROOT / bib).is_file(), f"bibtex file {bib} is missing"
    text = (ROOT / "references.md").read_text(encoding="utf-8")
    assert re.search(r"^```\{bibliography\}", text, re.M), "references.md has no {bibliography}"


# --------------------------------------------------------------------------------------------------
# _toc.yml and the chapters


def toc_chapters() -> list[str]:
    """The top-level entries of _toc.yml in order: those of every part (Chapters, Appendices)."""
    toc = load_yaml("_toc.yml")
    assert toc["format"] == "jb-book" and toc["root"] == "intro", toc
    parts = toc["parts"] if "parts" in toc else [{"chapters": toc["chapters"]}]
    return [entry["file"] for part in parts for entry in part["chapters"]]


def chapter_escape_hatches(nb) -> list[str]:
    """Cells or notebook metadata in a chapter that let a failing cell pass."""
    problems = []
    mystnb = nb.metadata.get("mystnb") or {}
    for key in (
        "execution_mode",
        "execution_allow_errors",
        "execution_raise_on_error",
        "execution_excludepatterns",
    ):
        if key in mystnb:
            problems.append(f"notebook metadata mystnb.{key} = {mystnb[key]!r}")
    for index, cell in enumerate(nb.cells):
        tags = set(cell.metadata.get("tags") or [])
        for tag in sorted(tags & FORBIDDEN_TAGS):
            problems.append(f"cell {index} is tagged {tag}")
    return problems


#: Pages listed before the chapters ("Start here"): how to run the book (run.md).
FRONT_PAGES = ("run",)


def test_toc_lists_existing_chapters_then_references():
    chapters = toc_chapters()
    assert chapters[-1] == "references", "the bibliography page closes the book"
    missing = [c for c in chapters if not (ROOT / f"{c}.md").is_file()]
    assert not missing, f"_toc.yml lists chapters that do not exist: {missing}"
    front = list(FRONT_PAGES)
    assert chapters[: len(front)] == front, f"_toc.yml does not open with {front}: {chapters}"
    chapters = chapters[len(front) :]
    numbered = [c for c in chapters[:-1] if c.startswith("chapters/")]
    numbers = [int(re.match(r"chapters/(\d+)-", c).group(1)) for c in numbered]
    assert numbers == sorted(numbers), f"chapters out of order: {chapters}"
    # The chapters come first, then the appendices (appendix/...), then the references.
    assert chapters[: len(numbered)] == numbered, f"a chapter follows an appendix: {chapters}"
    others = [c for c in chapters[len(numbered) : -1] if not c.startswith("appendix/")]
    assert not others, f"_toc.yml lists pages that are neither chapters nor appendices: {others}"


@pytest.mark.parametrize("chapter", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.name)
def test_chapter_has_no_escape_hatch_and_a_numbered_title(chapter):
    nb = jupytext.read(chapter)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", "no python3 kernelspec"
    assert chapter_escape_hatches(nb) == []
    number = int(chapter.name.split("-", 1)[0])
    titles = [
        line
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("# ")
    ]
    assert titles, f"{chapter.name} has no H1"
    assert titles[0].startswith(f"# {number} · "), (
        f"{chapter.name}: the H1 must carry the chapter number ('# {number} · …'), "
        f"got {titles[0]!r}"
    )


def test_chapter_check_can_fail():
    text = (
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\nmystnb:\n"
        "  execution_mode: 'off'\n---\n\n# 9 · Test\n\n"
        "```{code-cell} ipython3\n:tags: [raises-exception]\n\n1 / 0\n```\n\n"
        "```{code-cell} ipython3\n:tags: [skip-execution]\n\nslow()\n```\n"
    )
    problems = "\n".join(chapter_escape_hatches(jupytext.reads(text, fmt="md:myst")))
    assert "mystnb.execution_mode" in problems, problems
    assert "tagged raises-exception" in problems, problems
    assert "tagged skip-execution" in problems, problems


# --------------------------------------------------------------------------------------------------
# Makefile


def parse_makefile(text: str) -> tuple[dict[str, str], dict[str, dict]]:
    """Variables and rules of a simple Makefile (no includes, no pattern rules needed here).

    Returns ``(variables, rules)`` where ``rules[target] = {"prereqs": [...], "recipe": [...]}``
    with every ``$(VAR)`` of the Makefile expanded (``$(shell …)``, ``$(MAKE)`` and automatic
    variables are left as written).
    """
    text = text.replace("\\\n", " ")
    variables: dict[str, str] = {}
    raw_rules: list[tuple[str, str, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t"):
            if current is not None:
                current.append(line[1:].strip())
            continue
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped.strip():
            continue
        assign = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(:=|\?=|\+=|=)\s*(.*)$", stripped)
        if assign:
            name, op, value = assign.groups()
            if op == "?=" and name in variables:
                continue
            if op == "+=":
                value = (variables.get(name, "") + " " + value).strip()
            variables[name] = value
            current = None
            continue
        rule = re.match(r"^([^:=]+):(?!=)\s*(.*)$", stripped)
        if rule:
            current = []
            raw_rules.append((rule.group(1), rule.group(2), current))
        else:
            current = None

    # Variables computed by $(shell …) stay as written (e.g. the stamp's hash).
    known = {k: v for k, v in variables.items() if "$(shell" not in v}

    def expand(s: str, depth: int = 0) -> str:
        if depth > 20:
            return s
        out = re.sub(
            r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: known.get(m.group(1), m.group(0)), s
        )
        return out if out == s else expand(out, depth + 1)

    rules: dict[str, dict] = {}
    for targets, prereqs, recipe in raw_rules:
        for target in expand(targets).split():
            rules[target] = {
                "prereqs": [p for p in expand(prereqs).split() if p != "|"],
                "recipe": [expand(cmd).lstrip("@-+") for cmd in recipe],
            }
    return variables, rules


def commands(recipe: list[str]) -> list[list[str]]:
    """Shell words of each recipe line (``a && b`` counts as two commands).

    Leading environment assignments (``NAME=value cmd ...``) are dropped: the command is ``cmd``.
    """
    out = []
    for line in recipe:
        for part in re.split(r"&&|;", line):
            words = shlex.split(part)
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words = words[1:]
            if words:
                out.append(words)
    return out


def runs_make_target(rules: dict, target: str, wanted: str) -> bool:
    """True when ``target`` reaches ``wanted`` through its prerequisites or a ``$(MAKE) wanted``."""
    rule = rules.get(target)
    if rule is None:
        return False
    if wanted in rule["prereqs"]:
        return True
    return any(
        words[0] in ("$(MAKE)", "make") and wanted in words[1:]
        for words in commands(rule["recipe"])
    )


def makefile_problems(text: str) -> list[str]:
    """What the Makefile must do (issue 2, section 1), as a list of what it fails to do."""
    problems = []
    _variables, rules = parse_makefile(text)
    for target in ("book", "test", "unit", "lint", "lab", "html"):
        if target not in rules:
            problems.append(f"no `{target}` target")
    if problems:
        return problems
    builds = [
        w
        for w in commands(rules["html"]["recipe"])
        if w[0] == ".venv/bin/python" and w[1:2] == [BUILD_COMMAND[0]]
    ]
    if len(builds) != 1:
        problems.append(f"`html` does not run {BUILD_COMMAND[0]} once: {builds}")
    html_recipe = rules["html"]["recipe"]
    if not any("_build/html/index.html" in line and "echo" in line for line in html_recipe):
        problems.append("`html` does not print the path of index.html")
    for target, requirements in (("book", "requirements.txt"), ("test", "requirements-test.txt")):
        if not runs_make_target(rules, target, "html"):
            problems.append(f"`{target}` does not build the book")
        installs = [
            words
            for prereq in rules[target]["prereqs"]
            if prereq in rules
            for words in commands(rules[prereq]["recipe"])
            if "pip" in words and "install" in words and requirements in words
        ]
        if not installs:
            problems.append(f"`{target}` does not install {requirements} (via a stamp rule)")
        stamps = [p for p in rules[target]["prereqs"] if ".installed-" in p]
        if not stamps:
            problems.append(f"`{target}` installs without a stamp file")
        else:
            venv_rule = rules.get(".venv/bin/python", {"recipe": []})
            if not any("venv" in w for words in commands(venv_rule["recipe"]) for w in words):
                problems.append("nothing creates .venv with `python3 -m venv`")
    if not any("pytest" in words for words in commands(rules["test"]["recipe"])):
        problems.append("`test` does not run pytest")
    problems += unit_and_lint_problems(rules)
    for target, settings in (("lab", "jupyter/reader"), ("lab-source", "jupyter/source")):
        if target not in rules:
            problems.append(f"the Makefile has no `{target}`")
            continue
        starts = [
            w
            for w in commands(rules[target]["recipe"])
            if w[0].endswith("jupyter") and w[1:2] == ["lab"]
        ]
        if not starts:
            problems.append(f"`{target}` does not start jupyter lab")
        elif not any(f"--LabApp.app_settings_dir=$(CURDIR)/{settings}" in w for w in starts):
            problems.append(f"`{target}` does not use the settings in {settings}/")
    if "lab" in rules:  # the reader's copy of the notebooks, made from the build's
        lab_words = commands(rules["lab"]["recipe"])
        if "--ServerApp.root_dir=$(CURDIR)/notebooks" not in [w for ws in lab_words for w in ws]:
            problems.append("`lab` does not open the reader notebooks (notebooks/)")
        if not any("book/editions.py" in ws and "--reader-copy" in ws for ws in lab_words):
            problems.append("`lab` does not copy the build's notebooks (--reader-copy)")
    return problems


#: What `make unit` must leave out (issue 9, item 4): the markers of pyproject.toml.
UNIT_EXCLUDED = {"slow", "browser", "book"}


def unit_and_lint_problems(rules: dict) -> list[str]:
    """`unit` runs pytest without the excluded markers and builds nothing; `lint` runs ruff."""
    problems = []
    unit = [w[w.index("pytest") + 1 :] for w in commands(rules["unit"]["recipe"]) if "pytest" in w]
    if len(unit) != 1 or "-m" not in unit[0][:-1]:
        problems.append(f"`unit` does not run one `pytest -m ...`: {unit}")
    else:
        expression = unit[0][unit[0].index("-m") + 1]
        excluded = set(re.findall(r"\bnot\s+(\w+)", expression))
        if excluded != UNIT_EXCLUDED or re.search(r"\bor\b", expression):
            problems.append(
                f"`unit` selects {expression!r}, not the tests without {sorted(UNIT_EXCLUDED)}"
            )
    if runs_make_target(rules, "unit", "html"):
        problems.append("`unit` builds the book")
    lint = [w for w in commands(rules["lint"]["recipe"]) if w[0].endswith("ruff")]
    if not lint or lint != [[lint[0][0], "check", "."], [lint[0][0], "format", "--check", "."]]:
        problems.append(f"`lint` does not run `ruff check .` and `ruff format --check .`: {lint}")
    return problems


def test_makefile_does_what_the_issue_asks():
    assert makefile_problems((ROOT / "Makefile").read_text(encoding="utf-8")) == []


def test_makefile_check_can_fail():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    lax = text.replace("$(VPY) book/editions.py", "$(JB) build .")
    assert lax != text, "the Makefile no longer runs book/editions.py as expected by this test"
    problems = "\n".join(makefile_problems(lax))
    assert "`html` does not run book/editions.py once" in problems, problems
    no_pytest = text.replace("$(VPY) -m pytest", "true")
    assert "`test` does not run pytest" in makefile_problems(no_pytest)
    assert "no `lab` target" in makefile_problems(text.replace("\nlab:", "\nnolab:"))
    lax_unit = text.replace(
        "UNIT_MARKERS := not slow and not browser and not book",
        "UNIT_MARKERS := not slow and not browser",
    )
    assert lax_unit != text, "the Makefile no longer defines UNIT_MARKERS as this test expects"
    assert "`unit` selects 'not slow and not browser'" in "\n".join(makefile_problems(lax_unit))
    no_lint = text.replace("$(VENV)/bin/ruff check .", "$(VENV)/bin/ruff format --check .")
    assert "`lint` does not run `ruff check .`" in "\n".join(makefile_problems(no_lint))
    no_format = text.replace("\t$(VENV)/bin/ruff format --check .\n", "")
    assert no_format != text, "the Makefile's lint recipe no longer reads as this test expects"
    assert "`lint` does not run `ruff check .`" in "\n".join(makefile_problems(no_format))
    building = text.replace("unit: $(TEST_STAMP)\n", "unit: $(TEST_STAMP) html\n")
    assert "`unit` builds the book" in makefile_problems(building)


# --------------------------------------------------------------------------------------------------
# .ci/run, README, JupyterLab settings


def shell_commands(text: str) -> list[list[str]]:
    """The simple commands of a shell script (comments, blank lines and `if` blocks skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line, comments=True)
        if words and words[0] not in ("if", "then", "fi", "else", "elif"):
            out.append(words)
    return out


def ci_problems(text: str) -> list[str]:
    problems = []
    if not text.startswith("#!/usr/bin/env bash") and not text.startswith("#!/bin/bash"):
        problems.append("not a bash script")
    cmds = shell_commands(text)
    if not cmds or cmds[0] != ["set", "-euo", "pipefail"]:
        problems.append("`set -euo pipefail` is not the first command")
    apt = [[w for w in c if not w.startswith("$")] for c in cmds]
    update = next((i for i, c in enumerate(apt) if c[:2] == ["apt-get", "update"]), None)
    install = next(
        (i for i, c in enumerate(apt) if c[:2] == ["apt-get", "install"] and "chromium" in c), None
    )
    if install is None:
        problems.append("chromium is not installed with apt-get install")
    elif update is None or update > install:
        problems.append("apt-get update does not precede the install")
    if not cmds or cmds[-1] != ["make", "test"]:
        problems.append("`make test` is not the last command")
    if ["make", "lint"] not in cmds[:-1]:
        problems.append("`make lint` does not run before `make test`")
    return problems


def test_ci_installs_chromium_then_runs_make_test():
    path = ROOT / ".ci" / "run"
    assert os.access(path, os.X_OK), ".ci/run is not executable"
    assert ci_problems(path.read_text(encoding="utf-8")) == []


def test_ci_check_can_fail():
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    problems = ci_problems(text.replace("set -euo pipefail", "set -e").replace("chromium", "curl"))
    assert "`set -euo pipefail` is not the first command" in problems, problems
    assert "chromium is not installed with apt-get install" in problems, problems
    assert "`make test` is not the last command" in ci_problems(text + "\necho done\n")
    assert "`make lint` does not run before `make test`" in ci_problems(
        text.replace("make lint\n", "")
    )


def readme_make_commands(text: str) -> list[str]:
    """Targets of every `make …` command in the README's code, in document order."""
    targets = []
    for code in re.finditer(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", text, re.S):
        block = code.group(1) if code.group(1) is not None else code.group(2)
        targets += re.findall(r"(?:^|[\s;&(])make\s+([A-Za-z][\w.-]*)", block)
    return targets


def readme_problems(readme: str, makefile: str) -> list[str]:
    problems = []
    _variables, rules = parse_makefile(makefile)
    targets = readme_make_commands(readme)
    if targets[:2] != ["book", "test"]:
        problems.append(f"the first commands are not `make book`, `make test`: {targets[:2]}")
    for target in sorted(set(targets) - set(rules)):
        problems.append(f"README names `make {target}`, which the Makefile lacks")
    return problems


def test_readme_commands_exist_and_come_first():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_problems(readme, (ROOT / "Makefile").read_text(encoding="utf-8")) == []


def test_readme_check_can_fail():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    readme = "Run `make test` first.\n\n```bash\nmake book\nmake docs\n```\n"
    assert readme_make_commands(readme) == ["test", "book", "docs"]
    problems = readme_problems(readme, makefile)
    assert "the first commands are not `make book`, `make test`: ['test', 'book']" in problems
    assert "README names `make docs`, which the Makefile lacks" in problems


def test_jupyterlab_opens_markdown_as_jupytext_notebooks_for_authors():
    path = ROOT / "jupyter" / "source" / "overrides.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    viewers = settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers == {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}, viewers


def test_jupyterlab_shows_the_reader_notebooks_markdown_pages_rendered():
    path = ROOT / "jupyter" / "reader" / "overrides.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    viewers = settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers == {"markdown": "Markdown Preview"}, viewers


def test_built_book_reuses_only_a_successful_build_newer_than_every_source(tmp_path):
    """The rule behind the ``built_book`` fixture, on a throw-away tree."""
    (tmp_path / "chapters").mkdir()
    (tmp_path / "lib" / "attnbook" / "sub").mkdir(parents=True)
    sources = [
        tmp_path / "chapters" / "03-x.md",
        tmp_path / "_config.yml",
        tmp_path / "lib" / "attnbook" / "sub" / "deep.py",
    ]
    for path in sources:
        path.write_text("x")
    html = tmp_path / "_build" / "html"
    for edition in ("", "en", "zh"):
        (html / edition).mkdir(parents=True, exist_ok=True)
        (html / edition / "index.html").write_text("<html></html>")
    ok = tmp_path / "_build" / ".attnbook-build-ok"
    assert not build_is_fresh(tmp_path), "no success stamp: must rebuild"
    ok.touch()
    base = ok.stat().st_mtime
    for path in sources:
        os.utime(path, (base - 10, base - 10))
    assert build_is_fresh(tmp_path)
    os.utime(sources[-1], (base + 10, base + 10))  # a library file changed after the build
    assert not build_is_fresh(tmp_path)
    os.utime(sources[-1], (base - 10, base - 10))
    (html / "zh" / "index.html").unlink()
    assert not build_is_fresh(tmp_path), "no Chinese edition: must rebuild"


def test_slow_test_list_names_existing_tests(tmp_path):
    """conftest.SLOW_TESTS marks tests of other files slow; a renamed test must not drop out."""
    assert stale_slow_tests() == []
    (tmp_path / "test_x.py").write_text("def test_a():\n    pass\n")
    entries = ("test_x.py::test_a", "test_x.py::test_b", "test_y.py::test_a")
    assert stale_slow_tests(tmp_path, entries) == ["test_x.py::test_b", "test_y.py::test_a"]


@pytest.mark.parametrize("chapter", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.name)
def test_chapter_header_is_the_one_jupyterlab_keeps(chapter):
    text = chapter.read_text(encoding="utf-8")
    assert text.startswith(CHAPTER_HEADER), (
        f"{chapter.name}'s front matter differs from tests/book/test_book_config.py's "
        "CHAPTER_HEADER; JupyterLab would rewrite it on save:\n" + text[: len(CHAPTER_HEADER)]
    )


def editions_problems(strict: dict, overrides: dict, command: tuple) -> list[str]:
    """What the editions build must keep (issue 12: the strict checks unchanged)."""
    problems = []
    settings = {**strict, **overrides}
    for name, value in STRICT_SETTINGS.items():
        if settings.get(name) is not value:
            problems.append(f"the editions build does not set {name}={value}")
    if overrides.get("attnbook_no_execution") is not True:
        problems.append("Sphinx may execute a chapter itself (attnbook_no_execution)")
    if {"nb_execution_mode", "nb_execution_cache_path"} & set(overrides):
        problems.append("the editions override _config.yml's execution settings")
    if command[0] != "book/editions.py" or "--all" not in command:
        problems.append(f"conftest's build is not `book/editions.py --all`: {command}")
    return problems


def test_editions_build_is_strict_and_shares_one_execution():
    sys.path.insert(0, str(ROOT / "book"))
    try:
        import editions
    finally:
        sys.path.pop(0)
    assert editions_problems(editions.STRICT, editions.OVERRIDES, BUILD_COMMAND) == []
    lax = dict(editions.STRICT, warningiserror=False)
    assert "warningiserror=True" in "\n".join(
        editions_problems(lax, editions.OVERRIDES, BUILD_COMMAND)
    )
    no_nitpick = dict(editions.OVERRIDES, nitpicky=False)
    assert "nitpicky=True" in "\n".join(
        editions_problems(editions.STRICT, no_nitpick, BUILD_COMMAND)
    )
    executes = dict(editions.OVERRIDES, attnbook_no_execution=False)
    assert "attnbook_no_execution" in "\n".join(
        editions_problems(editions.STRICT, executes, BUILD_COMMAND)
    )
    forced = dict(editions.OVERRIDES, nb_execution_mode="force")
    assert "override _config.yml" in "\n".join(
        editions_problems(editions.STRICT, forced, BUILD_COMMAND)
    )


def test_the_execution_reads_its_settings_from_config_yml():
    """book/execute.py takes the mode, cache folder and timeout from _config.yml as Jupyter
    Book maps them, and refuses a mode in which Sphinx would not read its cache."""
    sys.path.insert(0, str(ROOT / "book"))
    try:
        import execute
    finally:
        sys.path.pop(0)
    conf = execute.settings()
    config = load_yaml("_config.yml")["execute"]
    assert conf.mode == config["execute_notebooks"] == "cache"
    assert conf.cache == (ROOT / config["cache"]).resolve()
    assert conf.timeout == config["timeout"]
    assert conf.in_temp is False and conf.allow_errors is False
