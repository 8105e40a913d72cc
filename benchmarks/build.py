"""How long `make html` takes: clean, with nothing changed, after one sentence, after one line
of the library. Run by hand (not in CI); writes ``benchmarks/results/build.json``.

    .venv/bin/python benchmarks/build.py            # about 10 minutes on two cores
    .venv/bin/python benchmarks/build.py --quick    # one clean build instead of two

Each step runs ``make html`` (``book/editions.py``: the chapters' execution, then both
editions) in a fresh process and reads ``_build/executions.log`` for the chapters it executed:

1. **clean** (twice; the median is the figure): ``_build`` removed, so every chapter executes;
2. **nothing changed**: the same build again;
3. **one sentence**: a sentence of chapter 3's prose edited (no chapter executes; both editions
   re-read that page);
4. **one library line**: a comment line appended to ``lib/attnbook/heads.py`` (``--lib-file``);
   the chapters that imported it execute again, the others do not.

The edits are undone at the end (and the book rebuilt, untimed), even when a step fails. The
machine's load average before each step is recorded with it: these machines are shared, so a
number measured under load is flagged, not hidden.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "_build" / "executions.log"
OUT = ROOT / "benchmarks" / "results" / "build.json"
#: The sentence the "one sentence" step edits (chapter 3's first section).
SENTENCE_PAGE = ROOT / "chapters" / "03-scaling-variance.md"
SENTENCE = "A score is a dot product"
EDITED = "A score is simply a dot product"


def executed_pages() -> list[str]:
    """Every page ``_build/executions.log`` lists (one per execution), in order."""
    if not LOG.is_file():
        return []
    return [json.loads(line)["page"] for line in LOG.read_text().splitlines() if line.strip()]


def make_html() -> dict:
    """Run ``make html`` once; its wall time and the chapters it executed."""
    before = len(executed_pages())
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.run(
        ["make", "--no-print-directory", "html"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise RuntimeError(f"make html failed (exit {proc.returncode}):\n{tail}")
    times_file = ROOT / "_build" / "editions" / "times.json"
    phases = json.loads(times_file.read_text()) if times_file.is_file() else {}
    executed = executed_pages()[before:]
    return {
        "seconds": round(seconds, 1),
        "executed": sorted(executed),
        "executions": len(executed),
        "load_before": round(load, 2),
        "phases": {k: round(v, 1) for k, v in phases.items()},
    }


def step(name: str, results: dict) -> dict:
    print(f"build benchmark: {name} ...", flush=True)
    out = make_html()
    results.setdefault("steps", {}).setdefault(name, []).append(out)
    print(
        f"build benchmark: {name}: {out['seconds']} s, {out['executions']} chapter(s) "
        f"executed (load before {out['load_before']})",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one clean build, not two")
    parser.add_argument(
        "--lib-file",
        default="lib/attnbook/heads.py",
        help="the library file the one-line step edits",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    results: dict = {
        "commit": commit,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "lib_file": args.lib_file,
    }
    lib = ROOT / args.lib_file
    lib_text = lib.read_text(encoding="utf-8")
    page_text = SENTENCE_PAGE.read_text(encoding="utf-8")
    if SENTENCE not in page_text:
        raise SystemExit(f"benchmarks/build.py: {SENTENCE!r} is no longer in {SENTENCE_PAGE}")
    try:
        for _ in range(1 if args.quick else 2):
            subprocess.run(["rm", "-rf", "_build"], cwd=ROOT, check=True)
            step("clean", results)
        step("nothing changed", results)
        SENTENCE_PAGE.write_text(page_text.replace(SENTENCE, EDITED, 1), encoding="utf-8")
        step("one sentence", results)
        SENTENCE_PAGE.write_text(page_text, encoding="utf-8")
        make_html()  # back to the committed page, untimed
        lib.write_text(lib_text + "# benchmarks/build.py: a one-line change\n", encoding="utf-8")
        step("one library line", results)
    finally:
        SENTENCE_PAGE.write_text(page_text, encoding="utf-8")
        lib.write_text(lib_text, encoding="utf-8")
    make_html()  # back to the committed library, untimed
    results["summary_s"] = {
        name: statistics.median(r["seconds"] for r in runs)
        for name, runs in results["steps"].items()
    }
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results["summary_s"], indent=1))
    print(f"build benchmark: written to {args.out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
