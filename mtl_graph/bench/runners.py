"""Runners: how one attempt at one task is executed. Offline runners with known results live here.

A graph-backed runner (in-process ``build_mtl_graph``) and a remote one (``langgraph_sdk``) implement the
same protocol: take the task, the condition and the memory scope, return a RunOutcome.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Protocol, runtime_checkable

from mtl_graph.judging.ground_truth import run_check, run_setup
from mtl_graph.judging.clean_room import discard_snapshot, take_snapshot
from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.bench.records import Condition, MemoryScope, Pool, RetrievedMemory, RunOutcome
from mtl_graph.bench.suites.base import REFERENCE_KEY, REFERENCE_SCRIPT_KEY, REFERENCE_UNAVAILABLE_KEY
from mtl_graph.core.trajectory import Step, TokenUsage, Trajectory
from mtl_graph.memory.base import MemoryType
from mtl_graph.core.task import Task
from mtl_graph.core.errors import MTLError

SolvePolicy = Callable[[Task, Condition, int], bool]


@runtime_checkable
class Runner(Protocol):
    """Runs one attempt; must be safe to call from several threads at once."""

    name: str
    """Recorded with each result."""

    def run(self, task: Task, condition: Condition, attempt: int, scope: MemoryScope | None) -> RunOutcome:
        """Run task under condition; scope is None for zero-shot, else which memories may be retrieved."""
        ...


def eligible(pool: Pool, scope: MemoryScope) -> list[str]:
    """Ids of the pool's memories a scope allows, in pool order: the reference semantics of MemoryScope."""
    allowed = None if scope.only_ids is None else set(scope.only_ids)
    return [m.id for m in pool.memories
            if m.type == scope.memory_type
            and (allowed is None or m.id in allowed)
            and not set(m.domains) & set(scope.exclude_domains)
            and not set(m.source_task_ids) & set(scope.exclude_task_ids)]


def submit_reference(task: Task, sandbox, files: Mapping[str, str], script: str | None) -> list[Step]:
    """Write the reference files, then run the reference script (if any) in the sandbox the agent would have had:
    the steps taken. The script's exit code is recorded, not judged: the check decides."""
    steps = []
    for path, content in files.items():
        sandbox.write_file(path, content)
        steps.append(Step(action=f"write {path}", tool="write_file", args={"path": path},
                          observation=f"wrote {len(content)} chars"))
    if script:
        result = sandbox.run(script, timeout=task.check_timeout)
        steps.append(Step(action=script, tool="bash", observation=result.output,
                          exit_code=result.exit_code, duration_s=result.duration_s))
    return steps


class ReferenceRunner:
    """Submits the task's reference solution when ``solve`` says so, else leaves the stub; then runs the check.

    With a pool it also "retrieves" the first top_k memories its scope allows, so provenance can be audited
    without a vector store.
    """

    def __init__(self, solve: SolvePolicy, name: str, pool: Pool | None = None,
                 workdir: str | Path | None = None, sandbox: str = "local"):
        self.solve = solve
        self.sandbox_kind = sandbox
        self.name = name
        self.pool = pool
        self.workdir = workdir

    def check_sandbox(self, room: Path):
        """The sandbox of a check: one bwrap per command (the check runs one or two)."""
        return make_sandbox(self.sandbox_kind, room, SandboxConfig(bwrap_persistent=False))

    def retrieve(self, scope: MemoryScope | None) -> list[RetrievedMemory]:
        if scope is None or self.pool is None:
            return []
        by_id = {m.id: m for m in self.pool.memories}
        picked = eligible(self.pool, scope)[: scope.top_k]
        return [RetrievedMemory(id=i, score=1.0, type=by_id[i].type.value, domains=by_id[i].domains,
                                source_task_ids=by_id[i].source_task_ids) for i in picked]

    def run(self, task: Task, condition: Condition, attempt: int, scope: MemoryScope | None) -> RunOutcome:
        start = time.monotonic()
        retrieved = self.retrieve(scope)
        steps: list[Step] = []
        submitted = False
        with tempfile.TemporaryDirectory(prefix="mtl-bench-", dir=self.workdir) as tmp:
            workspace = task.materialize(Path(tmp) / "workspace")
            sandbox = make_sandbox(self.sandbox_kind, workspace)
            try:
                if setup := run_setup(task, sandbox):
                    steps.append(Step(action=task.setup or "", observation=setup.output, exit_code=setup.exit_code,
                                      duration_s=setup.duration_s))
                take_snapshot(workspace)
                if self.solve(task, condition, attempt):
                    reference, script = task.metadata.get(REFERENCE_KEY), task.metadata.get(REFERENCE_SCRIPT_KEY)
                    if not reference and not script:
                        why = task.metadata.get(REFERENCE_UNAVAILABLE_KEY) or "has no reference solution"
                        return RunOutcome(error=f"task {task.id}: {why}", retrieved=retrieved)
                    steps += submit_reference(task, sandbox, reference or {}, script)
                    submitted = True
                sandbox.close()
                verdict = run_check(task, workspace, self.check_sandbox)
            except RuntimeError as exc:
                return RunOutcome(error=str(exc), retrieved=retrieved, duration_s=time.monotonic() - start)
            finally:
                sandbox.close()
                discard_snapshot(workspace)
        trajectory = Trajectory(task=task.ref(), steps=steps, verdict=verdict, model=self.name,
                                submission="reference solution" if submitted else None,
                                exit_status="submitted")
        return RunOutcome(verdict=verdict, trajectory=trajectory, retrieved=retrieved,
                          duration_s=time.monotonic() - start)


