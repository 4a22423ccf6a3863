"""Where the agent's commands run: a small protocol with several backends."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from mtl_graph.core.errors import MTLError


class CommandResult(BaseModel):
    """What running one command gave."""

    exit_code: int
    """Exit status (124 on timeout, like coreutils' timeout)."""
    output: str
    """stdout and stderr interleaved, capped (head and tail kept, the cut marked)."""
    timed_out: bool = False
    """True when the command was killed for running past its timeout."""
    duration_s: float = 0.0
    """Wall time."""
    truncated: bool = False
    """True when output was cut."""


class SandboxError(MTLError, RuntimeError):
    """The sandbox could not be created or used (not a failing command: those return a result)."""


@runtime_checkable
class Sandbox(Protocol):
    """Run commands in one task's workspace."""

    workspace: Path
    """The only writable place; commands start here."""

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run a shell command in the workspace."""
        ...

    def read_file(self, path: str) -> str:
        """Read a file relative to the workspace."""
        ...

    def write_file(self, path: str, content: str) -> None:
        """Write a file relative to the workspace."""
        ...

    def close(self) -> None:
        """Release resources (kill leftover processes)."""
        ...
