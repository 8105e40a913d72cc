"""Labels in the reader's language: English or Chinese (中文).

The book has two editions built from one execution of its chapters (``book/editions.py``). The
prose is translated by Sphinx's gettext catalogs; the *labels drawn inside figures and
explorers* are made here, from the label catalogs ``lib/attnbook/locale/zh_CN/*.po``.

* **Labels made in the reader's language** (the library's figures and explorers):
  ``_ = labels("zh_CN")``, then ``_("query {i}", i=2)`` and ``_.ngettext(...)``
  (:class:`Labels`, stdlib ``gettext``, named placeholders; catalogs
  ``explorer-<module>.po``). :func:`collect_missing` lists the messages the catalogs lack and
  :func:`untranslated` the English words a Chinese label still shows.
* **Labels translated after they were drawn** (figures drawn by chapter code, glued phrases):
  :func:`lookup`, :func:`translate`, :func:`translate_checked` and :func:`translate_plotly`,
  from the catalogs ``ch*.po``. Matching a label: exactly, or against a catalog ``msgid`` with
  ``{}`` placeholders, each of which matches any run of characters (a number, a token) that is
  carried into the ``msgstr``'s ``{}`` in order. Mathtext (``$...$``) is never translated; a
  label with no Latin word outside its math needs no entry.

Which language: :func:`set_language` (or ``ATTNBOOK_LANG=zh_CN``) for what is drawn live in
JupyterLab, :func:`editions` for a book build (``ATTNBOOK_EDITIONS="en zh_CN"``), where every
output carries one rendering per edition.

Two jobs live in their own modules: drawing matplotlib figures per language (the CJK font, PNG
rendering, IPython's display hooks) in :mod:`attnbook.mpl_figures`, and the per-edition output
type with MyST-NB's renderer in :mod:`attnbook.edition_outputs`. Their names stay readable at
their old paths here (``attnbook.i18n.figure_png``, ...), through a module-level
``__getattr__`` that reads the one table of old paths, ``attnbook._aliases.MOVED``, and
imports the new home on first use, so that importing this module imports no matplotlib.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gettext as gettext_module
import io
import os
import re
from pathlib import Path

from . import _aliases
from .checks import check_choice

__all__ = [
    "LANGUAGES",
    "get_language",
    "set_language",
    "on_language_change",
    "editions",
    "needs_translation",
    "Labels",
    "labels",
    "gettext",
    "ngettext",
    "collect_missing",
    "untranslated",
    "KEPT_WORDS",
    "PLURAL_FORMS",
    "lookup",
    "translate",
    "translate_checked",
    "translate_plotly",
]

#: The languages a label can be drawn in (Sphinx's language codes).
LANGUAGES = ("en", "zh_CN")
#: The label catalogs: ``<language>/*.po`` in this folder.
LOCALE_DIR = Path(__file__).resolve().parent / "locale"

_MATH = re.compile(r"(?<!\\)\$(?:\\.|[^$\\])*\$")
_WORD = re.compile(r"[A-Za-z]{2,}")
_TAG = re.compile(r"<[^<>]*>")
_state: dict[str, str | None] = {"language": None}
#: Called with no argument after :func:`set_language` (:func:`on_language_change`).
_hooks: list = []

#: The names that moved to the module of their job (``figure_png``, ``MIME``, ...) stay readable
#: at their old path ``attnbook.i18n.<name>``, through the one table of old paths,
#: :data:`attnbook._aliases.MOVED`; the home is imported on first access only.
__getattr__ = _aliases.moved_getattr(__name__)


def _check_language(language: str, name: str = "language") -> str:
    return check_choice(language, name, LANGUAGES)


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

    Then calls the hooks of :func:`on_language_change`: in a notebook,
    :mod:`attnbook.mpl_figures` switches how matplotlib figures are shown.

    Raises:
        ValueError: if ``language`` is not in :data:`LANGUAGES`.
    """
    _state["language"] = _check_language(language)
    for hook in list(_hooks):
        hook()


