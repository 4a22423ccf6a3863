"""The research protocol: zero-shot runs, distillation into one pool, memory runs per format (hold-one-out)."""

from __future__ import annotations

import logging
import random
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable

from pydantic import BaseModel, Field

from mtl_graph.bench.records import Condition, EvalConfig, MemoryScope, Pool, RunOutcome, TaskResult
from mtl_graph.bench.passk import is_error
from mtl_graph.bench.runners import Runner
from mtl_graph.bench.results import SUITES_FILE, ResultStore
from mtl_graph.bench.suites import Suite, SuiteError, load_suite, normalize_spec
from mtl_graph.core.task import Task

log = logging.getLogger(__name__)

Distiller = Callable[[list[TaskResult]], Pool]
"""Phase 2: turns the zero-shot results (with trajectories) into memories in the shared pool."""


class EvalSummary(BaseModel):
    """What one invocation did."""

    ran: dict[str, int] = Field(default_factory=dict)
    """Runs executed per phase."""
    resumed: dict[str, int] = Field(default_factory=dict)
    """Runs skipped per phase because a stored result exists."""
    errors: int = 0
    """Runs that ended with an infrastructure error (retried on the next invocation)."""
    leaks: int = 0
    """Runs that retrieved a memory outside their scope."""
    skipped_suites: dict[str, str] = Field(default_factory=dict)
    """Suites that cannot run here, with the reason."""
    pool_size: int = 0
    """Memories in the phase-2 pool."""
    stopped: str | None = None
    """Why the protocol stopped before phase 2 (it needs every zero-shot run to have finished)."""


def build_scope(task: Task, condition: Condition, pool: Pool, config: EvalConfig) -> MemoryScope | None:
    """The memories a run of task under condition may retrieve (None for zero-shot)."""
    fmt = condition.memory_format
    if fmt is None:
        return None
    typed = [m for m in pool.memories if m.type == fmt]
    restricted: set[str] | None = None

    def narrow(ids: Iterable[str]) -> None:
        nonlocal restricted
        restricted = set(ids) if restricted is None else restricted & set(ids)

    if condition.pool_fraction < 1.0:
        # One shuffle per format, then prefixes: the 1/4 subset lies inside the 1/2 subset, and so on.
        ids = sorted(m.id for m in typed)
        random.Random(f"{config.seed}:pool:{fmt.value}").shuffle(ids)
        narrow(ids[: round(condition.pool_fraction * len(ids))])
    if condition.source_model:
        narrow(m.id for m in typed if condition.source_model in m.task_models)
    if condition.source_domains:
        others = sorted({d for m in typed for d in m.domains} - {task.domain})
        rng = random.Random(f"{config.seed}:domains:{condition.source_domains}:{task.domain}")
        chosen = set(rng.sample(others, min(condition.source_domains, len(others))))
        narrow(m.id for m in typed if m.domains and set(m.domains) <= chosen)
    return MemoryScope(
        memory_type=fmt,
        exclude_domains=[task.domain] if condition.holdout else [],
        exclude_task_ids=[task.id],
        only_ids=None if restricted is None else sorted(restricted),
        top_k=config.top_k,
    )


def audit(task: Task, scope: MemoryScope | None, outcome: RunOutcome) -> list[str]:
    """Ids of retrieved memories that break the scope: the provenance check behind hold-one-out."""
    if scope is None:
        return [m.id for m in outcome.retrieved]
    allowed = None if scope.only_ids is None else set(scope.only_ids)
    return [m.id for m in outcome.retrieved
            if set(m.domains) & set(scope.exclude_domains)
            or set(m.source_task_ids) & set(scope.exclude_task_ids)
            or (m.type and m.type != scope.memory_type.value)
            or (allowed is not None and m.id not in allowed)]


