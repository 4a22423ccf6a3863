"""The MTL LangGraph graphs."""

from mtl_graph.pipeline.build import build_mtl_graph
from mtl_graph.config import MTLConfig, MTLContext
from mtl_graph.pipeline.memory_tool import memory_tools
from mtl_graph.pipeline.middleware import MemoryTransferMiddleware
from mtl_graph.pipeline.state import MTLOutput, MTLState, RunState
from mtl_graph.pipeline.wrap import with_memories, with_memory_transfer
from mtl_graph.llm.chat import ModelNotConfigured

__all__ = ["build_mtl_graph", "with_memory_transfer", "with_memories", "MemoryTransferMiddleware", "MTLConfig",
           "MTLContext", "RunState", "MTLState", "MTLOutput", "ModelNotConfigured", "memory_tools"]
