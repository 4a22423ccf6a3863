"""A pool at scale (issue 32): builds a pool of N memories (default 1,000,000) and prints one table of figures.

The pool's dense vectors are drawn around a real-embedded base (benchmarks/vectors.py: the first `--real`
memories embedded by the local model, the rest mixed from them), its texts, BM25 vectors and payloads are the
synthetic corpus's (benchmarks/corpus.py), written in batches at the storage level with the vectors given and one
index build at the end. Each figure is a row function taking (pool_path, context) and returning rows, so another
figure is one more function in ROWS (consolidation has its own, benchmarks/consolidation_scale.py: its full pass
does not yet fit a 1M run). Every latency has its baseline from the same run.

    python benchmarks/scale.py --size 100000            # a quick run
    python benchmarks/scale.py --size 200000 --build-only --real 2000   # where the build's time goes
    make bench-scale                                    # 1,000,000 memories
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
import retrieval as rb  # noqa: E402
from vectors import embed_cached, synthesize  # noqa: E402

from mtl_graph.memory.engine.embeddings import embeddings_name, local_embeddings  # noqa: E402
from mtl_graph.memory.engine.storage import QuerySpec, StoredPoint  # noqa: E402
from mtl_graph.memory.lifecycle.policy import LifecycleConfig  # noqa: E402
from mtl_graph.memory.pool.filter import SearchFilter  # noqa: E402
from mtl_graph.memory.pool.points import payload_of  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.memory.pool.search import PREFETCH, ranked_search  # noqa: E402

K = 3
Row = tuple[str, str, str]
"""(figure, value, baseline or note)."""


@dataclass
class Context:
    """What the row functions share: the queries with their vectors, the exact answers, the build's figures."""

    size: int
    queries: list[Any]
    qdense: np.ndarray
    qsparse: list[tuple[list[int], list[float]]]
    exact: list[list[str]]
    numpy_ms: list[float]
    extra: list[Any]
    """Memories not in the pool, for the write figure."""
    extra_dense: np.ndarray
    build: dict[str, float] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    """Every row function's raw figures, for --json."""


def where_of(q: Any) -> SearchFilter:
    """The retrieve node's filter for a query: its format, its own domain held out."""
    return SearchFilter(type=q.type, exclude_domains=(q.exclude_domain,))


