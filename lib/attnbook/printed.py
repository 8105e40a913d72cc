"""Printed output in the reader's language: what a chapter prints, made once per edition.

The book's editions come from one execution of its chapters (``book/editions.py``). A figure
carries one drawing per edition (:mod:`attnbook.edition_outputs`); printed text does the same
here. A chapter writes

.. code-block:: python

    say("row sums: {sums}", sums=weights.sum(-1))

instead of ``print(f"row sums: {weights.sum(-1)}")``. The message is an English ``msgid`` of
the label catalogs (``lib/attnbook/locale/<language>/*.po``, the catalogs of
:class:`attnbook.i18n.Labels`; the chapters' printed lines are in ``printed-chNN.po``) with
named placeholders, formatted with :meth:`str.format` in each language. The result,
:class:`Printed`, displays as plain text in the language of :func:`attnbook.i18n.get_language`
(a Chinese reader notebook sets it first) and, during a book build, also carries every
edition's text in :data:`attnbook.edition_outputs.MIME`, so each edition's page prints its own.
A message the catalogs lack prints in English and fails the Chinese edition's strict build,
naming the page.

Library helpers that format a table or a summary (:func:`table`) return a :class:`Printed`
too. Values (numbers, shapes, arrays) are formatted the same in every language.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import i18n

__all__ = ["Printed", "say", "table"]


class Printed:
    """Text with one rendering per language, shown as plain text.

    Args:
        texts: ``{language: text}`` for every language of :data:`attnbook.i18n.LANGUAGES`.
        untranslated: the English messages the Chinese text still shows (the catalogs lack
            them).

    Raises:
        ValueError: if ``texts`` lacks a language of :data:`attnbook.i18n.LANGUAGES`.
    """

    def __init__(self, texts: dict[str, str], untranslated: Iterable[str] = ()):
        missing = [lang for lang in i18n.LANGUAGES if lang not in texts]
        if missing:
            raise ValueError(f"texts must have every language {i18n.LANGUAGES}; "
                             f"got {sorted(texts)}, missing {missing}")
        self.texts = dict(texts)
        self.untranslated = frozenset(untranslated)

    def text(self, language: str | None = None) -> str:
        """The text in ``language`` (default: :func:`attnbook.i18n.get_language`)."""
        return self.texts[language or i18n.get_language()]

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def __eq__(self, other) -> bool:
        return isinstance(other, Printed) and self.texts == other.texts

    __hash__ = None  # mutable-looking value object: compared, not hashed

    def __add__(self, other: Printed) -> Printed:
        """The two texts on consecutive lines, in every language."""
        if not isinstance(other, Printed):
            return NotImplemented
        return Printed({lang: f"{self.texts[lang]}\n{other.texts[lang]}" for lang in self.texts},
                       self.untranslated | other.untranslated)

    @classmethod
    def lines(cls, parts: Iterable[Printed]) -> Printed:
        """The texts of ``parts`` one under another (an empty text if there are none)."""
        out = cls({lang: "" for lang in i18n.LANGUAGES})
        for k, part in enumerate(parts):
            out = part if k == 0 else out + part
        return out

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {"text/plain": self.text()}
        editions = i18n.editions()
        if editions:
            from .edition_outputs import MIME

            bundle[MIME] = {"kind": "text/plain",
                            "editions": {lang: self.texts[lang] for lang in editions},
                            "untranslated": sorted(self.untranslated)}
        return bundle


def _made(make) -> Printed:
    """``make(labels)`` called once per language, with the catalogs' misses collected."""
    texts: dict[str, str] = {}
    missing: set[str] = set()
    for lang in i18n.LANGUAGES:
        with i18n.collect_missing(missing if lang != "en" else None, isolated=lang == "en"):
            texts[lang] = make(i18n.labels(lang))
    return Printed(texts, missing)


def say(message: str, /, **values) -> Printed:
    """One printed line (or several, one per line of ``message``) in every language.

    Args:
        message: the English text, a msgid of the label catalogs, with named placeholders
            (``"{n_heads} heads of {head_dim}"``; a format spec such as ``{loss:.3f}`` is kept
            by the translation).
        **values: the placeholders' values; a value that is a :class:`Printed` (a phrase made
            by ``say``) is put in as its text in each language.

    Returns:
        A :class:`Printed`; as a cell's last expression it shows in the reader's language.

    Raises:
        KeyError: if ``values`` lacks a placeholder of the message (naming it and the values
            given).
    """
    phrases = [v for v in values.values() if isinstance(v, Printed)]

    def make(_) -> str:
        return _(message, **{key: v.texts[_.language] if isinstance(v, Printed) else v
                             for key, v in values.items()})

    out = _made(make)
    return Printed(out.texts, out.untranslated.union(*(p.untranslated for p in phrases)))


def table(header: Sequence[str], rows: Sequence[Sequence], *, formats: Sequence[str] | None = None,
          align: str | None = None) -> Printed:
    """A plain-text table whose column headings are in the reader's language.

    The columns are padded to their widest cell in each language (a Chinese character counts
    as two columns, as a monospace font draws it).

    Args:
        header: the English column headings (msgids of the label catalogs).
        rows: the rows, each with one value per heading; a value that is a :class:`Printed`
            (a word such as ``say("memory")``) shows in each language's text.
        formats: optional format spec per column (``".3f"``, ``",d"``; ``""`` for ``str``).
        align: optional string of ``"<"`` / ``">"`` per column (default: text left, numbers
            right).

    Returns:
        A :class:`Printed`.

    Raises:
        ValueError: if a row, ``formats`` or ``align`` has another length than ``header``.
    """
    n = len(header)
    for name, seq in (("formats", formats), ("align", align)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} must have one entry per column ({n}); got {len(seq)}")
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"rows[{i}] has {len(row)} values; the header has {n} columns")
    fmts = list(formats) if formats is not None else [""] * n
    words = [v for row in rows for v in row if isinstance(v, Printed)]
    if align is None:
        align = "".join(">" if rows and all(_is_number(r[j]) for r in rows) else "<"
                        for j in range(n))

    def make(_) -> str:
        cells = [[v.texts[_.language] if isinstance(v, Printed) else format(v, f)
                  for v, f in zip(row, fmts)] for row in rows]
        heads = [_(h) for h in header]
        widths = [max([_width(heads[j])] + [_width(r[j]) for r in cells]) for j in range(n)]
        lines = [heads] + cells
        return "\n".join("  ".join(_pad(c, widths[j], align[j]) for j, c in enumerate(line))
                         .rstrip() for line in lines)

    out = _made(make)
    return Printed(out.texts, out.untranslated.union(*(w.untranslated for w in words)))


def _is_number(value) -> bool:
    import numbers

    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospace font (East Asian wide characters count two)."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, how: str) -> str:
    fill = " " * (width - _width(text))
    return fill + text if how == ">" else text + fill
