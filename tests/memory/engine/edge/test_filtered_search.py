"""A filtered search through Edge's index: every field a filter names has a payload index (in a new shard and in
one the background worker built), each kind of filter returns the same top 3 as an exact numpy scan, and the
search settings are validated."""

import uuid
from collections.abc import Iterator
from dataclasses import fields, replace

import numpy as np
import pytest

from mtl_graph.memory.engine.edge.edge_store import EdgeStore
from mtl_graph.memory.engine.edge.indexing import EdgeIndexConfig
from mtl_graph.memory.engine.storage import DEFAULT_NAMESPACE, NAMESPACE_KEY, Conditions, QuerySpec, StoredPoint
from mtl_graph.memory.pool.filter import SearchFilter

DIM = 48
RECALL = 0.99
"""Recall@3 the HNSW walk must reach over every filter and query of assert_exact_top3 (the pool's own target is
0.98 at 100k)."""
N = 1_500
TYPES, OUTCOMES, DOMAINS = ("insight", "workflow", "summary"), ("success", "failure", "unknown"), list("abcdef")
STATUSES = ("active", "archived", "quarantined", "superseded")
HNSW = EdgeIndexConfig(full_scan_threshold_kb=40, rebuild_min_points=100, exact_below=0)
"""Below 40 KB of matching vectors (~200 of these points) a segment is scanned exactly, as a 100k pool scans a
filter matching under ~1,000 memories: the broad filters here go through the HNSW graph, the narrow ones (one
outcome in a small namespace) are scanned. exact_below 0: a shard this small would otherwise be scanned whole."""
WEAK = EdgeIndexConfig(hnsw_m=4, ef_construct=8, hnsw_ef=4, full_scan_threshold_kb=0, rebuild_min_points=100)
"""A graph and a beam too small to find the exact top 10 under these filters: whatever the walk answers, it misses."""


def every_filter_field() -> set[str]:
    """The payload fields any SearchFilter can name, found by setting every field of one (plus the namespace)."""
    full = SearchFilter(type="insight", outcome="success", domain="a", exclude_domains=("b",),
                        exclude_task_ids=("t1",), only_ids=("x",), include_flagged=False, include_quarantined=False,
                        include_superseded=False)
    assert {f.name for f in fields(SearchFilter)} <= {"type", "outcome", "domain", "exclude_domains",
                                                      "exclude_task_ids", "only_ids", "include_flagged",
                                                      "include_quarantined", "include_superseded",
                                                      "statuses_complete"}
    named = set()
    for where in (full.conditions(), replace(full, statuses_complete=True).conditions()):  # status: != or ==
        named |= set(where.equals) | {k for k, v in where.excludes.items() if v}
    return named | {NAMESPACE_KEY}


