"""`with_memory_transfer`: the MTL pipeline around anyone's compiled agent graph (state with `messages`).

The graph is the MTL graph's own (`pipeline.wire` over `MTLNodes`); only `execute` differs. It first prepares the run —
the task's files in a fresh workspace, the run's sandbox opened in the per-process registry, the task's setup run
there (e.g. the Exercism setup that removes the reference solution) — as a LangGraph `task`, so a resumed run
(after an `interrupt()` inside the wrapped agent) replays the prepared workspace instead of making a new one. Then
it invokes the wrapped graph with the caller's config plus `configurable["mtl_workspace"]`: tools built by
`sandbox_tools()` run in that same sandbox.

For a `langchain.agents.create_agent` agent, `MemoryTransferMiddleware` (graph/transfer_middleware.py) is the better fit:
it appends the memories to that agent's own system prompt on every model call. Use `with_memory_transfer` for
compiled graphs that are not `create_agent` agents."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.func import task as durable
from langgraph.runtime import get_runtime
from pydantic import ValidationError

from mtl_graph.core.errors import ErrorKind, failure
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.graph import events
from mtl_graph.graph.context import MTLConfig
from mtl_graph.graph.pipeline import make_config, make_nodes, wire
from mtl_graph.graph.execute import prepare_workspace
from mtl_graph.graph.memory_tool import SEARCH_KEY, RunSearch, uses_tool
from mtl_graph.graph.nodes import MTLNodes
from mtl_graph.graph.refresh import MemoryRefresh
from mtl_graph.graph.state import MTLState
from mtl_graph.graph.support import model_name, prompt, timed
from mtl_graph.memory.pool import MemoryPool
from mtl_graph.sandbox.registry import release, sandbox_for
from mtl_graph.core.task import Task

MemoryPlacement = Literal["system_message", "config"]
"""How the memories reach a wrapped graph: a SystemMessage opening its input, or `configurable` for its own prompt."""

WORKSPACE_KEY, MEMORY_KEY, ON_STEP_KEY = "mtl_workspace", "mtl_memory_block", "mtl_on_step"
"""The `configurable` keys a wrapped run adds: the workspace path, the memory block, the per-step hook of
`sandbox_tools` (re-retrieval after a failing test run)."""


def append_memories(system_prompt: str, block: str) -> str:
    """The agent's own system prompt with the memory block at its end (the block alone when there is no prompt)."""
    if not block.strip():
        return system_prompt
    return f"{system_prompt.rstrip()}\n\n{block.strip()}" if system_prompt.strip() else block.strip()


def with_memories(system_prompt: str, config: RunnableConfig | None = None) -> str:
    """For a wrapped graph's model node: its own system prompt, the run's memories appended (memories="config")."""
    config = config if config is not None else get_config()
    return append_memories(system_prompt, (config.get("configurable") or {}).get(MEMORY_KEY) or "")


def agent_trajectory(messages: list[Any], task: Task, agent: Any) -> Trajectory:
    """A wrapped agent's run as a Trajectory; a command of `sandbox_tools` is the Step it recorded (its artifact:
    exact exit code, raw output, duration) rather than what can be parsed back from the text the model read."""
    from mtl_graph.experience.importers import trajectory_from_messages

    trajectory = trajectory_from_messages(messages, task=task.ref())
    trajectory.model = trajectory.model or model_name(agent)
    recorded = {m.tool_call_id: m.artifact for m in messages
                if isinstance(m, ToolMessage) and isinstance(m.artifact, dict) and "action" in m.artifact}
    calls = [c.get("id") for m in messages if isinstance(m, AIMessage) for c in [*m.tool_calls, *m.invalid_tool_calls]]
    if len(calls) != len(trajectory.steps):  # the importer's order is not this one: keep its steps
        return trajectory
    for i, call_id in enumerate(calls):
        if call_id in recorded:
            try:
                trajectory.steps[i] = Step.model_validate({**recorded[call_id],
                                                           "reasoning": trajectory.steps[i].reasoning})
            except ValidationError:  # another tool's artifact: the parsed step stays
                pass
    return trajectory


