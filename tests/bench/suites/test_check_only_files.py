"""The check-only file channel: hidden tests too large for a command line (a LiveCodeBench problem with >100 KB of
private tests, in the release's compressed form) are graded from a file only the check's clean room holds, never
the agent's workspace, its snapshot, or anything the agent's sandbox can read; the check deletes it before the
graded solution runs."""

from __future__ import annotations

import base64
import json
import pickle
import random
import zlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import REFERENCE_KEY, load_suite
from mtl_graph.bench.suites.hidden import CHECK_ONLY_DIR, PAYLOAD_FILE
from mtl_graph.core.task import Task
from mtl_graph.judging.clean_room import RoomError, build_room, discard_snapshot, pristine_path, take_snapshot
from mtl_graph.sandbox import make_sandbox
from mtl_graph.sandbox.bwrap import BwrapSandbox

SANDBOX = "bwrap" if BwrapSandbox.is_available() else "local"
needs_bwrap = pytest.mark.skipif(not BwrapSandbox.is_available(), reason="bubblewrap is not usable here")
RIGHT = "print(sum(map(int, input().split())))\n"
WRONG = "print(sum(list(map(int, input().split()))[:100]))\n"  # right on the public test (3 numbers) only
# A cheat: it answers right only where it finds the hidden tests' file (it must not).
PEEK = ("import os\nnums = list(map(int, input().split()))\n"
        f"print(sum(nums) if os.path.exists({CHECK_ONLY_DIR!r}) or len(nums) < 10 else 0)\n")


def _cases(seed: int = 7, n: int = 40, width: int = 1100) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        nums = [rng.randrange(10**6) for _ in range(width)]
        cases.append({"input": " ".join(map(str, nums)) + "\n", "output": f"{sum(nums)}\n", "testtype": "stdin"})
    return cases


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """One problem of our own in LiveCodeBench's release shape, its private tests compressed as the release does."""
    private = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(_cases())))).decode()
    item = {"question_title": "Line Sum", "question_content": "Print the sum of the integers on the one input line.",
            "platform": "atcoder", "question_id": "mtlbig", "contest_date": "2025-04-01T00:00:00",
            "starter_code": "", "difficulty": "easy", "metadata": "{}",
            "public_test_cases": json.dumps([{"input": "1 2 3\n", "output": "6\n", "testtype": "stdin"}]),
            "private_test_cases": private}
    path = tmp_path_factory.mktemp("lcb") / "test6.jsonl"
    path.write_text(json.dumps(item) + "\n")
    return path


@pytest.fixture
def task(release) -> Task:
    suite = load_suite(f"livecodebench:{release}")
    assert not suite.skipped, suite.skipped
    return suite.tasks[0]


def _solved(task: Task, source: str) -> Task:
    return task.model_copy(update={"metadata": {**task.metadata, REFERENCE_KEY: {"solution.py": source}}})


def _passed(task: Task, source: str | None) -> bool:
    runner = OracleRunner(sandbox=SANDBOX) if source else NoopRunner(sandbox=SANDBOX)
    outcome = runner.run(_solved(task, source) if source else task, Condition(), 0, None)
    assert outcome.error is None, outcome.error
    return outcome.passed


def test_large_hidden_tests_go_to_a_check_only_file_not_the_command_line(task):
    assert list(task.check_files) == [PAYLOAD_FILE] and len(task.check_files[PAYLOAD_FILE]) > 100_000
    assert len(task.check) < 100_000 and PAYLOAD_FILE in task.check
    hidden = _cases()[0]["input"].split()[:8]
    assert " ".join(hidden) not in task.check + task.instruction + "".join(task.files.values())


def test_right_passes_wrong_and_untouched_fail(task):
    assert _passed(task, RIGHT)
    assert not _passed(task, WRONG)
    assert not _passed(task, None)


