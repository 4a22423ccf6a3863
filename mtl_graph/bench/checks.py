"""Where the harness's own runners execute setup and check commands.

``open_sandbox`` is the single switch point: it uses the project's sandbox backends when they are
installed and falls back to a minimal local subprocess runner otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from mtl_graph.experience.trajectory import Step, Verdict, VerdictStatus
from mtl_graph.sandbox.base import CommandResult, Sandbox
from mtl_graph.tasks import Task

_OUTPUT_CAP = 20_000
_REASON_TAIL = 2_000


class LocalSubprocessSandbox:
    """Commands run with ``sh -c`` in the workspace, in their own process group (killed on timeout)."""

    def __init__(self, workspace: Path):
        self.workspace = Path(workspace)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        start = time.monotonic()
        proc = subprocess.Popen(["sh", "-c", command], cwd=self.workspace, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Kill the whole group: a check may have spawned children that would outlive it.
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            timed_out = True
        text = out.decode("utf-8", errors="replace")
        truncated = len(text) > _OUTPUT_CAP
        if truncated:
            half = _OUTPUT_CAP // 2
            text = f"{text[:half]}\n... [cut {len(text) - _OUTPUT_CAP} chars] ...\n{text[-half:]}"
        return CommandResult(exit_code=124 if timed_out else proc.returncode, output=text, timed_out=timed_out,
                             duration_s=time.monotonic() - start, truncated=truncated)

    def read_file(self, path: str) -> str:
        return (self.workspace / path).read_text(encoding="utf-8")

    def write_file(self, path: str, content: str) -> None:
        target = self.workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")

    def close(self) -> None:
        pass


def open_sandbox(workspace: Path, kind: str = "local") -> Sandbox:
    """A sandbox over workspace: the project's backend of that kind when available, else a local subprocess."""
    try:
        from mtl_graph.sandbox import make_sandbox  # type: ignore[attr-defined]
    except ImportError:
        return LocalSubprocessSandbox(workspace)
    return make_sandbox(kind, workspace, None)


def _step(command: str, result: CommandResult) -> Step:
    return Step(action=command, observation=result.output, exit_code=result.exit_code, duration_s=result.duration_s)


def run_setup(task: Task, sandbox: Sandbox) -> Step | None:
    """Run the task's setup command; raises RuntimeError when it fails."""
    if not task.setup:
        return None
    result = sandbox.run(task.setup, timeout=task.check_timeout)
    if result.exit_code != 0:
        raise RuntimeError(f"setup failed (exit {result.exit_code}): {result.output[-_REASON_TAIL:]}")
    return _step(task.setup, result)


def run_check(task: Task, sandbox: Sandbox) -> tuple[Verdict, Step]:
    """Run the task's check: exit code 0 is a pass; the reason keeps the output's tail."""
    if not task.check:
        return Verdict(status=VerdictStatus.UNCERTAIN, reason="task has no check command", source="tests"), Step(
            action="(no check)")
    result = sandbox.run(task.check, timeout=task.check_timeout)
    status = VerdictStatus.PASS if result.exit_code == 0 else VerdictStatus.FAIL
    why = "timed out" if result.timed_out else f"exit {result.exit_code}"
    verdict = Verdict(status=status, reason=f"{why}: {result.output[-_REASON_TAIL:]}".strip(), source="tests")
    return verdict, _step("(check) " + task.check.splitlines()[0], result)
