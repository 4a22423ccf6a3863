"""The one configuration: `MTLConfig` (nested groups, `schema`), the flat names a run, a flag or an `MTL_*` variable
uses (`names`), and the process environment (`environment`).

- `schema`: `MTLConfig` and its groups (`ModelSettings`, `RetrievalSettings`, `AgentSettings`, `SandboxSettings`,
  `LoopSettings`; `retry` is `RetrySettings` and `model_options` is `ModelOptions`, both of `mtl_graph.llm`),
  `settings_table` (every flat name's place), `agent_config` and `lifecycle_of` (what a run's stages read);
- `names`: `MTLContext` (LangGraph's `context_schema`), `make_config` (the factories' keywords), `effective` (one
  run's config), `as_context`, and `SETTINGS` / `RUN_SETTINGS`;
- `environment`: `Settings` (every MTL_* variable) and `get_settings()`, imported from there: reading the
  environment loads pydantic-settings, which `mtl --help` (it builds its flags from `names`) does without. The
  process's own variables (`ProcessSettings`) are in `mtl_graph/core/environment.py`, below the memory pool that
  reads them.

A bad setting is one `SettingsError` line (`mtl_graph/core/errors.py`)."""

from __future__ import annotations

from mtl_graph.config.names import RUN_SETTINGS, SETTINGS, MTLContext, as_context, effective, make_config
from mtl_graph.config.schema import (AGENT_KNOBS, AgentSettings, LoopSettings, MTLConfig, ModelSettings,
                                     RetrievalSettings, SandboxSettings, Setting, agent_config, lifecycle_of,
                                     settings_table)
from mtl_graph.core.errors import SettingsError
from mtl_graph.llm.chat import ModelOptions
from mtl_graph.llm.retry import RetrySettings

__all__ = ["AGENT_KNOBS", "AgentSettings", "LoopSettings", "MTLConfig", "MTLContext", "ModelOptions", "ModelSettings",
           "RUN_SETTINGS", "RetrievalSettings", "RetrySettings", "SETTINGS", "SandboxSettings", "Setting",
           "SettingsError", "agent_config", "as_context", "effective", "lifecycle_of", "make_config", "settings_table"]
