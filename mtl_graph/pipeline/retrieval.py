"""Every retrieval of a run, one way: the retrieve node, a mid-run refresh and the agent's search_memories all call
`retrieve_for`, so each has the run's filter (its format, hold-one-out or same-domain, excluded domains and tasks,
a subset, never the task itself), its ranker and its lifecycle (quarantine, relevance floor, re-ranking)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from mtl_graph.config import MTLConfig, lifecycle_of
from mtl_graph.core.task import Task
from mtl_graph.memory.lifecycle.ops import Retrieval
from mtl_graph.memory.pool.filter import SearchFilter


def run_filter(task: Task, cfg: MTLConfig, every_format: bool = False) -> SearchFilter:
    """The filter every search of a run shares: the run's format (every format with `every_format`: a client
    outside a run, such as the MCP server, may search them all), the task's own id and the excluded tasks, the
    excluded domains (the task's own too with hold-one-out), only the task's domain with same_domain, the run's
    subset. Hold-one-out with same-domain would leave nothing to retrieve: a SettingsError."""
    retrieval = cfg.retrieval
    if retrieval.same_domain and retrieval.hold_one_out:
        from mtl_graph.core.errors import SettingsError

        raise SettingsError("same_domain and hold_one_out exclude each other: one keeps only the task's own "
                            "domain, the other leaves it out")
    return SearchFilter(
        type=None if every_format else retrieval.memory_type,
        exclude_domains=(*retrieval.exclude_domains, *([task.domain] if retrieval.hold_one_out else [])),
        exclude_task_ids=(task.id, *retrieval.exclude_task_ids),
        only_ids=retrieval.only_ids,
        domain=task.domain if retrieval.same_domain else None,
    )


def retrieve_for(pool: Any, task: Task, cfg: MTLConfig, query: str, k: int,
                 exclude_ids: Iterable[str] = (), every_format: bool = False) -> Retrieval:
    """The run's top k for `query` under its filter, ranker and lifecycle; memories in `exclude_ids` (those the run
    was already shown) are skipped, and k others returned when there are k. The trace's candidates are all the
    search considered."""
    skip = set(exclude_ids)
    found = pool.retrieve(query, k=k + len(skip), where=run_filter(task, cfg, every_format),
                          lifecycle=lifecycle_of(cfg),
                          retriever=cfg.retrieval.retriever)
    if not skip:
        return found
    return replace(found, hits=[h for h in found.hits if h.memory.id not in skip][:k])


def retrieved_record(hit: Any) -> dict[str, Any]:
    """A retrieved memory as the run's state, events and run log record it."""
    return {"id": hit.memory.id, "score": hit.score, "similarity": hit.similarity, "retriever": hit.retriever,
            "type": hit.memory.type, "domains": hit.memory.domains, "source_task_ids": hit.memory.source_task_ids}
