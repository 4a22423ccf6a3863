"""`mtl pool check`: read every point of an embedded pool without changing it; `--repair`: rebuild from what is readable.

The check opens a sparse copy of the engine's data (an engine replays its log and may write on open; the damaged
original must stay exactly as it was). Qdrant Edge is read through the engine, point by point where a batch fails;
qdrant-client's local storage is read row by row straight from its sqlite file, so one bad row or page costs only
the points in it, where the engine itself refuses to open at all.
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import sqlite3
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from mtl_graph.memory.engine.embeddings import embeddings_name
from mtl_graph.memory.errors import EmbeddingMismatchError, PoolError
from mtl_graph.memory.engine.integrity import ENGINE_MARKERS, PointLedger, engine_data, one_line, rebuild_prefix
from mtl_graph.memory.engine.location import COLLECTION, META_FILE, _read_meta, lock_directory, open_directory
from mtl_graph.memory.base import Memory, parse_memory
from mtl_graph.memory.engine.storage import DENSE, StoredPoint

BATCH = 256


@dataclass
class Salvaged:
    """One point as far as it could be read."""

    id: str
    payload: dict[str, Any] | None = None
    dense: list[float] | None = None
    error: str | None = None


@dataclass
class CheckReport:
    """What `check_pool` found (and, with repair, did)."""

    location: str
    engine: str | None = None
    recorded: int | None = None
    """Points the pool's ledger says it held after its last write (None: not recorded)."""
    engine_count: int | None = None
    """Points the engine counts (None: the engine cannot open the data)."""
    readable: int = 0
    reembedded: list[str] = field(default_factory=list)
    """Readable memories whose vectors were unreadable (or of unknown embeddings): repair embeds them again."""
    unreadable: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    repaired: dict[str, Any] | None = None
    stats_problems: list[str] = field(default_factory=list)
    """Where the maintained statistics (memory/pool/stats.py) differ from a recomputation over the readable points:
    a record left pending by an interrupted write, totals that differ, a cached credit tally that differs from its
    entries. The memories are intact; `--repair` writes the recomputed statistics."""
    stats_repaired: list[str] | None = None
    """What the repair rewrote: the records of these namespaces and the tallies of these points."""

    @property
    def lost(self) -> int:
        """Memories the pool should hold that cannot be read back."""
        expected = max(self.recorded or 0, self.engine_count or 0, self.readable + len(self.unreadable))
        return expected - self.readable

    @property
    def damaged(self) -> bool:
        return bool(self.problems or self.unreadable or self.reembedded or self.lost)

    @property
    def stale_stats(self) -> bool:
        """The statistics need a repair (and did not get one)."""
        return bool(self.stats_problems) and self.stats_repaired is None and self.repaired is None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost, "damaged": self.damaged, "stale_stats": self.stale_stats}


