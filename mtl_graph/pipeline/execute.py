"""The execute stage, one for every agent: a subgraph of the MTL graph.

    prepare (the run's workspace, files, setup, the snapshot for the check's clean room, the sandbox; the agent's
    opening messages) -> agent (the host's) -> finish (sandbox released, trajectory, error verdict for provider
    failures)

An `AgentHost` says only what differs between agents: the agent node, its opening messages, how a finished run
reads back. Our agent (`build_mtl_graph`) and anyone's compiled graph (`with_memory_transfer`) run through this
one code path: the run's hooks in `configurable` (the step hook `__mtl_on_step`, the memory search `__mtl_search`,
the memory block `mtl_memory_block`), the recursion limit, a served graph's workspace base, each step
checkpointed before the next, and the sandbox of a run that raised closed. The workspace is keyed by thread and
run and its path is in the state: a run killed mid-way resumes on the same thread (with a checkpointer) from its
last step, in the same files. An agent that only has `Agent.run` runs in one node (`single_node`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime, get_runtime

from mtl_graph.llm.chat import model_label
from mtl_graph.agent.base import AgentResult
from mtl_graph.agent.tools import ON_STEP_KEY, WORKSPACE_BASE
from mtl_graph.core.errors import ErrorKind, failure
from mtl_graph.core.task import Task
from mtl_graph.core.trajectory import INFRASTRUCTURE_EXIT_STATUSES, Trajectory, Verdict
from mtl_graph.judging.clean_room import take_snapshot
from mtl_graph.judging.ground_truth import SetupFailed, run_setup
from mtl_graph.pipeline import events
from mtl_graph.pipeline.code_probe import code_link_of
from mtl_graph.config import MTLContext
from mtl_graph.pipeline.lease import OPEN, close_workspace, resumable, workspace_base, workspace_path
from mtl_graph.pipeline.memory_tool import SEARCH_KEY, search_factory
from mtl_graph.pipeline.state import RunState, state_subset
from mtl_graph.pipeline.steps import RunSteps, re_retrieved_in
from mtl_graph.pipeline.metering import timed
from mtl_graph.sandbox import registry

INPUT = ("task", "run_id", "memory_block", "retrieved")
"""What the execute stage reads from the run."""
OUTPUT = ("workspace", "messages", "trajectory", "verdict", "error", "error_kind", "re_retrieved")
"""What the execute stage hands back to the MTL graph."""
MEMORY_KEY = "mtl_memory_block"
"""`configurable` key: the run's memory block (a wrapped graph's own prompt appends it: `with_memories`)."""

ExecuteState = state_subset(
    "ExecuteState", (*INPUT, *OUTPUT),
    "The execute subgraph's state: what it reads from the run and what the agent leaves behind.",
    exit_status=str | None, malformed=int)


class AgentHost(Protocol):
    """What differs between the agents the execute stage runs."""

    needs_model: bool
    """Whether the agent runs on the run's chat model (checked before the workspace is made); a wrapped graph
    brings its own."""
    memories_in_config: bool
    """Whether the agent may read the memories from `configurable[MEMORY_KEY]` (`with_memories`): a wrapped graph.
    Ours has them in its system prompt; the key is not set for it (a LangGraph checkpointer copies such keys into
    every checkpoint's metadata)."""

    def agent(self) -> Any:
        """The agent node: a compiled graph over the execute state's `messages` (and `workspace`), or a Runnable."""

    def opening(self, task: Task, workspace: str, block: str, runtime: Any) -> list[BaseMessage]:
        """The agent's first messages: the task, the memories (`block`) where this agent reads them."""

    def ended(self, state: dict[str, Any], task: Task, runtime: Any) -> dict[str, Any]:
        """The finished run's update: its `trajectory` (and an `error` verdict when the provider ended it)."""

    def step_limit(self, runtime: Any) -> int:
        """Super-steps the agent may take in this run (its recursion limit)."""


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


def open_workspace(nodes: Any, state: dict[str, Any], runtime: Any, config: RunnableConfig | None,
                   needs_model: bool = True) -> dict[str, Any]:
    """The run's workspace, keyed by thread and run, prepared (`prepare_workspace`); an update with `error` when
    the run has no usable model (`needs_model`) or the preparation fails. A run no checkpointer can resume has its
    workspace closed at exit if the process ends mid-run; one found there already is an earlier attempt's, closed
    first (the run starts its execute stage over)."""
    try:
        task = nodes.task(state["task"])
    except ValueError as exc:  # a thread update put a task there that the server's policy refuses
        return {"workspace": None, **failure(ErrorKind.INVALID_TASK, str(exc))}
    workspace = workspace_path(nodes.config.sandbox.workspace_root, config, state.get("run_id"), task.id)
    try:
        if needs_model:
            nodes.model_for(runtime)  # a run without a usable model ends here, with the model's own message
    except Exception as exc:
        return {"workspace": str(workspace), **failure(ErrorKind.MODEL, f"{type(exc).__name__}: {exc}")}
    if workspace.exists():  # an earlier attempt of this run that died (a server killed and retrying it) made it
        close_workspace(workspace, keep=False)
    if not resumable():
        OPEN.add(workspace)
    return prepare_workspace(task, workspace, nodes.config.sandbox.kind)


def agent_ended(result: AgentResult, task_ref: Any, model: Any) -> dict[str, Any]:
    """The state update of a finished agent: its trajectory, and an `error` verdict when the provider ended it."""
    events.agent_end(result)
    trajectory = Trajectory(task=task_ref, steps=result.steps, submission=result.submission,
                            model=model_label(model) or "unknown", tokens=result.tokens, exit_status=result.exit_status)
    update: dict[str, Any] = {"error": None, "error_kind": None}
    if result.exit_status in INFRASTRUCTURE_EXIT_STATUSES:  # the provider ended the run, not the agent
        update.update(failure(ErrorKind.MODEL, str(result.error or result.exit_status)))
        trajectory.verdict = Verdict.infrastructure_error(update["error"])
        update["verdict"] = trajectory.verdict.model_dump(mode="json")
    return {**update, "trajectory": trajectory.model_dump(mode="json")}


def probe_code(nodes: Any, state: dict[str, Any]) -> Any:
    """The run's code link when its workspace is a git repository (code_probe.py), read in its sandbox."""
    workspace = state.get("workspace")
    if not workspace or not (Path(workspace) / ".git").exists():
        return None
    try:
        sandbox = registry.sandbox_for(workspace, nodes.config.sandbox.kind)
    except Exception:  # the workspace is gone: no link, the run goes on
        return None
    return code_link_of(sandbox, workspace, nodes.task(state["task"]))


def run_hooks(nodes: Any, state: RunState, runtime: Any, since: int = 0) -> dict[str, Any]:
    """The run's hooks for its agent's tools (`configurable`), the same in every host: the step hook (the step
    events, re-retrieval after a failing test run) and the memory search."""
    task = nodes.task(state.task)
    return {ON_STEP_KEY: RunSteps(nodes.memory_refresh(task, state, runtime), since),
            SEARCH_KEY: search_factory(nodes, state, runtime, since)}


def execute_stage(nodes: Any, host: AgentHost) -> Any:
    """The execute node of the MTL graph: prepare -> the host's agent -> finish, run as a subgraph (sync and
    async: under `ainvoke` the agent runs with its own `ainvoke`, so async-only tools work)."""

    def prepare(state: dict[str, Any], runtime: Runtime[MTLContext], config: RunnableConfig) -> dict[str, Any]:
        update = open_workspace(nodes, state, runtime, config, host.needs_model)
        if update.get("error"):
            return update
        task = nodes.task(state["task"])
        opening = host.opening(task, update["workspace"], state.get("memory_block") or "", runtime)
        return {**update, "messages": opening, "exit_status": None}

    def finish(state: dict[str, Any], runtime: Runtime[MTLContext]) -> dict[str, Any]:
        ran = not (state.get("error") and not state.get("exit_status"))
        code = probe_code(nodes, state) if ran else None
        registry.release(state.get("workspace"))  # what the agent left running dies before the check
        if not ran:  # nothing ran, or the agent failed: said already
            return {}
        update = host.ended(state, nodes.task(state["task"]), runtime)
        if code is not None and isinstance(update.get("trajectory"), dict):
            update["trajectory"]["code"] = code.model_dump(mode="json")
        hits = re_retrieved_in(state.get("messages") or [])
        return {**update, "re_retrieved": hits} if hits else update

    graph = StateGraph(ExecuteState, context_schema=MTLContext)
    graph.add_node("prepare", prepare)
    graph.add_node("agent", host.agent())
    graph.add_node("finish", finish)
    graph.add_edge(START, "prepare")
    graph.add_conditional_edges("prepare", lambda s: "finish" if s.get("error") else "agent", ["agent", "finish"])
    graph.add_edge("agent", "finish")
    graph.add_edge("finish", END)
    subgraph = graph.compile(name="execute")

    def entry(state: RunState, config: RunnableConfig) -> tuple[dict[str, Any], dict[str, Any]]:
        """The subgraph's config for this entry (first or resumed), or a failure update."""
        runtime = get_runtime()
        try:
            limit = max(int(config.get("recursion_limit") or 0), host.step_limit(runtime) + 10)
        except ValueError as exc:  # a per-run agent setting out of range: one clear line, nothing runs
            return {}, failure(ErrorKind.INVALID_SETTINGS, str(exc))
        try:
            hooks = run_hooks(nodes, state, runtime)
        except ValueError as exc:  # a thread update put a task there that the server's policy refuses
            return {}, {"workspace": None, **failure(ErrorKind.INVALID_TASK, str(exc))}
        configurable = {**(config.get("configurable") or {}), **hooks}
        if host.memories_in_config:
            configurable[MEMORY_KEY] = state.memory_block
        if nodes.policy is not None:  # set on every (re)entry, over whatever the client's config says
            configurable[WORKSPACE_BASE] = str(workspace_base(nodes.config.sandbox.workspace_root))
        return {**config, "configurable": configurable, "recursion_limit": limit}, {}

    def durability(config: RunnableConfig) -> Any:
        return "sync" if (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None else None

    def crashed(state: RunState, config: RunnableConfig) -> None:
        """Whatever left the agent mid-run must not leave its processes running."""
        try:
            task = nodes.task(state.task)
        except ValueError:  # a task the run never had: no workspace was made for it
            return
        registry.release(workspace_path(nodes.config.sandbox.workspace_root, config, state.run_id, task.id))

    @timed("execute")
    def execute(state: RunState, config: RunnableConfig) -> dict[str, Any]:
        """Run the execute subgraph: each step checkpointed before the next (a killed run loses no step)."""
        if state.error:
            return {}
        inner, failed = entry(state, config)
        if failed:
            return failed
        try:
            with events.relayed():
                out = subgraph.invoke(state.values(*INPUT), inner, durability=durability(config))
        except GraphBubbleUp:  # paused (an interrupt): the sandbox waits for the resume
            raise
        except BaseException:
            crashed(state, config)
            raise
        return {key: out[key] for key in OUTPUT if key in out}

    @timed("execute")
    async def aexecute(state: RunState, config: RunnableConfig) -> dict[str, Any]:
        if state.error:
            return {}
        inner, failed = await asyncio.to_thread(entry, state, config)  # the pool and the policy block: a thread
        if failed:
            return failed
        try:
            with events.relayed():
                out = await subgraph.ainvoke(state.values(*INPUT), inner, durability=durability(config))
        except GraphBubbleUp:
            raise
        except BaseException:
            await asyncio.to_thread(crashed, state, config)
            raise
        return {key: out[key] for key in OUTPUT if key in out}

    return RunnableLambda(execute, afunc=aexecute, name="execute")


def single_node(nodes: Any, agent: Any) -> Any:
    """The execute node for an agent that only has `Agent.run`: the whole run in one node, its steps through the
    same step hook."""

    @timed("execute")
    def execute(state: RunState, runtime: Runtime[MTLContext], config: RunnableConfig) -> dict[str, Any]:
        if state.error:
            return {}
        update = open_workspace(nodes, state.values(*INPUT), runtime, config)
        if update.get("error"):
            return update
        task, workspace = nodes.task(state.task), update["workspace"]
        steps = RunSteps(nodes.memory_refresh(task, state, runtime))
        try:
            model = nodes.model_for(runtime)
            with events.relayed():
                result = nodes.agent_for(nodes.settings(runtime)).run(task, registry.sandbox_for(workspace), model,
                                   memory_block=state.memory_block, on_step=steps)
        finally:
            registry.release(workspace)
        if steps.refresh is not None and steps.refresh.hits:
            update["re_retrieved"] = steps.refresh.hits
        return {**update, **agent_ended(result, task.ref(), model), "messages": result.messages}

    return execute
