"""The livecodebench suite over a release file of our own problems in LiveCodeBench's format."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from mtl_graph.bench.records import Condition
from mtl_graph.bench.runners import NoopRunner, OracleRunner
from mtl_graph.bench.suites import REFERENCE_KEY, SuiteError, load_suite
from mtl_graph.bench.suites import base as suite_base
from mtl_graph.bench.suites.livecodebench import decode_cases
from mtl_graph.sandbox.bwrap import BwrapSandbox
from helpers.paths import FIXTURES

RELEASE = FIXTURES / "livecodebench"
SANDBOX = "bwrap" if BwrapSandbox.is_available() else "local"
HIDDEN = ("rhythm", "queueing", "[5, 6]")  # inputs of the private tests only
SOLUTIONS = {
    "livecodebench/mtl001": "s = input().strip()\nprint(sum(c in 'aeiou' for c in s))\n",
    # No typing import: LiveCodeBench's grader provides `List`, and so does the check.
    "livecodebench/mtl002": "class Solution:\n    def rotateLeft(self, nums: List[int], k: int) -> List[int]:\n"
                            "        k %= len(nums)\n        return nums[k:] + nums[:k]\n",
}
WRONG = {"livecodebench/mtl001": "print(3)\n",  # passes the public test only
         # Passes the public test; forgets that k may exceed the length.
         "livecodebench/mtl002": "class Solution:\n    def rotateLeft(self, nums, k):\n"
                                 "        return nums[k:] + nums[:k]\n"}


def _compressed(value, protocol=None) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(value, protocol=protocol))).decode()


def _with_solution(task, source: str):
    return task.model_copy(update={"metadata": {**task.metadata, REFERENCE_KEY: {"solution.py": source}}})


def _passed(runner, task) -> bool:
    return runner.run(task, Condition(), 0, None).passed


def test_release_directory_and_file_load_the_same_problems():
    suite = load_suite(f"livecodebench:{RELEASE}")
    assert suite.name == "livecodebench" and suite.total == 2 and not suite.skipped
    assert [t.id for t in suite.tasks] == [t.id for t in load_suite(f"livecodebench:{RELEASE / 'test6.jsonl'}").tasks]
    modes = {t.id: (t.metadata["mode"], t.metadata["public_tests"], t.metadata["hidden_tests"]) for t in suite.tasks}
    assert modes == {"livecodebench/mtl001": ("stdin", 1, 2), "livecodebench/mtl002": ("functional", 1, 2)}
    vowels, rotate = suite.tasks
    assert "banana" in vowels.instruction and "banana" in vowels.files["public_tests.json"]
    assert rotate.files["solution.py"].startswith("class Solution:") and "rotateLeft" in rotate.instruction


def test_hidden_tests_never_reach_the_agent(tmp_path):
    for task in load_suite(f"livecodebench:{RELEASE}").tasks:
        workspace = task.materialize(tmp_path / task.id.replace("/", "_"))
        seen = task.instruction + task.check + "".join(p.read_text() for p in workspace.rglob("*") if p.is_file())
        assert not [h for h in HIDDEN if h in seen], task.id
        assert task.solution_files == ["solution.py"]  # only the solution is carried into the check


def test_own_solution_passes_wrong_and_untouched_fail():
    oracle, noop = OracleRunner(sandbox=SANDBOX), NoopRunner(sandbox=SANDBOX)
    for task in load_suite(f"livecodebench:{RELEASE}").tasks:
        assert _passed(oracle, _with_solution(task, SOLUTIONS[task.id])), task.id
        assert not _passed(oracle, _with_solution(task, WRONG[task.id])), task.id
        assert not _passed(noop, task), task.id


def test_the_oracle_says_there_is_no_reference():
    task = load_suite(f"livecodebench:{RELEASE}", limit=1).tasks[0]
    outcome = OracleRunner().run(task, Condition(), 0, None)
    assert "releases no reference solutions" in outcome.error


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_compressed_private_tests_are_read_without_unpickling(protocol):
    cases = [{"input": "1\n" * 40_000, "output": "é\n", "testtype": "stdin"}]
    assert decode_cases(_compressed(json.dumps(cases), protocol), "private_test_cases", "here") == cases


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return os.mkdir, (str(marker),)

    with pytest.raises(SuiteError, match="not a plain string .*refusing to unpickle"):
        decode_cases(_compressed(Exploit()), "private_test_cases", "here")
    assert not marker.exists()


def _release(tmp_path, **changes) -> Path:
    item = json.loads((RELEASE / "test6.jsonl").read_text().splitlines()[1])
    path = tmp_path / "test6.jsonl"
    path.write_text(json.dumps({**item, **changes}) + "\n")
    return path


@pytest.mark.parametrize("changes, message", [
    ({"public_test_cases": "[{\"input\": 1}"}, "public_test_cases is not valid JSON"),
    ({"private_test_cases": "not base64 at all!"}, "neither JSON nor base64 of zlib data"),
    ({"private_test_cases": base64.b64encode(zlib.compress(b"junk")).decode()}, "not a valid pickle"),
    ({"private_test_cases": json.dumps([{"input": "1", "output": "2", "testtype": "interactive"}])},
     "unknown testtype 'interactive'"),
    ({"metadata": "{}"}, "functional tests need metadata.func_name"),
    ({"metadata": "{oops"}, "metadata is not valid JSON"),
    ({"question_content": ""}, "needs question_id and question_content"),
    ({"public_test_cases": "[]", "private_test_cases": "[]"}, "has no test cases"),
])
def test_bad_problems_fail_with_one_clear_line(tmp_path, changes, message):
    with pytest.raises(SuiteError, match=message) as err:
        load_suite(f"livecodebench:{_release(tmp_path, **changes)}")
    assert "\n" not in str(err.value) and "test6.jsonl:1" in str(err.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(SuiteError, match="livecodebench data not found"):
        load_suite(f"livecodebench:{tmp_path / 'absent.jsonl'}")
    with pytest.raises(SuiteError, match="no .jsonl release files"):
        load_suite(f"livecodebench:{tmp_path}")
    (tmp_path / "test.jsonl").write_text('{"question_id": "x"\n')
    with pytest.raises(SuiteError, match=r"test.jsonl:1: not valid JSON"):
        load_suite(f"livecodebench:{tmp_path}")


def test_a_check_script_too_large_for_the_command_line_skips_the_problem(monkeypatch):
    monkeypatch.setattr(suite_base, "_INLINE_LIMIT", 500)
    suite = load_suite(f"livecodebench:{RELEASE}")
    assert not suite.tasks and suite.total == 2
    assert all("too large to pass outside the workspace" in s.reason for s in suite.skipped)
