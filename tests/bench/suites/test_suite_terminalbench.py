"""The terminalbench suite over task directories of our own in Terminal-Bench's format."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mtl_graph.bench.suites import SuiteError, load_suite
from mtl_graph.bench.suites import terminalbench
from mtl_graph.bench.suites.terminalbench import REFERENCE_SCRIPT_KEY, relative_to_workdir
from mtl_graph.judging.clean_room import take_snapshot
from mtl_graph.core.trajectory import VerdictStatus
from mtl_graph.judging.ground_truth import run_check
from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.bwrap import BwrapSandbox
from helpers.paths import FIXTURES

TASKS = FIXTURES / "terminalbench"
NO_ENGINE = "no Docker engine reachable (docker info failed)"
needs_bwrap = pytest.mark.skipif(not BwrapSandbox.is_available(), reason="bubblewrap is not usable here")


@pytest.fixture(autouse=True)
def no_docker(monkeypatch):
    """Decisions must not depend on whether this machine happens to run a Docker engine."""
    monkeypatch.setattr(terminalbench, "docker_reason", lambda: NO_ENGINE)


def _copy(tmp_path, name="word-tally") -> Path:
    target = tmp_path / "tasks" / name
    shutil.copytree(TASKS / name, target)
    return target


def _skips(path) -> dict[str, str]:
    return {s.id.split("/", 1)[1]: s.reason for s in load_suite(f"terminalbench:{path}").skipped}


def test_tasks_load_with_their_mode_or_the_reason_they_cannot_run():
    suite = load_suite(f"terminalbench:{TASKS}")
    assert suite.total == 3 and [t.id for t in suite.tasks] == ["terminalbench/word-tally"]
    task = suite.tasks[0]
    assert task.metadata["mode"] == "bwrap" and task.metadata["difficulty"] == "easy"
    assert "./notes.txt" in task.instruction and "/app" in task.instruction  # rewritten, and the note says so
    assert _skips(TASKS) == {
        "broken-yaml": "task.yaml is not valid YAML (found unexpected end of stream at line 3)",
        "needs-service": "needs Docker (its Dockerfile builds on python:3.12-slim, not a Terminal-Bench base "
                         f"image); {NO_ENGINE}",
    }
    assert load_suite(f"terminalbench:{TASKS / 'word-tally'}").total == 1  # one task directory


def test_the_workspace_holds_the_copied_files_and_no_tests_or_solution(tmp_path):
    task = load_suite(f"terminalbench:{TASKS}").tasks[0]
    workspace = task.materialize(tmp_path / "ws")
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.txt"]
    seen = task.instruction + "".join(task.files.values())
    assert "test_tally_is_the_word_count" not in seen and "wc -w" not in seen
    assert "test_tally_is_the_word_count" not in task.check  # packed, not plain text


def _grade(task, tmp_path, solve: bool) -> bool:
    workspace = task.materialize(tmp_path / ("solved" if solve else "untouched"))
    take_snapshot(workspace)
    if solve:
        sandbox = make_sandbox("bwrap", workspace)
        try:
            assert sandbox.run(task.metadata[REFERENCE_SCRIPT_KEY]).exit_code == 0
        finally:
            sandbox.close()
    verdict = run_check(task, workspace,
                        lambda room: make_sandbox("bwrap", room, SandboxConfig(bwrap_persistent=False)))
    return verdict.status == VerdictStatus.PASS


@needs_bwrap
def test_oracle_solution_passes_and_no_op_fails(tmp_path):
    task = load_suite(f"terminalbench:{TASKS}").tasks[0]
    assert _grade(task, tmp_path, solve=True)
    assert not _grade(task, tmp_path, solve=False)


def test_with_an_engine_a_custom_image_is_graded_in_docker(monkeypatch):
    monkeypatch.setattr(terminalbench, "docker_reason", lambda: None)
    suite = load_suite(f"terminalbench:{TASKS}")
    task = next(t for t in suite.tasks if t.id == "terminalbench/needs-service")
    assert task.metadata["mode"] == "docker" and "docker(" in task.check and str(TASKS / "needs-service") in task.check


# A stand-in for the docker client (no engine here): it logs each call; the test step prints a pytest summary.
FAKE_DOCKER = """#!/bin/sh
echo "$*" >> "$FAKE_DOCKER_LOG"
case "$1 $*" in exec*pytest*|exec*run-tests.sh*) echo "1 passed"; exit "$FAKE_TEST_EXIT";; esac
"""


@pytest.mark.parametrize("test_exit", [0, 1])
def test_the_docker_check_builds_copies_runs_the_tests_and_cleans_up(monkeypatch, tmp_path, test_exit):
    monkeypatch.setattr(terminalbench, "docker_reason", lambda: None)
    task = next(t for t in load_suite(f"terminalbench:{TASKS}").tasks if t.id == "terminalbench/needs-service")
    bin_dir, room, log = tmp_path / "bin", tmp_path / "room", tmp_path / "docker.log"
    bin_dir.mkdir(), room.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_DOCKER_LOG": str(log),
           "FAKE_TEST_EXIT": str(test_exit)}
    proc = subprocess.run(["bash", "-c", task.check], cwd=room, env=env, capture_output=True, text=True)
    assert proc.returncode == test_exit and "1 passed" in proc.stdout
    calls = [line.split()[:2] for line in log.read_text().splitlines()]
    assert calls == [["build", "-q"], ["run", "-d"], ["exec", calls[2][1]], ["cp", "./."], ["cp", calls[4][1]],
                     ["exec", "-e"], ["rm", "-f"]]
    assert f"{TASKS / 'needs-service'}/tests/." in log.read_text() and "-w /app" in log.read_text()


@pytest.mark.parametrize("edit, reason", [
    (lambda d: (d / "Dockerfile").write_text((d / "Dockerfile").read_text() + "RUN pip install numpy\n"),
     "its Dockerfile runs `RUN pip install numpy` beyond the base image"),
    (lambda d: (d / "Dockerfile").write_text((d / "Dockerfile").read_text() + "ENV MODE=strict\n"),
     "runs `ENV MODE=strict`"),
    (lambda d: (d / "run-tests.sh").write_text("uv pip install requests\nuv run pytest $TEST_DIR -rA\n"),
     "run-tests.sh does more than install and run pytest (line 1: `uv pip install requests`)"),
    (lambda d: (d / "docker-compose.yaml").write_text("services:\n  client:\n    image: a\n  db:\n    image: b\n"),
     "it starts 2 services (client, db)"),
])
def test_what_needs_docker_is_named(tmp_path, edit, reason):
    edit(_copy(tmp_path))
    got = _skips(tmp_path / "tasks")["word-tally"]
    assert got.startswith("needs Docker (") and reason in got and got.endswith(f"); {NO_ENGINE}")


@pytest.mark.parametrize("edit, reason", [
    (lambda d: (d / "Dockerfile").unlink(), "no Dockerfile describing its environment"),
    (lambda d: (d / "task.yaml").write_text("author_name: someone\n"), "task.yaml has no instruction"),
    (lambda d: (d / "task.yaml").write_text("- just\n- a list\n"), "task.yaml must be a mapping"),
    (lambda d: (d / "docker-compose.yaml").write_text("services: [\n"), "docker-compose.yaml is not valid YAML"),
])
def test_a_broken_task_is_skipped_with_one_line(tmp_path, edit, reason):
    edit(_copy(tmp_path))
    got = _skips(tmp_path / "tasks")["word-tally"]
    assert got.startswith(reason) and "\n" not in got


def test_copy_of_the_whole_task_keeps_the_harness_files_out(tmp_path):
    task_dir = _copy(tmp_path)
    (task_dir / "Dockerfile").write_text((task_dir / "Dockerfile").read_text().replace(
        "COPY notes.txt /app/notes.txt", "COPY . /app\nCOPY notes.txt /app"))
    (task_dir / "extra").mkdir()
    (task_dir / "extra" / "hint.md").write_text("count words\n")
    task = load_suite(f"terminalbench:{task_dir}").tasks[0]
    assert sorted(task.files) == ["extra/hint.md", "notes.txt"]


def test_tests_missing_leave_only_docker(tmp_path):
    shutil.rmtree(_copy(tmp_path) / "tests")
    assert "no tests/ directory" in _skips(tmp_path / "tasks")["word-tally"]


def test_bad_paths(tmp_path):
    with pytest.raises(SuiteError, match="terminalbench directory not found"):
        load_suite(f"terminalbench:{tmp_path / 'none'}")
    with pytest.raises(SuiteError, match="no Terminal-Bench tasks"):
        load_suite(f"terminalbench:{tmp_path}")
    with pytest.raises(SuiteError, match="needs a path"):
        load_suite("terminalbench")


def test_workdir_paths_become_relative():
    text = "cat /app/notes.txt > /app/out; cd /app; ls /application /tmp/app/x"
    assert relative_to_workdir(text, "/app") == "cat ./notes.txt > ./out; cd .; ls /application /tmp/app/x"
