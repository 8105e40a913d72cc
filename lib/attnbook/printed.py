"""Printed output in the reader's language: what a chapter prints, made once per edition.

The book's editions come from one execution of its chapters (``book/editions.py``). A figure
carries one drawing per edition (:mod:`attnbook.edition_outputs`); printed text does the same
here. A chapter writes

.. code-block:: python

    say("row sums: {sums}", sums=weights.sum(-1))

instead of ``print(f"row sums: {weights.sum(-1)}")``. The message is an English ``msgid`` of
the label catalogs (``lib/attnbook/locale/<language>/*.po``, the catalogs of
:class:`attnbook.i18n.Labels`; the chapters' printed lines are in ``printed-chNN.po``) with
named placeholders, formatted with ``str.format`` in each language. The result,
:class:`Printed`, displays as plain text in the language of :func:`attnbook.i18n.get_language`
(a Chinese reader notebook sets it first) and, during a book build, also carries every
edition's text in :data:`attnbook.edition_outputs.MIME`, so each edition's page prints its own.
A message the catalogs lack prints in English and fails the Chinese edition's strict build,
naming the page.

Library helpers that format a table or a summary (:func:`table`) return a :class:`Printed`
too. Values (numbers, shapes, arrays) are formatted the same in every language; a format
spec pads by characters, so align Chinese words in columns with :func:`table`, which counts a
Chinese character as two columns.
"""

from __future__ import annotations

import numbers
import re
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence, Set
from html import escape

from . import i18n
from .checks import check_choice, check_int, check_text
from .fonts import NO_LINE_START  # the one line-breaking rule; still importable from here

__all__ = [
    "Printed",
    "say",
    "table",
    "verbatim",
    "columns",
    "wrap_lines",
    "TABLE_CLASS",
    "PRE_CLASS",
]

#: HTML class of a printed table (``book/_static/attnbook.css`` styles it).
TABLE_CLASS = "attnbook-printed-table"
#: HTML class of the printed lines next to a table in one output.
PRE_CLASS = "attnbook-printed"
#: A line break: what ``str.splitlines`` splits at.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
#: Chinese characters and punctuation (CJK ideographs of every plane, full-width forms).
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff"
#: A space, one wide (CJK) character, or a run of anything else.
_PIECE = re.compile(rf"\s+|[{_CJK}]|[^\s{_CJK}]+")


