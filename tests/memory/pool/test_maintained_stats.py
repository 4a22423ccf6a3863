"""The pool's maintained statistics (memory/pool/stats.py) on a real Qdrant Edge pool with the local embedder: after
random writes, merges, deletes, credits (the same run twice included), archives, restores and snapshot restores,
every maintained value equals a full recomputation; a reopened pool's first lifecycle search reads no point but
its candidates; an interrupted write leaves a state `check_pool` reports and `repair` fixes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import pytest

from mtl_graph.memory.base import Provenance, UsageStats
from mtl_graph.memory.engine.check import check_pool
from mtl_graph.memory.engine.snapshots.archive import create_snapshot, restore_snapshot
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.engine.storage import Store
from mtl_graph.memory.pool.stats import STATS_DIR, CountedStore, recompute
from mtl_graph.memory.usage import CREDIT_KEY, TALLY_KEY, Use, cached_tally, entries, tally

from helpers.paths import ROOT

ADVICE = [
    ("Run the tests after the last edit", "Before submitting any fix, rerun the whole unit test suite."),
    ("Read the failing test first", "When a test fails, read its assertion before changing code."),
    ("Reproduce the bug before fixing it", "Write a minimal failing example of the reported defect."),
    ("Keep the public interface", "Do not rename functions or change signatures the tests import."),
    ("Check the output format", "Match the exact output format the task asks for, including newlines."),
    ("Handle empty input", "Functions that take lists must handle an empty list without crashing."),
]
OUTCOMES = ("success", "failure", "unknown")


def memory(rng: random.Random) -> InsightMemory:
    """One of a few contents (so equal contents merge) from one of many tasks, sometimes with stored counts."""
    title, text = rng.choice(ADVICE)
    stats = UsageStats(retrieved=4, retrieved_success=rng.randint(0, 2), retrieved_failure=rng.randint(0, 2)) \
        if rng.random() < 0.3 else UsageStats()
    return InsightMemory(title=title, description=text, content=text, stats=stats,
                         sources=[Provenance(domain=rng.choice("abc"), source_task_id=f"t{rng.randint(0, 30)}")])


def assert_current(pool: MemoryPool) -> None:
    """Every maintained value equals its recomputation from the pool's points."""
    points = list(pool.store.scroll())
    assert pool.maintained.totals() == recompute(points)
    rate = pool.base_rate()
    want = recompute(points)
    assert (rate.success, rate.failure) == (want.success, want.failure)
    for hit in points:  # each cached credit tally, where there is one, is its entries' count
        cached = cached_tally(hit.payload)
        if TALLY_KEY in (hit.payload.get(CREDIT_KEY) or {}):
            assert cached == tally(entries(hit.payload)), hit.id


def random_walk(pool: MemoryPool, rng: random.Random, steps: int, tmp_path) -> None:
    runs: list[str] = []
    snapshot = None
    for step in range(steps):
        ids = [h.id for h in pool.store.scroll()]
        action = rng.choice(["add", "add", "credit", "credit", "credit", "delete", "archive", "restore",
                             "many", "snapshot"])
        if action == "add" or not ids:
            pool.add_many([memory(rng) for _ in range(rng.randint(1, 3))], keep_stats=rng.random() < 0.5)
        elif action == "credit":
            run = rng.choice(runs) if runs and rng.random() < 0.3 else f"run-{step}"  # the same run twice, too
            runs.append(run)
            shown = rng.sample(ids, min(len(ids), rng.randint(1, 3)))
            pool.credit(run, [Use(i, rng.random() < 0.5) for i in shown], rng.choice(OUTCOMES), "tests")
        elif action == "delete":
            pool.delete(rng.choice(ids))
        elif action == "archive":
            pool.archive(rng.choice(ids), "tested")
        elif action == "restore":
            pool.restore(rng.choice(ids))
        elif action == "many":  # one payload onto many points (consolidation's marks), a status change included
            pool.store.set_payload_many(rng.sample(ids, min(len(ids), rng.randint(1, 4))),
                                        rng.choice([{"compared": "0.9"}, {"status": "archived"}]))
        elif snapshot is None:
            snapshot = create_snapshot(pool, f"s{step}", tmp_path / "snaps").name
        else:
            restore_snapshot(pool, snapshot, tmp_path / "snaps")
            snapshot = None
        assert_current(pool)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_after_random_writes_every_statistic_equals_a_recomputation(seed, embeddings, tmp_path):
    location = tmp_path / "pool"
    with MemoryPool.open(location, embeddings) as pool:
        random_walk(pool, random.Random(seed), 30, tmp_path)
        kept = pool.maintained.totals()
    with MemoryPool.open(location, embeddings) as pool:  # read back from the record, not counted again
        assert pool.maintained.totals() == kept
        assert pool.maintained.rebuilds == 0
        assert_current(pool)
    assert not check_pool(location, embeddings).stats_problems


