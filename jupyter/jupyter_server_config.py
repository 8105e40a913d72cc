"""Jupyter Server settings for `make lab` (found through ``JUPYTER_CONFIG_PATH=jupyter``).

A chapter must open unmodified. JupyterLab marks a notebook modified the moment its metadata
changes, and on opening it fills in ``language_info`` twice: with ``{"name": ""}`` when the
notebook has none, then with the kernel's own ``language_info`` (Python's version included) once
the kernel answers. A chapter's MyST header cannot carry ``language_info`` (the Python version
differs from one reader to the next, and Jupytext leaves it out of the text file on save), so
every chapter was "modified" as soon as it opened.

The contents manager below is Jupytext's (the one the Jupytext server extension would install)
with one addition: a text notebook whose kernel is ``python3`` is served with the
``language_info`` that ipykernel will report for this Python. JupyterLab then finds nothing to
change. Saving is unaffected: Jupytext's metadata filter keeps ``language_info`` out of the
``.md`` file. (The kernel runs the Python of this server: ``make lab`` starts both from
``.venv``.)
"""

# ruff: noqa: F821  (``c`` is the configuration object traitlets passes to this file)

from ipykernel.ipkernel import IPythonKernel
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

_Jupytext = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)


class ChapterContentsManager(_Jupytext):
    """Jupytext's contents manager; text notebooks come with the kernel's ``language_info``."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):  # noqa: A002
        """Jupytext's model of ``path``; a text notebook gets the kernel's ``language_info``."""
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and not path.endswith(".ipynb"):
            metadata = model["content"]["metadata"]
            if metadata.get("kernelspec", {}).get("name") == "python3":
                metadata.setdefault("language_info", dict(IPythonKernel.language_info))
        return model


c.ServerApp.contents_manager_class = ChapterContentsManager
