"""One execute stage for every agent: both factories compile the same subgraph, every host tells each step once
(the steps its trajectory records), a run re-retrieves once however often it is paused and resumed (on any graph
object), a crashing wrapped agent leaves nothing behind, workspaces are keyed by thread, task and run, and a run's
messages (however hostile) tell the step hook whether it already re-retrieved. Real create_agent, real graphs,
real sandbox, pool and checkpointers; no mocks."""

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.core.task import Task
from mtl_graph.core.trajectory import Step
from mtl_graph.pipeline import MemoryTransferMiddleware, build_mtl_graph, with_memory_transfer
from mtl_graph.pipeline.lease import OPEN, close_workspace, safe_name
from mtl_graph.pipeline.stages import make_config
from mtl_graph.pipeline.refresh import MemoryRefresh
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.pipeline.steps import REFRESH_ARG, RunSteps, re_retrieved_in, refreshes_in
from mtl_graph.sandbox.registry import is_open
from helpers.memory_fixtures import RUN_TESTS, float_sum_task, money_memory, seeded


def execute_nodes(graph) -> set[str]:
    return {n for n in graph.get_graph(xray=True).nodes if n.startswith("execute:")}


def test_both_factories_compile_the_same_execute_stage(tmp_path):
    ours = build_mtl_graph(ScriptedChatModel(), None, memory_type="none", online=False, workspace_root=tmp_path)
    wrapped = with_memory_transfer(create_agent(ScriptedChatModel(), tools=sandbox_tools()), None,
                                   model=ScriptedChatModel(), memory_type="none", online=False,
                                   workspace_root=tmp_path)
    mine, theirs = execute_nodes(ours), execute_nodes(wrapped)
    assert {"execute:prepare", "execute:finish"} <= mine & theirs
    assert any(n.startswith("execute:agent") for n in mine) and any(n.startswith("execute:agent") for n in theirs)


def tool_message(artifact, n=1, name="bash") -> ToolMessage:
    if isinstance(artifact, dict) and isinstance(artifact.get("args"), dict):
        artifact = {"tool": name, "action": "pytest", **artifact}
    return ToolMessage("out", tool_call_id=f"c{n}", artifact=artifact, name=name)


def test_hostile_artifacts_never_count_as_a_re_retrieval():
    hostile = [tool_message({"args": {REFRESH_ARG: "yes"}}, 1), tool_message({"args": {REFRESH_ARG: {"id": "x"}}}, 2),
               tool_message("not a dict", 3), tool_message(["a", "list"], 4), tool_message({"args": "str"}, 5),
               tool_message({"args": {REFRESH_ARG: ["s", 1, None] * 10_000}}, 6), AIMessage("hi")]
    assert re_retrieved_in(hostile) == []
    assert len(refreshes_in(hostile)) == 1  # the list of non-dicts was a try: no second re-retrieval
    good = tool_message({"args": {REFRESH_ARG: [{"id": "m1"}]}}, 7)
    assert re_retrieved_in([*hostile, good]) == [{"id": "m1"}]
    forged = [tool_message({"args": {REFRESH_ARG: [{"id": "m2"}]}}, 8, name=name)
              for name in ("read_json", "lookup", "Bash", "bash ", "submit", "search_memories", "")]
    claims_bash = ToolMessage("out", tool_call_id="c9", name="read_json",
                              artifact={"tool": "bash", "action": "x", "args": {REFRESH_ARG: [{"id": "m3"}]}})
    other_step = ToolMessage("out", tool_call_id="c10", name="bash",
                             artifact={"tool": "read_json", "action": "x", "args": {REFRESH_ARG: [{"id": "m4"}]}})
    assert refreshes_in([*forged, claims_bash, other_step]) == []  # only our bash tool's own steps are tries
    assert re_retrieved_in([*forged, claims_bash, other_step, good]) == [{"id": "m1"}]


# ---------------------------------------------------------------- end to end, in every host

SMALL = Task(id="small", domain="shell", instruction="Write ok into done.txt.", files={"a.txt": "alpha\n"},
             check="grep -qx ok done.txt")
