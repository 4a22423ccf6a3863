"""`ainvoke` / `astream` of the MTL graph and the pool view never block the event loop.

The nodes are sync and do their I/O (pool, sandbox, files, model calls) where they are: LangGraph runs sync nodes
in worker threads under `ainvoke` / `astream`. BlockBuster (the detector `langgraph dev` uses, here with every
blocking function it knows, stricter than the server) raises on any blocking call in the event loop's thread.
Real components: the embedded pool with the local embedder, bwrap, an in-memory checkpointer; scripted model."""

import asyncio
import json

import pytest
from blockbuster import BlockingError, blockbuster_ctx
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import MTLContext, build_mtl_graph
from mtl_graph.pipeline.pool_browser import build_pool_view
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task

TASK = Task(id="async-task", domain="math", instruction="Make f.X equal 2 so that test_f.py passes.",
            files={"f.py": "X = 1\n", "test_f.py": "import unittest\nimport f\n\nclass T(unittest.TestCase):\n"
                                                   "    def test(self):\n        self.assertEqual(f.X, 2)\n"},
            check="python3 -m unittest -q test_f", test_files=["test_f.py"])
PLAN = "Read f.py and the test, set the constant, rerun the test, submit."


def script() -> list:
    return [AIMessage(PLAN), bash_call("echo 'X = 2' > f.py"), bash_call("python3 -m unittest -q test_f"),
            submit_call("set X")]


@pytest.fixture
def pool(embeddings, tmp_path):
    with MemoryPool.open(tmp_path / "pool", embeddings) as p:
        p.add(InsightMemory(title="Rerun the tests after the last edit", description="Before submitting a fix.",
                            content="Run the suite once more.", sources=[Provenance(domain="o", source_task_id="o1")]))
        p.search("warm the embedder up", k=1)  # loading the model is a one-time cost, not the loop's concern
        yield p


def strict(coroutine):
    """Run a coroutine with every blocking call in the event loop's thread raising BlockingError."""

    async def guarded():
        with blockbuster_ctx():
            return await coroutine

    return asyncio.run(guarded())


def test_the_detector_catches_a_blocking_call():
    async def blocking():
        open(__file__).read()  # a file read in async code

    with pytest.raises(BlockingError):
        strict(blocking())


def test_astream_runs_the_whole_graph_without_blocking_the_loop(pool, tmp_path):
    graph = build_mtl_graph(ScriptedChatModel(responses=script()), pool, top_k=1, distill_formats=["trajectory"],
                            sandbox="bwrap", run_log=tmp_path / "runs.jsonl")

    async def run():
        events, final = [], {}
        async for mode, chunk in graph.astream({"task": TASK}, stream_mode=["custom", "values"]):
            (events.append(chunk) if mode == "custom" else final.update(chunk))
        return events, final

    events, out = strict(run())
    assert out["verdict"]["status"] == "pass" and out["error"] is None and len(out["new_memory_ids"]) == 1
    assert [e["kind"] for e in events][:2] == ["plan", "retrieved"] and events[-2]["kind"] == "written"
    assert json.loads((tmp_path / "runs.jsonl").read_text())["run_id"] == out["run_id"]


def test_ainvoke_pauses_for_review_and_resumes_without_blocking_the_loop(pool, tmp_path):
    graph = build_mtl_graph(ScriptedChatModel(responses=script()), pool, top_k=1, distill_formats=["trajectory"],
                            sandbox="bwrap", run_log=tmp_path / "runs.jsonl", checkpointer=InMemorySaver())
    config, context = {"configurable": {"thread_id": "a"}}, MTLContext(review_memories=True)

    async def run():
        paused = await graph.ainvoke({"task": TASK}, config=config, context=context)
        again = await graph.ainvoke(Command(resume="sure"), config=config, context=context)
        done = await graph.ainvoke(Command(resume="approve"), config=config, context=context)
        return paused, again, done

    paused, again, done = strict(run())
    [memory] = paused["__interrupt__"][0].value["memories"]
    assert "invalid decision 'sure'" in again["__interrupt__"][0].value["error"]
    assert done["new_memory_ids"] == [memory["id"]] and pool.get(memory["id"]) is not None


def test_the_pool_view_streams_without_blocking_the_loop(pool):
    view = build_pool_view(pool)

    async def run():
        return [chunk async for chunk in view.astream({"query": "tests", "k": 3}, stream_mode="values")][-1]

    out = strict(run())
    assert out["error"] is None and out["stats"]["total"] == 1 and out["hits"][0]["key"].startswith("Rerun the tests")


def test_a_rate_limited_plan_is_retried_under_astream(pool, tmp_path):
    from helpers.provider_errors import Flaky

    model = Flaky(responses=script(), failing={1})
    graph = build_mtl_graph(model, pool, top_k=1, online=False, sandbox="bwrap", run_log=tmp_path / "runs.jsonl",
                            retry={"initial_delay": 0.01})

    async def run():
        return [chunk async for chunk in graph.astream({"task": TASK}, stream_mode="values")][-1]

    out = strict(run())
    assert out["query"] == PLAN and out["verdict"]["status"] == "pass" and model.calls == 5


def test_a_durable_async_run_pauses_and_resumes_on_the_async_sqlite_checkpointer(pool, tmp_path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def run():
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
            graph = build_mtl_graph(ScriptedChatModel(responses=script()), pool, top_k=1,
                                    distill_formats=["trajectory"], sandbox="bwrap", run_log=tmp_path / "runs.jsonl",
                                    checkpointer=saver)
            config, context = {"configurable": {"thread_id": "durable"}}, MTLContext(review_memories=True)
            paused = await graph.ainvoke({"task": TASK}, config=config, context=context)
            done = await graph.ainvoke(Command(resume={"decisions": ["reject"]}), config=config, context=context)
            return paused, done

    paused, done = strict(run())
    [memory] = paused["__interrupt__"][0].value["memories"]
    assert done["reviewed"]["rejected"] == [memory["id"]] and done["new_memory_ids"] == [] and len(pool) == 1
