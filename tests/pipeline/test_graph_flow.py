"""Errors the LangGraph way: conditional edges route a failed stage to write back, RetryPolicy retries transient
provider errors in the model-calling nodes, and an unexpected exception fails the run after it is logged.

Real components: the embedded pool with the local embedder, bwrap, the graph; the models are scripted and fail the
way a provider fails (an HTTP 429 from the OpenAI client)."""

import asyncio
import json

import httpx
import openai
import pytest
from helpers.leftovers import files_in
from langchain_core.messages import AIMessage

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.llm.retry import is_transient
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task
from helpers.provider_errors import Flaky, rate_limited

CHECKED = Task(id="flow-task", domain="math", instruction="Make f.X equal 2 so that test_f.py passes.",
               files={"f.py": "X = 1\n", "test_f.py": "import unittest\nimport f\n\nclass T(unittest.TestCase):\n"
                                                      "    def test(self):\n        self.assertEqual(f.X, 2)\n"},
               check="python3 -m unittest -q test_f", test_files=["test_f.py"])
UNCHECKED = Task(id="flow-free", domain="text", instruction="Write a haiku about rivers into poem.txt.")
FIX = [bash_call("echo 'X = 2' > f.py"), submit_call("set X")]
PLAN = "Read f.py and the test, set the constant, rerun the test, submit."
FAST_RETRY = {"initial_delay": 0.01}
"""The run's retry settings with short waits (three attempts, as by default)."""
DECISION = {"spec_satisfied": True, "technically_correct": True, "no_regressions": True, "interfaces_respected": True,
            "verified_with_evidence": True, "reasoning": "The poem file was written and shown.", "verdict": "pass"}
INSIGHT = {"title": "Reproduce before you edit",
           "description": "Applies when fixing a reported bug in an unfamiliar codebase.",
           "content": "Write a minimal reproduction first and watch it fail. After the edit, rerun it as evidence."}


def tool_answer(name: str, args: dict) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{name}", "type": "tool_call"}])


def visited(graph, task, **kwargs) -> tuple[list[str], dict]:
    """The nodes a run went through, in order, and its final state."""
    nodes, final = [], {}
    for mode, chunk in graph.stream({"task": task}, stream_mode=["updates", "values"], **kwargs):
        if mode == "updates":
            nodes.extend(chunk)
        else:
            final = chunk
    return nodes, final


def log_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def pool(embeddings, tmp_path):
    with MemoryPool.open(tmp_path / "pool", embeddings) as p:
        p.add(InsightMemory(title="Rerun the tests after the last edit", description="Before submitting a fix.",
                            content="Run the suite once more.", sources=[Provenance(domain="o", source_task_id="o1")]))
        yield p


def test_transient_errors_are_told_apart():
    assert is_transient(rate_limited()) and is_transient(TimeoutError()) and is_transient(httpx.ConnectError("reset"))
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    assert not is_transient(openai.AuthenticationError("bad key", response=httpx.Response(401, request=request),
                                                       body=None))
    assert not is_transient(ValueError("bad answer")) and not is_transient(KeyError("x"))


def test_an_invalid_task_goes_straight_to_write_back(tmp_path):
    graph = build_mtl_graph(ScriptedChatModel(responses=[]), None, run_log=tmp_path / "runs.jsonl")
    nodes, out = visited(graph, 42)
    assert nodes == ["plan", "write_back"]
    assert out["error"].startswith("invalid task") and out["verdict"]["status"] == "error" and out["outcome"] == "error"
    [line] = log_lines(tmp_path / "runs.jsonl")
    assert line["error"] == out["error"] and line["verdict"]["status"] == "error"
    assert out["error_kind"] == line["error_kind"] == "invalid_task"


def test_a_retrieval_failure_skips_the_agent(embeddings, tmp_path):
    broken = MemoryPool.open(tmp_path / "pool", embeddings)
    broken.close()  # searching a closed pool fails like an unreadable pool directory
    model = Flaky(responses=[AIMessage(PLAN), *FIX])
    graph = build_mtl_graph(model, broken, top_k=1, sandbox="bwrap", run_log=tmp_path / "runs.jsonl",
                            workspace_root=tmp_path / "ws")
    nodes, out = visited(graph, CHECKED)
    assert nodes == ["plan", "retrieve", "write_back"]
    assert out["error"].startswith("retrieval failed") and out["verdict"]["status"] == "error"
    assert out["error_kind"] == "retrieval"
    assert model.calls == 1 and out["trajectory"] is None  # the agent never ran: only the plan was asked for
    assert files_in(tmp_path / "ws") == []
    assert log_lines(tmp_path / "runs.jsonl")[0]["error"] == out["error"]


