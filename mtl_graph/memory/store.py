"""PoolStore: a LangGraph `BaseStore` on the pool's Qdrant engines, with the pool's memories under ("mtl", ...).

    store = PoolStore.open("./agent-store", pool=MemoryPool.open("./pool"), index={"fields": ["text"]})
    graph = builder.compile(store=store)          # nodes read it as runtime.store

Items live in a shard / collection of their own (store_items.py); the pool's own data is never written. The
pool's memories appear read-only as ("mtl", <format>) items (store_mtl.py). Semantics follow InMemoryStore
(filters, namespace matching, max-pooled semantic scores) with PostgresStore's choices where InMemoryStore has
none: listing without a query is newest write first, `created_at` survives overwrites, only namespaces that
hold items are listed, and TTLs (minutes) expire items, which reads leave out at once and a sweep deletes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import json
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from mtl_graph.memory.store_items import ItemTable, Row
from mtl_graph.memory.store_match import (
    MTL_ROOT,
    StoreClosedError,
    StoreError,
    StoreReadOnlyError,
    check_filter,
    check_op,
    matches,
    namespace_matches,
)
from mtl_graph.memory.store_mtl import PoolView

if TYPE_CHECKING:
    from mtl_graph.memory.pool import MemoryPool

__all__ = ["PoolStore", "StoreError", "StoreReadOnlyError", "StoreClosedError"]

_ALL = 2**31 - 1


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _embeddings(index: IndexConfig) -> tuple[Any, int | None, str]:
    """The index's embedding function, its dims (None: probe) and a name recorded with the data."""
    from mtl_graph.memory.embeddings import LOCAL_DIM, embeddings_name, local_embeddings

    embed = index.get("embed")
    if embed is None or (isinstance(embed, str) and embed.strip().lower() in {"", "local"}):
        emb = local_embeddings()
        return emb, index.get("dims") or LOCAL_DIM, embeddings_name(emb)
    emb = ensure_embeddings(embed)
    return emb, index.get("dims"), embeddings_name(emb)


def _inside(location: str | Path, pool_location: str) -> bool:
    """Whether a store directory is the pool's directory or inside it (the pool's files are never touched)."""
    if ":memory:" in (str(location), pool_location) or pool_location.startswith(("http://", "https://")):
        return False
    return Path(location).expanduser().resolve().is_relative_to(Path(pool_location).expanduser().resolve())


