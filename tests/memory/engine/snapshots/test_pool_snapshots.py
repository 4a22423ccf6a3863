"""Pool snapshots on real embedded pools: exact restore (ids, payloads, vectors, search), undo, diff, bad input."""

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.workflow import WorkflowMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.engine.snapshots.stream import BATCHES, LINES
from mtl_graph.memory.engine.snapshots.archive import (
    MANIFEST,
    SnapshotError,
    create_snapshot,
    diff,
    list_snapshots,
    points_of,
    restore_snapshot,
)

runner = CliRunner()
TOPICS = ["run the unit tests after each edit", "round money sums to two decimals", "read the traceback first",
          "compare output byte for byte", "pin the dependency versions", "check the edge case of empty input",
          "prefer the standard library parser", "keep functions short and named"]


def memories(start: int, stop: int) -> list:
    out = []
    for i in range(start, stop):
        topic = TOPICS[i % len(TOPICS)]
        if i % 3 == 2:
            out.append(WorkflowMemory(goal=f"{topic} (workflow {i})", actions=["look", "change", f"verify {i}"],
                                      sources=[Provenance(domain="exercism", source_task_id=f"w{i}")]))
        else:
            out.append(InsightMemory(title=f"{topic} ({i})", description=f"When the task needs to {topic}.",
                                     content=f"Advice {i}: {topic}.", outcome="success" if i % 2 else "failure",
                                     sources=[Provenance(domain="humaneval", source_task_id=f"h{i}")]))
    return out


def dump(pool) -> dict:
    """Every point whole, read straight from the engine: id -> (dense, sparse, payload)."""
    return {p.id: (list(p.dense), (list(p.sparse[0]), list(p.sparse[1])), p.payload)
            for p in pool.store.scroll_points()}


def searches(pool) -> list:
    return [[(h.memory.id, h.score, h.similarity) for h in pool.search(q, k=4)]
            for q in ("how do I check my change works", "money rounding", "dependencies")]


def tag(pool, memory_id: str, **keys) -> None:
    """Top-level payload keys beside the memory (as other features add, e.g. status or credit)."""
    payload = pool.store.fetch([memory_id])[0].payload
    pool.store.set_payload(memory_id, {**payload, **keys})


