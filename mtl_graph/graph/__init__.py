"""The MTL LangGraph graphs."""

from mtl_graph.graph.build import build_mtl_graph
from mtl_graph.graph.context import MTLConfig, MTLContext
from mtl_graph.graph.memory_tool import memory_tools
from mtl_graph.graph.transfer_middleware import MemoryTransferMiddleware
from mtl_graph.graph.state import MTLOutput, MTLState, RunState
from mtl_graph.graph.wrap import with_memories, with_memory_transfer
from mtl_graph.chat import ModelNotConfigured

__all__ = ["build_mtl_graph", "with_memory_transfer", "with_memories", "MemoryTransferMiddleware", "MTLConfig",
           "MTLContext", "RunState", "MTLState", "MTLOutput", "ModelNotConfigured", "memory_tools"]
