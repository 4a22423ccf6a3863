"""MemoryTransferMiddleware on a plain `create_agent` agent: scripted model with real tool calls, a real sandbox,
the task's real tests, a real pool."""

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, load_action_script
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.bench.suites import load_suite
from mtl_graph.pipeline import MemoryTransferMiddleware
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.sandbox.factory import make_sandbox
from mtl_graph.sandbox.registry import is_open
from mtl_graph.core.task import Task
from helpers.tampering import CHEATS, SOLUTION, make_exercism
from helpers.memory_fixtures import float_sum_task, money_memory, seeded
from helpers.paths import EXAMPLES

PLAN = "Read the module and its tests, rewrite the function, run the unit tests, submit when they pass."
OWN_PROMPT = "You are a careful coding agent. Use the bash tool."


class RecordingModel(ScriptedChatModel):
    """A scripted model that keeps the system prompt of every call."""

    systems: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.systems.append(next((m.content for m in messages if m.type == "system"), None))
        return super()._generate(messages, stop, run_manager, **kwargs)


def bash_in(workspace: Path):
    sandbox = make_sandbox("auto", workspace)

    @tool
    def bash(command: str) -> str:
        """Run one shell command in the task's workspace."""
        result = sandbox.run(command, timeout=60)
        return f"<returncode>{result.exit_code}</returncode>\n{result.output}"

    return bash, sandbox


def agent_for(task_name: str, workspace: Path, middleware: MemoryTransferMiddleware, finish: str = "Done."):
    actions = load_action_script(EXAMPLES / task_name / "demo_script.json")
    calls = [a for a in actions if a.tool_calls and a.tool_calls[0]["name"] == "bash"]
    model = RecordingModel(responses=[*calls, AIMessage(finish)], systems=[])
    bash, sandbox = bash_in(workspace)
    return create_agent(model, tools=[bash], system_prompt=OWN_PROMPT, middleware=[middleware]), model, sandbox


def test_middleware_retrieves_into_the_agents_prompt_and_learns_from_the_run(pool, tmp_path):
    memory = seeded(pool)
    task = Task.from_dir(EXAMPLES / "slugify")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    task.materialize(workspace)
    helper = ScriptedChatModel(responses=[AIMessage(PLAN)])
    mtl = MemoryTransferMiddleware(pool, model=helper, distill_formats=["trajectory"], workspace=workspace,
                                   run_log=tmp_path / "runs.jsonl")
    agent, model, sandbox = agent_for("slugify", workspace, mtl)
    try:
        out = agent.invoke({"messages": [HumanMessage(task.instruction)], "mtl_task": task})
    finally:
        sandbox.close()

    run = out["mtl"]
    assert run["error"] is None and run["query"] == PLAN
    assert [r["id"] for r in run["retrieved"]] == [memory.id] == run["retrieved_ids"]
    # every model call of the agent saw its own prompt first and the memories at its end, once
    assert model.systems and all(s.startswith(OWN_PROMPT) and s.count("Memories from past runs") == 1
                                 and s.rstrip().splitlines()[-1].startswith("</memory-") for s in model.systems)
    assert memory.title in model.systems[0]
    assert run["verdict"]["status"] == "pass" and run["verdict"]["source"] == "tests" and run["outcome"] == "success"
    written = pool.get(run["new_memory_ids"][0])
    assert written.type == "trajectory" and written.source_task_ids == ["examples/slugify"]
    assert any("unittest" in s.command for s in written.steps)
    stats = pool.get(memory.id).stats
    assert (stats.retrieved, stats.retrieved_success) == (1, 1)
    assert workspace.is_dir()  # the agent's directory belongs to the caller: never removed
    record = json.loads((tmp_path / "runs.jsonl").read_text())
    assert record["task"]["id"] == "examples/slugify" and record["retrieved"][0]["id"] == memory.id


def test_without_a_check_the_judge_decides_and_a_failure_is_recorded(pool, tmp_path):
    memory = seeded(pool)

    class FailAll:
        def judge(self, trajectory):
            from mtl_graph.core.trajectory import Verdict, VerdictStatus

            assert trajectory.steps and trajectory.task.instruction == "Print the numbers one to three."
            return Verdict(status=VerdictStatus.FAIL, source="judge", reason="nothing was verified")

    workspace = tmp_path / "ws"
    workspace.mkdir()
    bash, sandbox = bash_in(workspace)
    model = RecordingModel(responses=[bash_call("seq 3"), AIMessage("1 2 3")], systems=[])
    agent = create_agent(model, tools=[bash], middleware=[MemoryTransferMiddleware(
        pool, model=ScriptedChatModel(responses=[AIMessage(PLAN)]), judge=FailAll(), distill_formats=["trajectory"],
        run_log=tmp_path / "runs.jsonl")])
    try:
        out = agent.invoke({"messages": [HumanMessage("Print the numbers one to three.")]})
    finally:
        sandbox.close()
    run = out["mtl"]
    assert run["outcome"] == "failure" and run["verdict"]["reason"] == "nothing was verified"
    assert run["task"]["id"].startswith("agent-") and model.systems[0].count("Memories from past runs") == 1
    assert pool.get(run["new_memory_ids"][0]).outcome == "failure"
    assert (pool.get(memory.id).stats.retrieved, pool.get(memory.id).stats.retrieved_failure) == (1, 1)


