"""The local backend: a subprocess on the host with resource limits and a scrubbed environment.

It does not isolate the filesystem or the network; prefer the bubblewrap backend where it works.
"""

from __future__ import annotations

from pathlib import Path

from mtl_graph.sandbox.base import CommandResult, SandboxError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.process import (
    SHELL,
    group_alive,
    kill_group,
    rlimit_preexec,
    run_process,
    scrubbed_env,
)


class WorkspaceSandbox:
    """What every backend shares: the workspace, file access confined to it, the capped runner."""

    kind = "base"

    def __init__(self, workspace: str | Path, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.workspace = Path(workspace).expanduser().resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._groups: set[int] = set()

    def argv(self, command: str, timeout: float) -> list[str]:
        """The argv that runs command (a shell string) in this backend."""
        raise NotImplementedError

    def preexec(self):
        """Runs in the child before exec: the resource limits (inherited by everything it spawns)."""
        return rlimit_preexec(self.config)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        limit = timeout if timeout is not None else self.config.timeout
        result, pgid = run_process(
            self.argv(command, limit),
            cwd=str(self.workspace),
            env=scrubbed_env(self.config, str(self.workspace)),
            timeout=limit,
            cap=self.config.output_cap,
            preexec_fn=self.preexec(),
        )
        if group_alive(pgid):  # background processes left behind: killed on close()
            self._groups.add(pgid)
        return result

    def resolve(self, path: str | Path) -> Path:
        """The absolute host path of a workspace-relative path; refuses anything outside the workspace."""
        target = (self.workspace / path).resolve()
        if not target.is_relative_to(self.workspace):
            raise SandboxError(f"path escapes the workspace {self.workspace}: {path}")
        return target

    def read_file(self, path: str) -> str:
        return self.resolve(path).read_text(encoding="utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> None:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")

    def close(self) -> None:
        for pgid in self._groups:
            kill_group(pgid)
        self._groups.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.workspace)!r})"


class LocalSandbox(WorkspaceSandbox):
    """Commands run directly on the host, in the workspace, in their own process group."""

    kind = "local"

    @staticmethod
    def is_available() -> bool:
        return True

    def argv(self, command: str, timeout: float) -> list[str]:
        return [SHELL, "-c", command]