def on_language_change(hook) -> None:
    """Call ``hook()`` after every :func:`set_language` (once, however often it is registered).

    How a module that shows things in the current language follows a change without this module
    importing it (:mod:`attnbook.mpl_figures` registers its IPython display hook).
    """
    if hook not in _hooks:
        _hooks.append(hook)


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
_MISSING: contextvars.ContextVar[tuple[set, ...]] = contextvars.ContextVar(
    "attnbook_missing", default=()
)


def _placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def _fields(text: str) -> list[str] | None:
    """The replacement fields of ``text`` whole (``{loss:.3f}``, ``{s!r}``), sorted.

    None if ``text`` is no format string (a stray ``}``).
    """
    import string

    try:
        return sorted(
            f"{name}!{conv}:{spec}"
            for _, name, spec, conv in string.Formatter().parse(text)
            if name is not None
        )
    except ValueError:
        return None


class _Recorder(gettext_module.NullTranslations):
    """The catalog's fallback: a msgid the catalog lacks is noted, then shown in English."""

    def gettext(self, message):
        for sink in _MISSING.get():  # every collector the lookup is nested in
            sink.add(message)
        return message

    def ngettext(self, msgid1, msgid2, n):
        for sink in _MISSING.get():
            sink.add(msgid1)
        return msgid1 if n == 1 else msgid2


def _translations(language: str) -> gettext_module.NullTranslations:
    """The label catalogs of ``language`` in :data:`LOCALE_DIR` (compiled once per folder)."""
    return _compiled(language, LOCALE_DIR)


@functools.lru_cache(maxsize=None)
def _compiled(language: str, locale_dir: Path) -> gettext_module.NullTranslations:
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
    merged.metadata = {
        "Content-Type": "text/plain; charset=UTF-8",
        "Language": language,
        "Plural-Forms": PLURAL_FORMS.get(language, "nplurals=2; plural=(n != 1);"),
    }
    seen: dict[str, str] = {}
    # An explorer's own catalog (explorer-<module>.po) wins over the chapters' after-the-fact
    # label catalogs (ch*.po), which may carry an older entry for the same English word.
    paths = sorted(
        (locale_dir / language).glob("*.po"),
        key=lambda p: (not p.name.startswith("explorer-"), p.name),
    )
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
                        f"{sorted(_placeholders(text))}"
                    )
                # The whole field is kept (its format spec and conversion), and a translation
                # is a format string wherever its msgid is one. A plural form has the fields
                # of either English form ("one head" / "{n} heads": a Chinese form has {n}).
                got, need = _fields(text), _fields(e.msgid)
                if e.msgid_plural and got is not None:
                    other = _fields(e.msgid_plural)
                    need = None if need is None or other is None else sorted({*need, *other})
                    got = sorted(set(got))
                if need is not None and got != need:
                    raise ValueError(
                        f"label catalog {path.name}: msgid {e.msgid!r} has the fields "
                        f"{need} but its translation {text!r} has "
                        f"{got if got is not None else 'none (it is no format string)'}"
                    )
            if e.msgid in seen:
                continue  # the first file wins
            seen[e.msgid] = path.name
            merged.append(
                polib.POEntry(
                    msgid=e.msgid,
                    msgid_plural=e.msgid_plural,
                    msgstr=e.msgstr,
                    msgstr_plural=e.msgstr_plural,
                )
            )
    out = gettext_module.GNUTranslations(io.BytesIO(merged.to_binary()))
    out.add_fallback(_Recorder())
    return out


def _format(message: str, text: str, values: dict) -> str:
    """``text`` (``message`` in some language) with its named placeholders filled from ``values``.

    Raises:
        KeyError: if ``values`` lacks a placeholder, naming the message and the values given.
    """
    try:
        return text.format(**values)
    except KeyError as err:
        raise KeyError(
            f"label {message!r} needs a value for its placeholder {{{err.args[0]}}}; "
            f"got values for {sorted(values)}"
        ) from None


