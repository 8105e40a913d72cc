"""Matplotlib figures drawn by chapter code, shown in the reader's language.

The chapters' own plotting code draws in English. This module draws such a figure again with
its labels translated after the fact (:func:`translated_figure`, from the label catalogs of
:mod:`attnbook.i18n`, ``lib/attnbook/locale/zh_CN/ch*.po``), renders it as PNG
(:func:`figure_png`) and hooks both into IPython's display (:func:`install_display`):

* **Live** (JupyterLab): after ``attnbook.i18n.set_language("zh_CN")`` (or with
  ``ATTNBOOK_LANG=zh_CN``) every figure shown is drawn with Chinese labels.
  :func:`attnbook.viz.use_book_style`, which every chapter calls, installs the hook; importing
  this module also makes :func:`attnbook.i18n.set_language` re-install it.
* **The built book**: each figure output carries, next to its English ``image/png``, an
  :data:`attnbook.edition_outputs.MIME` entry with one PNG per edition, and one more per
  edition drawn for a phone's column (:func:`figure_bundle`, :func:`relaid_out`); MyST-NB's
  :class:`attnbook.edition_outputs.EditionsMimeRenderer` shows each edition its own, and the
  browser picks the column's or the phone's drawing (``book/_ext/attnbook_figures.py``).

Chinese text needs a CJK font: :func:`cjk_font_path` is Noto Sans CJK SC (SIL Open Font
License) from the PyPI package ``mplfonts`` — installed with the book, never downloaded.
Matplotlib falls back to it for the glyphs DejaVu Sans lacks; a glyph missing from both
("Glyph ... missing from font(s)") is an error (:class:`MissingGlyphError`), not tofu.

matplotlib is imported lazily, when a figure is drawn.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import re
import unicodedata
import warnings
from pathlib import Path

from . import i18n
from .checks import check_choice
from .edition_outputs import MIME
from .fonts import NO_LINE_END, NO_LINE_START

__all__ = [
    "MissingGlyphError",
    "translated_figure",
    "figure_png",
    "figure_bundle",
    "relaid_out",
    "LayoutCollapsed",
    "PHONE_PX",
    "cjk_font_path",
    "install_display",
]

#: Width in CSS pixels of the book's text column on a phone (the same number as
#: :data:`attnbook.viz.PHONE_PX`, which imports this module: tests/test_i18n.py checks they
#: agree): :func:`figure_bundle` draws every wider figure again at this width.
PHONE_PX = 358

_MATH = re.compile(r"(?<!\\)\$(?:\\.|[^$\\])*\$")
_saved_png: dict = {}
#: The last figure :func:`_book_png` drew: ``{"image/png": (figure, base64 PNG, glyph messages)}``.
_drawn: dict = {}


class MissingGlyphError(RuntimeError):
    """A figure label has a character that no installed font (CJK font included) can draw."""


def _language(language: str | None) -> str:
    if language is None:
        return i18n.get_language()
    return check_choice(language, "language", i18n.LANGUAGES)


def _translating_formatter_class():
    from matplotlib.ticker import Formatter

    class TranslatingFormatter(Formatter):
        """A tick formatter whose labels are another's, translated when the catalog knows them."""

        def __init__(self, inner, language):
            self.inner, self.language = inner, language

        def __call__(self, x, pos=None):
            return i18n.translate(self.inner(x, pos), self.language)

        def format_ticks(self, values):
            return [i18n.translate(s, self.language) for s in self.inner.format_ticks(values)]

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
    ``matplotlib.text.Text`` artists; each is looked up with :func:`attnbook.i18n.translate`.
    Tick labels are often data (the tokens of a sentence a model read): they are translated
    when the catalog has them and never reported missing.

    Args:
        fig: a ``matplotlib.figure.Figure``.
        language: default :func:`attnbook.i18n.get_language`.
        missing: if given, receives the labels that needed a translation and had none.

    Raises:
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    language = _language(language)
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
                    new = i18n.translate(text, language)
                else:
                    new = i18n.translate_checked(text, language, sink)
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


#: The start of matplotlib's warning when constrained layout cannot fit a figure's axes (and
#: tight layout's, for a figure laid out by it).
_COLLAPSED = ("constrained_layout not applied", "Tight layout not applied")


class LayoutCollapsed(ValueError):
    """A figure's panels and text do not fit the width it was to be laid out at.

    Raised by :func:`relaid_out`: constrained layout would shrink an axes to nothing.
    """


