"""The first edition's explorer modules still work: every name the book and the API appendix
have shown is importable at its old path and is the object that now lives in
:mod:`attnbook.explorers` (or :mod:`attnbook.cost`), so readers' notebooks keep running.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

ROOT = Path(__file__).resolve().parent.parent

#: old module -> {name: "new.module"} for every name it exported (``__all__`` and the
#: documented constants that were importable without being in ``__all__``).
MOVED = {
    "widgets": {
        "Control": "explorers.base", "Explorer": "explorers.base", "MAX_GRID": "explorers.base",
        "scaling_explorer": "explorers.scaling", "D_K_VALUES": "explorers.scaling",
        "N_KEYS_VALUES": "explorers.scaling", "SCALED_X_RANGE": "explorers.scaling",
        "mask_explorer": "explorers.masks", "referent_explorer": "explorers.pretrained",
    },
    "widgets_rnn": {
        **{name: "explorers.rnn" for name in (
            "GAMMA_VALUES", "DISTANCE_VALUES", "Y_RANGE", "gradient_decay_figure",
            "gradient_decay_explorer")},
        # the measurement: its home is the rnn module
        "GradientDecay": "rnn", "gradient_decay_data": "rnn",
    },
    "widgets_block": {
        **{name: "explorers.block" for name in (
            "DEPTH_VALUES", "PLACEMENTS", "ARMS", "norm_placement_figure",
            "norm_placement_explorer")},
        "gradient_norms_at_init": "experiments",  # a training run: its home is experiments
    },
    "widgets_heads_pos": {
        "CONTEXT_VALUES": "explorers.kv_cache", "BATCH_VALUES": "explorers.kv_cache",
        "KV_DTYPES": "explorers.kv_cache", "kv_variants": "cost",
        "kv_cache_figure": "explorers.kv_cache", "kv_cache_explorer": "explorers.kv_cache",
        "POSITION_VALUES": "explorers.positional", "BASE_VALUES": "explorers.positional",
        "position_figure": "explorers.positional", "position_explorer": "explorers.positional",
        "format_bytes": "cost",
    },
    "widgets_cost": {
        "score_matrix_bytes": "cost", "attention_flops": "cost",
        "quadratic_cost_figure": "explorers.quadratic",
        "quadratic_cost_explorer": "explorers.quadratic",
        "SEQ_LEN_VALUES": "explorers.quadratic",
        "kv_cache_figure": "explorers.kv_cache", "kv_cache_explorer": "explorers.kv_cache",
        "CONTEXT_VALUES": "explorers.kv_cache",
    },
}

#: The public names of attnbook.viz before the explorers moved out (they stay there).
VIZ_NAMES = ("StaticFigure", "show", "when_plotly_ready_js", "PLOTLY_WAIT_SECONDS",
             "ScalingData", "scaling_data", "score_histogram", "scaling_figure", "MASK_TYPES",
             "explorer_keep_mask", "mask_scores", "mask_figure", "HIGHLIGHT_COLORS",
             "token_attention_figure")


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_name_is_the_new_object(old):
    module = importlib.import_module(f"attnbook.{old}")
    for name, new in MOVED[old].items():
        target = importlib.import_module(f"attnbook.{new}")
        assert getattr(module, name) is getattr(target, name), f"attnbook.{old}.{name}"
    # Nothing in the old __all__ is forgotten, and every name there is importable.
    assert set(module.__all__) <= set(MOVED[old])
    for name in module.__all__:
        exec(f"from attnbook.{old} import {name}", {})


def test_one_kv_cache_calculator_and_one_context_list():
    from attnbook import widgets_cost, widgets_heads_pos

    assert widgets_cost.kv_cache_explorer is widgets_heads_pos.kv_cache_explorer
    assert widgets_cost.CONTEXT_VALUES is widgets_heads_pos.CONTEXT_VALUES


def test_viz_keeps_its_names():
    viz = importlib.import_module("attnbook.viz")
    for name in VIZ_NAMES:
        assert hasattr(viz, name), name


def test_every_name_a_chapter_imports_from_an_explorer_module_exists():
    # Old paths and new ones (attnbook.explorers.<concept>) alike.
    # from attnbook.widgets_x import a, b   /   from attnbook import widgets_x; widgets_x.a
    found = 0
    for path in sorted((ROOT / "chapters").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        imports = re.findall(r"from attnbook\.(widgets\w*|viz|explorers\.\w+) import "
                             r"(?:\(([^)]*)\)|([\w, ]+))", text)
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
