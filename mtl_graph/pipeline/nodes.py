"""The six nodes: plan -> retrieve -> execute -> judge -> distill -> write back.

Every run starts from a clean run state (plan resets every run field, so a reused thread carries nothing over).
A stage whose failure is expected (invalid task, retrieval or setup failure, an agent ended by its model
provider, a check that could not run) records `error` in its update; the graph's conditional edges then go
straight to write back, which logs the run with verdict `error` and writes or credits no memory. Anything else a
node raises reaches `crashed`, the graph's error handler: it logs the run, removes its workspace and re-raises,
so the run fails where LangGraph and LangSmith can see it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import NodeError
from langgraph.runtime import Runtime

from mtl_graph.core.errors import ErrorKind, error_kind_of, failure
from mtl_graph.core.trajectory import Trajectory, Verdict, VerdictStatus
from mtl_graph.pipeline import events
from mtl_graph.config import MTLConfig, MTLContext
from mtl_graph.pipeline.credit import shown_ids, write_run
from mtl_graph.pipeline.services import Sealed, StageServices
from mtl_graph.pipeline.memory_tool import injects, search_trace, uses_tool
from mtl_graph.pipeline.lease import close_workspace, new_workspace, workspace_base, workspace_path
from mtl_graph.pipeline.refresh import MemoryRefresh
from mtl_graph.pipeline.retrieval import retrieve_for, retrieved_record
from mtl_graph.pipeline.state import RunState, fresh_run_state
from mtl_graph.llm.chat import chat_model
from mtl_graph.distill.quality import plan_problems
from mtl_graph.judging.ground_truth import CheckJudge
from mtl_graph.core.task import as_task
from mtl_graph.pipeline.metering import timed
from mtl_graph.pipeline.prompting import memory_block, prompt
from mtl_graph.pipeline.run_log import append_run_log
from mtl_graph.memory import formats
from mtl_graph.memory.dedup import AddReport
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.agent.config import AgentConfig
from mtl_graph.llm.retry import RetrySettings, describe, is_transient, using_retry
from mtl_graph.pipeline.server_policy import PolicyError
from mtl_graph.sandbox.config import SandboxConfig
from mtl_graph.sandbox.factory import make_sandbox
from mtl_graph.core.task import Task


def _service(name: str, doc: str) -> Any:
    """A read-only attribute of the nodes that is the services' `name`."""
    return property(lambda self: getattr(self._services, name), doc=doc)


def run_id_of_attempt() -> str:
    """The run's id: a LangGraph server's own run id when one runs the graph, else a new one.

    A server retries a run its dead process left running (`langgraph dev` re-queues it on restart) from the top,
    plan included. Keyed by the server's run id, that attempt is the same run: its memories merge into the same
    provenance entry and its credit into the same entry (both keyed by run id), so a run written back before the
    crash and again after it counts once. The server sets `configurable.run_id` itself (a client cannot choose
    it); anything there that is not a UUID is ignored. It names the server's own graph only: an MTL graph nested
    in it (a subgraph, a fan-out over tasks, an invoke inside a node) runs several MTL runs in one server run, each
    with a new id."""
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
        given, nested = configurable.get("run_id"), "|" in str(configurable.get("checkpoint_ns") or "")
        return uuid.UUID(str(given)).hex if given and not nested else uuid.uuid4().hex
    except (RuntimeError, ValueError, TypeError, AttributeError):  # outside a graph run, or not a UUID
        return uuid.uuid4().hex


