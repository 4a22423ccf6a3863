"""PoolStore: persistence, the local model as default index, the pool's memories under ("mtl", ...), TTL sweeps,
async ops, wrapping another store, and one clear error per bad input (nothing written)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from helpers.memory_fixtures import money_memory, seeded

from mtl_graph.memory.engine.location import PoolLockedError
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.workflow import WorkflowMemory
from mtl_graph.memory.store.pool_store import PoolStore, StoreClosedError, StoreError, StoreReadOnlyError


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


NOTES = {"hike": "I love hiking in the mountains on weekends", "food": "I am vegetarian and cook Indian food",
         "code": "I write Rust at work and Python for fun"}


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_items_vectors_and_ttl_survive_a_reopen(engine, tmp_path, embeddings):
    clock = Clock()
    with PoolStore.open(tmp_path / "s", engine=engine, index={"fields": ["text"]}, clock=clock) as store:
        for key, text in NOTES.items():
            store.put(("users", "ann"), key, {"text": text}, ttl=60 if key == "code" else None)
        store.put(("users", "ann"), "hike", {"text": NOTES["hike"], "v": 2})  # an overwrite keeps created_at
        first = store.get(("users", "ann"), "hike")
        clock.now += timedelta(minutes=50)
        store.get(("users", "ann"), "code")  # refresh_on_read (default True): 60 more minutes from now
    clock.now += timedelta(minutes=30)  # 80 minutes after the put, 30 after the refresh
    with PoolStore.open(tmp_path / "s", engine=engine, index={"fields": ["text"]}, clock=clock) as store:
        again = store.get(("users", "ann"), "hike")
        assert again.value == {"text": NOTES["hike"], "v": 2} and again.created_at == first.created_at
        assert store.get(("users", "ann"), "code", refresh_ttl=False) is not None  # the refresh was persisted
        top = store.search(("users",), query="what does she eat?", limit=1)[0]
        assert top.key == "food" and 0 < top.score <= 1
        clock.now += timedelta(minutes=31)
        assert store.get(("users", "ann"), "code") is None
        assert store.sweep_ttl() == 1 and store.sweep_ttl() == 0
    with PoolStore.open(tmp_path / "s", engine=engine, index={"fields": ["text"]}, clock=clock) as store:
        assert sorted(h.key for h in store.search(("users",))) == ["food", "hike"]


def test_the_default_index_is_the_local_model_and_ranks_as_in_memory_store(embeddings):
    reference = InMemoryStore(index={"dims": 384, "embed": embeddings, "fields": ["text"]})
    with PoolStore.open(index={"fields": ["text"]}) as store:
        for key, text in NOTES.items():
            store.put(("n",), key, {"text": text})
            reference.put(("n",), key, {"text": text})
        for query in ("outdoor sports", "programming languages", "diet"):
            got = [(h.key, h.score) for h in store.search(("n",), query=query)]
            want = [(h.key, h.score) for h in reference.search(("n",), query=query)]
            assert [k for k, _ in got] == [k for k, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_the_pools_memories_appear_read_only_under_mtl(pool, tmp_path):
    insight = seeded(pool)
    money = pool.get(pool.add(money_memory()).id)
    workflow = WorkflowMemory(goal="Verify a change by running the tests", actions=["run pytest -q"],
                              sources=[Provenance(domain="d1", source_task_id="t9")])
    pool.add(workflow)
    before = {m.id for m in pool}
    with PoolStore.open(tmp_path / "store", pool=pool, index={"fields": ["text"]}) as store:
        store.put(("users", "ann"), "n1", {"text": "round the totals of prices"})
        assert set(store.list_namespaces()) == {("mtl", "insight"), ("mtl", "workflow"), ("users", "ann")}
        assert store.list_namespaces(prefix=("mtl",), max_depth=1) == [("mtl",)]
        item = store.get(("mtl", "insight"), insight.id)
        assert item.value["title"] == insight.title and item.namespace == ("mtl", "insight")
        assert store.get(("mtl", "workflow"), insight.id) is None  # right id, other format
        hits = store.search(("mtl", "insight"), query="float totals fail equality", limit=1)
        assert hits[0].key == money.id and 0 < hits[0].score <= 1
        assert {h.key for h in store.search(("mtl",), limit=10)} == before
        assert [h.key for h in store.search(("mtl",), filter={"goal": workflow.goal})] == [workflow.id]
        everything = store.search((), query="money sums", limit=10)  # both sides, merged by score
        assert {h.namespace[0] for h in everything} == {"mtl", "users"}
        assert [h.score for h in everything] == sorted((h.score for h in everything), reverse=True)
        for write in (lambda: store.put(("mtl", "insight"), "x", {"a": 1}),
                      lambda: store.delete(("mtl", "insight"), insight.id), lambda: store.put(("mtl",), "x", {})):
            with pytest.raises(StoreReadOnlyError, match=r"read-only.*MemoryPool.add"):
                write()
    assert {m.id for m in pool} == before  # the pool's data is untouched; the store's items live elsewhere


def test_a_ttl_sweeper_thread_deletes_expired_items():
    clock = Clock()
    with PoolStore.open(ttl={"default_ttl": 1}, clock=clock) as store:
        store.put(("t",), "a", {"v": 1})
        store.put(("t",), "b", {"v": 2}, ttl=None)
        clock.now += timedelta(minutes=2)
        future = store.start_ttl_sweeper(sweep_interval_minutes=0.001)
        deadline = time.monotonic() + 5
        while ("t", "a") in {k[0] + (k[1],) for k in store._table.rows} and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [k for _, k in store._table.rows] == ["b"]
        assert store.stop_ttl_sweeper(timeout=5) and future.result(timeout=1) is None


def test_async_ops_run_off_the_event_loop():
    async def scenario(store):
        await store.aput(("a",), "k", {"text": "hello"})
        assert (await store.aget(("a",), "k")).value == {"text": "hello"}
        assert [h.key for h in await store.asearch(("a",), query="hi")] == ["k"]
        assert await store.alist_namespaces() == [("a",)]
        await store.adelete(("a",), "k")
        return await store.aget(("a",), "k")

    with PoolStore.open(index={"fields": ["text"]}) as store:
        assert asyncio.run(scenario(store)) is None


def test_wrapping_another_store_adds_the_mtl_view(pool):
    insight = seeded(pool)
    store = PoolStore.wrapping(InMemoryStore(), pool=pool)
    store.put(("u",), "k", {"x": 1})
    assert store.list_namespaces() == [("mtl", "insight"), ("u",)]
    assert store.get(("mtl", "insight"), insight.id).key == insight.id
    assert {h.key for h in store.search(())} == {"k", insight.id}
    with pytest.raises(StoreReadOnlyError):
        store.put(("mtl", "insight"), "k", {"x": 1})


def test_wrapping_langgraph_store_qdrant(pool):
    qdrant = pytest.importorskip("langgraph.store.qdrant", reason="langgraph-store-qdrant is not installed")
    from qdrant_client import QdrantClient

    insight = seeded(pool)
    inner = qdrant.QdrantStore(QdrantClient(":memory:"))
    inner.setup()
    store = PoolStore.wrapping(inner, pool=pool)
    store.put(("u", "v"), "k", {"x": 1})
    assert store.search(("u",), filter={"x": {"$gte": 1}})[0].key == "k"
    assert store.list_namespaces(max_depth=1) == [("mtl",), ("u",)]
    assert store.get(("mtl", "insight"), insight.id) is not None


# ---------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def store():
    """One store for every bad-input case: none of them may change it."""
    with PoolStore.open() as s:
        s.put(("keep",), "k", {"v": 1})
        yield s


@pytest.mark.parametrize("call,error,message", [
    (lambda s: s.put((), "k", {}), InvalidNamespaceError, "cannot be empty"),
    (lambda s: s.put(("a", 1), "k", {}), InvalidNamespaceError, "must be strings"),
    (lambda s: s.put(("a.b",), "k", {}), InvalidNamespaceError, "periods"),
    (lambda s: s.put(("a", ""), "k", {}), InvalidNamespaceError, "empty strings"),
    (lambda s: s.put(("langgraph",), "k", {}), InvalidNamespaceError, "langgraph"),
    (lambda s: s.put(("a",), "k", ["not", "a", "dict"]), StoreError, "must be a dict"),
    (lambda s: s.put(("a",), "k", {"when": datetime.now()}), StoreError, "not JSON-serializable"),
    (lambda s: s.put(("a",), "k", {"x": float("nan")}), StoreError, "not JSON-serializable"),
    (lambda s: s.put(("a",), "k", {}, ttl=-1), StoreError, "positive number of minutes"),
    (lambda s: s.put(("a",), "", {}), StoreError, "non-empty string"),
    (lambda s: s.search(("a",), filter={"n": {"$regex": "x"}}), StoreError, "unsupported filter operator"),
    (lambda s: s.search(("a",), filter={"n": {"$gt": "3"}}), StoreError, r"\$gt needs a number"),
    (lambda s: s.search(("a",), filter=["n"]), StoreError, "must be a dict"),
    (lambda s: s.search(("a",), limit=-1), StoreError, "non-negative"),
    (lambda s: s.get(("a.b",), "k"), InvalidNamespaceError, "periods"),
    (lambda s: s.batch([GetOp(["a"], "k")]), StoreError, "tuple of strings"),
    (lambda s: s.batch([PutOp(("a",), "k", {}), PutOp(("b",), "k", "x")]), StoreError, "must be a dict"),
    (lambda s: s.batch(["get a"]), StoreError, "unknown store operation"),
    (lambda s: s.batch([SearchOp(("a",), query=3)]), StoreError, "query is a string"),
])
def test_bad_input_is_one_clear_error_and_writes_nothing(store, call, error, message):
    with pytest.raises(error, match=message):
        call(store)
    assert [(h.namespace, h.key, h.value) for h in store.search(())] == [(("keep",), "k", {"v": 1})]
    assert store.list_namespaces() == [("keep",)]


def test_a_closed_store_refuses_every_op():
    store = PoolStore.open()
    store.close()
    store.close()  # idempotent
    for call in (lambda: store.get(("keep",), "k"), lambda: store.put(("a",), "k", {}),
                 lambda: store.search(()), lambda: store.list_namespaces()):
        with pytest.raises(StoreClosedError, match="closed"):
            call()


def test_bad_locations_and_configs_are_refused(tmp_path, pool):
    with pytest.raises(StoreError, match="langgraph-store-qdrant"):
        PoolStore.open("http://localhost:6333")
    with pytest.raises(StoreError, match="unknown store engine"):
        PoolStore.open(tmp_path / "e", engine="sqlite")
    for inside in (pool.location, f"{pool.location}/store"):
        with pytest.raises(StoreError, match="directory of its own"):
            PoolStore.open(inside, pool=pool)
    with pytest.raises(StoreError, match="directory of its own"):  # a pool the store opens is closed again
        PoolStore.open(tmp_path / "p2" / "s", pool=tmp_path / "p2")
    from mtl_graph.memory.pool.pool import MemoryPool

    assert str((tmp_path / "p2").resolve()) not in MemoryPool._open_pools
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a directory"):
        PoolStore.open(tmp_path / "file")
    with PoolStore.open(tmp_path / "s", index={"fields": ["text"]}):
        with pytest.raises(PoolLockedError, match="in use"):
            PoolStore.open(tmp_path / "s", index={"fields": ["text"]})
    with pytest.raises(StoreError, match="created with index dims=384"):
        PoolStore.open(tmp_path / "s")
    with pytest.raises(StoreError, match="returned a vector of size 2"):
        with PoolStore.open(index={"dims": 3, "embed": lambda texts: [[1.0, 0.0] for _ in texts]}) as bad:
            bad.put(("a",), "k", {"text": "x"})
    meta = json.loads((tmp_path / "s" / "store.json").read_text())
    (tmp_path / "s" / "store.json").unlink()
    with pytest.raises(StoreError, match="engine data but no store.json"):
        PoolStore.open(tmp_path / "s", index={"fields": ["text"]})
    (tmp_path / "s" / "store.json").write_text(json.dumps(meta))
    with PoolStore.open(tmp_path / "s", index={"fields": ["text"]}) as again:
        assert again.list_namespaces() == []


def test_the_store_filters_on_fields_the_engines_index():
    from mtl_graph.memory.engine.storage import INDEXED_FIELDS
    from mtl_graph.memory.store.items import KIND, PREFIXES

    assert {KIND, PREFIXES} <= set(INDEXED_FIELDS)  # else Qdrant Edge scans every payload per search


def test_searches_run_on_edges_background_index_after_a_build(tmp_path):
    with PoolStore.open(tmp_path / "s", engine="edge", index={"fields": ["text"]}) as store:
        for i in range(30):
            store.put(("a", str(i % 3)), f"k{i}", {"text": f"note {i} about {['tea', 'rust', 'hiking'][i % 3]}"})
        store._table.store.optimize(wait=True)  # what a long enough unindexed tail starts by itself
        assert store._table.store.builds == 1
        store.put(("a", "1"), "new", {"text": "the rust borrow checker"})  # a write after the swap
        assert [h.key for h in store.search(("a",), query="borrow checker", limit=1)] == ["new"]
        tea = {h.key for h in store.search(("a", "0"), query="drinking tea", limit=3)}
        assert len(tea) == 3 and tea <= {f"k{i}" for i in range(0, 30, 3)}
    with PoolStore.open(tmp_path / "s", engine="edge", index={"fields": ["text"]}) as store:
        assert len(store.search((), limit=100)) == 31


def test_texts_left_by_an_interrupted_overwrite_are_removed_on_open(tmp_path):
    from mtl_graph.memory.engine.storage import StoredPoint
    from mtl_graph.memory.store.items import KIND, PREFIXES, prefix_keys

    with PoolStore.open(tmp_path / "s", index={"fields": ["text"]}) as store:
        store.put(("a",), "tea", {"text": "green tea"})
        store.put(("a",), "rust", {"text": "rust code"})
        vector = store.embeddings.embed_query("green tea")
        # what a process killed between an overwrite's upsert and its delete of the old text leaves behind
        store._table.store.upsert([StoredPoint(f"00000000-0000-4000-8000-00000000000{i}", vector, ([], []),
                                               {KIND: "vector", PREFIXES: prefix_keys(("a",))}) for i in range(3)])
    with PoolStore.open(tmp_path / "s", index={"fields": ["text"]}) as store:
        assert store._table.store.count() == 4  # two items, two texts
        assert [h.key for h in store.search(("a",), query="green tea", limit=2)] == ["tea", "rust"]


@pytest.mark.parametrize("passing", ["far", "near"])
def test_a_filtered_query_finds_the_best_passing_items_whatever_their_rank(passing):
    """Half the items pass the filter: the store first asks the engine for the namespace's top texts; when the
    passing ones rank below those it asks again by id. Either way the answer is InMemoryStore's."""
    import math

    def embed(texts):  # "near i" points near the query, "far i" away from it; i spreads them apart
        return [[math.cos(a), math.sin(a)] for a in
                ((0.1 if t.startswith("near") else 1.2) + int(t.split()[1]) / 100 for t in texts)]

    index = {"dims": 2, "embed": embed, "fields": ["text"]}
    reference = InMemoryStore(index=index)
    with PoolStore.open(index=index) as store:
        for i in range(8):
            kind = "near" if i % 2 else "far"
            for s in (store, reference):
                s.put(("p", str(i % 3)), f"k{i}", {"text": f"{kind} {i}", "pass": kind == passing})
        for limit in (1, 2, 4):
            got = store.search(("p",), query="near 0", filter={"pass": True}, limit=limit)
            want = reference.search(("p",), query="near 0", filter={"pass": True}, limit=limit)
            assert [h.key for h in got] == [h.key for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)
