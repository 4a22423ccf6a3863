"""The docker backend: one container per sandbox, one ``docker exec`` per command.

The workspace is bind-mounted at the same path and is the only writable place besides a size-limited /tmp;
the network is off; no capability, no privilege gain (setuid binaries), a non-root user; limits are cgroup flags.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
from pathlib import Path

from mtl_graph.sandbox.base import SandboxError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.local import WorkspaceSandbox
from mtl_graph.sandbox.process import rlimits, scrubbed_env

# Per-process limits docker applies with --ulimit (memory and processes are cgroup limits there).
_ULIMIT_NAMES = {resource.RLIMIT_CPU: "cpu", resource.RLIMIT_FSIZE: "fsize"}


def docker_available() -> bool:
    """True when a docker client is installed and an engine answers."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def docker_run_argv(workspace: Path, config: SandboxConfig) -> list[str]:
    """``docker run`` of the long-lived container: no capability, no privilege gain, limits, a read-only root."""
    ws = str(workspace)
    user = f"{config.run_as_uid}:{config.run_as_gid}"
    argv = [
        "docker", "run", "-d", "--rm", "--init",
        "--network", "bridge" if config.network else "none",  # only a setup step asks for it
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--user", user,
        "--read-only",
        "--tmpfs", f"/tmp:rw,nosuid,nodev,size={config.tmp_size_mb}m,mode=1777",
        "--mount", f"type=bind,source={ws},target={ws}",
        "-w", ws,
        "--cpus", f"{config.docker_cpus:g}",
    ]  # fmt: skip
    if config.memory_mb:
        argv += ["--memory", f"{config.memory_mb}m", "--memory-swap", f"{config.memory_mb}m"]
    if config.max_processes:
        argv += ["--pids-limit", str(config.max_processes)]
    for res, value in rlimits(config):
        name = _ULIMIT_NAMES.get(res)
        if name:
            argv += ["--ulimit", f"{name}={value}:{value}"]
    return argv + [config.docker_image, "sleep", "infinity"]


class DockerSandbox(WorkspaceSandbox):
    """Commands run inside a long-lived container started for this sandbox (reuse one instance per run)."""

    kind = "docker"

    def __init__(self, workspace: str | Path, config: SandboxConfig | None = None) -> None:
        if not docker_available():
            raise SandboxError(
                "docker sandbox unavailable: no Docker engine answers `docker info`; "
                "start one or choose the bwrap or local backend"
            )
        super().__init__(workspace, config)
        self.container = self._start()

    is_available = staticmethod(docker_available)

    def _start(self) -> str:
        argv = docker_run_argv(self.workspace, self.config)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise SandboxError(f"could not start a {self.config.docker_image} container: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def identity(self) -> tuple[int | None, int | None]:
        return None, None  # the docker client runs as the caller; --user applies inside

    def limits(self) -> list[tuple[int, int]]:
        return []  # the limits belong to the container, not to the docker client

    def argv(self, command: str, timeout: float) -> list[str]:
        return docker_exec_argv(self.container, self.workspace, self.config, command, timeout)

    def close(self) -> None:
        if getattr(self, "container", None):  # before the workspace's files are copied back (super().close())
            subprocess.run(["docker", "rm", "-f", self.container], capture_output=True, timeout=60)
            self.container = ""
        super().close()


def docker_exec_argv(container: str, workspace: Path, config: SandboxConfig, command: str, timeout: float) -> list[str]:
    """``docker exec`` of one command in the container."""
    env = scrubbed_env(config, str(workspace))
    env.pop("PATH", None)  # the image's PATH, not the host's
    flags = [f for key, value in env.items() for f in ("-e", f"{key}={value}")]
    # Killing the client on timeout does not stop the process in the container; timeout(1) does.
    inner = ["timeout", "-s", "KILL", str(max(1, int(timeout) + 1)), "sh", "-c", command]
    return ["docker", "exec", "-w", str(workspace), *flags, container, *inner]
