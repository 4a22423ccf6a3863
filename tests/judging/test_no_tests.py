"""A check that ran no test fails: the detector table on the real shapes of each runner's output, and real runs."""

from pathlib import Path

import pytest

from mtl_graph.judging.ground_truth import run_check
from mtl_graph.judging.no_tests import RULES, no_test_reason
from mtl_graph.sandbox import make_sandbox
from mtl_graph.core.task import Task

# (runner, check command, exit code, output that ran no test, output of a real test run)
CASES = [
    ("unittest", "python3 -m unittest -q test_x", 0,
     "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nOK\n",
     "..\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\nOK\n"),
    ("unittest", "python3 -m unittest test_x", 5,
     "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n",
     "F\n======\nFAIL: test_a (test_x.T.test_a)\n------\nRan 1 test in 0.001s\n\nFAILED (failures=1)\n"),
    ("unittest", "python3 -m unittest primes_test.py", 0, "", "Ran 3 tests in 0.002s\n\nOK\n"),
    ("pytest", "python3 -m pytest -q tests", 5, "\nno tests ran in 0.01s\n", "...\n3 passed in 0.02s\n"),
    ("pytest", "pytest -q", 0, "", "..\n2 passed in 0.01s\n"),
    ("go", "go test ./...", 0, "?   \texample.com/leap\t[no test files]\n",
     "?   \texample.com/leap/cmd\t[no test files]\nok  \texample.com/leap\t0.004s\n"),
    ("go", "go test -run TestNothing ./...", 0, "ok  \texample.com/leap\t0.003s [no tests to run]\n",
     "ok  \texample.com/leap\t(cached)\n"),
    ("cargo", "cargo test -- --include-ignored", 0,
     "running 0 tests\n\ntest result: ok. 0 passed; 0 failed\n\n   Doc-tests leap\n\nrunning 0 tests\n",
     "running 4 tests\ntest a ... ok\n\ntest result: ok. 4 passed\n\n   Doc-tests leap\n\nrunning 0 tests\n"),
    ("jest", "npm test", 1, "No tests found, exiting with code 1\n", "Tests:       5 passed, 5 total\n"),
    ("node", "node --test", 0, "# tests 0\n# suites 0\n# pass 0\n", "# tests 3\n# pass 3\n"),
    ("mocha", "npx mocha", 0, "\n\n  0 passing (1ms)\n\n", "\n  3 passing (4ms)\n"),
    ("ctest", "ctest --test-dir build", 8, "Test project /w/build\nNo tests were found!!!\n",
     "100% tests passed, 0 tests failed out of 12\n"),
    ("gradle", "sh ./gradlew test --offline", 0, "> Task :test NO-SOURCE\n\nBUILD SUCCESSFUL in 1s\n",
     "> Task :test\n\nBUILD SUCCESSFUL in 4s\n"),
]


@pytest.mark.parametrize("runner, command, code, empty, ran", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_runner_s_empty_run_is_detected_and_a_real_run_is_not(runner, command, code, empty, ran):
    reason = no_test_reason(command, code, empty)
    assert reason is not None
    assert any(rule.runner == runner and rule.reason == reason for rule in RULES)
    assert no_test_reason(command, 0 if "FAILED" not in ran else 1, ran) is None


def test_the_silent_run_rules_need_the_runner_in_the_command():
    assert no_test_reason("python3 check.py", 0, "") is None  # a custom check script prints what it likes
    assert no_test_reason("sh greet.sh", 0, "hello") is None
    assert no_test_reason("python3 -m unittest_helpers", 0, "") is None  # another tool, not unittest


def _task(tmp_path, test_body: str, check: str = "python3 -m unittest -q test_mod") -> tuple[Task, object]:
    task = Task(id="t", instruction="x", files={"mod.py": "X = 1\n", "test_mod.py": test_body}, check=check,
                test_files=["test_mod.py"])
    return task, task.materialize(tmp_path / "ws")


def _check(task: Task, workspace):
    return run_check(task, workspace, lambda room: make_sandbox("bwrap", room))


def test_a_real_unittest_run_of_zero_tests_fails_on_this_python(tmp_path):
    task, workspace = _task(tmp_path, "import unittest\n")
    verdict = _check(task, workspace)
    assert verdict.status == "fail" and "ran no test" in verdict.reason and verdict.tests_modified == []


def test_a_solution_that_exits_green_at_import_does_not_pass(tmp_path):
    body = "import unittest\nimport mod\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(mod.X, 2)\n"
    task, workspace = _task(tmp_path, body)
    (workspace / "mod.py").write_text("import os\nos._exit(0)\n")
    verdict = _check(task, workspace)
    assert verdict.status == "fail" and verdict.reason.startswith("suspect: ") and "uses os._exit" in verdict.reason
    assert "early exit" in verdict.reason and "never reported: T.test_x" in verdict.reason
    (workspace / "mod.py").write_text("X = 2\n")
    assert _check(task, workspace).status == "pass"


def _real(tmp_path, files: dict[str, str], check: str) -> str:
    task = Task(id="real", instruction="x", files=files, check=check, check_timeout=120)
    verdict = _check(task, task.materialize(tmp_path / "ws"))
    return verdict.reason if verdict.status == "fail" else f"{verdict.status}: {verdict.reason}"


def _needs(tool: str):
    import shutil

    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed")


def test_a_real_pytest_run_that_collects_nothing_fails(tmp_path):
    import sys

    reason = _real(tmp_path, {"test_empty.py": "X = 1\n"}, f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert reason.startswith("the check ran no test (pytest exit code 5")


@_needs("go")
def test_a_real_go_package_without_tests_fails(tmp_path):
    reason = _real(tmp_path, {"go.mod": "module example.com/leap\n\ngo 1.19\n",
                              "leap.go": "package leap\n\nfunc IsLeap(y int) bool { return false }\n"},
                   "GOCACHE=$PWD/.gocache GOFLAGS=-mod=mod go test ./...")
    assert "the check ran no test (go test" in reason and "[no test files]" in reason


@_needs("node")
def test_a_real_node_test_run_of_nothing_fails(tmp_path):
    reason = _real(tmp_path, {"index.js": "module.exports = 1;\n"}, "node --test")
    assert "the check ran no test (node --test" in reason


@_needs("cargo")
def test_a_real_cargo_crate_without_tests_fails(tmp_path):
    manifest = '[package]\nname = "leap"\nversion = "0.1.0"\nedition = "2021"\n'
    reason = _real(tmp_path, {"Cargo.toml": manifest, "src/lib.rs": "pub fn is_leap(_y: u64) -> bool { false }\n"},
                   f"HOME={Path.home()} CARGO_TARGET_DIR=$PWD/target cargo test --offline -- --include-ignored")
    assert "the check ran no test (cargo test" in reason


def test_a_runner_named_inside_a_pattern_is_not_a_runner() -> None:
    """The polyglot python check strips skip decorators with sed before running unittest: `pytest\\.mark` there is
    a pattern, not a pytest run, so a green unittest summary must not read as "pytest printed nothing"."""
    command = ("sed -i -E '/^[[:space:]]*@(unittest\\.skip|pytest\\.mark\\.skip)/d' t_test.py && "
               "python3 -m unittest t_test.py")
    output = "..\n----------------------------------------------------------------------\nRan 2 tests in 0.000s\n\nOK\n"
    assert no_test_reason(command, 0, output) is None
    assert no_test_reason("python3 -m pytest -q", 0, "") is not None