def corpus(seed: int = 5) -> tuple[list[StoredPoint], np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, DIM)).astype(np.float32)  # clustered, as embeddings of a few topics are
    vectors = centres[rng.integers(0, 12, N)] + 0.6 * rng.standard_normal((N, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for i, v in enumerate(vectors):
        payload = {"type": TYPES[i % 3], "outcome": OUTCOMES[(i // 3) % 3],
                   "domains": sorted({DOMAINS[i % 6], DOMAINS[(i * 7) % 6]}),
                   "source_task_ids": [f"t{i % 40}"], "flagged": "true" if i % 11 == 0 else "false",
                   "status": STATUSES[0] if i % 5 else STATUSES[(i // 5) % 4]}
        if i % 13 == 0:
            payload[NAMESPACE_KEY] = "team"
        elif i % 17 == 0:
            payload[NAMESPACE_KEY] = DEFAULT_NAMESPACE
        out.append(StoredPoint(str(uuid.UUID(int=i + 1)), v.tolist(), ([i % 97], [1.0]), payload))
    return out, vectors


def matches(point: StoredPoint, where: Conditions) -> bool:
    """The filter's meaning, written out in Python: what the engine must agree with."""
    p = point.payload

    def values(key: str) -> set[str]:
        v = p.get(key)
        return set(v) if isinstance(v, list) else set() if v is None else {v}

    if any(value not in values(key) for key, value in where.equals.items()):
        return False
    if any(values(key) & set(banned) for key, banned in where.excludes.items()):
        return False
    if where.only_ids is not None and point.id not in where.only_ids:
        return False
    if where.namespace is not None:
        return p.get(NAMESPACE_KEY, DEFAULT_NAMESPACE) == where.namespace
    return True


def filters(points: list[StoredPoint]) -> list[Conditions]:
    """One filter of each kind SearchFilter makes, each alone, then the retrieve node's (type + a domain held
    out), in each namespace."""
    kinds = [SearchFilter(), SearchFilter(type="workflow"), SearchFilter(outcome="failure"), SearchFilter(domain="c"),
             SearchFilter(exclude_domains=("a", "d")), SearchFilter(exclude_task_ids=("t3", "t4", "t5")),
             SearchFilter(only_ids=tuple(p.id for p in points[::4])), SearchFilter(include_flagged=True),
             SearchFilter(include_quarantined=False), SearchFilter(include_superseded=False),
             SearchFilter(type="insight", exclude_domains=("b",)).served()]
    out = []
    for kind in kinds:
        for namespace in (None, DEFAULT_NAMESPACE, "team"):
            where = kind.conditions()
            where.namespace = namespace
            out.append(where)
    return out


def answers(store: EdgeStore, points: list[StoredPoint], vectors: np.ndarray, k: int, seed: int,
            hnsw_ef: int | None = None) -> Iterator[tuple[Conditions, list[str], list[str]]]:
    """(filter, the store's top k, numpy's exact top k) for every filter of `filters` and 8 queries near the
    points; every hit is checked against its filter on the way (a filter is never approximate)."""
    rng = np.random.default_rng(seed)
    queries = vectors[rng.integers(0, len(vectors), 8)] + 0.3 * rng.standard_normal((8, DIM)).astype(np.float32)
    by_id = {p.id: p for p in points}
    for where in filters(points):
        allowed = np.array([matches(p, where) for p in points])
        assert allowed.any(), where
        for q in queries:
            scores = vectors @ (q / np.linalg.norm(q))
            scores[~allowed] = -np.inf
            expected = [points[j].id for j in np.argsort(-scores)[:k] if scores[j] > -np.inf]
            [hits] = store.query([QuerySpec(limit=k, where=where, dense=q.tolist(), with_payload=False,
                                            hnsw_ef=hnsw_ef)])
            got = [h.id for h in hits]
            assert all(matches(by_id[i], where) for i in got), where
            yield where, got, expected


def assert_exact_top3(store: EdgeStore, points: list[StoredPoint], vectors: np.ndarray, *,
                      indexed: bool = False) -> None:
    """Every hit passes its filter, in every case. Unindexed (an exact scan): the hits are numpy's exact top 3.
    Through the HNSW graph the walk is approximate and the worker's build is not deterministic, so there the
    exact top 3 are found at a recall@3 of at least RECALL over all filters and queries (measured: one id missed in
    about 3,000 in one build of seven, none in the others)."""
    found = wanted = 0
    for where, got, expected in answers(store, points, vectors, 3, seed=9):
        assert len(got) == len(expected), where
        if not indexed:
            assert got == expected, where
        found, wanted = found + len(set(got) & set(expected)), wanted + len(expected)
    assert found >= RECALL * wanted, f"recall@3 {found / wanted:.4f} through the index"


def test_every_filtered_field_has_a_payload_index_in_a_new_shard_and_in_a_worker_built_one(tmp_path):
    wanted = every_filter_field()
    assert {"type", "outcome", "domains", "source_task_ids", "flagged", "status", NAMESPACE_KEY} <= wanted
    store = EdgeStore(str(tmp_path / "edge"), DIM, HNSW)
    try:
        assert wanted <= set(store.shard.info().payload_schema)
        store.upsert(corpus()[0])
        store.optimize(wait=True)
        assert store.builds == 1 and store.indexed == N
        assert wanted <= set(store.shard.info().payload_schema)
    finally:
        store.close()
    reopened = EdgeStore(str(tmp_path / "edge"), DIM, HNSW)
    try:
        assert wanted <= set(reopened.shard.info().payload_schema)
    finally:
        reopened.close()


@pytest.mark.parametrize("quantization", ["int8", "none"])
def test_each_kind_of_filter_is_exact_scanned_and_recalls_the_top3_through_the_index(tmp_path, quantization):
    points, vectors = corpus()
    store = EdgeStore(str(tmp_path / "edge"), DIM, HNSW.model_copy(update={"quantization": quantization}))
    try:
        store.upsert(points)
        assert_exact_top3(store, points, vectors)  # unindexed: an exact scan
        store.optimize(wait=True)
        assert store.indexed == N
        assert_exact_top3(store, points, vectors, indexed=True)  # the worker's HNSW segment (int8 walk, rescored)
    finally:
        store.close()


def test_a_shard_built_without_quantisation_opens_and_searches_with_it(tmp_path):
    points, vectors = corpus()
    store = EdgeStore(str(tmp_path / "edge"), DIM, HNSW.model_copy(update={"quantization": "none"}))
    store.upsert(points)
    store.optimize(wait=True)
    store.close()
    store = EdgeStore(str(tmp_path / "edge"), DIM, HNSW.model_copy(update={"quantization": "int8"}))
    try:
        assert store.count() == N
        assert_exact_top3(store, points, vectors, indexed=True)
    finally:
        store.close()


@pytest.mark.parametrize("bad, field", [
    ({"hnsw_ef": 0}, "hnsw_ef"), ({"hnsw_ef": "wide"}, "hnsw_ef"), ({"hnsw_ef": 100_000}, "hnsw_ef"),
    ({"quantization": "int4"}, "quantization"), ({"quantization": None}, "quantization"),
    ({"oversampling": 0.5}, "oversampling"), ({"hnsw_m": 2}, "hnsw_m"), ({"ef_construct": 1}, "ef_construct"),
    ({"hnsw_eff": 64}, "hnsw_eff"),
])
def test_bad_search_settings_are_refused_with_the_field_named(bad, field):
    with pytest.raises(ValueError, match=field):
        EdgeIndexConfig(**bad)


def recall_at_10(store: EdgeStore, points: list[StoredPoint], vectors: np.ndarray, hnsw_ef: int | None = None) -> float:
    """Recall@10 against numpy's exact scan over every filter and query of `answers`; where the store scans
    exactly, numpy's order too."""
    found = wanted = 0
    for where, got, expected in answers(store, points, vectors, 10, seed=11, hnsw_ef=hnsw_ef):
        if hnsw_ef is None and store.indexing.exact_below >= store.count():
            assert got == expected, where
        found, wanted = found + len(set(got) & set(expected)), wanted + len(expected)
    return found / wanted


@pytest.fixture
def weak(tmp_path):
    points, vectors = corpus()
    store = EdgeStore(str(tmp_path / "edge"), DIM, WEAK)
    store.upsert(points)
    store.optimize(wait=True)  # one indexed segment, built by the worker
    assert store.indexed == N
    yield store, points, vectors
    store.close()


@pytest.mark.parametrize("exact_below, scanned", [(N, True), (10 * N, True), (N - 1, False), (0, False)])
def test_a_shard_of_at_most_exact_below_points_answers_exactly_for_every_filter_after_its_index_is_built(
        weak, exact_below, scanned):
    store, points, vectors = weak
    store.indexing = WEAK.model_copy(update={"exact_below": exact_below})
    recall = recall_at_10(store, points, vectors)
    if scanned:
        assert recall == 1.0
    else:  # the control: the same shard through its walk misses, so the exact answers above are the scan's
        assert recall < 0.95, recall


def test_a_small_quantised_shard_is_scanned_with_its_float_vectors(tmp_path):
    """int8 copies rank near-ties in another order: the exact scan reads the float vectors, numpy's order."""
    points, vectors = corpus()
    store = EdgeStore(str(tmp_path / "edge"), DIM, WEAK.model_copy(update={"quantization": "int8", "exact_below": N}))
    try:
        store.upsert(points)
        store.optimize(wait=True)
        assert store.indexed == N
        assert recall_at_10(store, points, vectors) == 1.0
    finally:
        store.close()


def test_a_query_naming_its_own_beam_walks_the_graph_even_in_a_small_shard(weak):
    store, points, vectors = weak
    store.indexing = WEAK.model_copy(update={"exact_below": 10 * N})
    assert recall_at_10(store, points, vectors) == 1.0
    assert recall_at_10(store, points, vectors, hnsw_ef=4) < 0.95


def test_the_shards_own_tally_decides_through_writes_and_deletes(weak):
    """The unindexed tail counts: a shard grown past exact_below walks; deletes bring it back to the exact scan."""
    store, points, vectors = weak
    store.indexing = WEAK.model_copy(update={"exact_below": N})
    more, _ = corpus(seed=6)
    extra = [StoredPoint(str(uuid.UUID(int=10**6 + i)), p.dense, p.sparse, p.payload) for i, p in enumerate(more[:20])]
    store.upsert(extra)
    assert store.count() == N + 20 and store.indexed == N
    grown = np.concatenate([vectors, np.array([p.dense for p in extra], dtype=np.float32)])
    assert recall_at_10(store, points + extra, grown) < 0.95
    store.delete([p.id for p in extra])
    assert store.count() == N
    assert recall_at_10(store, points, vectors) == 1.0


@pytest.mark.parametrize("bad", [-1, "many", 1.5])
def test_a_bad_exact_below_is_refused_with_the_field_named(bad):
    with pytest.raises(ValueError, match="exact_below"):
        EdgeIndexConfig(exact_below=bad)


def test_a_pool_indexed_over_several_builds_recalls_the_top3_for_every_filter(tmp_path):
    """Three builds, with deletes and status rewrites between them (a rewrite moves a point into or out of a
    filter): every filter finds the exact top 3 through the last build's graph, and only live points. (Before
    short walks were completed by an exact scan, 2 of 12 such pools gave short answers: 2 and 16 of 264.)"""
    points, vectors = corpus()
    store = EdgeStore(str(tmp_path / "edge"), DIM, HNSW)
    try:
        store.upsert(points[:900])
        store.optimize(wait=True)
        assert store.builds == 1 and store.indexed == 900
        gone = [p.id for p in points[:900:9]]
        store.delete(gone)
        rewritten = [p for p in points[1:900:7] if p.id not in set(gone)]
        for p in rewritten:
            status = STATUSES[(STATUSES.index(p.payload["status"]) + 1) % len(STATUSES)]
            store.set_payload(p.id, {"status": status})
            p.payload["status"] = status
        store.upsert(points[900:1200])
        store.optimize(wait=True)
        store.upsert(points[1200:])
        store.optimize(wait=True)
        assert store.builds == 3
        kept = [i for i, p in enumerate(points) if p.id not in set(gone)]
        assert store.indexed == store.count() == len(kept)
        assert_exact_top3(store, [points[i] for i in kept], vectors[kept], indexed=True)
    finally:
        store.close()


@pytest.mark.parametrize("k", [3, 10, 50])
def test_a_walk_that_comes_back_short_is_completed_by_an_exact_scan(weak, k):
    """The weak graph's filtered walk stops short for some filters (fewer hits than asked while more points match:
    the control, a query naming its own beam, which is left as walked). Every other dense query, plain or hybrid,
    gets min(k, matching points) hits, each passing its filter."""
    store, points, vectors = weak
    store.indexing = WEAK.model_copy(update={"exact_below": 0})  # the graph is walked, whatever the size
    walked = list(answers(store, points, vectors, k, seed=9, hnsw_ef=WEAK.hnsw_ef))
    assert sum(len(got) < len(expected) for _, got, expected in walked) >= 5
    by_id = {p.id: p for p in points}
    for where, got, expected in answers(store, points, vectors, k, seed=9):
        assert len(got) == len(expected), where
        matching = sum(matches(p, where) for p in points)
        query = vectors[int(got[0].split("-")[-1], 16) - 1].tolist() if got else vectors[0].tolist()
        [fused] = store.query([QuerySpec(limit=k, where=where, dense=query, sparse=([1, 2], [1.0, 0.5]),
                                         prefetch_limit=k)])
        assert len(fused) == min(k, matching), where
        assert all(matches(by_id[h.id], where) for h in fused), where