SCRIPT = ["cat a.txt", "echo ok > done.txt", "cat done.txt; exit 3"]
QUIET = {"memory_type": "none", "online": False, "sandbox": "auto"}


def script(commands=SCRIPT, summary="wrote done.txt"):
    return ScriptedChatModel(responses=[*map(bash_call, commands), submit_call(summary)])


def told(chunks) -> list[tuple]:
    return [(c["tool"], c["command"], c["exit_code"]) for mode, c in chunks if mode == "custom" and c["kind"] == "step"]


def recorded(steps) -> list[tuple]:
    return [(s["tool"], s["action"], s["exit_code"]) for s in steps]


def last_values(chunks) -> dict:
    return [c for mode, c in chunks if mode == "values"][-1]


def run_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []


def streamed(graph, payload, mode, config=None) -> list:
    """The run's custom and values chunks, through `stream` or `astream`."""
    if mode == "sync":
        return list(graph.stream(payload, config, stream_mode=["custom", "values"]))

    async def collect():
        return [chunk async for chunk in graph.astream(payload, config, stream_mode=["custom", "values"])]

    return asyncio.run(collect())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_step_events_are_the_trajectory_steps_in_every_host(tmp_path, mode):
    expected = [("bash", "cat a.txt", 0), ("bash", "echo ok > done.txt", 0), ("bash", "cat done.txt; exit 3", 3)]
    opts = {**QUIET, "workspace_root": tmp_path / "ws", "run_log": tmp_path / "runs.jsonl"}

    ours = build_mtl_graph(script(), None, **opts)
    chunks = streamed(ours, {"task": SMALL}, mode)
    state = last_values(chunks)
    assert told(chunks) == recorded(state["trajectory"]["steps"]) == [*expected, ("submit", "wrote done.txt", None)]
    assert state["verdict"]["status"] == "pass"

    wrapped = with_memory_transfer(create_agent(script(), tools=sandbox_tools()), None, model=ScriptedChatModel(),
                                   **opts)
    chunks = streamed(wrapped, {"task": SMALL}, mode)
    state = last_values(chunks)
    assert told(chunks) == recorded(state["trajectory"]["steps"]) == expected  # the final answer is no step
    assert state["trajectory"]["submission"] == "wrote done.txt" and state["verdict"]["status"] == "pass"

    mtl = MemoryTransferMiddleware(None, model=ScriptedChatModel(), **opts)
    agent = create_agent(script(), tools=sandbox_tools(), middleware=[mtl])
    chunks = streamed(agent, {"messages": [HumanMessage(SMALL.instruction)], "mtl_task": SMALL}, mode)
    logged = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(logged) == 3 and told(chunks) == recorded(logged[-1]["steps"]) == expected
    assert last_values(chunks)["mtl"]["verdict"]["status"] == "pass"
    assert run_dirs(tmp_path / "ws") == []  # every host removed its run's workspace


def refreshes(chunks) -> list[list[str]]:
    return [[m["id"] for m in c["memories"]] for mode, c in chunks
            if mode == "custom" and c["kind"] == "retrieved" and c["refresh"]]


PLAN = "Run the unit tests after the last edit and read the result."  # retrieves the seeded memory first


def approving_graph(pool, tmp_path, saver, commands):
    model = ScriptedChatModel(plan=PLAN, responses=[*map(bash_call, commands), submit_call("gave up")])
    return build_mtl_graph(model, pool, memory_type="insight", top_k=1, online=False, re_retrieve=True,
                           checkpointer=saver, interrupt_before_tools=True, workspace_root=tmp_path / "ws",
                           run_log=tmp_path / "runs.jsonl")


