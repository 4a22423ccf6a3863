"""A run as data: the task, ordered steps, the submission, the verdict, tokens."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mtl_graph.core.task import TaskRef


class Outcome(StrEnum):
    """How a run ended, as memories and credit record it."""

    SUCCESS = "success"
    FAILURE = "failure"
    UNKNOWN = "unknown"


class Step(BaseModel):
    """One action and what came back."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    reasoning: str | None = None
    """The model's text before the action, if any (dropped from trajectory memories)."""
    action: str
    """The shell command, or the tool call rendered as text."""
    tool: str = "bash"
    """Tool name (``bash`` for shell commands)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Tool-call arguments, when the action was a tool call."""
    observation: str = ""
    """What the action returned."""
    exit_code: int | None = None
    """Exit status of a shell command, when known."""
    duration_s: float | None = None
    """Wall time of the action."""


class VerdictStatus(StrEnum):
    """How a run ended: ``error`` means the infrastructure (model provider, sandbox, pool) ended it, so the
    run says nothing about the agent: it is not a failure, not distilled, and credits or debits no memory."""

    PASS = "pass"
    FAIL = "fail"
    UNCERTAIN = "uncertain"
    ERROR = "error"


class Verdict(BaseModel):
    """Pass / fail / uncertain / error, with why and who decided."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    status: VerdictStatus
    """The decision."""
    reason: str = ""
    """Why (test output tail, or the judge's reasoning)."""
    source: Literal["tests", "judge", "given", "infrastructure"] = "given"
    """Who decided: the task's tests, an LLM judge, a label that came with the log, or an infrastructure error."""
    tests_modified: list[str] = Field(default_factory=list)
    """Test or check files the agent changed, deleted or replaced (the check used the pristine copies)."""
    dropped: list[str] = Field(default_factory=list)
    """Files the agent created or changed that were not carried into the check's clean room, each with why."""
    suspicions: list[str] = Field(default_factory=list)
    """Why the check's result cannot be trusted (code reaching the test runner, tests that never reported):
    a suspect run is a fail, never a success memory, never credited."""

    @classmethod
    def infrastructure_error(cls, reason: str) -> "Verdict":
        """The verdict of a run ended by the model provider, the sandbox or the pool."""
        return cls(status=VerdictStatus.ERROR, reason=reason, source="infrastructure")

    @property
    def is_error(self) -> bool:
        """True when the run ended in an infrastructure error (not a judgement of the agent's work)."""
        return self.status == VerdictStatus.ERROR

    @property
    def is_suspect(self) -> bool:
        """True when the check found the solution reaching into the test run (the run is a fail)."""
        return bool(self.suspicions)

    @property
    def outcome(self) -> Outcome:
        return {
            VerdictStatus.PASS: Outcome.SUCCESS,
            VerdictStatus.FAIL: Outcome.FAILURE,
        }.get(self.status, Outcome.UNKNOWN)


INFRASTRUCTURE_EXIT_STATUSES = frozenset({"model_error"})
"""Agent exit statuses that mean the infrastructure ended the run (the provider failed), not the agent."""


class TokenUsage(BaseModel):
    """Token counts."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    input: int = 0
    """Prompt tokens."""
    output: int = 0
    """Completion tokens."""

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        return TokenUsage(input=self.input + other.input, output=self.output + other.output)


_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
MAX_CODE_PATHS = 200
"""Paths a code link keeps (a run that touched more is linked to its first ones)."""


def clean_code_path(path: Any) -> str | None:
    """A repository-relative path as a code link keeps it, or None for one that is not (absolute after the
    repository's root is taken off, escaping it with .., empty, with control characters, or too long). Values come
    from logs and from the agent's workspace: untrusted."""
    if not isinstance(path, str) or not path or len(path) > 500 or any(ord(c) < 32 for c in path):
        return None
    normal = posixpath.normpath(path.replace("\\", "/"))
    if normal.startswith(("/", "../")) or normal in (".", ".."):
        return None
    return normal


class CodeLink(BaseModel):
    """The code a run worked on: where, at which commit (or when), and which files; what makes a memory
    distilled from the run stale when those files change (`mtl pool verify`)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    repository: str | None = Field(default=None, max_length=500)
    """The repository: its remote URL, or its directory on the machine the run was on."""
    commit: str | None = None
    """The commit the run started from (hex), when known."""
    at: datetime | None = None
    """When the run looked at the code: without a commit, verification takes the commit of that time."""
    paths: list[str] = Field(default_factory=list, max_length=MAX_CODE_PATHS)
    """Files the run read or changed, relative to the repository's root."""

    @field_validator("commit")
    @classmethod
    def _commit(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().lower()
        if not _COMMIT.match(value):
            raise ValueError("a commit is 7 to 64 hexadecimal digits")
        return value

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        cleaned = [p for p in (clean_code_path(v) for v in value) if p is not None]
        if len(cleaned) != len(value):
            raise ValueError("a path is relative to the repository's root, inside it, at most 500 characters")
        return sorted(set(cleaned))

    @property
    def linked(self) -> bool:
        """Whether there is code to check: files, and a commit or a time to check them from."""
        return bool(self.paths) and (self.commit is not None or self.at is not None)


class Trajectory(BaseModel):
    """A whole run of an agent on a task."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    task: TaskRef
    """The task."""
    steps: list[Step] = Field(default_factory=list)
    """Ordered steps."""
    submission: str | None = None
    """The final answer, patch or diff."""
    verdict: Verdict | None = None
    """Judged outcome, if judged."""
    model: str | None = None
    """The model that ran the task."""
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens used by the agent."""
    exit_status: str | None = None
    """How the agent loop ended (submitted, step_limit, time_limit, error...)."""
    source_format: str | None = None
    """The log format this trajectory was imported from, if any."""
    code: CodeLink | None = None
    """The repository, commit and files the run worked on, when it ran in (or its log names) a git repository."""

    @property
    def tests_modified(self) -> list[str]:
        """Test files the agent tampered with, as the test-based judge recorded them."""
        return list(self.verdict.tests_modified) if self.verdict else []

    def content_hash(self) -> str:
        """Hash of task + steps + submission: the same run imported twice has the same hash."""
        body = {
            "task": self.task.id,
            "instruction": self.task.instruction,
            "steps": [[s.action, s.observation] for s in self.steps],
            "submission": self.submission,
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
