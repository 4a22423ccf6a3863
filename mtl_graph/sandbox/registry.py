"""One live sandbox per workspace in this process, found again by the workspace path.

A sandbox holds processes and cannot go into a checkpoint; the workspace path can. Whatever runs a command for a
run (the agent's tools node, a wrapped agent's tool, a resumed run in a new process) asks for the workspace's
sandbox here and gets the same one, created on first use; the run's last stage closes it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mtl_graph.sandbox.base import Sandbox, SandboxError
from mtl_graph.sandbox.factory import make_sandbox

_LOCK = threading.Lock()
_OPEN: dict[str, Sandbox] = {}


def _key(workspace: str | Path) -> str:
    return str(Path(workspace).resolve())


def sandbox_for(workspace: str | Path, kind: str = "auto") -> Sandbox:
    """The workspace's open sandbox, or a new one of `kind` (later calls get the first one, whatever their kind).

    A new one needs the workspace to exist: a run resumed after its files were deleted must not go on in an empty
    directory."""
    key = _key(workspace)
    with _LOCK:
        if key not in _OPEN:
            if not Path(key).is_dir():
                raise SandboxError(f"the run's workspace {key} no longer exists")
            _OPEN[key] = make_sandbox(kind, Path(key))
        return _OPEN[key]


def release(workspace: str | Path | None) -> None:
    """Close the workspace's sandbox (its leftover processes die); a no-op when none is open."""
    if workspace is None:
        return
    with _LOCK:
        sandbox = _OPEN.pop(_key(workspace), None)
    if sandbox is not None:
        sandbox.close()


def is_open(workspace: str | Path) -> bool:
    with _LOCK:
        return _key(workspace) in _OPEN


@contextmanager
def lent(workspace: str | Path, sandbox: Sandbox) -> Iterator[None]:
    """The caller's sandbox serves the workspace for the block; it stays the caller's (not closed here)."""
    key = _key(workspace)
    with _LOCK:
        previous = _OPEN.get(key)
        _OPEN[key] = sandbox
    try:
        yield
    finally:
        with _LOCK:
            if _OPEN.get(key) is sandbox:
                if previous is None:
                    del _OPEN[key]
                else:
                    _OPEN[key] = previous
