"""A run's workspace: where it is made, and closing it (sandbox, clean-room snapshot, files) in one place.

Every host makes its workspaces here, under one private base directory: the graph's execute stage (a path keyed
by thread and run, found again on resume), `with_memory_transfer` and the middleware (a fresh directory per run).
A fresh workspace opened in this process and never closed — its run crashed where no hook of ours saw it — is
closed when the process exits, so nothing of such a run outlives it. A run with a checkpointer is left alone: its
thread may resume it, in this process or another, in the same files."""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER

from mtl_graph.judging.clean_room import discard_snapshot
from mtl_graph.sandbox import registry
from mtl_graph.sandbox.tree import remove_tree
from mtl_graph.sandbox.workspace import private_directory


def workspace_base(root: Path | None) -> Path:
    """The directory run workspaces are made in: root, else this user's own `mtl-workspaces-<uid>` in the system
    temp dir (made 0700; one another user made first, or anyone may write to, is refused: it could hold or
    redirect every run's workspace)."""
    if root is not None:
        return Path(root)
    return private_directory(Path(tempfile.gettempdir()) / f"mtl-workspaces-{os.geteuid()}")


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:40]


def workspace_path(root: Path | None, config: Any, run_id: str | None, task_id: str) -> Path:
    """`<base>/<thread>--<task>-<run>`: found again when the thread resumes. One level, so removing it after write
    back leaves nothing behind; every part is made safe, since a thread update may set the run id."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    name = f"{safe_name(str(thread) if thread else 'no-thread')}--{safe_name(task_id)}-" \
           f"{safe_name(run_id or uuid.uuid4().hex)}"
    return workspace_base(root) / name


class _OpenWorkspaces:
    """Fresh workspaces this process made and has not closed yet."""

    def __init__(self) -> None:
        self.lock, self.paths = threading.Lock(), set()
        atexit.register(self.close_all)

    def add(self, path: Path) -> None:
        with self.lock:
            self.paths.add(str(path))

    def discard(self, path: str | Path | None) -> None:
        with self.lock:
            self.paths.discard(str(path))

    def close_all(self) -> None:
        with self.lock:
            left, self.paths = list(self.paths), set()
        for path in left:
            close_workspace(path, keep=False)


OPEN = _OpenWorkspaces()


def resumable() -> bool:
    """Whether the graph run in progress has a checkpointer (a paused run may then resume elsewhere)."""
    try:
        config = get_config()
    except RuntimeError:  # not inside a graph run
        return False
    return (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None


def new_workspace(root: Path | None, task_id: str) -> Path:
    """A fresh directory for one run under the workspace base, closed by `close_workspace` (or at exit, unless
    the run is resumable)."""
    base = workspace_base(root)
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"mtl-{safe_name(task_id)}-", dir=base))
    if not resumable():
        OPEN.add(path)
    return path


def close_workspace(workspace: str | Path | None, keep: bool) -> None:
    """The run is over: what still runs in its sandbox ends, its clean-room snapshot goes, and unless `keep` its
    files (at any depth the agent made them)."""
    if not workspace:
        return
    registry.release(workspace)
    discard_snapshot(workspace)
    OPEN.discard(workspace)
    if not keep:
        remove_tree(workspace)
