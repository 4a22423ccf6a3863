"""The pool's figures for the system benchmark: retrieval, recall, writes, the worst single add, peak RSS.

Every latency has a baseline measured in the same run on the same vectors (LangGraph's InMemoryStore, a numpy
exact scan), so a busy machine shows in both and the ratio stays meaningful."""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval as rb  # noqa: E402  (the retrieval benchmark's corpus, baselines and timing helpers)

from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.memory.pool.search import ranked_search  # noqa: E402
from mtl_graph.memory.engine.storage import QuerySpec  # noqa: E402

K, PREFETCH = 3, 20


@dataclass
class Latency:
    p50: float
    p95: float
    n: int

    @classmethod
    def of(cls, ms: list[float]) -> "Latency":
        return cls(float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), len(ms))


@dataclass
class SizeResult:
    size: int
    qdrant: Latency
    e2e_new: Latency
    e2e_cached: Latency
    inmemory: Latency
    numpy: Latency
    recall: float
    index_build_s: float
    segments: int
    writes_per_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _timed(fn, n: int, budget_s: float, min_n: int = 20) -> Latency:
    ms, _ = rb.time_queries(fn, n, budget_s, warmup=3, min_n=min_n)
    return Latency.of(ms)


def _cpu_ms(fn, n: int) -> float:
    """Median CPU ms of fn(i) (this process, all its threads): what a busy machine inflates least."""
    spent = []
    for i in range(n):
        c = time.process_time()
        fn(i)
        spent.append((time.process_time() - c) * 1000)
    return float(np.median(spent))


def run_size(n: int, data: rb.Data, args: Any, pool_dir: Path) -> SizeResult:
    """One pool size: baselines, the Qdrant part, MemoryPool.search end to end, recall, writes."""
    emb = local_embeddings()
    nq, budget = args.queries, args.budget
    print(f"== {n:,} memories", file=sys.stderr)
    np_search = rb.numpy_search(data, n)
    numpy_lat = _timed(np_search, nq, budget)
    exact = [[data.memories[j].id for j in np_search(i)] for i in range(nq)]
    store, _ = rb.build_inmemory_store(data, n)

    def ims(i: int):
        q = data.queries[i]
        return store.search(("memories",), query=q.text, limit=K, filter={"type": q.type, f"in_{q.exclude_domain}": False})

    inmemory_lat = _timed(ims, nq, budget, min_n=10)
    del store
    gc.collect()

    pool = MemoryPool.open(pool_dir, emb)
    try:
        growth = _grow_pool(pool, data, n)

        def qdrant(i: int):
            q = data.queries[i]
            return ranked_search(pool.store, data.qdense[i].tolist(), data.qsparse[i], rb.where_of(q), K, PREFETCH, None)

        def search(i: int):
            q = data.queries[i]
            return pool.search(q.text, type=q.type, k=K, exclude_domains=[q.exclude_domain])

        def search_new(i: int):
            pool._query_cache.clear()  # every call embeds its query, as a first search does
            return search(i)

        qdrant_lat = _timed(qdrant, nq, budget)
        new_lat = _timed(search_new, nq, budget)
        for i in range(nq):  # every query once, so the timed pass finds its vector in the LRU cache
            search(i)
        cached_lat = _timed(search, nq, budget)
        cpu = {"qdrant_cpu_ms": _cpu_ms(qdrant, min(nq, 100)), "cached_cpu_ms": _cpu_ms(search, min(nq, 100))}
        got = [[h.id for h in pool.store.query([QuerySpec(limit=K, where=rb.where_of(data.queries[i]),
                                                           dense=data.qdense[i].tolist())])[0]] for i in range(nq)]
        recall = rb.recall_at_k(got, exact)
        segments = pool.store.shard.info().segments_count
        result = SizeResult(n, qdrant_lat, new_lat, cached_lat, inmemory_lat, numpy_lat, recall,
                            growth["worker_cpu_s"], segments, extra={**cpu, **growth})
        result.writes_per_s, result.extra["write_statuses"], result.extra["embed_per_s"] = \
            _writes(pool, data.extra[: args.writes])
    finally:
        pool.close()
    return result


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _grow_pool(pool: MemoryPool, data: rb.Data, n: int, chunk: int = 2000) -> dict[str, float]:
    """Write n memories at the storage level (vectors precomputed) in chunks, taking the index step after each as
    `add_many` does (Edge: background builds start by themselves), then index the rest and wait for it; the CPU
    seconds of index work in this process and in the index worker processes, and the builds swapped in."""
    cpu, workers = time.process_time(), _children_cpu_s()
    for start in range(0, n, chunk):
        rb.populate_range(pool, data, start, min(n, start + chunk))
        pool.store.optimize()
    grown = time.process_time() - cpu
    pool.optimize()
    return {"process_cpu_s": time.process_time() - cpu, "worker_cpu_s": _children_cpu_s() - workers,
            "grow_cpu_s": grown, "builds": float(getattr(pool.store, "builds", 0))}


