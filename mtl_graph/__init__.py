"""mtl_graph: memory transfer for coding agents (plan, retrieve, execute, judge, distill, write back).

The public API is one import: ``from mtl_graph import build_mtl_graph, MemoryPool, Task, ...``. Names load on first
use, so ``import mtl_graph`` (and ``mtl --help``) pulls in neither LangChain nor Qdrant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtl_graph.core.faces import lazy_names

_WHERE = {
    "build_mtl_graph": "mtl_graph.pipeline.build",
    "with_memory_transfer": "mtl_graph.pipeline.wrap",
    "with_memories": "mtl_graph.pipeline.wrap",
    "MemoryTransferMiddleware": "mtl_graph.pipeline.middleware",
    "memory_tools": "mtl_graph.pipeline.memory_tool",
    "MTLConfig": "mtl_graph.config.schema",
    "MTLContext": "mtl_graph.config.names",
    "MemoryPool": "mtl_graph.memory.pool.pool",
    "PoolStore": "mtl_graph.memory.store.pool_store",
    "Task": "mtl_graph.core.task",
    "Trajectory": "mtl_graph.core.trajectory",
    "ScriptedChatModel": "mtl_graph.llm.scripted",
    "bash_call": "mtl_graph.llm.scripted",
    "submit_call": "mtl_graph.llm.scripted",
}
"""Each public name and the module that defines it."""

__all__ = sorted(_WHERE)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads each name on first use
    from mtl_graph.config.names import MTLContext
    from mtl_graph.config.schema import MTLConfig
    from mtl_graph.core.task import Task
    from mtl_graph.core.trajectory import Trajectory
    from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.memory.store.pool_store import PoolStore
    from mtl_graph.pipeline.build import build_mtl_graph
    from mtl_graph.pipeline.memory_tool import memory_tools
    from mtl_graph.pipeline.middleware import MemoryTransferMiddleware
    from mtl_graph.pipeline.wrap import with_memories, with_memory_transfer


__getattr__, __dir__ = lazy_names(__name__, _WHERE)
