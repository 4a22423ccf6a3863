"""Memory transfer for any `langchain.agents.create_agent` agent, as middleware.

`before_agent` plans, retrieves and prepares the run's workspace (the task's files, its setup in the run's
sandbox), `wrap_model_call` puts the memories at the end of that agent's own system prompt, `wrap_tool_call`
gives the tools the run's hooks (the step hook and the memory search every host gives: pipeline/execute.py),
`after_agent` closes the sandbox, judges, distils and writes back. Each stage is the MTL graph's node (`MTLNodes`) called on the run's MTL state — the same
code, so filters, screening, dedup, crediting, the tamper-proof check and the run log behave identically.

Which to use: this middleware for an agent you build with `create_agent` (the memories join its own system
prompt on every model call); `with_memory_transfer` (pipeline/wrap.py) for any other compiled graph."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables.config import merge_configs
from langgraph.errors import GraphBubbleUp
from typing_extensions import NotRequired

from mtl_graph.importers.common import text_of
from mtl_graph.config import MTLConfig, MTLContext
from mtl_graph.pipeline.lease import close_workspace
from mtl_graph.pipeline.execute import run_hooks
from mtl_graph.pipeline.memory_tool import memory_tools, uses_tool, without_search
from mtl_graph.pipeline.steps import re_retrieved_in
from mtl_graph.llm.retry import is_transient
from mtl_graph.sandbox.registry import release
from mtl_graph.pipeline.stages import make_config, make_nodes, run_stages, stops_short
from mtl_graph.pipeline.state import OUTPUT_FIELDS, RunState, apply_update
from mtl_graph.core.task import as_task
from mtl_graph.pipeline.wrap import agent_trajectory, append_memories, prepare_workspace
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task

RUN_FIELDS = (*(f for f in OUTPUT_FIELDS if f not in ("trajectory", "distilled", "timings")), "memory_block")
"""What the middleware keeps of its MTL run under the agent state's `mtl` key."""
DURING_RUN = ("task", "first_message", "workspace", "own_workspace")
"""What the agent's run carries from `before_agent` to `after_agent`, besides the run fields."""


class MemoryTransferState(AgentState):
    """The agent's state plus the MTL run: `mtl_task` in (optional), `mtl` out, the run's `workspace` (where
    `sandbox_tools` runs commands)."""

    mtl_task: NotRequired[Any]
    mtl: NotRequired[dict[str, Any]]
    workspace: NotRequired[str | None]