class Labels:
    """The labels of one language: ``_ = labels("zh_CN")``, then ``_("query {i}", i=2)``.

    A figure builder makes each label in the reader's language as it creates it. The message is
    an English ``msgid`` of the label catalogs (``lib/attnbook/locale/<language>/*.po``) with
    named placeholders (``{n_heads}``, formatted with ``str.format``), so a translation may
    put them in any order. In English the message itself is formatted. A message the catalog
    lacks is shown in English and noted by :func:`collect_missing` (the book build then fails).

    Attributes:
        language: one of :data:`LANGUAGES`.
    """

    def __init__(self, language: str):
        self.language = _check_language(language)

    def __call__(self, message: str, /, **values) -> str:
        """``message`` in this language, its placeholders filled from ``values``."""
        if not message:  # gettext's "" is the catalog's header, never a label
            return message
        text = message if self.language == "en" else _translations(self.language).gettext(message)
        return _format(message, text, values) if values else text

    def ngettext(self, singular: str, plural: str, n: int, /, **values) -> str:
        """The plural form for ``n`` (passed to the format as ``n`` too) in this language."""
        if self.language == "en":
            text = singular if n == 1 else plural
        else:
            text = _translations(self.language).ngettext(singular, plural, n)
        if "n" in values:
            raise TypeError(
                f"ngettext({singular!r}, ...): n is the count argument ({n!r}); "
                f"it cannot also be passed as a value (n={values['n']!r})"
            )
        return _format(singular, text, {"n": n, **values})

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


def ngettext(singular: str, plural: str, n: int, language: str | None = None, /, **values) -> str:
    """The form of ``singular``/``plural`` for ``n`` in ``language``, placeholders filled in."""
    return labels(language).ngettext(singular, plural, n, **values)


@contextlib.contextmanager
def collect_missing(sink: set | None = None, *, isolated: bool = False):
    """Collect the messages :class:`Labels` looked up and the catalogs lacked, in this block.

    Collectors nest: a message missed inside an inner block is added to every enclosing
    collector's set too, unless the inner one is ``isolated`` (a probe whose misses its caller
    resolves another way). The collector is a context variable, so a thread started inside the
    block does not report to it (run such work with ``contextvars.copy_context().run``).

    Yields:
        The set the msgids are added to (``sink``, or a new set).
    """
    sink = set() if sink is None else sink
    token = _MISSING.set((sink,) if isolated else _MISSING.get() + (sink,))
    try:
        yield sink
    finally:
        _MISSING.reset(token)


#: Latin words a Chinese label may keep, compared case-sensitively (names, abbreviations and
#: units the Chinese edition writes as they are; the glossary appendix lists them).
KEPT_WORDS = frozenset(
    """
    KV MHA MQA GQA MLA LN Pre-LN Post-LN RMSNorm LayerNorm RoPE RNN LSTM GPU CPU SRAM HBM
    FlashAttention Triton PyTorch NumPy GPT GPT-2 BERT MiniLM Llama Qwen Qwen2 Mistral
    DeepSeek fp32 fp16 bf16 fp8 int8 float64 float32 float16 bfloat16 FLOPs FLOP TFLOP TFLOPs
    GiB MiB KiB TiB GB MB KB TB ms rad nats Adam SGD
    softmax logsumexp tanh token Transformer ReLU GELU SwiGLU
""".split()
)


_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);")
_SUBSUP = re.compile(r"<(sub|sup)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_CODE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\([^()]*\)|[A-Za-z0-9]*_[A-Za-z0-9_]+")


def untranslated(text: str, kept=frozenset()) -> list[str]:
    """The Latin words of a label that a Chinese reader would see untranslated.

    Words inside mathtext or LaTeX (``$...$``), HTML tags and entities (``&nbsp;``), plotly's
    ``%{...}`` hover placeholders, sub- and superscripts (``W<sub>hh</sub>``), code (a call such as
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
    bare = _ENTITY.sub(" ", bare)  # &nbsp; &amp; &#8203;: a character, not a word
    bare = _CODE.sub(" ", bare)
    words = re.findall(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*", bare)
    return [
        w
        for w in words
        if len(re.sub(r"[^A-Za-z]", "", w)) >= 2 and w not in KEPT_WORDS and w not in kept
    ]


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
                f"msgstr {entry.msgstr!r} has {entry.msgstr.count('{}')}"
            )
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
            return "".join(
                p + (values[i] if i < len(parts) - 1 else "") for i, p in enumerate(parts)
            )
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
