"""Turning a pool location (":memory:", a directory, a URL) into an open Qdrant store."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from mtl_graph.memory.embeddings import EmbeddingError, embeddings_name
from mtl_graph.memory.storage import Store

META_FILE = "pool.json"
LOCK_FILE = ".lock"
COLLECTION = "mtl_memories"
FORMAT_VERSION = 1


class PoolError(RuntimeError):
    """The pool cannot be opened or used."""


class PoolLockedError(PoolError):
    """Another process holds the embedded pool."""


class EmbeddingMismatchError(PoolError):
    """The pool was built with other embeddings."""


@dataclass
class OpenedStore:
    store: Store
    dim: int
    engine: str
    cleanup: Path | None = None
    lock_fd: int | None = None

    def release(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None
        if self.cleanup is not None:
            shutil.rmtree(self.cleanup, ignore_errors=True)


def _lock(path: Path) -> int:
    # flock gives one clear error for both engines (each has its own, less helpful, lock failure).
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise PoolLockedError(
            f"pool {path} is in use by another process: an embedded pool serves one process at a time "
            "(share it inside one process, or run a Qdrant server and use --pool http://...)"
        ) from None
    return fd


def _read_meta(meta_path: Path) -> dict[str, Any]:
    if not meta_path.exists():
        return {}
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PoolError(f"{meta_path} is corrupt ({exc}); restore it or rebuild the pool") from None
    if not isinstance(meta, dict) or "dim" not in meta:
        raise PoolError(f"{meta_path} is corrupt (expected a JSON object with 'embeddings' and 'dim')")
    return meta


def check_dimension(meta: dict[str, Any], emb: Embeddings, where: str) -> int:
    """The pool's vector size; a pool built with other embeddings is refused."""
    name = embeddings_name(emb)
    if meta:
        if meta.get("embeddings") != name:
            raise EmbeddingMismatchError(
                f"pool {where} was built with embeddings {meta.get('embeddings')!r} (dim {meta.get('dim')}), "
                f"not {name!r}: open it with the same embeddings (MTL_EMBEDDINGS) or build a new pool"
            )
        return int(meta["dim"])
    try:
        return len(emb.embed_query("dimension probe"))
    except Exception as exc:
        raise EmbeddingError(f"embeddings {name!r} failed: {exc}") from exc


def open_directory(path: Path | None, emb: Embeddings, engine: str) -> OpenedStore:
    """An embedded pool in a directory (a temporary one for ":memory:"), locked for this process."""
    cleanup = None
    if path is None:
        path = cleanup = Path(tempfile.mkdtemp(prefix="mtl-pool-"))
    if path.exists() and not path.is_dir():
        raise PoolError(f"pool location {path} exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    opened = OpenedStore(store=None, dim=0, engine=engine, cleanup=cleanup, lock_fd=_lock(path))  # type: ignore[arg-type]
    try:
        meta_path = path / META_FILE
        meta = _read_meta(meta_path)
        opened.engine = engine = meta.get("engine", engine)
        opened.dim = check_dimension(meta, emb, str(path))
        if engine == "edge":
            from mtl_graph.memory.storage import EdgeStore

            (path / engine).mkdir(exist_ok=True)
            opened.store = EdgeStore(str(path / engine), opened.dim)
        elif engine == "client":
            from qdrant_client import QdrantClient

            from mtl_graph.memory.storage import ClientStore

            opened.store = ClientStore(QdrantClient(path=str(path / engine)), COLLECTION, opened.dim, local=True)
        else:
            raise PoolError(f"unknown engine {engine!r} (expected 'edge' or 'client')")
        if not meta:
            meta_path.write_text(json.dumps({"engine": engine, "embeddings": embeddings_name(emb),
                                             "dim": opened.dim, "format_version": FORMAT_VERSION}, indent=2))
    except BaseException:
        opened.release()
        raise
    return opened


def open_server(url: str, emb: Embeddings, api_key: str | None) -> OpenedStore:
    """A collection on a Qdrant server or cluster; the embeddings' name is kept in collection metadata."""
    from qdrant_client import QdrantClient

    from mtl_graph.memory.storage import ClientStore

    client = QdrantClient(url=url, api_key=api_key, timeout=10, check_compatibility=False)
    try:
        exists = client.collection_exists(COLLECTION)
    except Exception as exc:
        raise PoolError(f"cannot reach the Qdrant server at {url}: {exc}") from None
    meta = (client.get_collection(COLLECTION).config.metadata or {}) if exists else {}
    dim = check_dimension(meta, emb, url)
    store = ClientStore(client, COLLECTION, dim)
    if not meta:
        client.update_collection(COLLECTION, metadata={"embeddings": embeddings_name(emb), "dim": dim})
    return OpenedStore(store=store, dim=dim, engine="server")
