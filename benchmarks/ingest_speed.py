"""Ingest and writes at the speed of their parts: add_many with vectors given, and `mtl ingest` in MB/s of log text.

    python benchmarks/ingest_speed.py writes [--pool 10000] [--batch 100] [--new 2000] [--baseline REV] [--repeat 1]
    python benchmarks/ingest_speed.py ingest LOG_DIR_OR_FILE [...] [--concurrency 2]

writes: a pool of --pool memories (benchmarks/corpus.py), then --new new memories added in batches of --batch,
vectors given (an embeddings object that hands out fixed vectors, so no model runs), then the same memories
added again (every one identical: nothing new to embed or store). Prints memories/s (wall, and per CPU second of
the process) and each phase's share of the CPU time: redaction, screening, the dedup lookup, storing (the upsert
with its statistics), supersession, and the rest (measured around those calls in the same run). Each measurement
runs in a fresh process on a copy of one pool; `--baseline REV` runs it with `mtl_graph/` of that git revision
too, alternating with this tree `--repeat` times, so before and after come from one run on one machine.

ingest: the logs ingested as trajectory memories (no model needed) into a fresh in-memory pool with the real
local embedder; prints MB/s of log text over the whole ingest and over everything but the embedder's own time
("before embedding"), memories/s, and the time of each phase (load, redact, screen, embed, the rest of the
store), then the same logs ingested again without the ledger (every memory already stored: what the embedder
is still asked to do). Real public runs are best; benchmarks/ingest_corpus.py writes a large corpus shaped like them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from langchain_core.embeddings import Embeddings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import corpus  # noqa: E402

from mtl_graph.importers.ingest import IngestConfig, Ledger, ingest  # noqa: E402
from mtl_graph.memory.base import MemoryType  # noqa: E402
from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402


class GivenVectors(Embeddings):
    """Fixed unit vectors drawn from each text's hash: the vectors of a pool whose writer already embedded them."""

    model_name = "given-vectors"

    def __init__(self, dim: int = 384) -> None:
        self.dim, self.calls, self.texts = dim, 0, 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls, self.texts = self.calls + 1, self.texts + len(texts)
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class Phases:
    """Seconds spent inside chosen functions (wrapped for the run), summed over every thread: wall time, and the
    process's CPU time over the same spans (exact with one worker: what the phase costs on an idle core, however
    loaded the machine is)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._depth = threading.local()

    @contextmanager
    def patched(self, targets: dict[str, tuple[Any, str]]) -> Iterator[None]:
        saved = []
        for name, (owner, attr) in targets.items():
            original = getattr(owner, attr)
            saved.append((owner, attr, original))
            setattr(owner, attr, self._timed(name, original))
        try:
            yield
        finally:
            for owner, attr, original in reversed(saved):
                setattr(owner, attr, original)

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            active = getattr(self._depth, name, 0)  # a phase that calls itself counts once
            setattr(self._depth, name, active + 1)
            t, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(self._depth, name, active)
                if not active:
                    self.seconds[name] += time.perf_counter() - t
                    self.cpu[name] += time.process_time() - c
                    self.calls[name] += 1
        return timed


def _phase_targets() -> dict[str, tuple[Any, str]]:
    from mtl_graph.importers import loading
    from mtl_graph.memory.pool import pool as pool_module
    from mtl_graph.redaction.redact import Redactor
    from mtl_graph.memory.engine.embeddings import LocalEmbeddings

    from mtl_graph.importers import ingest as ingest_module

    return {"load": (ingest_module, "load_many"), "redact": (Redactor, "redact"),
            "screen": (pool_module, "screen_many"), "embed": (LocalEmbeddings, "embed_documents")}


WRITE_PHASES = ("redact", "screen", "lookup", "store", "supersede")


def _write_targets() -> dict[str, tuple[Any, str]]:
    from mtl_graph.memory.pool import pool as pool_module
    from mtl_graph.redaction.redact import Redactor

    return {"redact": (Redactor, "redact"), "screen": (pool_module, "screen_many"),
            "lookup": (MemoryPool, "_stored_like"), "store": (MemoryPool, "_write_plan"),
            "supersede": (MemoryPool, "_supersede")}


def write_step(pool_dir: Path, new_count: int, batch: int) -> dict[str, Any]:
    """In this process: the new memories added to the pool at pool_dir, then added again; rates and phase shares."""
    given = GivenVectors()
    new = corpus.memories(new_count, offset=50_000_000)
    rows = {}
    with MemoryPool.open(pool_dir, given, engine="edge") as pool:
        phases = Phases()
        for label, items in (("new", new), ("again", new)):
            embedded, cpu_before = given.texts, dict(phases.cpu)
            statuses: dict[str, int] = defaultdict(int)
            with phases.patched(_write_targets()):
                t0, c0 = time.perf_counter(), time.process_time()
                for start in range(0, len(items), batch):
                    for r in pool.add_many(items[start:start + batch]):
                        statuses[r.status] += 1
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            shares = {k: (phases.cpu[k] - cpu_before.get(k, 0.0)) / cpu for k in WRITE_PHASES}
            rows[label] = {"wall_per_s": len(items) / dt, "cpu_per_s": len(items) / cpu, "shares": shares,
                           "embedded": given.texts - embedded, "statuses": dict(statuses)}
    return rows


def writes(args: argparse.Namespace) -> None:
    if args.step:
        print(json.dumps(write_step(args.pool_dir, args.new, args.batch)))
        return
    with tempfile.TemporaryDirectory(prefix="mtl-writes-bench-") as tmp:
        base = corpus.memories(args.pool)
        built = Path(tmp) / "pool"
        with MemoryPool.open(built, GivenVectors(), engine="edge") as pool:
            for start in range(0, len(base), 1000):
                pool.add_many(base[start:start + 1000])
            pool.optimize()
        code = {"this tree": ROOT}
        if args.baseline:
            code = {f"baseline {args.baseline}": baseline_tree(args.baseline, Path(tmp) / "baseline"), **code}
        print(f"writes, vectors given, batches of {args.batch} into a {args.pool:,}-memory pool "
              f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start):")
        print("| code | added | memories/s wall | per CPU s | " + " | ".join(WRITE_PHASES) + " | rest | embedded |")
        print("|---|---|---:|---:|" + "---:|" * (len(WRITE_PHASES) + 2))
        for _ in range(args.repeat):
            for label, tree in code.items():
                copy = Path(tmp) / "copy"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(built, copy, symlinks=True)
                out = subprocess.run([sys.executable, __file__, "writes", "--step", "--pool-dir", str(copy),
                                      "--new", str(args.new), "--batch", str(args.batch)],
                                     env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
                if out.returncode:
                    raise SystemExit(out.stderr)
                for added, row in json.loads(out.stdout.splitlines()[-1]).items():
                    shares = row["shares"]
                    print(f"| {label} | {added} {row['statuses']} | {row['wall_per_s']:,.0f} | "
                          f"{row['cpu_per_s']:,.0f} | " + " | ".join(f"{shares[k]:.0%}" for k in WRITE_PHASES)
                          + f" | {1 - sum(shares.values()):.0%} | {row['embedded']:,} |", flush=True)
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def baseline_tree(rev: str, into: Path) -> Path:
    """`mtl_graph/` as it was at git revision `rev`, extracted under `into` (a directory to put on PYTHONPATH)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "mtl_graph"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into)
    return into


