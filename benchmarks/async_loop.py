"""How much a run of the MTL graph under `astream` holds up its event loop (what a LangGraph server feels).

While one 20-step scripted task runs through `graph.astream(...)`, a ticker coroutine sleeps 5 ms at a time and
records how late it wakes up. Sync nodes run in LangGraph's worker threads, so the loop only waits for what runs in
it (LangGraph's own scheduling, routing, stream writes). The same run through sync `invoke` gives the wall-time
baseline. The model is scripted; the sandbox (bwrap when available) and the pool are real.

    python benchmarks/async_loop.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.memory.engine.embeddings import local_embeddings
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task

STEPS = 20
TASK = Task(id="bench-async", domain="bench", instruction="Create counter.txt with the numbers 1 to 18, one a line.",
            check="test $(wc -l < counter.txt) -eq 18")
TICK = 0.005


def script() -> list:
    return [AIMessage("Plan: append the numbers one at a time, count the lines, submit."),
            *(bash_call(f"echo {n} >> counter.txt") for n in range(1, STEPS - 1)), bash_call("wc -l counter.txt"),
            submit_call("done")]


async def lag_during(run) -> tuple[float, list[float]]:
    """Wall time of `run()` and the ticker's wake-up delays (seconds late) while it ran."""
    delays: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(TICK)
            delays.append(time.perf_counter() - start - TICK)

    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    await run()
    wall = time.perf_counter() - start
    done.set()
    await tick
    return wall, delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MemoryPool.open(Path(tmp) / "pool", local_embeddings()) as pool:
        pool.add(InsightMemory(title="Count the lines before submitting", description="When a file needs N lines.",
                               content="Verify with wc -l.", sources=[Provenance(domain="o", source_task_id="o1")]))
        pool.search("warm up", k=1)

        def graph():
            return build_mtl_graph(ScriptedChatModel(responses=script()), pool, top_k=1, online=False,
                                   run_log=Path(tmp) / "runs.jsonl")

        async def astream_once() -> None:
            async for _ in graph().astream({"task": TASK}, stream_mode=["updates", "custom"]):
                pass

        sync_walls, async_walls, delays = [], [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            graph().invoke({"task": TASK})
            sync_walls.append(time.perf_counter() - start)
            wall, late = asyncio.run(lag_during(astream_once))
            async_walls.append(wall)
            delays.extend(late)
    delays.sort()
    print(f"{args.runs} runs of a {STEPS}-step scripted task")
    print(f"invoke  wall: median {statistics.median(sync_walls):.2f} s")
    print(f"astream wall: median {statistics.median(async_walls):.2f} s")
    print(f"event loop, {len(delays)} ticks of {TICK * 1000:.0f} ms: late by median "
          f"{statistics.median(delays) * 1000:.2f} ms, p99 {delays[int(len(delays) * 0.99)] * 1000:.2f} ms, "
          f"max {delays[-1] * 1000:.2f} ms")


if __name__ == "__main__":
    main()
