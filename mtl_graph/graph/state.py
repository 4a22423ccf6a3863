"""The graph's typed state. Values are JSON-friendly so any checkpointer or server can store them."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Overwrite
from typing_extensions import NotRequired, TypedDict


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class MTLInput(TypedDict):
    """What a run starts from: a task object, a task dict, or the path of a task directory."""

    task: Any


class MTLState(TypedDict):
    """Everything a run accumulates, node by node."""

    task: Any
    run_id: NotRequired[str]
    query: NotRequired[str]
    retrieved: NotRequired[list[dict[str, Any]]]
    re_retrieved: NotRequired[list[dict[str, Any]]]
    retrieval: NotRequired[dict[str, Any] | None]
    credit: NotRequired[dict[str, Any] | None]
    memory_block: NotRequired[str]
    workspace: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    trajectory: NotRequired[dict[str, Any]]
    verdict: NotRequired[dict[str, Any]]
    judge_verdict: NotRequired[dict[str, Any]]
    distilled: NotRequired[list[dict[str, Any]]]
    distill_failures: NotRequired[list[str]]
    reviewed: NotRequired[dict[str, list[str]] | None]
    new_memory_ids: NotRequired[list[str]]
    memories_written: NotRequired[dict[str, Any]]
    retrieved_ids: NotRequired[list[str]]
    outcome: NotRequired[str | None]
    error: NotRequired[str | None]
    error_kind: NotRequired[str | None]
    timings: NotRequired[Annotated[dict[str, float], merge_dicts]]


class MTLOutput(TypedDict):
    """What a run hands back (`invoke`'s result, and what a parent graph receives when this graph is a subgraph).

    The agent's transcript (`messages`), the workspace path and the memory block stay inside: a parent graph with
    its own `messages` key is not flooded with the agent's conversation."""

    run_id: NotRequired[str | None]
    query: NotRequired[str | None]
    verdict: NotRequired[dict[str, Any] | None]
    outcome: NotRequired[str | None]
    retrieved: NotRequired[list[dict[str, Any]]]
    re_retrieved: NotRequired[list[dict[str, Any]]]
    retrieved_ids: NotRequired[list[str]]
    retrieval: NotRequired[dict[str, Any] | None]
    """Why these memories: every candidate with similarity, utility, rank before and after re-ranking, the floor."""
    credit: NotRequired[dict[str, Any] | None]
    """What the run credited: shown and cited memory ids, outcome, verdict source, quarantined, re-extracted."""
    new_memory_ids: NotRequired[list[str]]
    memories_written: NotRequired[dict[str, Any]]
    trajectory: NotRequired[dict[str, Any] | None]
    judge_verdict: NotRequired[dict[str, Any] | None]
    distilled: NotRequired[list[dict[str, Any]]]
    distill_failures: NotRequired[list[str]]
    reviewed: NotRequired[dict[str, list[str]] | None]
    """With `review_memories`: the proposed memory ids a person approved, edited (new ids) or rejected."""
    error: NotRequired[str | None]
    """Why the run stopped short (its verdict is then `error`); None when it got a fair try."""
    error_kind: NotRequired[str | None]
    """The stage that `error` came from (`mtl_graph.core.ErrorKind`): invalid_task, model, retrieval, setup, ..."""
    timings: NotRequired[Annotated[dict[str, float], merge_dicts]]


OUTPUT_FIELDS = tuple(MTLOutput.__annotations__)
"""What a run hands back, in every host: the graph's output schema; the middleware's `mtl` key is the same less
the transcript-sized fields."""


def fresh_run_state() -> dict[str, Any]:
    """Every run field of MTLState at its empty value (all but ``task``).

    The first node returns it, so a run on a reused thread (LangGraph Studio, a checkpointer) never sees the
    previous run's retrievals, trajectory, verdict or messages: only memories retrieved in this run are credited.
    Reducer fields are cleared past their reducers (RemoveMessage for messages, Overwrite for timings)."""
    return {
        "run_id": None, "query": None, "retrieved": [], "re_retrieved": [], "retrieval": None, "credit": None,
        "memory_block": "", "workspace": None,
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "trajectory": None, "verdict": None,
        "judge_verdict": None, "distilled": [], "distill_failures": [], "reviewed": None, "new_memory_ids": [],
        "error": None, "error_kind": None,
        "memories_written": {}, "retrieved_ids": [], "outcome": None, "timings": Overwrite({}),
    }
