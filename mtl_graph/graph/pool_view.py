"""A graph that searches and lists the memory pool, for LangGraph Studio.

A LangGraph server process holds an embedded pool's directory lock, so `mtl memories ...` in another process cannot
read it while the server runs; this graph reads it through the same process-wide handle the MTL graph uses
(`MemoryPool.open` returns the one open pool for a directory)."""

from __future__ import annotations

from itertools import islice
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import NotRequired, TypedDict

from mtl_graph.graph.support import open_default_pool
from mtl_graph.memory.models import Memory
from mtl_graph.memory.pool import MemoryPool, SearchHit


class PoolQuery(BaseModel):
    """What to show: a search when `query` is given, else a listing; every filter applies to both."""

    model_config = ConfigDict(extra="forbid")

    query: str = ""
    """Text to search for (a task, a plan, an error message); empty lists the pool instead."""
    format: Literal["insight", "summary", "workflow", "trajectory"] | None = None
    """Only memories of this format."""
    k: int = Field(default=10, ge=1, le=200)
    """How many hits (search) or memories (listing)."""
    exclude_domains: list[str] = Field(default_factory=list)
    """Leave out memories with a source in any of these domains."""
    outcome: Literal["success", "failure", "unknown"] | None = None
    """Only memories distilled from runs with this outcome."""
    include_flagged: bool = False
    """Also show memories write-time screening holds back from retrieval."""
    flagged_only: bool = False
    """List only the flagged memories (with their reasons)."""


class PoolViewInput(TypedDict):
    """The query fields (see PoolQuery); all optional."""

    query: NotRequired[str]
    format: NotRequired[str | None]
    k: NotRequired[int]
    exclude_domains: NotRequired[list[str]]
    outcome: NotRequired[str | None]
    include_flagged: NotRequired[bool]
    flagged_only: NotRequired[bool]


class PoolViewOutput(TypedDict):
    """Hits with provenance, scores and screening state; counts of the whole pool; or one error line."""

    hits: list[dict[str, Any]]
    stats: dict[str, Any]
    error: str | None


class PoolViewState(PoolViewInput, PoolViewOutput):
    """Input and output together."""


def memory_view(memory: Memory, hit: SearchHit | None = None) -> dict[str, Any]:
    """One memory as Studio shows it: what it says, where it came from, how it fared, whether it is held back."""
    scores = {"score": hit.score, "similarity": hit.similarity, "retriever": hit.retriever} if hit else {}
    return {"id": memory.id, "type": memory.type, "key": memory.key_text(), "outcome": memory.outcome.value,
            "domains": memory.domains, "source_task_ids": memory.source_task_ids,
            "sources": [s.model_dump(mode="json") for s in memory.sources], **scores,
            "stats": memory.stats.model_dump(mode="json"), "flagged": memory.flagged,
            "memory": memory.model_dump(mode="json")}


def _listing(pool: MemoryPool, q: PoolQuery) -> list[dict[str, Any]]:
    def wanted(m: Memory) -> bool:
        return ((q.format is None or m.type == q.format) and (q.outcome is None or m.outcome.value == q.outcome)
                and not set(m.domains) & set(q.exclude_domains)
                and (bool(m.flagged) if q.flagged_only else q.include_flagged or not m.flagged))

    return [memory_view(m) for m in islice(filter(wanted, pool), q.k)]


def view_pool(pool: MemoryPool, fields: dict[str, Any]) -> PoolViewOutput:
    """Search or list `pool` as asked by `fields` (PoolQuery's fields); bad input is one error line, not a raise."""
    try:
        q = PoolQuery.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        return {"hits": [], "stats": {}, "error": f"invalid {where}: {first['msg']}"}
    try:
        if q.query.strip() and not q.flagged_only:
            found = pool.search(q.query, type=q.format, k=q.k, exclude_domains=q.exclude_domains,
                                outcome=q.outcome, include_flagged=q.include_flagged)
            hits = [memory_view(h.memory, h) for h in found]
        else:
            hits = _listing(pool, q)
        stats = {"total": pool.count(), **pool.stats(), "flagged": len(pool.flagged())}
    except Exception as exc:  # an unreadable pool is reported to the viewer, not raised into the server's log
        return {"hits": [], "stats": {}, "error": f"{type(exc).__name__}: {exc}"}
    return {"hits": hits, "stats": stats, "error": None}


def build_pool_view(pool: MemoryPool | None = None) -> Any:
    """A one-node graph: PoolViewInput -> PoolViewOutput. `pool=None` opens MTL_POOL on the first run."""
    opened: list[MemoryPool] = [pool] if pool is not None else []

    def view(state: PoolViewState) -> dict[str, Any]:
        """Search (when a query is given) or list the pool, with its counts."""
        if not opened:
            try:
                opened.append(open_default_pool())
            except Exception as exc:
                return {"hits": [], "stats": {}, "error": f"pool could not be opened: {exc}"}
        # only the query fields: on a reused thread (Studio) the state also holds the previous run's hits
        return dict(view_pool(opened[0], {name: state.get(name) for name in PoolQuery.model_fields}))

    graph = StateGraph(PoolViewState, input_schema=PoolViewInput, output_schema=PoolViewOutput)
    graph.add_node("view", view)
    graph.add_edge(START, "view")
    graph.add_edge("view", END)
    return graph.compile(name="mtl_pool_view")
