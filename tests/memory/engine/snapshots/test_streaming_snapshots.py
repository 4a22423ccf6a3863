"""Format 2 snapshots on real pools: many small batches, scrolls out of id order (namespaces), format 1 still read,
hostile archives (generated damage to every file and every batch, checksums that lie, huge declared sizes) refused
before anything changes, and memory that does not grow with the pool."""

import gzip
import hashlib
import json
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mtl_graph.memory.engine.snapshots import archive, stream
from mtl_graph.memory.engine.snapshots.archive import (
    MANIFEST,
    SnapshotError,
    create_snapshot,
    diff,
    list_snapshots,
    points_of,
    restore_snapshot,
)
from mtl_graph.memory.engine.snapshots.stream import BATCHES, LINES, NotFloat32, encode_batch, total_checksum
from mtl_graph.memory.engine.storage import StoredPoint
from mtl_graph.memory.pool.pool import MemoryPool

sys.path.insert(0, str(Path(__file__).parent))
from test_pool_snapshots import dump, memories, tag  # noqa: E402

FIXTURE = Path(__file__).parents[3] / "fixtures" / "snapshots" / "v1"
FORMAT_ONE = "written-by-format-1"


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 5 for a restore's writes and scratch copies, runs of 4 when a scroll must be sorted."""
    monkeypatch.setattr(archive, "BATCH", 5)
    monkeypatch.setattr(stream, "RUN", 4)


@pytest.fixture
def grown(pool, small_batches):
    added = memories(0, 23)
    pool.add_many(added)
    tag(pool, added[3].id, status="active", credit=0.5, note="caf\u00e9 \u2028 line")
    return pool, added


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress((path / LINES).read_bytes()).splitlines()]


def test_many_batches_restore_exactly_and_diff(grown):
    pool, added = grown
    info = create_snapshot(pool, "base", batch_size=4)
    manifest = json.loads((Path(info.path) / MANIFEST).read_text())
    assert (manifest["format_version"], manifest["batches"], manifest["batch_size"]) == (2, 6, 4)
    assert (Path(info.path) / "dense.f32").stat().st_size == 23 * 384 * 4  # binary float32 rows, nothing else
    ids = [p["id"] for p in lines_of(Path(info.path))]
    assert ids == sorted(ids) and len(set(ids)) == 23
    before = dump(pool)

    pool.add_many(memories(23, 31))
    pool.update_stats([added[1].id, added[20].id], "success")
    tag(pool, added[3].id, status="retired", extra={"k": [1, 2]})
    for gone in (added[0], added[11], added[22]):  # the first, a middle and the last of the id order... or not
        pool.delete(gone.id)
    changes = diff(points_of(pool, "base"), points_of(pool, "current"))
    assert len(changes.added) == 8 and sorted(changes.removed) == sorted(m.id for m in (added[0], added[11], added[22]))
    assert set(changes.changed) == {added[1].id, added[20].id, added[3].id}
    assert changes.changed[added[3].id] == ["extra", "status"]
    assert changes.unchanged == 23 - 3 - 3

    report = restore_snapshot(pool, "base")
    assert dump(pool) == before
    assert report.count_verified and report.checksum_verified and report.renormalised == 0
    assert (report.deleted, report.written + report.payloads, report.unchanged) == (8, 6, 17)
    # the safety snapshot holds the pool as it was, and undoes the restore
    assert list_snapshots(pool)[-1].count == 23 - 3 + 8
    assert diff(points_of(pool, "base"), points_of(pool, "current")).unchanged == 23


def test_a_namespace_scroll_out_of_id_order_is_sorted_in_runs(embeddings, tmp_path, small_batches):
    with MemoryPool.open(tmp_path / "pool", embeddings, namespace="team-a") as team, \
            MemoryPool.open(tmp_path / "pool", embeddings) as default:
        default.add_many(memories(40, 52))  # another namespace's points interleave in the engine
        team.add_many(memories(0, 17))
        scrolled = [p.id for p in team.store.scroll_points(5)]
        info = create_snapshot(team, "s", batch_size=3)
        ids = [p["id"] for p in lines_of(Path(info.path))]
        assert ids == sorted(scrolled) and info.count == 17
        if scrolled == sorted(scrolled):
            pytest.skip("this engine scrolled the namespace in id order: the sorting path was not taken")
        before = dump(team)
        team.add_many(memories(17, 20))
        team.delete(ids[7])
        assert restore_snapshot(team, "s").checksum_verified and dump(team) == before
        assert default.count() == 12
        assert not list(Path(info.path).parent.glob(".*"))  # no run or scratch directory left behind


