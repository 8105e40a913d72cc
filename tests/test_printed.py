"""attnbook.printed: printed output made in every edition's language from one execution."""

import pytest

from attnbook import edition_outputs, i18n
from attnbook.listing import show_code
from attnbook.printed import Printed, say, table, verbatim


@pytest.fixture
def english(monkeypatch):
    monkeypatch.setitem(i18n._state, "language", None)
    monkeypatch.delenv("ATTNBOOK_LANG", raising=False)
    monkeypatch.delenv("ATTNBOOK_EDITIONS", raising=False)


def test_say_makes_each_language_from_the_catalog(english):
    # printed-listings.po: "The full class: {name}" -> "完整的类：{name}" (written by hand).
    out = say("The full class: {name}", name="attnbook.layers.X")
    assert out.texts == {
        "en": "The full class: attnbook.layers.X",
        "zh_CN": "完整的类：attnbook.layers.X",
    }
    assert out.untranslated == frozenset()
    assert str(out) == repr(out) == "The full class: attnbook.layers.X"


def test_a_message_the_catalogs_lack_prints_in_english_and_is_listed(english):
    out = say("no such message {x:.2f}", x=0.5)
    assert out.texts == {"en": "no such message 0.50", "zh_CN": "no such message 0.50"}
    assert out.untranslated == {"no such message {x:.2f}"}


def test_a_printed_phrase_is_put_in_as_each_languages_text(english):
    inner = say("The full class: {name}", name="A")
    out = say("The full public function: {name}", name=inner)
    assert out.texts == {
        "en": "The full public function: The full class: A",
        "zh_CN": "完整的公开函数：完整的类：A",
    }
    missing = say("The full class: {name}", name=say("zz no such phrase"))
    assert missing.untranslated == {"zz no such phrase"}


def test_a_missing_placeholder_value_names_the_placeholder(english):
    with pytest.raises(KeyError, match=r"\{name\}.*got values for \['nmae'\]"):
        say("The full class: {name}", nmae="x")


def test_the_text_shown_follows_the_readers_language(english, monkeypatch):
    out = say("The full class: {name}", name="A")
    assert out._repr_mimebundle_() == {"text/plain": "The full class: A"}
    i18n.set_language("zh_CN")
    assert out._repr_mimebundle_() == {"text/plain": "完整的类：A"}
    assert out.text("en") == "The full class: A"


def test_during_a_book_build_every_edition_is_carried(english, monkeypatch):
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    payload = say("no such message")._repr_mimebundle_()[edition_outputs.MIME]
    assert payload == {
        "kind": "text/plain",
        "editions": {"en": "no such message", "zh_CN": "no such message"},
        "untranslated": ["no such message"],
    }


def test_adding_printed_texts_joins_lines_per_language(english):
    a = say("The full class: {name}", name="A")
    b = say("The full public function: {name}", name="f")
    both = a + b
    assert both.texts["en"] == "The full class: A\nThe full public function: f"
    assert both.texts["zh_CN"] == "完整的类：A\n完整的公开函数：f"
    assert Printed.lines([a, b]) == both
    assert Printed.lines([]).texts == {"en": "", "zh_CN": ""}
    with pytest.raises(TypeError):
        a + "text"


def test_printed_needs_every_language():
    with pytest.raises(ValueError, match=r"missing \['zh_CN'\]"):
        Printed({"en": "x"})


def test_table_pads_columns_to_the_widest_cell_counting_wide_characters(english):
    # Headings no catalog has: English in both, and listed.
    out = table(["zz rank", "zz share"], [[4, 0.5], [64, 0.25]], formats=["d", ".2f"])
    assert out.texts["en"] == ("zz rank  zz share\n      4      0.50\n     64      0.25")
    assert out.untranslated == {"zz rank", "zz share"}


def test_table_counts_a_chinese_character_as_two_columns(english, monkeypatch):
    monkeypatch.setattr(
        i18n.Labels,
        "__call__",
        lambda self, m, **v: (
            {"en": m, "zh_CN": "权重"}[self.language] if m == "weight" else m.format(**v)
        ),
    )
    out = table(["weight", "n"], [[1, 2]])
    # "权重" is 4 columns wide: the number under it is right-aligned to 4, not 2.
    assert out.texts["zh_CN"] == "权重  n\n   1  2"
    assert out.texts["en"] == "weight  n\n     1  2"


