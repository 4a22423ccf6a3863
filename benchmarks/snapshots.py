"""Pool snapshots side by side: format 1 (one decimal-JSON line per point, read whole) against format 2 (id order,
checked batches, binary vectors, streamed), on the same pool in one run, with the peak RSS of each step.

    python benchmarks/snapshots.py [--sizes 20000 100000]

Vectors are drawn at random (no embedding) and written at the storage level, as bench_pool.py grows its pools;
payloads are a real memory's, so a line is as long as a real one. Format 1's writer and diff are kept here as
they were (the library still reads format 1, it no longer writes it). Each step runs in this process; the peak
RSS is the growth of VmHWM over the step (the peak is reset before each, Linux only)."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mtl_graph.memory.base import Provenance  # noqa: E402
from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.engine.snapshots import archive  # noqa: E402
from mtl_graph.memory.engine.snapshots.format import canonical, checksum, digest, load_snapshot  # noqa: E402
from mtl_graph.memory.engine.storage import StoredPoint  # noqa: E402
from mtl_graph.memory.formats.insight import InsightMemory  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402


def kib(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def measured(fn) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS growth MiB) of fn()."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    base = kib("VmRSS:")
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu, (kib("VmHWM:") - base) / 1024


def grow(pool: MemoryPool, n: int, seed: int = 7) -> list[str]:
    memory = InsightMemory(title="Run the tests after each edit", description="When a task changes code.",
                           content="Run the whole test suite after every edit; a green run is the only evidence.",
                           outcome="success", sources=[Provenance(domain="exercism", source_task_id="t1")])
    pool.add(memory)
    [template] = list(pool.store.scroll_points())
    pool.delete(memory.id)
    rng = np.random.default_rng(seed)
    ids = []
    for start in range(0, n, 2000):
        rows = rng.standard_normal((min(2000, n - start), template_dim(template)), dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        points = []
        for i, row in enumerate(rows.tolist()):
            point_id = str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | (start + i)))
            payload = json.loads(json.dumps(template.payload))
            payload["memory"]["id"] = point_id
            points.append(StoredPoint(point_id, row, template.sparse, payload))
            ids.append(point_id)
        pool.store.upsert(points)
        pool.store.optimize()
    pool.store.optimize(wait=True)
    return ids


def template_dim(point: StoredPoint) -> int:
    return len(point.dense)


def format_one_create(pool: MemoryPool, root: Path, name: str) -> None:
    """Format 1's writer as it was: every point as one canonical JSON line, gzip level 1, order-free checksum."""
    path = root / name
    path.mkdir(parents=True)
    digests = []
    with gzip.GzipFile(path / "points.jsonl.gz", "wb", compresslevel=1, mtime=0) as fh:
        for point in pool.store.scroll_points(256):
            line = canonical(point)
            digests.append(digest(line))
            fh.write(line.encode("utf-8") + b"\n")
    manifest = {"format": "mtl-pool-snapshot", "format_version": 1, "name": name, "created_at": "", "count":
                len(digests), "checksum": checksum(digests), "embeddings": "local:all-MiniLM-L6-v2-int8",
                "dim": pool.dim}
    (path / "manifest.json").write_text(json.dumps(manifest))


def format_one_diff(pool: MemoryPool, root: Path, name: str) -> None:
    """Format 1's diff against the live pool as it was: the snapshot read whole, the pool's points compared."""
    before = load_snapshot(root, name).points
    for point in pool.store.scroll_points(256):
        old = before.get(point.id)
        if old is not None:
            archive.changed_fields(old, point)


def run(n: int, workdir: Path) -> list[tuple[str, float, float, float]]:
    rows = []
    with MemoryPool.open(workdir / f"pool-{n}", local_embeddings()) as pool:
        t = time.perf_counter()
        ids = grow(pool, n)
        print(f"  grew {n:,} points in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        old_root = workdir / f"format-1-{n}"
        rows.append(("format 1 create",) + measured(lambda: format_one_create(pool, old_root, "s")))
        rows.append(("format 1 diff (read whole)",) + measured(lambda: format_one_diff(pool, old_root, "s")))
        rows.append(("format 2 create",) + measured(lambda: archive.create_snapshot(pool, "s")))
        rows.append(("format 2 diff vs current",) + measured(
            lambda: archive.diff(archive.points_of(pool, "s"), archive.points_of(pool, "current"))))
        pool.store.delete(ids[: n // 100])  # 1% of the pool to write back
        rows.append(("format 2 restore (1% changed)",) + measured(lambda: archive.restore_snapshot(pool, "s")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| points | step | wall s | CPU s | points/s (wall) | points/s (CPU) | peak RSS growth MiB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="mtl-snapshot-bench-") as tmp:
        for n in args.sizes:
            print(f"== {n:,} points", file=sys.stderr)
            for step, wall, cpu, rss in run(n, Path(tmp)):
                print(f"| {n:,} | {step} | {wall:.2f} | {cpu:.2f} | {n / wall:,.0f} | {n / cpu:,.0f} | {rss:.0f} |",
                      flush=True)


if __name__ == "__main__":
    main()
