"""The graph's configuration (`MTLConfig`, nested groups: `mtl_graph/run_settings.py`) and its run-time context
(`MTLContext`, the flat names a run sets: `mtl_graph/run_context.py`)."""

from __future__ import annotations

from mtl_graph.run_context import MTLContext, SettingsError, as_context, effective, make_config
from mtl_graph.run_settings import (AGENT_KNOBS, AgentSettings, LoopSettings, MTLConfig, ModelSettings,
                                    RetrievalSettings, SandboxSettings, agent_config, lifecycle_of)

__all__ = ["AGENT_KNOBS", "AgentSettings", "LoopSettings", "MTLConfig", "MTLContext", "ModelSettings",
           "RetrievalSettings", "SandboxSettings", "SettingsError", "agent_config", "as_context", "effective",
           "lifecycle_of", "make_config"]
