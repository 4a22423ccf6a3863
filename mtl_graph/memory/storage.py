"""Two embedded Qdrant engines (plus a server) behind one small storage protocol.

`ClientStore` is qdrant-client: local mode (":memory:" or a directory) or a server URL, one code path.
`EdgeStore` is Qdrant Edge (qdrant-edge-py), the in-process Rust engine with HNSW and payload indexes.
Hybrid fusion (dense + BM25 via RRF) runs inside Qdrant in both: prefetch + fusion query.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol

from mtl_graph.memory.edge_build_worker import apply_write, edge_config
from mtl_graph.memory.edge_indexing import EdgeIndexConfig
from mtl_graph.memory.edge_rebuild import (
    Rebuild,
    RebuildError,
    SwapGuard,
    indexed_points,
    journal_entry,
    point_link,
    points_message,
    recover_interrupted_swap,
    replaced_dir,
)

DENSE = "dense"
SPARSE = "bm25"
NAMESPACE_KEY = "namespace"
"""The payload key of a point's namespace (see namespace.py); a point without it is in DEFAULT_NAMESPACE."""
DEFAULT_NAMESPACE = "default"
INDEXED_FIELDS = ("type", "domains", "outcome", "source_task_ids", "models", "dedup_key", "flagged", "merged_ids",
                  "status", "derived_from", NAMESPACE_KEY)
FACET_LIMIT = 100_000
"""Most namespaces one listing reports."""
RRF_K = 60
"""Reciprocal rank fusion constant: a point at 0-based rank r of a fused list contributes 1 / (RRF_K + r)."""
HNSW_EF = 400
"""HNSW beam width for dense queries. On one indexed segment of a 100k pool (what background builds make),
recall@3 against exact search with a type filter and a domain held out: ef 256 0.965, 384 0.980, 512 0.983,
768 0.988, dense query p50 2.5 / 2.8 / 4.1 / 7.8 ms on a loaded 2-core machine. Unindexed segments ignore it."""


@dataclass
class Conditions:
    """A filter in engine-neutral form: fields that must equal a value, fields that must not hold any of values."""

    equals: dict[str, str] = field(default_factory=dict)
    excludes: dict[str, list[str]] = field(default_factory=dict)
    only_ids: list[str] | None = None
    """When set, only these point ids may match (pool subsets for scaling experiments)."""
    namespace: str | None = None
    """When set, only points of this namespace match (the default one: points without a namespace, too)."""

    def is_empty(self) -> bool:
        return not self.equals and not any(self.excludes.values()) and self.only_ids is None and self.namespace is None


@dataclass
class StoredPoint:
    id: str
    dense: list[float]
    sparse: tuple[list[int], list[float]]
    payload: dict[str, Any]


@dataclass
class RawHit:
    id: str
    score: float
    payload: dict[str, Any]
    dense: list[float] | None = None


class Store(Protocol):
    """What MemoryPool needs from an engine."""

    def upsert(self, points: list[StoredPoint]) -> None: ...
    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None: ...
    def retrieve(self, ids: list[str], with_dense: bool = False) -> list[RawHit]: ...
    def delete(self, ids: list[str]) -> None: ...
    def count(self, where: Conditions | None = None) -> int: ...
    def scroll(self, batch: int = 256, where: Conditions | None = None) -> Iterator[RawHit]: ...
    def scroll_points(self, batch: int = 256, where: Conditions | None = None) -> Iterator[StoredPoint]: ...
    def namespaces(self) -> dict[str, int]: ...
    def query(self, requests: list["QuerySpec"]) -> list[list[RawHit]]: ...
    def optimize(self, wait: bool = False) -> None: ...
    def close(self) -> None: ...


@dataclass
class QuerySpec:
    """One query: dense only, sparse only, or both fused with RRF; always filtered by `where`."""

    limit: int
    where: Conditions
    dense: list[float] | None = None
    sparse: tuple[list[int], list[float]] | None = None
    prefetch_limit: int = 20
    with_dense: bool = False
    with_payload: bool = True
    """False for id-only lists (e.g. retriever attribution): reading payloads is most of a small query's cost."""


