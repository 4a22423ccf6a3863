"""Errors are not failures: a run ended by the model provider or the sandbox is an `error`, never a failed attempt.

Real components: the embedded pool with the local embedder, bwrap, the graph, the evaluation harness and its
report; the models are scripted and raise what a provider raises (an HTTP 429 from the OpenAI client)."""

import json
from pathlib import Path

import httpx
import openai
import pytest

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.bench.graph_runner import GraphRunner
from mtl_graph.bench.harness import run_eval
from mtl_graph.bench.records import Condition, EvalConfig, TaskResult
from mtl_graph.bench.passk import aggregate, task_scores
from mtl_graph.bench.report import render_report
from mtl_graph.core.trajectory import Verdict
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task


def rate_limited() -> Exception:
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    return openai.RateLimitError("Error code: 429 - Rate limit reached", response=httpx.Response(429, request=request),
                                 body=None)


class ProviderDown(Exception):
    """Any client's HTTP error carrying a status code."""

    status_code = 503


class Storm(ScriptedChatModel):
    """Every call fails the way a provider under load fails."""

    error: str = "429"

    def _generate(self, *args, **kwargs):
        raise rate_limited() if self.error == "429" else ProviderDown("Service Unavailable")


TASK = Task(id="storm-task", domain="math", instruction="Make f.X equal 2 so that test_f.py passes.",
            files={"f.py": "X = 1\n", "test_f.py": "import unittest\nimport f\n\nclass T(unittest.TestCase):\n"
                                                   "    def test(self):\n        self.assertEqual(f.X, 2)\n"},
            check="python3 -m unittest -q test_f", test_files=["test_f.py"])


@pytest.mark.parametrize("error", ["429", "503"])
def test_a_provider_storm_is_an_error_not_a_failure(error, embeddings, tmp_path):
    advice = [("Read the failing assertion", "Tests fail with an unclear message."),
              ("Keep the public interface", "A fix would rename a function the tests import."),
              ("Rerun the suite after the last edit", "A change is about to be submitted.")]
    seeded = [InsightMemory(title=t, description=d, content=f"{t}.", sources=[Provenance(domain="other",
                            source_task_id=f"o{i}")]) for i, (t, d) in enumerate(advice)]
    with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
        pool.add_many(seeded)
        graph = build_mtl_graph(Storm(error=error), pool, memory_type="insight", top_k=3, online=True,
                                distill_formats=["insight", "trajectory"], sandbox="bwrap",
                                run_log=tmp_path / "runs.jsonl", relevance_floor=-1)  # all three, however far
        state = graph.invoke({"task": TASK})
        assert state["error"].startswith("model provider error: ")
        assert ("RateLimitError (HTTP 429)" if error == "429" else "ProviderDown (HTTP 503)") in state["error"]
        assert state["verdict"]["status"] == "error" and state["verdict"]["source"] == "infrastructure"
        assert state["trajectory"]["exit_status"] == "model_error" and len(state["retrieved"]) == 3
        assert state["distilled"] == [] and state["new_memory_ids"] == []
        assert len(pool) == 3  # no failure memory
        assert all(pool.get(m.id).stats.retrieved == 0 for m in seeded)  # nothing debited
    [line] = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert line["verdict"]["status"] == "error" and line["error"] == state["error"]


def test_a_sandbox_that_cannot_start_is_an_error(tmp_path):
    model = ScriptedChatModel(responses=[bash_call("true"), submit_call("done")])
    graph = build_mtl_graph(model, None, memory_type="none", sandbox="docker", run_log=tmp_path / "runs.jsonl")
    state = graph.invoke({"task": TASK})
    assert "SandboxError" in state["error"] and state["verdict"]["status"] == "error"
    assert json.loads((tmp_path / "runs.jsonl").read_text())["verdict"]["status"] == "error"


def _result(task_id: str, attempt: int, status: str | None, error: str | None = None, **verdict) -> TaskResult:
    return TaskResult(suite="s", task_id=task_id, domain="s", condition=Condition(), attempt=attempt, error=error,
                      verdict=Verdict(status=status, source="tests", **verdict) if status else None)


def test_pass_at_k_is_over_completed_runs_with_errors_beside_it():
    results = [_result("a", 0, "pass"), _result("a", 1, "error", "model provider error: 429"),
               _result("b", 0, "fail"), _result("b", 1, None, "sandbox could not start"),
               _result("c", 0, "error", "model provider error: 503"), _result("c", 1, "error", "again")]
    by_task = {t.task_id: t for t in task_scores(results, k=1)}
    assert [(by_task[t].n, by_task[t].c, by_task[t].errors) for t in "abc"] == [(1, 1, 1), (1, 0, 1), (0, 0, 2)]
    assert by_task["c"].pass_at_k is None  # no completed run: not scored, not a zero
    cell = aggregate(results, k=1)[("s", "zero_shot")]
    assert (cell.pass_at_k, cell.tasks, cell.attempts, cell.errors) == (0.5, 2, 2, 4)


def _dir_task(root: Path, name: str) -> None:
    (root / name / "files").mkdir(parents=True)
    (root / name / "task.md").write_text(f"Make f.X equal 2 ({name}).\n")
    (root / name / "files" / "f.py").write_text("X = 1\n")
    (root / name / "files" / "test_f.py").write_text(TASK.files["test_f.py"])
    (root / name / "task.json").write_text(json.dumps({"id": name, "check": "python3 -m unittest -q test_f",
                                                       "tests": ["test_f.py"]}))