def p50_p95(ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def fmt(ms: list[float]) -> str:
    p50, p95 = p50_p95(ms)
    return f"{p50:.2f} / {p95:.2f} ms"


# ------------------------------------------------------------------------------------------------ the build
def corpus_stream(seed: int = 7) -> Iterator[Any]:
    """The corpus's memories, distinct by retrieval key, as long as asked (corpus.memories without the list)."""
    rng, seen, i = random.Random(f"{seed}:0"), set(), 0
    while True:
        m = corpus._one(rng, i)
        i += 1
        key = hashlib.blake2b(f"{m.type}:{m.key_text()}".encode(), digest_size=12).digest()
        if key not in seen:
            seen.add(key)
            yield m


class Exact:
    """A numpy exact scan of the pool's dense vectors with the retrieve node's filter (the recall reference)."""

    def __init__(self, n: int, dim: int) -> None:
        self.dense = np.zeros((n, dim), dtype=np.float32)
        self.types = np.zeros(n, dtype=np.int8)
        self.domains = np.zeros((n, len(rb.DOMAIN_CODES)), dtype=bool)
        self.ids: list[str] = []

    def add(self, start: int, ids: list[str], kinds: list[tuple[str, list[str]]], dense: np.ndarray) -> None:
        """Points from `start` on: their ids, (type, domains) and dense vectors."""
        self.dense[start:start + len(ids)] = dense
        for i, (kind, domains) in enumerate(kinds, start):
            self.types[i] = rb.TYPE_CODES[kind]
            for d in domains:
                self.domains[i, rb.DOMAIN_CODES[d]] = True
        self.ids.extend(ids)

    def top(self, q: Any, vector: np.ndarray) -> list[str]:
        mask = (self.types == rb.TYPE_CODES[q.type]) & ~self.domains[:, rb.DOMAIN_CODES[q.exclude_domain]]
        scores = self.dense @ vector
        scores[~mask] = -np.inf
        top = np.argpartition(-scores, K)[:K]
        return [self.ids[t] for t in top[np.argsort(-scores[top])] if scores[t] > -np.inf]


def make_points(n: int, base: np.ndarray, batch: int, out: Any) -> None:
    """In a process of its own: the pool's points in batches (corpus memories, vectors, BM25, payloads) put on `out`
    as (start, ids, (type, domains), dense, sparse, payloads), then ("done", CPU seconds spent)."""
    from qdrant_edge import Bm25

    bm25, stream = Bm25(), corpus_stream()
    for start in range(0, n, batch):
        memories = [next(stream) for _ in range(min(batch, n - start))]
        dense = base[start:start + len(memories)] if start + len(memories) <= len(base) else \
            synthesize(base, len(memories), seed=start)
        sparse = [bm25.embed_document(m.key_text()) for m in memories]
        out.put((start, [m.id for m in memories], [(m.type, m.domains) for m in memories], dense,
                 [(list(v.indices), list(v.values)) for v in sparse], [payload_of(m) for m in memories]))
    out.put(("done", time.process_time()))


def build_pool(path: Path, n: int, base: np.ndarray, batch: int = 2_000) -> tuple[Exact, dict[str, float]]:
    """Write n memories with their vectors given, in batches at the storage level (no embedding, no screening, no
    dedup: every memory is distinct), then one index build in the worker; the seconds of each part, wall and CPU
    (the pool's process while writing; while indexing, the pool's process feeding the worker and the worker).

    The points are made in a second process while this one stores the batches before them (a machine with two
    cores makes and stores at once), so the writes take the longer of the two, not their sum."""
    import multiprocessing

    exact = Exact(n, base.shape[1])
    context = multiprocessing.get_context("spawn")  # not fork: this process already runs the model's threads
    made = context.Queue(maxsize=4)  # a few batches ahead at most
    maker = context.Process(target=make_points, args=(n, base, batch, made), daemon=True)
    t0, c0 = time.perf_counter(), time.process_time()
    maker.start()
    waited = 0.0
    try:
        with MemoryPool.open(path, local_embeddings()) as pool:
            while True:
                w = time.perf_counter()
                message = made.get(timeout=600)
                waited += time.perf_counter() - w
                if message[0] == "done":
                    make_cpu = message[1]
                    break
                start, ids, kinds, dense, sparse, payloads = message
                exact.add(start, ids, kinds, dense)
                pool.store.upsert([StoredPoint(*point) for point in zip(ids, dense.tolist(), sparse, payloads)])
                if (start // batch) % 50 == 0:
                    print(f"  wrote {start + len(ids):,}/{n:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
            written, written_cpu = time.perf_counter() - t0, time.process_time() - c0
            children = _children_cpu()
            pool.optimize()  # one build of the whole pool in the worker process
            total = time.perf_counter() - t0
            feed_cpu, worker_cpu = time.process_time() - c0 - written_cpu, _children_cpu() - children
            count, segments = pool.count(), pool.store.shard.info().segments_count
    finally:
        maker.join(timeout=10)
        if maker.is_alive():
            maker.kill()
    return exact, {"points": count, "write_s": written, "waited_s": waited, "index_s": total - written,
                   "total_s": total, "points_per_s": n / written, "segments": segments, "write_cpu_s": written_cpu,
                   "make_cpu_s": make_cpu, "index_feed_cpu_s": feed_cpu, "index_worker_cpu_s": worker_cpu}


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the index worker, once its build is over)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def prepare(args: argparse.Namespace, root: Path) -> tuple[Path, Context]:
    emb = local_embeddings()
    name = embeddings_name(emb)
    base_memories = corpus.memories(args.real)
    base = embed_cached([m.key_text() for m in base_memories], emb, name, "memories")
    queries = corpus.queries(args.queries)
    qdense = embed_cached([q.text for q in queries], emb, name, "queries")
    from qdrant_edge import Bm25

    bm25 = Bm25()
    qsparse = [(list(v.indices), list(v.values)) for v in (bm25.embed_query(q.text) for q in queries)]
    extra = corpus.memories(args.writes, offset=10_000_000)
    extra_dense = synthesize(base, len(extra), seed=99)
    path = root / "pool"
    print(f"== building {args.size:,} memories", file=sys.stderr)
    exact, build = build_pool(path, args.size, base)
    answers, ms = [], []
    for q, v in zip(queries, qdense):
        t = time.perf_counter()
        answers.append(exact.top(q, v))
        ms.append((time.perf_counter() - t) * 1000)
    del exact
    gc.collect()
    return path, Context(args.size, queries, qdense, qsparse, answers, ms, extra, extra_dense, build)


# ------------------------------------------------------------------------------------------------ the rows
def build_rows(pool_path: Path, ctx: Context) -> list[Row]:
    b = ctx.build
    ctx.results["build"] = b
    return [("build: write the points, vectors given", f"{b['write_s']:.0f} s ({b['points_per_s']:,.0f} points/s)",
             f"CPU: storing {b['write_cpu_s']:.0f} s, making the points (corpus, BM25, payloads) in a second process "
             f"{b['make_cpu_s']:.0f} s; {b['waited_s']:.0f} s waiting for them"),
            ("build: one index build (worker)", f"{b['index_s']:.0f} s",
             f"{int(b['segments'])} segments after; CPU: the pool's process feeding it {b['index_feed_cpu_s']:.0f} s, "
             f"the worker {b['index_worker_cpu_s']:.0f} s")]


def search_rows(pool_path: Path, ctx: Context) -> list[Row]:
    """The Qdrant part of a filtered search (vector given) against a numpy exact scan; recall@3 of the dense list."""
    with MemoryPool.open(pool_path, local_embeddings()) as pool:
        def part(i: int) -> Any:
            return ranked_search(pool.store, ctx.qdense[i].tolist(), ctx.qsparse[i], where_of(ctx.queries[i]).conditions(),
                                 K, PREFETCH, None, ctx.queries[i].text)

        part_ms, _ = rb.time_queries(part, len(ctx.queries), budget_s=120)
        got = [[h.id for h in pool.store.query([QuerySpec(limit=K, where=where_of(q).conditions(),
                                                          dense=ctx.qdense[i].tolist(), with_payload=False)])[0]]
               for i, q in enumerate(ctx.queries)]
    recall = rb.recall_at_k(got, ctx.exact)
    ratio = p50_p95(part_ms)[1] / p50_p95(ctx.numpy_ms)[1]
    ctx.results["search"] = {"qdrant_part_ms": p50_p95(part_ms), "numpy_ms": p50_p95(ctx.numpy_ms), "recall": recall}
    return [("search, Qdrant part, vector given (p50 / p95)", fmt(part_ms),
             f"numpy exact scan, same filter: {fmt(ctx.numpy_ms)} (p95 {ratio:.2f}x)"),
            ("recall@3 of the dense list vs numpy exact", f"{recall:.3f}", f"{len(ctx.queries)} queries, type + one domain held out")]


def lifecycle_rows(pool_path: Path, ctx: Context) -> list[Row]:
    """`retrieve` as the retrieve node calls it, lifecycle on and off, alternating on the same queries."""
    on_ms, off_ms = [], []
    with MemoryPool.open(pool_path, local_embeddings()) as pool:
        for q in ctx.queries:  # every query vector in the pool's cache: the search is timed, not the model
            pool.retrieve(q.text, k=K, where=where_of(q))
        config = LifecycleConfig()
        pool.retrieve(ctx.queries[0].text, k=K, where=where_of(ctx.queries[0]), lifecycle=config)
        for q in ctx.queries:
            for lifecycle, out in ((None, off_ms), (config, on_ms)):
                t = time.perf_counter()
                pool.retrieve(q.text, k=K, where=where_of(q), lifecycle=lifecycle)
                out.append((time.perf_counter() - t) * 1000)
    delta = p50_p95(on_ms)[1] - p50_p95(off_ms)[1]
    ctx.results["lifecycle"] = {"on_ms": p50_p95(on_ms), "off_ms": p50_p95(off_ms)}
    return [("retrieve, lifecycle off (p50 / p95)", fmt(off_ms), "query vector cached"),
            ("retrieve, lifecycle on (p50 / p95)", fmt(on_ms), f"{delta:+.2f} ms p95 vs off")]


PROBE = """
import json, sys, time
from mtl_graph.memory.engine.embeddings import local_embeddings
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.pool.filter import SearchFilter
from mtl_graph.memory.pool.pool import MemoryPool
queries = json.loads(sys.argv[2])
emb = local_embeddings()
for text, _, _ in queries:
    emb.embed_query(text)  # the model loaded and the vectors computed: the pool is timed
t = time.perf_counter()
pool = MemoryPool.open(sys.argv[1], emb)
opened = time.perf_counter() - t
text, type_, held_out = queries[0]
t = time.perf_counter()
pool.retrieve(text, k=3, where=SearchFilter(type=type_, exclude_domains=(held_out,)), lifecycle=LifecycleConfig())
first = time.perf_counter() - t
for text, type_, held_out in queries[1:]:
    pool.retrieve(text, k=3, where=SearchFilter(type=type_, exclude_domains=(held_out,)), lifecycle=LifecycleConfig())
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
pool.close()
print(json.dumps({"open_s": opened, "first_s": first, "rss_mb": hwm / 1024}))
"""
MODEL_ONLY = """
import sys
from mtl_graph.memory.engine.embeddings import local_embeddings
emb = local_embeddings()
for text in sys.argv[1:]:
    emb.embed_query(text)
print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024)
"""


def fresh_process_rows(pool_path: Path, ctx: Context) -> list[Row]:
    """A new process: open the pool, its first lifecycle search, then 99 more; peak RSS against the model alone."""
    queries = [(q.text, q.type, q.exclude_domain) for q in ctx.queries[:100]]
    proc = subprocess.run([sys.executable, "-c", PROBE, str(pool_path), json.dumps(queries)],
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"fresh-process probe failed: {proc.stderr.strip()[-800:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    model = subprocess.run([sys.executable, "-c", MODEL_ONLY, *[q[0] for q in queries]], capture_output=True,
                           text=True, timeout=600, check=True)
    r["model_only_mb"] = float(model.stdout.strip().splitlines()[-1])
    ctx.results["fresh_process"] = r
    return [("open + first lifecycle search, fresh process", f"{r['open_s'] + r['first_s']:.2f} s",
             f"open {r['open_s']:.2f} s, first search {r['first_s']:.2f} s"),
            (f"peak RSS, open + {len(queries)} searches, fresh process", f"{r['rss_mb']:,.0f} MB",
             f"the embedding model alone: {r['model_only_mb']:,.0f} MB")]


def write_rows(pool_path: Path, ctx: Context) -> list[Row]:
    """add_many in batches of 50 with the vectors given (screening, dedup, upsert, the index step)."""
    texts = [m.key_text() for m in ctx.extra]
    emb = rb.PrecomputedEmbeddings(texts, ctx.extra_dense, local_embeddings())
    with MemoryPool.open(pool_path, emb) as pool:
        t = time.perf_counter()
        for start in range(0, len(ctx.extra), 50):
            pool.add_many(ctx.extra[start:start + 50])
        per_s = len(ctx.extra) / (time.perf_counter() - t)
    ctx.results["writes_per_s"] = per_s
    return [("writes with vectors given (add_many, batches of 50)", f"{per_s:,.0f} memories/s",
             f"{len(ctx.extra)} new memories")]


def snapshot_rows(pool_path: Path, ctx: Context) -> list[Row]:
    """Snapshot create, diff and restore of a copy of the pool (benchmarks/snapshots.py), each in a fresh process."""
    import snapshots

    with tempfile.TemporaryDirectory(prefix="mtl-bench-scale-snapshots-") as work:
        found = snapshots.snapshot_rows(pool_path, work)
    ctx.results["snapshots"] = found
    return [(f"snapshot {r['step']}", f"{r['per_s_cpu']:,.0f} points per CPU s ({r['wall']:.1f} s wall)",
             f"peak RSS {r['peak_mib']:,.0f} MiB, {r['opened_mib']:,.0f} MiB with the pool open, "
             f"{snapshots._mib(r['growth_mib'])} MiB more at the step's peak")
            for r in found]


ROWS: list[Callable[[Path, Context], list[Row]]] = [build_rows, search_rows, lifecycle_rows, fresh_process_rows,
                                                    snapshot_rows, write_rows]
"""The table, in order; write_rows last (it adds memories)."""


def machine_line() -> str:
    import os
    import platform
    from importlib.metadata import version

    load = open("/proc/loadavg").read().split()[:3]
    return (f"{os.cpu_count()} CPUs, load {' '.join(load)}, Python {platform.python_version()}, "
            f"qdrant-edge-py {version('qdrant-edge-py')}, numpy {np.__version__}")


def markdown(rows: list[Row], ctx: Context) -> str:
    lines = [f"### A pool of {ctx.size:,} memories", "", f"Machine: {machine_line()}", "",
             "| figure | value | baseline / note |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1_000_000, help="memories in the pool (default 1,000,000)")
    ap.add_argument("--real", type=int, default=10_000, help="memories embedded by the model (the rest drawn around them)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--writes", type=int, default=500, help="new memories for the write figure")
    ap.add_argument("--markdown", type=Path, help="also write the table here")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    ap.add_argument("--keep", type=Path, help="build the pool here and keep it (default: a temporary directory)")
    ap.add_argument("--build-only", action="store_true", help="the build's rows alone (where a build's time goes)")
    args = ap.parse_args(argv)
    if args.size < 1 or args.real < 1 or args.queries < 1 or args.writes < 0:
        ap.error("--size, --real and --queries must be at least 1, --writes at least 0")
    args.real = min(args.real, args.size)
    root = args.keep or Path(tempfile.mkdtemp(prefix="mtl-bench-scale-"))
    started = time.perf_counter()
    try:
        pool_path, ctx = prepare(args, root)
        gc.collect()
        gc.freeze()  # the benchmark's own arrays are no garbage for the pool's searches to collect
        rows: list[Row] = []
        for row in ROWS[:1] if args.build_only else ROWS:
            print(f"== {row.__name__}", file=sys.stderr)
            found = row(pool_path, ctx)
            for figure in found:  # as they come: a long run that is stopped still leaves its first rows
                print("   " + " | ".join(figure), file=sys.stderr, flush=True)
            rows += found
        rows.append(("whole benchmark", f"{time.perf_counter() - started:.0f} s", ""))
        text = markdown(rows, ctx)
        print(text)
        if args.markdown:
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
            args.markdown.write_text(text)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"size": ctx.size, "machine": machine_line(), "rows": rows,
                                             "results": ctx.results}, indent=2, default=float))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
