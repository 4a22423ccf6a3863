"""Repository-level task directories (task.md, task.json, files/), one per subdirectory."""

from __future__ import annotations

from pathlib import Path

from mtl_graph.bench.suites.base import Suite, SuiteError, sample
from mtl_graph.core.task import INSTRUCTIONS_FILE, Task, TaskError


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``dir:PATH``: PATH is one task directory or a directory of them; the domain defaults to PATH's name."""
    if not arg:
        raise SuiteError("suite 'dir' needs a path: dir:PATH")
    root = Path(arg).expanduser()
    if not root.is_dir():
        raise SuiteError(f"task directory not found: {root}")
    dirs = [root] if (root / INSTRUCTIONS_FILE).is_file() else sorted(
        d for d in root.iterdir() if d.is_dir() and (d / INSTRUCTIONS_FILE).is_file())
    if not dirs:
        raise SuiteError(f"{root}: no task directories (each needs a {INSTRUCTIONS_FILE})")
    name = root.resolve().name
    tasks = []
    for d in sample(dirs, limit, seed):
        try:
            task = Task.from_dir(d)
        except TaskError as exc:
            raise SuiteError(str(exc)) from None
        if task.check is None:
            raise SuiteError(f"{d}: task.json has no 'check' command, so pass/fail cannot be decided")
        # Tasks without their own domain belong to this suite, so hold-one-out treats them as one benchmark.
        if task.domain == "default":
            task = task.model_copy(update={"domain": name})
        tasks.append(task.model_copy(update={"metadata": {"suite": name, **task.metadata}}))
    return Suite(spec=f"dir:{arg}", name=name, tasks=tasks, total=len(dirs))
