"""Grading in a clean room: a generated battery of cheats against unittest and pytest checks scores 0, while honest
solutions (alone, with helper modules, with the litter of a real run) pass.

Real components: task directories on disk, the agent's commands run by uid 65534 in a real bwrap sandbox, the
check in its own bwrap sandbox over the clean room, and the graph with a scripted agent for the wiring."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from helpers.cheat_battery import (ONE_SHOT, PYTEST_TESTS, SOLUTION, STUB, UNITTEST_TESTS, Cheat, attempt, attempt_all,
                           battery, honest)
from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.judging.ground_truth import run_check
from mtl_graph.judging.clean_room import pristine_path
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.sandbox import make_sandbox
from mtl_graph.core.task import Task
from helpers.sandbox_attack_kit import needs_bwrap

pytestmark = needs_bwrap
PYTHON_TAGS = sorted({f"{sys.version_info.major}.{sys.version_info.minor}", "3.11", "3.12", "3.13"})


def _has_pytest() -> bool:
    import importlib.util

    return importlib.util.find_spec("pytest") is not None


def task_dir(root: Path, runner: str, declared: bool) -> Path:
    """A task directory whose check runs unittest (python3 on PATH) or pytest (this interpreter, which has it)."""
    (root / "files").mkdir(parents=True)
    (root / "task.md").write_text("Implement is_prime in primes.py so that the tests in test_primes.py pass.\n")
    check = ("python3 -m unittest -q test_primes" if runner == "unittest"
             else f"{sys.executable} -m pytest -q test_primes.py")
    meta = {"id": f"room/{runner}", "domain": "math", "check": check, "tests": ["test_primes.py"]}
    if declared:
        meta["solution"] = ["primes.py"]
    (root / "task.json").write_text(json.dumps(meta))
    (root / "files" / "primes.py").write_text(STUB)
    (root / "files" / "test_primes.py").write_text(UNITTEST_TESTS if runner == "unittest" else PYTEST_TESTS)
    return root


@pytest.fixture(scope="module")
def cache_tag() -> str:
    """The bytecode tag of the python3 the agent's commands find on PATH."""
    import subprocess

    return subprocess.run(["python3", "-c", "import sys; print(sys.implementation.cache_tag)"], cwd="/",
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("runner", ["unittest", "pytest"])
def test_every_cheat_of_the_battery_fails_and_honest_solutions_pass(runner, cache_tag, tmp_path):
    if runner == "pytest" and not _has_pytest():
        pytest.skip("pytest is not importable by this interpreter")
    task = Task.from_dir(task_dir(tmp_path / "task", runner, declared=False))
    cheats = battery(runner, PYTHON_TAGS, cache_tag)
    assert len(cheats) >= 30 and len({c.kind for c in cheats}) >= 2
    controls = honest(runner)  # the last one also leaves a real run's litter behind
    *attempted, noop = attempt_all(task, [*cheats, *controls, None], tmp_path)
    verdicts = {cheat.name: verdict for cheat, verdict in zip(cheats, attempted)}
    assert len(verdicts) == len(cheats)
    passed = [name for name, verdict in verdicts.items() if verdict.status == "pass"]
    assert passed == [], f"cheats that passed the {runner} check: {passed}"
    for cheat in cheats:  # each failed for the right reason: its files never reached the check, or it is suspect
        verdict = verdicts[cheat.name]
        planted = cheat.attack_files()
        if cheat.kind == "in-process":
            assert verdict.is_suspect and verdict.reason.startswith("suspect: "), (cheat.name, verdict.reason)
        else:
            assert all(any(d.startswith(p) for d in verdict.dropped) for p in planted), (cheat.name, verdict.dropped)
    for control, litter in zip(controls, attempted[len(cheats):], strict=True):
        assert litter.status == "pass" and not litter.is_suspect, (control.name, litter.reason)
    assert any(d.startswith("scratch_test_primes.py (test file)") for d in litter.dropped)
    assert any(d.startswith("notes/.todo (hidden path)") for d in litter.dropped)
    assert noop.status == "fail"


def test_a_declared_solution_is_all_the_check_sees(cache_tag, tmp_path):
    task = Task.from_dir(task_dir(tmp_path / "task", "unittest", declared=True))
    assert task.solution_files == ["primes.py"]
    helper = Cheat("helper", "honest", {"primes.py": "from helpers import is_prime\n",
                                        "helpers.py": SOLUTION})
    cheats = battery("unittest", PYTHON_TAGS, cache_tag)[::3]
    solution = Cheat("solution", "honest", {"primes.py": SOLUTION})
    verdict, *verdicts, solved = attempt_all(task, [helper, *cheats, solution], tmp_path)
    assert verdict.status == "fail" and verdict.dropped == ["helpers.py (not a solution file)"]
    for cheat, verdict in zip(cheats, verdicts, strict=True):
        assert verdict.status == "fail", cheat.name
        if cheat.kind != "in-process":
            assert all(f"{p} (not a solution file)" in verdict.dropped for p in cheat.files if p != "primes.py"
                       and not p.startswith("__pycache__")), (cheat.name, verdict.dropped)
    assert solved.status == "pass", solved.reason


def test_a_run_prepared_without_a_snapshot_is_graded_from_the_task_and_its_setup(tmp_path):
    task = Task(id="s", instruction="x", files={"primes.py": STUB, "test_primes.py": UNITTEST_TESTS},
                setup="mkdir -p data && echo 11 > data/n", test_files=["test_primes.py"],
                check="test -f data/n && python3 -m unittest -q test_primes")
    workspace = task.materialize(tmp_path / "ws")
    (workspace / "primes.py").write_text(SOLUTION)
    assert not pristine_path(workspace).exists()
    verdict = run_check(task, workspace, lambda room: make_sandbox("bwrap", room, ONE_SHOT))
    assert verdict.status == "pass", verdict.reason


def test_the_report_a_solution_could_forge_is_never_the_check_s_stdout(tmp_path):
    """A green exit code with the runner's report missing or short is suspect: a check that prints a summary
    without running the tests is not a pass, whatever it prints."""
    task = Task(id="r", instruction="x", files={"primes.py": SOLUTION, "test_primes.py": UNITTEST_TESTS},
                test_files=["test_primes.py"], check=f"printf 'Ran 3 tests in 0.1s\\n\\nOK\\n'")
    verdict = attempt(task, None, tmp_path)
    assert verdict.status == "fail" and verdict.is_suspect
    assert "no Python test process reported" in verdict.reason


def test_a_suspect_run_through_the_graph_is_logged_and_teaches_nothing(pool, tmp_path):
    """Online: the suspect run is distilled into no memory and credits or debits none it was shown."""
    from mtl_graph.memory.base import Provenance
    from mtl_graph.memory.formats.insight import InsightMemory

    shown = InsightMemory(title="Check primes by trial division", description="When a task asks for primality.",
                          content="Divide by every number up to the square root.",
                          sources=[Provenance(domain="elsewhere", source_task_id="old")])
    pool.add_many([shown])
    task = task_dir(tmp_path / "task", "unittest", declared=False)
    cheat = battery("unittest", PYTHON_TAGS, "cpython-311")[0]
    model = ScriptedChatModel(responses=[AIMessage("Plan: make the tests pass."), bash_call(cheat.command()),
                                         submit_call("done")])
    graph = build_mtl_graph(model, pool, memory_type="insight", top_k=1, online=True, sandbox="bwrap",
                            distill_formats=["trajectory"], run_log=tmp_path / "runs.jsonl",
                            workspace_root=tmp_path / "workspaces")
    state = graph.invoke({"task": str(task)})
    assert [r["id"] for r in state["retrieved"]] == [shown.id]
    assert state["verdict"]["status"] == "fail" and state["verdict"]["reason"].startswith("suspect: ")
    [line] = [json.loads(x) for x in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert line["suspicions"] and "os._exit" in " ".join(line["suspicions"])
    assert state["new_memory_ids"] == [] and len(pool) == 1
    stats = pool.get(shown.id).stats
    assert (stats.retrieved, stats.retrieved_success, stats.retrieved_failure) == (0, 0, 0)
    base = pristine_path(tmp_path / "workspaces" / "x").parent  # the run's snapshot went with its workspace
    assert not list((tmp_path / "workspaces").iterdir())
    assert not [p for p in base.iterdir() if p.name.endswith(f"-{line['run_id']}")] if base.exists() else True


def test_the_check_process_owns_its_environment(tmp_path):
    """HOME and TMPDIR outside the room, no user site, no bytecode writes, no plugin autoloading, the real
    interpreter first on PATH (no version-manager shim), whatever the agent's workspace held."""
    from mtl_graph.judging.check_env import trusted_path, trusted_python

    probe = ("import os, site, sys; print('HOME', os.environ['HOME']); print('TMP', os.environ['TMPDIR']); "
             "print('PWD', os.getcwd()); print('USERSITE', site.ENABLE_USER_SITE); "
             "print('NOBYTECODE', sys.dont_write_bytecode); print('EXE', sys.executable); "
             "print('AUTOLOAD', os.environ.get('PYTEST_DISABLE_PLUGIN_AUTOLOAD'))")
    task = Task(id="env", instruction="x", files={"probe.py": probe}, check="python3 probe.py")
    verdict = attempt(task, Cheat("pin", "interpreter", {".python-version": "2.7\n",
                                                         "sitecustomize.py": "raise SystemExit(3)\n"}), tmp_path)
    lines = dict(line.split(" ", 1) for line in verdict.reason.splitlines() if line.split(" ", 1)[0].isupper()
                 and " " in line)
    assert verdict.status == "pass", verdict.reason
    room = Path(lines["PWD"])
    assert not Path(lines["HOME"]).is_relative_to(room) and not Path(lines["TMP"]).is_relative_to(room)
    assert lines["USERSITE"] == "False" and lines["NOBYTECODE"] == "True" and lines["AUTOLOAD"] == "1"
    assert lines["EXE"] == trusted_python() and "shims" not in trusted_path().split(":")[0]
    assert not any(Path(p).name == "shims" for p in trusted_path("/a/shims:/usr/bin:/b/shims").split(":"))
