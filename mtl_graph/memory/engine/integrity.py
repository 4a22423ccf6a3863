"""Keeping an embedded pool honest about its data.

Every engine failure (Qdrant Edge's `Service runtime error ...`, qdrant-client's sqlite and pickle errors) becomes
a `PoolError` naming the pool and what to do. A small ledger (`points.json`) records how many points the pool held
after its last write, so an open that finds far fewer (a segment or the id tracker deleted) is an error, not a
silently smaller pool.

Why the ledger never raises a false alarm after a crash: it is raised only after the engine's write returned (the
write is then in Qdrant Edge's WAL or committed to qdrant-client's sqlite, which a killed process does not lose),
and lowered *before* a delete reaches the engine. A killed process therefore leaves a ledger at or below the real
count. The points the last write added are still tolerated as missing (`last_batch`): they are the only ones a
machine crash (not a process kill) could take from an engine that had not synced them yet.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from mtl_graph.memory.engine.embeddings import EmbeddingError
from mtl_graph.memory.errors import PoolError
from mtl_graph.memory.engine.storage import (Conditions, PayloadFields, PointBatch, QuerySpec, RawHit, Store, StoredPoint,
                                             point_batches)

LEDGER_FILE = "points.json"
ENGINE_MARKERS = {"edge": "edge_config.json", "client": "collection/mtl_memories/storage.sqlite"}
"""Per engine, the file (under its data directory) without which it would open an empty pool."""

T = TypeVar("T")


def check_hint(path: Path | str) -> str:
    return f"run `mtl pool check {path}` to see what is readable, then `mtl pool check --repair {path}` to rebuild from it"


def one_line(exc: BaseException) -> str:
    """An engine's message on one line (Rust errors span several), never empty."""
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


@contextmanager
def engine_errors(where: str, doing: str, hint: str) -> Iterator[None]:
    """Any engine exception inside becomes a PoolError naming the pool; our own errors pass through."""
    try:
        yield
    except (PoolError, EmbeddingError):
        raise
    except Exception as exc:
        raise PoolError(f"pool {where}: the engine failed {doing} ({one_line(exc)}); {hint}") from exc


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write a temporary file, then rename it over `path`: a reader sees the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


# ------------------------------------------------------------------ the ledger
@dataclass
class PointLedger:
    """How many points the pool held after its last confirmed write, and how many that write added."""

    file: Path
    points: int | None = None
    """None for a pool written before the ledger existed (adopted at its next open)."""
    last_batch: int = 0

    @classmethod
    def read(cls, directory: Path) -> "PointLedger":
        file = directory / LEDGER_FILE
        try:
            data = json.loads(file.read_text())
            return cls(file, int(data["points"]), int(data.get("last_batch", 0)))
        except FileNotFoundError:
            return cls(file)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise PoolError(f"{file} is corrupt ({one_line(exc)}); delete it to trust the pool's current "
                            f"count, or {check_hint(directory)}") from None

    def record(self, points: int, last_batch: int = 0) -> None:
        write_json_atomically(self.file, {"points": points, "last_batch": last_batch})
        self.points, self.last_batch = points, last_batch

    def minimum(self) -> int | None:
        """The fewest points an undamaged pool can hold; None when nothing was recorded."""
        return None if self.points is None else max(0, self.points - self.last_batch)

    def verify(self, found: int, where: Path) -> None:
        """Refuse a pool that lost points; otherwise adopt what the engine holds."""
        minimum = self.minimum()
        if minimum is not None and found < minimum:
            raise PoolError(
                f"pool {where} holds {found} memories but {self.points} were recorded ({self.file.name}): engine "
                f"files were lost or damaged; run `mtl pool check --repair {where}` to rebuild it from what is "
                "readable (the damaged copy is kept)")
        if found != self.points:
            try:
                self.record(found)
            except OSError:
                pass  # a read-only pool keeps its old ledger, which this open just found within tolerance


def probe(store: Store, dim: int, where: Path) -> None:
    """Read one point the way a search does, so unreadable vectors or payloads fail at open, not mid-run."""
    hits = store.query([QuerySpec(limit=1, where=Conditions(), dense=[dim ** -0.5] * dim, with_dense=True)])[0]
    if not hits or hits[0].dense is None or len(hits[0].dense) != dim:
        raise PoolError(f"pool {where}: its dense vectors are missing or unreadable (a search found no point); "
                        f"{check_hint(where)}")


