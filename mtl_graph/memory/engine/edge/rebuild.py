"""Qdrant Edge's HNSW index, built in the background without stalling the pool's process.

Edge builds HNSW only inside `optimize()`, which holds the GIL for the whole build: inside the agent's process a
build of 10k memories stalled every thread for 2-3 s, and capping segments to bound that left a 100k pool with 13
segments to search. Instead the pool's own shard never builds an index. It keeps one indexed segment plus an
unindexed tail that grows with writes (searched exactly: ~1 ms per 10k memories); once the tail passes
`EdgeIndexConfig.rebuild_after`, a worker process (build_worker.py) gets every point, builds one indexed
segment in a new directory at low priority, applies the writes the pool took meanwhile (a journal), and closes
it. The pool opens the new shard beside its own, then holds its readers and writers only to apply the last
journal entries and flip a symbolic link.

On disk: ``edge`` is the live shard: a directory (a pool never indexed by a build) or a link to a generation
``edge.g<N>``; a build writes ``edge.g<N+1>``. Every shard is opened by its real path, so the link only says what
the next open loads. The link flips (atomically) once the new generation holds every write, so a pool killed at
any point opens complete; `recover_interrupted_swap` removes whatever the link does not point to. The first swap
of a pool whose ``edge`` is a directory moves it to ``edge.replaced`` before linking (its files must be closed
first, so that one swap also holds the pool while the old shard closes).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtl_graph.memory.engine.edge.build_worker import INDEX_MARKER
from mtl_graph.core.errors import MTLError

if TYPE_CHECKING:
    from mtl_graph.memory.engine.storage import StoredPoint

log = logging.getLogger(__name__)
WORKER = Path(__file__).with_name("build_worker.py")
_CATCH_UP_ROUNDS = 8
_CATCH_UP_LEFT = 64
"""Journal entries the swap may still have to apply while it holds the pool: the rest is sent before."""


class RebuildError(MTLError, RuntimeError):
    """The background build failed; the pool keeps its current shard and every write."""


def replaced_dir(live: Path) -> Path:
    return live.with_name(live.name + ".replaced")


def generations(live: Path) -> dict[int, Path]:
    """The generation directories beside the live one, by number."""
    found = {}
    for path in live.parent.glob(f"{live.name}.g*"):
        suffix = path.name[len(live.name) + 2:]
        if suffix.isdigit() and path.is_dir() and not path.is_symlink():
            found[int(suffix)] = path
    return found


def next_generation(live: Path) -> Path:
    """Where the next build goes (the generation the link points to is among `generations`)."""
    return live.with_name(f"{live.name}.g{max(generations(live), default=0) + 1}")


def _link_staging(live: Path) -> Path:
    return live.with_name(live.name + ".link")


def indexed_points(live: Path) -> int:
    """Points in the shard's indexed segment when it was built (0: never built by us)."""
    try:
        return int(json.loads((live / INDEX_MARKER).read_text())["indexed_points"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def point_link(live: Path, target: Path) -> None:
    """Make ``live`` a link to the sibling ``target``, atomically (a new link renamed over the old one)."""
    tmp = _link_staging(live)
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target.name, tmp)
    os.replace(tmp, live)
    _sync_dir(live.parent)


def recover_interrupted_swap(live: Path) -> str | None:
    """Remove what a process killed during a build or a swap left beside the live shard; what was done."""
    gens, old, done = generations(live), replaced_dir(live), []
    if not live.exists() and not live.is_symlink() and old.exists():
        # a first swap died between moving the directory and linking: the new generation was already complete
        if gens:
            newest = gens[max(gens)]
            point_link(live, newest)
            done.append(f"linked {newest.name}")
        else:
            os.rename(old, live)
            done.append(f"restored {old.name}")
    keep = live.resolve() if live.is_symlink() else None
    for path in [*gens.values(), old, _link_staging(live)]:
        if path != keep and (path.exists() or path.is_symlink()):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
            done.append(f"removed {path.name}")
    return "; ".join(done) or None


class SwapGuard:
    """Many readers and writers at once (`shared`), or the swap alone (`exclusive`). Not reentrant."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._swapping = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._swapping:
                self._cond.wait()
            self._swapping = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._swapping = False
                self._cond.notify_all()


def points_message(ids: list[str], dense: Any, sparse: list, payloads: list) -> tuple:
    """A ``points`` message for the worker (the format of build_worker.points_of)."""
    import numpy as np

    return ("points", json.dumps(ids), np.asarray(dense, dtype=np.float32), json.dumps(sparse), json.dumps(payloads))


def journal_entry(points: list["StoredPoint"]) -> tuple:
    return points_message([p.id for p in points], [p.dense for p in points], [p.sparse for p in points],
                          [p.payload for p in points])


class Rebuild:
    """One background build: a worker process fed from the shard, then the journal of writes made meanwhile."""

    def __init__(self, live: Path, config: dict[str, Any], forced_by_wait: bool = False) -> None:
        self.live = live
        self.forced_by_wait = forced_by_wait
        self.build = next_generation(live)
        self.config = config
        self.journal: list[tuple] = []
        """Every write the pool took since the build started, in order (appended by the store's writers)."""
        self.spawned = threading.Event()
        """Set once the worker process runs."""
        self.done = threading.Event()
        self.error: str | None = None
        self.aborted = False
        self.swap_s: float | None = None
        """How long the swap held the pool's readers and writers."""
        self._sent = 0
        self._proc: subprocess.Popen | None = None
        self._stderr = tempfile.TemporaryFile()
        self.thread: threading.Thread | None = None

    def start(self, points: Iterator[tuple], swap: Callable[["Rebuild"], None],
              ended: Callable[["Rebuild"], None]) -> None:
        """Start the thread that starts the worker, feeds it, calls swap(self) and at last ended(self)."""
        self.thread = threading.Thread(target=self._run, args=(points, swap, ended), name="mtl-edge-index", daemon=True)
        self.thread.start()

    def _spawn(self) -> None:
        # Started from this build's own thread: the worker's death signal follows the thread that forked it.
        shutil.rmtree(self.build, ignore_errors=True)
        self.build.mkdir()
        self._proc = subprocess.Popen([sys.executable, str(WORKER), str(self.build)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr)

    def _worker_ended(self) -> RebuildError:
        assert self._proc is not None
        self._proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read()[-400:].decode(errors="replace").strip()
        return RebuildError(f"index worker ended (exit {self._proc.returncode}){': ' + tail if tail else ''}")

    def _send(self, message: tuple) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            pickle.dump(message, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        except (BrokenPipeError, ValueError) as exc:  # ValueError: the pipe was closed by abort()
            raise self._worker_ended() from exc

    def _reply(self, key: str) -> int:
        assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, ValueError) as exc:
            raise self._worker_ended() from exc
        try:
            reply = json.loads(line)
        except ValueError:
            raise self._worker_ended() from None
        if key not in reply:
            raise RebuildError(f"index worker: {reply.get('error', reply)}")
        return int(reply[key])

    def journaled_changes(self) -> int:
        """Points written or deleted while the worker built: the new shard's unindexed tail."""
        return sum(len(entry[2]) if entry[0] == "points" else len(entry[1]) if entry[0] == "delete" else 0
                   for entry in self.journal)

    def send_journal(self) -> None:
        entries, self._sent = self.journal[self._sent:], len(self.journal)
        for entry in entries:
            self._send(entry)

    def _run(self, points: Iterator[tuple], swap: Callable[["Rebuild"], None],
             ended: Callable[["Rebuild"], None]) -> None:
        try:
            self._spawn()
            self.spawned.set()
            self._send(("config", self.config))
            for chunk in points:
                if self.aborted:
                    raise RebuildError("the pool closed during the build")
                self._send(chunk)
            self._send(("index",))
            self._reply("indexed")
            for _ in range(_CATCH_UP_ROUNDS):  # the writes taken meanwhile, without holding up the pool
                if len(self.journal) - self._sent <= _CATCH_UP_LEFT:
                    break
                self.send_journal()
                self._send(("sync",))
                self._reply("synced")
            self.send_journal()
            self._send(("finish",))  # flushed and closed before the swap: closing takes ~0.75 s at 10k
            self._reply("points")
            self._proc.wait(timeout=60)
            swap(self)
        except BaseException as exc:  # never raised into the pool: it keeps its shard and every write
            self.error = str(exc) or type(exc).__name__
            if not self.aborted:
                log.warning("background index build of %s failed, the pool keeps its current index: %s",
                            self.live, self.error)
            self.abort()
        finally:
            self._stderr.close()
            try:
                ended(self)
            finally:
                self.done.set()

    def pending(self) -> list[tuple]:
        """Journal entries the worker has not applied: the swap applies them to the new shard."""
        return self.journal[self._sent:]

    def abort(self) -> None:
        """Stop the worker and remove its directory (the live shard is untouched)."""
        self.aborted = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._proc is not None:
            for pipe in (self._proc.stdin, self._proc.stdout):
                try:
                    pipe.close()  # type: ignore[union-attr]
                except (OSError, AttributeError):
                    pass
        if self.build.exists() and self.live.resolve() != self.build.resolve():
            shutil.rmtree(self.build, ignore_errors=True)
