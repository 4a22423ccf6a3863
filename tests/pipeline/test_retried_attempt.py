"""A LangGraph server retrying a run its killed process left running (`langgraph dev` re-queues it on restart)
runs the graph again from the top under the same server run id (`configurable.run_id`). That attempt is the same
MTL run: its memory merges into the same provenance entry, its credit into the same entry, and the workspace the
dead attempt left is closed before the new one is prepared. Real graph, checkpointer, sandbox and pool."""

import uuid

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.memory.usage import entries
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.pipeline.lease import workspace_path
from mtl_graph.pipeline.server_policy import ServerPolicy
from helpers.memory_fixtures import broken_add_task, rerun_memory

TASK = broken_add_task("retry-fix")
SHOWN = rerun_memory()


def attempt(pool, tmp_path, checkpointer, server_run_id):
    """One attempt of a served run: a fresh graph (a restarted server) on the same pool and checkpointer."""
    model = ScriptedChatModel(responses=[AIMessage("Plan: fix add and rerun the check."), bash_call("ls"),
                                         bash_call("sed -i 's/a - b/a + b/' calc.py", thought="Using Memory 1."),
                                         bash_call("python3 check.py"), submit_call("fixed add")])
    graph = build_mtl_graph(model, pool, top_k=1, distill_formats=["trajectory"], relevance_floor=-1,
                            checkpointer=checkpointer, policy=ServerPolicy(task_roots=(tmp_path,)),
                            workspace_root=tmp_path / "ws", run_log=tmp_path / "runs.jsonl")
    config = {"configurable": {"thread_id": "t", "run_id": server_run_id}}
    return graph.invoke({"task": TASK.model_dump(mode="json")}, config=config)


def sources_of(pool, run_id):
    return sum(1 for m in pool for s in m.sources if s.run_id == run_id)


def credit_of(pool, memory_id):
    """The run ids of a memory's credit entries (not its cached tally)."""
    [hit] = pool.fetch([memory_id])
    return [entry.run_id for entry in entries(hit.payload)]


def test_a_retried_attempt_is_the_same_run_written_and_credited_once(pool, tmp_path):
    pool.add_many([SHOWN])
    checkpointer, server_run = InMemorySaver(), str(uuid.uuid4())
    run_id = uuid.UUID(server_run).hex
    # the dead attempt got as far as its workspace: a file of its agent is still there
    left = workspace_path(tmp_path / "ws", {"configurable": {"thread_id": "t"}}, run_id, TASK.id)
    left.mkdir(parents=True)
    (left / "half_done.txt").write_text("the dead attempt's\n")

    first = attempt(pool, tmp_path, checkpointer, server_run)
    assert first["verdict"]["status"] == "pass" and first["run_id"] == run_id
    assert "half_done.txt" not in first["trajectory"]["steps"][0]["observation"]  # a clean workspace
    assert not left.exists()
    [memory_id] = first["new_memory_ids"]
    assert first["credit"]["shown"] == [SHOWN.id] and first["credit"]["credited"]

    again = attempt(pool, tmp_path, checkpointer, server_run)  # the server retries it after a crash
    assert again["run_id"] == run_id and again["new_memory_ids"] == [memory_id]
    assert sources_of(pool, run_id) == 1
    assert list(credit_of(pool, SHOWN.id)) == [run_id] and pool.get(SHOWN.id).stats.retrieved == 1

    other = attempt(pool, tmp_path, checkpointer, str(uuid.uuid4()))  # a new run on the thread counts again
    assert other["run_id"] != run_id and sources_of(pool, other["run_id"]) == 1
    assert pool.get(SHOWN.id).stats.retrieved == 2 and len(pool.get(memory_id).sources) == 2


def test_without_a_server_run_id_every_run_gets_a_new_id(pool, tmp_path):
    checkpointer = InMemorySaver()
    ids = {attempt(pool, tmp_path, checkpointer, given)["run_id"] for given in (None, None, "not-a-uuid", "")}
    assert len(ids) == 4 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_mtl_runs_nested_in_one_server_run_each_get_their_own_id(pool, tmp_path):
    """A parent graph the server runs once may run the MTL graph several times (a node per task, a fan-out): the
    server's run id names the server's graph only, so those runs never merge into one."""
    from typing import TypedDict

    from langgraph.graph import StateGraph

    class Parent(TypedDict, total=False):
        run_ids: list

    def node(state):
        model = ScriptedChatModel(responses=[AIMessage("Plan: fix add."), bash_call("sed -i 's/a - b/a + b/' calc.py"),
                                             submit_call("fixed add")])
        mtl = build_mtl_graph(model, pool, memory_type="none", workspace_root=tmp_path / "ws",
                              run_log=tmp_path / "runs.jsonl")
        return {"run_ids": [*(state.get("run_ids") or []), mtl.invoke({"task": TASK})["run_id"]]}

    parent = StateGraph(Parent)
    parent.add_node("first", node)
    parent.add_node("second", node)
    parent.set_entry_point("first")
    parent.add_edge("first", "second")
    server_run = str(uuid.uuid4())
    out = parent.compile(checkpointer=InMemorySaver()).invoke(
        {}, {"configurable": {"thread_id": "p", "run_id": server_run}})
    assert len(set(out["run_ids"])) == 2 and uuid.UUID(server_run).hex not in out["run_ids"]
