"""The graph's typed state. Values are JSON-friendly so any checkpointer or server can store them."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
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
    memory_block: NotRequired[str]
    workspace: NotRequired[str]
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    trajectory: NotRequired[dict[str, Any]]
    verdict: NotRequired[dict[str, Any]]
    judge_verdict: NotRequired[dict[str, Any]]
    distilled: NotRequired[list[dict[str, Any]]]
    distill_failures: NotRequired[list[str]]
    new_memory_ids: NotRequired[list[str]]
    memories_written: NotRequired[dict[str, Any]]
    error: NotRequired[str | None]
    timings: NotRequired[Annotated[dict[str, float], merge_dicts]]