# ------------------------------------------------------------------ the guarded store
class GuardedStore:
    """A Store whose engine failures are PoolErrors naming the pool, and whose writes keep the ledger."""

    def __init__(self, store: Store, where: str, hint: str, ledger: PointLedger | None = None) -> None:
        self.inner = store
        self.where = where
        self.hint = hint
        self.ledger = ledger
        self._lock = threading.RLock()

    def _call(self, doing: str, fn: Callable[..., T], *args: Any) -> T:
        with engine_errors(self.where, doing, self.hint):
            return fn(*args)

    def _after_write(self, adds: bool) -> None:
        """Record the engine's count once its write returned; after adds, tolerate losing that batch alone."""
        if self.ledger is None or self.ledger.points is None:
            return
        try:
            now, before = self.count(), self.ledger.points
            if now != before:  # overwrites of existing points change nothing worth a file write
                self.ledger.record(now, max(0, now - before) if adds else self.ledger.last_batch)
        except (PoolError, OSError):
            pass  # a ledger that lags behind the data is safe: it can only miss damage, never invent it

    def upsert(self, points: list[StoredPoint]) -> None:
        with self._lock:
            self._call("writing", self.inner.upsert, points)
            self._after_write(adds=True)

    def delete(self, ids: list[str]) -> None:
        with self._lock:
            if self.ledger is not None and self.ledger.points is not None:
                try:  # lowered first: a kill between the two leaves the ledger below the data, never above
                    self.ledger.record(max(0, self.ledger.points - len(ids)), self.ledger.last_batch)
                except OSError as exc:
                    raise PoolError(f"pool {self.where}: cannot update {self.ledger.file}: {exc.strerror}") from None
            self._call("deleting", self.inner.delete, ids)
            self._after_write(adds=False)

    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None:
        self._call("writing", self.inner.set_payload, point_id, payload, key)

    def set_payload_many(self, point_ids: list[str], payload: dict[str, Any]) -> None:
        self._call("writing", self.inner.set_payload_many, point_ids, payload)

    def fetch(self, ids: list[str], with_dense: bool = False, fields: PayloadFields = None) -> list[RawHit]:
        return self._call("reading", self.inner.fetch, ids, with_dense, fields)

    def count(self, where: Conditions | None = None) -> int:
        return self._call("counting", self.inner.count, where)

    def scroll(self, batch: int = 256, where: Conditions | None = None,
               fields: PayloadFields = None) -> Iterator[RawHit]:
        points = self._call("reading", self.inner.scroll, batch, where, fields)
        while True:
            with engine_errors(self.where, "reading", self.hint):
                try:
                    hit = next(points)
                except StopIteration:
                    return
            yield hit

    def scroll_points(self, batch: int = 256, where: Conditions | None = None) -> Iterator[StoredPoint]:
        points = self._call("reading", self.inner.scroll_points, batch, where)
        while True:
            with engine_errors(self.where, "reading", self.hint):
                try:
                    point = next(points)
                except StopIteration:
                    return
            yield point

    def scroll_batches(self, batch: int = 1024, where: Conditions | None = None) -> Iterator[PointBatch]:
        batches = self._call("reading", point_batches, self.inner, batch, where)
        while True:
            with engine_errors(self.where, "reading", self.hint):
                try:
                    found = next(batches)
                except StopIteration:
                    return
            yield found

    def query(self, requests: list[QuerySpec]) -> list[list[RawHit]]:
        return self._call("searching", self.inner.query, requests)

    def optimize(self, wait: bool = False) -> None:
        self._call("indexing", self.inner.optimize, wait)

    def close(self) -> None:
        self._call("closing", self.inner.close)

    def __getattr__(self, name: str) -> Any:
        """Anything else of the engine's store (e.g. `shard` for benchmarks); its methods still fail as PoolError.

        A new method that adds or deletes points belongs above, next to `upsert` and `delete`, to keep the ledger:
        a ledger that lags is harmless, one ahead of the data would be a false alarm."""
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def guarded(*args: Any, **kwargs: Any) -> Any:
            with engine_errors(self.where, f"in {name}", self.hint):
                return attr(*args, **kwargs)

        return guarded


# ------------------------------------------------------------------ what a directory holds
def engine_data(path: Path) -> dict[str, Path]:
    """Engines with data under `path` (their directory exists and is not empty)."""
    found = {}
    for engine in ENGINE_MARKERS:
        directory = path / engine
        if directory.is_dir() and any(directory.iterdir()):
            found[engine] = directory
    return found


def refuse_unrecorded_data(path: Path) -> None:
    """A directory without pool.json but with engine data is someone's pool: never start a new one over it."""
    found = engine_data(path)
    if found:
        engine, directory = next(iter(found.items()))
        raise PoolError(
            f"pool {path} has {engine} data ({directory}) but no pool.json, which records its engine and "
            f"embeddings: restore pool.json, or run `mtl pool check --repair {path}` to rebuild it with the "
            "current embeddings (nothing was changed)")


def refuse_missing_data(path: Path, engine: str, ledger: PointLedger) -> None:
    """pool.json without its engine's data is a pool whose data was deleted or moved, unless it never had any."""
    marker = path / engine / ENGINE_MARKERS[engine]
    if marker.exists() or ledger.points == 0:  # 0: created, then interrupted before the engine wrote anything
        return
    raise PoolError(
        f"pool {path}: pool.json records the {engine} engine but its data ({marker}) is missing: it was deleted "
        f"or moved; restore it, or remove {path / 'pool.json'} to start a new, empty pool there")


def rebuild_prefix(path: Path) -> str:
    """Name prefix of the directory a repair of `path` builds in, beside it."""
    return f".{path.name}.rebuild-"


def refuse_interrupted_repair(path: Path) -> None:
    """A missing pool with a finished rebuild beside it: a repair stopped between its two renames."""
    if path.exists() or not path.parent.is_dir():
        return
    rebuilt = [d for d in path.parent.glob(f"{rebuild_prefix(path)}*") if (d / "pool.json").exists()]
    if rebuilt:
        raise PoolError(f"pool {path} is missing but a repair left its rebuilt pool at {rebuilt[0]}: the repair was "
                        f"interrupted; rename {rebuilt[0]} to {path} (the damaged pool is beside it, *.damaged-*)")
