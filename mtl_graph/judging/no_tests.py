"""Detectors of a check that ran no test: a green exit code is not a pass unless tests actually ran.

One row per test runner: what its output (and, where the runner has one, its exit code) looks like when
nothing was collected or run. Python 3.11's unittest exits 0 after "Ran 0 tests"; 3.12+ exits 5.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

Detect = Callable[[str, int, str], bool]
"""(check command, exit code, output) -> True when the check ran no test."""


@dataclass(frozen=True)
class NoTestRule:
    """How one test runner says that it ran nothing."""

    runner: str
    """The test runner (unittest, pytest, go, cargo, ...)."""
    reason: str
    """What the verdict's reason says when the rule fires."""
    detect: Detect
    """The predicate over the check command, its exit code and its output."""


def _output(pattern: str) -> Detect:
    regex = re.compile(pattern, re.MULTILINE)
    return lambda command, code, output: regex.search(output) is not None


def _runs(tool: str) -> re.Pattern[str]:
    # Not a dotted or escaped name such as `pytest.mark.skip` or `unittest\.skip` inside a sed expression.
    return re.compile(rf"(?<![\w.-]){re.escape(tool)}(?![\w.\\-])")


_UNITTEST, _PYTEST = _runs("unittest"), _runs("pytest")
_UNITTEST_SUMMARY = re.compile(r"^Ran \d+ tests? in ", re.MULTILINE)
_PYTEST_RAN = re.compile(r"\b\d+ (passed|failed|errors?)\b")


def _exit(tool: re.Pattern[str], code: int) -> Detect:
    return lambda command, exit_code, output: exit_code == code and tool.search(command) is not None


def _silent(tool: re.Pattern[str], summary: re.Pattern[str]) -> Detect:
    """A green run of a runner that always prints a summary, without one: the process ended before any test."""
    return lambda command, code, output: (code == 0 and tool.search(command) is not None
                                          and summary.search(output) is None)


_GO_NO_TESTS = re.compile(r"\[no test files\]|\[no tests to run\]")
_GO_RAN = re.compile(r"^(ok|FAIL|---)\s", re.MULTILINE)


def _go(command: str, code: int, output: str) -> bool:
    if not _GO_NO_TESTS.search(output):
        return False
    return not any(m and "[no tests to run]" not in line
                   for line in output.splitlines() for m in [_GO_RAN.match(line)])


_CARGO_RUNNING = re.compile(r"^running (\d+) tests?$", re.MULTILINE)


def _cargo(command: str, code: int, output: str) -> bool:
    counts = [int(n) for n in _CARGO_RUNNING.findall(output)]
    return bool(counts) and not any(counts)


RULES: tuple[NoTestRule, ...] = (
    NoTestRule("unittest", 'unittest "Ran 0 tests"', _output(r"^Ran 0 tests in ")),
    NoTestRule("unittest", "unittest exit code 5: no tests ran", _exit(_UNITTEST, 5)),
    NoTestRule("unittest", "unittest printed no test summary: the process ended before the tests ran",
               _silent(_UNITTEST, _UNITTEST_SUMMARY)),
    NoTestRule("pytest", "pytest exit code 5: no tests collected", _exit(_PYTEST, 5)),
    NoTestRule("pytest", '"no tests ran"', _output(r"(?i)\bno tests ran\b")),
    NoTestRule("pytest", "pytest reported no test result: the process ended before the tests ran",
               _silent(_PYTEST, _PYTEST_RAN)),
    NoTestRule("go", 'go test: "no test files" / "[no tests to run]" and no package tested', _go),
    NoTestRule("cargo", 'cargo test: every "running N tests" has N = 0', _cargo),
    NoTestRule("jest", 'jest: "No tests found"', _output(r"No tests found")),
    NoTestRule("node", 'node --test: "# tests 0"', _output(r"^# tests 0\s*$")),
    NoTestRule("mocha", 'mocha: "0 passing"', _output(r"^\s*0 passing\b")),
    NoTestRule("ctest", 'ctest: "No tests were found"', _output(r"No tests were found")),
    NoTestRule("gradle", 'gradle: "Task :test NO-SOURCE"', _output(r"Task :\S*test NO-SOURCE")),
)


def no_test_reason(command: str, exit_code: int, output: str) -> str | None:
    """Why the check ran no test (the first rule that fires), or None when tests ran."""
    for rule in RULES:
        if rule.detect(command, exit_code, output):
            return rule.reason
    return None
