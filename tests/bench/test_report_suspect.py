"""The eval report lists suspect runs per task, with what was found, so a scan's false positive is visible."""

from __future__ import annotations

from mtl_graph.bench.records import Condition, EvalConfig, TaskResult
from mtl_graph.bench.report import build_report, render_markdown
from mtl_graph.core.trajectory import Verdict, VerdictStatus

FINDING = "stats_tool.py line 5: [file changes] changes files (.write_text)"


def _run(task: str, attempt: int, suspicions: list[str]) -> TaskResult:
    verdict = Verdict(status=VerdictStatus.FAIL if suspicions else VerdictStatus.PASS, source="tests",
                      suspicions=suspicions, reason="suspect: ..." if suspicions else "ok")
    return TaskResult(suite="terminalbench", task_id=task, domain="terminalbench", condition=Condition(),
                      attempt=attempt, verdict=verdict)


def test_suspect_runs_are_counted_per_task_with_their_findings():
    results = [_run("terminalbench/a", 0, [FINDING]), _run("terminalbench/a", 1, [FINDING]),
               _run("terminalbench/a", 2, []), _run("terminalbench/b", 0, []),
               _run("terminalbench/c", 0, ["x.py line 1: [os/sys beyond the allow-list] uses os._exit", FINDING])]
    data = build_report(results, EvalConfig(suites=["terminalbench"], runner="oracle", k=3))
    assert data["suspect_by_task"] == [
        {"suite": "terminalbench", "task_id": "terminalbench/a", "suspect_runs": 2, "runs": 3, "findings": [FINDING],
         "more_findings": 0},
        {"suite": "terminalbench", "task_id": "terminalbench/c", "suspect_runs": 1, "runs": 1,
         "findings": ["x.py line 1: [os/sys beyond the allow-list] uses os._exit", FINDING], "more_findings": 0}]
    markdown = render_markdown(data, [])
    section = markdown.split("### Suspect runs by task (2 tasks)", 1)[1]
    assert "| terminalbench | terminalbench/a | 2 / 3 | stats_tool.py line 5: [file changes]" in section


def test_no_suspect_run_no_per_task_table():
    data = build_report([_run("t/a", 0, [])], EvalConfig(suites=["t"], runner="oracle"))
    assert data["suspect_by_task"] == [] and "Suspect runs by task" not in render_markdown(data, [])
