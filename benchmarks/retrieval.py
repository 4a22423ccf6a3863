"""Retrieval benchmark: MemoryPool's embedded engines beside LangGraph's InMemoryStore and a numpy scan.

For pools of 1k / 10k / 100k synthetic memories (insights, workflows and summaries across six domains), it
measures, in one run and on the same vectors:

* engine query latency (p50/p95) with precomputed query vectors: the fused hybrid query (dense + BM25,
  RRF inside Qdrant) filtered by `type == X` and `domains` must-not-any [one domain], for Qdrant Edge and
  qdrant-client local mode; and dense-only for each, to compare with the dense-only baselines;
* `MemoryPool.search` end to end (query embedding + BM25 + the query + parsing the hits);
* LangGraph's `InMemoryStore` semantic search (its embed function looks the precomputed vectors up, so the
  store is timed, not the model), filtered by type and domain;
* a numpy brute-force scan (masked matrix-vector product + argpartition);
* recall@3 of the indexed dense path (Edge, HNSW after optimize) against exact search with the same filter;
* write throughput of `MemoryPool.add_many` with the real local embedder, dedup on.

Usage: python benchmarks/retrieval.py [--sizes 1000,10000,100000] [--queries 200] [--markdown FILE]
The first run embeds the corpus with the bundled model (a few minutes for 100k); the vectors are cached in
the system temp directory, so later runs start at once.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import corpus  # noqa: E402
from vectors import embed_cached, synthesize  # noqa: E402

from langchain_core.embeddings import Embeddings  # noqa: E402

from mtl_graph.memory.engine.embeddings import embeddings_name, local_embeddings  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.memory.pool.points import payload_of  # noqa: E402
from mtl_graph.memory.engine.storage import Conditions, QuerySpec, StoredPoint  # noqa: E402

DEFAULT_ENGINE = "edge"
ENGINES = ("edge", "client")
K = 3
PREFETCH = 20  # what MemoryPool.search uses up to k=20 (search.PREFETCH)
TARGET_P95_MS = 5.0
TARGET_SPEEDUP = 10.0
TARGET_RECALL = 0.98
TARGET_WRITES = 100.0


# ----------------------------------------------------------------------------------------- data
@dataclass
class Data:
    memories: list
    dense: np.ndarray  # N x d, float32, unit norm
    sparse: list[tuple[list[int], list[float]]]
    payloads: list[dict[str, Any]]
    types: np.ndarray  # N, small ints
    domains: np.ndarray  # N x len(DOMAINS) bool
    queries: list[corpus.Query]
    qdense: np.ndarray
    qsparse: list[tuple[list[int], list[float]]]
    extra: list  # memories not in the pool, for write throughput


TYPE_CODES = {"insight": 0, "workflow": 1, "summary": 2}
DOMAIN_CODES = {d: i for i, d in enumerate(corpus.DOMAINS)}


def load_data(n: int, n_queries: int, n_extra: int, emb, real_max: int | None = None) -> Data:
    """The corpus; with real_max, only the first real_max memories are embedded and the rest synthesized."""
    from qdrant_edge import Bm25

    t0 = time.perf_counter()
    memories = corpus.memories(n)
    extra = corpus.memories(n_extra, offset=10_000_000)
    queries = corpus.queries(n_queries)
    name = embeddings_name(emb)
    real = n if real_max is None else min(n, real_max)
    dense = embed_cached([m.key_text() for m in memories[:real]], emb, name, "memories")
    if real < n:
        dense = np.concatenate([dense, synthesize(dense, n - real)])
    qdense = embed_cached([q.text for q in queries], emb, name, "queries")
    bm25 = Bm25()

    def sp(vec) -> tuple[list[int], list[float]]:
        return list(vec.indices), list(vec.values)

    sparse = [sp(bm25.embed_document(m.key_text())) for m in memories]
    qsparse = [sp(bm25.embed_query(q.text)) for q in queries]
    payloads = [payload_of(m) for m in memories]
    types = np.array([TYPE_CODES[m.type] for m in memories], dtype=np.int8)
    domains = np.zeros((n, len(DOMAIN_CODES)), dtype=bool)
    for i, m in enumerate(memories):
        for d in m.domains:
            domains[i, DOMAIN_CODES[d]] = True
    print(f"  corpus ready: {n:,} memories, {len(queries)} queries ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return Data(memories, dense, sparse, payloads, types, domains, queries, qdense, qsparse, extra)


def where_of(q: corpus.Query) -> Conditions:
    return Conditions(equals={"type": q.type}, excludes={"domains": [q.exclude_domain]})


# ----------------------------------------------------------------------------------------- timing
@dataclass
class Row:
    size: int
    system: str
    search: str
    n: int = 0
    p50: float | None = None  # ms
    p95: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def time_queries(fn: Callable[[int], Any], n: int, budget_s: float, warmup: int = 3, min_n: int = 20
                 ) -> tuple[list[float], int]:
    """Latencies in ms of fn(i) for i in range(n), stopping early after budget_s (but not before min_n)."""
    for i in range(min(warmup, n)):
        fn(i)
    out = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
        if len(out) >= min_n and time.perf_counter() - start > budget_s:
            break
    return out, len(out)


def fill(row: Row, lat: list[float]) -> Row:
    row.n = len(lat)
    if lat:
        row.p50, row.p95 = float(np.percentile(lat, 50)), float(np.percentile(lat, 95))
    return row


# ----------------------------------------------------------------------------------------- systems
def populate(pool: MemoryPool, data: Data, n: int, batch: int = 1000) -> float:
    """Write the first n points straight into the pool's store (vectors precomputed); returns seconds."""
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        populate_range(pool, data, start, min(n, start + batch))
    return time.perf_counter() - t0