def test_an_unreachable_pool_is_an_error_run_and_the_agent_still_answers(tmp_path, monkeypatch):
    (tmp_path / "not-a-pool").write_text("a file where a pool directory should be")
    model = RecordingModel(responses=[AIMessage("Hello.")], systems=[])
    mtl = MemoryTransferMiddleware(None, model=ScriptedChatModel(responses=[AIMessage(PLAN)]),
                                   run_log=tmp_path / "runs.jsonl")
    monkeypatch.setenv("MTL_POOL", str(tmp_path / "not-a-pool"))
    out = create_agent(model, tools=[], middleware=[mtl]).invoke({"messages": [HumanMessage("Say hello.")]})
    assert out["messages"][-1].content == "Hello." and model.systems == [None]  # no memories, prompt untouched
    assert out["mtl"]["error"].startswith("retrieval failed") and out["mtl"]["outcome"] == "error"
    assert out["mtl"]["new_memory_ids"] == []
    assert json.loads((tmp_path / "runs.jsonl").read_text())["verdict"]["status"] == "error"


def test_a_bad_task_is_one_error_and_nothing_is_written(pool, tmp_path):
    seeded(pool)
    model = RecordingModel(responses=[AIMessage("Hello.")], systems=[])
    mtl = MemoryTransferMiddleware(pool, model=ScriptedChatModel(responses=[AIMessage(PLAN)]),
                                   run_log=tmp_path / "runs.jsonl")
    out = create_agent(model, tools=[], middleware=[mtl]).invoke({"messages": [HumanMessage("Hi.")], "mtl_task": 42})
    assert out["mtl"]["error"].startswith("invalid task") and out["mtl"]["retrieved"] == []
    assert model.systems == [None] and len(pool) == 1
    assert json.loads((tmp_path / "runs.jsonl").read_text())["error"].startswith("invalid task")


def test_each_turn_on_a_thread_is_its_own_run(pool, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    seeded(pool)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    bash, sandbox = bash_in(workspace)
    model = RecordingModel(responses=[bash_call("echo one"), AIMessage("one"), bash_call("echo two"),
                                      AIMessage("two")], systems=[])
    mtl = MemoryTransferMiddleware(pool, model=ScriptedChatModel(responses=[AIMessage(PLAN)]),
                                   distill_formats=["trajectory"], run_log=tmp_path / "runs.jsonl")
    agent = create_agent(model, tools=[bash], middleware=[mtl], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "chat"}}
    try:
        first = agent.invoke({"messages": [HumanMessage("Print one.")], "mtl_task": {"id": "one", "instruction":
                                                                                     "Print one."}}, config)
        second = agent.invoke({"messages": [HumanMessage("Print two.")]}, config)
    finally:
        sandbox.close()
    assert first["mtl"]["task"]["id"] == "one" and second["mtl"]["task"]["instruction"] == "Print two."
    assert second.get("mtl_task") is None  # the first turn's task did not carry over
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [[s["action"] for s in r["steps"]] for r in runs] == [["echo one"], ["echo two"]]


# --------------------------------------------------------------------------- the run's workspace and sandbox

SOLVE = f"cat > primes.py <<'EOF'\n{SOLUTION}EOF"
PEEK = "test -e .meta/example.py && echo REFERENCE-VISIBLE || echo reference-gone"


@pytest.fixture
def exercise(tmp_path) -> Task:
    [task] = load_suite(f"exercism:{make_exercism(tmp_path / 'polyglot')}").tasks
    return task


def sandboxed_agent(pool, tmp_path, script, *, extra_tools=(), middleware=(), **options):
    """A plain create_agent agent with the sandbox bash tool, its own prompt and the MTL middleware."""
    seen: dict[str, Any] = {}

    @tool
    def where(runtime: ToolRuntime) -> str:
        """Say which directory the run works in."""
        seen["workspace"] = runtime.state["workspace"]
        seen["open"] = is_open(seen["workspace"])
        return seen["workspace"]

    helper = ScriptedChatModel(responses=[AIMessage(PLAN)])
    options = {"distill_formats": ["trajectory"], "sandbox": "bwrap", "run_log": tmp_path / "runs.jsonl", **options}
    mtl = MemoryTransferMiddleware(pool, model=helper, **options)
    model = RecordingModel(responses=script, systems=[])
    agent = create_agent(model, tools=[where, *extra_tools, *sandbox_tools()], system_prompt=OWN_PROMPT,
                         middleware=[*middleware, mtl], **({"checkpointer": InMemorySaver()} if middleware else {}))
    return agent, model, helper, seen


