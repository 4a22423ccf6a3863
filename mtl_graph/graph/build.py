"""Public factory `build_mtl_graph` (our coding agent inside); `graph/wrap.py` wraps anyone's agent."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from mtl_graph.graph.context import MTLConfig, MTLContext
from mtl_graph.graph.nodes import MTLNodes
from mtl_graph.graph.retry import provider_retry
from mtl_graph.graph.server_policy import ServerPolicy
from mtl_graph.graph.review import review
from mtl_graph.graph.state import MTLInput, MTLOutput, MTLState
from mtl_graph.memory.pool import MemoryPool

PIPELINE = ("plan", "retrieve", "execute", "judge", "distill", "write_back")
MODEL_NODES = ("plan", "judge", "distill")
"""The nodes that call a model: a transient provider error there is retried by their RetryPolicy."""


def _default_distiller(trajectory: Any, formats: Sequence[str], model: BaseChatModel | None) -> Any:
    from mtl_graph.experience.distill import distill

    return distill(trajectory, list(formats), model)


def _config(memory_type: str, top_k: int, online: bool, hold_one_out: bool, distill_formats: Sequence[str] | None,
            exclude_domains: Sequence[str] | None, **extra: Any) -> MTLConfig:
    return MTLConfig(memory_type=memory_type, top_k=top_k, online=online, hold_one_out=hold_one_out,
                     distill_formats=list(distill_formats) if distill_formats else None,
                     exclude_domains=list(exclude_domains or []), **extra)


def _unless_error(target: str) -> Callable[[MTLState], str]:
    """Route to `target`, or straight to write back when the stage recorded an expected failure."""

    def route(state: MTLState) -> str:
        return "write_back" if state.get("error") else target

    route.__name__ = f"{target}_unless_error"
    return route


def _wire(nodes: MTLNodes, execute: Any, checkpointer: Any, store: Any, name: str) -> Any:
    graph = StateGraph(MTLState, context_schema=MTLContext, input_schema=MTLInput, output_schema=MTLOutput)
    steps = {"plan": nodes.plan, "retrieve": nodes.retrieve, "execute": execute, "judge": nodes.judge,
             "distill": nodes.distill, "write_back": nodes.write_back}
    retry = provider_retry(nodes.config.node_retry_attempts, nodes.config.node_retry_interval)
    nodes.retry_attempts = retry.max_attempts  # the nodes raise transient errors only while the policy retries
    for step in PIPELINE:
        graph.add_node(step, steps[step], retry_policy=retry if step in MODEL_NODES else None)
    # Whatever a node raises (after its retries) is logged and its workspace removed before the run fails.
    graph.set_node_defaults(error_handler=nodes.crashed)
    graph.add_edge(START, PIPELINE[0])
    for a, b in zip(PIPELINE[:-2], PIPELINE[1:-1]):
        graph.add_conditional_edges(a, _unless_error(b), [b, "write_back"])
    graph.add_node("review", review)

    def review_or_write_back(state: MTLState, runtime: Runtime[MTLContext]) -> str:
        """A person reviews the proposed memories first when the run asks for it (`review_memories`)."""
        wanted = nodes._settings(runtime).review_memories and state.get("distilled")
        return "review" if wanted else "write_back"

    graph.add_conditional_edges("distill", review_or_write_back, ["review", "write_back"])
    graph.add_edge("review", "write_back")
    graph.add_edge("write_back", END)
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
    interrupt_before_tools: bool = False,
    policy: ServerPolicy | None = None,
    **config: Any,
) -> Any:
    """The MTL graph around our bash-centred coding agent: plan -> retrieve -> execute -> judge -> distill -> write back.

    `model` and `pool` may be None: the model is then taken from the run's context (`model="provider:name"`)
    and the pool from MTL_POOL, when a run starts. Our agent (`DefaultAgent`) runs as the execute subgraph, one
    super-step per model call and per command; `interrupt_before_tools` pauses the run before every command (resume
    with `invoke(None, config)` on the same thread; needs a checkpointer). Another agent (anything with
    `Agent.run`) runs in a single execute node. Returns a compiled LangGraph graph."""
    from mtl_graph.agent import DefaultAgent
    from mtl_graph.graph.execute import agent_subgraph, single_node

    agent = DefaultAgent() if agent is None else agent
    if interrupt_before_tools and not isinstance(agent, DefaultAgent):
        raise ValueError("interrupt_before_tools needs the default agent: another agent's commands run in one node")
    cfg = _config(memory_type, top_k, online, hold_one_out, distill_formats, exclude_domains, sandbox=sandbox,
                  **config)
    nodes = MTLNodes(pool, model, agent, judge, distiller or _default_distiller, cfg, policy)
    execute = (agent_subgraph(nodes, agent, interrupt_before_tools) if isinstance(agent, DefaultAgent)
               else single_node(nodes, agent))
    return _wire(nodes, execute, checkpointer, store, "mtl_graph")
