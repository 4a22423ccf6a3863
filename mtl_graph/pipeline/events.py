"""Progress events of a run, sent through LangGraph's custom stream (`stream_mode="custom"`).

Every event is a JSON-friendly dict with a `kind`; Studio shows them as they happen, `mtl run` / `mtl demo` render
them with RichProgress. Kinds, in run order: plan, warning, retrieved (also `refresh: true` mid-run), step (one per
command), agent, verdict, distill_failed, reviewed (with `review_memories`), written, credited."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterable

from langgraph.config import get_stream_writer

from mtl_graph.redaction.redact import redact_value
from mtl_graph.core.trajectory import Step, Verdict
from mtl_graph.core.safe_text import safe_value


# The writer of the node that runs a nested graph (the execute subgraph, an agent's own graph): a parent streams
# a subgraph's custom events only with `subgraphs=True`, yet a run's commands are its own events.
_RELAY: ContextVar[Callable[[Any], None] | None] = ContextVar("mtl_events_relay", default=None)


def emit(kind: str, **fields: Any) -> None:
    """Send one event to the run's custom stream; a no-op when nothing streams (or outside a graph run).

    Events are redacted like the run log: commands, observations in errors and warnings carry what the agent typed,
    and a stream reaches Studio, LangSmith and a server's clients."""
    writer = _RELAY.get()
    if writer is None:
        try:
            writer = get_stream_writer()
        except RuntimeError:  # called outside a runnable context (e.g. an agent run directly, not in the graph)
            return
    writer(safe_value(redact_value({"kind": kind, **fields})))  # agent-made names may not be UTF-8 (core/safe_text.py)


@contextmanager
def relayed() -> Iterator[None]:
    """Events emitted inside the block (by nested graphs too) go to the current node's stream."""
    try:
        writer = _RELAY.get() or get_stream_writer()
    except RuntimeError:
        writer = None
    token = _RELAY.set(writer)
    try:
        yield
    finally:
        _RELAY.reset(token)


def warning(message: str) -> None:
    emit("warning", message=message)


def retrieved(records: list[dict[str, Any]], refresh: bool = False) -> None:
    """The memories a search returned (records of `retrieval.retrieved_record`), best first."""
    emit("retrieved", refresh=refresh, memories=[
        {"id": r["id"], "format": r["type"], "domains": r["domains"], "source_task_ids": r["source_task_ids"],
         "score": r["score"], "similarity": r["similarity"], "retriever": r["retriever"]} for r in records])


def step(s: Step) -> None:
    emit("step", tool=s.tool, command=s.action, exit_code=s.exit_code)


def agent_end(result: Any) -> None:
    """How the agent ended: exit status, steps, tokens, malformed replies, the provider's error."""
    emit("agent", exit_status=result.exit_status, steps=len(result.steps),
         tokens={"input": result.tokens.input, "output": result.tokens.output},
         malformed=result.format_errors, error=result.error)


def verdict(v: Verdict) -> None:
    emit("verdict", status=v.status.value, source=v.source, reason=v.reason, tests_modified=list(v.tests_modified),
         dropped=list(v.dropped), suspicions=list(v.suspicions))


def written(results: Iterable[Any]) -> None:
    """What `MemoryPool.add_many` did with each distilled memory (added, merged, identical; flagged reasons)."""
    emit("written", memories=[{"id": r.id, "status": r.status, "merged_into": r.merged_into,
                               "flagged": list(r.flagged)} for r in results])
