"""attnbook — the tested implementations behind the attention textbook.

Every chapter of the book imports this package instead of defining its own attention,
softmax or mask. The conventions below hold for every module (the book's notation appendix
repeats them):

Tensor layout
    Queries are ``(B, H, L, D)`` — batch, heads, query length, head dimension — and keys and
    values ``(B, H_kv, S, D)``. The NumPy functions accept any leading dimensions
    ``(..., L, D)``. Masks broadcast to ``(B, H, L, S)``: ``(L, S)`` for causal,
    ``(B, 1, 1, S)`` for padding. Broadcasting starts at the last axis, so a 1-D mask is
    ``(S,)``, a key mask, even when ``L == S``; a per-query mask is ``(L, 1)``, and a 1-D
    mask of another length than ``S`` is refused (NumPy and torch alike).

Mask polarity
    Boolean masks are **keep-masks**: ``True`` means "may attend", as in
    ``torch.nn.functional.scaled_dot_product_attention``. A keep-mask is applied by
    *replacing* the hidden scores, so a NaN or a huge score behind the mask cannot leak. A
    floating-point mask is *additive*: it is added to the scores. Masks combine by logical AND.

Causal alignment
    When ``L != S`` the causal mask is aligned **bottom-right**: query ``i`` sees keys
    ``j <= i + (S - L)``. This is what KV-cache decoding and chunked prefill need.

Empty rows
    A query that can see no key outputs 0 and has all-zero weights — never NaN.

Scale
    The default scale is ``1 / sqrt(head_dim)`` (Vaswani et al., 2017, eq. 1).

Submodules are imported lazily by the chapters (``from attnbook import attention``); importing
``attnbook`` itself pulls in nothing but NumPy.

Old import paths
    The first edition's ``attnbook.widgets``, ``widgets_rnn``, ``widgets_heads_pos``,
    ``widgets_block`` and ``widgets_cost``, and ``attnbook.nn`` (now :mod:`attnbook.layers`),
    still import, and each of their names is the very object its home defines (in
    :mod:`attnbook.explorers`, :mod:`attnbook.cost` or :mod:`attnbook.layers`). They are no
    files but one alias table (:ref:`old-import-paths`).
"""

from . import _aliases

__version__ = "0.1.0"

_aliases.install()

__all__ = [
    # the check layer, configurations and cost formulas (NumPy only)
    "checks",
    "config",
    "cost",
    "listing",
    "printed",
    # NumPy (no torch needed)
    "attention",
    "masks",
    "scaling",
    "heads",
    "positional",
    "norms",
    "linear",
    "paged",
    "testing",
    "exercises",
    # torch
    "layers",
    "blocks",
    "models",
    "kv_cache",
    "rnn",
    "flash",
    "flash_triton",
    "experiments",
    "text",
    "training",
    "sampling",
    "char_gpt",
    "pretrained",
    "timing",
    # the book's figures and explorers (plotly, ipywidgets)
    "viz",
    "fonts",
    "i18n",
    "mpl_figures",
    "edition_outputs",
    "explorers",
]
