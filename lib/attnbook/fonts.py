"""The font the book's plotly figures are drawn in, and the width of text drawn in it.

A figure that has to fit text inside a plot (a wrapped caption, a legend row, a number in a heatmap
cell) must know how wide that text is drawn. It can only know if the font is known, so the book
pins it: the explorers and figures of :mod:`attnbook.viz` ask for the family :data:`FAMILY`,
which the built book defines with ``@font-face`` from two files it ships
(:func:`write_webfonts`, subsets of):

* **Noto Sans CJK SC** Regular (SIL Open Font License, from the ``mplfonts`` package, the font
  the book's matplotlib figures use for Chinese), for every character it has: Latin, Greek,
  digits, punctuation and Chinese;
* **DejaVu Sans** (Bitstream Vera / public-domain licence, shipped with matplotlib), for the few
  it lacks (``₂``, ``ᵀ``, ``⁻``) and for the mathematical symbols and arrows Noto draws
  full-width, as CJK punctuation (``−``, ``×``, ``→``, ``≤``, ``√``, ``‖``: 1 em in Noto, about
  0.5–0.84 em in DejaVu).

Each ``@font-face`` carries a ``unicode-range`` of exactly its characters, so the browser picks
the face per character just as :func:`text_width` does, and downloads the Chinese face only on a
page that draws Chinese. :func:`text_width` measures with the same files' advance widths
(fontTools: ``cmap`` and ``hmtx``), never with a per-character constant. Kerning is not applied
(plotly's SVG text does not kern either), and plotly draws ``<sub>``/``<sup>`` at 70 % of the
size.

Outside the built book (a live explorer in JupyterLab) the family is not defined and the
browser draws with its own ``sans-serif``: the live figure is drawn for the same widths, and the
margins it keeps (``automargin``, wrapped text at the measured width) are what keeps it readable.
"""

from __future__ import annotations

import functools
import hashlib
import html as _html
import io
import re
import unicodedata
from pathlib import Path

from .checks import check_real, check_text

__all__ = [
    "FAMILY",
    "CSS_FAMILY",
    "BASE_CHARS",
    "NO_LINE_START",
    "NO_LINE_END",
    "font_paths",
    "text_width",
    "wrap_html",
    "webfont_chars",
    "write_webfonts",
]

#: The family name of the book's figure font (defined by the built book's ``@font-face``).
FAMILY = "attnbook-sans"
#: What a plotly figure asks for (the book's font, else the browser's sans-serif).
CSS_FAMILY = f"{FAMILY}, sans-serif"
#: Size of ``<sub>``/``<sup>`` text relative to the text around it, as plotly draws it.
_SMALL_SCALE = 0.7

_TAG = re.compile(r"<[^>]*>")
_SMALL = re.compile(r"<(sub|sup)>(.*?)</\1>", re.IGNORECASE | re.DOTALL)


