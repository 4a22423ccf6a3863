"""The harness driving the real MTL graph: in-process (GraphRunner), on `langgraph dev` (RemoteRunner), phase 2.

The model is scripted (real tool calls); suites, sandbox, checks, distillation and the Qdrant pool are real."""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.cli.evaluation import eval_cmd
from mtl_graph.bench.graph_runner import (GraphRunner, PoolDistiller, RemoteRunner, agent_task, make_distiller,
                                          run_context)
from mtl_graph.bench.harness import run_eval
from mtl_graph.bench.records import Condition, EvalConfig, MemoryScope, TaskResult
from mtl_graph.bench.passk import aggregate
from mtl_graph.bench.runners import RunnerUnavailable, make_runner
from mtl_graph.bench.results import ResultStore
from mtl_graph.bench.suites import REFERENCE_KEY, load_suite
from mtl_graph.bench.suites.base import REFERENCE_SCRIPT_KEY
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task
from helpers.paths import ROOT
from helpers.studio import free_port, serve

PROBLEMS = f"jsonl:{ROOT / 'tests' / 'fixtures' / 'bench' / 'problems.jsonl'}"
SEED = 7
ZERO, TRAJ = "zero_shot", "trajectory"


def write_action(files: dict[str, str]) -> str:
    """One bash command writing files verbatim (base64, so no quoting or heredoc can break the content)."""
    return " && ".join(f"printf %s {base64.b64encode(text.encode()).decode()} | base64 -d > {path}"
                       for path, text in files.items())


def solving_script(task: Task, solve: bool) -> list:
    """Look, write the reference solution (or a broken one), submit."""
    reference = task.metadata[REFERENCE_KEY]
    files = reference if solve else {path: "raise SystemExit(1)\n" for path in reference}
    return [bash_call("ls"), bash_call(write_action(files)), submit_call("done")]


class Factory:
    """A fresh scripted model per run; the n-th run of a task solves it when plan[task.id][n] is true."""

    def __init__(self, plan: dict[str, list[bool]]):
        self.plan, self.calls = plan, Counter()

    def __call__(self, task: Task) -> ScriptedChatModel:
        n = self.calls[task.id]
        self.calls[task.id] += 1
        return ScriptedChatModel(responses=solving_script(task, self.plan.get(task.id, [False, False])[n]))


def _scores(out) -> dict:
    return {cell: round(s.pass_at_k, 6) for cell, s in aggregate(ResultStore(out).results(), 1).items()}


def test_run_context_maps_scopes_to_the_graph():
    assert run_context(None).given() == {"memory_type": "none", "online": False, "hold_one_out": False,
                                         "lifecycle": "off"}
    scope = MemoryScope(memory_type=MemoryType.INSIGHT, exclude_domains=["a"], exclude_task_ids=["t"],
                        only_ids=["m1"], top_k=2)
    # the evaluation's shared settings ride along; the scope's own fields win over them
    shared = {"model": "openai:x", "step_limit": 5, "top_k": 9, "hold_one_out": True}
    assert run_context(scope, shared).given() == {
        "memory_type": "insight", "top_k": 2, "online": False, "hold_one_out": False, "lifecycle": "off",
        "exclude_domains": ["a"],
        "exclude_task_ids": ["t"], "only_ids": ["m1"], "model": "openai:x", "step_limit": 5}
    task = load_suite(PROBLEMS, limit=1).tasks[0]
    assert REFERENCE_KEY in task.metadata and REFERENCE_KEY not in agent_task(task).metadata
    assert agent_task(task).files == task.files
    scripted = task.model_copy(update={"metadata": {**task.metadata, REFERENCE_SCRIPT_KEY: "echo 42 > answer"}})
    assert not {REFERENCE_KEY, REFERENCE_SCRIPT_KEY} & set(agent_task(scripted).metadata)  # a solution script too


