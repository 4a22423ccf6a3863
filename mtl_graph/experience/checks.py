"""Ground truth: a task's setup and check commands, run in the task's sandbox (the test-based judge)."""

from __future__ import annotations

from mtl_graph.experience.trajectory import Trajectory, Verdict, VerdictStatus
from mtl_graph.sandbox.base import CommandResult, Sandbox
from mtl_graph.sandbox.factory import make_sandbox
from mtl_graph.tasks import Task

REASON_TAIL = 2_000
"""Characters of command output kept in a verdict's reason or a setup error."""


class SetupFailed(RuntimeError):
    """The task's setup command failed, so the task cannot be attempted."""


def run_setup(task: Task, sandbox: Sandbox) -> CommandResult | None:
    """Run the task's setup command (None when it has none); a failure raises SetupFailed."""
    if not task.setup:
        return None
    runner = _networked(sandbox) if task.setup_network else sandbox
    try:
        result = runner.run(task.setup, timeout=task.check_timeout)
    finally:
        if runner is not sandbox:
            runner.close()
    if result.exit_code != 0:
        raise SetupFailed(f"task setup failed (exit {result.exit_code}): {result.output[-REASON_TAIL:]}")
    return result


def _networked(sandbox: Sandbox) -> Sandbox:
    """A twin of sandbox over the same workspace that may reach the network (for a setup step only)."""
    kind, config = getattr(sandbox, "kind", None), getattr(sandbox, "config", None)
    if kind is None:
        raise SetupFailed(f"task setup needs the network, and {type(sandbox).__name__} cannot grant it")
    return make_sandbox(kind, sandbox.workspace, config, network=True)


def run_check(task: Task, sandbox: Sandbox) -> Verdict:
    """Run the task's check: exit code 0 is a pass; the reason keeps the output's tail."""
    if not task.check:
        return Verdict(status=VerdictStatus.UNCERTAIN, reason="task has no check command", source="tests")
    result = sandbox.run(task.check, timeout=task.check_timeout)
    tail = result.output[-REASON_TAIL:]
    if result.timed_out:
        return Verdict(status=VerdictStatus.FAIL, source="tests",
                       reason=f"check timed out after {task.check_timeout:.0f}s\n{tail}")
    status = VerdictStatus.PASS if result.exit_code == 0 else VerdictStatus.FAIL
    return Verdict(status=status, source="tests", reason=f"check exit code {result.exit_code}\n{tail}")


class CheckJudge:
    """The `Judge` protocol over a task's check command: prefer it to an LLM judge whenever a task has one."""

    def __init__(self, task: Task, sandbox: Sandbox) -> None:
        self.task, self.sandbox = task, sandbox

    def judge(self, trajectory: Trajectory) -> Verdict:
        return run_check(self.task, self.sandbox)
