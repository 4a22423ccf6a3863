"""Consolidation through the pool's dense index: the same clusters as comparing all pairs, incremental passes that
compare only what was added or changed (marks that a rewrite, a restore and a new threshold handle), never across
namespaces, formats or outcomes; bad input refused. Vectors are written at the storage level (chosen, not
embedded) so the near-duplicates are planted exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.engine.snapshots.archive import create_snapshot, restore_snapshot
from mtl_graph.memory.engine.storage import StoredPoint
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.workflow import WorkflowMemory
from mtl_graph.memory.lifecycle.consolidate import ConsolidateConfig, compare, find_clusters, finish
from mtl_graph.memory.lifecycle.neighbours import components
from mtl_graph.memory.pool.points import payload_of
from mtl_graph.memory.usage import Use

runner = CliRunner()
INDEX = ConsolidateConfig(exact_below=0, full_pass="index")
"""A full pass through the dense index whatever the group's size (by default small groups are compared all pairs)."""


def memory(n: int, kind: str = "insight", outcome: str = "success"):
    sources = [Provenance(run_id=f"run-{n}", source_task_id=f"task-{n}", domain="demo")]
    if kind == "workflow":
        return WorkflowMemory(goal=f"Goal number {n} of the seeded pool", actions=["act"], outcome=outcome,
                              sources=sources)
    return InsightMemory(title=f"Lesson number {n}", description=f"Applies to case {n}.",
                         content=f"Advice {n}.", outcome=outcome, sources=sources)


def write(pool, memories, vectors) -> list[str]:
    pool.store.upsert([StoredPoint(m.id, np.asarray(v, dtype=np.float32).tolist(), ([], []), payload_of(m))
                       for m, v in zip(memories, vectors)])
    return [m.id for m in memories]


