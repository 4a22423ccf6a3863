"""The memory pool seen through a LangGraph store: ("mtl", <format>) namespaces, read-only.

An item's key is the memory's id and its value the memory as JSON (what `mtl pool show` prints). Searching with a
query is the pool's own dense search (`MemoryPool.search(..., retriever="dense")`, score = cosine similarity) within
the format; without one, the retrievable memories of the format, newest first. Flagged and archived memories are
left out of searches as they are out of retrieval; `get` finds any memory by id (or a merged-away id).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from langgraph.store.base import Item, SearchItem

from mtl_graph.memory.store.match import MTL_ROOT, matches

if TYPE_CHECKING:
    from mtl_graph.memory.base import Memory
    from mtl_graph.memory.pool.pool import MemoryPool

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _made(memory: "Memory") -> datetime:
    return min((s.created_at for s in memory.sources), default=_EPOCH)


def _item(memory: "Memory", cls: type = Item, **extra: Any) -> Any:
    made = _made(memory)
    return cls(namespace=(MTL_ROOT, str(memory.type)), key=memory.id, value=memory.model_dump(mode="json"),
               created_at=made, updated_at=made, **extra)


class PoolView:
    """Read-only items over a MemoryPool."""

    def __init__(self, pool: "MemoryPool") -> None:
        self.pool = pool

    def formats(self) -> list[str]:
        from mtl_graph.memory.formats import names

        return names()

    def namespaces(self) -> list[tuple[str, ...]]:
        """("mtl", format) for every format the pool holds a memory of."""
        return [(MTL_ROOT, name) for name in self.formats() if self.pool.count(name)]

    def get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        if len(namespace) != 2 or namespace[1] not in self.formats():
            return None
        memory = self.pool.get(key)
        return _item(memory) if memory is not None and str(memory.type) == namespace[1] else None

    def search(self, prefix: tuple[str, ...], query: str | None, flt: dict[str, Any] | None,
               need: int) -> list[SearchItem]:
        """Up to `need` items under prefix (() / ("mtl",) / ("mtl", format)), best (or newest) first."""
        if prefix[:1] not in ((), (MTL_ROOT,)) or len(prefix) > 2 or need <= 0:
            return []
        formats = [f for f in self.formats() if len(prefix) < 2 or prefix[1] == f]
        if query:
            return self._ranked(query, formats, flt, need)
        found = [m for m in self.pool if str(m.type) in formats and not m.flagged and not m.archived
                 and matches(m.model_dump(mode="json"), flt)]
        found.sort(key=lambda m: (_made(m), m.id), reverse=True)
        return [_item(m, SearchItem) for m in found[:need]]

    def _ranked(self, query: str, formats: list[str], flt: dict[str, Any] | None, need: int) -> list[SearchItem]:
        hits: list[SearchItem] = []
        for fmt in formats:
            k = need
            while True:  # the filter runs on the hits: widen k until enough pass or the format is exhausted
                found = self.pool.search(query, type=fmt, k=k, retriever="dense")
                kept = [h for h in found if matches(h.memory.model_dump(mode="json"), flt)]
                if len(kept) >= need or len(found) < k:
                    break
                k *= 4
            hits += [_item(h.memory, SearchItem, score=float(h.similarity)) for h in kept[:need]]
        hits.sort(key=lambda h: -(h.score or 0.0))
        return hits[:need]
