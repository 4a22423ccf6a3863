"""Edge's index is built in a worker process while the pool goes on: no write is lost or stale across builds,
swaps, failed builds, closes and kills, and a pool killed mid-swap opens complete."""

import os
import random
import signal
import subprocess
import sys
import threading
import uuid

import numpy as np
import pytest

from mtl_graph.memory.engine.edge.build_worker import INDEX_MARKER
from mtl_graph.memory.engine.edge.indexing import EdgeIndexConfig
from mtl_graph.memory.engine.edge.rebuild import generations, next_generation, point_link, recover_interrupted_swap, replaced_dir
from mtl_graph.memory.engine.edge.edge_store import EdgeStore, RebuildError
from mtl_graph.memory.engine.storage import DENSE, Conditions, QuerySpec, StoredPoint

DIM = 32
SMALL = EdgeIndexConfig(rebuild_min_points=120, rebuild_ratio=0.5)
"""A build once 120 points are unindexed (then half the indexed count): a few hundred writes cross it often."""


def points(n: int, seed: int, kind: str = "insight") -> list[StoredPoint]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [StoredPoint(str(uuid.UUID(int=seed * 1_000_000 + i + 1)), v.tolist(), ([i % 50, 60 + seed], [1.0, 0.5]),
                        {"type": [kind, "workflow"][i % 2], "n": i, "seed": seed})
            for i, v in enumerate(vectors)]


def write(store: EdgeStore, batch: list[StoredPoint], size: int) -> None:
    for start in range(0, len(batch), size):
        store.upsert(batch[start:start + size])
        store.optimize()  # what MemoryPool.add_many does after every write


