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


def test_a_process_refused_while_the_holder_names_itself_is_told_the_holder_not_a_dead_one(tmp_path):
    """The holder writes its line just after it took the lock; a process refused in between (the file still holding
    the line of a holder that died) waits for the living holder's line instead of naming the dead one."""
    import pytest

    from mtl_graph.memory.engine.location import LOCK_FILE, lock_directory
    from mtl_graph.memory.errors import PoolLockedError

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / LOCK_FILE).write_text(f"{dead.stdout.strip()} a holder that was killed\n")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(tmp_path / LOCK_FILE)!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(0.5)\n"  # the window between taking the lock and naming itself, made wide
        "line = f'{os.getpid()} the living holder\\n'.encode()\n"
        "os.pwrite(fd, line, 0); os.ftruncate(fd, len(line))\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(PoolLockedError, match=rf"\(pid {holder.pid}: the living holder\)"):
            lock_directory(tmp_path)
    finally:
        holder.communicate("", timeout=30)
