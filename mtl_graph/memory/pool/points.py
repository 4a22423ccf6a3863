"""How a memory becomes a stored point: the payload written for a memory, the memory read back from a point, and
the hit a search returns (the retrieval filter is filter.py's SearchFilter)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from mtl_graph.memory.dedup import key_of_fields
from mtl_graph.memory.engine.location import PoolError
from mtl_graph.memory.base import NOT_CONTENT, Memory, first_validation_error, parse_memory
from mtl_graph.memory.usage import stored_stats, with_record
from mtl_graph.memory.engine.storage import RawHit

COMPARED_KEY = "compared"
"""The payload key where a consolidation pass marks the memories it compared (memory/lifecycle/neighbours.py);
every payload written here sets it empty, so a rewritten memory is compared again."""


@dataclass
class SearchHit:
    """One retrieved memory."""

    memory: Memory
    score: float
    """The ranking score, as the search's retriever computes it: hybrid, distribution-based score fusion (each
    list's scores mapped to about [0, 1] through its mean +- 3 std, summed over the dense and BM25 lists when the
    query names an identifier, the dense list alone otherwise, where a BM25-only hit scores 0; see
    memory/pool/search.py); dense, the cosine; bm25, the BM25 score. Comparable within one search only."""
    similarity: float
    """Cosine similarity between the query and the memory's key text."""
    retriever: Literal["dense", "bm25", "both"]
    """Which retriever found it."""


def payload_of(memory: Memory) -> dict[str, Any]:
    """A memory's payload (the credit entries are written beside it, never here: see memory/usage.py)."""
    data = memory.model_dump(mode="json")
    key = key_of_fields({k: v for k, v in data.items() if k not in NOT_CONTENT})  # one dump for both
    data["stats"] = stored_stats(memory).model_dump(mode="json")
    return {
        "memory": data,
        "type": memory.type,
        "outcome": memory.outcome.value,
        "domains": memory.domains,
        "source_task_ids": memory.source_task_ids,
        "models": memory.models,
        "dedup_key": key,
        "merged_ids": memory.merged_ids,
        "flagged": "true" if memory.flagged else "false",
        "status": "archived" if memory.archived else "quarantined" if memory.quarantined else
                  "superseded" if memory.superseded_by else "active",
        "derived_from": sorted({i for s in memory.sources for i in s.cited}),
        COMPARED_KEY: "",
    }


def memory_of(hit: RawHit) -> Memory:
    """The memory a stored point holds; a point that is not one is a clear error, not a crash deep inside."""
    try:
        return with_record(parse_memory(hit.payload["memory"]), hit.payload)
    except (KeyError, TypeError, ValidationError) as exc:
        detail = first_validation_error(exc) if isinstance(exc, ValidationError) else "no memory in its payload"
        raise PoolError(f"point {hit.id} in the pool is not a valid memory ({detail})") from None


RETRIEVERS = ("hybrid", "dense", "bm25")
"""How a search ranks: dense + BM25 fused (the default), cosine only, or BM25 only (keyword retrieval)."""


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True