class Harness:
    """Runs the three phases for one configuration into one results directory, resuming what is done."""

    def __init__(self, config: EvalConfig, runner: Runner, store: ResultStore, distill: Distiller | None = None,
                 concurrency: int = 1, progress: bool = True):
        self.config, self.runner, self.store = config, runner, store
        self.distill = distill
        self.concurrency = max(1, concurrency)
        self.progress = progress

    def load_suites(self) -> list[Suite]:
        return load_suites(self.config)

    def run(self, suites: list[Suite] | None = None) -> EvalSummary:
        """Run the protocol over suites (loaded from the configuration when not given)."""
        summary = EvalSummary()
        suites = self.load_suites() if suites is None else suites
        self.store.write_json(SUITES_FILE, [
            {**s.model_dump(mode="json", exclude={"tasks"}), "tasks": [t.id for t in s.tasks]} for s in suites])
        for s in suites:
            if s.skip_reason:
                summary.skipped_suites[s.spec] = s.skip_reason
                log.warning("suite %s skipped: %s", s.spec, s.skip_reason)
        tasks = [(s.name, t) for s in suites for t in s.tasks]
        zero, *memory_conditions = self.config.conditions()
        self._phase("phase 1: zero-shot", tasks, [zero], Pool(), summary)
        missing = self._unfinished_zero_shot(tasks)
        if memory_conditions and missing:
            # Distilling now would freeze a pool without these runs' memories for every later resume.
            summary.stopped = (f"{missing} zero-shot run(s) ended with an error; rerun the same command to retry "
                               "them before the pool is distilled")
            log.warning(summary.stopped)
            return summary
        if memory_conditions:
            pool = self._pool()
            summary.pool_size = len(pool.memories)
            self._phase("phase 3: memory transfer", tasks, memory_conditions, pool, summary)
        return summary

    def _unfinished_zero_shot(self, tasks: list[tuple[str, Task]]) -> int:
        zero = self.config.conditions()[0]
        done = self.store.done()
        return sum((suite, task.id, zero.key, a) not in done for suite, task in tasks
                   for a in range(self.config.n_samples))

    def _pool(self) -> Pool:
        """Phase 2, once per results directory: distill zero-shot runs; a saved pool is reused on resume."""
        pool = self.store.load_pool()
        if pool is None:
            zero_shot = [r for r in self.store.results() if r.condition.is_zero_shot]
            pool = self.distill(zero_shot) if self.distill else Pool(note="no distiller given: empty pool")
            self.store.save_pool(pool)
        return pool

    def _phase(self, title: str, tasks: list[tuple[str, Task]], conditions: list[Condition], pool: Pool,
               summary: EvalSummary) -> None:
        done = self.store.done()
        jobs = [(suite, task, cond, a) for cond in conditions for suite, task in tasks
                for a in range(self.config.n_samples)]
        todo = [j for j in jobs if (j[0], j[1].id, j[2].key, j[3]) not in done]
        summary.resumed[title] = len(jobs) - len(todo)
        summary.ran[title] = 0
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, disable=not self.progress) as bar:
            bar_id = bar.add_task(title, total=len(jobs), completed=len(jobs) - len(todo))
            for result in self._execute(todo, pool):
                self.store.append(result)
                summary.ran[title] += 1
                summary.errors += is_error(result)
                summary.leaks += bool(result.leaked_memory_ids)
                bar.advance(bar_id)

    def _execute(self, jobs: list[tuple[str, Task, Condition, int]], pool: Pool) -> Iterable[TaskResult]:
        """Yield results as they finish; on an interrupt, cancel what has not started and re-raise."""
        executor = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="mtl-bench")
        pending: set[Future] = set()
        try:
            pending = {executor.submit(self._one, pool, *job) for job in jobs}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
        finally:
            executor.shutdown(wait=not pending, cancel_futures=True)

    def _one(self, pool: Pool, suite: str, task: Task, condition: Condition, attempt: int) -> TaskResult:
        try:
            scope = build_scope(task, condition, pool, self.config)
            outcome = self.runner.run(task, condition, attempt, scope)
        except Exception as exc:  # one broken run must not stop the evaluation; it is retried on resume
            log.exception("run failed: %s %s #%d", task.id, condition.key, attempt)
            scope, outcome = None, RunOutcome(error=f"{type(exc).__name__}: {exc}")
        leaks = audit(task, scope, outcome)
        if leaks:
            log.error("provenance violation: %s under %s retrieved %s", task.id, condition.key, leaks)
        if outcome.cost_usd is None:
            outcome.cost_usd = (outcome.tokens.input * self.config.price_input_per_mtok
                                + outcome.tokens.output * self.config.price_output_per_mtok) / 1e6
        return TaskResult(**dict(outcome), suite=suite, task_id=task.id, domain=task.domain, condition=condition,
                          attempt=attempt, runner=self.runner.name, leaked_memory_ids=leaks)


def load_suites(config: EvalConfig) -> list[Suite]:
    """Every suite of a configuration; a SuiteError when one cannot load or two share a name."""
    suites = [load_suite(spec, config.limit, config.seed) for spec in config.suites]
    names = [s.name for s in suites]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SuiteError(f"two suites share the name {', '.join(dupes)}; suite names are domains and must differ")
    return suites


def run_eval(config: EvalConfig, runner: Runner, out: str, distill: Distiller | None = None,
             concurrency: int = 1, progress: bool = True) -> EvalSummary:
    """One-call entry point: open (or resume) the results directory ``out`` and run the protocol.

    The configuration is fixed (config.json written) only once its suites have loaded, with their paths made
    absolute: a typo in a path leaves nothing behind, and ``./x`` and ``/abs/x`` are the same configuration.
    """
    config = config.model_copy(update={"suites": [normalize_spec(s) for s in config.suites]})
    suites = load_suites(config)
    store = ResultStore(out, config)
    return Harness(config, runner, store, distill, concurrency, progress).run(suites)