# --------------------------------------------------------------------------------------------
class ClientStore:
    """qdrant-client: local mode or server, same calls."""

    def __init__(self, client: Any, collection: str, dim: int | None = None, local: bool = False) -> None:
        from qdrant_client import models

        self._m = models
        self.client = client
        self.collection = collection
        self._local = local
        if dim is not None and not client.collection_exists(collection):
            client.create_collection(
                collection,
                vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
        if dim is not None and not local:  # local mode has no payload indexes
            # also on a collection made before a field was indexed (the namespace): the server builds it once
            indexed = client.get_collection(collection).payload_schema or {}
            for name in (f for f in INDEXED_FIELDS if f not in indexed):
                client.create_payload_index(collection, name, self._schema(name))

    def _schema(self, name: str) -> Any:
        m = self._m
        if name == NAMESPACE_KEY:  # Qdrant's multitenancy: points of one tenant stored together on the server
            return m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True)
        return m.PayloadSchemaType.KEYWORD

    def _filter(self, where: Conditions | None) -> Any:
        if where is None or where.is_empty():
            return None
        m = self._m
        must: list[Any] = [m.FieldCondition(key=k, match=m.MatchValue(value=v)) for k, v in where.equals.items()]
        if where.only_ids is not None:
            must.append(m.HasIdCondition(has_id=list(where.only_ids)))
        must_not = [m.FieldCondition(key=k, match=m.MatchAny(any=list(v))) for k, v in where.excludes.items() if v]
        if where.namespace == DEFAULT_NAMESPACE:  # every point naming no other: older pools need no migration
            must_not.append(m.FieldCondition(key=NAMESPACE_KEY, match=m.MatchExcept(**{"except": [DEFAULT_NAMESPACE]})))
        elif where.namespace is not None:
            must.append(m.FieldCondition(key=NAMESPACE_KEY, match=m.MatchValue(value=where.namespace)))
        return m.Filter(must=must or None, must_not=must_not or None)

    def upsert(self, points: list[StoredPoint]) -> None:
        m = self._m
        self.client.upsert(
            self.collection,
            points=[
                m.PointStruct(
                    id=p.id,
                    vector={DENSE: p.dense, SPARSE: m.SparseVector(indices=p.sparse[0], values=p.sparse[1])},
                    payload=p.payload,
                )
                for p in points
            ],
        )

    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None:
        # Merge, not overwrite: keys another writer added (a run's credit entry) survive a rewrite of the memory.
        self.client.set_payload(self.collection, payload=payload, points=[point_id], key=key)

    def retrieve(self, ids: list[str], with_dense: bool = False) -> list[RawHit]:
        records = self.client.retrieve(self.collection, ids=ids, with_payload=not with_dense,
                                       with_vectors=[DENSE] if with_dense else False)
        return [RawHit(str(r.id), 0.0, r.payload or {}, (r.vector or {}).get(DENSE) if with_dense else None)
                for r in records]

    def delete(self, ids: list[str]) -> None:
        self.client.delete(self.collection, points_selector=self._m.PointIdsList(points=ids))

    def count(self, where: Conditions | None = None) -> int:
        return self.client.count(self.collection, count_filter=self._filter(where), exact=True).count

    def namespaces(self) -> dict[str, int]:
        """Points per namespace named in payloads (points naming none are not listed)."""
        hits = self.client.facet(self.collection, NAMESPACE_KEY, limit=FACET_LIMIT, exact=True).hits
        return {str(h.value): h.count for h in hits}

    def scroll(self, batch: int = 256, where: Conditions | None = None) -> Iterator[RawHit]:
        offset = None
        while True:
            records, offset = self.client.scroll(self.collection, limit=batch, offset=offset, with_payload=True,
                                                 scroll_filter=self._filter(where))
            for r in records:
                yield RawHit(str(r.id), 0.0, r.payload or {})
            if offset is None:
                return

    def scroll_points(self, batch: int = 256, where: Conditions | None = None) -> Iterator[StoredPoint]:
        """Every point whole: payload, dense and sparse vectors (snapshots)."""
        offset = None
        while True:
            records, offset = self.client.scroll(self.collection, limit=batch, offset=offset, with_payload=True,
                                                 with_vectors=True, scroll_filter=self._filter(where))
            for r in records:
                sparse = (r.vector or {}).get(SPARSE)
                yield StoredPoint(str(r.id), list(r.vector[DENSE]), (list(sparse.indices), list(sparse.values))
                                  if sparse is not None else ([], []), r.payload or {})
            if offset is None:
                return

    def _request(self, spec: QuerySpec) -> Any:
        m = self._m
        flt = self._filter(spec.where)
        sparse = m.SparseVector(indices=spec.sparse[0], values=spec.sparse[1]) if spec.sparse else None
        with_vectors = [DENSE] if spec.with_dense else False
        params = None if self._local else m.SearchParams(hnsw_ef=HNSW_EF)  # local mode is exact (and warns)
        if spec.dense is not None and sparse is not None:
            prefetch = [
                m.Prefetch(query=spec.dense, using=DENSE, limit=spec.prefetch_limit, filter=flt, params=params),
                m.Prefetch(query=sparse, using=SPARSE, limit=spec.prefetch_limit, filter=flt),
            ]
            return m.QueryRequest(
                prefetch=prefetch, query=m.RrfQuery(rrf=m.Rrf(k=RRF_K)), limit=spec.limit,
                with_payload=spec.with_payload, with_vector=with_vectors,
            )
        query, using = (spec.dense, DENSE) if spec.dense is not None else (sparse, SPARSE)
        return m.QueryRequest(
            query=query, using=using, filter=flt, limit=spec.limit, with_payload=spec.with_payload,
            with_vector=with_vectors, params=params if spec.dense is not None else None,
        )

    def query(self, requests: list[QuerySpec]) -> list[list[RawHit]]:
        responses = self.client.query_batch_points(self.collection, requests=[self._request(r) for r in requests])
        out = []
        for resp in responses:
            out.append([
                RawHit(str(p.id), p.score, p.payload or {}, (p.vector or {}).get(DENSE) if p.vector else None)
                for p in resp.points
            ])
        return out

    def optimize(self, wait: bool = False) -> None:
        pass  # the server optimizes by itself; local mode has nothing to optimize

    def close(self) -> None:
        self.client.close()


