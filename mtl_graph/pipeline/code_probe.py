"""The code link of a run in a git workspace: its repository, the commit it ran on, the files it changed.

Whatever is in the workspace was in the agent's reach, its `.git` included, and a repository's own config can
make git run commands (`core.fsmonitor`, filters, hooks). So git never runs on the host over the workspace: the
probe runs in the run's own sandbox, like the agent's commands, and its output is parsed as untrusted (a commit
must be hex, a path relative and inside the repository). A workspace without `.git` costs nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mtl_graph.core.task import Task
from mtl_graph.core.trajectory import MAX_CODE_PATHS, CodeLink, clean_code_path

_SEPARATOR = "\x1e"
_GIT = "git -c core.fsmonitor=false -c core.hooksPath=/dev/null"
PROBE = (f"{_GIT} rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 3; "
         f"{_GIT} rev-parse HEAD 2>/dev/null; printf '\\036'; {_GIT} remote get-url origin 2>/dev/null; "
         f"printf '\\036'; {_GIT} status --porcelain=v1 -z --untracked-files=all --no-renames 2>/dev/null")
"""One command: the commit, the origin's URL and the changed files, separated by ASCII record separators."""
TIMEOUT_S = 30.0


def parse_probe(output: str, truncated: bool = False) -> tuple[str | None, str | None, list[str]]:
    """The commit, the remote and the changed paths the probe printed (anything malformed is dropped)."""
    parts = output.split(_SEPARATOR)
    if len(parts) != 3:
        return None, None, []
    head, remote, status = (p.strip("\n") for p in parts)
    commit = head.strip().splitlines()[0] if head.strip() else None
    try:
        commit = CodeLink(commit=commit).commit if commit else None
    except ValidationError:
        commit = None
    remote = (remote.strip().splitlines() or [None])[0]
    entries = [e for e in status.split("\0") if e]
    if truncated and entries:
        entries = entries[:-1]  # the last entry may be cut
    paths = []
    for entry in entries:
        path = clean_code_path(entry[3:]) if len(entry) > 3 and entry[2] == " " else None
        if path is not None and not (path == ".git" or path.startswith(".git/")):
            paths.append(path)
    return commit, remote[:500] if remote else None, sorted(set(paths))[:MAX_CODE_PATHS]


def code_link_of(sandbox: Any, workspace: str | Path | None, task: Task) -> CodeLink | None:
    """The run's code link when its workspace is a git repository (None otherwise, or when the probe fails)."""
    if workspace is None or not (Path(workspace) / ".git").exists():
        return None
    try:
        result = sandbox.run(PROBE, timeout=TIMEOUT_S)
    except Exception:  # a sandbox that cannot run it: the run goes on without a code link
        return None
    if result.exit_code != 0:
        return None
    commit, remote, paths = parse_probe(result.output, result.truncated)
    named = task.metadata.get("repository") or task.metadata.get("repo")
    repository = remote or (named if isinstance(named, str) and named.strip() else None)
    if commit is None or not paths:
        return None
    return CodeLink(repository=repository, commit=commit, paths=paths)
