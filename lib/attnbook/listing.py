"""Show the library's own code in a chapter, the same way in the built book and in JupyterLab.

A chapter shows the *core* of an algorithm (the short function whose body is the algorithm)
and keeps the validated public function one click away::

    show_code(attention.scaled_dot_product_attention_core,
              full=attention.scaled_dot_product_attention)

The result is Markdown (a fenced ``python`` block, and the full function inside a collapsed
``<details>`` element), which both MyST-NB and JupyterLab render with syntax highlighting, so
the code a chapter teaches is visible wherever the chapter is read. The source is read from the
installed module with ``inspect.getsource``: the listing is the tested code itself, never a
copy.

Where a function is longer than a page but its heart is not (a GPU kernel's loop, say),
``show_code(fn, between=("for start_n", "m_i = m_new"))`` shows the run of lines from the
first that starts with the one text to the next that starts with the other, still read from
the source, and keeps the whole function in the collapsed block.

A shown core must fit a page: at most :data:`MAX_LINES` lines and :data:`MAX_COLUMNS` columns,
or :func:`show_code` raises (and the strict book build fails).
"""

from __future__ import annotations

import html
import inspect
import textwrap

from . import i18n
from .printed import Printed, say

__all__ = [
    "MAX_LINES",
    "MAX_COLUMNS",
    "FULL_CLASS",
    "FORMATTER_DIRECTIVES",
    "Listing",
    "source_of",
    "lines_between",
    "show_code",
]

#: The longest listing a chapter may show, in lines (The Annotated Transformer's attention is
#: 10 lines, nanoGPT's ``forward`` 25).
MAX_LINES = 30
#: The widest line a shown listing may have, in characters (fits the text column at 1280 px).
MAX_COLUMNS = 79
#: HTML class of the collapsed ``<details>`` block that holds the full public function.
FULL_CLASS = "attnbook-full-listing"


#: The whole-line formatter directives a listing leaves out. The shown cores are laid out by
#: hand for the page and sit between ``# fmt: off`` and ``# fmt: on`` (CONTRIBUTING.md,
#: "Formatting"); these lines say nothing about the algorithm.
FORMATTER_DIRECTIVES = ("# fmt: off", "# fmt: on")


def source_of(obj) -> str:
    """The source code of a function, method or class, dedented, without a trailing newline.

    Lines that hold only a formatter directive (:data:`FORMATTER_DIRECTIVES`) are left out, so
    a class whose method is a shown core lists without them.

    Raises:
        TypeError: ``obj`` has no Python source (a builtin, a number, a string).
    """
    try:
        src = inspect.getsource(obj)
    except (TypeError, OSError) as exc:
        raise TypeError(
            f"obj must be a function, method or class with Python source, got "
            f"{obj!r} ({type(obj).__name__}): {exc}"
        ) from None
    directive_rows = _directive_rows(src)
    lines = [line for row, line in enumerate(src.splitlines(), 1) if row not in directive_rows]
    return textwrap.dedent("\n".join(lines)).rstrip("\n")


def _directive_rows(src: str) -> set:
    """1-based rows of ``src`` that hold a formatter directive comment and nothing else.

    Found with :mod:`tokenize`, so a line of a string or docstring that reads ``# fmt: off``
    stays (it is data, not a comment).
    """
    import io
    import tokenize

    rows = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(textwrap.dedent(src)).readline):
            if (
                tok.type == tokenize.COMMENT
                and tok.string.strip() in FORMATTER_DIRECTIVES
                and not tok.line[: tok.start[1]].strip()
            ):
                rows.add(tok.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()  # not Python on its own: show it as it is
    return rows


def lines_between(src: str, first: str, last: str) -> str:
    """A run of lines of ``src``, dedented: from ``first`` to ``last``.

    The run starts at the first line that starts with ``first`` and ends at the next line
    that starts with ``last`` (both included; leading spaces are ignored).

    Raises:
        ValueError: no line starts with ``first``, or none after it with ``last``.
    """
    lines = src.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(first)]
    if not starts:
        raise ValueError(f"between: no line starts with {first!r}")
    ends = [i for i in range(starts[0], len(lines)) if lines[i].lstrip().startswith(last)]
    if not ends:
        raise ValueError(f"between: no line starts with {last!r} after {first!r}")
    return textwrap.dedent("\n".join(lines[starts[0] : ends[0] + 1]))


