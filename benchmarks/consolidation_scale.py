"""Consolidation at scale: the comparison of a whole pool and of what was added since the last pass.

    python benchmarks/consolidation_scale.py [--sizes 10000 30000 100000] [--exact-max 30000] [--index-max 30000]
    python benchmarks/consolidation_scale.py --vectors 1000000 [--groups 9]   # the comparison alone, no pool

A pool of n memories is written at the storage level (vectors given): the vectors are drawn around a base of
real-embedded corpus texts (benchmarks/vectors.py `synthesize`), and 1% of them are planted near-duplicates of
earlier ones (the same vector plus a little noise: cosine about 0.99), with the earlier one's type and outcome.
Payloads are the base memories' own (a line is as long as a real one). Then, on the indexed pool, in one run:
  - the all-pairs comparison consolidation used before (`exact=True`), up to --exact-max memories;
  - a full pass through the dense index (one query per memory, `full_pass="index"`), up to --index-max memories;
  - a full pass within k-means cells (the default, `memory/lifecycle/partition.py`), and the marks it leaves;
  - an incremental pass after adding 1% more memories (half of them planted duplicates of stored ones).
Each row also says how many planted pairs each pass found. `row(pool_path)` is the per-pool figure for a scale
benchmark that builds its own pool (`build(pool_path, n)`). Both full passes run with `exact_below=0`, so even a
small group takes the path being measured.

--vectors N skips the pool: N vectors drawn the same way (1% planted) are split into --groups equal groups (a pool's
type-and-outcome groups) and each is compared within cells, timed, then checked against all pairs (numpy blocks) for
groups of at most --truth-max vectors: the comparison's own cost at a size whose pool this machine cannot build in
the time (reading the vectors out of the engine comes on top: the pool rows give its share)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus  # noqa: E402
from retrieval import machine  # noqa: E402
from vectors import embed_cached, synthesize  # noqa: E402

from mtl_graph.memory.engine.embeddings import embeddings_name, local_embeddings  # noqa: E402
from mtl_graph.memory.engine.storage import StoredPoint  # noqa: E402
from mtl_graph.memory.lifecycle.consolidate import ConsolidateConfig, compare, finish  # noqa: E402
from mtl_graph.memory.lifecycle.partition import partitioned_pairs  # noqa: E402
from mtl_graph.memory.pool.points import COMPARED_KEY, payload_of  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402

BASE = 1000
"""Corpus texts embedded with the real model; every other vector is drawn around them."""
PLANTED = 0.01
NOISE = 0.005
"""Per-dimension noise of a planted duplicate (cosine to its original about 1 / sqrt(1 + 384 * NOISE^2))."""


def _base(emb) -> tuple[np.ndarray, list[dict[str, Any]]]:
    memories = corpus.memories(BASE)
    vectors = embed_cached([m.key_text() for m in memories], emb, embeddings_name(emb), "memories")
    return vectors, [payload_of(m) for m in memories]


def _new_id(rng: np.random.Generator) -> str:
    return str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | int(rng.integers(1 << 62))))


def add(pool: MemoryPool, n: int, base: np.ndarray, payloads: list[dict[str, Any]], seed: int,
        chunk: int = 2000, planted_fraction: float = PLANTED) -> list[tuple[str, str]]:
    """Write n memories, PLANTED of them near-duplicates (of a stored memory, when the pool has some, or of an
    earlier one of this call), each with its original's payload; returns the planted (copy, original) pairs."""
    rng = np.random.default_rng(seed)
    stored = []
    for point in pool.store.scroll_points(batch=1000):  # the first points in id order: a random sample
        stored.append((point.id, point.dense, point.payload))
        if len(stored) == 5000:
            break
    planted = []
    for start in range(0, n, chunk):
        vectors = synthesize(base, min(chunk, n - start), seed=seed + start)
        rows = [(_new_id(rng), v, payloads[int(t)]) for v, t in zip(vectors, rng.integers(0, len(payloads),
                                                                                         len(vectors)))]
        for i in np.flatnonzero(rng.random(len(rows)) < planted_fraction).tolist():
            if stored and rng.random() < 0.5:
                original = stored[int(rng.integers(len(stored)))]
            elif i > 0:
                original = rows[int(rng.integers(0, i))]
            else:
                continue
            noisy = np.asarray(original[1], dtype=np.float32) + NOISE * rng.standard_normal(len(original[1]),
                                                                                            dtype=np.float32)
            rows[i] = (rows[i][0], noisy / np.linalg.norm(noisy), original[2])
            planted.append((rows[i][0], original[0]))
        pool.store.upsert([StoredPoint(i, np.asarray(v, dtype=np.float32).tolist(), ([], []),
                                       {**p, "memory": {**p["memory"], "id": i}, COMPARED_KEY: ""})
                           for i, v, p in rows])
        pool.store.optimize()
    return planted


