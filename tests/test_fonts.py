"""attnbook.fonts: the figure font's metrics and the web fonts the built book ships.

Widths are checked against FreeType (through PIL), an independent reader of the same files; the
web fonts are read back with fontTools and must hold every character asked for.
"""

from __future__ import annotations

import re

import pytest

from attnbook import fonts


def code_points(unicode_range: str) -> set[int]:
    """The code points of a CSS unicode-range ("U+20-7E, U+2016")."""
    out = set()
    for r in unicode_range.split(", "):
        a, _, b = r[2:].partition("-")
        out |= set(range(int(a, 16), int(b or a, 16) + 1))
    return out


def pil_width(path, text: str, px: float) -> float:
    from PIL import ImageFont

    return ImageFont.truetype(str(path), 100).getlength(text) * px / 100


@pytest.mark.parametrize(
    "text", ["WWWWWWWWWW", "iiiiiiiiii", "query position i", "查询位置 i", "W = 0.542"]
)
def test_width_is_the_fonts_own(text):
    noto, _ = fonts.font_paths()
    assert fonts.text_width(text, 13) == pytest.approx(pil_width(noto, text, 13), rel=0.01)


def test_a_character_noto_lacks_is_measured_in_dejavu():
    noto, dejavu = fonts.font_paths()
    assert fonts.text_width("₂", 20) == pytest.approx(pil_width(dejavu, "₂", 20), rel=0.01)
    assert fonts.text_width("a₂", 20) == pytest.approx(
        pil_width(noto, "a", 20) + pil_width(dejavu, "₂", 20), rel=0.01
    )


@pytest.mark.parametrize("symbol", ["‖", "−", "×", "→", "≤", "√"])
def test_math_symbols_noto_draws_full_width_are_measured_and_served_in_dejavu(symbol, tmp_path):
    # Noto Sans CJK draws these as CJK punctuation, one em wide ("‖W‖" read "‖ W ‖").
    noto, dejavu = fonts.font_paths()
    assert pil_width(noto, symbol, 20) == pytest.approx(20, rel=0.01)
    assert pil_width(dejavu, symbol, 20) < 18
    assert fonts.text_width(f"a{symbol}b", 20) == pytest.approx(
        pil_width(noto, "ab", 20) + pil_width(dejavu, symbol, 20), rel=0.01
    )
    css = fonts.write_webfonts(tmp_path, fonts.webfont_chars([symbol]))["attnbook-fonts.css"]
    (dejavu_face,) = re.findall(
        r"-1\.woff\) format\('woff'\); unicode-range: ([^;]+);", css.read_text(encoding="utf-8")
    )
    assert ord(symbol) in code_points(dejavu_face)


@pytest.mark.parametrize("symbol", ["℃", "■", "★"])
def test_other_symbols_stay_with_the_chinese_face(symbol):
    # Not mathematics: in Chinese text these are drawn full-width, as Noto Sans CJK has them.
    noto, _ = fonts.font_paths()
    assert fonts.text_width(symbol, 20) == pytest.approx(pil_width(noto, symbol, 20), rel=0.01)


def test_markup_is_not_drawn_and_subscripts_are_smaller():
    assert fonts.text_width("<b>a&amp;b</b>", 10) == pytest.approx(fonts.text_width("a&b", 10))
    assert fonts.text_width("d<sub>k</sub>", 10) == pytest.approx(
        fonts.text_width("d", 10) + 0.7 * fonts.text_width("k", 10)
    )


@pytest.mark.parametrize(
    "args, exc, name",
    [
        ((3, 10), TypeError, "text"),
        (("a", 0), ValueError, "size_px"),
        (("a", "10"), TypeError, "size_px"),
        (("a", float("nan")), ValueError, "size_px"),
    ],
)
def test_bad_input_names_the_argument(args, exc, name):
    with pytest.raises(exc, match=name):
        fonts.text_width(*args)