class _LiveSteps:
    """The `mtl_on_step` hook: tells each `sandbox_tools` command as it happens, re-retrieves on a failing test run.

    It runs inside the wrapped agent's tool, but tells its events from the `execute` node's context, so they reach
    the MTL graph's own custom stream (no `subgraphs=True` needed), once."""

    def __init__(self, refresh: MemoryRefresh | None) -> None:
        self.refresh, self.told, self.lock = refresh, [], threading.Lock()
        self.context = contextvars.copy_context()  # the execute node's (its stream writer); see _LiveRuns.get

    def __call__(self, step: Step) -> str | None:
        with self.lock:  # parallel tool calls of one reply: one re-retrieval, steps told in order
            self.told.append(step)
            return self.context.copy().run(self._tell, step)  # a copy per call: a Context runs in one thread

    def _tell(self, step: Step) -> str | None:
        if self.refresh is not None:
            return self.refresh(step)  # tells the step too
        events.step(step)
        return None

    def untold(self, steps: list[Step]) -> list[Step]:
        """Steps of the trajectory not told live (the wrapped agent's other tools), in order."""
        live, out = iter(self.told), []
        pending = next(live, None)
        for step in steps:
            if pending is not None and step.action == pending.action and step.exit_code == pending.exit_code:
                pending = next(live, None)
            else:
                out.append(step)
        return out


class _LiveRuns:
    """Each running wrapped agent's step hook, by workspace: a run resumed after an interrupt keeps what its hook
    already told and whether it already re-retrieved."""

    def __init__(self) -> None:
        self._lock, self._by_workspace = threading.Lock(), {}

    def get(self, workspace: str, make: Callable[[], "_LiveSteps"]) -> "_LiveSteps":
        with self._lock:
            if workspace not in self._by_workspace:
                self._by_workspace[workspace] = make()
            live = self._by_workspace[workspace]
        live.context = contextvars.copy_context()  # this execution's stream writer, not the interrupted one's
        return live

    def drop(self, workspace: str) -> None:
        with self._lock:
            self._by_workspace.pop(workspace, None)


_LIVE_RUNS = _LiveRuns()

NOT_RESUMABLE = ("the wrapped agent paused for human input (interrupt), but the graph has no checkpointer to "
                 "resume it from: compile it with checkpointer=... and invoke it with a thread_id")

SECOND_SYSTEM_MESSAGE = ("the wrapped agent has a system prompt of its own, so the memories reached its model as a "
                         "second system message: for a create_agent agent use MemoryTransferMiddleware, for another "
                         "graph memories='config' with with_memories(prompt, config), or pass its prompt as "
                         "system_prompt=")


class _SecondSystemMessage(BaseCallbackHandler):
    """Warns (once per run) when our SystemMessage reached the agent's model next to one of its own."""

    def __init__(self, context: contextvars.Context) -> None:
        self.context, self.warned = context, False

    def on_chat_model_start(self, serialized: Any, messages: list[list[Any]], **kwargs: Any) -> None:
        if self.warned or not any(sum(m.type == "system" for m in batch) > 1 for batch in messages):
            return
        self.warned = True
        warnings.warn(SECOND_SYSTEM_MESSAGE, RuntimeWarning, stacklevel=2)
        self.context.copy().run(events.warning, SECOND_SYSTEM_MESSAGE)


@dataclass
class _AgentRun:
    """One wrapped agent's run, between preparing it and reading its result."""

    task: Task
    prepared: dict[str, Any]
    live: _LiveSteps
    config: RunnableConfig
    opening: list[Any]

    @property
    def workspace(self) -> str:
        return self.prepared["workspace"]


