"""The `mtl mcp` server as the MCP tests meet it: a seeded pool on disk, the command line that serves it, the
environment of that process, and an HTTP server in a process of its own on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from helpers.paths import ROOT

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool

LESSONS = [
    InsightMemory(title="Run the failing test alone first", description="When a test suite has failures.",
                  content="Run the one failing test with verbose output before editing any code.",
                  sources=[Provenance(domain="repo-a")]),
    InsightMemory(title="Pin build tool versions", description="When a build breaks after an upgrade.",
                  content="Pin the versions of the build tools and upgrade them one at a time.",
                  sources=[Provenance(domain="repo-b")]),
]
STARTUP_S = 90
"""Seconds a server process may take to start on a busy machine (imports, the embedding model)."""


def seed_pool(path: Path, embeddings, namespace: str = "default") -> Path:
    """A pool directory holding LESSONS, closed again (the server process opens it)."""
    with MemoryPool.open(path, embeddings, namespace=namespace) as pool:
        pool.add_many(LESSONS)
    return path


def server_args(pool: Path, *extra: str) -> list[str]:
    """`mtl mcp` as a client starts it: this interpreter, the module entry point, the pool."""
    return ["-m", "mtl_graph.cli", "mcp", "--pool", str(pool), *extra]


def server_env() -> dict[str, str]:
    """This process's environment (the tests' MTL_* isolation included) with the checkout on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "HF_HUB_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_server(pool: Path, *extra: str) -> Iterator[str]:
    """`mtl mcp --transport http` in a process of its own; yields its endpoint URL once it accepts connections."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, *server_args(pool, "--transport", "http", "--port", str(port),
                                                          *extra)],
                            env=server_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mtl mcp exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("mtl mcp --transport http did not start") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
