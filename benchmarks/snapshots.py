"""Pool snapshots at scale: create, diff and restore, each in a fresh process (so its peak RSS is its own), on the
same pool, for this tree and optionally a baseline revision of the library in the same run.

    python benchmarks/snapshots.py [--sizes 20000 100000] [--baseline REV]

`--baseline REV` extracts `mtl_graph/` of that git revision (`git archive`) and runs the same steps with it on a
copy of the same pool, so before and after come from one run on one machine. Vectors are drawn at random (no
embedding) and written at the storage level, as bench_pool.py grows its pools; payloads are a real memory's, so a
line is as long as a real one. Steps: create a snapshot; read every point from the engine and do nothing with it
(`engine-read`: the floor under every step; after create, so both find the pool's pages read once); diff the
snapshot against the live pool (`current`); change 1% of the pool (delete 0.5%, rewrite the payload of 0.5%; not
timed); restore the snapshot (verify, safety snapshot, apply, read back what it wrote); change the same 1% again and
restore with `full_check` (the whole pool read again afterwards, as every restore did before). The last column is
the step's own peak RSS growth (VmHWM reset after opening the pool, Linux). `snapshot_rows(pool_dir, workdir)` gives
the rows for an existing pool (`make bench-scale`).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CODE_ENV = "MTL_SNAPSHOT_BENCH_CODE"
"""The directory holding the `mtl_graph` a step process imports (a baseline's extraction; this tree by default)."""
sys.path.insert(0, os.environ.get(CODE_ENV) or str(REPO))

STEPS = ("create", "engine-read", "diff", "change", "restore", "change", "restore-full")
TIMED = ("create", "engine-read", "diff", "restore", "restore-full")


def grow(pool: Any, n: int, seed: int = 7) -> list[str]:
    """n points of random unit vectors and a real memory's payload, written at the storage level."""
    from mtl_graph.memory.base import Provenance
    from mtl_graph.memory.engine.storage import StoredPoint
    from mtl_graph.memory.formats.insight import InsightMemory

    memory = InsightMemory(title="Run the tests after each edit", description="When a task changes code.",
                           content="Run the whole test suite after every edit; a green run is the only evidence.",
                           outcome="success", sources=[Provenance(domain="exercism", source_task_id="t1")])
    pool.add(memory)
    [template] = list(pool.store.scroll_points())
    pool.delete(memory.id)
    rng = np.random.default_rng(seed)
    ids = []
    for start in range(0, n, 2000):
        rows = rng.standard_normal((min(2000, n - start), len(template.dense)), dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        points = []
        for i, row in enumerate(rows.tolist()):
            point_id = str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | (start + i)))
            payload = json.loads(json.dumps(template.payload))
            payload["memory"]["id"] = point_id
            points.append(StoredPoint(point_id, row, template.sparse, payload))
            ids.append(point_id)
        pool.store.upsert(points)
    pool.store.optimize(wait=True)
    return ids


def engine_read(pool: Any, batch: int = 1024) -> int:
    """Every point whole straight from Qdrant Edge's scroll, each record's vectors, payload and id taken as Python
    objects once and nothing else done: the floor under any snapshot of the pool through qdrant-edge-py (the cyclic
    garbage collector paused, as snapshots pause it)."""
    from mtl_graph.memory.engine.storage import DENSE, SPARSE

    store = pool.store
    while hasattr(store, "inner"):  # the engine's own store under the pool's wrappers
        store = store.inner
    q, offset, seen = store._q, None, 0
    gc.disable()
    try:
        while True:
            records, offset = store.shard.scroll(q.ScrollRequest(offset=offset, limit=batch, with_payload=True,
                                                                 with_vector=[DENSE, SPARSE]))
            seen += len([(r.vector, r.payload, str(r.id)) for r in records])
            if offset is None or not records:
                return seen
    finally:
        gc.enable()


def _open(pool_dir: Path) -> Any:
    from mtl_graph.memory.engine.embeddings import local_embeddings
    from mtl_graph.memory.pool.pool import MemoryPool

    return MemoryPool.open(pool_dir, local_embeddings())


def _change(pool: Any) -> None:
    """Delete every 200th point and rewrite the payload of every 200th from the 100th (1% of the pool).

    No index build is asked for afterwards: a 1% tail is below the background build's threshold, and waiting for
    one (`optimize(wait=True)`) rebuilt the whole index of the copy, about 45 minutes at 1M."""
    ids = sorted(h.id for h in pool.store.scroll(4096))
    pool.store.delete(ids[::200])
    for point_id in ids[100::200]:
        pool.store.set_payload(point_id, {"status": "archived"})


