"""The reader notebooks in JupyterLab, on ``make lab``'s route, run as a learner runs them.

One JupyterLab server (the session fixture ``lab`` of ``tests/conftest.py``, shared
with ``test_browser_lab_reload.py``) serves a copy of the built notebook trees
(``_build/notebooks``: ``en/`` and ``zh/``) with the application settings ``make lab`` uses
(``jupyter/reader``, no Jupytext configuration). For the English chapter 3 and the Chinese
chapter 6 the test opens the notebook and checks, in Chromium:

* it opens unmodified (the tab and the document model are not dirty once the kernel answered);
* the rendered Markdown shows no MyST (``{glue``, ``{cite}``, ``:class:``, directive fences,
  ``::::``, roles), its math is typeset, its boxes are boxes, every solution is a closed
  ``<details>`` whose text is hidden until its summary is clicked, and the glue bookkeeping
  cells are collapsed;
* Run All Cells finishes without an error output, and every number the prose quotes equals what
  the kernel just recomputed: the notebook is saved (a copy) and each glued value the chapter's
  prose uses is formatted from the kernel's own output, compared with the book's run (the
  execution cache) and found in the notebook's prose (``tests/prose_numbers.py``; its
  ``TIMINGS`` lists the values allowed to differ: none in these two chapters);
* in Chinese, the first cell sets the figures' language and the live explorer's figure is
  labelled in Chinese.

A negative control: a chapter converted the old way (the MyST source as notebook cells, what
Jupytext gives) fails the MyST check.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter

import nbformat
import pytest
from test_browser_lab import NOTEBOOK_OPEN_MS, ROOT, RUN_ALL_MS

from prose_numbers import TIMINGS, differing, glued_text, prose_numbers

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.book]

sys.path.insert(0, str(ROOT / "book"))
import execute  # noqa: E402 - book/execute.py: the book's own run (the execution cache)

#: (edition, chapter) opened in JupyterLab.
CASES = [("en", "03-scaling-variance"), ("zh", "06-masks")]
#: What MyST looks like when a front end shows it raw.
MYST = re.compile(
    r"\{glue(:\w+)?\}|\{cite(:\w+)?\}|\{(py:)?(func|class|mod|meth)\}|\{doc\}|"
    r"\{ref\}|\{numref\}|\{math\}|:class:|:::|```\{|\{code-cell\}|\{admonition\}|"
    r"\{dropdown\}|\{note\}|\{tip\}"
)
CJK = re.compile(r"[\u4e00-\u9fff]")


def myst_in(text: str) -> list[str]:
    """The raw MyST constructs in rendered ``text`` (empty when there are none)."""
    return [m.group(0) for m in MYST.finditer(text)]


def listing_heads(nb) -> list[str]:
    """The first line of each listing's open code (``def name(``) in ``nb``'s stored outputs."""
    heads = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            found = re.search(
                r"^```python\n((?:def|class) \w+[(:])",
                out.get("data", {}).get("text/markdown", ""),
                re.M,
            )
            if found:
                heads.append(found.group(1))
    return heads


def test_myst_check_catches_a_notebook_converted_the_old_way():
    """Negative control: the MyST source as Markdown cells (the old download) fails the check."""
    import jupytext

    text = (ROOT / "chapters" / "03-scaling-variance.md").read_text(encoding="utf-8")
    old = jupytext.reads(text, fmt="md:myst")
    markdown = "\n".join(c.source for c in old.cells if c.cell_type == "markdown")
    found = Counter(m.split("`")[0] for m in myst_in(markdown))
    assert found["{glue:text}"] > 10 and found[":class:"] >= 1, found


def test_prose_numbers_compare_values_not_keys():
    """The comparison can fail: one recomputed value off by one digit changes a number."""
    glued = glued_text(execute.executed_notebook("chapters/03-scaling-variance.md"))
    book = prose_numbers("03-scaling-variance", glued)
    key = next(k for k, _ in book)
    changed = dict(glued, **{key: repr(float(glued[key]) * 1.5 + 1)})
    assert prose_numbers("03-scaling-variance", changed) != book


def open_notebook(browser, lab, path: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(lab.base) else r.abort())
    # ?reset: a fresh workspace, with only this notebook open (not the last test's).
    page.goto(f"{lab.base}/lab/tree/{path}?reset&token={lab.token}")
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=NOTEBOOK_OPEN_MS)
    page.wait_for_function(
        """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                   return w && w.context && w.context.isReady && w.sessionContext.session
                     && w.sessionContext.session.kernel
                     && w.sessionContext.session.kernel.status === 'idle'
                     && w.context.model.getMetadata('language_info').version; }""",
        timeout=NOTEBOOK_OPEN_MS,
    )
    return page, errors


@pytest.mark.parametrize("code,chapter", CASES)
def test_reader_notebook_in_jupyterlab(lab, lab_browser, code, chapter, tmp_path):
    path = f"{code}/chapters/{chapter}.ipynb"
    source = nbformat.read(lab.root / path, as_version=4)
    page, errors = open_notebook(lab_browser, lab, path)
    try:
        check_reader_notebook(page, errors, lab, path, source, code, chapter)
    except BaseException:
        shot = tmp_path / f"failure-{code}-{chapter}.png"
        page.screenshot(path=str(shot), full_page=False)
        print(f"screenshot of the failing page: {shot}")
        raise
    finally:
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
        page.close()


def check_reader_notebook(page, errors, lab, path, source, code, chapter):
    page.wait_for_timeout(1500)  # anything that would dirty the document has had its turn
    dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    assert dirty is False, f"{path} is marked modified right after opening"

    # The prose as JupyterLab rendered it: no MyST, math typeset, boxes drawn.
    notebook = page.locator(".jp-NotebookPanel .jp-Notebook").first
    markdown = notebook.locator(".jp-MarkdownCell .jp-RenderedMarkdown")
    page.wait_for_function(
        "(n) => document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown').length >= n",
        arg=sum(c.cell_type == "markdown" for c in source.cells),
        timeout=NOTEBOOK_OPEN_MS,
    )
    rendered = "\n".join(markdown.all_inner_texts())
    assert myst_in(rendered) == [], f"raw MyST in {path}: {myst_in(rendered)[:10]}"
    assert "$$" not in rendered and "\\frac" not in rendered, "math shown as LaTeX source"
    assert notebook.locator(".jp-RenderedMarkdown mjx-container").count() > 10
    assert notebook.locator(".jp-RenderedMarkdown .attnbook-box").count() >= 2  # learn, myths
    if code == "zh":
        assert len(CJK.findall(rendered)) > 2000, "the Chinese notebook's prose is not Chinese"

    # Solutions: closed until their summary is clicked.
    word = "解答" if code == "zh" else "Solution"
    details = notebook.locator(".jp-RenderedMarkdown details").filter(
        has=page.locator("summary", has_text=word)
    )
    n_details = details.count()
    assert n_details >= 3, f"{n_details} solutions"
    assert page.evaluate(
        "() => [...document.querySelectorAll('.jp-RenderedMarkdown details')].every(d => !d.open)"
    ), "a solution (or a listing) is open before it was asked for"
    first = details.first
    first.scroll_into_view_if_needed()
    summary = first.locator("summary").inner_text().strip()
    closed = first.evaluate("(d) => d.innerText.trim()")
    assert closed == summary, f"a closed solution shows more than its summary: {closed[:200]!r}"
    first.locator("summary").click()
    opened = first.evaluate("(d) => d.open ? d.innerText.trim() : ''")
    assert len(opened) > len(summary) + 20, f"the opened solution shows {opened[:200]!r}"

    # The glue bookkeeping and hidden inputs: collapsed, as the HTML hides them.
    hidden = sum(
        c.cell_type == "code" and bool(c.metadata.get("jupyter", {}).get("source_hidden"))
        for c in source.cells
    )
    shown = notebook.locator(".jp-CodeCell .jp-InputPlaceholder").count()
    assert hidden > 0 and shown == hidden, f"{shown} collapsed inputs on screen, {hidden} in file"

    # Each library listing (a folded cell's stored output) is on screen once, before and after
    # the run: running its cell replaces it.
    heads = listing_heads(source)
    assert heads, f"{path}: no listing found in the notebook's outputs"

    def shown_listings():
        text = notebook.evaluate("(n) => n.innerText")
        return {head: text.count(head) for head in heads}

    assert set(shown_listings().values()) == {1}, shown_listings()

    # Run everything, as a learner does.
    start = time.monotonic()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        """() => { const w = window.jupyterapp.shell.currentWidget;
                   const cells = [...w.content.widgets].filter(c => c.model.type === 'code');
                   return w.sessionContext.session.kernel.status === 'idle'
                     && cells.every(c => c.model.executionCount !== null); }""",
        timeout=RUN_ALL_MS,
        polling=500,
    )
    ran_s = time.monotonic() - start
    assert set(shown_listings().values()) == {1}, f"listings after Run All: {shown_listings()}"
    if code == "zh":  # the live explorer draws its figure in the reader's language
        plot = notebook.locator(".js-plotly-plot").first
        plot.wait_for(timeout=60_000)
        labels = plot.evaluate("""(gd) => JSON.stringify([gd.layout.title, gd.layout.annotations,
                                  (gd.layout.xaxis || {}).title, (gd.layout.yaxis || {}).title])""")
        assert CJK.search(labels), f"the explorer's labels are not Chinese: {labels[:300]}"
    if os.environ.get("ATTNBOOK_SCREENSHOTS"):  # for a reviewer: the run notebook, as shown
        page.screenshot(
            path=os.path.join(os.environ["ATTNBOOK_SCREENSHOTS"], f"lab-{code}-{chapter}.png")
        )
    page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
    ran = nbformat.read(lab.root / path, as_version=4)
    failed = [o for c in ran.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not failed, f"{path}: {failed[0]['ename']}: {failed[0]['evalue']}"
    assert [c.source for c in ran.cells] == [c.source for c in source.cells]

    # Every number the prose quotes is what the kernel just recomputed.
    book_run = glued_text(execute.executed_notebook(f"chapters/{chapter}.md"))
    differ = differing(chapter, glued_text(ran), book_run)
    assert not differ, f"prose numbers the kernel recomputed differently: {differ}"
    book = prose_numbers(chapter, book_run)
    timings = TIMINGS.get(chapter, set())
    prose = "\n".join(c.source for c in source.cells if c.cell_type == "markdown")
    missing = [(k, t) for (k, t), n in book.items() if k not in timings and prose.count(t) < 1]
    assert not missing, f"numbers of the book's run not in {path}'s prose: {missing[:8]}"
    assert len(book) >= 10, f"only {len(book)} glued numbers found in {chapter}"
    assert not errors, f"page errors: {errors}"
    print(
        f"{path}: ran all cells in {ran_s:.0f} s; {sum(book.values())} prose numbers match; "
        f"{n_details} solutions collapsed; {hidden} inputs collapsed"
    )
    # Leave the copy as it was for any later test.
    nbformat.write(source, lab.root / path)