def populate_range(pool: MemoryPool, data: Data, start: int, end: int) -> None:
    """Upsert memories start..end-1 straight into the pool's store."""
    rows = data.dense[start:end].tolist()
    pool.store.upsert([
        StoredPoint(data.memories[i].id, rows[i - start], data.sparse[i], data.payloads[i]) for i in range(start, end)
    ])


def numpy_search(data: Data, n: int) -> Callable[[int], list[int]]:
    matrix = np.ascontiguousarray(data.dense[:n])
    types, domains = data.types[:n], data.domains[:n]

    def search(i: int) -> list[int]:
        q = data.queries[i]
        mask = (types == TYPE_CODES[q.type]) & ~domains[:, DOMAIN_CODES[q.exclude_domain]]
        scores = matrix @ data.qdense[i]
        scores[~mask] = -np.inf
        top = np.argpartition(-scores, K)[:K]
        top = top[np.argsort(-scores[top])]
        return [int(t) for t in top if scores[t] > -np.inf]

    return search


def build_inmemory_store(data: Data, n: int) -> tuple[Any, float]:
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    lookup: dict[str, list[float]] = {}
    texts = [m.key_text() for m in data.memories[:n]]
    rows = data.dense[:n].tolist()
    lookup.update(zip(texts, rows))
    lookup.update(zip([q.text for q in data.queries], data.qdense.tolist()))

    def embed(batch: list[str]) -> list[list[float]]:  # the store is timed, not the model
        return [lookup[t] for t in batch]

    store = InMemoryStore(index={"dims": data.dense.shape[1], "embed": embed, "fields": ["text"]})
    t0 = time.perf_counter()
    ops = []
    for i in range(n):
        m = data.memories[i]
        value = {"text": texts[i], "type": m.type, "id": m.id}
        value.update({f"in_{d}": bool(data.domains[i, c]) for d, c in DOMAIN_CODES.items()})
        ops.append(PutOp(("memories",), m.id, value))
        if len(ops) == 1000:
            store.batch(ops)
            ops = []
    if ops:
        store.batch(ops)
    return store, time.perf_counter() - t0


def recall_at_k(got: list[list[str]], exact: list[list[str]]) -> float:
    hits = total = 0
    for g, e in zip(got, exact):
        hits += len(set(g[:K]) & set(e[:K]))
        total += len(e[:K])
    return hits / total if total else 1.0


