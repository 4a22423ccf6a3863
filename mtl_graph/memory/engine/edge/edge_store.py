"""Qdrant Edge behind the storage protocol (memory/engine/storage.py): an in-process shard in a directory, its HNSW index
built in the background (edge_rebuild.py), hybrid fusion run inside the shard."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from mtl_graph.memory.engine.edge.build_worker import apply_write, edge_config
from mtl_graph.memory.engine.edge.indexing import EdgeIndexConfig
from mtl_graph.memory.engine.edge.rebuild import (
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
from mtl_graph.memory.engine.storage import (
    DEFAULT_NAMESPACE,
    DENSE,
    FACET_LIMIT,
    INDEXED_FIELDS,
    NAMESPACE_KEY,
    RRF_K,
    SPARSE,
    Conditions,
    PayloadFields,
    PointBatch,
    QuerySpec,
    RawHit,
    StoredPoint,
    dense_rows,
    payload_fields,
)

__all__ = ["EdgeStore", "RebuildError"]


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
        # Payloads mapped on demand ("Cold", Edge's default; see build_worker.edge_config), not loaded whole
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
                "full_scan_threshold_kb": self.indexing.full_scan_threshold_kb,
                "quantization": self.indexing.quantization}

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

    def _write(self, operation: Any, entry: tuple | Callable[[], tuple], changes: int = 0) -> None:
        """Apply one write; `entry` is its journal entry, or what makes it (only while a build is in flight: an
        upsert's entry copies every point)."""
        with self._writing, self._guard.shared():
            self.shard.update(operation)
            self._changed += changes
            if self._rebuild is not None:
                self._rebuild.journal.append(entry() if callable(entry) else entry)

    def upsert(self, points: list[StoredPoint]) -> None:
        q = self._q
        self._write(q.UpdateOperation.upsert_points([
            q.Point(p.id, {DENSE: p.dense, SPARSE: q.SparseVector(p.sparse[0], p.sparse[1])}, p.payload)
            for p in points
        ]), lambda: journal_entry(points), len(points))

    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None:
        # Merge, not overwrite: keys another writer added (a run's credit entry) survive a rewrite of the memory.
        self._write(self._q.UpdateOperation.set_payload([point_id], payload, key=key),
                    ("payload", point_id, payload, key))

    def set_payload_many(self, point_ids: list[str], payload: dict[str, Any]) -> None:
        """The same keys merged into many points in one engine operation (a bulk mark: one per point costs ~1 ms)."""
        if not point_ids:
            return
        with self._writing, self._guard.shared():
            self.shard.update(self._q.UpdateOperation.set_payload(list(point_ids), payload))
            if self._rebuild is not None:  # the build worker replays them one point at a time
                self._rebuild.journal.extend(("payload", i, payload, None) for i in point_ids)

    def _selection(self, fields: PayloadFields) -> Any:
        """The shard's `with_payload` for a field selection (dotted keys are JSON paths to Edge too)."""
        return True if fields is None else self._q.PayloadSelector.Include(list(payload_fields(fields)))

    def fetch(self, ids: list[str], with_dense: bool = False, fields: PayloadFields = None) -> list[RawHit]:
        """Points by id (the shard's `retrieve`): payloads (the selected fields), or (with_dense) dense vectors
        alone."""
        with_payload = False if with_dense else self._selection(fields)
        with self._guard.shared():
            records = self.shard.retrieve(ids, with_payload, [DENSE] if with_dense else False)
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

    def _scroll(self, batch: int, vectors: bool, where: Conditions | None = None,
                fields: PayloadFields = None) -> Iterator[list[Any]]:
        """Records in id order, one batch per call into the shard (a swap may happen between batches)."""
        offset = None
        with_vector = [DENSE, SPARSE] if vectors else None
        with_payload = self._selection(fields)
        flt = self._filter(where)
        while True:
            with self._guard.shared():
                records, offset = self.shard.scroll(self._q.ScrollRequest(
                    offset=offset, limit=batch, filter=flt, with_payload=with_payload, with_vector=with_vector))
            if records:
                yield records
            if offset is None or not records:
                return

    def scroll(self, batch: int = 256, where: Conditions | None = None,
               fields: PayloadFields = None) -> Iterator[RawHit]:
        for records in self._scroll(batch, vectors=False, where=where, fields=fields):
            for r in records:
                yield RawHit(str(r.id), 0.0, r.payload or {})

    def scroll_points(self, batch: int = 256, where: Conditions | None = None) -> Iterator[StoredPoint]:
        """Every point whole: payload, dense and sparse vectors (snapshots)."""
        for records in self._scroll(batch, vectors=True, where=where):
            for r in records:
                vectors = r.vector  # each read of the attribute converts every vector again (half a scroll's time)
                sparse = vectors.get(SPARSE)
                yield StoredPoint(str(r.id), vectors[DENSE], (list(sparse.indices), list(sparse.values))
                                  if sparse is not None else ([], []), r.payload or {})

    def scroll_batches(self, batch: int = 1024, where: Conditions | None = None) -> Iterator[PointBatch]:
        """Every point whole, one batch per call into the shard, the dense vectors straight into one array (half
        the time of `scroll_points` building a StoredPoint and a list per point)."""
        for records in self._scroll(batch, vectors=True, where=where):
            vectors = [r.vector for r in records]  # each read of the attribute converts every vector again
            dense = dense_rows([v[DENSE] for v in vectors], len(records), len(vectors[0][DENSE]))
            sparse = [v.get(SPARSE) for v in vectors]
            yield PointBatch([str(r.id) for r in records], dense,  # each read of .indices / .values makes a new list
                             [(s.indices, s.values) if s is not None else ([], []) for s in sparse],
                             [r.payload or {} for r in records], from_json=True)

    def _points_for_build(self, batch: int = 512) -> Iterator[tuple]:
        for records in self._scroll(batch, vectors=True):
            sparse = [r.vector.get(SPARSE) for r in records]
            yield points_message([str(r.id) for r in records], [r.vector[DENSE] for r in records],
                                 [(list(v.indices), list(v.values)) if v is not None else ([], []) for v in sparse],
                                 [r.payload or {} for r in records])

    def _scans_exactly(self) -> bool:
        """Whether this shard is small enough that a dense query scans it exactly (EdgeIndexConfig.exact_below)."""
        # the shard keeps its tally: ~0.02 ms to ask, once per batch of queries
        return bool(self.indexing.exact_below) and self.shard.info().points_count <= self.indexing.exact_below

    def _search_params(self, hnsw_ef: int | None, exact: bool = False) -> Any:
        """An exact scan (exact: a small shard) unless the query names its own beam; otherwise the beam (the
        query's own, else the configured one) and, with quantisation, the rescoring."""
        q, indexing = self._q, self.indexing
        if exact and hnsw_ef is None:
            return q.SearchParams(exact=True)
        ef = hnsw_ef or indexing.hnsw_ef
        if indexing.quantization == "none":
            return q.SearchParams(hnsw_ef=ef)
        # segments without quantised vectors (the unindexed tail, shards built before) ignore it and compare floats
        return q.SearchParams(hnsw_ef=ef, quantization=q.QuantizationSearchParams(
            rescore=True, oversampling=indexing.oversampling))

    def _request(self, spec: QuerySpec, exact: bool = False) -> Any:
        q = self._q
        flt = self._filter(spec.where)
        sparse = q.SparseVector(spec.sparse[0], spec.sparse[1]) if spec.sparse else None
        with_vector = [DENSE] if spec.with_dense else False
        with_payload = spec.with_payload and self._selection(spec.payload_fields)
        params = self._search_params(spec.hnsw_ef, exact) if spec.dense is not None else None
        if spec.dense is not None and sparse is not None:
            prefetches = [
                q.Prefetch(limit=spec.prefetch_limit, query=q.Query.Nearest(spec.dense, using=DENSE), filter=flt,
                           params=params),
                q.Prefetch(limit=spec.prefetch_limit, query=q.Query.Nearest(sparse, using=SPARSE), filter=flt),
            ]
            return q.QueryRequest(
                limit=spec.limit, prefetches=prefetches, query=q.Fusion.Rrf(k=RRF_K),
                with_payload=with_payload, with_vector=with_vector,
            )
        vector, using = (spec.dense, DENSE) if spec.dense is not None else (sparse, SPARSE)
        return q.QueryRequest(
            limit=spec.limit, query=q.Query.Nearest(vector, using=using), filter=flt,
            with_payload=with_payload, with_vector=with_vector, params=params,
        )

    def query(self, requests: list[QuerySpec]) -> list[list[RawHit]]:
        with self._guard.shared():
            exact = any(r.dense is not None for r in requests) and self._scans_exactly()
            batch = self._q.QueryBatchRequest([self._request(r, exact) for r in requests])
            results = list(self.shard.query_batch(batch))
            if not exact:
                self._complete_short_walks(requests, results)
        out = []
        for points in results:
            hits = []
            for p in points:
                vec = p.vector.get(DENSE) if isinstance(p.vector, dict) else None
                hits.append(RawHit(str(p.id), p.score, p.payload or {}, vec))
            out.append(hits)
        return out

    def _complete_short_walks(self, requests: list[QuerySpec], results: list[Any]) -> None:
        """A filtered HNSW walk can stop short: fewer hits than asked for while more points match (seen on a pool
        indexed over several builds, a filter by ids; a weak graph does it every time). A dense query (hybrid
        too: its fused list is short only if its dense list is) that came back short is asked again as an exact
        scan, whose answer is complete. Short answers are rare where a filter matches many points, and cheap to
        scan where it matches few. A query naming its own beam keeps its walk (the caller chose it)."""
        def wanted(spec: QuerySpec) -> int:  # a hybrid list is at least its complete dense prefetch
            return min(spec.limit, spec.prefetch_limit) if spec.sparse else spec.limit

        short = [i for i, (spec, points) in enumerate(zip(requests, results))
                 if spec.dense is not None and spec.hnsw_ef is None and len(points) < wanted(spec)]
        if short:
            again = self.shard.query_batch(self._q.QueryBatchRequest([self._request(requests[i], exact=True)
                                                                      for i in short]))
            for i, points in zip(short, again):
                results[i] = points

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
