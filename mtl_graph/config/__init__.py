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

A bad setting is one `SettingsError` line (`mtl_graph/core/errors.py`). Names load on first use: importing one
module of this package (`mtl_graph.config.names`, say) must not build the whole schema."""

from __future__ import annotations

from mtl_graph.core.faces import lazy_names

_WHERE = {
    "MTLContext": "mtl_graph.config.names", "RUN_SETTINGS": "mtl_graph.config.names",
    "SETTINGS": "mtl_graph.config.names",
    "as_context": "mtl_graph.config.names", "effective": "mtl_graph.config.names",
    "make_config": "mtl_graph.config.names",
    "AGENT_KNOBS": "mtl_graph.config.schema", "AgentSettings": "mtl_graph.config.schema",
    "LoopSettings": "mtl_graph.config.schema", "MTLConfig": "mtl_graph.config.schema",
    "ModelSettings": "mtl_graph.config.schema", "RetrievalSettings": "mtl_graph.config.schema",
    "SandboxSettings": "mtl_graph.config.schema", "Setting": "mtl_graph.config.schema",
    "agent_config": "mtl_graph.config.schema", "lifecycle_of": "mtl_graph.config.schema",
    "settings_table": "mtl_graph.config.schema",
    "SettingsError": "mtl_graph.core.errors", "ModelOptions": "mtl_graph.llm.chat",
    "RetrySettings": "mtl_graph.llm.retry",
}
"""Each public name and the module that defines it."""

__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
