"""Write the API reference's module pages, one per module of ``lib/attnbook``, from the package.

``appendix/api/index.md`` is written by hand (the package's overview, the module tables by
theme, the first edition's import paths); every other page under ``appendix/api/`` is written
here, and git ignores them. A module ``attnbook.masks`` gets ``appendix/api/masks.md``, a
subpackage ``attnbook.explorers`` gets ``appendix/api/explorers/index.md`` and its modules
``appendix/api/explorers/<module>.md``: every module and subpackage whose dotted name has no part
that starts with ``_``. ``_toc.yml`` lists them with ``glob:`` entries, so a new or renamed
module has its page, in the table of contents, with no edit.

Each page is the module's name as its title and ``.. automodule:: <module>`` with ``:members:``
(autodoc documents the names of the module's ``__all__``, with their docstrings and ``#:``
comments; a constant hides its value with ``:meta hide-value:`` in its comment). A name of
``__all__`` imported from another module of the package (``attnbook.kv_cache.PRESETS``, defined
in ``attnbook.config``) is documented once, at its home: the page leaves it out of autodoc
(documented again, a re-exported dict would show ``dict``'s docstring) and declares it in
"Also importable from here" with a one-line ``py:data``/``py:function``/``py:class`` entry that
links to its home, so the old anchor and short references keep working.

The pages are read from the source with ``ast``: nothing is imported, so this runs in a moment.
``book/editions.py`` runs it once before both editions build, ``book/catalogs.py`` before the
gettext extraction. A page is rewritten only when its text changes (Sphinx reads a page again
when its file changes), and a page whose module no longer exists is removed.

Usage::

    .venv/bin/python book/api_pages.py   # write appendix/api/ (also done by the two scripts)
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "attnbook"
PACKAGE_DIR = ROOT / "lib" / PACKAGE
#: Where the pages go; everything here but :data:`INDEX` is this script's output.
API_DIR = ROOT / "appendix" / "api"
#: The hand-written page of the API reference, which this script never touches.
INDEX = "index.md"

#: The directive and the role of each kind of re-exported name.
KINDS = {
    "function": ("py:function", "func"),
    "class": ("py:class", "class"),
    "data": ("py:data", "data"),
}


@dataclass(frozen=True)
class Module:
    """A module of the package: its dotted name, whether it is a package, its source."""

    name: str
    is_package: bool
    source: str


def read_modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Module]:
    """Every module of the package in ``package_dir`` (named as the folder), private ones
    included, as ``{dotted name: Module}``."""
    package = package_dir.name
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if "__pycache__" in parts:
            continue
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join([package, *parts])
        modules[name] = Module(name, is_package, path.read_text(encoding="utf-8"))
    return modules


def public_modules(modules: dict[str, Module]) -> list[str]:
    """The modules that get a page: no part of the dotted name starts with ``_``, not the root."""
    return sorted(
        name
        for name in modules
        if "." in name and not any(p.startswith("_") for p in name.split("."))
    )


def page_path(module: str, is_package: bool) -> str:
    """The page of ``module`` relative to :data:`API_DIR`: ``masks.md``, ``explorers/index.md``."""
    parts = module.split(".")[1:]
    return "/".join(parts) + ("/index.md" if is_package else ".md")


def literal_all(tree: ast.Module) -> list[str]:
    """The names of a module's ``__all__`` (``=`` and ``+=`` of literals); [] without one."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = list(ast.literal_eval(node.value))
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "__all__"
        ):
            names += list(ast.literal_eval(node.value))
    return names


def imported_from_package(
    module: Module, tree: ast.Module, modules: dict[str, Module]
) -> dict[str, str]:
    """``{local name: dotted home}`` of the names ``module`` imports from other modules of the
    package at module level (``from .config import PRESETS`` gives ``attnbook.config.PRESETS``);
    submodules imported as such are left out."""
    base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            parts = base[: len(base) - (node.level - 1)] + (node.module or "").split(".")
            target = ".".join(p for p in parts if p)
        else:
            target = node.module or ""
        if target not in modules:
            continue
        for alias in node.names:
            if f"{target}.{alias.name}" not in modules:
                found[alias.asname or alias.name] = f"{target}.{alias.name}"
    return found


def kind_of(home: str, modules: dict[str, Module], seen: frozenset[str] = frozenset()) -> str:
    """``"function"``, ``"class"`` or ``"data"``: what ``home`` (``attnbook.cost.param_count``)
    is where it is defined, following re-exports. A name not found is data."""
    module, _, name = home.rpartition(".")
    if home in seen or module not in modules:
        return "data"
    tree = ast.parse(modules[module].source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return "function"
        if isinstance(node, ast.ClassDef) and node.name == name:
            return "class"
    further = imported_from_package(modules[module], tree, modules)
    if name in further:
        return kind_of(further[name], modules, seen | {home})
    return "data"


def page_text(module: str, modules: dict[str, Module]) -> str:
    """The MyST page of ``module`` (a dotted name of ``modules``)."""
    mod = modules[module]
    tree = ast.parse(mod.source)
    imported = imported_from_package(mod, tree, modules)
    homes = {name: imported[name] for name in literal_all(tree) if name in imported}
    lines = [f"# `{module}`", "", "```{eval-rst}", f".. automodule:: {module}", "   :members:"]
    if homes:
        lines.append(f"   :exclude-members: {', '.join(homes)}")
    lines.append("```")
    if homes:
        lines += [
            "",
            "## Also importable from here",
            "",
            "These names are defined in another module and documented there;",
            f"`from {module} import ...` keeps working for them.",
            "",
            "```{eval-rst}",
            f".. py:currentmodule:: {module}",
        ]
        for name, home in homes.items():
            directive, role = KINDS[kind_of(home, modules)]
            home_module = home.rpartition(".")[0]
            lines += [
                "",
                f".. {directive}:: {name}",
                "",
                f"   Defined in :mod:`{home_module}`: :{role}:`{home}`.",
            ]
        lines.append("```")
    return "\n".join(lines) + "\n"


def pages(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """``{path relative to the API folder: page text}`` for every public module."""
    modules = read_modules(package_dir)
    return {
        page_path(name, modules[name].is_package): page_text(name, modules)
        for name in public_modules(modules)
    }


def write(api_dir: Path = API_DIR, package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Write the pages into ``api_dir``, remove the pages of modules that are gone.

    Only a page whose text changed is written; every ``.md`` in ``api_dir`` that is neither
    :data:`INDEX` nor a page of :func:`pages` is removed (with the folders it leaves empty).

    Returns:
        The files written or removed.
    """
    wanted = pages(package_dir)
    touched = []
    for rel, text in wanted.items():
        path = api_dir / rel
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        touched.append(path)
    for path in sorted(api_dir.rglob("*.md")):
        rel = path.relative_to(api_dir).as_posix()
        if rel != INDEX and rel not in wanted:
            path.unlink()
            touched.append(path)
    for folder in sorted((p for p in api_dir.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return touched


if __name__ == "__main__":
    changed = write()
    print(
        f"api_pages: {len(pages())} module pages in {API_DIR.relative_to(ROOT)}/, "
        f"{len(changed)} written or removed"
    )
    sys.exit(0)
