"""Cost beside the pass rate in the evaluation report: each run's stage cost (from the graph's state) is kept in
its result, and report.md puts every condition's extra model calls, tokens and memory tool calls per run beside
its average pass@k."""

import json

from mtl_graph.bench.records import Condition, EvalConfig, TaskResult
from mtl_graph.bench.report import render_report
from mtl_graph.bench.runners import outcome_from_state
from mtl_graph.bench.results import ResultStore
from mtl_graph.core.trajectory import Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType

PLANNED = {"plan": {"calls": 1, "input_tokens": 120, "output_tokens": 60},
           "execute": {"calls": 5, "input_tokens": 4000, "output_tokens": 300,
                       "tool_calls": {"bash": 3, "search_memories": 1, "submit": 1}},
           "distill": {"calls": 2, "input_tokens": 900, "output_tokens": 100}}


def test_a_runs_stage_cost_is_kept_from_the_graphs_state():
    outcome = outcome_from_state({"verdict": {"status": "pass", "source": "tests"}, "cost": PLANNED})
    assert outcome.stage_cost == PLANNED
    assert outcome_from_state({"verdict": None}).stage_cost == {}


def test_the_report_shows_extra_calls_and_tokens_per_run_beside_the_pass_rate(tmp_path):
    store = ResultStore(tmp_path, EvalConfig(suites=["a"], runner="scripted", formats=[MemoryType.INSIGHT]))
    zero, insight = Condition(), Condition(memory_format=MemoryType.INSIGHT)
    for i, passed in enumerate((True, False)):
        verdict = Verdict(status=VerdictStatus.PASS if passed else VerdictStatus.FAIL, source="tests")
        store.append(TaskResult(suite="a", task_id=f"t{i}", domain="a", condition=zero, attempt=0, verdict=verdict,
                                stage_cost={"execute": PLANNED["execute"]}))
        store.append(TaskResult(suite="a", task_id=f"t{i}", domain="a", condition=insight, attempt=0,
                                verdict=Verdict(status=VerdictStatus.PASS, source="tests"),
                                stage_cost=PLANNED if i == 0 else {}))  # a run from before costs were kept
    paths = render_report(tmp_path)
    md = paths["md"].read_text()
    assert "| condition | avg pass@1 | runs | errors | input tokens | output tokens | cost (USD) | extra calls " \
           "per run | extra tokens per run (in / out) | memory tool calls per run |" in md
    assert "| zero_shot | 0.500 | 2 | 0 | 0 | 0 | 0.0000 | 0 | 0 / 0 | 1 |" in md  # the agent's search is extra
    assert "| insight | 1.000 | 2 | 0 | 0 | 0 | 0.0000 | 1.5 | 510 / 80 | 0.5 |" in md
    data = json.loads(paths["json"].read_text())
    assert data["accounting"]["insight"]["extra_calls"] == 3