class MTLNodes(Sealed):
    """The stages, over the graph's services (`StageServices`, fixed at build time): one object serves every run
    of the graph, several at once, so it holds nothing of a run's and nothing is assigned to it after the build."""

    __slots__ = ("_services",)

    def __init__(self, services: StageServices) -> None:
        object.__setattr__(self, "_services", services)

    @property
    def services(self) -> StageServices:
        """What the stages share: pool, model, agent, judge, distiller, config, policy, ledger."""
        return self._services

    config = _service("config", "The build's settings (a run's context applies over them: `settings(runtime)`).")
    policy = _service("policy", "A served graph's policy; None when the graph is not served.")
    served = _service("served", "A served graph's own record of each run's retrieval and verdict (its credit).")
    model = _service("model", "The build's chat model (None: each run's context names one).")
    agent = _service("agent", "The build's agent (None for a host that runs its own).")
    judge_override = _service("judge", "The judge used instead of the LLM judge; None: the LLM judge.")
    distiller = _service("distiller", "Turns a trajectory into memories.")

    @property
    def pool(self) -> MemoryPool | None:
        """The pool, if it is open: the graph's own, or MTL_POOL's once a run has opened it (`pool_of` opens it)."""
        return self._services.pools.opened

    # ------------------------------------------------------------------ helpers
    def settings(self, runtime: Runtime[MTLContext] | None) -> MTLConfig:
        """The run's effective settings: the build's, with the run's context applied (resolved once per run: every
        node of the run gets the same object)."""
        return self._services.settings(getattr(runtime, "context", None))

    def model_for(self, runtime: Runtime[MTLContext] | None) -> BaseChatModel:
        """The run's chat model (a served graph's policy checks the run's context first)."""
        # The run's context names a model per run; it wins over the graph's default.
        cfg = self.settings(runtime)
        if self.policy is not None:  # checked at every use: a resumed run may bring another context
            self.policy.check_model(getattr(runtime, "context", None), self.config.model.name or self.model,
                                    self.config.model.options.base_url)
        return chat_model(cfg.model.name or self.model, cfg.model.options)

    def task(self, value: Any) -> Task:
        """The run's task from its input or state; a served graph's policy checks it every time (a client may
        update a thread's state between two nodes)."""
        return as_task(value) if self.policy is None else self.policy.task(value)

    def workspace(self, state: RunState) -> str | None:
        """The run's workspace from its state; a served graph's policy accepts only one the graph made."""
        path = state.workspace
        if path is None or self.policy is None:
            return path
        return self.policy.workspace(path, workspace_base(self.config.sandbox.workspace_root))

    def agent_for(self, cfg: MTLConfig) -> Any:
        """The agent with this run's agent settings (a DefaultAgent is rebuilt only when the run changes one, once
        per run)."""
        return self._services.agent_for(cfg)

    def agent_settings(self, runtime: Runtime[MTLContext] | None) -> AgentConfig:
        """The run's agent settings: the agent's own (when it has an AgentConfig) with the run's knobs, once per run."""
        return self._services.agent_settings(self.settings(runtime))

    def memory_refresh(self, task: Task, state: RunState, runtime: Any) -> MemoryRefresh | None:
        """This run's mid-run re-retrieval (after the first failing test run), when the run asks for it."""
        cfg = self.settings(runtime)
        wanted = cfg.retrieval
        if not wanted.re_retrieve or wanted.memory_type == "none" or wanted.top_k == 0 or uses_tool(cfg):
            return None  # a run that offers search_memories searches for itself
        return MemoryRefresh(self.pool_of(cfg), cfg, task, [r["id"] for r in state.retrieved])

    def pool_of(self, cfg: MTLConfig | None = None) -> MemoryPool:
        """The pool (MTL_POOL's when the graph was built without one), in the run's namespace when its settings
        name one (a served graph checks that its policy allows it)."""
        pool = self._services.pools.get()
        namespace = cfg.retrieval.namespace if cfg is not None else None
        if namespace is None or namespace == pool.namespace:
            return pool
        if self.policy is not None:
            self.policy.check_namespace(namespace, pool.namespace)
        return self._services.pools.get(namespace)

    def retry_for(self, runtime: Runtime[MTLContext] | None) -> RetrySettings:
        """The run's retry settings (the run's, else the agent's own): every model call of the run is made under
        them, the agent's turns and the plan, judge and distillers alike, in every host."""
        return self.agent_settings(runtime).retry

    def _sandbox(self, workspace: str, persistent: bool = True):
        """persistent=False for a sandbox that runs a command or two (the check): a persistent bwrap's first
        command costs ~145 ms (bwrap and its runner starting), one bwrap per command ~12 ms."""
        config = None if persistent else SandboxConfig(bwrap_persistent=False)
        return make_sandbox(self.config.sandbox.kind, Path(workspace), config)

    def new_workspace(self, task: Task) -> Path:
        """A fresh directory for one run (closed after write back, removed unless keep_workspaces)."""
        return new_workspace(self.config.sandbox.workspace_root, task.id)

    # ------------------------------------------------------------------ nodes
    @timed("plan", starts_run=True)
    def plan(self, state: RunState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        """Reset the run state, normalise the task, write the retrieval query (a HyDE plan, or the task text)."""
        update: dict[str, Any] = {**fresh_run_state(), "run_id": run_id_of_attempt()}
        try:
            task = self.task(state.task)
        except Exception as exc:
            return {**update, **failure(ErrorKind.INVALID_TASK, str(exc))}
        update["task"] = task.model_dump(mode="json")
        cfg = self.settings(runtime)
        own = getattr(self.agent, "config", None)  # the default agent's: text mode cannot call a tool
        text_mode = isinstance(own, AgentConfig) and self.agent_settings(runtime).action_format != "tool_calls"
        if uses_tool(cfg) and text_mode:
            return {**update, **failure(ErrorKind.INVALID_SETTINGS, f"retrieval {cfg.retrieval.mode!r} needs "
                                        f"action_format 'tool_calls': a text-mode agent cannot call search_memories")}
        memory_type = cfg.retrieval.memory_type
        if not formats.uses_plan(memory_type) or cfg.retrieval.top_k == 0 or not injects(cfg):  # the task is the query
            query = formats.query_for(memory_type, task.instruction)  # (behind the format's prefix, if any)
            events.emit("plan", query=query)
            return {**update, "query": query}
        try:
            model, ask = self.model_for(runtime), [HumanMessage(prompt("plan", instruction=task.instruction))]
            reply = self.retry_for(runtime).call(lambda: model.invoke(ask))
            plan = reply.content if isinstance(reply.content, str) else ""
        except Exception as exc:  # a planning failure should not cost the run: fall back to the task text
            events.warning(f"planning failed ({exc}); retrieving with the task text")
            plan = ""
        problems = plan_problems(plan, prompt("plan", instruction=""))
        if plan and problems:  # a model that echoes the prompt would retrieve by our own instructions
            events.warning(f"plan unusable ({'; '.join(problems)}); retrieving with the task text")
        query = ("" if problems else plan.strip()[: cfg.retrieval.plan_max_chars]) or task.instruction
        events.emit("plan", query=query)
        return {**update, "query": query}

    @timed("retrieve")
    def retrieve(self, state: RunState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        """Top-k memories of the chosen format; never from the same task, optionally not from its domain."""
        cfg = self.settings(runtime)
        if self.policy is not None and cfg.retrieval.namespace is not None:  # refused before the run reads or writes it
            try:
                self.pool_of(cfg)
            except PolicyError as exc:
                return {**failure(ErrorKind.REFUSED, str(exc)), "retrieved": [], "memory_block": ""}
        if cfg.retrieval.memory_type == "none" or cfg.retrieval.top_k == 0 or not injects(cfg):
            return {"retrieved": [], "memory_block": ""}
        try:
            task = self.task(state.task)
        except PolicyError as exc:
            return {**failure(ErrorKind.INVALID_TASK, str(exc)), "retrieved": [], "memory_block": ""}
        try:
            found = retrieve_for(self.pool_of(cfg), task, cfg, state.query or "", cfg.retrieval.top_k)
        except Exception as exc:
            return {**failure(ErrorKind.RETRIEVAL, str(exc)), "retrieved": [], "memory_block": ""}
        retrieved = [retrieved_record(h) for h in found.hits]
        if self.served is not None:
            self.served.retrieved(state.run_id, [r["id"] for r in retrieved])
        trace = {**found.trace(), "lifecycle": cfg.retrieval.lifecycle}
        events.retrieved(retrieved)
        events.emit("retrieval", **trace)
        if not found.hits:
            events.emit("no_memory_applies", floor=trace["floor"], candidates=len(found.candidates))
        block = memory_block([h.memory for h in found.hits], cfg.retrieval.observation_chars) if found.hits else ""
        return {"retrieved": retrieved, "memory_block": block, "retrieval": trace}

    @timed("judge")
    def judge(self, state: RunState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        """Tests when the task has a check (run in a clean room: the pristine task and the solution); the LLM
        judge otherwise. The agent's sandbox was closed when it ended, killing whatever it left running."""
        if state.trajectory is None:
            return {}
        try:
            task, workspace = self.task(state.task), self.workspace(state)
        except PolicyError as exc:  # a thread update named what the server does not give: nothing is judged
            refused = failure(ErrorKind.REFUSED, str(exc))
            verdict = Verdict.infrastructure_error(refused["error"])
            return {**refused, "verdict": verdict.model_dump(mode="json")}
        trajectory = state.trajectory.model_copy()  # its verdict is set below: the state's own stays as it was
        update: dict[str, Any] = {}
        if task.check and workspace:
            try:
                room_sandbox = lambda room: self._sandbox(str(room), persistent=False)  # noqa: E731
                verdict = CheckJudge(task, workspace, room_sandbox).judge(trajectory)
            except Exception as exc:  # the check could not run: that says nothing about the agent's work
                update.update(failure(ErrorKind.CHECK, f"{type(exc).__name__}: {exc}"))
                verdict = Verdict.infrastructure_error(update["error"])
            if self.settings(runtime).loop.judge_also and not verdict.is_error:  # the model never sees the test verdict
                update["judge_verdict"] = self._llm_verdict(trajectory, runtime).model_dump(mode="json")
        else:
            verdict = self._llm_verdict(trajectory, runtime)
            if verdict.is_error:  # the provider failed on every attempt: the run got no judgement
                update.update(error=verdict.reason, error_kind=ErrorKind.JUDGE.value)
        events.verdict(verdict)
        trajectory.verdict = verdict
        if self.served is not None:
            self.served.judged(state.run_id, trajectory, verdict)
        return {**update, "verdict": verdict.model_dump(mode="json"), "trajectory": trajectory.model_dump(mode="json")}

    def _llm_verdict(self, trajectory: Trajectory, runtime: Runtime[MTLContext]) -> Verdict:
        """The LLM judge's verdict; `uncertain` when it gives no usable answer, `error` when its provider failed
        on every attempt the run's retry settings allow."""
        with using_retry(self.retry_for(runtime)):
            try:
                if self.judge_override is not None:
                    return self.judge_override.judge(trajectory)
                from mtl_graph.judging.judges import LLMJudge

                return LLMJudge(self.model_for(runtime)).judge(trajectory)
            except Exception as exc:
                if is_transient(exc):
                    return Verdict.infrastructure_error(f"model provider error: judge: {describe(exc)}")
                return Verdict(status=VerdictStatus.UNCERTAIN, source="judge", reason=f"judge failed: {exc}")

    @timed("distill")
    def distill(self, state: RunState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        """Turn the run into memories (success or failure prompts by verdict); secrets redacted first. A suspect
        run (its solution reached into the test run) teaches nothing: it is distilled into no memory."""
        cfg = self.settings(runtime)
        if not cfg.loop.online or state.trajectory is None or (state.verdict is not None and state.verdict.suspicions):
            return {"distilled": [], "distill_failures": []}
        retrieved = cfg.retrieval.memory_type
        wanted = cfg.loop.distill_formats or ([retrieved] if retrieved != "none" else ["insight"])
        trajectory = state.trajectory
        model = None
        if formats.needs_model(wanted):
            try:
                model = self.model_for(runtime)
            except Exception as exc:
                return {"distilled": [], "distill_failures": [str(exc)]}
        with using_retry(self.retry_for(runtime)):
            result = self.distiller(trajectory, wanted, model)
        memories = [m.model_dump(mode="json") for m in result.memories]
        failures = [f"{f.format.value}: {f.reason}" for f in result.failures]
        if failures:
            events.emit("distill_failed", failures=failures)
        return {"distilled": memories, "distill_failures": failures}

    @timed("write_back")
    def write_back(self, state: RunState, runtime: Runtime[MTLContext]) -> dict[str, Any]:
        """Online mode: add memories (dedup) and credit the retrieved ones; always append the run log.

        An errored run writes nothing and credits or debits no memory; its verdict is `error`. A suspect run
        credits or debits none either: its verdict says nothing about what the memories were worth."""
        cfg = self.settings(runtime)
        update: dict[str, Any] = {"new_memory_ids": [], "memories_written": AddReport().summary()}
        verdict = state.verdict
        if state.error and (verdict is None or not verdict.is_error):
            verdict = Verdict.infrastructure_error(state.error)
            update["verdict"] = verdict.model_dump(mode="json")
        if verdict is not None and verdict.is_error and "judge" not in state.timings:
            events.verdict(verdict)  # the run never reached the judge: its verdict is told here
        try:
            if cfg.loop.online and not state.error:
                judge = self.model_for(runtime) if cfg.retrieval.lifecycle_settings.supersede_with_model else None
                update.update(write_run(self.pool_of(cfg), state, cfg, verdict, self.served, judge))
        except Exception as exc:
            update.update(failure(ErrorKind.WRITE_BACK, str(exc)))
        update["retrieved_ids"] = shown_ids(state)
        if searched := search_trace(state.trajectory):  # the agent's own searches, hop by hop
            update["retrieval"] = {**(state.retrieval or {}), "searches": searched}
        error = update.get("error") or state.error
        kind = update.get("error_kind") if update.get("error") else state.error_kind
        update["error_kind"] = (kind or error_kind_of(error)) if error else None
        update["outcome"] = run_outcome(verdict, error)
        self._log(state, cfg, update, verdict)
        self._cleanup(state)
        return update

    def crashed(self, state: RunState, error: NodeError, runtime: Runtime[MTLContext],
                config: RunnableConfig) -> None:
        """The graph's error handler: a node raised (after its retries). Log the run, remove its workspace, and
        raise the node's exception again so the graph run fails (LangSmith and Studio show it as failed)."""
        message = f"{error.node} raised {type(error.error).__name__}: {error.error}"
        workspace = state.workspace or self._workspace_of(state, config)
        self.abandon(state.model_copy(update={"workspace": workspace}), message, runtime)
        raise error.error

    def abandon(self, state: RunState, message: str, runtime: Any) -> None:
        """A run that will not reach write back (it raised): log it with an `error` verdict, crediting and writing
        nothing, and close its workspace."""
        update: dict[str, Any] = {"new_memory_ids": [], "memories_written": AddReport().summary(), "error": message,
                                  "error_kind": ErrorKind.CRASHED.value}
        try:
            self._log(state, self.settings(runtime), update, Verdict.infrastructure_error(message))
        finally:
            self._cleanup(state)

    def _workspace_of(self, state: RunState, config: RunnableConfig) -> str | None:
        """The run's workspace when the state does not have it yet: a crash inside the execute subgraph happens
        before its update reaches this graph's state, yet the workspace is made (keyed by thread and run)."""
        if not state.run_id or not isinstance(state.task, dict):
            return None
        try:
            task = self.task(state.task)
        except ValueError:  # a task the run never had: no workspace was made for it
            return None
        path = workspace_path(self.config.sandbox.workspace_root, config, state.run_id, task.id)
        return str(path) if path.exists() else None

    def _log(self, state: RunState, cfg: MTLConfig, update: dict[str, Any], verdict: Verdict | None) -> None:
        from mtl_graph.config.environment import get_settings

        path = cfg.loop.run_log or Path(get_settings().run_log)
        task = state.task if isinstance(state.task, dict) else {"id": str(state.task)}
        trajectory = state.trajectory.model_dump(mode="json") if state.trajectory is not None else {
            "task": {k: task.get(k) for k in ("id", "domain", "instruction") if task.get(k) is not None}}
        append_run_log(path, {
            "record": "run", **trajectory, "run_id": state.run_id, "memory_type": cfg.retrieval.memory_type,
            "verdict": verdict.model_dump(mode="json") if verdict else None,
            "tests_modified": verdict.tests_modified if verdict else [],
            "dropped": verdict.dropped if verdict else [], "suspicions": verdict.suspicions if verdict else [],
            "query": state.query, "retrieved": state.retrieved,
            "retrieval": update.get("retrieval", state.retrieval), "credit": update.get("credit"),
            "re_retrieved": state.re_retrieved,
            "new_memory_ids": update["new_memory_ids"], "memories_written": update["memories_written"],
            "distill_failures": state.distill_failures, "reviewed": state.reviewed,
            "timings": state.timings, "cost": state.cost,
            "error": update.get("error") or state.error,
            "error_kind": update.get("error_kind"),
        })

    def _cleanup(self, state: RunState) -> None:
        try:
            workspace = self.workspace(state)
        except PolicyError as exc:  # a thread update named a directory of the server's: it is left alone
            events.warning(f"not removed: {exc}")
            return
        close_workspace(workspace, keep=self.config.sandbox.keep_workspaces)


def run_outcome(verdict: Verdict | None, error: str | None) -> str | None:
    """`success`, `failure`, `unknown` (judged but undecided) or `error` (the run did not get a fair try)."""
    if error or (verdict is not None and verdict.is_error):
        return "error"
    return verdict.outcome.value if verdict is not None else None
