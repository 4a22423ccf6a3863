"""The relevance floor, calibrated from the pool itself.

How it is calibrated: two dozen texts that have nothing to do with software (data/floor_probes.txt: baking,
football, gardening...) are searched against the pool's memories of the format being retrieved, dense only. The
best cosine each probe reaches says how similar *unrelated* text looks to this pool with this embedding model;
the floor is the highest of those (a memory must match the task better than anything off-topic matches the
pool), and at least `MIN_FLOOR`. A pool with fewer than `MIN_MEMORIES` memories of the format has too little to
calibrate on: its floor is `MIN_FLOOR`. The floor is recomputed when the whole pool has grown or shrunk by a tenth.
A floor set in the lifecycle settings (`relevance_floor`) is used as it is.

Each calibrated floor is kept in the pool's statistics record (memory/pool/stats.py) with the pool size it was
computed at, and the format's size is read from the maintained counts: a reopened pool's first search neither
embeds the probes nor searches them again.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from mtl_graph.memory.engine.storage import Conditions, QuerySpec

if TYPE_CHECKING:
    from mtl_graph.memory.lifecycle.protocol import LifecyclePool
    from mtl_graph.memory.pool.filter import SearchFilter
    from mtl_graph.memory.pool.stats import MaintainedStats

MIN_FLOOR = 0.15
"""The floor of a small pool, and the lowest calibrated one (MiniLM puts unrelated English text around 0-0.15)."""
MIN_MEMORIES = 20
"""Memories of a format needed before its floor is calibrated."""
RECALIBRATE = 0.1
"""Relative change in the pool's size after which the floor is calibrated again."""


@lru_cache(maxsize=1)
def probes() -> tuple[str, ...]:
    text = resources.files("mtl_graph.memory.lifecycle").joinpath("data/floor_probes.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


class FloorCache:
    """Per pool handle: the calibrated floor of each format, with the pool size it was computed at (kept in the
    pool's statistics record too, when the handle has one)."""

    def __init__(self, kept: "MaintainedStats | None" = None) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._floors: dict[str, tuple[int, float, str]] = {}
        self._probe_vectors: list[list[float]] | None = None

    def clear(self) -> None:
        with self._lock:
            self._floors.clear()

    def floor(self, pool: "LifecyclePool", where: "SearchFilter") -> tuple[float, str]:
        """(floor, how it was decided) for searches of one format (`where.type`; None: every format) under the
        search's filter (the probes are searched with it; the format's size counts its equality conditions)."""
        key = where.type or "*"
        conditions = where.conditions()
        # the pool's size from its maintained statistics: the engine's count of the default namespace subtracts a
        # facet over the namespaces, which walks the pool (9 ms of a 2k pool's 13 ms lifecycle search)
        total = self._kept.totals().points if self._kept is not None else pool.store.count()
        with self._lock:
            cached = self._floors.get(key)
        if cached is None and self._kept is not None:
            cached = self._kept.floor(key)
        if cached is not None and abs(total - cached[0]) <= RECALIBRATE * max(cached[0], 1):
            with self._lock:
                self._floors[key] = cached
            return cached[1], cached[2]
        if self._kept is not None and dict(conditions.equals) == ({"type": where.type} if where.type else {}):
            counts = self._kept.totals()  # the format's size without a filtered count (which walks the pool)
            size = counts.types.get(where.type, 0) if where.type else counts.points
        else:
            size = pool.store.count(Conditions(equals=dict(conditions.equals)))
        if size < MIN_MEMORIES:
            value, source = MIN_FLOOR, f"default ({size} {key} memories: too few to calibrate)"
        else:
            vectors = self._probes(pool)
            hits = pool.store.query([QuerySpec(limit=1, where=conditions, dense=v, with_payload=False)
                                     for v in vectors])
            best = sorted(h[0].score for h in hits if h)
            value = max(MIN_FLOOR, best[-1] if best else MIN_FLOOR)
            source = (f"calibrated: the best of {len(best)} off-topic probes against {size} {key} memories "
                      f"(median {best[len(best) // 2]:.3f})" if best else "default")
        with self._lock:
            self._floors[key] = (total, value, source)
        if self._kept is not None:
            self._kept.keep_floor(key, total, value, source)
        return value, source

    def _probes(self, pool: "LifecyclePool") -> list[list[float]]:
        if self._probe_vectors is None:
            self._probe_vectors = probe_vectors(pool.embeddings, pool.dim)
        return self._probe_vectors


_PROBE_VECTORS: dict[tuple[str, int], list[list[float]]] = {}
_PROBE_LOCK = threading.Lock()


def probe_vectors(embeddings: Any, dim: int) -> list[list[float]]:
    """The probes embedded once per embedding model (and size) in a process: every pool of it shares them."""
    from mtl_graph.memory.engine.embeddings import embeddings_name

    name = (embeddings_name(embeddings), dim)
    with _PROBE_LOCK:
        if name not in _PROBE_VECTORS:
            _PROBE_VECTORS[name] = embeddings.embed_documents(list(probes()))
        return _PROBE_VECTORS[name]
