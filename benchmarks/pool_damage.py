"""Damage table: what opening, `mtl pool check` and `--repair` do with a pool damaged the ways a crash, a disk or
a user damages one.

For each engine it writes a 30-memory pool (six batches of five, real local embedder), then for each damage on a
fresh copy: opens it (the result or the error), checks it (recorded / engine count / readable / unreadable /
lost) and repairs it (rebuilt / lost), and opens the repaired pool.

Usage: python benchmarks/pool_damage.py [--markdown FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Callable

warnings.filterwarnings("ignore")


def _each(path: Path, pattern: str) -> list[Path]:
    return sorted(path.glob(pattern))


def _xor(file: Path, length: int = 8192) -> None:
    with open(file, "r+b") as fh:
        data = fh.read(length)
        fh.seek(0)
        fh.write(bytes(b ^ 0x5A for b in data))


def _sqlite(path: Path) -> Path:
    return path / "client" / "collection" / "mtl_memories" / "storage.sqlite"


def _garble_row(path: Path) -> None:
    with sqlite3.connect(_sqlite(path)) as con:
        con.execute("UPDATE points SET point = x'00' WHERE rowid = (SELECT rowid FROM points LIMIT 1 OFFSET 7)")
    con.close()


BOTH: dict[str, Callable[[Path], None]] = {
    "pool.json deleted, opened with the other engine": lambda p: (p / "pool.json").unlink(),
    "engine directory deleted, pool.json kept": lambda p: shutil.rmtree(p / ("edge" if (p / "edge").exists() else "client")),
}
EDGE: dict[str, Callable[[Path], None]] = {
    "segments/ deleted": lambda p: [shutil.rmtree(s) for s in _each(p, "edge/segments/*")],
    "id tracker deleted": lambda p: [f.unlink() for f in _each(p, "edge/segments/*/mutable_id_tracker.*")],
    "id tracker truncated": lambda p: [os.truncate(f, 0) for f in _each(p, "edge/segments/*/mutable_id_tracker.mappings")],
    "WAL truncated to 0 bytes": lambda p: os.truncate(p / "edge" / "wal" / "open-1", 0),
    "payload page corrupted (8 KB)": lambda p: [_xor(f) for f in _each(p, "edge/segments/*/payload_storage/page_0.dat")],
    "dense vectors truncated": lambda p: [os.truncate(f, 1000) for f in _each(p, "edge/segments/*/vector_storage-dense/vectors/chunk_0.mmap")],
    "dense vector storage deleted": lambda p: [shutil.rmtree(d) for d in _each(p, "edge/segments/*/vector_storage-dense")],
}
CLIENT: dict[str, Callable[[Path], None]] = {
    "storage.sqlite deleted": lambda p: _sqlite(p).unlink(),
    "storage.sqlite truncated to half": lambda p: os.truncate(_sqlite(p), _sqlite(p).stat().st_size // 2),
    "one sqlite row corrupted": _garble_row,
}


def build(path: Path, engine: str, embeddings) -> None:  # type: ignore[no-untyped-def]
    from mtl_graph.memory.formats.insight import InsightMemory
    from mtl_graph.memory.pool.pool import MemoryPool

    memories = [InsightMemory(title=f"Lesson {i} on topic {i * 7}", description=f"Check case {i} after each edit.",
                              content=f"Case {i}.") for i in range(30)]
    with MemoryPool.open(path, embeddings, engine=engine) as pool:
        for start in range(0, 30, 5):
            pool.add_many(memories[start:start + 5])


def row(base: Path, engine: str, name: str, damage: Callable[[Path], None], embeddings) -> list[str]:  # type: ignore[no-untyped-def]
    from mtl_graph.memory.engine.check import check_pool, copy_tree_sparse
    from mtl_graph.memory.pool.pool import MemoryPool, PoolError

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pool"
        copy_tree_sparse(base, path)
        damage(path)
        other = "client" if engine == "edge" else "edge"
        try:
            with MemoryPool.open(path, embeddings, engine=other) as pool:
                opened = f"opens, {pool.count()} memories"
        except PoolError as exc:
            opened = "PoolError: " + str(exc).replace(str(path), "POOL")[:90] + "..."
        report = check_pool(path, embeddings, repair=True)
        checked = (f"{report.recorded}/{report.engine_count}/{report.readable}/{len(report.unreadable)}/"
                   f"{report.lost}")
        repaired = "-" if report.repaired is None else f"{report.repaired['rebuilt']} / {report.repaired['lost']}"
        with MemoryPool.open(path, embeddings) as pool:
            after = str(pool.count())
    return [engine, name, opened, checked, repaired, after]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, help="Also write the table to this file.")
    args = parser.parse_args()
    from mtl_graph.memory.engine.embeddings import local_embeddings

    embeddings = local_embeddings()
    header = ["engine", "damage", "open (with the other engine asked for)",
              "check: recorded/engine/readable/unreadable/lost", "repair: rebuilt / lost", "opens after repair"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine, damages in (("edge", {**BOTH, **EDGE}), ("client", {**BOTH, **CLIENT})):
            base = Path(tmp) / engine
            build(base, engine, embeddings)
            rows += [row(base, engine, name, damage, embeddings) for name, damage in damages.items()]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
