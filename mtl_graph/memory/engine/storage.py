"""Two embedded Qdrant engines (plus a server) behind one small storage protocol.

`ClientStore` is qdrant-client: local mode (":memory:" or a directory) or a server URL, one code path.
`EdgeStore` (memory/engine/edge/edge_store.py) is Qdrant Edge (qdrant-edge-py), the in-process Rust engine with HNSW and
payload indexes.
Hybrid fusion (dense + BM25 via RRF) runs inside Qdrant in both: prefetch + fusion query.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Protocol

import numpy as np


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
768 0.988, dense query p50 2.5 / 2.8 / 4.1 / 7.8 ms on a loaded 2-core machine. Drawn around 2k real-embedded
memories instead (benchmarks/search_settings.py, the retrieve node's whole filter): ef 128 0.978, 256 0.997, 400
0.998. 400 holds on both. Unindexed segments ignore it; Edge's is EdgeIndexConfig.hnsw_ef, and an Edge shard of at
most EdgeIndexConfig.exact_below points is scanned exactly instead (the walk's filtered recall is lowest there)."""


PayloadFields = tuple[str, ...] | None
"""Which payload fields a read returns: None, the whole payload; otherwise only these keys, every other one absent
(a dotted key names a field inside an object: "memory.stats" reads a memory's counts without its text). A stage that
needs a few small fields of many points asks for them alone: the engine converts (and a server sends) less."""


def payload_fields(fields: Any) -> PayloadFields:
    """A field selection checked once, before it reaches an engine: None, or a tuple of one or more keys, each a
    non-empty string of dotted names (no empty part); anything else is a ValueError naming what is wrong."""
    if fields is None:
        return None
    if isinstance(fields, (str, bytes)) or not isinstance(fields, (list, tuple)):
        raise ValueError(f"payload fields must be a list of keys, not {type(fields).__name__} {str(fields)[:60]!r}")
    if not fields:
        raise ValueError("payload fields name no key: read no payload with with_payload=False")
    for key in fields:
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            raise ValueError(f"payload field {str(key)[:60]!r} is not a key (dotted names, none empty)")
    return tuple(fields)


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


@dataclass(slots=True)
class PointBatch:
    """Points read whole in one call, column by column (snapshots): the dense vectors as one float64 array, so a
    batch of 384-dimension vectors is converted once, not as 384 Python floats a point twice."""

    ids: list[str]
    dense: np.ndarray
    """(len(ids), dim) float64: the engine's values exactly (float32 ones widen without loss)."""
    sparse: list[tuple[list[int], list[float]]]
    payloads: list[dict[str, Any]]
    from_json: bool = False
    """The payloads were read from an engine that keeps them as JSON (Qdrant Edge): no NaN, infinity or other
    value JSON cannot hold (a snapshot then need not read each line back to check)."""

    def __len__(self) -> int:
        return len(self.ids)

    def points(self) -> list[StoredPoint]:
        return [StoredPoint(i, row, s, p) for i, row, s, p in zip(self.ids, self.dense.tolist(), self.sparse,
                                                                    self.payloads)]

    @classmethod
    def of(cls, points: list[StoredPoint]) -> "PointBatch":
        """Plain points as a batch: a vector that is not a list of numbers of the batch's dim is a ValueError."""
        dim = len(points[0].dense) if points else 0
        return cls([p.id for p in points], dense_rows((p.dense for p in points), len(points), dim),
                   [p.sparse for p in points], [p.payload for p in points])


def dense_rows(vectors: Iterable[Any], n: int, dim: int) -> np.ndarray:
    """n vectors of dim numbers as one (n, dim) float64 array, in one pass in C (np.fromiter over the chained
    lists); a vector of another length or anything not a number is a ValueError."""
    vectors = list(vectors)
    if any(len(v) != dim for v in vectors):
        raise ValueError(f"a dense vector is not {dim} numbers")
    return np.fromiter(itertools.chain.from_iterable(vectors), np.float64, n * dim).reshape(n, dim)


