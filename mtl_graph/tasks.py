"""A task: instructions, files for the workspace, a check command, a domain label."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

INSTRUCTIONS_FILE = "task.md"
METADATA_FILE = "task.json"
FILES_DIR = "files"


class TaskError(ValueError):
    """A task could not be loaded or materialized."""


class Task(BaseModel):
    """One unit of work for the agent."""

    model_config = ConfigDict(extra="forbid")

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
    """Workspace-relative paths of test files (and files the check depends on) restored from pristine copies before the check."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else (suite name, difficulty, ...)."""

    @classmethod
    def from_dir(cls, path: str | Path) -> "Task":
        """Load a task directory: task.md (required), task.json (id, domain, check, setup), files/."""
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
        known = {"id", "domain", "check", "setup", "check_timeout"}
        try:
            return cls(
                id=str(meta.get("id") or root.resolve().name),
                instruction=text,
                domain=str(meta.get("domain") or "default"),
                source_dir=files_dir if files_dir.is_dir() else None,
                setup=meta.get("setup"),
                check=meta.get("check"),
                check_timeout=float(meta.get("check_timeout", 120.0)),
                metadata={k: v for k, v in meta.items() if k not in known},
            )
        except (ValueError, TypeError) as exc:
            raise TaskError(f"{root}: invalid task ({exc})") from None

    def materialize(self, workspace: Path) -> Path:
        """Copy the task's files into workspace (created if missing) and return it."""
        workspace.mkdir(parents=True, exist_ok=True)
        if self.source_dir is not None:
            shutil.copytree(self.source_dir, workspace, dirs_exist_ok=True)
        for rel, content in self.files.items():
            target = (workspace / rel).resolve()
            if not target.is_relative_to(workspace.resolve()):
                raise TaskError(f"task {self.id}: file path escapes the workspace: {rel}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        return workspace

    def ref(self) -> "TaskRef":
        return TaskRef(id=self.id, domain=self.domain, instruction=self.instruction, metadata=self.metadata)


class TaskRef(BaseModel):
    """The part of a task a trajectory keeps."""

    model_config = ConfigDict(extra="allow")

    id: str
    """Task id."""
    domain: str = "default"
    """Domain label."""
    instruction: str = ""
    """Instruction text."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form metadata."""
