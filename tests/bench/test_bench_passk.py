"""The unbiased pass@k estimator and its aggregation."""

from __future__ import annotations

from math import comb

import pytest

from mtl_graph.bench.records import Condition, TaskResult
from mtl_graph.bench.passk import aggregate, pass_at_k
from mtl_graph.core.trajectory import Verdict, VerdictStatus
from mtl_graph.memory.base import MemoryType


@pytest.mark.parametrize("n, c, k, expected", [
    (1, 1, 1, 1.0), (1, 0, 1, 0.0), (10, 5, 1, 0.5), (3, 1, 3, 1.0), (5, 0, 3, 0.0),
    (10, 3, 2, 1 - comb(7, 2) / comb(10, 2)),  # 8/15
    (200, 13, 10, 1 - comb(187, 10) / comb(200, 10)),
    (5, 4, 2, 1.0),  # fewer than k failures: some draw must pass
])
def test_known_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-12)


def test_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def _r(suite, task, passed, attempt=0, cond=Condition()):
    status = VerdictStatus.PASS if passed else VerdictStatus.FAIL
    return TaskResult(suite=suite, task_id=task, domain=suite, condition=cond, attempt=attempt,
                      verdict=Verdict(status=status, source="tests"))


def test_aggregate_per_suite_and_unweighted_average():
    insight = Condition(memory_format=MemoryType.INSIGHT)
    results = [
        _r("a", "a1", True, 0), _r("a", "a1", False, 1),  # pass@1 = .5, pass@2 = 1
        _r("a", "a2", False, 0), _r("a", "a2", False, 1),  # 0
        _r("b", "b1", True, 0), _r("b", "b1", True, 1),  # 1
        _r("b", "b1", False, 0, insight),
    ]
    s1 = aggregate(results, 1)
    assert s1[("a", "zero_shot")].pass_at_k == pytest.approx(0.25)
    assert s1[("b", "zero_shot")].pass_at_k == 1.0
    assert s1[("average", "zero_shot")].pass_at_k == pytest.approx(0.625)
    s2 = aggregate(results, 2)
    assert s2[("a", "zero_shot")].pass_at_k == pytest.approx(0.5)
    assert s2[("b", "insight")].incomplete == 1  # one attempt where k = 2 asks for two
