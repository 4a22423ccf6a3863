"""The lifecycle's cost per search in one process: a pool of N memories (vectors drawn around a real-embedded base,
a thirtieth credited, indexed), then every query searched with the lifecycle off and on, interleaved, three times. Wall and CPU milliseconds per search (the CPU of the process: on a shared machine the
wall time carries the waits for a core).

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
        times: dict[bool, list[float]] = {False: [], True: []}
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(3):
            for i, q in enumerate(queries):
                for on in ((False, True) if i % 2 else (True, False)):
                    t, c = time.perf_counter(), time.process_time()
                    pool.retrieve(q.text, type=q.type, k=3, lifecycle=cfg if on else None,
                                  exclude_domains=[q.exclude_domain])
                    times[on].append((time.perf_counter() - t) * 1000)
                    cpu[on].append((time.process_time() - c) * 1000)
    for on in (False, True):
        print("on " if on else "off", f"p50 {np.percentile(times[on], 50):.2f} p95 {np.percentile(times[on], 95):.2f}",
              f"cpu p50 {np.percentile(cpu[on], 50):.2f} p95 {np.percentile(cpu[on], 95):.2f}")
    print("on - off", f"p50 {np.percentile(times[True], 50) - np.percentile(times[False], 50):+.2f}",
          f"p95 {np.percentile(times[True], 95) - np.percentile(times[False], 95):+.2f}",
          f"cpu p50 {np.percentile(cpu[True], 50) - np.percentile(cpu[False], 50):+.2f}",
          f"p95 {np.percentile(cpu[True], 95) - np.percentile(cpu[False], 95):+.2f}")
    print("load", Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
