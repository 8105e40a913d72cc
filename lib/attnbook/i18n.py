"""Figure and explorer labels in the reader's language: English or Chinese (中文).

The book has two editions built from one execution of its chapters (``book/editions.py``). The
prose is translated by Sphinx's gettext catalogs; the *labels drawn inside figures and
explorers* are translated here, from the label catalogs ``lib/attnbook/locale/zh_CN/*.po`` (one
``msgid`` per English label, as written in a chapter or in this library; any number of files,
read together).

Two ways a label reaches the reader:

* **Live** (JupyterLab): ``set_language("zh_CN")`` (or ``ATTNBOOK_LANG=zh_CN`` in the
  environment) draws every matplotlib figure shown afterwards and every explorer created
  afterwards with Chinese labels.
* **The built book**: ``book/editions.py`` sets ``ATTNBOOK_EDITIONS="en zh_CN"`` for the one
  execution both editions share. Each figure and explorer output then carries, next to its
  usual English ``image/png`` / ``text/html``, a :data:`MIME` bundle with one rendering per
  edition; ``book/_ext/attnbook_i18n.py`` shows each edition its own. A label that the catalog
  does not translate is listed in the bundle (``"untranslated"``) and fails the strict build of
  the Chinese edition, naming the page.

Chinese text needs a CJK font: :func:`cjk_font_path` is Noto Sans CJK SC (SIL Open Font
License) from the PyPI package ``mplfonts`` — installed with the book, never downloaded.
Matplotlib falls back to it for the glyphs DejaVu Sans lacks; a glyph missing from both
("Glyph ... missing from font(s)") is an error (:class:`MissingGlyphError`), not tofu.

Matching a label: exactly, or against a catalog ``msgid`` with ``{}`` placeholders, each of
which matches any run of characters (a number, a token) that is carried into the ``msgstr``'s
``{}`` in order. Mathtext (``$...$``) is never translated; a label with no Latin word outside
its math needs no entry.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import gettext as gettext_module
import io
import json
import os
import re
import unicodedata
import warnings
from pathlib import Path

__all__ = [
    "LANGUAGES",
    "MIME",
    "MissingGlyphError",
    "get_language",
    "set_language",
    "editions",
    "needs_translation",
    "Labels",
    "labels",
    "gettext",
    "ngettext",
    "collect_missing",
    "untranslated",
    "lookup",
    "translate",
    "translate_checked",
    "translate_plotly",
    "translated_figure",
    "figure_png",
    "figure_bundle",
    "cjk_font_path",
    "install_display",
    "editions_html_bundle",
    "EditionsMimeRenderer",
]

#: The languages a label can be drawn in (Sphinx's language codes).
LANGUAGES = ("en", "zh_CN")
#: The output MIME type carrying one rendering per edition (see the module docstring).
MIME = "application/vnd.attnbook.editions+json"
#: The label catalogs: ``<language>/*.po`` in this folder.
LOCALE_DIR = Path(__file__).resolve().parent / "locale"

_MATH = re.compile(r"(?<!\\)\$(?:\\.|[^$\\])*\$")
_WORD = re.compile(r"[A-Za-z]{2,}")
_TAG = re.compile(r"<[^<>]*>")
_state: dict[str, str | None] = {"language": None}
_saved_png: dict = {}
#: The last figure :func:`_book_png` drew: ``{"image/png": (figure, base64 PNG, glyph messages)}``.
_drawn: dict = {}


class MissingGlyphError(RuntimeError):
    """A figure label has a character that no installed font (CJK font included) can draw."""


def _check_language(language: str, name: str = "language") -> str:
    if language not in LANGUAGES:
        raise ValueError(f"{name} must be one of {LANGUAGES}, got {language!r}")
    return language


def get_language() -> str:
    """The language new figures and explorers are drawn in.

    Returns:
        The language set by :func:`set_language`, else ``$ATTNBOOK_LANG``, else ``"en"``.

    Raises:
        ValueError: if ``ATTNBOOK_LANG`` is set to a language not in :data:`LANGUAGES`.
    """
    if _state["language"] is not None:
        return _state["language"]
    return _check_language(os.environ.get("ATTNBOOK_LANG", "en") or "en", "ATTNBOOK_LANG")


def set_language(language: str) -> None:
    """Draw figures and explorers created from now on in ``language`` (``"en"``, ``"zh_CN"``).

    In a notebook it also switches how matplotlib figures are shown (:func:`install_display`).

    Raises:
        ValueError: if ``language`` is not in :data:`LANGUAGES`.
    """
    _state["language"] = _check_language(language)
    install_display()


def editions() -> tuple[str, ...]:
    """The languages of the editions being built (``$ATTNBOOK_EDITIONS``; empty outside a build).

    Raises:
        ValueError: if the variable names a language not in :data:`LANGUAGES`.
    """
    raw = os.environ.get("ATTNBOOK_EDITIONS", "")
    langs = tuple(x for x in re.split(r"[\s,]+", raw) if x)
    for lang in langs:
        _check_language(lang, "ATTNBOOK_EDITIONS")
    return langs


# ---------------------------------------------------------------------------------------------
# Labels made in the reader's language where they are made (gettext)
# ---------------------------------------------------------------------------------------------

#: Plural rules of the label catalogs (gettext's ``Plural-Forms``), per language.
PLURAL_FORMS = {"zh_CN": "nplurals=1; plural=0;"}
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)(?:[!:][^{}]*)?\}(?!\})")
#: The msgids looked up and not found, per collector (:func:`collect_missing`).
_MISSING: contextvars.ContextVar[set | None] = contextvars.ContextVar("attnbook_missing",
                                                                     default=None)


def _placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


class _Recorder(gettext_module.NullTranslations):
    """The catalog's fallback: a msgid the catalog lacks is noted, then shown in English."""

    def gettext(self, message):
        sink = _MISSING.get()
        if sink is not None:
            sink.add(message)
        return message

    def ngettext(self, msgid1, msgid2, n):
        sink = _MISSING.get()
        if sink is not None:
            sink.add(msgid1)
        return msgid1 if n == 1 else msgid2


