"""Query vectors: an LRU cache tied to one embeddings object, and embedding ahead of time in the background.

A vector depends only on the model and the text, so the cache is valid for exactly one embeddings object: asked
with another one (a pool reopened with other embeddings, a swapped model), it forgets everything first."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

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
        self._pending: dict[str, Future[list[float]]] = {}
        self._owner: Embeddings | None = None
        self._lock = threading.Lock()
        self._ahead: ThreadPoolExecutor | None = None
        self.hits = self.misses = 0

    def _bind(self, embeddings: Embeddings) -> None:
        """Called under the lock: a different embeddings object invalidates every vector."""
        if embeddings is not self._owner:
            self._vectors.clear()
            self._pending.clear()
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
            pending = self._pending.get(text)
            self.misses += 1
        vector = None
        if pending is not None:
            try:
                vector = pending.result()
            except Exception:  # the background attempt failed: try once more here, where the error is reported
                vector = None
        if vector is None:
            vector = embeddings.embed_query(text)
        self._store(embeddings, text, vector)
        return list(vector)

    def _store(self, embeddings: Embeddings, text: str, vector: list[float]) -> None:
        with self._lock:
            if embeddings is not self._owner:
                return  # the embeddings changed while this vector was computed: it belongs to the old model
            self._pending.pop(text, None)
            if self.config.max_entries == 0:
                return
            self._vectors[text] = tuple(vector)
            self._vectors.move_to_end(text)
            while len(self._vectors) > self.config.max_entries:
                self._vectors.popitem(last=False)

    def embed_ahead(self, embeddings: Embeddings, text: str) -> Future[list[float]]:
        """Start embedding text in a background thread (e.g. the plan, while the sandbox starts)."""
        with self._lock:
            self._bind(embeddings)
            if text in self._vectors:
                done: Future[list[float]] = Future()
                done.set_result(list(self._vectors[text]))
                return done
            if text in self._pending:
                return self._pending[text]
            if self._ahead is None:
                self._ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mtl-embed-ahead")
            future = self._ahead.submit(embeddings.embed_query, text)
            self._pending[text] = future
        future.add_done_callback(lambda f: self._settle(embeddings, text, f))
        return future

    def _settle(self, embeddings: Embeddings, text: str, future: Future[list[float]]) -> None:
        if future.exception() is None:
            self._store(embeddings, text, future.result())
        else:
            with self._lock:
                if self._pending.get(text) is future:
                    del self._pending[text]

    def clear(self) -> None:
        """Forget every vector."""
        with self._lock:
            self._vectors.clear()
            self._pending.clear()

    def __len__(self) -> int:
        return len(self._vectors)

    def close(self) -> None:
        """Stop the background embedder (pending work finishes first)."""
        if self._ahead is not None:
            self._ahead.shutdown(wait=True)
            self._ahead = None
