"""attnbook.i18n: labels of figures and explorers in the edition's language.

The expected translations come from a small catalog written by each test (not from the book's
catalog), so every expectation is stated here by hand.
"""

import base64
import json
import warnings

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attnbook import edition_outputs, i18n, mpl_figures  # noqa: E402

CATALOG = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "attention weights"
msgstr "注意力权重"

msgid "position $i$"
msgstr "位置 $i$"

msgid "{} to {} tokens"
msgstr "{} 到 {} 个词元"

msgid "head {}"
msgstr "第 {} 个头"

msgid "layers"
msgstr "层数"

msgid "causal"
msgstr "因果"

msgid "on"
msgstr "开"

msgid "off"
msgstr "关"

#, fuzzy
msgid "stale label"
msgstr "过时的标签"
"""


CATALOG_B = """\
msgid "Llama 2 7B"
msgstr "Llama 2 7B"
"""


@pytest.fixture()
def catalog(tmp_path, monkeypatch):
    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "a.po").write_text(CATALOG, encoding="utf-8")
    (tmp_path / "zh_CN" / "b.po").write_text(CATALOG_B, encoding="utf-8")
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)
    i18n._catalog.cache_clear()
    yield tmp_path
    i18n._catalog.cache_clear()


@pytest.fixture(autouse=True)
def _english_by_default(monkeypatch):
    monkeypatch.delenv("ATTNBOOK_LANG", raising=False)
    monkeypatch.delenv("ATTNBOOK_EDITIONS", raising=False)
    monkeypatch.setitem(i18n._state, "language", None)


def test_translate_exact_pattern_and_fallback(catalog):
    assert i18n.translate("attention weights", "zh_CN") == "注意力权重"
    assert i18n.translate("position $i$", "zh_CN") == "位置 $i$"
    assert i18n.translate("1K to 128K tokens", "zh_CN") == "1K 到 128K 个词元"
    assert i18n.translate("head 3", "zh_CN") == "第 3 个头"
    # English is never looked up; an unknown or fuzzy label stays as it is.
    assert i18n.translate("attention weights", "en") == "attention weights"
    assert i18n.translate("no such label", "zh_CN") == "no such label"
    assert i18n.translate("stale label", "zh_CN") == "stale label"
    # A second file of the same language is read too; an entry may keep a name as it is.
    assert i18n.lookup("Llama 2 7B", "zh_CN") == "Llama 2 7B"
    assert i18n.lookup("no such label", "zh_CN") is None
    missing = set()
    assert i18n.translate_checked("Llama 2 7B", "zh_CN", missing) == "Llama 2 7B"
    assert i18n.translate_checked("Mistral 7B", "zh_CN", missing) == "Mistral 7B"
    assert missing == {"Mistral 7B"}


def test_language_comes_from_set_language_then_the_environment(catalog, monkeypatch):
    assert i18n.get_language() == "en"
    monkeypatch.setenv("ATTNBOOK_LANG", "zh_CN")
    assert i18n.get_language() == "zh_CN"
    assert i18n.translate("causal") == "因果"
    monkeypatch.setenv("ATTNBOOK_LANG", "fr")
    with pytest.raises(ValueError, match="ATTNBOOK_LANG must be one of"):
        i18n.get_language()
    with pytest.raises(ValueError, match="language must be one of .* got 'zh'"):
        i18n.set_language("zh")
    with pytest.raises(ValueError, match="language must be one of"):
        i18n.translate("causal", "de")


def test_editions_parse_and_validate(monkeypatch):
    assert i18n.editions() == ()
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    assert i18n.editions() == ("en", "zh_CN")
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en,xx")
    with pytest.raises(ValueError, match="ATTNBOOK_EDITIONS must be one of"):
        i18n.editions()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("attention weights", True),
        ("$d_k = 64$", False),
        (r"$\mathrm{Var}(q\cdot k)$", False),
        ("<b>1.5</b> × 2", False),
        ("注意力权重", False),
        ("x", False),
        ("measured $d_k$", True),
    ],
)
def test_needs_translation(text, expected):
    assert i18n.needs_translation(text) is expected


def test_translate_plotly_labels_but_not_data(catalog):
    fig = {
        "data": [
            {
                "type": "scatter",
                "x": [0, 1],
                "y": [1, 2],
                "name": "attention weights",
                "text": ["causal", "layers"],
                "hovertemplate": "layers %{x}",
            }
        ],
        "layout": {
            "title": {"text": "head 2"},
            "xaxis": {"title": {"text": "position $i$"}},
            "annotations": [{"text": "causal"}, {"text": "untranslated words"}],
        },
    }
    missing = set()
    out = i18n.translate_plotly(fig, "zh_CN", missing=missing)
    assert out["data"][0]["name"] == "注意力权重"
    assert out["data"][0]["text"] == ["causal", "layers"]  # data drawn on the plot: kept
    assert out["layout"]["title"]["text"] == "第 2 个头"
    assert out["layout"]["xaxis"]["title"]["text"] == "位置 $i$"
    assert out["layout"]["annotations"][0]["text"] == "因果"
    assert missing == {"untranslated words"}
    assert fig["layout"]["title"]["text"] == "head 2", "the input must not change"


def _figure():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], label="attention weights")
    ax.set(xlabel="position $i$", title="head 1")
    ax.legend()
    return fig, ax


def test_translated_figure_sets_and_restores_every_text(catalog):
    fig, ax = _figure()
    missing = set()
    with mpl_figures.translated_figure(fig, "zh_CN", missing=missing):
        assert ax.get_title() == "第 1 个头"
        assert ax.get_xlabel() == "位置 $i$"
        assert ax.get_legend().get_texts()[0].get_text() == "注意力权重"
    assert ax.get_title() == "head 1" and ax.get_xlabel() == "position $i$"
    assert ax.get_legend().get_texts()[0].get_text() == "attention weights"
    assert missing == set()
    plt.close(fig)
    with pytest.raises(
        TypeError,
        match=r"fig must be a Figure \(from matplotlib.pyplot.figure\(\) .*\), got dict",
    ):
        with mpl_figures.translated_figure({}, "zh_CN"):
            pass


def test_chinese_figure_draws_every_glyph_and_differs_from_english(catalog):
    fig, _ax = _figure()
    en = base64.b64decode(mpl_figures.figure_png(fig, "en"))
    zh = base64.b64decode(mpl_figures.figure_png(fig, "zh_CN"))
    assert en[:8] == zh[:8] == b"\x89PNG\r\n\x1a\n"
    assert en != zh
    plt.close(fig)


def test_a_glyph_no_font_has_is_an_error(catalog):
    assert mpl_figures.cjk_font_path().is_file()
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.set_title("\U0001f700")  # an alchemical symbol: in neither DejaVu Sans nor Noto CJK
    with pytest.raises(mpl_figures.MissingGlyphError, match="missing from font"):
        mpl_figures.figure_png(fig, "zh_CN")
    glyphs = []
    mpl_figures.figure_png(fig, "en", glyphs=glyphs)
    assert len(glyphs) == 1 and glyphs[0].startswith("en: Glyph")
    plt.close(fig)


def test_figure_bundle_lists_untranslated_labels(catalog):
    fig, ax = _figure()
    ax.set_ylabel("a label nobody translated")
    payload = mpl_figures.figure_bundle(fig, ("en", "zh_CN"))
    assert payload["kind"] == "image/png"
    assert set(payload["editions"]) == {"en", "zh_CN"}
    assert payload["untranslated"] == ["a label nobody translated"]
    assert payload["missing_glyphs"] == []
    plt.close(fig)


def test_titles_wider_than_their_panel_on_a_phone_are_broken_into_lines():
    fig, axes = plt.subplots(1, 2, figsize=(6.88, 2.5), dpi=100, layout="constrained")
    # Wider than a phone's whole column, so that the panels, even one under the other (each as
    # wide as the column), need their titles broken.
    titles = [
        "layer 1: where the pronoun attends, in each of the twelve heads of the layer",
        "第 1 层：“it” 关注哪里，每个头各自关注的位置与它的权重，一个头一行",
    ]
    for ax, title in zip(axes, titles):
        ax.plot([0, 1], [0, 1])
        ax.set_title(title)
    axes[1].title.set_fontfamily(["DejaVu Sans", mpl_figures._cjk_family()])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # In one line each title is wider than a phone's column.
    assert min(ax.title.get_window_extent(renderer).width for ax in axes) > 358
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        boxes = [ax.title.get_window_extent(renderer) for ax in axes]
        assert all("\n" in ax.title.get_text() for ax in axes)
        # Broken between words, and between CJK characters (no space there).
        assert axes[0].title.get_text().replace("\n", " ") == titles[0]
        assert axes[1].title.get_text().replace("\n", "") == titles[1]
        assert not boxes[0].overlaps(boxes[1])
        assert all(0 <= b.x0 and b.x1 <= 358 for b in boxes)
    assert [ax.title.get_text() for ax in axes] == titles
    plt.close(fig)


def test_axis_labels_longer_than_their_axes_on_a_phone_are_broken_into_lines():
    """An x label as wide as the column and a y label as tall as the axes: on a phone each is
    broken into lines that stay inside the figure (they were cut off at its edge)."""
    fig, ax = plt.subplots(figsize=(6.88, 2.5), dpi=100, layout="constrained")
    ax.plot([0, 1], [0, 1])
    xlabel = "arithmetic intensity of the kernel (FLOPs per byte read from HBM)"
    ylabel = "modelled throughput of the kernel (TFLOP/s)"
    ax.set(xlabel=xlabel, ylabel=ylabel)
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        assert "\n" in ax.xaxis.label.get_text() and "\n" in ax.yaxis.label.get_text()
        assert ax.xaxis.label.get_text().replace("\n", " ") == xlabel
        x_box, y_box = ax.xaxis.label.get_window_extent(), ax.yaxis.label.get_window_extent()
        assert 0 <= x_box.x0 and x_box.x1 <= 358
        assert y_box.height <= ax.get_window_extent().height + 1
    assert (ax.get_xlabel(), ax.get_ylabel()) == (xlabel, ylabel)
    plt.close(fig)


def _png_size(b64: str) -> tuple[int, int]:
    import io

    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def test_figure_bundle_adds_a_phone_drawing_per_edition(catalog):
    fig, ax = plt.subplots(figsize=(6.88, 2.5), dpi=100, layout="constrained")
    ax.plot([0, 1000, 2000], [0, 1, 2])
    ax.set(xlabel="position $i$", title="head 1")
    payload = mpl_figures.figure_bundle(fig, ("en", "zh_CN"))
    assert set(payload["narrow"]) == {"en", "zh_CN"}
    for lang in ("en", "zh_CN"):
        wide, narrow = _png_size(payload["editions"][lang]), _png_size(payload["narrow"][lang])
        assert wide[0] > 600 and narrow[0] == mpl_figures.PHONE_PX
    # Each edition's phone drawing has its own labels.
    assert payload["narrow"]["en"] != payload["narrow"]["zh_CN"]
    assert payload["narrow"]["en"] not in payload["editions"].values()
    plt.close(fig)
    # A figure no wider than a phone's column is shown as drawn: no second drawing.
    small, ax = plt.subplots(figsize=(3.5, 2), dpi=100)
    ax.plot([0, 1], [0, 1])
    assert mpl_figures.figure_bundle(small, ("en", "zh_CN"))["narrow"] == {}
    plt.close(small)


def test_install_display_adds_the_editions_output_in_a_build(catalog, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    monkeypatch.setattr(mpl_figures, "_ipython", lambda: shell)
    fig, _ax = _figure()
    data, _md = shell.display_formatter.format(fig)
    assert edition_outputs.MIME not in data
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    assert mpl_figures.install_display() is True
    data, _md = shell.display_formatter.format(fig)
    payload = data[edition_outputs.MIME]
    assert set(payload["editions"]) == {"en", "zh_CN"} and payload["untranslated"] == []
    shell.display_formatter.formatters[edition_outputs.MIME].pop(type(fig))
    shell.display_formatter.formatters["image/png"].pop(type(fig), None)
    plt.close(fig)


def test_a_book_build_draws_each_edition_of_a_figure_once(catalog, monkeypatch):
    """The output's image/png is the English drawing, and the editions' payload reuses it."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    monkeypatch.setattr(mpl_figures, "_ipython", lambda: shell)
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    png = shell.display_formatter.formatters["image/png"]
    old = png.for_type(matplotlib.figure.Figure)  # None: no formatter registered
    drawn = []
    real = mpl_figures.figure_png
    monkeypatch.setattr(
        mpl_figures,
        "figure_png",
        lambda fig, lang=None, **kw: drawn.append(lang) or real(fig, lang, **kw),
    )
    try:
        assert mpl_figures.install_display() is True
        fig, ax = _figure()
        data, _md = shell.display_formatter.format(fig)
        assert sorted(drawn) == ["en", "zh_CN"]
        payload = data[edition_outputs.MIME]
        assert payload["editions"]["en"] == data["image/png"]
        assert payload["editions"]["zh_CN"] != data["image/png"]
        # Changed and shown again: drawn again, not taken from the last display.
        ax.set_title("another title")
        drawn.clear()
        data2, _md = shell.display_formatter.format(fig)
        assert sorted(drawn) == ["en", "zh_CN"] and data2["image/png"] != data["image/png"]
        # Asked for the editions alone (no image/png drawn first): English is drawn there.
        drawn.clear()
        data3, _md = shell.display_formatter.format(fig, include={edition_outputs.MIME})
        assert sorted(drawn) == ["en", "zh_CN"]
        assert data3[edition_outputs.MIME]["editions"]["en"] == data2["image/png"]
        # The image/png alone, then a change, then the editions alone: English drawn anew.
        shell.display_formatter.format(fig, include={"image/png"})
        ax.set_title("a third title")
        drawn.clear()
        data4, _md = shell.display_formatter.format(fig, exclude={"image/png"})
        assert sorted(drawn) == ["en", "zh_CN"]
        mime = edition_outputs.MIME
        assert data4[mime]["editions"]["en"] != data3[mime]["editions"]["en"]
    finally:
        shell.display_formatter.formatters[edition_outputs.MIME].pop(matplotlib.figure.Figure, None)
        png.pop(matplotlib.figure.Figure, None)
        if old is not None:
            png.for_type(matplotlib.figure.Figure, old)
        plt.close("all")


