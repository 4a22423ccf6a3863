"""Two processes writing one embedded (Edge) pool at once: every memory a writer was told it added is there, and a
writer that could not write got a clear MTLError naming the process that holds the pool; never a silent loss."""

import json
import subprocess
import sys

from helpers.paths import DRIVERS, ROOT
from mtl_graph.memory.pool.pool import MemoryPool

N = 5


def test_two_writers_both_land_or_the_second_is_told_who_holds_the_pool(tmp_path, embeddings):
    pool, go = tmp_path / "pool", tmp_path / "go"
    MemoryPool.open(pool, embeddings).close()  # the pool exists; each writer opens it with its own embeddings
    writers = [subprocess.Popen([sys.executable, str(DRIVERS / "pool_writer.py"), str(pool), name, str(go), str(N)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("alpha", "beta")]
    go.touch()
    results = []
    for writer in writers:
        out, err = writer.communicate(timeout=180)
        assert writer.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    wrote = [r for r in results if "added" in r]
    refused = [r for r in results if "error" in r]
    assert wrote, results  # one of them got the pool
    for r in refused:  # the other was told, by pid, who holds it
        [holder] = [w["pid"] for w in results if w is not r]
        assert r["error"] == "PoolLockedError" and f"in use by another process (pid {holder}:" in r["message"]
        assert "pool_writer.py" in r["message"]
    with MemoryPool.open(pool, embeddings) as reopened:
        present = {m.id for m in reopened}
    for r in wrote:
        assert len(r["added"]) == N and set(r["added"]) <= present
    assert len(present) == N * len(wrote)  # nothing from the refused writer, nothing lost from the other
