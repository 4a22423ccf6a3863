"""The docker backend: one container per sandbox, one ``docker exec`` per command.

The workspace is bind-mounted at the same path, the network is off, limits are container flags.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mtl_graph.sandbox.base import SandboxError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.local import WorkspaceSandbox
from mtl_graph.sandbox.process import scrubbed_env


def docker_available() -> bool:
    """True when a docker client is installed and an engine answers."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class DockerSandbox(WorkspaceSandbox):
    """Commands run inside a long-lived container started for this sandbox."""

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
        cfg, ws = self.config, str(self.workspace)
        network = "bridge" if cfg.network else "none"
        argv = ["docker", "run", "-d", "--rm", "--network", network, "-v", f"{ws}:{ws}", "-w", ws]
        if cfg.memory_mb:
            argv += ["--memory", f"{cfg.memory_mb}m"]
        if cfg.max_processes:
            argv += ["--pids-limit", str(cfg.max_processes)]
        argv += [cfg.docker_image, "sleep", "infinity"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise SandboxError(f"could not start a {cfg.docker_image} container: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def preexec(self):
        return None  # the limits belong to the container, not to the docker client

    def argv(self, command: str, timeout: float) -> list[str]:
        env = scrubbed_env(self.config, str(self.workspace))
        env.pop("PATH", None)  # the image's PATH, not the host's
        flags = [f for key, value in env.items() for f in ("-e", f"{key}={value}")]
        # Killing the client on timeout does not stop the process in the container; timeout(1) does.
        inner = ["timeout", "-s", "KILL", str(max(1, int(timeout) + 1)), "sh", "-c", command]
        return ["docker", "exec", "-w", str(self.workspace), *flags, self.container, *inner]

    def close(self) -> None:
        super().close()
        if getattr(self, "container", None):
            subprocess.run(["docker", "rm", "-f", self.container], capture_output=True, timeout=60)
            self.container = ""
