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


def _task(name: str):
    return next(t for t in load_suite(f"terminalbench:{TASKS}").tasks if t.id == f"terminalbench/{name}")


def test_tasks_load_with_their_mode_or_the_reason_they_cannot_run():
    suite = load_suite(f"terminalbench:{TASKS}")
    assert suite.total == 5 and [t.id for t in suite.tasks] == [
        "terminalbench/line-stats", "terminalbench/median-lib", "terminalbench/word-tally"]
    task = _task("word-tally")
    assert task.metadata["mode"] == "bwrap" and task.metadata["difficulty"] == "easy"
    assert "./notes.txt" in task.instruction and "/app" in task.instruction  # rewritten, and the note says so
    assert _skips(TASKS) == {
        "broken-yaml": "task.yaml is not valid YAML (found unexpected end of stream at line 3)",
        "needs-service": "needs Docker (its Dockerfile builds on python:3.12-slim, not a Terminal-Bench base "
                         f"image); {NO_ENGINE}",
    }
    assert load_suite(f"terminalbench:{TASKS / 'word-tally'}").total == 1  # one task directory


def test_the_workspace_holds_the_copied_files_and_no_tests_or_solution(tmp_path):
    task = _task("word-tally")
    workspace = task.materialize(tmp_path / "ws")
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.txt"]
    seen = task.instruction + "".join(task.files.values())
    assert "test_tally_is_the_word_count" not in seen and "wc -w" not in seen
    assert "test_tally_is_the_word_count" not in task.check  # packed, not plain text


def _verdict(task, tmp_path, script: str | None = None, files: dict[str, str] | None = None):
    """The check's verdict after running script (the reference solution by default; "" for none) and writing
    files in the task's workspace."""
    workspace = task.materialize(tmp_path / f"ws-{len(list(tmp_path.iterdir()))}")
    take_snapshot(workspace)
    for rel, text in (files or {}).items():
        (workspace / rel).write_text(text)
    script = task.metadata[REFERENCE_SCRIPT_KEY] if script is None else script
    if script:
        sandbox = make_sandbox("bwrap", workspace)
        try:
            assert sandbox.run(script).exit_code == 0
        finally:
            sandbox.close()
    return run_check(task, workspace, lambda room: make_sandbox("bwrap", room, SandboxConfig(bwrap_persistent=False)))


def _grade(task, tmp_path, solve: bool) -> bool:
    return _verdict(task, tmp_path, None if solve else "").status == VerdictStatus.PASS


@needs_bwrap
@pytest.mark.parametrize("name", ["word-tally", "line-stats", "median-lib"])
def test_oracle_solution_passes_and_no_op_fails(tmp_path, name):
    task = _task(name)
    verdict = _verdict(task, tmp_path)
    assert verdict.status == VerdictStatus.PASS and not verdict.suspicions, verdict.reason
    assert not _grade(task, tmp_path, solve=False)


WRONG = {"word-tally": {"tally.txt": "5\n"}, "line-stats": {"stats.json": '{"count": 4, "total": 21, "max": 9}'},
         "median-lib": {"median.py": "def median(values):\n    return sorted(values)[len(values) // 2]\n"}}


@needs_bwrap
@pytest.mark.parametrize("name", sorted(WRONG))
def test_a_wrong_solution_fails(tmp_path, name):
    verdict = _verdict(_task(name), tmp_path, "", WRONG[name])
    assert verdict.status == VerdictStatus.FAIL and not verdict.suspicions, verdict.reason


def test_the_scan_applies_where_the_tests_import_the_solution():
    stats, median = _task("line-stats"), _task("median-lib")
    assert not stats.tests_load_solution and stats.metadata["solution_loaders"] == []
    assert median.tests_load_solution and median.metadata["solution_loaders"] == [
        "test_outputs.py imports median, which no installed package provides (only the workspace could)",
        "test_outputs.py line 3 changes the import path (sys.path)"]


@needs_bwrap
def test_a_solution_reaching_into_a_test_process_that_imports_it_is_suspect_naming_file_and_rule(tmp_path):
    cheat = "import os\nos._exit(0)\n"
    verdict = _verdict(_task("median-lib"), tmp_path, "", {"median.py": cheat})
    assert verdict.status == VerdictStatus.FAIL and verdict.reason.startswith("suspect: ")
    assert verdict.suspicions == ["median.py line 2: [os/sys beyond the allow-list] uses os._exit"]


def _with_isolation(task, isolated: bool):
    head, call = task.check.rsplit("\nbwrap(PAYLOAD, ", 1)
    assert "], True, " in call
    return task.model_copy(update={"check": f"{head}\nbwrap(PAYLOAD, " + call.replace("], True, ", f"], {isolated!r}, ", 1)})


@needs_bwrap
def test_a_module_planted_for_the_test_process_does_not_load_when_the_tests_only_read_files(tmp_path):
    """The clean room carries a module named like one pytest imports; with the graded directory off the import
    path it never loads, so its early exit cannot turn a missing answer into a pass."""
    plant = {"iniconfig.py": "print('PLANTED MODULE RAN', flush=True)\nimport os\nos._exit(0)\n"}
    task = _task("line-stats")
    verdict = _verdict(task, tmp_path, "", plant)
    assert verdict.status == VerdictStatus.FAIL and "PLANTED MODULE RAN" not in verdict.reason
    assert "2 failed" in verdict.reason  # the tests ran, and found no stats.json
    # the control: with the graded directory on the import path the planted module runs in the test process
    exposed = _verdict(_with_isolation(task, False), tmp_path, "", plant)
    assert "PLANTED MODULE RAN" in exposed.reason