class Printed:
    """Text with one rendering per language, shown as plain text.

    Args:
        texts: ``{language: text}`` for every language of :data:`attnbook.i18n.LANGUAGES`.
        untranslated: the English messages the Chinese text still shows (the catalogs lack
            them), an iterable of ``str``.
        html: optional ``{language: HTML}``, the same content drawn as HTML (a :func:`table`
            is an HTML table, whose columns line up in any font); shown where HTML is.

    Raises:
        TypeError: if ``texts`` (or ``html``) is not a dict of ``str``, or ``untranslated`` is
            a ``str``.
        ValueError: if ``texts`` (or ``html``) lacks a language of
            :data:`attnbook.i18n.LANGUAGES` or has another one.
    """

    def __init__(
        self,
        texts: dict[str, str],
        untranslated: Iterable[str] = (),
        html: dict[str, str] | None = None,
    ):
        if not isinstance(texts, dict) or not all(isinstance(t, str) for t in texts.values()):
            raise TypeError(f"texts must be a dict {{language: str}}, got {texts!r:.80}")
        missing = [lang for lang in i18n.LANGUAGES if lang not in texts]
        if missing:
            raise ValueError(
                f"texts must have every language {i18n.LANGUAGES}; "
                f"got {sorted(texts)}, missing {missing}"
            )
        extra = sorted(lang for lang in texts if lang not in i18n.LANGUAGES)
        if extra:  # an operation of two texts would keep or drop it depending on the order
            raise ValueError(f"texts has languages not in {i18n.LANGUAGES}: {extra}")
        if isinstance(untranslated, str) or not isinstance(untranslated, Iterable):
            raise TypeError(
                f"untranslated must be an iterable of messages, not the "
                f"{type(untranslated).__name__} {untranslated!r:.80}"
            )
        self.texts = dict(texts)
        self.untranslated = frozenset(untranslated)
        if not all(isinstance(m, str) for m in self.untranslated):
            raise TypeError(
                f"untranslated must hold messages (str), got "
                f"{sorted(map(repr, self.untranslated))!s:.80}"
            )
        if html is not None and (
            not isinstance(html, dict) or not all(isinstance(h, str) for h in html.values())
        ):
            raise TypeError(f"html must be a dict {{language: str}}, got {html!r:.80}")
        if html is not None and sorted(html) != sorted(i18n.LANGUAGES):
            raise ValueError(
                f"html must have every language {i18n.LANGUAGES} and no other; got {sorted(html)}"
            )
        self.html = dict(html) if html is not None else None

    def html_of(self, language: str) -> str:
        """The HTML of ``language``: the table, or the text in a ``<pre>`` block.

        Raises:
            ValueError: if ``language`` is not one of :data:`attnbook.i18n.LANGUAGES`.
        """
        language = _language(language)
        if self.html is not None:
            return self.html[language]
        return f'<pre class="{PRE_CLASS}">{escape(self.text(language))}</pre>'

    def text(self, language: str | None = None) -> str:
        """The text in ``language`` (default: :func:`attnbook.i18n.get_language`).

        Raises:
            ValueError: if ``language`` is not one of :data:`attnbook.i18n.LANGUAGES`.
        """
        return self.texts[_language(i18n.get_language() if language is None else language)]

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def __eq__(self, other) -> bool:
        return isinstance(other, Printed) and self.texts == other.texts

    __hash__ = None  # compared by its texts, not hashed

    def __add__(self, other: Printed) -> Printed:
        """The two texts on consecutive lines, in every language."""
        if not isinstance(other, Printed):
            return NotImplemented
        html = None
        if self.html is not None or other.html is not None:
            html = {lang: self.html_of(lang) + other.html_of(lang) for lang in self.texts}
        return Printed(
            {lang: f"{self.texts[lang]}\n{other.texts[lang]}" for lang in self.texts},
            self.untranslated | other.untranslated,
            html,
        )

    def wrap(self, width: int) -> Printed:
        """Each line broken to at most ``width`` columns, in every language (:func:`wrap_lines`).

        Raises:
            TypeError: if ``width`` is not an integer.
            ValueError: if ``width`` is below 1.
        """
        width = check_int(width, "width", 1)
        texts = {
            lang: "\n".join(wrap_lines(text, int(width)))  # each of its lines, wrapped
            for lang, text in self.texts.items()
        }
        return Printed(
            texts,
            self.untranslated,
            None
            if self.html is None
            else {lang: Printed(texts, html=None).html_of(lang) for lang in texts},
        )

    @classmethod
    def lines(cls, parts: Iterable[Printed]) -> Printed:
        """The texts of ``parts`` one under another (an empty text if there are none).

        Raises:
            TypeError: if a part is not a :class:`Printed` (a ``str``: wrap data in
                :func:`verbatim`, a message in :func:`say`).
        """
        out = cls({lang: "" for lang in i18n.LANGUAGES})
        for k, part in enumerate(parts):
            if not isinstance(part, Printed):
                raise TypeError(
                    f"parts[{k}] must be a Printed (say(...), verbatim(...)), got "
                    f"{type(part).__name__} {part!r:.60}"
                )
            out = part if k == 0 else out + part
        return out

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {"text/plain": self.text()}
        if self.html is not None:
            bundle["text/html"] = self.html_of(i18n.get_language())
        editions = i18n.editions()
        if editions:
            from .edition_outputs import MIME

            kind = "text/plain" if self.html is None else "text/html"
            bundle[MIME] = {
                "kind": kind,
                "editions": {
                    lang: self.texts[lang] if self.html is None else self.html_of(lang)
                    for lang in editions
                },
                "untranslated": sorted(self.untranslated),
            }
        return bundle


def _language(language: str) -> str:
    return check_choice(language, "language", i18n.LANGUAGES)


def _made(make) -> Printed:
    """``make(labels)`` called once per language, with the catalogs' misses collected."""
    texts: dict[str, str] = {}
    missing: set[str] = set()
    for lang in i18n.LANGUAGES:
        with i18n.collect_missing(missing if lang != "en" else None, isolated=lang == "en"):
            texts[lang] = make(i18n.labels(lang))
    return Printed(texts, missing)


def verbatim(text: str) -> Printed:
    """``text`` shown as it is in every language (data, a number, notation such as ``n``).

    Raises:
        TypeError: if ``text`` is not a ``str``.
    """
    check_text(text, "text")
    return Printed({lang: text for lang in i18n.LANGUAGES})


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return type(value).__name__ + (f" of shape {tuple(shape)}" if shape is not None else "")