# ------------------------------------------------------------------ reading without changing anything
def copy_sparse(src: str, dst: str) -> None:
    """Copy only a file's data regions: the engines' preallocated files are mostly holes (a 33 MB page, 40 KB used)."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fin.fileno(), offset, os.SEEK_DATA)
            except OSError:  # only a hole is left
                break
            end = os.lseek(fin.fileno(), start, os.SEEK_HOLE)
            fin.seek(start)
            fout.seek(start)
            while start < end:
                chunk = fin.read(min(end - start, 1 << 20))
                if not chunk:
                    break
                fout.write(chunk)
                start += len(chunk)
            offset = end
        fout.truncate(size)


def copy_tree_sparse(src: Path, dst: Path) -> None:
    copy = copy_sparse if hasattr(os, "SEEK_DATA") else shutil.copyfile
    shutil.copytree(src, dst, copy_function=copy, ignore=shutil.ignore_patterns(".lock"))


def _edge_points(directory: Path, report: CheckReport) -> Iterator[Salvaged]:
    import qdrant_edge as q

    try:
        shard = q.EdgeShard.load(str(directory))
    except Exception as exc:
        report.problems.append(f"the edge engine cannot open its data: {one_line(exc)}")
        try:  # a broken write-ahead log hides the flushed segments: read those without it (this is a copy)
            shutil.rmtree(directory / "wal", ignore_errors=True)
            shard = q.EdgeShard.load(str(directory))
        except Exception:
            return
        report.problems.append("its write-ahead log was left out: only the flushed segments were read")
    try:
        report.engine_count = shard.count(q.CountRequest(exact=True))
        ids: list[str] = []
        offset = None
        try:
            while True:
                records, offset = shard.scroll(q.ScrollRequest(offset=offset, limit=1024, with_payload=False,
                                                               with_vector=False))
                ids += [str(r.id) for r in records]
                if offset is None or not records:
                    break
        except Exception as exc:
            report.problems.append(f"the engine cannot list its points past {len(ids)}: {one_line(exc)}")
        for start in range(0, len(ids), BATCH):
            chunk = ids[start:start + BATCH]
            try:
                yield from (_edge_salvaged(r) for r in shard.retrieve(chunk, True, True))
            except Exception:  # one bad point spoils the batch: read them one by one
                for point_id in chunk:
                    yield _edge_one(shard, point_id)
    finally:
        shard.close()


def _edge_salvaged(record: Any) -> Salvaged:
    vectors = record.vector if isinstance(record.vector, dict) else {}
    dense = vectors.get(DENSE)
    return Salvaged(str(record.id), record.payload or {}, list(dense) if dense is not None else None)


def _edge_one(shard: Any, point_id: str) -> Salvaged:
    try:
        found = shard.retrieve([point_id], True, True)
        return _edge_salvaged(found[0]) if found else Salvaged(point_id, error="listed but not retrievable")
    except Exception as exc:
        try:  # the vectors may be what is broken
            found = shard.retrieve([point_id], True, False)
            return _edge_salvaged(found[0]) if found else Salvaged(point_id, error=one_line(exc))
        except Exception as exc2:
            return Salvaged(point_id, error=one_line(exc2))


def _client_points(directory: Path, report: CheckReport) -> Iterator[Salvaged]:
    sqlite_file = directory / ENGINE_MARKERS["client"]
    if not sqlite_file.is_file():
        report.problems.append(f"{sqlite_file.name} is missing: the client engine holds no points")
        return
    _pad_to_declared_size(sqlite_file)
    rows = _sqlite_rows(sqlite_file, report)
    seen: set[str] = set()
    for rowid in sorted(rows, reverse=True):  # the highest rowid is a point's latest write
        try:
            blob = rows[rowid]
            if blob is None:
                raise ValueError("its data is on a damaged page")
            point = pickle.loads(blob)
            point_id = str(point.id)
            vectors = point.vector if isinstance(point.vector, dict) else {}
            dense = vectors.get(DENSE)
            salvaged = Salvaged(point_id, point.payload or {}, list(dense) if dense is not None else None)
        except Exception as exc:
            salvaged = Salvaged(f"sqlite row {rowid}", error=one_line(exc))
        if salvaged.id not in seen:
            seen.add(salvaged.id)
            yield salvaged
    try:  # the engine's own count, on the copy (opening it may clean rows up)
        from qdrant_client import QdrantClient

        client = QdrantClient(path=str(directory))
        try:
            report.engine_count = client.count(COLLECTION, exact=True).count
        finally:
            client.close()
    except Exception as exc:
        report.problems.append(f"the client engine cannot open its data: {one_line(exc)}")


def _pad_to_declared_size(sqlite_file: Path) -> None:
    """Give a truncated database (this is a copy) back the size its header declares: sqlite refuses every query of
    a file shorter than that, but reads the pages still there once the missing ones are zeros."""
    with open(sqlite_file, "rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    declared = page_size * int.from_bytes(header[28:32], "big")
    if sqlite_file.stat().st_size < declared:
        os.truncate(sqlite_file, declared)


def _sqlite_rows(sqlite_file: Path, report: CheckReport) -> dict[int, bytes | None]:
    """Every row sqlite can still give: row ids listed from both ends of the table (around a damaged page), then
    each row read on its own (a broken overflow chain costs that row only). None: the row's data is unreadable."""
    rows: dict[int, bytes | None] = {}
    try:
        con = sqlite3.connect(sqlite_file)
    except sqlite3.Error as exc:
        report.problems.append(f"{sqlite_file.name} cannot be opened: {one_line(exc)}")
        return rows
    try:
        rowids: set[int] = set()
        for order in ("ASC", "DESC"):
            try:
                for (rowid,) in con.execute(f"SELECT rowid FROM points ORDER BY rowid {order}"):
                    rowids.add(rowid)
            except sqlite3.Error as exc:
                if order == "ASC":
                    report.problems.append(f"{sqlite_file.name} is damaged: {one_line(exc)}")
        for rowid in rowids:
            try:
                rows[rowid] = con.execute("SELECT point FROM points WHERE rowid = ?", (rowid,)).fetchone()[0]
            except sqlite3.Error:
                rows[rowid] = None
    finally:
        con.close()
    return rows


