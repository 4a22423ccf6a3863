"""The bubblewrap backend: the host root mounted read-only, the workspace the only writable place, no network."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

from mtl_graph.sandbox.base import SandboxError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.local import WorkspaceSandbox
from mtl_graph.sandbox.process import SHELL, scrubbed_env


def _masks(hidden: tuple[str, ...], workspace: Path) -> list[str]:
    """Empty placeholders over credential files and directories that exist (never over the workspace)."""
    out: list[str] = []
    for raw in hidden:
        path = Path(raw).expanduser()
        if not path.exists() or workspace.is_relative_to(path):
            continue
        out += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    return out


def bwrap_argv(workspace: Path, env: dict[str, str], hidden: tuple[str, ...] = (),
               network: bool = False) -> list[str]:
    """bwrap options confining a process to workspace (order matters: later mounts cover earlier ones)."""
    ws = str(workspace)
    argv = [
        "bwrap",
        "--ro-bind", "/", "/",
        *_masks(hidden, workspace),
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--bind", ws, ws,  # after the tmpfs, so a workspace under /tmp stays visible
        "--unshare-all",  # includes the network namespace: only a loopback device inside
        *(["--share-net"] if network else []),
        "--unshare-pid",
        "--die-with-parent",
        "--new-session",
        "--chdir", ws,
        "--clearenv",
    ]  # fmt: skip
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv


@functools.cache
def _probe() -> str | None:
    """None when bwrap can build the sandbox we use on this machine, else why not (checked once)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    with tempfile.TemporaryDirectory(prefix="mtl-bwrap-probe-") as tmp:
        argv = bwrap_argv(Path(tmp).resolve(), {"PATH": "/usr/bin:/bin"}) + ["--", SHELL, "-c", "touch probe"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap failed to start: {exc}"
        if proc.returncode != 0 or not (Path(tmp) / "probe").exists():
            return f"bwrap cannot create a sandbox here: {proc.stderr.strip() or proc.returncode}"
    return None


class BwrapSandbox(WorkspaceSandbox):
    """Each command runs in a fresh bubblewrap sandbox (mount, pid, network, ipc, uts namespaces)."""

    kind = "bwrap"

    def __init__(self, workspace: str | Path, config: SandboxConfig | None = None) -> None:
        reason = _probe()
        if reason is not None:
            raise SandboxError(f"bwrap sandbox unavailable: {reason}")
        super().__init__(workspace, config)

    @staticmethod
    def is_available() -> bool:
        return _probe() is None

    def argv(self, command: str, timeout: float) -> list[str]:
        env = scrubbed_env(self.config, str(self.workspace))
        argv = bwrap_argv(self.workspace, env, self.config.hidden_paths, self.config.network)
        return argv + ["--", SHELL, "-c", command]
