"""What the MTL graph costs an agent: one 20-step scripted task through the graph vs the same agent alone (both run
the same create_agent loop; in the graph it is the execute subgraph, one super-step per model call and per
command), the SQLite checkpointer per agent step, and the tokens the top-3 memories add to the system prompt.

The model is scripted (zero latency, real tool calls), the sandbox and the pool are real, so the differences are
the graph's own costs: planning, retrieval, the judge's test run, distillation, write back and LangGraph."""

from __future__ import annotations

import gc
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402

from mtl_graph.agent import DefaultAgent

from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call  # noqa: E402
from mtl_graph.judging.ground_truth import run_setup  # noqa: E402
from mtl_graph.pipeline import build_mtl_graph  # noqa: E402
from mtl_graph.pipeline.prompting import memory_block  # noqa: E402
from mtl_graph.memory.engine.embeddings import local_embeddings  # noqa: E402
from mtl_graph.memory.pool.pool import MemoryPool  # noqa: E402
from mtl_graph.sandbox.factory import make_sandbox  # noqa: E402
from mtl_graph.core.task import Task  # noqa: E402

STEPS = 20
LINES = STEPS - 2  # 18 appends, one wc -l, one submit
PLAN = ("Plan: create counter.txt and append the numbers one command at a time, inspect the file as it grows, "
        "then count its lines to verify there are twenty before submitting.")
INSIGHT = {"title": "Count the lines of a generated file before submitting",
           "description": "When a task asks for a file with an exact number of lines.",
           "content": "Append one line per step, then verify the count with wc -l before you submit."}


def task(run: int) -> Task:
    return Task(id=f"bench-counter-{run}", domain="bench",
                instruction=f"Write counter.txt holding the numbers 1 to {LINES}, one per line (run {run}).",
                check=f"test $(wc -l < counter.txt) -eq {LINES}")


def actions() -> list[AIMessage]:
    steps = [bash_call(f"echo {i} >> counter.txt") for i in range(1, LINES + 1)] + [bash_call("wc -l counter.txt")]
    return [*steps, submit_call("counter.txt written and checked")]


def graph_model() -> ScriptedChatModel:
    draft = AIMessage("", tool_calls=[{"name": "InsightDraft", "args": INSIGHT, "id": "draft-1"}])
    return ScriptedChatModel(responses=[AIMessage(PLAN), *actions(), draft])


def agent_alone(run: int, sandbox_kind: str) -> float:
    t = task(run)
    workspace = Path(tempfile.mkdtemp(prefix="mtl-bench-agent-"))
    gc.collect()  # a full collection of this big process (~130 ms) must not land inside one timed run
    start = time.perf_counter()
    t.materialize(workspace)
    sandbox = make_sandbox(sandbox_kind, workspace)
    try:
        run_setup(t, sandbox)
        result = DefaultAgent().run(t, sandbox, ScriptedChatModel(responses=actions()))
    finally:
        sandbox.close()
    elapsed = time.perf_counter() - start
    assert len(result.steps) == STEPS, f"the scripted agent took {len(result.steps)} steps"
    return elapsed


def through_graph(pool: MemoryPool, run: int, sandbox_kind: str, log: Path, checkpointer: Any = None
                  ) -> tuple[float, dict[str, float]]:
    graph = build_mtl_graph(graph_model(), pool, memory_type="insight", top_k=3, sandbox=sandbox_kind,
                            distill_formats=["insight", "trajectory"], run_log=log, checkpointer=checkpointer)
    config = {"configurable": {"thread_id": f"bench-{run}"}} if checkpointer is not None else None
    gc.collect()
    start = time.perf_counter()
    state = graph.invoke({"task": task(run)}, config=config)
    elapsed = time.perf_counter() - start
    if state.get("error") or (state.get("verdict") or {}).get("status") != "pass":
        raise RuntimeError(f"the benchmark task did not pass through the graph: {state.get('error') or state.get('verdict')}")
    return elapsed, dict(state.get("timings", {}))


def token_counts(pool: MemoryPool) -> dict[str, int]:
    """Word pieces (the bundled BERT tokenizer, close to an LLM's token count for English) of the memory block
    that the top-3 memories of each format add to the system prompt."""
    tokenizer = local_embeddings()._tokenizer
    counts = {}
    for fmt in ("insight", "workflow", "summary", "trajectory"):
        hits = pool.search(PLAN, type=fmt, k=3)
        if not hits:
            continue
        block = memory_block([h.memory for h in hits])
        tokenizer.no_truncation()
        counts[fmt] = len(tokenizer.encode(block).ids)
        tokenizer.enable_truncation(local_embeddings().config.max_tokens)
        counts[f"{fmt}_memories"] = len(hits)
    return counts


def timed_saver(conn: sqlite3.Connection) -> Any:
    """A SqliteSaver that adds up the time spent writing checkpoints (the graph's difference in wall time is too
    small to see through a busy machine's noise)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class TimedSaver(SqliteSaver):
        spent = 0.0
        writes = 0

        def put(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return super().put(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start
                self.writes += 1

        def put_writes(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return super().put_writes(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start

    return TimedSaver(conn)


def run(args: Any) -> dict[str, Any]:
    kind = args.sandbox
    root = Path(tempfile.mkdtemp(prefix="mtl-bench-graph-"))
    out: dict[str, Any] = {"sandbox": kind, "steps": STEPS}
    with MemoryPool.open(root / "pool", local_embeddings()) as pool:
        pool.add_many(corpus.memories(args.graph_pool, offset=20_000_000))
        through_graph(pool, 0, kind, root / "warm.jsonl")  # first runs pay imports and template loading
        agent_alone(0, kind)
        alone, graph, saved, timings, checkpoint_ms, step_ms = [], [], [], [], [], []
        saved_wal, wal_step_ms = [], []
        for run in range(1, args.graph_runs + 1):  # interleaved, so a load spike hits every variant alike
            alone.append(agent_alone(run, kind))
            elapsed, node_times = through_graph(pool, run, kind, root / "runs.jsonl")
            graph.append(elapsed)
            timings.append(node_times)
            conn = sqlite3.connect(str(root / f"checkpoints-{run}.sqlite"), check_same_thread=False)
            saver = timed_saver(conn)
            saved.append(through_graph(pool, 100 + run, kind, root / "runs.jsonl", checkpointer=saver)[0])
            out["checkpoints_per_run"] = saver.writes
            checkpoint_ms.append(saver.spent / max(1, saver.writes) * 1000)
            step_ms.append(saver.spent / STEPS * 1000)
            conn.close()
            # The same in WAL mode: a killed process still loses nothing (only a power cut could lose the last
            # commits), and a commit no longer waits for the disk.
            conn = sqlite3.connect(str(root / f"checkpoints-wal-{run}.sqlite"), check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            saver = timed_saver(conn)
            saved_wal.append(through_graph(pool, 200 + run, kind, root / "runs.jsonl", checkpointer=saver)[0])
            wal_step_ms.append(saver.spent / STEPS * 1000)
            conn.close()
        out["alone_s"] = statistics.median(alone)
        out["graph_s"] = statistics.median(graph)
        out["sqlite_s"] = statistics.median(saved)
        out["checkpoint_ms"] = statistics.median(checkpoint_ms)
        out["checkpoint_per_step_ms"] = statistics.median(step_ms)
        out["sqlite_wal_s"] = statistics.median(saved_wal)
        out["checkpoint_per_step_wal_ms"] = statistics.median(wal_step_ms)
        out["nodes_s"] = {k: statistics.median(t.get(k, 0.0) for t in timings) for k in timings[0]}
        out["tokens"] = token_counts(pool)
    return out
