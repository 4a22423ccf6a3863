"""The largest workspace the fastest writers reach under a 32 MiB quota, per backend, polled and on its filesystem.

Each writer (one command, each trying to leave 512 MiB or more) runs in a fresh sandbox; the workspace is measured
while the sandbox is open (right after the command) and again on the disk once it closed (the files copied back
from the quota filesystem). Disk use counts each inode once (hard links share their blocks), like ``du``.

    sudo python benchmarks/bench_quota.py            # both backends, both ways of holding the quota
    python benchmarks/bench_quota.py --json out.json

As a user the filesystem cannot be mounted: those rows fall back to polling, and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mtl_graph.sandbox import SandboxConfig, make_sandbox  # noqa: E402
from mtl_graph.sandbox.tree import remove_tree, walk  # noqa: E402

QUOTA_MB = 32
MIB = 1 << 20
WRITERS = {
    "fallocate x3": "for i in 1 2 3; do fallocate -l 512M f$i; done",
    "dd bs=256M": "dd if=/dev/zero of=d bs=256M count=3 status=none",
    "16 parallel": "for i in $(seq 16); do head -c 64M /dev/zero > p$i & done; wait",
    "sparse made dense": "truncate -s 1G s && cp --sparse=never s dense",
    "python one write": "python3 -c \"open('w', 'wb').write(b'x' * (768 << 20))\"",
    "mmap pages": "python3 -c \"import mmap, os\nfd = os.open('m', os.O_RDWR | os.O_CREAT)\nos.ftruncate(fd, 768 << 20)\n"
                  "m = mmap.mmap(fd, 768 << 20)\nfor i in range(0, 768 << 20, 4096): m[i] = 1\nm.flush()\"",
    "hard links": "head -c 16M /dev/urandom > h && for i in $(seq 400); do ln h h$i; done",
    "reflinks": "head -c 16M /dev/urandom > r && for i in $(seq 40); do cp --reflink=auto r r$i; done",
    "many small files": "python3 -c \"import os\nfor i in range(300000): open(f'n{i}', 'w').close()\"",
}


def usage(path: Path) -> tuple[int, int]:
    """(bytes of disk, entries) below path, each inode's blocks once."""
    seen: set[tuple[int, int]] = set()
    total = entries = 0

    def add(_fd: int, _name: str, st: os.stat_result) -> None:
        nonlocal total, entries
        entries += 1
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk(fd, add)
    finally:
        os.close(fd)
    return total, entries


def measure(kind: str, filesystem: bool, command: str) -> dict:
    base = Path(tempfile.mkdtemp(prefix="mtl-bench-quota-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    ws = base / "ws"
    config = SandboxConfig(workspace_quota_mb=QUOTA_MB, workspace_filesystem=filesystem, timeout=120)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sandbox = make_sandbox(kind, ws, config)
        held = "filesystem" if sandbox.quota_filesystem is not None else f"polled ({sandbox.quota_polled_because})"
        start = time.monotonic()
        result = sandbox.run(command)
        seconds = time.monotonic() - start
        open_bytes, _ = usage(ws)
        sandbox.close()
        closed_bytes, entries = usage(ws)
        return {"held": held, "open_mib": open_bytes / MIB, "disk_mib": closed_bytes / MIB, "entries": entries,
                "exit": result.exit_code, "seconds": round(seconds, 2),
                "no_space": "No space left on device" in result.output, "tail": result.output[-160:]}
    finally:
        remove_tree(base)


def copy_cost(source: Path, kind: str) -> None:
    """Milliseconds to open a sandbox over a copy of source, run one command and close it, with the quota held by
    its filesystem (files copied in and back) and polled."""
    base = Path(tempfile.mkdtemp(prefix="mtl-bench-quota-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    ws = base / "ws"
    try:
        shutil.copytree(source, ws, symlinks=True)
        _, entries = usage(ws)
        for filesystem in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                sandbox = make_sandbox(kind, ws, SandboxConfig(workspace_filesystem=filesystem))
            t1 = time.perf_counter()
            sandbox.run("true")
            t2 = time.perf_counter()
            sandbox.close()
            t3 = time.perf_counter()
            print(f"{kind} workspace_filesystem={filesystem} entries={entries} open={1000 * (t1 - t0):.0f} ms "
                  f"first command={1000 * (t2 - t1):.0f} ms close={1000 * (t3 - t2):.0f} ms")
    finally:
        remove_tree(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default="bwrap,local")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--copy-cost", type=Path, metavar="DIR", help="time open and close over a copy of DIR instead")
    args = parser.parse_args()
    if args.copy_cost:
        for kind in args.kinds.split(","):
            copy_cost(args.copy_cost, kind)
        return
    rows = []
    print(f"| backend | quota held by | writer | largest workspace (MiB) open / on disk after | entries | exit | "
          f"ENOSPC seen |\n|---|---|---|---|---|---|---|")
    for kind in args.kinds.split(","):
        for filesystem in (False, True):
            for name, command in WRITERS.items():
                row = {"kind": kind, "writer": name, **measure(kind, filesystem, command)}
                rows.append(row)
                print(f"| {kind} | {row['held'][:40]} | {name} | {row['open_mib']:.1f} / {row['disk_mib']:.1f} | "
                      f"{row['entries']} | {row['exit']} | {row['no_space']} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
