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

from mtl_graph.pipeline.services import open_default_pool
from mtl_graph.memory.formats import FormatName
from mtl_graph.memory.lifecycle.policy import LifecycleConfig, evidence, utility
from mtl_graph.memory.base import Memory
from mtl_graph.memory.pool.pool import MemoryPool, SearchHit

Status = Literal["active", "stale", "flagged", "quarantined", "superseded", "archived"]


class PoolQuery(BaseModel):
    """What to show: a search when `query` is given, else a listing; every filter applies to both."""

    model_config = ConfigDict(extra="forbid")

    query: str = ""
    """Text to search for (a task, a plan, an error message); empty lists the pool instead."""
    format: FormatName | None = None
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
    status: Status | None = None
    """Only memories with this status: active, flagged, quarantined or archived (flagged_only wins over it);
    None: all but the archived ones (and the flagged ones unless include_flagged)."""


class PoolViewInput(TypedDict):
    """The query fields (see PoolQuery); all optional."""

    query: NotRequired[str]
    format: NotRequired[str | None]
    k: NotRequired[int]
    exclude_domains: NotRequired[list[str]]
    outcome: NotRequired[str | None]
    include_flagged: NotRequired[bool]
    flagged_only: NotRequired[bool]
    status: NotRequired[str | None]


class PoolViewOutput(TypedDict):
    """Hits with provenance, scores and screening state; counts of the whole pool; or one error line."""

    hits: list[dict[str, Any]]
    stats: dict[str, Any]
    error: str | None


class PoolViewState(PoolViewInput, PoolViewOutput):
    """Input and output together."""


def memory_view(memory: Memory, hit: SearchHit | None = None, base: float = 0.5) -> dict[str, Any]:
    """One memory as Studio shows it: what it says, where it came from, how it fared (its record, its utility
    against the pool's base rate `base` and the evidence behind it), and whether it is held back and why."""
    cfg = LifecycleConfig()
    scores = {"score": hit.score, "similarity": hit.similarity, "retriever": hit.retriever} if hit else {}
    return {"id": memory.id, "type": memory.type, "key": memory.key_text(), "outcome": memory.outcome.value,
            "domains": memory.domains, "source_task_ids": memory.source_task_ids,
            "sources": [s.model_dump(mode="json") for s in memory.sources], **scores,
            "status": memory.status, "stats": memory.stats.model_dump(mode="json"),
            "utility": round(utility(memory.stats, base, cfg), 4), "evidence": round(evidence(memory.stats, cfg), 2),
            "flagged": memory.flagged, "quarantined": memory.quarantined, "archived": memory.archived,
            "memory": memory.model_dump(mode="json")}


def _wanted(q: PoolQuery, m: Memory) -> bool:
    if (q.format is not None and m.type != q.format) or (q.outcome is not None and m.outcome.value != q.outcome) \
            or set(m.domains) & set(q.exclude_domains):
        return False
    if q.flagged_only:
        return bool(m.flagged)
    if q.status is not None:
        return m.status == q.status
    return m.status != "archived" and (q.include_flagged or not m.flagged)


def _search(pool: MemoryPool, q: PoolQuery, base: float) -> list[dict[str, Any]]:
    only = None
    if q.status is not None:  # the search runs among the memories with that status, whatever screening says
        chosen = [m for m in pool if _wanted(q, m)]
        if q.status == "archived":  # retrieval never returns archived memories: listed instead
            return [memory_view(m, base=base) for m in chosen[:q.k]]
        if not chosen:
            return []
        only = [m.id for m in chosen]
    found = pool.search(q.query, type=q.format, k=q.k, exclude_domains=q.exclude_domains, outcome=q.outcome,
                        include_flagged=q.include_flagged or q.status is not None, only_ids=only)
    return [memory_view(h.memory, h, base) for h in found]


def view_pool(pool: MemoryPool, fields: dict[str, Any]) -> PoolViewOutput:
    """Search or list `pool` as asked by `fields` (PoolQuery's fields); bad input is one error line, not a raise."""
    try:
        q = PoolQuery.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        return {"hits": [], "stats": {}, "error": f"invalid {where}: {first['msg']}"}
    try:
        rate = pool.base_rate()
        if q.query.strip() and not q.flagged_only:
            hits = _search(pool, q, rate.rate)
        else:
            hits = [memory_view(m, base=rate.rate) for m in islice((m for m in pool if _wanted(q, m)), q.k)]
        counts = pool.stats()
        stats = {"total": pool.count(), **counts, "flagged": len(pool.flagged()),
                 "quarantined": counts["status"].get("quarantined", 0),
                 "base_rate": {"rate": round(rate.rate, 4), "success": rate.success, "failure": rate.failure}}
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