def test_every_write_of_the_engine_protocol_is_counted():
    """A write method added to the engine's protocol must be counted by CountedStore (or named a read here): the
    statistics hold by construction, not by remembering to wrap each new write."""
    reads = {"fetch", "count", "scroll", "scroll_points", "namespaces", "query", "optimize", "close"}
    protocol = {name for name in vars(Store) if not name.startswith("_")}
    assert reads <= protocol
    for name in protocol - reads:
        assert name in vars(CountedStore), f"{name} writes the engine but CountedStore does not count it"


def seeded(location, embeddings, credited: int = 12) -> None:
    rng = random.Random(7)
    with MemoryPool.open(location, embeddings) as pool:
        pool.add_many([InsightMemory(title=f"{t} ({j})", description=d, content=f"{d} Case {j}.", sources=[
            Provenance(domain="d", source_task_id=f"t{i}-{j}")]) for i, (t, d) in enumerate(ADVICE) for j in range(4)])
        ids = [h.id for h in pool.store.scroll()]
        for r in range(credited):
            pool.credit(f"r{r}", [Use(i, True) for i in rng.sample(ids, 2)], rng.choice(OUTCOMES), "tests")
        pool.retrieve("how do I check my fix", k=3, lifecycle=LifecycleConfig())  # the floor, kept


def test_a_reopened_pools_first_lifecycle_search_reads_no_point_beyond_its_candidates(embeddings, tmp_path):
    location = tmp_path / "pool"
    seeded(location, embeddings)
    with MemoryPool.open(location, embeddings) as pool:
        def no_scan(*args, **kwargs):
            raise AssertionError("a whole-pool scan on the search path")
        pool.store.scroll = no_scan  # type: ignore[method-assign]
        found = pool.retrieve("how do I check my fix", k=3, lifecycle=LifecycleConfig())
        assert found.hits and found.floor_source.startswith(("calibrated", "default"))
        assert found.base_rate == pool.base_rate().rate
        assert pool.maintained.rebuilds == 0


def test_a_write_cut_off_before_its_statistics_is_reported_and_repaired(embeddings, tmp_path, monkeypatch):
    import mtl_graph.memory.pool.stats as stats

    location = tmp_path / "pool"
    seeded(location, embeddings)
    real = stats.write_record

    def cut(file, totals, floors, pending=False):
        if not pending:
            raise RuntimeError("injected: the process stops between the data and its statistics")
        real(file, totals, floors, pending)

    with MemoryPool.open(location, embeddings) as pool:
        ids = [h.id for h in pool.store.scroll()]
        monkeypatch.setattr(stats, "write_record", cut)
        with pytest.raises(RuntimeError, match="injected"):
            pool.credit("cut", [Use(ids[0], True)], "success", "tests")
        monkeypatch.setattr(stats, "write_record", real)
    report = check_pool(location, embeddings)
    assert report.stale_stats and not report.damaged
    assert any("pending" in p for p in report.stats_problems)
    repaired = check_pool(location, embeddings, repair=True)
    assert repaired.stats_repaired
    assert not check_pool(location, embeddings).stats_problems
    with MemoryPool.open(location, embeddings) as pool:
        assert pool.maintained.rebuilds == 0
        assert_current(pool)


