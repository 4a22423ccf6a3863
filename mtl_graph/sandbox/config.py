"""Settings shared by every sandbox backend."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
# Credentials commonly kept on a developer's machine: never bound into a bwrap sandbox, even when a toolchain
# directory that holds them is.
DEFAULT_HIDDEN_PATHS = (
    "~/.ssh", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker", "~/.gnupg", "~/.netrc",
    "~/.git-credentials", "~/.pypirc", "~/.npmrc", "~/.config/gh", "~/.env",
    "~/.cargo/credentials", "~/.cargo/credentials.toml",
)
# Toolchains installed per user (rustup, pyenv): bound read-only into bwrap when they exist. The interpreter
# running mtl_graph (its venv and base prefix) is always bound as well.
DEFAULT_TOOLCHAIN_PATHS = ("~/.rustup", "~/.cargo/bin", "~/.pyenv", "/opt/java", "/usr/local/go")
# The parts of /etc that compilers, interpreters and name resolution read; the rest (shadow, ssh host keys,
# credentials of services) stays out of the sandbox.
DEFAULT_ETC_ALLOW = (
    "passwd", "group", "hosts", "hostname", "nsswitch.conf", "resolv.conf", "host.conf", "gai.conf", "services",
    "protocols", "ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "ld.so.cache",
    "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "os-release", "debian_version", "mime.types",
    "java*", "python3*", "perl", "bash.bashrc", "profile", "inputrc", "locale.alias", "locale.conf",
    "environment", "magic", "gitconfig", "npmrc", "pip.conf", "xdg", "fonts", "gcc", "cmake",
)
NOBODY = 65534


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
    """Process limit (RLIMIT_NPROC of the uid commands run as: as root, the unprivileged run_as_uid; None: none)."""
    max_file_size_mb: int | None = Field(default=1024, ge=1)
    """Largest file a command may write, in MiB (None: no limit)."""
    workspace_quota_mb: int | None = Field(default=4096, ge=1)
    """Disk the workspace may use, in MiB: the size of the filesystem it lives on while the sandbox is open (see
    quota_fs.py; writes past it fail with "No space left on device"), else polled: a command growing it past this
    is killed and commands run shrink-only until it is back under (workspace.QuotaWatch; None: no quota)."""
    workspace_filesystem: bool = True
    """Hold the quota with a filesystem of its size mounted on the workspace (needs root; memory-backed tmpfs,
    files copied in at open and back at close); False, or where it cannot be mounted: the quota is polled."""
    tmp_size_mb: int = Field(default=512, ge=1)
    """Size of the private /tmp (and of /dev/shm) of a bwrap sandbox, in MiB: memory-backed, so bounded."""
    run_as_uid: int = Field(default=NOBODY, ge=1)
    """When mtl_graph runs as root, commands run as this unprivileged uid (the uid inside bwrap otherwise)."""
    run_as_gid: int = Field(default=NOBODY, ge=1)
    """Group of the commands when mtl_graph runs as root (the gid inside bwrap otherwise)."""
    env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW
    """Host environment variables passed through to commands; everything else (API keys...) is dropped."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """Variables set for every command (applied after the allow-list)."""
    hidden_paths: tuple[str, ...] = DEFAULT_HIDDEN_PATHS
    """Host paths never visible in a bwrap sandbox, even inside a bound toolchain directory."""
    toolchain_paths: tuple[str, ...] = DEFAULT_TOOLCHAIN_PATHS
    """Directories outside /usr bound read-only into bwrap when they exist (per-user toolchains)."""
    etc_allow: tuple[str, ...] = DEFAULT_ETC_ALLOW
    """Entries of /etc (glob patterns) bound read-only into bwrap; nothing else of /etc is visible."""
    bwrap_persistent: bool = True
    """One bwrap per sandbox runs all its commands, /tmp kept between them (False: a new bwrap per command)."""
    network: bool = False
    """Whether commands may reach the network; only a task's setup step asks for it (dependencies)."""
    docker_image: str = "python:3.11-slim"
    """Image of the container the docker backend starts."""
    docker_cpus: float = Field(default=2.0, gt=0)
    """CPUs the docker container may use (``--cpus``)."""
