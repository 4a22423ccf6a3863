"""Build a memory pool offline from other agents' logs, then search it.

    python examples/pool_from_logs.py [LOG_DIR] [POOL]

The logs in examples/logs/ are mini-swe-agent (*.traj.json) and SWE-agent (*.traj) trajectories; the LangChain
message dumps and the project's own run log are detected the same way. Trajectory memories need no model; for
insight/summary/workflow memories pass a model, e.g. `ingest(paths, pool, model="openai:gpt-5-mini", ...)`
(the CLI equivalent: `mtl ingest examples/logs --formats insight --model openai:gpt-5-mini`).
"""

import sys
from pathlib import Path

from mtl_graph import MemoryPool
from mtl_graph.importers.ingest import IngestConfig, ingest


def main() -> None:
    logs = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "logs"
    location = sys.argv[2] if len(sys.argv) > 2 else ":memory:"
    with MemoryPool.open(location) as pool:
        report = ingest([logs], pool, config=IngestConfig(formats=["trajectory"], domain="swe"))
        print(f"ingested {report.count('ingested')} runs, {len(report.file_failures)} bad files; "
              f"the pool holds {pool.count()} memories")
        for hit in pool.search("a test fails after changing a Python web framework", type="trajectory", k=2):
            print(f"  {hit.similarity:.2f}  {hit.memory.task[:90]!r} ({hit.memory.outcome.value})")


if __name__ == "__main__":
    main()
