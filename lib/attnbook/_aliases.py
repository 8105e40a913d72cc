"""The old import paths of the book's public names: one table, and the finder that serves it.

The first edition imported its explorers from five modules, ``attnbook.widgets``,
``attnbook.widgets_rnn``, ``attnbook.widgets_heads_pos``, ``attnbook.widgets_block`` and
``attnbook.widgets_cost``. The code has moved (the explorers to :mod:`attnbook.explorers`, one
module per concept; what they compute to the library's core modules, :mod:`attnbook.cost`,
:mod:`attnbook.rnn`, :mod:`attnbook.experiments`), and those modules no longer exist as files.
The torch building blocks were ``attnbook.nn``, a name that shadows ``torch.nn`` wherever both
are imported; they are :mod:`attnbook.layers` now (issue 23), and ``attnbook.nn`` is an old
module of this table like the others.
:data:`ALIASES` says, per old module, where each of its names lives now; a reader's notebook
that still writes ``from attnbook.widgets import scaling_explorer`` gets the very object
:mod:`attnbook.explorers.scaling` defines.

How: :func:`install` (called once by ``import attnbook``) appends :class:`AliasFinder` to
``sys.meta_path``. Asked for an old module, it creates an empty module whose module-level
``__getattr__`` (PEP 562) looks a name up in the table, imports the name's home on first access
only and keeps the value in the module. Importing ``attnbook`` or an old module therefore imports
nothing more (not plotly, not torch); ``from attnbook.widgets import *`` gives the old
``__all__``; ``dir()`` lists every name of the table; any other name raises ``AttributeError``
naming the module. The finder comes after Python's own, so a real module file would win: there
is none (``tests/test_aliases.py`` checks it), and there must be none, because this is the one
place the old paths are kept.

The old paths stay without a warning: the book promised that they keep working, and no edition
removes them. The API appendix documents each name at its home only, with this table rendered
as its section "Old import paths" (``appendix/api/index.md``, checked against :data:`ALIASES`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

PACKAGE = "attnbook"

#: Per old module (without the ``attnbook.`` prefix), ``{name: the module that defines it}``,
#: in the order of the old module's ``__all__``. Every name an old module exported is here: its
#: ``__all__`` and the constants it defined without listing them (``MAX_GRID``,
#: ``N_KEYS_VALUES``, ``SCALED_X_RANGE``, ``Y_RANGE``).
ALIASES: dict[str, dict[str, str]] = {
    "widgets": {
        "Control": "explorers.base",
        "Explorer": "explorers.base",
        "scaling_explorer": "explorers.scaling",
        "mask_explorer": "explorers.masks",
        "referent_explorer": "explorers.pretrained",
        "D_K_VALUES": "explorers.scaling",
        "MAX_GRID": "explorers.base",
        "N_KEYS_VALUES": "explorers.scaling",
        "SCALED_X_RANGE": "explorers.scaling",
    },
    "widgets_rnn": {
        "GAMMA_VALUES": "explorers.rnn",
        "DISTANCE_VALUES": "explorers.rnn",
        "GradientDecay": "rnn",
        "gradient_decay_data": "rnn",
        "gradient_decay_figure": "explorers.rnn",
        "gradient_decay_explorer": "explorers.rnn",
        "Y_RANGE": "explorers.rnn",
    },
    "widgets_heads_pos": {
        "CONTEXT_VALUES": "explorers.kv_cache",
        "BATCH_VALUES": "explorers.kv_cache",
        "KV_DTYPES": "explorers.kv_cache",
        "POSITION_VALUES": "explorers.positional",
        "BASE_VALUES": "explorers.positional",
        "format_bytes": "cost",
        "kv_variants": "cost",
        "kv_cache_figure": "explorers.kv_cache",
        "kv_cache_explorer": "explorers.kv_cache",
        "position_figure": "explorers.positional",
        "position_explorer": "explorers.positional",
    },
    "widgets_block": {
        "DEPTH_VALUES": "explorers.block",
        "PLACEMENTS": "explorers.block",
        "ARMS": "explorers.block",
        "gradient_norms_at_init": "experiments",
        "norm_placement_figure": "explorers.block",
        "norm_placement_explorer": "explorers.block",
    },
    "widgets_cost": {
        "score_matrix_bytes": "cost",
        "attention_flops": "cost",
        "quadratic_cost_figure": "explorers.quadratic",
        "quadratic_cost_explorer": "explorers.quadratic",
        "kv_cache_figure": "explorers.kv_cache",
        "kv_cache_explorer": "explorers.kv_cache",
        "SEQ_LEN_VALUES": "explorers.quadratic",
        "CONTEXT_VALUES": "explorers.kv_cache",
    },
    # The torch building blocks, renamed so that no module of the book is called like torch.nn.
    "nn": {
        "LayerNorm": "layers",
        "RMSNorm": "layers",
        "apply_rope": "layers",
        "RotaryEmbedding": "layers",
        "LearnedPositionalEmbedding": "layers",
        "repeat_kv": "layers",
        "split_heads": "layers",
        "merge_heads": "layers",
        "keep_mask_to_additive": "layers",
        "keep_mask_to_mha_mask": "layers",
        "position_keep_mask": "layers",
        "scaled_dot_product_attention": "layers",
        "MultiHeadAttention": "layers",
        "MultiHeadLatentAttention": "layers",
    },
}

#: Names that moved out of a module that still exists, per module (without the ``attnbook.``
#: prefix): ``{old name: "home"}`` or, for a renamed one, ``{old name: "home:new name"}``. The
#: module reads them through :func:`moved_getattr` (its module-level ``__getattr__``).
MOVED: dict[str, dict[str, str]] = {
    "viz": {
        "MASK_TYPES": "masks",
        "PAD_SIDES": "masks",
        "explorer_keep_mask": "masks:keep_mask_by_name",
        "mask_scores": "explorers.masks",
        "mask_figure": "explorers.masks",
        "ScalingData": "scaling",
        "scaling_data": "scaling",
        "score_histogram": "scaling",
        "scaling_figure": "explorers.scaling",
        "HIGHLIGHT_COLORS": "explorers.pretrained",
        "token_attention_figure": "explorers.pretrained",
    },
    # i18n split by job (issue 20): matplotlib figures per language, and the per-edition output
    # type with MyST-NB's renderer.
    "i18n": {
        "MIME": "edition_outputs",
        "editions_html_bundle": "edition_outputs",
        "EditionsMimeRenderer": "edition_outputs",
        "MissingGlyphError": "mpl_figures",
        "translated_figure": "mpl_figures",
        "figure_png": "mpl_figures",
        "figure_bundle": "mpl_figures",
        "cjk_font_path": "mpl_figures",
        "install_display": "mpl_figures",
    },
}


def moved(module: str, name: str) -> tuple[str, str]:
    """The home of a name that moved out of ``attnbook.<module>``: ``(full module, name)``.

    Raises:
        KeyError: if :data:`MOVED` has no such module or name.
    """
    where, _, new = MOVED[module][name].partition(":")
    return f"{PACKAGE}.{where}", new or name


def moved_getattr(fullname: str):
    """The module-level ``__getattr__`` (PEP 562) of ``fullname`` that serves its moved names.

    Args:
        fullname: the module's ``__name__`` (``"attnbook.viz"``).

    Returns:
        ``__getattr__(name)``: the moved name's object, imported from its home on access; any
        other name raises ``AttributeError`` naming the module.
    """
    table = MOVED.get(fullname.removeprefix(PACKAGE + "."), {})

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {fullname!r} has no attribute {name!r}")
        where, new = moved(fullname.removeprefix(PACKAGE + "."), name)
        return getattr(importlib.import_module(where), new)

    return __getattr__


#: The names of :data:`ALIASES` that an old module importable but left out of its ``__all__``
#: (``from attnbook.widgets import *`` never gave them; ``from attnbook.widgets import MAX_GRID``
#: did, and still does).
NOT_IN_ALL: dict[str, tuple[str, ...]] = {
    "widgets": ("MAX_GRID", "N_KEYS_VALUES", "SCALED_X_RANGE"),
    "widgets_rnn": ("Y_RANGE",),
}


def old_all(old: str) -> list[str]:
    """The ``__all__`` of the old module ``attnbook.<old>``, in its order.

    Args:
        old: an old module's name without the ``attnbook.`` prefix (``"widgets"``).

    Returns:
        Its names of :data:`ALIASES` less those of :data:`NOT_IN_ALL`.
    """
    hidden = NOT_IN_ALL.get(old, ())
    return [name for name in ALIASES[old] if name not in hidden]


def home(old: str, name: str) -> str:
    """The full name of the module that defines ``attnbook.<old>.<name>``.

    Args:
        old: an old module's name without the ``attnbook.`` prefix (``"widgets"``).
        name: a name of that module (``"scaling_explorer"``).

    Returns:
        The defining module, ``"attnbook.explorers.scaling"``.

    Raises:
        KeyError: if the table has no such module or name.
    """
    return f"{PACKAGE}.{ALIASES[old][name]}"


def _fill(module: types.ModuleType, old: str) -> None:
    """Give the empty module ``attnbook.<old>`` its docstring, ``__all__`` and lazy lookups."""
    fullname = module.__name__
    table = ALIASES[old]
    homes = sorted({home(old, name) for name in table})

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {fullname!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home(old, name)), name)
        setattr(module, name, value)  # the next access is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(module.__dict__) | set(table))

    module.__getattr__ = __getattr__
    module.__dir__ = __dir__
    module.__all__ = old_all(old)
    module.__doc__ = (
        f"The old import path {fullname} (an alias, attnbook._aliases).\n\n"
        f"Its names are defined in {', '.join(homes)}; each is imported from there on first "
        "access and is the very same object."
    )


class AliasLoader(importlib.abc.Loader):
    """Makes an old module: an empty module filled from :data:`ALIASES` (nothing imported)."""

    def create_module(self, spec):
        """Use the default module creation."""
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        """Fill ``module`` from the table (see :func:`install`)."""
        _fill(module, module.__name__.removeprefix(PACKAGE + "."))


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old modules of :data:`ALIASES`, and nothing else."""

    #: ``sys.meta_path`` may hold a finder of an earlier ``importlib.reload``: found by this.
    attnbook_aliases = True

    def find_spec(self, fullname, path=None, target=None):
        """A spec for ``attnbook.<old>`` when ``<old>`` is in the table, else None."""
        package, _, old = fullname.partition(".")
        if package != PACKAGE or old not in ALIASES:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, AliasLoader(), origin="alias: attnbook._aliases"
        )


def install() -> None:
    """Append :class:`AliasFinder` to ``sys.meta_path`` (replacing one an earlier run put there)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "attnbook_aliases", False)]
    sys.meta_path.append(AliasFinder())
