"""One execute stage for every agent: both factories compile the same subgraph, and a run's messages (however
hostile) tell the step hook whether it already re-retrieved. Real create_agent, real graphs; no mocks."""

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage

from mtl_graph.agent import ScriptedChatModel
from mtl_graph.agent.tools import sandbox_tools
from mtl_graph.graph import build_mtl_graph, with_memory_transfer
from mtl_graph.graph.steps import REFRESH_ARG, re_retrieved_in, refreshes_in


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


def tool_message(artifact, n=1) -> ToolMessage:
    return ToolMessage("out", tool_call_id=f"c{n}", artifact=artifact)


def test_hostile_artifacts_never_count_as_a_re_retrieval():
    hostile = [tool_message({"args": {REFRESH_ARG: "yes"}}, 1), tool_message({"args": {REFRESH_ARG: {"id": "x"}}}, 2),
               tool_message("not a dict", 3), tool_message(["a", "list"], 4), tool_message({"args": "str"}, 5),
               tool_message({"args": {REFRESH_ARG: ["s", 1, None] * 10_000}}, 6), AIMessage("hi")]
    assert re_retrieved_in(hostile) == []
    assert len(refreshes_in(hostile)) == 1  # the list of non-dicts was a try: no second re-retrieval
    good = tool_message({"args": {REFRESH_ARG: [{"id": "m1"}]}}, 7)
    assert re_retrieved_in([*hostile, good]) == [{"id": "m1"}]
