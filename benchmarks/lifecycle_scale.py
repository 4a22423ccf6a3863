"""Lifecycle at scale (issue 32 items 1-2): a reopened pool's first lifecycle search, and the lifecycle's cost per
search, at several pool sizes, in fresh processes, for this checkout and (optionally) another one side by side.

Each pool is built once (vectors drawn around a real-embedded base, as `make bench` does; a tenth of the pool
credited, ~3 runs each; indexed; one lifecycle search so the floor is calibrated), then each source tree measures it
in a fresh process: `MemoryPool.open`, the query model's first call (the same in every tree, reported apart),
the first lifecycle search, then the same searches with the lifecycle off and on, interleaved (p50 / p95 ms).

    python benchmarks/lifecycle_scale.py --sizes 2000,20000,55000
    mkdir ../mtl-base && git archive <commit> mtl_graph | tar -x -C ../mtl-base
    python benchmarks/lifecycle_scale.py --baseline-src ../mtl-base
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
K = 3


def build(n: int, data: Any, directory: Path, index: bool) -> dict[str, float]:
    import retrieval as rb

    from mtl_graph.memory.engine.embeddings import local_embeddings
    from mtl_graph.memory.lifecycle.policy import LifecycleConfig
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.memory.usage import Use

    rng = random.Random(n)
    ids = [m.id for m in data.memories[:n]]
    t0 = time.perf_counter()
    with MemoryPool.open(directory, local_embeddings()) as pool:
        rb.populate(pool, data, n)
        for r in range(n // 10 // K):
            shown = rng.sample(ids, K)
            pool.credit(f"history-{r}", [Use(i, j == 0) for j, i in enumerate(shown)],
                        "success" if rng.random() < 0.6 else "failure", "tests")
        if index:
            pool.optimize()
        for q in data.queries[:8]:  # the floor of each format searched, calibrated while the pool is open
            pool.retrieve(q.text, type=q.type, k=K, lifecycle=LifecycleConfig(), exclude_domains=[q.exclude_domain])
    return {"build_s": time.perf_counter() - t0}


def measure(directory: str, queries_file: str) -> dict[str, Any]:
    """Run in a fresh process with the source tree under test first on sys.path."""
    import numpy as np

    t0 = time.perf_counter()
    from mtl_graph.memory.engine.embeddings import local_embeddings
    from mtl_graph.memory.lifecycle.policy import LifecycleConfig
    from mtl_graph.memory.pool.pool import MemoryPool

    queries = json.loads(Path(queries_file).read_text())
    emb = local_embeddings()
    import_s = time.perf_counter() - t0
    t = time.perf_counter()
    pool = MemoryPool.open(directory, emb)
    open_s = time.perf_counter() - t
    t = time.perf_counter()
    pool.query_vector(queries[0]["text"])  # loads the query model: the same work in every tree
    model_s = time.perf_counter() - t
    cfg = LifecycleConfig()

    def search(q: dict[str, str], on: bool) -> Any:
        return pool.retrieve(q["text"], type=q["type"], k=K, lifecycle=cfg if on else None,
                             exclude_domains=[q["exclude_domain"]])

    t = time.perf_counter()
    search(queries[0], True)
    first_s = time.perf_counter() - t
    for q in queries:
        pool.query_vector(q["text"])
    times: dict[bool, list[float]] = {False: [], True: []}
    for i, q in enumerate(queries * 2):
        for on in ((False, True) if i % 2 else (True, False)):  # interleaved: a load spike hits both
            t = time.perf_counter()
            search(q, on)
            times[on].append((time.perf_counter() - t) * 1000)
    pool.close()
    pct = {f"{name}_{p}": float(np.percentile(times[on], p)) for name, on in (("off", False), ("on", True))
           for p in (50, 95)}
    return {"import_s": import_s, "open_s": open_s, "model_s": model_s, "first_search_s": first_s, **pct}


def in_fresh_process(src: Path, directory: Path, queries_file: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--measure", str(directory), "--queries-file", str(queries_file)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2, help="fresh processes per tree and size (the best is kept)")
    ap.add_argument("--baseline-src", type=Path, help="another checkout measured on the same pools, side by side")
    ap.add_argument("--no-index", action="store_true", help="leave the pools unindexed (faster to build)")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries_file)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import retrieval as rb

    from mtl_graph.memory.engine.embeddings import local_embeddings

    sizes = sorted(int(s) for s in args.sizes.split(","))
    data = rb.load_data(max(sizes), args.queries, 0, local_embeddings(), real_max=2000)
    trees = {"this": ROOT, **({"baseline": args.baseline_src.resolve()} if args.baseline_src else {})}
    print(f"# load {Path('/proc/loadavg').read_text().split()[:3]}, {os.cpu_count()} CPUs", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="mtl-bench-lifecycle-scale-") as tmp:
        queries_file = Path(tmp) / "queries.json"
        queries_file.write_text(json.dumps([{"text": q.text, "type": q.type, "exclude_domain": q.exclude_domain}
                                            for q in data.queries]))
        for n in sizes:
            directory = Path(tmp) / f"pool-{n}"
            built = build(n, data, directory, not args.no_index)
            for name, src in trees.items():
                runs = [in_fresh_process(src, directory, queries_file) for _ in range(args.rounds)]
                best = {k: min(r[k] for r in runs) for k in runs[0]}
                print(json.dumps({"size": n, "tree": name, **built, **{k: round(v, 4) for k, v in best.items()}}))
                sys.stdout.flush()
    print(f"# load {Path('/proc/loadavg').read_text().split()[:3]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
