"""Reading a selection of payload fields: every engine and every store wrapper returns the fields asked for and
nothing else, and the lifecycle's search (which reads its candidates' re-rank fields, whole payloads of the kept k
only) finds exactly what it finds reading whole payloads: same hits, order, scores, trace."""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.engine.storage import NAMESPACE_KEY, Conditions, QuerySpec, RawHit, payload_fields
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.lifecycle import ops
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.field_cache import FieldCache
from mtl_graph.memory.pool.points import payload_of
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.usage import CREDIT_KEY, Use

from helpers.memory_fixtures import CODING_ADVICE

SERVER = os.environ.get("QDRANT_URL")
SELECTED = ("type", "memory.stats", CREDIT_KEY)

ADVICE = [*CODING_ADVICE[:9], *CODING_ADVICE[13:15],
          ("Fix the useEffect dependency list", "A stale closure in useEffect reads old state: list every dependency."),
          ("Check ENOSPC before retrying writes", "A full disk (ENOSPC) fails every retry: free space or fail fast."),
          ("Read parse.go before changing the lexer", "The lexer and parser in parse.go share token constants.")]
QUERIES = ["how do I make sure my fix does not break the tests", "the program crashes on an empty list",
           "useEffect keeps reading an old value", "write fails with ENOSPC on the build machine",
           "change the token handling in parse.go", "make the build reproducible", "a date is off by an hour"]
DOMAINS = ["swe", "web", "ml", "ops"]


