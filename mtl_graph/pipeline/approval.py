"""Approving commands of a run paused before the agent's tools node (`build_mtl_graph(interrupt_before_tools=True)`).

`pending_calls` reads what the paused agent wants to run; approving is resuming the thread (`invoke(None, config)`);
`decline` ends the run instead: the execute stage is recorded as stopped (the steps run so far kept as its
trajectory, exit status `declined`) and the run goes straight to write back, which logs it as an error (no memory
written or credited) and removes its workspace. Both work on any checkpointer (the CLI's, a LangGraph server's)."""

from __future__ import annotations

from typing import Any

from mtl_graph.agent.loop import steps_of
from mtl_graph.core.trajectory import Trajectory
from mtl_graph.core.task import as_task

DECLINED = "declined"
"""The agent's exit status when a person declined one of its commands."""


def _agent_state(graph: Any, config: dict[str, Any]) -> Any:
    """The innermost paused subgraph state (the agent's), or None when the run is not paused inside execute."""
    snapshot = graph.get_state(config, subgraphs=True)
    if snapshot.next != ("execute",) or not snapshot.tasks or snapshot.tasks[0].state is None:
        return None
    inner = snapshot.tasks[0].state
    while inner.tasks and inner.tasks[0].state is not None:
        inner = inner.tasks[0].state
    return inner


def pending_calls(graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls (name, args, id) the paused agent is about to run; empty when it is not paused before them."""
    inner = _agent_state(graph, config)
    if inner is None or "tools" not in inner.next:
        return []
    messages = inner.values.get("messages") or []
    calls = getattr(messages[-1], "tool_calls", None) if messages else None
    return [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in calls or []]


def decline(graph: Any, config: dict[str, Any], reason: str) -> None:
    """End a run paused before a command without running it: resume the thread (`invoke(None, config)`) and write
    back logs the run with `reason` as its error and removes the workspace."""
    inner = _agent_state(graph, config)
    if inner is None:
        raise ValueError("the run is not paused before a command")
    values, task = inner.values, graph.get_state(config).values["task"]
    trajectory = Trajectory(task=as_task(task).ref(), steps=steps_of(values.get("messages") or []),
                            exit_status=DECLINED)
    graph.update_state(config, {"error": reason, "error_kind": "declined", "workspace": values.get("workspace"),
                                "trajectory": trajectory.model_dump(mode="json")}, as_node="execute")