class _FakeLogger:
    def __init__(self):
        self.messages = []

    def warning(self, msg, **kwargs):
        self.messages.append(msg)


class _FakeRenderer:
    """What EditionsMimeRenderer uses of MyST-NB's NbElementRenderer."""

    def __init__(self, language):
        config = type("C", (), {"language": language})()
        self.renderer = type("R", (), {"sphinx_env": type("E", (), {"config": config})()})()
        self.logger = _FakeLogger()

    def render_image(self, data):
        return ("image", data.mime_type, data.content)

    def render_text_html(self, data):
        return ("html", data.mime_type, data.content)


def _mime(payload):
    from myst_nb.core.render import MimeData

    return MimeData(edition_outputs.MIME, payload)


def test_mime_renderer_shows_each_edition_its_own_and_warns_on_gaps():
    payload = {
        "kind": "image/png",
        "editions": {"en": "RU4=", "zh_CN": "WkgK"},
        "untranslated": ["head 9"],
        "missing_glyphs": [],
    }
    zh = _FakeRenderer("zh_CN")
    assert edition_outputs.EditionsMimeRenderer.handle_mime(zh, _mime(payload), False) == (
        "image",
        "image/png",
        "WkgK",
    )
    assert len(zh.logger.messages) == 1 and "'head 9'" in zh.logger.messages[0]
    en = _FakeRenderer("en")
    assert edition_outputs.EditionsMimeRenderer.handle_mime(en, _mime(payload), False) == (
        "image",
        "image/png",
        "RU4=",
    )
    assert en.logger.messages == []
    html = {"kind": "text/html", "editions": {"en": "<p>x</p>"}, "untranslated": []}
    assert edition_outputs.EditionsMimeRenderer.handle_mime(zh, _mime(html), False)[0] == "html"
    from myst_nb.core.render import MimeData

    renderer = edition_outputs.EditionsMimeRenderer
    assert renderer.handle_mime(zh, MimeData("image/png", "x"), False) is None
    glyph = dict(payload, missing_glyphs=["en: Glyph 128768 missing from font(s) DejaVu Sans."])
    en = _FakeRenderer("en")
    edition_outputs.EditionsMimeRenderer.handle_mime(en, _mime(glyph), False)
    assert any("no font can draw" in m for m in en.logger.messages)


