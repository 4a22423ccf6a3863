"""Same-domain retrieval (`same_domain`): only memories with a source in the task's own domain are found, on
both engines, and the run's filters carry it (the refresh and the lifecycle's floor share them)."""

import pytest

from mtl_graph.core.task import Task
from mtl_graph.config import MTLConfig
from mtl_graph.pipeline.retrieval import run_filter
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory

LESSON = "Rerun the check after the last edit"


def _memory(domain: str, n: int) -> InsightMemory:
    return InsightMemory(title=f"{LESSON} ({domain} {n})", description="When a fix may hide a second problem.",
                         content="Run the check command after your final edit and read its output.",
                         sources=[Provenance(domain=domain, source_task_id=f"{domain}-{n}")])


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_same_domain_keeps_only_the_tasks_own_domain(tmp_path, embeddings, engine):
    from mtl_graph.memory.pool.pool import MemoryPool

    pool = MemoryPool.open(tmp_path / engine, embeddings, engine=engine)
    try:
        pool.add_many([_memory(d, n) for d in ("python", "sql", "rust") for n in range(2)])
        task = Task(id="t-1", domain="sql", instruction="Fix the query so the check passes.")
        both = run_filter(task, MTLConfig(retrieval={"same_domain": True}))
        assert both.domain == "sql" and run_filter(task, MTLConfig()).domain is None
        hits = pool.search(LESSON, k=6, where=both)
        assert len(hits) == 2 and {d for h in hits for d in h.memory.domains} == {"sql"}
        assert len(pool.search(LESSON, k=6, where=run_filter(task, MTLConfig()))) == 6
        ranked = pool.retrieve(LESSON, k=6, lifecycle=LifecycleConfig(relevance_floor=-1.0), where=both)
        assert {d for h in ranked.hits for d in h.memory.domains} == {"sql"}
        assert pool.search(LESSON, type="insight", k=6, domain="go") == []  # a domain with no memory: none
    finally:
        pool.close()


def test_same_domain_is_a_run_setting_with_one_line_errors():
    from mtl_graph.config import SettingsError
    from mtl_graph.config import MTLContext

    assert MTLContext(same_domain=True).same_domain is True
    with pytest.raises(SettingsError, match=r"^run context: invalid same_domain 'maybe'"):
        MTLContext(same_domain="maybe")


def test_same_domain_with_hold_one_out_ends_the_run_with_one_clear_line(pool, tmp_path):
    from mtl_graph.llm.scripted import ScriptedChatModel, submit_call
    from mtl_graph.pipeline import build_mtl_graph

    pool.add_many([_memory("python", 0)])
    task = Task(id="t-2", domain="python", instruction="Fix the function so the check passes.", check="true")
    model = ScriptedChatModel(responses=[submit_call("done")], plan="Read the code, fix it and run the check.")
    state = build_mtl_graph(model, pool, sandbox="local", same_domain=True, hold_one_out=True,
                            run_log=tmp_path / "runs.jsonl").invoke({"task": task})
    assert state["error_kind"] == "retrieval" and state["outcome"] == "error"
    assert "same_domain and hold_one_out exclude each other" in state["error"] and "\n" not in state["error"]
    assert state["new_memory_ids"] == [] and pool.count() == 1  # nothing written, nothing credited
