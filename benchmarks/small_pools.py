"""Filtered search on pools below and around EdgeIndexConfig.exact_below: the exact scan against the HNSW walk.

For each size, one Edge store is filled with the corpus's points (dense vectors drawn around `--real` real-embedded
memories, as `make bench` does) and indexed by the background worker, as a pool is. Every query then runs the
retrieve node's filter (one type, its domain held out, flagged and archived left out, the default namespace) twice,
interleaved on the same store: as the store answers it (an exact scan at or below `exact_below` points) and through
the HNSW walk at the configured beam (`exact_below=0`). Recall@3 is against a numpy exact scan; times are wall and
CPU milliseconds of the store's query (the dense list of 20 the search asks for).

    python benchmarks/small_pools.py --sizes 2000 5000 10000 20000 40000 100000 --real 10000
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval as rb  # noqa: E402
from search_settings import K, conditions_of, fill_store, numpy_exact, percentiles  # noqa: E402

from mtl_graph.memory.engine.edge.edge_store import EdgeStore  # noqa: E402
from mtl_graph.memory.engine.edge.indexing import EdgeIndexConfig  # noqa: E402
from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.engine.storage import QuerySpec  # noqa: E402
from mtl_graph.memory.pool.search import PREFETCH  # noqa: E402


def measure(store: EdgeStore, data: rb.Data, nq: int, exact: list[list[str]]) -> dict[str, dict[str, float]]:
    """Per way of answering ("as configured", "HNSW walk"): recall@3 and wall / CPU p50 and p95 of the list of 20."""
    configured, walk = store.indexing, store.indexing.model_copy(update={"exact_below": 0})
    ways = {"as configured": configured, "HNSW walk": walk}
    wall: dict[str, list[float]] = {w: [] for w in ways}
    cpu: dict[str, list[float]] = {w: [] for w in ways}
    got: dict[str, list[list[str]]] = {w: [] for w in ways}
    for i in range(nq):
        where, dense = conditions_of(data.queries[i]), data.qdense[i].tolist()
        order = list(ways) if i % 2 == 0 else list(ways)[::-1]  # interleaved: neither way always runs warm
        for way in order:
            store.indexing = ways[way]
            c, t = time.process_time(), time.perf_counter()
            [hits] = store.query([QuerySpec(limit=PREFETCH, where=where, dense=dense, with_payload=False)])
            wall[way].append((time.perf_counter() - t) * 1000)
            cpu[way].append((time.process_time() - c) * 1000)
            got[way].append([h.id for h in hits[:K]])
    store.indexing = configured
    out = {}
    for way in ways:
        (w50, w95), (c50, c95) = percentiles(wall[way]), percentiles(cpu[way])
        out[way] = {"recall": rb.recall_at_k(got[way], exact), "wall_p50": w50, "wall_p95": w95,
                    "cpu_p50": c50, "cpu_p95": c95}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2_000, 5_000, 10_000, 20_000, 40_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--real", type=int, default=10_000, help="memories embedded for real (the rest drawn around them)")
    args = ap.parse_args(argv)
    data = rb.load_data(max(args.sizes), args.queries, 0, local_embeddings(), real_max=args.real)
    gc.collect()
    gc.freeze()
    config = EdgeIndexConfig()
    print(f"exact_below {config.exact_below:,}, hnsw_ef {config.hnsw_ef}; {args.queries} queries, "
          f"{min(args.real, max(args.sizes)):,} real-embedded memories\n")
    print("| memories | answered by | recall@3 | wall p50 / p95 ms | CPU p50 / p95 ms | HNSW walk: recall@3 | "
          "walk: wall p50 / p95 ms | walk: CPU p50 / p95 ms |\n|---|---|---|---|---|---|---|---|", flush=True)
    root = Path(tempfile.mkdtemp(prefix="mtl-small-pools-"))
    try:
        for size in args.sizes:
            sub = rb.Data(data.memories[:size], data.dense[:size], data.sparse[:size], data.payloads[:size],
                          data.types[:size], data.domains[:size], data.queries, data.qdense, data.qsparse, [])
            exact, _ = numpy_exact(sub, size, args.queries)
            store = EdgeStore(str(root / str(size)), data.dense.shape[1], indexing=config)
            fill_store(store, sub, size)
            r = measure(store, sub, args.queries, exact)
            store.close()
            shutil.rmtree(root / str(size), ignore_errors=True)
            a, w = r["as configured"], r["HNSW walk"]
            way = "exact scan" if size <= config.exact_below else "HNSW walk"
            print(f"| {size:,} | {way} | {a['recall']:.3f} | {a['wall_p50']:.2f} / {a['wall_p95']:.2f} | "
                  f"{a['cpu_p50']:.2f} / {a['cpu_p95']:.2f} | {w['recall']:.3f} | {w['wall_p50']:.2f} / "
                  f"{w['wall_p95']:.2f} | {w['cpu_p50']:.2f} / {w['cpu_p95']:.2f} |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nload", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