# ----------------------------------------------------------------------------------------- one size
def run_size(n: int, data: Data, emb, args, rows: list[Row], notes: dict[str, Any]) -> None:
    nq = args.queries
    budget = args.budget
    print(f"\n== {n:,} memories ==", file=sys.stderr)

    # numpy exact: the reference for recall, and a baseline
    np_search = numpy_search(data, n)
    lat, _ = time_queries(np_search, nq, budget)
    rows.append(fill(Row(n, "numpy brute force", "dense, exact"), lat))
    exact_ids = [[data.memories[j].id for j in np_search(i)] for i in range(min(args.recall_queries, nq))]

    # LangGraph InMemoryStore
    store, build_s = build_inmemory_store(data, n)

    def ims(i: int):
        q = data.queries[i]
        return store.search(("memories",), query=q.text, limit=K,
                            filter={"type": q.type, f"in_{q.exclude_domain}": False})

    lat, _ = time_queries(ims, nq, budget)
    ims_ids = [[it.key for it in ims(i)] for i in range(min(20, nq))]
    rows.append(fill(Row(n, "LangGraph InMemoryStore", "dense, exact"), lat))
    rows[-1].extra["agrees_with_numpy@3"] = recall_at_k(ims_ids, exact_ids[:20])
    del store
    gc.collect()

    for engine in ENGINES:
        label = "Qdrant Edge" if engine == "edge" else "qdrant-client local"
        if engine == "client" and n > args.client_max:
            for search in ("hybrid", "dense", "MemoryPool.search"):
                rows.append(Row(n, label, search, note=f"skipped: brute force in Python above {args.client_max:,}"))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # local mode warns above 20k points
            run_engine(engine, label, n, data, emb, args, rows, notes, exact_ids)
        gc.collect()


def run_engine(engine: str, label: str, n: int, data: Data, emb, args, rows: list[Row], notes: dict[str, Any],
               exact_ids: list[list[str]]) -> None:
    nq, budget = args.queries, args.budget
    pool = MemoryPool.open(":memory:", emb, engine=engine)
    try:
        ingest_s = populate(pool, data, n)
        notes.setdefault("ingest_s", {})[f"{engine}@{n}"] = round(ingest_s, 2)
        print(f"  {engine}: wrote {n:,} points in {ingest_s:.1f} s", file=sys.stderr)
        ebudget = budget if engine == "edge" else args.client_budget

        def hybrid(i: int, pool=pool):
            q = data.queries[i]
            return pool.store.query([QuerySpec(limit=K, where=where_of(q), dense=data.qdense[i].tolist(),
                                               sparse=data.qsparse[i], prefetch_limit=PREFETCH)])[0]

        def dense(i: int, pool=pool):
            q = data.queries[i]
            return pool.store.query([QuerySpec(limit=K, where=where_of(q), dense=data.qdense[i].tolist())])[0]

        if engine == "edge":
            lat, _ = time_queries(hybrid, min(nq, 50), budget / 2)
            rows.append(fill(Row(n, label, "hybrid, before optimize()"), lat))
            rows[-1].note = "one plain segment, brute force"
            t0 = time.perf_counter()
            pool.optimize()
            opt_s = time.perf_counter() - t0
            info = pool.store.shard.info()
            notes.setdefault("optimize_s", {})[f"edge@{n}"] = round(opt_s, 2)
            notes.setdefault("edge_info", {})[f"edge@{n}"] = {
                "points": info.points_count, "indexed_vectors": info.indexed_vectors_count,
                "segments": info.segments_count}
            print(f"  edge: optimize() {opt_s:.1f} s, {info.indexed_vectors_count:,} indexed vectors", file=sys.stderr)

        lat, _ = time_queries(hybrid, nq, ebudget)
        rows.append(fill(Row(n, label, "hybrid"), lat))
        lat, _ = time_queries(dense, nq, ebudget)
        rows.append(fill(Row(n, label, "dense"), lat))
        got = [[h.id for h in dense(i)] for i in range(min(args.recall_queries, rows[-1].n))]
        rows[-1].extra["recall@3"] = recall_at_k(got, exact_ids[:len(got)])

        def e2e(i: int, pool=pool):
            q = data.queries[i]
            return pool.search(q.text, type=q.type, k=K, exclude_domains=[q.exclude_domain])

        lat, _ = time_queries(e2e, nq, ebudget)
        rows.append(fill(Row(n, label, "MemoryPool.search"), lat))
        rows[-1].note = "embeds the query"

        if engine == DEFAULT_ENGINE and n == max(args.sizes) and args.write_batch:
            notes.setdefault("writes", []).append(write_throughput(pool, data, f"{label}, into the {n:,} pool"))
    finally:
        pool.close()