def assert_holds(store: EdgeStore, expected: dict[str, StoredPoint]) -> None:
    """Exactly these points, each with its latest payload, each found first by its own vector (filtered too)."""
    assert store.count() == len(expected)
    got = {h.id: h.payload for h in store.fetch(list(expected))}
    assert got == {pid: p.payload for pid, p in expected.items()}
    for p in list(expected.values())[:: max(1, len(expected) // 40)]:
        [hits] = store.query([QuerySpec(limit=1, where=Conditions(equals={"type": p.payload["type"]}), dense=p.dense)])
        assert hits[0].id == p.id
        [fused] = store.query([QuerySpec(limit=5, where=Conditions(), dense=p.dense, sparse=p.sparse)])
        assert p.id in {h.id for h in fused}


def no_leftovers(store: EdgeStore) -> bool:
    """Nothing beside the live shard but the generation it links to."""
    linked = [store.path.resolve()] if store.path.is_symlink() else []
    return list(generations(store.path).values()) == linked and not replaced_dir(store.path).exists()


@pytest.fixture
def store(tmp_path):
    s = EdgeStore(str(tmp_path / "edge"), DIM, SMALL)
    yield s
    s.close()


def test_writes_across_background_builds_are_all_readable_and_searchable(store):
    batch = points(900, seed=1)
    write(store, batch, 30)
    store.optimize(wait=True)  # index everything, then nothing is left unindexed
    assert store.indexed == store.count() == 900
    assert (store.path / INDEX_MARKER).exists() and no_leftovers(store)
    assert store.shard.info().segments_count <= 2  # one indexed segment (and an empty appendable one)
    assert_holds(store, {p.id: p for p in batch})


def test_writes_made_during_a_build_reach_the_swapped_in_index(store):
    """Upserts, overwrites, payload changes and deletes taken while the worker builds are journaled and replayed
    in order: the new shard ends exactly like the old one."""
    base = points(600, seed=2)
    store.upsert(base)
    expected = {p.id: p for p in base}
    store.optimize()
    rebuild = store._rebuild
    assert rebuild is not None  # the tail passed rebuild_min_points
    more, rng = points(400, seed=3), random.Random(3)
    for i, p in enumerate(more):
        if rebuild.done.is_set():
            break
        store.upsert([p])
        expected[p.id] = p
        old = rng.choice(base)
        if i % 3 == 0 and old.id in expected:  # a new payload on a point the scroll may already have sent
            payload = {**old.payload, "n": -i}
            store.set_payload(old.id, payload)
            expected[old.id] = StoredPoint(old.id, old.dense, old.sparse, payload)
        if i % 4 == 1 and old.id in expected:
            store.delete([old.id])
            del expected[old.id]
        if i % 5 == 2:  # an overwrite of a point written during the build, then its payload again
            store.upsert([p])
            store.set_payload(p.id, {**p.payload, "n": 10_000 + i})
            expected[p.id] = StoredPoint(p.id, p.dense, p.sparse, {**p.payload, "n": 10_000 + i})
    journaled = len(rebuild.journal)
    rebuild.done.wait(120)
    assert rebuild.error is None and journaled > 20  # the writes really raced the build
    assert store.indexed > 0 and no_leftovers(store)
    assert_holds(store, expected)


def test_concurrent_writers_and_readers_lose_nothing_across_swaps(store):
    batches = [points(300, seed=10 + t) for t in range(3)]
    errors: list[BaseException] = []
    stop = threading.Event()
    reads = []

    def writer(batch):
        try:
            write(store, batch, 10)
        except BaseException as exc:  # surfaced below: a thread's exception would otherwise vanish
            errors.append(exc)

    def reader():
        probe = batches[0][0]
        while not stop.is_set():
            try:
                store.query([QuerySpec(limit=3, where=Conditions(), dense=probe.dense, sparse=probe.sparse)])
                reads.append(store.count())
            except BaseException as exc:
                errors.append(exc)
                return
            stop.wait(0.005)  # reads all along, without a spinning loop taking a core from the writers and builds

    threads = [threading.Thread(target=writer, args=(b,)) for b in batches]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    store.optimize(wait=True)
    stop.set()
    watcher.join(30)
    assert errors == [] and len(reads) >= 20  # the reads really raced the writes and swaps
    assert store.indexed == 900
    assert_holds(store, {p.id: p for b in batches for p in b})


def test_a_killed_worker_costs_the_build_not_a_write_and_the_next_build_succeeds(store):
    first = points(300, seed=4)
    store.upsert(first)
    store.optimize()
    rebuild = store._rebuild
    assert rebuild is not None and rebuild.spawned.wait(30)
    rebuild._proc.kill()  # the worker dies (OOM killer, a stray kill): the build fails, the pool goes on
    rebuild.done.wait(60)
    assert rebuild.error and "index worker" in rebuild.error
    assert store._rebuild is None and store.indexed == 0 and no_leftovers(store)
    more = points(50, seed=5)
    write(store, more, 10)  # below the back-off: no new build loops on a failing worker
    assert store._rebuild is None
    store.optimize(wait=True)  # an explicit build still runs
    assert store.indexed == 350
    assert_holds(store, {p.id: p for p in first + more})


def test_a_build_that_cannot_start_is_reported_by_an_explicit_optimize_and_loses_nothing(store):
    store.upsert(points(200, seed=6))
    blocker = next_generation(store.path)
    blocker.write_text("in the way")  # where the worker would build (a full disk fails the same way)
    with pytest.raises(RebuildError, match="exists"):
        store.optimize(wait=True)
    assert store.count() == 200 and store.indexed == 0 and store._rebuild is None
    blocker.unlink()
    store.optimize(wait=True)
    assert store.indexed == 200 and no_leftovers(store)


def test_closing_during_a_build_stops_the_worker_and_leaves_only_the_pool(tmp_path):
    store = EdgeStore(str(tmp_path / "edge"), DIM, SMALL)
    batch = points(2000, seed=7)
    store.upsert(batch)
    store.optimize()
    rebuild = store._rebuild
    assert rebuild is not None
    store.close()
    assert rebuild.done.is_set() and rebuild._proc.poll() is not None
    assert sorted(os.listdir(tmp_path)) == ["edge"]
    reopened = EdgeStore(str(tmp_path / "edge"), DIM, SMALL)
    try:
        assert_holds(reopened, {p.id: p for p in batch})
    finally:
        reopened.close()


def _shard(path, batch):
    """A closed shard at path holding batch."""
    store = EdgeStore(str(path), DIM, SMALL)
    store.upsert(batch)
    store.close()


def _opens_with(live, batch):
    store = EdgeStore(str(live), DIM, SMALL)
    try:
        assert_holds(store, {p.id: p for p in batch})
        assert no_leftovers(store)
    finally:
        store.close()


def test_a_swap_links_a_new_generation_and_removes_the_old_one(tmp_path):
    live = tmp_path / "edge"
    store = EdgeStore(str(live), DIM, SMALL)
    batch = points(300, seed=8)
    store.upsert(batch)
    store.optimize(wait=True)  # the first swap: the directory is replaced by a link to edge.g1
    assert live.is_symlink() and live.resolve().name == "edge.g1" and no_leftovers(store)
    more = points(200, seed=9)
    store.upsert(more)
    store.optimize(wait=True)
    assert live.resolve().name == "edge.g2" and no_leftovers(store) and store.builds == 2
    store.close()
    _opens_with(live, batch + more)


def test_a_kill_before_the_link_flips_opens_the_linked_generation(tmp_path):
    live, batch = tmp_path / "edge", points(300, seed=10)
    _shard(tmp_path / "edge.g1", batch)
    point_link(live, tmp_path / "edge.g1")
    _shard(tmp_path / "edge.g2", points(30, seed=11))  # a build the kill interrupted
    assert recover_interrupted_swap(live) == "removed edge.g2"
    _opens_with(live, batch)


def test_a_kill_after_the_link_flipped_opens_the_new_generation(tmp_path):
    live, batch = tmp_path / "edge", points(300, seed=12)
    _shard(tmp_path / "edge.g1", points(30, seed=13))  # the old generation, not yet removed
    _shard(tmp_path / "edge.g2", batch)
    point_link(live, tmp_path / "edge.g2")
    _opens_with(live, batch)


def test_a_first_swap_killed_between_moving_the_directory_and_linking_opens_the_build(tmp_path):
    live, batch = tmp_path / "edge", points(300, seed=14)
    _shard(replaced_dir(live), batch[:250])  # the old directory, moved aside ...
    _shard(tmp_path / "edge.g1", batch)  # ... and the build, complete before the move
    assert recover_interrupted_swap(live) == "linked edge.g1; removed edge.replaced"
    _opens_with(live, batch)


def test_a_first_build_killed_leaves_the_directory_as_it_was(tmp_path):
    live, batch = tmp_path / "edge", points(300, seed=15)
    _shard(live, batch)
    _shard(tmp_path / "edge.g1", points(30, seed=16))
    _opens_with(live, batch)
    assert not live.is_symlink()


WRITER = """
import sys
sys.path.insert(0, sys.argv[3])
from test_perf_indexing import SMALL, DIM, points
from mtl_graph.memory.engine.edge.edge_store import EdgeStore
store = EdgeStore(sys.argv[1], DIM, SMALL)
seed = int(sys.argv[2])
for k in range(10_000):
    batch = points(7, seed * 10_000 + k)
    store.upsert(batch)
    for p in batch:
        print("added", p.id, flush=True)
    if k % 3 == 0:
        print("deleting", batch[0].id, flush=True)
        store.delete([batch[0].id])
    store.optimize()
"""


def test_sigkill_during_builds_and_swaps_loses_nothing_written(tmp_path):
    """A writer with tiny build thresholds (a build every ~120 writes, so kills land in scrolls, builds, journal
    replays and swaps) is killed again and again; every open holds every write that returned before the kill."""
    path, rng, committed, recovered = tmp_path / "edge", random.Random(11), set(), []
    here = os.path.dirname(__file__)
    for trial in range(5):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(trial + 1), here],
                                stdout=subprocess.PIPE, text=True)
        lines = [proc.stdout.readline() for _ in range(rng.randint(100, 1500))]
        os.kill(proc.pid, signal.SIGKILL)
        lines += proc.stdout.readlines()
        proc.wait()
        # the kill can cut the last line short ("added" without its id): only whole lines are records
        for line in (line.split() for line in lines if line.endswith("\n")):
            if len(line) == 2:
                (committed.add if line[0] == "added" else committed.discard)(line[1])
        recovered.append(recover_interrupted_swap(path))  # what EdgeStore does first when it opens
        store = EdgeStore(str(path), DIM, SMALL)
        try:
            stored = {h.id for h in store.scroll()}
            assert committed <= stored and store.count() == len(stored)
            assert no_leftovers(store)
        finally:
            store.close()
    assert any(recovered), "no kill landed during a build: the test did not test it"


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
        assert store.indexed == 0  # never built by us: its first due write builds it
        more = points(500, seed=4)
        write(store, more, 100)
        store.optimize(wait=True)
        assert store.indexed == 800
        assert_holds(store, {p.id: p for p in first + more})
    finally:
        store.close()


