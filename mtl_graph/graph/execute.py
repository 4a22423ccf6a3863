"""The execute stage: the agent loop as a subgraph of the MTL graph.

    prepare (workspace, files, setup, the snapshot for the check's clean room, the sandbox) -> agent (create_agent: one super-step per
    model call and per command) -> finish (sandbox released, trajectory, error verdict for provider failures)

The workspace lives under the workspace root, keyed by thread and run, and its path is in the state: a run killed
mid-way resumes on the same thread (with a checkpointer) from its last step, in the same files, its sandbox made
again from the path on first use. An agent that only has `Agent.run` runs in one node, as before."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from mtl_graph.agent.base import AgentResult
from mtl_graph.agent.default import DefaultAgent
from mtl_graph.agent.loop import build_agent, opening_messages, recursion_limit, result_of
from mtl_graph.agent.guards import AgentRunState
from mtl_graph.agent.tools import WORKSPACE_BASE
from mtl_graph.experience.task_check import SetupFailed, run_setup
from mtl_graph.experience.clean_room import take_snapshot
from mtl_graph.core.errors import ErrorKind, failure
from mtl_graph.core.trajectory import INFRASTRUCTURE_EXIT_STATUSES, Step, Trajectory, Verdict
from mtl_graph.graph import events
from mtl_graph.graph.context import MTLContext, agent_config
from mtl_graph.graph.lease import workspace_base, workspace_path
from mtl_graph.graph.memory_tool import SearchGate, run_search, search_tool, uses_tool
from mtl_graph.graph.refresh import MemoryRefresh
from mtl_graph.graph.state import MTLState, state_subset
from mtl_graph.graph.support import model_name, timed
from mtl_graph.sandbox import registry

OUTPUT = ("workspace", "messages", "trajectory", "verdict", "error", "error_kind", "re_retrieved")
"""What the execute stage hands back to the MTL graph."""


class MTLAgentState(AgentRunState):
    """The agent's state inside the MTL graph: the run's task and memories, for re-retrieval."""

    task: NotRequired[Any]
    run_id: NotRequired[str | None]
    retrieved: NotRequired[list[dict[str, Any]]]
    re_retrieved: NotRequired[list[dict[str, Any]]]
    refreshed: NotRequired[bool]


ExecuteState = state_subset(
    "ExecuteState", ("task", "run_id", "memory_block", "retrieved", *OUTPUT),
    "The execute subgraph's state: what it reads from the run and what the agent leaves behind.",
    refreshed=bool, exit_status=str | None, malformed=int)


class RunModels:
    """The chat model of each run in progress, resolved once (a "provider:model" string is not a new client per
    call, a scripted model is not replayed from the start at each call); made again after a resume elsewhere."""

    def __init__(self, nodes: Any, keep: int = 64) -> None:
        self.nodes, self.keep = nodes, keep
        self.by_workspace: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()  # the eval harness runs several tasks through one graph at once

    def __call__(self, runtime: Any, state: dict[str, Any]) -> Any:
        key = str(state.get("workspace"))
        with self.lock:
            if key in self.by_workspace:
                return self.by_workspace[key]
        model = self.nodes.model_for(runtime)
        with self.lock:
            model = self.by_workspace.setdefault(key, model)
            while len(self.by_workspace) > self.keep:  # runs paused and never resumed
                self.by_workspace.popitem(last=False)
        return model

    def done(self, workspace: str | None) -> None:
        with self.lock:
            self.by_workspace.pop(str(workspace), None)


def prepare_workspace(task: Task, workspace: Path, kind: str) -> dict[str, Any]:
    """The task's files in workspace and its setup run in the workspace's registry sandbox (the one the agent's
    `sandbox_tools` will use), then a snapshot of it taken aside for the check's clean room: `workspace`, or
    `error` (the sandbox then closed)."""
    prepared: dict[str, Any] = {"workspace": str(workspace)}
    try:
        task.materialize(workspace)
        run_setup(task, registry.sandbox_for(workspace, kind))
        take_snapshot(workspace)  # the pristine task after its setup: what the check's clean room is made of
    except Exception as exc:
        registry.release(workspace)
        prepared.update(failure(ErrorKind.SETUP, str(exc) if isinstance(exc, SetupFailed)
                                else f"{type(exc).__name__}: {exc}"))
    return prepared


def open_workspace(nodes: Any, state: dict[str, Any], runtime: Any, config: RunnableConfig | None) -> dict[str, Any]:
    """The run's workspace, keyed by thread and run, prepared (`prepare_workspace`); an update with `error` when
    the run has no usable model or the preparation fails."""
    try:
        task = nodes.task(state["task"])
    except ValueError as exc:  # a thread update put a task there that the server's policy refuses
        return {"workspace": None, **failure(ErrorKind.INVALID_TASK, str(exc))}
    workspace = workspace_path(nodes.config.workspace_root, config, state.get("run_id"), task.id)
    try:
        nodes.model_for(runtime)  # a run without a usable model ends here, with the model's own message
    except Exception as exc:
        return {"workspace": str(workspace), "error": f"{type(exc).__name__}: {exc}", "error_kind": ErrorKind.MODEL.value}
    return prepare_workspace(task, workspace, nodes.config.sandbox)


def agent_ended(result: AgentResult, task_ref: Any, model: Any) -> dict[str, Any]:
    """The state update of a finished agent: its trajectory, and an `error` verdict when the provider ended it."""
    events.agent_end(result)
    trajectory = Trajectory(task=task_ref, steps=result.steps, submission=result.submission,
                            model=model_name(model), tokens=result.tokens, exit_status=result.exit_status)
    update: dict[str, Any] = {"error": None, "error_kind": None}
    if result.exit_status in INFRASTRUCTURE_EXIT_STATUSES:  # the provider ended the run, not the agent
        update.update(failure(ErrorKind.MODEL, str(result.error or result.exit_status)))
        trajectory.verdict = Verdict.infrastructure_error(update["error"])
        update["verdict"] = trajectory.verdict.model_dump(mode="json")
    return {**update, "trajectory": trajectory.model_dump(mode="json")}


def _refresher(nodes: Any, state: dict[str, Any], runtime: Any) -> MemoryRefresh | None:
    return None if state.get("refreshed") else nodes.memory_refresh(nodes.task(state["task"]), state, runtime)


def step_hook(nodes: Any):
    """The agent's step hook in the MTL graph: the step event, and (re_retrieve) one more retrieval after the
    first failing test run, its memories shown with that observation."""

    def hook(step: Step, request: Any) -> tuple[str | None, dict[str, Any]]:
        refresh = _refresher(nodes, request.state, request.runtime)
        if refresh is None:
            events.step(step)
            return None, {}
        note = refresh(step)
        update: dict[str, Any] = {"refreshed": True} if refresh.used else {}
        return note, ({**update, "re_retrieved": refresh.hits} if refresh.hits else update)

    return hook


def agent_subgraph(nodes: Any, agent: DefaultAgent, interrupt_before_tools: bool = False) -> Any:
    """The execute node of the MTL graph: prepare -> the create_agent agent -> finish, run as a subgraph."""
    cfg = agent.config
    models = RunModels(nodes)

    def settings(runtime: Any) -> Any:
        return agent_config(nodes.settings(runtime), cfg)

    def search_of(runtime: Any) -> Any:
        return run_search(nodes, runtime.state, runtime)

    loop = build_agent(cfg, models, settings=settings, on_step=step_hook(nodes), sandbox_kind=nodes.config.sandbox,
                       context_schema=MTLContext, interrupt_before_tools=interrupt_before_tools,
                       state_schema=MTLAgentState, extra_tools=[search_tool(search_of)],
                       extra_middleware=[SearchGate(lambda runtime: uses_tool(nodes.settings(runtime)))])

    def prepare(state: ExecuteState, runtime: Runtime[MTLContext], config: RunnableConfig) -> dict[str, Any]:
        update = open_workspace(nodes, state, runtime, config)
        if update.get("error"):
            return update
        task = nodes.task(state["task"])
        opening = opening_messages(settings(runtime), task, state.get("memory_block", ""))
        return {**update, "messages": opening,
                "refreshed": False, "exit_status": None}

    def finish(state: ExecuteState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        registry.release(state.get("workspace"))
        if state.get("error") and not state.get("exit_status"):  # prepare failed: nothing ran
            return {}
        task = nodes.task(state["task"])
        model = models(runtime, state)
        models.done(state.get("workspace"))
        return agent_ended(result_of(state, settings(runtime)), task.ref(), model)

    graph = StateGraph(ExecuteState, context_schema=MTLContext)
    graph.add_node("prepare", prepare)
    graph.add_node("agent", loop)
    graph.add_node("finish", finish)
    graph.add_edge(START, "prepare")
    graph.add_conditional_edges("prepare", lambda s: "finish" if s.get("error") else "agent", ["agent", "finish"])
    graph.add_edge("agent", "finish")
    graph.add_edge("finish", END)
    subgraph = graph.compile(name="execute")

    @timed("execute")
    def execute(state: MTLState, runtime: Runtime[MTLContext], config: RunnableConfig) -> dict[str, Any]:
        """Run the execute subgraph: each step checkpointed before the next (a killed run loses no step)."""
        if state.get("error"):
            return {}
        try:
            limit = max(int(config.get("recursion_limit") or 0), recursion_limit(settings(runtime)) + 10)
        except ValueError as exc:  # a per-run agent setting out of range: one clear line, nothing runs
            return failure(ErrorKind.INVALID_SETTINGS, str(exc))
        configurable = config.get("configurable") or {}
        checkpointed = configurable.get(CONFIG_KEY_CHECKPOINTER) is not None
        if nodes.policy is not None:  # set on every (re)entry, over whatever the client's config says
            configurable = {**configurable, WORKSPACE_BASE: str(workspace_base(nodes.config.workspace_root))}
        try:
            with events.relayed():
                out = subgraph.invoke(state, {**config, "configurable": configurable, "recursion_limit": limit},
                                      durability="sync" if checkpointed else None)
        except GraphBubbleUp:  # paused (approval): the sandbox waits for the resume
            raise
        except BaseException:  # whatever left the agent mid-run must not leave its processes running
            task = nodes.task(state["task"])
            registry.release(workspace_path(nodes.config.workspace_root, config, state.get("run_id"), task.id))
            raise
        return {key: out[key] for key in OUTPUT if key in out}

    return execute


def single_node(nodes: Any, agent: Any) -> Any:
    """The execute node for an agent that only has `Agent.run`: the whole run in one node."""

    @timed("execute")
    def execute(state: MTLState, runtime: Runtime[MTLContext], config: RunnableConfig) -> dict[str, Any]:
        if state.get("error"):
            return {}
        update = open_workspace(nodes, state, runtime, config)
        if update.get("error"):
            return update
        task, workspace = nodes.task(state["task"]), update["workspace"]
        refresh = _refresher(nodes, state, runtime)
        try:
            model = nodes.model_for(runtime)
            with events.relayed():
                result = nodes.agent_for(nodes.settings(runtime)).run(task, registry.sandbox_for(workspace), model,
                                   memory_block=state.get("memory_block", ""), on_step=refresh or events.step)
        finally:
            registry.release(workspace)
        if refresh is not None and refresh.hits:
            update["re_retrieved"] = refresh.hits
        return {**update, **agent_ended(result, task.ref(), model), "messages": result.messages}

    return execute