class PrecomputedEmbeddings(Embeddings):
    """The local model's name and vectors, looked up for texts embedded beforehand (the model for the rest)."""

    def __init__(self, texts: list[str], vectors: np.ndarray, model) -> None:
        self._lookup = dict(zip(texts, range(len(texts))))
        self._vectors, self._model = vectors, model
        self.model_name = model.model_name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self._lookup]
        computed = dict(zip(missing, self._model.embed_documents(missing))) if missing else {}
        return [self._vectors[self._lookup[t]].tolist() if t in self._lookup else computed[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def auto_index_check(data: Data, emb, n: int, args, rows: list[Row], notes: dict[str, Any]) -> None:
    """Write n memories through MemoryPool.add_many (dedup on, vectors precomputed) and check that the pool
    indexed them by itself: no explicit optimize() call."""
    pre = PrecomputedEmbeddings([m.key_text() for m in data.memories[:n]], data.dense[:n], emb)
    with MemoryPool.open(":memory:", pre, engine="edge") as pool:
        slowest = 0.0
        statuses: dict[str, int] = {}
        t0 = time.perf_counter()
        for start in range(0, n, 1000):
            t = time.perf_counter()
            for r in pool.add_many(data.memories[start:start + 1000]):
                statuses[r.status] = statuses.get(r.status, 0) + 1
            slowest = max(slowest, time.perf_counter() - t)
        dt = time.perf_counter() - t0
        info = pool.store.shard.info()
        notes["auto_index"] = {"memories": n, "seconds": round(dt, 1), "per_s_without_embedding": round(n / dt),
                               "slowest_batch_s": round(slowest, 1), "statuses": statuses,
                               "points": info.points_count, "indexed_vectors": info.indexed_vectors_count,
                               "segments": info.segments_count}
        print(f"  add_many x{n:,} (vectors precomputed): {n / dt:,.0f} memories/s, slowest batch {slowest:.1f} s, "
              f"{statuses}", file=sys.stderr)

        def hybrid(i: int):
            q = data.queries[i]
            return pool.store.query([QuerySpec(limit=K, where=where_of(q), dense=data.qdense[i].tolist(),
                                               sparse=data.qsparse[i], prefetch_limit=PREFETCH)])[0]

        lat, _ = time_queries(hybrid, args.queries, args.budget)
        rows.append(fill(Row(n, "Qdrant Edge", "hybrid, written by add_many"), lat))
        rows[-1].note = "no explicit optimize(): the pool indexed as it grew"


def write_throughput(pool: MemoryPool, data: Data, label: str) -> dict[str, Any]:
    batch = data.extra
    before = len(pool)
    t0 = time.perf_counter()
    results = pool.add_many(batch)
    dt = time.perf_counter() - t0
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    out = {"where": label, "memories": len(batch), "seconds": round(dt, 2), "per_s": round(len(batch) / dt, 1),
           "statuses": statuses, "count_after": len(pool), "count_before": before}
    print(f"  writes ({label}): {out['per_s']:.0f} memories/s {statuses}", file=sys.stderr)
    return out


def write_benchmarks(data: Data, emb, notes: dict[str, Any]) -> None:
    texts = [m.key_text() for m in data.extra]
    t0 = time.perf_counter()
    emb.embed_documents(texts)
    notes["embed_only_per_s"] = round(len(texts) / (time.perf_counter() - t0), 1)
    for engine in ENGINES:
        label = "Qdrant Edge" if engine == "edge" else "qdrant-client local"
        with MemoryPool.open(":memory:", emb, engine=engine) as pool:
            notes.setdefault("writes", []).append(write_throughput(pool, data, f"{label}, empty pool"))


# ----------------------------------------------------------------------------------------- report
def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = ""
    try:
        kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        ram = f"{kb / 1024 / 1024:.0f} GB"
    except (OSError, StopIteration, ValueError):
        pass
    from importlib.metadata import version

    libs = ", ".join(f"{p} {version(p)}" for p in ("qdrant-edge-py", "qdrant-client", "langgraph", "numpy", "onnxruntime"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {"cpus": str(os.cpu_count()), "cpu": cpu, "ram": ram, "python": platform.python_version(), "load": load,
            "os": platform.system(), "libraries": libs}


def fmt_ms(v: float | None) -> str:
    return "—" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}")


def fmt_x(v: float | None) -> str:
    return "—" if v is None else (f"{v:.2f}x" if v < 10 else f"{v:.0f}x")


def table_rows(rows: list[Row]) -> list[list[str]]:
    out = []
    for size in sorted({r.size for r in rows}):
        group = [r for r in rows if r.size == size]
        ims = next((r for r in group if r.system.startswith("LangGraph")), None)
        default = next((r for r in group if r.system == "Qdrant Edge" and r.search == "hybrid"), None)
        for r in group:
            vs_ims = [_ratio(ims and getattr(ims, p), getattr(r, p)) for p in ("p50", "p95")]
            vs_def = [_ratio(getattr(r, p), default and getattr(default, p)) for p in ("p50", "p95")]
            extra = "; ".join(f"{k} {v:.3f}" for k, v in r.extra.items())
            note = "; ".join(x for x in (extra, r.note) if x)
            out.append([f"{size:,}", r.system, r.search, str(r.n) if r.n else "—", fmt_ms(r.p50), fmt_ms(r.p95),
                        " / ".join(fmt_x(v) for v in vs_ims), " / ".join(fmt_x(v) for v in vs_def), note])
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


HEADER = ["memories", "system", "search", "queries", "p50 ms", "p95 ms", "speed-up vs InMemoryStore p50 / p95",
          "time ÷ Edge hybrid p50 / p95", "notes"]


def print_table(rows: list[Row]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        print(markdown_table(rows))
        return
    t = Table(title="Filtered top-3 search latency (filter: type == X and no source in one domain)")
    for h in HEADER:
        t.add_column(h, justify="right" if h not in ("system", "search", "notes") else "left")
    last = None
    for r in table_rows(rows):
        if last is not None and r[0] != last:
            t.add_section()
        last = r[0]
        t.add_row(*r)
    Console(width=200).print(t)


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(rows)]
    return "\n".join(lines)


def verdict(rows: list[Row], notes: dict[str, Any], sizes: list[int]) -> list[str]:
    top = max(sizes)
    get = lambda sys_, search: next((r for r in rows if r.size == top and r.system == sys_ and r.search == search), None)  # noqa: E731
    edge, ims, dense = get("Qdrant Edge", "hybrid"), get("LangGraph InMemoryStore", "dense, exact"), get("Qdrant Edge", "dense")
    e2e = get("Qdrant Edge", "MemoryPool.search")
    lines = []
    if edge and edge.p95 is not None:
        lines.append(f"p95 of the default engine (Edge hybrid) at {top:,}: {edge.p95:.2f} ms "
                     f"(target <= {TARGET_P95_MS} ms): {'PASS' if edge.p95 <= TARGET_P95_MS else 'FAIL'}")
        if e2e and e2e.p95 is not None:
            lines.append(f"  MemoryPool.search end to end (incl. query embedding): p95 {e2e.p95:.2f} ms")
        if ims and ims.p95 and ims.p50 and edge.p50:
            x50, x95 = ims.p50 / edge.p50, ims.p95 / edge.p95
            lines.append(f"speed-up over InMemoryStore at {top:,}: {x50:.0f}x at p50, {x95:.0f}x at p95 "
                         f"(target >= {TARGET_SPEEDUP:.0f}x): {'PASS' if min(x50, x95) >= TARGET_SPEEDUP else 'FAIL'}")
    recalls = [r.extra["recall@3"] for r in rows if r.system == "Qdrant Edge" and "recall@3" in r.extra]
    if recalls:
        worst = min(recalls)
        lines.append(f"recall@3 of Edge HNSW vs exact (worst size): {worst:.3f} (target >= {TARGET_RECALL}): "
                     f"{'PASS' if worst >= TARGET_RECALL else 'FAIL'}")
    for w in notes.get("writes", []):
        lines.append(f"writes ({w['where']}): {w['per_s']:.0f} memories/s incl. embedding "
                     f"(target >= {TARGET_WRITES:.0f}): {'PASS' if w['per_s'] >= TARGET_WRITES else 'FAIL'} {w['statuses']}")
    if "auto_index" in notes:
        a = notes["auto_index"]
        lines.append(f"add_many of {a['memories']:,} memories in batches of 1000 (vectors precomputed, dedup on): "
                     f"{a['per_s_without_embedding']:,} memories/s, slowest batch {a['slowest_batch_s']} s "
                     f"(the one that built HNSW), {a['statuses']}")
    if "embed_only_per_s" in notes:
        lines.append(f"  (embedding alone: {notes['embed_only_per_s']:.0f} texts/s)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="pool sizes, comma-separated")
    ap.add_argument("--queries", type=int, default=200, help="queries per system and size")
    ap.add_argument("--recall-queries", type=int, default=200, help="queries for recall@3")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per system and size before stopping early")
    ap.add_argument("--client-budget", type=float, default=30.0, help="the same for qdrant-client local mode")
    ap.add_argument("--client-max", type=int, default=100_000, help="largest pool run on qdrant-client local mode")
    ap.add_argument("--write-batch", type=int, default=1000, help="memories per add_many in the write test (0: skip)")
    ap.add_argument("--markdown", help="also write the table and notes as Markdown to this file")
    ap.add_argument("--json", help="also write raw results as JSON to this file")
    args = ap.parse_args(argv)
    args.sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())

    info = machine()
    print(f"machine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM, Python {info['python']}, {info['os']}",
          file=sys.stderr)
    t_start = time.perf_counter()
    emb = local_embeddings()
    data = load_data(max(args.sizes), max(args.queries, args.recall_queries), args.write_batch, emb)
    rows: list[Row] = []
    notes: dict[str, Any] = {}
    if args.write_batch:
        write_benchmarks(data, emb, notes)
    for n in args.sizes:
        run_size(n, data, emb, args, rows, notes)
        if n == 10_000:
            auto_index_check(data, emb, n, args, rows, notes)
    elapsed = time.perf_counter() - t_start

    print()
    print_table(rows)
    print("\nTargets:")
    for line in verdict(rows, notes, args.sizes):
        print("  " + line)
    end_load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nmachine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM, Python {info['python']}; "
          f"{info['libraries']}; load average {info['load']} at start, {end_load} at end")
    print(f"optimize() seconds: {notes.get('optimize_s')}; ingest seconds: {notes.get('ingest_s')}")
    print(f"total {elapsed / 60:.1f} min")
    if args.markdown:
        md = [f"Machine: {info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM, Python {info['python']}, "
              f"{info['os']}; {info['libraries']}. Load average {info['load']} at start, {end_load} at end.",
              "", markdown_table(rows), "", "Targets:", ""]
        md += [f"- {line.strip()}" for line in verdict(rows, notes, args.sizes)]
        md += ["", f"Edge optimize() seconds: {notes.get('optimize_s')}; ingest seconds: {notes.get('ingest_s')}; "
               f"total run {elapsed / 60:.1f} min."]
        Path(args.markdown).write_text("\n".join(md) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": info, "rows": [r.__dict__ for r in rows], "notes": notes},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
