"""Ground truth: a task's setup and check commands, run in the task's sandbox (the test-based judge).

The check judges the solution, never the agent's edits to the tests: before it runs, the task's test files
(and a check script inside the workspace) are put back from their pristine copies in the task's source, and
whatever the agent did to them is recorded in the verdict's ``tests_modified``. A check that ran no test fails.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path, PurePosixPath

from mtl_graph.experience.no_tests import no_test_reason
from mtl_graph.experience.planted import remove_entry, remove_planted
from mtl_graph.experience.trajectory import Trajectory, Verdict, VerdictStatus
from mtl_graph.sandbox.base import CommandResult, Sandbox
from mtl_graph.sandbox.factory import make_sandbox
from mtl_graph.tasks import Task, TaskError, check_relative

REASON_TAIL = 2_000
"""Characters of command output kept in a verdict's reason or a setup error."""

_TEXT_FILE_MODE = 0o644
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# O_NONBLOCK: a FIFO the agent planted in place of a test file must not block the judge on open.
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


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


def pristine_tests(task: Task) -> dict[str, tuple[bytes, int]]:
    """Each test file's pristine content and mode, from the task's source (never from a workspace)."""
    out: dict[str, tuple[bytes, int]] = {}
    for rel in task.test_files:
        check_relative(rel)
        if rel in task.files:  # materialize writes task.files last, so they win over source_dir
            out[rel] = (task.files[rel].encode("utf-8"), _TEXT_FILE_MODE)
            continue
        source = task.source_dir / rel if task.source_dir is not None else None
        if source is None or not source.is_file():
            raise TaskError(f"task {task.id}: test file {rel!r} has no pristine copy in the task's source")
        out[rel] = (source.read_bytes(), stat.S_IMODE(source.stat().st_mode))
    return out


def restore_tests(task: Task, workspace: str | Path, baseline: Collection[str] | None = None) -> dict[str, str]:
    """Put the pristine test files back into workspace, remove modules planted to hijack a Python check;
    return {path: "modified" | "deleted" | "replaced" | "planted"}. baseline: `hijack_candidates` taken before the
    agent ran (None: only the task's own files are legitimate).

    Never follows a link the agent planted: every directory on the way is opened without following links
    (a link, file or anything else where a directory belongs is removed and a real directory made), and each
    file is written next to its place and renamed over it, which also breaks hard links to the agent's files."""
    changes: dict[str, str] = {}
    pristine = pristine_tests(task)
    root = os.open(Path(workspace), _OPEN_DIR)
    try:
        for rel, (content, mode) in pristine.items():
            how = _restore_one(root, PurePosixPath(rel).parts, content, mode)
            if how is not None:
                changes[rel] = how
        changes.update(remove_planted(task, root, baseline))
    finally:
        os.close(root)
    return changes


def _restore_one(root: int, parts: tuple[str, ...], content: bytes, mode: int) -> str | None:
    dir_fd, how = os.dup(root), None
    try:
        for name in parts[:-1]:
            if _kind(name, dir_fd) != "dir":
                how = how or ("deleted" if _kind(name, dir_fd) is None else "replaced")
                remove_entry(name, dir_fd)
                os.mkdir(name, 0o755, dir_fd=dir_fd)
            child = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = child
        name = parts[-1]
        kind = _kind(name, dir_fd)
        if how is None and kind is None:
            how = "deleted"
        elif how is None and kind == "file":
            how = None if _same(name, dir_fd, content) else "modified"
        elif how is None:
            how = "replaced"
        if kind == "dir":
            remove_entry(name, dir_fd)
        _write_replacing(name, dir_fd, content, mode)
        return how
    finally:
        os.close(dir_fd)


def _kind(name: str, dir_fd: int) -> str | None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"


def _same(name: str, dir_fd: int, content: bytes) -> bool:
    if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size != len(content):
        return False
    fd = os.open(name, _OPEN_READ, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(len(content) + 1) == content


def _write_replacing(name: str, dir_fd: int, content: bytes, mode: int) -> None:
    tmp = f".{name}.mtl-pristine"
    remove_entry(tmp, dir_fd)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)
        os.fchmod(fh.fileno(), mode)  # the mode of the pristine copy, whatever the umask
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def run_check(task: Task, sandbox: Sandbox, baseline: Collection[str] | None = None) -> Verdict:
    """Restore the test files, run the task's check: exit code 0 with tests run is a pass.

    The reason keeps the output's tail, and names the test files the agent had changed."""
    if not task.check:
        return Verdict(status=VerdictStatus.UNCERTAIN, reason="task has no check command", source="tests")
    changes = restore_tests(task, sandbox.workspace, baseline)
    tampered = sorted(changes)
    note = ("tests modified by the agent (pristine copies restored before the check): "
            + ", ".join(f"{p} ({changes[p]})" for p in tampered) + "\n") if tampered else ""
    result = sandbox.run(task.check, timeout=task.check_timeout)
    tail = result.output[-REASON_TAIL:]
    if result.timed_out:
        return Verdict(status=VerdictStatus.FAIL, source="tests", tests_modified=tampered,
                       reason=f"{note}check timed out after {task.check_timeout:.0f}s\n{tail}")
    empty = no_test_reason(task.check, result.exit_code, result.output)
    if empty is not None:
        return Verdict(status=VerdictStatus.FAIL, source="tests", tests_modified=tampered,
                       reason=f"{note}the check ran no test ({empty}); exit code {result.exit_code}\n{tail}")
    status = VerdictStatus.PASS if result.exit_code == 0 else VerdictStatus.FAIL
    return Verdict(status=status, source="tests", tests_modified=tampered,
                   reason=f"{note}check exit code {result.exit_code}\n{tail}")


class CheckJudge:
    """The `Judge` protocol over a task's check command: prefer it to an LLM judge whenever a task has one."""

    def __init__(self, task: Task, sandbox: Sandbox, baseline: Collection[str] | None = None) -> None:
        self.task, self.sandbox, self.baseline = task, sandbox, baseline

    def judge(self, trajectory: Trajectory) -> Verdict:
        return run_check(self.task, self.sandbox, self.baseline)