def ingest_logs(args: argparse.Namespace) -> None:
    from mtl_graph.importers import iter_log_files

    size = sum(p.stat().st_size for p in iter_log_files(args.paths))
    phases = Phases()
    emb = local_embeddings()
    emb.embed_documents(["warm up"])
    with MemoryPool.open(":memory:", emb) as pool, phases.patched(_phase_targets()):
        t0, c0 = time.perf_counter(), time.process_time()
        report = ingest(args.paths, pool, None, IngestConfig(formats=[MemoryType.TRAJECTORY],
                                                             concurrency=args.concurrency))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        memories = len(pool)
        first_wall, first_cpu = dict(phases.seconds), dict(phases.cpu)  # the first ingest's phases
        # the same logs again without the ledger: every run distilled again, every memory already stored
        calls, t1, c1 = phases.calls["embed"], time.perf_counter(), time.process_time()
        again = ingest(args.paths, pool, None, IngestConfig(formats=[MemoryType.TRAJECTORY],
                                                            concurrency=args.concurrency), ledger=Ledger(None))
        again_wall, again_cpu = time.perf_counter() - t1, time.process_time() - c1
        again_calls = phases.calls["embed"] - calls
    mb = size / 2**20
    before_embedding, cpu_before_embedding = wall - first_wall["embed"], cpu - first_cpu["embed"]
    print(f"ingest of {len(report.runs)} runs, {mb:.1f} MB of logs, {memories} memories "
          f"(load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs, concurrency {args.concurrency}):")
    print(f"  wall {wall:.1f} s: {mb / wall:.2f} MB/s, {memories / wall:.1f} memories/s; "
          f"before embedding ({before_embedding:.1f} s): {mb / before_embedding:.2f} MB/s")
    print(f"  CPU {cpu:.1f} s: {mb / cpu:.2f} MB per CPU second; before embedding ({cpu_before_embedding:.1f} s): "
          f"{mb / cpu_before_embedding:.2f} MB per CPU second")
    print("  phase CPU seconds (wall): " + ", ".join(
        f"{k} {first_cpu.get(k, 0.0):.1f} ({first_wall.get(k, 0.0):.1f})" for k in ("load", "redact", "screen", "embed")))
    print(f"  pool: {report.written()}")
    print(f"  again, no ledger: wall {again_wall:.1f} s, CPU {again_cpu:.1f} s, embedder calls {again_calls}; "
          f"pool: {again.written()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("writes")
    w.add_argument("--pool", type=int, default=10_000)
    w.add_argument("--batch", type=int, default=100)
    w.add_argument("--new", type=int, default=2_000)
    w.add_argument("--baseline", help="a git revision whose library runs the same steps too")
    w.add_argument("--repeat", type=int, default=1, help="measurements of each code, alternating")
    w.add_argument("--step", action="store_true", help=argparse.SUPPRESS)
    w.add_argument("--pool-dir", type=Path, help=argparse.SUPPRESS)
    i = sub.add_parser("ingest")
    i.add_argument("paths", nargs="+", type=Path)
    i.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    (writes if args.what == "writes" else ingest_logs)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
