"""The learning condition: one ordered task sequence through the real MTL graph, with a frozen pool and with the
online loop on, from the same starting pool.

* ``static``: the paper's protocol. Write back is off (nothing distilled, nothing credited) and retrieval is the
  research's top k by similarity (``lifecycle="off"``): the pool the sequence starts with is the pool it ends with.
* ``learning``: write back on and the lifecycle on: every run is credited from the agent's citations, new
  memories are distilled and added, retrieval re-ranks by utility behind a relevance floor, and a memory whose
  cited runs fail is quarantined.

Per run it records the task, pass or fail, the memories injected and cited, whether the watched memory (the
harmful one) was injected, and what the run quarantined; over the sequence the running pass rate, the pass rate
per window, and after how many runs the watched memory stopped being served.

    mtl eval-learning --sequence negative --out DIR   # or: --sequence positive, --tasks 30
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task

CONDITIONS = ("static", "learning")


@dataclass
class RunRecord:
    """One run of the sequence."""

    index: int
    task_id: str
    passed: bool
    status: str
    injected: list[str]
    cited: list[str]
    watched_injected: bool
    quarantined: list[str] = field(default_factory=list)
    """Memories this run's credit quarantined (learning only)."""
    seconds: float = 0.0
    cost: dict[str, dict[str, int]] = field(default_factory=dict)
    """Model calls and input / output tokens per stage that called a model (the run's `cost`)."""
    shown: list[str] = field(default_factory=list)
    """Every memory the run was shown: injected, then found by its own searches (retrieval tool or both)."""


@dataclass
class ConditionResult:
    """One condition's pass over the sequence."""

    condition: str
    runs: list[RunRecord]
    pool_size_end: int = 0

    @property
    def pass_rate(self) -> float:
        return sum(r.passed for r in self.runs) / len(self.runs) if self.runs else 0.0

    def extra_per_run(self) -> dict[str, float]:
        """The memory method's mean extra model calls, tokens and memory tool calls per run (core/cost.py)."""
        from mtl_graph.core.cost import extra

        totals = [extra(r.cost) for r in self.runs]
        return {key: round(sum(t[key] for t in totals) / len(totals), 2) if totals else 0.0
                for key in ("calls", "input_tokens", "output_tokens", "memory_tool_calls")}

    def running(self) -> list[float]:
        """Pass rate of runs 1..i, for every i."""
        out, passed = [], 0
        for i, run in enumerate(self.runs, 1):
            passed += run.passed
            out.append(passed / i)
        return out

    def windows(self, size: int) -> list[float]:
        """Pass rate of consecutive windows of `size` runs (the last may be shorter)."""
        return [sum(r.passed for r in self.runs[i:i + size]) / len(self.runs[i:i + size])
                for i in range(0, len(self.runs), size)]

    def stopped_serving(self) -> int | None:
        """Runs after which the watched memory is never injected again (0: never injected; None: still served at
        the sequence's last run)."""
        last = max((r.index for r in self.runs if r.watched_injected), default=-1)
        if last == len(self.runs) - 1:
            return None
        return last + 1

    def pass_rate_after(self, n: int) -> float:
        rest = self.runs[n:]
        return sum(r.passed for r in rest) / len(rest) if rest else 0.0


@dataclass
class SequenceResult:
    """Both conditions over the same sequence."""

    sequence: str
    task_ids: list[str]
    watched: str | None
    conditions: dict[str, ConditionResult]
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sequence": self.sequence, "tasks": len(self.task_ids), "watched": self.watched,
                               "seconds": round(self.seconds, 1)}
        for name, cond in self.conditions.items():
            out[name] = {"pass_rate": round(cond.pass_rate, 4),
                         "quarantined": sorted({q for r in cond.runs for q in r.quarantined}),
                         "pool_size_end": cond.pool_size_end, "extra_per_run": cond.extra_per_run()}
            if self.watched is not None:  # runs after which it was never injected again (None: served to the end)
                out[name]["stopped_serving"] = cond.stopped_serving()
        return out

    def to_json(self) -> dict[str, Any]:
        return {**self.summary(), "task_ids": self.task_ids,
                "runs": {n: [asdict(r) for r in c.runs] for n, c in self.conditions.items()}}