@contextlib.contextmanager
def relaid_out(fig, width_px: int):
    """Temporarily lay ``fig`` out ``width_px`` CSS pixels wide; restore it on exit.

    The font sizes stay in points, so the text keeps its size while the axes shrink;
    constrained layout (the book's default) places the panels again. The height stays what it
    was in inches, so a figure drawn for the column grows relatively taller on a phone. A title
    (of an axes, or the figure's) that is now wider than its axes (or the figure) is broken
    into lines, between words or between two CJK characters, measured by matplotlib's
    renderer, so that neighbouring titles neither overlap nor leave the figure.

    Raises:
        TypeError: if ``fig`` is not a matplotlib ``Figure``.
        ValueError: if ``width_px`` is not a positive integer.
        LayoutCollapsed: if even with its titles broken the panels and their text do not fit
            ``width_px`` (its layout engine gives up; the figure is restored first), or the
            figure has no layout engine (its axes were placed by hand).
    """
    from matplotlib.figure import Figure

    from .checks import check_int

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    width_px = check_int(width_px, "width_px", minimum=1)
    size = fig.get_size_inches().copy()
    engine = fig.get_layout_engine()
    titles = [(ax.title, ax) for ax in fig.axes]
    if fig.get_suptitle():
        titles.append((fig._suptitle, fig))  # the Text that fig.suptitle made
    texts = [(text, text.get_text()) for text, _ in titles]
    if engine is None:
        # Its axes were placed by hand, for its own width: nothing can place them again.
        raise LayoutCollapsed(f"the figure has no layout engine (its axes were placed by hand); "
                              f"it cannot be laid out again at {width_px} px")
    try:
        fig.set_size_inches(width_px / fig.dpi, size[1], forward=False)
        with warnings.catch_warnings():
            # Before its titles are broken into lines a figure may not fit; checked below.
            warnings.filterwarnings("ignore", "constrained_layout not applied")
            warnings.filterwarnings("ignore", "Tight layout not applied")
            fig.draw_without_rendering()  # places the axes at the new width
        renderer = fig.canvas.get_renderer()
        for text, box in titles:
            if text.get_text() and text.get_visible():
                limit = box.get_window_extent(renderer).width
                text.set_text(_wrapped(text, limit, renderer))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.draw_without_rendering()
        if any(str(w.message).startswith(_COLLAPSED) for w in caught):
            raise LayoutCollapsed(
                f"the figure's panels do not fit {width_px} px with its text at its size "
                f"(constrained layout collapsed an axes to zero size)")
        yield fig
    finally:
        for text, original in texts:
            text.set_text(original)
        fig.set_size_inches(size, forward=False)


def _pieces(line: str) -> list[tuple[bool, str]]:
    """``(space before, piece)`` pairs: a line may break before each piece.

    A piece is a word, a math span, or one East Asian wide character; closing punctuation
    (:data:`attnbook.fonts.NO_LINE_START`) joins the piece before it and opening punctuation
    (:data:`attnbook.fonts.NO_LINE_END`) the piece after it, so no line starts with "，" or
    "）" or ends with "（".
    """
    out: list[list] = []
    space = False
    for tok in re.findall(r"\s+|(?<!\\)\$(?:\\.|[^$\\])*\$|.", line):
        if tok.isspace():
            space = True
            continue
        wide = len(tok) == 1 and unicodedata.east_asian_width(tok) in ("W", "F")
        if out and not space and not wide and not out[-1][2]:
            out[-1][1] += tok
        else:
            out.append([space, tok, wide])
        space = False
    joined: list[list] = []
    for sp, tok, wide in out:
        if joined and not sp and (tok[0] in NO_LINE_START or joined[-1][1][-1] in NO_LINE_END):
            joined[-1][1] += tok
        else:
            joined.append([sp, tok, wide])
    return [(sp, tok) for sp, tok, _ in joined]


def _wrapped(text, limit: float, renderer) -> str:
    """The string of matplotlib ``text`` broken into lines at most ``limit`` px wide.

    A piece (:func:`_pieces`) wider than that stays whole; ``text`` is left as it was.
    """
    original = text.get_text()

    def width(candidate: str) -> float:
        text.set_text(candidate)
        return text.get_window_extent(renderer).width

    try:
        if width(original) <= limit:
            return original
        lines = []
        for line in original.split("\n"):
            current = ""
            for space, piece in _pieces(line):
                candidate = current + (" " if space and current else "") + piece
                if current and width(candidate) > limit:
                    lines.append(current)
                    current = piece
                else:
                    current = candidate
            lines.append(current)
        return "\n".join(lines)
    finally:
        text.set_text(original)