class MemoryTransferMiddleware(AgentMiddleware):
    """Retrieve memories for the task before the agent starts; learn from the run after it ends.

    The task is `mtl_task` in the agent's input (a Task, a task dict or a task directory), else this turn's human
    message. Its files are written to `workspace` (the caller's directory, kept) or, without one, to a fresh
    directory per run (removed after it unless keep_workspaces); its setup runs there in the run's sandbox, the
    one the agent's `sandbox_tools()` commands use. A task with a check is judged by it there, test files restored
    first; otherwise the LLM judge (or `judge`) decides. `model` plans, judges and distils; the agent keeps its
    own model."""

    state_schema = MemoryTransferState

    def __init__(self, pool: MemoryPool | None, *, model: BaseChatModel | str | None = None, judge: Any = None,
                 distiller: Any = None, workspace: str | Path | None = None, config: MTLConfig | None = None,
                 **settings: Any) -> None:
        super().__init__()
        cfg = make_config(config, **settings)
        self.nodes = make_nodes(pool, model, None, judge, distiller, cfg)
        self.workspace = Path(workspace) if workspace is not None else None
        self._hooks_lock, self._hooks = threading.Lock(), {}  # each running run's hooks, by run id
        self.tools = memory_tools()  # offered to the model only in runs with retrieval tool|both

    def before_agent(self, state: MemoryTransferState, runtime: Any) -> dict[str, Any] | None:
        ctx = _mtl_runtime(runtime)
        # where this turn starts: on a thread with a checkpointer the messages hold the earlier turns too
        run: dict[str, Any] = {"task": _task_of(state), "first_message": _last_human(state.get("messages", []))}
        run_stages(self.nodes, run, ctx, ("plan", "retrieve"))
        task = _valid_task(run["task"])
        if task is not None:  # even when retrieval failed: the run learns nothing, but the agent can still work
            prepared = self._prepare(task)
            run.update({k: v for k, v in prepared.items() if k != "error" or not run.get("error")})
        return {"mtl": {k: v for k, v in run.items() if k in (*RUN_FIELDS, *DURING_RUN)},
                "workspace": run.get("workspace")}

    def _prepare(self, task: Task) -> dict[str, Any]:
        """The task's files in the run's workspace and its setup run in the run's sandbox (registered for the tools)."""
        own = self.workspace is None
        workspace = self.nodes.new_workspace(task) if own else self.workspace
        return {**prepare_workspace(task, workspace, self.nodes.config.sandbox.kind), "own_workspace": own}

    async def abefore_agent(self, state: MemoryTransferState, runtime: Any) -> dict[str, Any] | None:
        # The pool, the planner and the setup block: off the event loop (a LangGraph server raises otherwise).
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        with self._ends_with_a_crash(request):
            return handler(self._offered(_with_memories(request)))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        with self._ends_with_a_crash(request):
            return await handler(self._offered(_with_memories(request)))

    def _offered(self, request: ModelRequest) -> ModelRequest:
        """The request without search_memories unless this run offers it."""
        if uses_tool(self.nodes.settings(_mtl_runtime(request.runtime))):
            return request
        return request.override(tools=without_search(request.tools))

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        with self._ends_with_a_crash(request):
            return handler(self._hooked(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        with self._ends_with_a_crash(request):
            return await handler(await asyncio.to_thread(self._hooked, request))

    def _hooked(self, request: Any) -> Any:
        """The tool call with the run's hooks in its runtime's `configurable` (made once per run: a reply's
        parallel calls share one step hook, so two failing test runs re-retrieve once)."""
        run = request.state.get("mtl") or {}
        if run.get("error") or run.get("task") is None or getattr(request, "runtime", None) is None:
            return request
        with self._hooks_lock:
            hooks = self._hooks.get(run.get("run_id"))
            if hooks is None:
                since = run.get("first_message") or 0  # this turn's messages: the thread keeps earlier turns
                hooks = run_hooks(self.nodes, RunState.of(run), _mtl_runtime(request.runtime), since)
                self._hooks[run.get("run_id")] = hooks
        config = merge_configs(request.runtime.config, {"configurable": hooks})
        return request.override(runtime=replace(request.runtime, config=config))

    @contextmanager
    def _ends_with_a_crash(self, request: Any) -> Iterator[None]:
        """The agent raised in a model or tool call: after_agent will never run, so the run is logged and its own
        workspace closed here before the exception goes on. A pause is not a crash, and neither is a transient
        provider error (a retry middleware placed around this one may try the call again); a run that still
        never ends has its workspace closed when the process exits."""
        try:
            yield
        except GraphBubbleUp:
            raise
        except BaseException as exc:
            run = dict(request.state.get("mtl") or {})
            if run.get("workspace") is not None and not is_transient(exc):
                self._drop_hooks(run)
                own = run.get("own_workspace")
                self.nodes.abandon(RunState.of({**run, "workspace": run["workspace"] if own else None}),
                                   f"the agent raised {type(exc).__name__}: {exc}", _mtl_runtime(request.runtime))
                if not own:
                    close_workspace(run["workspace"], keep=True)
            raise

    def _drop_hooks(self, run: dict[str, Any]) -> None:
        with self._hooks_lock:
            self._hooks.pop(run.get("run_id"), None)

    def after_agent(self, state: MemoryTransferState, runtime: Any) -> dict[str, Any] | None:
        run = dict(state.get("mtl") or {})
        ctx = _mtl_runtime(runtime)
        release(run.get("workspace"))  # the agent is done: what it left running dies before the check
        self._drop_hooks(run)
        if hits := re_retrieved_in(state.get("messages", [])[run.get("first_message") or 0:]):
            run["re_retrieved"] = hits
        if not stops_short(RunState.of(run)):
            task = self.nodes.task(run["task"])
            trajectory = agent_trajectory(state["messages"][run.get("first_message") or 0:], task, self.nodes.model)
            run["trajectory"] = trajectory.model_dump(mode="json")
        run_stages(self.nodes, run, ctx, ("judge", "distill"))
        own = run.get("own_workspace")
        # write back removes a workspace it is given: only ever the run's own, never the caller's directory
        apply_update(run, self.nodes.write_back(RunState.of({**run, "workspace": run.get("workspace") if own else None}),
                                                ctx))
        if not own:  # the check has run: its clean room's source goes, the caller's files stay
            close_workspace(run.get("workspace"), keep=True)
        return {"mtl": {k: run.get(k) for k in (*RUN_FIELDS, "task")}, "mtl_task": None,  # a task is one run's
                "workspace": None if own else run.get("workspace")}

    async def aafter_agent(self, state: MemoryTransferState, runtime: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)


def _with_memories(request: ModelRequest) -> ModelRequest:
    """The model request with the run's memories at the end of the agent's own system prompt."""
    block = (request.state.get("mtl") or {}).get("memory_block")
    if not block:
        return request
    own = text_of(request.system_message.content) if request.system_message is not None else ""
    return request.override(system_message=SystemMessage(append_memories(own, block)))


def _valid_task(value: Any) -> Task | None:
    try:
        return as_task(value)
    except Exception:  # plan has recorded it as the run's error
        return None


def _mtl_runtime(runtime: Any) -> Any:
    """The agent's runtime when its context is an MTLContext (per-run settings), else none (build-time settings)."""
    return runtime if isinstance(getattr(runtime, "context", None), (MTLContext, dict)) else None


def _last_human(messages: list[Any]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)), None)


def _task_of(state: dict[str, Any]) -> Any:
    if state.get("mtl_task") is not None:
        return state["mtl_task"]
    messages = state.get("messages", [])
    last = _last_human(messages)
    if last is None:
        return None  # plan reports it: "invalid task"
    text = text_of(messages[last].content)
    return Task(id=f"agent-{hashlib.sha256(text.encode()).hexdigest()[:12]}", instruction=text)
