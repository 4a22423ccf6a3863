"""Selected payload fields of points, kept in the process between searches (the lifecycle's re-rank fields).

Why: the lifecycle re-ranks 20 candidates to keep 3, and Qdrant Edge reads and parses each point's whole stored
payload whatever fields are selected (~10 us a point; a selection only saves converting the rest to Python), so
reading the candidates' utility and decay fields cost as much as reading them whole. Kept here, a candidate seen
before costs a dictionary look-up.

Why it stays right: the cache belongs to a pool's `CountedStore` (memory/pool/stats.py), through which every write
of the namespace passes; each write forgets the points it touches once the engine returned, and a read that raced
with any write does not fill the cache (a generation count). It is used only where that store is the pool's only
writer: a directory pool, which one process holds at a time (the pool's lock). A server pool, which other
processes write, reads the engine every time. `contents_changed()` clears it with the statistics.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from mtl_graph.memory.engine.storage import PayloadFields, RawHit, payload_fields

LIMIT = 20_000
"""Most points kept (1,000 searches of 20 distinct candidates; the re-rank fields are a few hundred bytes a point
unless a credit map is long); past it the cache starts again."""

Fetch = Callable[[list[str], bool, PayloadFields], list[RawHit]]


class FieldCache:
    """Selected payload fields by point id, for one namespace of one engine in this process."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._points: dict[str, dict[PayloadFields, dict[str, Any]]] = {}
        self._generation = 0
        self.misses = 0
        """Points read from the engine (for tests and benchmarks)."""

    def read(self, ids: list[str], fields: PayloadFields, fetch: Fetch) -> list[RawHit]:
        """The points of `ids` that exist, each once, in the order given, with the selected fields of their
        payloads (shared with the cache: read them, never change them); those not kept are fetched."""
        fields = payload_fields(fields)
        if fields is None:
            raise ValueError("payload fields: a cached read selects some (whole payloads are not kept)")
        with self._lock:
            generation = self._generation
            found = {i: self._points.get(i, {}).get(fields) for i in ids}
        missing = [i for i, payload in found.items() if payload is None]
        if missing:
            hits = fetch(missing, False, fields)
            self.misses += len(missing)
            with self._lock:
                if generation == self._generation:  # no write since the read began: what it read is current
                    if len(self._points) + len(hits) > self.limit:
                        self._points.clear()
                    for hit in hits:
                        self._points.setdefault(hit.id, {})[fields] = hit.payload
            found.update((hit.id, hit.payload) for hit in hits)
        return [RawHit(i, 0.0, payload) for i, payload in found.items() if payload is not None]

    def forget(self, ids: list[str]) -> None:
        """After a write of these points (also when it failed: what reached the engine is unknown)."""
        with self._lock:
            self._generation += 1
            for i in ids:
                self._points.pop(i, None)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._points.clear()
