"""One retrieval for every search of a run (`pipeline/retrieval.py`): the retrieve node, the mid-run refresh and the
agent's search_memories ask the pool with the same filter, ranker and lifecycle, so what the run's settings keep
out of the prompt is kept out of every search."""

from __future__ import annotations

from typing import Any

import pytest

from mtl_graph.agent import DefaultAgent
from mtl_graph.config import MTLConfig, SettingsError, make_config
from mtl_graph.core.task import Task
from mtl_graph.core.trajectory import Step
from mtl_graph.llm.scripted import ScriptedChatModel
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.pipeline.memory_tool import RunSearch
from mtl_graph.pipeline.refresh import MemoryRefresh
from mtl_graph.pipeline.retrieval import retrieve_for, run_filter
from mtl_graph.pipeline.stages import make_nodes
from mtl_graph.pipeline.state import RunState

TASK = Task(id="own-task", domain="math", instruction="Make the failing unit test of the parser pass.")
ADVICE = "Rerun the unit test after each edit"


def advice(n: int, domain: str, task_id: str) -> InsightMemory:
    return InsightMemory(title=f"{ADVICE} ({n})", description="When a unit test keeps failing after a fix.",
                         content=f"Rerun the unit test of the parser after every edit (variant {n}).",
                         sources=[Provenance(domain=domain, source_task_id=task_id)])


KEPT = [advice(0, "text", "t0"), advice(1, "text", "t1"), advice(2, "strings", "s2"), advice(3, "strings", "s3")]
LEFT_OUT = [advice(4, "math", "m4"),  # the task's own domain: held out
            advice(5, "text", TASK.id),  # made from this very task
            advice(6, "text", "banned")]  # an excluded task


def Recording(pool: MemoryPool) -> MemoryPool:
    """The pool itself, recording every `retrieve` it is asked in `pool.calls` (and answering it)."""
    answer = pool.retrieve
    pool.calls = []

    def retrieve(query: str, **kwargs: Any) -> Any:
        pool.calls.append(kwargs)
        return answer(query, **kwargs)

    pool.retrieve = retrieve
    return pool


@pytest.fixture()
def pool():
    with MemoryPool.open(":memory:") as pool:
        pool.add_many(KEPT + LEFT_OUT)
        yield pool


def settings(**more: Any) -> MTLConfig:
    return make_config(hold_one_out=True, exclude_task_ids=["banned"], retriever="dense", top_k=2,
                       relevance_floor=-1.0, **more)


def test_the_run_filter_is_the_runs_settings():
    where = run_filter(TASK, settings(only_ids=None))
    assert where == SearchFilter(type="insight", exclude_domains=("math",), exclude_task_ids=(TASK.id, "banned"))
    same = run_filter(TASK, make_config(same_domain=True, exclude_domains=["sql"]))
    assert (same.domain, same.exclude_domains, same.exclude_task_ids) == ("math", ("sql",), (TASK.id,))
    with pytest.raises(SettingsError, match="same_domain and hold_one_out exclude each other"):
        run_filter(TASK, make_config(same_domain=True, hold_one_out=True))


def test_the_node_the_refresh_and_the_tool_search_alike(pool):
    cfg = settings(re_retrieve=True)
    recording = Recording(pool)
    nodes = make_nodes(recording, ScriptedChatModel(responses=[]), DefaultAgent(), None, None, cfg)
    node = nodes.retrieve(RunState(task=TASK.model_dump(mode="json"), query=ADVICE), None)
    refresh = MemoryRefresh(recording, cfg, TASK, [r["id"] for r in node["retrieved"]])
    assert refresh(Step(action="python -m pytest", tool="bash", exit_code=1, observation="1 failed")) is not None
    tool_text, tool_step = RunSearch(recording, cfg, TASK, [r["id"] for r in node["retrieved"]], 0)(ADVICE, 2)

    node_call, refresh_call, tool_call = recording.calls
    for call in (refresh_call, tool_call):  # one filter, one ranker, one lifecycle for every search of the run
        assert {k: v for k, v in call.items() if k != "k"} == {k: v for k, v in node_call.items() if k != "k"}
    assert node_call["where"] == run_filter(TASK, cfg) and node_call["retriever"] == "dense"
    assert node_call["lifecycle"] is not None and node_call["lifecycle"].relevance_floor == -1.0

    kept, left_out = {m.id for m in KEPT}, {m.id for m in LEFT_OUT}
    shown = [r["id"] for r in node["retrieved"]] + [r["id"] for r in refresh.hits]
    assert len(node["retrieved"]) == len(refresh.hits) == 2 and set(shown) <= kept
    assert not set(tool_step.args["found"]) & left_out and tool_step.args["found"]
    assert not set(tool_step.args["found"]) & {r["id"] for r in node["retrieved"]}  # shown before: not again


def test_exclude_ids_skips_the_memories_shown_and_keeps_k(pool):
    cfg = settings(lifecycle="off")
    first = retrieve_for(pool, TASK, cfg, ADVICE, 2)
    ids = [h.memory.id for h in first.hits]
    assert len(ids) == 2 and set(ids) <= {m.id for m in KEPT}
    again = retrieve_for(pool, TASK, cfg, ADVICE, 2, exclude_ids=ids)
    assert len(again.hits) == 2 and not {h.memory.id for h in again.hits} & set(ids)
    everything = retrieve_for(pool, TASK, cfg, ADVICE, 4)
    assert [h.memory.id for h in everything.hits] == ids + [h.memory.id for h in again.hits]  # one order
