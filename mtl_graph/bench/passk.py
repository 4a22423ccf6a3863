"""Pass@k: the unbiased estimator of Chen et al. (2021) and its aggregation per suite × condition."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import numpy as np
from pydantic import BaseModel, Field

from mtl_graph.bench.models import TaskResult


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
    """Attempts recorded."""
    c: int
    """Attempts that passed."""
    pass_at_k: float
    """Estimated pass@k (k capped at n when fewer attempts exist)."""


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
    """Tasks scored."""
    attempts: int
    """Attempts recorded."""
    incomplete: int = 0
    """Tasks with fewer than k attempts (scored with k = attempts)."""
    per_task: list[TaskScore] = Field(default_factory=list, exclude=True)
    """Per-task scores (kept out of serialisation)."""


def task_scores(results: Iterable[TaskResult], k: int) -> list[TaskScore]:
    """Group attempts by (suite, task, condition) and estimate pass@k for each."""
    groups: dict[tuple[str, str, str], list[TaskResult]] = defaultdict(list)
    for r in results:
        groups[(r.suite, r.task_id, r.condition.key)].append(r)
    out = []
    for (suite, task_id, cond), rs in sorted(groups.items()):
        n, c = len(rs), sum(r.passed for r in rs)
        out.append(TaskScore(suite=suite, task_id=task_id, condition=cond, n=n, c=c,
                             pass_at_k=pass_at_k(n, c, min(k, n))))
    return out


def aggregate(results: Iterable[TaskResult], k: int) -> dict[tuple[str, str], Score]:
    """Scores keyed by (suite, condition), plus ("average", condition): the unweighted mean over suites."""
    by_cell: dict[tuple[str, str], list[TaskScore]] = defaultdict(list)
    for ts in task_scores(results, k):
        by_cell[(ts.suite, ts.condition)].append(ts)
    scores = {
        cell: Score(suite=cell[0], condition=cell[1], k=k, pass_at_k=float(np.mean([t.pass_at_k for t in ts])),
                    tasks=len(ts), attempts=sum(t.n for t in ts), incomplete=sum(t.n < k for t in ts), per_task=ts)
        for cell, ts in by_cell.items()
    }
    by_cond: dict[str, list[Score]] = defaultdict(list)
    for s in list(scores.values()):
        by_cond[s.condition].append(s)
    for cond, ss in by_cond.items():
        # Like the paper's Avg column: each benchmark weighs the same whatever its size.
        scores[("average", cond)] = Score(
            suite="average", condition=cond, k=k, pass_at_k=float(np.mean([s.pass_at_k for s in ss])),
            tasks=sum(s.tasks for s in ss), attempts=sum(s.attempts for s in ss),
            incomplete=sum(s.incomplete for s in ss))
    return scores