def _value_name(field: str) -> str:
    """The value a replacement field reads: ``loss`` of ``{loss.item}`` or ``{loss[0]}``."""
    return re.match(r"[^.\[]*", field).group()


def _field_names(text: str):
    """The value names of ``text``'s replacement fields, nested specs' too (``{x:{w}}``).

    ``""`` or digits for a positional field (``{}``, ``{0.real}``, ``{[0]}``, ``{x:{}}``).

    Raises:
        ValueError: if ``text`` is no format string.
    """
    for _, field, spec, _ in string.Formatter().parse(text):
        if field is not None:
            yield _value_name(field)
            if spec:
                yield from _field_names(spec)


def _fill(message: str, text: str, values: dict) -> str:
    """``text`` (``message`` in some language) formatted with ``values``, errors named."""
    try:
        return text.format(**values)
    except KeyError as err:
        raise KeyError(
            f"message {message!r} needs a value for its placeholder "
            f"{{{err.args[0]}}}; got values for {sorted(values)}"
        ) from None
    except (ValueError, TypeError, IndexError, AttributeError) as err:
        fields = [(f, spec) for _, f, spec, _ in string.Formatter().parse(text) if f]
        name = {f: _value_name(f) for f, _ in fields}
        where = "; ".join(
            f"{{{f}:{spec}}} got {_describe(values.get(name[f]))}"
            for f, spec in fields
            if name[f] in values
        )
        raise ValueError(f"message {message!r} could not be formatted ({err}): {where}") from None


def say(message: str, /, **values) -> Printed:
    """One printed line (or several, one per line of ``message``) in every language.

    Args:
        message: the English text, a msgid of the label catalogs, with named placeholders
            (``"{n_heads} heads of {head_dim}"``; a format spec such as ``{loss:.3f}`` is kept
            by the translation; ``{{`` and ``}}`` are literal braces). A message with no word
            to translate (``"Δ = {d}"``: symbols, single letters, math) is not looked up.
        **values: the placeholders' values; a :class:`Printed` value is put in as its text in
            each language (``say("{name}: {status}", status=say("solved"))``).

    Returns:
        A :class:`Printed`; as a cell's last expression it shows in the reader's language.

    Raises:
        TypeError: if ``message`` is not a ``str``.
        KeyError: if ``values`` lacks a placeholder of the message (naming it and the values
            given).
        ValueError: if the message has a positional field ``{}``, or a value does not fit its
            format spec (naming the message, the field and the value's type and shape).
    """
    check_text(message, "message")
    try:
        fields = list(_field_names(message))
    except ValueError as err:
        raise ValueError(f"message {message!r} is no format string: {err}") from None
    if any(f == "" or f.isdigit() for f in fields):
        raise ValueError(
            f"message {message!r} has a positional field; name every placeholder ({{loss:.3f}})"
        )
    nested = [v for v in values.values() if isinstance(v, Printed)]
    # The message's own text: its fields are values, not words to translate ("{{" is a brace).
    lookup = i18n.needs_translation(
        " ".join(text for text, *_ in string.Formatter().parse(message))
    )

    def make(_) -> str:
        here = {k: v.text(_.language) if isinstance(v, Printed) else v for k, v in values.items()}
        return _fill(message, _(message) if lookup else message, here)

    out = _made(make)
    return Printed(out.texts, out.untranslated.union(*(v.untranslated for v in nested)))


