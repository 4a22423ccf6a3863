"""What each clause of the retrieve node's filter costs a dense query: a pool of N memories (vectors drawn around a
real-embedded base, indexed), then the dense list of 20 (the search's prefetch) for every query under the node's
whole filter and under that filter less one clause at a time, interleaved; CPU milliseconds per query (the wall time
on a shared machine carries the waits for a core).

    python benchmarks/filter_clauses.py 20000
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval as rb  # noqa: E402

from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.engine.storage import DEFAULT_NAMESPACE, Conditions, QuerySpec  # noqa: E402
from mtl_graph.memory.pool.filter import SearchFilter  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402

ROUNDS = 4


def without(where: Conditions, excluded: str) -> Conditions:
    return replace(where, excludes={k: v for k, v in where.excludes.items() if k != excluded})


def variants(q: Any) -> dict[str, Conditions]:
    """The node's filter (one type, the query's domain held out, flagged and archived left out, the default
    namespace), less one clause at a time, and the plainer filters beside it."""
    node = replace(SearchFilter(type=q.type, exclude_domains=(q.exclude_domain,)).conditions(),
                   namespace=DEFAULT_NAMESPACE)
    return {
        "the node's filter": node,
        "less the namespace": replace(node, namespace=None),
        "less status != archived": without(node, "status"),
        "less flagged != true": without(node, "flagged"),
        "flagged == false instead": replace(without(node, "flagged"), equals={**node.equals, "flagged": "false"}),
        "less the domain held out": without(node, "domains"),
        "type and namespace": Conditions(equals={"type": q.type}, namespace=DEFAULT_NAMESPACE),
        "type alone": Conditions(equals={"type": q.type}),
        "no filter": Conditions(),
    }


def main(n: int) -> None:
    data = rb.load_data(n, 100, 0, local_embeddings(), real_max=2000)
    with tempfile.TemporaryDirectory(prefix="mtl-bench-clauses-") as tmp, \
            MemoryPool.open(Path(tmp) / "pool", local_embeddings()) as pool:
        rb.populate(pool, data, n)
        pool.store.optimize(wait=True)
        engine = pool.store.inner  # below the namespace: each variant says its own namespace clause
        vectors = [pool.query_vector(q.text) for q in data.queries]
        names = list(variants(data.queries[0]))
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(ROUNDS):
            for i, (q, vector) in enumerate(zip(data.queries, vectors)):
                filters = variants(q)
                for name in names[i % len(names):] + names[:i % len(names)]:
                    c = time.process_time()
                    engine.query([QuerySpec(limit=20, where=filters[name], dense=vector, with_payload=False)])
                    cpu[name].append((time.process_time() - c) * 1000)
        print(f"{n} memories, {engine.shard.info().segments_count} segments, {len(vectors) * ROUNDS} queries a row")
    for name in names:
        print(f"{name:26} cpu p50 {np.percentile(cpu[name], 50):.2f} p95 {np.percentile(cpu[name], 95):.2f}")
    print("load", Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
