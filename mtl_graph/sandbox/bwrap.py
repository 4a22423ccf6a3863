"""The bubblewrap backend: a minimal read-only root, the workspace the only writable place, no network.

What the command sees: /usr (and the /bin, /lib... links or directories), a few entries of /etc, the interpreter
running mtl_graph and per-user toolchains (rustup, pyenv) read-only; a private /proc, /dev, a size-limited /tmp
and /dev/shm; the workspace read-write. Not the host's /, /run, /var, /tmp, home directories or sockets.

Who it runs as: never with a capability. As root, bwrap keeps the host's user namespace and ``setpriv`` switches
to the unprivileged ``run_as_uid`` before the command starts (so RLIMIT_NPROC counts, and files owned by root
stay unreadable); otherwise an unprivileged bwrap maps the caller to ``run_as_uid`` in a new user namespace and
forbids nested ones.

How long it lives: by default one bwrap per sandbox, started at the first command, runs them all (persistent.py);
with ``bwrap_persistent`` off, each command gets a fresh one.
"""

from __future__ import annotations

import functools
import glob
import os
import stat
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from mtl_graph.core.process_temp import process_dir
from mtl_graph.sandbox.base import CommandResult, SandboxError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.local import WorkspaceSandbox
from mtl_graph.sandbox.persistent import RunnerNotStarted, SandboxRunner
from mtl_graph.sandbox.process import SHELL, scrubbed_env
from mtl_graph.sandbox.supervisor.server import FD_TOKEN, with_fds
from mtl_graph.sandbox.seccomp import filter_file
from mtl_graph.sandbox.supervisor.client import REAPER, Channel, Supervisor
from mtl_graph.sandbox.workspace import hand_over

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_MIB = 1024 * 1024
_OWN_MOUNTS = ("/", "/tmp", "/dev", "/dev/shm", "/proc")  # modes set by bwrap's options, never chmod'ed
RUNNER_PATH = "/run/mtl/supervisor.py"
"""Where the supervisor (supervisor/server.py) is bound read-only in a persistent sandbox, to run as its runner (its checkout is not bound)."""


def _existing(paths: list[Path]) -> list[Path]:
    """Real paths that exist, without duplicates or paths already inside another one (first wins)."""
    kept: list[Path] = []
    for path in paths:
        try:
            real = path.expanduser().resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if not any(real.is_relative_to(k) for k in kept):
            kept = [k for k in kept if not k.is_relative_to(real)] + [real]
    return kept


def _system_mounts() -> list[str]:
    """/usr and the top-level system directories: merged-/usr symlinks stay symlinks."""
    argv: list[str] = []
    for top in SYSTEM_DIRS:
        path = Path(top)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            argv += ["--ro-bind", top, top]
    return argv


@functools.cache
def staged_etc(patterns: tuple[str, ...]) -> Path:
    """A copy of the allowed /etc entries, made once per process and bound as the sandbox's /etc.

    One bind instead of one per entry: bwrap re-reads the mount table for every read-only bind, so forty of
    them cost more than the command. Files only root may read (ssl/private...) are not copied.
    """
    stage = process_dir("mtl-etc-")  # a killed server's copy goes with the next one made
    for pattern in patterns:
        for match in sorted(glob.glob(os.path.join("/etc", pattern))):
            _copy_public(Path(match), stage / Path(match).name)
    os.chmod(stage, 0o755)
    return stage


def _copy_public(source: Path, target: Path) -> None:
    """Copy what everyone may read; a symlink into the read-only system stays a link, others are resolved."""
    try:
        if source.is_symlink():
            dest = Path(os.path.join(source.parent, os.readlink(source)))
            if any(dest.is_relative_to(d) for d in SYSTEM_DIRS):
                target.symlink_to(os.readlink(source))
                return
        mode = source.stat().st_mode
        if not mode & stat.S_IROTH:
            return
        if stat.S_ISDIR(mode):
            target.mkdir(mode=stat.S_IMODE(mode))
            for child in sorted(source.iterdir()):
                _copy_public(child, target / child.name)
        elif stat.S_ISREG(mode):
            shutil.copy2(source, target)
    except OSError:  # a dangling link (resolv.conf into an absent /run), a file gone meanwhile
        return


