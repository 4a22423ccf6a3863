"""The partitioned full pass (memory/lifecycle/partition.py): it reports only true pairs, finds the pairs that
all-pairs comparison finds on generated groups of every shape, is deterministic, degenerates to all pairs when every
memory is in every cell, and drives `compare` to the all-pairs clusters on a real pool; bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from mtl_graph.memory.engine.storage import StoredPoint
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.lifecycle.consolidate import ConsolidateConfig, compare
from mtl_graph.memory.lifecycle.neighbours import components
from mtl_graph.memory.lifecycle.partition import cells_of, centroids, partitioned_pairs
from mtl_graph.memory.pool.points import payload_of

DIM = 384
THRESHOLD = 0.9


def unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def near(rng: np.random.Generator, rows: np.ndarray, noise: float) -> np.ndarray:
    return unit(rows + noise * rng.standard_normal(rows.shape).astype(np.float32))


def topical(rng: np.random.Generator, n: int, topics: int = 40) -> np.ndarray:
    """Vectors clustered by topic, as real embeddings are (a mix of two topic centres plus noise)."""
    centres = unit(rng.standard_normal((topics, DIM)).astype(np.float32))
    a, b = rng.integers(0, topics, n), rng.integers(0, topics, n)
    w = rng.uniform(0.5, 1.0, (n, 1)).astype(np.float32)
    return near(rng, w * centres[a] + (1 - w) * centres[b], 0.04)


def group(kind: str, n: int, seed: int) -> np.ndarray:
    """A generated group of one shape, with near-duplicates planted in it."""
    rng = np.random.default_rng(seed)
    base = topical(rng, n) if kind != "random" else unit(rng.standard_normal((n, DIM)).astype(np.float32))
    planted = rng.integers(0, n, max(1, n // 50))
    extra = [near(rng, base[planted], float(rng.uniform(0.002, 0.02)))]  # pairs across the whole 0.9..1 range
    if kind == "chains":  # each link ~0.93, the ends of a chain far apart
        step = base[planted[:5]]
        for _ in range(6):
            step = near(rng, step, 0.014)
            extra.append(step)
    if kind == "tight":  # one memory copied many times: a group larger than any cell
        extra.append(near(rng, np.repeat(base[:1], 400, axis=0), 0.002))
        extra.append(np.repeat(base[1:2], 50, axis=0))  # exact copies
    if kind == "zeros":  # points without a vector read as zero rows: they match nothing
        extra.append(np.zeros((5, DIM), dtype=np.float32))
    out = np.concatenate([base, *extra])
    return out[np.random.default_rng(seed + 1).permutation(len(out))]


def truth(vectors: np.ndarray, threshold: float = THRESHOLD) -> set[tuple[int, int]]:
    sims = vectors @ vectors.T
    r, c = np.nonzero(np.triu(sims, 1) >= threshold)
    return set(zip(r.tolist(), c.tolist()))


def as_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, pairs.tolist()))


KINDS = ["topical", "random", "chains", "tight", "zeros"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [300, 2000])
def test_partitioned_pairs_are_the_all_pairs_on_generated_groups(kind, n) -> None:
    found_all, expected_all = 0, 0
    for seed in range(3):
        vectors = group(kind, n, seed)
        expected = truth(vectors)
        pairs = partitioned_pairs(vectors, THRESHOLD, cell_size=50, probes=2)
        got = as_set(pairs)
        assert got <= expected  # never a pair under the threshold, never (i, i) or (j, i)
        assert all(i < j for i, j in got) and len(got) == len(pairs)  # each pair once, i < j
        assert pairs.tolist() == sorted(pairs.tolist())
        found_all, expected_all = found_all + len(got), expected_all + len(expected)
    assert expected_all > 0
    assert found_all / expected_all >= 0.99, (kind, n, found_all, expected_all)


@pytest.mark.parametrize("kind", KINDS)
def test_clusters_match_all_pairs_components(kind) -> None:
    vectors = group(kind, 1500, 7)
    ids = [f"m{i:05d}" for i in range(len(vectors))]
    expected = components((ids[a], ids[b]) for a, b in truth(vectors))
    got = components((ids[a], ids[b]) for a, b in partitioned_pairs(vectors, THRESHOLD, cell_size=40).tolist())
    assert got == expected
    if kind == "tight":  # the 400 near-copies and the 50 exact copies, each seen whole
        assert max(map(len, got)) >= 400 and any(len(c) >= 50 for c in got)


def test_every_memory_in_every_cell_is_exactly_all_pairs() -> None:
    vectors = group("topical", 400, 3)
    expected = truth(vectors, 0.4)  # a low threshold: many pairs, many of them across cell borders
    assert len(expected) > 100
    assert as_set(partitioned_pairs(vectors, 0.4, cell_size=50, probes=8)) == expected  # 8 cells, 8 probes
    assert as_set(partitioned_pairs(vectors, 0.4, cell_size=50, probes=1)) < expected  # one cell each misses some


def test_deterministic_and_every_row_counted() -> None:
    vectors = group("topical", 3000, 5)
    ticks: list[int] = []
    first = partitioned_pairs(vectors, THRESHOLD, cell_size=100, tick=ticks.append)
    assert sum(ticks) == len(vectors) and len(ticks) > 10  # progress as cells are compared, n in all
    assert np.array_equal(first, partitioned_pairs(vectors, THRESHOLD, cell_size=100))
    cells = cells_of(vectors, centroids(vectors, 30), probes=2)
    assert sum(map(len, cells)) == 2 * len(vectors)  # each vector in exactly two cells
    assert all(np.all(np.diff(c) > 0) for c in cells)  # members once each, ascending


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_tiny_groups(n) -> None:
    vectors = np.repeat(unit(np.ones((1, DIM), dtype=np.float32)), n, axis=0)
    ticks: list[int] = []
    pairs = partitioned_pairs(vectors, THRESHOLD, cell_size=2, tick=ticks.append)
    assert as_set(pairs) == {(i, j) for i in range(n) for j in range(i + 1, n)} and sum(ticks) == n


@pytest.mark.parametrize("bad", [
    dict(vectors=np.zeros(DIM, dtype=np.float32)),
    dict(cell_size=1),
    dict(probes=0),
])
def test_bad_arguments_are_refused(bad) -> None:
    args = dict(vectors=group("random", 20, 1), cell_size=10, probes=2) | bad
    vectors = args.pop("vectors")
    with pytest.raises(ValueError):
        partitioned_pairs(vectors, THRESHOLD, **args)


@pytest.mark.parametrize("bad", [dict(cell_size=1), dict(probes=0), dict(probes=17), dict(full_pass="pairs")])
def test_bad_config_is_refused(bad) -> None:
    with pytest.raises(ValidationError):
        ConsolidateConfig(**bad)


def test_compare_partitioned_full_pass_on_a_pool(pool) -> None:
    """Above exact_below, a full pass compares within cells and finds the all-pairs clusters; an incremental pass
    still asks the index."""
    vectors = group("chains", 600, 11)
    rng = np.random.default_rng(2)
    outcomes = rng.choice(["success", "failure"], len(vectors))
    mems = [InsightMemory(title=f"Lesson {i}", description=f"Case {i}.", content=f"Advice {i}.", outcome=o,
                          sources=[Provenance(run_id=f"run-{i}", source_task_id=f"task-{i}", domain="demo")])
            for i, o in enumerate(outcomes)]
    pool.store.upsert([StoredPoint(m.id, v.tolist(), ([], []), payload_of(m)) for m, v in zip(mems, vectors)])
    exact = compare(pool, config=ConsolidateConfig(exact=True))
    assert len(exact.clusters) >= 10
    progress: list[tuple[int, int]] = []
    partitioned = compare(pool, config=ConsolidateConfig(exact_below=100, cell_size=30),
                          on_progress=lambda done, total: progress.append((done, total)))
    assert [c.ids for c in partitioned.clusters] == [c.ids for c in exact.clusters]
    assert sorted(partitioned.compared) == sorted(m.id for m in mems)
    assert progress[-1] == (len(mems), len(mems))
    index = compare(pool, config=ConsolidateConfig(exact_below=0, full_pass="index"))
    assert [c.ids for c in index.clusters] == [c.ids for c in exact.clusters]
