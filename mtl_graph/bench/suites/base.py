"""What every suite adapter shares: the Suite model, errors, seeded sampling, check-command builders."""

from __future__ import annotations

import gzip
import json
import random
import shlex
from pathlib import Path
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.core.task import Task
from mtl_graph.core.errors import MTLError

REFERENCE_KEY = "reference_files"
"""Task.metadata key holding the reference solution (relative path -> content) used by the oracle."""
REFERENCE_SCRIPT_KEY = "reference_script"
"""Task.metadata key holding a reference solution that is a shell script (Terminal-Bench's solution.sh): the oracle
runs it in the run's sandbox, after writing any reference files."""
REFERENCE_UNAVAILABLE_KEY = "reference_unavailable"
"""Task.metadata key saying why a task's reference solution cannot be checked on this machine."""

# A heredoc keeps hidden tests out of the workspace the agent can read; past this size a command line
# risks the kernel's per-argument limit, so the script is written into the workspace instead.
_INLINE_LIMIT = 100_000
_HEREDOC_TAG = "MTL_CHECK_EOF"
CHECK_DIR = ".mtl_check"


class SuiteError(MTLError, ValueError):
    """A suite could not be loaded (unknown name, missing or corrupt files)."""


class SkippedTask(BaseModel):
    """A task the suite knows about but cannot run on this machine."""

    id: str
    """Task id."""
    reason: str
    """Why it is skipped (e.g. a missing toolchain)."""


class Suite(BaseModel):
    """The tasks of one benchmark, after sampling."""

    model_config = ConfigDict(extra="forbid")

    spec: str
    """The spec it was loaded from (``humaneval``, ``exercism:PATH``...)."""
    name: str
    """Suite name; also the hold-one-out domain of its tasks unless a task says otherwise."""
    tasks: list[Task] = Field(default_factory=list)
    """Runnable tasks, in a deterministic order."""
    skipped: list[SkippedTask] = Field(default_factory=list)
    """Tasks that cannot run here, each with its reason."""
    skip_reason: str | None = None
    """Set when the whole suite cannot run here (e.g. no Docker engine)."""
    total: int = 0
    """How many tasks the suite has before sampling."""
    groups: dict[str, str] = Field(default_factory=dict)
    """Task id -> sub-group (an exercise's language); the report gives each group its own column."""


def sample(items: Sequence, limit: int | None, seed: int) -> list:
    """A seeded subset of ``limit`` items in their original order (all items when limit is None)."""
    if limit is not None and limit < 0:
        raise SuiteError(f"limit must be >= 0, got {limit}")
    if limit is None or limit >= len(items):
        return list(items)
    picked = sorted(random.Random(seed).sample(range(len(items)), limit))
    return [items[i] for i in picked]


def hidden_python_check(script: str, name: str = "check.py") -> tuple[str, dict[str, str]]:
    """A check command running a Python script, and the files it needs in the workspace.

    Small scripts are passed on stdin so the agent never sees the hidden tests.
    """
    if len(script) <= _INLINE_LIMIT and _HEREDOC_TAG not in script:
        return f"python3 - <<'{_HEREDOC_TAG}'\n{script}\n{_HEREDOC_TAG}", {}
    path = f"{CHECK_DIR}/{name}"
    return f"python3 {shlex.quote(path)}", {path: script}


def read_json_objects(path: Path) -> list[tuple[dict, int]]:
    """Every JSON object of a .jsonl (or .jsonl.gz) file with its line number; any bad line is a SuiteError."""
    opener = gzip.open if path.suffix == ".gz" else open
    items: list[tuple[dict, int]] = []
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SuiteError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
                if not isinstance(item, dict):
                    raise SuiteError(f"{path}:{lineno}: expected a JSON object")
                items.append((item, lineno))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read ({exc})") from None
    if not items:
        raise SuiteError(f"{path}: no problems")
    return items