def point_batches(store: Any, batch: int = 1024, where: "Conditions | None" = None) -> Iterator[PointBatch]:
    """Every point whole, a batch at a time, in the engine's scroll order: the store's own `scroll_batches` where
    it has one, else its `scroll_points` gathered into batches."""
    own = getattr(store, "scroll_batches", None)
    if own is not None:
        yield from own(batch, where)
        return
    points = iter(store.scroll_points(batch, where))
    while chunk := list(itertools.islice(points, batch)):
        yield PointBatch.of(chunk)


@dataclass
class RawHit:
    id: str
    score: float
    payload: dict[str, Any]
    dense: list[float] | None = None


class Store(Protocol):
    """What MemoryPool needs from an engine. Every read of payloads (fetch, scroll, query) takes a field
    selection (PayloadFields) and returns those fields alone."""

    def upsert(self, points: list[StoredPoint]) -> None: ...
    def set_payload(self, point_id: str, payload: dict[str, Any], key: str | None = None) -> None: ...
    def set_payload_many(self, point_ids: list[str], payload: dict[str, Any]) -> None: ...
    def fetch(self, ids: list[str], with_dense: bool = False, fields: PayloadFields = None) -> list[RawHit]: ...
    def delete(self, ids: list[str]) -> None: ...
    def count(self, where: Conditions | None = None) -> int: ...
    def scroll(self, batch: int = 256, where: Conditions | None = None,
               fields: PayloadFields = None) -> Iterator[RawHit]: ...
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
    payload_fields: PayloadFields = None
    """With with_payload: only these payload fields (see PayloadFields); None: the whole payload."""
    hnsw_ef: int | None = None
    """HNSW beam width of the dense search (a bulk pass that asks once per memory takes less; given, the walk runs
    even where a small Edge shard would be scanned exactly); None: the store's (HNSW_EF, or that exact scan)."""


def _client_selection(fields: PayloadFields) -> bool | list[str]:
    """qdrant-client's `with_payload` for a field selection (a list of keys is its include selector)."""
    return True if fields is None else list(payload_fields(fields))


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

    def set_payload_many(self, point_ids: list[str], payload: dict[str, Any]) -> None:
        """The same keys merged into many points in one request (a bulk mark)."""
        if point_ids:
            self.client.set_payload(self.collection, payload=payload, points=list(point_ids))

    def fetch(self, ids: list[str], with_dense: bool = False, fields: PayloadFields = None) -> list[RawHit]:
        """Points by id (qdrant-client's `retrieve`): payloads (the selected fields), or (with_dense) dense vectors
        alone."""
        records = self.client.retrieve(self.collection, ids=ids, with_payload=False if with_dense else
                                       _client_selection(fields),
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

    def scroll(self, batch: int = 256, where: Conditions | None = None,
               fields: PayloadFields = None) -> Iterator[RawHit]:
        offset = None
        while True:
            records, offset = self.client.scroll(self.collection, limit=batch, offset=offset,
                                                 with_payload=_client_selection(fields),
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
        with_payload = spec.with_payload and _client_selection(spec.payload_fields)
        # local mode is exact (and warns)
        params = None if self._local else m.SearchParams(hnsw_ef=spec.hnsw_ef or HNSW_EF)
        if spec.dense is not None and sparse is not None:
            prefetch = [
                m.Prefetch(query=spec.dense, using=DENSE, limit=spec.prefetch_limit, filter=flt, params=params),
                m.Prefetch(query=sparse, using=SPARSE, limit=spec.prefetch_limit, filter=flt),
            ]
            return m.QueryRequest(
                prefetch=prefetch, query=m.RrfQuery(rrf=m.Rrf(k=RRF_K)), limit=spec.limit,
                with_payload=with_payload, with_vector=with_vectors,
            )
        query, using = (spec.dense, DENSE) if spec.dense is not None else (sparse, SPARSE)
        return m.QueryRequest(
            query=query, using=using, filter=flt, limit=spec.limit, with_payload=with_payload,
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