@functools.lru_cache(maxsize=None)
def _translations(language: str) -> gettext_module.NullTranslations:
    """The label catalogs of ``language``, compiled in memory with stdlib :mod:`gettext`.

    Every ``lib/attnbook/locale/<language>/*.po`` is read (``polib``) into one catalog, compiled
    to the ``.mo`` format and loaded by :class:`gettext.GNUTranslations`, so a reader who
    installed the package from source needs no compile step. Entries with ``{}`` placeholders
    belong to :func:`lookup` (labels translated after they were drawn) and are left out.

    Raises:
        ValueError: if an entry's ``msgstr`` names other placeholders than its ``msgid``.
    """
    import polib

    merged = polib.POFile()
    merged.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": language,
                       "Plural-Forms": PLURAL_FORMS.get(language, "nplurals=2; plural=(n != 1);")}
    seen: dict[str, str] = {}
    # An explorer's own catalog (explorer-<module>.po) wins over the chapters' after-the-fact
    # label catalogs (ch*.po), which may carry an older entry for the same English word.
    paths = sorted((LOCALE_DIR / language).glob("*.po"),
                   key=lambda p: (not p.name.startswith("explorer-"), p.name))
    for path in paths:
        for e in polib.pofile(str(path)):
            if e.obsolete or "fuzzy" in e.flags or "{}" in e.msgid:
                continue
            strings = [e.msgstr] if not e.msgid_plural else list(e.msgstr_plural.values())
            if not all(strings):
                continue
            want = _placeholders(e.msgid) | _placeholders(e.msgid_plural or "")
            for text in strings:
                if _placeholders(text) != want:
                    raise ValueError(
                        f"label catalog {path.name}: msgid {e.msgid!r} has the placeholders "
                        f"{sorted(want)} but its translation {text!r} has "
                        f"{sorted(_placeholders(text))}")
            if e.msgid in seen:
                continue  # the first file wins
            seen[e.msgid] = path.name
            merged.append(polib.POEntry(msgid=e.msgid, msgid_plural=e.msgid_plural,
                                        msgstr=e.msgstr, msgstr_plural=e.msgstr_plural))
    out = gettext_module.GNUTranslations(io.BytesIO(merged.to_binary()))
    out.add_fallback(_Recorder())
    return out