PoolFactory = Callable[[], MemoryPool]
AgentFactory = Callable[[Task], Any]


def run_record(index: int, task: Task, state: dict[str, Any], watched: str | None, seconds: float) -> RunRecord:
    """One run's record from the graph's final state (`watched`: the memory whose serving is followed)."""
    verdict = state.get("verdict") or {}
    credit = state.get("credit") or {}
    injected = [r["id"] for r in state.get("retrieved", [])]
    return RunRecord(index=index, task_id=task.id, passed=verdict.get("status") == "pass",
                     status=str(verdict.get("status") or state.get("error") or "none"), injected=injected,
                     cited=list(credit.get("cited", [])), watched_injected=watched in injected,
                     quarantined=list(credit.get("quarantined", [])), seconds=round(seconds, 3),
                     cost=dict(state.get("cost") or {}), shown=list(state.get("retrieved_ids") or injected))


def run_condition(tasks: Sequence[Task], pool: MemoryPool, agent_factory: AgentFactory, condition: str, *,
                  watched: str | None = None, top_k: int = 3, sandbox: str = "auto",
                  lifecycle: LifecycleConfig | None = None, run_log: Path | None = None) -> ConditionResult:
    """The sequence, in order, through the MTL graph over `pool` under one condition (the pool changes only in
    the learning condition)."""
    from mtl_graph.pipeline import build_mtl_graph

    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose one of {', '.join(CONDITIONS)}")
    learning = condition == "learning"
    runs = []
    for index, task in enumerate(tasks):
        start = time.perf_counter()
        graph = build_mtl_graph(agent_factory(task), pool, top_k=top_k, online=learning,
                                lifecycle="on" if learning else "off", sandbox=sandbox, run_log=run_log,
                                lifecycle_settings=lifecycle or LifecycleConfig())
        state = graph.invoke({"task": task})
        if state.get("error"):
            raise RuntimeError(f"run {index} ({task.id}) of the {condition} condition failed: {state['error']}")
        runs.append(run_record(index, task, state, watched, time.perf_counter() - start))
    return ConditionResult(condition, runs, pool.count())


def run_sequence(tasks: Sequence[Task], pool_factory: PoolFactory, agent_factory: AgentFactory,
                 condition: str | Sequence[str] = CONDITIONS, *, sequence: str = "custom",
                 watched: str | None = None, **options: Any) -> SequenceResult:
    """The same ordered tasks under each condition, each from a fresh pool made by `pool_factory` (so both start
    from the same pool). `watched`: the id of the memory whose serving is followed (the harmful one)."""
    if not tasks:
        raise ValueError("a sequence needs at least one task")
    names = [condition] if isinstance(condition, str) else list(condition)
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:  # before any pool is made
        raise ValueError(f"unknown condition {unknown[0]!r}; choose one of {', '.join(CONDITIONS)}")
    start = time.perf_counter()
    results = {}
    for name in names:
        pool = pool_factory()
        try:
            results[name] = run_condition(tasks, pool, agent_factory, name, watched=watched, **options)
        finally:
            pool.close()
    return SequenceResult(sequence, [t.id for t in tasks], watched, results, time.perf_counter() - start)


# ------------------------------------------------------------------ the scripted sequences
def scripted(sequence: str, n: int = 30, seed: int = 7, embeddings: Any = None, sandbox: str = "auto",
             lifecycle: LifecycleConfig | None = None, root: Path | None = None,
             run_log: Path | None = None) -> SequenceResult:
    """One of the scripted sequences (negative: a harmful memory in the pool; positive: an empty-handed pool that
    can learn) with the scripted agent of `learning_sequences`."""
    from mtl_graph.bench import learning_sequences as ls

    if sequence not in ls.SEQUENCES:
        raise ValueError(f"unknown sequence {sequence!r}; choose one of {', '.join(ls.SEQUENCES)}")
    specs = ls.make_tasks(n, seed=seed, prefix=sequence[:3])
    by_id = {s.task.id: s for s in specs}
    with tempfile.TemporaryDirectory(prefix="mtl-learning-", dir=root) as pools:

        def pool_factory() -> MemoryPool:  # a fresh directory per condition: both start from the same pool
            return ls.starting_pool(MemoryPool.open(tempfile.mkdtemp(dir=pools), embeddings), sequence)

        return run_sequence([s.task for s in specs], pool_factory, lambda task: ls.agent_for(by_id[task.id]),
                            sequence=sequence, watched=ls.HARMFUL.id if sequence == "negative" else None,
                            sandbox=sandbox, lifecycle=lifecycle, run_log=run_log)


