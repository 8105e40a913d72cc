"""Sphinx's side of the book's one execution (``book/execute.py``).

``book/execute.py`` executes the chapters into MyST-NB's cache before Sphinx starts;
``book/editions.py`` then passes two settings to each edition's build:

* ``attnbook_executions``, ``{docname: when its cached execution was made}``. Sphinx re-reads a
  page only when its source changed; a chapter executed again because the library changed has an
  unchanged source, so this extension reports it outdated (``env-get-outdated``) when its
  execution is newer than the one the environment read. The other pages are not re-read.
* ``attnbook_no_execution``: when true, an execution by MyST-NB itself is an error (the
  pre-execution missed a page: its hash differs from MyST-NB's, a bug), instead of a silent,
  serial execution.
"""

from __future__ import annotations

import os
from typing import Any

__version__ = "1.0"


class ExecutionBySphinx(RuntimeError):
    """MyST-NB was about to execute a page that book/execute.py should have executed."""


def _refuse_execution(app: Any, config: Any) -> None:
    if not config.attnbook_no_execution:
        return
    import myst_nb.core.execute.cache as nb_cache

    def refuse(nb: Any, cwd: str | None = None, **_kwargs: Any) -> Any:
        raise ExecutionBySphinx(
            f"MyST-NB was about to execute a notebook (in {cwd}) that is not in the execution "
            f"cache {config.nb_execution_cache_path!r} (relative to {os.getcwd()}): "
            "book/execute.py executes every chapter before Sphinx starts; run the build with "
            "`make html` (book/editions.py) from the project's root"
        )

    nb_cache.single_nb_execution = refuse


def _outdated(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    seen = getattr(env, "attnbook_executions", {})
    now = app.config.attnbook_executions or {}
    return [
        doc
        for doc, when in now.items()
        if doc in env.all_docs and doc not in changed and seen.get(doc) != when
    ]


def _note_read(app: Any, docname: str, source: list[str]) -> None:
    if not hasattr(app.env, "attnbook_executions"):
        app.env.attnbook_executions = {}
    when = (app.config.attnbook_executions or {}).get(docname)
    if when is None:
        app.env.attnbook_executions.pop(docname, None)
    else:
        app.env.attnbook_executions[docname] = when


def _merge(app: Any, env: Any, docnames: set, other: Any) -> None:
    if not hasattr(env, "attnbook_executions"):
        env.attnbook_executions = {}
    for doc in docnames:
        when = getattr(other, "attnbook_executions", {}).get(doc)
        if when is not None:
            env.attnbook_executions[doc] = when


def setup(app: Any) -> dict[str, Any]:
    """Register the extension (Sphinx entry point)."""
    # "": a new value must not make Sphinx re-read every page; _outdated picks the pages.
    app.add_config_value("attnbook_executions", {}, "", types=[dict])
    app.add_config_value("attnbook_no_execution", False, "", types=[bool])
    app.connect("config-inited", _refuse_execution)
    app.connect("env-get-outdated", _outdated)
    app.connect("source-read", _note_read)
    app.connect("env-merge-info", _merge)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
