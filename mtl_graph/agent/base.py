"""The agent protocol: solve one task in a sandbox, return the run."""

from __future__ import annotations

from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.core.trajectory import Step, TokenUsage
from mtl_graph.sandbox.base import Sandbox
from mtl_graph.core.task import Task


class AgentResult(BaseModel):
    """What an agent run produced."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    steps: list[Step] = Field(default_factory=list)
    """Ordered actions with observations."""
    submission: str | None = None
    """What the agent submitted (final answer or summary), if it submitted."""
    exit_status: str = "submitted"
    """submitted | step_limit | time_limit | token_limit | format_errors | model_error."""
    messages: list[BaseMessage] = Field(default_factory=list)
    """The full conversation (system, user, AI, tool messages)."""
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens used."""
    error: str | None = None
    """The error message when exit_status is model_error."""
    format_errors: int = 0
    """Replies rejected as malformed (no action, several actions, bad tool arguments)."""


class Agent(Protocol):
    """A coding agent: the graph's execute node calls it once per task."""

    def run(
        self,
        task: Task,
        sandbox: Sandbox,
        model: BaseChatModel,
        memory_block: str = "",
        on_step: Any = None,
    ) -> AgentResult:
        """Solve task in sandbox; memory_block is appended once at the end of the system prompt."""
        ...