class PoolStore(BaseStore):
    """A LangGraph store over Qdrant (embedded Edge or qdrant-client local), the MTL pool readable inside it."""

    supports_ttl = True

    def __init__(self, items: ItemTable | BaseStore, *, pool: "MemoryPool | None" = None,
                 index: IndexConfig | None = None, ttl: TTLConfig | None = None,
                 clock: Callable[[], datetime] | None = None, embeddings: Any = None,
                 on_close: Callable[[], None] | None = None) -> None:
        self._table = items if isinstance(items, ItemTable) else None
        self._inner = items if not isinstance(items, ItemTable) else None
        self.pool = pool
        self._view = PoolView(pool) if pool is not None else None
        self._on_close = on_close
        self.ttl_config = ttl
        self.index_config = dict(index) if index else None
        self.embeddings = embeddings
        fields = (self.index_config or {}).get("fields") or ["$"]
        self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in ([fields] if isinstance(fields, str)
                                                                          else fields)]
        self._clock = clock or _utcnow
        self._lock = threading.RLock()
        self._closed = False
        self._sweeper: tuple[threading.Thread, threading.Event, concurrent.futures.Future] | None = None

    @classmethod
    def open(cls, location: str | Path = ":memory:", *, pool: "MemoryPool | str | Path | None" = None,
             index: IndexConfig | None = None, ttl: TTLConfig | None = None,
             engine: Literal["edge", "client"] | None = None, clock: Callable[[], datetime] | None = None
             ) -> "PoolStore":
        """A store at ":memory:" or a directory of its own (never the pool's directory), on Qdrant Edge or
        qdrant-client local mode (default: the pool settings' engine). index: LangGraph's IndexConfig; without
        `embed` it is the bundled local model. pool: a MemoryPool (or its location) shown under ("mtl", ...)."""
        from mtl_graph.settings import get_settings

        emb, dims, name = _embeddings(index) if index else (None, None, None)
        if emb is not None and dims is None:
            dims = len(emb.embed_query("dimension probe"))
        owns = pool is not None and not hasattr(pool, "search")
        if owns:
            from mtl_graph.memory.pool import MemoryPool

            pool = MemoryPool.open(str(pool))
        try:
            if pool is not None and _inside(location, getattr(pool, "location", ":memory:")):
                raise StoreError(f"the store needs a directory of its own, outside the pool's ({location})")
            table = ItemTable(location, engine or get_settings().engine, dims, name)
        except BaseException:
            if owns:
                pool.close()  # type: ignore[union-attr]
            raise
        return cls(table, pool=pool, index=index, ttl=ttl, clock=clock, embeddings=emb,  # type: ignore[arg-type]
                   on_close=pool.close if owns else None)  # type: ignore[union-attr]

    @classmethod
    def wrapping(cls, inner: BaseStore, *, pool: "MemoryPool",
                 on_close: Callable[[], None] | None = None) -> "PoolStore":
        """Any store (e.g. langgraph-store-qdrant's QdrantStore on a Qdrant server) with the pool's memories
        added under ("mtl", ...); its items, index and TTLs are the inner store's. on_close: what `close` also
        releases (the inner store's client, the pool handle)."""
        store = cls(inner, pool=pool, ttl=inner.ttl_config, on_close=on_close)
        store.embeddings = getattr(inner, "embeddings", None)  # merged searches rank by score when it has one
        store.supports_ttl = inner.supports_ttl
        return store

    # ------------------------------------------------------------------ the batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if self._closed:
            raise StoreClosedError("this PoolStore is closed")
        for op in ops:
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise StoreError(f"unknown store operation {type(op).__name__}")
            check_op(op)
            if isinstance(op, SearchOp):
                check_filter(op.filter)
                if op.query is not None and not isinstance(op.query, str):
                    raise StoreError(f"a search query is a string, got {type(op.query).__name__}")
        with self._lock:
            if self._closed:
                raise StoreClosedError("this PoolStore is closed")
            return self._routed(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # Qdrant's embedded engines do file I/O: off the event loop (langgraph dev refuses blocking calls in it)
        return await asyncio.to_thread(self.batch, list(ops))

    def _routed(self, ops: list[Op]) -> list[Result]:
        """Ops on ("mtl", ...) go to the pool view, the rest to the items; searches and listings that span both
        are asked of both from the start, merged, then paged."""
        view = self._view
        results: list[Result] = [None] * len(ops)
        own: list[tuple[int, Op]] = []
        merges: list[tuple[int, Op]] = []
        for i, op in enumerate(ops):
            if isinstance(op, GetOp) and op.namespace[:1] == (MTL_ROOT,):
                results[i] = view.get(op.namespace, op.key) if view else None
            elif isinstance(op, SearchOp) and op.namespace_prefix[:1] == (MTL_ROOT,):
                items = view.search(op.namespace_prefix, op.query, op.filter, op.offset + op.limit) if view else []
                results[i] = items[op.offset:]
            elif view is not None and isinstance(op, SearchOp) and not op.namespace_prefix:
                merges.append((i, op))
                own.append((i, op._replace(offset=0, limit=op.offset + op.limit)))
            elif view is not None and isinstance(op, ListNamespacesOp):
                merges.append((i, op))
                own.append((i, op._replace(offset=0, limit=_ALL)))
            else:
                own.append((i, op))
        answers = self._own([op for _, op in own]) if own else []
        for (i, _), answer in zip(own, answers):
            results[i] = answer
        for i, op in merges:
            results[i] = self._merged(op, results[i])
        return results

    def _merged(self, op: Op, own: Any) -> Any:
        assert self._view is not None
        if isinstance(op, ListNamespacesOp):
            found = [ns for ns in self._view.namespaces()
                     if all(namespace_matches(c, ns) for c in op.match_conditions or ())]
            found = [ns[:op.max_depth] if op.max_depth is not None else ns for ns in found]
            return sorted(set(own) | set(found))[op.offset:op.offset + op.limit]
        assert isinstance(op, SearchOp)
        mine = self._view.search((), op.query, op.filter, op.offset + op.limit)
        if op.query and self.embeddings is not None:
            both = sorted([*own, *mine], key=lambda h: (h.score is None, -(h.score or 0.0)))
        else:
            both = sorted([*own, *mine], key=lambda h: h.updated_at, reverse=True)
        return both[op.offset:op.offset + op.limit]

    def _own(self, ops: list[Op]) -> list[Result]:
        if self._inner is not None:
            return self._inner.batch(ops)
        return _TableBatch(self, self._clock()).run(ops)

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        if self._inner is not None:
            return getattr(self._inner, "sweep_ttl", lambda: 0)()
        with self._lock:
            if self._closed or self._table is None:
                return 0
            now = self._clock().timestamp()
            return self._table.remove([k for k, r in self._table.rows.items()
                                       if r.expires_at is not None and r.expires_at <= now])

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future:
        """Sweep every interval (argument, else ttl_config's sweep_interval_minutes, else 5) in a thread; the
        future completes when `stop_ttl_sweeper` (or `close`) stops it."""
        if self._sweeper is not None:
            return self._sweeper[2]
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        stop, future = threading.Event(), concurrent.futures.Future()

        def loop() -> None:
            while not stop.wait(minutes * 60):
                try:
                    self.sweep_ttl()
                except Exception as exc:  # the sweeper stops; its future carries why
                    future.set_exception(exc)
                    return
            if not future.done():
                future.set_result(None)

        thread = threading.Thread(target=loop, name="pool-store-ttl-sweeper", daemon=True)
        self._sweeper = (thread, stop, future)
        thread.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it stopped within timeout."""
        if self._sweeper is None:
            return True
        thread, stop, _ = self._sweeper
        stop.set()
        thread.join(timeout)
        self._sweeper = None if not thread.is_alive() else self._sweeper
        return not thread.is_alive()

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Flush and release the store's directory (and the pool, when the store opened it); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.stop_ttl_sweeper()
        if self._table is not None:
            self._table.close()
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> "PoolStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _TableBatch:
    """One batch on the item table: reads see the state before the batch, then puts apply (last put of a key
    wins), as in InMemoryStore."""

    def __init__(self, store: PoolStore, now: datetime) -> None:
        assert store._table is not None
        self.store, self.table, self.now = store, store._table, now
        self.refreshed: dict[tuple[tuple[str, ...], str], Row] = {}

    def run(self, ops: list[Op]) -> list[Result]:
        vectors = self._query_vectors([op.query for op in ops if isinstance(op, SearchOp) and op.query])
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op, vectors.get(op.query or "")))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                puts[(op.namespace, op.key)] = op
                results.append(None)
        if puts:
            self._put(list(puts.values()))
        touched = [r for k, r in self.refreshed.items() if k not in puts]
        if touched:
            self.table.touch(touched)
        return results

    def _visible(self, row: Row | None) -> bool:
        return row is not None and (row.expires_at is None or row.expires_at > self.now.timestamp())

    def _refresh(self, rows: Iterable[Row], refresh: bool) -> None:
        for row in rows:
            if refresh and row.ttl:
                row.expires_at = (self.now + timedelta(minutes=row.ttl)).timestamp()
                self.refreshed[(row.namespace, row.key)] = row

    def _get(self, op: GetOp) -> Item | None:
        row = self.table.rows.get((op.namespace, op.key))
        if not self._visible(row):
            return None
        assert row is not None
        self._refresh([row], op.refresh_ttl)
        return Item(value=copy.deepcopy(row.value), key=row.key, namespace=row.namespace,
                    created_at=row.created_at, updated_at=row.updated_at)

    def _search(self, op: SearchOp, vector: list[float] | None) -> list[SearchItem]:
        prefix, n = op.namespace_prefix, len(op.namespace_prefix)
        under = [r for r in self.table.rows.values() if r.namespace[:n] == prefix]
        found = sorted((r for r in under if self._visible(r) and matches(r.value, op.filter)),
                       key=lambda r: r.seq, reverse=True)
        ranked: list[tuple[float | None, Row]]
        if vector is not None:
            # nothing under the prefix filtered out: the engine filters by namespace, not by a list of ids
            whole = prefix if len(found) == len(under) else None
            scored = self.table.nearest(vector, [r for r in found if r.vector_ids], op.offset + op.limit, whole)
            # items without an embedded text rank after every scored one, as InMemoryStore appends them
            ranked = [*scored, *((None, r) for r in found if not r.vector_ids)]
        else:
            ranked = [(None, r) for r in found]
        page = ranked[op.offset:op.offset + op.limit]
        self._refresh((r for _, r in page), op.refresh_ttl)
        return [SearchItem(namespace=r.namespace, key=r.key, value=copy.deepcopy(r.value), created_at=r.created_at,
                           updated_at=r.updated_at, score=score) for score, r in page]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = {r.namespace for r in self.table.rows.values() if self._visible(r)}
        found = {ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions or ())}
        if op.max_depth is not None:
            found = {ns[:op.max_depth] for ns in found}
        return sorted(found)[op.offset:op.offset + op.limit]

    def _query_vectors(self, queries: list[str]) -> dict[str, list[float]]:
        emb = self.store.embeddings
        if emb is None or not queries:
            return {}
        return {q: self._checked(emb.embed_query(q)) for q in dict.fromkeys(queries)}

    def _checked(self, vector: list[float]) -> list[float]:
        if len(vector) != self.table.dims:
            raise StoreError(f"the index's embeddings returned a vector of size {len(vector)}; the store was "
                             f"configured with dims={self.table.dims}")
        return [float(x) for x in vector]

    def _texts(self, op: PutOp) -> list[tuple[str, str]]:
        """(path, text) pairs to embed for a put, named as InMemoryStore names them."""
        if self.store.embeddings is None or op.index is False or op.value is None:
            return []
        paths = self.store._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        out = []
        for path, tokens in paths:
            texts = get_text_at_path(op.value, tokens)
            out += [(f"{path}.{i}" if len(texts) > 1 else path, t) for i, t in enumerate(texts)]
        return out

    def _put(self, puts: list[PutOp]) -> None:
        gone = [(op.namespace, op.key) for op in puts if op.value is None]
        if gone:
            self.table.remove(gone)
        writes = [op for op in puts if op.value is not None]
        texts = {id(op): self._texts(op) for op in writes}
        flat = [t for op in writes for _, t in texts[id(op)]]
        vectors = iter([self._checked(v) for v in self.store.embeddings.embed_documents(flat)] if flat else [])
        rows = []
        for op in writes:
            old = self.table.rows.get((op.namespace, op.key))
            self.table.seq += 1
            rows.append((Row(op.namespace, op.key, json.loads(json.dumps(dict(op.value))),
                             old.created_at if self._visible(old) else self.now, self.now, self.table.seq, op.ttl,
                             (self.now + timedelta(minutes=op.ttl)).timestamp() if op.ttl else None),
                         [(path, next(vectors)) for path, _ in texts[id(op)]]))
        self.table.write(rows)
