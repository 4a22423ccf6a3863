"""`mtl mcp` as a client sees it: how long the server takes to answer `initialize`, and the latency of
search_memories, get_memory and feedback calls (p50 / p95), over stdio and over streamable HTTP, on a pool of N
insights (real embeddings, an embedded Qdrant Edge pool in a temporary directory).

Usage: python benchmarks/mcp_latency.py [--memories 300] [--calls 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
try:  # the SDK's current name; releases before it only have the older one
    from mcp.client.streamable_http import streamable_http_client as http_client  # noqa: E402
except ImportError:
    from mcp.client.streamable_http import streamablehttp_client as http_client  # noqa: E402

from mtl_graph.memory.base import Provenance  # noqa: E402
from mtl_graph.memory.formats.insight import InsightMemory  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402

TOPICS = ["tests", "builds", "imports", "types", "parsing", "timeouts", "caching", "paths", "encodings", "locks"]


def seed(path: Path, n: int) -> list[str]:
    memories = [InsightMemory(title=f"Lesson {i} on {TOPICS[i % len(TOPICS)]}",
                              description=f"When {TOPICS[i % len(TOPICS)]} go wrong in case {i}.",
                              content=f"Check the {TOPICS[i % len(TOPICS)]} first, variant {i}: read the error, "
                                      "reproduce it alone, then fix and rerun.",
                              sources=[Provenance(domain=f"repo-{i % 7}")]) for i in range(n)]
    with MemoryPool.open(path) as pool:
        pool.add_many(memories)
        pool.optimize()
    return [m.id for m in memories]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


async def measure(session: ClientSession, ids: list[str], calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"search_memories": [], "get_memory": [], "feedback": []}
    for i in range(calls):
        for name, args in [("search_memories", {"query": f"my {TOPICS[i % len(TOPICS)]} fail, case {i}"}),
                           ("get_memory", {"id": ids[i % len(ids)]}),
                           ("feedback", {"id": ids[i % len(ids)], "verdict": "helped", "run_id": f"bench-{i}"})]:
            start = time.perf_counter()
            result = await session.call_tool(name, args)
            out[name].append(time.perf_counter() - start)
            assert not result.isError, result.content[0].text
    return out


async def over_stdio(pool: Path, ids: list[str], calls: int) -> tuple[float, dict[str, list[float]]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mtl_graph.cli", "mcp", "--pool", str(pool)],
                                   env=env(), cwd=str(ROOT))
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ready = time.perf_counter() - start
        return ready, await measure(session, ids, calls)


async def over_http(url: str, ids: list[str], calls: int) -> dict[str, list[float]]:
    async with http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return await measure(session, ids, calls)


def http_server(pool: Path) -> tuple[subprocess.Popen, str, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mtl_graph.cli", "mcp", "--pool", str(pool), "--transport",
                             "http", "--port", str(port)], env=env(), cwd=ROOT, stderr=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}/mcp", time.perf_counter() - start
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("the HTTP server exited")
            time.sleep(0.1)


def row(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"| {name} | {statistics.median(ms):.1f} | {ms[max(0, int(len(ms) * 0.95) - 1)]:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pool = Path(tmp) / "pool"
        ids = seed(pool, args.memories)
        ready, stdio = asyncio.run(over_stdio(pool, ids, args.calls))
        proc, url, listening = http_server(pool)
        try:
            http = asyncio.run(over_http(url, ids, args.calls))
        finally:
            proc.terminate()
            proc.wait()
    print(f"{args.memories} memories, {args.calls} calls of each tool; stdio: initialize answered "
          f"{ready:.1f} s after the server started; http: listening after {listening:.1f} s\n")
    print("| call | p50 ms | p95 ms |\n|---|---|---|")
    for transport, found in (("stdio", stdio), ("http", http)):
        for name, values in found.items():
            print(row(f"{transport} {name}", values))


if __name__ == "__main__":
    main()
