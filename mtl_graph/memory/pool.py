"""MemoryPool: one shared pool of memories over Qdrant (embedded Edge, embedded client, or a server)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from mtl_graph.memory.embeddings import EmbeddingError, embeddings_name, resolve_embeddings
from mtl_graph.memory.location import (
    EmbeddingMismatchError,
    OpenedStore,
    PoolError,
    PoolLockedError,
    open_directory,
    open_server,
)
from mtl_graph.memory.models import (
    Memory,
    MemoryType,
    Outcome,
    Provenance,
    first_validation_error,
    memory_type_of,
    parse_memory,
)
from mtl_graph.memory.query_cache import QueryVectorCache
from mtl_graph.memory.search import ranked_search
from mtl_graph.memory.storage import Conditions, QuerySpec, RawHit, StoredPoint

__all__ = ["MemoryPool", "AddResult", "SearchHit", "ImportReport", "PoolError", "PoolLockedError",
           "EmbeddingMismatchError"]


@dataclass
class AddResult:
    """What happened to one memory given to `add`."""

    id: str
    status: Literal["added", "exists", "merged"]
    merged_into: str | None = None
    similarity: float | None = None


@dataclass
class SearchHit:
    """One retrieved memory."""

    memory: Memory
    score: float
    """The ranking score (RRF when hybrid, cosine otherwise)."""
    similarity: float
    """Cosine similarity between the query and the memory's key text."""
    retriever: Literal["dense", "bm25", "both"]
    """Which retriever found it."""