class OracleRunner(ReferenceRunner):
    """Always submits the reference solution: every task with one must pass."""

    def __init__(self, **kwargs):
        super().__init__(lambda task, condition, attempt: True, name="oracle", **kwargs)


class NoopRunner(ReferenceRunner):
    """Submits nothing: the untouched stub must fail every check."""

    def __init__(self, **kwargs):
        super().__init__(lambda task, condition, attempt: False, name="noop", **kwargs)


class ScriptedRunner(ReferenceRunner):
    """Solves a known subset of tasks: one set of ids, or a set per condition key (``"*"`` as the default)."""

    def __init__(self, solved: Collection[str] | Mapping[str, Collection[str]], **kwargs):
        table = {k: set(v) for k, v in solved.items()} if isinstance(solved, Mapping) else {"*": set(solved)}

        def policy(task: Task, condition: Condition, attempt: int) -> bool:
            return task.id in table.get(condition.key, table.get("*", set()))

        super().__init__(policy, name="scripted", **kwargs)


OFFLINE_RUNNERS: dict[str, Callable[..., ReferenceRunner]] = {"oracle": OracleRunner, "noop": NoopRunner}


def outcome_from_state(state: Mapping) -> RunOutcome:
    """A RunOutcome from the MTL graph's final state (a dict in-process, JSON from a LangGraph server).

    The state carries ``verdict``, ``trajectory``, ``retrieved`` (dicts with id, score, type, domains,
    source_task_ids) and ``new_memory_ids``; tokens come from the trajectory.
    """
    trajectory = state.get("trajectory")
    if trajectory is not None and not isinstance(trajectory, Trajectory):
        trajectory = Trajectory.model_validate(trajectory)
    verdict = state.get("verdict") or (trajectory.verdict if trajectory else None)
    return RunOutcome(
        verdict=verdict,
        judge_verdict=state.get("judge_verdict"),
        trajectory=trajectory,
        retrieved=[m if isinstance(m, RetrievedMemory) else RetrievedMemory.model_validate(m)
                   for m in state.get("retrieved") or []],
        new_memory_ids=list(state.get("new_memory_ids") or []),
        tokens=trajectory.tokens if trajectory else TokenUsage(),
        stage_cost=dict(state.get("cost") or {}),
        error=state.get("error"),
    )


class RunnerUnavailable(MTLError, RuntimeError):
    """The requested runner cannot be built in this installation."""


# Provides GraphRunner (in-process MTL graph), RemoteRunner (a LangGraph server) and make_distiller (phase 2);
# imported lazily so the offline harness works without the graph's dependencies loaded.
GRAPH_RUNNER_MODULE = "mtl_graph.bench.graph_runner"


def make_runner(agent: str | None = None, model: str | None = None, server: str | None = None,
                sandbox: str = "auto", pool: str | None = None, run_log: str | Path | None = None,
                formats: Collection[str] | None = None, judge_also: bool = False,
                context: Any = None, namespace: str | None = None) -> tuple[Runner, Callable | None]:
    """The runner for the CLI's options, and the phase-2 distiller that goes with it (None for offline runners).

    pool is where phase 2 writes and phase 3 retrieves (with server, the pool that server reads), in namespace
    (None: MTL_NAMESPACE, else the default; with server, the namespace that server reads); formats
    are the ones phase 2 distils (default: all). context holds run settings every run shares (agent limits,
    model options: an MTLContext or a dict); the protocol's own (memory format, k, filters) are set per run."""
    if agent and model:
        raise RunnerUnavailable("give either --agent (offline runner) or --model (graph runner), not both")
    if agent:
        if agent not in OFFLINE_RUNNERS:
            raise RunnerUnavailable(f"unknown agent {agent!r}; offline agents: {', '.join(OFFLINE_RUNNERS)}")
        if server:
            raise RunnerUnavailable("--server runs the graph remotely; it needs --model, not an offline --agent")
        return OFFLINE_RUNNERS[agent](sandbox=sandbox), None
    if not model:
        raise RunnerUnavailable("give --model PROVIDER:MODEL (graph runner) or --agent oracle|noop (offline)")
    import importlib

    from mtl_graph.config.names import MTLContext, as_context, merged

    shared = merged(as_context(context) or MTLContext(), MTLContext(judge_also=True) if judge_also else None)
    module = importlib.import_module(GRAPH_RUNNER_MODULE)
    if server:
        runner = module.RemoteRunner(url=server, model=model, context=shared)
    else:
        runner = module.GraphRunner(model=model, sandbox=sandbox, pool_location=pool, pool_namespace=namespace,
                                    run_log=run_log, context=shared)
    kinds = list(formats) if formats is not None else list(MemoryType)
    return runner, module.make_distiller(model=model, pool_location=pool, formats=kinds,
                                         model_options=shared.model_options, namespace=namespace)