def toolchain_dirs(config: SandboxConfig) -> list[Path]:
    """Read-only directories beyond /usr: this interpreter's prefixes and the configured toolchains."""
    candidates = [Path(sys.prefix), Path(sys.base_prefix), *map(Path, config.toolchain_paths)]
    return [p for p in _existing(candidates) if not any(p.is_relative_to(d) for d in SYSTEM_DIRS)]


def _masks(hidden: tuple[str, ...], bound: list[Path]) -> list[str]:
    """Empty placeholders over credentials that lie inside a bound directory."""
    out: list[str] = []
    for raw in hidden:
        path = Path(raw).expanduser()
        if not path.exists() or not any(path.is_relative_to(b) for b in bound):
            continue
        out += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    return out


def _traversable(targets: list[Path], read_only: list[Path]) -> list[str]:
    """Make the parents bwrap creates for mount points traversable (it copies the host's 0700 of /root...)."""
    parents = {p for t in targets for p in t.parents} - {Path(m) for m in _OWN_MOUNTS} - set(targets)
    argv: list[str] = []
    for parent in sorted(parents, key=lambda p: len(p.parts)):
        if not any(parent.is_relative_to(r) for r in read_only):
            argv += ["--chmod", "0755", str(parent)]
    return argv


def privilege_drop(config: SandboxConfig) -> list[str]:
    """What runs before the command: as root, setpriv to the unprivileged uid with no capability left."""
    if os.geteuid() != 0:
        return []
    return [
        "setpriv", f"--reuid={config.run_as_uid}", f"--regid={config.run_as_gid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
    ]  # fmt: skip