def table(
    header: Sequence[str | Printed],
    rows: Iterable[Sequence],
    *,
    formats: Sequence[str] | None = None,
    align: str | None = None,
) -> Printed:
    """A plain-text table whose headings and words are in the reader's language.

    The columns are padded to their widest cell in each language (:func:`columns`: a Chinese
    character counts as two columns, as a monospace font draws it).

    Args:
        header: the column headings: English msgids of the label catalogs, or
            :class:`Printed` texts (``say("seed {s}", s=0)``); a number is shown as it is.
        rows: the rows (any iterable), each with one value per heading; a cell that is a
            :class:`Printed` shows its text in each language, a ``str`` is data (shown as it
            is), any other value is formatted with the column's format.
        formats: optional format spec per column (``".3f"``, ``",d"``; ``""`` for ``str``).
        align: optional string of ``"<"`` / ``">"`` per column (default: numbers right,
            the rest left).

    Returns:
        A :class:`Printed` with an HTML rendering too: in the book and in JupyterLab the table
        is an HTML table, whose columns line up whatever the font's Chinese characters measure
        (the plain text pads by :func:`columns`, which a monospace font only approximates).

    Raises:
        TypeError: if ``header`` or a row is a ``str`` or no sequence (a sequence of cells is
            needed), a heading is not a ``str``, a :class:`Printed` or a number, ``formats``
            is a ``str`` or has an entry that is not, or ``align`` is not a ``str``.
        ValueError: if a row, ``formats`` or ``align`` has another length than ``header``,
            ``align`` has a character other than ``<`` and ``>``, a cell does not fit its
            column's format (naming the row and column; a bool fits no number format), a
            cell has a line break, ``header`` is empty, or a ``str`` heading has a placeholder
            or a stray brace (data such as ``"{0, 1}"`` goes in as :func:`verbatim`).
    """
    header = _cells(header, "header", "headings")
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows must be an iterable of rows, got {type(rows).__name__}")
    rows = [_cells(r, f"rows[{i}]", "cells") for i, r in enumerate(rows)]
    n = len(header)
    if not n:
        raise ValueError("header must have at least one heading, got none")
    for j, h in enumerate(header):
        if not isinstance(h, (str, Printed)) and not _is_number(h):
            raise TypeError(
                f"header[{j}] must be a message (str), a Printed or a number, got "
                f"{type(h).__name__} {h!r:.60}"
            )
    if isinstance(formats, str):
        raise TypeError(
            f"formats must be a sequence of format specs, one per column, not the str {formats!r}"
        )
    if formats is not None and not isinstance(formats, Sequence):
        raise TypeError(f"formats must be a sequence of format specs, got {type(formats).__name__}")
    if align is not None and not isinstance(align, str):
        raise TypeError(f"align must be a str of '<' and '>', got {type(align).__name__}")
    for name, seq in (("formats", formats), ("align", align)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} must have one entry per column ({n}); got {len(seq)}")
    if align is not None and set(align) - {"<", ">"}:
        raise ValueError(f"align must be made of '<' and '>', got {align!r}")
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"rows[{i}] has {len(row)} values; the header has {n} columns")
    fmts = list(formats) if formats is not None else [""] * n
    for j, f in enumerate(fmts):
        if not isinstance(f, str):
            raise TypeError(f"formats[{j}] must be a str, got {type(f).__name__} {f!r:.60}")

    def cell(v, i: int, j: int):
        if isinstance(v, (Printed, str)):
            return v
        if fmts[j] and _is_bool(v):  # a bool is an int: True under ".2f" printed 1.00
            raise ValueError(
                f"rows[{i}][{j}] ({_describe(v)}) does not fit the column's "
                f"format {fmts[j]!r}: a bool is no number"
            )
        try:
            return format(v, fmts[j])
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"rows[{i}][{j}] ({_describe(v)}) does not fit the column's "
                f"format {fmts[j]!r}: {err}"
            ) from None

    heads = [
        h
        if isinstance(h, Printed)
        else _heading(h, j)
        if isinstance(h, str)
        else verbatim(format(h))
        for j, h in enumerate(header)
    ]
    cells = [[cell(v, i, j) for j, v in enumerate(row)] for i, row in enumerate(rows)]
    if align is None:
        align = "".join(
            ">" if rows and all(_is_number(r[j]) for r in rows) else "<" for j in range(n)
        )
    texts, html = {}, {}
    for lang in i18n.LANGUAGES:
        lines = [
            [c.text(lang) if isinstance(c, Printed) else c for c in line]
            for line in [heads, *cells]
        ]
        for i, line in enumerate(lines):
            if any(_LINE_BREAK.search(c) for c in line):
                raise ValueError(
                    f"a table cell has a line break (row {i - 1}; -1 is the header): {line!r:.120}"
                )
        widths = [max(columns(line[j]) for line in lines) for j in range(n)]
        texts[lang] = "\n".join(
            "  ".join(_pad(c, widths[j], align[j]) for j, c in enumerate(line)).rstrip()
            for line in lines
        )
        html[lang] = _html_table(lines, align)
    untranslated = set().union(
        *(c.untranslated for line in [heads, *cells] for c in line if isinstance(c, Printed))
    )
    return Printed(texts, untranslated, html)


