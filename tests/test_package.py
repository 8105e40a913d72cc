"""The package as a whole (issue 9, items 2 and 3), read from the source with ``ast``.

Four rules, each a function that returns a list of problems, run on ``lib/attnbook`` (expecting
none) and on a small, deliberately broken package held in memory (expecting the fault to be
named), so that every check is shown to be able to fail:

(a) **No import cycle** among the package's modules. Every import counts, wherever it is written:
    at module level, inside a function (a lazy import is an edge too), under ``if``/``try``.
(b) **No private name crosses a module boundary**: no module imports a name starting with ``_``
    from another module of the package (``from .flash import _check``), or reaches one through
    a module it imported (``viz._axis(...)``). Dunder names (``__version__``) are not private.
(c) **The package's ``__all__`` lists every module and subpackage** of ``lib/attnbook`` (and a
    subpackage's ``__all__`` its own modules).
(d) **One NumPy home and one torch home per building block** (issue 23): the NumPy concept
    modules (:data:`CONCEPTS`) import no torch and name their torch twin, ``attnbook.layers``,
    whose docstring names each of them back; a public function or class defined in two modules
    (``rms_norm`` and ``RMSNorm`` count as one name) is defined in a concept module and in
    ``attnbook.layers``, nowhere else.

The API reference's module pages are generated from the package (``book/api_pages.py``);
``tests/book/test_api_docs.py`` checks the generator and the built pages.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "attnbook"
PACKAGE_DIR = ROOT / "lib" / PACKAGE


# --------------------------------------------------------------------------------------------------
# Reading the package


@dataclass(frozen=True)
class Module:
    """One module of the package: its dotted name, whether it is a package, its source."""

    name: str
    is_package: bool
    source: str
    path: str = ""  # for messages, relative to the repository


def read_package(package_dir: Path = PACKAGE_DIR, package: str = PACKAGE) -> dict[str, Module]:
    """Every ``.py`` file under ``package_dir`` as ``{dotted name: Module}``."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir)
        if "__pycache__" in rel.parts:
            continue
        parts = list(rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join([package, *parts])
        modules[name] = Module(
            name,
            is_package,
            path.read_text(encoding="utf-8"),
            path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path),
        )
    return modules


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class Import:
    """An import (or an attribute access through an imported module) found in a module."""

    source: str  # the importing module
    target: str  # the module of the package it reads
    line: int
    name: str | None = None  # the name taken from ``target``, when not a module itself