class _ImageRenderer(_FakeRenderer):
    """render_image as MyST-NB's: one image node, named by the PNG's content."""

    def render_image(self, data):
        from docutils import nodes

        return [nodes.image(uri=f"{data.content}.png", alt="a figure")]


def test_mime_renderer_puts_a_figures_column_and_phone_drawings_in_one_picture():
    from docutils import nodes

    payload = {
        "kind": "image/png",
        "editions": {"en": "RU4=", "zh_CN": "WkgK"},
        "narrow": {"en": "ZW4=", "zh_CN": "emg="},
        "untranslated": [],
    }
    for lang, wide, narrow in (("en", "RU4=", "ZW4="), ("zh_CN", "WkgK", "emg=")):
        (out,) = edition_outputs.EditionsMimeRenderer.handle_mime(
            _ImageRenderer(lang), _mime(payload), False
        )
        assert isinstance(out, nodes.container)
        assert edition_outputs.PICTURE_CLASS in out["classes"]
        assert out["media"] == edition_outputs.PHONE_MEDIA == "(max-width: 600px)"
        # The column's drawing first (the <img>), then the phone's (the <source>).
        assert [c["uri"] for c in out.children] == [f"{wide}.png", f"{narrow}.png"]
    # Without a phone drawing: the column's image alone, as before.
    del payload["narrow"]
    (out,) = edition_outputs.EditionsMimeRenderer.handle_mime(
        _ImageRenderer("en"), _mime(payload), False
    )
    assert isinstance(out, nodes.image) and out["uri"] == "RU4=.png"


