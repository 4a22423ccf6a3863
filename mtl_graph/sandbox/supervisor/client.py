"""The host side of the per-sandbox supervisor (see server.py): start it, ask it to run or kill, close it.

``Channel`` speaks the protocol; ``Supervisor`` starts server.py on the host, persistent.py's ``SandboxRunner`` has
one start a long-lived runner (inside bwrap, or of the commands' uid for the local backend as root).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from mtl_graph.sandbox.base import SandboxError

REAPER = Path(__file__).with_name("server.py")
SUPERVISOR_COMMANDS = 10_000
"""Commands one supervisor process runs before it is replaced: as root it wears the commands' CPU limit itself
(server.can_wear, at least 60 s), and ~0.5 ms of its own CPU per command must stay far below that."""


class SupervisorGone(SandboxError):
    """The supervisor process ended (killed from outside): the command's fate is unknown."""


class CommandNotStarted(SandboxError):
    """The supervisor could not start the command (its answer says why); it is ready for the next one."""


class Channel:
    """The protocol with one supervisor process, started lazily and restarted if it dies; one command at a time."""

    kill_grace_s = 10.0
    """Seconds a killed command's exit may take to be reported before the whole supervisor is closed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._buffer = b""
        self.command_pid = 0
        self._limits: list | None = None
        self._commands = 0

    @property
    def sock(self) -> socket.socket:
        assert self._sock is not None
        return self._sock

    def ensure_started(self) -> None:
        raise NotImplementedError

    def start(self, request: dict, passed: tuple[int, ...] = ()) -> int:
        """Send a command to start (passed: descriptors it inherits); the read end of its output pipe (the caller
        closes it). Not waiting for the answer saves a round trip; receive() reads it, within the caller's deadline."""
        limits = [list(pair) for pair in request.get("limits", [])]
        if limits != self._limits or self._commands >= SUPERVISOR_COMMANDS:  # it may wear the previous limits
            self.close()
            self._limits, self._commands = limits, 0
        self._commands += 1
        self.ensure_started()
        self.command_pid = 0
        read_fd, write_fd = os.pipe()
        data = json.dumps({"op": "run", **request}).encode() + b"\n"
        try:
            sent = socket.send_fds(self.sock, [data], [write_fd, *passed])
            self.sock.sendall(data[sent:])
        except OSError as exc:
            os.close(read_fd)
            raise SupervisorGone(f"sandbox supervisor unreachable: {exc}") from exc
        finally:
            os.close(write_fd)
        return read_fd

    def kill(self) -> None:
        """Ask for the running command and everything below it to be killed (its exit follows)."""
        try:
            self.sock.sendall(b'{"op": "kill"}\n')
        except OSError:
            pass

    def pending(self) -> bool:
        """True when a whole message is already buffered (select() would not report it)."""
        return b"\n" in self._buffer

    def receive(self, timeout: float | None = 0.0) -> dict | None:
        """The next message but the started command's pid (kept as command_pid), None when none arrived within
        timeout; SupervisorGone at EOF, CommandNotStarted when the command could not start."""
        while True:
            message = self._next(timeout)
            if message is None or "pid" not in message:
                break
            self.command_pid, timeout = int(message["pid"]), 0.0
        if message is not None and "error" in message:
            raise CommandNotStarted(message["error"])
        return message

    def _next(self, timeout: float | None) -> dict | None:
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return None
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:  # it died with our request unread
                chunk = b""
            if not chunk:
                self.close()  # reaps it, so the next command starts a new one
                raise SupervisorGone("sandbox supervisor ended unexpectedly")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def kill_orphaned_command(self) -> None:
        """After the supervisor was killed: what is left to do about the command it ran."""

    def close(self) -> None:
        """Closing the socket makes the supervisor kill everything left and exit."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Supervisor(Channel):
    """server.py on the host."""

    def __init__(self) -> None:
        super().__init__()
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self.close()
        host, child = socket.socketpair()
        try:
            # -I -S: no site, no user paths, only the standard library; a minimal environment, so a command
            # reading its parent's /proc/PID/environ finds no secrets of the host.
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(REAPER), str(child.fileno())],
                pass_fds=[child.fileno()], env={"PATH": os.defpath}, stdin=subprocess.DEVNULL,
                start_new_session=True,  # the terminal's Ctrl-C reaches the host, which then closes us
            )  # fmt: skip
        except OSError as exc:
            host.close()
            raise SandboxError(f"could not start the sandbox supervisor: {exc}") from exc
        finally:
            child.close()
        self._sock, self._buffer = host, b""

    def kill_orphaned_command(self) -> None:
        """The best left to do: kill the command's process group."""
        if self.command_pid:
            try:
                os.killpg(self.command_pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        super().close()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
