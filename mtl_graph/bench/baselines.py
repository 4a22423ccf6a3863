"""The baselines MTL is compared with, as conditions of one ordered task sequence through the real MTL graph: the
same tasks, agent, model, sandbox and retrieval budget (top k) for each, each from a fresh copy of the same
starting pool, the pool growing in task order (self-evolving).

* ``reasoningbank``: the `reasoningbank` format (up to three items per run, from successes and failures, our
  own prompts), same-domain, no plan (the task behind an instruction prefix is the query), no merging beyond
  identical content, top k by similarity.
* ``awm``: Agent Workflow Memory: the `workflow` format, induced from successful runs only, same-domain, online.
* ``mtl``: ours in the paper's mode: insights, a planned query, top k by similarity (lifecycle off), from any
  domain, written back online.
* ``mtl+lifecycle``: ours with the learning loop: credit from citations, utility re-ranking behind a relevance
  floor, near copies credited instead of added, quarantine.
* ``mtl+tool`` (not in the default set): ours with the learning loop and memory as a tool: nothing injected, the
  agent calls ``search_memories`` itself, within the run's search budget.

Per condition the report gives pass@1 and pass@k over `attempts` passes of the sequence, the pool at the end
(memories of the condition's format, and items), memories retrieved per run, and every extra model call and
token per run (plan, judge, distill: what the memory method costs beyond the agent's own calls) beside the pass
rate, so "better with a smaller pool" and "at what cost" can be checked.

    mtl eval-baselines --tasks 12 --attempts 3 --out DIR      # run_and_report(...) from Python
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from mtl_graph.bench.learning import AgentFactory, ConditionResult, PoolFactory, run_record
from mtl_graph.bench.passk import pass_at_k
from mtl_graph.core.task import Task
from mtl_graph.core.cost import AGENT_STAGE, extra
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.pool import MemoryPool


@dataclass(frozen=True)
class Baseline:
    """How one condition runs the graph."""

    name: str
    """The condition's name (`--condition`)."""
    memory_type: str
    """The memory format it retrieves and distils."""
    lifecycle: str
    """"on": the learning loop; "off": top k by similarity."""
    same_domain: bool
    """Retrieve only memories from the task's own domain."""
    successes_only: bool = False
    """Distil successful runs only (failures teach nothing)."""
    retrieval: str = "inject"
    """How memories reach the agent: injected before it starts, or found by its own search_memories calls."""


ERROR = "error"
"""A run's status when it ended in an infrastructure error (the verdict `error`)."""
CONDITIONS: dict[str, Baseline] = {b.name: b for b in (
    Baseline("reasoningbank", "reasoningbank", "off", same_domain=True),
    Baseline("awm", "workflow", "off", same_domain=True, successes_only=True),
    Baseline("mtl", "insight", "off", same_domain=False),
    Baseline("mtl+lifecycle", "insight", "on", same_domain=False),
    Baseline("mtl+tool", "insight", "on", same_domain=False, retrieval="tool"),
)}
DEFAULT_CONDITIONS = ("reasoningbank", "awm", "mtl", "mtl+lifecycle")
"""The paper's comparison (what runs when no condition is named)."""


def check_conditions(names: Sequence[str]) -> list[str]:
    """The names, each a known condition (ValueError in one line naming the known ones otherwise)."""
    names = list(names)
    if not names:
        raise ValueError(f"name at least one condition: {', '.join(CONDITIONS)}")
    for name in names:
        if name not in CONDITIONS:
            raise ValueError(f"unknown condition {name!r}; choose one of {', '.join(CONDITIONS)}")
    return names


def successes_only(trajectory: Any, formats: Sequence[str], model: Any) -> Any:
    """A distiller that learns from successful runs only (AWM); any other run yields nothing."""
    from mtl_graph.distill.distillers import DistillResult
    from mtl_graph.pipeline.stages import default_distiller
    from mtl_graph.memory.base import Outcome

    outcome = trajectory.verdict.outcome if trajectory.verdict else Outcome.UNKNOWN
    if outcome != Outcome.SUCCESS:
        return DistillResult(task_id=trajectory.task.id, content_hash=trajectory.content_hash(), outcome=outcome)
    return default_distiller(trajectory, formats, model)


