"""Turning a pool location (":memory:", a directory, a URL) into an open Qdrant store."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from mtl_graph.core.process_temp import pid_alive, remove_orphans
from mtl_graph.memory.engine.embeddings import EmbeddingError, embeddings_name
from mtl_graph.memory.errors import EmbeddingMismatchError, PoolError, PoolLockedError
from mtl_graph.memory.engine.integrity import (
    ENGINE_MARKERS,
    GuardedStore,
    PointLedger,
    check_hint,
    engine_errors,
    probe,
    refuse_interrupted_repair,
    refuse_missing_data,
    refuse_unrecorded_data,
    write_json_atomically,
)
from mtl_graph.memory.engine.edge.rebuild import recover_interrupted_swap
from mtl_graph.memory.engine.storage import Store

__all__ = ["PoolError", "PoolLockedError", "EmbeddingMismatchError", "OpenedStore", "location_of", "open_directory",
           "open_server"]

META_FILE = "pool.json"
LOCK_FILE = ".lock"
COLLECTION = "mtl_memories"
FORMAT_VERSION = 1
TEMP_PREFIX = "mtl-pool-"


def location_of(value: Any, where: str) -> str:
    """A pool or store location as text: ":memory:", a directory (a str or an os.PathLike) or an http(s):// URL.

    Anything else is a one-line TypeError naming `where` (a pool object, a number, None, bytes would otherwise be
    turned into a directory named after its repr), an empty or blank one a ValueError (it would be the working
    directory)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        hint = " (it is already open: pass it as it is, e.g. pool=...)" if hasattr(value, "add_many") else ""
        raise TypeError(f"{where}: a location is ':memory:', a directory path or an http(s):// URL, "
                        f"not {type(value).__name__}{hint}")
    if not value.strip():
        raise ValueError(f"{where}: the location is empty (':memory:' for a temporary one)")
    return value


@dataclass
class OpenedStore:
    store: Store
    dim: int
    engine: str
    cleanup: Path | None = None
    lock_fd: int | None = None
    directory: Path | None = None
    """The pool's directory (None: a server)."""
    shared: dict[str, Any] = field(default_factory=dict)
    """What the pools of this engine share in the process (memory/pool/stats.py: one statistics record per
    namespace)."""

    def release(self) -> None:
        if self.lock_fd is not None:
            try:  # no holder named once it lets go (a process killed keeps its line: _holder checks it is alive)
                os.ftruncate(self.lock_fd, 0)
            except OSError:
                pass
            os.close(self.lock_fd)
            self.lock_fd = None
        if self.cleanup is not None:
            shutil.rmtree(self.cleanup, ignore_errors=True)


def lock_directory(path: Path) -> int:
    # flock gives one clear error for both engines (each has its own, less helpful, lock failure).
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PoolError(f"cannot open pool {path}: {exc.strerror} ({path / LOCK_FILE})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise PoolLockedError(
            f"pool {path} is in use by another process{holder}: an embedded pool serves one process at a time "
            "(share it inside one process, or run a Qdrant server and use --pool http://...)"
        ) from None
    try:  # who holds it, for the next process's error (the lock itself is the flock, not this text); written
        # over the old text, then cut to length, so a reader never finds the file empty in between
        line = f"{os.getpid()} {_command()}\n".encode("utf-8", "replace")
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))
    except OSError:
        pass
    return fd


