"""Public factory `build_mtl_graph` (our coding agent inside); `graph/wrap.py` wraps anyone's agent."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from mtl_graph.graph.context import MTLConfig
from mtl_graph.graph.pipeline import PIPELINE, make_config, make_nodes, wire
from mtl_graph.graph.server_policy import ServerPolicy
from mtl_graph.memory.pool import MemoryPool

__all__ = ["PIPELINE", "build_mtl_graph"]


def build_mtl_graph(
    model: BaseChatModel | str | None,
    pool: MemoryPool | None,
    *,
    agent: Any = None,
    judge: Any = None,
    distiller: Any = None,
    config: MTLConfig | None = None,
    checkpointer: Any = None,
    store: Any = None,
    interrupt_before_tools: bool = False,
    policy: ServerPolicy | None = None,
    **settings: Any,
) -> Any:
    """The MTL graph around our bash-centred coding agent: plan -> retrieve -> execute -> judge -> distill -> write back.

    `model` and `pool` may be None: the model is then taken from the run's context (`model="provider:name"`)
    and the pool from MTL_POOL, when a run starts. Our agent (`DefaultAgent`) runs as the execute subgraph, one
    super-step per model call and per command; `interrupt_before_tools` pauses the run before every command (resume
    with `invoke(None, config)` on the same thread; needs a checkpointer). Another agent (anything with
    `Agent.run`) runs in a single execute node. Returns a compiled LangGraph graph.

    Settings are `config` (an `MTLConfig`) with any of its fields given as keywords over it, e.g.
    `build_mtl_graph(model, pool, memory_type="insight", top_k=3)`; each is documented on `MTLConfig`."""
    from mtl_graph.agent import DefaultAgent
    from mtl_graph.graph.execute import agent_subgraph, single_node

    agent = DefaultAgent() if agent is None else agent
    if interrupt_before_tools and not isinstance(agent, DefaultAgent):
        raise ValueError("interrupt_before_tools needs the default agent: another agent's commands run in one node")
    cfg = make_config(config, **settings)
    nodes = make_nodes(pool, model, agent, judge, distiller, cfg, policy)
    execute = (agent_subgraph(nodes, agent, interrupt_before_tools) if isinstance(agent, DefaultAgent)
               else single_node(nodes, agent))
    return wire(nodes, execute, checkpointer, store, "mtl_graph")
