"""Public factories: `build_mtl_graph` (our coding agent inside) and `with_memory_transfer` (any agent inside)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from mtl_graph.experience.planted import hijack_candidates
from mtl_graph.graph import events
from mtl_graph.graph.context import MTLConfig, MTLContext
from mtl_graph.graph.nodes import MTLNodes
from mtl_graph.graph.retry import provider_retry
from mtl_graph.graph.review import review
from mtl_graph.graph.state import MTLInput, MTLOutput, MTLState
from mtl_graph.graph.support import as_task, model_name, prompt, timed
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
    nodes = MTLNodes(pool, model, agent, judge, distiller or _default_distiller, cfg)
    execute = (agent_subgraph(nodes, agent, interrupt_before_tools) if isinstance(agent, DefaultAgent)
               else single_node(nodes, agent))
    return _wire(nodes, execute, checkpointer, store, "mtl_graph")


def with_memory_transfer(
    agent_graph: Any,
    pool: MemoryPool | None,
    *,
    model: BaseChatModel | str | None = None,
    memory_type: str = "insight",
    top_k: int = 3,
    judge: Any = None,
    distill_formats: Sequence[str] | None = None,
    distiller: Any = None,
    online: bool = True,
    exclude_domains: Sequence[str] | None = None,
    hold_one_out: bool = False,
    checkpointer: Any = None,
    store: Any = None,
    **config: Any,
) -> Any:
    """Wrap any compiled LangGraph agent whose state has `messages` (e.g. `create_agent(...)`) with memory transfer.

    Memories go into a system message before the task; the agent's messages become the trajectory. The task's
    files are materialised in a fresh workspace whose path is in the task message and in the agent's
    `config["configurable"]["mtl_workspace"]` (for its tools); the task's check runs there. `model` is used for
    planning, judging (when the task has no check) and distillation."""
    cfg = _config(memory_type, top_k, online, hold_one_out, distill_formats, exclude_domains, **config)
    nodes = MTLNodes(pool, model, None, judge, distiller or _default_distiller, cfg)

    @timed("execute")
    def execute(state: MTLState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        if state.get("error"):
            return {}
        from mtl_graph.experience.importers import trajectory_from_messages

        task = as_task(state["task"])
        workspace = nodes.new_workspace(task)
        try:
            task.materialize(workspace)
            baseline = hijack_candidates(workspace)
        except Exception as exc:
            return {"workspace": str(workspace), "error": f"{type(exc).__name__}: {exc}"}
        messages = ([SystemMessage(state["memory_block"])] if state.get("memory_block") else [])
        messages.append(HumanMessage(prompt("wrapped_task", instruction=task.instruction, workspace=str(workspace))))
        try:
            # Tools of the wrapped agent find the workspace in their RunnableConfig.
            result = agent_graph.invoke({"messages": messages},
                                        config={"configurable": {"mtl_workspace": str(workspace)}})
        except Exception as exc:
            return {"workspace": str(workspace), "error": f"wrapped agent failed: {type(exc).__name__}: {exc}"}
        out = result["messages"]
        trajectory = trajectory_from_messages(out, task=task.ref())
        trajectory.model = trajectory.model or model_name(agent_graph)
        for step in trajectory.steps:  # the wrapped agent's own stream is not ours: its commands are told after it
            events.step(step)
        return {"workspace": str(workspace), "messages": out, "trajectory": trajectory.model_dump(mode="json"),
                "check_baseline": baseline}

    return _wire(nodes, execute, checkpointer, store, "mtl_wrapped_agent")
