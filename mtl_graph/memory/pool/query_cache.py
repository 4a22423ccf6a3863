"""Query vectors: an LRU cache tied to one embeddings object.

A vector depends only on the model and the text, so the cache is valid for exactly one embeddings object: asked
with another one (a pool reopened with other embeddings, a swapped model), it forgets everything first."""

from __future__ import annotations

import threading
from collections import OrderedDict

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, Field


class QueryCacheConfig(BaseModel):
    """Size of the query-vector cache."""

    max_entries: int = Field(default=512, ge=0)
    """Query vectors kept (least recently used dropped first); 0 turns the cache off."""


class QueryVectorCache:
    """Least-recently-used query vectors for one embeddings object, thread-safe."""

    def __init__(self, config: QueryCacheConfig | None = None) -> None:
        self.config = config or QueryCacheConfig()
        self._vectors: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._owner: Embeddings | None = None
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _bind(self, embeddings: Embeddings) -> None:
        """Called under the lock: a different embeddings object invalidates every vector."""
        if embeddings is not self._owner:
            self._vectors.clear()
            self._owner = embeddings

    def vector(self, embeddings: Embeddings, text: str) -> list[float]:
        """The query vector of text under embeddings, computed at most once while it stays cached."""
        with self._lock:
            self._bind(embeddings)
            cached = self._vectors.get(text)
            if cached is not None:
                self._vectors.move_to_end(text)
                self.hits += 1
                return list(cached)
            self.misses += 1
        # the model runs outside the lock, so one slow query does not hold up every other search
        vector = embeddings.embed_query(text)
        self._store(embeddings, text, vector)
        return list(vector)

    def _store(self, embeddings: Embeddings, text: str, vector: list[float]) -> None:
        with self._lock:
            if embeddings is not self._owner:
                return  # the embeddings changed while this vector was computed: it belongs to the old model
            if self.config.max_entries == 0:
                return
            self._vectors[text] = tuple(vector)
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.config.max_entries:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        """Forget every vector."""
        with self._lock:
            self._vectors.clear()

    def __len__(self) -> int:
        return len(self._vectors)
