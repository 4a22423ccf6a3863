"""The long-term store for `langgraph dev` / LangGraph servers: PoolStore, the MTL pool under ("mtl", <format>).

In langgraph.json:  "store": {"path": "./graphs/store.py:store"}

Graphs then read and write it as `runtime.store` (the server passes it to every run). Where it keeps its items:
MTL_STORE (a directory, ":memory:", or an http(s):// Qdrant URL), else a directory beside the pool
(`<MTL_POOL>-store`); the pool is MTL_POOL, opened through the same process-wide handle the `mtl` graph uses.
Semantic search embeds the whole value with the bundled local model (LangGraph's default `fields: ["$"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mtl_graph.memory.store.pool_store import PoolStore, StoreError

INDEX: dict[str, Any] = {"fields": ["$"]}


def _open() -> PoolStore:
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.config.environment import get_settings

    pool_location = get_settings().pool
    location = get_settings().store or (":memory:" if pool_location == ":memory:" else
                                               pool_location if pool_location.startswith(("http://", "https://"))
                                               else f"{pool_location.rstrip('/')}-store")
    if not location.startswith(("http://", "https://")):
        return PoolStore.open(location, pool=pool_location, index=INDEX)
    try:  # a server: its collection is shared by every process, which langgraph-store-qdrant is built for
        from langgraph.store.qdrant import QdrantStore
    except ImportError:
        raise StoreError("a store on a Qdrant server needs langgraph-store-qdrant (pip install "
                         "langgraph-store-qdrant), or set MTL_STORE to a directory") from None
    from qdrant_client import QdrantClient

    from mtl_graph.memory.engine.embeddings import LOCAL_DIM, local_embeddings

    client = QdrantClient(url=location, api_key=get_settings().qdrant_api_key, timeout=10, check_compatibility=False)
    inner = QdrantStore(client, index={"dims": LOCAL_DIM, "embed": local_embeddings(), **INDEX})
    try:
        inner.setup()
    except Exception as exc:
        client.close()
        raise StoreError(f"cannot set up the store on the Qdrant server at {location}: {exc}") from None
    pool = MemoryPool.open(pool_location)

    def release() -> None:
        client.close()
        pool.close()

    return PoolStore.wrapping(inner, pool=pool, on_close=release)


@contextlib.asynccontextmanager
async def store() -> AsyncIterator[PoolStore]:
    """The server enters this once and closes the store when it stops (opening does file I/O: off the loop)."""
    opened = await asyncio.to_thread(_open)
    try:
        yield opened
    finally:
        await asyncio.to_thread(opened.close)
