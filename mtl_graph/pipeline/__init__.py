"""The MTL LangGraph graphs: the stages, the hosts that run them (`build_mtl_graph`, `with_memory_transfer`,
`MemoryTransferMiddleware`) and the memory tool.

Names load on first use, so a module of the package (`events`, `run_log`, ...) imports without the hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtl_graph.core.faces import lazy_names

_WHERE = {
    "build_mtl_graph": ".build", "with_memory_transfer": ".wrap", "with_memories": ".wrap",
    "MemoryTransferMiddleware": ".middleware", "memory_tools": ".memory_tool",
    "RunState": ".state", "MTLState": ".state", "MTLOutput": ".state",
    "MTLConfig": "mtl_graph.config.schema", "MTLContext": "mtl_graph.config.names",
    "ModelNotConfigured": "mtl_graph.llm.chat",
}
"""Each public name and the module that defines it."""

__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_names(__name__, _WHERE)

if TYPE_CHECKING:  # what type checkers and IDEs see
    from mtl_graph.config.names import MTLContext
    from mtl_graph.config.schema import MTLConfig
    from mtl_graph.llm.chat import ModelNotConfigured
    from mtl_graph.pipeline.build import build_mtl_graph
    from mtl_graph.pipeline.memory_tool import memory_tools
    from mtl_graph.pipeline.middleware import MemoryTransferMiddleware
    from mtl_graph.pipeline.state import MTLOutput, MTLState, RunState
    from mtl_graph.pipeline.wrap import with_memories, with_memory_transfer
