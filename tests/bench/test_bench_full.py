"""Full HumanEval with the known-result agents (slow: deselected by default, run with -m slow)."""

from __future__ import annotations

import pytest

from mtl_graph.bench.harness import run_eval
from mtl_graph.bench.records import EvalConfig
from mtl_graph.bench.passk import aggregate
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.results import ResultStore


@pytest.mark.slow
@pytest.mark.parametrize("runner, expected", [(OracleRunner, 1.0), (NoopRunner, 0.0)])
def test_full_humaneval(tmp_path, runner, expected):
    cfg = EvalConfig(suites=["humaneval"], runner=runner().name, formats=[])
    summary = run_eval(cfg, runner(), str(tmp_path), concurrency=4, progress=False)
    assert summary.ran == {"phase 1: zero-shot": 164} and summary.errors == 0
    score = aggregate(ResultStore(tmp_path).results(), 1)[("humaneval", "zero_shot")]
    assert (score.tasks, score.pass_at_k) == (164, expected)