def _command() -> str:
    try:
        argv = Path("/proc/self/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    return " ".join(a.decode("utf-8", "replace") for a in argv if a)[:120]


HOLDER_WAIT_S = 2.0
"""How long a refused process waits for the holder to name itself: the holder writes its line just after it took
the lock, so a process refused in between would otherwise find no line, or the line of a holder that died."""


def _holder(fd: int) -> str:
    """" (pid N: its command)" from the lock file the holder wrote, or "" when no living process is named in it
    within HOLDER_WAIT_S."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        try:
            text = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
        except OSError:
            return ""
        pid, _, command = text.partition(" ")
        if pid.isdigit() and int(pid) > 0 and pid_alive(int(pid)):
            return f" (pid {pid}: {command[:120]})" if command else f" (pid {pid})"
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.02)


def _read_meta(meta_path: Path) -> dict[str, Any]:
    if not meta_path.exists():
        return {}
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PoolError(f"{meta_path} is corrupt ({exc}); restore it, or run `mtl pool check --repair "
                        f"{meta_path.parent}` to rebuild the pool") from None
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


def _held(directory: Path) -> bool:
    """Whether a process holds the pool lock of `directory` (works across pid namespaces sharing /tmp)."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor drops the probe lock too
    return False


def remove_orphaned_temp_pools(root: Path | None = None) -> list[Path]:
    """Temporary (":memory:") pools left by processes that died without cleaning up (SIGKILL, OOM kill).

    Their directories are named with the owning pid; one is removed only when that pid is gone and nobody holds
    its lock (a reused pid or another pid namespace keeps it, which errs on the safe side)."""
    return remove_orphans(TEMP_PREFIX, root, keep=lambda entry: not entry.is_dir() or _held(entry))


def _engine_store(path: Path, engine: str, dim: int) -> Store:
    if engine == "edge":
        from mtl_graph.memory.engine.edge.edge_store import EdgeStore

        (path / engine).mkdir(exist_ok=True)
        return EdgeStore(str(path / engine), dim)
    from qdrant_client import QdrantClient

    from mtl_graph.memory.engine.storage import ClientStore

    return ClientStore(QdrantClient(path=str(path / engine)), COLLECTION, dim, local=True)


def open_directory(path: Path | None, emb: Embeddings, engine: str) -> OpenedStore:
    """An embedded pool in a directory (a temporary one for ":memory:"), locked for this process.

    Never starts an empty pool over data it did not record, and never opens one that lost points (see
    `mtl_graph.memory.engine.integrity`); engine failures are PoolErrors naming the directory."""
    cleanup = None
    if path is None:
        remove_orphaned_temp_pools()
        path = cleanup = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
    if path.exists() and not path.is_dir():
        raise PoolError(f"pool location {path} exists and is not a directory")
    refuse_interrupted_repair(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PoolError(f"cannot create pool {path}: {exc.strerror or exc}") from None
    opened = OpenedStore(store=None, dim=0, engine=engine, cleanup=cleanup, lock_fd=lock_directory(path),  # type: ignore[arg-type]
                         directory=path)
    try:
        meta_path = path / META_FILE
        meta = _read_meta(meta_path)
        ledger = PointLedger.read(path)
        if not meta:
            refuse_unrecorded_data(path)
        opened.engine = engine = meta.get("engine", engine)  # the recorded engine wins over MTL_ENGINE
        if engine not in ENGINE_MARKERS:
            raise PoolError(f"unknown engine {engine!r} (expected 'edge' or 'client')")
        opened.dim = check_dimension(meta, emb, str(path))
        if meta:
            if engine == "edge":
                recover_interrupted_swap(path / engine)  # a process killed while it swapped in a new index
            refuse_missing_data(path, engine, ledger)
        else:  # ledger first, pool.json next, engine data last: an interrupted creation never looks like damage
            ledger.record(0)
            write_json_atomically(meta_path, {"engine": engine, "embeddings": embeddings_name(emb),
                                              "dim": opened.dim, "format_version": FORMAT_VERSION})
        hint = check_hint(path)
        with engine_errors(str(path), "opening it", hint):
            store = _engine_store(path, engine, opened.dim)
        opened.store = GuardedStore(store, str(path), hint, ledger if cleanup is None else None)
        found = opened.store.count()
        ledger.verify(found, path)
        if found:
            probe(opened.store, opened.dim, path)
    except BaseException as exc:
        if opened.store is not None:  # opened, then refused: the engine lets go of the directory first
            with contextlib.suppress(Exception):
                opened.store.close()
        opened.release()
        if isinstance(exc, OSError):  # writing pool.json or the ledger (a read-only or full disk)
            raise PoolError(f"pool {path}: cannot write {exc.filename or 'its files'}: {exc.strerror or exc}") from exc
        raise
    return opened


def open_server(url: str, emb: Embeddings, api_key: str | None) -> OpenedStore:
    """A collection on a Qdrant server or cluster; the embeddings' name is kept in collection metadata."""
    from qdrant_client import QdrantClient

    from mtl_graph.memory.engine.storage import ClientStore

    client = QdrantClient(url=url, api_key=api_key, timeout=10, check_compatibility=False)
    hint = f"check that the Qdrant server at {url} is running and healthy"
    try:
        exists = client.collection_exists(COLLECTION)
    except Exception as exc:
        raise PoolError(f"cannot reach the Qdrant server at {url}: {exc}") from None
    meta = (client.get_collection(COLLECTION).config.metadata or {}) if exists else {}
    dim = check_dimension(meta, emb, url)
    with engine_errors(url, "creating the collection", hint):
        store = GuardedStore(ClientStore(client, COLLECTION, dim), url, hint)
    if not meta:
        client.update_collection(COLLECTION, metadata={"embeddings": embeddings_name(emb), "dim": dim})
    return OpenedStore(store=store, dim=dim, engine="server")