def step(name: str, pool_dir: Path, snap_dir: Path) -> dict[str, Any]:
    """One step in this process: (points, wall s, CPU s, peak RSS after opening the pool and overall, in MiB)."""
    from mtl_graph.memory.engine.snapshots import archive

    with _open(pool_dir) as pool:
        count = pool.store.count()
        opened = _own_peak_kib() / 1024
        base = _reset_peak()
        wall, cpu = time.perf_counter(), time.process_time()
        if name == "engine-read":
            engine_read(pool)
        elif name == "create":
            archive.create_snapshot(pool, "s", snap_dir)
        elif name == "diff":
            archive.diff(archive.points_of(pool, "s", snap_dir), archive.points_of(pool, "current", snap_dir))
        elif name == "change":
            _change(pool)
        elif name == "restore":
            archive.restore_snapshot(pool, "s", snap_dir)
        elif name == "restore-full":  # the whole pool read again after the writes (a baseline's only way)
            full = "full_check" in inspect.signature(archive.restore_snapshot).parameters
            archive.restore_snapshot(pool, "s", snap_dir, **({"full_check": True} if full else {}))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        growth = _status_kib("VmHWM:") - base if base is not None else None
        peak = max(opened, _own_peak_kib() / 1024)
    return {"points": count, "wall": wall, "cpu": cpu, "opened_mib": opened, "peak_mib": peak,
            "growth_mib": None if growth is None else growth / 1024}


def _own_peak_kib() -> int:
    """This process's own peak RSS in KiB: VmHWM (Linux), which starts afresh at exec. `ru_maxrss` does not: a
    step started from a process of 8 GB (make bench-scale's, holding the exact-search matrix) reported 8 GB."""
    try:
        return _status_kib("VmHWM:")
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))


def _reset_peak() -> int | None:
    """The peak RSS (VmHWM) set back to the current RSS (Linux), so a step's own growth shows even below the peak
    that opening the pool (the embedding model) reached: that RSS in KiB, None where it cannot be reset."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return _status_kib("VmRSS:")
    except (OSError, StopIteration):
        return None


def _in_child(name: str, pool_dir: Path, snap_dir: Path, code: Path | None) -> dict[str, Any]:
    env = dict(os.environ, **({CODE_ENV: str(code)} if code else {}))
    done = subprocess.run([sys.executable, __file__, "--step", name, "--pool", str(pool_dir), "--snapshots",
                           str(snap_dir)], env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"step {name} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def snapshot_rows(pool_dir: str | Path, workdir: str | Path, code: dict[str, Path | None] | None = None
                  ) -> list[dict[str, Any]]:
    """Create, diff and restore timed on a copy of the pool at `pool_dir` per library in `code` (label ->
    directory holding its `mtl_graph`; None: this tree), each step in a fresh process and the libraries taking
    turns step by step (so a busy machine weighs on each alike): one row per step and label (points, wall, CPU,
    points/s, RSS after opening, peak RSS)."""
    code = code or {"this tree": None}
    works = {}
    for label in code:
        work = works[label] = Path(workdir) / label.replace(" ", "-")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        shutil.copytree(pool_dir, work / "pool", symlinks=True, ignore=shutil.ignore_patterns("snapshots"))
    rows = []
    for name in STEPS:
        for label, root in code.items():
            result = _in_child(name, works[label] / "pool", works[label] / "snapshots", root)
            if name in TIMED:
                rows.append({"code": label, "step": name, **result,
                             "per_s_wall": result["points"] / result["wall"],
                             "per_s_cpu": result["points"] / max(result["cpu"], 1e-9)})
    return rows


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def baseline(rev: str, into: Path) -> Path:
    """`mtl_graph/` as it was at git revision `rev`, extracted under `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "mtl_graph"], capture_output=True, check=True)
    with tarfile.open(fileobj=__import__("io").BytesIO(archive.stdout)) as tar:
        tar.extractall(into)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--baseline", help="a git revision whose library runs the same steps first")
    parser.add_argument("--step", choices=sorted(set(STEPS)), help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--snapshots", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(step(args.step, args.pool, args.snapshots)))
        return
    import qdrant_edge  # noqa: F401 (its version goes on the machine line)
    from importlib.metadata import version

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"qdrant-edge-py {version('qdrant-edge-py')}, orjson {version('orjson')}, numpy {np.__version__}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| points | code | step | wall s | CPU s | points/s (wall) | points/s (CPU) | RSS after open MiB | "
          "peak RSS MiB | peak growth in the step MiB |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="mtl-snapshot-bench-") as tmp:
        code: dict[str, Path | None] = {}
        if args.baseline:
            code[f"baseline {args.baseline}"] = baseline(args.baseline, Path(tmp) / "baseline")
        code["this tree"] = None
        for n in args.sizes:
            pool_dir = Path(tmp) / f"pool-{n}"
            with _open(pool_dir) as pool:
                started = time.perf_counter()
                grow(pool, n)
            print(f"  grew {n:,} points in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            for r in snapshot_rows(pool_dir, Path(tmp) / f"run-{n}", code):
                print(f"| {r['points']:,} | {r['code']} | {r['step']} | {r['wall']:.2f} | {r['cpu']:.2f} | "
                      f"{r['per_s_wall']:,.0f} | {r['per_s_cpu']:,.0f} | {r['opened_mib']:.0f} | "
                      f"{r['peak_mib']:.0f} | {_mib(r['growth_mib'])} |", flush=True)
            shutil.rmtree(pool_dir, ignore_errors=True)
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
