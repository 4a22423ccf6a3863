"""Setup and check commands of the harness's own runners, run in the project's sandboxes."""

from __future__ import annotations

from pathlib import Path

from mtl_graph.experience.trajectory import Step, Verdict, VerdictStatus
from mtl_graph.sandbox import CommandResult, Sandbox, SandboxConfig, make_sandbox
from mtl_graph.tasks import Task

_REASON_TAIL = 2_000


def open_sandbox(workspace: Path, kind: str = "local", config: SandboxConfig | None = None) -> Sandbox:
    """A sandbox of the given backend over workspace (checks pass their own timeout per command)."""
    return make_sandbox(kind, workspace, config)


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
