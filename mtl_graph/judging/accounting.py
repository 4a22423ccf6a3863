"""The runner's own accounting: the tests the pristine files define against the tests that reported.

A Python check runs with the harness's hook installed (check_env.py): every test result goes to a report file
that the harness reads, never the check's stdout. A green exit code is trusted only when every test the task's
pristine test files define reported, none failed, and every Python process that started also ended normally
(an early `os._exit` leaves no end record).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import PurePosixPath

TestName = tuple[str | None, str]
"""(class, method) of a test method, (None, function) of a module-level pytest test."""

MAX_REPORT_BYTES = 16 * 1024 * 1024
MAX_NAMED = 8


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def defined_tests(sources: Mapping[str, str], pytest_style: bool) -> set[TestName]:
    """Tests the pristine Python test files define: methods named test* of TestCase classes (and, under pytest,
    of Test* classes) and, under pytest, module-level test* functions. Files that do not parse define none."""
    found: set[TestName] = set()
    for rel, text in sources.items():
        if PurePosixPath(rel).suffix != ".py":
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        cases: set[str] = set()
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        changed = True
        while changed:  # a subclass of a TestCase subclass defined earlier in the file is one too
            changed = False
            for cls in classes:
                if cls.name not in cases and any(b.endswith("TestCase") or b in cases for b in _base_names(cls)):
                    cases.add(cls.name)
                    changed = True
        for cls in classes:
            if cls.name in cases or (pytest_style and cls.name.startswith("Test")):
                found |= {(cls.name, f.name) for f in cls.body
                          if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")}
        if pytest_style:
            found |= {(None, f.name) for f in tree.body
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")}
    return found


def reported_name(runner: str, test_id: str) -> TestName:
    """The (class, name) of a reported test id: unittest's ``module.Class.method``, pytest's node id."""
    if runner == "pytest":
        parts = test_id.split("[", 1)[0].split("::")
        return (parts[-2] if len(parts) > 2 else None, parts[-1])
    parts = test_id.split(".")
    return (parts[-2] if len(parts) > 1 else None, parts[-1])


def read_report(data: bytes) -> tuple[list[dict], list[str]]:
    """Records of a report and the problems found in it (a line the hook could not have written)."""
    records, problems = [], []
    for line in data[:MAX_REPORT_BYTES].decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            problems.append("the test report holds a line the harness did not write")
            break
        if not isinstance(record, dict) or record.get("event") not in ("start", "end", "test", "suspect"):
            problems.append("the test report holds a record the harness did not write")
            break
        records.append(record)
    return records, problems


def hooked(report: bytes | None) -> bool:
    """Whether the harness's hook ran in a process of the check (so code compiled at run time was scanned)."""
    return any(r.get("event") == "start" for r in read_report(report or b"")[0])


def suspicions(sources: Mapping[str, str], report: bytes | None, exit_code: int,
               solution_scanned: bool = True) -> list[str]:
    """Why a check's result cannot be trusted: code the hook flagged when it was compiled at run time (unless the
    solution is not scanned: its code never enters the test process, only programs the tests start), and, for a
    green exit code, tests that did not all report or end (empty when it can be trusted)."""
    records, problems = read_report(report or b"")
    flagged = [str(r.get("finding"))[:300] for r in records if r.get("event") == "suspect"] if solution_scanned \
        else []
    problems = list(dict.fromkeys(flagged))[:MAX_NAMED] + problems
    if exit_code != 0:
        return problems
    pytest_style = any(r.get("runner") == "pytest" for r in records)
    defined = defined_tests(sources, pytest_style)
    if not defined:
        return problems
    if not any(r.get("event") == "start" for r in records):
        return problems + ["the check exited 0 but no Python test process reported to the harness"]
    started = {r.get("pid") for r in records if r.get("event") == "start"}
    ended = {r.get("pid") for r in records if r.get("event") == "end"}
    out = list(problems)
    if started - ended:
        out.append("a test process ended without finishing (an early exit)")
    outcomes: dict[TestName, set[str]] = {}
    for r in records:
        if r.get("event") == "test" and isinstance(r.get("id"), str):
            outcomes.setdefault(reported_name(str(r.get("runner")), r["id"]), set()).add(str(r.get("outcome")))
    failed = sorted((n for n, o in outcomes.items() if o & {"fail", "error", "xpass"}), key=_order)
    if failed:
        out.append(f"the check exited 0 but {len(failed)} test(s) failed: {_names(failed)}")
    missing = sorted(defined - set(outcomes), key=_order)
    if missing:
        out.append(f"{len(missing)} of the {len(defined)} tests the task defines never reported: {_names(missing)}")
    return out


def _order(name: TestName) -> tuple[str, str]:
    return name[0] or "", name[1]


def _names(names: list[TestName]) -> str:
    shown = [f"{c}.{m}" if c else m for c, m in names[:MAX_NAMED]]
    return ", ".join(shown) + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")
