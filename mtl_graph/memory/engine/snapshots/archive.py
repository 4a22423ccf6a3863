"""Pool snapshots: a point-exact copy of a pool (vectors and whole payloads) that a restore gives back exactly.

A snapshot is a directory `<root>/<NAME>/` holding the points in id order (stream.py: `payloads.jsonl.gz`, one
canonical JSON line per point with its id, sparse vector and payload verbatim; `dense.f32`, the dense vectors as
binary floats; `batches.jsonl`, a checksum per batch) and `manifest.json` (name, created_at, count, checksum,
embeddings and dim, pool, namespace, format version, batch size). Snapshots of format 1 (one JSON line per point
with decimal vectors, format.py) are still listed, restored and compared. The root is `<pool dir>/snapshots` for a directory
pool; a ":memory:" or server pool has no directory of its own, so the caller names one. A namespace other than the
default keeps its snapshots in `@<namespace>` under that root (`snapshot_root`): each team lists, restores and diffs
its own only.

Create, restore and diff stream: each holds one batch of points at a time, whatever the pool's size (a format-1
snapshot is still read whole). Every engine scrolls in id order, so a diff or a restore walks two id-ordered streams
side by side. A snapshot is written into a hidden temporary directory and renamed into place: a crash never leaves
a half snapshot under a listed name. A restore reads and verifies the whole snapshot (every batch's checksum, every
line parsed and checked, count and checksum) before it touches the pool, takes a safety snapshot
(`before-restore-<UTC time>`) so it can itself be undone, writes only what differs (the safety snapshot and the
snapshot walked side by side), reads every point it wrote back from the pool and compares it with the snapshot's
bytes, checks every point it deleted is gone and the count; the points it left alone are the safety snapshot's, read
from the pool under the write lock and equal to the snapshot's byte for byte (`full_check`: the whole pool read
again point by point, its checksum recomputed, as before).
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import shutil
import tempfile
import time
from array import array
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ContextManager, Iterable, Iterator

import numpy as np

from mtl_graph.memory.engine.embeddings import embeddings_name
from mtl_graph.memory.engine.namespace import DEFAULT_NAMESPACE
from mtl_graph.memory.engine.snapshots.format import (
    CURRENT,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    POINTS,
    SnapshotError,
    SnapshotInfo,
    canonical,
    check_embeddings,
    check_name,
    checksum,
    digest,
    list_snapshots,
    load_snapshot,
    read_manifest,
    snapshot_dir,
    snapshot_info,
    snapshot_root,
)
from mtl_graph.memory.engine.snapshots.stream import (
    BATCHES,
    DEFAULT_BATCH,
    DENSE_FILES,
    LINES,
    MAX_BATCH,
    Encoded,
    FormatOneSource,
    NotFloat32,
    OutOfOrder,
    Reader,
    Writer,
    batch_digest,
    chunks,
    encode_batch,
    in_id_order,
    open_source,
    sorted_by_id,
    total_checksum,
)
from mtl_graph.memory.engine.storage import Conditions, StoredPoint, point_batches

__all__ = ["MANIFEST", "POINTS", "PoolDiff", "RestoreReport", "SnapshotError", "SnapshotInfo", "check_name",
           "create_snapshot", "diff", "list_snapshots", "load_snapshot", "points_of", "restore_snapshot",
           "snapshot_root"]

SAFETY_PREFIX = "before-restore-"
BATCH = DEFAULT_BATCH
"""Points per batch of a new snapshot, and per write of a restore."""
RENORMALISED_TOLERANCE = 1e-6
"""Largest per-component change a restore accepts in a dense vector the engine normalised again on write
(qdrant-client's local mode divides every cosine vector by its float32 norm, which can move the last bit)."""


@dataclass
class RestoreReport:
    """What a restore did and how it was verified."""

    name: str
    count: int
    checksum: str
    safety_snapshot: str
    count_verified: bool = False
    checksum_verified: bool = False
    """Every point of the pool is the snapshot's byte for byte, so the pool's checksum is the manifest's (the
    points written read back, the others the safety snapshot's; full_check: recomputed from the whole pool)."""
    renormalised: int = 0
    """Points whose dense vector the engine normalised again (within RENORMALISED_TOLERANCE; 0 on Qdrant Edge)."""
    deleted: int = 0
    written: int = 0
    payloads: int = 0
    """Points whose vectors were already right and only the payload was rewritten."""
    unchanged: int = 0
    full_check: bool = False
    """The whole pool was read again afterwards (else: the points written read back, the count checked)."""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PoolDiff:
    """What changed from A to B: ids only in B (added), only in A (removed), and in both but different."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: dict[str, list[str]] = field(default_factory=dict)
    """id -> the fields that differ: memory fields by name (stats, content, ...), other payload keys by name
    (status, credit, ...), and dense / sparse for the vectors."""
    unchanged: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------ create and list
@contextmanager
def _bulk() -> Iterator[None]:
    """The cyclic garbage collector paused for a whole-pool pass: a batch is thousands of new dicts and lists (none
    in a cycle, all freed by reference counting), and every few hundred allocations would start a collection that
    walks the process's live objects again (a third of a create's time at 20k points)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _live_points(pool: Any, batch: int | None = None) -> Iterator[StoredPoint]:
    """The pool's points whole, in the engine's scroll order (id order unless the scroll is filtered)."""
    return pool.store.scroll_points(batch or BATCH)


