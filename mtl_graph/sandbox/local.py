"""The local backend: a subprocess on the host with resource limits and a scrubbed environment.

It does not isolate the filesystem or the network; prefer the bubblewrap backend where it works. What it does:
every process a command starts is killed when the command ends (a supervising subreaper, see supervisor/server.py), and
as root, commands run as an unprivileged uid: started by a runner of that uid, forked once by the root
supervisor (persistent.py), as a uid switch per command would cost a fork of the supervisor instead of a vfork.
That runner wears bwrap's seccomp filter (seccomp.py: no new user namespace) and no_new_privs, which every
command inherits.
"""

from __future__ import annotations

import os
import shlex
import warnings
import weakref
from pathlib import Path

from mtl_graph.sandbox.base import CommandResult, SandboxError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.process import SHELL, limit_wrapper, rlimits, run_process, scrubbed_env
from mtl_graph.sandbox.persistent import SandboxRunner
from mtl_graph.sandbox.quota_fs import QuotaFilesystem, QuotaFilesystemUnavailable
from mtl_graph.sandbox.seccomp import filter_program
from mtl_graph.sandbox.supervisor.client import Channel, Supervisor
from mtl_graph.sandbox.workspace import QuotaWatch, hand_over, make_reachable


_MIB = 1024 * 1024
QUOTA_REFUSED_EXIT_CODE = 126
"""Exit code of a command the sandbox refused to run (its workspace over quota; see workspace.QuotaWatch)."""


class WorkspaceSandbox:
    """What every backend shares: the workspace, file access confined to it, the supervised capped runner."""

    kind = "base"

    def __init__(self, workspace: str | Path, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.workspace = Path(workspace).expanduser().resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        quota = self.config.workspace_quota_mb
        self.quota_filesystem: QuotaFilesystem | None = None
        """The filesystem of the quota's size the workspace lives on while the sandbox is open (None: polled)."""
        self.quota_polled_because: str | None = None
        """Why the quota is polled (QuotaWatch) instead of held by a filesystem; None when it is not."""
        if quota and self.config.workspace_filesystem:
            try:
                self.quota_filesystem = QuotaFilesystem.open(self.workspace, quota * _MIB)
            except QuotaFilesystemUnavailable as exc:
                self.quota_polled_because = str(exc)
        elif quota:
            self.quota_polled_because = "workspace_filesystem is off"
        # Registered before the supervisor's: finalizers run newest first, so commands are dead before the copy back.
        self._fs_finalizer = weakref.finalize(self, self.quota_filesystem.close) if self.quota_filesystem else None
        self.owner = self.workspace_owner()
        if self.owner is not None:
            hand_over(self.workspace, *self.owner)
        self.quota = QuotaWatch(self.workspace, quota) if quota and self.quota_filesystem is None else None
        self.supervisor = self.new_supervisor()
        self._finalizer = weakref.finalize(self, self.supervisor.close)

    def replace_supervisor(self, supervisor: Channel) -> None:
        """Close the current supervisor (what it runs dies) and use this one from now on."""
        self._finalizer()
        self.supervisor = supervisor
        self._finalizer = weakref.finalize(self, self.supervisor.close)

    def new_supervisor(self) -> Channel:
        """What starts this sandbox's commands: a supervisor process on the host."""
        return Supervisor()

    def workspace_owner(self) -> tuple[int, int] | None:
        """Who must own the workspace for commands to write it: the unprivileged uid when we are root."""
        return (self.config.run_as_uid, self.config.run_as_gid) if os.geteuid() == 0 else None

    def identity(self) -> tuple[int | None, int | None]:
        """The uid and gid the supervisor starts argv as (None: unchanged)."""
        return self.owner if self.owner is not None else (None, None)

    def limits(self) -> list[tuple[int, int]]:
        """Resource limits of the started process, inherited by everything it spawns."""
        return rlimits(self.config)

    def passed_files(self) -> list[str]:
        """Files the supervisor opens for the command (``@mtl-fd:N`` in argv becomes the N-th one's number)."""
        return []

    def argv(self, command: str, timeout: float) -> list[str]:
        """The argv that runs command (a shell string) in this backend."""
        raise NotImplementedError

    def command_env(self) -> dict[str, str]:
        """The environment commands get."""
        return scrubbed_env(self.config, str(self.workspace))

    def request(self, command: str, timeout: float) -> dict:
        """What the supervisor is asked to start for command: argv, env, uid, gid, limits, files."""
        if isinstance(self.supervisor, SandboxRunner):  # already the commands' uid (and, for bwrap, inside)
            argv, env, limits = [SHELL, "-c", command], self.command_env(), self.limits()
            return {"argv": argv, "env": env, "uid": None, "gid": None, "limits": limits, "files": []}
        uid, gid = self.identity()
        limits = self.limits()
        wrapper = limit_wrapper(limits)
        argv = self.argv(command, timeout)
        if wrapper is not None:
            argv, limits = [*wrapper, *argv], []
        # limits left are applied by the supervisor: as root, or when prlimit is missing
        return {"argv": argv, "env": self.command_env(), "uid": uid, "gid": gid, "limits": limits,
                "files": self.passed_files()}  # fmt: skip

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        limit = timeout if timeout is not None else self.config.timeout
        quota = self.quota
        if quota is not None and (refusal := quota.begin()):
            return CommandResult(exit_code=QUOTA_REFUSED_EXIT_CODE, output=f"[{refusal}]\n")
        shrink = quota.shrink_note() if quota is not None and quota.shrink_only else None
        if shrink:  # the shell lowers its own file-size limit (soft and hard) before the command runs in it
            command = f'ulimit -f 0 || exit {QUOTA_REFUSED_EXIT_CODE}; exec "$0" -c {shlex.quote(command)}'
        result = run_process(
            self.supervisor,
            cwd=str(self.workspace),
            timeout=limit,
            cap=self.config.output_cap,
            watchdog=quota.check if quota is not None else None,
            **self.request(command, limit),
        )
        if quota is not None and (note := quota.end()):  # grown past it faster than one poll, or shrunk back
            result = result.model_copy(update={"output": f"{result.output}\n[{note}]\n"})
        elif self.quota_filesystem is not None and self.quota_filesystem.full():
            note = (f"the workspace is full: its filesystem holds its quota of {self.config.workspace_quota_mb} MiB, "
                    "so writes fail (No space left on device) until files are deleted")
            result = result.model_copy(update={"output": f"{result.output}\n[{note}]\n"})
        if shrink:
            result = result.model_copy(update={"output": f"[{shrink}]\n{result.output}"})
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
        if self.owner is not None:  # the new file and directories belong to the commands' uid, like theirs
            for made in [target, *target.parents]:
                if made == self.workspace:
                    break
                if made.stat().st_uid == os.geteuid():
                    os.chown(made, *self.owner, follow_symlinks=False)

    def close(self) -> None:
        """Kill what still runs; then the workspace's files go back onto the disk beneath its quota filesystem."""
        self.supervisor.close()
        if (release := getattr(self, "_fs_finalizer", None)) is not None:
            release()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.workspace)!r})"