def test_a_provider_storm_in_the_agent_skips_judge_and_distill(pool, tmp_path):
    model = Flaky(responses=[AIMessage(PLAN)], failing=set(range(2, 100)))
    graph = build_mtl_graph(model, pool, top_k=1, distill_formats=["trajectory"], sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl")
    nodes, out = visited(graph, CHECKED)
    assert nodes == ["plan", "retrieve", "execute", "write_back"]
    assert out["error"].startswith("model provider error") and out["verdict"]["status"] == "error"
    assert out["error_kind"] == "model"
    assert len(pool) == 1 and pool.get(out["retrieved"][0]["id"]).stats.retrieved == 0


def test_plan_is_retried_after_a_rate_limit(pool, tmp_path):
    model = Flaky(responses=[AIMessage(PLAN), *FIX], failing={1})
    graph = build_mtl_graph(model, pool, top_k=1, distill_formats=["trajectory"], sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl", retry=FAST_RETRY)
    nodes, out = visited(graph, CHECKED)
    assert out["query"] == PLAN  # without the retry the query would be the task text (the plan fallback)
    assert nodes == ["plan", "retrieve", "execute", "judge", "distill", "write_back"]
    assert out["verdict"]["status"] == "pass" and out["error"] is None and model.calls == 4


def test_the_llm_judge_call_is_retried_after_rate_limits(tmp_path):
    # calls 1-2: the agent; 3-4: the judge's call, 429 twice; 5: its third attempt answers
    model = Flaky(responses=[bash_call("echo rivers > poem.txt"), submit_call("wrote it"),
                             tool_answer("JudgeDecision", DECISION)], failing={3, 4})
    graph = build_mtl_graph(model, None, memory_type="none", online=False, sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl", retry=FAST_RETRY)
    out = graph.invoke({"task": UNCHECKED})
    assert out["verdict"]["status"] == "pass" and out["verdict"]["source"] == "judge" and out["error"] is None
    assert model.calls == 5


@pytest.mark.parametrize("error, told", [
    ("429", "RateLimitError (HTTP 429): Error code: 429 - Rate limit reached"),
    ("503", "InternalServerError (HTTP 503): Error code: 503 - overloaded"),
    ("timeout", "APITimeoutError: Request timed out."),
])
def test_a_storm_at_the_judge_is_retried_then_recorded_as_an_error(error, told, pool, tmp_path):
    model = Flaky(responses=[AIMessage(PLAN), bash_call("echo rivers > poem.txt"), submit_call("wrote it")],
                  failing=set(range(4, 100)), error=error)
    graph = build_mtl_graph(model, pool, top_k=1, distill_formats=["insight"], sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl", retry=FAST_RETRY)
    nodes, out = visited(graph, UNCHECKED)
    assert nodes == ["plan", "retrieve", "execute", "judge", "write_back"]  # the judge's attempts are one update
    assert model.calls == 3 + 3  # the retry settings' three attempts, once: no structured attempt or node retry on top
    assert out["error"] == f"model provider error: judge: {told}"
    assert out["verdict"]["status"] == "error" and out["new_memory_ids"] == [] and len(pool) == 1
    assert pool.get(out["retrieved"][0]["id"]).stats.retrieved == 0  # nothing debited for an unjudged run
    assert log_lines(tmp_path / "runs.jsonl")[0]["verdict"]["status"] == "error"


def test_distill_is_retried_when_the_provider_fails_its_call(pool, tmp_path):
    # calls 1-3: plan and the agent; 4-5: the insight distiller's call, 429 twice; 6: its third attempt answers
    model = Flaky(responses=[AIMessage(PLAN), *FIX, tool_answer("InsightDraft", INSIGHT)], failing={4, 5})
    graph = build_mtl_graph(model, pool, top_k=1, distill_formats=["insight"], sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl", retry=FAST_RETRY)
    out = graph.invoke({"task": CHECKED})
    assert out["distill_failures"] == [] and [m["title"] for m in out["distilled"]] == [INSIGHT["title"]]
    assert len(out["new_memory_ids"]) == 1 and pool.get(out["new_memory_ids"][0]).title == INSIGHT["title"]
    assert model.calls == 6


def test_an_exception_in_the_distiller_fails_the_run_after_logging_it(pool, tmp_path):
    def broken_distiller(trajectory, formats, model):
        raise RuntimeError("distiller bug")

    graph = build_mtl_graph(Flaky(responses=[AIMessage(PLAN), *FIX]), pool, top_k=1, distiller=broken_distiller,
                            sandbox="bwrap", run_log=tmp_path / "runs.jsonl", workspace_root=tmp_path / "ws")
    with pytest.raises(RuntimeError, match="distiller bug"):  # the run fails, as LangSmith and Studio must see it
        graph.invoke({"task": CHECKED})
    [line] = log_lines(tmp_path / "runs.jsonl")
    assert line["error"] == "distill raised RuntimeError: distiller bug" and line["verdict"]["status"] == "error"
    assert line["task"]["id"] == CHECKED.id and len(line["steps"]) == 2  # the trajectory so far is kept
    assert files_in(tmp_path / "ws") == []  # the run's workspace was removed
    assert len(pool) == 1 and pool.get(line["retrieved"][0]["id"]).stats.retrieved == 0


def test_an_exception_in_the_agent_fails_the_run_after_logging_it(tmp_path):
    class BrokenAgent:
        def run(self, *args, **kwargs):
            raise KeyError("agent bug")

    graph = build_mtl_graph(Flaky(responses=[]), None, memory_type="none", agent=BrokenAgent(), sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl")
    with pytest.raises(KeyError, match="agent bug"):
        graph.invoke({"task": CHECKED})
    [line] = log_lines(tmp_path / "runs.jsonl")
    assert line["error"] == "execute raised KeyError: 'agent bug'" and line["task"]["id"] == CHECKED.id


def test_async_runs_route_and_fail_the_same_way(pool, tmp_path):
    def broken_distiller(trajectory, formats, model):
        raise RuntimeError("distiller bug")

    graph = build_mtl_graph(Flaky(responses=[AIMessage(PLAN), *FIX]), pool, top_k=1, distiller=broken_distiller,
                            sandbox="bwrap", run_log=tmp_path / "runs.jsonl", workspace_root=tmp_path / "ws")
    with pytest.raises(RuntimeError, match="distiller bug"):
        asyncio.run(graph.ainvoke({"task": CHECKED}))
    assert log_lines(tmp_path / "runs.jsonl")[0]["error"] == "distill raised RuntimeError: distiller bug"
    assert files_in(tmp_path / "ws") == []
    invalid = build_mtl_graph(ScriptedChatModel(responses=[]), None, run_log=tmp_path / "r2.jsonl")
    out = asyncio.run(invalid.ainvoke({"task": 7}))
    assert out["error"].startswith("invalid task") and out["verdict"]["status"] == "error"


@pytest.mark.parametrize("failing, query", [({1}, PLAN), ({1, 2, 3}, None)])
def test_the_middleware_retries_the_plan_like_the_graph_and_never_raises_a_rate_limit(failing, query, pool, tmp_path):
    from langchain.agents import create_agent

    from mtl_graph.pipeline import MemoryTransferMiddleware, MTLContext

    planner = Flaky(responses=[AIMessage(PLAN)], failing=failing)  # the same retry settings as in the graph
    middleware = MemoryTransferMiddleware(pool, model=planner, top_k=1, distill_formats=["trajectory"],
                                          run_log=tmp_path / "runs.jsonl", lifecycle="off",  # a poem: no floor
                                          retry=FAST_RETRY)
    agent = create_agent(ScriptedChatModel(responses=[AIMessage("Done.")]), tools=[], middleware=[middleware],
                         context_schema=MTLContext)
    out = agent.invoke({"messages": [("user", UNCHECKED.instruction)]}, context=MTLContext())
    # retried: the plan is the query; a storm that outlasts the attempts: the task text, and no raise
    assert out["mtl"]["query"] == (query or UNCHECKED.instruction) and out["mtl"]["error"] is None
    assert [r["id"] for r in out["mtl"]["retrieved"]] == [next(iter(pool)).id]


def test_an_unwritable_run_log_fails_the_run_and_still_removes_the_workspace(tmp_path):
    (tmp_path / "ws").mkdir()
    graph = build_mtl_graph(Flaky(responses=FIX), None, memory_type="none", online=False, sandbox="bwrap",
                            run_log=tmp_path / "ws", workspace_root=tmp_path / "ws")  # the log path is a directory
    with pytest.raises(IsADirectoryError):
        graph.invoke({"task": CHECKED})
    assert files_in(tmp_path / "ws") == []


def test_a_storm_at_planning_falls_back_to_the_task_text_after_the_retries(pool, tmp_path):
    model = Flaky(responses=FIX, failing={1, 2, 3})  # every planning attempt hits a 429; the agent is served after
    graph = build_mtl_graph(model, pool, top_k=1, online=False, sandbox="bwrap", run_log=tmp_path / "runs.jsonl",
                            retry=FAST_RETRY)
    events = [c for m, c in graph.stream({"task": CHECKED}, stream_mode=["custom"]) if m == "custom"]
    warnings = [e["message"] for e in events if e["kind"] == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith("planning failed (Error code: 429")  # told once, not thrice
    assert [e["query"] for e in events if e["kind"] == "plan"] == [CHECKED.instruction]
    assert model.calls == 3 + 2 and events[-1]["kind"] == "verdict" and events[-1]["status"] == "pass"


@pytest.mark.parametrize("crash", [False, True])
def test_the_runs_sandbox_is_released_at_the_end_even_after_a_crash(crash, pool, tmp_path):
    """A sandbox registered for the workspace (by an agent's tools) is closed with the run: its processes die."""
    from mtl_graph.agent.base import AgentResult
    from mtl_graph.distill.distillers import distill
    from mtl_graph.core.trajectory import Step
    from mtl_graph.sandbox import registry

    seen = {}

    class ToolAgent:  # runs its command in the workspace's shared sandbox, as sandbox_tools do
        def run(self, task, sandbox, model, **kwargs):
            seen["workspace"] = sandbox.workspace
            registry.sandbox_for(sandbox.workspace, "bwrap").run("echo 'X = 2' > f.py", timeout=30)
            return AgentResult(steps=[Step(action="echo 'X = 2' > f.py", observation="", exit_code=0)],
                               submission="done")

    def distiller(trajectory, formats, model):
        if crash:
            raise RuntimeError("distiller bug")
        return distill(trajectory, formats, model)

    graph = build_mtl_graph(Flaky(responses=[]), pool, memory_type="none", agent=ToolAgent(), distiller=distiller,
                            distill_formats=["trajectory"], sandbox="bwrap", run_log=tmp_path / "runs.jsonl",
                            workspace_root=tmp_path / "ws")
    if crash:
        with pytest.raises(RuntimeError, match="distiller bug"):
            graph.invoke({"task": CHECKED})
    else:
        assert graph.invoke({"task": CHECKED})["verdict"]["status"] == "pass"
    assert not registry.is_open(seen["workspace"]) and not seen["workspace"].exists()


def test_a_crash_inside_the_execute_subgraph_still_removes_the_run_workspace(tmp_path, monkeypatch):
    """The subgraph made the workspace, but its update never reached the parent's state: the handler finds the
    workspace by thread and run all the same, logs the run and removes it."""
    import mtl_graph.pipeline.build as build

    def broken(*args, **kwargs):
        raise ValueError("finish bug")

    monkeypatch.setattr(build, "agent_ended", broken)  # our agent's host reads its run back in finish
    graph = build_mtl_graph(Flaky(responses=[*FIX]), None, memory_type="none", sandbox="bwrap",
                            run_log=tmp_path / "runs.jsonl", workspace_root=tmp_path / "ws")
    with pytest.raises(ValueError, match="finish bug"):
        graph.invoke({"task": CHECKED}, config={"configurable": {"thread_id": "crash-1"}})
    [line] = log_lines(tmp_path / "runs.jsonl")
    assert line["error"] == "execute raised ValueError: finish bug"
    assert files_in(tmp_path / "ws") == []
