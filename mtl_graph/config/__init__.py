"""The one configuration: `MTLConfig` (nested groups, `schema`), the flat names a run, a flag or an `MTL_*` variable
uses (`names`), and the process environment (`environment`).

Names load on first use: importing a module of this package (`mtl_graph.config.environment`, say) must not build
the whole schema, so `mtl --help` stays quick."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "MTLContext": "names", "SettingsError": "names", "as_context": "names", "effective": "names",
    "make_config": "names",
    "AGENT_KNOBS": "schema", "AgentSettings": "schema", "LoopSettings": "schema", "MTLConfig": "schema",
    "ModelSettings": "schema", "RetrievalSettings": "schema", "SandboxSettings": "schema", "agent_config": "schema",
    "lifecycle_of": "schema",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