def uncontained() -> str:
    """What the local backend leaves open, for the warning it gives."""
    who = (
        "as an unprivileged uid: world-readable host files stay readable (the workspace's parent directories are "
        "made traversable for it)"
        if os.geteuid() == 0
        else "as your own user: your files (~/.ssh...) and your processes' environments (/proc/PID/environ) "
        "stay readable"
    )
    return (
        f"local sandbox: commands run on the host {who}; the network, host sockets, the host's processes and "
        "world-writable directories such as /tmp (unbounded) stay reachable. Use the bwrap backend to isolate them"
    )


class LocalSandbox(WorkspaceSandbox):
    """Commands run directly on the host, in the workspace, under a supervisor that leaves no process behind."""

    kind = "local"

    def __init__(self, workspace: str | Path, config: SandboxConfig | None = None) -> None:
        super().__init__(workspace, config)
        if self.owner is not None:  # bwrap mounts the workspace; here the uid must walk the host's path to it
            make_reachable(self.workspace)
        warnings.warn(uncontained(), RuntimeWarning, stacklevel=2)

    @staticmethod
    def is_available() -> bool:
        return True

    def new_supervisor(self) -> Channel:
        if self.owner is None:  # no uid switch: the supervisor starts commands on the fast path itself
            return super().new_supervisor()
        uid, gid = self.owner
        # Root's commands would otherwise get every capability in a user namespace of their own (`unshare -Ur`):
        # the runner wears the filter bwrap gets as root, and passes it on to every command.
        program = filter_program()
        launch = {"runner": True, "uid": uid, "gid": gid, "limits": []}
        return SandboxRunner({**launch, "seccomp": program.hex()} if program is not None else launch)

    def argv(self, command: str, timeout: float) -> list[str]:
        return [SHELL, "-c", command]