@needs_bwrap
def test_the_verdict_states_a_python_version_mismatch(tmp_path):
    task = _task("line-stats")
    mismatch = task.metadata.get("python_mismatch")
    if mismatch is None:
        pytest.skip("this machine's python3 is the image's version (3.13)")
    assert "Python 3.13" in mismatch and f"Python {terminalbench.sandbox_python_version()}" in mismatch
    assert f"note: {mismatch}" in _verdict(task, tmp_path).reason


@pytest.mark.parametrize("host, image_line, stated", [
    ("3.11.7", "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620", True),
    ("3.12.0", "FROM ghcr.io/laude-institute/t-bench/python-3-13", True),
    ("3.13.1", "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620", False),
    ("3.11.7", "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04", False),
    (None, "FROM ghcr.io/laude-institute/t-bench/python-3-13", False),
])
def test_a_mismatch_is_stated_only_where_the_versions_are_known_and_differ(tmp_path, monkeypatch, host, image_line,
                                                                          stated):
    monkeypatch.setattr(terminalbench, "sandbox_python_version", lambda: host)
    task_dir = _copy(tmp_path)
    dockerfile = (task_dir / "Dockerfile").read_text().splitlines()
    (task_dir / "Dockerfile").write_text("\n".join([image_line, *dockerfile[1:]]) + "\n")
    task = load_suite(f"terminalbench:{task_dir}").tasks[0]
    assert ("python_mismatch" in task.metadata) == stated
    if stated:
        assert f"Python {host}" in task.metadata["python_mismatch"]
        assert repr(task.metadata["python_mismatch"]) in task.check


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


@pytest.mark.parametrize("engine", [None, NO_ENGINE])
@pytest.mark.parametrize("empty", [False, True])
def test_a_task_without_tests_is_skipped_for_that_reason_not_docker(tmp_path, monkeypatch, engine, empty):
    monkeypatch.setattr(terminalbench, "docker_reason", lambda: engine)
    tests = _copy(tmp_path) / "tests"
    shutil.rmtree(tests)
    if empty:
        tests.mkdir()
    assert _skips(tmp_path / "tasks")["word-tally"] == (
        "it has no tests (its tests/ directory is missing or empty), so nothing can grade it; Docker would not "
        "change that")


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


# Every way a test file can name a module, for each kind of module: whether the tests then load workspace code.
IMPORT_FORMS = ["import {m}\n", "import {m}.sub as alias\n", "from {m} import thing\n", "from {m}.sub import thing\n",
                "def test_x():\n    import {m}\n", "try:\n    import {m}\nexcept ImportError:\n    pass\n"]
MODULE_KINDS = {"json": False, "pathlib": False, "pytest": False, "iniconfig": False,  # stdlib, installed
                "tool": True,  # a module of the workspace
                "mtl_no_such_module_xyz": True,  # only the workspace could provide it
                "helpers": False}  # the tests' own helper beside test_outputs.py
LOADING_CODE = ["import sys\nsys.path.insert(0, '.')\n", "import sys\nsys.path.append('/x')\n",
                "from sys import path\n", "import importlib\nimportlib.import_module('x')\n",
                "import runpy\nrunpy.run_path('x.py')\n", "m = __import__('x')\n", "exec(open('x.py').read())\n",
                "from importlib import util\n", "import pkgutil\n", "def broken(:\n"]
READ_ONLY = ["import json\nfrom pathlib import Path\nassert json.loads(Path('out.json').read_text())\n",
             "import subprocess\nsubprocess.run(['python3', 'tool.py'], check=True)\n",  # another process
             "import os\nassert os.path.exists('out.txt')\n", "from . import helpers\n",
             "import sys\nassert sys.version_info >= (3, 8)\n"]


@pytest.mark.parametrize("form", IMPORT_FORMS)
@pytest.mark.parametrize("module, loads", sorted(MODULE_KINDS.items()))
def test_what_the_tests_import_decides_whether_they_load_the_solution(form, module, loads):
    tests = {"test_outputs.py": form.format(m=module), "helpers.py": "X = 1\n"}
    found = terminalbench.solution_loaders(tests, {"tool", "data"})
    assert bool(found) == loads, found


@pytest.mark.parametrize("code", LOADING_CODE)
def test_tests_that_reach_the_import_path_or_build_code_load_the_solution(code):
    assert terminalbench.solution_loaders({"test_outputs.py": code}, set())


@pytest.mark.parametrize("code", READ_ONLY)
def test_tests_that_only_read_files_or_start_programs_do_not(code):
    assert terminalbench.solution_loaders({"test_outputs.py": code, "helpers.py": ""}, {"tool"}) == []


def test_in_a_task_image_any_import_beyond_the_standard_library_and_pytest_may_be_the_workspace_s():
    tests = {"test_outputs.py": "import pytest\nimport json\nimport requests\n"}
    assert terminalbench.solution_loaders(tests, set(), probe=False) == [
        "test_outputs.py imports requests, which the task image may not provide (then only the workspace could)"]
    assert terminalbench.solution_loaders({"test_outputs.py": "import pytest, json\n"}, set(), probe=False) == []