def where_call() -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "where", "args": {}, "id": "where-1", "type": "tool_call"}])


def test_a_plain_agent_with_sandbox_tools_gets_a_prepared_workspace_and_learns(pool, exercise, tmp_path):
    memory = seeded(pool)
    script = [where_call(), bash_call(PEEK), bash_call(SOLVE), bash_call("python3 -m unittest -q primes_test"),
              AIMessage("is_prime written; its tests pass.")]
    agent, model, _, seen = sandboxed_agent(pool, tmp_path, script)
    out = agent.invoke({"messages": [HumanMessage(exercise.instruction)], "mtl_task": exercise})
    run = out["mtl"]
    steps = [m for m in out["messages"] if m.type == "tool"]
    assert "reference-gone" in steps[1].content  # the Exercism setup ran before the agent
    assert seen["open"]  # ... in the run's sandbox, which the bash tool then used
    assert [s.artifact["exit_code"] for s in steps[1:]] == [0, 0, 0]
    assert run["error"] is None and run["verdict"]["status"] == "pass" and run["verdict"]["source"] == "tests"
    assert all(s.startswith(OWN_PROMPT) and memory.title in s for s in model.systems)
    written = pool.get(run["new_memory_ids"][0])
    assert [s.exit_code for s in written.steps][-1] == 0 and written.source_task_ids == [exercise.id]
    assert not Path(seen["workspace"]).exists() and not is_open(seen["workspace"]) and out["workspace"] is None


def test_a_given_workspace_gets_the_tasks_files_and_setup_and_is_kept(pool, exercise, tmp_path):
    workspace = tmp_path / "mine"
    script = [bash_call(PEEK), bash_call(SOLVE), AIMessage("done")]
    agent, _, _, _ = sandboxed_agent(pool, tmp_path, script, workspace=workspace)
    out = agent.invoke({"messages": [HumanMessage(exercise.instruction)], "mtl_task": exercise})
    assert "reference-gone" in [m.content for m in out["messages"] if m.type == "tool"][0]
    assert out["mtl"]["verdict"]["status"] == "pass" and (workspace / "primes_test.py").is_file()
    assert "n % d" in (workspace / "primes.py").read_text() and not (workspace / ".meta").exists()
    assert not is_open(workspace) and out["workspace"] == str(workspace)


@pytest.mark.parametrize("cheat", ["one-empty-test", "shadow-unittest"])
def test_an_agent_that_rewrites_the_tests_fails_under_the_middleware(pool, exercise, cheat, tmp_path):
    script = [bash_call(CHEATS[cheat].format(tests="primes_test.py")), AIMessage("All tests pass.")]
    agent, _, _, _ = sandboxed_agent(pool, tmp_path, script, online=False)
    run = agent.invoke({"messages": [HumanMessage(exercise.instruction)], "mtl_task": exercise})["mtl"]
    assert run["verdict"]["status"] == "fail" and run["outcome"] == "failure"
    assert run["verdict"]["tests_modified"] == ([] if cheat == "shadow-unittest" else ["primes_test.py"])
    assert ("unittest.py (not a solution file)" in run["verdict"]["dropped"]) == (cheat == "shadow-unittest")


def test_a_failing_setup_is_an_error_run_and_nothing_is_learnt(pool, tmp_path):
    seeded(pool)
    agent, _, _, _ = sandboxed_agent(pool, tmp_path, [AIMessage("I could not start.")])
    task = Task(id="s", instruction="x", check="true", setup="echo no network; exit 7")
    run = agent.invoke({"messages": [HumanMessage("x")], "mtl_task": task})["mtl"]
    assert run["error"].startswith("task setup failed (exit 7)") and run["outcome"] == "error"
    assert run["new_memory_ids"] == [] and len(pool) == 1


def test_a_failing_test_run_re_retrieves_through_the_middleware(pool, tmp_path):
    seeded(pool)
    money = money_memory()
    pool.add(money)
    task = float_sum_task("t-refresh")
    run_tests = "python3 -m unittest -q test_sum"
    agent, _, _, _ = sandboxed_agent(pool, tmp_path, [bash_call(run_tests), bash_call(run_tests),
                                                      AIMessage("gave up")], top_k=1, re_retrieve=True)
    out = agent.invoke({"messages": [HumanMessage(task.instruction)], "mtl_task": task})
    replies = [m.content for m in out["messages"] if m.type == "tool"]
    assert "Round money sums" in replies[0] and "Round money sums" not in replies[1]
    run = out["mtl"]
    assert [r["id"] for r in run["re_retrieved"]] == [money.id] and money.id in run["retrieved_ids"]
    assert run["verdict"]["status"] == "fail" and pool.get(money.id).stats.retrieved_failure == 1


