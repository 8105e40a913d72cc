"""The old import paths, served by one alias table (``attnbook._aliases``).

Every name the book and the API appendix have shown at ``attnbook.widgets``,
``attnbook.widgets_rnn``, ``attnbook.widgets_heads_pos``, ``attnbook.widgets_block``,
``attnbook.widgets_cost`` and ``attnbook.nn`` (now ``attnbook.layers``) still imports there and
is the very object its home defines, so readers' notebooks keep running; the API appendix
documents each name at its home only and renders the table once ("Old import paths" in
``appendix/api/index.md``).

The names each old module had are written here from its last version as a file (git history
of ``lib/attnbook/widgets*.py`` and ``lib/attnbook/nn.py``), not read from the table, so that a
name dropped from the table fails. Each check that reads the table or the page is a function
returning problems, also run on a broken copy so that it is shown to be able to fail.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnbook import _aliases

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "lib" / "attnbook"
API_INDEX = ROOT / "appendix" / "api" / "index.md"

#: Per old module: its ``__all__`` as its last version as a file wrote it, and the names it
#: defined without listing them there (importable by name, left out of ``import *``).
OLD_MODULES = {
    "widgets": (
        (
            "Control",
            "Explorer",
            "scaling_explorer",
            "mask_explorer",
            "referent_explorer",
            "D_K_VALUES",
        ),
        ("MAX_GRID", "N_KEYS_VALUES", "SCALED_X_RANGE"),
    ),
    "widgets_rnn": (
        (
            "GAMMA_VALUES",
            "DISTANCE_VALUES",
            "GradientDecay",
            "gradient_decay_data",
            "gradient_decay_figure",
            "gradient_decay_explorer",
        ),
        ("Y_RANGE",),
    ),
    "widgets_heads_pos": (
        (
            "CONTEXT_VALUES",
            "BATCH_VALUES",
            "KV_DTYPES",
            "POSITION_VALUES",
            "BASE_VALUES",
            "format_bytes",
            "kv_variants",
            "kv_cache_figure",
            "kv_cache_explorer",
            "position_figure",
            "position_explorer",
        ),
        (),
    ),
    "widgets_block": (
        (
            "DEPTH_VALUES",
            "PLACEMENTS",
            "ARMS",
            "gradient_norms_at_init",
            "norm_placement_figure",
            "norm_placement_explorer",
        ),
        (),
    ),
    "widgets_cost": (
        (
            "score_matrix_bytes",
            "attention_flops",
            "quadratic_cost_figure",
            "quadratic_cost_explorer",
            "kv_cache_figure",
            "kv_cache_explorer",
            "SEQ_LEN_VALUES",
            "CONTEXT_VALUES",
        ),
        (),
    ),
    # The torch building blocks, attnbook.layers since issue 23 (no module named like torch.nn).
    "nn": (
        (
            "LayerNorm",
            "RMSNorm",
            "apply_rope",
            "RotaryEmbedding",
            "LearnedPositionalEmbedding",
            "repeat_kv",
            "split_heads",
            "merge_heads",
            "keep_mask_to_additive",
            "keep_mask_to_mha_mask",
            "position_keep_mask",
            "scaled_dot_product_attention",
            "MultiHeadAttention",
            "MultiHeadLatentAttention",
        ),
        (),
    ),
}

#: The public names of attnbook.viz before the explorers moved out (they stay there).
VIZ_NAMES = (
    "StaticFigure",
    "show",
    "when_plotly_ready_js",
    "PLOTLY_WAIT_SECONDS",
    "ScalingData",
    "scaling_data",
    "score_histogram",
    "scaling_figure",
    "MASK_TYPES",
    "explorer_keep_mask",
    "mask_scores",
    "mask_figure",
    "HIGHLIGHT_COLORS",
    "token_attention_figure",
)


# --------------------------------------------------------------------------------------------------
# The table against the library


def defines(module_name: str, name: str) -> bool:
    """Whether the source of ``module_name`` defines ``name`` at top level (not imports it)."""
    spec = importlib.util.find_spec(module_name)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def table_problems(table: dict[str, dict[str, str]]) -> list[str]:
    """Entries of an alias table that name no object, or not the module that defines it."""
    problems = []
    for old, names in table.items():
        for name, home in names.items():
            where = f"attnbook.{home}"
            value = getattr(importlib.import_module(where), name, None)
            if value is None:
                problems.append(f"attnbook.{old}.{name}: {where} has no {name}")
                continue
            made_in = (
                getattr(value, "__module__", None)
                if (inspect.isfunction(value) or inspect.isclass(value))
                else None
            )
            if (made_in or where) != where or not defines(where, name):
                problems.append(
                    f"attnbook.{old}.{name}: {where} does not define it"
                    + (f" ({made_in} does)" if made_in else "")
                )
    return problems


def test_the_table_keeps_every_first_edition_name():
    assert set(_aliases.ALIASES) == set(OLD_MODULES)
    for old, (listed, unlisted) in OLD_MODULES.items():
        assert set(_aliases.ALIASES[old]) == set(listed) | set(unlisted), old
        assert _aliases.old_all(old) == list(listed), old


def test_every_entry_names_the_module_that_defines_it():
    assert table_problems(_aliases.ALIASES) == []


def test_table_check_can_fail():
    broken = {
        "widgets_cost": {
            "score_matrix_bytes": "cost",  # right
            "PRESETS": "kv_cache",  # re-exported by attnbook.kv_cache, defined in attnbook.config
            "kv_cache_explorer": "explorers.quadratic",  # not there at all
            "Control": "explorers.scaling",  # imported there from explorers.base
        }
    }
    assert table_problems(broken) == [
        "attnbook.widgets_cost.PRESETS: attnbook.kv_cache does not define it",
        "attnbook.widgets_cost.kv_cache_explorer: attnbook.explorers.quadratic has no "
        "kv_cache_explorer",
        "attnbook.widgets_cost.Control: attnbook.explorers.scaling does not define it "
        "(attnbook.explorers.base does)",
    ]


# --------------------------------------------------------------------------------------------------
# The old modules


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_every_old_name_is_the_object_of_its_home(old):
    pytest.importorskip("plotly")
    pytest.importorskip("ipywidgets")
    module = importlib.import_module(f"attnbook.{old}")
    listed, unlisted = OLD_MODULES[old]
    assert module.__all__ == list(listed)
    for name in (*listed, *unlisted):
        home = importlib.import_module(_aliases.home(old, name))
        assert getattr(module, name) is getattr(home, name), f"attnbook.{old}.{name}"
        space: dict = {}
        exec(f"from attnbook.{old} import {name}", space)
        assert space[name] is getattr(home, name)
    # import * gives the old __all__, each name its home's object.
    space = {}
    exec(f"from attnbook.{old} import *", space)
    assert set(space) - {"__builtins__"} == set(listed)


def test_three_ways_of_writing_an_old_import():
    pytest.importorskip("plotly")
    pytest.importorskip("ipywidgets")
    import attnbook.widgets
    import attnbook.widgets_rnn as w
    from attnbook.explorers import base, rnn, scaling
    from attnbook.widgets import scaling_explorer

    assert scaling_explorer is scaling.scaling_explorer
    assert w.gradient_decay_explorer is rnn.gradient_decay_explorer
    assert attnbook.widgets.Control is base.Control
    # One calculator and one list of context lengths, at both of their old paths.
    from attnbook import widgets_cost, widgets_heads_pos

    assert widgets_cost.kv_cache_explorer is widgets_heads_pos.kv_cache_explorer
    assert widgets_cost.CONTEXT_VALUES is widgets_heads_pos.CONTEXT_VALUES


def test_the_old_torch_path_gives_the_layers_objects():
    # The three ways chapters and readers wrote it before attnbook.nn became attnbook.layers.
    import attnbook.nn as x
    from attnbook import layers
    from attnbook import nn as ann
    from attnbook.nn import MultiHeadAttention

    assert MultiHeadAttention is layers.MultiHeadAttention
    assert x.RMSNorm is layers.RMSNorm
    assert ann is x and ann.apply_rope is layers.apply_rope
    assert MultiHeadAttention.__module__ == "attnbook.layers"  # listings are labelled by it
    assert "attnbook.layers" in x.__doc__


def test_an_unknown_name_raises_attribute_error_naming_the_module():
    from attnbook import widgets_block

    with pytest.raises(
        AttributeError,
        match=r"module 'attnbook\.widgets_block' has no "
        r"attribute 'no_such_name'",
    ):
        _ = widgets_block.no_such_name
    with pytest.raises(ImportError, match="no_such_name"):
        exec("from attnbook.widgets_block import no_such_name", {})
    # A name of another old module is not here either (norm_placement_explorer is not in cost).
    with pytest.raises(AttributeError, match="widgets_cost"):
        _ = importlib.import_module("attnbook.widgets_cost").norm_placement_explorer
    assert not hasattr(widgets_block, "__path__")  # a module, not a package
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("attnbook.widgets_nope")


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_dir_lists_every_name_of_the_old_module(old):
    # A fresh copy of the module, before any name was read (a read keeps the value in it).
    spec = importlib.util.find_spec(f"attnbook.{old}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not set(_aliases.ALIASES[old]) & set(vars(module))
    listing = dir(module)
    assert listing == sorted(listing)
    assert set(_aliases.ALIASES[old]) <= set(listing)
    assert {"__all__", "__doc__", "__name__"} <= set(listing)
    assert not set(listing) & {"ALIASES", "install", "importlib"}, "no table internals"
    assert old in (module.__doc__ or "")


def test_importing_attnbook_or_an_old_module_imports_nothing_heavy():
    # A fresh interpreter: the old modules import nothing until a name is read, and then only
    # that name's home (cost is NumPy only; the scaling explorer pulls in its own module).
    code = textwrap.dedent("""
        import sys
        heavy = ('plotly', 'torch', 'ipywidgets', 'anywidget', 'matplotlib')
        import attnbook
        import attnbook.widgets, attnbook.widgets_rnn, attnbook.widgets_heads_pos
        import attnbook.widgets_block, attnbook.widgets_cost, attnbook.nn
        print(sorted(m for m in sys.modules if m.split('.')[0] in heavy
                     or m.startswith('attnbook.explorers') or m == 'attnbook.layers'))
        from attnbook.widgets_cost import score_matrix_bytes
        print(sorted(m for m in sys.modules if m.split('.')[0] in heavy
                     or m.startswith('attnbook.explorers')), score_matrix_bytes.__module__)
        attnbook.widgets.scaling_explorer
        print('attnbook.explorers.scaling' in sys.modules, 'torch' in sys.modules)
    """)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "[]", lines[0]
    assert lines[1] == "[] attnbook.cost", lines[1]
    assert lines[2] == "True False", lines[2]  # the scaling explorer needs no torch


def test_the_old_modules_are_made_by_the_table_not_by_files():
    for old in OLD_MODULES:
        assert not (LIB / f"{old}.py").exists() and not (LIB / old).exists(), old
        spec = importlib.util.find_spec(f"attnbook.{old}")
        assert isinstance(spec.loader, _aliases.AliasLoader), old
    finders = [f for f in sys.meta_path if getattr(f, "attnbook_aliases", False)]
    assert len(finders) == 1
    # Running install() again (importlib.reload(attnbook)) leaves one finder.
    _aliases.install()
    assert len([f for f in sys.meta_path if getattr(f, "attnbook_aliases", False)]) == 1
    assert importlib.util.find_spec("attnbook.masks").loader is not None  # others untouched
    assert not isinstance(importlib.util.find_spec("attnbook.masks").loader, _aliases.AliasLoader)


def test_a_new_table_entry_is_served(monkeypatch):
    # The finder reads the table, not a list of its own: a module added there imports.
    monkeypatch.setitem(_aliases.ALIASES, "old_softmax", {"softmax": "attention"})
    monkeypatch.delitem(sys.modules, "attnbook.old_softmax", raising=False)
    try:
        module = importlib.import_module("attnbook.old_softmax")
        from attnbook import attention

        assert module.softmax is attention.softmax
        assert module.__all__ == ["softmax"]
    finally:
        sys.modules.pop("attnbook.old_softmax", None)
        import attnbook

        vars(attnbook).pop("old_softmax", None)


def test_viz_keeps_its_names():
    pytest.importorskip("plotly")
    viz = importlib.import_module("attnbook.viz")
    for name in VIZ_NAMES:
        assert hasattr(viz, name), name


# --------------------------------------------------------------------------------------------------
# The API appendix: each name at its home, the table once


def page_table(markdown: str) -> set[tuple[str, str, str]]:
    """``{(old module, name, home)}`` of the "Old import paths" table of the API index."""
    section = markdown.split("(old-import-paths)=", 1)[-1]
    rows = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`attnbook."):
            continue
        old = cells[0].strip("`").removeprefix("attnbook.")
        home = re.fullmatch(r"\{py:mod\}`attnbook\.([\w.]+)`", cells[2])
        for entry in (e.strip() for e in cells[1].split(",")):
            link = re.fullmatch(r"\{py:(?:func|class|data)\}`~attnbook\.([\w.]+)\.(\w+)`", entry)
            plain = re.fullmatch(r"`(\w+)`", entry)
            if link and home:  # the link's module and the row's "Defined in" must agree
                rows.add(
                    (
                        old,
                        link.group(2),
                        home.group(1)
                        if link.group(1) == home.group(1)
                        else f"{link.group(1)}, in the row of {home.group(1)}",
                    )
                )
            elif plain and home:
                rows.add((old, plain.group(1), home.group(1)))
            else:
                rows.add((old, entry, "?"))
    return rows


def page_problems(markdown: str, table: dict[str, dict[str, str]]) -> list[str]:
    """How the page's table differs from the alias table; an unlinked name that is documented."""
    want = {(old, name, home) for old, names in table.items() for name, home in names.items()}
    got = page_table(markdown)
    problems = [
        f"the page lacks attnbook.{o}.{n} -> attnbook.{h}" for o, n, h in sorted(want - got)
    ]
    problems += [
        f"the page has attnbook.{o}.{n} -> {h}, not in the table" for o, n, h in sorted(got - want)
    ]
    for old, name, home in sorted(want & got):
        documented = name in getattr(importlib.import_module(f"attnbook.{home}"), "__all__", ())
        if documented and f"`~attnbook.{home}.{name}`" not in markdown:
            problems.append(f"the page does not link attnbook.{old}.{name} to its entry")
    return problems