def one_line_error(fn, *args, **kwargs) -> str:
    with pytest.raises(SnapshotError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert message and "\n" not in message
    return message


@pytest.fixture
def seeded(pool):
    added = memories(0, 6)
    pool.add_many(added)
    tag(pool, added[0].id, status="active", credit=0.25)
    return pool, added


def test_restore_gives_back_exactly_the_snapshot(seeded, tmp_path):
    pool, added = seeded
    info = create_snapshot(pool, "base")
    assert info.count == 6 and info.path == str(tmp_path / "pool" / "snapshots" / "base")
    before, found = dump(pool), searches(pool)

    later = memories(6, 9)
    pool.add_many(later)
    pool.update_stats([added[1].id], "success")
    tag(pool, added[0].id, status="retired", credit=1.5, extra={"nested": [1, 2]})
    pool.delete(added[2].id)
    assert dump(pool) != before

    report = restore_snapshot(pool, "base")
    assert dump(pool) == before  # the snapshot's ids, every payload key and both vectors, exactly
    assert report.count_verified and report.checksum_verified and report.renormalised == 0
    assert (report.count, report.checksum) == (6, info.checksum)
    assert report.deleted == 3 and report.written >= 2  # added[2] back; added[0] lost `extra`: a whole-point write
    assert report.written + report.payloads == 3 and report.unchanged == 3
    assert pool.count() == 6 and all(pool.get(m.id) is None for m in later)
    assert pool.get(added[1].id).stats.retrieved == 0
    assert searches(pool) == found
    assert json.loads((tmp_path / "pool" / "points.json").read_text())["points"] == 6  # the ledger kept up


def test_memory_pool_keeps_snapshots_in_a_named_directory(embeddings, tmp_path):
    with MemoryPool.open(":memory:", embeddings) as pool:
        pool.add_many(memories(0, 4))
        assert "--dir" in one_line_error(create_snapshot, pool, "s")
        create_snapshot(pool, "s", tmp_path / "snaps")
        before = dump(pool)
        pool.add_many(memories(4, 6))
        pool.update_stats([next(iter(before))], "failure")
        report = restore_snapshot(pool, "s", tmp_path / "snaps")
        assert dump(pool) == before and report.checksum_verified
        assert {i.name for i in list_snapshots(tmp_path / "snaps")} == {"s", report.safety_snapshot}


def test_client_engine_restores_payloads_exactly_and_vectors_to_the_last_bit_it_keeps(embeddings, tmp_path):
    with MemoryPool.open(":memory:", embeddings, engine="client") as pool:
        added = memories(0, 5)
        pool.add_many(added)
        create_snapshot(pool, "s", tmp_path)
        before = dump(pool)
        pool.delete(added[0].id)  # re-added by the restore: local mode normalises its vector again
        pool.add_many(memories(5, 7))
        report = restore_snapshot(pool, "s", tmp_path)
        after = dump(pool)
        assert report.count_verified and set(after) == set(before)
        assert all(after[i][1:] == before[i][1:] for i in before)  # sparse vectors and payloads exact
        assert max(abs(a - b) for i in before for a, b in zip(after[i][0], before[i][0])) <= 1e-6
        assert report.checksum_verified == (report.renormalised == 0)


def test_safety_snapshot_undoes_a_restore(seeded):
    pool, _ = seeded
    create_snapshot(pool, "base")
    pool.add_many(memories(6, 8))
    grown = dump(pool)
    report = restore_snapshot(pool, "base")
    names = [i.name for i in list_snapshots(pool)]
    assert report.safety_snapshot in names and report.safety_snapshot.startswith("before-restore-")
    restore_snapshot(pool, report.safety_snapshot)
    assert dump(pool) == grown


def test_diff_reports_added_removed_and_changed_fields(seeded):
    pool, added = seeded
    create_snapshot(pool, "a")
    later = memories(6, 8)
    pool.add_many(later)
    pool.delete(added[3].id)
    pool.update_stats([added[4].id], "success")
    tag(pool, added[0].id, status="retired")
    payload = pool.store.fetch([added[1].id])[0].payload
    payload["memory"]["stats"]["retrieved"] = 7
    pool.store.set_payload(added[1].id, payload)
    create_snapshot(pool, "b")
    result = diff(points_of(pool, "a"), points_of(pool, "b"))
    assert result.added == sorted(m.id for m in later) and result.removed == [added[3].id]
    assert result.changed.pop(added[0].id) == ["status"] and result.changed.pop(added[1].id) == ["stats"]
    assert set(result.changed) == {added[4].id}  # its record changed, not what it says or where it is
    assert not {"dense", "sparse", "content"} & set(result.changed[added[4].id])
    assert result.unchanged == 2
    assert diff(points_of(pool, "b"), points_of(pool, "current")).to_json()["changed"] == {}
    reverse = diff(points_of(pool, "current"), points_of(pool, "a"))
    assert reverse.removed == result.added and reverse.added == result.removed


def _flip_byte(name):
    def damage(path):
        data = bytearray((path / name).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (path / name).write_bytes(bytes(data))
    return damage


def _truncate(name):
    def damage(path):
        data = (path / name).read_bytes()
        (path / name).write_bytes(data[: len(data) * 2 // 3])
    return damage


def _edit_a_line(path):  # valid gzip and valid JSON, but not what the checksums cover
    lines = gzip.decompress((path / LINES).read_bytes()).decode().splitlines()
    point = json.loads(lines[0])
    point["payload"]["memory"]["stats"]["retrieved"] = 99
    lines[0] = json.dumps(point, sort_keys=True, separators=(",", ":"))
    (path / LINES).write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def _manifest_edit(**changes):
    def edit(path):
        manifest = json.loads((path / MANIFEST).read_text())
        (path / MANIFEST).write_text(json.dumps({**manifest, **changes}))
    return edit


def _broken_manifest(path):
    (path / MANIFEST).write_text('{"format": ')


DAMAGE = [
    (_truncate(LINES), "cannot be decompressed"),
    (_flip_byte(LINES), "corrupt"),
    (_edit_a_line, "checksum"),
    (_flip_byte("dense.f32"), "does not match its checksum"),
    (_truncate("dense.f32"), "bytes"),
    (_truncate(BATCHES), "batch record"),
    (_manifest_edit(count=5), "bytes"),
    (_manifest_edit(count=10 ** 15), "points make"),
    (_manifest_edit(count=10 ** 15, batches=-(-10 ** 15 // 1024)), "bytes"),
    (_manifest_edit(batch_size=10 ** 9), "batch_size"),
    (_manifest_edit(dim=768), "dim 768"),
    (_manifest_edit(embeddings="openai:text-embedding-3-small"), "openai:text-embedding-3-small"),
    (_broken_manifest, "not valid JSON"),
    (lambda path: (path / LINES).unlink(), "missing"),
]


def test_a_bad_snapshot_is_one_error_and_changes_nothing(seeded):
    pool, _ = seeded
    damaged = [(create_snapshot(pool, f"s{n}"), damage, says) for n, (damage, says) in enumerate(DAMAGE)]
    pool.add_many(memories(6, 8))
    before, listed = dump(pool), [i.name for i in list_snapshots(pool)]
    for info, damage, says in damaged:
        damage(Path(info.path))
        message = one_line_error(restore_snapshot, pool, info.name)
        assert says in message and "not changed" in message, (damage, message)
    assert dump(pool) == before and sorted(i.name for i in list_snapshots(pool)) == sorted(listed)  # no safety snapshot


def test_bad_names_are_refused(seeded):
    pool, _ = seeded
    before = dump(pool)
    for name in ["a/b", "..", "../escape", "x..y", ".hidden", "", "a" * 65, "current", "sp ace", "/abs"]:
        assert "snapshot name" in one_line_error(create_snapshot, pool, name)
        assert "snapshot name" in one_line_error(restore_snapshot, pool, name)
    assert dump(pool) == before and list_snapshots(pool) == []


def test_existing_unknown_and_unfinished_snapshots(seeded, tmp_path):
    pool, added = seeded
    first = create_snapshot(pool, "s")
    pool.add_many(memories(6, 7))
    assert "already exists" in one_line_error(create_snapshot, pool, "s")
    assert list_snapshots(pool)[0].count == 6
    assert create_snapshot(pool, "s", force=True).count == 7 and first.checksum != list_snapshots(pool)[0].checksum
    before = dump(pool)
    assert "no snapshot named nope" in one_line_error(restore_snapshot, pool, "nope")
    root = tmp_path / "pool" / "snapshots"
    (root / ".t.tmp-1-ab").mkdir()  # what a crash mid-snapshot leaves: hidden, never listed
    shutil.copytree(root / "s", root / "copy")  # a manifest naming another snapshot
    assert [(i.name, i.problem is None) for i in list_snapshots(pool)] == [("copy", False), ("s", True)]
    assert "manifest names it" in one_line_error(restore_snapshot, pool, "copy")
    assert dump(pool) == before


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_cli_create_list_diff_restore(embeddings, tmp_path):
    location = tmp_path / "cli-pool"
    with MemoryPool.open(location, embeddings) as pool:
        pool.add_many(memories(0, 4))
    result = invoke("pool", "snapshot", "create", "base", "--pool", location)
    assert result.exit_code == 0 and "snapshot base: 4 memories" in result.output
    with MemoryPool.open(location, embeddings) as pool:
        pool.add_many(memories(4, 6))
    listed = json.loads(invoke("pool", "snapshot", "list", "--json", "--pool", location).output)
    assert [(s["name"], s["count"]) for s in listed] == [("base", 4)]
    changes = json.loads(invoke("pool", "diff", "base", "current", "--json", "--pool", location).output)
    assert len(changes["added"]) == 2 and changes["removed"] == [] and changes["unchanged"] == 4
    result = invoke("pool", "snapshot", "restore", "base", "--pool", location)
    assert result.exit_code == 0 and "restored base: 4 memories (count verified, checksum verified)" in result.output
    assert "undo: mtl pool snapshot restore before-restore-" in result.output
    text = invoke("pool", "diff", "base", "--pool", location).output
    assert "base -> current: 0 added, 0 removed, 0 changed, 4 unchanged" in text
    with MemoryPool.open(location, embeddings) as pool:
        pool.add_many(memories(4, 5))
    report = json.loads(invoke("pool", "snapshot", "restore", "base", "--full-check", "--json", "--pool",
                               location).output)
    assert (report["deleted"], report["unchanged"], report["checksum_verified"]) == (1, 4, True)
    assert report["full_check"] is True
    result = invoke("pool", "snapshot", "restore", "base", "--full-check=no", "--pool", location)
    assert result.exit_code != 0  # a flag takes no value


@pytest.mark.parametrize("args, says", [
    (("pool", "snapshot", "create", "s", "--pool", ":memory:"), "pass --dir DIR"),
    (("pool", "snapshot", "create", "../s"), "is not allowed"),
    (("pool", "snapshot", "restore", "nope"), "no snapshot named nope"),
    (("pool", "diff", "nope", "current"), "no snapshot named nope"),
])
def test_cli_errors_are_one_line(args, says):
    result = invoke(*args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]


# ------------------------------------------------------------------ a restore checks what the engine wrote
def _engine(pool):
    """The engine's own store under the pool's wrappers (namespace, counting, error guard)."""
    store = pool.store
    while hasattr(store, "inner"):
        store = store.inner
    return store


def _moved_vector(engine):
    real = engine.upsert
    return lambda points: real([type(p)(p.id, [x + 0.01 for x in p.dense], p.sparse, p.payload) for p in points])


def _lost_key(engine):
    real = engine.upsert
    return lambda points: real([type(p)(p.id, p.dense, p.sparse, {k: v for k, v in p.payload.items() if k != "memory"})
                                for p in points])


def _other_sparse(engine):
    real = engine.upsert
    return lambda points: real([type(p)(p.id, p.dense, ([7], [0.5]), p.payload) for p in points])


def _nothing(engine):
    return lambda *args, **kwargs: None


ENGINE_FAULTS = [("upsert", _moved_vector), ("upsert", _lost_key), ("upsert", _other_sparse), ("upsert", _nothing),
                 ("delete", _nothing), ("set_payload", _nothing)]


@pytest.mark.parametrize("full_check", [False, True])
@pytest.mark.parametrize("method, fault", ENGINE_FAULTS, ids=[f"{m}-{f.__name__}" for m, f in ENGINE_FAULTS])
def test_a_restore_the_engine_did_not_write_as_asked_is_an_error(seeded, monkeypatch, method, fault, full_check):
    """Every kind of write a restore makes (a whole point, a payload, a delete), done wrongly or not at all by the
    engine: the restore says it did not verify and names the safety snapshot, with or without the full re-read."""
    pool, added = seeded
    create_snapshot(pool, "s")
    pool.delete(added[1].id)  # the restore writes it again whole
    payload = pool.store.fetch([added[0].id])[0].payload
    pool.store.set_payload(added[0].id, {**payload, "status": "archived"})  # the restore rewrites its payload
    pool.add_many(memories(6, 8))  # the restore deletes these
    engine = _engine(pool)
    monkeypatch.setattr(engine, method, fault(engine))
    message = one_line_error(restore_snapshot, pool, "s", full_check=full_check)
    assert "did not verify" in message and message.count("before-restore-") == 1, message


@pytest.mark.parametrize("full_check", [False, True])
def test_both_checks_pass_a_restore_the_engine_wrote_as_asked(seeded, full_check):
    pool, added = seeded
    create_snapshot(pool, "s")
    before = dump(pool)
    pool.delete(added[1].id)
    payload = pool.store.fetch([added[0].id])[0].payload
    pool.store.set_payload(added[0].id, {**payload, "status": "archived"})
    pool.add_many(memories(6, 8))
    report = restore_snapshot(pool, "s", full_check=full_check)
    assert (report.written, report.payloads, report.deleted, report.unchanged) == (1, 1, 2, 4)
    assert report.full_check == full_check
    assert report.count_verified and report.checksum_verified and dump(pool) == before
