"""`with_memory_transfer`: the MTL pipeline around anyone's compiled agent graph (state with `messages`).

The graph is the MTL graph's own (`pipeline.wire` over `MTLNodes`) and so is its execute stage
(`execute.execute_stage`, the one our agent runs in): it prepares the run (the task's files in the run's
workspace, the run's sandbox opened in the per-process registry, the task's setup run there, e.g. the Exercism
setup that removes the reference solution) as a checkpointed node, so a resumed run (after an `interrupt()` inside
the wrapped agent) goes on in the prepared workspace instead of making a new one. `GraphAgentHost` is all that
differs: its agent node invokes the wrapped graph with the caller's config plus `configurable["mtl_workspace"]`,
where tools built by `sandbox_tools()` run, in that same sandbox.

For a `langchain.agents.create_agent` agent, `MemoryTransferMiddleware` (pipeline/middleware.py) is the better fit:
it appends the memories to that agent's own system prompt on every model call. Use `with_memory_transfer` for
compiled graphs that are not `create_agent` agents."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any, Literal

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import ValidationError

from mtl_graph.llm.chat import model_label
from mtl_graph.agent.tools import ON_STEP_KEY, recorded_step
from mtl_graph.core.errors import ErrorKind, failure
from mtl_graph.core.task import Task
from mtl_graph.core.trajectory import Step, Trajectory
from mtl_graph.pipeline import events
from mtl_graph.config import MTLConfig
from mtl_graph.pipeline.execute import MEMORY_KEY, execute_stage, prepare_workspace
from mtl_graph.pipeline.memory_tool import SEARCH_TOOL
from mtl_graph.pipeline.nodes import MTLNodes
from mtl_graph.pipeline.stages import make_config, make_nodes, wire
from mtl_graph.pipeline.prompting import prompt
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.sandbox.registry import sandbox_for

MemoryPlacement = Literal["system_message", "config"]
"""How the memories reach a wrapped graph: a SystemMessage opening its input, or `configurable` for its own prompt."""

WORKSPACE_KEY = "mtl_workspace"
"""The `configurable` key a wrapped run adds: the workspace path (beside every host's `mtl_memory_block`,
`__mtl_on_step` and `__mtl_search`: pipeline/execute.py)."""


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
    return _trajectory(messages, task, agent)[0]


def _trajectory(messages: list[Any], task: Task, agent: Any) -> tuple[Trajectory, list[Step]]:
    """The trajectory, and its steps our tools did not record (the agent's own tools: their steps were not told
    as they happened)."""
    from mtl_graph.importers import trajectory_from_messages

    trajectory = trajectory_from_messages(messages, task=task.ref())
    trajectory.model = trajectory.model or model_label(agent) or "unknown"
    recorded = {m.tool_call_id: step for m in messages if (step := recorded_step(m)) is not None}
    calls = [c.get("id") for m in messages if isinstance(m, AIMessage) for c in [*m.tool_calls, *m.invalid_tool_calls]]
    if len(calls) != len(trajectory.steps):  # the importer's order is not this one: keep its steps
        return trajectory, [s for s in trajectory.steps if s.tool not in ("bash", "submit", SEARCH_TOOL)]
    untold = []
    for i, call_id in enumerate(calls):
        try:
            trajectory.steps[i] = Step.model_validate({**recorded[call_id], "reasoning": trajectory.steps[i].reasoning})
        except (KeyError, ValidationError):  # another tool's: the parsed step stays
            untold.append(trajectory.steps[i])
    return trajectory, untold


NOT_RESUMABLE = ("the wrapped agent paused for human input (interrupt), but the graph has no checkpointer to "
                 "resume it from: compile it with checkpointer=... and invoke it with a thread_id")

SECOND_SYSTEM_MESSAGE = ("the wrapped agent has a system prompt of its own, so the memories reached its model as a "
                         "second system message: for a create_agent agent use MemoryTransferMiddleware, for another "
                         "graph memories='config' with with_memories(prompt, config), or pass its prompt as "
                         "system_prompt=")


class _SecondSystemMessage(BaseCallbackHandler):
    """Warns (once per run) when our SystemMessage reached the agent's model next to one of its own."""

    def __init__(self) -> None:
        self.warned = False

    def on_chat_model_start(self, serialized: Any, messages: list[list[Any]], **kwargs: Any) -> None:
        if self.warned or not any(sum(m.type == "system" for m in batch) > 1 for batch in messages):
            return
        self.warned = True
        warnings.warn(SECOND_SYSTEM_MESSAGE, RuntimeWarning, stacklevel=2)
        events.warning(SECOND_SYSTEM_MESSAGE)