def _encoded_scroll(pool: Any, batch: int, dtype: str) -> Iterator[list[Encoded]]:
    for points in point_batches(pool.store, batch):
        yield encode_batch(points, pool.dim, dtype)


def _live_encoded(pool: Any, batch: int, dtype: str) -> Iterator[Encoded]:
    """The live pool's points in canonical form straight from the scroll, checked to come in id order (OutOfOrder:
    a namespace's filtered scroll comes in index order; NotFloat32: the engine keeps finer vectors than `dtype`;
    either way the caller reads the pool through a scratch snapshot instead)."""
    return in_id_order((e for b in _encoded_scroll(pool, batch, dtype) for e in b), "the scroll")


def _with_digests(points: Iterable[Encoded], size: int, digests: list[str]) -> Iterator[Encoded]:
    """The points as they pass, their batch digests (batches of `size`, as a snapshot's) appended to `digests`."""
    for batch in chunks(points, size):
        digests.append(batch_digest(batch))
        yield from batch


def _write_points(pool: Any, directory: Path, dtype: str, batch_size: int) -> Writer:
    """The pool's points into `directory` in id order: straight from the scroll while it is in id order; a scroll
    that is not (a namespace's: a filtered scroll comes in index order) is read again and sorted with bounded
    memory."""
    writer = Writer(directory, dtype)
    try:
        try:
            for batch in chunks(_live_encoded(pool, batch_size, dtype), batch_size):
                writer.write(batch)
        except OutOfOrder:
            writer.abort()
            writer = Writer(directory, dtype)
            scratch = directory / ".runs"
            scratch.mkdir()
            ordered = sorted_by_id(_encoded_scroll(pool, batch_size, dtype), scratch, dtype, pool.dim)
            for batch in chunks(in_id_order(ordered, "the pool"), batch_size):  # an id twice would be an error
                writer.write(batch)
            shutil.rmtree(scratch)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return writer


