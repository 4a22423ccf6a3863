"""Settings shared by every sandbox backend."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
# Credentials commonly kept on a developer's machine; bwrap mounts empty placeholders over them.
DEFAULT_HIDDEN_PATHS = (
    "~/.ssh", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker", "~/.gnupg", "~/.netrc",
    "~/.git-credentials", "~/.pypirc", "~/.npmrc", "~/.config/gh", "~/.env",
)


class SandboxConfig(BaseModel):
    """Limits and environment for the commands a sandbox runs."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(default=60.0, gt=0)
    """Seconds a command may run before it is killed (exit 124)."""
    output_cap: int = Field(default=10_000, ge=200)
    """Characters of output kept per command: head and tail, the middle replaced by a marker."""
    memory_mb: int | None = Field(default=4096, ge=16)
    """Address-space limit per process in MiB (None: no limit)."""
    cpu_seconds: int | None = Field(default=600, ge=1)
    """CPU-time limit per process in seconds (None: no limit)."""
    max_processes: int | None = Field(default=1024, ge=1)
    """Process limit; the kernel counts every process of the user, and ignores it for root (None: no limit)."""
    max_file_size_mb: int | None = Field(default=1024, ge=1)
    """Largest file a command may write, in MiB (None: no limit)."""
    env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW
    """Host environment variables passed through to commands; everything else (API keys...) is dropped."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Variables set for every command (applied after the allow-list)."""
    hidden_paths: tuple[str, ...] = DEFAULT_HIDDEN_PATHS
    """Host paths the bwrap sandbox hides (covered by empty placeholders) although the host is readable."""
    network: bool = False
    """Whether commands may reach the network; only a task's setup step asks for it (dependencies)."""
    docker_image: str = "python:3.11-slim"
    """Image of the container the docker backend starts."""