class Labels:
    """The labels of one language: ``_ = labels("zh_CN")``, then ``_("query {i}", i=2)``.

    A figure builder makes each label in the reader's language as it creates it. The message is
    an English ``msgid`` of the label catalogs (``lib/attnbook/locale/<language>/*.po``) with
    named placeholders (``{n_heads}``, formatted with :meth:`str.format`), so a translation may
    put them in any order. In English the message itself is formatted. A message the catalog
    lacks is shown in English and noted by :func:`collect_missing` (the book build then fails).

    Attributes:
        language: one of :data:`LANGUAGES`.
    """

    def __init__(self, language: str):
        self.language = _check_language(language)

    def __call__(self, message: str, /, **values) -> str:
        """``message`` in this language, its placeholders filled from ``values``."""
        text = message if self.language == "en" else _translations(self.language).gettext(message)
        return text.format(**values) if values else text

    def ngettext(self, singular: str, plural: str, n: int, /, **values) -> str:
        """The plural form for ``n`` (passed to the format as ``n`` too) in this language."""
        if self.language == "en":
            text = singular if n == 1 else plural
        else:
            text = _translations(self.language).ngettext(singular, plural, n)
        return text.format(n=n, **values)

    def __repr__(self) -> str:
        return f"Labels({self.language!r})"


def labels(language: str | None = None) -> Labels:
    """The :class:`Labels` of ``language`` (default :func:`get_language`).

    Raises:
        ValueError: if ``language`` is not in :data:`LANGUAGES`.
    """
    return Labels(get_language() if language is None else language)


def gettext(message: str, language: str | None = None, /, **values) -> str:
    """``message`` in ``language`` (default :func:`get_language`), placeholders filled in.

    Raises:
        ValueError: if ``language`` is not in :data:`LANGUAGES`.
        KeyError: if ``values`` lacks a placeholder of the message.
    """
    return labels(language)(message, **values)


def ngettext(singular: str, plural: str, n: int, language: str | None = None, /,
             **values) -> str:
    """The form of ``singular``/``plural`` for ``n`` in ``language``, placeholders filled in."""
    return labels(language).ngettext(singular, plural, n, **values)


@contextlib.contextmanager
def collect_missing(sink: set | None = None):
    """Collect the messages :class:`Labels` looked up and the catalogs lacked, in this block.

    Yields:
        The set the msgids are added to (``sink``, or a new set).
    """
    sink = set() if sink is None else sink
    token = _MISSING.set(sink)
    try:
        yield sink
    finally:
        _MISSING.reset(token)


#: Latin words a Chinese label may keep: names, abbreviations and units the Chinese edition
#: writes as they are (the glossary appendix lists them), compared case-sensitively.
KEPT_WORDS = frozenset("""
    KV MHA MQA GQA MLA LN Pre-LN Post-LN RMSNorm LayerNorm RoPE RNN LSTM GPU CPU SRAM HBM
    FlashAttention Triton PyTorch NumPy GPT GPT-2 BERT MiniLM Llama Qwen Qwen2 Mistral
    DeepSeek fp32 fp16 bf16 fp8 int8 float64 float32 float16 bfloat16 FLOPs FLOP TFLOP TFLOPs
    GiB MiB KiB TiB GB MB KB TB ms rad nats Adam SGD
    softmax logsumexp tanh Transformer ReLU GELU SwiGLU
""".split())


_SUBSUP = re.compile(r"<(sub|sup)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_CODE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\([^()]*\)|[A-Za-z0-9]*_[A-Za-z0-9_]+")


