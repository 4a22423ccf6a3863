"""The oracle runs a task's reference script (Terminal-Bench's solution.sh) in the run's sandbox, end to end
through `mtl eval --agent oracle`; the no-op agent still fails the same task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.cli.evaluation import eval_cmd
from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import load_suite, terminalbench
from mtl_graph.bench.suites.base import REFERENCE_SCRIPT_KEY
from mtl_graph.core.task import Task
from mtl_graph.sandbox.bwrap import BwrapSandbox
from helpers.paths import FIXTURES

TASK = FIXTURES / "terminalbench" / "word-tally"
needs_bwrap = pytest.mark.skipif(not BwrapSandbox.is_available(), reason="bubblewrap is not usable here")


@pytest.fixture(autouse=True)
def no_docker(monkeypatch):
    monkeypatch.setattr(terminalbench, "docker_reason", lambda: "no Docker engine reachable (docker info failed)")


def _eval(tmp_path: Path, agent: str) -> dict:
    app = typer.Typer()
    app.command("eval")(eval_cmd)
    app.command("unused")(lambda: None)  # two commands, so typer keeps the "eval" name
    out = tmp_path / agent
    result = CliRunner().invoke(app, ["eval", "--suites", f"terminalbench:{TASK}", "--agent", agent, "--formats",
                                      "none", "--k", "1", "--out", str(out), "--no-progress", "--sandbox", "bwrap"])
    assert result.exit_code == 0, result.output
    assert "1 runs (0 resumed, 0 errors" in result.output, result.output
    return json.loads((out / "report.json").read_text())


@needs_bwrap
def test_mtl_eval_oracle_runs_solution_sh_and_passes_while_noop_fails(tmp_path):
    assert _eval(tmp_path, "oracle")["table"]["zero_shot"]["average"]["pass_at_k"] == 1.0
    assert _eval(tmp_path, "noop")["table"]["zero_shot"]["average"]["pass_at_k"] == 0.0


@needs_bwrap
def test_the_script_runs_in_the_sandbox_and_is_recorded_as_a_step(tmp_path):
    task = load_suite(f"terminalbench:{TASK}").tasks[0]
    outcome = OracleRunner(sandbox="bwrap", workdir=tmp_path).run(task, Condition(), 0, None)
    assert outcome.verdict.status.value == "pass", outcome.verdict.reason
    step = outcome.trajectory.steps[-1]
    assert step.action == task.metadata[REFERENCE_SCRIPT_KEY] and step.exit_code == 0
    assert outcome.trajectory.submission == "reference solution"
    noop = NoopRunner(sandbox="bwrap", workdir=tmp_path).run(task, Condition(), 0, None)
    assert noop.verdict.status.value == "fail" and noop.trajectory.steps == []


def test_a_failing_script_is_recorded_and_the_check_decides(tmp_path):
    task = Task(id="t/script", instruction="write ok.txt", metadata={REFERENCE_SCRIPT_KEY: "echo partial; exit 3"},
                check="test -f ok.txt")
    outcome = OracleRunner(sandbox="local", workdir=tmp_path).run(task, Condition(), 0, None)
    assert outcome.error is None and outcome.verdict.status.value == "fail"
    assert outcome.trajectory.steps[-1].exit_code == 3 and "partial" in outcome.trajectory.steps[-1].observation


def test_files_then_script_in_order(tmp_path):
    task = Task(id="t/both", instruction="x", metadata={"reference_files": {"a.txt": "one\n"},
                                                         REFERENCE_SCRIPT_KEY: "cp a.txt b.txt"},
                check="cmp a.txt b.txt")
    outcome = OracleRunner(sandbox="local", workdir=tmp_path).run(task, Condition(), 0, None)
    assert [s.tool for s in outcome.trajectory.steps] == ["write_file", "bash"]
    assert outcome.verdict.status.value == "pass", outcome.verdict.reason


def test_a_task_with_neither_is_an_error_naming_why(tmp_path):
    task = Task(id="t/none", instruction="x", check="true", metadata={"reference_unavailable": "no solution.sh"})
    outcome = OracleRunner(sandbox="local", workdir=tmp_path).run(task, Condition(), 0, None)
    assert outcome.error == "task t/none: no solution.sh"
