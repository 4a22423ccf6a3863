"""A task: instructions, files for the workspace, a check command, a domain label."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mtl_graph.core.errors import MTLError

INSTRUCTIONS_FILE = "task.md"
METADATA_FILE = "task.json"
FILES_DIR = "files"
TESTS_KEY = "tests"
"""task.json key listing the files the check depends on."""
SOLUTION_KEY = "solution"
"""task.json key listing the files that are the solution (the only ones carried into the check's clean room)."""


class TaskError(MTLError, ValueError):
    """A task could not be loaded or materialized."""


class Task(BaseModel):
    """One unit of work for the agent."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(min_length=1, max_length=300)
    """Stable identifier; the contamination guard never retrieves a memory made from the same id."""
    instruction: str = Field(min_length=1, max_length=100_000)
    """What the agent is asked to do (task.md)."""
    domain: str = Field(default="default", min_length=1, max_length=100)
    """Benchmark or domain label (hold-one-out excludes memories of the same domain)."""
    files: dict[str, str] = Field(default_factory=dict)
    """Files written into the workspace before the run: relative path -> text content."""
    source_dir: Path | None = None
    """A directory whose contents are copied into the workspace before the run."""
    setup: str | None = None
    """A shell command run in the workspace before the agent starts (failure aborts the run)."""
    setup_network: bool = False
    """Whether the setup command may reach the network (to fetch dependencies); the agent and the check never can."""
    check: str | None = None
    """A shell command run in the workspace after the agent; exit code 0 means the task passed."""
    check_timeout: float = 120.0
    """Seconds the check may take."""
    test_files: list[str] = Field(default_factory=list)
    """Workspace-relative files the check depends on (tests, a check script); always the pristine copies."""
    solution_files: list[str] = Field(default_factory=list)
    """Workspace-relative files that are the solution: the only agent files the check sees (none: see clean_room)."""
    check_files: dict[str, str] = Field(default_factory=dict)
    """Check-only files: relative path -> text content, written into the check's clean room after the solution is
    carried in, never into the workspace or its snapshot (hidden test data too large for a command line)."""
    tests_load_solution: bool = True
    """Whether the check's test process loads the solution's code (imports it); False for a task whose tests only
    read the files and outputs the solution produced, which the clean room alone grades (no tamper scan)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else (suite name, difficulty, ...)."""

    @field_validator("test_files", "solution_files")
    @classmethod
    def _relative_test_files(cls, paths: list[str]) -> list[str]:
        for rel in paths:
            check_relative(rel)
        return list(dict.fromkeys(paths))

    @field_validator("check_files")
    @classmethod
    def _relative_check_files(cls, files: dict[str, str]) -> dict[str, str]:
        for rel in files:
            check_relative(rel)
        return files

    @model_validator(mode="after")
    def _check_files_are_the_check_s_own(self) -> "Task":
        # A check-only path the workspace also has would put the hidden data where the agent reads, or let the
        # agent's file stand in for it.
        if clash := sorted(set(self.check_files) & (set(self.files) | set(self.test_files) | set(self.solution_files))):
            raise ValueError(f"check-only files must not be workspace files too: {', '.join(clash)}")
        return self

    @classmethod
    def from_dir(cls, path: str | Path) -> "Task":
        """Load a task directory: task.md (required), task.json (id, domain, check, setup, tests), files/.

        ``tests`` lists the workspace files the check depends on; each must exist under files/ (its pristine copy)."""
        root = Path(path)
        if not root.is_dir():
            raise TaskError(f"task directory not found: {root}")
        instructions = root / INSTRUCTIONS_FILE
        if not instructions.is_file():
            raise TaskError(f"{root}: no {INSTRUCTIONS_FILE} with the task's instructions")
        try:
            text = instructions.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError:
            raise TaskError(f"{instructions}: not UTF-8 text") from None
        if not text:
            raise TaskError(f"{instructions}: empty instructions")
        meta: dict[str, Any] = {}
        meta_path = root / METADATA_FILE
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise TaskError(f"{meta_path}: invalid JSON ({exc})") from None
            if not isinstance(meta, dict):
                raise TaskError(f"{meta_path}: expected a JSON object")
        files_dir = root / FILES_DIR
        known = {"id", "domain", "check", "setup", "check_timeout", TESTS_KEY, SOLUTION_KEY}
        tests = _test_list(meta.get(TESTS_KEY, []), meta_path, files_dir)
        solution = _path_list(meta.get(SOLUTION_KEY, []), meta_path, SOLUTION_KEY)
        try:
            return cls(
                id=str(meta.get("id") or root.resolve().name),
                instruction=text,
                domain=str(meta.get("domain") or "default"),
                source_dir=files_dir if files_dir.is_dir() else None,
                setup=meta.get("setup"),
                check=meta.get("check"),
                check_timeout=float(meta.get("check_timeout", 120.0)),
                test_files=tests,
                solution_files=solution,
                metadata={k: v for k, v in meta.items() if k not in known},
            )
        except (ValueError, TypeError) as exc:
            raise TaskError(f"{root}: invalid task ({exc})") from None

    def materialize(self, workspace: Path) -> Path:
        """Copy the task's files into workspace (created if missing) and return it.

        Symbolic links are never followed out of the task directory: one that resolves inside it is copied as a
        (relative) link, any other is refused with a TaskError before anything is copied.
        """
        workspace.mkdir(parents=True, exist_ok=True)
        if self.source_dir is not None:
            _copy_task_dir(self.source_dir, workspace, self.id)
        for rel, content in self.files.items():
            target = (workspace / rel).resolve()
            if not target.is_relative_to(workspace.resolve()):
                raise TaskError(f"task {self.id}: file path escapes the workspace: {rel}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        return workspace

    def ref(self) -> "TaskRef":
        return TaskRef(id=self.id, domain=self.domain, instruction=self.instruction, metadata=self.metadata)


def check_relative(rel: str) -> PurePosixPath:
    """A workspace-relative path that stays inside the workspace; anything else is a TaskError."""
    if not isinstance(rel, str) or not rel.strip() or "\0" in rel or "\\" in rel:
        raise TaskError(f"test file path must be a non-empty relative path (no NUL, no backslash), got {rel!r}")
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or path == PurePosixPath("."):
        raise TaskError(f"test file path must stay inside the workspace: {rel!r}")
    return path


def _path_list(value: Any, meta_path: Path, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"{meta_path}: '{key}' must be a list of workspace-relative paths")
    for rel in value:
        try:
            check_relative(rel)
        except TaskError as exc:
            raise TaskError(f"{meta_path}: {exc}") from None
    return value


def _test_list(value: Any, meta_path: Path, files_dir: Path) -> list[str]:
    for rel in _path_list(value, meta_path, TESTS_KEY):
        if not (files_dir / rel).is_file():
            raise TaskError(f"{meta_path}: test file {rel!r} is not in {FILES_DIR}/ (its pristine copy)")
    return value


def _copy_task_dir(source: Path, workspace: Path, task_id: str) -> None:
    """Copy source into workspace: regular files and directories, and links that stay inside source."""
    try:
        root = source.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise TaskError(f"task {task_id}: cannot read its files directory {source}: {exc}") from None
    plan: list[tuple[str, Path, str | None]] = []  # (kind, relative path, link target)
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk does not descend into linked directories
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            rel = path.relative_to(root)
            if path.is_symlink():
                plan.append(("link", rel, _inside_link(path, root, task_id, rel)))
            elif path.is_dir():
                plan.append(("dir", rel, None))
            elif path.is_file():
                plan.append(("file", rel, None))
            else:
                raise TaskError(f"task {task_id}: {rel} is not a regular file, directory or link; refusing it")
    for kind, rel, target in plan:  # every entry was checked before the first copy: a refusal copies nothing
        dest = workspace / rel
        if kind == "dir":
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if kind == "link":
            dest.symlink_to(target)  # type: ignore[arg-type]
        else:
            shutil.copy2(root / rel, dest, follow_symlinks=False)


def _inside_link(path: Path, root: Path, task_id: str, rel: Path) -> str:
    """The target to give a copy of the link at path, relative; TaskError when it resolves outside root."""
    target = os.readlink(path)
    try:
        resolved = path.resolve()  # follows the whole chain
    except (OSError, RuntimeError) as exc:  # a loop
        raise TaskError(f"task {task_id}: symlink {rel} -> {target} cannot be resolved ({exc}); refusing it") from None
    if not resolved.is_relative_to(root):
        raise TaskError(
            f"task {task_id}: symlink {rel} -> {target} points outside the task directory; refusing to copy it"
        )
    return os.path.relpath(resolved, path.parent)


def as_task(value: Any) -> Task:
    """A task from a Task, a dict, or the path of a task directory."""
    if isinstance(value, Task):
        return value
    if isinstance(value, (str, Path)):
        return Task.from_dir(value)
    if isinstance(value, dict):
        return Task.model_validate(value)
    raise TaskError(f"task must be a Task, a dict or a task directory path, not {type(value).__name__}")


class TaskRef(BaseModel):
    """The part of a task a trajectory keeps."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    id: str
    """Task id."""
    domain: str = "default"
    """Domain label."""
    instruction: str = ""
    """Instruction text."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form metadata."""