def font_paths() -> tuple[Path, Path]:
    """The two font files, in the order a character is looked up: Noto Sans CJK SC, DejaVu Sans.

    Raises:
        RuntimeError: if ``mplfonts`` or matplotlib's DejaVu Sans is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the figure font comes from the mplfonts package: pip install mplfonts")
    noto = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NotoSansCJKsc-Regular.otf"
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the fallback figure font is matplotlib's DejaVu Sans: pip install matplotlib"
        )
    dejavu = (
        Path(list(spec.submodule_search_locations)[0])
        / "mpl-data"
        / "fonts"
        / "ttf"
        / "DejaVuSans.ttf"
    )
    for path in (noto, dejavu):
        if not path.is_file():
            raise RuntimeError(f"figure font not found: {path}")
    return noto, dejavu


@functools.lru_cache(maxsize=None)
def _metrics() -> tuple[tuple[dict[int, float], ...], float]:
    """Per font, ``{code point: advance in em}``; and the fallback advance (DejaVu's ``?``)."""
    from fontTools.ttLib import TTFont

    out = []
    for path in font_paths():
        font = TTFont(str(path), lazy=True)
        upm = font["head"].unitsPerEm
        hmtx = font["hmtx"]
        out.append({cp: hmtx[name][0] / upm for cp, name in font.getBestCmap().items()})
    return tuple(out), out[1][ord("?")]


def _is_math_symbol(cp: int) -> bool:
    """Whether ``cp`` is a mathematical symbol or an arrow, not a wide East Asian character.

    Mathematical: Unicode's category Sm, and ``‖``; arrows: U+2190–U+21FF. Other symbols
    (``℃``, ``■``, ``★``) are not: in Chinese text they belong full-width. Noto Sans CJK
    draws ``×``, ``−``, ``→``, ``≤``, ``√``, ``‖`` full-width (1 em, as CJK punctuation),
    which spaces an English formula apart, so DejaVu Sans draws them.
    """
    ch = chr(cp)
    return (
        unicodedata.category(ch) == "Sm" or 0x2190 <= cp <= 0x21FF or ch == "‖"
    ) and unicodedata.east_asian_width(ch) not in ("W", "F")


def _font_index(cp: int) -> int | None:
    """Which of :func:`font_paths` draws code point ``cp`` (``None``: neither has it).

    Noto Sans CJK SC draws what it has, except a mathematical symbol it draws full-width that
    DejaVu Sans has (:func:`_is_math_symbol`).
    """
    (noto, dejavu), _ = _metrics()
    if cp in noto and not (cp in dejavu and noto[cp] >= 0.9 and _is_math_symbol(cp)):
        return 0
    return 1 if cp in dejavu else None


def _advance(ch: str) -> float:
    fonts, missing = _metrics()
    i = _font_index(ord(ch))
    return missing if i is None else fonts[i][ord(ch)]


def _plain_width(text: str) -> float:
    return sum(_advance(ch) for ch in _html.unescape(_TAG.sub("", text)))


def text_width(text: str, size_px: float) -> float:
    """Width in px of one line of plotly pseudo-HTML drawn in :data:`FAMILY` at ``size_px``.

    Tags are not drawn, entities are decoded, ``<sub>``/``<sup>`` text is 70 % of the size;
    each character's advance comes from the font that draws it (Noto Sans CJK SC, else DejaVu
    Sans, and DejaVu for the mathematical symbols Noto draws full-width; a character neither
    has counts as DejaVu's ``?``).

    Args:
        text: one line (no ``<br>``).
        size_px: font size in CSS px, > 0.

    Returns:
        The width in CSS px (float).

    Raises:
        TypeError: if ``text`` is not a string or ``size_px`` not a real number.
        ValueError: if ``size_px`` is not a finite positive number.
    """
    check_text(text, "text")
    size_px = check_real(size_px, "size_px", minimum=0, strict=True)
    small = sum(_plain_width(m.group(2)) for m in _SMALL.finditer(text))
    return (_plain_width(text) - (1 - _SMALL_SCALE) * small) * size_px


# ---------------------------------------------------------------------------------------------
# Lines that fit a width
# ---------------------------------------------------------------------------------------------

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
#: Punctuation a line may not start with (Chinese line-breaking rules, 避头点), the one rule for
#: every text the book wraps: figure labels here and in :mod:`attnbook.mpl_figures`, printed
#: output in :mod:`attnbook.printed`.
NO_LINE_START = frozenset("，。、；：！？）」』”’》〉】…％")
#: Punctuation a line may not end with (避尾点).
NO_LINE_END = frozenset("（「『“‘《〈【")


def _is_wide(ch: str) -> bool:
    """True for a full-width character (CJK ideographs, full-width punctuation)."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _units(line: str) -> list[tuple[str, str]]:
    """Split one line where it may break: ``(separator before, unit)`` pairs.

    A break may fall at a space outside a tag (the space is dropped there) or between two
    full-width characters or a full-width character and its neighbour (Chinese has no spaces;
    the separator is then ``""``). Tags stay whole.
    """
    units: list[tuple[str, str]] = []
    cur, sep, in_tag = [], "", False

    def flush(next_sep):
        nonlocal cur, sep
        if cur:
            units.append((sep, "".join(cur)))
            cur, sep = [], next_sep
        elif next_sep == " ":
            sep = " " if units else ""

    for ch in line:
        if ch == "<":
            in_tag = True
        if in_tag:
            cur.append(ch)
            if ch == ">":
                in_tag = False
            continue
        if ch == " ":
            flush(" ")
        elif ch in NO_LINE_START:
            # Closing punctuation stays at the end of the line it closes.
            if not cur and units and sep == "":
                prev_sep, prev = units.pop()
                cur, sep = list(prev), prev_sep
            cur.append(ch)
            flush("")
        elif _is_wide(ch):
            if not (cur and cur[-1] in NO_LINE_END):
                flush("")
            cur.append(ch)
            if ch not in NO_LINE_END:
                flush("")
        else:
            cur.append(ch)
    flush("")
    return units


#: Relations kept on one line with both their sides (``ln(4) = 1.386``).
_RELATIONS = {"=", "≈", "≠", "<", ">", "≤", "≥", "→"}


@functools.lru_cache(maxsize=1)
def _segmenter():
    """``jieba.lcut`` with its log quiet, or ``None`` where jieba is not installed."""
    try:
        import jieba
    except ImportError:
        return None
    import logging

    jieba.setLogLevel(logging.WARNING)  # it logs its dictionary loading to stderr
    return jieba.lcut


def _words(units: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Join :func:`_units` so that a line breaks only where a reader would break it.

    Between Chinese characters a break falls only between two words (jieba's segmentation,
    the one the book's search uses): "注意力" is one unit, not three. A number stays with the
    measure word or unit after it ("8 个", "256 倍"), a one-character measure word with the
    word it counts, Chinese or Latin ("8 个 token"), and a relation (``=``, ``≈``, ``→``...)
    with both its sides. :func:`wrap_html` splits a joined unit again where it alone is wider
    than its line.
    """
    cut = _segmenter()
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(units):
        j = i + 1
        while j < len(units) and units[j][0] == "":
            j += 1
        chain = units[i:j]  # units with no space between them
        if cut is not None and len(chain) > 1 and not any("<" in u for _, u in chain):
            ends, pos = set(), 0
            for word in cut("".join(u for _, u in chain)):
                pos += len(word)
                ends.add(pos)
            pos = 0
            for sep, u in chain:
                if out and pos and pos not in ends:
                    out[-1] = (out[-1][0], out[-1][1] + u)
                else:
                    out.append((sep, u))
                pos += len(u)
        else:
            out.extend(chain)
        i = j
    joined: list[tuple[str, str]] = []
    keep = None  # what the previous unit holds on to: "any" next unit, or the next "word"
    for sep, u in out:
        after_number = (
            sep == " " and bool(joined) and joined[-1][1][-1:].isdigit() and _is_wide(u[0])
        )
        counted = keep == "word" and (sep == "" or (u[0].isalpha() and not _is_wide(u[0])))
        glued = bool(joined) and (
            keep == "any" or counted or after_number or (sep == " " and u in _RELATIONS)
        )
        if glued:
            joined[-1] = (joined[-1][0], joined[-1][1] + sep + u)
        else:
            joined.append((sep, u))
        # A relation keeps what follows it; a one-character measure word after a number
        # keeps the word it counts, the next Chinese word or, after a space, a Latin one
        # ("8 个 token", not "8 个" then "token").
        keep = "any" if u in _RELATIONS else "word" if after_number and len(u) == 1 else None
    return joined


def wrap_html(text: str, max_px: float, font_px: float = 13) -> str:
    """Insert ``<br>`` into plotly pseudo-HTML so that each line fits ``max_px``.

    Widths are :func:`text_width`'s (the font's own advances). Existing ``<br>`` are kept;
    lines are broken greedily at spaces outside tags and between Chinese words (jieba's
    segmentation; between any two Chinese characters only where a word alone is wider than the
    line), never inside a tag such as ``<span style='...'>``, between a number and the
    measure word after it or that word and the one it counts ("8 个 token"), or beside a
    relation such as ``=``. A single Latin word wider than
    ``max_px`` stays whole on its own line.

    Args:
        text: the text (plotly's pseudo-HTML: ``<br>``, ``<b>``, ``<sub>``, ``<span>``...).
        max_px: the width available, in px.
        font_px: the font size, in px.

    Returns:
        The text with line breaks; unchanged when every line already fits.

    Raises:
        TypeError: if ``text`` is not a string or ``max_px``/``font_px`` not a real number.
        ValueError: if ``max_px`` is nan or ``font_px`` not a finite positive number.
    """
    check_text(text, "text")
    max_px = check_real(max_px, "max_px", allow_inf=True)
    font_px = check_real(font_px, "font_px", minimum=0, strict=True)
    out_lines = []
    for line in _BR.split(text):
        if text_width(line, font_px) <= max_px:
            out_lines.append(line)
            continue
        cur = ""
        units = []
        for sep, unit in _words(_units(line)):
            if text_width(unit, font_px) > max_px:  # too wide alone: its finer breaks
                finer = _units(unit)
                units.extend([(sep, finer[0][1])] + finer[1:])
            else:
                units.append((sep, unit))
        for sep, unit in units:
            trial = unit if not cur else cur + sep + unit
            if cur and text_width(trial, font_px) > max_px:
                out_lines.append(cur)
                cur = unit
            else:
                cur = trial
        out_lines.append(cur)
    return "<br>".join(out_lines)


# ---------------------------------------------------------------------------------------------
# The web fonts of the built book
# ---------------------------------------------------------------------------------------------

#: Characters every edition's figures may draw whatever their labels say (printable ASCII,
#: Latin-1, Greek, and the notation of the book's labels).
#:
#: :meta hide-value:
BASE_CHARS = (
    "".join(chr(c) for c in range(0x20, 0x7F))
    + "".join(chr(c) for c in range(0xA0, 0x100))
    + "".join(chr(c) for c in range(0x391, 0x3CA))
    + "‖√∂∑∏∞≈≠≤≥±×÷·−–—…→←↑↓⇒∈∝∥⊙⊗′″‘’“”•°₀₁₂₃₄₅₆₇₈₉⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺ᵀℓ∇∫√%‰€"
)


def webfont_chars(texts) -> str:
    """The sorted characters of :data:`BASE_CHARS` and of ``texts`` (an iterable of strings)."""
    chars = set(BASE_CHARS)
    for text in texts:
        chars.update(_html.unescape(text))
    return "".join(sorted(ch for ch in chars if ch.isprintable() and ch != "\x00"))


def _ranges(codepoints) -> str:
    """CSS ``unicode-range`` of a set of code points, as merged runs."""
    cps = sorted(codepoints)
    runs, start, prev = [], None, None
    for cp in cps:
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            runs.append((start, prev))
            start = prev = cp
    if start is not None:
        runs.append((start, prev))
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in runs)