class GraphAgentHost:
    """Anyone's compiled agent graph in the execute stage: its `agent` node invokes the graph (`ainvoke` under an
    async run, so async-only tools such as MCP tools work) on the task as a human message, with the caller's
    config plus `configurable["mtl_workspace"]`, where `sandbox_tools()` runs its commands."""

    needs_model = False
    memories_in_config = True

    def __init__(self, agent_graph: Any, nodes: MTLNodes, memories: MemoryPlacement,
                 system_prompt: str | None) -> None:
        if memories not in ("system_message", "config"):
            raise ValueError(f"memories must be 'system_message' or 'config', not {memories!r}")
        if not callable(getattr(agent_graph, "invoke", None)):
            raise TypeError("with_memory_transfer wraps a compiled graph (or any Runnable) taking {'messages': [...]}, "
                            f"not {type(agent_graph).__name__}")
        self.agent_graph, self.nodes, self.memories, self.system_prompt = agent_graph, nodes, memories, system_prompt

    def agent(self) -> RunnableLambda:
        return RunnableLambda(self._run, afunc=self._arun, name="agent")

    def _config(self, state: dict[str, Any], config: RunnableConfig) -> RunnableConfig:
        extra: dict[str, Any] = {"configurable": {WORKSPACE_KEY: state["workspace"]}}
        if self.memories == "system_message" and state.get("memory_block"):
            extra["callbacks"] = [_SecondSystemMessage()]
        return merge_configs(config, extra)

    def _run(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Invoke the wrapped graph; its interrupts go up to the caller."""
        sandbox_for(state["workspace"], self.nodes.config.sandbox.kind)  # a run resumed in a new process opens it here
        try:
            return self._result(self.agent_graph.invoke({"messages": state["messages"]}, self._config(state, config)))
        except Exception as exc:
            return self._failed(exc, config)

    async def _arun(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        await asyncio.to_thread(sandbox_for, state["workspace"], self.nodes.config.sandbox.kind)
        try:
            result = await self.agent_graph.ainvoke({"messages": state["messages"]}, self._config(state, config))
        except Exception as exc:
            return self._failed(exc, config)
        return self._result(result)

    @staticmethod
    def _failed(exc: Exception, config: RunnableConfig) -> dict[str, Any]:
        """The run's update when the wrapped agent raised; the exception goes on when it belongs to the caller:
        an interrupt (human in the loop, answered with Command(resume=...)) or a Command for a parent graph."""
        if isinstance(exc, GraphInterrupt):
            if (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None:
                raise exc
            # nothing could ever resume it: end the run rather than leak its workspace
            return {"error": NOT_RESUMABLE, "error_kind": ErrorKind.AGENT.value}
        if isinstance(exc, GraphBubbleUp):
            raise exc
        return failure(ErrorKind.AGENT, f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _result(result: Any) -> dict[str, Any]:
        messages = result.get("messages") if isinstance(result, dict) else None
        if not isinstance(messages, list):
            got = f"a dict with keys {', '.join(map(str, result))}" if isinstance(result, dict) else \
                f"a {type(result).__name__}"
            return {"error": f"wrapped agent returned no messages (got {got})", "error_kind": ErrorKind.AGENT.value}
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages], "exit_status": "ended"}

    def opening(self, task: Task, workspace: str, block: str, runtime: Any) -> list[BaseMessage]:
        system = self.system_prompt or ""
        if self.memories == "system_message":
            system = append_memories(system, block)
        opening = [SystemMessage(system)] if system.strip() else []
        return [*opening, HumanMessage(prompt("wrapped_task", instruction=task.instruction, workspace=workspace))]

    def ended(self, state: dict[str, Any], task: Task, runtime: Any) -> dict[str, Any]:
        trajectory, untold = _trajectory(list(state.get("messages") or []), task, self.agent_graph)
        for step in untold:  # what the agent's own tools did is told after it
            events.step(step)
        return {"trajectory": trajectory.model_dump(mode="json"), "error": None, "error_kind": None}

    def step_limit(self, runtime: Any) -> int:
        return 0  # the caller's recursion limit holds


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
    execute = execute_stage(nodes, GraphAgentHost(agent_graph, nodes, memories, system_prompt))
    return wire(nodes, execute, checkpointer, store, "mtl_wrapped_agent")


__all__ = ["with_memory_transfer", "with_memories", "append_memories", "GraphAgentHost", "MemoryPlacement",
           "WORKSPACE_KEY", "MEMORY_KEY", "ON_STEP_KEY", "prepare_workspace"]