def run_baseline(tasks: Sequence[Task], pool: MemoryPool, agent_factory: AgentFactory, condition: str, *,
                 top_k: int = 3, sandbox: str = "auto", lifecycle: LifecycleConfig | None = None,
                 run_log: Path | None = None) -> ConditionResult:
    """The sequence, in order, through the MTL graph over `pool` under one baseline condition."""
    from mtl_graph.pipeline import build_mtl_graph

    spec = CONDITIONS[check_conditions([condition])[0]]
    runs = []
    for index, task in enumerate(tasks):
        start = time.perf_counter()
        graph = build_mtl_graph(agent_factory(task), pool, top_k=top_k, online=True, memory_type=spec.memory_type,
                                lifecycle=spec.lifecycle, same_domain=spec.same_domain, sandbox=sandbox,
                                retrieval=spec.retrieval,
                                run_log=run_log, lifecycle_settings=lifecycle or LifecycleConfig(),
                                distiller=successes_only if spec.successes_only else None)
        state = graph.invoke({"task": task})  # a run that errors (provider, sandbox) is kept as one, not a fail
        runs.append(run_record(index, task, state, None, time.perf_counter() - start))
    return ConditionResult(condition, runs, pool.count(spec.memory_type))


def items_in(pool: MemoryPool, memory_type: str) -> int:
    """Items of that format in the pool: a reasoningbank memory holds up to three, any other memory is one."""
    return sum(len(getattr(m, "items", None) or [m]) for m in pool if m.type == memory_type)


