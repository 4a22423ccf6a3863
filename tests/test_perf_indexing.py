"""Edge indexes a growing pool in bounded steps: every write stays readable and searchable across index builds."""

import threading
import uuid

import numpy as np
import pytest

from mtl_graph.memory.edge_indexing import EdgeIndexConfig
from mtl_graph.memory.storage import DENSE, Conditions, EdgeStore, QuerySpec, StoredPoint

DIM = 384
# Tiny thresholds so a few hundred points cross them many times: ~130 points start an index build,
# no segment grows past ~650 points.
SMALL = EdgeIndexConfig(indexing_threshold_kb=200, max_segment_size_kb=1000, default_segment_number=2)


def points(n: int, seed: int) -> list[StoredPoint]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [StoredPoint(str(uuid.UUID(int=rng.integers(1, 2**62).item() + i)), v.tolist(),
                        ([i % 50], [1.0]), {"type": ["insight", "workflow"][i % 2], "n": i})
            for i, v in enumerate(vectors)]


def write(store: EdgeStore, batch: list[StoredPoint], size: int) -> None:
    for start in range(0, len(batch), size):
        store.upsert(batch[start:start + size])
        store.optimize()  # what MemoryPool.add_many does after every write


def assert_all_there(store: EdgeStore, written: list[StoredPoint]) -> None:
    ids = [p.id for p in written]
    assert store.count() == len(set(ids))
    assert {h.id for h in store.retrieve(ids)} == set(ids)
    for p in written[:: max(1, len(written) // 40)]:  # each finds itself first, filtered and not
        where = Conditions(equals={"type": p.payload["type"]})
        [hits] = store.query([QuerySpec(limit=1, where=where, dense=p.dense)])
        assert hits[0].id == p.id


@pytest.fixture
def store(tmp_path):
    s = EdgeStore(str(tmp_path / "edge"), DIM, SMALL)
    yield s
    s.close()


def test_writes_across_many_index_builds_are_all_readable_and_searchable(store):
    batch = points(900, seed=1)
    write(store, batch, 50)
    info = store.shard.info()
    assert info.indexed_vectors_count > 0  # HNSW was built along the way, no explicit optimize needed
    assert info.segments_count >= 3  # the size cap split the pool instead of one ever larger segment
    assert_all_there(store, batch)


def test_concurrent_writers_and_readers_lose_nothing(store):
    batches = [points(250, seed=10 + t) for t in range(3)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(batch):
        try:
            write(store, batch, 20)
        except BaseException as exc:  # surfaced below: a thread's exception would otherwise vanish
            errors.append(exc)

    def reader():
        probe = batches[0][0].dense
        while not stop.is_set():
            try:
                store.query([QuerySpec(limit=3, where=Conditions(), dense=probe, sparse=([1], [1.0]))])
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(b,)) for b in batches]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    watcher.join(30)
    assert errors == []
    assert_all_there(store, [p for b in batches for p in b])


def test_a_shard_made_without_optimizer_settings_gets_them_and_keeps_its_points(tmp_path):
    import qdrant_edge as q

    path = str(tmp_path / "old")
    old = q.EdgeShard.create(path, q.EdgeConfig(vectors={DENSE: q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine)},
                                                 sparse_vectors={"bm25": q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)}))
    first = points(300, seed=3)
    old.update(q.UpdateOperation.upsert_points([
        q.Point(p.id, {DENSE: p.dense, "bm25": q.SparseVector(*p.sparse)}, p.payload) for p in first]))
    old.flush()
    old.close()
    store = EdgeStore(path, DIM, SMALL)
    try:
        more = points(500, seed=4)
        write(store, more, 100)
        assert store.shard.info().segments_count >= 2
        assert_all_there(store, first + more)
    finally:
        store.close()


def test_bad_index_settings_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="max_segment_size_kb"):
        EdgeIndexConfig(max_segment_size_kb=10)