def test_the_graded_solution_never_finds_the_file(task):
    assert not _passed(task, PEEK)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_neither_workspace_nor_snapshot_holds_it_and_the_room_does(task, tmp_path):
    workspace = task.materialize(tmp_path / "ws")
    snapshot = take_snapshot(workspace)
    (workspace / "solution.py").write_text(RIGHT)
    blob = task.check_files[PAYLOAD_FILE].encode()
    try:
        for where in (workspace, snapshot):
            assert not any(blob[:64] in content for content in _files(where).values())
            assert not (where / CHECK_ONLY_DIR).exists()
        room = build_room(task, workspace, snapshot)
        try:
            assert (room.path / PAYLOAD_FILE).read_bytes() == blob and room.carried == ["solution.py"]
            assert not room.path.is_relative_to(workspace) and not room.path.is_relative_to(snapshot)
        finally:
            room.close()
        assert not (workspace / CHECK_ONLY_DIR).exists() and not (pristine_path(workspace) / CHECK_ONLY_DIR).exists()
    finally:
        discard_snapshot(workspace)


@needs_bwrap
def test_the_agent_sandbox_cannot_reach_the_room_while_it_exists(task, tmp_path):
    workspace = task.materialize(tmp_path / "ws")
    room = build_room(task, workspace)
    agent = make_sandbox("bwrap", workspace)
    try:
        target = room.path / PAYLOAD_FILE
        probe = agent.run(f"test -e {target} && echo VISIBLE; find / -name payload.b85 -not -path '/proc/*' "
                          "2>/dev/null; echo done", timeout=120)
        assert "VISIBLE" not in probe.output and "payload.b85" not in probe.output and "done" in probe.output
    finally:
        agent.close()
        room.close()


def test_an_agent_file_on_a_check_only_path_is_dropped(tmp_path):
    task = Task(id="t/co", instruction="x", check="cmp data/expected.txt out.txt",
                check_files={"data/expected.txt": "42\n"})
    workspace = task.materialize(tmp_path / "ws")
    take_snapshot(workspace)
    try:
        (workspace / "data").mkdir()
        (workspace / "data" / "expected.txt").write_text("forged\n")
        (workspace / "out.txt").write_text("forged\n")
        room = build_room(task, workspace, pristine_path(workspace))
        try:
            assert (room.path / "data" / "expected.txt").read_text() == "42\n"
            assert room.dropped == {"data/expected.txt": "on the path of a check-only file"}
        finally:
            room.close()
        # a file where the check-only file's directory goes is dropped too
        (workspace / "data" / "expected.txt").unlink()
        (workspace / "data").rmdir()
        (workspace / "data").write_text("a file, not a directory\n")
        room = build_room(task, workspace, pristine_path(workspace))
        try:
            assert (room.path / "data" / "expected.txt").read_text() == "42\n" and "data" in room.dropped
        finally:
            room.close()
    finally:
        discard_snapshot(workspace)


def test_a_link_of_the_task_s_in_the_way_is_a_clear_error(tmp_path):
    source = tmp_path / "files"
    source.mkdir()
    (source / "real").mkdir()
    (source / "data").symlink_to("real")
    task = Task(id="t/link", instruction="x", check="true", source_dir=source, check_files={"data/x.txt": "1"})
    with pytest.raises(RoomError, match="check-only file data/x.txt cannot be written into the clean room"):
        build_room(task, task.materialize(tmp_path / "ws"))


@pytest.mark.parametrize("fields, message", [
    ({"check_files": {"../up.txt": "x"}}, "must stay inside the workspace"),
    ({"check_files": {"/abs.txt": "x"}}, "must stay inside the workspace"),
    ({"check_files": {"a.txt": "x"}, "files": {"a.txt": "y"}}, "must not be workspace files too: a.txt"),
    ({"check_files": {"s.py": "x"}, "solution_files": ["s.py"]}, "must not be workspace files too: s.py"),
])
def test_bad_check_only_paths_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        Task(id="t/bad", instruction="x", **fields)
