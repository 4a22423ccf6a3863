"""The one configuration: `MTLConfig` (nested groups, `schema`), the flat names a run, a flag or an `MTL_*` variable
uses (`names`), and the process environment (`environment`)."""

from __future__ import annotations

from mtl_graph.config.names import MTLContext, SettingsError, as_context, effective, make_config
from mtl_graph.config.schema import (AGENT_KNOBS, AgentSettings, LoopSettings, MTLConfig, ModelSettings,
                                     RetrievalSettings, SandboxSettings, agent_config, lifecycle_of)

__all__ = ["AGENT_KNOBS", "AgentSettings", "LoopSettings", "MTLConfig", "MTLContext", "ModelSettings",
           "RetrievalSettings", "SandboxSettings", "SettingsError", "agent_config", "as_context", "effective",
           "lifecycle_of", "make_config"]