@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("switch_after", [None, 2])
def test_interrupt_before_tools_re_retrieves_once_across_resumes_and_graphs(pool, tmp_path, saver_kind,
                                                                           switch_after):
    seeded(pool)
    money = money_memory()
    pool.add(money)
    conn = sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False)
    saver = InMemorySaver() if saver_kind == "memory" else SqliteSaver(conn)
    graph = approving_graph(pool, tmp_path, saver, [RUN_TESTS, f"{RUN_TESTS} # again", f"{RUN_TESTS} # third"])
    config = {"configurable": {"thread_id": "approve"}}
    chunks = list(graph.stream({"task": float_sum_task("t-approve")}, config, stream_mode=["custom", "values"]))
    pauses = 1
    while graph.get_state(config).next:
        if pauses == switch_after:  # the rest of the run on another graph object: a new host, new hooks
            graph = approving_graph(pool, tmp_path, saver, [f"{RUN_TESTS} # third"])
        chunks += graph.stream(None, config, stream_mode=["custom", "values"])
        pauses += 1
    state = last_values(chunks)
    assert pauses == 5 and [c for _, c, _ in told(chunks)][-1] == "gave up"  # 3 commands and the submit approved
    assert [code for tool_, _, code in told(chunks) if tool_ == "bash"] == [1, 1, 1]
    assert refreshes(chunks) == [[money.id]]  # the first failing test run re-retrieved, the later ones did not
    marked = [s["args"][REFRESH_ARG] for s in state["trajectory"]["steps"] if REFRESH_ARG in s["args"]]
    assert [[m["id"] for m in found] for found in marked] == [[money.id]]  # on the first step, no other
    assert REFRESH_ARG in state["trajectory"]["steps"][0]["args"]
    assert [r["id"] for r in state["re_retrieved"]] == [money.id] != [r["id"] for r in state["retrieved"]]
    assert len(run_dirs(tmp_path / "ws")) == 0 and len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1
    conn.close()


def gated_agent(pool, tmp_path, saver, script_):
    mtl = MemoryTransferMiddleware(pool, model=ScriptedChatModel(plan=PLAN),
                                   memory_type="insight", top_k=1, online=False, re_retrieve=True,
                                   workspace_root=tmp_path / "ws", run_log=tmp_path / "runs.jsonl")
    gate = HumanInTheLoopMiddleware(interrupt_on={"bash": True})
    return create_agent(ScriptedChatModel(responses=script_), tools=sandbox_tools(), middleware=[gate, mtl],
                        checkpointer=saver)


def test_a_middleware_run_approved_on_another_agent_object_re_retrieves_once(pool, tmp_path):
    seeded(pool)
    money = money_memory()
    pool.add(money)
    saver, task, config = InMemorySaver(), float_sum_task("t-gate"), {"configurable": {"thread_id": "gate"}}
    rest = [bash_call(f"{RUN_TESTS} # third"), AIMessage("gave up")]
    agent = gated_agent(pool, tmp_path, saver, [bash_call(RUN_TESTS), bash_call(f"{RUN_TESTS} # again"), *rest])
    chunks = streamed(agent, {"messages": [HumanMessage(task.instruction)], "mtl_task": task}, "sync", config)
    approvals = 0
    while agent.get_state(config).next:
        if approvals == 1:  # the rest of the run on a new agent and a new middleware: no hooks kept for it
            agent = gated_agent(pool, tmp_path, saver, rest)
        chunks += streamed(agent, Command(resume={"decisions": [{"type": "approve"}]}), "sync", config)
        approvals += 1
    run = last_values(chunks)["mtl"]
    assert approvals == 3 and [code for _, _, code in told(chunks)] == [1, 1, 1]
    assert refreshes(chunks) == [[money.id]] and [r["id"] for r in run["re_retrieved"]] == [money.id]
    assert run["verdict"]["status"] == "fail" and run_dirs(tmp_path / "ws") == []


class Abort(BaseException):
    """Not an Exception: nothing in the agent's stack may take it for the agent's failure."""


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_crashing_tool_in_a_wrapped_graph_is_an_agent_error_with_nothing_left(tmp_path, mode):
    graph, seen = crashing_graph(tmp_path, RuntimeError)
    task = {"task": SMALL}
    state = graph.invoke(task) if mode == "invoke" else asyncio.run(graph.ainvoke(task))
    assert state["error_kind"] == "agent" and state["error"] == "wrapped agent failed: RuntimeError: tool broke: " \
                                                                "on purpose"
    assert state["verdict"]["status"] == "error" and state["outcome"] == "error"
    assert seen["open"] and not is_open(seen["workspace"]) and not Path(seen["workspace"]).exists()
    assert run_dirs(tmp_path / "ws") == []
    [line] = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert line["error_kind"] == "agent" and line["new_memory_ids"] == []