def figure_png(fig, language: str | None = None, *, missing: set[str] | None = None,
               glyphs: list[str] | None = None, width_px: int | None = None) -> str:
    """A matplotlib figure drawn with its labels in ``language``, as base64 PNG.

    Drawn as IPython's inline backend draws it (``bbox_inches="tight"``), with Noto Sans CJK SC
    as the fallback font for the glyphs of the default font lacks.

    Args:
        fig: a ``matplotlib.figure.Figure``.
        language: default :func:`attnbook.i18n.get_language`.
        missing: if given, receives the labels that had no translation.
        glyphs: if given, receives matplotlib's "Glyph ... missing from font(s)" messages
            instead of raising.
        width_px: if given, the figure is laid out this many CSS pixels wide for this drawing
            (:func:`relaid_out`: a phone's column), its text in the same points, and the PNG
            is exactly that wide (no ``bbox_inches="tight"``); :class:`LayoutCollapsed` if its
            panels do not fit.

    Returns:
        The base64 ``str`` of the PNG (what a notebook's ``image/png`` output holds).

    Raises:
        MissingGlyphError: if a character of a label is in no font (matplotlib would draw a
            box) and ``glyphs`` is None.
        TypeError: if ``fig`` is not a matplotlib figure.
    """
    import logging

    language = _language(language)
    buf = io.BytesIO()
    # Mathtext reports a missing glyph through logging, plain text through warnings.
    mathtext_log = _MathtextGlyphs()
    logger = logging.getLogger("matplotlib.mathtext")
    logger.addHandler(mathtext_log)
    # The CJK font has one weight: a bold title drawn with it falls back to regular, which
    # matplotlib logs at every draw (into the chapter's output). Expected; not shown.
    fonts_log = logging.getLogger("matplotlib.font_manager")
    fonts_log.addFilter(_no_weight_fallback)
    resize = (relaid_out(fig, width_px) if width_px is not None
              else contextlib.nullcontext(fig))
    try:
        with translated_figure(fig, language, missing=missing), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Inside: the warnings of relaid_out's layout pass are caught too (a glyph missing
            # there is missing in the drawing).
            with resize:
                # At a given width the drawing is exactly that wide (constrained layout keeps
                # the text inside); "tight" could make it wider than the phone's column.
                fig.canvas.print_figure(buf, format="png",
                                        bbox_inches="tight" if width_px is None else None)
    finally:
        logger.removeHandler(mathtext_log)
        fonts_log.removeFilter(_no_weight_fallback)
    if width_px is not None and any(str(w.message).startswith(_COLLAPSED) for w in caught):
        # The layout pass fitted, the drawing did not (its renderer measured the text wider).
        raise LayoutCollapsed(f"the figure's panels do not fit {width_px} px when drawn")
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
    """The editions payload (:data:`~attnbook.edition_outputs.MIME`) of a matplotlib figure.

    Each edition gets the figure as drawn for the column and, if it is wider than a phone's
    column (:data:`PHONE_PX`), drawn again for the phone (:func:`relaid_out`: the panels
    narrower, the text the same size), unless its panels do not fit there
    (:class:`LayoutCollapsed`: then no edition gets a phone drawing). The book's renderer
    gives the browser both, and it shows the phone drawing in a narrow window.

    Returns:
        ``{"kind": "image/png", "editions": {language: base64 PNG}, "narrow": {language:
        base64 PNG, PHONE_PX wide} (empty for a figure no wider than that), "too_wide": whether
        its panels do not fit a phone (then "narrow" is empty and the page lets the column's
        drawing scroll sideways on a phone), "untranslated": [labels], "missing_glyphs":
        [matplotlib's messages]}``; the book's renderer turns the
        last two into build warnings (errors in the strict build).

    Raises:
        TypeError: if ``fig`` is not a matplotlib ``Figure`` or ``languages`` is not a tuple or
            list of language codes (a single string is refused, not read letter by letter).
        ValueError: if a language is not one of :data:`attnbook.i18n.LANGUAGES`.
    """
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(languages, (tuple, list)) or not all(
            isinstance(lang, str) for lang in languages):
        raise TypeError(f"languages must be a tuple of language codes such as ('en', 'zh_CN'), "
                        f"got {languages!r}")
    for lang in languages:
        if lang not in i18n.LANGUAGES:
            raise ValueError(f"languages must be drawn from {i18n.LANGUAGES}, got {lang!r}")
    missing: set[str] = set()
    glyphs: list[str] = []
    drawn = _drawn.pop("image/png", None)
    out, narrow, too_wide = {}, {}, False
    for lang in languages:
        if drawn is not None and drawn[0] is fig and not fig.stale and lang == "en":
            # The English drawing this output's image/png already holds: not drawn again.
            out[lang] = drawn[1]
            glyphs.extend(drawn[2])
        else:
            out[lang] = figure_png(fig, lang, missing=missing, glyphs=glyphs)
    if fig.get_figwidth() * fig.dpi > PHONE_PX:
        try:
            for lang in languages:
                narrow[lang] = figure_png(fig, lang, missing=missing, glyphs=glyphs,
                                          width_px=PHONE_PX)
        except LayoutCollapsed:
            # Too many panels or too much text for a phone's column: the phone shows the
            # column's drawing at its own size, in a box that scrolls sideways (every edition).
            narrow, too_wide = {}, True
    return {"kind": "image/png", "editions": out, "narrow": narrow, "too_wide": too_wide,
            "untranslated": sorted(missing), "missing_glyphs": list(dict.fromkeys(glyphs))}


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

    In a book build (:func:`attnbook.i18n.editions` not empty) a figure's output gets a
    :data:`~attnbook.edition_outputs.MIME` entry with one PNG per edition (its usual English
    ``image/png`` stays, for JupyterLab). Live, with :func:`attnbook.i18n.get_language` not
    English, the ``image/png`` itself is drawn in that language. Called by
    :func:`attnbook.viz.use_book_style` and, once this module is imported, by
    :func:`attnbook.i18n.set_language`; a no-op outside IPython.

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
    langs = i18n.editions()
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
    language = i18n.get_language()
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


# attnbook.i18n.set_language re-installs the display hook for the new language.
i18n.on_language_change(install_display)