def _writes(pool: MemoryPool, memories: list) -> tuple[float, dict[str, int], float]:
    """add_many in batches of 50 with the real embedder (embedding, dedup query, upsert, index step), and the
    embedder alone on the same texts just before: the ratio of the two holds on a machine whose load changes."""
    statuses: dict[str, int] = {}
    texts = [m.key_text() for m in memories]
    t0 = time.perf_counter()
    for start in range(0, len(texts), 50):
        pool.embeddings.embed_documents(texts[start:start + 50])
    embed_per_s = len(texts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for start in range(0, len(memories), 50):
        for r in pool.add_many(memories[start:start + 50]):
            statuses[r.status] = statuses.get(r.status, 0) + 1
    return len(memories) / (time.perf_counter() - t0), statuses, embed_per_s


def single_adds(data: rb.Data, pool_dir: Path, count: int, pace_s: float = 0.02) -> dict[str, Any]:
    """`add` one memory at a time into the largest pool (vectors precomputed) while a background index build of
    the whole pool runs: `count` adds in a row, then one every `pace_s` until the build is swapped in, so the
    worst call includes whatever the build costs the pool's process (the scroll that feeds it, the swap)."""
    extra = data.extra[-count * 2:]  # not the memories the write test already added
    texts = [m.key_text() for m in extra]
    vectors = np.asarray(local_embeddings().embed_array(texts[: min(len(texts), 2000)]))
    if len(texts) > len(vectors):
        from vectors import synthesize

        vectors = np.concatenate([vectors, synthesize(vectors, len(texts) - len(vectors), seed=9)])
    pre = rb.PrecomputedEmbeddings(texts, vectors, local_embeddings())
    wall, cpu = [], []
    with MemoryPool.open(pool_dir, pre) as pool:
        build = pool.store.index_in_background()
        for i, m in enumerate(extra):
            if i >= count and (build is None or build.done.is_set()):
                break
            t, c = time.perf_counter(), time.process_time()
            pool.add(m)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            if i >= count:
                time.sleep(pace_s)
        if build is not None:
            build.done.wait()
        worst = int(np.argmax(wall))
        segments = pool.store.shard.info().segments_count
    return {"adds": len(wall), "p50_ms": float(np.median(wall)) * 1000, "worst_s": wall[worst],
            "worst_cpu_s": cpu[worst], "worst_at": worst, "per_s": len(wall) / sum(wall), "segments": segments,
            "over_1s": sum(w > 1.0 for w in wall), "swap_s": build.swap_s if build is not None else None,
            "build_error": build.error if build is not None else None}


# Peak RSS from /proc (VmHWM): ru_maxrss survives exec, so a child of this large process would report its parent.
RSS_PROBE = """
import json, sys, time
from mtl_graph.memory.pool.pool import MemoryPool
queries = json.loads(sys.argv[2])
t = time.perf_counter()
pool = MemoryPool.open(sys.argv[1]) if sys.argv[1] != "-" else None
opened = time.perf_counter() - t
if pool is None:
    from mtl_graph.memory.engine.embeddings import local_embeddings
    local_embeddings().embed_query("warm up")
for q in queries:
    if pool is not None:
        pool.search(q, k=3)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"rss_mb": hwm / 1024, "open_s": opened}))
"""


def peak_rss(pool_dir: Path | None, queries: list[str]) -> dict[str, float]:
    """Peak RSS of a fresh process that opens the pool and runs the searches (pool_dir None: model only)."""
    proc = subprocess.run([sys.executable, "-c", RSS_PROBE, str(pool_dir) if pool_dir else "-", json.dumps(queries)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"RSS probe failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(args: Any) -> dict[str, Any]:
    """Every pool figure at every size; the pool directories live in one temporary directory."""
    emb = local_embeddings()
    top = max(args.sizes)
    data = rb.load_data(top, args.queries, args.writes + 2 * args.single_adds, emb, real_max=args.real_max)
    # The corpus is the benchmark's own fixture (100k+ memories as Python objects): a full collection of it took
    # 1.35 s, and would be charged to whichever add allocates when it runs. An agent's process holds no such heap.
    gc.collect()
    gc.freeze()
    root = Path(tempfile.mkdtemp(prefix="mtl-bench-pools-"))
    sizes = [run_size(n, data, args, root / f"pool-{n}") for n in args.sizes]
    out: dict[str, Any] = {"sizes": sizes}
    if args.single_adds:
        out["single_adds"] = single_adds(data, root / f"pool-{top}", args.single_adds)
    texts = [q.text for q in data.queries[:100]]
    out["rss"] = {"pool": peak_rss(root / f"pool-{top}", texts), "model_only": peak_rss(None, texts), "size": top}
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return out