def test_approving_a_command_resumes_the_same_run_in_the_same_workspace(pool, exercise, tmp_path):
    script = [where_call(), bash_call(SOLVE), AIMessage("is_prime written")]
    gate = HumanInTheLoopMiddleware(interrupt_on={"bash": True})
    agent, _, helper, seen = sandboxed_agent(pool, tmp_path, script, middleware=[gate])
    thread = {"configurable": {"thread_id": "review"}}
    paused = agent.invoke({"messages": [HumanMessage(exercise.instruction)], "mtl_task": exercise}, thread)
    assert paused["__interrupt__"] and is_open(seen["workspace"])  # the run waits with its sandbox open
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), thread)
    assert helper.i == 1  # planned once: the resume did not start a new run
    assert out["mtl"]["verdict"]["status"] == "pass" and out["mtl"]["error"] is None
    assert not Path(seen["workspace"]).exists() and not is_open(seen["workspace"])
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1


def test_the_middleware_runs_under_ainvoke_without_blocking_the_event_loop(pool, exercise, tmp_path):
    import asyncio

    from blockbuster import blockbuster_ctx  # what a LangGraph server uses to refuse blocking calls

    memory = seeded(pool)
    script = [bash_call(SOLVE), AIMessage("is_prime written")]
    agent, model, _, _ = sandboxed_agent(pool, tmp_path, script)
    with blockbuster_ctx():
        out = asyncio.run(agent.ainvoke({"messages": [HumanMessage(exercise.instruction)], "mtl_task": exercise}))
    assert out["mtl"]["verdict"]["status"] == "pass" and out["mtl"]["retrieved_ids"] == [memory.id]
    assert all(s.startswith(OWN_PROMPT) and memory.title in s for s in model.systems)


def test_a_task_file_escaping_the_given_workspace_is_refused(pool, tmp_path):
    seeded(pool)
    workspace = tmp_path / "mine"
    agent, model, _, _ = sandboxed_agent(pool, tmp_path, [AIMessage("Nothing to do.")], workspace=workspace)
    task = Task(id="escape", instruction="x", check="true", files={"../escaped.txt": "planted"})
    out = agent.invoke({"messages": [HumanMessage("x")], "mtl_task": task})
    assert "escapes the workspace" in out["mtl"]["error"] and out["mtl"]["outcome"] == "error"
    assert not (tmp_path / "escaped.txt").exists() and out["messages"][-1].content == "Nothing to do."
    assert out["mtl"]["new_memory_ids"] == [] and len(pool) == 1 and not is_open(workspace)


def test_when_retrieval_fails_the_agent_still_works_in_its_sandbox(tmp_path, monkeypatch):
    (tmp_path / "not-a-pool").write_text("a file where a pool directory should be")
    monkeypatch.setenv("MTL_POOL", str(tmp_path / "not-a-pool"))
    agent, _, _, _ = sandboxed_agent(None, tmp_path, [bash_call("echo hi > out.txt && cat out.txt"),
                                                      AIMessage("wrote out.txt")])
    task = Task(id="w", instruction="Write hi to out.txt.", check="grep -qx hi out.txt")
    out = agent.invoke({"messages": [HumanMessage(task.instruction)], "mtl_task": task})
    [reply] = [m for m in out["messages"] if m.type == "tool"]
    assert reply.artifact["exit_code"] == 0 and reply.artifact["observation"].strip() == "hi"
    assert out["mtl"]["error"].startswith("retrieval failed") and out["mtl"]["outcome"] == "error"


def test_two_failing_test_runs_in_one_reply_re_retrieve_once(pool, tmp_path):
    seeded(pool)
    money = money_memory()
    pool.add(money)
    task = float_sum_task("t-twice")
    both = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": f"python3 -m unittest -q test_sum # {n}"},
                                      "id": f"run-{n}", "type": "tool_call"} for n in (1, 2)])
    agent, _, _, _ = sandboxed_agent(pool, tmp_path, [both, AIMessage("gave up")], top_k=1, re_retrieve=True)
    out = agent.invoke({"messages": [HumanMessage(task.instruction)], "mtl_task": task})
    replies = [m.content for m in out["messages"] if m.type == "tool"]
    assert len(replies) == 2 and sum("Round money sums" in r for r in replies) == 1
    assert [r["id"] for r in out["mtl"]["re_retrieved"]] == [money.id]
    assert pool.get(money.id).stats.retrieved == 1