# --------------------------------------------------------------------------------------------
class EdgeStore:
    """Qdrant Edge: an in-process shard in a directory, its HNSW index built in the background (edge_rebuild.py)."""

    def __init__(self, path: str, dim: int | None = None, indexing: EdgeIndexConfig | None = None) -> None:
        import qdrant_edge as q

        self._q = q
        self.path = Path(path)
        self.dim = dim
        self.indexing = indexing or EdgeIndexConfig()
        recover_interrupted_swap(self.path)
        exists = (self.path / "edge_config.json").exists() or any(self.path.glob("segments*"))
        config = None if dim is None else self._edge_config()
        if config is not None and not exists:
            self.shard = q.EdgeShard.create(path, config)
            for name in INDEXED_FIELDS:
                self.shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
        else:
            self.shard = self._load(config)
            if config is not None:  # a shard made before a field was indexed (the namespace) gets its index now
                known = self.shard.info().payload_schema
                for name in (f for f in INDEXED_FIELDS if f not in known):
                    self.shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
        self.indexed = indexed_points(self.path)
        self._guard = SwapGuard()
        self._writing = threading.Lock()  # one writer at a time: the journal's order is the shard's order
        self._rebuild: Rebuild | None = None
        self._changed = 0
        """Points written or deleted since this shard was built (or opened): they are not (or wrongly) indexed."""
        self._retry_above = 0
        self.builds = 0
        """Index builds swapped in since this shard was opened."""
        self._closed = False

    def _edge_config(self) -> Any:
        # Payloads mapped on demand ("Cold", Edge's default; see edge_build_worker.edge_config), not loaded whole
        # ("Cached"): a search reads the payloads of its top k only. Applied to older shards too when they are
        # loaded (segments written with Cached keep it until rewritten).
        return edge_config(self._q, self.build_config(), building=False)

    def _load(self, config: Any) -> Any:
        try:
            # by its real path: a swap relinks self.path while this shard is still open
            return self._q.EdgeShard.load(str(self.path.resolve()), config)  # upgrades older shards' settings
        except Exception:
            if config is None:
                raise
            return self._q.EdgeShard.load(str(self.path.resolve()))

    def build_config(self) -> dict[str, Any]:
        """What the index worker needs to create a shard like this one."""
        return {"dim": self.dim, "dense": DENSE, "sparse": SPARSE, "fields": list(INDEXED_FIELDS),
                "hnsw_m": self.indexing.hnsw_m, "ef_construct": self.indexing.ef_construct,
                "full_scan_threshold_kb": self.indexing.full_scan_threshold_kb}

    def _filter(self, where: Conditions | None) -> Any:
        if where is None or where.is_empty():
            return None
        q = self._q
        must: list[Any] = [q.FieldCondition(key=k, match=q.MatchValue(v)) for k, v in where.equals.items()]
        if where.only_ids is not None:
            must.append(q.HasIdCondition(set(where.only_ids)))
        must_not = [q.FieldCondition(key=k, match=q.MatchAny(list(v))) for k, v in where.excludes.items() if v]
        if where.namespace == DEFAULT_NAMESPACE:  # every point naming no other: older pools need no migration
            must_not.append(q.FieldCondition(key=NAMESPACE_KEY, match=q.MatchExcept([DEFAULT_NAMESPACE])))
        elif where.namespace is not None:
            must.append(q.FieldCondition(key=NAMESPACE_KEY, match=q.MatchValue(where.namespace)))
        return q.Filter(must=must or None, must_not=must_not or None)

    def _write(self, operation: Any, entry: tuple, changes: int = 0) -> None:
        with self._writing, self._guard.shared():
            self.shard.update(operation)
            self._changed += changes
            if self._rebuild is not None:
                self._rebuild.journal.append(entry)

    def upsert(self, points: list[StoredPoint]) -> None:
        q = self._q
        self._write(q.UpdateOperation.upsert_points([
            q.Point(p.id, {DENSE: p.dense, SPARSE: q.SparseVector(p.sparse[0], p.sparse[1])}, p.payload)
            for p in points
        ]), journal_entry(points), len(points))

    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None:
        # Merge, not overwrite: keys another writer added (a run's credit entry) survive a rewrite of the memory.
        self._write(self._q.UpdateOperation.set_payload([point_id], payload, key=key),
                    ("payload", point_id, payload, key))

    def retrieve(self, ids: list[str], with_dense: bool = False) -> list[RawHit]:
        """Points by id: payloads, or (with_dense) dense vectors alone."""
        with self._guard.shared():
            records = self.shard.retrieve(ids, not with_dense, [DENSE] if with_dense else False)
        return [RawHit(str(r.id), 0.0, r.payload or {}, r.vector.get(DENSE) if isinstance(r.vector, dict) else None)
                for r in records]

    def delete(self, ids: list[str]) -> None:
        self._write(self._q.UpdateOperation.delete_points(ids), ("delete", list(ids)), len(ids))

    def count(self, where: Conditions | None = None) -> int:
        with self._guard.shared():
            if where is None or where.is_empty():
                # The shard's own tally (exact: deletes and overwrites included) in ~0.05 ms; an exact count
                # request walks every point (11 ms at 100k), which the integrity ledger paid after every write.
                return self.shard.info().points_count
            return self.shard.count(self._q.CountRequest(exact=True, filter=self._filter(where)))

    def namespaces(self) -> dict[str, int]:
        """Points per namespace named in payloads (from the payload index; points naming none are not listed)."""
        request = self._q.FacetRequest(NAMESPACE_KEY, limit=FACET_LIMIT, exact=True)
        with self._guard.shared():
            return {str(h.value): h.count for h in self.shard.facet(request).hits}

    def _scroll(self, batch: int, vectors: bool, where: Conditions | None = None) -> Iterator[list[Any]]:
        """Records in id order, one batch per call into the shard (a swap may happen between batches)."""
        offset = None
        with_vector = [DENSE, SPARSE] if vectors else None
        flt = self._filter(where)
        while True:
            with self._guard.shared():
                records, offset = self.shard.scroll(self._q.ScrollRequest(
                    offset=offset, limit=batch, filter=flt, with_payload=True, with_vector=with_vector))
            if records:
                yield records
            if offset is None or not records:
                return

    def scroll(self, batch: int = 256, where: Conditions | None = None) -> Iterator[RawHit]:
        for records in self._scroll(batch, vectors=False, where=where):
            for r in records:
                yield RawHit(str(r.id), 0.0, r.payload or {})

    def scroll_points(self, batch: int = 256, where: Conditions | None = None) -> Iterator[StoredPoint]:
        """Every point whole: payload, dense and sparse vectors (snapshots)."""
        for records in self._scroll(batch, vectors=True, where=where):
            for r in records:
                sparse = r.vector.get(SPARSE)
                yield StoredPoint(str(r.id), list(r.vector[DENSE]), (list(sparse.indices), list(sparse.values))
                                  if sparse is not None else ([], []), r.payload or {})

    def _points_for_build(self, batch: int = 512) -> Iterator[tuple]:
        for records in self._scroll(batch, vectors=True):
            sparse = [r.vector.get(SPARSE) for r in records]
            yield points_message([str(r.id) for r in records], [r.vector[DENSE] for r in records],
                                 [(list(v.indices), list(v.values)) if v is not None else ([], []) for v in sparse],
                                 [r.payload or {} for r in records])

    def _request(self, spec: QuerySpec) -> Any:
        q = self._q
        flt = self._filter(spec.where)
        sparse = q.SparseVector(spec.sparse[0], spec.sparse[1]) if spec.sparse else None
        with_vector = [DENSE] if spec.with_dense else False
        params = q.SearchParams(hnsw_ef=HNSW_EF)
        if spec.dense is not None and sparse is not None:
            prefetches = [
                q.Prefetch(limit=spec.prefetch_limit, query=q.Query.Nearest(spec.dense, using=DENSE), filter=flt,
                           params=params),
                q.Prefetch(limit=spec.prefetch_limit, query=q.Query.Nearest(sparse, using=SPARSE), filter=flt),
            ]
            return q.QueryRequest(
                limit=spec.limit, prefetches=prefetches, query=q.Fusion.Rrf(k=RRF_K),
                with_payload=spec.with_payload, with_vector=with_vector,
            )
        vector, using = (spec.dense, DENSE) if spec.dense is not None else (sparse, SPARSE)
        return q.QueryRequest(
            limit=spec.limit, query=q.Query.Nearest(vector, using=using), filter=flt,
            with_payload=spec.with_payload, with_vector=with_vector, params=params if spec.dense is not None else None,
        )

    def query(self, requests: list[QuerySpec]) -> list[list[RawHit]]:
        batch = self._q.QueryBatchRequest([self._request(r) for r in requests])
        with self._guard.shared():
            results = self.shard.query_batch(batch)
        out = []
        for points in results:
            hits = []
            for p in points:
                vec = p.vector.get(DENSE) if isinstance(p.vector, dict) else None
                hits.append(RawHit(str(p.id), p.score, p.payload or {}, vec))
            out.append(hits)
        return out

    # ------------------------------------------------------------------ the background index
    def optimize(self, wait: bool = False) -> None:
        """After writes: start a background index build once the unindexed tail is long enough (~0.1 ms when
        not). wait: index everything now and return once the new index is in place."""
        rebuild = self._start_rebuild(force=wait)
        if wait and rebuild is not None:
            rebuild.done.wait()
            if not rebuild.forced_by_wait:  # a build started earlier: index what came after it, too
                rebuild = self._start_rebuild(force=True)
                if rebuild is not None:
                    rebuild.done.wait()
            if rebuild is not None and rebuild.error:
                raise RebuildError(rebuild.error)

    def index_in_background(self) -> Rebuild | None:
        """Start a build now whatever the tail (None when there is nothing to index); `done` tells its end."""
        return self._start_rebuild(force=True)

    def _start_rebuild(self, force: bool) -> Rebuild | None:
        with self._writing:  # no write in flight: every write from here on is journaled, the scroll starts later
            if self._rebuild is not None or self.dim is None or self._closed:
                return self._rebuild
            tail = self.unindexed()
            due = tail >= self.indexing.rebuild_after(self.indexed) and tail >= self._retry_above
            if not (due or (force and tail > 0)):
                return None
            self._rebuild = Rebuild(self.path, self.build_config(), forced_by_wait=force)
            self._rebuild.start(self._points_for_build(), self._swap_in, self._rebuild_ended)
            return self._rebuild

    def unindexed(self) -> int:
        """About how many points the indexed segment lacks or holds stale (net growth since the last build, or
        the points written and deleted since, whichever is more)."""
        return max(self.shard.info().points_count - self.indexed, self._changed)

    def _swap_in(self, rebuild: Rebuild) -> None:
        """Open the built shard (closed by its worker) beside this one, then hold every reader and writer only to
        apply the writes it lacks and flip the link (see edge_rebuild.py)."""
        q = self._q
        new = q.EdgeShard.load(str(rebuild.build), self._edge_config())
        old, first = self.shard, not self.path.is_symlink()
        try:
            with self._guard.shared():
                self.shard.flush()  # most of the flushing before the pool is held
            with self._writing, self._guard.exclusive():
                held = time.perf_counter()
                if self._closed:
                    raise RebuildError("the pool closed during the build")
                expected = self.shard.info().points_count
                for entry in rebuild.pending():
                    apply_write(q, new, self.build_config(), entry)
                new.flush()
                if new.info().points_count != expected:
                    raise RebuildError(f"the built index holds {new.info().points_count} points, the pool {expected}")
                if first:  # a directory, not a link yet: its files are closed before it moves
                    old.flush()
                    old.close()
                    os.rename(self.path, replaced_dir(self.path))
                point_link(self.path, rebuild.build)
                self.shard, new = new, None
                self.indexed = indexed_points(self.path)
                self._changed = rebuild.journaled_changes()
                self._rebuild = None
                self.builds += 1
                rebuild.swap_s = time.perf_counter() - held
        finally:
            if new is not None:  # not swapped in: the build is dropped, this shard stays
                new.close()
        if not first:
            old.close()  # nobody reads it any more; its directory is no longer linked
        recover_interrupted_swap(self.path)  # removes the old generation (or the moved directory)

    def _rebuild_ended(self, rebuild: Rebuild) -> None:
        with self._writing:
            if self._rebuild is rebuild:  # it failed: the pool goes on with its current shard
                self._rebuild = None
                # no retry before the tail has grown again: a build that keeps failing must not loop
                self._retry_above = self.unindexed() + self.indexing.rebuild_min_points

    def close(self) -> None:
        with self._writing:  # never in the middle of a swap
            rebuild, self._closed = self._rebuild, True
        if rebuild is not None:
            rebuild.abort()
            if rebuild.thread is not None:
                rebuild.thread.join()
        with self._guard.exclusive():
            self.shard.flush()
            self.shard.close()
