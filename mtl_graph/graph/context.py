"""Build-time configuration and run-time context of the MTL graph."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MemoryChoice = Literal["insight", "summary", "workflow", "trajectory", "none"]


class MTLConfig(BaseModel):
    """Defaults fixed when the graph is built; `MTLContext` can override most of them per run."""

    model_config = ConfigDict(extra="forbid")

    memory_type: MemoryChoice = "insight"
    """Memory format retrieved into the agent's prompt ("none" = zero-shot)."""
    top_k: int = Field(default=3, ge=0, le=50)
    """How many memories to retrieve."""
    online: bool = True
    """Distil each run and write the memories back into the pool."""
    distill_formats: list[Literal["insight", "summary", "workflow", "trajectory"]] | None = None
    """Formats distilled after a run (default: the retrieved format; insight when zero-shot)."""
    exclude_domains: list[str] = Field(default_factory=list)
    """Never retrieve memories whose source domain is one of these."""
    hold_one_out: bool = False
    """Also exclude memories from the task's own domain (the research protocol's cross-domain setting)."""
    exclude_task_ids: list[str] = Field(default_factory=list)
    """Never retrieve memories made from these tasks (the task's own id is always excluded)."""
    only_ids: list[str] | None = None
    """Retrieve only among these memory ids (seeded pool subsets, cross-model experiments)."""
    judge_also: bool = False
    """Also run the LLM judge on runs the tests decide; kept as judge_verdict to measure the judge's accuracy."""
    re_retrieve: bool = False
    """Retrieve once more, matched to the error, when a test run fails mid-task (off: the paper's protocol)."""
    sandbox: str = "auto"
    """Sandbox backend: auto, bwrap, local or docker."""
    run_log: Path | None = None
    """JSONL file every run is appended to (None: MTL_RUN_LOG)."""
    workspace_root: Path | None = None
    """Where task workspaces are created (None: a temporary directory)."""
    keep_workspaces: bool = False
    """Keep each run's workspace after the run (for inspection)."""
    observation_chars: int = Field(default=300, ge=20)
    """Trajectory memories show at most this many characters of each observation."""
    plan_max_chars: int = Field(default=2000, ge=100)
    """Plans longer than this (untrusted model output) are cut before being used as a query."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """init_chat_model settings for provider:model strings: base_url, max_tokens, temperature, timeout."""
    review_memories: bool = False
    """Pause before write back (LangGraph interrupt) so a person approves, edits or rejects each new memory."""
    node_retry_attempts: int = Field(default=3, ge=1, le=10)
    """Attempts of a model-calling node (plan, judge, distill) when its provider fails transiently (429, 5xx)."""
    node_retry_interval: float = Field(default=1.0, ge=0.0, le=600.0)
    """Seconds before a model-calling node's first retry; doubled before each next one."""


@dataclass
class MTLContext:
    """Run-time settings (LangGraph `context_schema`); None keeps the graph's build-time value."""

    model: str | None = None
    """Chat model as provider:model, resolved when the run starts."""
    memory_type: MemoryChoice | None = None
    """Memory format to retrieve ("none" = zero-shot)."""
    top_k: int | None = None
    """How many memories to retrieve."""
    online: bool | None = None
    """Write distilled memories back into the pool."""
    exclude_domains: list[str] | None = None
    """Domains whose memories are never retrieved."""
    hold_one_out: bool | None = None
    """Exclude memories from the task's own domain."""
    exclude_task_ids: list[str] | None = None
    """Never retrieve memories made from these tasks."""
    only_ids: list[str] | None = None
    """Retrieve only among these memory ids."""
    re_retrieve: bool | None = None
    """Retrieve once more when a test run fails mid-task."""
    judge_also: bool | None = None
    """Also run the LLM judge when the tests decide (to measure its accuracy)."""
    model_options: dict[str, Any] | None = None
    """Model settings: base_url, max_tokens, temperature, timeout (e.g. a local OpenAI-compatible server)."""
    review_memories: bool | None = None
    """Pause before write back so a person approves, edits or rejects each new memory."""


def effective(config: MTLConfig, context: Any) -> MTLConfig:
    """The build-time config with the run's context applied."""
    if context is None:
        return config
    if isinstance(context, dict):
        context = MTLContext(**{k: v for k, v in context.items() if k in MTLContext.__dataclass_fields__})
    names = ("memory_type", "top_k", "online", "exclude_domains", "hold_one_out", "exclude_task_ids", "only_ids",
             "re_retrieve", "judge_also", "model_options", "review_memories")
    updates = {name: getattr(context, name) for name in names if getattr(context, name, None) is not None}
    return config.model_copy(update=updates) if updates else config