def location(engine: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if engine == "server":
        if not SERVER:
            pytest.skip("no Qdrant server: set QDRANT_URL (docker compose up -d; make test-server)")
        return SERVER, {}
    return str(tmp_path / "pool"), {"engine": engine}


def innermost(store: Any) -> Any:
    """The engine's own store under the pool's wrappers (counted, namespaced, guarded)."""
    while hasattr(store, "inner"):
        store = store.inner
    return store


def memory(rng: random.Random, n: int) -> InsightMemory:
    title, description = ADVICE[n % len(ADVICE)]
    variant = f" (variant {n})" if n >= len(ADVICE) else ""
    return InsightMemory(title=title + variant, description=description, content=description + variant,
                         sources=[Provenance(domain=rng.choice(DOMAINS), source_task_id=f"task-{n}")])


def selected_of(payload: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """What a selection of `payload` must be: the keys asked for, a dotted key keeping that field of its object."""
    out: dict[str, Any] = {}
    for key in fields:
        head, _, rest = key.partition(".")
        if head not in payload:
            continue
        if rest:
            out.setdefault(head, {})[rest] = payload[head][rest]
        else:
            out[head] = payload[head]
    return out


# ------------------------------------------------------------------ every backend honours the selection
@pytest.mark.parametrize("engine", ["edge", "client", "server"])
@pytest.mark.parametrize("namespace", ["default", "team-a"])
def test_every_read_returns_the_selected_fields_alone(engine, namespace, embeddings, tmp_path):
    where, kw = location(engine, tmp_path)
    rng = random.Random(7)
    with MemoryPool.open(where, embeddings, namespace=namespace, **kw) as pool:
        memories = [memory(rng, n) for n in range(6)]
        pool.add_many(memories)
        pool.credit("run-1", [Use(memories[0].id, True), Use(memories[1].id, False)], "success", "tests")
        ids = [m.id for m in memories]
        whole = {h.id: h.payload for h in pool.store.fetch(ids)}
        assert set(whole) == set(ids) and all("memory" in p and "dedup_key" in p for p in whole.values())
        expected = {i: selected_of(p, SELECTED) for i, p in whole.items()}
        assert expected[memories[0].id][CREDIT_KEY] and "content" in whole[ids[0]]["memory"]

        stores = {"pool": pool.store, "engine": innermost(pool.store)}
        for name, store in stores.items():
            # the engine's own store sees namespaced point ids and the namespace's key (which the pool's strip)
            point_ids = ids if name == "pool" else [pool.store._point(i) for i in ids]
            back = dict(zip(point_ids, ids))
            strip = (lambda p: {k: v for k, v in p.items() if k != NAMESPACE_KEY}) if name == "engine" else dict
            fetched = {back[h.id]: strip(h.payload) for h in store.fetch(point_ids, fields=SELECTED)}
            assert fetched == expected, name
            where_ns = pool.store.scoped(None) if name == "engine" else None
            scrolled = {back[h.id]: strip(h.payload) for h in store.scroll(2, where_ns, SELECTED)}
            assert scrolled == expected, name
            spec = QuerySpec(limit=10, where=where_ns or Conditions(), dense=pool.query_vector(QUERIES[0]),
                             payload_fields=SELECTED)
            queried = {back[h.id]: strip(h.payload) for h in store.query([spec])[0]}
            assert queried == expected, name
            # a selection of one field inside an object: the memory's counts without its text
            [hit] = store.fetch(point_ids[:1], fields=("memory.stats",))
            assert strip(hit.payload) == {"memory": {"stats": whole[ids[0]]["memory"]["stats"]}}, name
        # whole payloads still come whole, and vectors alone carry none
        assert {h.id: h.payload for h in pool.store.fetch(ids, fields=None)} == whole
        assert all(not h.payload and h.dense for h in pool.store.fetch(ids, with_dense=True))


def test_a_selection_in_one_namespace_never_returns_another_namespaces_point(embeddings, tmp_path):
    """A selection reads the namespace's key too: a memory id that maps onto another namespace's point (the ids are
    XOR-masked) is not returned, with or without a selection, and the key never reaches the caller."""
    rng = random.Random(3)
    path = tmp_path / "pool"
    with MemoryPool.open(path, embeddings) as default, \
            MemoryPool.open(path, embeddings, namespace="team-a") as team:
        theirs, own = memory(rng, 0), memory(rng, 1)
        default.add(theirs)
        team.add(own)
        mask = team.store._mask
        onto_default = str(uuid.UUID(int=uuid.UUID(theirs.id).int ^ mask))  # team-a's id of the default's point
        onto_team = team.store._point(own.id)  # the default namespace's id of team-a's point (its mask is 0)
        assert team.store._point(onto_default) == theirs.id
        for store, other in [(team.store, onto_default), (default.store, onto_team)]:
            assert store.fetch([other], fields=("type",)) == []
            assert store.fetch([other], fields=("memory.stats",)) == []
            assert store.fetch([other]) == []
        [hit] = team.store.fetch([own.id], fields=("type",))
        assert hit.id == own.id and hit.payload == {"type": "insight"}
        [hit] = default.store.fetch([theirs.id], fields=("type",))
        assert hit.id == theirs.id and hit.payload == {"type": "insight"}


@pytest.mark.parametrize("bad", ["type", b"type", (), [], [""], ["memory..stats"], [".type"], ["type."], [3],
                                 [None], {"type": 1}, 7])
def test_a_selection_that_names_no_keys_is_one_clear_error(bad, pool):
    with pytest.raises(ValueError, match="payload field"):
        payload_fields(bad)
    with pytest.raises(ValueError, match="payload field"):
        pool.store.fetch(["00000000-0000-0000-0000-000000000001"], fields=bad)


# ------------------------------------------------------------------ the lifecycle reads the same with a selection
def generated_pool(pool: MemoryPool, seed: int) -> list[str]:
    """A pool of generated memories with credit records (cited and not, both outcomes), some stale, quarantined
    or superseded; returns the memory ids."""
    rng = random.Random(seed)
    memories = [memory(rng, n) for n in range(rng.randint(24, 40))]
    pool.add_many(memories)
    stored = sorted(m.id for m in pool)
    for run in range(rng.randint(10, 30)):
        shown = rng.sample(stored, rng.randint(1, 4))
        pool.credit(f"run-{seed}-{run}", [Use(i, rng.random() < 0.5) for i in shown],
                    rng.choice(["success", "failure"]), "tests")
    for i in rng.sample(stored, 6):
        current = pool.get(i)
        change = rng.choice([{"stale": ["files changed: parse.go"]}, {"quarantined": ["harmful: generated"]},
                             {"superseded_by": rng.choice(stored)}, {"stale": ["a.py"], "quarantined": []}])
        pool.store.set_payload(i, payload_of(current.model_copy(update=change)))
    return stored


def outcome(retrieval: Any) -> tuple:
    return ([(h.memory.model_dump(mode="json"), h.score, h.similarity, h.retriever) for h in retrieval.hits],
            retrieval.trace())


def write_something(pool: MemoryPool, rng: random.Random, step: int) -> None:
    """One write of the kinds a live pool sees between searches: credit, a stale mark, quarantine, a release, a
    delete, a new memory."""
    stored = sorted(m.id for m in pool)
    kind = rng.choice(["credit", "credit", "stale", "quarantine", "release", "delete", "add"])
    if kind == "credit":
        shown = rng.sample(stored, min(len(stored), rng.randint(1, 4)))
        pool.credit(f"live-{step}", [Use(i, rng.random() < 0.5) for i in shown], rng.choice(["success", "failure"]),
                    "tests")
    elif kind == "add":
        pool.add(memory(rng, 1000 + step))
    elif kind == "delete":
        pool.delete(rng.choice(stored))
    else:
        current = pool.get(rng.choice(stored))
        change = {"stale": {"stale": ["files changed: x.py"]}, "quarantine": {"quarantined": ["harmful: generated"]},
                  "release": {"quarantined": [], "stale": []}}[kind]
        pool.store.set_payload(current.id, payload_of(current.model_copy(update=change)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_lifecycle_finds_the_same_with_and_without_the_selection(seed, embeddings, tmp_path, monkeypatch):
    """Searches interleaved with writes: the candidates' fields kept between searches must follow every write."""
    rng = random.Random(seed)
    with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
        generated_pool(pool, seed)
        assert pool.store.cache is not None
        whole_reads: list[int] = []  # how many points each read of whole payloads asked for
        fetch, engine_query = pool.store.fetch, pool.store.query

        def fetching(ids, with_dense=False, fields=None):
            if fields is None and not with_dense:
                whole_reads.append(len(ids))
            return fetch(ids, with_dense, fields)

        def querying(requests):
            whole_reads.extend(r.limit for r in requests if r.with_payload and r.payload_fields is None)
            return engine_query(requests)

        monkeypatch.setattr(pool.store, "fetch", fetching)
        monkeypatch.setattr(pool.store, "query", querying)
        cases = [(q, k, candidates, floor, rng.choice(["hybrid", "dense"]))
                 for q in QUERIES for k, candidates in [(1, 20), (3, 20), (5, 8), (25, 20), (3, 3)]
                 for floor in [None, rng.uniform(-0.2, 0.4)]]
        rng.shuffle(cases)
        for step, (query, k, candidates, floor, retriever) in enumerate(cases):
            cfg = LifecycleConfig(candidates=candidates, relevance_floor=floor)
            whole_reads.clear()
            selected = pool.retrieve(query, k=k, lifecycle=cfg, retriever=retriever)
            assert max(whole_reads, default=0) <= k  # whole payloads of the kept k alone
            with monkeypatch.context() as whole_payloads:
                whole_payloads.setattr(ops, "RERANK_FIELDS", None)
                reference = pool.retrieve(query, k=k, lifecycle=cfg, retriever=retriever)
            assert outcome(selected) == outcome(reference), (step, query, k, candidates, floor, retriever)
            assert len(selected.hits) == min(k, sum(c.injected for c in selected.candidates))
            if rng.random() < 0.5:
                write_something(pool, rng, step)


def test_a_repeated_search_reads_no_candidate_again_and_a_write_is_read_at_once(embeddings, tmp_path):
    with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
        generated_pool(pool, 9)
        cfg, cache = LifecycleConfig(relevance_floor=-1.0), pool.store.cache
        first = pool.retrieve(QUERIES[0], k=3, lifecycle=cfg)
        misses = cache.misses
        assert misses == len(first.candidates) == 20
        assert outcome(pool.retrieve(QUERIES[0], k=3, lifecycle=cfg)) == outcome(first)
        assert cache.misses == misses
        # the last candidate cited in 12 successful runs: the next search reads its new record (and only it)
        last = first.candidates[-1]
        for run in range(12):
            pool.credit(f"proof-{run}", [Use(last.id, True)], "success", "tests")
        after = pool.retrieve(QUERIES[0], k=3, lifecycle=cfg)
        assert cache.misses == misses + 1
        [now] = [c for c in after.candidates if c.id == last.id]
        assert now.evidence >= last.evidence + 12 and now.utility > last.utility
        pool.contents_changed()
        pool.retrieve(QUERIES[0], k=3, lifecycle=cfg)
        assert cache.misses == misses + 1 + 20


def test_a_server_pool_keeps_no_fields_between_searches(embeddings):
    if not SERVER:
        pytest.skip("no Qdrant server: set QDRANT_URL (docker compose up -d; make test-server)")
    with MemoryPool.open(SERVER, embeddings, namespace=f"fields-{uuid.uuid4().hex[:8]}") as pool:
        assert pool.store.cache is None  # other processes write it


def test_the_lifecycle_search_with_the_selection_on_the_client_engine(embeddings, tmp_path, monkeypatch):
    with MemoryPool.open(tmp_path / "pool", embeddings, engine="client") as pool:
        generated_pool(pool, 11)
        cfg = LifecycleConfig()
        for query in QUERIES:
            selected = pool.retrieve(query, k=3, lifecycle=cfg)
            with monkeypatch.context() as whole_payloads:
                whole_payloads.setattr(ops, "RERANK_FIELDS", None)
                assert outcome(selected) == outcome(pool.retrieve(query, k=3, lifecycle=cfg))


def test_a_kept_memory_deleted_during_the_search_is_not_injected(embeddings, tmp_path, monkeypatch):
    with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
        generated_pool(pool, 5)
        cfg = LifecycleConfig(relevance_floor=-1.0)
        before = pool.retrieve(QUERIES[0], k=3, lifecycle=cfg)
        gone = before.hits[0].memory.id
        fetch = pool.store.fetch

        def deleting_before_the_whole_read(ids, with_dense=False, fields=None):
            if fields is None and gone in ids:  # the whole read of the kept k comes after the re-rank
                pool.store.delete([gone])
            return fetch(ids, with_dense, fields)

        monkeypatch.setattr(pool.store, "fetch", deleting_before_the_whole_read)
        after = pool.retrieve(QUERIES[0], k=3, lifecycle=cfg)
        assert [h.memory.id for h in after.hits] == [h.memory.id for h in before.hits[1:]]
        [traced] = [c for c in after.trace()["candidates"] if c["id"] == gone]
        assert not traced["injected"] and traced["why_not"] == "deleted while it was retrieved"


# ------------------------------------------------------------------ the field cache's own rules
def engine_of(payloads: dict[str, dict[str, Any]], during: Any = None) -> Any:
    """A fetch over a dict of payloads (the cache's contract with its store), running `during` while it reads."""
    def fetch(ids, with_dense, fields):
        if during is not None:
            during(ids)
        return [RawHit(i, 0.0, {k: payloads[i][k] for k in fields if k in payloads[i]}) for i in ids if i in payloads]
    return fetch


def test_a_read_that_races_with_a_write_does_not_fill_the_cache():
    stored = {"a": {"type": "old"}, "b": {"type": "old"}}
    cache = FieldCache()
    racing = engine_of(stored, during=lambda ids: cache.forget(["a"]))  # a write lands while the read is in flight
    assert [h.payload for h in cache.read(["a", "b"], ("type",), racing)] == [{"type": "old"}] * 2
    stored["a"]["type"] = "new"
    assert [h.payload for h in cache.read(["a"], ("type",), engine_of(stored))] == [{"type": "new"}]
    assert cache.misses == 3  # nothing was kept from the racing read, "b" included


def test_the_cache_keeps_each_selection_apart_and_starts_again_past_its_limit():
    stored = {f"p{i}": {"type": f"t{i}", "status": "active"} for i in range(6)}
    cache = FieldCache(limit=5)
    ids = sorted(stored)
    assert [h.id for h in cache.read(ids[:4] + ["gone"], ("type",), engine_of(stored))] == ids[:4]
    assert [h.payload for h in cache.read(ids[:1], ("status",), engine_of(stored))] == [{"status": "active"}]
    assert cache.misses == 6
    cache.read(ids[:4], ("type",), engine_of(stored))
    assert cache.misses == 6  # kept
    cache.read(ids[4:], ("type",), engine_of(stored))  # past the limit: the cache starts again with these
    cache.read(ids[:1], ("type",), engine_of(stored))
    assert cache.misses == 9


@pytest.mark.parametrize("bad", ["type", [], [""], ["a..b"], None])
def test_a_cached_read_takes_a_valid_selection_only(bad):
    with pytest.raises(ValueError, match="payload field"):
        FieldCache().read(["a"], bad, engine_of({"a": {"type": "x"}}))