def test_explorer_carries_one_static_explorer_per_edition(catalog, monkeypatch):
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control, Explorer

    def render(layers, causal):
        return go.Figure(
            go.Scatter(x=[0, 1], y=[layers, 1], name="attention weights"),
            layout={"title": {"text": f"head {layers}"}},
        )

    ex = Explorer(
        [
            Control("layers", "layers", "slider", (1, 2), 1),
            Control("causal", "causal", "toggle", (False, True), False),
        ],
        render,
        title="attention weights",
    )
    assert edition_outputs.MIME not in ex._repr_mimebundle_()
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    payload = ex._repr_mimebundle_()[edition_outputs.MIME]
    assert payload["kind"] == "text/html" and payload["untranslated"] == []
    zh, en = payload["editions"]["zh_CN"], payload["editions"]["en"]
    assert ">层数</label>" in zh and ">layers</label>" in en
    spec = json.loads(
        zh.split('type="application/json"')[1]
        .split(">", 1)[1]
        .split("</script>")[0]
        .replace("<\\/", "</")
    )
    assert spec["toggle_text"] == ["关", "开"]
    # The figure's title is the caption above the plot (HTML), one per distinct frame.
    assert set(spec["captions"]) == {"第 1 个头", "第 2 个头"}
    assert "head 1" not in zh


def test_live_explorer_uses_the_language_set(catalog):
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control, Explorer

    i18n.set_language("zh_CN")
    try:
        ex = Explorer(
            [Control("layers", "layers", "slider", (1, 2), 1)],
            lambda layers: go.Figure(layout={"title": {"text": f"head {layers}"}}),
            title="x",
        )
        assert ex.controls["layers"].description == "层数"
        assert "第 1 个头" in ex.caption.value  # the title, as HTML above the plot
        assert "第 1 个头" not in json.dumps(ex.figure.layout.to_plotly_json(), ensure_ascii=False)
    finally:
        i18n.set_language("en")