def resolve_from(module: Module, node: ast.ImportFrom) -> str | None:
    """The absolute module name of ``from <node.module> import ...`` written in ``module``."""
    if node.level == 0:
        return node.module
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    if not base:
        return None
    return ".".join(base + ([node.module] if node.module else []))


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def imports_of(module: Module, known: set[str]) -> list[Import]:
    """Every import of another module of the package by ``module``, at any depth of its code.

    ``from .x import y`` reads module ``x`` (name ``y``), or module ``x.y`` when that is a module
    of the package. Attribute accesses ``alias.name`` on a name bound to a module of the package
    by an import are returned too (with ``name``), so that ``viz._axis`` counts as reading
    ``_axis`` from ``viz``.
    """
    found: list[Import] = []
    aliases: dict[str, str] = {}  # local name -> module of the package
    tree = ast.parse(module.source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.append(Import(module.name, alias.name, node.lineno))
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            target = resolve_from(module, node)
            if target is None or not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    found.append(Import(module.name, sub, node.lineno))
                    aliases[alias.asname or alias.name] = sub
                elif target in known:
                    found.append(Import(module.name, target, node.lineno, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            base = dotted(node.value)
            if base is None:
                continue
            head, _, rest = base.partition(".")
            if head not in aliases:
                continue
            target = aliases[head] + ("." + rest if rest else "")
            if target in known:
                found.append(Import(module.name, target, node.lineno, node.attr))
    return [imp for imp in found if imp.target != module.name]


def import_graph(modules: dict[str, Module]) -> dict[str, list[Import]]:
    known = set(modules)
    return {name: imports_of(mod, known) for name, mod in modules.items()}


# --------------------------------------------------------------------------------------------------
# (a) no import cycle


def import_cycles(modules: dict[str, Module]) -> list[str]:
    """One cycle per strongly connected component of the import graph, as a readable path."""
    graph = import_graph(modules)
    edges = {name: sorted({imp.target for imp in imps}) for name, imps in graph.items()}
    # Tarjan's strongly connected components (the graph is small: recursion is fine).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)

    problems = []
    for component in components:
        members = set(component)
        # A shortest cycle through the component's first module, by breadth-first search.
        start = component[0]
        previous = {start: None}
        queue = [start]
        closing = None
        while queue and closing is None:
            v = queue.pop(0)
            for w in edges[v]:
                if w == start:
                    closing = v
                    break
                if w in members and w not in previous:
                    previous[w] = v
                    queue.append(w)
        path = [start]
        v = closing
        while v is not None and v != start:
            path.insert(1, v)
            v = previous[v]
        path.append(start)
        where = []
        for a, b in zip(path, path[1:]):
            lines = sorted({imp.line for imp in graph[a] if imp.target == b})
            where.append(f"{modules[a].path or a}:{','.join(map(str, lines))}")
        problems.append(" -> ".join(path) + "  (" + "; ".join(where) + ")")
    return problems


# --------------------------------------------------------------------------------------------------
# (b) no private name imported across modules


def private_imports(modules: dict[str, Module]) -> list[str]:
    problems = []
    for name, imps in import_graph(modules).items():
        for imp in imps:
            if imp.name is not None and is_private(imp.name):
                problems.append(
                    f"{modules[name].path or name}:{imp.line}: {name} uses {imp.target}.{imp.name}"
                )
    return sorted(set(problems))


# --------------------------------------------------------------------------------------------------
# (c) the package's __all__ lists every module


def literal_all(source: str) -> list[str] | None:
    """The names of a module's ``__all__`` (``=``, ``+=``), or None when it has none."""
    names = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = list(ast.literal_eval(node.value))
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "__all__"
        ):
            names = (names or []) + list(ast.literal_eval(node.value))
    return names


def missing_from_all(modules: dict[str, Module], package: str = PACKAGE) -> list[str]:
    """Public modules and subpackages directly inside ``package`` that its ``__all__`` omits."""
    listed = literal_all(modules[package].source)
    if listed is None:
        return [f"{package} has no __all__"]
    children = sorted(
        name
        for name in modules
        if name.rpartition(".")[0] == package and not name.rpartition(".")[2].startswith("_")
    )
    problems = [
        f"{package}.__all__ omits the module {child}"
        for child in children
        if child.rpartition(".")[2] not in listed
    ]
    dangling = [
        n
        for n in listed
        if f"{package}.{n}" not in modules
        and not re.search(rf"^(def|class)\s+{n}\b|^{n}\s*[:=]", modules[package].source, flags=re.M)
    ]
    problems += [
        f"{package}.__all__ lists {n}, which is neither a module nor defined there"
        for n in dangling
    ]
    return problems


# --------------------------------------------------------------------------------------------------
# The rules on lib/attnbook


@pytest.fixture(scope="module")
def package() -> dict[str, Module]:
    return read_package()


def test_package_is_read(package):
    assert {"attnbook", "attnbook.attention", "attnbook.checks"} <= set(package)
    assert package["attnbook"].is_package and not package["attnbook.attention"].is_package


def test_no_import_cycle(package):
    cycles = import_cycles(package)
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_no_private_name_crosses_a_module_boundary(package):
    problems = private_imports(package)
    assert not problems, f"{len(problems)} private name(s) used across modules:\n  " + "\n  ".join(
        problems
    )


def test_package_all_lists_every_module(package):
    problems = [
        p
        for name, mod in package.items()
        if mod.is_package
        for p in missing_from_all(package, name)
    ]
    assert not problems, "__init__.py of the package and its subpackages:\n  " + (
        "\n  ".join(problems)
    )


# --------------------------------------------------------------------------------------------------
# Each rule on a deliberately broken package


def fake_package(files: dict[str, str]) -> dict[str, Module]:
    """A package from ``{path inside attnbook/: source}``, read as read_package reads files."""
    modules = {}
    for path, source in files.items():
        parts = path.removesuffix(".py").split("/")
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join([PACKAGE, *parts])
        modules[name] = Module(name, is_package, source, f"lib/attnbook/{path}")
    return modules


BROKEN = fake_package(
    {
        "__init__.py": '__all__ = ["a", "b", "ghost"]\n__version__ = "1"\n',
        # a -> b at module level, b -> c inside a function, c -> a through the package: one cycle.
        "a.py": "from . import b\nfrom .b import _helper, __doc__\n\ndef f():\n    return b._x\n",
        "b.py": "import numpy\n\ndef g():\n    from attnbook.c import h\n    return h\n",
        "c.py": "import attnbook.a as first\nfrom attnbook import __version__\n",
        "_private.py": "from .c import _z  # a private module is still a module\n",
        "sub/__init__.py": '"""Sub."""\nfrom ..a import _f\n',
        "sub/leaf.py": "from .. import b\nfrom . import _hidden_helper\nx = b._y\n",
        "clean.py": "from .a import f\nimport attnbook.b\nvalue = attnbook.b.g\n",
    }
)


def test_import_reader_resolves_every_form():
    known = set(BROKEN)
    targets = {(i.target, i.name) for i in imports_of(BROKEN["attnbook.sub.leaf"], known)}
    assert ("attnbook.b", None) in targets and ("attnbook.b", "_y") in targets
    assert ("attnbook.sub", "_hidden_helper") in targets
    clean = {(i.target, i.name) for i in imports_of(BROKEN["attnbook.clean"], known)}
    assert clean == {("attnbook.a", "f"), ("attnbook.b", None)}
    assert resolve_from(BROKEN["attnbook.sub"], ast.parse("from ..a import x").body[0]) == (
        "attnbook.a"
    )
    assert resolve_from(BROKEN["attnbook.sub.leaf"], ast.parse("from . import x").body[0]) == (
        "attnbook.sub"
    )


def test_cycle_check_can_fail():
    cycles = import_cycles(BROKEN)
    assert len(cycles) == 1, cycles
    assert cycles[0].startswith("attnbook.a -> attnbook.b -> attnbook.c -> attnbook.a"), cycles
    assert "lib/attnbook/b.py:4" in cycles[0], "the lazy import inside g() is the edge b -> c"
    acyclic = dict(BROKEN)
    acyclic["attnbook.c"] = Module("attnbook.c", False, "import numpy\n", "c.py")
    assert import_cycles(acyclic) == []


def test_private_import_check_can_fail():
    problems = "\n".join(private_imports(BROKEN))
    for expected in (
        "lib/attnbook/a.py:2: attnbook.a uses attnbook.b._helper",
        "lib/attnbook/a.py:5: attnbook.a uses attnbook.b._x",
        "attnbook._private uses attnbook.c._z",
        "attnbook.sub uses attnbook.a._f",
        "attnbook.sub.leaf uses attnbook.b._y",
        "attnbook.sub.leaf uses attnbook.sub._hidden_helper",
    ):
        assert expected in problems, (expected, problems)
    assert "__doc__" not in problems and "__version__" not in problems
    assert "attnbook.clean" not in problems


def test_all_check_can_fail():
    problems = missing_from_all(BROKEN)
    assert "attnbook.__all__ omits the module attnbook.c" in problems
    assert "attnbook.__all__ omits the module attnbook.sub" in problems
    assert "attnbook.__all__ omits the module attnbook.clean" in problems
    assert not any("_private" in p or "leaf" in p for p in problems), problems
    assert "attnbook.__all__ lists ghost, which is neither a module nor defined there" in problems
    assert literal_all("__all__ = ['a']\n__all__ += ('b',)\n") == ["a", "b"]
    assert missing_from_all(fake_package({"__init__.py": "x = 1\n"})) == ["attnbook has no __all__"]
    assert missing_from_all(BROKEN, "attnbook.sub") == ["attnbook.sub has no __all__"]
    sub = fake_package(
        {
            "__init__.py": "__all__ = ['sub']\n",
            "sub/__init__.py": "__all__ = ['leaf']\n",
            "sub/leaf.py": "",
            "sub/other.py": "",
        }
    )
    assert missing_from_all(sub, "attnbook.sub") == [
        "attnbook.sub.__all__ omits the module attnbook.sub.other"
    ]


#: The NumPy modules of the building blocks whose torch versions live in attnbook.layers.
CONCEPTS = ("attention", "masks", "heads", "positional", "norms")
TORCH_HOME = "layers"


def twin_problems(modules: dict[str, Module]) -> list[str]:
    """Where a building block has a second home, or a concept module and its twin lose track."""
    problems = []
    torch_home = modules.get(f"{PACKAGE}.{TORCH_HOME}")
    torch_doc = (ast.get_docstring(ast.parse(torch_home.source)) or "") if torch_home else ""
    for concept in CONCEPTS:
        module = modules.get(f"{PACKAGE}.{concept}")
        if module is None:
            problems.append(f"{PACKAGE}.{concept} is missing")
            continue
        tree = ast.parse(module.source)
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "torch" or n.startswith("torch.") for n in names):
                problems.append(f"{module.path}:{node.lineno}: {module.name} imports torch")
        if f"{PACKAGE}.{TORCH_HOME}" not in (ast.get_docstring(tree) or ""):
            problems.append(
                f"{module.name}'s docstring does not name its torch twin, {PACKAGE}.{TORCH_HOME}"
            )
        if f"{PACKAGE}.{concept}" not in torch_doc:
            problems.append(f"{PACKAGE}.{TORCH_HOME}'s docstring does not name {module.name}")
    homes: dict[str, list[tuple[str, str]]] = {}
    for name, module in sorted(modules.items()):
        for node in ast.parse(module.source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not is_private(node.name):
                key = node.name.replace("_", "").lower()
                homes.setdefault(key, []).append((name, node.name))
    allowed = {f"{PACKAGE}.{c}" for c in CONCEPTS}
    for places in homes.values():
        where = sorted({m for m, _ in places})
        if len(where) < 2:
            continue
        others = [m for m in where if m != f"{PACKAGE}.{TORCH_HOME}"]
        if len(others) != 1 or others[0] not in allowed or len(where) != 2:
            problems.append(
                " and ".join(f"{m}.{n}" for m, n in places)
                + f": one building block, {len(where)} homes"
            )
    return problems


def test_each_building_block_has_one_numpy_and_one_torch_home(package):
    problems = twin_problems(package)
    assert not problems, "\n  ".join(["building blocks:", *problems])


def test_twin_check_can_fail(package):
    broken = dict(package)
    rnn = broken["attnbook.rnn"]
    broken["attnbook.rnn"] = Module(
        rnn.name, False, rnn.source + "\nclass RMSNorm:\n    pass\n", rnn.path
    )
    norms = broken["attnbook.norms"]
    broken["attnbook.norms"] = Module(
        norms.name, False, '"""Norms."""\nimport torch.nn\n', norms.path
    )
    assert twin_problems(broken) == [
        "lib/attnbook/norms.py:2: attnbook.norms imports torch",
        "attnbook.norms's docstring does not name its torch twin, attnbook.layers",
        "attnbook.layers.RMSNorm and attnbook.rnn.RMSNorm: one building block, 2 homes",
    ]
