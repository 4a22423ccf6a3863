"""The pool's maintained statistics: kept current on every write, so no search, and no open, reads the whole pool.

What is kept (`Totals`, per namespace): the number of memories, the number of each format (the relevance floor's
"enough memories to calibrate"), and the successes and failures of the credited runs memories were shown in (the
lifecycle's base rate); beside them the calibrated relevance floors (memory/lifecycle/floor.py) with the pool size
each was computed at.

How it stays right, by construction rather than by a list of write paths: the pool's store is a `CountedStore`,
a NamespacedStore whose three writes (upsert, set_payload, delete) read the points they touch before the engine
write and add (new payload) minus (old payload) to the totals once it returned. Every writer (add and its merges,
credit, archive, restore, quarantine, consolidation, a snapshot restore) goes through it, so none can forget.

Where it is kept: `<pool>/stats/<namespace>.json` for a directory pool (which one process holds at a time: the
pool's lock), written atomically. A write first marks the record `pending`, then writes the engine, then records
the new totals, so a process killed in between leaves a record that says so; an engine write that raises leaves
it pending too (what reached the engine is unknown). A pending, missing, unreadable or out-of-date record (its
count is not the engine's) is rebuilt from the pool once, at its first use. `mtl pool check` compares each record
with a recomputation and `--repair` writes the recomputed one (memory/engine/check.py). A server pool keeps its
totals in the handle (built once per handle by reading the pool): writers in other processes are seen after
`contents_changed()`.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from mtl_graph.memory.engine.integrity import write_json_atomically
from mtl_graph.memory.engine.namespace import NamespacedStore
from mtl_graph.memory.engine.storage import PayloadFields, RawHit, Store, StoredPoint
from mtl_graph.memory.errors import PoolError
from mtl_graph.memory.pool.field_cache import FieldCache
from mtl_graph.memory.pool.filter import STATUSES
from mtl_graph.memory.usage import record_of

STATS_DIR = "stats"
"""The directory, under a directory pool, of its statistics records (one file per namespace)."""
VERSION = 1
NO_TYPE = "(none)"
"""The format counted for a point whose payload names none (a damaged or foreign point)."""


@dataclass
class Totals:
    """The maintained counts of one namespace."""

    points: int = 0
    types: dict[str, int] = field(default_factory=dict)
    success: int = 0
    """Runs judged successful, over every memory's record (stored counts plus credit entries)."""
    failure: int = 0
    other_status: int = 0
    """Points whose payload names no known status (written before statuses existed): while there is one, the
    lifecycle's filter excludes statuses rather than asking for `active` (pool/filter.py: statuses_complete)."""

    def add(self, payload: dict[str, Any], sign: int = 1) -> None:
        """Count one point in (sign 1) or out (sign -1)."""
        self.other_status += sign * (payload.get("status") not in STATUSES)
        kind = payload.get("type")
        kind = kind if isinstance(kind, str) else NO_TYPE
        self.points += sign
        self.types[kind] = self.types.get(kind, 0) + sign
        if not self.types[kind]:
            del self.types[kind]
        record = record_of(payload)
        self.success += sign * record.retrieved_success
        self.failure += sign * record.retrieved_failure

    def to_json(self) -> dict[str, Any]:
        return {"points": self.points, "types": dict(sorted(self.types.items())), "success": self.success,
                "failure": self.failure, "other_status": self.other_status}

    @classmethod
    def of_json(cls, data: Any) -> "Totals | None":
        """Totals read back from a record; None for anything that is not a valid one."""
        try:
            types = {str(k): int(v) for k, v in data["types"].items()}
            out = cls(int(data["points"]), types, int(data["success"]), int(data["failure"]),
                      int(data["other_status"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if min(out.points, out.success, out.failure, out.other_status, *types.values()) < 0 or \
                sum(types.values()) != out.points or out.other_status > out.points:
            return None
        return out


def recompute(hits: Iterable[RawHit]) -> Totals:
    """The totals of a set of points, counted from scratch (the rebuild, the check and the tests' reference)."""
    out = Totals()
    for hit in hits:
        out.add(hit.payload)
    return out


def _merged(old: dict[str, Any], payload: dict[str, Any], key: str | None) -> dict[str, Any]:
    """A payload after the engine's set_payload merge (top-level keys, or the keys of the map at `key`)."""
    if key is None:
        return {**old, **payload}
    inner = old.get(key)
    return {**old, key: {**(inner if isinstance(inner, dict) else {}), **payload}}


class MaintainedStats:
    """One namespace's statistics and their record (see the module's docstring)."""

    def __init__(self, file: Path | None, scan: Callable[[], Iterator[RawHit]], count: Callable[[], int]) -> None:
        self.file = file
        self._scan, self._count = scan, count
        self._lock = threading.RLock()
        self._totals: Totals | None = None
        self._floors: dict[str, list[Any]] = {}
        self._depth = 0
        self._broken = False
        self._holds = 0  # open `held` contexts
        self._marked = False  # inside a hold, the record was marked pending by a write: recorded when it ends
        self.rebuilds = 0
        """How often this handle counted the whole pool (a missing or stale record): the tests read it."""

    # ------------------------------------------------------------------ reading
    def totals(self) -> Totals:
        """The current totals (read from the record, or rebuilt from the pool once when it is stale)."""
        with self._lock:
            if self._totals is None:
                self._load()
            assert self._totals is not None
            return self._totals

    def floor(self, key: str) -> tuple[int, float, str] | None:
        """The floor kept for a format: (pool size it was computed at, floor, how it was decided)."""
        with self._lock:
            self.totals()
            kept = self._floors.get(key)
            return (int(kept[0]), float(kept[1]), str(kept[2])) if kept else None

    def keep_floor(self, key: str, total: int, value: float, source: str) -> None:
        with self._lock:
            self.totals()
            self._floors[key] = [total, value, source]
            if not self._busy():
                self._write(pending=False)

    def reload(self) -> None:
        """Read the record again at next use (another writer may have changed the pool)."""
        with self._lock:
            if not self._busy():
                self._totals = None
                self._floors = {}

    def _load(self) -> None:
        record = self._read()
        totals = Totals.of_json(record.get("totals")) if record and not record.get("pending") else None
        if totals is not None and totals.points == self._count():
            self._totals = totals
            floors = record.get("floors")
            self._floors = {str(k): v for k, v in floors.items() if isinstance(v, list) and len(v) == 3} \
                if isinstance(floors, dict) else {}
            return
        self._totals, self._floors = recompute(self._scan()), {}
        self.rebuilds += 1
        if self.file is not None:
            try:
                self._write(pending=False)
            except PoolError:
                pass  # a read-only pool: the totals hold for this handle

    def _read(self) -> dict[str, Any] | None:
        return None if self.file is None else read_record(self.file)

    def _write(self, pending: bool) -> None:
        if self.file is None or self._totals is None:
            return
        write_record(self.file, self._totals, self._floors, pending)

    # ------------------------------------------------------------------ writing
    @contextmanager
    def batch(self) -> Iterator[None]:
        """Writes inside are one change of the record: marked pending before the first, recorded after the last."""
        with self._lock:
            self._enter()
            try:
                yield
            finally:
                self._leave()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Writes inside, from any thread (an ingest's workers), are one change of the record: the first marks it
        pending, the record is written once after the hold, so a long series of small batches writes the file
        twice, not twice per batch; a hold with no write writes nothing. A process killed inside leaves the record
        pending (rebuilt at next use), as a kill inside one batch does. Unlike `batch`, the lock is not held in
        between: writers still take turns, one batch at a time."""
        with self._lock:
            self._holds += 1
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1
                if self._holds == 0 and self._marked:
                    self._marked = False
                    self._record()

    def _busy(self) -> bool:
        """Whether a change of the record is under way (the record on disk says pending)."""
        return self._depth > 0 or self._marked

    def _enter(self) -> None:
        if self._depth == 0 and not self._marked:
            self.totals()
            self._broken = False
            self._write(pending=True)  # a failure here stops the write before the engine sees it
            self._marked = self._holds > 0  # inside a hold: recorded when the hold ends
        self._depth += 1

    def _leave(self) -> None:
        self._depth -= 1
        if self._depth == 0 and not self._marked:
            self._record()

    def _record(self) -> None:
        if self._broken:  # what reached the engine is unknown: counted again at next use
            self._totals, self._floors = None, {}
        else:
            try:
                self._write(pending=False)
            except PoolError:
                self._totals = None  # the record stays pending: rebuilt at next use

    @contextmanager
    def changing(self, before: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        """One engine write: `before` are the payloads it replaces; the caller fills the list yielded with the
        payloads after it. Counted once the write returned; an exception leaves the record pending."""
        after: list[dict[str, Any]] = []
        with self.batch():
            try:
                yield after
                totals = self.totals()
                for payload in before:
                    totals.add(payload, -1)
                for payload in after:
                    totals.add(payload, 1)
            except BaseException:  # the engine write, or the counting after it: the record stays pending
                self._broken = True
                raise


class CountedStore(NamespacedStore):
    """A namespace's store whose writes keep its MaintainedStats (see the module's docstring) and forget what its
    FieldCache holds of the points they touch (memory/pool/field_cache.py)."""

    def __init__(self, inner: Store, namespace: str, file: Path | None, shared: dict[str, Any] | None = None) -> None:
        """shared: the engine's statistics and field caches by namespace, so every view of one namespace keeps one
        record and one cache."""
        super().__init__(inner, namespace)
        shared = {} if shared is None else shared
        if self.namespace not in shared:
            shared[self.namespace] = MaintainedStats(file, self.scroll, self.count)
        self.maintained = shared[self.namespace]
        # a cache only where this process is the pool's one writer: a directory pool (a server's has no file)
        self.cache: FieldCache | None = None if file is None else \
            shared.setdefault(f"{self.namespace}/fields", FieldCache())  # "/" is in no namespace name

    def fetch_cached(self, ids: list[str], fields: PayloadFields) -> list[RawHit]:
        """`fetch(ids, fields=fields)`, from the field cache where the pool has one (payloads shared with it: read
        only), from the engine otherwise."""
        if self.cache is None:
            return self.fetch(ids, fields=fields)
        return self.cache.read(ids, fields, self.fetch)

    @contextmanager
    def _writing(self, ids: Iterable[str]) -> Iterator[None]:
        try:
            yield
        finally:  # also after a failed write: what reached the engine is unknown
            if self.cache is not None:
                self.cache.forget(list(ids))

    def upsert(self, points: list[StoredPoint]) -> None:
        wanted = {p.id: p.payload for p in points}  # one id twice: the engine keeps the last
        with self._writing(wanted), self.maintained.changing([h.payload for h in super().fetch(list(wanted))]) \
                as after:
            super().upsert(points)
            after += wanted.values()

    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None:
        old = [h.payload for h in super().fetch([point_id])]
        with self._writing([point_id]), self.maintained.changing(old) as after:
            super().set_payload(point_id, payload, key)
            after += [_merged(o, payload, key) for o in old]  # a point that is not there gains nothing

    def set_payload_many(self, point_ids: list[str], payload: dict[str, Any]) -> None:
        old = [h.payload for h in super().fetch(list(dict.fromkeys(point_ids)))]
        with self._writing(point_ids), self.maintained.changing(old) as after:
            super().set_payload_many(point_ids, payload)
            after += [_merged(o, payload, None) for o in old]

    def delete(self, ids: list[str]) -> None:
        with self._writing(ids), self.maintained.changing([h.payload for h in super().fetch(list(dict.fromkeys(ids)))]):
            super().delete(ids)


def read_record(file: Path) -> dict[str, Any] | None:
    """A namespace's record as written; None when missing, unreadable or of another version."""
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("version") == VERSION else None


def write_record(file: Path, totals: Totals, floors: dict[str, list[Any]], pending: bool = False) -> None:
    """Write a namespace's record atomically (a reader sees the old one or the new one)."""
    try:
        file.parent.mkdir(exist_ok=True)
        write_json_atomically(file, {"version": VERSION, "pending": pending, "totals": totals.to_json(),
                                     "floors": floors})
    except OSError as exc:
        raise PoolError(f"cannot write the pool's statistics {file}: {exc.strerror or exc}") from None


def stats_file(directory: Path | None, namespace: str) -> Path | None:
    """Where a namespace's record lives (None: a server pool, which keeps its totals in the handle)."""
    return None if directory is None else directory / STATS_DIR / f"{namespace}.json"