def test_a_printed_cell_shows_each_languages_text(english):
    cell = say("The full class: {name}", name="A")
    out = table(["zz who", "n"], [[cell, 1], [say("zz no such word"), 22]])
    assert out.texts["en"] == (
        "zz who              n\nThe full class: A   1\nzz no such word    22"
    )
    # "完整的类：A" is 11 columns wide, "zz no such word" 15: 4 spaces of padding.
    assert out.texts["zh_CN"].splitlines()[1] == "完整的类：A       1"
    # The words' own misses are listed with the headings'.
    assert out.untranslated == {"zz who", "zz no such word"}  # "n" is no word


def test_table_names_a_row_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"rows\[1\] has 1 values; the header has 2"):
        table(["a", "b"], [[1, 2], [3]])
    with pytest.raises(ValueError, match="formats must have one entry per column"):
        table(["a", "b"], [[1, 2]], formats=["d"])


def test_listing_label_is_in_each_editions_language(english, monkeypatch):
    from attnbook import layers

    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    listing = show_code(
        layers.LearnedPositionalEmbedding.forward, full=layers.LearnedPositionalEmbedding
    )
    payload = listing._repr_mimebundle_()[edition_outputs.MIME]
    assert payload["kind"] == "text/markdown" and payload["untranslated"] == []
    assert (
        "<summary>The full class: attnbook.layers.LearnedPositionalEmbedding</summary>"
        in (payload["editions"]["en"])
    )
    assert (
        "<summary>完整的类：attnbook.layers.LearnedPositionalEmbedding</summary>"
        in (payload["editions"]["zh_CN"])
    )
    # The code itself is the same in both.
    strip = [p.split("<details")[0] for p in payload["editions"].values()]
    assert strip[0] == strip[1]


def test_table_takes_printed_headings_and_cells(english, monkeypatch):
    monkeypatch.setattr(
        i18n.Labels,
        "__call__",
        lambda self, m, **v: (
            ("种子 {s}" if self.language == "zh_CN" else m) if m == "seed {s}" else m
        ),
    )
    out = table(
        [say("seed {s}", s=0), "arm"],
        [[1.5, say("seed {s}", s=7)], [2.25, "Pre-LN"]],
        formats=[".2f", ""],
    )
    assert out.texts["en"] == ("seed 0  arm\n  1.50  seed 7\n  2.25  Pre-LN")
    # "种子 0" is 6 columns wide; the data cell "Pre-LN" stays as it is.
    assert out.texts["zh_CN"] == ("种子 0  arm\n  1.50  种子 7\n  2.25  Pre-LN")


def test_a_printed_value_is_put_in_in_each_language(english, monkeypatch):
    status = Printed({"en": "solved", "zh_CN": "学会了"}, {"solved"})
    out = say("{name:>5}: {status}", name="rnn", status=status)
    assert out.texts == {"en": "  rnn: solved", "zh_CN": "  rnn: 学会了"}
    assert out.untranslated == {"solved"}  # the nested text's gap is reported


def test_a_message_without_words_is_not_looked_up(english):
    out = say("Δ = {d}: {v:.1e}", d=10, v=0.5)
    assert out.texts == {"en": "Δ = 10: 5.0e-01", "zh_CN": "Δ = 10: 5.0e-01"}
    assert out.untranslated == frozenset()
    # Numbers as headings are data; text headings are messages.
    t = table(["n", 16, 32], [["x", 1, 2]])
    assert t.texts["en"].splitlines()[0] == "n  16  32"
    assert t.untranslated == frozenset()


def test_wrap_breaks_at_spaces_and_between_chinese_characters():
    out = Printed(
        {
            "en": "by the translators of the King James Version",
            "zh_CN": "由钦定版圣经的译者翻译，公有领域",
        }
    ).wrap(16)
    assert out.texts["en"] == "by the\ntranslators of\nthe King James\nVersion"
    # 16 columns hold 8 Chinese characters (a comma is one of them).
    assert out.texts["zh_CN"] == "由钦定版圣经的译\n者翻译，公有领域"
    assert all(len(line) <= 16 for line in out.texts["en"].splitlines())
    with pytest.raises(ValueError, match="width must be >= 1, got 0"):
        out.wrap(0)


