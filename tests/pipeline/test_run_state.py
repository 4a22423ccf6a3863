"""Clean per-run state: runs on one thread (a checkpointer, as LangGraph Studio reuses threads) share nothing.

Real components: the embedded pool with the local embedder, bwrap, a scripted model emitting real tool calls."""

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import MTLContext, build_mtl_graph
from mtl_graph.pipeline.state import MTLState, fresh_run_state
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task


def unit_task(task_id: str, name: str, want: int) -> Task:
    test = (f"import unittest\nimport {name}\n\nclass T(unittest.TestCase):\n    def test(self):\n"
            f"        self.assertEqual({name}.X, {want})\n")
    return Task(id=task_id, domain=task_id, instruction=f"Make {name}.X equal {want} so test_{name}.py passes.",
                files={f"{name}.py": "X = 1\n", f"test_{name}.py": test},
                check=f"python3 -m unittest -q test_{name}", test_files=[f"test_{name}.py"])


def insight(title: str, domain: str) -> InsightMemory:
    return InsightMemory(title=title, description=f"Advice about {title.lower()}.", content=f"{title}, always.",
                         sources=[Provenance(domain=domain, source_task_id=f"{domain}-1")])


def stats(pool, memory):
    s = pool.get(memory.id).stats
    return s.retrieved, s.retrieved_success, s.retrieved_failure


def test_every_run_field_is_reset():
    assert set(fresh_run_state()) == set(MTLState.__annotations__) - {"task"}


def test_two_runs_on_one_thread_credit_only_their_own_memories(pool, tmp_path):
    a, b, c = insight("Read the failing assertion", "x"), insight("Keep interfaces", "y"), insight("Rerun tests", "z")
    pool.add_many([a, b, c])
    one, two = unit_task("one", "f", 2), unit_task("two", "g", 3)
    model = ScriptedChatModel(responses=[
        AIMessage("Plan: run the tests, read the failure, fix the constant."),
        bash_call("python3 -m unittest -q test_f"),  # fails: re-retrieval adds the second memory
        bash_call("echo 'X = 2  # fixed' > f.py"),  # a new size: a same-second, same-size edit keeps a stale .pyc
        submit_call("fixed f"),
        AIMessage("Plan: set the constant."),
        bash_call("echo 'X = 5' > g.py"),  # wrong: this run fails
        submit_call("set g"),
    ])
    graph = build_mtl_graph(model, pool, top_k=1, online=True, distill_formats=["trajectory"], sandbox="bwrap",
                            checkpointer=InMemorySaver(), run_log=tmp_path / "runs.jsonl")
    config = {"configurable": {"thread_id": "studio-thread"}}

    first = graph.invoke({"task": one}, config=config, context=MTLContext(only_ids=[a.id, c.id], re_retrieve=True))
    assert first["verdict"]["status"] == "pass"
    used_first = {r["id"] for r in first["retrieved"] + first["re_retrieved"]}
    assert used_first == {a.id, c.id}

    second = graph.invoke({"task": two}, config=config, context=MTLContext(only_ids=[b.id]))
    assert second["verdict"]["status"] == "fail" and second["trajectory"]["task"]["id"] == "two"
    assert [r["id"] for r in second["retrieved"]] == [b.id] and second["re_retrieved"] == []
    assert stats(pool, a) == stats(pool, c) == (1, 1, 0)
    assert stats(pool, b) == (1, 0, 1)

    saved = graph.get_state(config).values
    texts = [str(m.content) for m in saved["messages"]]
    assert [m.type for m in saved["messages"]][:2] == ["system", "human"] and one.instruction not in "".join(texts)
    assert two.instruction in texts[1] and len(saved["new_memory_ids"]) == 1
    assert pool.get(saved["new_memory_ids"][0]).source_task_ids == ["two"]

    third = graph.invoke({"task": 42}, config=config)  # a broken input on the same thread inherits nothing
    assert third["error"].startswith("invalid task") and third["verdict"]["status"] == "error"
    assert third["trajectory"] is None and third["retrieved"] == [] and third["new_memory_ids"] == []
    assert "messages" not in third and "workspace" not in third  # the output schema keeps them inside
    inside = graph.get_state(config).values
    assert inside["messages"] == [] and inside["workspace"] is None
    assert stats(pool, a) == stats(pool, c) == (1, 1, 0) and stats(pool, b) == (1, 0, 1)
