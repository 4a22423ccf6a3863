"""Graph-backed runners for the harness: the MTL graph in-process, or on a LangGraph server; and phase 2.

Both runners turn the harness's MemoryScope into the graph's run context (retrieval filters, write back off)
and its final state into a RunOutcome. ``make_distiller`` distils the zero-shot runs into the real pool.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Union

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict

from mtl_graph.bench.records import Condition, MemoryRef, MemoryScope, Pool, RunOutcome, TaskResult
from mtl_graph.bench.passk import is_error
from mtl_graph.bench.runners import RunnerUnavailable, outcome_from_state
from mtl_graph.bench.suites.base import REFERENCE_KEY, REFERENCE_SCRIPT_KEY
from mtl_graph.memory import formats as registry
from mtl_graph.memory.base import MemoryType
from mtl_graph.core.task import Task

if TYPE_CHECKING:
    from mtl_graph.memory.pool.pool import MemoryPool

log = logging.getLogger(__name__)

ModelFactory = Callable[[Task], BaseChatModel]
ModelSpec = Union[str, BaseChatModel, ModelFactory]
"""``provider:model``, ``scripted:FILE.json`` (a fresh replay per run), a chat model, or a factory per task."""

DEFAULT_GRAPH_ID = "mtl"


def run_context(scope: MemoryScope | None, base: Any = None) -> Any:
    """The graph's run context (an MTLContext) for a scope (None: zero-shot), over `base`: the run settings the
    evaluation keeps fixed for every run (model, agent limits, model options, judge_also). The scope's fields win.

    hold_one_out stays off: the scope already lists the task's domain in exclude_domains when the condition
    holds it out, and a no-holdout condition must not get it back from the graph's default. The lifecycle is off:
    the protocol's conditions retrieve as the research does (top-k by similarity, a frozen pool)."""
    from mtl_graph.config.names import MTLContext, as_context, merged

    if scope is None:
        fields: dict[str, Any] = {"memory_type": "none", "online": False, "hold_one_out": False, "lifecycle": "off"}
    else:
        fields = {"memory_type": scope.memory_type.value, "top_k": scope.top_k, "online": scope.write_back,
                  "hold_one_out": False, "lifecycle": "off", "exclude_domains": list(scope.exclude_domains),
                  "exclude_task_ids": list(scope.exclude_task_ids), "only_ids": scope.only_ids}
    return merged(as_context(base) or MTLContext(), MTLContext(**fields))


def agent_task(task: Task) -> Task:
    """The task as the agent may see it: the reference solution (files or script) is for the oracle, never for the
    agent."""
    hidden = (REFERENCE_KEY, REFERENCE_SCRIPT_KEY)
    if not any(key in task.metadata for key in hidden):
        return task
    return task.model_copy(update={"metadata": {k: v for k, v in task.metadata.items() if k not in hidden}})


class GraphRunnerSettings(BaseModel):
    """Where the in-process graph runs and what it writes."""

    model_config = ConfigDict(extra="forbid")

    sandbox: str = "auto"
    """Sandbox backend of the agent and the checks: auto, bwrap, local or docker."""
    pool_location: str | None = None
    """Memory pool phase 3 retrieves from (a directory, ":memory:" or a Qdrant URL); None: MTL_POOL."""
    pool_namespace: str | None = None
    """The pool's namespace; None: MTL_NAMESPACE, else the default."""
    run_log: Path | None = None
    """JSONL log every run is appended to; None: MTL_RUN_LOG."""
    workspace_root: Path | None = None
    """Where run workspaces are created; None: a temporary directory."""


def _pool_location(location: str | None) -> str:
    from mtl_graph.config.environment import get_settings

    return str(location) if location is not None else get_settings().pool


def _model_factory(model: ModelSpec) -> ModelFactory:
    """One chat model per run: replays and factories start fresh for every task; a real model is shared."""
    from mtl_graph.llm.chat import ModelNotConfigured, chat_model

    if not isinstance(model, (str, BaseChatModel)):
        if callable(model):
            return model
        raise TypeError(f"model must be a provider:model string, a chat model or a factory, not "
                        f"{type(model).__name__}")
    try:
        chat = chat_model(model)  # fail now (missing key, package or script), not once per run
    except ModelNotConfigured as exc:
        raise RunnerUnavailable(str(exc)) from None
    if isinstance(model, str) and model.startswith("scripted:"):
        return lambda task: chat_model(model)  # a replay starts from its first action every run
    return lambda task: chat