def test_a_printed_value_is_filled_in_with_each_languages_text(english):
    word = Printed({"en": "ate", "zh_CN": "吃了"})
    out = say("The full class: {name}", name=word)
    assert out.texts == {"en": "The full class: ate", "zh_CN": "完整的类：吃了"}
    # What the value left untranslated stays listed.
    assert say("The full class: {name}", name=say("zz word")).untranslated == {"zz word"}


def test_a_printed_cell_of_a_table_is_padded_in_each_language(english):
    rows = [
        [Printed({"en": "ate", "zh_CN": "吃了"}), 2],
        [Printed({"en": "apple", "zh_CN": "苹果"}), 1],
    ]
    out = table(["zz word", "n"], rows)
    assert out.texts["en"] == "zz word  n\nate      2\napple    1"
    # Each Chinese word is 4 columns wide; the heading (untranslated here) is 7.
    assert out.texts["zh_CN"] == "zz word  n\n吃了     2\n苹果     1"
    assert out.untranslated == {"zz word"}  # "n" has no word to translate


def test_a_message_without_values_is_still_formatted():
    # "{{" is a literal brace with or without values; a missing value is named.
    assert say("a set {{x}} word").texts["en"] == "a set {x} word"
    with pytest.raises(KeyError, match=r"placeholder \{n\}; got values for \[\]"):
        say("rows: {n} of {m}")


def test_format_errors_name_the_message_field_and_value():
    import numpy as np

    with pytest.raises(ValueError, match=r"\{x:\.3f\} got ndarray of shape \(2,\)"):
        say("loss {x:.3f}", x=np.ones(2))
    with pytest.raises(ValueError, match="positional field"):
        say("word {} here")
    with pytest.raises(TypeError, match=r"message must be a string, got None \(NoneType\)"):
        say(None)
    with pytest.raises(ValueError, match=r"rows\[1\]\[0\] \(ndarray of shape \(2,\)\)"):
        table(["zz a"], [[1.0], [np.ones(2)]], formats=[".3f"])


def test_table_takes_any_iterable_of_rows_and_leaves_text_cells_unformatted():
    out = table(["zz x"], (r for r in [[1.5], ["n/a"]]), formats=[".2f"])
    assert out.texts["en"].splitlines() == ["zz x", "1.50", "n/a"]
    with pytest.raises(TypeError, match="header must be a sequence"):
        table("ab", [[1, 2]])
    with pytest.raises(TypeError, match=r"rows\[0\] must be a sequence of cells"):
        table(["a", "b"], ["xy"])
    with pytest.raises(ValueError, match="align must be made of"):
        table(["a"], [[1]], align="^")
    with pytest.raises(ValueError, match="line break"):
        table(["a"], [["x\ny"]])


def test_wrap_keeps_an_indent_and_never_starts_a_line_with_a_closing_mark():
    out = Printed({"en": "    transformer block", "zh_CN": "一二三四五六七，八九"}).wrap(14)
    assert out.texts == {"en": "    transformer\nblock", "zh_CN": "一二三四五六七，\n八九"}
    with pytest.raises(TypeError, match="width must be an integer, got True"):
        Printed({"en": "", "zh_CN": ""}).wrap(True)


def test_printed_checks_its_arguments():
    with pytest.raises(TypeError, match="untranslated must be an iterable"):
        Printed({"en": "", "zh_CN": ""}, "abc")
    with pytest.raises(ValueError, match="language must be one of"):
        Printed({"en": "", "zh_CN": ""}).text("fr")


def test_the_printed_catalogs_agree_on_every_message():
    # The catalogs merge and the first file wins: a message two files translate differently
    # would read one way everywhere, whichever file the chapter's author meant.
    import collections

    import polib

    found = collections.defaultdict(dict)
    for path in sorted((i18n.LOCALE_DIR / "zh_CN").glob("printed-*.po")):
        for e in polib.pofile(str(path)):
            if e.msgstr and not e.obsolete:
                found[e.msgid][path.name] = e.msgstr
    assert len(found) > 100  # every chapter's catalog was read
    assert {m: v for m, v in found.items() if len(set(v.values())) > 1} == {}


