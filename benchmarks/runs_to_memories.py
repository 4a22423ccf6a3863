"""How agent logs become memories: runs -> memories (added / merged / identical), screening hits, time per run.

    python benchmarks/runs_to_memories.py LOG_DIR_OR_FILE [...] [--concurrency N]

Ingests the logs as trajectory memories (no model needed) into a fresh in-memory pool and prints what the pool
did with every run, the memories per task and per source run, and which runs write-time screening flagged
(with the rule). Then times the screening and the dedup normalisation alone. Public mini-swe-agent trajectories
(`*.traj.json`, e.g. from the mini-swe-agent repository's history) are a good real input.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from mtl_graph.importers import load_many
from mtl_graph.importers.ingest import IngestConfig, ingest
from mtl_graph.memory.dedup import normalize
from mtl_graph.memory.base import MemoryType
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.screening.screen import screen_text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()

    with MemoryPool.open(":memory:") as pool:
        t0 = time.perf_counter()
        report = ingest(args.paths, pool, None, IngestConfig(formats=[MemoryType.TRAJECTORY],
                                                             concurrency=args.concurrency))
        seconds = time.perf_counter() - t0
        memories = list(pool)
    print(f"runs: {len(report.runs)} ({dict(Counter(r.status for r in report.runs))}), "
          f"bad files: {len(report.file_failures)}, {seconds:.0f} s")
    print(f"memories: {len(memories)} for {len({t for m in memories for t in m.source_task_ids})} tasks, "
          f"{sum(len(m.sources) for m in memories)} sources; pool report {report.written()}")
    for memory in (m for m in memories if m.flagged):
        print(f"  flagged {memory.source_task_ids}: {memory.flagged}")

    loaded, _ = load_many(args.paths)
    texts = ["\n".join([t.trajectory.task.instruction, *(f"{s.action}\n{s.observation}" for s in t.trajectory.steps)])
             for t in loaded]
    for name, fn in (("screen", screen_text), ("normalise", normalize)):
        t0 = time.perf_counter()
        for text in texts:
            fn(text)
        print(f"{name}: {(time.perf_counter() - t0) / max(1, len(texts)) * 1000:.1f} ms per run "
              f"(average run {sum(map(len, texts)) // max(1, len(texts)):,} characters)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