def test_the_eval_counts_a_storm_as_an_error_and_lists_tampered_runs(tmp_path):
    suite = tmp_path / "suite"
    for name in ("solved", "stormy", "cheated"):
        _dir_task(suite, name)
    agents = {"solved": [bash_call("echo 'X = 2' > f.py")], "cheated": [bash_call(": > test_f.py && echo 'import os; os._exit(0)' > sitecustomize.py")]}

    def model_for(task):
        name = task.id
        return Storm() if name == "stormy" else ScriptedChatModel(responses=[*agents[name], submit_call("done")])

    runner = GraphRunner(model_for, sandbox="bwrap", run_log=tmp_path / "runs.jsonl")
    config = EvalConfig(suites=[f"dir:{suite}"], runner="graph", formats=[])
    summary = run_eval(config, runner, str(tmp_path / "out"), progress=False)
    assert summary.errors == 1 and summary.ran == {"phase 1: zero-shot": 3}

    paths = render_report(tmp_path / "out")
    data = json.loads(paths["json"].read_text())
    cell = data["table"]["zero_shot"]["suite"]
    assert (cell["pass_at_k"], cell["tasks"], cell["attempts"], cell["errors"]) == (0.5, 2, 2, 1)
    assert [e["task_id"] for e in data["errors"]] == ["stormy"] and "RateLimitError" in data["errors"][0]["error"]
    assert [(t["task_id"], t["verdict"], t["files"]) for t in data["tests_modified"]] == [
        ("cheated", "fail", ["test_f.py"])]
    md = paths["md"].read_text()
    assert "0.500 [1 err]" in md and "## Errors (1)" in md and "## Tests modified by the agent (1)" in md
    assert "| suite | cheated | zero_shot | 0 | fail | test_f.py |" in md
    assert "## Suspect runs (0)" in md and "## Files not carried into the check (1 runs)" in md
    assert [d["dropped"] for d in data["dropped"]] == [["sitecustomize.py (interpreter start-up hook)"]]

    again = run_eval(config, runner, str(tmp_path / "out"), progress=False)  # the errored run is retried only
    assert again.ran == {"phase 1: zero-shot": 1} and again.resumed == {"phase 1: zero-shot": 2}


def test_an_errored_run_is_never_distilled_even_when_imported_from_a_log():
    from mtl_graph.distill.distillers import distill
    from mtl_graph.core.trajectory import Step, Trajectory

    run = Trajectory(task=TASK.ref(), steps=[Step(action="ls", observation="f.py")], exit_status="model_error",
                     verdict=Verdict.infrastructure_error("model provider error: RateLimitError"))
    made = distill(run, ["trajectory", "insight"], None)
    assert made.memories == [] and [f.reason for f in made.failures] == ["the run ended in an infrastructure error"] * 2
    judged = run.model_copy(update={"verdict": Verdict(status="fail", source="tests")})
    assert [m.type for m in distill(judged, ["trajectory"], None).memories] == ["trajectory"]


def test_a_suite_whose_runs_all_errored_shows_no_score_only_its_errors():
    from mtl_graph.bench.report import build_report, render_markdown

    results = [_result("a", 0, "error", "model provider error: RateLimitError (HTTP 429)"),
               _result("b", 0, None, "sandbox could not start")]
    data = build_report(results, EvalConfig(suites=["dir:x"], runner="graph", formats=[]))
    assert data["table"]["zero_shot"] == {} and data["error_counts"]["zero_shot"] == {"s": 2, "average": 2}
    md = render_markdown(data, [])
    assert "| zero_shot | – [2 err] | – [2 err] |" in md and "## Errors (2)" in md
    assert "| s | a | zero_shot | 0 | model provider error: RateLimitError (HTTP 429) |" in md


def test_a_wrapped_agent_ended_by_its_provider_is_an_error_too(embeddings, tmp_path):
    from langchain.agents import create_agent

    from mtl_graph.pipeline import with_memory_transfer

    memory = InsightMemory(title="Read the failing assertion", description="Tests fail with an unclear message.",
                           content="Read it first.", sources=[Provenance(domain="other", source_task_id="o1")])
    with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
        pool.add_many([memory])
        graph = with_memory_transfer(create_agent(Storm(), tools=[]), pool, model=Storm(), top_k=1,
                                     distill_formats=["trajectory"], sandbox="bwrap", run_log=tmp_path / "runs.jsonl")
        state = graph.invoke({"task": TASK})
        assert "RateLimitError" in state["error"] and state["verdict"]["status"] == "error"
        assert [r["id"] for r in state["retrieved"]] == [memory.id] and pool.get(memory.id).stats.retrieved == 0
        assert len(pool) == 1


def test_a_check_that_cannot_run_is_an_error_not_a_failure(tmp_path):
    broken = TASK.model_copy(update={"test_files": ["test_f.py", "missing_helper.py"]})  # no pristine copy
    model = ScriptedChatModel(responses=[bash_call("echo 'X = 2' > f.py"), submit_call("done")])
    state = build_mtl_graph(model, None, memory_type="none", online=False, sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl").invoke({"task": broken})
    assert state["error"].startswith("check could not run: TaskError") and "missing_helper.py" in state["error"]
    assert state["verdict"]["status"] == "error" and state["trajectory"]["exit_status"] == "submitted"
