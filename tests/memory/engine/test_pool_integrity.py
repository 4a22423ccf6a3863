"""Damaged pools, with both real engines and the real local embedder: a clear PoolError naming the pool, never an
empty or smaller pool opened silently, and `mtl pool check --repair` rebuilding every memory that is still readable.

Each test damages a copy of a 30-memory pool the way a crash, a disk or a user does (files deleted, truncated,
overwritten), then checks the open, the check, and the repair."""

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.engine.check import check_pool, copy_tree_sparse
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool, PoolError, PoolLockedError

ENGINES = ["edge", "client"]
TOPICS = ["unit tests", "file encodings", "off-by-one loops", "timezones", "shell quoting", "float rounding",
          "retry loops", "path joins", "regex anchors", "JSON schemas", "integer overflow", "locale sorting",
          "signal handling", "lazy imports", "cache keys"]
MEMORIES = [
    InsightMemory(title=f"Lesson {i}: {topic} ({'twice' if i >= 15 else 'once'})",
                  description=f"When a task touches {topic}, check case {i} before and after each edit.",
                  content=f"Case {i} of {topic}.", outcome="success" if i % 2 else "failure",
                  sources=[Provenance(domain=f"d{i % 3}", source_task_id=f"t{i}", task_model="m", run_id=f"run-{i}")])
    for i, topic in enumerate(TOPICS * 2)
]
BY_ID = {m.id: m for m in MEMORIES}
runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One 30-memory pool per engine, written in six batches, closed cleanly; tests damage copies of it."""
    from mtl_graph.memory.engine.embeddings import local_embeddings

    pools = {}
    for engine in ENGINES:
        path = tmp_path_factory.mktemp("built") / engine
        with MemoryPool.open(path, local_embeddings(), engine=engine) as pool:
            for start in range(0, 30, 5):
                assert {r.status for r in pool.add_many(MEMORIES[start:start + 5])} == {"added"}
        pools[engine] = path
    return pools


def copy_of(built, engine, tmp_path):
    target = tmp_path / "pool"
    copy_tree_sparse(built[engine], target)
    return target


def fingerprint(path: Path) -> dict[str, str]:
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file() and f.name != ".lock"}


def assert_repair_recovers(path, embeddings, engine, readable, ids=None):
    """Repair rebuilds exactly the readable memories (stats and provenance intact), searchable, damage kept aside."""
    before = fingerprint(path)
    report = check_pool(path, embeddings, repair=True)
    assert report.repaired["rebuilt"] == readable == report.readable
    assert report.repaired["lost"] == 30 - readable
    backup = Path(report.repaired["backup"])
    assert backup.is_dir() and fingerprint(backup) == before  # the damaged pool is kept, untouched
    with MemoryPool.open(path, embeddings) as pool:
        assert pool.engine == engine and pool.count() == readable
        rebuilt = {m.id: m for m in pool}
        assert all(memory == BY_ID[i] for i, memory in rebuilt.items())
        assert ids is None or set(rebuilt) == ids
        if rebuilt:
            target = BY_ID[sorted(rebuilt)[0]]
            assert target.id in [h.memory.id for h in pool.search(target.description, k=3)]
    assert not check_pool(path, embeddings).damaged
    return report


# ------------------------------------------------------------------ healthy pools
@pytest.mark.parametrize("engine", ENGINES)
def test_a_healthy_pool_checks_clean_and_is_not_changed(built, engine, tmp_path, embeddings):
    path = copy_of(built, engine, tmp_path)
    before = fingerprint(path)
    report = check_pool(path, embeddings)
    assert (report.recorded, report.engine_count, report.readable, report.lost) == (30, 30, 30, 0)
    assert not report.damaged and fingerprint(path) == before
    result = runner.invoke(app, ["pool", "check", str(path), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["readable"] == 30
    result = runner.invoke(app, ["pool", "check", "--repair", str(path)])
    assert result.exit_code == 0 and "nothing to repair" in result.output
    assert fingerprint(path) == before and list(tmp_path.iterdir()) == [path]  # no backup of a healthy pool


@pytest.mark.parametrize("engine", ENGINES)
def test_the_recorded_engine_wins_over_the_setting(built, engine, tmp_path, embeddings, monkeypatch):
    path = copy_of(built, engine, tmp_path)
    other = "client" if engine == "edge" else "edge"
    monkeypatch.setenv("MTL_ENGINE", other)
    with MemoryPool.open(path, embeddings) as pool:
        assert pool.engine == engine and pool.count() == 30
    with MemoryPool.open(path, embeddings, engine=other) as pool:
        assert pool.engine == engine and pool.count() == 30
    assert not (path / other).exists()


# ------------------------------------------------------------------ metadata and whole directories
@pytest.mark.parametrize("damage", ["deleted", "garbled"])
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_data_without_pool_json_is_refused_then_repaired(built, engine, tmp_path, embeddings, damage):
    path = copy_of(built, engine, tmp_path)
    if damage == "deleted":
        (path / "pool.json").unlink()
    else:
        (path / "pool.json").write_bytes(b'{"engine": "ed\x00\xff')
    other = "client" if engine == "edge" else "edge"
    before = fingerprint(path)
    expected = f"pool {path} has {engine} data .* but no pool.json" if damage == "deleted" else "corrupt.*--repair"
    with pytest.raises(PoolError, match=expected):
        MemoryPool.open(path, embeddings, engine=other)
    assert fingerprint(path) == before and not (path / other).exists()  # nothing created, nothing rewritten
    report = check_pool(path, embeddings)
    assert report.damaged and report.readable == 30 and len(report.reembedded) == 30
    if damage == "deleted":  # the repair of the garbled case is the same code path
        assert_repair_recovers(path, embeddings, engine, 30, set(BY_ID))


@pytest.mark.parametrize("engine", ENGINES)
def test_pool_json_without_engine_data_is_refused(built, engine, tmp_path, embeddings):
    path = copy_of(built, engine, tmp_path)
    shutil.rmtree(path / engine)
    meta = (path / "pool.json").read_text()
    with pytest.raises(PoolError, match=f"pool {path}: pool.json records the {engine} engine but its data .* missing"):
        MemoryPool.open(path, embeddings)
    assert (path / "pool.json").read_text() == meta and not (path / engine).exists()
    report = check_pool(path, embeddings)
    assert report.lost == 30 and report.readable == 0
    assert_repair_recovers(path, embeddings, engine, 0)


def test_an_interrupted_creation_is_not_damage(tmp_path, embeddings):
    """pool.json and a zero ledger written, the process killed before the engine wrote anything."""
    path = tmp_path / "pool"
    with MemoryPool.open(path, embeddings):
        pass
    shutil.rmtree(path / "edge")
    with MemoryPool.open(path, embeddings) as pool:
        pool.add(MEMORIES[0])
        assert pool.count() == 1


# ------------------------------------------------------------------ Qdrant Edge files
def _rm_segments(path):
    for segment in (path / "edge" / "segments").iterdir():
        shutil.rmtree(segment)


def _rm_id_tracker(path):
    for f in (path / "edge" / "segments").glob("*/mutable_id_tracker.*"):
        f.unlink()


def _truncate_id_tracker(path):
    for f in (path / "edge" / "segments").glob("*/mutable_id_tracker.mappings"):
        os.truncate(f, 0)


@pytest.mark.parametrize("damage", [_rm_segments, _rm_id_tracker, _truncate_id_tracker])
def test_lost_segments_are_refused_not_opened_smaller(built, tmp_path, embeddings, damage):
    path = copy_of(built, "edge", tmp_path)
    damage(path)
    # Edge replays its log over the damage: the last batch (5 memories) comes back, the other 25 are gone.
    with pytest.raises(PoolError, match=f"pool {path} holds 5 memories but 30 were recorded.*check --repair"):
        MemoryPool.open(path, embeddings)
    report = check_pool(path, embeddings)
    assert (report.recorded, report.engine_count, report.readable, report.lost) == (30, 5, 5, 25)
    if damage is _rm_segments:  # the other two leave the same readable state
        assert_repair_recovers(path, embeddings, "edge", 5, {m.id for m in MEMORIES[25:]})


def _xor_bytes(file: Path, start: int, length: int) -> None:
    with open(file, "r+b") as fh:
        fh.seek(start)
        data = fh.read(length)
        fh.seek(start)
        fh.write(bytes(b ^ 0x5A for b in data))


def test_a_corrupt_payload_page_is_a_clear_error_and_the_rest_is_recovered(built, tmp_path, embeddings):
    path = copy_of(built, "edge", tmp_path)
    page = next((path / "edge" / "segments").glob("*/payload_storage/page_0.dat"))
    _xor_bytes(page, 0, 8192)
    # The open-time probe reads one point: when it lands in another segment, the first full read meets the damage.
    with pytest.raises(PoolError, match=f"pool {path}: the engine failed .*LZ4.*mtl pool check"):
        with MemoryPool.open(path, embeddings) as pool:
            list(pool)
    report = check_pool(path, embeddings)
    assert 0 < len(report.unreadable) < 30 and report.readable + len(report.unreadable) == 30
    assert all("LZ4" in u["why"] for u in report.unreadable)
    assert_repair_recovers(path, embeddings, "edge", report.readable,
                           set(BY_ID) - {u["id"] for u in report.unreadable})


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_unreadable_vectors_are_refused_and_embedded_again(built, tmp_path, embeddings, damage):
    path = copy_of(built, "edge", tmp_path)
    dense = next((path / "edge" / "segments").glob("*/vector_storage-dense"))
    if damage == "truncate":
        os.truncate(dense / "vectors" / "chunk_0.mmap", 1000)
    else:
        shutil.rmtree(dense)
    with pytest.raises(PoolError, match=f"pool {path}: .*(vector|dense).*mtl pool check"):
        MemoryPool.open(path, embeddings)
    report = check_pool(path, embeddings)
    assert report.readable == 30 and len(report.reembedded) == 30 and report.lost == 0
    if damage == "truncate":
        assert_repair_recovers(path, embeddings, "edge", 30, set(BY_ID))


def test_damage_met_after_opening_is_a_pool_error_at_the_first_read(built, tmp_path, embeddings):
    path = copy_of(built, "edge", tmp_path)
    with MemoryPool.open(path, embeddings) as pool:
        page = next((path / "edge" / "segments").glob("*/payload_storage/page_0.dat"))
        _xor_bytes(page, 0, 8192)  # the engine maps this file: it reads the damage on its next access
        with pytest.raises(PoolError, match=f"pool {path}: the engine failed (reading|searching)"):
            list(pool)
        with pytest.raises(PoolError, match=f"pool {path}: the engine failed"):
            pool.search("check the unit tests", k=30)


# ------------------------------------------------------------------ qdrant-client files
def _sqlite_of(path):
    return path / "client" / "collection" / "mtl_memories" / "storage.sqlite"


def test_a_deleted_client_database_is_refused(built, tmp_path, embeddings):
    path = copy_of(built, "client", tmp_path)
    _sqlite_of(path).unlink()
    with pytest.raises(PoolError, match=f"pool {path}: pool.json records the client engine but its data .*storage"):
        MemoryPool.open(path, embeddings)
    assert not _sqlite_of(path).exists()  # not recreated empty
    assert_repair_recovers(path, embeddings, "client", 0)


def test_a_truncated_client_database_is_refused_and_salvaged(built, tmp_path, embeddings):
    path = copy_of(built, "client", tmp_path)
    db = _sqlite_of(path)
    os.truncate(db, db.stat().st_size // 2)
    with pytest.raises(PoolError, match=f"pool {path}: the engine failed opening it .*malformed"):
        MemoryPool.open(path, embeddings)
    report = check_pool(path, embeddings)
    assert report.damaged and report.engine_count is None and 0 < report.readable < 30
    assert_repair_recovers(path, embeddings, "client", report.readable)


def test_a_corrupt_client_row_costs_only_that_memory(built, tmp_path, embeddings):
    path = copy_of(built, "client", tmp_path)
    with sqlite3.connect(_sqlite_of(path)) as con:
        rowid = con.execute("SELECT rowid FROM points ORDER BY rowid LIMIT 1 OFFSET 7").fetchone()[0]
        con.execute("UPDATE points SET point = ? WHERE rowid = ?", (b"\x00garbage", rowid))
    con.close()
    with pytest.raises(PoolError, match=f"pool {path}: the engine failed opening it"):
        MemoryPool.open(path, embeddings)
    report = check_pool(path, embeddings)
    assert report.readable == 29 and len(report.unreadable) == 1 and report.lost == 1
    assert_repair_recovers(path, embeddings, "client", 29)


# ------------------------------------------------------------------ the CLI
def test_the_cli_says_one_line_then_checks_and_repairs(built, tmp_path):
    path = copy_of(built, "edge", tmp_path)
    _rm_segments(path)
    result = runner.invoke(app, ["memories", "list", "--pool", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().count("\n") == 0 and result.output.startswith(f"error: pool {path} holds 5")
    result = runner.invoke(app, ["pool", "check", str(path)])
    assert result.exit_code == 1 and "25 lost" in result.output and "--repair" in result.output
    result = runner.invoke(app, ["pool", "check", "--repair", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["repaired"]["rebuilt"] == 5
    assert runner.invoke(app, ["memories", "stats", "--json", "--pool", str(path)]).exit_code == 0
    for location in (":memory:", "http://127.0.0.1:9", str(tmp_path / "nowhere")):
        result = runner.invoke(app, ["pool", "check", location])
        assert result.exit_code == 1 and result.output.startswith("error: ")


def test_check_refuses_a_pool_in_use(tmp_path, embeddings):
    with MemoryPool.open(tmp_path / "pool", embeddings):
        pass
    code = ("import time\nfrom mtl_graph.memory.pool.pool import MemoryPool\n"
            f"p = MemoryPool.open({str(tmp_path / 'pool')!r})\nprint('open', flush=True)\ntime.sleep(60)\n")
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "open"
        with pytest.raises(PoolLockedError):
            check_pool(tmp_path / "pool", embeddings)
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------ crashes
WRITER = """
import random, sys
from mtl_graph.memory.engine.embeddings import local_embeddings
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool

path, engine, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
words = "alpha bravo cedar delta ember fjord gamma harbor indigo juniper kelp lumen mosaic nectar orbit".split()
pool = MemoryPool.open(path, local_embeddings(), engine=engine)
n = 0
while True:
    batch = [InsightMemory(title=f"{seed}-{n + j} " + " ".join(rng.sample(words, 5)),
                           description=" ".join(rng.sample(words, 8)), content="c") for j in range(3)]
    n += 3
    for result in pool.add_many(batch):
        print("added", result.id, flush=True)
    if n % 2:  # told before: a kill after the delete but before a later print must not count the id as kept
        print("deleting", batch[0].id, flush=True)
        pool.delete(batch[0].id)
"""


@pytest.mark.parametrize("trials", [3, pytest.param(10, marks=pytest.mark.slow)])
@pytest.mark.parametrize("engine", ENGINES)
def test_sigkill_during_writes_loses_nothing_committed_and_never_blocks_opening(tmp_path, embeddings, engine, trials):
    """A writer is killed at a random point, again and again over the same pool; every open afterwards succeeds,
    holds every write that returned before the kill, and every point reads back as a valid memory."""
    import random
    import signal
    import time

    from helpers.fresh_process import Zygote

    path, rng, committed = tmp_path / "pool", random.Random(7), set()
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    # each writer a new process, forked from one that only imported what it imports (fresh_process.py)
    zygote = Zygote(["mtl_graph.memory.engine.embeddings", "mtl_graph.memory.base", "mtl_graph.memory.pool.pool"], tmp_path)
    try:
        for trial in range(trials):
            child, told = zygote.start(writer, path, engine, trial), rng.randint(1, 12)
            try:
                while len(child.out.read_text().splitlines()) < told:  # it has reported that many writes
                    assert child.poll() is None, child.err.read_text()[-2000:]
                    time.sleep(0.01)
            finally:
                if child.poll() is None:
                    os.kill(child.pid, signal.SIGKILL)  # mid-write: the child writes continuously
                child.wait(60)
            lines = child.out.read_text().splitlines()
            for line in filter(None, (line.split() for line in lines)):
                (committed.add if line[0] == "added" else committed.discard)(line[1])  # a deleting id may be gone
            with MemoryPool.open(path, embeddings) as pool:  # no false alarm, nothing lost, nothing unreadable
                stored = {m.id for m in pool}
                assert committed <= stored and pool.count() == len(stored)
            report = check_pool(path, embeddings)
            assert not report.damaged and report.readable == len(stored)
    finally:
        zygote.close()


def test_temporary_pools_of_killed_processes_are_removed_at_the_next_start(tmp_path, embeddings, monkeypatch):
    import subprocess
    import sys
    import tempfile

    code = ("import os, signal\nfrom mtl_graph.memory.pool.pool import MemoryPool\n"
            "p = MemoryPool.open(':memory:')\nprint(p._opened.cleanup, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    orphan = Path(out.strip())
    assert orphan.parent == tmp_path and orphan.is_dir() and str(os.getpid()) not in orphan.name
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with MemoryPool.open(":memory:", embeddings) as live:
        assert not orphan.exists()
        mine = live._opened.cleanup
        with MemoryPool.open(":memory:", embeddings):
            assert mine.is_dir()  # a living process's pool is never taken
    assert not mine.exists() and list(tmp_path.glob("mtl-pool-*")) == []


def test_the_ledger_tolerates_only_the_last_unconfirmed_batch(built, tmp_path, embeddings):
    """A ledger ahead of the data by at most the last batch is a lost last write (a machine crash before the engine
    synced), not damage; ahead by more is damage. A ledger behind the data is adopted."""
    from mtl_graph.memory.engine.integrity import PointLedger

    path = copy_of(built, "edge", tmp_path)
    PointLedger(path / "points.json").record(35, last_batch=5)
    with MemoryPool.open(path, embeddings) as pool:
        assert pool.count() == 30
    assert PointLedger.read(path).points == 30  # adopted
    PointLedger(path / "points.json").record(36, last_batch=5)
    with pytest.raises(PoolError, match="holds 30 memories but 36 were recorded"):
        MemoryPool.open(path, embeddings)
    PointLedger(path / "points.json").record(20)
    with MemoryPool.open(path, embeddings) as pool:
        pool.delete(MEMORIES[0].id)
    assert PointLedger.read(path).points == 29
    (path / "points.json").write_text("{oops")
    with pytest.raises(PoolError, match="points.json is corrupt"):
        MemoryPool.open(path, embeddings)
    (path / "points.json").unlink()  # a pool from before the ledger: trusted, then recorded
    with MemoryPool.open(path, embeddings) as pool:
        assert pool.count() == 29
    assert PointLedger.read(path).points == 29


def test_a_truncated_edge_wal(built, tmp_path, embeddings):
    """After a clean close the segments hold everything: a log cut short loses nothing, and one the engine cannot
    open at all is an error that the repair gets around by reading the segments without the log."""
    path = copy_of(built, "edge", tmp_path)
    os.truncate(path / "edge" / "wal" / "open-1", 100)
    with MemoryPool.open(path, embeddings) as pool:
        assert pool.count() == 30
    os.truncate(path / "edge" / "wal" / "open-1", 0)
    with pytest.raises(PoolError, match=f"pool {path}: the engine failed opening it .*WAL"):
        MemoryPool.open(path, embeddings)
    report = check_pool(path, embeddings)
    assert report.damaged and report.readable == 30
    assert_repair_recovers(path, embeddings, "edge", 30, set(BY_ID))


def test_a_truncated_edge_wal_after_a_crash_is_refused(tmp_path, embeddings):
    """Killed before any flush, the pool lives in its log: cut short, the engine opens it empty. That is an error."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "pool"
    code = ("import os, signal, sys\nfrom mtl_graph.memory.formats.insight import InsightMemory\n"
            "from mtl_graph.memory.pool.pool import MemoryPool\n"
            "pool = MemoryPool.open(sys.argv[1])\n"
            "for i in range(0, 30, 5):\n"
            "    pool.add_many([InsightMemory(title=f'Lesson {j}', description=f'Case {j} of the log test.', content='c')"
            " for j in range(i, i + 5)])\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    os.truncate(path / "edge" / "wal" / "open-1", 100)
    with pytest.raises(PoolError, match=f"pool {path} holds 0 memories but 30 were recorded"):
        MemoryPool.open(path, embeddings)
    report = check_pool(path, embeddings)
    assert (report.recorded, report.lost) == (30, 30)


def test_another_users_pool_is_one_clear_line_for_an_unprivileged_user(built):
    """Run as nobody (CI runs as root; this switches where it can): a pool it may not write is refused in one line,
    by the memory commands and by the check, and left as it was. The CLI runs from a staged copy that uid can
    read, so the test holds wherever the project was cloned (a venv under a 0700 directory included)."""
    import subprocess
    import tempfile

    from helpers.sandbox_attack_kit import NOBODY, public_tmp, unprivileged_python

    found = unprivileged_python()
    if isinstance(found, str):
        pytest.skip(found)
    exe, pythonpath = found
    parent = Path(tempfile.mkdtemp(prefix="mtl-perm-", dir=public_tmp()))
    try:
        parent.chmod(0o755)
        path = parent / "pool"
        copy_tree_sparse(built["edge"], path)
        before = fingerprint(path)
        own_tmp = parent / "tmp"  # the embedder stages its model files in the temp dir: nobody needs its own
        own_tmp.mkdir()
        os.chown(own_tmp, NOBODY, NOBODY)
        env = {"PATH": os.environ["PATH"], "HOME": str(own_tmp), "HF_HUB_OFFLINE": "1", "TMPDIR": str(own_tmp),
               "PYTHONPATH": pythonpath}
        for args in (["memories", "list", "--pool", str(path)], ["pool", "check", str(path)]):
            proc = subprocess.run([exe, "-s", "-m", "mtl_graph.cli", *args], capture_output=True, text=True,
                                  env=env, timeout=300, user=NOBODY, group=NOBODY, extra_groups=[], cwd="/")
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
            assert proc.stderr.strip() == f"error: cannot open pool {path}: Permission denied ({path / '.lock'})"
        assert fingerprint(path) == before
    finally:
        shutil.rmtree(parent)


def test_a_repair_interrupted_between_its_renames_is_not_an_empty_pool(built, tmp_path, embeddings):
    path = copy_of(built, "edge", tmp_path)
    rebuilt = tmp_path / ".pool.rebuild-4242"
    path.rename(rebuilt)  # the damaged pool moved aside, the rebuilt one not yet moved in
    with pytest.raises(PoolError, match=f"pool {path} is missing but a repair left .*rename {rebuilt} to {path}"):
        MemoryPool.open(path, embeddings)
    assert not path.exists()
    rebuilt.rename(path)
    with MemoryPool.open(path, embeddings) as pool:
        assert pool.count() == 30