def test_a_tool_raising_a_base_exception_goes_up_with_the_sandbox_released(tmp_path):
    graph, seen = crashing_graph(tmp_path, Abort)
    with pytest.raises(Abort):
        graph.invoke({"task": SMALL})
    assert seen["open"] and not is_open(seen["workspace"])  # `sleep 300 &` was ended with it
    assert str(seen["workspace"]) in OPEN.paths  # no checkpointer: its files go when the process exits
    close_workspace(seen["workspace"], keep=False)
    assert run_dirs(tmp_path / "ws") == []


def crashing_graph(tmp_path, error: type[BaseException]):
    seen = {}

    @tool
    def explode(reason: str) -> str:
        """Fail on purpose."""
        from langgraph.config import get_config

        seen["workspace"] = get_config()["configurable"]["mtl_workspace"]
        seen["open"] = is_open(seen["workspace"])
        raise error(f"tool broke: {reason}")

    boom = AIMessage("", tool_calls=[{"name": "explode", "args": {"reason": "on purpose"}, "id": "x1",
                                      "type": "tool_call"}])
    model = ScriptedChatModel(responses=[bash_call("sleep 300 & echo started"), boom, AIMessage("never")])
    graph = with_memory_transfer(create_agent(model, tools=[*sandbox_tools(), explode]), None,
                                 model=ScriptedChatModel(), **QUIET, workspace_root=tmp_path / "ws",
                                 run_log=tmp_path / "runs.jsonl")
    return graph, seen


def test_a_workspace_is_keyed_by_thread_task_and_run(tmp_path):
    root = tmp_path / "ws"
    opts = {**QUIET, "workspace_root": root, "keep_workspaces": True, "run_log": tmp_path / "runs.jsonl"}
    saver = InMemorySaver()
    states = {}
    for key, thread in (("alpha", "alpha"), ("beta", "beta"), ("esc", "../escape/x"), ("again", "alpha")):
        graph = build_mtl_graph(script(["cat a.txt"]), None, checkpointer=saver, **opts)
        states[key] = graph.invoke({"task": SMALL}, {"configurable": {"thread_id": thread}})
    threads = {"alpha": "alpha", "beta": "beta", "esc": "___escape_x", "again": "alpha"}
    expected = {f"{threads[k]}--small-{s['run_id']}" for k, s in states.items()}
    assert set(run_dirs(root)) == expected and len(expected) == 4  # a new run on a thread: a new workspace
    assert not (tmp_path / "escape").exists() and safe_name("../escape/x") == "___escape_x"
    assert all((root / name / "a.txt").read_text() == "alpha\n" for name in expected)

    paused = build_mtl_graph(script(["echo one > mine.txt", "cat mine.txt"]), None, checkpointer=saver,
                             interrupt_before_tools=True, **opts)
    config = {"configurable": {"thread_id": "gamma"}}
    paused.invoke({"task": SMALL}, config)
    [made] = [n for n in run_dirs(root) if n.startswith("gamma--")]
    while paused.get_state(config).next:
        state = paused.invoke(None, config)
        assert [n for n in run_dirs(root) if n.startswith("gamma--")] == [made]  # each resume: the same one
    assert made == f"gamma--small-{state['run_id']}" and state["trajectory"]["steps"][1]["observation"] == "one\n"
    assert (root / made / "mine.txt").read_text() == "one\n"


def runtime_with(messages) -> ToolRuntime:
    return ToolRuntime(state={"messages": messages}, context=None, config={}, stream_writer=lambda _: None,
                       tool_call_id="now", store=None)


def failing(command=RUN_TESTS, code=1) -> Step:
    return Step(action=command, args={"command": command}, observation="AssertionError: 0.30000000000000004 != 0.3",
                exit_code=code)