@dataclass
class BaselineResult:
    """Every condition over the same sequence, `attempts` times each."""

    task_ids: list[str]
    attempts: dict[str, list[ConditionResult]]
    """Per condition, one result per pass of the sequence (each from a fresh starting pool)."""
    items_end: dict[str, list[int]]
    """Per condition and pass, the items of its format in the pool at the end."""
    seconds: float = 0.0

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per condition: pass@1, pass@k, pool at the end, memories retrieved and cost per run."""
        return {name: _summary(results, self.items_end[name]) for name, results in self.attempts.items()}

    def extend(self, other: "BaselineResult") -> "BaselineResult":
        """This result with another pass of the same sequence added to each condition."""
        for name, results in other.attempts.items():
            self.attempts.setdefault(name, []).extend(results)
            self.items_end.setdefault(name, []).extend(other.items_end[name])
        self.seconds += other.seconds
        return self

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.task_ids, "seconds": round(self.seconds, 1), "summary": self.summary(),
                "runs": {name: [[asdict(r) for r in c.runs] for c in results]
                         for name, results in self.attempts.items()}}


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def _summary(results: list[ConditionResult], items: list[int]) -> dict[str, Any]:
    """Pass@1 and pass@k over completed runs (a run that ended in an infrastructure error is counted beside
    them, not as a failure), and the pool and the cost, per run."""
    k = len(results)
    runs = [r for c in results for r in c.runs]
    done = [[c.runs[i].passed for c in results if c.runs[i].status != ERROR] for i in range(len(results[0].runs))]
    done = [t for t in done if t]  # a task whose every attempt errored is not scored
    extras = [extra(r.cost) for r in runs]
    agent = [r.cost.get(AGENT_STAGE, {}) for r in runs]
    stages = sorted({s for r in runs for s in r.cost if s != AGENT_STAGE})
    return {
        "k": k,
        "pass@1": round(_mean([sum(t) / len(t) for t in done]), 4),
        f"pass@{k}": round(_mean([pass_at_k(len(t), sum(t), min(k, len(t))) for t in done]), 4),
        "errors": sum(r.status == ERROR for r in runs),
        "pool_size_end": _mean([c.pool_size_end for c in results]),
        "items_end": _mean(items),
        "retrieved_per_run": _mean([len(r.shown) for r in runs]),
        "extra_calls_per_run": _mean([e["calls"] for e in extras]),
        "extra_input_tokens_per_run": _mean([e["input_tokens"] for e in extras]),
        "extra_output_tokens_per_run": _mean([e["output_tokens"] for e in extras]),
        "memory_tool_calls_per_run": _mean([e["memory_tool_calls"] for e in extras]),
        "extra_per_stage_per_run": {s: {key: _mean([r.cost.get(s, {}).get(key, 0) for r in runs])
                                        for key in ("calls", "input_tokens", "output_tokens")} for s in stages},
        "agent_calls_per_run": _mean([a.get("calls", 0) for a in agent]),
        "agent_tokens_per_run": _mean([a.get("input_tokens", 0) + a.get("output_tokens", 0) for a in agent]),
    }


def run_baselines(tasks: Sequence[Task], pool_factory: PoolFactory, agent_factory: AgentFactory,
                  conditions: Sequence[str] = DEFAULT_CONDITIONS, *, attempts: int = 1,
                  **options: Any) -> BaselineResult:
    """Every condition over the same ordered tasks, `attempts` times, each pass from a fresh pool of
    `pool_factory` (the same starting pool for every condition and pass)."""
    names = check_conditions(conditions)  # before any pool is made
    if not tasks:
        raise ValueError("a sequence needs at least one task")
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    start = time.perf_counter()
    results: dict[str, list[ConditionResult]] = {}
    items: dict[str, list[int]] = {}
    for name in names:
        for _ in range(attempts):
            pool = pool_factory()
            try:
                results.setdefault(name, []).append(run_baseline(tasks, pool, agent_factory, name, **options))
                items.setdefault(name, []).append(items_in(pool, CONDITIONS[name].memory_type))
            finally:
                pool.close()
    return BaselineResult([t.id for t in tasks], results, items, time.perf_counter() - start)


# ------------------------------------------------------------------ the scripted sequence
STARTS = ("positive", "transfer")
"""Starting pools of the scripted sequence: the positive one (neutral memories: every condition learns to verify
from its own runs), or that and the verify lesson from another domain in each format (`foreign_lessons`)."""


def check_start(start: str) -> None:
    """ValueError in one line unless `start` names a starting pool of the scripted sequence."""
    if start not in STARTS:
        raise ValueError(f"unknown starting pool {start!r}; choose {' or '.join(STARTS)}")


def scripted(conditions: Sequence[str] = DEFAULT_CONDITIONS, n: int = 12, attempts: int = 1, seed: int = 7,
             embeddings: Any = None, sandbox: str = "auto", root: Path | None = None,
             run_log: Path | None = None, start: str = "positive") -> BaselineResult:
    """The positive scripted sequence (learning_sequences: a pool that can learn to verify) under each condition,
    with the scripted agent, from the `start` pool; pass p of `attempts` draws its coin flips from seed + p."""
    from mtl_graph.bench import learning_sequences as ls

    names = check_conditions(conditions)
    check_start(start)
    with tempfile.TemporaryDirectory(prefix="mtl-baselines-", dir=root) as pools:

        def pool_factory() -> MemoryPool:
            pool = ls.starting_pool(MemoryPool.open(tempfile.mkdtemp(dir=pools), embeddings), "positive")
            if start == "transfer":
                pool.add_many(ls.foreign_lessons())
            return pool

        result: BaselineResult | None = None
        for p in range(attempts):  # each pass its own coin flips, the same for every condition
            specs = {s.task.id: s for s in ls.make_tasks(n, seed=seed + p, prefix="base")}
            one = run_baselines([s.task for s in specs.values()], pool_factory,
                                lambda task: ls.agent_for(specs[task.id]), names, sandbox=sandbox, run_log=run_log)
            result = one if result is None else result.extend(one)
        assert result is not None
        return result


def suite_tasks(specs: Sequence[str], limit: int | None = None, seed: int = 42) -> list[Task]:
    """The runnable tasks of the suites, in the suites' order (what the agent may see: no reference solution);
    a suite that cannot run here, or none with a task, is a ValueError in one line."""
    from mtl_graph.bench.graph_runner import agent_task
    from mtl_graph.bench.suites import load_suite

    tasks: list[Task] = []
    for spec in specs:
        suite = load_suite(spec, limit, seed)
        if suite.skip_reason:
            raise ValueError(f"suite {spec} cannot run here: {suite.skip_reason}")
        tasks.extend(agent_task(t) for t in suite.tasks)
    if not tasks:
        raise ValueError(f"no runnable task in {', '.join(specs)}")
    return tasks


def copies_of(start: Path | None, root: Path, embeddings: Any = None) -> PoolFactory:
    """A pool factory: each call a fresh copy of the pool directory `start` (None: an empty pool) under `root`,
    so every condition and pass starts from the same pool and the original is never written."""
    import shutil

    made = iter(range(10**9))

    def factory() -> MemoryPool:
        target = root / f"pool-{next(made)}"
        if start is not None:
            shutil.copytree(start, target)
        return MemoryPool.open(target, embeddings)

    return factory


# ------------------------------------------------------------------ report
COLUMNS = ("condition", "pass@1", "pass@k", "pool at end (memories / items)", "retrieved per run",
           "extra calls per run", "extra tokens per run (in / out)", "memory tool calls per run",
           "agent calls per run", "errored runs")


def markdown(result: BaselineResult) -> str:
    """One row per condition: pass rates beside the pool and the extra cost."""
    rows = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, s in result.summary().items():
        k = s["k"]
        rows.append(f"| {name} | {s['pass@1']:.0%} | {s[f'pass@{k}']:.0%} (k={k}) | {s['pool_size_end']:g} / "
                    f"{s['items_end']:g} | {s['retrieved_per_run']:g} | {s['extra_calls_per_run']:g} | "
                    f"{s['extra_input_tokens_per_run']:g} / {s['extra_output_tokens_per_run']:g} | "
                    f"{s['memory_tool_calls_per_run']:g} | {s['agent_calls_per_run']:g} | {s['errors']} |")
    stages = "; ".join(f"{name}: " + ", ".join(f"{stage} {c['calls']:g}" for stage, c in
                                               s["extra_per_stage_per_run"].items()) or f"{name}: none"
                       for name, s in result.summary().items())
    return (f"{len(result.task_ids)} tasks in order, the same for every condition.\n\n" + "\n".join(rows)
            + f"\n\nExtra calls per run by stage — {stages}.\n")


def plot(result: BaselineResult, path: Path) -> Path:
    """Running pass rate over the sequence, one line per condition (mean over its passes; PNG)."""
    from mtl_graph.bench.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    styles = iter(["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1))])
    for name, results in result.attempts.items():
        curves = [c.running() for c in results]
        mean = [sum(values) / len(values) for values in zip(*curves)]
        ax.plot(range(1, len(mean) + 1), mean, linestyle=next(styles), label=f"{name} ({mean[-1]:.0%})")
    ax.set_xlabel("run in the sequence")
    ax.set_ylabel("running pass rate")
    ax.set_ylim(0, 1.05)
    ax.set_title("baselines over one task sequence")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def write_report(result: BaselineResult, out: Path) -> dict[str, Path]:
    """baselines.json, baselines.md and baselines.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "baselines.json", "md": out / "baselines.md", "png": out / "baselines.png"}
    paths["json"].write_text(json.dumps(result.to_json(), indent=1, default=str), encoding="utf-8")
    paths["md"].write_text(markdown(result), encoding="utf-8")
    plot(result, paths["png"])
    return paths


