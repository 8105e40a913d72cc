"""The API reference and the notation appendix (issue 3, "In the book"; issue 9, item 5).

What ruff cannot check, as tests. Each check is a function that returns a list of problems, run
once on the real files (expecting none) and once on a small broken example (expecting the fault
to be named), so that every check is shown to be able to fail:

1. **Coverage of the API reference.** Every module of ``lib/attnbook`` has its page in
   ``appendix/api/``, written by ``book/api_pages.py`` (its output is checked here), matched by
   ``_toc.yml`` and listed in the index's module tables; in the built HTML every name of the
   module's ``__all__`` has its own object description (the ``<dt id="attnbook.<module>.<name>">``
   that autodoc writes) whose body shows the docstring. Data in ``__all__`` carries a ``#:`` doc
   comment, without which autodoc leaves it out.
2. **Docstring sections** are ruff's business: pydocstyle (``D``, Google convention, configured
   in ``pyproject.toml``) requires the docstrings and that an ``Args`` section names every
   parameter (D417); pyflakes' F822 that every ``__all__`` name exists. ``make lint`` runs it.
3. **The notation appendix agrees with the library.** Its hand-written tables (bottom-right causal
   mask, GQA head mapping, RoPE pairs, sinusoidal columns) and stated facts (float16 limits,
   norm defaults, names of the symbol table) are parsed from ``appendix/notation.md`` and compared
   with the library and with float64 formulas written here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import re
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from sphinx.util.matching import patmatch

from test_package import literal_all, read_package, resolve_from

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book"))
import api_pages  # noqa: E402 - the generator of the module pages

sys.path.pop(0)
LIB = ROOT / "lib" / "attnbook"
API_DIR = ROOT / "appendix" / "api"
NOTATION = ROOT / "appendix" / "notation.md"


PACKAGE = read_package()
#: Every public module and subpackage, without the ``attnbook.`` prefix (``masks``,
#: ``explorers``, ``explorers.kv_cache``): no part of the name starts with ``_``.
MODULES = sorted(
    name.removeprefix("attnbook.")
    for name in PACKAGE
    if "." in name and not any(p.startswith("_") for p in name.split("."))
)


def page_of(module: str) -> str:
    """The API page of ``attnbook.<module>``, relative to the repository, without ``.md``."""
    rel = api_pages.page_path(f"attnbook.{module}", PACKAGE[f"attnbook.{module}"].is_package)
    return f"appendix/api/{rel.removesuffix('.md')}"


def eval_rst_blocks(markdown: str) -> list[str]:
    """The bodies of the ```{eval-rst} fences of a MyST page."""
    return re.findall(r"^```\{eval-rst\}[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)


def import_module(name: str):
    """``attnbook.<name>``; a module that does not import fails the test that needs it."""
    try:
        return importlib.import_module(f"attnbook.{name}")
    except Exception as exc:  # noqa: BLE001 - any import error is a failure worth naming
        pytest.fail(f"attnbook.{name} does not import ({type(exc).__name__}: {exc})")