def test_web_fonts_hold_every_character_asked_for(tmp_path):
    from fontTools.ttLib import TTFont

    chars = fonts.webfont_chars(["查询位置 i：权重 0.542", "γ = ‖W<sub>hh</sub>‖₂ ᵀ"])
    out = fonts.write_webfonts(tmp_path, chars)
    css = out["attnbook-fonts.css"].read_text(encoding="utf-8")
    faces = re.findall(r"src: url\(([^)]+)\) format\('woff'\); unicode-range: ([^;]+);", css)
    assert len(faces) == 2
    covered: set[int] = set()
    for name, ranges in faces:
        font = TTFont(str(tmp_path / name))
        assert font.flavor == "woff"
        cmap = set(font.getBestCmap())
        mine = code_points(ranges)
        assert mine <= cmap, f"{name} lacks {sorted(mine - cmap)[:5]}"
        assert not (mine & covered), "a character in two faces"
        covered |= mine
    assert {ord(c) for c in chars} <= covered
    # The Chinese face is a subset, not the 16 MB font.
    assert sum((tmp_path / n).stat().st_size for n, _ in faces) < 400_000
    # Unchanged inputs: nothing rewritten.
    stamp = {p: p.stat().st_mtime_ns for p in out.values()}
    assert fonts.write_webfonts(tmp_path, chars) == out
    assert {p: p.stat().st_mtime_ns for p in out.values()} == stamp


def test_chinese_is_measured_one_em_a_character_and_broken_between_characters():
    assert fonts.text_width("注意力", 10) == pytest.approx(30.0)  # 1 em each in Noto CJK
    wrapped = fonts.wrap_html("每个键对这个查询的权重", 60, 10)
    lines = wrapped.split("<br>")
    assert "".join(lines) == "每个键对这个查询的权重" and len(lines) == 2
    assert all(fonts.text_width(line, 10) <= 60 for line in lines)
    # Latin words still break only at spaces, and tags stay whole.
    assert fonts.wrap_html("<b>注意力</b> weights here", 70, 10).split("<br>")[0] in (
        "<b>注意力</b>",
        "<b>注意力</b> weights",
    )


def test_chinese_lines_never_start_with_closing_or_end_with_opening_punctuation():
    text = "注意力很重要。它（注意力）决定权重，对吗？"
    for width in (30, 40, 55, 70, 90):
        lines = fonts.wrap_html(text, width, 13).split("<br>")
        assert "".join(lines) == text
        assert not any(line[0] in "，。）？" for line in lines[1:]), lines
        assert not any(line[-1] == "（" for line in lines), lines
    # Latin text with its own punctuation still breaks only at spaces.
    assert "1.<br>" not in fonts.wrap_html("o = (0.00, 1.64)；与 fruit 的余弦", 120, 13)


@pytest.mark.parametrize(
    "text, width, kept",
    [
        ("19.9 个词元的周期", 80, ["词元"]),  # a word is not split
        ("查询 8 个词元，其中 2 个是填充词元", 90, ["8 个词元"]),  # a count stays with its noun
        ("查询 8 个 token，其中 2 个是填充 token", 90, ["8 个 token"]),  # a Latin noun too
        ("上下文为 4096 个 token 时", 100, ["4096 个 token"]),
        ("每个 token 的键值缓存", 40, ["token"]),  # a Latin word is not split, even at its width
        ("朴素 softmax 注意力的深灰色部分", 100, ["注意力", "深灰色"]),
        ("（上限 ln(4) = 1.386 奈特）", 160, ["ln(4) = 1.386 奈特"]),  # a relation keeps its sides
    ],
)
def test_chinese_breaks_between_words_not_inside_them(text, width, kept):
    wrapped = fonts.wrap_html(text, width, 13)
    lines = wrapped.split("<br>")
    assert all(fonts.text_width(line, 13) <= width for line in lines), lines
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost
    for word in kept:
        assert any(word in line for line in lines), (word, lines)


def test_a_word_wider_than_its_line_is_still_broken_to_fit():
    lines = fonts.wrap_html("注意力机制", 30, 13).split("<br>")
    assert "".join(lines) == "注意力机制" and len(lines) >= 2
    assert all(fonts.text_width(line, 13) <= 30 for line in lines), lines
