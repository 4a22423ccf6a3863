"""The MTL graphs as subgraphs: a parent graph gets the run's outcome, not the agent's transcript."""

from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, TypedDict

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, load_action_script, submit_call
from mtl_graph.pipeline import build_mtl_graph, with_memory_transfer
from mtl_graph.pipeline.state import MTLOutput
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from helpers.paths import EXAMPLES

OUTPUT_KEYS = set(MTLOutput.__annotations__)


class Parent(TypedDict):
    """A user's graph: its own conversation, and the fields of the MTL run it cares about."""

    messages: Annotated[list[AnyMessage], add_messages]
    task: NotRequired[Any]
    verdict: NotRequired[dict[str, Any] | None]
    outcome: NotRequired[str | None]
    retrieved_ids: NotRequired[list[str]]
    new_memory_ids: NotRequired[list[str]]
    error: NotRequired[str | None]


@pytest.fixture
def pool(embeddings, tmp_path):
    with MemoryPool.open(tmp_path / "pool", embeddings) as p:
        p.add(InsightMemory(title="Run the tests after the last edit",
                            description="When a string helper is changed and submitted without running its tests.",
                            content="Run the test suite after the final edit and read its result before submitting.",
                            sources=[Provenance(domain="text", source_task_id="elsewhere")]))
        yield p


def parent_around(mtl: Any) -> Any:
    def ask(state: Parent) -> dict[str, Any]:
        return {"messages": [HumanMessage("please slugify"), AIMessage("handing it to the coding agent")],
                "task": str(EXAMPLES / "slugify")}

    def report(state: Parent) -> dict[str, Any]:
        return {"messages": [AIMessage(f"the agent's run: {state['outcome']}")]}

    graph = StateGraph(Parent)
    graph.add_node("ask", ask)
    graph.add_node("mtl", mtl)
    graph.add_node("report", report)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "mtl")
    graph.add_edge("mtl", "report")
    graph.add_edge("report", END)
    return graph.compile()


def assert_composed(out: dict[str, Any], pool: MemoryPool) -> None:
    assert [m.content for m in out["messages"]] == ["please slugify", "handing it to the coding agent",
                                                    "the agent's run: success"]
    assert out["verdict"]["status"] == "pass" and out["outcome"] == "success" and out["error"] is None
    assert len(out["retrieved_ids"]) == 1 and pool.get(out["retrieved_ids"][0]).title.startswith("Run the tests")
    assert len(out["new_memory_ids"]) == 1 and pool.get(out["new_memory_ids"][0]).source_task_ids == \
        ["examples/slugify"]
    assert "trajectory" not in out and "workspace" not in out  # keys the parent does not declare stay out


def test_mtl_graph_as_a_subgraph_leaves_the_parents_messages_alone(pool, tmp_path):
    model = ScriptedChatModel(responses=[AIMessage("Inspect, edit, run the tests."),
                                         *load_action_script(EXAMPLES / "slugify" / "demo_script.json")])
    mtl = build_mtl_graph(model, pool, distill_formats=["trajectory"], run_log=tmp_path / "runs.jsonl")
    alone = mtl.invoke({"task": str(EXAMPLES / "slugify")})
    assert set(alone) <= OUTPUT_KEYS and "messages" not in alone and alone["outcome"] == "success"

    model.responses = [AIMessage("Inspect, edit, run the tests."),
                       *load_action_script(EXAMPLES / "slugify" / "demo_script.json")]
    model.i = 0
    assert_composed(parent_around(mtl).invoke({"messages": []}), pool)


def test_wrapped_agent_as_a_subgraph_leaves_the_parents_messages_alone(pool, tmp_path):
    @tool
    def write_slug(path: str, config: RunnableConfig) -> str:
        """Write the slugify solution to path in the run's workspace."""
        workspace = Path(config["configurable"]["mtl_workspace"])
        (workspace / path).write_text('import re\n\n\ndef slugify(text: str) -> str:\n'
                                           '    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")\n')
        return "written"

    agent_model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[{"name": "write_slug", "args": {"path": "slug.py"}, "id": "c1",
                                   "type": "tool_call"}]),
        AIMessage("done: slug.py written")])
    agent = create_agent(agent_model, tools=[write_slug])
    helper = ScriptedChatModel(responses=[AIMessage("Inspect, edit, run the tests.")])
    wrapped = with_memory_transfer(agent, pool, model=helper, distill_formats=["trajectory"],
                                   run_log=tmp_path / "runs.jsonl")
    assert_composed(parent_around(wrapped).invoke({"messages": []}), pool)


def test_a_broken_task_reaches_the_parent_as_an_error_outcome(pool, tmp_path):
    mtl = build_mtl_graph(ScriptedChatModel(responses=[bash_call("true"), submit_call("x")]), pool,
                          run_log=tmp_path / "runs.jsonl")

    def ask(state: Parent) -> dict[str, Any]:
        return {"messages": [HumanMessage("run a task")], "task": 42}

    graph = StateGraph(Parent)
    graph.add_node("ask", ask)
    graph.add_node("mtl", mtl)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "mtl")
    out = graph.compile().invoke({"messages": []})
    assert [m.content for m in out["messages"]] == ["run a task"]
    assert out["outcome"] == "error" and out["error"].startswith("invalid task")
    assert out["verdict"]["status"] == "error" and out["new_memory_ids"] == [] and out["retrieved_ids"] == []


def test_an_interrupt_in_a_wrapped_agent_reaches_the_parent_graph_and_resumes(pool, tmp_path):
    from langchain_core.messages import ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    from mtl_graph.agent.tools import sandbox_tools

    @tool
    def confirm(question: str) -> str:
        """Ask the person supervising the run."""
        return str(interrupt(question))

    solve = ("cat > slug.py <<'EOF'\nimport re\n\n\ndef slugify(text: str) -> str:\n"
             "    return re.sub(r\"[^a-z0-9]+\", \"-\", text.lower()).strip(\"-\")\nEOF")
    agent_model = ScriptedChatModel(responses=[
        AIMessage("", tool_calls=[{"name": "confirm", "args": {"question": "Write slug.py?"}, "id": "q1",
                                   "type": "tool_call"}]),
        bash_call(solve), AIMessage("slug.py written")])
    wrapped = with_memory_transfer(create_agent(agent_model, tools=[confirm, *sandbox_tools()]), pool,
                                   model=ScriptedChatModel(responses=[AIMessage("Inspect, edit, run the tests.")]),
                                   distill_formats=["trajectory"], run_log=tmp_path / "runs.jsonl")
    graph = StateGraph(Parent)
    graph.add_node("ask", lambda state: {"messages": [HumanMessage("please slugify")],
                                         "task": str(EXAMPLES / "slugify")})
    graph.add_node("mtl", wrapped)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "mtl")
    parent = graph.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "parent"}}
    paused = parent.invoke({"messages": []}, thread)
    assert [i.value for i in paused["__interrupt__"]] == ["Write slug.py?"] and "outcome" not in paused
    out = parent.invoke(Command(resume="yes"), thread)
    assert out["outcome"] == "success" and out["verdict"]["status"] == "pass"
    assert [m.content for m in out["messages"]] == ["please slugify"]  # the agent's transcript stayed inside
    assert not any(isinstance(m, ToolMessage) for m in out["messages"])
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1