def unit(rng, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def near(rng, vector: np.ndarray, noise: float) -> np.ndarray:
    v = vector + noise * rng.standard_normal(len(vector)).astype(np.float32)
    return v / np.linalg.norm(v)


def seeded(pool, seed: int, n: int = 60) -> tuple[list, np.ndarray]:
    """n random memories in two formats and two outcomes, then planted near-duplicates: pairs, a chain whose ends
    are far apart (single link joins it), a group of 12 (larger than the first neighbour list below)."""
    rng = np.random.default_rng(seed)
    kinds = [("insight", "success"), ("insight", "failure"), ("workflow", "success")]
    mems = [memory(seed * 1000 + i, *kinds[i % 3]) for i in range(n)]
    vecs = list(unit(rng, n, pool.dim))
    for i in rng.choice(n, 5, replace=False).tolist():  # pairs, cosine ~0.95-0.99
        mems.append(memory(seed * 1000 + len(mems), *kinds[i % 3]))
        vecs.append(near(rng, vecs[i], float(rng.uniform(0.005, 0.012))))
    step = vecs[0]
    for _ in range(4):  # a chain: each link ~0.93, its ends well under the threshold
        step = near(rng, step, 0.014)
        mems.append(memory(seed * 1000 + len(mems), *kinds[0]))
        vecs.append(step)
    for _ in range(12):
        mems.append(memory(seed * 1000 + len(mems), *kinds[1]))
        vecs.append(near(rng, vecs[1], 0.004))
    write(pool, mems, vecs)
    return mems, np.asarray(vecs)


def oracle(mems, vecs: np.ndarray, threshold: float) -> list[list[str]]:
    """Every pair at or above the threshold within one type and outcome, by numpy, as components."""
    sims = vecs @ vecs.T
    pairs = [(mems[a].id, mems[b].id) for a in range(len(mems)) for b in range(a + 1, len(mems))
             if sims[a, b] >= threshold and (mems[a].type, mems[a].outcome) == (mems[b].type, mems[b].outcome)]
    return components(pairs)


def ids(clusters) -> list[list[str]]:
    return sorted(c.ids for c in clusters)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_neighbour_pass_finds_the_all_pairs_clusters(pool, seed) -> None:
    mems, vecs = seeded(pool, seed)
    expected = oracle(mems, vecs, 0.9)
    assert len(expected) >= 6 and max(map(len, expected)) >= 13  # the planted groups are there
    # the group of 13 needs longer lists: asked again
    small = ConsolidateConfig(neighbours=2, exact_below=0, full_pass="index")
    found = compare(pool, config=small)
    assert ids(found.clusters) == expected and found.requeried > 0
    assert ids(find_clusters(pool)) == expected  # the default: groups this small are compared all pairs
    assert ids(compare(pool, config=ConsolidateConfig(exact=True)).clusters) == expected
    assert sorted(found.compared) == sorted(m.id for m in mems)
    for cluster in found.clusters:  # the weakest pair of each cluster, from the stored vectors
        rows = vecs[[next(k for k, m in enumerate(mems) if m.id == i) for i in cluster.ids]]
        assert cluster.similarity == pytest.approx(float((rows @ rows.T).min()), abs=1e-4)


def test_incremental_pass_compares_only_what_is_new(pool) -> None:
    rng = np.random.default_rng(7)
    old = [memory(i) for i in range(40)]
    old_vecs = unit(rng, 40, pool.dim)
    write(pool, old, old_vecs)
    first = compare(pool, incremental=True)  # a pool never compared: everything is new
    assert first.clusters == [] and len(first.compared) == 40
    assert finish(pool, first) == 40
    assert compare(pool, incremental=True).compared == []
    new = [memory(100 + i) for i in range(4)]
    # a near-duplicate of a stored memory, a pair among the new ones, and one unrelated memory
    pair, unrelated = unit(rng, 2, pool.dim)
    write(pool, new, [near(rng, old_vecs[3], 0.01), pair, near(rng, pair, 0.01), unrelated])
    inc = compare(pool, incremental=True)
    assert sorted(inc.compared) == sorted(m.id for m in new)
    expected = sorted([sorted([old[3].id, new[0].id]), sorted([new[1].id, new[2].id])])
    assert ids(inc.clusters) == expected == ids(compare(pool).clusters)
    assert ids(compare(pool, config=INDEX).clusters) == expected
    finish(pool, inc)  # the new members of the clusters stay unmarked: they find the others again until merged
    again = compare(pool, incremental=True)
    assert sorted(again.compared) == sorted(m.id for m in new[:3]) and ids(again.clusters) == expected


def test_a_rewrite_resets_the_mark_and_credit_does_not(pool) -> None:
    rng = np.random.default_rng(8)
    mems = [memory(i) for i in range(6)]
    write(pool, mems, unit(rng, 6, pool.dim))
    finish(pool, compare(pool))
    pool.archive(mems[0].id, "archived by a test")
    pool.restore(mems[0].id)  # live again: it may have a near-duplicate it was never compared with
    pool.credit("run-1", [Use(mems[1].id, True)], "success", "tests")
    assert compare(pool, incremental=True).compared == [mems[0].id]
    assert len(compare(pool, threshold=0.95, incremental=True).compared) == 6  # another threshold: all again


def test_marks_after_a_snapshot_restore(pool, tmp_path) -> None:
    rng = np.random.default_rng(9)
    mems = [memory(i) for i in range(10)]
    vecs = unit(rng, 10, pool.dim)
    write(pool, mems, vecs)
    create_snapshot(pool, "before-marks", tmp_path / "snaps")
    finish(pool, compare(pool))
    create_snapshot(pool, "marked", tmp_path / "snaps")
    dupe = memory(50)
    write(pool, [dupe], [near(rng, vecs[4], 0.01)])
    assert ids(compare(pool, incremental=True).clusters) == [sorted([mems[4].id, dupe.id])]
    restore_snapshot(pool, "marked", tmp_path / "snaps")  # the marks come back with the contents they describe
    assert compare(pool, incremental=True).compared == [] and pool.get(dupe.id) is None
    restore_snapshot(pool, "before-marks", tmp_path / "snaps")  # contents from before any pass: all compared
    assert len(compare(pool, incremental=True).compared) == 10


def test_never_across_namespaces_formats_or_outcomes(pool) -> None:
    rng = np.random.default_rng(10)
    v = unit(rng, 1, pool.dim)[0]
    other = pool.in_namespace("team-b")
    write(pool, [memory(1), memory(2, "workflow"), memory(3, outcome="failure")], [v, v, v])
    write(other, [memory(4), memory(5)], [v, near(rng, v, 0.005)])
    assert compare(pool).clusters == [] == compare(pool, config=INDEX).clusters
    [cluster] = compare(other, config=INDEX).clusters  # within one namespace, type and outcome they do merge
    assert cluster.ids == sorted([memory(4).id, memory(5).id])
    finish(other, compare(other))
    assert len(compare(pool, incremental=True).compared) == 3  # marks are per namespace


@pytest.mark.parametrize("threshold", [0, -0.5, 1.01, math.nan, "0.9", None])
def test_bad_threshold_is_refused(pool, threshold) -> None:
    with pytest.raises(ValueError, match="threshold"):
        compare(pool, threshold=threshold)


def test_bad_config_and_combinations_are_refused(pool) -> None:
    for bad in ({"neighbours": 0}, {"max_neighbours": 0}, {"batch": 0}, {"hnsw_ef": 1}, {"neighbors": 3}):
        with pytest.raises(ValidationError):
            ConsolidateConfig(**bad)
    with pytest.raises(ValueError, match="exact"):
        compare(pool, incremental=True, config=ConsolidateConfig(exact=True))
    with pytest.raises(ValueError, match="format"):
        compare(pool, "no-such-format")


def test_cli_incremental_by_default_full_on_request(pool) -> None:
    rng = np.random.default_rng(11)
    mems = [memory(i) for i in range(5)]
    write(pool, mems, unit(rng, 5, pool.dim))
    args = ["pool", "consolidate", "--pool", str(pool.location), "--json"]
    shown = json.loads(runner.invoke(app, args).output)
    assert (shown["compared"], shown["full"], shown["clusters"]) == (5, False, [])
    applied = runner.invoke(app, [*args, "--apply"])
    assert applied.exit_code == 0, applied.output
    assert json.loads(runner.invoke(app, args).output)["compared"] == 0  # the applied pass marked them
    assert json.loads(runner.invoke(app, [*args, "--full"]).output)["compared"] == 5
    bad = runner.invoke(app, ["pool", "consolidate", "--pool", str(pool.location), "--threshold", "1.5"])
    assert bad.exit_code != 0 and "threshold" in bad.output
