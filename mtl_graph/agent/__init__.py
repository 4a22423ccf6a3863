"""The default coding agent (bash-centred; tool-call or text actions; `create_agent` + middleware).

Names are imported on first use: `mtl_graph.agent.config` (the settings the CLI's flags are made from) must not
pull in LangChain."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "Agent": "base", "AgentResult": "base", "AgentConfig": "config", "DefaultAgent": "default", "TOOLS": "actions",
    "build_agent": "loop",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