def test_the_api_index_renders_the_table():
    assert page_problems(API_INDEX.read_text(encoding="utf-8"), _aliases.ALIASES) == []


def test_page_check_can_fail():
    text = API_INDEX.read_text(encoding="utf-8")
    moved = text.replace(
        "{py:func}`~attnbook.explorers.masks.mask_explorer`",
        "{py:func}`~attnbook.explorers.scaling.mask_explorer`",
    )
    assert page_problems(moved, _aliases.ALIASES) == [
        "the page lacks attnbook.widgets.mask_explorer -> attnbook.explorers.masks",
        "the page has attnbook.widgets.mask_explorer -> explorers.scaling, in the row of "
        "explorers.masks, not in the table",
    ]
    unlinked = text.replace("{py:data}`~attnbook.explorers.block.ARMS`", "`ARMS`")
    assert page_problems(unlinked, _aliases.ALIASES) == [
        "the page does not link attnbook.widgets_block.ARMS to its entry"
    ]
    extra = {**_aliases.ALIASES, "widgets_x": {"softmax": "attention"}}
    assert page_problems(text, extra) == [
        "the page lacks attnbook.widgets_x.softmax -> attnbook.attention"
    ]


def test_no_page_documents_or_links_an_old_module():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    pages = [
        ROOT / "intro.md",
        ROOT / "run.md",
        *sorted((ROOT / "chapters").glob("*.md")),
        *sorted((ROOT / "appendix").rglob("*.md")),
    ]
    problems = [
        f"_toc.yml lists appendix/api/{old}"
        for old in OLD_MODULES
        if re.search(rf"appendix/api/{old}\s*$", toc, flags=re.M)
    ]
    for path in pages:
        text = path.read_text(encoding="utf-8")
        for old in OLD_MODULES:
            if re.search(
                rf"(automodule|currentmodule|py:module)::\s*attnbook\.{old}\b"
                rf"|\{{py:\w+\}}`~?attnbook\.{old}\b|api/{old}(\.md|\.html|\))",
                text,
            ):
                problems.append(f"{path.relative_to(ROOT)} documents or links attnbook.{old}")
    assert problems == []
    assert not any((ROOT / "appendix" / "api" / f"{old}.md").exists() for old in OLD_MODULES)