def test_bad_index_settings_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="rebuild_min_points"):
        EdgeIndexConfig(rebuild_min_points=0)
    with pytest.raises(ValueError, match="rebuild_ratio"):
        EdgeIndexConfig(rebuild_ratio=0)


def test_a_corrupt_index_marker_only_costs_a_rebuild(tmp_path):
    live, batch = tmp_path / "edge", points(300, seed=17)
    store = EdgeStore(str(live), DIM, SMALL)
    store.upsert(batch)
    store.optimize(wait=True)
    store.close()
    (live / INDEX_MARKER).write_text("{not json")
    store = EdgeStore(str(live), DIM, SMALL)
    try:
        assert store.indexed == 0  # unknown: treated as never indexed
        assert_holds(store, {p.id: p for p in batch})
        store.optimize(wait=True)
        assert store.indexed == 300
    finally:
        store.close()


def test_a_pool_whose_index_link_points_nowhere_is_refused_not_opened_empty(tmp_path, embeddings):
    from mtl_graph.memory.errors import PoolError
    from mtl_graph.memory.formats.insight import InsightMemory
    from mtl_graph.memory.pool.pool import MemoryPool

    path = tmp_path / "pool"
    with MemoryPool.open(path, embeddings) as pool:
        pool.add(InsightMemory(title="verify with tests", description="run the tests after each edit",
                               content="run the tests after each edit"))
        pool.optimize()
    assert (path / "edge").is_symlink()
    import shutil

    shutil.rmtree((path / "edge").resolve())  # the generation it links to deleted by hand
    with pytest.raises(PoolError, match="missing"):
        MemoryPool.open(path, embeddings)
