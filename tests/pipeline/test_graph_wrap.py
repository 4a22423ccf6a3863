"""`with_memory_transfer` around anyone's agent: the task's setup, the run's sandbox, the tamper-proof check,
re-retrieval, interrupts, the caller's config and where the memories go. Scripted models emit real tool calls;
commands run in the real sandbox; the pool is real."""

import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.pipeline import with_memories, with_memory_transfer
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.sandbox.registry import is_open
from mtl_graph.core.task import Task
from helpers.tampering import CHEATS
from helpers.wrapping import SOLVE, call, exercism_task, wrap
from helpers.memory_fixtures import float_sum_task, money_memory


class Recording(ScriptedChatModel):
    """A scripted model that keeps the messages of every call."""

    seen: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@pytest.fixture
def pool(embeddings, tmp_path):
    with MemoryPool.open(tmp_path / "pool", embeddings) as p:
        p.add(InsightMemory(title="Run the tests after the last edit", description="Before answering a coding task.",
                            content="Run the test suite after the final edit and read its result.",
                            sources=[Provenance(domain="text", source_task_id="elsewhere")]))
        yield p


@pytest.fixture
def exercise(tmp_path) -> Task:
    return exercism_task(tmp_path)


def test_setup_runs_in_the_runs_sandbox_before_the_agent_and_is_released_after(exercise, tmp_path):
    seen: dict[str, Any] = {}

    @tool
    def probe(config: RunnableConfig) -> str:
        """Look at the run's workspace before any command."""
        seen["workspace"] = config["configurable"]["mtl_workspace"]
        seen["open"] = is_open(seen["workspace"])
        return "looked"

    model = ScriptedChatModel(responses=[
        call("probe", 1), bash_call("test -e .meta/example.py && echo REFERENCE-VISIBLE || echo reference-gone"),
        bash_call(SOLVE), bash_call("python3 -m unittest -q primes_test"), AIMessage("is_prime done, tests pass")])
    state = wrap(create_agent(model, tools=[probe, *sandbox_tools()]), None, tmp_path).invoke({"task": exercise})
    steps = state["trajectory"]["steps"]
    assert "reference-gone" in steps[1]["observation"] and "REFERENCE-VISIBLE" not in steps[1]["observation"]
    assert seen["open"]  # the setup's sandbox is registered: the agent's bash tool gets that one
    assert steps[3]["exit_code"] == 0 and state["verdict"]["status"] == "pass"
    assert state["verdict"]["source"] == "tests" and state["error"] is None
    assert not is_open(seen["workspace"]) and not Path(seen["workspace"]).exists()


def test_a_failing_setup_is_an_error_and_the_agent_never_runs(tmp_path):
    model = Recording(responses=[bash_call("true"), AIMessage("done")], seen=[])
    task = Task(id="bad-setup", instruction="x", check="true", setup="echo cannot fetch; exit 3")
    state = wrap(create_agent(model, tools=sandbox_tools()), None, tmp_path).invoke({"task": task})
    assert state["error"].startswith("task setup failed (exit 3)") and "cannot fetch" in state["error"]
    assert model.seen == [] and state["verdict"]["status"] == "error" and state["outcome"] == "error"
    assert json.loads((tmp_path / "runs.jsonl").read_text())["error"].startswith("task setup failed")


@pytest.mark.parametrize("cheat", ["empty", "one-empty-test", "shadow-unittest"])
def test_a_wrapped_agent_that_rewrites_the_tests_fails(cheat, exercise, tmp_path):
    model = ScriptedChatModel(responses=[bash_call(CHEATS[cheat].format(tests="primes_test.py")),
                                         bash_call("python3 -m unittest -q primes_test"),
                                         AIMessage("All tests pass.")])
    state = wrap(create_agent(model, tools=sandbox_tools()), None, tmp_path).invoke({"task": exercise})
    assert state["trajectory"]["steps"][1]["exit_code"] == 0  # the agent's own test run looked green
    assert state["verdict"]["status"] == "fail" and state["verdict"]["source"] == "tests"
    assert state["verdict"]["tests_modified"] == ([] if cheat == "shadow-unittest" else ["primes_test.py"])
    assert ("unittest.py (not a solution file)" in state["verdict"]["dropped"]) == (cheat == "shadow-unittest")


