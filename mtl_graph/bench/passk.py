"""Pass@k: the unbiased estimator of Chen et al. (2021) and its aggregation per suite × condition.

Pass@k is over completed runs: a run that ended in an infrastructure error (model provider, sandbox, pool) is
not a failed attempt; it is counted beside the score, and a task with no completed run is not scored."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import numpy as np
from pydantic import BaseModel, Field

from mtl_graph.bench.records import TaskResult


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k) / C(n, k) as a product, which stays stable for large n.
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


class TaskScore(BaseModel):
    """One task under one condition."""

    suite: str
    """Suite name."""
    task_id: str
    """Task id."""
    condition: str
    """Condition key."""
    n: int
    """Completed attempts (errored runs not counted)."""
    c: int
    """Attempts that passed."""
    pass_at_k: float | None
    """Estimated pass@k (k capped at n when fewer attempts exist); None when no attempt completed."""
    errors: int = 0
    """Attempts that ended in an infrastructure error."""


class Score(BaseModel):
    """A suite under a condition."""

    suite: str
    """Suite name (``average`` for the mean over suites)."""
    condition: str
    """Condition key."""
    k: int
    """The k of pass@k."""
    pass_at_k: float
    """Mean pass@k over the suite's tasks."""
    tasks: int
    """Tasks scored (with at least one completed attempt)."""
    attempts: int
    """Completed attempts."""
    errors: int = 0
    """Attempts that ended in an infrastructure error (not counted as failures)."""
    incomplete: int = 0
    """Tasks with fewer than k attempts (scored with k = attempts)."""
    per_task: list[TaskScore] = Field(default_factory=list, exclude=True)
    """Per-task scores (kept out of serialisation)."""


def is_error(result: TaskResult) -> bool:
    """The run ended in an infrastructure error: it is neither a pass nor a failed attempt."""
    return result.error is not None or (result.verdict is not None and result.verdict.is_error)


def task_scores(results: Iterable[TaskResult], k: int) -> list[TaskScore]:
    """Group attempts by (suite, task, condition) and estimate pass@k for each over its completed attempts."""
    groups: dict[tuple[str, str, str], list[TaskResult]] = defaultdict(list)
    for r in results:
        groups[(r.suite, r.task_id, r.condition.key)].append(r)
    out = []
    for (suite, task_id, cond), rs in sorted(groups.items()):
        done = [r for r in rs if not is_error(r)]
        n, c = len(done), sum(r.passed for r in done)
        out.append(TaskScore(suite=suite, task_id=task_id, condition=cond, n=n, c=c, errors=len(rs) - n,
                             pass_at_k=pass_at_k(n, c, min(k, n)) if n else None))
    return out


def aggregate(results: Iterable[TaskResult], k: int) -> dict[tuple[str, str], Score]:
    """Scores keyed by (suite, condition), plus ("average", condition): the unweighted mean over suites.

    A cell whose runs all ended in errors has no score (it is absent); `errors` counts them where a score exists."""
    by_cell: dict[tuple[str, str], list[TaskScore]] = defaultdict(list)
    for ts in task_scores(results, k):
        by_cell[(ts.suite, ts.condition)].append(ts)
    scores = {}
    for cell, all_ts in by_cell.items():
        ts = [t for t in all_ts if t.pass_at_k is not None]
        if ts:
            scores[cell] = Score(suite=cell[0], condition=cell[1], k=k,
                                 pass_at_k=float(np.mean([t.pass_at_k for t in ts])), tasks=len(ts),
                                 attempts=sum(t.n for t in ts), errors=sum(t.errors for t in all_ts),
                                 incomplete=sum(t.n < k for t in ts), per_task=ts)
    by_cond: dict[str, list[Score]] = defaultdict(list)
    for s in list(scores.values()):
        by_cond[s.condition].append(s)
    for cond, ss in by_cond.items():
        # Like the paper's Avg column: each benchmark weighs the same whatever its size.
        scores[("average", cond)] = Score(
            suite="average", condition=cond, k=k, pass_at_k=float(np.mean([s.pass_at_k for s in ss])),
            tasks=sum(s.tasks for s in ss), attempts=sum(s.attempts for s in ss),
            errors=sum(s.errors for s in ss), incomplete=sum(s.incomplete for s in ss))
    return scores


def error_counts(results: Iterable[TaskResult]) -> dict[tuple[str, str], int]:
    """Errored runs per (suite, condition) and ("average", condition), including cells with no completed run."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r in results:
        if is_error(r):
            counts[(r.suite, r.condition.key)] += 1
            counts[("average", r.condition.key)] += 1
    return dict(counts)