def public_names(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        pytest.fail(f"{module.__name__} has no __all__: its public names are undefined")
    return list(names)


# --------------------------------------------------------------------------------------------------
# 1. Coverage of the API reference: sources


def toc_entries(key: str = "file") -> list[str]:
    """Every ``file:`` (or ``glob:``) entry of ``_toc.yml``, in order, whatever the nesting."""
    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if key in node:
                found.append(str(node[key]))
            for child in ("parts", "chapters", "sections"):
                for entry in node.get(child) or []:
                    walk(entry)
        elif isinstance(node, list):
            for entry in node:
                walk(entry)

    walk(yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8")))
    return found


def toc_files() -> list[str]:
    return toc_entries("file")


def api_page_problems(
    module: str, toc: list[str], index_text: str, globs: list[str] = ()
) -> list[str]:
    """Whether the page of ``attnbook.<module>`` is in the table of contents (a ``file:`` entry
    or matched by a ``glob:`` entry, as Sphinx matches it) and in the index's tables."""
    problems = []
    page = page_of(module)
    if page not in toc and not any(patmatch(page, pattern) for pattern in globs):
        problems.append(f"_toc.yml does not list {page}")
    tables = "\n".join(eval_rst_blocks(index_text))
    if not re.search(rf"^\s+attnbook\.{re.escape(module)}\s*$", tables, flags=re.M):
        problems.append(f"appendix/api/index.md: no autosummary row for attnbook.{module}")
    return problems


@pytest.mark.parametrize("module", MODULES)
def test_every_api_page_is_in_the_toc_and_the_index(module):
    index = (API_DIR / "index.md").read_text(encoding="utf-8")
    assert api_page_problems(module, toc_files(), index, toc_entries("glob")) == []


def test_api_index_and_notation_are_in_the_toc_before_the_references():
    toc = toc_files()
    for page in ("appendix/notation", "appendix/api/index"):
        assert page in toc, f"_toc.yml does not list {page}"
    assert toc[-1] == "references", f"the bibliography closes the book, not {toc[-1]}"
    chapters = [i for i, f in enumerate(toc) if f.startswith("chapters/")]
    appendices = [i for i, f in enumerate(toc) if f.startswith("appendix/")]
    assert not chapters or max(chapters) < min(appendices), "appendices must follow the chapters"


def test_api_page_check_can_fail():
    index = "```{eval-rst}\n.. autosummary::\n\n   attnbook.other\n   attnbook.masks_x\n```\n"
    problems = api_page_problems("masks", ["appendix/api/other"], index)
    assert problems == [
        "_toc.yml does not list appendix/api/masks",
        "appendix/api/index.md: no autosummary row for attnbook.masks",
    ]
    good = index.replace("attnbook.other", "attnbook.masks")
    assert api_page_problems("masks", ["appendix/api/masks"], good) == []
    # A row outside an eval-rst fence is not an autosummary row.
    assert "no autosummary row" in api_page_problems("masks", [], "```\n   attnbook.masks\n```")[-1]
    # A glob matches within one folder, as in Sphinx: explorers/* is not a page of api/*.
    assert api_page_problems("masks", [], good, ["appendix/api/*"]) == []
    assert api_page_problems("explorers.masks", [], "", ["appendix/api/*"])[0] == (
        "_toc.yml does not list appendix/api/explorers/masks"
    )


# --------------------------------------------------------------------------------------------------
# 1. Coverage of the API reference: names re-exported from another module


def reexports(source: str, module: str, package=None) -> dict[str, str]:
    """``{name: its home}`` for the names of ``__all__`` imported from another module.

    Such a name (``attnbook.kv_cache.PRESETS``, defined in ``attnbook.config``) keeps working at
    its old path. It is documented once, on its home's page; the old page excludes it from
    autodoc (documented again, a re-exported constant would show the docstring of its type,
    ``dict``'s) and declares it with a one-line ``.. py:data::`` (``py:function``, ``py:class``)
    entry that links to its home, so that the old anchor and short cross-references still work.
    """
    package = PACKAGE if package is None else package
    mod = package[f"attnbook.{module}"]
    mod = type(mod)(mod.name, mod.is_package, source, mod.path)
    imported = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom):
            target = resolve_from(mod, node)
            if target and (target == "attnbook" or target.startswith("attnbook.")):
                for alias in node.names:
                    if f"{target}.{alias.name}" not in package:
                        imported[alias.asname or alias.name] = f"{target}.{alias.name}"
    return {name: imported[name] for name in literal_all(source) or [] if name in imported}


def reexport_page_problems(module: str, homes: dict[str, str], page_text: str) -> list[str]:
    """The page of a module that re-exports: excludes those names, declares each with a link."""
    problems = []
    page = f"{page_of(module)}.md"
    directives = "\n".join(eval_rst_blocks(page_text))
    match = re.search(r"^\s+:exclude-members:(.*)$", directives, flags=re.M)
    excluded = {n.strip() for n in match.group(1).split(",")} if match else set()
    if set(homes) != excluded:
        problems.append(f"{page} excludes {sorted(excluded)}, not the re-exported {sorted(homes)}")
    entries = dict(
        re.findall(
            r"^\.\. py:(?:data|function|class):: (\w+)[^\n]*\n((?:\n|   .*\n)*)",
            directives,
            flags=re.M,
        )
    )
    for name, home in homes.items():
        if name not in entries:
            problems.append(f"{page} does not declare the re-exported {name}")
        elif f"`{home}`" not in entries[name]:
            problems.append(f"{page}: the entry of {name} does not link to {home}")
    return problems


@pytest.mark.parametrize("module", MODULES)
def test_reexported_names_are_documented_once(module):
    homes = reexports(inspect.getsource(import_module(module)), module)
    text = api_pages.page_text(f"attnbook.{module}", api_pages.read_modules())
    assert reexport_page_problems(module, homes, text) == []


def test_reexport_check_can_fail():
    source = (
        "from .config import PRESETS\nfrom . import masks\n"
        "from .cost import format_bytes as fb\nimport numpy as np\n"
        "__all__ = ['PRESETS', 'fb', 'masks', 'own']\nown = 1\n"
    )
    homes = reexports(source, "kv_cache")
    assert homes == {"PRESETS": "attnbook.config.PRESETS", "fb": "attnbook.cost.format_bytes"}
    page = (
        "```{eval-rst}\n.. automodule:: attnbook.kv_cache\n   :members:\n"
        "   :exclude-members: PRESETS\n```\n\n```{eval-rst}\n"
        ".. py:data:: PRESETS\n\n   Defined in :data:`attnbook.config.DTYPE_BYTES`.\n```\n"
    )
    problems = reexport_page_problems("kv_cache", homes, page)
    assert problems == [
        "appendix/api/kv_cache.md excludes ['PRESETS'], not the re-exported ['PRESETS', 'fb']",
        "appendix/api/kv_cache.md: the entry of PRESETS does not link to attnbook.config.PRESETS",
        "appendix/api/kv_cache.md does not declare the re-exported fb",
    ]
    fixed = page.replace(": PRESETS\n", ": PRESETS, fb\n").replace("DTYPE_BYTES", "PRESETS")
    fixed += (
        "```{eval-rst}\n.. py:function:: fb\n\n   See :func:`attnbook.cost.format_bytes`.\n```\n"
    )
    assert reexport_page_problems("kv_cache", homes, fixed) == []
    own = fixed.replace(": PRESETS, fb\n", ": PRESETS, fb, own\n")
    assert "excludes ['PRESETS', 'fb', 'own']" in reexport_page_problems("kv_cache", homes, own)[0]


def test_generator_writes_a_page_per_module_and_only_those(tmp_path):
    """``book/api_pages.py`` on a copy of the API folder: a page per module of MODULES, each
    documenting its module, the hand-written index kept, a page whose module is gone removed."""
    api = tmp_path / "api"
    (api / "old").mkdir(parents=True)
    (api / "index.md").write_text("hand-written", encoding="utf-8")
    (api / "old" / "gone.md").write_text("a module that no longer exists", encoding="utf-8")
    assert len(api_pages.write(api)) == len(MODULES) + 1  # written, and gone.md removed
    pages = {p.relative_to(api).as_posix() for p in api.rglob("*.md")}
    expected = {f"{page_of(m).removeprefix('appendix/api/')}.md" for m in MODULES}
    assert pages == {"index.md"} | expected
    assert (api / "index.md").read_text(encoding="utf-8") == "hand-written"
    for module in MODULES:
        text = (api / f"{page_of(module).removeprefix('appendix/api/')}.md").read_text("utf-8")
        assert text.startswith(f"# `attnbook.{module}`\n"), module
        assert re.search(
            rf"^\.\. automodule:: attnbook\.{re.escape(module)}\n   :members:$",
            "\n".join(eval_rst_blocks(text)),
            flags=re.M,
        ), module
    assert api_pages.write(api) == [], "an unchanged page is written again"
    # A re-exported name is declared as what it is at home.
    kv_cache = (api / "kv_cache.md").read_text(encoding="utf-8")
    assert ".. py:data:: PRESETS" in kv_cache and ".. py:function:: kv_cache_bytes" in kv_cache
    assert ".. py:class:: ModelConfig" in (api / "models.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# 1. Coverage of the API reference: the built HTML


class ObjectCollector(HTMLParser):
    """Collect each Python object description of a Sphinx page: ``{id: text of its body}``.

    Sphinx writes ``<dl class="py function"><dt class="sig sig-object py" id="mod.name">…</dt>
    <dd>docstring…</dd></dl>``; the body's text is the rendered docstring (nested members
    included).
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.objects: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self._pending: str | None = None  # id of a <dt> whose <dd> has not started yet
        self._open: list[list] = []  # [id, dd depth at which it started, text parts]
        self._dd_depth = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        attr = dict(attrs)
        if tag == "dt" and "sig-object" in (attr.get("class") or "").split() and attr.get("id"):
            self._pending = attr["id"]
            self.counts[attr["id"]] = self.counts.get(attr["id"], 0) + 1
        elif tag == "dd":
            self._dd_depth += 1
            if self._pending is not None:
                self._open.append([self._pending, self._dd_depth, []])
                self._pending = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "dd":
            if self._open and self._open[-1][1] == self._dd_depth:
                ident, _, parts = self._open.pop()
                self.objects[ident] = " ".join("".join(parts).split())
            self._dd_depth -= 1

    def handle_data(self, data: str) -> None:
        for entry in self._open:
            entry[2].append(data)


def documented_objects(html: str) -> tuple[dict[str, str], dict[str, int]]:
    """``({object id: rendered docstring text}, {object id: number of descriptions})``."""
    collector = ObjectCollector()
    collector.feed(html)
    collector.close()
    return collector.objects, collector.counts


def words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_]{2,}", text)}


def summary_line(obj) -> str | None:
    """The first line of ``obj``'s own docstring, or None (data objects: the type's docstring)."""
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        return None
    doc = inspect.getdoc(obj)
    return doc.splitlines()[0] if doc else ""


def built_page_problems(
    module: str, names: dict[str, str | None], html: str, homes: dict[str, str] | None = None
) -> list[str]:
    """Names of ``attnbook.<module>`` missing from its built page, or shown without docstring.

    Args:
        module: the module's name inside the package, e.g. ``"masks"``.
        names: each public name and the first line of its docstring (None for data, whose
            doc-comment is only required to be non-empty).
        html: the built page.
        homes: re-exported names and where they are defined: each must be linked to its home's
            description, not documented again.
    """
    objects, counts = documented_objects(html)
    problems = []
    hrefs = set(re.findall(r'href="[^"]*#([^"]+)"', html))
    for name, home in (homes or {}).items():
        ident = f"attnbook.{module}.{name}"
        if ident not in objects:
            problems.append(f"{ident} (re-exported) is not declared on its page")
        elif counts[ident] > 1:
            problems.append(f"{ident} is documented {counts[ident]} times")
        if home not in hrefs:
            problems.append(f"{ident}: no link to its home {home}")
    for name, summary in names.items():
        ident = f"attnbook.{module}.{name}"
        if ident not in objects:
            problems.append(f"{ident} is not documented on its page")
            continue
        if counts[ident] > 1:
            problems.append(f"{ident} is documented {counts[ident]} times")
        body = objects[ident]
        if not body:
            problems.append(f"{ident} is shown without a docstring")
        elif summary is not None:
            expected = words(re.sub(r":\w+:", " ", summary))
            missing = expected - words(body)
            # Markup may change a word or two (":func:`~a.b`" shows "b()"), never most of them.
            if not expected or len(missing) > len(expected) // 3:
                problems.append(
                    f"{ident}: the page does not show its docstring's summary {summary!r}"
                )
    return problems


@pytest.mark.parametrize("module", MODULES)
def test_built_api_page_documents_every_public_name(built_book, module):
    mod = import_module(module)
    page = built_book / f"{page_of(module)}.html"
    assert page.is_file(), f"{page} was not built"
    # A subpackage's __all__ names its modules, which have pages of their own.
    homes = reexports(inspect.getsource(mod), module)
    names = {
        name: summary_line(getattr(mod, name))
        for name in public_names(mod)
        if f"attnbook.{module}.{name}" not in PACKAGE and name not in homes
    }
    assert built_page_problems(module, names, page.read_text(encoding="utf-8"), homes) == []


def test_built_api_index_links_every_module_page(built_book):
    html = (built_book / "appendix" / "api" / "index.html").read_text(encoding="utf-8")
    hrefs = set(re.findall(r'href="([^"#]+)(?:#[^"]*)?"', html))
    missing = [
        m for m in MODULES if page_of(m).removeprefix("appendix/api/") + ".html" not in hrefs
    ]
    assert not missing, f"appendix/api/index.html does not link the pages of {missing}"
    notation = built_book / "appendix" / "notation.html"
    assert notation.is_file(), "the notation appendix was not built"


def test_built_page_check_can_fail():
    html = textwrap.dedent(
        """
        <dl class="py function"><dt class="sig sig-object py" id="attnbook.m.f">f()</dt>
        <dd><p>Softmax of the scores.</p>
          <dl class="py method"><dt class="sig sig-object py" id="attnbook.m.C.g">g()</dt>
          <dd><p>Inner.</p></dd></dl>
        </dd></dl>
        <dl class="py function"><dt class="sig sig-object py" id="attnbook.m.empty">empty()</dt>
        <dd></dd></dl>
        """
    )
    objects, _ = documented_objects(html)
    assert objects["attnbook.m.f"].startswith("Softmax of the scores.")
    assert "Inner." in objects["attnbook.m.f"] and objects["attnbook.m.C.g"] == "Inner."
    names = {
        "f": "Softmax of the scores.",
        "empty": "Something.",
        "absent": None,
        "C": "Attention weights per head.",
    }
    problems = "\n".join(built_page_problems("m", names, html))
    assert "attnbook.m.absent is not documented" in problems
    assert "attnbook.m.empty is shown without a docstring" in problems
    assert "attnbook.m.C is not documented" in problems
    assert "attnbook.m.f" not in problems
    wrong = html.replace("Softmax of the scores.", "Something else entirely.")
    assert "does not show its docstring's summary" in "\n".join(
        built_page_problems("m", {"f": "Softmax of the scores."}, wrong)
    )
    # Re-exports: declared once on the old page, with a link to their home.
    homes = {"f": "attnbook.home.f", "g": "attnbook.home.g"}
    linked = html + '<a class="reference internal" href="home.html#attnbook.home.g">g</a>'
    problems = built_page_problems("m", {}, linked, homes)
    assert problems == [
        "attnbook.m.f: no link to its home attnbook.home.f",
        "attnbook.m.g (re-exported) is not declared on its page",
    ]


# --------------------------------------------------------------------------------------------------
# 2. Docstrings: ruff's pydocstyle rules (make lint); here only what autodoc needs of data


def attribute_doc_comments(source: str) -> set[str]:
    """Module-level names documented by a ``#:`` comment (above or on the line) or a string.

    These are the documentation comments autodoc shows for data; a constant without one is left
    out of the API page.
    """
    lines = source.splitlines()
    documented = set()
    tree = ast.parse(source)
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        else:
            continue
        above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        inline = "#:" in lines[node.lineno - 1]
        following = tree.body[index + 1] if index + 1 < len(tree.body) else None
        string_after = (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        )
        if above.startswith("#:") or inline or string_after:
            documented.update(targets)
    return documented


def undocumented_data(module_name: str, source: str, namespace: dict) -> list[str]:
    """Names of the module's ``__all__`` bound to data assigned there without a ``#:`` comment.

    Functions, classes and modules are ruff's business (D103, D101); data re-exported from
    another module is documented where it is defined.
    """
    commented = attribute_doc_comments(source)
    assigned = {
        target.id
        for node in ast.parse(source).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    return [
        f"{module_name}.{name}: data without a `#:` doc comment (autodoc omits it)"
        for name in namespace.get("__all__", [])
        if name in assigned
        and name not in commented
        and not (callable(namespace.get(name)) or inspect.ismodule(namespace.get(name)))
    ]


@pytest.mark.parametrize("module", MODULES)
def test_public_data_has_a_doc_comment(module):
    mod = import_module(module)
    problems = undocumented_data(mod.__name__, inspect.getsource(mod), vars(mod))
    assert not problems, "\n".join(problems)


def test_doc_comment_check_can_fail():
    source = textwrap.dedent(
        """
        #: Documented above.
        A = 1
        B = 2  #: documented inline
        C = 3
        \"\"\"Documented by a string.\"\"\"
        D = 4
        E = 5
        """
    )
    assert attribute_doc_comments(source) == {"A", "B", "C"}
    namespace = {"__all__": ["A", "D", "f", "Cls"], "A": 1, "D": 4, "f": print, "Cls": int}
    source += "f = print\nCls = int\n"
    assert undocumented_data("attnbook.fake", source, namespace) == [
        "attnbook.fake.D: data without a `#:` doc comment (autodoc omits it)"
    ]


# --------------------------------------------------------------------------------------------------
# 3. The notation appendix agrees with the library


def notation_text() -> str:
    return NOTATION.read_text(encoding="utf-8")


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of a Markdown text: a list of rows (header first), cells stripped."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def find_table(first_header_cell: str) -> list[list[str]]:
    matches = [t for t in markdown_tables(notation_text()) if t[0][0].startswith(first_header_cell)]
    assert len(matches) == 1, f"expected one table headed {first_header_cell!r}, got {len(matches)}"
    return matches[0]


def mask_table(rows: list[list[str]]) -> np.ndarray:
    """A table of ✓ (may attend) and · (hidden) cells as a boolean array (header row dropped)."""
    symbols = {"✓": True, "·": False}
    try:
        return np.array([[symbols[c] for c in row[1:]] for row in rows[1:]])
    except KeyError as exc:
        raise ValueError(f"mask table cell {exc} is neither ✓ nor ·") from None


def test_notation_causal_table_is_the_bottom_right_mask():
    from attnbook.masks import causal_mask

    rows = find_table("query (position)")
    table = mask_table(rows)
    L, S = table.shape
    sentence = re.search(
        r"For \$L = (\d+)\$ queries after (\d+) cached tokens \(\$S = (\d+)\$\), "
        r"`causal_mask\((\d+), (\d+)\)`",
        notation_text(),
    )
    assert sentence, "the sentence introducing the causal table changed"
    assert [int(g) for g in sentence.groups()] == [L, S - L, S, L, S]
    # Hand rule of the text, j <= i + (S - L), and the library's mask.
    expected = np.array([[j <= i + (S - L) for j in range(S)] for i in range(L)])
    np.testing.assert_array_equal(table, expected)
    np.testing.assert_array_equal(causal_mask(L, S), table)
    # The positions in the first column are the queries' absolute positions i + S - L.
    positions = [int(re.search(r"position (\d+)", row[0]).group(1)) for row in rows[1:]]
    assert positions == [i + S - L for i in range(L)]


def test_mask_table_parser_can_fail():
    with pytest.raises(ValueError, match="neither"):
        mask_table([["q", "k0"], ["0", "x"]])
    assert mask_table([["q", "k0", "k1"], ["0", "✓", "·"]]).tolist() == [[True, False]]


def test_notation_gqa_table_is_repeat_kv():
    import torch

    from attnbook import heads, layers

    rows = find_table("query head")
    query_heads = [int(c) for c in rows[0][1:]]
    interleaved = [int(c) for c in rows[1][1:]]
    tiled = [int(c) for c in rows[2][1:]]
    H = len(query_heads)
    H_kv = len(set(interleaved))
    assert query_heads == list(range(H))
    # The text's formula, h // (H / H_kv).
    assert interleaved == [h // (H // H_kv) for h in query_heads]
    # Which KV head each query head reads: KV head g holds the value g everywhere.
    kv = np.arange(H_kv, dtype=np.float64).reshape(1, H_kv, 1, 1)  # (B, H_kv, S, D)
    assert heads.repeat_kv(kv, H // H_kv)[0, :, 0, 0].tolist() == interleaved
    assert layers.repeat_kv(torch.from_numpy(kv), H // H_kv)[0, :, 0, 0].tolist() == interleaved
    # The row marked wrong is what tiling gives, and it differs.
    assert np.tile(kv, (1, H // H_kv, 1, 1))[0, :, 0, 0].tolist() == tiled != interleaved


def test_notation_rope_pairs_and_rotation_match_apply_rope():
    from attnbook.positional import apply_rope

    rows = find_table("pairing")
    D = int(re.search(r"\$(?:D|d_k) = (\d+)\$", " | ".join(rows[0])).group(1))
    base = 10000.0
    p = 3  # any position > 0; the rotation angles p * theta_i are then distinct and nonzero
    for row in rows[1:]:
        interleaved = "interleaved=True" in row[0]
        pairs = [tuple(int(x) for x in pair) for pair in re.findall(r"\((\d+), (\d+)\)", row[2])]
        assert len(pairs) == D // 2 and sorted(a for pair in pairs for a in pair) == list(range(D))
        formula = [(2 * i, 2 * i + 1) if interleaved else (i, i + D // 2) for i in range(D // 2)]
        assert pairs == formula, f"{row[0]}: the D = {D} column contradicts the formula column"
        for i, (a, b) in enumerate(pairs):
            theta = base ** (-2 * i / D)
            c, s = math.cos(p * theta), math.sin(p * theta)
            for unit, expected_a, expected_b in ((a, c, s), (b, -s, c)):
                x = np.zeros((1, D))
                x[0, unit] = 1.0
                out = apply_rope(x, np.array([p]), base=base, interleaved=interleaved)[0]
                expected = np.zeros(D)
                expected[a], expected[b] = expected_a, expected_b
                np.testing.assert_allclose(
                    out,
                    expected,
                    rtol=0,
                    atol=1e-12,
                    err_msg=f"{row[0]}, pair {i} = ({a}, {b}), e_{unit}",
                )


def test_notation_sinusoidal_columns_match_sinusoidal_encoding():
    from attnbook.positional import sinusoidal_encoding

    rows = find_table("column")
    columns = [int(c) for c in rows[0][1:]]
    d_model = len(columns)
    seq_len = 7
    pos = np.arange(seq_len, dtype=np.float64)
    expected = np.empty((seq_len, d_model))
    for col, cell in zip(columns, rows[1][1:]):
        fn, i = re.fullmatch(r"\$\\(sin|cos)\(p\\,\\omega_(\d+)\)\$", cell).groups()
        omega = 10000.0 ** (-2 * int(i) / d_model)
        expected[:, col] = (np.sin if fn == "sin" else np.cos)(pos * omega)
    assert rows[1][-1].startswith("$\\sin"), "an odd d_model ends on a sine"
    np.testing.assert_allclose(sinusoidal_encoding(seq_len, d_model), expected, rtol=0, atol=1e-12)


def test_notation_float16_facts():
    text = notation_text()
    f16 = np.finfo(np.float16)
    assert "$-(2 - 2^{-10}) \\cdot 2^{15} = -65504$" in text
    assert float(f16.min) == -(2 - 2**-10) * 2**15 == -65504
    with np.errstate(over="ignore"):
        assert np.float16(-1e9) == -np.inf
        assert np.float16(f16.min) + np.float16(f16.min) == -np.inf
        assert np.float16(f16.min) - np.float16(16) == -np.inf


def test_notation_norm_defaults_are_the_library_defaults():
    from attnbook import layers, norms

    text = notation_text()
    stated = re.search(
        r"defaults are \$\\varepsilon = 10\^\{(-\d+)\}\$ for LayerNorm .*?"
        r"\$\\varepsilon = 10\^\{(-\d+)\}\$ for\s+RMSNorm",
        text,
        flags=re.S,
    )
    assert stated, "the sentence stating the norms' defaults changed"
    ln_eps, rms_eps = (10.0 ** int(g) for g in stated.groups())
    assert inspect.signature(norms.layer_norm).parameters["eps"].default == ln_eps
    assert inspect.signature(layers.LayerNorm).parameters["eps"].default == ln_eps
    assert inspect.signature(norms.rms_norm).parameters["eps"].default == rms_eps
    assert inspect.signature(layers.RMSNorm).parameters["eps"].default == rms_eps


def test_notation_symbol_table_names_exist_in_the_library():
    rows = find_table("Symbol")
    source = "\n".join(p.read_text(encoding="utf-8") for p in LIB.rglob("*.py"))
    identifiers = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", source))
    names = {n for row in rows[1:] for n in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row[1])}
    assert {"d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff"} <= names
    missing = sorted(names - identifiers)
    assert not missing, f"the symbol table names code that lib/attnbook does not use: {missing}"
