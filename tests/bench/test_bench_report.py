"""report.md / report.json / PNG plots from a results directory."""

from __future__ import annotations

import json

import pytest

from mtl_graph.bench.records import Condition, EvalConfig, RetrievedMemory, TaskResult
from mtl_graph.bench.report import render_report
from mtl_graph.bench.results import ResultStore, StoreError
from mtl_graph.core.trajectory import TokenUsage, Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType

INSIGHT, TRAJ = MemoryType.INSIGHT, MemoryType.TRAJECTORY


def _result(task, suite, cond, passed, judge=None, retrieved=(), attempt=0):
    def verdict(ok, source):
        return Verdict(status=VerdictStatus.PASS if ok else VerdictStatus.FAIL, source=source)

    return TaskResult(suite=suite, task_id=task, domain=suite, condition=cond, attempt=attempt,
                      verdict=verdict(passed, "tests"), judge_verdict=None if judge is None else verdict(judge, "judge"),
                      retrieved=[RetrievedMemory(id=m, type=(cond.memory_format or INSIGHT).value) for m in retrieved],
                      tokens=TokenUsage(input=1000, output=100), cost_usd=0.01)


@pytest.fixture
def results_dir(tmp_path):
    cfg = EvalConfig(suites=["a", "b"], runner="scripted", formats=[TRAJ, INSIGHT], pool_fractions=[0.5],
                     source_domain_counts=[1])
    store = ResultStore(tmp_path, cfg)
    zs, ins, tr = Condition(), Condition(memory_format=INSIGHT), Condition(memory_format=TRAJ)
    rows = [
        _result("a1", "a", zs, True, judge=True), _result("a2", "a", zs, False, judge=True),
        _result("b1", "b", zs, True, judge=False), _result("b2", "b", zs, False, judge=False),
        _result("a1", "a", ins, True, retrieved=["m1"]), _result("a2", "a", ins, True, retrieved=["m2", "m3"]),
        _result("b1", "b", ins, True), _result("b2", "b", ins, False),
        _result("a1", "a", tr, False, retrieved=["t9"]), _result("a2", "a", tr, False),
        _result("b1", "b", tr, True), _result("b2", "b", tr, False),
        _result("a1", "a", Condition(memory_format=INSIGHT, pool_fraction=0.5), False),
        _result("a1", "a", Condition(memory_format=INSIGHT, source_domains=1), True),
    ]
    for r in rows:
        store.append(r)
    return tmp_path


def test_report_renders_markdown_json_and_plots(results_dir):
    paths = render_report(results_dir)
    for key in ("md", "json", "formats_png", "scaling_pool_fraction_png", "scaling_source_domains_png"):
        assert paths[key].exists() and paths[key].stat().st_size > 0, key
    assert paths["formats_png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(paths["json"].read_text())
    assert data["suites"] == ["a", "b"]
    assert data["table"]["zero_shot"]["average"]["pass_at_k"] == 0.5
    cell = data["table"]["insight"]["a"]
    assert (cell["pass_at_k"], cell["delta"], cell["tasks"]) == (1.0, 0.5, 2)
    assert data["table"]["trajectory"]["average"]["delta"] == pytest.approx(-0.25)
    assert data["scaling"]["pool_fraction"]["insight"] == [[0.5, 0.0], [1.0, 0.75]]
    negative = {(r["task_id"], r["condition"]): r["retrieved"] for r in data["negative_transfer"]}
    assert negative == {("a1", "trajectory"): ["t9"], ("a1", "insight@pool=0.5"): []}
    positive = {(r["task_id"], r["condition"]): r["retrieved"] for r in data["positive_transfer"]}
    assert positive == {("a2", "insight"): ["m2", "m3"]}
    assert data["judge"] == {"compared": 4, "agree": 2, "accuracy": 0.5, "false_pass": 1, "false_fail": 1}
    assert data["accounting"]["zero_shot"]["input_tokens"] == 4000
    md = paths["md"].read_text()
    assert "| condition | a | b | avg |" in md
    assert "| insight | 1.000 (+0.500) | 0.500 (+0.000) | 0.750 (+0.250) |" in md
    assert "| a | a1 | trajectory | 1/1 | 0/1 | t9 |" in md
    assert "Accuracy 0.500 on 4 runs" in md and "hold-one-out holds" in md
    assert "![formats](formats.png)" in md


def test_report_of_a_non_results_dir_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="not a results directory"):
        render_report(tmp_path)
