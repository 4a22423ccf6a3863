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
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    tokenize_path,
)

from mtl_graph.memory.store.batch import TableBatch
from mtl_graph.memory.store.items import ItemTable
from mtl_graph.memory.store.match import (
    MTL_ROOT,
    StoreClosedError,
    StoreError,
    StoreReadOnlyError,
    check_filter,
    check_op,
    namespace_matches,
)
from mtl_graph.memory.store.memories import PoolView

if TYPE_CHECKING:
    from mtl_graph.memory.pool.pool import MemoryPool

__all__ = ["PoolStore", "StoreError", "StoreReadOnlyError", "StoreClosedError"]

_ALL = 2**31 - 1


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _embeddings(index: IndexConfig) -> tuple[Any, int | None, str]:
    """The index's embedding function, its dims (None: probe) and a name recorded with the data."""
    from mtl_graph.memory.engine.embeddings import LOCAL_DIM, embeddings_name, local_embeddings

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
        from mtl_graph.core.environment import process_settings
        from mtl_graph.memory.engine.location import location_of
        from mtl_graph.memory.pool.pool import MemoryPool

        location = location_of(location, "PoolStore.open")
        owns = pool is not None and not isinstance(pool, MemoryPool)
        if owns:  # a location: checked before anything is opened or embedded
            pool = location_of(pool, "PoolStore.open(pool=...): a MemoryPool or its location")
        emb, dims, name = _embeddings(index) if index else (None, None, None)
        if emb is not None and dims is None:
            dims = len(emb.embed_query("dimension probe"))
        if owns:
            pool = MemoryPool.open(pool)
        try:
            if pool is not None and _inside(location, getattr(pool, "location", ":memory:")):
                raise StoreError(f"the store needs a directory of its own, outside the pool's ({location})")
            table = ItemTable(location, engine or process_settings().engine, dims, name)
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
        return TableBatch(self._table, self.embeddings, self._fields, self._clock()).run(ops)

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