def test_a_process_killed_between_the_data_and_its_statistics_loses_nothing(embeddings, tmp_path):
    location = tmp_path / "pool"
    seeded(location, embeddings)
    script = textwrap.dedent(f"""
        import os
        import mtl_graph.memory.pool.stats as stats
        from mtl_graph.memory.pool.pool import MemoryPool
        from mtl_graph.memory.usage import Use
        real = stats.write_record
        def killed(file, totals, floors, pending=False):
            if not pending:
                os._exit(9)  # SIGKILL's effect: nothing after the engine's write runs
            real(file, totals, floors, pending)
        pool = MemoryPool.open({str(location)!r})
        ids = [h.id for h in pool.store.scroll()]
        stats.write_record = killed
        pool.credit("killed", [Use(ids[1], True), Use(ids[2], False)], "failure", "tests")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    report = check_pool(location, embeddings)
    assert any("pending" in p for p in report.stats_problems)
    with MemoryPool.open(location, embeddings) as pool:  # without a repair: counted again once, then right
        assert pool.history(pool.store.scroll().__next__().id) is not None
        assert_current(pool)
        assert pool.maintained.rebuilds == 1
        assert sum(1 for h in pool.store.scroll() if "killed" in (h.payload.get(CREDIT_KEY) or {})) == 2
    assert not check_pool(location, embeddings).stats_problems


def test_another_process_writing_the_pool_is_seen_at_the_next_open(embeddings, tmp_path):
    location = tmp_path / "pool"
    seeded(location, embeddings)
    script = textwrap.dedent(f"""
        from mtl_graph.memory.pool.pool import MemoryPool
        from mtl_graph.memory.usage import Use
        with MemoryPool.open({str(location)!r}) as pool:
            ids = [h.id for h in pool.store.scroll()]
            pool.credit("other", [Use(i, True) for i in ids[:5]], "success", "tests")
            pool.delete(next(i for i in ids[5:] if not pool.history(i)))
    """)
    with MemoryPool.open(location, embeddings) as pool:
        before, points = pool.base_rate(), pool.maintained.totals().points
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with MemoryPool.open(location, embeddings) as pool:
        after = pool.base_rate()
        assert (after.success, after.failure) == (before.success + 5, before.failure)
        assert pool.maintained.totals().points == points - 1
        assert pool.maintained.rebuilds == 0  # the other process's record, read as it left it
        assert_current(pool)
        pool.contents_changed()  # a server's other writers: read again
        assert_current(pool)


def test_a_tampered_record_or_tally_is_reported_and_repaired(embeddings, tmp_path):
    location = tmp_path / "pool"
    seeded(location, embeddings)
    record = location / STATS_DIR / "default.json"
    data = json.loads(record.read_text())
    data["totals"]["success"] += 3
    record.write_text(json.dumps(data))
    with MemoryPool.open(location, embeddings) as pool:
        hit = next(h for h in pool.store.scroll() if (h.payload.get(CREDIT_KEY) or {}).get(TALLY_KEY))
        wrong = {**hit.payload[CREDIT_KEY][TALLY_KEY], "cited_success": 99}
        pool.store.inner.set_payload(hit.id, {TALLY_KEY: wrong}, key=CREDIT_KEY)  # past the counting store
    report = check_pool(location, embeddings)
    assert report.stale_stats
    assert any("cached credit tally" in p for p in report.stats_problems)
    data = json.loads(record.read_text())
    data["totals"]["success"] += 3  # the open above kept the tampered count (same number of points)
    record.write_text(json.dumps(data))
    assert any("successes" in p for p in check_pool(location, embeddings).stats_problems)
    assert check_pool(location, embeddings, repair=True).stats_repaired
    assert not check_pool(location, embeddings).stats_problems
    with MemoryPool.open(location, embeddings) as pool:
        assert_current(pool)


@pytest.mark.parametrize("garbage", ["", "{", "[]", '{"version": 1, "totals": {"points": -1}}', "\xff\xfe"])
def test_an_unreadable_record_is_counted_again_never_trusted(garbage, embeddings, tmp_path):
    location = tmp_path / "pool"
    seeded(location, embeddings, credited=3)
    (location / STATS_DIR / "default.json").write_text(garbage, encoding="utf-8", errors="surrogateescape")
    with MemoryPool.open(location, embeddings) as pool:
        assert_current(pool)
        assert pool.maintained.rebuilds == 1


def test_the_tally_key_is_not_a_run_id(embeddings, tmp_path):
    with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
        pool.add(InsightMemory(title="t", description="d", content="d"))
        with pytest.raises(ValueError, match="reserved"):
            pool.credit(TALLY_KEY, [Use(next(pool.store.scroll()).id, True)], "success")
        assert_current(pool)


def test_served_as_one_equality_finds_what_the_exclusion_finds(embeddings, tmp_path):
    from dataclasses import replace

    from mtl_graph.memory.engine.storage import StoredPoint
    from mtl_graph.memory.pool.filter import SearchFilter

    location = tmp_path / "pool"
    seeded(location, embeddings)
    with MemoryPool.open(location, embeddings) as pool:
        ids = sorted(h.id for h in pool.store.scroll())
        pool.archive(ids[0], "tested")
        pool.lifecycle._rewrite(pool.get(ids[1]), quarantined=["tested"])
        served = SearchFilter(type="insight").served()
        assert pool.maintained.totals().other_status == 0
        for query in ("how do I check my fix", "read the assertion", "empty list"):
            wanted = [r.raw.id for r in pool.ranked(query, 20, served)]
            assert [r.raw.id for r in pool.ranked(query, 20, replace(served, statuses_complete=True))] == wanted
            assert ids[0] not in wanted and ids[1] not in wanted
        # a point written before statuses existed: counted, and the lifecycle then filters by exclusion
        [old] = pool.store.fetch([ids[2]])
        [vector] = pool.store.fetch([ids[2]], with_dense=True)
        payload = {k: v for k, v in old.payload.items() if k != "status"}
        pool.store.upsert([StoredPoint(ids[2], vector.dense, ([], []), payload)])
        assert pool.maintained.totals().other_status == 1
        text = pool.get(ids[2]).key_text()
        found = pool.retrieve(text, type="insight", k=1, lifecycle=LifecycleConfig(), retriever="dense")
        assert [h.memory.id for h in found.hits] == [ids[2]]
        assert_current(pool)


def test_writes_held_from_several_threads_are_one_change_of_the_record(embeddings, tmp_path, monkeypatch):
    """An ingest holds the record over all its workers' writes: marked pending once before, recorded once after,
    pending on disk in between (what a process killed there leaves), and every statistic right at the end."""
    import threading

    import mtl_graph.memory.pool.stats as stats
    from mtl_graph.memory.pool.stats import read_record

    location = tmp_path / "pool"
    seeded(location, embeddings)
    real, written = stats.write_record, []

    def counted(file, totals, floors, pending=False):
        written.append(pending)
        real(file, totals, floors, pending)

    with MemoryPool.open(location, embeddings) as pool:
        file = pool.maintained.file
        monkeypatch.setattr(stats, "write_record", counted)
        with pool.statistics_held():
            def writer(seed: int) -> None:
                rng = random.Random(seed)
                for _ in range(4):
                    pool.add_many([memory(rng) for _ in range(rng.randint(1, 3))])
                    ids = [h.id for h in pool.store.scroll()]
                    pool.credit(f"run-{seed}-{rng.random()}", [Use(rng.choice(ids), True)], "success", "tests")
            threads = [threading.Thread(target=writer, args=(seed,)) for seed in (1, 2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert read_record(file)["pending"] is True  # a kill here: rebuilt at the next open
            assert_current(pool)
        assert written == [True, False]
        assert read_record(file)["pending"] is False
        assert_current(pool)
    with MemoryPool.open(location, embeddings) as pool:
        assert pool.maintained.rebuilds == 0
        assert_current(pool)
    assert not check_pool(location, embeddings).stats_problems


def test_an_engine_write_that_fails_inside_a_hold_leaves_the_record_to_be_counted_again(embeddings, tmp_path):
    location = tmp_path / "pool"
    seeded(location, embeddings)
    with MemoryPool.open(location, embeddings) as pool:
        ids = [h.id for h in pool.store.scroll()]
        with pool.statistics_held():
            pool.credit("before", [Use(ids[0], True)], "success", "tests")
            inner = pool.store.inner
            real_upsert = inner.set_payload

            def broken(*args, **kwargs):
                real_upsert(*args, **kwargs)  # the write reached the engine, the caller never learns it did
                raise RuntimeError("injected engine failure")
            inner.set_payload = broken  # type: ignore[method-assign]
            with pytest.raises(RuntimeError, match="injected"):
                pool.credit("broken", [Use(ids[1], True)], "failure", "tests")
            inner.set_payload = real_upsert  # type: ignore[method-assign]
            pool.credit("after", [Use(ids[2], True)], "success", "tests")
        rebuilds = pool.maintained.rebuilds
        assert_current(pool)  # counted again from the pool, not trusted
        assert pool.maintained.rebuilds == rebuilds + 1


def test_a_hold_without_writes_writes_nothing_and_a_reload_inside_keeps_the_pending_mark(embeddings, tmp_path,
                                                                                           monkeypatch):
    import mtl_graph.memory.pool.stats as stats
    from mtl_graph.memory.pool.stats import read_record

    location = tmp_path / "pool"
    seeded(location, embeddings)
    real, written = stats.write_record, []

    def counted(file, totals, floors, pending=False):
        written.append(pending)
        real(file, totals, floors, pending)

    with MemoryPool.open(location, embeddings) as pool:
        monkeypatch.setattr(stats, "write_record", counted)
        with pool.statistics_held():  # an ingest whose runs were all skipped: the record is not touched
            pass
        assert written == []
        rng = random.Random(5)
        with pool.statistics_held():
            pool.add_many([memory(rng)])
            pool.maintained.reload()  # another handle's news: not while this change is under way
            assert read_record(pool.maintained.file)["pending"] is True
            pool.add_many([memory(rng)])
        assert written == [True, False]
        assert_current(pool)
