"""A background index build of a grown pool: its time, what it costs the pool's own process, and how long it holds
up the pool's writers, for this tree and optionally a baseline revision of the library in the same run.

    python benchmarks/index_build.py [--sizes 20000 100000] [--tail 0.25] [--baseline REV]

Each size: a pool of N points (random unit vectors and a real memory's payload, written at the storage level and
indexed once, as benchmarks/snapshots.py grows its pools). Then, per library, in a fresh process on a copy of that
pool: a tail of `--tail` x N new points is written (not timed) and one build is asked for and waited on
(`optimize(wait=True)`), while a writer thread rewrites one memory's payload every 20 ms. Columns: the build's wall
time; CPU seconds of the pool's process during it (the build's feeding thread included: that thread holds the GIL
while it runs, so the agent's threads wait on it) and of the worker process; the longest single write while it ran
(the swap holds the writers while it applies the last journal entries and flips the link); recall of the built
index is checked by the tests (tests/memory/engine/edge).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CODE_ENV = "MTL_INDEX_BENCH_CODE"
"""The directory holding the `mtl_graph` a measuring process imports (a baseline's extraction; this tree by default)."""
sys.path.insert(0, os.environ.get(CODE_ENV) or str(REPO))
sys.path.insert(1, str(Path(__file__).resolve().parent))

import snapshots  # noqa: E402  (grow, baseline, _open: the same pools and revisions)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(pool_dir: Path, tail: int) -> dict[str, Any]:
    """In this process: the tail written, then one build waited on while a writer keeps writing."""
    import numpy as np

    from mtl_graph.memory.engine.storage import StoredPoint

    with snapshots._open(pool_dir) as pool:
        store = pool.store
        while hasattr(store, "inner"):  # the engine's own store under the pool's wrappers
            store = store.inner
        template = next(store.scroll_points(batch=1))
        rng = np.random.default_rng(11)
        for start in range(0, tail, 2000):
            rows = rng.standard_normal((min(2000, tail - start), len(template.dense)), dtype=np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            store.upsert([StoredPoint(f"00000000-0000-4000-8000-{start + i:012x}", row, template.sparse,
                                      {**template.payload, "n": start + i}) for i, row in enumerate(rows.tolist())])
        stop, longest = threading.Event(), [0.0]

        def writer() -> None:
            while not stop.wait(0.02):
                began = time.perf_counter()
                store.set_payload(template.id, {"touched": began})
                longest[0] = max(longest[0], time.perf_counter() - began)

        thread = threading.Thread(target=writer, daemon=True)
        children, cpu, wall = _children_cpu(), time.process_time(), time.perf_counter()
        thread.start()
        store.optimize(wait=True)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        stop.set()
        thread.join()
        return {"points": store.count(), "indexed": store.indexed, "wall": wall, "pool_cpu": cpu,
                "worker_cpu": _children_cpu() - children, "longest_write": longest[0]}


def _in_child(pool_dir: Path, tail: int, code: Path | None) -> dict[str, Any]:
    env = dict(os.environ, **({CODE_ENV: str(code)} if code else {}))
    done = subprocess.run([sys.executable, __file__, "--measure", str(pool_dir), "--tail-points", str(tail)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"measurement failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--tail", type=float, default=0.25, help="new points before the build, as a share of N")
    parser.add_argument("--baseline", help="a git revision whose library is measured too, on a copy of each pool")
    parser.add_argument("--repeat", type=int, default=1, help="measurements of each library, taking turns")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tail-points", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.tail_points)))
        return
    from importlib.metadata import version

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"qdrant-edge-py {version('qdrant-edge-py')}, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| points indexed | tail | code | build wall s | pool process CPU s | worker CPU s | longest write ms |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="mtl-index-bench-") as tmp:
        code: dict[str, Path | None] = {}
        if args.baseline:
            code[f"baseline {args.baseline}"] = snapshots.baseline(args.baseline, Path(tmp) / "baseline")
        code["this tree"] = None
        for n in args.sizes:
            pool_dir = Path(tmp) / f"pool-{n}"
            with snapshots._open(pool_dir) as pool:
                snapshots.grow(pool, n)
            tail = int(args.tail * n)
            for _ in range(args.repeat):
                for label, root in code.items():
                    work = Path(tmp) / "work"
                    shutil.rmtree(work, ignore_errors=True)
                    shutil.copytree(pool_dir, work, symlinks=True)
                    r = _in_child(work, tail, root)
                    assert r["indexed"] == r["points"] == n + tail, r
                    print(f"| {n:,} | {tail:,} | {label} | {r['wall']:.1f} | {r['pool_cpu']:.1f} | "
                          f"{r['worker_cpu']:.1f} | {r['longest_write'] * 1000:.0f} |", flush=True)
            shutil.rmtree(pool_dir, ignore_errors=True)
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