@dataclass
class ImportReport:
    """The outcome of importing a JSONL file."""

    results: list[AddResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _payload(memory: Memory) -> dict[str, Any]:
    return {
        "memory": memory.model_dump(mode="json"),
        "type": memory.type,
        "outcome": memory.outcome.value,
        "domains": memory.domains,
        "source_task_ids": memory.source_task_ids,
        "models": memory.models,
    }


def _memory_of(hit: RawHit) -> Memory:
    """The memory a stored point holds; a point that is not one is a clear error, not a crash deep inside."""
    try:
        return parse_memory(hit.payload["memory"])
    except (KeyError, TypeError, ValidationError) as exc:
        detail = first_validation_error(exc) if isinstance(exc, ValidationError) else "no memory in its payload"
        raise PoolError(f"point {hit.id} in the pool is not a valid memory ({detail})") from None


class _BatchVectors:
    """Unit vectors of the memories accepted so far in one add_many call, per type (in-batch dedup).

    One matrix-vector product per memory instead of a Python cosine per pair: a batch of 1000 stays cheap."""

    def __init__(self, capacity: int, dim: int) -> None:
        self._capacity, self._dim = capacity, dim
        self._rows: dict[str, tuple[np.ndarray, list[str]]] = {}

    @staticmethod
    def _unit(vector: Sequence[float]) -> np.ndarray:
        v = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    def add(self, type_: str, memory_id: str, vector: Sequence[float]) -> None:
        matrix, ids = self._rows.setdefault(type_, (np.empty((self._capacity, self._dim), np.float32), []))
        matrix[len(ids)] = self._unit(vector)
        ids.append(memory_id)

    def first_similar(self, type_: str, vector: Sequence[float], threshold: float) -> tuple[str | None, float | None]:
        """The first memory (in batch order) of this type with cosine >= threshold."""
        if type_ not in self._rows or not self._rows[type_][1]:
            return None, None
        matrix, ids = self._rows[type_]
        sims = matrix[: len(ids)] @ self._unit(vector)
        hits = np.flatnonzero(sims >= threshold)
        return (ids[hits[0]], float(sims[hits[0]])) if hits.size else (None, None)


def _merge_sources(target: Memory, extra: Iterable[Provenance]) -> bool:
    known = {(s.source_task_id, s.domain, s.task_model, s.distill_model) for s in target.sources}
    new = [s for s in extra if (s.source_task_id, s.domain, s.task_model, s.distill_model) not in known]
    if new:
        target.sources = [*target.sources, *new]
    return bool(new)


class MemoryPool:
    """Add, search and manage memories. Open with `MemoryPool.open(location)`."""

    _open_pools: dict[str, "MemoryPool"] = {}
    _registry_lock = threading.Lock()

    def __init__(self, opened: OpenedStore, embeddings: Embeddings, location: str, dedup_threshold: float) -> None:
        from qdrant_edge import Bm25  # a local BM25 tokenizer: sparse vectors without any download

        self._opened = opened
        self.store = opened.store
        self.dim = opened.dim
        self.engine = opened.engine
        self.embeddings = embeddings
        self.location = location
        self.dedup_threshold = dedup_threshold
        self._bm25 = Bm25()
        self._refs = 1
        self._write_lock = threading.RLock()
        self._query_cache = QueryVectorCache()

    @classmethod
    def open(cls, location: str | Path = ":memory:", embeddings: Embeddings | str | None = None, *,
             engine: Literal["edge", "client"] | None = None, dedup_threshold: float | None = None,
             api_key: str | None = None) -> "MemoryPool":
        """Open (or create) a pool at ":memory:", a directory, or an http(s):// Qdrant URL.

        Within one process, opening the same directory again returns the same pool."""
        from mtl_graph.settings import get_settings

        settings = get_settings()
        location = str(location)
        emb = resolve_embeddings(embeddings if embeddings is not None else settings.embeddings)
        threshold = dedup_threshold if dedup_threshold is not None else settings.dedup_threshold
        if location.startswith(("http://", "https://")):
            return cls(open_server(location, emb, api_key or settings.qdrant_api_key), emb, location, threshold)
        if location == ":memory:":
            return cls(open_directory(None, emb, engine or settings.engine), emb, location, threshold)
        key = str(Path(location).expanduser().resolve())
        with cls._registry_lock:
            pool = cls._open_pools.get(key)
            if pool is not None:
                if embeddings_name(emb) != embeddings_name(pool.embeddings):
                    raise EmbeddingMismatchError(
                        f"pool {key} is open with embeddings {embeddings_name(pool.embeddings)!r}, "
                        f"not {embeddings_name(emb)!r}")
                pool._refs += 1
                return pool
            pool = cls(open_directory(Path(key), emb, engine or settings.engine), emb, key, threshold)
            cls._open_pools[key] = pool
            return pool

    def close(self) -> None:
        """Release this handle; the pool closes when the last handle in the process is released."""
        with self._registry_lock:
            self._refs -= 1
            if self._refs > 0:
                return
            self._open_pools.pop(self.location, None)
        self._query_cache.close()
        self.store.close()
        self._opened.release()

    def __enter__(self) -> "MemoryPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ vectors
    def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self.embeddings.embed_documents(texts)
        for v in vectors:
            if len(v) != self.dim:
                raise EmbeddingError(f"embeddings returned a vector of size {len(v)}; the pool expects {self.dim}")
        return vectors

    def _sparse(self, text: str, query: bool = False) -> tuple[list[int], list[float]]:
        vec = self._bm25.embed_query(text) if query else self._bm25.embed_document(text)
        return list(vec.indices), list(vec.values)

    # ------------------------------------------------------------------ writing
    def add(self, memory: Memory | dict[str, Any]) -> AddResult:
        """Add one memory (see `add_many`)."""
        return self.add_many([memory])[0]

    def add_many(self, memories: Iterable[Memory | dict[str, Any]], keep_stats: bool = False) -> list[AddResult]:
        """Add memories with one batch embedding. Idempotent; near-duplicates merge their provenance.

        A memory whose cosine to an existing memory of the same type is >= dedup_threshold is not stored
        again: its sources are added to the existing one and its result says "merged"."""
        items = [m if not isinstance(m, dict) else parse_memory(m) for m in memories]
        if not items:
            return []
        with self._write_lock:
            vectors = self._embed([m.key_text() for m in items])
            existing = {h.id: h for h in self.store.retrieve(list({m.id for m in items}))}
            nearest = self.store.query([
                QuerySpec(limit=1, where=Conditions(equals={"type": m.type}), dense=v) for m, v in zip(items, vectors)
            ])
            results: list[AddResult] = []
            pending: dict[str, tuple[Memory, list[float]]] = {}
            batch = _BatchVectors(len(items), self.dim)
            touched: dict[str, Memory] = {}
            for memory, vector, near in zip(items, vectors, nearest):
                if not keep_stats:
                    memory = memory.model_copy(update={"stats": type(memory.stats)()})
                target_id, sim = self._duplicate_of(memory, vector, near, existing, pending, batch)
                if target_id is None:
                    pending[memory.id] = (memory, vector)
                    batch.add(memory.type, memory.id, vector)
                    results.append(AddResult(memory.id, "added"))
                    continue
                if target_id in pending:  # merged into a memory of this same batch, not stored yet
                    _merge_sources(pending[target_id][0], memory.sources)
                else:
                    target = touched.get(target_id) or _memory_of(existing.get(target_id) or near[0])
                    if _merge_sources(target, memory.sources):
                        touched[target_id] = target
                status = "exists" if target_id == memory.id else "merged"
                results.append(AddResult(memory.id, status, None if status == "exists" else target_id, sim))
            if pending:
                self.store.upsert([
                    StoredPoint(m.id, v, self._sparse(m.key_text()), _payload(m)) for m, v in pending.values()
                ])
                # Qdrant Edge indexes only when asked. Its planner acts once the unindexed segment passes the
                # indexing threshold (about 7k memories of 384 floats) and is a ~0.1 ms no-op otherwise, so
                # asking after every write keeps search on HNSW (12 ms -> 1.4 ms at 100k); the write that
                # crosses the threshold pays the build (seconds). Server / local client: a no-op.
                self.store.optimize()
            for target in touched.values():
                self.store.set_payload(target.id, _payload(target))
        return results

    def _duplicate_of(self, memory: Memory, vector: list[float], near: list[RawHit],
                      existing: dict[str, RawHit], pending: dict[str, tuple[Memory, list[float]]],
                      batch: "_BatchVectors") -> tuple[str | None, float | None]:
        if memory.id in existing or memory.id in pending:
            return memory.id, 1.0
        if near and near[0].score >= self.dedup_threshold:
            return near[0].id, near[0].score
        return batch.first_similar(memory.type, vector, self.dedup_threshold)

    def update_stats(self, ids: Iterable[str], outcome: Outcome | str) -> None:
        """Count one retrieval of each memory into a run that ended with `outcome`."""
        outcome = Outcome(outcome)
        with self._write_lock:
            for hit in self.store.retrieve(list(ids)):
                memory = _memory_of(hit)
                stats = memory.stats.model_copy()
                stats.retrieved += 1
                stats.retrieved_success += outcome == Outcome.SUCCESS
                stats.retrieved_failure += outcome == Outcome.FAILURE
                memory.stats = stats
                self.store.set_payload(hit.id, _payload(memory))

    def delete(self, memory_id: str) -> bool:
        """Delete one memory; False when it was not there."""
        with self._write_lock:
            if not self.store.retrieve([memory_id]):
                return False
            self.store.delete([memory_id])
            return True

    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge builds HNSW here; otherwise a no-op)."""
        self.store.optimize()

    # ------------------------------------------------------------------ reading
    def get(self, memory_id: str) -> Memory | None:
        """One memory by id, or None."""
        hits = self.store.retrieve([memory_id])
        return _memory_of(hits[0]) if hits else None

    def count(self, type: MemoryType | str | None = None) -> int:
        """Number of memories, optionally of one type."""
        return self.store.count(Conditions(equals={"type": memory_type_of(str(type)).value}) if type else None)

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[Memory]:
        for hit in self.store.scroll():
            yield _memory_of(hit)

    def stats(self) -> dict[str, dict[str, int]]:
        """Counts by type, domain and outcome."""
        out: dict[str, dict[str, int]] = {"type": {}, "domain": {}, "outcome": {}}
        for memory in self:
            out["type"][memory.type] = out["type"].get(memory.type, 0) + 1
            out["outcome"][memory.outcome.value] = out["outcome"].get(memory.outcome.value, 0) + 1
            for domain in memory.domains or ["(none)"]:
                out["domain"][domain] = out["domain"].get(domain, 0) + 1
        return out

    def search(self, query: str, type: MemoryType | str | None = None, k: int = 3, *,
               exclude_domains: Iterable[str] = (), exclude_task_ids: Iterable[str] = (),
               outcome: Outcome | str | None = None, hybrid: bool = True,
               min_score: float | None = None, only_ids: Iterable[str] | None = None) -> list[SearchHit]:
        """Top-k memories for a query. Hybrid (dense + BM25 fused with RRF) runs inside Qdrant.

        exclude_domains / exclude_task_ids drop any memory with a source in them (hold-one-out and
        the same-task contamination guard); min_score is a floor on cosine similarity; only_ids restricts the
        search to a subset of the pool (e.g. a seeded fraction for scaling experiments)."""
        if not query or not query.strip():
            raise ValueError("search query is empty")
        if k <= 0:
            return []
        where = Conditions(
            equals={name: str(value) for name, value in
                    (("type", type and memory_type_of(str(type)).value), ("outcome", outcome and Outcome(outcome).value))
                    if value},
            excludes={"domains": list(exclude_domains), "source_task_ids": list(exclude_task_ids)},
            only_ids=list(only_ids) if only_ids is not None else None,
        )
        dense = self.query_vector(query)
        sparse = self._sparse(query, query=True) if hybrid else None
        ranked = ranked_search(self.store, dense, sparse, where, k, max(20, 4 * k), min_score)
        return [SearchHit(_memory_of(r.raw), r.raw.score, r.similarity, r.retriever) for r in ranked]

    def query_vector(self, query: str) -> list[float]:
        """The query's vector, from the pool's LRU cache when it was asked before (or embedded ahead)."""
        vector = self._query_cache.vector(self.embeddings, query)
        if len(vector) != self.dim:
            raise EmbeddingError(f"embeddings returned a vector of size {len(vector)}; the pool expects {self.dim}")
        return vector

    def embed_ahead(self, query: str) -> None:
        """Start embedding a query in the background (e.g. the plan while the sandbox starts): a later
        `search(query)` then finds its vector ready."""
        self._query_cache.embed_ahead(self.embeddings, query)

    # ------------------------------------------------------------------ files
    def export(self, path: str | Path) -> int:
        """Write every memory (with provenance and stats) as JSONL; returns the count."""
        n = 0
        with open(path, "w", encoding="utf-8") as fh:
            for memory in self:
                fh.write(memory.model_dump_json() + "\n")
                n += 1
        return n

    def import_jsonl(self, path: str | Path, batch_size: int = 256, keep_stats: bool = True) -> ImportReport:
        """Add every valid line of a JSONL file; bad lines are reported as `file:line: why`."""
        report = ImportReport()
        batch: list[Memory] = []
        try:
            fh = open(path, "rb")  # decoded line by line: one bad line must not cost the good ones
        except OSError as exc:
            raise PoolError(f"cannot read {path}: {exc.strerror}") from None
        with fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8")
                    if not line.strip():
                        continue
                    batch.append(parse_memory(json.loads(line)))
                except UnicodeDecodeError:
                    report.errors.append(f"{path}:{lineno}: not UTF-8 text")
                except json.JSONDecodeError as exc:
                    report.errors.append(f"{path}:{lineno}: malformed JSON ({exc.msg})")
                except ValidationError as exc:
                    report.errors.append(f"{path}:{lineno}: invalid memory ({first_validation_error(exc)})")
                if len(batch) >= batch_size:
                    report.results += self.add_many(batch, keep_stats=keep_stats)
                    batch = []
        report.results += self.add_many(batch, keep_stats=keep_stats)
        return report
