"""Build-time configuration of the MTL graph and its run-time context.

The per-run knobs are defined once, in `mtl_graph/run_settings.py` (`RunSettings`); `MTLConfig` adds what only a
build can choose, and `MTLContext` (the graph's `context_schema`) is derived there with every field optional.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from mtl_graph.memory.formats import FormatName
from mtl_graph.memory.lifecycle import LifecycleConfig

from mtl_graph.run_settings import (AGENT_KNOBS, MTLContext, RunSettings, SettingsError, agent_config, as_context,
                                    merged)

__all__ = ["AGENT_KNOBS", "MTLConfig", "MTLContext", "RunSettings", "SettingsError", "agent_config", "effective"]


class MTLConfig(RunSettings):  # type: ignore[misc,valid-type]
    """Defaults fixed when the graph is built: the run settings plus what only a build can choose."""

    distill_formats: list[FormatName] | None = None
    """Formats distilled after a run (default: the retrieved format; insight when zero-shot)."""
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
    lifecycle_settings: LifecycleConfig = Field(default_factory=LifecycleConfig)
    """How the online loop ranks, floors, decays and quarantines (lifecycle on); relevance_floor overrides its floor."""


def lifecycle_of(cfg: MTLConfig) -> LifecycleConfig | None:
    """The run's lifecycle settings; None when the lifecycle is off (the research's retrieval)."""
    if cfg.lifecycle == "off":
        return None
    if cfg.relevance_floor is None:
        return cfg.lifecycle_settings
    return cfg.lifecycle_settings.model_copy(update={"relevance_floor": cfg.relevance_floor})


def effective(config: MTLConfig, context: Any) -> MTLConfig:
    """The build-time config with the run's context applied (nested settings merge field by field)."""
    context = as_context(context)
    return config if context is None else merged(config, context)