def _write_snapshot(pool: Any, directory: Path, name: str, batch_size: int, dtype: str = "<f4") -> dict[str, Any]:
    """Every point of the pool and the manifest into `directory` (a temporary one): the manifest."""
    with pool.write_lock:  # writers in this process wait: the snapshot is one state of the pool
        try:
            writer = _write_points(pool, directory, dtype, batch_size)
        except NotFloat32:  # an engine that keeps more than float32: write every vector in float64
            for leftover in directory.iterdir():
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
            writer = _write_points(pool, directory, "<f8", batch_size)
        manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
                    "created_at": _utc_now().isoformat(timespec="milliseconds"), "count": writer.count,
                    "checksum": total_checksum(writer.digests), "embeddings": embeddings_name(pool.embeddings),
                    "dim": pool.dim, "pool": str(pool.location), "engine": pool.engine,
                    "namespace": getattr(pool, "namespace", DEFAULT_NAMESPACE), "batch_size": batch_size,
                    "batches": len(writer.digests), "dense_dtype": writer.dtype,
                    "files": [LINES, DENSE_FILES[writer.dtype], BATCHES]}
        with open(directory / MANIFEST, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
    return manifest


def _check_batch_size(size: Any) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_BATCH:
        raise SnapshotError(f"batch size {size!r} is not 1..{MAX_BATCH}")
    return size


def create_snapshot(pool: Any, name: str, directory: str | Path | None = None, *, force: bool = False,
                    batch_size: int | None = None) -> SnapshotInfo:
    """Write every point of the pool (vectors and whole payloads) as snapshot `name`, streaming in batches of
    `batch_size` points (default BATCH); an existing name is an error unless force (then it is replaced only once
    the new one is complete)."""
    check_name(name)
    size = _check_batch_size(BATCH if batch_size is None else batch_size)
    root = snapshot_root(pool, directory)
    target = root / name
    if (target.exists() or target.is_symlink()) and not force:
        raise SnapshotError(f"snapshot {name} already exists in {root} (choose another name, or --force)")
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = root / f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir(mode=0o700)
    except OSError as exc:
        raise SnapshotError(f"cannot write snapshots in {root}: {exc.strerror or exc}") from None
    try:
        with _bulk():
            manifest = _write_snapshot(pool, tmp, name, size)
        _move_into_place(tmp, target, force)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise SnapshotError(f"cannot write snapshot {name} in {root}: {exc.strerror or exc}") from None
        if isinstance(exc, SnapshotError):
            raise SnapshotError(f"cannot write snapshot {name}: {exc}") from None
        raise
    return snapshot_info(target, manifest)


@contextmanager
def _pool_as_snapshot(pool: Any, directory: str | Path | None, batch_size: int | None = None,
                      dtype: str = "<f4") -> Iterator[Reader]:
    """The live pool written as a scratch snapshot (hidden, removed after) and read back in id order: how a diff
    or a restore's check walks a pool whose scroll need not be in id order, in bounded memory."""
    try:
        root = snapshot_root(pool, directory)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except SnapshotError:  # a :memory: pool with no --dir: the system's temporary directory
        root = None
    scratch = Path(tempfile.mkdtemp(prefix=".scratch-", dir=root))
    try:
        (scratch / "pool").mkdir()
        manifest = _write_snapshot(pool, scratch / "pool", "pool", batch_size or BATCH, dtype)
        yield Reader(scratch / "pool", manifest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _move_into_place(tmp: Path, target: Path, force: bool) -> None:
    old = None
    if force and (target.exists() or target.is_symlink()):
        old = target.with_name(f".{target.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
        os.rename(target, old)
    try:
        os.rename(tmp, target)  # fails, rather than merging, when a snapshot of that name appeared meanwhile
    except OSError:
        if old is not None:
            os.rename(old, target)
        if target.exists():
            raise SnapshotError(f"snapshot {target.name} already exists in {target.parent}") from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a machine crash
    finally:
        os.close(fd)


def _open(root: Path, name: str, embeddings: tuple[str, int] | None = None) -> tuple[Reader | FormatOneSource,
                                                                                      SnapshotInfo]:
    path = snapshot_dir(root, name)
    manifest = read_manifest(path)
    check_embeddings(name, manifest, embeddings)
    return open_source(path, manifest), snapshot_info(path, manifest)


def merge(a: Iterable[Encoded], b: Iterable[Encoded]) -> Iterator[tuple[str, Encoded | None, Encoded | None]]:
    """Two id-ordered streams side by side: (id, its point in A or None, its point in B or None), in id order."""
    a, b = iter(a), iter(b)
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x.id < y.id):
            yield x.id, x, None  # type: ignore[union-attr]
            x = next(a, None)
        elif x is None or y.id < x.id:
            yield y.id, None, y
            y = next(b, None)
        else:
            yield x.id, x, y
            x, y = next(a, None), next(b, None)


# ------------------------------------------------------------------ restore
def _safety_name(root: Path) -> str:
    base = SAFETY_PREFIX + _utc_now().strftime("%Y%m%dT%H%M%SZ")
    name, n = base, 1
    while (root / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _decoded(e: Encoded, what: str) -> StoredPoint:
    try:
        return e.point()
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise SnapshotError(f"{what} is corrupt: the line of point {e.id} is not a point ({exc})") from None


def restore_snapshot(pool: Any, name: str, directory: str | Path | None = None, *,
                     full_check: bool = False) -> RestoreReport:
    """Give the pool back exactly the points of snapshot `name`. The snapshot is verified whole first (any problem:
    one SnapshotError, nothing changed); the pool's current state is kept as a safety snapshot. Afterwards every
    point written is read back and compared, every point deleted must be gone, and the count must match (the points
    left alone are the safety snapshot's, read from the pool under the write lock and equal to the snapshot's byte
    for byte); full_check: the whole pool is read again and compared point by point, its checksum recomputed."""
    with _bulk():
        return _restore(pool, name, directory, full_check)


def _restore(pool: Any, name: str, directory: str | Path | None, full_check: bool) -> RestoreReport:
    started = time.perf_counter()
    root = snapshot_root(pool, directory)
    try:
        source, info = _open(root, name, (embeddings_name(pool.embeddings), pool.dim))
        source.verify()
    except SnapshotError as exc:
        raise SnapshotError(f"{exc}; the pool was not changed") from None
    with pool.write_lock:
        safety = create_snapshot(pool, _safety_name(root), directory)  # into `root` too
        report = RestoreReport(name, info.count, info.checksum, safety.name, full_check=full_check)
        try:
            current, _ = _open(root, safety.name)
            _apply(pool, current.points(), source.points(), report, check=not full_check)
        except SnapshotError as exc:
            raise SnapshotError(f"restore of {name} stopped: {exc}; the pool as it was before is snapshot "
                                f"{safety.name}") from None
        if report.written or report.deleted:
            pool.store.optimize()  # as after any write: Qdrant Edge indexes the changed tail in the background
        getattr(pool, "contents_changed", lambda: None)()
        if full_check:
            _verify(pool, source, info, report, directory)
        else:
            _check_count(pool, info, report)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _check_count(pool: Any, info: SnapshotInfo, report: RestoreReport) -> None:
    """After a restore whose writes were each read back (`_check_written`): the pool holds the snapshot's count, so
    (the untouched points being the safety snapshot's) every point is the snapshot's and so is the checksum."""
    count = pool.store.count()
    report.count_verified = count == info.count == report.unchanged + report.written + report.payloads
    report.checksum_verified = report.count_verified and report.renormalised == 0
    if not report.count_verified:
        raise _not_verified(report, f"the pool holds {count} points, the snapshot {info.count}")


def _apply(pool: Any, current: Iterable[Encoded], wanted: Iterable[Encoded], report: RestoreReport,
           check: bool = True) -> None:
    """Write what differs, walking the pool's points (its safety snapshot) and the snapshot's side by side; check:
    every BATCH changes written, the points written are read back from the pool and compared with the snapshot's
    bytes, and the deleted ones must be gone (`_check_written`)."""
    doomed: list[str] = []
    upserts: list[StoredPoint] = []
    payloads: list[tuple[str, dict[str, Any]]] = []
    written: list[Encoded] = []

    def flush() -> None:
        with _one_change(pool):
            if doomed:
                pool.store.delete(list(doomed))
            if upserts:
                pool.store.upsert(list(upserts))
            for point_id, payload in payloads:
                pool.store.set_payload(point_id, payload)
        if check:
            _check_written(pool, written, doomed, report)
        for pending in (doomed, upserts, payloads, written):
            pending.clear()

    for point_id, old, new in merge(current, wanted):
        if new is None:
            doomed.append(point_id)
            report.deleted += 1
        elif old is not None and old.line == new.line and old.same_vector(new):
            report.unchanged += 1
        else:
            point = _decoded(new, f"snapshot {report.name}")
            before = None if old is None or not old.same_vector(new) else _decoded(old, "the safety snapshot")
            if (before is None or list(before.sparse[0]) != list(point.sparse[0])
                    or list(before.sparse[1]) != list(point.sparse[1]) or not set(before.payload) <= set(point.payload)):
                upserts.append(point)  # a whole-point write: a payload write may merge (keep keys the snapshot lacks)
                report.written += 1
            else:
                payloads.append((point_id, point.payload))  # vectors untouched: normalising on write cannot move them
                report.payloads += 1
            written.append(new)
        if len(doomed) + len(written) >= BATCH:
            flush()
    flush()


def _one_change(pool: Any) -> ContextManager[Any]:
    """The pool's maintained statistics (memory/pool/stats.py) recorded once for a batch of writes, not once for each
    payload write (two record files each; a pool without them: nothing)."""
    maintained = getattr(pool, "maintained", None)
    return maintained.batch() if maintained is not None else nullcontext()


def _check_written(pool: Any, written: list[Encoded], doomed: list[str], report: RestoreReport) -> None:
    """The points just written read back from the pool (by id, whole) equal the snapshot's, byte for byte (a dense
    vector the engine only normalised again is counted in `report.renormalised`), and the points just deleted are
    gone: SnapshotError otherwise (`_restore` adds which safety snapshot holds the pool as it was)."""
    ids = [e.id for e in written] + doomed
    if not ids:
        return
    wanted = {e.id: e for e in written}
    found: set[str] = set()
    dtype = written[0].dtype if written else "<f4"
    for batch in point_batches(pool.store, len(ids), Conditions(only_ids=ids)):
        for got in encode_batch(batch, pool.dim, dtype, strict=False):
            want = wanted.get(got.id)
            if want is None or got.id in found:
                raise _written_wrong(f"point {got.id} is in the pool more often than the snapshot holds it "
                                     "(deleted, or twice)")
            if got.line != want.line or not (got.same_vector(want) or _renormalised(got, want)):
                raise _written_wrong(f"point {got.id} reads back otherwise than the snapshot holds it")
            found.add(got.id)
            report.renormalised += not got.same_vector(want)
    if len(found) != len(written):
        raise _written_wrong(f"{len(written) - len(found)} of the {len(written)} points written are not in the pool")


def _written_wrong(why: str) -> SnapshotError:
    return SnapshotError(f"what it wrote did not verify: {why}")


def _not_verified(report: RestoreReport, why: str) -> SnapshotError:
    return SnapshotError(f"restore of {report.name} did not verify: {why}; the pool as it was before is snapshot "
                         f"{report.safety_snapshot}")


def _verify(pool: Any, source: Reader | FormatOneSource, info: SnapshotInfo, report: RestoreReport,
            directory: str | Path | None) -> None:
    """The pool read again in id order and compared point by point with the snapshot; count and checksum
    recomputed from it (in the snapshot's batch size and dtype); a dense vector the engine only normalised again is
    counted. The pool is read straight from its scroll, or written as a scratch snapshot first when its scroll is
    not in id order or its vectors are finer than the snapshot's."""
    one = isinstance(source, FormatOneSource)
    size, dtype = (BATCH, "<f4") if one else (source.manifest["batch_size"], source.dtype)
    try:
        try:
            digests: list[str] = []
            live, wrong = _compare(_with_digests(_live_encoded(pool, size, dtype), size, digests), source, report)
            recomputed = total_checksum(digests)
        except (OutOfOrder, NotFloat32):
            report.renormalised = 0
            with _pool_as_snapshot(pool, directory, size, dtype) as now:
                live, wrong = _compare(now.points(), source, report)
                recomputed = now.manifest["checksum"]
    except SnapshotError as exc:
        raise SnapshotError(f"restore of {info.name} did not verify: {exc}; the pool as it was before is snapshot "
                            f"{report.safety_snapshot}") from None
    if one:  # format 1's checksum is order-free over its own lines: recomputed as it was made
        recomputed = checksum(digest(canonical(p)) for p in _live_points(pool))
    count = pool.store.count()
    report.count_verified = count == live == info.count
    report.checksum_verified = recomputed == info.checksum
    if not report.count_verified or wrong:
        raise SnapshotError(f"restore of {info.name} did not verify: the pool holds {count} points "
                            f"({wrong} differ from the snapshot), the snapshot {info.count}; the pool "
                            f"as it was before is snapshot {report.safety_snapshot}")


def _compare(now: Iterable[Encoded], source: Reader | FormatOneSource, report: RestoreReport) -> tuple[int, int]:
    """(points in the pool, points that differ from the snapshot) walking both side by side."""
    live, wrong = 0, 0
    for _, got, wanted in merge(now, source.points()):
        live += got is not None
        if got is None or wanted is None or got.line != wanted.line:
            wrong += 1
        elif not got.same_vector(wanted):
            if _renormalised(got, wanted):
                report.renormalised += 1
            else:
                wrong += 1
    return live, wrong


def _renormalised(got: Encoded, wanted: Encoded) -> bool:
    a, b = got.vector(), wanted.vector()
    return a.shape == b.shape and bool(np.max(np.abs(a - b), initial=0.0) <= RENORMALISED_TOLERANCE)


# ------------------------------------------------------------------ diff
class PointStream:
    """The points of a snapshot or of the live pool in id order, read as they are iterated (one batch at a time):
    iterate for StoredPoints, or `encoded()` for their canonical form (what `diff` compares)."""

    def __init__(self, encoded: Any, points: Any = None, what: str = "", scratch: Any = None) -> None:
        self._encoded, self._points, self.what, self._scratch = encoded, points, what, scratch
        self.direct = True
        """Read the live pool straight from its scroll (False once it came out of id order: a scratch snapshot)."""

    def encoded(self) -> Iterator[Encoded]:
        return self._encoded() if self.direct or self._scratch is None else self._scratch()

    def __iter__(self) -> Iterator[StoredPoint]:
        if self._points is not None:
            return self._points()
        return (_decoded(e, self.what) for e in self._encoded())


def points_of(pool: Any, name: str, directory: str | Path | None = None) -> PointStream:
    """The points of snapshot `name` in id order (each batch checked as it is read, the whole at the end), or of the
    live pool for "current" (iterated: in scroll order; `encoded()`: in id order, from a scratch snapshot)."""
    if name == CURRENT:
        def scratch() -> Iterator[Encoded]:
            with _pool_as_snapshot(pool, directory) as now:
                yield from now.points()

        return PointStream(lambda: _live_encoded(pool, BATCH, "<f4"), lambda: _live_points(pool), "the pool",
                           scratch)
    source, _ = _open(snapshot_root(pool, directory), name)
    return PointStream(source.points, what=f"snapshot {name}")


def _as_encoded(points: Iterable[StoredPoint] | PointStream) -> Iterator[Encoded]:
    if isinstance(points, PointStream):
        return points.encoded()
    ordered = sorted(points, key=lambda p: p.id)  # plain points (a list, a scroll): put in id order here
    return (e for batch in chunks(ordered, BATCH) for e in encode_batch(batch, len(batch[0].dense), "<f4", strict=False))


def changed_fields(a: StoredPoint, b: StoredPoint) -> list[str]:
    """The fields that differ: memory fields by name, other payload keys by name, dense and sparse."""
    names = set()
    if array("d", a.dense) != array("d", b.dense):
        names.add("dense")
    if [list(v) for v in a.sparse] != [list(v) for v in b.sparse]:
        names.add("sparse")
    old, new = a.payload.get("memory"), b.payload.get("memory")
    if isinstance(old, dict) and isinstance(new, dict):
        names |= {k for k in old.keys() | new.keys() if old.get(k, ...) != new.get(k, ...)}
    elif old != new:
        names.add("memory")
    names |= {k for k in a.payload.keys() | b.payload.keys()
              if k != "memory" and a.payload.get(k, ...) != b.payload.get(k, ...)}
    return sorted(names)


def diff(a: Iterable[StoredPoint] | PointStream, b: Iterable[StoredPoint] | PointStream) -> PoolDiff:
    """What changed from the points of A to those of B (`points_of` streams, or any points), walked side by side
    in id order: only the points whose bytes differ are parsed. The live pool is read straight from its scroll; one
    whose scroll is not in id order (or holds vectors finer than float32) is read again through a scratch
    snapshot."""
    a, b = (x if isinstance(x, PointStream) else list(x) for x in (a, b))  # plain points are sorted whole anyway
    with _bulk():
        try:
            return _diff(a, b)
        except (OutOfOrder, NotFloat32):
            for stream in (a, b):
                if isinstance(stream, PointStream):
                    stream.direct = False
            return _diff(a, b)


def _diff(a: Iterable[StoredPoint] | PointStream, b: Iterable[StoredPoint] | PointStream) -> PoolDiff:
    out = PoolDiff()
    what_a, what_b = (getattr(x, "what", "") or "A" for x in (a, b))
    for point_id, old, new in merge(_as_encoded(a), _as_encoded(b)):
        if old is None:
            out.added.append(point_id)
        elif new is None:
            out.removed.append(point_id)
        elif old.line == new.line and old.same_vector(new):
            out.unchanged += 1
        elif names := changed_fields(_decoded(old, what_a), _decoded(new, what_b)):
            out.changed[point_id] = names
        else:
            out.unchanged += 1
    return out