def test_a_format_one_snapshot_is_still_restored_and_compared(pool, tmp_path):
    snaps = tmp_path / "snaps"
    shutil.copytree(FIXTURE, snaps)
    old_lines = [json.loads(line) for line in gzip.decompress((snaps / FORMAT_ONE / "points.jsonl.gz").read_bytes())
                 .splitlines()]
    pool.add_many(memories(0, 2))  # not in the snapshot (other content): removed by the restore
    [listed] = list_snapshots(snaps)
    assert (listed.name, listed.count, listed.problem) == (FORMAT_ONE, 5, None)
    report = restore_snapshot(pool, FORMAT_ONE, snaps)
    assert report.count_verified and report.checksum_verified and report.checksum == listed.checksum
    assert dump(pool) == {p["id"]: (p["dense"], (p["sparse"]["indices"], p["sparse"]["values"]), p["payload"])
                          for p in old_lines}  # every float of every vector, every payload key
    assert diff(points_of(pool, FORMAT_ONE, snaps), points_of(pool, "current", snaps)).unchanged == 5
    create_snapshot(pool, "now", snaps)  # format 2 of the same points compares equal to format 1
    same = diff(points_of(pool, FORMAT_ONE, snaps), points_of(pool, "now", snaps))
    assert (same.added, same.removed, same.changed, same.unchanged) == ([], [], {}, 5)
    damaged = snaps / FORMAT_ONE / "points.jsonl.gz"
    damaged.write_bytes(damaged.read_bytes()[:-40])
    with pytest.raises(SnapshotError, match="cannot be decompressed.*not changed"):
        restore_snapshot(pool, FORMAT_ONE, snaps)


# ------------------------------------------------------------------ hostile archives
def _rewrite_lines(path: Path, edit) -> None:
    """Edit the decompressed lines, then make every checksum agree again: only the content check can object."""
    lines = gzip.decompress((path / LINES).read_bytes()).split(b"\n")[:-1]
    lines = edit(lines)
    (path / LINES).write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))
    _reseal(path, lines)


def _reseal(path: Path, lines: list[bytes]) -> None:
    manifest = json.loads((path / MANIFEST).read_text())
    dense, row = (path / "dense.f32").read_bytes(), manifest["dim"] * 4
    records, digests, size = [], [], manifest["batch_size"]
    for index, start in enumerate(range(0, len(lines), size)):
        h = hashlib.sha256()
        for line in lines[start:start + size]:
            h.update(line + b"\n")
        h.update(dense[start * row:(start + len(lines[start:start + size])) * row])
        digests.append(h.hexdigest())
        records.append(json.dumps({"batch": index, "count": len(lines[start:start + size]), "sha256": digests[-1]}))
    (path / BATCHES).write_text("".join(r + "\n" for r in records))
    manifest["checksum"] = total_checksum(digests)
    (path / MANIFEST).write_text(json.dumps(manifest))


def _swap_two_lines(lines):
    lines[2], lines[3] = lines[3], lines[2]
    return lines


def _duplicate_an_id(lines):
    point = json.loads(lines[4])
    point["id"] = json.loads(lines[3])["id"]
    lines[4] = json.dumps(point, sort_keys=True, separators=(",", ":")).encode()
    return lines


def _point_edit(change):
    def edit(lines):
        point = json.loads(lines[6])
        change(point)
        lines[6] = json.dumps(point, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()
        return lines
    return edit


def _nan_vector(path: Path) -> None:
    data = bytearray((path / "dense.f32").read_bytes())
    data[384 * 4 * 5: 384 * 4 * 5 + 4] = np.array([np.nan], "<f4").tobytes()
    (path / "dense.f32").write_bytes(bytes(data))
    _reseal(path, gzip.decompress((path / LINES).read_bytes()).split(b"\n")[:-1])


def _lying_batch_record(path: Path) -> None:
    """A batch edited and its record's checksum made to match it: the manifest's checksum still objects."""
    lines = gzip.decompress((path / LINES).read_bytes()).split(b"\n")[:-1]
    point = json.loads(lines[0])
    point["payload"]["status"] = "forged"
    lines[0] = json.dumps(point, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    (path / LINES).write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))
    manifest_checksum = json.loads((path / MANIFEST).read_text())["checksum"]
    _reseal(path, lines)
    manifest = json.loads((path / MANIFEST).read_text())
    (path / MANIFEST).write_text(json.dumps({**manifest, "checksum": manifest_checksum}))


