"""What memory transfer costs someone else's agent: one 20-step scripted task run by a plain `create_agent` agent
with `sandbox_tools()`, alone vs through `with_memory_transfer` vs with `MemoryTransferMiddleware`.

    .venv/bin/python benchmarks/bench_wrap.py [--runs 5] [--pool 2000] [--sandbox bwrap]

The model is scripted (zero latency, real tool calls), the sandbox and the pool are real, so the differences are
the wrapper's own costs: planning, retrieval, setup, the judge's test run, distillation, write back, LangGraph."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call  # noqa: E402
from mtl_graph.agent.tools import sandbox_tools  # noqa: E402
from mtl_graph.pipeline import MemoryTransferMiddleware, with_memory_transfer  # noqa: E402
from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.sandbox.factory import make_sandbox  # noqa: E402
from mtl_graph.core.task import Task  # noqa: E402

STEPS = 20
PLAN = ("Plan: create counter.txt and append the numbers one command at a time, inspect the file as it grows, "
        "then count its lines to verify there are nineteen before answering.")
INSIGHT = {"title": "Count the lines of a generated file before answering",
           "description": "When a task asks for a file with an exact number of lines.",
           "content": "Append one line per step, then verify the count with wc -l before you answer."}


def task(run: int) -> Task:
    return Task(id=f"bench-wrap-{run}", domain="bench", check=f"test $(wc -l < counter.txt) -eq {STEPS - 1}",
                instruction=f"Write counter.txt holding the numbers 1 to {STEPS - 1}, one per line (run {run}).")


def agent_model() -> ScriptedChatModel:
    steps = [bash_call(f"echo {i} >> counter.txt") for i in range(1, STEPS)] + [bash_call("wc -l counter.txt")]
    return ScriptedChatModel(responses=[*steps, AIMessage("counter.txt written and checked")])


def helper_model() -> ScriptedChatModel:
    draft = AIMessage("", tool_calls=[{"name": "InsightDraft", "args": INSIGHT, "id": "draft-1"}])
    return ScriptedChatModel(responses=[AIMessage(PLAN), draft])


def alone(run: int, kind: str) -> float:
    workspace = Path(tempfile.mkdtemp(prefix="mtl-bench-wrap-"))
    start = time.perf_counter()
    task(run).materialize(workspace)
    sandbox = make_sandbox(kind, workspace)
    try:
        out = create_agent(agent_model(), tools=sandbox_tools(sandbox)).invoke(
            {"messages": [HumanMessage(task(run).instruction)]}, {"recursion_limit": 100})
    finally:
        sandbox.close()
    elapsed = time.perf_counter() - start
    assert sum(m.type == "tool" for m in out["messages"]) == STEPS
    return elapsed


def wrapped(pool: MemoryPool, run: int, kind: str, log: Path) -> float:
    graph = with_memory_transfer(create_agent(agent_model(), tools=sandbox_tools()), pool, model=helper_model(),
                                 sandbox=kind, distill_formats=["insight", "trajectory"], run_log=log)
    start = time.perf_counter()
    state = graph.invoke({"task": task(run)}, {"recursion_limit": 100})
    elapsed = time.perf_counter() - start
    _passed(state)
    return elapsed


def middleware(pool: MemoryPool, run: int, kind: str, log: Path) -> float:
    mtl = MemoryTransferMiddleware(pool, model=helper_model(), sandbox=kind,
                                   distill_formats=["insight", "trajectory"], run_log=log)
    agent = create_agent(agent_model(), tools=sandbox_tools(), middleware=[mtl])
    start = time.perf_counter()
    out = agent.invoke({"messages": [HumanMessage(task(run).instruction)], "mtl_task": task(run)},
                       {"recursion_limit": 100})
    elapsed = time.perf_counter() - start
    _passed(out["mtl"])
    return elapsed


def _passed(run: dict[str, Any]) -> None:
    if run.get("error") or (run.get("verdict") or {}).get("status") != "pass":
        raise RuntimeError(f"the benchmark task did not pass: {run.get('error') or run.get('verdict')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each variant (medians are shown)")
    parser.add_argument("--pool", type=int, default=2000, help="memories in the pool")
    parser.add_argument("--sandbox", default="bwrap", help="sandbox backend: bwrap, local or auto")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mtl-bench-wrap-"))
    times: dict[str, list[float]] = {"alone": [], "with_memory_transfer": [], "middleware": []}
    with MemoryPool.open(root / "pool", local_embeddings()) as pool:
        pool.add_many(corpus.memories(args.pool, offset=30_000_000))
        alone(0, args.sandbox), wrapped(pool, 0, args.sandbox, root / "warm.jsonl")  # imports, templates
        middleware(pool, 0, args.sandbox, root / "warm.jsonl")
        for run in range(1, args.runs + 1):  # interleaved, so a load spike hits every variant alike
            times["alone"].append(alone(run, args.sandbox))
            times["with_memory_transfer"].append(wrapped(pool, run, args.sandbox, root / "runs.jsonl"))
            times["middleware"].append(middleware(pool, run, args.sandbox, root / "runs.jsonl"))
    base = statistics.median(times["alone"])
    print(f"| {STEPS}-step scripted task, {args.sandbox} sandbox, pool {args.pool} | median s | × alone |")
    print("|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {statistics.median(values) / base:.2f} |")


if __name__ == "__main__":
    main()
