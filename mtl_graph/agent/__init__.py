"""The default coding agent (bash-centred; tool-call or text actions; `create_agent` + middleware).

Names are imported on first use: `mtl_graph.agent.config` (the settings the CLI's flags are made from) must not
pull in LangChain."""

from __future__ import annotations

from mtl_graph.core.faces import lazy_names

_WHERE = {
    "Agent": ".base", "AgentResult": ".base", "AgentConfig": ".config", "DefaultAgent": ".default", "TOOLS": ".actions",
    "build_agent": ".loop",
}

__all__ = sorted(_WHERE)


__getattr__, __dir__ = lazy_names(__name__, _WHERE)