def test_eval_end_to_end_through_the_graph(tmp_path):
    he = [t.id for t in load_suite("humaneval", limit=3, seed=SEED).tasks]
    pr = [t.id for t in load_suite(PROBLEMS, limit=3, seed=SEED).tasks]
    # [zero-shot, with trajectory memories]
    plan = {he[0]: [True, True], he[1]: [False, True], pr[0]: [True, False], pr[1]: [True, True]}
    config = EvalConfig(suites=["humaneval", PROBLEMS], runner="graph", formats=[MemoryType.TRAJECTORY],
                        limit=3, seed=SEED)
    pool_dir, out = tmp_path / "pool", tmp_path / "out"
    factory = Factory(plan)
    runner = GraphRunner(factory, sandbox="local", pool_location=str(pool_dir), run_log=tmp_path / "runs.jsonl")
    distiller = make_distiller(None, str(pool_dir), ["trajectory"])
    try:
        summary = run_eval(config, runner, str(out), distill=distiller, concurrency=2, progress=False)
    finally:
        runner.close()
    assert summary.errors == 0 and summary.leaks == 0 and summary.pool_size == 6, summary
    assert _scores(out) == {
        ("humaneval", ZERO): round(1 / 3, 6), ("problems", ZERO): round(2 / 3, 6),
        ("humaneval", TRAJ): round(2 / 3, 6), ("problems", TRAJ): round(1 / 3, 6),
        ("average", ZERO): 0.5, ("average", TRAJ): 0.5}

    # phase 2 wrote one real trajectory memory per zero-shot run, with its verdict as the outcome
    with MemoryPool.open(pool_dir) as pool:
        memories = {m.source_task_ids[0]: m for m in pool}
    assert sorted(memories) == sorted(he + pr) and {m.type for m in memories.values()} == {"trajectory"}
    assert {t for t, m in memories.items() if m.outcome == "success"} == {he[0], pr[0], pr[1]}
    assert "base64 -d > solution.py" in memories[he[0]].steps[1].command
    assert not distiller.failures and "6 memories" in ResultStore(out).load_pool().note

    # phase 3 retrieved from the other suite only, and the ids are the ones phase 2 recorded
    phase3 = [r for r in ResultStore(out).results() if not r.condition.is_zero_shot]
    assert len(phase3) == 6 and all(r.runner == "graph" and not r.leaked_memory_ids for r in phase3)
    for r in phase3:
        assert len(r.retrieved) == 3, r.task_id
        assert all(m.domains and r.domain not in m.domains for m in r.retrieved)
        assert {m.id for m in r.retrieved} == {memories[t].id for t in (pr if r.domain == "humaneval" else he)}
    zero = [r for r in ResultStore(out).results() if r.condition.is_zero_shot]
    assert all(not r.retrieved and not r.new_memory_ids and r.trajectory.model == "ScriptedChatModel"
               for r in zero)
    assert all(REFERENCE_KEY not in r.trajectory.task.metadata for r in zero)  # the agent never saw the answer

    # a rerun resumes: no run, no model, no distillation
    again = Factory(plan)
    rerun = GraphRunner(again, sandbox="local", pool_location=str(pool_dir))
    summary = run_eval(config, rerun, str(out), distill=lambda results: pytest.fail("distilled again"),
                       progress=False)
    rerun.close()
    assert sum(summary.ran.values()) == 0 and sum(summary.resumed.values()) == 12 and not again.calls


def _result(task_id: str, trajectory: Trajectory | None, error: str | None = None) -> TaskResult:
    return TaskResult(suite="s", task_id=task_id, domain="d", condition=Condition(), attempt=0,
                      verdict=Verdict(status=VerdictStatus.FAIL, source="tests", reason="exit 1"),
                      trajectory=trajectory, error=error)


def test_distiller_records_every_failure(tmp_path):
    run = Trajectory(task=Task(id="t1", instruction="Add two numbers.", domain="d").ref(),
                     steps=[Step(action="python3 add.py", observation="3", exit_code=0)], model="m-1")
    distiller = make_distiller(None, str(tmp_path / "pool"), ["trajectory", "insight"])
    pool = distiller([_result("t1", run), _result("t2", None, error="sandbox died")])
    assert [(m.type, m.domains, m.source_task_ids, m.task_models) for m in pool.memories] == [
        (MemoryType.TRAJECTORY, ["d"], ["t1"], ["m-1"])]
    assert distiller.failures == ["t1 #0: insight: no model given to distil with",
                                  "t2 #0: no trajectory to distil (sandbox died)"]
    assert "2 not distilled" in pool.note and "sandbox died" in pool.note
    with MemoryPool.open(tmp_path / "pool") as real:  # the verdict given by the harness picked the outcome
        assert [m.outcome for m in real] == ["failure"]
    with pytest.raises(RunnerUnavailable, match="phase 2 distils here.*cannot load scripted model"):
        make_distiller(f"scripted:{tmp_path / 'missing.json'}", None, ["insight"])
    assert make_distiller(f"scripted:{tmp_path / 'missing.json'}", None, ["trajectory"]).chat is None