def test_a_failing_test_run_re_retrieves_and_the_wrapped_agent_reads_the_note(pool, tmp_path):
    money = money_memory()
    pool.add(money)
    task = float_sum_task("t-refresh")
    model = Recording(responses=[bash_call("python3 -m unittest -q test_sum"),
                                 bash_call("python3 -m unittest -q test_sum"), AIMessage("gave up")], seen=[])
    graph = wrap(create_agent(model, tools=sandbox_tools()), pool, tmp_path, memory_type="insight", top_k=1,
                 online=True, distill_formats=["trajectory"], re_retrieve=True)
    state = graph.invoke({"task": task})
    first_retrieved = state["retrieved"][0]["id"]
    assert [r["id"] for r in state["re_retrieved"]] == [money.id] != [first_retrieved]
    tool_replies = [m.content for m in model.seen[1] if m.type == "tool"]
    assert "Round money sums" in tool_replies[0]  # shown with the failing run's observation
    later = [m.content for m in model.seen[2] if m.type == "tool"][1]
    assert "Round money sums" not in later and later.startswith("<exit_code>1</exit_code>")  # once per run
    assert sorted(state["retrieved_ids"]) == sorted([first_retrieved, money.id])
    assert pool.get(money.id).stats.retrieved == 1  # credited with the run's verdict, like the graph's own agent


def test_the_callers_config_reaches_the_wrapped_agent(tmp_path):
    seen: dict[str, Any] = {}

    class Tags(BaseCallbackHandler):
        def on_chat_model_start(self, serialized, messages, *, tags=None, **kwargs):
            seen.setdefault("model_tags", []).append(list(tags or []))

    @tool
    def whoami(config: RunnableConfig) -> str:
        """Say which user the run is for."""
        seen["configurable"] = dict(config["configurable"])
        return config["configurable"]["user"]

    model = ScriptedChatModel(responses=[call("whoami", 1), AIMessage("done")])
    graph = wrap(create_agent(model, tools=[whoami]), None, tmp_path)
    task = Task(id="cfg", instruction="Say who you are.", check="true")
    graph.invoke({"task": task}, {"configurable": {"user": "ada"}, "tags": ["team-a"], "callbacks": [Tags()]})
    assert seen["configurable"]["user"] == "ada" and seen["configurable"]["mtl_workspace"]
    assert seen["model_tags"] and all("team-a" in t for t in seen["model_tags"])

    looping = ScriptedChatModel(responses=[call("whoami", n) for n in range(30)])
    state = wrap(create_agent(looping, tools=[whoami]), None, tmp_path).invoke(
        {"task": task}, {"configurable": {"user": "ada"}, "recursion_limit": 12})
    assert "GraphRecursionError" in state["error"] and looping.i < 10  # the caller's limit stopped the agent


