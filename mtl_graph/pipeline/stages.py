"""The pipeline, defined once: its stages in order, the rule that routes a failed stage to write back, and the
graph every factory compiles from them. The middleware runs the same stages under the same rule (`run_stages`),
so all hosts route, credit and log a run identically."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from mtl_graph.llm.chat import check_model
from mtl_graph.config import MTLConfig, MTLContext, make_config  # noqa: F401 - the factories' config
from mtl_graph.pipeline.nodes import MTLNodes
from mtl_graph.pipeline.review import review
from mtl_graph.pipeline.services import StageServices
from mtl_graph.pipeline.state import MTLInput, MTLOutput, RunState, apply_update

PIPELINE = ("plan", "retrieve", "execute", "judge", "distill", "write_back")


def default_distiller(trajectory: Any, formats: Sequence[str], model: BaseChatModel | None) -> Any:
    from mtl_graph.distill.distillers import distill

    return distill(trajectory, list(formats), model)


def make_nodes(pool: Any, model: Any, agent: Any, judge: Any, distiller: Any, config: MTLConfig,
               policy: Any = None) -> MTLNodes:
    """The stages over their shared services (`StageServices`, fixed from here on). Every model call they make is
    retried under the run's `retry` settings at the call itself (no node RetryPolicy on top), so every host retries
    alike and retries never multiply.

    A model given here is checked now (provider, package, API key, options): a factory with a model it cannot use
    raises `ModelNotConfigured` in one line instead of building a graph whose every run ends in an error."""
    if model is not None:
        check_model(model, config.model.options)
    return MTLNodes(StageServices.of(pool, model, agent, judge, distiller or default_distiller, config, policy))


def stops_short(state: RunState) -> bool:
    """The routing rule: a stage that recorded an expected failure sends the run straight to write back."""
    return bool(state.error)


def _unless_error(target: str) -> Callable[[RunState], str]:
    def route(state: RunState) -> str:
        return "write_back" if stops_short(state) else target

    route.__name__ = f"{target}_unless_error"
    return route


def run_stages(nodes: MTLNodes, run: dict[str, Any], runtime: Any, stages: Sequence[str]) -> dict[str, Any]:
    """Run these stages (not execute, not write back) over `run` (a host's run values, kept as a dict: the
    middleware's) in place, each over the run's RunState, under the graph's routing rule."""
    for stage in stages:
        state = RunState.of(run)
        if stops_short(state):
            break
        apply_update(run, getattr(nodes, stage)(state, runtime))
    return run


def wire(nodes: MTLNodes, execute: Any, checkpointer: Any, store: Any, name: str) -> Any:
    """The compiled MTL graph: the stages in order, `execute` being the host's, review when the run asks."""
    graph = StateGraph(RunState, context_schema=MTLContext, input_schema=MTLInput, output_schema=MTLOutput)
    steps = {"plan": nodes.plan, "retrieve": nodes.retrieve, "execute": execute, "judge": nodes.judge,
             "distill": nodes.distill, "write_back": nodes.write_back}
    for step in PIPELINE:
        graph.add_node(step, steps[step])
    # Whatever a node raises (after its retries) is logged and its workspace removed before the run fails.
    graph.set_node_defaults(error_handler=nodes.crashed)
    graph.add_edge(START, PIPELINE[0])
    for a, b in zip(PIPELINE[:-2], PIPELINE[1:-1]):
        graph.add_conditional_edges(a, _unless_error(b), [b, "write_back"])
    graph.add_node("review", review)

    def review_or_write_back(state: RunState, runtime: Runtime[MTLContext]) -> str:
        """A person reviews the proposed memories first when the run asks for it (`review_memories`)."""
        wanted = nodes.settings(runtime).loop.review_memories and state.distilled
        return "review" if wanted else "write_back"

    graph.add_conditional_edges("distill", review_or_write_back, ["review", "write_back"])
    graph.add_edge("review", "write_back")
    graph.add_edge("write_back", END)
    return graph.compile(checkpointer=checkpointer, store=store, name=name)
