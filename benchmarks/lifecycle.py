"""The online loop's costs (issue 18): retrieval with the lifecycle against the research's retrieval, and the
credit of one run against the old read-modify-write `update_stats`, on the same pool, queries and memories.

* retrieval: `pool.retrieve(query, k=3, lifecycle=LifecycleConfig())` (20 candidates by the ranker, the
  relevance floor, re-ranking by utility and decay, quarantined memories filtered out) against
  `pool.retrieve(query, k=3)` (lifecycle off: `search`, the top 3), query vectors cached in both, median ms;
  a tenth of the pool carries a record (credited runs) so the re-ranking has evidence to weigh;
* the first lifecycle search on a fresh handle: it reads the base rate off the whole pool and calibrates the
  floor (the off-topic probes embedded and searched);
* credit per run: 3 memories shown, 1 cited (`pool.credit`, with the quarantine check) against the old
  `update_stats` equivalent (read the 3 memories, rewrite their whole payloads).

    python benchmarks/lifecycle.py --sizes 2000,20000      # standalone; system.py calls run() for `make bench`
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval as rb  # noqa: E402

from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.lifecycle.policy import LifecycleConfig  # noqa: E402
from mtl_graph.memory.base import Outcome  # noqa: E402
from mtl_graph.memory.pool.points import memory_of, payload_of  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.memory.usage import Use  # noqa: E402

K = 3


def _median_ms(fn, n: int, warmup: int = 3) -> float:
    for i in range(min(warmup, n)):
        fn(i)
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return float(np.median(out))


def _old_update_stats(pool: MemoryPool, ids: list[str], outcome: Outcome) -> None:
    """What `update_stats` did before the credit entries: read each memory, bump its counters, rewrite it."""
    with pool.write_lock:
        for hit in pool.fetch(list(dict.fromkeys(ids))):
            memory = memory_of(hit)
            stats = memory.stats.model_copy()
            stats.retrieved += 1
            stats.retrieved_success += outcome == Outcome.SUCCESS
            stats.retrieved_failure += outcome == Outcome.FAILURE
            pool.store.set_payload(hit.id, payload_of(memory.model_copy(update={"stats": stats})))


def run_size(n: int, data: rb.Data, queries: int, runs: int, directory: Path) -> dict[str, Any]:
    rng = random.Random(n)
    ids = [m.id for m in data.memories[:n]]
    cfg = LifecycleConfig()
    with MemoryPool.open(directory / f"pool-{n}", local_embeddings()) as pool:
        rb.populate(pool, data, n)
        pool.optimize()
        for r in range(n // 10 // K):  # a tenth of the pool with a record: ~3 credited runs each
            shown = rng.sample(ids, K)
            pool.credit(f"history-{r}", [Use(i, j == 0) for j, i in enumerate(shown)],
                        "success" if rng.random() < 0.6 else "failure", "tests")
        qs = data.queries

        def off(i: int):
            q = qs[i % len(qs)]
            return pool.retrieve(q.text, type=q.type, k=K, exclude_domains=[q.exclude_domain])

        def on(i: int):
            q = qs[i % len(qs)]
            return pool.retrieve(q.text, type=q.type, k=K, lifecycle=cfg, exclude_domains=[q.exclude_domain])

        pool.contents_changed()  # a fresh handle's state: no base rate, no floor yet
        t = time.perf_counter()
        on(0)
        first_ms = (time.perf_counter() - t) * 1000
        for i in range(queries):  # every query vector in the cache for both passes
            off(i)
        off_ms = _median_ms(off, queries)
        on_ms = _median_ms(on, queries)
        off_ms = min(off_ms, _median_ms(off, queries))  # interleaved again: a load spike hits both
        samples = [rng.sample(ids, K) for _ in range(runs)]
        credit_ms = _median_ms(lambda i: pool.credit(f"bench-{n}-{i}", [Use(x, j == 0) for j, x in
                                                                        enumerate(samples[i])], "failure",
                                                     "tests", lifecycle=cfg), runs, warmup=0)
        old_ms = _median_ms(lambda i: _old_update_stats(pool, samples[i], Outcome.FAILURE), runs, warmup=0)
        floor = on(0).floor
    return {"size": n, "off_ms": off_ms, "on_ms": on_ms, "first_on_ms": first_ms, "credit_ms": credit_ms,
            "old_update_ms": old_ms, "floor": floor, "queries": queries, "runs": runs}


def run(sizes: list[int], queries: int = 100, runs: int = 100, real_max: int = 2000) -> list[dict[str, Any]]:
    emb = local_embeddings()
    data = rb.load_data(max(sizes), queries, 0, emb, real_max=real_max)
    with tempfile.TemporaryDirectory(prefix="mtl-bench-lifecycle-") as directory:
        return [run_size(n, data, queries, runs, Path(directory)) for n in sorted(sizes)]


def rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """Rows in system.py's table format: figure, measured, baseline, ratio, target."""
    labels = "/".join(f"{r['size'] // 1000}k" for r in results)

    def grow(key: str) -> str:
        return " → ".join(f"{r[key]:.2f}" for r in results)

    ratio = " → ".join(f"{r['on_ms'] / r['off_ms']:.2f}×" for r in results)
    credit_ratio = " → ".join(f"{r['credit_ms'] / r['old_update_ms']:.2f}×" for r in results)
    return [
        [f"retrieval with the lifecycle (20 candidates re-ranked, floor, quarantine filter), median ms per search "
         f"at {labels}", grow("on_ms"), f"lifecycle off (top 3 by the ranker): {grow('off_ms')}", ratio, "—"],
        [f"first lifecycle search on a fresh handle (base rate read off the pool, floor calibrated) ms at {labels}",
         grow("first_on_ms"), f"a later search: {grow('on_ms')}", "—", "—"],
        [f"credit of one run (3 memories shown, 1 cited, quarantine check) median ms at {labels}",
         grow("credit_ms"), f"old update_stats (read 3, rewrite their payloads): {grow('old_update_ms')}",
         credit_ratio, "—"],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args(argv)
    results = run([int(s) for s in args.sizes.split(",")], args.queries, args.runs)
    for r in results:
        print(r)
    for row in rows(results):
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
