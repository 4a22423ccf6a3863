"""What the lifecycle needs of a pool: the part of `MemoryPool`'s public API that `PoolLifecycle` and the floor use.

The lifecycle is given a pool of this shape and never imports `memory/pool/pool.py`: the pool imports the
lifecycle, not the other way round."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Iterator, Protocol

if TYPE_CHECKING:
    from mtl_graph.memory.base import Memory
    from mtl_graph.memory.engine.storage import PayloadFields, RawHit, Store
    from mtl_graph.memory.pool.filter import SearchFilter
    from mtl_graph.memory.pool.points import SearchHit
    from mtl_graph.memory.pool.search import RankedHit
    from mtl_graph.memory.pool.stats import MaintainedStats


class LifecyclePool(Protocol):
    """A pool as the lifecycle reads and writes it."""

    store: "Store"
    """The pool's namespaced store: credit entries and statuses are written straight to it."""
    dim: int
    """The size of the pool's dense vectors."""
    embeddings: Any
    """The pool's embedding model (the floor embeds its probes with it)."""
    write_lock: AbstractContextManager[Any]
    """Held while writing: credit and quarantine take turns with the pool's other writers."""
    maintained: "MaintainedStats"
    """The pool's counts, format sizes, base rate and floors, kept current by its store's writes."""

    def fetch(self, ids: list[str]) -> list["RawHit"]:
        """Stored points by id, each once; an id merged into another memory finds that memory."""

    def ranked(self, query: str, k: int, where: "SearchFilter", *, retriever: str = "hybrid",
               min_score: float | None = None, with_payload: bool = True) -> list["RankedHit"]:
        """`search`'s top k before the memories are parsed (payloads not read without with_payload)."""

    def read_fields(self, ids: list[str], fields: "PayloadFields") -> list["RawHit"]:
        """The stored points of `ids` (each once, in order) with the selected payload fields alone (read only:
        they may be shared with the pool's cache of them)."""

    def search(self, query: str, type: Any = None, k: int = 3, *, where: "SearchFilter | None" = None,
               retriever: str = "hybrid", min_score: float | None = None) -> list["SearchHit"]:
        """The top k memories for a query, by the ranker alone."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Document vectors for texts, checked against the pool's size."""

    def __iter__(self) -> Iterator["Memory"]:
        """Every memory of the pool."""