def run_and_report(out: Path, conditions: Sequence[str] = (), *, suites: Sequence[str] = (),
                   model: str | None = None, pool: Path | None = None, tasks: int = 12, attempts: int = 1,
                   top_k: int = 3, sandbox: str = "auto", start: str = "positive") -> dict[str, Path]:
    """The scripted sequence, or the suites' tasks with `model`, under each condition (default: all), reported in
    `out` (what `mtl eval-baselines` runs). Bad input is a ValueError before anything is written."""
    from mtl_graph.llm.chat import ModelNotConfigured, check_model

    names = check_conditions(list(conditions) or list(DEFAULT_CONDITIONS))
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    if suites:
        if not model:
            raise ValueError("--suite needs --model (provider:model or scripted:FILE.json)")
        if pool is not None and not Path(pool).is_dir():
            raise ValueError(f"no pool directory at {pool}")
        try:
            check_model(model)
        except ModelNotConfigured as exc:
            raise ValueError(str(exc)) from None
        sequence = suite_tasks(suites, tasks)
    else:
        from mtl_graph.bench.learning_sequences import make_tasks

        make_tasks(tasks)  # a bad count fails here
        check_start(start)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "runs.jsonl"
    if suites:
        with tempfile.TemporaryDirectory(prefix="mtl-baselines-") as pools:
            result = run_baselines(sequence, copies_of(pool, Path(pools)), lambda task: model, names,
                                   attempts=attempts, top_k=top_k, sandbox=sandbox, run_log=log)
    else:
        result = scripted(names, tasks, attempts, sandbox=sandbox, run_log=log, start=start)
    return write_report(result, out)