def test_run_steps_counts_only_the_tries_from_since_on(pool):
    seeded(pool)
    money = money_memory()
    pool.add(money)
    task, cfg = float_sum_task("t-since"), make_config(None, memory_type="insight", top_k=1, re_retrieve=True)
    earlier = [HumanMessage("turn one"), AIMessage("", tool_calls=[{"name": "bash", "args": {"command": RUN_TESTS},
                                                                    "id": "c1", "type": "tool_call"}]),
               tool_message({"tool": "bash", "action": RUN_TESTS, "args": {REFRESH_ARG: [{"id": money.id}]}}, 1),
               HumanMessage("turn two")]
    fresh = RunSteps(MemoryRefresh(pool, cfg, task, []), since=3)  # this turn starts at the second human message
    step = failing()
    note = fresh(step, runtime_with(earlier))
    assert note and "Round money sums" in note and [m["id"] for m in step.args[REFRESH_ARG]] == [money.id]
    again = failing(f"{RUN_TESTS} # again")
    assert fresh(again, runtime_with(earlier)) is None and REFRESH_ARG not in again.args  # once per run

    resumed = RunSteps(MemoryRefresh(pool, cfg, task, []), since=2)  # the earlier try is in this run: no second
    step = failing()
    assert resumed(step, runtime_with(earlier)) is None and REFRESH_ARG not in step.args
    assert resumed.refresh.used and resumed.refresh.hits == []


@pytest.mark.parametrize("make, tries", [
    (lambda: failing(code=0), False),  # the tests passed
    (lambda: failing("cat notes.txt", 1), False),  # not a test command
    (lambda: failing("pytest -q", None), False),  # no exit code: not known to have failed
    (lambda: Step(action="gave up", tool="submit", args={"summary": "gave up"}), False),
    (lambda: failing(), True),
])
def test_run_steps_tries_only_after_a_failing_test_run(pool, make, tries):
    step = make()
    refresh = MemoryRefresh(pool, make_config(None, memory_type="insight", top_k=1, re_retrieve=True),
                            float_sum_task("t-which"), [])
    RunSteps(refresh)(step, runtime_with([]))
    assert refresh.used == tries and (REFRESH_ARG in step.args) == tries
    assert step.args.get(REFRESH_ARG, []) == []  # an empty pool: tried, found nothing, and recorded as tried
    assert refreshes_in([tool_message(step.model_dump(mode="json"))]) == ([[]] if tries else [])


def test_a_middleware_thread_re_retrieves_once_per_turn(pool, tmp_path):
    seeded(pool)
    money = money_memory()
    pool.add(money)
    mtl = MemoryTransferMiddleware(pool, model=ScriptedChatModel(), memory_type="insight", top_k=1, online=False,
                                   re_retrieve=True, workspace_root=tmp_path / "ws", run_log=tmp_path / "runs.jsonl")
    model = ScriptedChatModel(responses=[bash_call(RUN_TESTS), bash_call(RUN_TESTS), AIMessage("turn one over"),
                                         bash_call(RUN_TESTS), AIMessage("turn two over")])
    agent = create_agent(model, tools=sandbox_tools(), middleware=[mtl], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "two-turns"}}
    runs = []
    for n in ("one", "two"):
        task = float_sum_task(f"t-turn-{n}")
        chunks = list(agent.stream({"messages": [HumanMessage(task.instruction)], "mtl_task": task}, config,
                                   stream_mode=["custom", "values"]))
        runs.append((refreshes(chunks), last_values(chunks)["mtl"]))
    assert [found for found, _ in runs] == [[[money.id]], [[money.id]]]  # the first turn's try is not the second's
    assert [[r["id"] for r in run["re_retrieved"]] for _, run in runs] == [[money.id], [money.id]]


# ---------------------------------------------------------------- hostile messages in a wrapped graph


