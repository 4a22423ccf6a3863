"""Which HNSW settings a filtered search needs: recall@3 against a numpy exact scan and the Qdrant part's latency.

Builds one Edge store per index setting from the same vectors (drawn around a real-embedded base, as `make bench`
does), indexed by the background worker as a pool is, then times, per search beam width (hnsw_ef), the dense query
alone and the pool's whole Qdrant part (`ranked_search`: the dense list, the BM25 one beside it when the query
names an identifier, then the top k's payloads; and beside it the same with both lists always asked for), all with the filter the retrieve node uses (one type, one domain held out, flagged and archived
memories left out, the default namespace). Every setting is timed in one run, beside the numpy scan.

    python benchmarks/search_settings.py --size 100000 --settings 16:100:none,16:100:int8 --ef 64,128,400
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval as rb  # noqa: E402

from mtl_graph.memory.engine.edge.edge_store import EdgeStore  # noqa: E402
from mtl_graph.memory.engine.edge.indexing import EdgeIndexConfig  # noqa: E402
from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.engine.storage import DEFAULT_NAMESPACE, Conditions, QuerySpec, StoredPoint  # noqa: E402
from mtl_graph.memory.pool.filter import SearchFilter  # noqa: E402
from mtl_graph.memory.pool.search import PREFETCH, names_identifier, ranked_search  # noqa: E402

K = 3


def conditions_of(q: Any) -> Conditions:
    """The retrieve node's filter for a query: its type, its domain held out, as the pool sends it."""
    where = SearchFilter(type=q.type, exclude_domains=(q.exclude_domain,)).conditions()
    where.namespace = DEFAULT_NAMESPACE
    return where


def fill_store(store: EdgeStore, data: rb.Data, n: int, batch: int = 2000) -> float:
    """Write n points (vectors given) and build the index in the worker, as the pool does; seconds."""
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        end = min(n, start + batch)
        rows = data.dense[start:end].tolist()
        store.upsert([StoredPoint(data.memories[i].id, rows[i - start], data.sparse[i], data.payloads[i])
                      for i in range(start, end)])
    store.optimize(wait=True)
    return time.perf_counter() - t0


def percentiles(ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def measure(store: EdgeStore, data: rb.Data, nq: int, exact: list[list[str]]) -> dict[str, float]:
    """Dense query alone (recall@3 and latency), and the whole Qdrant part of a search with its split."""
    dense_ms, part_ms, batch_ms, both_ms, got = [], [], [], [], []
    specs = [QuerySpec(limit=K, where=conditions_of(data.queries[i]), dense=data.qdense[i].tolist(),
                       with_payload=False) for i in range(nq)]
    for i in range(min(nq, 5)):  # warm the mapped pages
        store.query([specs[i]])
    for i in range(nq):
        t = time.perf_counter()
        hits = store.query([specs[i]])[0]
        dense_ms.append((time.perf_counter() - t) * 1000)
        got.append([h.id for h in hits])
    for i in range(nq):
        q, where = data.queries[i], conditions_of(data.queries[i])
        dense = data.qdense[i].tolist()
        t = time.perf_counter()
        store.query([QuerySpec(limit=PREFETCH, where=where, dense=dense, with_payload=False),
                     QuerySpec(limit=PREFETCH, where=where, sparse=data.qsparse[i], with_payload=False)])
        batch_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        ranked_search(store, dense, data.qsparse[i], where, K, PREFETCH, None, q.text)
        part_ms.append((time.perf_counter() - t) * 1000)
        # without the text both lists are asked for whatever the query: what every search cost before plain
        # queries skipped the BM25 list
        t = time.perf_counter()
        ranked_search(store, dense, data.qsparse[i], where, K, PREFETCH, None)
        both_ms.append((time.perf_counter() - t) * 1000)
    d50, d95 = percentiles(dense_ms)
    b50, b95 = percentiles(batch_ms)
    p50, p95 = percentiles(part_ms)
    a50, a95 = percentiles(both_ms)
    plain = [i for i in range(nq) if not names_identifier(data.queries[i].text)]
    pp50, pp95 = percentiles([part_ms[i] for i in plain])
    pa50, pa95 = percentiles([both_ms[i] for i in plain])
    return {"recall": rb.recall_at_k(got, exact), "dense_p50": d50, "dense_p95": d95, "batch_p50": b50,
            "batch_p95": b95, "part_p50": p50, "part_p95": p95, "both_p50": a50, "both_p95": a95,
            "plain": f"{pp50:.2f} / {pp95:.2f} vs {pa50:.2f} / {pa95:.2f}"}


def numpy_exact(data: rb.Data, n: int, nq: int) -> tuple[list[list[str]], tuple[float, float]]:
    search = rb.numpy_search(data, n)
    ms, exact = [], []
    for i in range(nq):
        t = time.perf_counter()
        top = search(i)
        ms.append((time.perf_counter() - t) * 1000)
        exact.append([data.memories[j].id for j in top])
    return exact, percentiles(ms)


def setting_of(text: str) -> EdgeIndexConfig:
    m, efc, quant = text.split(":")
    return EdgeIndexConfig(hnsw_m=int(m), ef_construct=int(efc), quantization=quant)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--real", type=int, default=2_000, help="memories embedded for real (the rest drawn around them)")
    ap.add_argument("--settings", default="16:100:none,16:100:int8", help="m:ef_construct:quantization, comma-separated")
    ap.add_argument("--ef", default="32,64,128,256,400", help="search beam widths, comma-separated")
    args = ap.parse_args(argv)
    data = rb.load_data(args.size, args.queries, 0, local_embeddings(), real_max=args.real)
    gc.collect()
    gc.freeze()
    root = Path(tempfile.mkdtemp(prefix="mtl-search-settings-"))
    exact, (np50, np95) = numpy_exact(data, args.size, args.queries)
    print(f"numpy exact scan, same filter: p50 {np50:.2f} ms, p95 {np95:.2f} ms", flush=True)
    plain = sum(not names_identifier(q.text) for q in data.queries[:args.queries])
    print(f"queries naming no identifier: {plain} of {args.queries}", flush=True)
    print("| m | ef_construct | quantization | build s | hnsw_ef | recall@3 | dense p50 / p95 ms | "
          "batch p50 / p95 ms | Qdrant part p50 / p95 ms | always both lists p50 / p95 ms |\n"
          "|---|---|---|---|---|---|---|---|---|---|", flush=True)
    try:
        for text in args.settings.split(","):
            setting = setting_of(text)
            path = root / text.replace(":", "-")
            store = EdgeStore(str(path), data.dense.shape[1], indexing=setting)
            build_s = fill_store(store, data, args.size)
            for ef in (int(e) for e in args.ef.split(",")):
                store.indexing = setting.model_copy(update={"hnsw_ef": ef})
                r = measure(store, data, args.queries, exact)
                print(f"| {setting.hnsw_m} | {setting.ef_construct} | {setting.quantization} | {build_s:.0f} | {ef} | "
                      f"{r['recall']:.3f} | {r['dense_p50']:.2f} / {r['dense_p95']:.2f} | {r['batch_p50']:.2f} / "
                      f"{r['batch_p95']:.2f} | {r['part_p50']:.2f} / {r['part_p95']:.2f} | "
                      f"{r['both_p50']:.2f} / {r['both_p95']:.2f} |", flush=True)
                print(f"  queries naming no identifier only, Qdrant part vs both lists p50 / p95 ms: {r['plain']}",
                      file=sys.stderr, flush=True)
            store.close()
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