def test_png_formatter_follows_the_live_language(catalog, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    monkeypatch.setattr(mpl_figures, "_ipython", lambda: shell)
    png = shell.display_formatter.formatters["image/png"]
    fig, _ax = _figure()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        i18n.set_language("zh_CN")
        zh = png(fig)
        i18n.set_language("en")
    assert zh == mpl_figures.figure_png(fig, "zh_CN")
    assert png(fig) != zh
    plt.close(fig)


def test_slider_width_counts_wide_characters_twice():
    from attnbook.explorers.base import LABEL_CHAR_PX, Control

    en = Control("a", "ab", "slider", (1, 2), 1)
    zh = Control("a", "层数", "slider", (1, 2), 1)
    assert zh.slider_min_px() - en.slider_min_px() == 2 * LABEL_CHAR_PX
    assert np.isfinite(zh.slider_min_px())


def test_install_display_survives_the_inline_backend_loading_later(catalog, monkeypatch):
    """The inline backend drops every Figure formatter but its own when pyplot first loads it."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    shell = InteractiveShell.instance()
    monkeypatch.setattr(mpl_figures, "_ipython", lambda: shell)
    monkeypatch.setenv("ATTNBOOK_EDITIONS", "en zh_CN")
    loads = []
    monkeypatch.setattr(
        mpl_figures,
        "_load_inline_backend",
        lambda: (loads.append(1), select_figure_formats(shell, {"png"})),
    )
    mpl_figures.install_display()
    fig, _ax = _figure()
    data, _md = shell.display_formatter.format(fig)
    assert loads and edition_outputs.MIME in data and "image/png" in data
    shell.display_formatter.formatters[edition_outputs.MIME].pop(type(fig))
    plt.close(fig)


def test_tick_labels_are_translated_when_known_and_never_reported(catalog):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    ax.set_xticks([0, 1], ["animal", "causal"])
    ax.set_title("a title nobody translated")
    missing = set()
    with mpl_figures.translated_figure(fig, "zh_CN", missing=missing):
        fig.canvas.draw()  # the formatter rewrites the tick labels at draw time
        assert [t.get_text() for t in ax.get_xticklabels()] == ["animal", "因果"]
    assert missing == {"a title nobody translated"}
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["animal", "causal"]
    plt.close(fig)


def test_a_traces_colour_bar_title_is_a_label_but_its_text_is_data(catalog):
    fig = {
        "data": [
            {
                "type": "heatmap",
                "z": [[1]],
                "text": [["causal"]],
                "colorbar": {"title": {"text": "attention weights"}},
            },
            {"type": "heatmap", "z": [[1]], "colorbar": {"title": {"text": "nope"}}},
        ]
    }
    missing = set()
    out = i18n.translate_plotly(fig, "zh_CN", missing=missing)
    assert out["data"][0]["colorbar"]["title"]["text"] == "注意力权重"
    assert out["data"][0]["text"] == [["causal"]]
    assert missing == {"nope"}


def test_placeholder_counts_must_agree(tmp_path, monkeypatch):
    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "bad.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "{} of {} rows"\nmsgstr "{} 行"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)
    i18n._catalog.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"bad.po.*'\{\} of \{\} rows' has 2 .* has 1"):
            i18n.translate("3 of 8 rows", "zh_CN")
    finally:
        i18n._catalog.cache_clear()


def test_renderer_warns_when_an_edition_has_no_rendering():
    payload = {"kind": "image/png", "editions": {"en": "RU4="}, "untranslated": []}
    zh = _FakeRenderer("zh_CN")
    assert edition_outputs.EditionsMimeRenderer.handle_mime(zh, _mime(payload), False)[2] == "RU4="
    assert any("no zh_CN rendering" in m for m in zh.logger.messages)


def test_figure_state_is_restored_after_translating_ticks(catalog):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    before = (ax.xaxis.isDefault_majfmt, ax.xaxis.get_major_formatter())
    family = ax.get_xticklabels()[0].get_fontfamily()
    mpl_figures.figure_png(fig, "zh_CN")
    assert (ax.xaxis.isDefault_majfmt, ax.xaxis.get_major_formatter()) == before
    assert ax.get_xticklabels()[0].get_fontfamily() == family
    plt.close(fig)


def test_an_undrawn_figure_with_chinese_tick_labels_draws_every_glyph(catalog):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(["causal", "layers"], [1, 2])
    glyphs = []
    mpl_figures.figure_png(fig, "zh_CN", glyphs=glyphs)
    assert glyphs == []
    plt.close(fig)


def test_static_explorer_escapes_translated_machinery_words(tmp_path, monkeypatch):
    import plotly.graph_objects as go

    from attnbook.explorers.base import Control, Explorer

    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "x.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "controls"\nmsgstr "x\\" onmouseover=\\"alert(1)"\n\n'
        'msgid "This explorer needs JavaScript."\nmsgstr "<script>alert(2)</script>"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)
    i18n._catalog.cache_clear()
    try:
        ex = Explorer(
            [Control("n", "n", "slider", (1, 2), 1)],
            lambda n: go.Figure(layout={"title": {"text": "</script><!--"}}),
            title="t",
        )
        html = ex.static_html("zh_CN")
    finally:
        i18n._catalog.cache_clear()
    assert "alert(2)</script>" not in html and 'onmouseover="' not in html
    data = html.split('type="application/json"')[1].split("</script>")[0]
    assert "<" not in data.split(">", 1)[1]


def test_drawing_in_chinese_logs_nothing(catalog, caplog):
    """No "findfont: Font family ... not found" (it would land in every chapter's output)."""
    import logging

    fig, ax = _figure()
    ax.bar(["causal", "layers"], [1, 2])
    with caplog.at_level(logging.DEBUG, logger="matplotlib.font_manager"):
        mpl_figures.figure_png(fig, "zh_CN")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []
    plt.close(fig)


def test_bold_chinese_text_draws_without_logging(catalog, caplog):
    import logging

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("attention weights", fontweight="bold")
    with caplog.at_level(logging.INFO, logger="matplotlib.font_manager"):
        mpl_figures.figure_png(fig, "zh_CN")
    assert not [r for r in caplog.records if "findfont" in r.getMessage()]
    plt.close(fig)


def test_moved_names_stay_readable_at_their_old_path():
    """``attnbook.i18n.figure_png`` and the others are the objects of their new homes."""
    from attnbook import _aliases

    assert set(_aliases.MOVED["i18n"]) == {
        "MIME",
        "editions_html_bundle",
        "EditionsMimeRenderer",
        "MissingGlyphError",
        "translated_figure",
        "figure_png",
        "figure_bundle",
        "cjk_font_path",
        "install_display",
    }
    for name, home in _aliases.MOVED["i18n"].items():
        module = {"mpl_figures": mpl_figures, "edition_outputs": edition_outputs}[home]
        assert getattr(i18n, name) is getattr(module, name)
        assert name in module.__all__ and name not in i18n.__all__
    from attnbook.i18n import EditionsMimeRenderer, figure_png

    assert figure_png is mpl_figures.figure_png
    assert EditionsMimeRenderer is edition_outputs.EditionsMimeRenderer
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        i18n.no_such_name  # noqa: B018


def test_importing_the_label_api_loads_no_matplotlib():
    import subprocess
    import sys

    code = (
        "import sys, attnbook.i18n as i, attnbook.edition_outputs; "
        "i.set_language('zh_CN'); i.translate('x'); "
        "print('matplotlib' in sys.modules, 'attnbook.mpl_figures' in sys.modules); "
        "i.MIME; print('attnbook.edition_outputs' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False", "True"]


def test_set_language_calls_each_hook_once(monkeypatch):
    calls = []
    monkeypatch.setattr(i18n, "_hooks", [])
    hook = lambda: calls.append(i18n.get_language())  # noqa: E731
    i18n.on_language_change(hook)
    i18n.on_language_change(hook)
    try:
        i18n.set_language("zh_CN")
    finally:
        i18n.set_language("en")
    assert calls == ["zh_CN", "en"]


def test_the_figure_module_follows_set_language():
    """Imported, attnbook.mpl_figures re-installs its display hook at every set_language."""
    assert i18n._hooks.count(mpl_figures.install_display) == 1


def test_an_empty_label_is_empty_not_the_catalogs_header():
    # gettext("") returns a catalog's metadata ("Language: zh_CN\nContent-Type: ...").
    for language in i18n.LANGUAGES:
        assert i18n.labels(language)("") == ""
        assert i18n.labels(language).ngettext("", "", 1) == ""


def test_a_missing_placeholder_value_names_the_label_and_the_values_given():
    for language in i18n.LANGUAGES:
        with pytest.raises(KeyError, match=r"query \{i\}.*placeholder \{i\}.*\['j'\]"):
            i18n.labels(language)("query {i}", j=1)
    with pytest.raises(TypeError, match="n is the count argument"):
        i18n.labels("en").ngettext("{n} head", "{n} heads", 2, n=3)


def test_nested_collectors_all_see_a_missing_message():
    zh = i18n.labels("zh_CN")
    with i18n.collect_missing() as outer:
        zh("no such label (outer)")
        with i18n.collect_missing() as inner:
            zh("no such label (inner)")
        with i18n.collect_missing(isolated=True) as probe:
            zh("no such label (probe)")
    assert inner == {"no such label (inner)"}
    assert probe == {"no such label (probe)"}
    assert outer == {"no such label (outer)", "no such label (inner)"}


@pytest.mark.parametrize("text", ["缩放&nbsp;点积", "查询 &amp; 键", "零宽&#8203;空格", "&#x2014;"])
def test_html_entities_are_characters_not_untranslated_words(text):
    assert i18n.untranslated(text) == []
    assert i18n.untranslated(text + " query") == ["query"]


def test_a_figure_relaid_out_for_a_phone_keeps_its_text_size_and_is_restored():
    """The narrow drawing: 358 px wide, text in the same points, the figure unchanged after."""
    import io

    from PIL import Image

    fig, axes = plt.subplots(1, 2, figsize=(6.88, 2.5), dpi=100, layout="constrained")
    for ax in axes:
        ax.plot([0, 1000, 2000], [0, 1, 2], label="attention weights")
        ax.set(xlabel="position $i$", title="head 1")
    size, fonts = fig.get_size_inches().copy(), [t.get_fontsize() for t in fig.texts]
    wide = Image.open(io.BytesIO(base64.b64decode(mpl_figures.figure_png(fig, "en"))))
    narrow = Image.open(
        io.BytesIO(base64.b64decode(mpl_figures.figure_png(fig, "en", width_px=358)))
    )
    assert wide.width > 600
    assert narrow.width == 358  # exactly the phone's column, never wider
    assert narrow.height >= 0.9 * wide.height  # the height is kept, not scaled down
    assert (fig.get_size_inches() == size).all()
    assert [t.get_fontsize() for t in fig.texts] == fonts
    with pytest.raises(ValueError, match="width_px"):
        mpl_figures.figure_png(fig, "en", width_px=0)
    plt.close(fig)


def test_a_figure_whose_panels_do_not_fit_a_phone_gets_no_phone_drawing(recwarn):
    """Tick labels almost as wide as a phone's column cannot be laid out 358 px wide, however the
    panels are gridded: the payload has no phone drawing (the phone shows the column's, shrunk),
    the figure is restored, nothing warns."""
    fig, axes = plt.subplots(
        1, 1, figsize=(6.88, 2.5), dpi=100, layout="constrained", squeeze=False
    )
    axes = axes[0]
    for ax in axes:
        ax.plot([0, 1000, 2000], [0, 1, 2])
        ax.set_yticks(
            [0, 2],
            [
                "the attention weight of the key at the first position",
                "the attention weight of the key at the last position",
            ],
        )
    size = fig.get_size_inches().copy()
    specs = [ax.get_subplotspec() for ax in axes]
    with pytest.raises(mpl_figures.LayoutCollapsed, match="358 px"):
        with mpl_figures.relaid_out(fig, 358):
            pass
    assert (fig.get_size_inches() == size).all()
    assert [ax.get_subplotspec() for ax in axes] == specs
    bundle = mpl_figures.figure_bundle(fig, ("en", "zh_CN"))
    assert bundle["narrow"] == {} and set(bundle["editions"]) == {"en", "zh_CN"}
    assert not [w for w in recwarn if "constrained_layout" in str(w.message)]
    # Text drawn in data coordinates that is wider than a phone's column squeezes the axes
    # (constrained layout makes room for it), however it is gridded: no phone drawing either.
    fig3, ax3 = plt.subplots(figsize=(6.88, 2.5), dpi=100, layout="constrained")
    ax3.set(xlim=(0, 8), ylim=(0, 1))
    ax3.text(0, 0.5, "causal LM: position t predicts token t + 1", fontsize=12)
    with pytest.raises(mpl_figures.LayoutCollapsed, match="358 px"):
        with mpl_figures.relaid_out(fig3, 358):
            pass
    plt.close(fig3)
    # Two panels fit: both editions get their phone drawing.
    fig2, axes2 = plt.subplots(1, 2, figsize=(6.88, 2.5), dpi=100, layout="constrained")
    for ax in axes2:
        ax.plot([0, 1], [0, 1])
    assert set(mpl_figures.figure_bundle(fig2, ("en", "zh_CN"))["narrow"]) == {"en", "zh_CN"}
    plt.close(fig)
    plt.close(fig2)


def _panels(n_cols, n_rows=1, **kw):
    fig, axes = plt.subplots(
        n_rows,
        n_cols,
        figsize=(6.88, 2.5 * n_rows),
        dpi=100,
        layout="constrained",
        squeeze=False,
        **kw,
    )
    x = np.linspace(0, 1, 50)
    for ax in axes.flat:
        ax.plot(x, x, label="rising line")
        ax.plot(x, 1 - x, label="falling line")
        ax.set(xlabel="position $i$", ylabel="weight", title="head")
    return fig, list(axes.flat)


def _png(fig, **kw) -> bytes:
    return base64.b64decode(mpl_figures.figure_png(fig, "en", **kw))


def _assert_same_drawing(png: bytes, before: bytes) -> None:
    """The same picture, up to the antialiasing of a sub-pixel difference in the layout (a
    moved legend, a tick label hidden or turned differs by far more than 8 levels)."""
    import io

    from PIL import Image

    a, b = (np.asarray(Image.open(io.BytesIO(x)).convert("RGB")).astype(int) for x in (png, before))
    assert a.shape == b.shape
    assert np.abs(a - b).max() <= 8


def _column_png(fig) -> bytes:
    """The column's drawing, as every later drawing at this width is: constrained layout starts
    from where the axes are, so the first drawing after a resize differs by a sub-pixel."""
    _png(fig)
    return _png(fig)


def test_panels_too_narrow_for_a_phone_are_regridded_into_fewer_columns():
    """Three panels side by side are about 100 px each at 358 px: re-gridded one under the other
    (reading order kept), each at least MIN_PANEL_PX wide, the figure taller by the rows it
    gained; the column's drawing is the same before and after."""
    fig, axes = _panels(3)
    specs = [ax.get_subplotspec() for ax in axes]
    fig.set_size_inches(3.58, 2.5)
    fig.canvas.draw()
    # The old behaviour: the panels only shrank.
    assert max(ax.get_position().width * 358 for ax in axes) < mpl_figures.MIN_PANEL_PX
    fig.set_size_inches(6.88, 2.5)
    before = _column_png(fig)
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        boxes = [ax.get_window_extent() for ax in axes]
        assert min(b.width for b in boxes) >= mpl_figures.MIN_PANEL_PX
        assert boxes[0].y0 > boxes[1].y1 and boxes[1].y0 > boxes[2].y1  # top to bottom
        assert fig.get_size_inches()[1] == pytest.approx(3 * 2.5)
    assert [ax.get_subplotspec() for ax in axes] == specs
    assert tuple(fig.get_size_inches()) == (6.88, 2.5)
    _assert_same_drawing(_png(fig), before)
    width, height = _png_size(mpl_figures.figure_png(fig, "en", width_px=358))
    assert width == 358 and height > 0.9 * 3 * 2.5 * 100
    plt.close(fig)


def test_a_grid_keeps_as_many_columns_as_fit_and_twins_stay_together():
    """Six small panels (2 x 3) go to two columns of three rows, not one column of six; an axes
    made by twinx moves with its panel."""
    fig, axes = plt.subplots(2, 3, figsize=(6.88, 4.5), dpi=100, layout="constrained")
    for ax in axes.flat:
        ax.imshow(np.eye(6))
    twin = axes[0, 1].twinx()
    twin.set_yticks([])
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        geometry = {ax.get_subplotspec().get_geometry()[:2] for ax in axes.flat}
        assert geometry == {(3, 2)}
        assert twin.get_subplotspec() == axes[0, 1].get_subplotspec()
        assert axes[0, 2].get_subplotspec().rowspan.start == 1  # reading order
    assert twin.get_subplotspec() == axes[0, 1].get_subplotspec()
    assert axes[0, 2].get_subplotspec().get_geometry()[:2] == (2, 3)
    plt.close(fig)


def _covers(legend, ax) -> bool:
    """Whether any of ``ax``'s lines passes through ``legend``'s box (its points, densely)."""
    box = legend.get_window_extent()
    for line in ax.lines:
        x, y = line.get_data()
        xs = np.interp(np.linspace(0, len(x) - 1, 2000), np.arange(len(x)), x)
        ys = np.interp(np.linspace(0, len(y) - 1, 2000), np.arange(len(y)), y)
        points = line.get_transform().transform(np.column_stack([xs, ys]))
        if box.count_contains(points):
            return True
    return False


@pytest.mark.parametrize("loc", ["best", "center right", "upper right"])
def test_a_legend_does_not_cover_its_axes_lines_on_a_phone(loc):
    """A legend that fits beside the data in the column covers it on a phone: it moves (inside
    the axes where there is room, else below them); restored after."""
    fig, ax = plt.subplots(figsize=(6.88, 2.5), dpi=100, layout="constrained")
    x = np.linspace(0, 1, 50)
    ax.plot(x, 0.9 * x**4, label="a rising curve, steeply at the end")
    ax.plot(x, 0.9 - 0.9 * x**0.25, label="a falling curve, steeply at the start")
    ax.axhline(0.5, ls=":", label="a level line")
    ax.set(xlabel="position $i$")
    legend = ax.legend(loc=loc, fontsize=9)
    fig.set_size_inches(3.58, 2.5)
    fig.canvas.draw()
    covered_before = _covers(legend, ax)
    fig.set_size_inches(6.88, 2.5)
    before = _column_png(fig)
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        assert not _covers(legend, ax)
        assert legend.get_window_extent().x1 <= 358 and legend.get_window_extent().x0 >= 0
    assert covered_before or loc == "best"
    _assert_same_drawing(_png(fig), before)
    plt.close(fig)


def test_a_figure_legend_wider_than_a_phone_gets_fewer_columns():
    fig, axes = _panels(2, sharey=True)
    handles, _ = axes[0].get_legend_handles_labels()
    legend = fig.legend(
        handles,
        ["the first line, as a chapter labels it", "the second line, as a chapter labels it"],
        loc="outside lower center",
        ncols=2,
    )
    fig.canvas.draw()
    assert legend.get_window_extent().width > 358
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        box = legend.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= 358
    assert len(legend._legend_handle_box.get_children()) == 2
    plt.close(fig)


def _overlapping(labels) -> bool:
    boxes = [t.get_window_extent() for t in labels if t.get_visible() and t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def _drawn_tick_labels(axis):
    lo, hi = sorted(axis.get_view_interval())
    return [
        t.label1
        for t in axis.get_major_ticks(len(axis.get_majorticklocs()))
        if lo <= t.get_loc() <= hi
    ]


@pytest.mark.parametrize("rotation", [0, 60, None])
def test_fixed_tick_labels_do_not_overlap_on_a_phone(rotation):
    """Token labels under a heatmap (turned by the chapter, or not: None) are turned upright and
    all shown; numbers are thinned to every n-th; none overlaps; all is restored."""
    fig, ax = plt.subplots(figsize=(4.5, 2.5), dpi=100, layout="constrained")
    tokens = [
        "[CLS]",
        "the",
        "animal",
        "didn",
        "'",
        "t",
        "cross",
        "the",
        "street",
        "because",
        "it",
        "was",
        "too",
        "tired",
        "[SEP]",
    ]
    if rotation == 0:
        tokens = tokens * 2  # as many numbers
    ax.imshow(np.random.default_rng(0).random((4, len(tokens))), aspect="auto")
    if rotation is None:
        ax.set_xticks(range(len(tokens)), tokens)
    elif rotation:
        ax.set_xticks(range(len(tokens)), tokens, rotation=rotation, ha="right")
    else:
        ax.set_xticks(range(len(tokens)), [str(512 * 2**i) for i in range(len(tokens))])
    formatter = ax.xaxis.get_major_formatter()
    fig.set_size_inches(3.58, 2.5)
    fig.canvas.draw()
    assert _overlapping(_drawn_tick_labels(ax.xaxis))  # the old drawing
    fig.set_size_inches(4.5, 2.5)
    before = _column_png(fig)
    with mpl_figures.relaid_out(fig, 358):
        fig.canvas.draw()
        labels = _drawn_tick_labels(ax.xaxis)
        assert not _overlapping(labels)
        shown = [t.get_text() for t in labels if t.get_text()]
        if rotation != 0:
            assert shown == tokens and all(t.get_rotation() == 90 for t in labels)
        else:
            assert 2 <= len(shown) < len(tokens)
    assert ax.xaxis.get_major_formatter() is formatter
    assert [t.get_rotation() for t in _drawn_tick_labels(ax.xaxis)] == [rotation or 0] * len(tokens)
    _assert_same_drawing(_png(fig), before)
    plt.close(fig)


def test_a_figure_without_a_layout_engine_or_laid_out_tight_gets_no_phone_drawing():
    """Axes placed by hand cannot be placed again; tight layout that gives up is a collapse too.
    Either way the figure is left as it was and says so the same way twice."""
    for engine in ("none", "tight"):
        fig, axes = plt.subplots(1, 8, figsize=(6.88, 2.5), dpi=100, layout=engine)
        for ax in axes:
            ax.plot([0, 1], [0, 1])
            ax.set(ylabel="attention weight of the key")
        before = [ax.get_position().bounds for ax in axes]
        first = mpl_figures.figure_bundle(fig, ("en",))
        second = mpl_figures.figure_bundle(fig, ("en",))
        assert first["too_wide"] and second["too_wide"], engine
        assert first["narrow"] == second["narrow"] == {}
        if engine == "none":
            assert fig.get_layout_engine() is None
            assert [ax.get_position().bounds for ax in axes] == before
        plt.close(fig)


def test_the_phone_width_is_one_number():
    from attnbook import viz
    from attnbook.explorers import layout

    assert mpl_figures.PHONE_PX == viz.PHONE_PX == 358
    # A phone's column is narrower than the width below which explorers stack their panels.
    assert viz.PHONE_PX < layout.STACK_BELOW_PX < viz.COLUMN_PX


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda fig: mpl_figures.relaid_out(None, 358).__enter__(), TypeError, "fig"),
        (lambda fig: mpl_figures.figure_bundle(None, ("en",)), TypeError, "fig"),
        (lambda fig: mpl_figures.figure_bundle(fig, "en"), TypeError, "languages"),
        (lambda fig: mpl_figures.figure_bundle(fig, ("en", "fr")), ValueError, "languages"),
    ],
)
def test_figure_functions_name_the_bad_argument(call, exc, name):
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(3, 2), layout="constrained")
    try:
        with pytest.raises(exc, match=name):
            call(fig)
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(body=123), "body"),
        (dict(body="", target_id=5), "target_id"),
        (dict(body="", font_text=b"ab"), "font_text"),
    ],
)
def test_plotly_waiter_names_the_bad_argument(kwargs, name):
    from attnbook import viz

    with pytest.raises(TypeError, match=name):
        viz.when_plotly_ready_js(**kwargs)