def _html_table(lines: list[list[str]], align: str) -> str:
    """The header line and the rows as an HTML table (numbers right-aligned, as in the text)."""

    def row(cells: list[str], tag: str) -> str:
        num = ' class="num"'
        return (
            "<tr>"
            + "".join(
                f"<{tag}{'' if how == '<' else num}>{escape(c)}</{tag}>"
                for c, how in zip(cells, align)
            )
            + "</tr>"
        )

    head, *body = lines
    return (
        f'<table class="{TABLE_CLASS}"><thead>{row(head, "th")}</thead><tbody>'
        + "".join(row(r, "td") for r in body)
        + "</tbody></table>"
    )


def _heading(message: str, j: int) -> Printed:
    """``say(message)`` for ``header[j]``, an error naming the heading."""
    try:
        return say(message)
    except (KeyError, ValueError) as err:
        raise ValueError(
            f"header[{j}] {message!r} is a message with a placeholder or a brace "
            f"({err.args[0]}); give data as verbatim({message!r})"
        ) from None


def _cells(seq, name: str, what: str) -> list:
    """``seq`` (a row or the header) as a list, or a TypeError naming it."""
    if isinstance(seq, (str, bytes, Mapping, Set)) or not isinstance(seq, Iterable):
        raise TypeError(
            f"{name} must be a sequence of {what}, not the {type(seq).__name__} {seq!r:.60}"
        )
    try:
        return list(seq)
    except TypeError as err:  # a 0-d array
        raise TypeError(
            f"{name} must be a sequence of {what}, got {_describe(seq)}: {err}"
        ) from None


def _is_bool(value) -> bool:
    """A Python, NumPy or torch bool (a 0-d bool array too)."""
    return isinstance(value, bool) or (
        getattr(value, "ndim", None) == 0
        and str(getattr(value, "dtype", "")) in ("bool", "torch.bool")
    )


def _is_number(value) -> bool:
    if _is_bool(value):
        return False
    if getattr(value, "ndim", None) == 0:  # a NumPy or torch scalar (not a 0-d str array)
        return getattr(getattr(value, "dtype", None), "kind", "f") in "iufc"
    return isinstance(value, numbers.Number)


def columns(text: str) -> int:
    r"""Columns ``text`` takes in a monospace font.

    East Asian wide characters count two; combining marks (the accent of ``"e\u0301"``) and
    zero-width characters (``"\u200b"``, a variation selector) none, as a terminal draws them.

    Raises:
        TypeError: if ``text`` is not a ``str``.
    """
    check_text(text, "text")
    return sum(
        0
        if unicodedata.category(ch) in ("Mn", "Me", "Cf")
        else 2
        if unicodedata.east_asian_width(ch) in "WF"
        else 1
        for ch in text
    )


def wrap_lines(text: str, width: int, initial: str = "", subsequent: str = "") -> list[str]:
    """``text`` broken into lines of at most ``width`` columns.

    Breaks fall at spaces and between two Chinese characters (:func:`columns` counts one as
    two columns), never before a closing mark of :data:`attnbook.fonts.NO_LINE_START`; a word
    longer than the width stays whole. ``initial`` starts the first line and ``subsequent``
    the others (a prefix is never left alone on a line); the text's own leading spaces are
    kept. A line break of ``text`` (``str.splitlines``) ends a line; each of its lines is
    wrapped so.

    Raises:
        TypeError: if ``text``, ``initial`` or ``subsequent`` is not a ``str``, or ``width``
            is not an integer.
        ValueError: if ``width`` is below 1.
    """
    for name, value in (("text", text), ("initial", initial), ("subsequent", subsequent)):
        check_text(value, name)
    width = check_int(width, "width", minimum=1)
    out = []
    for k, own in enumerate(_LINE_BREAK.split(text)):
        line, has_text = initial if k == 0 else subsequent, False
        for piece in _PIECE.findall(own):
            if has_text and columns(line + piece.rstrip()) > width and piece not in NO_LINE_START:
                out.append(line.rstrip())
                line, has_text = subsequent + piece.lstrip(), bool(piece.strip())
            else:
                line, has_text = line + piece, has_text or bool(piece.strip())
        out.append(line.rstrip())
    return out


def _pad(text: str, width: int, how: str) -> str:
    fill = " " * (width - columns(text))
    return fill + text if how == ">" else text + fill
