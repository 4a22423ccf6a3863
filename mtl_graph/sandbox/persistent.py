"""A sandbox's long-lived runner: started once, at the first command, it starts all of them.

The runner is supervisor/server.py (the same supervisor as on the host, so the same guarantees per command: every process a
command leaves killed when it ends or is killed, limits, exit codes) with the commands' uid, so it starts each one
without a uid switch, on the vfork path. The host talks to it directly over a socket; a supervisor on the host
holds it (process tree: host → supervisor/server.py on the host → [bwrap →] runner → commands), so closing the sandbox, the
host's death or a runner that stops answering (``kill_grace_s`` after a kill) kills it all from outside. Should
the runner die, the command fails ("the sandbox supervisor was killed") and the next one gets a new runner.

- bwrap (bwrap.runner_launch): building the namespaces and mounts costs bwrap more (6-8 ms) than most commands
  take, so it is paid once. The runner is pid 1 of the sandbox's pid namespace (``--as-pid-1``), without
  capabilities: the commands can neither signal, stop nor trace it (server.confine_runner). What a user sees
  change: /tmp and /dev/shm (size-limited tmpfs) persist between the commands of one sandbox, like a container's;
  a new sandbox (the judge's, another run's) starts with empty ones.
- local as root (local.LocalSandbox): the root supervisor forks the runner and switches it to the unprivileged
  uid. Nothing protects it from the commands, which share its uid on the host: one that kills or stops it gains
  nothing, as the root supervisor above kills whatever is left and the deadline still holds.
"""

from __future__ import annotations

import os
import select
import socket

from mtl_graph.sandbox.base import SandboxError
from mtl_graph.sandbox.supervisor.client import Channel, CommandNotStarted, Supervisor, SupervisorGone

_LOG_BYTES = 4096


class RunnerNotStarted(SandboxError):
    """A new runner ended before it answered: it could not start here (the command never ran)."""


class SandboxRunner(Channel):
    """The runner of one sandbox, started by a supervisor on the host."""

    kill_grace_s = 2.0  # the runner answers at once unless the sandbox is beyond saving: then kill it whole

    def __init__(self, launch: dict) -> None:
        """launch: the outer supervisor's request starting the runner, which gets the socket as the first
        descriptor passed (bwrap's argv names it, then the outer supervisor's lifeline, as ``@mtl-fd:N`` after its
        files)."""
        super().__init__()
        self._launch = launch
        self.outer = Supervisor()
        self._log: int | None = None
        self._fresh = False
        self.last_log = ""
        """What bwrap and the runner printed before the last sandbox was closed (why it failed to start)."""

    @property
    def pid(self) -> int | None:
        """The outer supervisor's pid: killing it kills the whole sandbox."""
        return self.outer.pid

    def ensure_started(self) -> None:
        if self._sock is not None and self._answering():
            return
        self.close()
        host, child = socket.socketpair()
        try:
            self._log = self.outer.start(self._launch, passed=(child.fileno(),))
        except BaseException:
            host.close()
            raise
        finally:
            child.close()
        os.set_blocking(self._log, False)
        self._sock, self._buffer, self._fresh = host, b"", True

    def _answering(self) -> bool:
        """False once the runner's end of the socket is closed: it died between two commands."""
        ready, _, _ = select.select([self.sock], [], [], 0)
        if not ready:
            return True
        try:
            return self.sock.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def receive(self, timeout: float | None = 0.0) -> dict | None:
        try:
            message = super().receive(timeout)
        except SupervisorGone as exc:
            if not self._fresh:  # it answered before: the caller reports the command as killed
                raise
            raise RunnerNotStarted(f"the sandbox runner did not start: {self.last_log.strip() or exc}") from exc
        self._fresh = self._fresh and message is None and self.command_pid == 0
        return message

    def close(self) -> None:
        """The runner sees its socket close and kills every command; the outer supervisor then kills the rest."""
        super().close()
        if self._log is None:
            return
        try:
            self.last_log = os.read(self._log, _LOG_BYTES).decode(errors="replace")
        except OSError:  # nothing was printed
            self.last_log = ""
        os.close(self._log)
        self._log = None
        try:
            self.outer.receive(0.0)  # the runner's pid, then its exit or why it could not start
        except CommandNotStarted as exc:
            self.last_log += str(exc)
        except SupervisorGone:
            pass
        self.outer.close()