# --------------------------------------------------------------------------------------------------
# The chapters


def test_every_name_a_chapter_imports_from_an_explorer_module_exists():
    pytest.importorskip("plotly")
    pytest.importorskip("ipywidgets")
    # Old paths and new ones (attnbook.explorers.<concept>) alike.
    # from attnbook.widgets_x import a, b   /   from attnbook import widgets_x; widgets_x.a
    found = 0
    for path in sorted((ROOT / "chapters").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        imports = re.findall(
            r"from attnbook\.(widgets\w*|viz|explorers\.\w+) import "
            r"(?:\(([^)]*)\)|([\w, ]+))",
            text,
        )
        for mod, grouped, plain in imports:
            names = grouped or plain
            for name in filter(None, (n.strip() for n in names.split(","))):
                module = importlib.import_module(f"attnbook.{mod}")
                assert hasattr(module, name), f"{path.name}: attnbook.{mod}.{name}"
                found += 1
        for pkg, mod, alias in re.findall(
            r"from attnbook(\.explorers)? import (\w+)\b(?: as (\w+))?", text
        ):
            if not pkg and not (mod.startswith("widgets") or mod == "viz"):
                continue
            module = importlib.import_module(f"attnbook{pkg}.{mod}")
            # `from attnbook.explorers import kv_cache as kv_explorer`: the names are read
            # through the alias (a bare `kv_cache.` in that chapter is attnbook.kv_cache).
            for name in set(re.findall(rf"\b{alias or mod}\.(\w+)", text)):
                assert hasattr(module, name), f"{path.name}: attnbook{pkg}.{mod}.{name}"
                found += 1
    assert found >= 10  # the chapters do import explorers from these modules


def test_names_moved_out_of_a_module_still_read_there():
    """attnbook._aliases.MOVED: every moved name reads at its old path as its home's object
    (a renamed one under its new name), and nothing else does."""
    import importlib

    from attnbook import _aliases

    assert _aliases.MOVED, "the table of moved names is empty"
    for module, names in _aliases.MOVED.items():
        old = importlib.import_module(f"attnbook.{module}")
        for name in names:
            where, new = _aliases.moved(module, name)
            assert getattr(old, name) is getattr(importlib.import_module(where), new), name
            assert name not in getattr(old, "__all__", ()), f"{module}.{name} documented twice"
        with pytest.raises(AttributeError, match=f"'attnbook.{module}' has no attribute 'nope'"):
            old.nope  # noqa: B018 - the lookup is what is tested
    from attnbook import masks, viz

    assert viz.explorer_keep_mask is masks.keep_mask_by_name  # the one renamed name
