"""Run one command under a deadline, keeping only the head and tail of its output.

Shared by every backend: the backends differ only in the argv they build around the command.
"""

from __future__ import annotations

import codecs
import os
import resource
import selectors
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence

from mtl_graph.sandbox.base import CommandResult
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.supervisor.client import Channel, CommandNotStarted, SupervisorGone

TIMEOUT_EXIT_CODE = 124
CUT_MARKER = "\n... [{n} characters cut] ...\n"
SHELL = shutil.which("bash") or "/bin/sh"

_CHUNK = 64 * 1024
_POLL_S = 0.05
# The supervisor kills everything a command leaves, so its output ends with it; a holder of the pipe outside the
# process tree (handed over a Unix socket, say) would otherwise block until the deadline.
_LINGER_S = 0.5


class CappedOutput:
    """Accumulates text keeping at most ``cap`` characters: the first half and a rolling last half."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.tail_cap :] if self.tail_cap else ""

    def render(self) -> tuple[str, bool]:
        """The kept text with the cut marked, and whether anything was cut."""
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return self.head + self.tail, False
        return self.head + CUT_MARKER.format(n=cut) + self.tail, True


def cap_text(text: str, cap: int) -> tuple[str, bool]:
    """Cap an already-captured string the same way command output is capped."""
    buf = CappedOutput(cap)
    buf.add(text)
    return buf.render()


def scrubbed_env(config: SandboxConfig, home: str) -> dict[str, str]:
    """The allow-listed host variables, HOME pointing at the workspace, then the configured extras."""
    env = {k: os.environ[k] for k in config.env_allow if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = home
    env.update(config.extra_env)
    return env


def rlimits(config: SandboxConfig) -> list[tuple[int, int]]:
    """The configured resource limits as (resource, value) pairs (set by prlimit, else by the supervisor)."""
    mib = 1024 * 1024
    wanted = [
        (resource.RLIMIT_AS, config.memory_mb and config.memory_mb * mib),
        (resource.RLIMIT_CPU, config.cpu_seconds),
        (resource.RLIMIT_NPROC, config.max_processes),
        (resource.RLIMIT_FSIZE, config.max_file_size_mb and config.max_file_size_mb * mib),
    ]
    return [(res, value) for res, value in wanted if value]


_PRLIMIT = shutil.which("prlimit")
_PRLIMIT_OPTIONS = {resource.RLIMIT_AS: "--as", resource.RLIMIT_CPU: "--cpu", resource.RLIMIT_NPROC: "--nproc",
                    resource.RLIMIT_FSIZE: "--fsize"}  # fmt: skip


def limit_wrapper(limits: Sequence[tuple[int, int]]) -> list[str] | None:
    """An argv prefix setting the limits with util-linux ``prlimit`` before exec, or None when the supervisor sets
    them itself: as root it wears them and the command inherits them (server.can_wear, no extra exec), and
    without prlimit it falls back to a preexec function.

    One exec costs less than a preexec function, which makes the supervisor run Python in every forked child.
    """
    if not limits or _PRLIMIT is None or os.geteuid() == 0:
        return None
    argv = [_PRLIMIT]
    for res, value in limits:
        _, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:  # never ask for more than the inherited hard limit
            value = min(value, hard)
        argv.append(f"{_PRLIMIT_OPTIONS[res]}={value}")
    return [*argv, "--"]


def run_process(
    supervisor: Channel,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    cap: int,
    uid: int | None = None,
    gid: int | None = None,
    limits: Sequence[tuple[int, int]] = (),
    files: Sequence[str] = (),
    watchdog: Callable[[], str | None] | None = None,
) -> CommandResult:
    """Run argv through the supervisor under a deadline; everything it spawned is dead when this returns.

    watchdog is polled while the command runs; a string it returns kills the command and is appended to the output.
    files are opened by the supervisor and passed to the command, their numbers replacing ``@mtl-fd:N`` in argv.
    """
    start = time.monotonic()
    request = {"argv": list(argv), "cwd": cwd, "env": dict(env), "uid": uid, "gid": gid, "limits": list(limits),
               "files": list(files)}  # fmt: skip
    with supervisor.lock:
        fd = supervisor.start(request)
        try:
            status, timed_out, note, out = _follow(supervisor, fd, start + timeout, watchdog, cap)
        except CommandNotStarted:
            raise
        except BaseException:
            supervisor.close()  # interrupted while the command runs: closing the supervisor kills it all
            raise
        finally:
            os.close(fd)
    if note:
        out.add(f"\n[{note}]\n")
    text, truncated = out.render()
    if timed_out:
        code = TIMEOUT_EXIT_CODE
    elif status < 0:  # killed by a signal: report it the way a shell would
        code = 128 - status
    else:
        code = status
    return CommandResult(
        exit_code=code,
        output=text,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - start, 3),
        truncated=truncated,
    )


def _follow(
    supervisor: Channel, fd: int, deadline: float, watchdog: Callable[[], str | None] | None, cap: int
) -> tuple[int, bool, str | None, CappedOutput]:
    """Read output and the supervisor's messages until the exit is known and the output drained."""
    out = CappedOutput(cap)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    status: int | None = None
    timed_out, note, eof = False, None, False
    killing_since: float | None = None
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        sock = supervisor.sock
        sel.register(sock, selectors.EVENT_READ)
        while status is None or not eof:
            now = time.monotonic()
            if status is None and killing_since is None:
                if now >= deadline:
                    timed_out, killing_since = True, now
                    supervisor.kill()
                elif watchdog is not None and (note := watchdog()):
                    killing_since = now
                    supervisor.kill()
            if status is not None:
                exited_at = exited_at or now
                if now - exited_at >= _LINGER_S:  # a process outside the tree still holds the pipe
                    break
            if killing_since is not None and status is None and now - killing_since > supervisor.kill_grace_s:
                supervisor.close()  # unresponsive: closing it kills the whole tree
                status = -signal.SIGKILL
                break
            wait = _POLL_S if killing_since is not None else max(0.0, min(_POLL_S, deadline - now))
            if status is None and supervisor.pending():
                wait = 0.0
            ready = {key.fd for key, _ in sel.select(wait)}
            if fd in ready:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    eof = True
                    sel.unregister(fd)
                else:
                    out.add(decoder.decode(chunk))
            if status is None and (sock.fileno() in ready or supervisor.pending()):
                try:
                    message = supervisor.receive(0.0)
                except SupervisorGone:
                    supervisor.kill_orphaned_command()
                    message = {"exit": -signal.SIGKILL}
                    note = "the sandbox supervisor was killed"
                if message is not None and "exit" in message:
                    status = int(message["exit"])
                    sel.unregister(sock)
    out.add(decoder.decode(b"", final=True))
    assert status is not None
    return status, timed_out, note, out
