"""Where the time of a new-query search and the resident memory of an opened pool go, part by part.

    python benchmarks/where_it_goes.py query [--size 1000]   # per-part ms of MemoryPool.search with a new query
    python benchmarks/where_it_goes.py rss POOL_DIR           # peak RSS of a fresh process, by mapping

The query breakdown times each part alone on the same 200 queries, then the whole search with a new and with a
cached query vector, in one process, so a busy machine inflates all of them alike. The memory breakdown opens the
pool in a fresh process, runs 100 searches (what the system benchmark's peak-RSS row does) and sums /proc/self/smaps
by file (pool files by component), so mapped files that were touched show beside the heap."""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

RSS_PROBE = r"""
import collections, json, os, sys, time
sys.path.insert(0, sys.argv[2])
import corpus
def status():
    keep = ("VmHWM", "RssAnon", "RssFile")
    return {l.split(":")[0]: int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith(keep)}
def by_mapping():
    out, name = collections.Counter(), None
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if "-" in parts[0] and not parts[0].endswith(":"):
            path = parts[5] if len(parts) > 5 else "[anonymous]"
            if "/segments/" in path:  # pool files by component: payload_storage, vector_storage-dense, ...
                path = "pool: " + path.split("/segments/")[1].split("/")[1].split("-map")[0]
            elif "/wal/" in path:
                path = "pool: write-ahead log"
            name = path if path.startswith(("pool", "[")) else os.path.basename(path)
        elif parts[0] == "Rss:":
            out[name] += int(parts[1])
    return {k: v // 1024 for k, v in out.most_common(10)}
from mtl_graph.memory.engine.embeddings import local_embeddings
local_embeddings().embed_query("warm up")
model = status()
from mtl_graph.memory.pool.pool import MemoryPool
t = time.perf_counter()
pool = MemoryPool.open(sys.argv[1])
opened = time.perf_counter() - t
for q in corpus.queries(100):
    pool.search(q.text, k=3)
print(json.dumps({"model_loaded_mb": model, "after_open_and_100_searches_mb": status(), "open_s": round(opened, 2),
                  "resident_mb_by_mapping": by_mapping()}))
"""


def rss(pool_dir: str) -> dict:
    here = str(Path(__file__).resolve().parent)
    proc = subprocess.run([sys.executable, "-c", RSS_PROBE, pool_dir, here], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ms(fn, items) -> tuple[float, float]:
    times = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - t) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def query_parts(size: int) -> dict[str, tuple[float, float]]:
    import retrieval as rb
    from bench_pool import _grow_pool
    from mtl_graph.memory.engine.embeddings import local_embeddings
    from mtl_graph.memory.pool.pool import MemoryPool

    emb = local_embeddings()
    data = rb.load_data(size, 200, 0, emb, real_max=10_000)
    queries = data.queries
    texts = [q.text for q in queries]
    with tempfile.TemporaryDirectory() as tmp, MemoryPool.open(Path(tmp) / "pool", emb) as pool:
        _grow_pool(pool, data, size)

        def search(q):
            return pool.search(q.text, type=q.type, k=3, exclude_domains=[q.exclude_domain])

        def search_new(q):
            pool._query_cache.clear()
            return search(q)

        for q in queries[:10]:
            search_new(q)
        encodings = {t: emb._tokenizer.encode(t) for t in texts}
        parts = {
            "tokenise (WordPiece)": _ms(emb._tokenizer.encode, texts),
            "ONNX forward pass + mean pooling": _ms(lambda t: emb._run(emb._query_session, [encodings[t]]), texts),
            "embed_query (the two above + conversions)": _ms(emb.embed_query, texts),
            "BM25 query vector": _ms(lambda t: pool._sparse(t, query=True), texts),
            "search, new query (end to end)": _ms(search_new, queries),
        }
        for q in queries:
            search(q)
        parts["search, cached query vector (end to end)"] = _ms(search, queries)
    parts["word pieces per query, median"] = (float(np.median([len(e.ids) for e in encodings.values()])),) * 2
    return parts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    q = sub.add_parser("query", help="per-part ms of a new-query search")
    q.add_argument("--size", type=int, default=1000, help="memories in the pool (default 1000)")
    r = sub.add_parser("rss", help="peak RSS of a fresh process opening POOL_DIR, by mapping")
    r.add_argument("pool_dir")
    args = ap.parse_args(argv)
    if args.what == "rss":
        print(json.dumps(rss(args.pool_dir), indent=2))
        return 0
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for name, (p50, p95) in query_parts(args.size).items():
        print(f"{name:45s} p50 {p50:7.2f}  p95 {p95:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