def _fence(src: str) -> str:
    ticks = "```"
    while ticks in src:
        ticks += "`"
    return f"{ticks}python\n{src}\n{ticks}"


class Listing:
    """A code listing that renders as highlighted Markdown in MyST-NB and JupyterLab.

    The collapsed block's label is in the reader's language: the label of the language of
    ``attnbook.i18n.get_language()`` in JupyterLab, each edition's own in the built book (the
    listing then also carries ``attnbook.edition_outputs.MIME``, like a figure).

    Attributes:
        core: the source shown open.
        full: the source shown collapsed (``None`` if there is none).
        summary: the label of the collapsed block, a ``attnbook.printed.Printed`` (one
            text per language); a ``str`` given is taken as the English label and translated
            from the label catalogs.
    """

    def __init__(self, core: str, full: str | None = None, summary: Printed | str = ""):
        self.core = core
        self.full = full
        self.summary = summary if isinstance(summary, Printed) else say(summary)

    def markdown(self, language: str | None = None) -> str:
        """The listing as Markdown, its label in ``language`` (default: the current one)."""
        parts = [_fence(self.core)]
        if self.full is not None:
            # Blank lines around the fence: it must be Markdown, not part of the HTML block.
            # The class lets the book's stylesheet wrap its long docstring lines (the full
            # function is read, not copied line by line; the core above never wraps).
            label = html.escape(self.summary.text(language), quote=False)
            parts.append(
                f'<details class="{FULL_CLASS}"><summary>{label}</summary>\n\n'
                f"{_fence(self.full)}\n\n</details>"
            )
        return "\n\n".join(parts)

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {"text/markdown": self.markdown(), "text/plain": repr(self)}
        editions = i18n.editions()
        if editions and self.full is not None:
            from .edition_outputs import MIME

            bundle[MIME] = {
                "kind": "text/markdown",
                "editions": {lang: self.markdown(lang) for lang in editions},
                "untranslated": sorted(self.summary.untranslated),
            }
        return bundle

    def __repr__(self) -> str:
        text = self.core
        if self.full is not None:
            text += f"\n\n# {self.summary}\n{self.full}"
        return text


def show_code(
    core, full=None, *, summary: str | None = None, between: tuple[str, str] | None = None
) -> Listing:
    """The listing of ``core``, with ``full`` (the validated public function) collapsed.

    Args:
        core: the function, method or class to show open; at most :data:`MAX_LINES` lines and
            :data:`MAX_COLUMNS` columns (of the lines shown).
        full: optional function, method or class shown in a collapsed block (any length).
        summary: English label of the collapsed block (a msgid of the label catalogs, shown in
            the reader's language); default "The full class: MODULE.NAME" for a class,
            else "The full public function: NAME".
        between: optional ``(first, last)``: show only the lines of ``core`` from the first
            that starts with ``first`` to the next that starts with ``last``
            (:func:`lines_between`).

    Returns:
        A :class:`Listing`; as a cell's last expression it renders as highlighted code.

    Raises:
        TypeError: ``core`` or ``full`` has no Python source.
        ValueError: ``core`` (or its lines ``between``) is longer than :data:`MAX_LINES` lines
            or wider than :data:`MAX_COLUMNS` columns, or ``between`` matches no lines.
    """
    src = source_of(core)
    if between is not None:
        src = lines_between(src, *between)
    lines = src.splitlines()
    name = getattr(core, "__qualname__", repr(core))
    if len(lines) > MAX_LINES:
        raise ValueError(
            f"core {name} has {len(lines)} lines; a shown listing has at most {MAX_LINES}"
        )
    widest = max((len(line) for line in lines), default=0)
    if widest > MAX_COLUMNS:
        raise ValueError(
            f"core {name} has a line of {widest} columns; a shown listing has at most {MAX_COLUMNS}"
        )
    full_src = None
    if full is not None:
        full_src = source_of(full)
        if summary is None:
            if inspect.isclass(full):
                return Listing(
                    src,
                    full_src,
                    say("The full class: {name}", name=f"{full.__module__}.{full.__qualname__}"),
                )
            return Listing(
                src,
                full_src,
                say("The full public function: {name}", name=getattr(full, "__qualname__", "")),
            )
    return Listing(src, full_src, summary or "")