def _valid(point: Salvaged, dim: int | None) -> tuple[Memory | None, bool, str | None]:
    """The memory a point holds, whether its dense vector is usable, and why it is unreadable."""
    if point.error is not None or point.payload is None:
        return None, False, point.error or "no payload"
    try:
        memory = parse_memory(point.payload["memory"])
    except (KeyError, TypeError, ValidationError) as exc:
        return None, False, f"not a valid memory ({one_line(exc)})"
    dense = point.dense
    usable = (dense is not None and (dim is None or len(dense) == dim)
              and all(math.isfinite(x) for x in dense) and any(dense))
    return memory, usable, None


# ------------------------------------------------------------------ check and repair
def check_pool(location: str | Path, embeddings: Embeddings | None = None, repair: bool = False) -> CheckReport:
    """Read every point of the pool in `location` and compare counts; with `repair`, rebuild it from what is readable.

    The pool is locked for the check (a pool in use gives PoolLockedError) and never written; a repair builds a
    new pool beside it, then moves the damaged one to `<name>.damaged-<time>` and the new one into its place."""
    path = Path(location).expanduser().resolve()
    if not path.is_dir():
        raise PoolError(f"no pool at {path} (not a directory)")
    report = CheckReport(str(path))
    lock_fd = lock_directory(path)
    try:
        try:
            meta = _read_meta(path / META_FILE)
        except PoolError as exc:
            report.problems.append(str(exc))
            meta = {}
        found = engine_data(path)
        report.engine = meta.get("engine") or next(iter(found), None)
        if not meta:
            report.problems.append(f"{META_FILE} is missing or unreadable: repair embeds every memory again")
        if report.engine not in ENGINE_MARKERS:
            raise PoolError(f"no pool at {path}: neither {META_FILE} nor engine data")
        try:
            report.recorded = PointLedger.read(path).points
        except PoolError as exc:
            report.problems.append(str(exc))
        readable = _read_all(path, report, meta)
        computed, tallies = _check_stats(path, report, readable)
        if repair and report.damaged:  # the rebuilt pool has no statistics yet: they are counted at its first use
            report.repaired = _rebuild(path, report, meta, readable, embeddings)
        elif repair and report.stats_problems:
            report.stats_repaired = _repair_stats(path, report, meta, computed, tallies)
    finally:
        os.close(lock_fd)
    return report