def test_a_table_is_an_html_table_too_so_columns_line_up_in_any_font(english, monkeypatch):
    rows = [[Printed({"en": "greedy", "zh_CN": "贪心解码"}), 29], ["<b>", 5]]
    out = table(["zz setting", "n"], rows)
    zh = out.html_of("zh_CN")
    # Hand-written: one header row, numbers flagged for right alignment, text escaped.
    assert zh == (
        '<table class="attnbook-printed-table"><thead><tr><th>zz setting</th>'
        '<th class="num">n</th></tr></thead><tbody>'
        '<tr><td>贪心解码</td><td class="num">29</td></tr>'
        '<tr><td>&lt;b&gt;</td><td class="num">5</td></tr></tbody></table>'
    )
    # A line said before the table becomes a <pre> block in the same output.
    both = say("zz title") + out
    assert both.html_of("en").startswith('<pre class="attnbook-printed">zz title</pre><table')
    assert both.texts["en"].splitlines()[0] == "zz title"  # the plain text is kept
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    bundle = both._repr_mimebundle_()
    assert bundle["text/html"] == both.html_of("en")
    payload = bundle[edition_outputs.MIME]
    assert payload["kind"] == "text/html" and payload["editions"]["zh_CN"] == both.html_of("zh_CN")
    # Lines alone stay plain text.
    assert say("zz title")._repr_mimebundle_()[edition_outputs.MIME]["kind"] == "text/plain"


def test_lines_refuses_a_str_part_rather_than_gluing_it_on_without_a_line_break():
    # A str among the parts was concatenated to the previous one ("a" + "b" == "ab") and the
    # result was a str, not a Printed.
    with pytest.raises(TypeError, match=r"parts\[1\] must be a Printed.*got str"):
        Printed.lines([say("zz a"), "b"])
    with pytest.raises(TypeError, match=r"parts\[0\] must be a Printed.*got str"):
        Printed.lines(["a"])


def test_printed_refuses_a_language_it_does_not_know():
    # An extra language was kept, then dropped by one operand order of + and a KeyError of
    # the other.
    with pytest.raises(ValueError, match=r"texts has languages not in .*\['fr'\]"):
        Printed({"en": "a", "zh_CN": "b", "fr": "c"})
    with pytest.raises(TypeError, match=r"html must be a dict \{language: str\}"):
        Printed({"en": "a", "zh_CN": "b"}, html="<b>")
    with pytest.raises(TypeError, match=r"html must be a dict \{language: str\}"):
        Printed({"en": "a", "zh_CN": "b"}, html={"en": 1, "zh_CN": 2})


def test_an_empty_language_is_refused_not_read_as_the_default():
    with pytest.raises(ValueError, match="language must be one of .*got ''"):
        verbatim("a").text("")
    with pytest.raises(ValueError, match="language must be one of .*got ''"):
        verbatim("a").html_of("")


def test_columns_counts_combining_and_zero_width_characters_as_none():
    from attnbook.printed import columns

    # "é" written as e + COMBINING ACUTE ACCENT is one column; a zero-width space none.
    assert columns("e\u0301") == 1
    assert columns("a\u200bb") == 2
    assert columns("注意") == 4
    with pytest.raises(TypeError, match=r"text must be a string, got b.* \(bytes\)"):
        columns(b"ab")


def test_a_table_with_combining_characters_lines_up():
    out = table(["zz a", "n"], [["e\u0301e\u0301", 1], ["abcd", 22]])
    first, second = out.texts["en"].splitlines()[1:]
    # Both rows are 8 columns wide on screen: "éé" is two, padded to the column's four.
    assert first == "e\u0301e\u0301     1" and second == "abcd  22"


def test_wrap_lines_checks_its_width_and_its_text():
    from attnbook.printed import wrap_lines

    with pytest.raises(ValueError, match="width must be >= 1, got 0"):
        wrap_lines("a b c", 0)
    with pytest.raises(TypeError, match="width must be an integer"):
        wrap_lines("a b c", None)
    with pytest.raises(TypeError, match=r"text must be a string, got None \(NoneType\)"):
        wrap_lines(None, 3)
    # A line break inside was counted as a column and kept mid-line: ["a\nb", "c"].
    assert wrap_lines("a\nb c", 3) == ["a", "b c"]
    assert wrap_lines("一二\r\n三四五", 4) == ["一二", "三四", "五"]


def test_wrap_lines_never_leaves_a_prefix_alone_on_a_line():
    from attnbook.printed import wrap_lines

    # The word longer than the width stays whole, after its prefix (was ["1.", "abcdefgh"]).
    assert wrap_lines("abcdefgh ij", 5, "1. ", "   ") == ["1. abcdefgh", "   ij"]
    assert wrap_lines("ab abcdefgh", 5, "", "> ") == ["ab", "> abcdefgh"]