def _record_edit(**changes):
    def edit(path: Path) -> None:
        records = (path / BATCHES).read_text().splitlines()
        records[1] = json.dumps({**json.loads(records[1]), **changes})
        (path / BATCHES).write_text("\n".join(records) + "\n")
    return edit


def _append(name: str, data: bytes):
    def edit(path: Path) -> None:
        with open(path / name, "ab") as fh:
            fh.write(data)
    return edit


HOSTILE = {
    "lines out of id order": (lambda p: _rewrite_lines(p, _swap_two_lines), "is not after"),
    "an id twice": (lambda p: _rewrite_lines(p, _duplicate_an_id), "is not after"),
    "negative sparse index": (lambda p: _rewrite_lines(p, _point_edit(lambda d: d["sparse"].update(indices=[-1] * len(
        d["sparse"]["indices"])))), "sparse indices"),
    "payload not an object": (lambda p: _rewrite_lines(p, _point_edit(lambda d: d.update(payload=[1]))), "payload"),
    "an extra key": (lambda p: _rewrite_lines(p, _point_edit(lambda d: d.update(dense=[0.5]))), "not a point"),
    "not canonical": (lambda p: _rewrite_lines(p, lambda ls: ls[:6] + [json.dumps(json.loads(ls[6])).encode()] + ls[7:]),
                      "not a point line"),
    "a line that is not JSON": (lambda p: _rewrite_lines(p, lambda ls: ls[:6] + [ls[6][:-1] + b" nonsense"] + ls[7:]),
                                "line 7"),
    "NaN in a vector": (_nan_vector, "NaN"),
    "a batch checksum that lies": (_lying_batch_record, "manifest's checksum"),
    "a batch declaring more points": (_record_edit(count=10 ** 9), "declares 1000000000 points"),
    "a record out of sequence": (_record_edit(batch=7), "not a batch record"),
    "trailing points": (_append(BATCHES, b'{"batch": 99}\n'), "more than"),
    "a trailing line": (lambda p: (p / LINES).write_bytes(gzip.compress(gzip.decompress((p / LINES).read_bytes())
                                                                        + b'{"id":"zzz"}\n')), "more than"),
    "a line without its newline": (lambda p: (p / LINES).write_bytes(gzip.compress(
        gzip.decompress((p / LINES).read_bytes())[:-1])), "ends inside batch"),
    "trailing vector bytes": (_append("dense.f32", b"\0" * 16), "bytes"),
    "a huge line": (lambda p: _rewrite_lines(p, lambda ls: ls[:6] + [ls[6][:-1] + b" " * (2 ** 20) + b"}"] + ls[7:]),
                    "line 7"),
    "a linked payload file": (lambda p: ((p / LINES).unlink(), (p / LINES).symlink_to("/dev/zero")), "missing"),
    "a truncated payload file": (lambda p: (p / LINES).write_bytes((p / LINES).read_bytes()[:-25]), "decompressed"),
    "an empty payload file": (lambda p: (p / LINES).write_bytes(b""), f"{LINES} ends inside batch 0"),
    "a truncated vector file": (lambda p: (p / "dense.f32").write_bytes((p / "dense.f32").read_bytes()[:-4]),
                                "bytes"),
    "the wrong file as vectors": (lambda p: shutil.copyfile(p / LINES, p / "dense.f32"), "bytes"),
    "the wrong file as payloads": (lambda p: shutil.copyfile(p / BATCHES, p / LINES), "decompressed"),
    "an empty manifest": (lambda p: (p / MANIFEST).write_text(""), "not valid JSON"),
    "the wrong file as manifest": (lambda p: shutil.copyfile(p / BATCHES, p / MANIFEST), "not valid JSON"),
}


@pytest.mark.parametrize("damage", HOSTILE, ids=str)
def test_a_hostile_archive_is_one_error_and_changes_nothing(grown, damage, monkeypatch):
    pool, _ = grown
    monkeypatch.setattr(stream, "MAX_LINE", 2 ** 20)
    info = create_snapshot(pool, "s", batch_size=4)
    pool.add_many(memories(23, 25))
    before, listed = dump(pool), [i.name for i in list_snapshots(pool)]
    edit, says = HOSTILE[damage]
    edit(Path(info.path))
    with pytest.raises(SnapshotError) as raised:
        restore_snapshot(pool, "s")
    message = str(raised.value)
    assert "\n" not in message and says in message and message.endswith("the pool was not changed"), message
    assert dump(pool) == before and [i.name for i in list_snapshots(pool)] == listed  # no safety snapshot either