class Messages(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def custom_agent(model, prompt_of) -> Any:
    """A hand-built agent graph (not create_agent) with its own system prompt (none when `prompt_of` gives "")."""
    tools = sandbox_tools()

    def think(state: Messages, config: RunnableConfig) -> dict[str, Any]:
        own = prompt_of(config)
        return {"messages": [model.invoke([*([SystemMessage(own)] if own else []), *state["messages"]])]}

    graph = StateGraph(Messages)
    graph.add_node("think", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "think")
    graph.add_conditional_edges("think", tools_condition, ["tools", END])
    graph.add_edge("tools", "think")
    return graph.compile()


OWN = "You are the team's careful coding agent."


def test_memories_go_at_the_end_of_a_custom_agents_own_system_prompt(pool, tmp_path):
    model = Recording(responses=[bash_call("echo hi > out.txt"), AIMessage("wrote out.txt")], seen=[])
    graph = wrap(custom_agent(model, lambda config: with_memories(OWN, config)), pool, tmp_path,
                 memory_type="insight", memories="config")
    state = graph.invoke({"task": Task(id="hi", instruction="Write hi to out.txt.", check="grep -qx hi out.txt")})
    assert state["verdict"]["status"] == "pass" and len(state["retrieved"]) == 1
    for messages in model.seen:
        systems = [m.content for m in messages if m.type == "system"]
        assert len(systems) == 1 and systems[0].startswith(OWN) and "Run the tests after the last edit" in systems[0]
        assert systems[0].rstrip().splitlines()[-1].startswith("</memory-")


def test_a_system_prompt_given_to_the_wrapper_opens_the_input_with_the_memories_at_its_end(pool, tmp_path):
    model = Recording(responses=[AIMessage("nothing to do")], seen=[])
    graph = wrap(custom_agent(model, lambda config: ""), pool, tmp_path, memory_type="insight", system_prompt=OWN)
    graph.invoke({"task": Task(id="p", instruction="Say hi.", check="true")})
    [system] = [m.content for m in model.seen[0] if m.type == "system"]
    assert system.startswith(OWN) and system.rstrip().splitlines()[-1].startswith("</memory-")
    with pytest.raises(ValueError, match="memories must be"):
        wrap(custom_agent(model, lambda config: ""), pool, tmp_path, memories="prompt")


def test_the_wrapped_agents_commands_reach_the_graphs_own_stream_once_each(pool, tmp_path):
    @tool
    def note(text: str) -> str:
        """Keep a note (a tool of the agent's own, outside the sandbox)."""
        return "noted"

    task = Task(id="ev", instruction="Make test_one.py pass.", check="python3 -m unittest -q test_one",
                files={"test_one.py": "import unittest\nclass T(unittest.TestCase):\n"
                                      "    def test(self):\n        self.assertEqual(1, 2)\n"})
    model = ScriptedChatModel(responses=[bash_call("python3 -m unittest -q test_one"), call("note", 1, text="hm"),
                                         bash_call("echo done"), AIMessage("stopping")])
    graph = wrap(create_agent(model, tools=[note, *sandbox_tools()]), pool, tmp_path, memory_type="insight",
                 top_k=1, re_retrieve=True)
    pool.add(InsightMemory(title="Compare what the test expects", description="An assertEqual fails.",
                           content="Read both values of the failing assertion first.",
                           sources=[Provenance(domain="other", source_task_id="o1")]))
    told = [(e["kind"], e.get("command") or bool(e.get("refresh"))) for mode, e in
            graph.stream({"task": task}, stream_mode=["custom"]) if e["kind"] in ("step", "retrieved")]
    assert told == [("retrieved", False), ("step", "python3 -m unittest -q test_one"), ("retrieved", True),
                    ("step", "echo done"), ("step", 'note({"text": "hm"})')]  # the agent's own tool: after it


def test_bad_agents_are_one_clear_error(tmp_path):
    with pytest.raises(TypeError, match="wraps a compiled graph .* not AIMessage"):
        wrap(AIMessage("not an agent"), None, tmp_path)

    class Answers(TypedDict):
        answer: str

    graph = StateGraph(Answers)
    graph.add_node("answer", lambda state: {"answer": "42"})
    graph.add_edge(START, "answer")
    state = wrap(graph.compile(), None, tmp_path).invoke({"task": Task(id="q", instruction="x", check="true")})
    assert state["error"] == "wrapped agent returned no messages (got a dict with keys answer)"
    assert state["verdict"]["status"] == "error" and state["outcome"] == "error"


def test_a_task_file_escaping_the_workspace_is_refused_before_the_agent_runs(tmp_path):
    model = Recording(responses=[AIMessage("done")], seen=[])
    task = Task(id="escape", instruction="x", check="true", files={"../escaped.txt": "planted"})
    graph = wrap(create_agent(model, tools=sandbox_tools()), None, tmp_path, workspace_root=tmp_path / "runs")
    state = graph.invoke({"task": task})
    assert "escapes the workspace" in state["error"] and model.seen == []
    assert not (tmp_path / "runs" / "escaped.txt").exists() and list((tmp_path / "runs").iterdir()) == []


def test_a_create_agent_with_its_own_prompt_is_warned_towards_the_middleware(pool, tmp_path):
    model = Recording(responses=[AIMessage("nothing to do")], seen=[])
    graph = wrap(create_agent(model, tools=[], system_prompt=OWN), pool, tmp_path, memory_type="insight")
    with pytest.warns(RuntimeWarning, match="use MemoryTransferMiddleware"):
        told = [e for _, e in graph.stream({"task": Task(id="p", instruction="Say hi.", check="true")},
                                           stream_mode=["custom"]) if e["kind"] == "warning"]
    assert len(told) == 1 and "second system message" in told[0]["message"]
    assert [m.type for m in model.seen[0]][:2] == ["system", "system"]  # what the warning is about


def test_sandbox_tools_outside_a_run_refuse_to_guess_a_directory(tmp_path, monkeypatch):
    from mtl_graph.sandbox.base import SandboxError

    monkeypatch.chdir(tmp_path)
    agent = create_agent(ScriptedChatModel(responses=[bash_call("touch planted.txt")]), tools=sandbox_tools())
    with pytest.raises(SandboxError, match="no workspace for this run"):
        agent.invoke({"messages": [("user", "go")]})
    assert list(tmp_path.iterdir()) == []  # nothing ran on the host, in the caller's directory or elsewhere


class PerTask(ScriptedChatModel):
    """Writes the task's own token into mine.txt, then stops: one model shared by runs in parallel."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from langchain_core.outputs import ChatGeneration, ChatResult

        human = next(m.content for m in messages if m.type == "human")
        token = human.split("token ", 1)[1].split(".", 1)[0]
        done = any(m.type == "tool" for m in messages)
        reply = AIMessage("done") if done else bash_call(f"echo {token} > mine.txt; ls")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_parallel_wrapped_runs_each_work_in_their_own_workspace_and_sandbox(tmp_path):
    tasks = [Task(id=f"p{i}", instruction=f"Write the token t{i}.", check=f"grep -qx t{i} mine.txt && "
                  "test \"$(ls)\" = mine.txt") for i in range(4)]
    graph = wrap(create_agent(PerTask(), tools=sandbox_tools()), None, tmp_path)
    states = graph.batch([{"task": t} for t in tasks], {"max_concurrency": 4})
    assert [s["verdict"]["status"] for s in states] == ["pass"] * 4
    assert [s["trajectory"]["steps"][0]["observation"].strip() for s in states] == ["mine.txt"] * 4


def test_two_failing_test_runs_in_one_reply_re_retrieve_once(pool, tmp_path):
    money = money_memory()
    pool.add(money)
    task = float_sum_task("t-twice")
    both = AIMessage("", tool_calls=[{"name": "bash", "args": {"command": f"python3 -m unittest -q test_sum # {n}"},
                                      "id": f"run-{n}", "type": "tool_call"} for n in (1, 2)])
    model = Recording(responses=[both, AIMessage("gave up")], seen=[])
    state = wrap(create_agent(model, tools=sandbox_tools()), pool, tmp_path, memory_type="insight", top_k=1,
                 re_retrieve=True).invoke({"task": task})
    replies = [m.content for m in model.seen[1] if m.type == "tool"]
    assert len(replies) == 2 and sum("Round money sums" in r for r in replies) == 1
    assert [r["id"] for r in state["re_retrieved"]] == [money.id]
