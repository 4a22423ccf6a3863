"""mtl_graph: memory transfer for coding agents (plan, retrieve, execute, judge, distill, write back).

Names are imported on first use, so `import mtl_graph` (and `mtl --help`) does not pull in LangChain."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {"ScriptedChatModel": "mtl_graph.llm.scripted", "bash_call": "mtl_graph.llm.scripted", "submit_call": "mtl_graph.llm.scripted"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
