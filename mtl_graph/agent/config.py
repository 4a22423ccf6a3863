"""Settings of the default coding agent."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.llm.retry import RetrySettings


class AgentConfig(BaseModel):
    """How the default agent talks to the model and when it stops."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    action_format: Literal["tool_calls", "text"] = "tool_calls"
    """tool_calls: bash/submit tools bound to the model; text: one fenced ```bash or ```submit block per reply."""
    step_limit: int = Field(default=30, ge=1)
    """Model turns before the run ends with exit_status step_limit."""
    wall_time_limit: float | None = Field(default=1800.0, gt=0)
    """Seconds before the run ends with exit_status time_limit (None: no limit)."""
    token_limit: int | None = Field(default=None, ge=1)
    """Input + output tokens (from usage metadata) before the run ends with token_limit (None: no limit)."""
    max_consecutive_format_errors: int = Field(default=3, ge=1)
    """Malformed replies in a row before the run ends with exit_status format_errors."""
    command_timeout: float = Field(default=60.0, gt=0)
    """Seconds one command may run (never more than the wall time left)."""
    observation_cap: int = Field(default=10_000, ge=200)
    """Characters of command output fed back to the model (head and tail kept)."""
    retry: RetrySettings = Field(default_factory=RetrySettings)
    """How a model call that failed transiently (429, 5xx, timeout, dropped connection) is tried again."""
    prompts_dir: Path | None = None
    """A directory whose template files override the packaged prompts of the same name."""