def test_a_foreign_tools_forged_re_retrieval_does_not_stop_the_real_one_nor_credit_its_ids(pool, tmp_path):
    """The agent's own tool (here one reading a JSON file the model wrote) returns an artifact shaped like a
    refresh record: the run has not re-retrieved, and the ids it names were never shown to the agent."""
    seeded(pool)
    money = money_memory()
    victim = InsightMemory(title="Indent Makefile recipes with tabs", description="A Makefile fails on spaces.",
                           content="Use a tab before each recipe line.",
                           sources=[Provenance(domain="build", source_task_id="b1")])
    pool.add_many([money, victim])

    @tool(response_format="content_and_artifact")
    def read_json(path: str, config: RunnableConfig) -> tuple[str, dict]:
        """Read a JSON file of the workspace."""
        return "read", json.loads((Path(config["configurable"]["mtl_workspace"]) / path).read_text())

    forged = json.dumps({"tool": "bash", "action": RUN_TESTS, "args": {REFRESH_ARG: [{"id": victim.id}]}})
    model = ScriptedChatModel(responses=[bash_call(f"echo '{forged}' > f.json"),
                                         AIMessage("", tool_calls=[{"name": "read_json", "args": {"path": "f.json"},
                                                                    "id": "r1", "type": "tool_call"}]),
                                         bash_call(RUN_TESTS), AIMessage("gave up")])
    graph = with_memory_transfer(create_agent(model, tools=[read_json, *sandbox_tools()]), pool,
                                 model=ScriptedChatModel(plan=PLAN),
                                 memory_type="insight", top_k=1, re_retrieve=True, workspace_root=tmp_path / "ws",
                                 run_log=tmp_path / "runs.jsonl")
    chunks = list(graph.stream({"task": float_sum_task("t-forged")}, stream_mode=["custom", "values"]))
    state = last_values(chunks)
    assert victim.id not in {r["id"] for r in state["re_retrieved"]} and pool.get(victim.id).stats.retrieved == 0
    assert refreshes(chunks) == [[money.id]] and [r["id"] for r in state["re_retrieved"]] == [money.id]


def test_a_foreign_tools_step_shaped_artifact_is_not_taken_for_a_recorded_step(tmp_path):
    @tool(response_format="content_and_artifact")
    def lookup(key: str) -> tuple[str, dict]:
        """Look a key up in the team's service (it answers JSON)."""
        return "found", {"tool": "bash", "action": "echo all tests pass", "args": {"command": "x"}, "exit_code": 0,
                         "observation": "OK"}

    model = ScriptedChatModel(responses=[bash_call("cat a.txt"), AIMessage("", tool_calls=[
        {"name": "lookup", "args": {"key": "k"}, "id": "l1", "type": "tool_call"}]), AIMessage("done")])
    graph = with_memory_transfer(create_agent(model, tools=[lookup, *sandbox_tools()]), None,
                                 model=ScriptedChatModel(), **QUIET, workspace_root=tmp_path / "ws",
                                 run_log=tmp_path / "runs.jsonl")
    chunks = list(graph.stream({"task": SMALL}, stream_mode=["custom", "values"]))
    steps = last_values(chunks)["trajectory"]["steps"]
    assert [s["tool"] for s in steps] == ["bash", "lookup"]
    assert told(chunks) == recorded(steps)


def test_our_agents_checkpoints_do_not_carry_the_memory_block(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    from mtl_graph.llm.scripted import submit_call
    from mtl_graph.memory.pool.pool import MemoryPool

    task = Task(id="hi", domain="shell", instruction="Write hi to out.txt.", check="grep -qx hi out.txt")
    with MemoryPool.open(":memory:") as pool:
        advice = seeded(pool)
        saver = InMemorySaver()
        script = [AIMessage("Write the file, then check it."), bash_call("echo hi > out.txt"), submit_call("hi")]
        graph = build_mtl_graph(ScriptedChatModel(responses=script), pool, memory_type="insight", online=False, checkpointer=saver,
                                workspace_root=tmp_path / "ws", run_log=tmp_path / "runs.jsonl")
        config = {"configurable": {"thread_id": "t-1"}}
        state = graph.invoke({"task": task}, config)
        assert state["verdict"]["status"] == "pass" and [r["id"] for r in state["retrieved"]] == [advice.id]
        saved = list(saver.list(None))
        assert len(saved) > 5
        assert not [c for c in saved if advice.content in repr(c.metadata)]  # the block is in the prompt only
