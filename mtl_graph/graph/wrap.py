"""`with_memory_transfer`: the MTL pipeline around anyone's compiled agent graph (state with `messages`)."""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from mtl_graph.experience.planted import hijack_candidates
from mtl_graph.graph import events
from mtl_graph.graph.build import _config, _default_distiller, _wire
from mtl_graph.graph.context import MTLContext
from mtl_graph.graph.nodes import MTLNodes
from mtl_graph.graph.state import MTLState
from mtl_graph.graph.support import as_task, model_name, prompt, timed
from mtl_graph.memory.pool import MemoryPool


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
