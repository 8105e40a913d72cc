r"""Search snippets without TeX: ``book/_static/attnbook-search.js`` and its loading.

The search page's result snippets are made from each result's HTML, where math is TeX source
(``\(\sqrt{d_k}\)``: MathJax typesets it only in a loaded page). The script turns each math
element into plain text (``texToText``); ``book/_ext/attnbook_search.py`` loads it on the search
page. Checked here, without a browser:

* ``texToText`` under Node (``node:vm``, the file itself, no DOM) on TeX written as the book
  writes it, each against the text a reader should see (worked out by hand);
* on every math element of the built book (``book``), both editions: no TeX is left (no
  backslash, no ``_{``/``^{`` group, no alignment ``&``);
* a toy Sphinx site built with the extension loads the script on its search page only, deferred
  (so it runs after ``searchtools.js`` defines ``Search``), from its own ``_static``.

The search page itself, in Chromium, is ``tests/browser/test_browser_search.py``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "book" / "_static" / "attnbook-search.js"

# Loads the script into a fresh context (no DOM, no Search) and converts every TeX string of the
# JSON file argv[2]; writes the results as JSON.
RUNNER = r"""
const fs = require('node:fs');
const vm = require('node:vm');
const [script, texPath] = process.argv.slice(2);
const context = vm.createContext({});
vm.runInContext(fs.readFileSync(script, 'utf8'), context, {filename: script});
const texs = JSON.parse(fs.readFileSync(texPath, 'utf8'));
const timed = process.argv[4] === 'timed';  // [text, milliseconds] for each
process.stdout.write(JSON.stringify(texs.map((t) => {
  const start = process.hrtime.bigint();
  const text = context.attnbookSearch.texToText(t);
  return timed ? [text, Number(process.hrtime.bigint() - start) / 1e6] : text;
})));
"""


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):  # .ci/run installs nodejs: there a missing node is a failure
            pytest.fail("no Node.js to run the search page's script (apt-get install nodejs)")
        pytest.skip("no Node.js to run the search page's script")
    return node


def tex_to_text(texs: list[str], tmp_path: Path, *, timed: bool = False) -> list:
    """``attnbookSearch.texToText`` of each TeX string, run by Node on the book's script (with
    ``timed``: ``[text, milliseconds]`` for each)."""
    runner = tmp_path / "runner.js"
    runner.write_text(RUNNER, encoding="utf-8")
    data = tmp_path / "tex.json"
    data.write_text(json.dumps(texs), encoding="utf-8")
    run = subprocess.run(
        [node_or_skip(), str(runner), str(SCRIPT), str(data)] + (["timed"] if timed else []),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# (TeX as the book's HTML holds it, what the snippet should say). Subscripts are written as a
# reader types them (d_k, x_(t+1)); superscripts in Unicode where it has them (σ², QKᵀ).
CASES = [
    (r"\(d_k\)", "d_k"),
    (r"\(\sqrt{d_k}\)", "√d_k"),
    (r"\(\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V\)", "softmax(QKᵀ/√d_k) V"),
    (r"\(c = 1/\sqrt{d_k}\)", "c = 1/√d_k"),
    (r"\(q \cdot k = \sum_{r=1}^{d_k} q_r k_r\)", "q · k = ∑_(r=1)^(d_k) q_r k_r"),
    (r"\(\sigma^2\)", "σ²"),
    (r"\(\ell_i = e^{-3} + e^{-2} + 1\)", "ℓ_i = e⁻³ + e⁻² + 1"),
    (r"\(x_{t+1}\)", "x_(t+1)"),
    (r"\(d_{\text{model}} =" "\n" r"512\)", "d_model = 512"),
    (r"\(m_i^\text{new}\)", "m_i^new"),
    (r"\(W_q \in \mathbb{R}^{d_a \times d_q}\)", "W_q ∈ ℝ^(d_a×d_q)"),
    (r"\(\tilde x\)", "x̃"),
    (r"\(L =\)", "L ="),  # a glued number follows the math in the page
    (r"\(\lVert W_{hh} \rVert_2\)", "‖ W_hh ‖_2"),
    (r"\(\max\big(m_i,\ \max_{j \in J} s_{ij}\big)\)", "max(m_i, max_(j∈J) s_ij)"),
    (r"$x^2$", "x²"),
    (r"$$\frac{a}{b}$$", "a/b"),
    (
        "\n\\[\n\\mathrm{LayerNorm}(x) = \\frac{x - \\mu}{\\sqrt{\\sigma^2 + \\varepsilon}}"
        " \\odot \\gamma + \\beta .\n\\]",
        "LayerNorm(x) = (x − μ)/√(σ² + ε) ⊙ γ + β.",
    ),
    (
        "\\[\\begin{split}\n\\begin{aligned}\nJ_{ij} &= \\frac{\\partial p_i}{\\partial z_j},"
        " \\quad\\text{即} \\\\\nJ &= \\operatorname{diag}(p) - p\\,p^\\top"
        " \\in \\mathbb{R}^{S \\times S}.\n\\end{aligned}\n\\end{split}\\]",
        "J_ij = ∂p_i/∂z_j, 即 J = diag(p) − p pᵀ ∈ ℝ^(S×S).",
    ),
    (
        r"\[\mu = \frac{1}{d}\sum_{f=1}^{d} x_f\]",
        "μ = 1/d ∑_(f=1)^d x_f",
    ),
    (
        r"\[\underbrace{Q}_{L \times d_k} = Y W_Q, \qquad"
        r" \underbrace{A}_{L \times S} = \operatorname{softmax}\!\Big(\frac{QK^\top}"
        r"{\sqrt{d_k}}\Big)\]",
        "Q = Y W_Q, A = softmax(QKᵀ/√d_k)",
    ),
    (
        r"\[\begin{pmatrix} x'_a \\ x'_b \end{pmatrix} = \begin{pmatrix} \cos p\theta_r &"
        r" -\sin p\theta_r \\ \sin p\theta_r & \cos p\theta_r \end{pmatrix}"
        r" \begin{pmatrix} x_a \\ x_b \end{pmatrix} .\]",
        "(x′_a; x′_b) = (cos pθ_r, −sin pθ_r; sin pθ_r, cos pθ_r) (x_a; x_b).",
    ),
    (
        r"\(\tilde s_{ij} = \begin{cases} s_{ij}, & M_{ij} \\ -\infty, & \text{otherwise}"
        r"\end{cases}\)",
        "s̃_ij = { s_ij, M_ij; −∞, otherwise }",
    ),
    # chapter 6: the cases block is closed, so the next equation is not one of its cases
    (
        "\\[\\tilde s_{ij} = \\begin{cases} s_{ij} & M_{ij} \\\\ -\\infty & \\text{otherwise,}"
        " \\end{cases}\n\\qquad\n\\alpha_{ij} = \\frac{M_{ij}}{Z_i} ,\\]",
        "s̃_ij = { s_ij, M_ij; −∞, otherwise } α_ij = M_ij/Z_i,",
    ),
    (
        r"\[\text{Post-LN:}\quad h = \operatorname{LN}_1\big(x + \operatorname{Attn}(x)\big)\]",
        "Post-LN: h = LN_1(x + Attn(x))",
    ),
    (
        r"\(\text{time} = \max\Big(\frac{\text{FLOPs}}{\text{peak FLOP/s}}\Big)\)",
        "time = max(FLOPs/(peak FLOP/s))",
    ),
    (r"\(\pi_i = e^{(z_i - z_\text{max})/T}\)", "π_i = e^((z_i−z_max)/T)"),
    (r"\(\mathcal{L}_{\text{MLM}} = \{1, \dots, L\}\)", "L_MLM = {1, …, L}"),
    # A fraction, root or written-out script followed by another operand does not run into it:
    # a fraction is bracketed (also across a space, as TeX sets it), a root or script spaced.
    (
        r"\(J = \tfrac1S I - \tfrac1{S^2}\mathbf{1}\mathbf{1}^\top\)",  # chapter 4
        "J = (1/S) I − (1/S²) 11ᵀ",
    ),
    (r"\(\frac{1}{2}x\)", "(1/2) x"),
    (r"\(\frac{QK^\top}{\sqrt{d_k}}V\)", "(QKᵀ/√d_k) V"),
    (r"\(\tfrac{8}{3}\, d_{\text{model}}\)", "(8/3) d_model"),
    (r"\(\frac12(a + b)\)", "(1/2)(a + b)"),
    (r"\(\sqrt{2}3\)", "√2 3"),
    (r"\(e^{x}y\)", "e^x y"),
    (r"\(x_{t}y\)", "x_t y"),
    (r"\(\alpha_{ij}v_j\)", "α_ij v_j"),
    # ... but not where the term ends the operand or the next one is bracketed, raised, larger
    # or words
    (r"\(f_\theta(x) + x_i^2\)", "f_θ(x) + x_i²"),
    (r"\(\frac{1}{2} + \frac{1}{d}\sum_j x_j\)", "1/2 + 1/d ∑_j x_j"),
    (r"\(\frac{a}{b} \quad \text{for } b > 0\)", "a/b for b > 0"),
    # roots with an index, text inside text, starred matrices, \left., \prime, rows of equations
    (r"\(\sqrt[n]{x} + \sqrt[3]{y}\)", "x^(1/n) + ∛y"),
    (r"\(\sqrt[\alpha]{a+b}\)", "(a+b)^(1/α)"),
    (r"\(\text{\emph{not} masked}\)", "not masked"),
    (r"\(\text{for all $i \le L$}\)", "for all i ≤ L"),
    (r"\(\begin{pmatrix*}[r] 1 & -1 \\ -2 & 3 \end{pmatrix*}\)", "(1, −1; −2, 3)"),
    (r"\(\left. \frac{\partial f}{\partial x} \right|_{x=0}\)", "∂f/∂x |_(x=0)"),
    (r"\(x^{\prime} + f^\prime\)", "x′ + f′"),
    (r"\[\begin{aligned} a &= b \\ c &= d \\ &= e \end{aligned}\]", "a = b; c = d = e"),
    (r"\[\begin{aligned} a &= b, \\ c &= d \end{aligned}\]", "a = b, c = d"),
    (r"\(\end{cases} x\)", "x"),  # an \end of nothing open closes nothing
]


def test_tex_to_text_reads_as_the_page_shows_it(tmp_path):
    got = tex_to_text([tex for tex, _ in CASES], tmp_path)
    wrong = [(tex, want, out) for (tex, want), out in zip(CASES, got, strict=True) if out != want]
    assert not wrong, "\n".join(
        f"{tex!r}\n  want {want!r}\n  got  {out!r}" for tex, want, out in wrong
    )


# What TeX looks like in a snippet: a command, a braced script, an alignment tab.
_TEX_LEFT = re.compile(r"\\|[_^]\{|&")
_MATH = re.compile(r'<(span|div) class="math[^"]*"[^>]*>(.*?)</\1>', re.S)


def book_math(html_dir: Path) -> set[str]:
    """The TeX of every math element (``span.math``, ``div.math``) of a built edition."""
    return {
        html.unescape(m.group(2))
        for path in html_dir.rglob("*.html")
        if not any(part.startswith("_") for part in path.relative_to(html_dir).parts)
        for m in _MATH.finditer(path.read_text(encoding="utf-8"))
    }


def tex_left(html_dir: Path, tmp_path: Path) -> tuple[int, dict[str, str]]:
    """How many math elements an edition has, and ``{TeX: text}`` where TeX is left."""
    texs = sorted(book_math(html_dir))
    texts = tex_to_text(texs, tmp_path)
    return len(texs), {t: s for t, s in zip(texs, texts, strict=True) if _TEX_LEFT.search(s)}


@pytest.mark.book
@pytest.mark.parametrize("edition", ["en", "zh"])
def test_no_tex_is_left_in_any_math_of_the_book(built_editions, edition, tmp_path):
    count, left = tex_left(built_editions[edition], tmp_path)
    assert count > 100  # the book's math was found
    assert not left, f"TeX left in the plain text of {len(left)} math elements: {left}"


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "x_{" * n,  # never closed
        lambda n: "x_{" * n + "y" + "}" * n,
        lambda n: r"\frac{" * n + "1" + "}{2}" * n,
        lambda n: r"\sqrt{a+" * n + "y" + "}" * n,
        lambda n: r"\frac{" + "(" * n + "x" + ")" * n + "}{2}",
    ],
    ids=["unclosed", "subscripts", "fractions", "roots", "brackets"],
)
def test_deep_nesting_takes_linear_time(make, tmp_path):
    """4000 and 16000 levels: each converted in well under a second, as text without TeX (an
    unclosed ``x_{`` 4000 times took 191 s, 4000 fractions overflowed the stack)."""
    texs = ["\\(" + make(n) + "\\)" for n in (4000, 16000)]
    results = tex_to_text(texs, tmp_path, timed=True)
    assert all(ms < 1000 for _, ms in results), [ms for _, ms in results]
    assert not any(_TEX_LEFT.search(text) for text, _ in results), [t[:80] for t, _ in results]


def test_the_negative_control_finds_tex(tmp_path):
    """The check above can fail: TeX itself is caught."""
    assert all(_TEX_LEFT.search(tex) for tex, _ in CASES if "\\" in tex or "_{" in tex)


# --------------------------------------------------------------------------------------------------
# the extension loads the script on the search page


CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
extensions = ["attnbook_search"]
html_theme = "basic"
"""


def test_search_page_loads_the_script_deferred(tmp_path):
    pytest.importorskip("sphinx")
    from toy_site import build_html

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    (src / "index.rst").write_text("Toy\n===\n\nScaled by :math:`\\sqrt{d_k}`.\n", encoding="utf-8")
    out = build_html(src)
    assert (out / "_static" / "attnbook-search.js").read_bytes() == SCRIPT.read_bytes()
    search = (out / "search.html").read_text(encoding="utf-8")
    tags = re.findall(r"<script\b[^>]*attnbook-search\.js[^>]*>", search)
    assert len(tags) == 1 and "defer" in tags[0], tags
    assert "attnbook-search.js" not in (out / "index.html").read_text(encoding="utf-8")
