"""attnbook.listing: the code a chapter shows, and the limits it enforces."""

import importlib.util
import sys
import textwrap

import pytest

from attnbook import attention, listing
from attnbook.listing import MAX_COLUMNS, MAX_LINES, show_code, source_of

_COUNTER = iter(range(10**6))


def _make(src: str, tmp_path):
    """Define ``f`` from ``src`` in a real file, so that ``inspect`` can read its source."""
    path = tmp_path / f"listing_case_{next(_COUNTER)}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def test_source_is_the_function_itself():
    src = source_of(attention.softmax_core)
    assert src.startswith("def softmax_core(")
    assert src == textwrap.dedent(src)
    assert "return" in src.splitlines()[-1]


def test_formatter_directives_are_left_out_of_a_listing(tmp_path, monkeypatch):
    path = tmp_path / "listing_directives.py"
    path.write_text(
        "class C:\n    x = 1\n\n    # fmt: off\n    def f(self, a):\n"
        "        return a  # fmt: on stays: not a whole line\n    # fmt: on\n"
    )
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # inspect finds a class through it
    spec.loader.exec_module(module)
    assert source_of(module.C) == (
        "class C:\n    x = 1\n\n    def f(self, a):\n"
        "        return a  # fmt: on stays: not a whole line"
    )
    assert source_of(module.C.f) == (
        "def f(self, a):\n    return a  # fmt: on stays: not a whole line"
    )


def test_a_directive_inside_a_string_is_code_and_stays(tmp_path):
    f = _make('def f():\n    s = """\n# fmt: off\n"""\n    return s\n', tmp_path)
    assert "# fmt: off" in source_of(f)
    assert f() == "\n# fmt: off\n"  # the listing is the code that runs


def test_markdown_fences_the_core_and_collapses_the_full_function():
    md = show_code(attention.softmax_core, full=attention.softmax)._repr_markdown_()
    head, _, rest = md.partition(f'<details class="{listing.FULL_CLASS}">')
    assert head.startswith("```python\ndef softmax_core(")
    assert head.rstrip().endswith("```")
    assert "<summary>The full public function: softmax</summary>" in rest
    # The fence inside <details> is separated by blank lines, so Markdown renders it as code.
    assert "</summary>\n\n```python\ndef softmax(" in rest
    assert rest.rstrip().endswith("```\n\n</details>")


def test_without_full_there_is_no_details_block():
    md = show_code(attention.softmax_core)._repr_markdown_()
    assert "<details" not in md
    assert md.count("```") == 2


def test_plain_text_repr_is_the_source():
    text = repr(show_code(attention.softmax_core))
    assert text == source_of(attention.softmax_core)


def test_core_over_the_line_limit_is_refused(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    long_fn = _make(f"def f():\n{body}", tmp_path)
    with pytest.raises(ValueError, match=f"{MAX_LINES + 1} lines"):
        show_code(long_fn)
    # The same function is fine as the collapsed full listing.
    assert "x0 = 0" in show_code(attention.softmax_core, full=long_fn)._repr_markdown_()


def test_core_exactly_at_the_limits_is_accepted(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 2))
    wide = "    y = '" + "a" * (MAX_COLUMNS - 10) + "'\n"
    fn = _make(f"def f():\n{body}{wide}", tmp_path)
    assert len(source_of(fn).splitlines()) == MAX_LINES
    assert max(map(len, source_of(fn).splitlines())) == MAX_COLUMNS
    show_code(fn)


def test_core_over_the_column_limit_is_refused(tmp_path):
    fn = _make("def f():\n    return '" + "a" * MAX_COLUMNS + "'\n", tmp_path)
    with pytest.raises(ValueError, match="columns"):
        show_code(fn)


@pytest.mark.parametrize("obj", [len, 3, "def f(): pass"])
def test_objects_without_source_raise_type_error(obj):
    with pytest.raises(TypeError, match="obj must be a function"):
        show_code(obj)


def test_a_fence_inside_the_source_gets_a_longer_fence(tmp_path):
    fn = _make('def f():\n    """```python\n    x\n    ```"""\n', tmp_path)
    md = show_code(fn)._repr_markdown_()
    assert md.startswith("````python\n") and md.endswith("\n````")


def test_every_documented_name_exists():
    for name in listing.__all__:
        assert hasattr(listing, name)


def test_between_shows_the_run_of_lines_dedented(tmp_path):
    f = _make(
        "def f(x):\n    y = 0\n    for i in x:\n        y += i\n        y *= 2\n    return y\n",
        tmp_path,
    )
    lst = show_code(f, full=f, between=("for i", "y *="))
    assert lst.core == "for i in x:\n    y += i\n    y *= 2"
    assert lst.full.startswith("def f(x):")  # the whole function stays one click away


def test_between_checks_the_limits_of_the_lines_shown(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES + 5))
    f = _make("def f():\n" + body, tmp_path)
    with pytest.raises(ValueError, match="lines"):
        show_code(f)
    assert len(show_code(f, between=("x0 =", f"x{MAX_LINES - 1} =")).core.splitlines()) == MAX_LINES
    with pytest.raises(ValueError, match="lines"):
        show_code(f, between=("x0 =", f"x{MAX_LINES} ="))


def test_between_names_a_text_it_cannot_find(tmp_path):
    f = _make("def f():\n    a = 1\n    b = 2\n", tmp_path)
    with pytest.raises(ValueError, match="'c ='"):
        show_code(f, between=("c =", "b ="))
    with pytest.raises(ValueError, match="'a =' after 'b ='"):
        show_code(f, between=("b =", "a ="))


def _show_code_calls(text: str) -> list[str]:
    """The ``show_code(...)`` calls of a chapter's source, each with its balanced brackets."""
    calls, start = [], 0
    while (i := text.find("show_code(", start)) != -1:
        depth, j = 0, i + len("show_code")
        while True:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        if not text[i - 4 : i].endswith("def "):
            calls.append(text[i:j])
        start = j
    return calls


def test_every_core_a_chapter_shows_fits_the_listing_limits():
    """Each chapter's ``show_code(core, ...)`` call, run here against the library as it is: a
    core that grew past MAX_COLUMNS or MAX_LINES fails this unit test, not the book build's
    execution of the chapter minutes later."""
    import importlib
    import pkgutil
    from pathlib import Path

    import attnbook
    import attnbook.flash_triton  # noqa: F401 - imported by chapter 12 (interpreter on CPU)

    namespace = {"show_code": show_code}
    for info in pkgutil.iter_modules(attnbook.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"attnbook.{info.name}")
        namespace.setdefault(info.name, module)
    models = importlib.import_module("attnbook.models")
    namespace.update({n: getattr(models, n) for n in models.__all__})
    chapters = sorted((Path(__file__).resolve().parents[1] / "chapters").glob("*.md"))
    calls = [(c.name, call) for c in chapters for call in _show_code_calls(c.read_text("utf-8"))]
    assert len(calls) >= 40, f"found only {len(calls)} show_code calls in {len(chapters)} chapters"
    for chapter, call in calls:
        listing = eval(call, dict(namespace))  # raises ValueError past the limits
        assert listing.core.strip(), (chapter, call)
