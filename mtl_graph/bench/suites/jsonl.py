"""LiveCodeBench-style problems in a JSON-lines file: a statement, optional starter code, test cases."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from mtl_graph.bench.suites.base import (
    REFERENCE_KEY,
    Suite,
    SuiteError,
    hidden_python_check,
    read_json_objects,
    sample,
)
from mtl_graph.core.task import Task

SOLUTION_FILE = "solution.py"
# Field names of our own format first, then LiveCodeBench's.
_ID_KEYS = ("id", "question_id", "task_id")
_STATEMENT_KEYS = ("statement", "question_content", "prompt")
_TEST_KEYS = ("tests", "public_test_cases", "private_test_cases")

_STDIN_NOTE = ("Write a complete Python program in `{file}` that reads from standard input "
               "and writes to standard output.")
_CALL_NOTE = "Implement `{fn}` in `{file}` (it already holds the starter code); it is called with the test inputs."


def _cases(item: dict, where: str) -> list[dict[str, str]]:
    cases: list[dict[str, str]] = []
    for key in _TEST_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise SuiteError(
                    f"{where}: {key} is neither a list nor JSON (compressed test data is not supported)") from None
        for case in value or []:
            if not (isinstance(case, dict) and isinstance(case.get("input"), str)
                    and isinstance(case.get("output"), str)):
                raise SuiteError(f"{where}: each test case needs string 'input' and 'output'")
            cases.append({"input": case["input"], "output": case["output"]})
    if not cases:
        raise SuiteError(f"{where}: no test cases (expected one of {', '.join(_TEST_KEYS)})")
    return cases


def _func_name(item: dict) -> str | None:
    meta = item.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError:
            meta = {}
    name = item.get("function_name") or (meta or {}).get("func_name")
    return str(name) if name else None


def _first(item: dict, keys: tuple[str, ...]) -> Any:
    return next((item[k] for k in keys if item.get(k) not in (None, "")), None)


def problem_to_task(item: dict, domain: str, where: str) -> Task:
    pid, statement = _first(item, _ID_KEYS), _first(item, _STATEMENT_KEYS)
    if pid is None or not isinstance(statement, str):
        raise SuiteError(f"{where}: a problem needs an id and a statement")
    fn, starter, cases = _func_name(item), item.get("starter_code") or "", _cases(item, where)
    runner = resources.files("mtl_graph.bench.suites.checks").joinpath("cases_runner.py").read_text(encoding="utf-8")
    call = f"main({cases!r}, {SOLUTION_FILE!r}, {fn!r}, {float(item.get('timeout', 10.0))!r})"
    check, check_files = hidden_python_check(f"{runner}\n\n{call}\n")
    note = (_CALL_NOTE.format(fn=fn, file=SOLUTION_FILE) if fn else _STDIN_NOTE.format(file=SOLUTION_FILE))
    title = item.get("title") or item.get("question_title")
    metadata = {"suite": domain, "mode": "call" if fn else "stdin"}
    metadata.update({k: item[k] for k in ("difficulty", "platform", "contest_date") if k in item})
    if item.get("solution"):
        metadata[REFERENCE_KEY] = {SOLUTION_FILE: item["solution"]}
    return Task(
        id=f"{domain}/{pid}",
        instruction="\n\n".join(p for p in (f"# {title}" if title else "", statement.strip(), note) if p),
        domain=domain,
        files={SOLUTION_FILE: starter, **check_files},
        check=check,
        test_files=list(check_files),
        check_timeout=60.0 + 10.0 * len(cases),
        metadata=metadata,
    )


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``jsonl:PATH``; the suite (and domain) is named after the file."""
    if not arg:
        raise SuiteError("suite 'jsonl' needs a path: jsonl:PATH")
    path = Path(arg).expanduser()
    if not path.is_file():
        raise SuiteError(f"jsonl file not found: {path}")
    domain = path.name.split(".")[0]
    items = [(item, f"{path}:{lineno}") for item, lineno in read_json_objects(path)]
    # Validate every line, not just the sampled ones: a corrupt file should fail the same way at any --limit.
    tasks = [problem_to_task(item, domain, where) for item, where in items]
    return Suite(spec=f"jsonl:{arg}", name=domain, tasks=sample(tasks, limit, seed), total=len(tasks))