def test_mime_renderer_draws_text_kinds_with_myst_nbs_text_renderers():
    class _Text(_FakeRenderer):
        def __getattr__(self, name):  # render_markdown, render_text_plain_inline, ...
            return lambda data: (name, data.mime_type, data.content)

    for kind, how in (("text/plain", "render_text_plain"), ("text/markdown", "render_markdown")):
        payload = {
            "kind": kind,
            "editions": {"en": "row sums", "zh_CN": "行和"},
            "untranslated": [],
        }
        assert edition_outputs.EditionsMimeRenderer.handle_mime(
            _Text("zh_CN"), _mime(payload), False
        ) == (how, kind, "行和")
        # Glued inline (the {glue} role): MyST-NB's inline renderer, in the edition's language.
        assert edition_outputs.EditionsMimeRenderer.handle_mime(
            _Text("zh_CN"), _mime(payload), True
        ) == (how + "_inline", kind, "行和")


@pytest.mark.parametrize(
    "msgid, msgstr, found",
    [
        (
            "loss {loss:.3f}",
            "损失 {loss}",
            r"\['loss!None:\.3f'\] but its translation '损失 \{loss\}'",
        ),
        ("name {s!r}", "名字 {s}", r"\['s!r:'\] but its translation"),
        ("set {{{n}}} size", "集合 {{n}} 大小", r"has the fields \['n!None:'\] but .* has \[\]"),
        ("bad {x}", "坏 {x} }", r"none \(it is no format string\)"),
    ],
)
def test_a_label_translation_keeps_each_field_whole(tmp_path, msgid, msgstr, found):
    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "printed-x.po").write_text(
        f'msgid "{msgid}"\nmsgstr "{msgstr}"\n', encoding="utf-8"
    )
    with pytest.raises(ValueError, match="label catalog printed-x.po: msgid .*" + found):
        i18n._compiled("zh_CN", tmp_path)


