"""Pool snapshots: a point-exact copy of a pool (vectors and whole payloads) that a restore gives back exactly.

A snapshot is a directory `<root>/<NAME>/` holding `points.jsonl.gz` (one canonical JSON object per point: id,
dense and sparse vectors, the payload verbatim, whatever keys it has) and `manifest.json` (name, created_at, count,
checksum, embeddings and dim, pool, namespace, format version). The root is `<pool dir>/snapshots` for a directory
pool; a ":memory:" or server pool has no directory of its own, so the caller names one. A namespace other than the
default keeps its snapshots in `@<namespace>` under that root (`snapshot_root`): each team lists, restores and diffs
its own only.

The checksum is order-free (sha256 over the sorted sha256 digests of the points' canonical lines), so it can be
recomputed from a live pool in whatever order the engine scrolls. A snapshot is written into a hidden temporary
directory and renamed into place: a crash never leaves a half snapshot under a listed name. A restore reads and
verifies the whole snapshot before it touches the pool, takes a safety snapshot (`before-restore-<UTC time>`) so
it can itself be undone, writes only what differs, and verifies count and checksum from the pool afterwards.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import shutil
import time
from array import array
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from mtl_graph.memory.engine.embeddings import embeddings_name
from mtl_graph.memory.engine.namespace import DEFAULT_NAMESPACE
from mtl_graph.memory.engine.snapshots.format import (
    CURRENT,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    POINTS,
    Snapshot,
    SnapshotError,
    SnapshotInfo,
    canonical,
    check_name,
    checksum,
    digest,
    list_snapshots,
    load_snapshot,
    snapshot_info,
    snapshot_root,
)
from mtl_graph.memory.engine.storage import StoredPoint

__all__ = ["MANIFEST", "POINTS", "PoolDiff", "RestoreReport", "SnapshotError", "SnapshotInfo", "check_name",
           "create_snapshot", "diff", "list_snapshots", "load_snapshot", "points_of", "restore_snapshot",
           "snapshot_root"]

SAFETY_PREFIX = "before-restore-"
BATCH = 256
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
    """The checksum recomputed from the pool equals the manifest's (every byte of every point)."""
    renormalised: int = 0
    """Points whose dense vector the engine normalised again (within RENORMALISED_TOLERANCE; 0 on Qdrant Edge)."""
    deleted: int = 0
    written: int = 0
    payloads: int = 0
    """Points whose vectors were already right and only the payload was rewritten."""
    unchanged: int = 0
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
def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def create_snapshot(pool: Any, name: str, directory: str | Path | None = None, *, force: bool = False,
                    observe: Callable[[StoredPoint, str], None] | None = None) -> SnapshotInfo:
    """Write every point of the pool (vectors and whole payloads) as snapshot `name`; an existing name is an error
    unless force (then it is replaced only once the new one is complete). `observe(point, digest)` sees each point
    as it is written (a restore plans its writes from its safety snapshot's pass)."""
    check_name(name)
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
        with pool.write_lock:  # writers in this process wait: the snapshot is one state of the pool
            digests = []
            with open(tmp / POINTS, "wb") as raw:
                # level 1: a quarter of level 6's time, files ~10% larger (float digits barely compress)
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as fh:
                    for point in pool.store.scroll_points(BATCH):
                        line = canonical(point)
                        digests.append(digest(line))
                        fh.write(line.encode("utf-8") + b"\n")
                        if observe is not None:
                            observe(point, digests[-1])
                raw.flush()
                os.fsync(raw.fileno())
            manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
                        "created_at": _utc_now().isoformat(timespec="milliseconds"), "count": len(digests),
                        "checksum": checksum(digests), "embeddings": embeddings_name(pool.embeddings),
                        "dim": pool.dim, "pool": str(pool.location), "engine": pool.engine, "file": POINTS,
                        "namespace": getattr(pool, "namespace", DEFAULT_NAMESPACE)}
            with open(tmp / MANIFEST, "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, indent=2)
                fh.flush()
                os.fsync(fh.fileno())
        _move_into_place(tmp, target, force)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise SnapshotError(f"cannot write snapshot {name} in {root}: {exc.strerror or exc}") from None
        raise
    return snapshot_info(target, manifest)


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


# ------------------------------------------------------------------ restore
def _safety_name(root: Path) -> str:
    base = SAFETY_PREFIX + _utc_now().strftime("%Y%m%dT%H%M%SZ")
    name, n = base, 1
    while (root / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _as_written(point: StoredPoint) -> StoredPoint:
    return StoredPoint(point.id, list(point.dense), (list(point.sparse[0]), list(point.sparse[1])), point.payload)


def _batches(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), BATCH):
        yield items[start:start + BATCH]


def restore_snapshot(pool: Any, name: str, directory: str | Path | None = None) -> RestoreReport:
    """Give the pool back exactly the points of snapshot `name`. The snapshot is verified whole first (any problem:
    one SnapshotError, nothing changed); the pool's current state is kept as a safety snapshot."""
    started = time.perf_counter()
    root = snapshot_root(pool, directory)
    try:
        snap = load_snapshot(root, name, (embeddings_name(pool.embeddings), pool.dim))
    except SnapshotError as exc:
        raise SnapshotError(f"{exc}; the pool was not changed") from None
    with pool.write_lock:
        doomed, upserts, payloads = [], [], []

        def plan(point: StoredPoint, line_digest: str) -> None:
            wanted = snap.points.get(point.id)
            if wanted is None:
                doomed.append(point.id)
            elif (wanted.dense != array("d", point.dense) or list(wanted.sparse[0]) != list(point.sparse[0])
                  or list(wanted.sparse[1]) != list(point.sparse[1]) or not set(point.payload) <= set(wanted.payload)):
                # a whole-point write: a payload write may merge (keep keys the snapshot's payload lacks)
                upserts.append(wanted)
            elif line_digest != snap.digests[point.id]:
                payloads.append(wanted)  # vectors untouched: an engine that normalises on write cannot move them
            seen.add(point.id)

        seen: set[str] = set()
        safety = create_snapshot(pool, _safety_name(root), directory, observe=plan)  # into `root` too
        upserts += [p for pid, p in snap.points.items() if pid not in seen]
        report = RestoreReport(name, snap.info.count, snap.info.checksum, safety.name)
        for ids in _batches(doomed):
            pool.store.delete(ids)
        for points in _batches(upserts):
            pool.store.upsert([_as_written(p) for p in points])
        for point in payloads:
            pool.store.set_payload(point.id, point.payload)
        if upserts or doomed:
            pool.store.optimize()  # as after any write: Qdrant Edge indexes the changed tail in the background
        report.deleted, report.written, report.payloads = len(doomed), len(upserts), len(payloads)
        report.unchanged = len(snap.points) - len(upserts) - len(payloads)
        getattr(pool, "contents_changed", lambda: None)()
        _verify(pool, snap, report)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _verify(pool: Any, snap: Snapshot, report: RestoreReport) -> None:
    """Count and checksum recomputed from the pool; a dense vector the engine only normalised again is counted."""
    count = pool.store.count()
    digests, wrong = [], []
    for point in pool.store.scroll_points(BATCH):
        line_digest = digest(canonical(point))
        digests.append(line_digest)
        if line_digest != snap.digests.get(point.id):
            wanted = snap.points.get(point.id)
            if wanted is not None and _renormalised(point, wanted):
                report.renormalised += 1
            else:
                wrong.append(point.id)
    report.count_verified = count == len(digests) == snap.info.count
    report.checksum_verified = checksum(digests) == snap.info.checksum
    if not report.count_verified or wrong:
        raise SnapshotError(f"restore of {snap.info.name} did not verify: the pool holds {count} points "
                            f"({len(wrong)} differ from the snapshot), the snapshot {snap.info.count}; the pool "
                            f"as it was before is snapshot {report.safety_snapshot}")


def _renormalised(point: StoredPoint, wanted: StoredPoint) -> bool:
    return (point.payload == wanted.payload and list(point.sparse[0]) == list(wanted.sparse[0])
            and list(point.sparse[1]) == list(wanted.sparse[1]) and len(point.dense) == len(wanted.dense)
            and max((abs(a - b) for a, b in zip(point.dense, wanted.dense)), default=0.0) <= RENORMALISED_TOLERANCE)


# ------------------------------------------------------------------ diff
def points_of(pool: Any, name: str, directory: str | Path | None = None) -> Iterable[StoredPoint]:
    """The points of snapshot `name` (verified whole), or of the live pool for "current"."""
    if name == CURRENT:
        return pool.store.scroll_points(BATCH)
    return load_snapshot(snapshot_root(pool, directory), name).points.values()


def _compact(point: StoredPoint) -> StoredPoint:
    dense = point.dense if isinstance(point.dense, array) else array("d", point.dense)
    return StoredPoint(point.id, dense, point.sparse, point.payload)  # type: ignore[arg-type]


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


def diff(a: Iterable[StoredPoint], b: Iterable[StoredPoint]) -> PoolDiff:
    """What changed from the points of A to those of B (snapshots, or a pool's `scroll_points()`)."""
    before = {p.id: _compact(p) for p in a}
    out = PoolDiff()
    seen = set()
    for point in b:
        seen.add(point.id)
        old = before.get(point.id)
        if old is None:
            out.added.append(point.id)
        elif names := changed_fields(old, point):
            out.changed[point.id] = names
        else:
            out.unchanged += 1
    out.removed = sorted(i for i in before if i not in seen)
    out.added.sort()
    out.changed = dict(sorted(out.changed.items()))
    return out
