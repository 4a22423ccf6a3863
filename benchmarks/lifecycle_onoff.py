"""The lifecycle's cost per search in one process: a pool of N memories (vectors drawn around a real-embedded base,
a thirtieth credited, indexed), then every query searched with the lifecycle off, on, and on with nothing kept from
earlier searches ("cold": the pool's cache of the candidates' re-rank fields set aside for it, where it has one),
interleaved, three times. Wall and CPU milliseconds per search (the CPU of the process: on a shared machine the wall
time carries the waits for a core); "on" repeats the same 100 queries, so from the second round on its candidates
were seen before, as a pool's frequent tasks are; "cold" is every candidate read from the engine.

    python benchmarks/lifecycle_onoff.py 2000          # PYTHONPATH=<another checkout> measures that one
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval as rb  # noqa: E402

from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.lifecycle.policy import LifecycleConfig  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.memory.usage import Use  # noqa: E402


def main(n: int) -> None:
    data = rb.load_data(n, 100, 0, local_embeddings(), real_max=2000)
    with tempfile.TemporaryDirectory(prefix="mtl-bench-onoff-") as tmp, \
            MemoryPool.open(Path(tmp) / "pool", local_embeddings()) as pool:
        rb.populate(pool, data, n)
        rng, ids = random.Random(1), [m.id for m in data.memories[:n]]
        for r in range(n // 30):
            pool.credit(f"h{r}", [Use(i, j == 0) for j, i in enumerate(rng.sample(ids, 3))], "success", "tests")
        pool.optimize()
        cfg, queries = LifecycleConfig(), data.queries
        for q in queries:
            pool.query_vector(q.text)
        cache = getattr(pool.store, "cache", None)  # None: a tree without one (every search is cold)
        modes = ("off", "on", "cold")
        times: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(3):
            for i, q in enumerate(queries):
                for mode in modes[i % 3:] + modes[:i % 3]:
                    if cache is not None:
                        pool.store.cache = None if mode == "cold" else cache  # cold: read from the engine
                    t, c = time.perf_counter(), time.process_time()
                    pool.retrieve(q.text, type=q.type, k=3, lifecycle=None if mode == "off" else cfg,
                                  exclude_domains=[q.exclude_domain])
                    times[mode].append((time.perf_counter() - t) * 1000)
                    cpu[mode].append((time.process_time() - c) * 1000)

    def p(values: list[float], q: int) -> float:
        return float(np.percentile(values, q))

    for mode in modes:
        print(f"{mode:4}", f"p50 {p(times[mode], 50):.2f} p95 {p(times[mode], 95):.2f}",
              f"cpu p50 {p(cpu[mode], 50):.2f} p95 {p(cpu[mode], 95):.2f}")
    for mode in modes[1:]:
        print(f"{mode} - off", f"p50 {p(times[mode], 50) - p(times['off'], 50):+.2f}",
              f"p95 {p(times[mode], 95) - p(times['off'], 95):+.2f}",
              f"cpu p50 {p(cpu[mode], 50) - p(cpu['off'], 50):+.2f} p95 {p(cpu[mode], 95) - p(cpu['off'], 95):+.2f}")
    print("load", Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
