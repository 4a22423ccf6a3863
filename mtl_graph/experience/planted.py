"""Files an agent plants to hijack a Python check: modules that shadow the test runner or the standard library.

``python3 -m unittest`` puts the workspace first on ``sys.path``, so a ``unittest.py`` the agent wrote runs
instead of the real runner (and can print a green summary); ``sitecustomize.py``, a ``conftest.py`` or a module
named like any standard-library module the tests import do the same. Before every check, such entries that were
not in the workspace before the agent ran are removed, and reported like modified tests (a Go or Rust check never
imports them, so removing them there costs nothing).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Callable, Collection
from pathlib import Path

from mtl_graph.tasks import Task

HIJACK_NAMES = frozenset(sys.stdlib_module_names) | {"sitecustomize", "usercustomize", "pytest", "_pytest",
                                                      "conftest", "pluggy"}
"""Top-level module names that, planted in the workspace, would run in place of the real ones."""

_MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so")
_PACKAGE_MARKERS = ("__init__.py", "__init__.pyc")


def _module_names(entry: os.DirEntry, workspace: int) -> set[str]:
    """The modules an entry of the workspace's top level could be imported as."""
    stem = {entry.name.split(".", 1)[0]} if entry.name.endswith(_MODULE_SUFFIXES) else set()
    if entry.is_symlink():  # the import system follows links: it may be a module or a package
        return stem | {entry.name}
    if entry.is_dir(follow_symlinks=False):  # a directory without __init__ never wins over the real module
        fd = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=workspace)
        try:
            return {entry.name} if any(_exists(m, fd) for m in _PACKAGE_MARKERS) else set()
        finally:
            os.close(fd)
    return stem


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _in_source(task: Task, rel: str) -> bool:
    if rel in task.files or any(f.startswith(rel + "/") for f in task.files):
        return True
    return task.source_dir is not None and os.path.lexists(task.source_dir / rel)


Visit = Callable[[str, int, str], None]
"""(workspace-relative path, fd of its directory, its name in that directory)."""


def _scan(workspace: int, visit: Visit) -> None:
    """Visit every hijack candidate: top-level modules named like HIJACK_NAMES, then every conftest.py."""
    with os.scandir(workspace) as entries:
        top = [e for e in entries if _module_names(e, workspace) & HIJACK_NAMES]
    for entry in top:
        visit(entry.name, workspace, entry.name)
    for root, _dirs, files, root_fd in os.fwalk(".", dir_fd=workspace):  # never follows links
        for name in files:
            if name == "conftest.py" and root != ".":  # a top-level one was visited above
                visit(os.path.normpath(os.path.join(root, name)), root_fd, name)


def hijack_candidates(workspace: str | Path) -> list[str]:
    """The workspace's entries that could hijack a Python check; taken after setup, they are the baseline."""
    found: list[str] = []
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _scan(fd, lambda rel, dir_fd, name: found.append(rel))
    finally:
        os.close(fd)
    return sorted(found)


def remove_planted(task: Task, workspace: int, baseline: Collection[str] | None = None) -> dict[str, str]:
    """Remove hijack candidates the agent added (workspace is an open directory fd); {path: "planted"}.

    Legitimate ones are those in baseline (the candidates present before the agent ran, e.g. a cloned repo's
    conftest.py) or, without a baseline, those in the task's own files."""
    removed: dict[str, str] = {}
    keep = None if baseline is None else set(baseline)

    def visit(rel: str, dir_fd: int, name: str) -> None:
        if not (rel in keep if keep is not None else _in_source(task, rel)):
            remove_entry(name, dir_fd)
            removed[rel] = "planted"

    _scan(workspace, visit)
    return removed


def remove_entry(name: str, dir_fd: int) -> None:
    """Remove name in dir_fd, whatever it is (a link itself, never its target); nothing when it is absent."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)
