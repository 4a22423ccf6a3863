"""Public factory `build_mtl_graph` (our coding agent inside); `graph/wrap.py` wraps anyone's agent."""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph

from mtl_graph.graph.context import MTLConfig, MTLContext
from mtl_graph.graph.nodes import MTLNodes
from mtl_graph.graph.state import MTLInput, MTLOutput, MTLState
from mtl_graph.memory.pool import MemoryPool

PIPELINE = ("plan", "retrieve", "execute", "judge", "distill", "write_back")


def _default_distiller(trajectory: Any, formats: Sequence[str], model: BaseChatModel | None) -> Any:
    from mtl_graph.experience.distill import distill

    return distill(trajectory, list(formats), model)


def _config(memory_type: str, top_k: int, online: bool, hold_one_out: bool, distill_formats: Sequence[str] | None,
            exclude_domains: Sequence[str] | None, **extra: Any) -> MTLConfig:
    return MTLConfig(memory_type=memory_type, top_k=top_k, online=online, hold_one_out=hold_one_out,
                     distill_formats=list(distill_formats) if distill_formats else None,
                     exclude_domains=list(exclude_domains or []), **extra)


def _wire(nodes: MTLNodes, execute: Any, checkpointer: Any, store: Any, name: str) -> Any:
    graph = StateGraph(MTLState, context_schema=MTLContext, input_schema=MTLInput, output_schema=MTLOutput)
    steps = {"plan": nodes.plan, "retrieve": nodes.retrieve, "execute": execute, "judge": nodes.judge,
             "distill": nodes.distill, "write_back": nodes.write_back}
    for step in PIPELINE:
        graph.add_node(step, steps[step])
    graph.add_edge(START, PIPELINE[0])
    for a, b in zip(PIPELINE, PIPELINE[1:]):
        graph.add_edge(a, b)
    graph.add_edge(PIPELINE[-1], END)
    return graph.compile(checkpointer=checkpointer, store=store, name=name)


def build_mtl_graph(
    model: BaseChatModel | str | None,
    pool: MemoryPool | None,
    *,
    memory_type: str = "insight",
    top_k: int = 3,
    agent: Any = None,
    judge: Any = None,
    distill_formats: Sequence[str] | None = None,
    distiller: Any = None,
    online: bool = True,
    exclude_domains: Sequence[str] | None = None,
    hold_one_out: bool = False,
    sandbox: str = "auto",
    checkpointer: Any = None,
    store: Any = None,
    **config: Any,
) -> Any:
    """The MTL graph around our bash-centred coding agent: plan -> retrieve -> execute -> judge -> distill -> write back.

    `model` and `pool` may be None: the model is then taken from the run's context (`model="provider:name"`)
    and the pool from MTL_POOL, when a run starts. Returns a compiled LangGraph graph."""
    if agent is None:
        from mtl_graph.agent import DefaultAgent

        agent = DefaultAgent()
    cfg = _config(memory_type, top_k, online, hold_one_out, distill_formats, exclude_domains, sandbox=sandbox,
                  **config)
    nodes = MTLNodes(pool, model, agent, judge, distiller or _default_distiller, cfg)
    return _wire(nodes, nodes.execute, checkpointer, store, "mtl_graph")