def test_make_runner_builds_the_graph_runner_and_the_cli_runs_it(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"actions": [{"bash": "echo 'print(1)' > solution.py"}, {"submit": "done"}]}))
    runner, distiller = make_runner(model=f"scripted:{script}", pool=str(tmp_path / "p"), formats=["summary"])
    assert isinstance(runner, GraphRunner) and isinstance(distiller, PoolDistiller)
    assert distiller.formats == [MemoryType.SUMMARY] and runner.settings.pool_location == str(tmp_path / "p")
    with pytest.raises(RunnerUnavailable, match="cannot load scripted model"):
        make_runner(model=f"scripted:{tmp_path / 'missing.json'}")

    app = typer.Typer()
    app.command("eval")(eval_cmd)
    app.command("other")(lambda: None)  # keeps "eval" a subcommand
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval", "--suites", PROBLEMS, "--limit", "2", "--model", f"scripted:{script}",
                                      "--formats", "trajectory", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "4 runs (0 resumed, 0 errors, 0 provenance violations)" in result.output
    with MemoryPool.open(out / "pool") as pool:  # the CLI keeps the eval's pool next to its results
        assert pool.count("trajectory") == 2
    assert len((out / "runs.jsonl").read_text().splitlines()) == 4


def test_remote_runner_refuses_an_unreachable_server():
    port = free_port()  # a port nobody listens on
    with pytest.raises(RunnerUnavailable, match=f"cannot reach the LangGraph server at http://127.0.0.1:{port}"):
        RemoteRunner(f"http://127.0.0.1:{port}", model="openai:x")


@pytest.fixture
def server(tmp_path):
    """`langgraph dev` serving the project's exported graph; its pool is a directory the test can write."""
    env = {**os.environ, "MTL_POOL": str(tmp_path / "pool"), "MTL_RUN_LOG": str(tmp_path / "server-runs.jsonl"),
           "MTL_SANDBOX": "local", "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1",
           "MTL_TASK_ROOTS": str(tmp_path)}  # the replayed script lies here: the served graph loads none elsewhere
    with serve(tmp_path, {"mtl": f"{ROOT}/graphs/mtl.py:graph"}, env, ready=RemoteRunner) as url:
        yield url, tmp_path


def test_eval_through_a_langgraph_server(server):
    url, tmp_path = server
    with pytest.raises(RunnerUnavailable, match="no graph or assistant 'nosuch' .graphs there: mtl."):
        RemoteRunner(url, graph_id="nosuch")
    problem = load_suite(PROBLEMS, limit=2, seed=SEED).tasks[0]
    script = tmp_path / "solve.json"  # one replay for every task: it solves this problem and nothing else
    script.write_text(json.dumps({"actions": [{"bash": write_action(problem.metadata[REFERENCE_KEY])},
                                              {"submit": "done"}]}))
    config = EvalConfig(suites=["humaneval", PROBLEMS], runner="graph", formats=[MemoryType.TRAJECTORY],
                        limit=2, seed=SEED)
    # The server opens its pool only for retrieval, so phase 2 can write it first from here.
    summary = run_eval(config, RemoteRunner(url, model=f"scripted:{script}"), str(tmp_path / "out"),
                       distill=make_distiller(None, str(tmp_path / "pool"), ["trajectory"]), concurrency=2,
                       progress=False)
    assert summary.errors == 0 and summary.leaks == 0 and summary.pool_size == 4, summary
    assert _scores(tmp_path / "out") == {
        ("humaneval", ZERO): 0.0, ("problems", ZERO): 0.5, ("humaneval", TRAJ): 0.0, ("problems", TRAJ): 0.5,
        ("average", ZERO): 0.25, ("average", TRAJ): 0.25}
    memory_runs = [r for r in ResultStore(tmp_path / "out").results() if not r.condition.is_zero_shot]
    other = {"humaneval": "problems", "problems": "humaneval"}
    # top_k is 3, but only the other suite's two memories are in scope on the server
    assert sorted((r.domain, d) for r in memory_runs for m in r.retrieved for d in m.domains) == sorted(
        (r.domain, other[r.domain]) for r in memory_runs for _ in range(2))
    assert all(r.runner == "remote" and r.trajectory.steps for r in memory_runs)