def _check_stats(path: Path, report: CheckReport, readable: list[tuple[Salvaged, Memory, bool]]
                 ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Recompute every namespace's statistics and every cached credit tally from the readable points; report each
    difference from what the pool keeps. Returns the recomputed totals and the tallies to rewrite (point id ->
    what to merge under the credit key)."""
    from mtl_graph.memory.engine.storage import DEFAULT_NAMESPACE, NAMESPACE_KEY
    from mtl_graph.memory.pool.stats import STATS_DIR, Totals, read_record
    from mtl_graph.memory.usage import CREDIT_KEY, TALLY_KEY, cached_tally, entries, entry_count, tally, tally_payload

    computed: dict[str, Totals] = {}
    tallies: dict[str, dict[str, Any]] = {}
    for point, _, _ in readable:
        payload = point.payload or {}
        computed.setdefault(str(payload.get(NAMESPACE_KEY, DEFAULT_NAMESPACE)), Totals()).add(payload)
        raw = payload.get(CREDIT_KEY)
        if isinstance(raw, dict) and TALLY_KEY in raw:
            counted = tally(entries(payload))
            cached = cached_tally(payload)
            if cached is not None and cached != counted:
                report.stats_problems.append(f"memory {point.id}: its cached credit tally differs from its entries")
                tallies[point.id] = {TALLY_KEY: tally_payload(counted, entry_count(raw))}
    files = {f.stem: f for f in (path / STATS_DIR).glob("*.json")} if (path / STATS_DIR).is_dir() else {}
    for namespace in sorted(set(files) | set(computed)):
        if namespace not in files:
            continue  # no record yet (a pool written before them, or never opened since): counted at first use
        record = read_record(files[namespace])
        want = computed.get(namespace, Totals())
        kept = Totals.of_json(record.get("totals")) if record else None
        if record is None or kept is None:
            report.stats_problems.append(f"namespace {namespace}: its statistics record is unreadable")
        elif record.get("pending"):
            report.stats_problems.append(f"namespace {namespace}: its statistics record is pending (a write was "
                                         "interrupted between the data and the statistics)")
        elif kept != want:
            report.stats_problems.append(
                f"namespace {namespace}: the statistics record {kept.points} memories, {kept.success} successes, "
                f"{kept.failure} failures, formats {kept.types}; the pool holds {want.points}, {want.success}, "
                f"{want.failure}, {want.types}")
    return computed, tallies


def _repair_stats(path: Path, report: CheckReport, meta: dict[str, Any], computed: dict[str, Any],
                  tallies: dict[str, dict[str, Any]]) -> list[str]:
    """Write the recomputed statistics: every namespace's record, and the cached tallies that were wrong."""
    from mtl_graph.memory.engine.location import _engine_store
    from mtl_graph.memory.pool.stats import Totals, stats_file, write_record
    from mtl_graph.memory.usage import CREDIT_KEY

    done = []
    if tallies:
        store = _engine_store(path, report.engine or "edge", int(meta["dim"]))
        try:
            for point_id, merge in tallies.items():
                store.set_payload(point_id, merge, key=CREDIT_KEY)
        finally:
            store.close()
        done.append(f"{len(tallies)} cached credit tallies")
    records = sorted({*computed, *(p.stem for p in (path / "stats").glob("*.json"))})
    for namespace in records:
        file = stats_file(path, namespace)
        assert file is not None
        write_record(file, computed.get(namespace, Totals()), {})
    done.append(f"the statistics of {len(records)} namespaces")
    return done


def _read_all(path: Path, report: CheckReport, meta: dict[str, Any]) -> list[tuple[Salvaged, Memory, bool]]:
    engine = report.engine or ""
    source = path / engine
    if not (source / ENGINE_MARKERS[engine]).exists():
        report.problems.append(f"the {engine} data ({source / ENGINE_MARKERS[engine]}) is missing")
    if not source.is_dir():
        return []
    dim = int(meta["dim"]) if meta else None
    out = []
    with tempfile.TemporaryDirectory(prefix="mtl-pool-check-") as tmp:
        copy = Path(tmp) / engine
        copy_tree_sparse(source, copy)
        points = _edge_points(copy, report) if engine == "edge" else _client_points(copy, report)
        for point in points:
            memory, usable, why = _valid(point, dim)
            if memory is None:
                report.unreadable.append({"id": point.id, "why": why or "unreadable"})
                continue
            report.readable += 1
            if not usable or not meta:
                report.reembedded.append(point.id)
            out.append((point, memory, usable and bool(meta)))
    return out


def _rebuild(path: Path, report: CheckReport, meta: dict[str, Any], readable: list[tuple[Salvaged, Memory, bool]],
             embeddings: Embeddings | None) -> dict[str, Any]:
    from qdrant_edge import Bm25

    from mtl_graph.memory.engine.embeddings import resolve_embeddings
    from mtl_graph.core.environment import process_settings

    emb = resolve_embeddings(embeddings if embeddings is not None else process_settings().embeddings)
    if meta and meta.get("embeddings") != embeddings_name(emb):
        raise EmbeddingMismatchError(f"pool {path} was built with embeddings {meta.get('embeddings')!r}: repair it "
                                     "with the same embeddings (MTL_EMBEDDINGS)")
    staging = path.with_name(f"{rebuild_prefix(path)}{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    opened = open_directory(staging, emb, report.engine or "edge")
    bm25 = Bm25()
    try:
        for start in range(0, len(readable), BATCH):
            chunk = readable[start:start + BATCH]
            fresh = iter(emb.embed_documents([m.key_text() for p, m, keep in chunk if not keep]))
            stored = []
            for point, memory, keep in chunk:
                sparse = bm25.embed_document(memory.key_text())
                dense = point.dense if keep else next(fresh)
                stored.append(StoredPoint(point.id, dense, (list(sparse.indices), list(sparse.values)), point.payload))
            opened.store.upsert(stored)
        rebuilt = opened.store.count()
    except BaseException:
        opened.store.close()
        opened.release()
        shutil.rmtree(staging, ignore_errors=True)  # the damaged pool is still in place, untouched
        raise
    opened.store.close()
    opened.release()
    backup = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    os.rename(path, backup)
    os.rename(staging, path)
    return {"rebuilt": rebuilt, "reembedded": len(report.reembedded), "lost": report.lost, "backup": str(backup)}