def untranslated(text: str, kept=frozenset()) -> list[str]:
    """The Latin words of a label that a Chinese reader would see untranslated.

    Words inside mathtext or LaTeX (``$...$``), HTML tags, plotly's ``%{...}`` hover
    placeholders, sub- and superscripts (``W<sub>hh</sub>``), code (a call such as
    ``masked_softmax(scores, mask)``, a ``snake_case`` name),
    single letters, and the words in :data:`KEPT_WORDS` or ``kept`` (example data
    a real model read, such as its tokens) do not count.

    Returns:
        The offending words, in order (empty when the label is fine).
    """
    if not isinstance(text, str):
        return []
    bare = _SUBSUP.sub(" ", _MATH.sub(" ", text))  # W<sub>hh</sub>: notation, not a word
    bare = re.sub(r"%\{[^}]*\}", " ", _TAG.sub(" ", bare))
    bare = _CODE.sub(" ", bare)
    words = re.findall(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*", bare)
    return [w for w in words if len(re.sub(r"[^A-Za-z]", "", w)) >= 2
            and w not in KEPT_WORDS and w not in kept]


def needs_translation(text: str) -> bool:
    """True when ``text`` has a Latin word of two or more letters outside mathtext and tags."""
    if not isinstance(text, str):
        return False
    return bool(_WORD.search(_TAG.sub(" ", _MATH.sub(" ", text))))


@functools.lru_cache(maxsize=None)
def _catalog(language: str) -> tuple[dict[str, str], list[tuple[re.Pattern, str]]]:
    import polib

    exact: dict[str, str] = {}
    patterns: list[tuple[re.Pattern, str]] = []
    entries = []
    for path in sorted((LOCALE_DIR / language).glob("*.po")):
        for e in polib.pofile(str(path)):
            e.fpath = path.name
            entries.append(e)
    for entry in entries:
        if entry.obsolete or not entry.msgstr or "fuzzy" in entry.flags:
            continue
        if entry.msgid.count("{}") != entry.msgstr.count("{}"):
            raise ValueError(
                f"label catalog {entry.fpath if hasattr(entry, 'fpath') else language}: "
                f"msgid {entry.msgid!r} has {entry.msgid.count('{}')} placeholders {{}} but "
                f"msgstr {entry.msgstr!r} has {entry.msgstr.count('{}')}")
        if "{}" in entry.msgid:
            parts = [re.escape(p) for p in entry.msgid.split("{}")]
            patterns.append((re.compile("^" + "(.+?)".join(parts) + "$", re.S), entry.msgstr))
        else:
            exact[entry.msgid] = entry.msgstr
    # Longest patterns first: the most specific wins.
    patterns.sort(key=lambda p: -len(p[0].pattern))
    return exact, patterns


def lookup(text: str, language: str) -> str | None:
    """The catalog's translation of ``text`` into ``language``, or None when it has no entry.

    An entry may translate a label to itself (a name such as ``"Llama 2 7B"``).

    Raises:
        ValueError: if ``language`` is not in :data:`LANGUAGES`.
    """
    language = _check_language(language)
    if language == "en" or not isinstance(text, str) or not text:
        return text
    exact, patterns = _catalog(language)
    if text in exact:
        return exact[text]
    for pattern, msgstr in patterns:
        m = pattern.match(text)
        if m:
            parts = msgstr.split("{}")
            values = list(m.groups()) + [""] * len(parts)
            return "".join(p + (values[i] if i < len(parts) - 1 else "")
                           for i, p in enumerate(parts))
    return None


def translate(text: str, language: str | None = None) -> str:
    """``text`` in ``language``, from the label catalog; unchanged if it has no entry.

    Args:
        text: an English label as drawn (mathtext, HTML tags and numbers included).
        language: one of :data:`LANGUAGES`; default :func:`get_language`.

    Returns:
        The translated ``str`` (``text`` itself for English, or when no entry matches; use
        :func:`needs_translation` to tell whether that matters).

    Raises:
        ValueError: if ``language`` is not in :data:`LANGUAGES`.
    """
    language = get_language() if language is None else _check_language(language)
    found = lookup(text, language)
    return text if found is None else found


def translate_checked(text: str, language: str, missing: set[str]) -> str:
    """:func:`translate`, adding ``text`` to ``missing`` when it needed an entry and had none."""
    found = lookup(text, language)
    if found is None:
        if needs_translation(text):
            missing.add(text)
        return text
    return found


#: Keys of a plotly figure's JSON whose string values are labels (titles, axis titles,
#: annotations, legend entries); tick labels and hover templates are data-like and translated
#: only when the catalog has them.
_PLOTLY_LABEL_KEYS = {"name", "title", "text"}
_PLOTLY_SOFT_KEYS = {"hovertemplate", "ticktext"}


def translate_plotly(obj, language: str | None = None, *, missing: set[str] | None = None):
    """A copy of a plotly JSON object (figure, layout, trace, patch) with its labels translated.

    Translated: ``title`` / ``title.text`` (figure, axes, legend, colour bar), annotation
    ``text``, trace ``name``; ``hovertemplate`` and ``ticktext`` when the catalog has them.
    Trace ``text`` arrays (token strings and numbers drawn on the data) are data, kept as they
    are.

    Args:
        obj: a JSON-like ``dict`` / ``list`` (e.g. ``fig.to_plotly_json()``).
        language: default :func:`get_language`.
        missing: if given, a set that receives every label that needed a translation and had
            none.

    Returns:
        The translated copy (``obj`` is not changed).
    """
    language = get_language() if language is None else _check_language(language)
    sink = missing if missing is not None else set()

    def walk(node, key=None, data=False):
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            if key in ("data", "traces"):
                return [walk_trace(v) for v in node]
            return [walk(v, key, data) for v in node]
        if isinstance(node, str) and not data:
            if key in _PLOTLY_LABEL_KEYS:
                return translate_checked(node, language, sink)
            if key in _PLOTLY_SOFT_KEYS:
                return translate(node, language)
        return node

    def walk_trace(trace):
        # A trace's own text / hovertext are drawn on the data (tokens, values); anything
        # nested in it (its colour bar's title, ...) is a label again.
        if not isinstance(trace, dict):
            return walk(trace)
        return {k: walk(v, k, data=k in ("text", "hovertext")) for k, v in trace.items()}

    return walk(obj)


def _translating_formatter_class():
    from matplotlib.ticker import Formatter

    class TranslatingFormatter(Formatter):
        """A tick formatter whose labels are another's, translated when the catalog knows them."""

        def __init__(self, inner, language):
            self.inner, self.language = inner, language

        def __call__(self, x, pos=None):
            return translate(self.inner(x, pos), self.language)

        def format_ticks(self, values):
            return [translate(s, self.language) for s in self.inner.format_ticks(values)]

        def set_locs(self, locs):
            self.inner.set_locs(locs)

        def get_offset(self):
            return self.inner.get_offset()

        def set_axis(self, axis):
            super().set_axis(axis)
            self.inner.set_axis(axis)

    return TranslatingFormatter


def _TranslatingFormatter(inner, language):  # noqa: N802 - a class made on first use
    cls = _FORMATTER_CLASS.get("cls")
    if cls is None:
        cls = _FORMATTER_CLASS["cls"] = _translating_formatter_class()
    return cls(inner, language)


_FORMATTER_CLASS: dict = {}


@contextlib.contextmanager
def translated_figure(fig, language: str | None = None, *, missing: set[str] | None = None):
    """Temporarily set every text of a matplotlib figure to ``language``; restore on exit.

    Titles, axis labels, tick labels, legend entries, annotations and figure texts are all
    ``matplotlib.text.Text`` artists; each is looked up with :func:`translate`. Tick labels are
    often data (the tokens of a sentence a model read): they are translated when the catalog has
    them and never reported missing.

    Args:
        fig: a ``matplotlib.figure.Figure``.
        language: default :func:`get_language`.
        missing: if given, receives the labels that needed a translation and had none.

    Raises:
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    language = get_language() if language is None else _check_language(language)
    sink = missing if missing is not None else set()
    saved = []
    formatters = []
    try:
        if language != "en":
            ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                     for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                     for label in (tick.label1, tick.label2)}
            # Tick labels are rewritten by the axis' formatters whenever the figure is drawn:
            # wrap each formatter so that what it writes is translated.
            for ax in fig.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    major, minor = axis.get_major_formatter(), axis.get_minor_formatter()
                    formatters.append((axis, major, minor,
                                       axis.isDefault_majfmt, axis.isDefault_minfmt))
                    axis.set_major_formatter(_TranslatingFormatter(major, language))
                    axis.set_minor_formatter(_TranslatingFormatter(minor, language))
            for artist in fig.findobj(Text):
                text = artist.get_text()
                if id(artist) in ticks:
                    # Its text is written again at draw time, perhaps in Chinese: the CJK
                    # font as a fallback whatever it says now.
                    saved.append((artist, text, artist.get_fontproperties().copy()))
                    artist.set_fontfamily(_families_for("", artist.get_fontfamily()))
                    new = translate(text, language)
                else:
                    new = translate_checked(text, language, sink)
                if new != text:
                    saved.append((artist, text, artist.get_fontproperties().copy()))
                    artist.set_text(new)
                    artist.set_fontfamily(_families_for(new, artist.get_fontfamily()))
        yield fig
    finally:
        for artist, text, props in reversed(saved):
            artist.set_text(text)
            artist.set_fontproperties(props)
        for axis, major, minor, major_default, minor_default in formatters:
            axis.set_major_formatter(major)
            axis.set_minor_formatter(minor)
            # Unit converters (dates, categories) install their own formatter only on an axis
            # whose formatter the user has not set.
            axis.isDefault_majfmt, axis.isDefault_minfmt = major_default, minor_default


def _families_for(text: str, families) -> list[str]:
    """The font families to draw ``text``: the CJK font as a fallback, or first with mathtext.

    Matplotlib falls back from font to font glyph by glyph for plain text, but draws the
    non-math part of a mathtext label (``"头维度 $d_k$"``) with one font only: there the CJK
    font (whose Latin letters are fine) comes first; the math keeps the mathtext font set.
    Generic families (``sans-serif``) stay generic: matplotlib resolves each to the first
    installed font of its list (expanded here, every absent name would log "findfont: Font
    family ... not found" at every draw).
    """
    cjk = _cjk_family()
    rest = [f for f in families if f != cjk]
    has_wide = any(unicodedata.east_asian_width(ch) in ("W", "F") for ch in text)
    if has_wide and _MATH.search(text):
        return [cjk] + rest
    return rest + [cjk]


def cjk_font_path() -> Path:
    """Noto Sans CJK SC Regular, shipped by the ``mplfonts`` package (SIL Open Font License).

    Raises:
        RuntimeError: if ``mplfonts`` (a requirement of the book) is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the CJK font comes from the mplfonts package: pip install mplfonts")
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NotoSansCJKsc-Regular.otf"
    if not path.is_file():
        raise RuntimeError(f"mplfonts has no {path.name} (looked in {path.parent})")
    return path


@functools.lru_cache(maxsize=None)
def _cjk_family() -> str:
    from matplotlib import font_manager

    path = cjk_font_path()
    font_manager.fontManager.addfont(str(path))
    return font_manager.FontProperties(fname=str(path)).get_name()


def figure_png(fig, language: str | None = None, *, missing: set[str] | None = None,
               glyphs: list[str] | None = None) -> str:
    """A matplotlib figure drawn with its labels in ``language``, as base64 PNG.

    Drawn as IPython's inline backend draws it (``bbox_inches="tight"``), with Noto Sans CJK SC
    as the fallback font for the glyphs of the default font lacks.

    Args:
        fig: a ``matplotlib.figure.Figure``.
        language: default :func:`get_language`.
        missing: if given, receives the labels that had no translation.
        glyphs: if given, receives matplotlib's "Glyph ... missing from font(s)" messages
            instead of raising.

    Returns:
        The base64 ``str`` of the PNG (what a notebook's ``image/png`` output holds).

    Raises:
        MissingGlyphError: if a character of a label is in no font (matplotlib would draw a
            box) and ``glyphs`` is None.
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    import logging

    language = get_language() if language is None else _check_language(language)
    buf = io.BytesIO()
    # Mathtext reports a missing glyph through logging, plain text through warnings.
    mathtext_log = _MathtextGlyphs()
    logger = logging.getLogger("matplotlib.mathtext")
    logger.addHandler(mathtext_log)
    # The CJK font has one weight: a bold title drawn with it falls back to regular, which
    # matplotlib logs at every draw (into the chapter's output). Expected; not shown.
    fonts_log = logging.getLogger("matplotlib.font_manager")
    fonts_log.addFilter(_no_weight_fallback)
    with translated_figure(fig, language, missing=missing), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fig.canvas.print_figure(buf, format="png", bbox_inches="tight")
        finally:
            logger.removeHandler(mathtext_log)
            fonts_log.removeFilter(_no_weight_fallback)
    lost = sorted({str(w.message) for w in caught if "missing from font" in str(w.message)}
                  | set(mathtext_log.messages))
    if lost and glyphs is None:
        raise MissingGlyphError(f"figure drawn in {language}: {'; '.join(lost)}")
    if glyphs is not None:
        glyphs.extend(f"{language}: {m}" for m in lost)
    for w in caught:
        if "missing from font" in str(w.message):
            continue  # anything else is the caller's business, as it would have been
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _no_weight_fallback(record) -> bool:
    return "Failed to find font weight" not in record.getMessage()


class _MathtextGlyphs(__import__("logging").Handler):
    """Collects matplotlib.mathtext's "does not have a glyph" messages (a box drawn instead)."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if "does not have a glyph" in msg:
            self.messages.append(f"{msg} (missing from font, in mathtext)")


def figure_bundle(fig, languages: tuple[str, ...]) -> dict:
    """The :data:`MIME` payload of a matplotlib figure: one PNG per language.

    Returns:
        ``{"kind": "image/png", "editions": {language: base64 PNG}, "untranslated": [labels],
        "missing_glyphs": [matplotlib's messages]}``; the book's renderer turns the last two
        into build warnings (errors in the strict build).
    """
    missing: set[str] = set()
    glyphs: list[str] = []
    drawn = _drawn.pop("image/png", None)
    out = {}
    for lang in languages:
        if drawn is not None and drawn[0] is fig and not fig.stale and lang == "en":
            # The English drawing this output's image/png already holds: not drawn again.
            out[lang] = drawn[1]
            glyphs.extend(drawn[2])
        else:
            out[lang] = figure_png(fig, lang, missing=missing, glyphs=glyphs)
    return {"kind": "image/png", "editions": out, "untranslated": sorted(missing),
            "missing_glyphs": glyphs}


def _book_png(fig) -> str:
    """The ``image/png`` of a figure in a book build: the English drawing.

    Kept for :func:`figure_bundle` (which IPython calls next, for the same output), so that
    each edition's rendering is drawn once.
    """
    glyphs: list[str] = []
    png = figure_png(fig, "en", glyphs=glyphs)
    _drawn["image/png"] = (fig, png, glyphs)
    # Drawn as it is now: any change to one of its artists marks it stale again (matplotlib
    # passes the flag up to the figure), and figure_bundle then draws it anew.
    fig.stale = False
    return png


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def install_display() -> bool:
    """Make matplotlib figures shown in this IPython kernel carry the edition renderings.

    In a book build (:func:`editions` not empty) a figure's output gets a :data:`MIME` entry
    with one PNG per edition (its usual English ``image/png`` stays, for JupyterLab). Live,
    with :func:`get_language` not English, the ``image/png`` itself is drawn in that language.
    Called by :func:`attnbook.viz.use_book_style` and :func:`set_language`; a no-op outside
    IPython.

    Returns:
        True when a formatter was installed.
    """
    ip = _ipython()
    if ip is None or not hasattr(ip, "display_formatter"):
        return False
    from IPython.core.formatters import BaseFormatter
    from matplotlib.figure import Figure
    from traitlets import Unicode

    _load_inline_backend()
    formatters = ip.display_formatter.formatters
    langs = editions()
    if langs:
        if MIME not in formatters:
            class _EditionsFormatter(BaseFormatter):
                format_type = Unicode(MIME)
                _return_type = (dict,)
                print_method = Unicode("_repr_attnbook_editions_")

            formatters[MIME] = _EditionsFormatter(parent=ip.display_formatter)
        formatters[MIME].for_type(Figure, lambda fig: figure_bundle(fig, langs))
        if "en" in langs and "image/png" in formatters:
            # Runs before the MIME formatter (IPython calls them in the order they were added).
            formatters["image/png"].for_type(Figure, _book_png)
        return True
    language = get_language()
    png = formatters.get("image/png")
    if png is None:
        return False
    if language == "en":
        if "png" in _saved_png:  # back to the formatter the figure had before
            old = _saved_png.pop("png")
            if old is None:
                png.pop(Figure, None)
            else:
                png.for_type(Figure, old)
        return False
    old = png.for_type(Figure, lambda fig: figure_png(fig, language))
    _saved_png.setdefault("png", old)
    return True


def _load_inline_backend() -> None:
    """Load IPython's inline matplotlib backend now, if it is the backend.

    The inline backend, when pyplot first loads it, removes every display formatter of
    ``Figure`` but its own (``IPython.core.pylabtools.select_figure_formats``): loaded after
    :func:`install_display`, it would silently drop the edition renderings.
    """
    import matplotlib as mpl

    backend = mpl.get_backend()
    if "inline" in backend.lower():
        import matplotlib.pyplot as plt

        plt.switch_backend(backend)


def editions_html_bundle(render_html, languages: tuple[str, ...]) -> dict:
    """The :data:`MIME` payload of an HTML output drawn once per language.

    Args:
        render_html: ``render_html(language, missing) -> str``.
        languages: the editions.
    """
    missing: set[str] = set()
    out = {lang: render_html(lang, missing) for lang in languages}
    return {"kind": "text/html", "editions": out, "untranslated": sorted(missing)}



class EditionsMimeRenderer:
    """MyST-NB mime renderer: each edition of the built book shows its own rendering.

    Registered in pyproject.toml (entry point group ``myst_nb.mime_renderers``). For the HTML
    builder a :data:`MIME` output outranks ``text/html`` and ``image/png``; its rendering for
    the build's ``language`` (English when it has none) is passed to MyST-NB's own image or HTML
    renderer, so the page holds exactly what an ordinary output would. A label listed as
    untranslated is a warning on the page (an error in the strict build) in every edition but
    the English one.
    """

    mime_priority_overrides = [("html", MIME, 1)]

    @staticmethod
    def handle_mime(renderer, data, inline):
        """Render ``data`` if it is a :data:`MIME` output, else return None (MyST-NB's API)."""
        import dataclasses

        if data.mime_type != MIME:
            return None
        payload = data.content
        if isinstance(payload, (str, bytes)):
            payload = json.loads(payload)
        env = getattr(renderer.renderer, "sphinx_env", None)
        language = getattr(getattr(env, "config", None), "language", None) or "en"
        renderings = payload.get("editions", {})
        chosen = language if language in renderings else "en"
        if chosen not in renderings:
            return None
        if chosen != language:
            renderer.logger.warning(
                f"this output has no {language} rendering (only {sorted(renderings)}): was the "
                f"book built with ATTNBOOK_EDITIONS naming {language}?",
                subtype="attnbook_label", line=data.line)
        for message in payload.get("missing_glyphs", []):
            renderer.logger.warning(f"figure has a character no font can draw: {message}",
                                    subtype="attnbook_glyph", line=data.line)
        if language != "en":
            for label in payload.get("untranslated", []):
                renderer.logger.warning(
                    f"figure label not translated to {language}: {label!r} (add it to "
                    f"lib/attnbook/locale/{language}/)",
                    subtype="attnbook_label", line=data.line,
                )
        kind = payload.get("kind", "text/html")
        inner = dataclasses.replace(data, mime_type=kind, content=renderings[chosen])
        if kind == "text/html":
            return renderer.render_text_html(inner)
        return renderer.render_image(inner)
