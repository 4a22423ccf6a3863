"""One of two processes writing the same embedded pool (tests/memory/pool/test_two_writers.py).

    pool_writer.py POOL NAME GO N

Waits for the file GO, opens POOL, adds N distinct memories named NAME-i, keeps the pool open a moment so the other
writer meets it, and prints one JSON line: {"pid", "added": [ids]} or {"pid", "error": type, "message"}."""

import json
import os
import sys
import time
from pathlib import Path

from mtl_graph.core.errors import MTLError
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool

pool_path, name, go, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
memories = [InsightMemory(title=f"{name} lesson {i}", description=f"When the {name} step {i} comes up.",
                          content=f"Do the {name} thing number {i} before moving on.",
                          sources=[Provenance(source_task_id=f"{name}-{i}")]) for i in range(n)]
while not go.exists():
    time.sleep(0.01)
try:
    with MemoryPool.open(pool_path) as pool:
        added = [r.id for r in pool.add_many(memories)]
        time.sleep(1.0)  # held while the other writer tries: the overlap the test is about, not a timing check
    print(json.dumps({"pid": os.getpid(), "added": added}))
except MTLError as exc:
    print(json.dumps({"pid": os.getpid(), "error": type(exc).__name__, "message": str(exc)}))