def test_every_flipped_byte_of_every_file_is_caught(grown):
    """A byte flipped at random places in each file of each batch: never a silent restore."""
    pool, _ = grown
    info = create_snapshot(pool, "s", batch_size=4)
    pool.add_many(memories(23, 24))
    before = dump(pool)
    rng = random.Random(32)
    # (the manifest's descriptive fields, created_at or pool, are not data: its checked fields are in HOSTILE)
    pristine = {f: (Path(info.path) / f).read_bytes() for f in (LINES, BATCHES, "dense.f32")}
    for name, data in pristine.items():
        for position in sorted(rng.sample(range(len(data)), 6)):
            damaged = bytearray(data)
            damaged[position] ^= 1 << rng.randrange(8)
            (Path(info.path) / name).write_bytes(bytes(damaged))
            with pytest.raises(SnapshotError, match="not changed"):
                restore_snapshot(pool, "s")
            (Path(info.path) / name).write_bytes(data)
    assert dump(pool) == before
    restore_snapshot(pool, "s")  # and the undamaged snapshot still restores


def test_diff_of_a_damaged_snapshot_is_an_error(grown):
    pool, _ = grown
    info = create_snapshot(pool, "s", batch_size=4)
    data = bytearray((Path(info.path) / "dense.f32").read_bytes())
    data[-3] ^= 0x10  # the last batch: found only at the end of the walk
    (Path(info.path) / "dense.f32").write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="batch 5 .*does not match its checksum"):
        diff(points_of(pool, "s"), points_of(pool, "current"))


def test_vectors_not_exact_in_float32_are_kept_in_float64():
    exact = [StoredPoint(f"{i:032x}", [0.5, -0.25, 1.0], ([], []), {}) for i in range(3)]
    assert {e.dtype for e in encode_batch(exact, 3, "<f4")} == {"<f4"}
    finer = exact + [StoredPoint("f" * 32, [0.1, 0.2, 0.3], ([1], [1.0]), {"k": "v"})]
    with pytest.raises(NotFloat32):
        encode_batch(finer, 3, "<f4")
    [*_, last] = encode_batch(finer, 3, "<f4", strict=False)
    assert last.dtype == "<f8" and last.point().dense == [0.1, 0.2, 0.3]
    with pytest.raises(SnapshotError, match="NaN"):
        encode_batch([StoredPoint("a", [float("nan")] * 3, ([], []), {})], 3, "<f4")
    with pytest.raises(SnapshotError, match="not 3 numbers"):
        encode_batch([StoredPoint("a", [1.0] * 2, ([], []), {})], 3, "<f4")


# ------------------------------------------------------------------ memory stays flat
RSS_PROBE = textwrap.dedent("""
    import json, sys, uuid
    import numpy as np
    from mtl_graph.memory.engine.embeddings import local_embeddings
    from mtl_graph.memory.engine.snapshots import archive, stream
    from mtl_graph.memory.engine.storage import StoredPoint
    from mtl_graph.memory.pool.pool import MemoryPool

    def kib(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1])

    n, where = int(sys.argv[1]), sys.argv[2]
    archive.BATCH, stream.RUN = 64, 256  # what a million-point pool is to the defaults
    rng = np.random.default_rng(n)
    with MemoryPool.open(where, local_embeddings()) as pool:
        for start in range(0, n, 500):
            rows = rng.standard_normal((min(500, n - start), 384)).astype(np.float32)
            pool.store.upsert([StoredPoint(str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | start + i)),
                                           row.tolist(), ([1, 2], [0.5, 0.25]),
                                           {"memory": {"content": "x" * 800, "n": start + i}})
                               for i, row in enumerate(rows)])
        archive.create_snapshot(pool, "warm", batch_size=64)  # the engine's own caches filled once
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # the peak starts again from here
        base = kib("VmRSS:")
        archive.create_snapshot(pool, "a", batch_size=64)
        archive.diff(archive.points_of(pool, "a"), archive.points_of(pool, "current"))
        report = archive.restore_snapshot(pool, "a")
        assert report.checksum_verified
        print(json.dumps({"extra_kib": kib("VmHWM:") - base}))
""")


def _extra_peak_kib(n: int, tmp_path: Path) -> int:
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, str(n), str(tmp_path / f"pool-{n}")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["extra_kib"]


def test_memory_stays_flat_as_the_pool_grows(tmp_path):
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc to reset and read the peak RSS")
    small, large = _extra_peak_kib(400, tmp_path), _extra_peak_kib(3200, tmp_path)
    # whole-pool lists of points (as format 1 held them) would add ~12 KB a point: 34 MB more for 2,800 points
    assert large - small < 8 * 1024, (small, large)
