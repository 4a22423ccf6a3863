"""Ground truth: a task's setup and check commands, run in the task's sandbox (the test-based judge).

The check judges the solution, never the agent's workspace: it runs in a clean room (clean_room.py) holding the
pristine task and only the solution, in an environment of its own (check_env.py); the solution is scanned for
code that reaches the test runner (tamper_scan.py) and the runner's own report is held against the tests the
pristine files define (accounting.py). What the agent did to the tests is recorded in ``tests_modified``, what
was not carried in ``dropped``; a suspect run is a fail whose reason starts with ``suspect:``. A check that ran
no test fails.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from mtl_graph.judging.accounting import MAX_REPORT_BYTES, hooked, suspicions
from mtl_graph.judging.check_env import graded_command
from mtl_graph.judging.clean_room import Room, build_room, pristine_path
from mtl_graph.judging.no_tests import no_test_reason
from mtl_graph.judging.tamper_scan import RUN_TIME_MARK, scan_file, test_words
from mtl_graph.core.trajectory import Trajectory, Verdict, VerdictStatus
from mtl_graph.sandbox.base import CommandResult, Sandbox
from mtl_graph.sandbox.factory import make_sandbox
from mtl_graph.core.task import Task, TaskError, check_relative
from mtl_graph.core.errors import MTLError

REASON_TAIL = 2_000
"""Characters of command output kept in a verdict's reason or a setup error."""

_TEXT_FILE_MODE = 0o644
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# O_NONBLOCK: a FIFO the agent planted in place of a test file must not block the judge on open.
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


class SetupFailed(MTLError, RuntimeError):
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


def tampered_tests(task: Task, workspace: str | Path) -> dict[str, str]:
    """What the agent did to the task's test files: {path: "modified" | "deleted" | "replaced"} (read-only: the
    check never reads them from the workspace). Never follows a link: a link where a file or directory belongs
    is a replacement."""
    changes: dict[str, str] = {}
    root = os.open(Path(workspace), _OPEN_DIR)
    try:
        for rel, (content, _mode) in pristine_tests(task).items():
            how = _classify(root, PurePosixPath(rel).parts, content)
            if how is not None:
                changes[rel] = how
    finally:
        os.close(root)
    return changes


def _classify(root: int, parts: tuple[str, ...], content: bytes) -> str | None:
    dir_fd = os.dup(root)
    try:
        for name in parts[:-1]:
            kind = _kind(name, dir_fd)
            if kind != "dir":
                return "deleted" if kind is None else "replaced"
            child = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = child
        kind = _kind(parts[-1], dir_fd)
        if kind is None:
            return "deleted"
        if kind != "file":
            return "replaced"
        return None if _same(parts[-1], dir_fd, content) else "modified"
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


SandboxFor = Callable[[Path], Sandbox]
"""Makes the sandbox a check runs in, over the clean room's directory."""


def _setup_in(task: Task, sandbox_for: SandboxFor) -> Callable[[Path], None]:
    """Run the task's setup in a room built without a snapshot (a run prepared before snapshots existed)."""

    def prepare(room: Path) -> None:
        sandbox = sandbox_for(room)
        try:
            run_setup(task, sandbox)
        finally:
            sandbox.close()

    return prepare


def _read_report(path: Path) -> bytes | None:
    try:
        fd = os.open(path, _OPEN_READ)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(MAX_REPORT_BYTES) if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) else None


def _scan(room: Room, tests: dict[str, str]) -> list[str]:
    found: list[str] = []
    words = test_words(tests)
    for rel in room.carried:
        path = room.path / rel
        found += scan_file(rel, path.read_bytes().decode("utf-8", "replace"), words)
    return found


def run_check(task: Task, workspace: str | Path, sandbox_for: SandboxFor, snapshot: Path | None = None) -> Verdict:
    """Run the task's check in a clean room holding the pristine task and the solution (clean_room.py): exit code
    0 with tests run, nothing suspect in the solution and the runner's accounting complete is a pass.

    snapshot: the workspace as it was after setup (default: the one `take_snapshot` made, if any)."""
    if not task.check:
        return Verdict(status=VerdictStatus.UNCERTAIN, reason="task has no check command", source="tests")
    changes = tampered_tests(task, workspace)
    if snapshot is None and pristine_path(workspace).is_dir():
        snapshot = pristine_path(workspace)
    room = build_room(task, workspace, snapshot, prepare=None if snapshot else _setup_in(task, sandbox_for))
    tests = {rel: content.decode("utf-8", "replace") for rel, (content, _) in pristine_tests(task).items()}
    try:
        suspect = _scan(room, tests)  # before the check: the solution runs in it and could rewrite itself
        report = room.path / f".mtl-report-{secrets.token_hex(8)}" / "report.jsonl"
        report.parent.mkdir()
        sandbox = sandbox_for(room.path)
        try:
            result = sandbox.run(graded_command(task.check, report, kind=getattr(sandbox, "kind", "auto")),
                                 timeout=task.check_timeout)
        finally:
            sandbox.close()
        report_bytes = _read_report(report)
        if hooked(report_bytes):  # the hook scanned whatever eval / exec compiled: the static finding is moot
            suspect = [f for f in suspect if not f.endswith(RUN_TIME_MARK)]
        suspect += suspicions(tests, report_bytes, result.exit_code)
    finally:
        room.close()
    return _verdict(task, result, sorted(changes), changes, room.dropped_list(), suspect)


def _verdict(task: Task, result: CommandResult, tampered: list[str], changes: dict[str, str], dropped: list[str],
             suspect: list[str]) -> Verdict:
    note = ("tests modified by the agent (the check used the pristine copies): "
            + ", ".join(f"{p} ({changes[p]})" for p in tampered) + "\n") if tampered else ""
    if dropped:
        note += f"not carried into the check ({len(dropped)}): " + ", ".join(dropped[:10]) + "\n"
    tail = result.output[-REASON_TAIL:]
    fields = {"source": "tests", "tests_modified": tampered, "dropped": dropped, "suspicions": suspect}
    if suspect:
        return Verdict(status=VerdictStatus.FAIL, **fields,
                       reason=f"suspect: {'; '.join(suspect[:5])}\n{note}check exit code {result.exit_code}\n{tail}")
    if result.timed_out:
        return Verdict(status=VerdictStatus.FAIL, **fields,
                       reason=f"{note}check timed out after {task.check_timeout:.0f}s\n{tail}")
    empty = no_test_reason(task.check or "", result.exit_code, result.output)
    if empty is not None:
        return Verdict(status=VerdictStatus.FAIL, **fields,
                       reason=f"{note}the check ran no test ({empty}); exit code {result.exit_code}\n{tail}")
    status = VerdictStatus.PASS if result.exit_code == 0 else VerdictStatus.FAIL
    return Verdict(status=status, **fields, reason=f"{note}check exit code {result.exit_code}\n{tail}")


class CheckJudge:
    """The `Judge` protocol over a task's check command: prefer it to an LLM judge whenever a task has one."""

    def __init__(self, task: Task, workspace: str | Path, sandbox_for: SandboxFor,
                 snapshot: Path | None = None) -> None:
        self.task, self.workspace, self.sandbox_for, self.snapshot = task, workspace, sandbox_for, snapshot

    def judge(self, trajectory: Trajectory) -> Verdict:
        return run_check(self.task, self.workspace, self.sandbox_for, self.snapshot)