class WrappedExecute:
    """The `execute` node around a wrapped agent graph: prepare the run (durably), then run the agent in it.

    `node()` is a Runnable with a sync and an async path: under `ainvoke` / `astream` the wrapped agent runs with
    its own `ainvoke` (async-only tools such as MCP tools work) and our blocking steps go to a thread."""

    def __init__(self, agent_graph: Any, nodes: MTLNodes, memories: MemoryPlacement,
                 system_prompt: str | None) -> None:
        if memories not in ("system_message", "config"):
            raise ValueError(f"memories must be 'system_message' or 'config', not {memories!r}")
        if not callable(getattr(agent_graph, "invoke", None)):
            raise TypeError("with_memory_transfer wraps a compiled graph (or any Runnable) taking {'messages': [...]}, "
                            f"not {type(agent_graph).__name__}")
        self.agent_graph, self.nodes, self.memories, self.system_prompt = agent_graph, nodes, memories, system_prompt
        self.prepare = durable(self._prepare, name="prepare")

    def node(self) -> RunnableLambda:
        return RunnableLambda(self._run, afunc=self._arun, name="execute")

    def _prepare(self, task_data: Any) -> dict[str, Any]:
        task = self.nodes.task(task_data)
        return prepare_workspace(task, self.nodes.new_workspace(task), self.nodes.config.sandbox)

    @timed("execute")
    def _run(self, state: MTLState, config: RunnableConfig) -> dict[str, Any]:
        """Prepare, then invoke the wrapped graph with the caller's config; its interrupts go up to the caller."""
        if state.get("error"):
            return {}
        prepared = self.prepare(state["task"]).result()  # replayed, not redone, when an interrupted run resumes
        if prepared.get("error"):
            return prepared
        run = self._start(state, config, prepared)
        try:
            result = self.agent_graph.invoke({"messages": run.opening}, run.config)
        except Exception as exc:
            update = self._failed(exc, run, config)
            if update is None:
                raise
            return update
        return self._finish(result, run)

    async def _arun(self, state: MTLState, config: RunnableConfig) -> dict[str, Any]:
        started = time.perf_counter()
        update: dict[str, Any] = {}
        if not state.get("error"):
            update = await self.prepare(state["task"])
        if not state.get("error") and not update.get("error"):
            run = await asyncio.to_thread(self._start, state, config, update)
            try:
                result = await self.agent_graph.ainvoke({"messages": run.opening}, run.config)
            except Exception as exc:
                failed = await asyncio.to_thread(self._failed, exc, run, config)
                if failed is None:
                    raise
                update = failed
            else:
                update = await asyncio.to_thread(self._finish, result, run)
        return {**update, "timings": {"execute": round(time.perf_counter() - started, 4)}}

    def _start(self, state: MTLState, config: RunnableConfig, prepared: dict[str, Any]) -> _AgentRun:
        task, workspace = self.nodes.task(state["task"]), prepared["workspace"]
        sandbox_for(workspace, self.nodes.config.sandbox)  # a run resumed in a new process opens it again here
        runtime = get_runtime()
        live = _LIVE_RUNS.get(workspace, lambda: _LiveSteps(self.nodes.memory_refresh(task, state, runtime)))
        block = state.get("memory_block") or ""
        extra: dict[str, Any] = {"configurable": {WORKSPACE_KEY: workspace, MEMORY_KEY: block, ON_STEP_KEY: live,
                                                  SEARCH_KEY: self._search_for(task, state, runtime, live)}}
        if self.memories == "system_message" and block:
            extra["callbacks"] = [_SecondSystemMessage(live.context)]
        return _AgentRun(task, prepared, live, merge_configs(config, extra), self._opening(task, workspace, block))

    def _search_for(self, task: Task, state: MTLState, runtime: Any, live: _LiveSteps) -> Callable[..., Any] | None:
        """What `memory_tools()` searches with in this run: its search, made from the agent's messages."""
        cfg, served, run_id = self.nodes.settings(runtime), self.nodes.served, state.get("run_id")
        if not uses_tool(cfg):
            return None
        record = (lambda ids: served.searched(run_id, ids)) if served is not None else None
        pool, retrieved = self.nodes.pool_of(cfg), state.get("retrieved") or []
        return lambda messages: RunSearch.of(pool, cfg, task, retrieved, messages, record, live.context)

    def _failed(self, exc: Exception, run: _AgentRun, config: RunnableConfig) -> dict[str, Any] | None:
        """The run's update when the wrapped agent raised; None when the exception belongs to the caller: an
        interrupt (human in the loop, answered with Command(resume=...)) or a Command for a parent graph."""
        if isinstance(exc, GraphInterrupt):
            if (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None:
                return None
            self._end(run.workspace)  # nothing could ever resume it: end the run rather than leak its workspace
            return {**run.prepared, "error": NOT_RESUMABLE, "error_kind": ErrorKind.AGENT.value}
        if isinstance(exc, GraphBubbleUp):
            return None
        self._end(run.workspace)
        return {**run.prepared, **failure(ErrorKind.AGENT, f"{type(exc).__name__}: {exc}")}

    def _finish(self, result: Any, run: _AgentRun) -> dict[str, Any]:
        self._end(run.workspace)
        messages = result.get("messages") if isinstance(result, dict) else None
        if not isinstance(messages, list):
            got = f"a dict with keys {', '.join(map(str, result))}" if isinstance(result, dict) else \
                f"a {type(result).__name__}"
            return {**run.prepared, "error": f"wrapped agent returned no messages (got {got})",
                    "error_kind": ErrorKind.AGENT.value}
        trajectory = agent_trajectory(messages, run.task, self.agent_graph)
        for step in run.live.untold(trajectory.steps):  # what the agent's other tools did is told after it
            events.step(step)
        update: dict[str, Any] = {**run.prepared, "messages": messages,
                                  "trajectory": trajectory.model_dump(mode="json")}
        if run.live.refresh is not None and run.live.refresh.hits:
            update["re_retrieved"] = run.live.refresh.hits
        return update

    def _opening(self, task: Task, workspace: str, block: str) -> list[Any]:
        system = self.system_prompt or ""
        if self.memories == "system_message":
            system = append_memories(system, block)
        opening = [SystemMessage(system)] if system.strip() else []
        return [*opening, HumanMessage(prompt("wrapped_task", instruction=task.instruction, workspace=workspace))]

    @staticmethod
    def _end(workspace: str) -> None:
        """The agent is done: its sandbox closes (whatever it left running dies) before the check runs."""
        release(workspace)
        _LIVE_RUNS.drop(workspace)


def with_memory_transfer(
    agent_graph: Any,
    pool: MemoryPool | None,
    *,
    model: BaseChatModel | str | None = None,
    judge: Any = None,
    distiller: Any = None,
    memories: MemoryPlacement = "system_message",
    system_prompt: str | None = None,
    config: MTLConfig | None = None,
    checkpointer: Any = None,
    store: Any = None,
    **settings: Any,
) -> Any:
    """Wrap any compiled LangGraph agent whose state has `messages` with memory transfer (the MTL graph's nodes).

    The task's files go into a fresh workspace, its setup runs in the run's sandbox, and the agent gets the task
    (with the workspace path) as a human message and `configurable["mtl_workspace"]` merged into the caller's
    config: tools from `mtl_graph.agent.tools.sandbox_tools()` run there, in the same sandbox, and with
    `re_retrieve` show the memories found after a failing test run. The check is the graph's tamper-proof one.
    An `interrupt()` inside the agent reaches the caller (compile with a `checkpointer`, resume with
    `Command(resume=...)`).

    `memories="system_message"` opens the input with one SystemMessage: `system_prompt` (the agent's own, for a
    graph that takes its prompt from its input) with the memories at its end. `memories="config"` sends no
    message: the agent's model node appends them to its own prompt with `with_memories(prompt, config)`. For a
    `create_agent` agent use `MemoryTransferMiddleware` instead. `model` plans, judges (tasks without a check)
    and distils."""
    cfg = make_config(config, **settings)
    nodes = make_nodes(pool, model, None, judge, distiller, cfg)
    execute = WrappedExecute(agent_graph, nodes, memories, system_prompt).node()
    return wire(nodes, execute, checkpointer, store, "mtl_wrapped_agent")


__all__ = ["with_memory_transfer", "with_memories", "append_memories", "WrappedExecute", "MemoryPlacement",
           "WORKSPACE_KEY", "MEMORY_KEY", "ON_STEP_KEY"]
