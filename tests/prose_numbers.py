"""The numbers a chapter's prose quotes, recomputed from a run of its notebook.

A chapter's prose quotes its numbers through ``{glue:text}`key:format``` roles; the values are
what the chapter's cells glued (``myst_nb.glue``) in the book's own run. Given any run of the
notebook (the book's, from the execution cache; a reader's, saved from JupyterLab; a headless
one), :func:`prose_numbers` formats each glued number exactly as MyST-NB does for the prose, so
two runs can be compared number by number. :data:`TIMINGS` names the glued values that are
measured times (or depend on them): those may differ from one run to the next.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: ``{glue:text}`key:fmt``` in a chapter's source.
GLUE_ROLE = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")
#: Where ``glue(..., display=False)`` puts a value's text (``myst_nb.ext.glue.GLUE_PREFIX``).
GLUE_MIME = "application/papermill.record/text/plain"
#: A formatted number (``1,024``, ``0.125``, ``-3.1``, ``42.0%``, ``1.4e-14``).
NUMBER = re.compile(r"[-−+]?[\d,.]*\d(?:[eE][-+]?\d+)?%?")
#: Per chapter (file stem), the glued values that are measured times or ratios of them (speed-ups,
#: throughputs), allowed to differ between runs; every other glued number must be reproduced
#: (a glued text that is not one number, such as a shape or a phrase, is not compared).
TIMINGS: dict[str, set[str]] = {
    "01-rnn-bottleneck": {
        "par_attention_ms",
        "par_rnn_ms",
        "par_torch_rnn_ms",
        "par_us_per_step",
        "par_thru_lo",  # ranges of ratios over the rows L >= 512
        "par_thru_hi",
        "par_wait_lo",
        "par_wait_hi",
        "par_gflops_attention",
        "par_gflops_rnn",
        "par_gflops_torch_rnn",
        "par_independent_ms",
        "par_py_cpu_lo",  # the Python loop's CPU time per step
        "par_py_cpu_hi",
        "par_py_wall_over_cpu",
        "prof_matmul_share",  # shares of the profiled layer's time
        "prof_softmax_share",
        "prof_rest_share",
        "prof_total_ms",  # the profiled and the timed layer, ms
        "prof_timed_ms",
    },
    "04-softmax-saturation": {"run_wall_time"},
    "05-self-cross-attention": {"add_ratio_min", "add_ratio_max"},
    "11-quadratic-cost-kv-cache": {
        "ex2_time_s",
        "kv_speedup",
        "kv_t_cache",
        "kv_t_full",
        "meas_ms_max",
        "meas_time_ratio",
    },
    "12-flashattention": {"lin_growth_lin", "lin_growth_soft", "lin_speedup_max", "tr_seconds"},
    "13-train-and-sample": {"kv_speedup", "kv_t_cache", "kv_t_full", "run_seconds"},
}


def glued_text(nb) -> dict[str, str]:
    """``{key: text/plain}`` of the values a run of a notebook glued (``myst_nb.glue``)."""
    out = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            if name is not None:
                out[name] = data.get(GLUE_MIME, data.get("text/plain"))
    return out


def prose_numbers(chapter: str, glued: dict[str, str]) -> Counter:
    """``Counter`` of ``(key, text)``: each ``{glue:text}`` role of ``chapters/<chapter>.md``
    whose value is a number, formatted from ``glued`` as MyST-NB formats it
    (``format_plain_text``)."""
    from myst_nb.core.variables import format_plain_text

    source = (ROOT / "chapters" / f"{chapter}.md").read_text(encoding="utf-8")
    numbers: Counter = Counter()
    for key, fmt in GLUE_ROLE.findall(source):
        text = format_plain_text(glued[key], fmt or "s")
        if NUMBER.fullmatch(text.strip()):
            numbers[(key, text)] += 1
    return numbers


def differing(chapter: str, run: dict[str, str], book: dict[str, str]) -> list[str]:
    """The keys whose prose numbers differ between two runs, timings left out."""
    a, b = prose_numbers(chapter, run), prose_numbers(chapter, book)
    return sorted({k for k, _ in (a - b) + (b - a)} - TIMINGS.get(chapter, set()))