def build(pool_path: Path, n: int, emb=None, seed: int = 5) -> list[tuple[str, str]]:
    """A pool of n memories at pool_path, indexed (see the module docstring); the planted pairs."""
    emb = emb or local_embeddings()
    base, payloads = _base(emb)
    with MemoryPool.open(pool_path, emb) as pool:
        planted = add(pool, n, base, payloads, seed)
        pool.optimize()
    return planted


def found(clusters: list, pairs: list[tuple[str, str]]) -> int:
    """Planted pairs whose two memories are in one cluster."""
    where = {i: n for n, c in enumerate(clusters) for i in c.ids}
    return sum(1 for a, b in pairs if a in where and where.get(a) == where.get(b))


def _timed(fn) -> tuple[Any, float]:
    """fn's result and its wall seconds; its CPU seconds (every thread of this process) go to CPU[-1]."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    CPU.append(time.process_time() - c0)
    return out, time.perf_counter() - t0


CPU: list[float] = []


def row(pool_path: Path, planted: list[tuple[str, str]] | None = None, *, exact: bool = False, emb=None,
        threshold: float = 0.9, seed: int = 11, index_max: int = 30_000) -> dict[str, Any]:
    """The figures of one pool (see the module docstring): seconds and the planted pairs found by each pass."""
    emb = emb or local_embeddings()
    planted = planted or []
    out: dict[str, Any] = {}
    with MemoryPool.open(pool_path, emb) as pool:
        out["size"] = n = len(pool)
        if exact:
            clusters, out["exact_s"] = _timed(lambda: compare(pool, threshold=threshold,
                                                              config=ConsolidateConfig(exact=True)).clusters)
            out["exact_cpu_s"] = CPU[-1]
            out["exact_clusters"], out["exact_planted"] = len(clusters), found(clusters, planted)
        if n <= index_max:
            index, out["index_s"] = _timed(lambda: compare(pool, threshold=threshold, config=ConsolidateConfig(
                exact_below=0, full_pass="index")))
            out["index_cpu_s"] = CPU[-1]
            out["index_clusters"], out["index_planted"] = len(index.clusters), found(index.clusters, planted)
            out["requeried"] = index.requeried
        full, out["full_s"] = _timed(lambda: compare(pool, threshold=threshold,
                                                     config=ConsolidateConfig(exact_below=0)))
        out["full_cpu_s"] = CPU[-1]
        out["full_clusters"], out["full_planted"], out["planted"] = (len(full.clusters), found(full.clusters, planted),
                                                                     len(planted))
        if exact:
            out["same_clusters"] = [c.ids for c in clusters] == [c.ids for c in full.clusters]
        out["marked"], out["mark_s"] = _timed(lambda: finish(pool, full))
        base, payloads = _base(emb)
        added = add(pool, max(1, n // 100), base, payloads, seed, planted_fraction=0.2)
        pool.optimize()
        inc, out["incremental_s"] = _timed(lambda: compare(pool, threshold=threshold, incremental=True))
        out["incremental_cpu_s"] = CPU[-1]
        out["incremental_compared"], out["incremental_planted"], out["incremental_expected"] = (
            len(inc.compared), found(inc.clusters, added), len(added))
    return out


def _all_pairs(vectors: np.ndarray, threshold: float, block: int = 1024) -> set[tuple[int, int]]:
    out = set()
    for start in range(0, len(vectors), block):
        r, c = np.nonzero(vectors[start:start + block] @ vectors[start:].T >= threshold)
        keep = c > r
        out.update(zip((start + r[keep]).tolist(), (start + c[keep]).tolist()))
    return out


def vectors_only(n: int, groups: int, truth_max: int, emb, threshold: float = 0.9) -> int:
    """--vectors: the comparison within cells on n drawn vectors in `groups` groups (see the module docstring).
    The planted copies' noise is spread so their cosines cover the whole range from the threshold up."""
    base, _ = _base(emb)
    rng = np.random.default_rng(5)
    size = n // groups
    total_cpu = total_wall = 0.0
    found_all = truth_all = 0
    print("| group | vectors | cells pass, wall / CPU s | pairs found | all pairs, CPU s | pairs there | missed |")
    print("|---|---|---|---|---|---|---|")
    for g in range(groups):
        vectors = synthesize(base, size - size // 100, seed=100 + g)
        originals = vectors[rng.integers(0, len(vectors), size // 100)]
        noise = rng.uniform(0.002, 0.02, (len(originals), 1)).astype(np.float32)
        copies = originals + noise * rng.standard_normal(originals.shape, dtype=np.float32)
        vectors = np.concatenate([vectors, copies / np.linalg.norm(copies, axis=1, keepdims=True)])
        pairs, wall = _timed(lambda: partitioned_pairs(vectors, threshold))
        cpu = CPU[-1]
        total_cpu, total_wall = total_cpu + cpu, total_wall + wall
        if len(vectors) <= truth_max and (g == 0 or groups <= 3):
            truth, _ = _timed(lambda: _all_pairs(vectors, threshold))
            got = set(map(tuple, pairs.tolist()))
            found_all, truth_all = found_all + len(got & truth), truth_all + len(truth)
            exact = f"{CPU[-1]:.1f} | {len(truth):,} | {len(truth - got):,}"
        else:
            exact = "- | - | -"
        print(f"| {g + 1} | {len(vectors):,} | {wall:.1f} / {cpu:.1f} | {len(pairs):,} | {exact} |")
    info = machine()
    print(f"\n{n:,} vectors in {groups} groups: cells pass {total_wall:.1f} s wall / {total_cpu:.1f} s CPU; "
          f"pairs found where all pairs were checked: {found_all:,} of {truth_all:,}")
    print(f"machine: {info['cpus']} CPUs ({info['cpu']}), load {os.getloadavg()[0]:.1f}, {info['libraries']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--exact-max", type=int, default=30_000, help="largest pool also compared all-pairs")
    parser.add_argument("--index-max", type=int, default=30_000, help="largest pool also passed through the index")
    parser.add_argument("--vectors", type=int, help="time the comparison alone on this many vectors (no pool)")
    parser.add_argument("--groups", type=int, default=9, help="--vectors: type-and-outcome groups they split into")
    parser.add_argument("--truth-max", type=int, default=120_000, help="--vectors: largest group checked all pairs")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    emb = local_embeddings()
    if args.vectors:
        return vectors_only(args.vectors, args.groups, args.truth_max, emb)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mtl-consolidation-") as root:
        for n in args.sizes:
            t0 = time.perf_counter()
            planted = build(Path(root) / f"pool-{n}", n, emb)
            built = time.perf_counter() - t0
            result = row(Path(root) / f"pool-{n}", planted, exact=n <= args.exact_max, emb=emb,
                         index_max=args.index_max)
            result["build_s"] = built
            rows.append(result)
            print(json.dumps(result), file=sys.stderr)
    info = machine()
    print(f"machine: {info['cpus']} CPUs ({info['cpu']}), load {os.getloadavg()[0]:.1f}, {info['libraries']}")
    print("| memories | all pairs, wall / CPU s | index pass, wall / CPU s | cells pass, wall / CPU s | "
          "clusters all pairs / index / cells | planted pairs found, index / cells | marks written | "
          "incremental (+1%), wall / CPU s | compared | planted found, incremental |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        exact = f"{r['exact_s']:.1f} / {r['exact_cpu_s']:.1f}" if "exact_s" in r else "-"
        index = f"{r['index_s']:.1f} / {r['index_cpu_s']:.1f}" if "index_s" in r else "-"
        print(f"| {r['size']:,} | {exact} | {index} | {r['full_s']:.1f} / {r['full_cpu_s']:.1f} | "
              f"{r.get('exact_clusters', '-')} / {r.get('index_clusters', '-')} / {r['full_clusters']} | "
              f"{r.get('index_planted', '-')} / {r['full_planted']} of {r['planted']} | "
              f"{r['marked']:,} in {r['mark_s']:.1f} s | {r['incremental_s']:.1f} / {r['incremental_cpu_s']:.1f} | "
              f"{r['incremental_compared']:,} | {r['incremental_planted']}/{r['incremental_expected']} |")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