def write_webfonts(out_dir, chars: str) -> dict[str, Path]:
    """Write the book's figure font for ``chars``: two WOFF subsets and their ``@font-face`` CSS.

    The fonts are subset with fontTools' subsetter to the glyphs of ``chars`` (Noto Sans CJK SC,
    16 MB whole, becomes a few hundred kB); files whose inputs did not change are not rewritten
    (the CSS names a hash of the characters and the font files).

    Args:
        out_dir: folder to write into (created if missing), e.g. a Sphinx build's ``_static``.
        chars: the characters the figures draw (:func:`webfont_chars`).

    Returns:
        ``{file name: path}`` of the CSS (``attnbook-fonts.css``) and the font files.
    """
    from fontTools import subset

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = font_paths()
    digest = hashlib.sha256(
        chars.encode("utf-8") + b"".join(str(p.stat().st_size).encode() for p in paths)
    )
    tag = digest.hexdigest()[:12]
    css_path = out_dir / "attnbook-fonts.css"
    names = [f"attnbook-sans-{tag}-{i}.woff" for i in range(len(paths))]
    written = {"attnbook-fonts.css": css_path} | {n: out_dir / n for n in names}
    if (
        css_path.is_file()
        and f"/* {tag} */" in css_path.read_text(encoding="utf-8")
        and all((out_dir / n).is_file() for n in names)
    ):
        return written
    remaining = {ord(ch) for ch in chars}
    rules = [
        f"/* {tag} */",
        f"/* The figures' font ({FAMILY}): subsets of Noto Sans CJK SC (SIL Open Font "
        "License 1.1) and DejaVu Sans (Bitstream Vera licence), written by "
        "attnbook.fonts.write_webfonts. */",
    ]
    for i, (path, name) in enumerate(zip(paths, names)):
        mine = {cp for cp in remaining if _font_index(cp) == i}
        remaining -= mine
        if not mine:
            continue
        options = subset.Options()
        options.flavor = "woff"
        options.layout_features = []
        options.name_IDs = ["*"]
        options.notdef_outline = True
        options.drop_tables += ["FFTM"]  # FontForge's timestamps: nothing to draw with
        font = subset.load_font(str(path), options)
        sub = subset.Subsetter(options)
        sub.populate(unicodes=mine)
        sub.subset(font)
        buf = io.BytesIO()
        subset.save_font(font, buf, options)
        (out_dir / name).write_bytes(buf.getvalue())
        rules.append(
            f"@font-face {{ font-family: {FAMILY}; font-style: normal; font-weight: 400; "
            f"font-display: swap; src: url({name}) format('woff'); "
            f"unicode-range: {_ranges(mine)}; }}"
        )
    for old in out_dir.glob("attnbook-sans-*.woff"):
        if old.name not in names:
            old.unlink()
    css_path.write_text("\n".join(rules) + "\n", encoding="utf-8")
    return written