@pytest.mark.parametrize(
    "msgstr, found",
    [
        # "{n:.1f} 个头" printed "3.0 个头" where English printed "3 heads".
        ("{n:.1f} 个头", r"has the fields \['n!None:'\] but .* has \['n!None:\.1f'\]"),
        # A positional field failed only when the label was drawn (IndexError inside format).
        ("{n} 个头 {}", r"has the fields \['n!None:'\] but .* has \['!None:', 'n!None:'\]"),
    ],
)
def test_a_plural_label_translation_keeps_each_field_whole(tmp_path, msgstr, found):
    (tmp_path / "zh_CN").mkdir()
    (tmp_path / "zh_CN" / "printed-x.po").write_text(
        'msgid ""\nmsgstr "Plural-Forms: nplurals=1; plural=0;\\n"\n\n'
        f'msgid "one head"\nmsgid_plural "{{n}} heads"\nmsgstr[0] "{msgstr}"\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="label catalog printed-x.po: msgid 'one head' " + found):
        i18n._compiled("zh_CN", tmp_path)
    # Either English form's fields are the Chinese form's.
    (tmp_path / "zh_CN" / "printed-x.po").write_text(
        'msgid "one head"\nmsgid_plural "{n} heads"\nmsgstr[0] "{n} 个头"\n', encoding="utf-8"
    )
    got = i18n._compiled("zh_CN", tmp_path).ngettext("one head", "{n} heads", 3)
    assert got.format(n=3) == "3 个头"


def test_phone_wrap_never_starts_a_line_with_closing_punctuation():
    """A wrapped matplotlib label keeps "，" and "）" with the character before them and "（"
    with the one after it (attnbook.fonts.NO_LINE_START / NO_LINE_END), at every width."""
    import warnings

    import matplotlib.pyplot as plt

    from attnbook import fonts

    fig, ax = plt.subplots(figsize=(3, 2))
    title = ax.set_title("交叉注意力，第 1 个头（橙色）：有损失的位置")
    renderer = fig.canvas.get_renderer()
    seen = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the default font lacks the glyphs; widths suffice
        for limit in range(10, 240, 3):
            lines = mpl_figures._wrapped(title, limit, renderer).split("\n")
            seen.add(len(lines))
            assert not [ln for ln in lines if ln and ln[0] in fonts.NO_LINE_START], lines
            assert not [ln for ln in lines if ln and ln[-1] in fonts.NO_LINE_END], lines
    plt.close(fig)
    assert len(seen) > 3  # the widths did make it wrap, into several different line counts
