"""The three retrievers of a search (`retriever`: hybrid, dense, bm25) on both embedded engines, and the run
setting that picks one for every search of a run."""

from __future__ import annotations

import pytest

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool

MEMORIES = [
    ("Rotate the zq7 ledger before replaying it", "When a replay of the zq7 ledger fails halfway.",
     "Rotate the zq7 ledger file first; a half-written entry breaks the replay."),
    ("Compare floats with a tolerance", "When a unit test compares computed decimal numbers.",
     "Use math.isclose instead of == for computed floating point values."),
    ("Pin the random seed in tests", "When a test that samples values passes only sometimes.",
     "Seed the generator at the top of the test so every run draws the same values."),
]


@pytest.fixture(params=["edge", "client"])
def pool(request, tmp_path):
    with MemoryPool.open(tmp_path / "pool", engine=request.param) as pool:
        pool.add_many([InsightMemory(title=t, description=d, content=c, sources=[Provenance(domain="ops")])
                       for t, d, c in MEMORIES])
        yield pool


def titles(hits) -> list[str]:
    return [h.memory.title for h in hits]


def test_bm25_finds_by_keyword_only_and_dense_by_meaning(pool):
    keyword = pool.search("zq7", k=1, retriever="bm25")
    assert titles(keyword) == [MEMORIES[0][0]] and keyword[0].retriever == "bm25"
    assert -1.0 <= keyword[0].similarity <= 1.0  # the cosine is still read (the relevance floor needs it)
    paraphrase = "numbers computed with decimals are almost equal but the assertion says they differ"
    assert all(h.retriever == "bm25" for h in pool.search(paraphrase, k=3, retriever="bm25"))
    assert titles(pool.search(paraphrase, k=1, retriever="dense")) == [MEMORIES[1][0]]
    assert all(h.retriever == "dense" for h in pool.search(paraphrase, k=3, retriever="dense"))
    assert {h.retriever for h in pool.search("zq7 ledger replay", k=3)} <= {"both", "dense", "bm25"}


def test_bm25_keeps_the_filters_and_the_floor(pool):
    assert pool.search("zq7 ledger", k=3, retriever="bm25", exclude_domains=["ops"]) == []
    assert pool.search("zq7 ledger", k=3, retriever="bm25", min_score=0.999) == []
    assert pool.search("qqqqzzzz", k=3, retriever="bm25") == []  # no known word: nothing, not an error


def test_an_unknown_retriever_is_one_clear_error(pool):
    with pytest.raises(ValueError, match="unknown retriever 'grep': one of hybrid, dense, bm25"):
        pool.search("zq7", retriever="grep")


def test_the_run_setting_reaches_every_search_of_the_run(tmp_path):
    from mtl_graph.llm.scripted import ScriptedChatModel, submit_call
    from mtl_graph.core.task import Task
    from mtl_graph.pipeline import build_mtl_graph
    from mtl_graph.config import SettingsError

    task = Task(id="ledger-1", domain="infra", instruction="The zq7 ledger replay fails: make it replay cleanly.")
    with MemoryPool.open(":memory:") as pool:
        pool.add_many([InsightMemory(title=t, description=d, content=c, sources=[Provenance(domain="ops")])
                       for t, d, c in MEMORIES])
        graph = build_mtl_graph(ScriptedChatModel(responses=[submit_call("done")]), pool, retriever="bm25",
                                top_k=2, lifecycle="off", online=False, sandbox="bwrap", run_log=tmp_path / "r.jsonl")
        out = graph.invoke({"task": task}, context={"memory_type": "insight"})
        assert out["retrieved"] and {r["retriever"] for r in out["retrieved"]} == {"bm25"}
        assert out["retrieved"][0]["id"] == next(m.id for m in pool if m.title == MEMORIES[0][0])
        with pytest.raises(SettingsError, match="invalid retriever 'grep'"):
            build_mtl_graph(ScriptedChatModel(responses=[]), pool, retriever="grep")
