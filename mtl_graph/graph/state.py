"""The run's typed state, declared once: the graph's state, its output, the middleware's `mtl` key and the reset at
the start of every run are all derived from `MTLState`. Values are JSON-friendly so any checkpointer or server can
store them."""

from __future__ import annotations

from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

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
    run_id: NotRequired[str | None]
    query: NotRequired[str | None]
    retrieved: NotRequired[list[dict[str, Any]]]
    re_retrieved: NotRequired[list[dict[str, Any]]]
    retrieval: NotRequired[dict[str, Any] | None]
    """Why these memories: every candidate with similarity, utility, rank before and after re-ranking, the floor."""
    credit: NotRequired[dict[str, Any] | None]
    """What the run credited: shown and cited memory ids, outcome, verdict source, quarantined, re-extracted."""
    memory_block: NotRequired[str]
    workspace: NotRequired[str | None]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    trajectory: NotRequired[dict[str, Any] | None]
    verdict: NotRequired[dict[str, Any] | None]
    judge_verdict: NotRequired[dict[str, Any] | None]
    distilled: NotRequired[list[dict[str, Any]]]
    distill_failures: NotRequired[list[str]]
    reviewed: NotRequired[dict[str, list[str]] | None]
    """With `review_memories`: the proposed memory ids a person approved, edited (new ids) or rejected."""
    new_memory_ids: NotRequired[list[str]]
    memories_written: NotRequired[dict[str, Any]]
    retrieved_ids: NotRequired[list[str]]
    outcome: NotRequired[str | None]
    error: NotRequired[str | None]
    """Why the run stopped short (its verdict is then `error`); None when it got a fair try."""
    error_kind: NotRequired[str | None]
    """The stage that `error` came from (`mtl_graph.core.ErrorKind`): invalid_task, model, retrieval, setup, ..."""
    timings: NotRequired[Annotated[dict[str, float], merge_dicts]]
    cost: NotRequired[Annotated[dict[str, dict[str, int]], merge_dicts]]
    """Model calls and input / output tokens per stage that called a model (plan, execute, judge, distill)."""


RUN_FIELDS = get_type_hints(MTLState, include_extras=True)
INSIDE = ("task", "messages", "workspace", "memory_block")
"""Fields that stay inside a run: a parent graph with its own `messages` key is not flooded with the agent's
conversation, and the workspace path and memory block are the run's own business."""


def _field(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is NotRequired else hint


def state_subset(name: str, fields: tuple[str, ...] | list[str], doc: str, **extra: Any) -> Any:
    """A TypedDict of these MTLState fields (same types and reducers, none required) plus `extra` ones."""
    schema = TypedDict(name, {**{f: _field(RUN_FIELDS[f]) for f in fields}, **extra}, total=False)  # type: ignore
    schema.__doc__ = doc
    return schema


OUTPUT_FIELDS = tuple(f for f in RUN_FIELDS if f not in INSIDE)
MTLOutput = state_subset("MTLOutput", OUTPUT_FIELDS, "What a run hands back (`invoke`'s result, and what a parent "
                         "graph receives when this graph is a subgraph): MTLState without the run's inside fields.")


def _empty(name: str, hint: Any) -> Any:
    hint = _field(hint)
    if get_origin(hint) is Annotated:  # a reducer field is cleared past its reducer
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES)] if name == "messages" else Overwrite({})
    if get_origin(hint) is Union or type(None) in get_args(hint):
        return None
    return {list: [], dict: {}, str: ""}.get(get_origin(hint) or hint)


def fresh_run_state() -> dict[str, Any]:
    """Every run field of MTLState at its empty value (all but ``task``).

    The first node returns it, so a run on a reused thread (LangGraph Studio, a checkpointer) never sees the
    previous run's retrievals, trajectory, verdict or messages: only memories retrieved in this run are credited.
    Reducer fields are cleared past their reducers (RemoveMessage for messages, Overwrite for timings)."""
    return {name: _empty(name, hint) for name, hint in RUN_FIELDS.items() if name != "task"}