def bwrap_argv(workspace: Path, env: dict[str, str], config: SandboxConfig, runner: bool = False) -> list[str]:
    """bwrap options confining a process to workspace (order matters: later mounts cover earlier ones); runner:
    for the persistent sandbox's runner (pid 1 itself, the supervisor (supervisor/server.py) bound at RUNNER_PATH)."""
    ws = str(workspace)
    tmp_size = str(config.tmp_size_mb * _MIB)
    if os.geteuid() == 0:
        # No user namespace: its root would be the host's root (owner of /etc/shadow...). setpriv needs
        # these three capabilities, and drops them (and everything else) before the command runs; nested user
        # namespaces are refused by a seccomp filter instead (see seccomp.py).
        identity = ["--unshare-pid", *([] if config.network else ["--unshare-net"]), "--unshare-ipc",
                    "--unshare-uts", "--unshare-cgroup-try",
                    "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                    "--cap-add", "CAP_SETPCAP"]  # fmt: skip
        if filter_file() is not None:
            identity += ["--seccomp", f"{FD_TOKEN}0"]
    else:
        identity = ["--unshare-all", *(["--share-net"] if config.network else []), "--unshare-user",
                    "--disable-userns", "--cap-drop", "ALL",
                    "--uid", str(config.run_as_uid), "--gid", str(config.run_as_gid)]  # fmt: skip
    tools = toolchain_dirs(config)
    read_only = [Path(d) for d in SYSTEM_DIRS] + tools
    own = ["--as-pid-1", "--ro-bind", str(REAPER), RUNNER_PATH] if runner else []
    argv = [
        "bwrap", *identity, "--new-session", "--die-with-parent",
        *_system_mounts(), "--ro-bind", str(staged_etc(config.etc_allow)), "/etc",
        "--proc", "/proc", "--dev", "/dev",
        "--perms", "1777", "--size", tmp_size, "--tmpfs", "/tmp",
        "--perms", "1777", "--size", tmp_size, "--tmpfs", "/dev/shm",
        # Toolchains and the workspace after the tmpfs, so those under /tmp (a venv in a checkout there) stay visible.
        *[arg for tool in tools for arg in ("--ro-bind", str(tool), str(tool))],
        *_masks(config.hidden_paths, tools),
        "--bind", ws, ws, *own,
        *_traversable([workspace, *tools, *([Path(RUNNER_PATH)] if runner else [])], read_only),
        "--remount-ro", "/",  # the sandbox's own root: nothing but the mounts above is writable
        "--chdir", ws, "--clearenv",
    ]  # fmt: skip
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv + ["--", *privilege_drop(config)]


def seccomp_files() -> list[str]:
    """The seccomp filter bwrap reads from an inherited fd (as root only; none on an unknown architecture)."""
    seccomp = filter_file() if os.geteuid() == 0 else None
    return [str(seccomp)] if seccomp is not None else []


def runner_launch(workspace: Path, env: dict[str, str], config: SandboxConfig) -> dict:
    """The host supervisor's request starting a persistent sandbox: bwrap, then the supervisor (supervisor/server.py) inside as pid 1,
    unprivileged, on the socket and the lifeline passed after the files (SandboxRunner.ensure_started)."""
    files = seccomp_files()
    runner = [sys.executable, "-I", "-S", RUNNER_PATH, f"{FD_TOKEN}{len(files)}", f"{FD_TOKEN}{len(files) + 1}",
              "inside"]  # fmt: skip
    argv = bwrap_argv(workspace, env, config, runner=True) + runner
    return {"argv": argv, "cwd": str(workspace), "env": {"PATH": os.defpath}, "uid": None, "gid": None,
            "limits": [], "files": files, "lifeline": True}  # fmt: skip


def sandbox_env(config: SandboxConfig, workspace: Path) -> dict[str, str]:
    """The scrubbed environment, plus where rustup keeps its toolchains (HOME is the workspace inside)."""
    env = scrubbed_env(config, str(workspace))
    rustup = Path("~/.rustup").expanduser()
    if "RUSTUP_HOME" not in env and any(t == rustup.resolve() for t in toolchain_dirs(config)):
        env["RUSTUP_HOME"] = str(rustup)
    return env


@functools.cache
def _probe() -> str | None:
    """None when bwrap can build the sandbox we use on this machine, else why not (checked once)."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed: needed to drop root inside bwrap"
    config = SandboxConfig()
    with tempfile.TemporaryDirectory(prefix="mtl-bwrap-probe-") as tmp:
        ws = Path(tmp).resolve()
        if os.geteuid() == 0:
            hand_over(ws, config.run_as_uid, config.run_as_gid)
        argv = bwrap_argv(ws, {"PATH": "/usr/bin:/bin"}, config) + [SHELL, "-c", "touch probe"]
        fds = [os.open(path, os.O_RDONLY) for path in seccomp_files()]
        try:
            proc = subprocess.run(with_fds(argv, fds), capture_output=True, text=True, timeout=20, pass_fds=fds)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap failed to start: {exc}"
        finally:
            for fd in fds:
                os.close(fd)
        if proc.returncode != 0 or not (ws / "probe").exists():
            return f"bwrap cannot create a sandbox here: {proc.stderr.strip() or proc.returncode}"
    return None


class BwrapSandbox(WorkspaceSandbox):
    """Commands run in a bubblewrap sandbox (mount, pid, network, ipc, uts, cgroup namespaces): one for all of
    them by default, a fresh one for each with ``bwrap_persistent`` off."""

    kind = "bwrap"

    def __init__(self, workspace: str | Path, config: SandboxConfig | None = None) -> None:
        reason = _probe()
        if reason is not None:
            raise SandboxError(f"bwrap sandbox unavailable: {reason}")
        super().__init__(workspace, config)
        self._env = sandbox_env(self.config, self.workspace)
        self._prefix = bwrap_argv(self.workspace, self._env, self.config)

    def new_supervisor(self) -> Channel:
        if not self.config.bwrap_persistent:
            return super().new_supervisor()
        return SandboxRunner(runner_launch(self.workspace, sandbox_env(self.config, self.workspace), self.config))

    def command_env(self) -> dict[str, str]:
        return self._env

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        try:
            return super().run(command, timeout)
        except RunnerNotStarted as exc:  # an older bwrap, say: the per-command sandbox passed the probe
            warnings.warn(f"{exc}; this bwrap sandbox falls back to a new bwrap per command", RuntimeWarning,
                          stacklevel=2)  # fmt: skip
            self.replace_supervisor(Supervisor())
            return super().run(command, timeout)

    @staticmethod
    def is_available() -> bool:
        return _probe() is None

    def identity(self) -> tuple[int | None, int | None]:
        return None, None  # bwrap starts as the caller; the switch happens inside (privilege_drop)

    def passed_files(self) -> list[str]:
        return seccomp_files()

    def argv(self, command: str, timeout: float) -> list[str]:
        return [*self._prefix, SHELL, "-c", command]
