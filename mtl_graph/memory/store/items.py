"""PoolStore's own items: one Qdrant shard (Edge) or collection (qdrant-client local) of their own, never the pool's.

Each item is one point (its payload: namespace, key, value, timestamps, TTL) plus one point per embedded text
(a field, or one element of a `[*]` field), so an item scores by its best text, as in InMemoryStore. The process
that holds the directory's lock keeps a table of the items (namespace, key -> row): namespace listing, filters
and ordering read it; semantic search asks Qdrant for the nearest text points among the candidates.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mtl_graph.memory.engine.location import lock_directory
from mtl_graph.memory.engine.edge.edge_store import EdgeStore
from mtl_graph.memory.engine.storage import ClientStore, Conditions, QuerySpec, StoredPoint
from mtl_graph.memory.store.match import StoreError

META_FILE = "store.json"
COLLECTION = "langgraph_store"
FORMAT_VERSION = 1
KIND = "type"
PREFIXES = "domains"
"""Payload fields of the store's points: "item" or "vector", and a text point's namespace prefixes. The engines
create keyword indexes for the pool schema's fields (storage.INDEXED_FIELDS); this shard is the store's own, so
it files its two filter fields under two of those names, and Qdrant Edge filters them by index (a search under
a namespace of 2k items: 1.9 ms, 14 ms with unindexed fields)."""
_IDS = uuid.UUID("6f6b1c1e-9a53-4c1b-9d0e-5a1f3c2b7d10")
"""The uuid5 namespace of point ids: an item's id depends only on (namespace, key), its texts' on their path."""


def _point_id(*parts: Any) -> str:
    return str(uuid.uuid5(_IDS, json.dumps(parts)))


def prefix_keys(namespace: tuple[str, ...]) -> list[str]:
    """Every non-empty prefix of a namespace as one keyword: a text point matches a prefix by equality."""
    return [json.dumps(list(namespace[:n])) for n in range(1, len(namespace) + 1)]


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()


@dataclass
class Row:
    """One stored item."""

    namespace: tuple[str, ...]
    """Where it lives."""
    key: str
    """Its key in the namespace."""
    value: dict[str, Any]
    """What was put."""
    created_at: datetime
    """First put (kept by overwrites, as PostgresStore does)."""
    updated_at: datetime
    """Last put."""
    seq: int
    """Write order: listing without a query is newest write first."""
    ttl: float | None = None
    """Minutes to live after the last write (or read, with refresh), None: forever."""
    expires_at: float | None = None
    """POSIX time it expires at, None: never."""
    vector_ids: list[str] = field(default_factory=list)
    """The points of its embedded texts."""

    def payload(self) -> dict[str, Any]:
        return {KIND: "item", "namespace": list(self.namespace), "key": self.key, "value": self.value,
                "created_at": _iso(self.created_at), "updated_at": _iso(self.updated_at), "seq": self.seq,
                "ttl": self.ttl, "expires_at": self.expires_at, "vector_ids": self.vector_ids}

    @classmethod
    def of(cls, payload: dict[str, Any]) -> "Row":
        return cls(tuple(payload["namespace"]), payload["key"], payload["value"],
                   datetime.fromisoformat(payload["created_at"]), datetime.fromisoformat(payload["updated_at"]),
                   int(payload["seq"]), payload.get("ttl"), payload.get("expires_at"),
                   list(payload.get("vector_ids") or []))


class ItemTable:
    """The items of one store location; `rows` is the table, every change goes to the engine first."""

    def __init__(self, location: str | Path, engine: str, dims: int | None, embeddings: str | None) -> None:
        self.location = str(location)
        self.engine = engine
        self.dims = dims
        self._cleanup: Path | None = None
        self._lock_fd: int | None = None
        if self.location.startswith(("http://", "https://")):
            raise StoreError(
                "PoolStore keeps an in-process table of an embedded store, which a server shared by several "
                "processes would make stale: for a Qdrant server wrap langgraph-store-qdrant's QdrantStore "
                "(PoolStore.wrapping(QdrantStore(...), pool=...); see docs/store.md)")
        if engine not in ("edge", "client"):
            raise StoreError(f"unknown store engine {engine!r} (expected 'edge' or 'client')")
        if self.location == ":memory:":
            path = self._cleanup = Path(tempfile.mkdtemp(prefix="mtl-store-"))
        else:
            path = Path(self.location).expanduser()
            if path.exists() and not path.is_dir():
                raise StoreError(f"store location {path} exists and is not a directory")
            path.mkdir(parents=True, exist_ok=True)
        try:
            self._lock_fd = lock_directory(path)
            self.engine, self.dims = self._check_meta(path, embeddings)
            dim = self.dims or 1  # an item point needs a vector: without an index, a 1-d stand-in
            if self.engine == "edge":
                (path / "edge").mkdir(exist_ok=True)
                self.store: Any = EdgeStore(str(path / "edge"), dim)
            else:
                self.store = ClientStore(_local_client(path / "client"), COLLECTION, dim, local=True)
        except BaseException:
            self._release()
            raise
        self._stand_in = [1.0] + [0.0] * (dim - 1)
        self.rows: dict[tuple[tuple[str, ...], str], Row] = {}
        self.owner: dict[str, tuple[tuple[str, ...], str]] = {}
        """Text point id -> the item it belongs to."""
        texts = []
        for hit in self.store.scroll():
            if hit.payload.get(KIND) == "item":
                self._index(Row.of(hit.payload))
            else:
                texts.append(hit.id)
        orphans = [i for i in texts if i not in self.owner]
        if orphans:  # texts an overwrite replaced, left by a process that died before deleting them
            self.store.delete(orphans)
        self.seq = max((r.seq for r in self.rows.values()), default=0)

    def _check_meta(self, path: Path, embeddings: str | None) -> tuple[str, int | None]:
        meta_path = path / META_FILE
        wanted = {"engine": self.engine, "dims": self.dims, "embeddings": embeddings, "format_version": FORMAT_VERSION}
        if not meta_path.exists():
            if any((path / e).exists() and any((path / e).iterdir()) for e in ("edge", "client")):
                raise StoreError(f"store {path} has engine data but no {META_FILE}: restore it (nothing was changed)")
            meta_path.write_text(json.dumps(wanted, indent=2))
            return self.engine, self.dims
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as exc:
            raise StoreError(f"{meta_path} is unreadable ({exc}); restore it (nothing was changed)") from None
        if (meta.get("dims"), meta.get("embeddings")) != (self.dims, embeddings):
            raise StoreError(f"store {path} was created with index dims={meta.get('dims')} embeddings="
                             f"{meta.get('embeddings')!r}, not dims={self.dims} embeddings={embeddings!r}: open it "
                             "with the same index config, or use a new directory")
        return meta.get("engine", self.engine), meta.get("dims")

    def _index(self, row: Row) -> None:
        self.rows[(row.namespace, row.key)] = row
        for vid in row.vector_ids:
            self.owner[vid] = (row.namespace, row.key)

    def _unindex(self, row: Row) -> None:
        self.rows.pop((row.namespace, row.key), None)
        for vid in row.vector_ids:
            self.owner.pop(vid, None)

    # ------------------------------------------------------------------ writing
    def write(self, rows: list[tuple[Row, list[tuple[str, list[float]]]]]) -> None:
        """Upsert items with their texts' vectors ((path, vector) pairs); vectors an overwrite dropped go."""
        points, stale = [], []
        for row, vectors in rows:
            old = self.rows.get((row.namespace, row.key))
            row.vector_ids = [_point_id(list(row.namespace), row.key, p) for p, _ in vectors]
            stale += [v for v in (old.vector_ids if old else []) if v not in set(row.vector_ids)]
            points.append(StoredPoint(_point_id(list(row.namespace), row.key), self._stand_in, ([], []),
                                      row.payload()))
            points += [StoredPoint(vid, vec, ([], []), {KIND: "vector", PREFIXES: prefix_keys(row.namespace)})
                       for vid, (_, vec) in zip(row.vector_ids, vectors)]
        if points:
            self.store.upsert(points)
        if stale:
            self.store.delete(stale)
        for row, _ in rows:
            old = self.rows.get((row.namespace, row.key))
            if old is not None:
                self._unindex(old)
            self._index(row)
        self.store.optimize()  # Edge: a background index build once the unindexed tail is long (else ~0.1 ms)

    def remove(self, keys: list[tuple[tuple[str, ...], str]]) -> int:
        """Delete items (and their texts); returns how many were there."""
        rows = [self.rows[k] for k in keys if k in self.rows]
        ids = [i for r in rows for i in [_point_id(list(r.namespace), r.key), *r.vector_ids]]
        if ids:
            self.store.delete(ids)
        for row in rows:
            self._unindex(row)
        return len(rows)

    def touch(self, rows: list[Row]) -> None:
        """Persist the new expiry times of rows (a read that refreshed their TTL)."""
        for row in rows:
            self.store.set_payload(_point_id(list(row.namespace), row.key), {"expires_at": row.expires_at})

    # ------------------------------------------------------------------ reading
    def nearest(self, vector: list[float], candidates: list[Row], need: int, prefix: tuple[str, ...],
                under_texts: int) -> list[tuple[float, Row]]:
        """The `need` best-scoring candidates (an item scores by its best text), best first; every candidate is
        under `prefix`, which holds `under_texts` texts in all (candidates or not)."""
        ids = [v for r in candidates for v in r.vector_ids]
        if not ids or need <= 0:
            return []
        # `need` items hold at most need * per_item texts: that many hits always cover the top `need` items
        enough = need * max(len(r.vector_ids) for r in candidates)
        by_prefix = {KIND: "vector", **({PREFIXES: prefix_keys(prefix)[-1]} if prefix else {})}
        if len(ids) == under_texts:  # nothing under the prefix filtered out: the engine filters by namespace
            return self._owners(self._query(vector, by_prefix, None, min(enough, len(ids))), None, need)
        if len(ids) * 4 >= under_texts:
            # Most texts pass the filter: the indexed namespace filter, with room for the texts that do not, beats
            # a list of ids (Edge, 2k items, 40% passing: 12 ms by ids). The hits that pass come in score order,
            # so they are the top ones whenever `need` items pass, or when every text under the prefix came back.
            limit = min(under_texts, 2 * -(-enough * under_texts // len(ids)))
            found = self._owners(self._query(vector, by_prefix, None, limit), set(ids), need)
            if len(found) == need or limit == under_texts:
                return found
        return self._owners(self._query(vector, {KIND: "vector"}, ids, min(enough, len(ids))), None, need)

    def _query(self, vector: list[float], equals: dict[str, str], ids: list[str] | None, limit: int) -> list[Any]:
        return self.store.query([QuerySpec(limit=limit, with_payload=False, dense=vector,
                                           where=Conditions(equals=equals, only_ids=ids))])[0]

    def _owners(self, hits: list[Any], wanted: set[str] | None, need: int) -> list[tuple[float, Row]]:
        """The first `need` distinct items of hits (only texts in `wanted`, when given), with their best score."""
        out: list[tuple[float, Row]] = []
        seen: set[tuple[tuple[str, ...], str]] = set()
        for hit in hits:
            owner = self.owner.get(hit.id)
            if owner is None or owner in seen or owner not in self.rows or (wanted and hit.id not in wanted):
                continue
            seen.add(owner)
            out.append((float(hit.score), self.rows[owner]))
            if len(out) == need:
                break
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.store.close()
        self._release()

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._cleanup is not None:
            shutil.rmtree(self._cleanup, ignore_errors=True)
            self._cleanup = None


def _local_client(path: Path) -> Any:
    from qdrant_client import QdrantClient

    return QdrantClient(path=str(path))