def test_wrap_breaks_between_chinese_characters_of_every_plane():
    # CJK Extension B (U+20000...) and compatibility ideographs are two columns too.
    out = Printed({"en": "\U00020000" * 4, "zh_CN": "\uf900" * 4}).wrap(4)
    assert out.texts == {
        "en": "\U00020000" * 2 + "\n" + "\U00020000" * 2,
        "zh_CN": "\uf900\uf900\n\uf900\uf900",
    }


def test_table_names_a_row_that_is_no_sequence_of_cells():
    for bad in (None, 5, {"a": 1}, {1}):
        with pytest.raises(TypeError, match=r"rows\[0\] must be a sequence of cells"):
            table(["a"], [bad])
    # A row that is any other iterable (a generator) is read once, like the rows themselves.
    out = table(["zz a", "zz b"], ((x for x in (1, 2)) for _ in range(2)))
    assert out.texts["en"].splitlines()[1:] == ["   1     2", "   1     2"]


def test_table_refuses_formats_given_as_one_str():
    # "2f" was read as two formats, "2" and "f": 1.5 and 2.500000, silently.
    with pytest.raises(TypeError, match="formats must be a sequence of format specs"):
        table(["a", "b"], [[1.5, 2.5]], formats="2f")
    with pytest.raises(TypeError, match=r"formats\[0\] must be a str, got NoneType"):
        table(["a"], [[1]], formats=[None])


def test_a_bool_cell_is_not_formatted_as_a_number():
    import numpy as np

    # True under ".2f" printed 1.00.
    for flag in (True, np.bool_(False)):
        with pytest.raises(ValueError, match=r"rows\[0\]\[0\] \(bool.*\) does not fit .* '.2f'"):
            table(["a"], [[flag]], formats=[".2f"])
    # Without a format it is a word, left-aligned like Python's own.
    assert table(["abcdef"], [[np.bool_(True)]]).texts["en"] == "abcdef\nTrue"


def test_a_heading_is_a_message_a_printed_text_or_a_number():
    for bad in (None, b"loss"):
        with pytest.raises(TypeError, match=r"header\[0\] must be"):
            table([bad], [[1]])


def test_a_cell_with_any_line_break_is_refused():
    for br in ("\r", "\u2028", "\x0b"):
        with pytest.raises(ValueError, match="line break"):
            table(["a"], [[f"x{br}y"]])


def test_a_positional_field_is_named_whatever_follows_it():
    for message in ("word {0.real}", "word {[0]}", "word {x:{}}"):
        with pytest.raises(ValueError, match="positional field"):
            say(message, x=1)


def test_wrap_breaks_a_text_at_every_kind_of_line_break():
    out = Printed({"en": "ab\r\ncd\ref", "zh_CN": "x\u2028y"}).wrap(4)
    assert out.texts == {"en": "ab\ncd\nef", "zh_CN": "x\ny"}


def test_words_inside_literal_braces_are_looked_up(english):
    # "{{zz loss}}" prints "{zz loss}": its words were taken for a field and never looked up,
    # so the Chinese edition showed them in English without listing them.
    assert say("{{zz loss}}").untranslated == {"{{zz loss}}"}
    assert say("{{n}} = {n}", n=3).untranslated == frozenset()  # a letter, not a word


def test_untranslated_holds_messages():
    with pytest.raises(
        TypeError, match="untranslated must be an iterable of messages, not the NoneType"
    ):
        Printed({"en": "", "zh_CN": ""}, None)
    # A number among them failed later, sorting the list for the book build.
    with pytest.raises(TypeError, match=r"untranslated must hold messages \(str\)"):
        Printed({"en": "", "zh_CN": ""}, [1, "a"])


def test_a_heading_with_braces_is_named_and_verbatim_is_suggested():
    with pytest.raises(ValueError, match=r"header\[1\] '\{0, 1\}' .*verbatim\('\{0, 1\}'\)"):
        table(["zz a", "{0, 1}"], [[1, 2]])
    assert table(["zz a", verbatim("{0, 1}")], [[1, 2]]).texts["en"].splitlines()[0] == (
        "zz a  {0, 1}"
    )
    with pytest.raises(ValueError, match="header must have at least one heading"):
        table([], [[], []])  # printed two empty lines
