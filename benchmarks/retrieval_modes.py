"""The three retrievers (hybrid, dense, bm25) side by side, in the default namespace and in a team's namespace of the
same pool: p50 of `MemoryPool.search` with a repeated query (its vector cached, so the Qdrant part is timed).

    .venv/bin/python benchmarks/retrieval_modes.py [N]      # N memories in the default namespace (default 2000)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from typing import Callable

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool

QUERY = "topic 5 fails"


def memories(team: str, n: int) -> list[InsightMemory]:
    return [InsightMemory(title=f"{team} lesson {i} about topic {i % 37}", description=f"When topic {i % 37} fails.",
                          content=f"Check step {i % 11} of topic {i % 37} before submitting.",
                          sources=[Provenance(domain=f"d{i % 5}")]) for i in range(n)]


def p50_ms(fn: Callable[[], object], calls: int = 200) -> float:
    fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as directory, MemoryPool.open(directory) as pool:
        team = pool.in_namespace("team-a")
        pool.add_many(memories("default", n))
        team.add_many(memories("team-a", max(1, n // 10)))
        print(f"| namespace (memories) | count | hybrid | dense | bm25 |\n|---|---|---|---|---|")
        for name, each in ((f"default ({n})", pool), (f"team-a ({max(1, n // 10)})", team)):
            cells = [p50_ms(each.count)] + [p50_ms(lambda r=r: each.search(QUERY, k=3, retriever=r))
                                            for r in ("hybrid", "dense", "bm25")]
            print(f"| {name} | " + " | ".join(f"{c:.2f} ms" for c in cells) + " |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
