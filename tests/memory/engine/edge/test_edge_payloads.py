"""Edge payloads are mapped on demand (Memory.Cold); pools written when they were loaded whole (Cached) still work."""

import json
import uuid

import numpy as np
import qdrant_edge as q

from mtl_graph.memory.engine.edge.edge_store import EdgeStore
from mtl_graph.memory.engine.storage import DENSE, INDEXED_FIELDS, SPARSE, Conditions, QuerySpec, StoredPoint

DIM = 384


def points(n: int, seed: int) -> list[StoredPoint]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [StoredPoint(str(uuid.UUID(int=int(rng.integers(1, 2**62)) + i)), v.tolist(), ([i % 40], [1.0]),
                        {"type": ["insight", "workflow"][i % 2], "text": f"memory {i} " * 20})
            for i, v in enumerate(vectors)]


def assert_readable(store: EdgeStore, written: list[StoredPoint]) -> None:
    by_id = {p.id: p for p in written}
    assert store.count() == len(by_id)
    assert {h.id: h.payload for h in store.fetch(list(by_id))} == {i: p.payload for i, p in by_id.items()}
    for p in written[::25]:
        [hits] = store.query([QuerySpec(limit=1, where=Conditions(equals={"type": p.payload["type"]}),
                                        dense=p.dense)])
        assert hits[0].id == p.id and hits[0].payload == p.payload


def test_a_new_pool_maps_its_payloads_and_reads_them_back_after_reopening(tmp_path):
    written = points(300, seed=1)
    store = EdgeStore(str(tmp_path), dim=DIM)
    store.upsert(written)
    store.close()
    assert json.loads((tmp_path / "edge_config.json").read_text())["payload_memory"] == "cold"
    reopened = EdgeStore(str(tmp_path), dim=DIM)
    try:
        assert_readable(reopened, written)
    finally:
        reopened.close()


def test_a_pool_written_with_payloads_loaded_whole_opens_reads_and_takes_writes(tmp_path):
    old = q.EdgeShard.create(str(tmp_path), q.EdgeConfig(
        vectors={DENSE: q.EdgeVectorParams(size=DIM, distance=q.Distance.Cosine)},
        sparse_vectors={SPARSE: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
        payload_memory=q.Memory.Cached))
    for name in INDEXED_FIELDS:
        old.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
    before = points(200, seed=2)
    old.update(q.UpdateOperation.upsert_points([
        q.Point(p.id, {DENSE: p.dense, SPARSE: q.SparseVector(*p.sparse)}, p.payload) for p in before]))
    old.flush()
    old.close()

    store = EdgeStore(str(tmp_path), dim=DIM)
    try:
        assert_readable(store, before)
        after = points(200, seed=3)
        store.upsert(after)
        store.optimize()
        assert_readable(store, before + after)
    finally:
        store.close()
    assert json.loads((tmp_path / "edge_config.json").read_text())["payload_memory"] == "cold"