# ------------------------------------------------------------------ report
def markdown(results: Sequence[SequenceResult], window: int = 10) -> str:
    """One table row per sequence: pass rate static vs learning, per window, when the watched memory stopped."""
    lines = ["| sequence | tasks | static pass rate | learning pass rate | per window of "
             f"{window} (static → learning) | harmful memory stopped being served after | s per learning run | "
             "extra calls / tokens per run (static → learning) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        s, l = r.conditions["static"], r.conditions["learning"]
        wins = " ; ".join(f"{a:.0%}→{b:.0%}" for a, b in zip(s.windows(window), l.windows(window)))
        stop = "—" if r.watched is None else (
            f"static: {_stop(s.stopped_serving())}; learning: {_stop(l.stopped_serving())}")
        mean = sum(x.seconds for x in l.runs) / len(l.runs)
        cost = " → ".join(f"{c['calls']:g} / {c['input_tokens'] + c['output_tokens']:g}"
                          for c in (s.extra_per_run(), l.extra_per_run()))
        lines.append(f"| {r.sequence} | {len(r.task_ids)} | {s.pass_rate:.0%} | {l.pass_rate:.0%} | {wins} | "
                     f"{stop} | {mean:.2f} | {cost} |")
    return "\n".join(lines) + "\n"


def _stop(n: int | None) -> str:
    return "never (served to the end)" if n is None else f"{n} runs"


def plot(results: Sequence[SequenceResult], path: Path) -> Path:
    """Running pass rate over the sequence, static vs learning, one panel per sequence (PNG)."""
    from mtl_graph.bench.plots import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.2), squeeze=False)
    for ax, r in zip(axes[0], results):
        for name, style in (("static", "--"), ("learning", "-")):
            cond = r.conditions[name]
            ax.plot(range(1, len(cond.runs) + 1), cond.running(), style, label=f"{name} ({cond.pass_rate:.0%})")
        stop = r.conditions["learning"].stopped_serving()
        if r.watched is not None and stop:
            ax.axvline(stop + 0.5, color="grey", linewidth=0.8, label=f"harmful stops ({stop})")
        ax.set_title(f"{r.sequence} transfer")
        ax.set_xlabel("run in the sequence")
        ax.set_ylabel("running pass rate")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def write_report(results: Sequence[SequenceResult], out: Path) -> dict[str, Path]:
    """learning.json, learning.md and learning.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "learning.json", "md": out / "learning.md", "png": out / "learning.png"}
    paths["json"].write_text(json.dumps([r.to_json() for r in results], indent=1), encoding="utf-8")
    paths["md"].write_text(markdown(results), encoding="utf-8")
    plot(results, paths["png"])
    return paths


def run_and_report(sequences: Sequence[str], out: Path, tasks: int = 30, seed: int = 7, sandbox: str = "auto",
                   min_cited: int = 5) -> dict[str, Path]:
    """The scripted sequences static vs learning, reported in `out` (what `mtl eval-learning` runs)."""
    from mtl_graph.bench.learning_sequences import SEQUENCES

    unknown = [n for n in sequences if n not in SEQUENCES]
    if unknown:  # before anything is written
        raise ValueError(f"unknown sequence {unknown[0]!r}; choose negative, positive or both")
    cfg = LifecycleConfig(quarantine_min_cited=min_cited)
    out.mkdir(parents=True, exist_ok=True)
    results = [scripted(n, tasks, seed, sandbox=sandbox, lifecycle=cfg, run_log=out / "runs.jsonl")
               for n in sequences]
    return write_report(results, out)
