"""Memory transfer for any `langchain.agents.create_agent` agent, as middleware.

`before_agent` plans and retrieves, `wrap_model_call` puts the memories at the end of that agent's own system
prompt, `after_agent` judges, distils and writes back. Each stage is the MTL graph's node (`MTLNodes`) called on
the run's MTL state — the same code, so filters, screening, dedup, crediting and the run log behave identically."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Sequence

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from typing_extensions import NotRequired

from mtl_graph.experience.planted import hijack_candidates
from mtl_graph.graph.context import MTLContext
from mtl_graph.graph.nodes import MTLNodes
from mtl_graph.experience.importers.common import text_of
from mtl_graph.graph.support import as_task, model_name
from mtl_graph.memory.pool import MemoryPool
from mtl_graph.tasks import Task

RUN_FIELDS = ("run_id", "query", "retrieved", "memory_block", "verdict", "outcome", "retrieved_ids",
              "new_memory_ids", "memories_written", "distill_failures", "error")
"""What the middleware keeps of its MTL run under the agent state's `mtl` key."""


class MemoryTransferState(AgentState):
    """The agent's state plus the MTL run: `mtl_task` in (optional), `mtl` out."""

    mtl_task: NotRequired[Any]
    mtl: NotRequired[dict[str, Any]]


class MemoryTransferMiddleware(AgentMiddleware):
    """Retrieve memories for the task before the agent starts; learn from the run after it ends.

    The task is `mtl_task` in the agent's input (a Task, a task dict or a task directory), else this turn's human
    message. With `workspace` (the directory the agent's tools work in) and a task that has a check, the check
    judges the run there, test files restored first; otherwise the LLM judge (or `judge`) does. `model` plans,
    judges and distils; the agent keeps its own model."""

    state_schema = MemoryTransferState

    def __init__(self, pool: MemoryPool | None, *, model: BaseChatModel | str | None = None,
                 memory_type: str = "insight", top_k: int = 3, judge: Any = None,
                 distill_formats: Sequence[str] | None = None, distiller: Any = None, online: bool = True,
                 exclude_domains: Sequence[str] | None = None, hold_one_out: bool = False,
                 workspace: str | Path | None = None, **config: Any) -> None:
        from mtl_graph.graph.build import _config, _default_distiller

        super().__init__()
        cfg = _config(memory_type, top_k, online, hold_one_out, distill_formats, exclude_domains, **config)
        self.nodes = MTLNodes(pool, model, None, judge, distiller or _default_distiller, cfg)
        self.workspace = Path(workspace) if workspace is not None else None

    def before_agent(self, state: MemoryTransferState, runtime: Any) -> dict[str, Any] | None:
        ctx = _mtl_runtime(runtime)
        # where this turn starts: on a thread with a checkpointer the messages hold the earlier turns too
        run: dict[str, Any] = {"task": _task_of(state), "first_message": _last_human(state.get("messages", []))}
        run.update(self.nodes.plan(run, ctx))
        if not run.get("error"):
            run.update(self.nodes.retrieve(run, ctx))
        if self.workspace is not None:
            run["check_baseline"] = hijack_candidates(self.workspace)
        return {"mtl": {k: v for k, v in run.items() if k in (*RUN_FIELDS, "task", "check_baseline", "first_message")}}

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        block = (request.state.get("mtl") or {}).get("memory_block")
        if not block:
            return handler(request)
        own = text_of(request.system_message.content) if request.system_message is not None else ""
        prompt = f"{own.rstrip()}\n\n{block}" if own.strip() else block
        return handler(request.override(system_message=SystemMessage(prompt)))

    def after_agent(self, state: MemoryTransferState, runtime: Any) -> dict[str, Any] | None:
        from mtl_graph.experience.importers import trajectory_from_messages

        run = dict(state.get("mtl") or {})
        ctx = _mtl_runtime(runtime)
        if not run.get("error"):
            task = as_task(run["task"])
            trajectory = trajectory_from_messages(state["messages"][run.get("first_message") or 0:], task=task.ref())
            trajectory.model = trajectory.model or model_name(self.nodes.model)
            run["trajectory"] = trajectory.model_dump(mode="json")
            judged = {**run, "workspace": str(self.workspace) if self.workspace else None}
            run.update(self.nodes.judge(judged, ctx))
            run.update(self.nodes.distill(run, ctx))
        run.update(self.nodes.write_back(run, ctx))  # no workspace in `run`: the agent's directory is not ours
        return {"mtl": {k: run.get(k) for k in (*RUN_FIELDS, "task")}, "mtl_task": None}  # a task is one run's


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
