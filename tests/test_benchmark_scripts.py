"""The benchmark scripts' own argument checks (their measurements are never asserted here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recall_benchmark_refuses_a_seq_len_before_it_trains(tmp_path, capsys):
    """benchmarks/long_range_recall.py checks --seq-len against every --max-k (and asks for
    its own --name) before the first run: a run that died at its second max_k left a partial
    CSV beside the old JSON, or overwrote the committed grid."""
    bench = load("long_range_recall")
    base = ["--seeds", "0", "--steps", "1", "--models", "rnn", "--out", str(tmp_path)]
    for extra, message in (
        (
            ["--max-k", "2", "4", "--seq-len", "4", "--name", "x"],
            "shorter than max(--max-k) + 1 = 5",
        ),
        (["--max-k", "2", "--seq-len", "4"], "needs its own --name"),
    ):
        with pytest.raises(SystemExit):
            bench.main(base + extra)
        assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written
