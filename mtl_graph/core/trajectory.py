"""A run as data: the task, ordered steps, the submission, the verdict, tokens."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