class GraphRunner:
    """Runs each attempt through ``build_mtl_graph`` (our DefaultAgent inside) in this process.

    One MemoryPool handle serves every thread; it is opened on the first memory run (zero-shot needs none).
    `context` holds the run settings every run shares (see `run_context`)."""

    name = "graph"

    def __init__(self, model: ModelSpec, context: Any = None, **settings: Any) -> None:
        from mtl_graph.config.names import as_context

        self.settings = GraphRunnerSettings(**settings)
        self.context = as_context(context)
        self._model_for = _model_factory(model)
        self._pool: MemoryPool | None = None
        self._pool_lock = threading.Lock()

    def pool(self) -> "MemoryPool":
        """The shared pool handle (opened once)."""
        with self._pool_lock:
            if self._pool is None:
                from mtl_graph.memory.pool.pool import MemoryPool

                self._pool = MemoryPool.open(_pool_location(self.settings.pool_location),
                                             namespace=self.settings.pool_namespace)
            return self._pool

    def close(self) -> None:
        """Release the pool handle."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def run(self, task: Task, condition: Condition, attempt: int, scope: MemoryScope | None) -> RunOutcome:
        from mtl_graph.pipeline import build_mtl_graph

        start = time.monotonic()
        # Compiling the six-node graph per run is cheap, and lets a factory hand every task its own model.
        graph = build_mtl_graph(self._model_for(task), self.pool() if scope is not None else None,
                                sandbox=self.settings.sandbox, run_log=self.settings.run_log,
                                workspace_root=self.settings.workspace_root)
        state = graph.invoke({"task": agent_task(task)}, context=run_context(scope, self.context))
        outcome = outcome_from_state(state)
        outcome.duration_s = time.monotonic() - start
        return outcome


class RemoteRunner:
    """Sends each attempt to a LangGraph server serving the MTL graph (``langgraph dev`` or a deployment)."""

    name = "remote"

    def __init__(self, url: str, model: str | None = None, graph_id: str = DEFAULT_GRAPH_ID,
                 timeout: float = 3600.0, context: Any = None) -> None:
        from langgraph_sdk import get_sync_client

        from mtl_graph.config.names import MTLContext, as_context, merged

        self.url, self.graph_id = url.rstrip("/"), graph_id
        # Sent with every run; the server's graph resolves the model named here.
        self.context = merged(as_context(context) or MTLContext(), MTLContext(model=model) if model else None)
        self.client = get_sync_client(url=self.url, timeout=timeout)
        self._check()

    def _check(self) -> None:
        """Fail before the first run when the server is down or does not serve the graph."""
        import httpx

        try:  # one plain attempt first: the SDK's client retries a refused connection for several seconds
            httpx.get(f"{self.url}/ok", timeout=10)
        except httpx.TransportError as exc:
            raise RunnerUnavailable(f"cannot reach the LangGraph server at {self.url}: "
                                    f"{type(exc).__name__}: {exc}") from None
        try:
            assistants = self.client.assistants.search(limit=100)
        except Exception as exc:  # connection refused, DNS, TLS, HTTP errors: all mean "cannot use it"
            raise RunnerUnavailable(f"cannot reach the LangGraph server at {self.url}: "
                                    f"{type(exc).__name__}: {exc}") from None
        known = {a["graph_id"] for a in assistants} | {a["assistant_id"] for a in assistants}
        if self.graph_id not in known:
            graphs = ", ".join(sorted({a["graph_id"] for a in assistants})) or "none"
            raise RunnerUnavailable(f"the LangGraph server at {self.url} has no graph or assistant "
                                    f"{self.graph_id!r} (graphs there: {graphs})")

    def run(self, task: Task, condition: Condition, attempt: int, scope: MemoryScope | None) -> RunOutcome:
        start = time.monotonic()
        thread = self.client.threads.create()
        try:
            state = self.client.runs.wait(thread["thread_id"], self.graph_id,
                                          input={"task": agent_task(task).model_dump(mode="json")},
                                          context=run_context(scope, self.context).model_dump(
                                              mode="json", exclude_none=True))
        finally:
            try:  # a long evaluation should not leave thousands of threads on the server
                self.client.threads.delete(thread["thread_id"])
            except Exception:
                log.debug("could not delete thread %s", thread["thread_id"], exc_info=True)
        if not isinstance(state, dict):
            raise RuntimeError(f"unexpected answer from {self.url}: {type(state).__name__}")
        outcome = outcome_from_state(state)
        outcome.duration_s = time.monotonic() - start
        return outcome


class PoolDistiller:
    """Phase 2: every zero-shot trajectory, with its verdict, distilled into the real pool.

    Failures (runs without a trajectory, formats that could not be distilled) are kept in ``failures``,
    logged, and summarised in the returned Pool's note."""

    def __init__(self, model: str | BaseChatModel | None, pool_location: str | None,
                 formats: Iterable[MemoryType | str], concurrency: int = 4, model_options: Any = None,
                 namespace: str | None = None) -> None:
        self.model, self.pool_location, self.model_options = model, pool_location, model_options
        self.namespace = namespace
        self.formats = [MemoryType(f) for f in formats]
        self.concurrency = max(1, concurrency)
        self.failures: list[str] = []
        self.chat = self._chat()

    def _chat(self) -> BaseChatModel | None:
        """The distilling model, loaded now so a missing key fails before phase 1, not after it."""
        if not registry.needs_model(self.formats) or self.model is None:
            return None  # trajectories are built without a model; no model means recorded failures instead
        from mtl_graph.llm.chat import ModelNotConfigured, chat_model

        try:
            return chat_model(self.model, self.model_options)
        except ModelNotConfigured as exc:
            raise RunnerUnavailable(f"phase 2 distils here, in this process: {exc}") from None

    def _distill(self, result: TaskResult, chat: BaseChatModel | None) -> tuple[list[Any], list[str]]:
        from mtl_graph.distill.distillers import distill

        where = f"{result.task_id} #{result.attempt}"
        if result.trajectory is None:
            return [], [f"{where}: no trajectory to distil ({result.error or 'the run recorded none'})"]
        if is_error(result):  # the infrastructure ended it: no lesson about the task to learn
            return [], [f"{where}: not distilled, the run ended in an error ({result.error})"]
        trajectory = result.trajectory
        if result.verdict is not None:  # the harness's verdict (tests or judge) picks the success/failure prompt
            trajectory = trajectory.model_copy(update={"verdict": result.verdict})
        label = self.model if isinstance(self.model, str) else None
        run_id = f"eval:{result.suite}/{result.task_id}/{result.condition.key}/{result.attempt}/" \
                 f"{trajectory.content_hash()[:12]}"  # every attempt is a run of its own
        made = distill(trajectory, self.formats, chat, distill_model=label, run_id=run_id)
        return made.memories, [f"{where}: {f.format.value}: {f.reason}" for f in made.failures]

    def __call__(self, results: list[TaskResult]) -> Pool:
        from mtl_graph.memory.pool.pool import MemoryPool

        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="mtl-distill") as executor:
            made = list(executor.map(lambda r: self._distill(r, self.chat), results))
        memories = [m for ms, _ in made for m in ms]
        self.failures = [f for _, fs in made for f in fs]
        for failure in self.failures:
            log.warning("not distilled: %s", failure)
        with MemoryPool.open(_pool_location(self.pool_location), namespace=self.namespace) as pool:
            added = pool.add_many(memories)
            refs = [MemoryRef(id=m.id, type=MemoryType(m.type), domains=m.domains,
                              source_task_ids=m.source_task_ids,
                              task_models=sorted({s.task_model for s in m.sources if s.task_model}))
                    for m in pool]
        counts = added.counts
        note = (f"distilled {len(results)} zero-shot runs into {len(memories)} memories "
                f"({counts['added']} added, {counts['merged']} merged, {counts['identical']} identical, "
                f"{counts['flagged']} flagged) of {', '.join(f.value for f in self.formats)}")
        if self.failures:
            note += f"; {len(self.failures)} not distilled: " + "; ".join(self.failures)
        return Pool(memories=refs, note=note)


def make_distiller(model: str | BaseChatModel | None = None, pool_location: str | None = None,
                   formats: Iterable[MemoryType | str] = tuple(MemoryType), concurrency: int = 4,
                   model_options: Any = None, namespace: str | None = None) -> PoolDistiller:
    """The phase-2 hook for ``run_eval``: distil zero-shot runs into ``formats`` in the pool at pool_location, in
    namespace (model_options: init_chat_model settings of a provider:model string, as the graph runs use)."""
    return PoolDistiller(model, pool_location, formats, concurrency, model_options, namespace)
