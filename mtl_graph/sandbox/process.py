"""Run one process under a deadline, keeping only the head and tail of its output.

Shared by every backend: the backends differ only in the argv they build around the command.
"""

from __future__ import annotations

import codecs
import os
import resource
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from mtl_graph.sandbox.base import CommandResult, SandboxError
from mtl_graph.sandbox.config import SandboxConfig

TIMEOUT_EXIT_CODE = 124
CUT_MARKER = "\n... [{n} characters cut] ...\n"
SHELL = shutil.which("bash") or "/bin/sh"

_CHUNK = 64 * 1024
_POLL_S = 0.05
# A command that exits but leaves a background child holding the pipe would otherwise block until the
# deadline; after this grace the output so far is returned and the pipe closed.
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


def rlimit_preexec(config: SandboxConfig) -> Callable[[], None] | None:
    """A preexec function applying the configured resource limits in the child, or None when unlimited."""
    mib = 1024 * 1024
    wanted = [
        (resource.RLIMIT_AS, config.memory_mb and config.memory_mb * mib),
        (resource.RLIMIT_CPU, config.cpu_seconds),
        (resource.RLIMIT_NPROC, config.max_processes),
        (resource.RLIMIT_FSIZE, config.max_file_size_mb and config.max_file_size_mb * mib),
    ]
    limits = [(res, value) for res, value in wanted if value]
    if not limits:
        return None

    def apply() -> None:
        for res, value in limits:
            _, hard = resource.getrlimit(res)
            # An unprivileged process may not raise its hard limit: never ask for more than it has.
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, value))

    return apply


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group, ignoring one that is already gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    cap: int,
    preexec_fn: Callable[[], None] | None = None,
) -> tuple[CommandResult, int]:
    """Run argv in its own process group; return the result and the group id (for later cleanup)."""
    start = time.monotonic()
    deadline = start + timeout
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout can kill the command and everything it spawned
            preexec_fn=preexec_fn,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"could not start {argv[0]!r}: {exc}") from exc
    assert proc.stdout is not None
    out = CappedOutput(cap)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    timed_out = False
    try:
        timed_out = _pump(proc, out, decoder, deadline)
        out.add(decoder.decode(b"", final=True))
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # closed its output but kept running
                timed_out = True
    finally:
        if timed_out or proc.poll() is None:
            kill_group(proc.pid)
        proc.wait()
        proc.stdout.close()
    text, truncated = out.render()
    code = proc.returncode
    if timed_out:
        code = TIMEOUT_EXIT_CODE
    elif code < 0:  # killed by a signal: report it the way a shell would
        code = 128 - code
    result = CommandResult(
        exit_code=code,
        output=text,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - start, 3),
        truncated=truncated,
    )
    return result, proc.pid


def _pump(proc: subprocess.Popen, out: CappedOutput, decoder: codecs.IncrementalDecoder, deadline: float) -> bool:
    """Read output until EOF, a lingering exit, or the deadline; True when the deadline was hit."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True
            if sel.select(min(deadline - now, _POLL_S)):
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    return False
                out.add(decoder.decode(chunk))
            elif proc.poll() is not None:
                exited_at = exited_at if exited_at is not None else now
                if now - exited_at >= _LINGER_S:
                    return False
