"""The run's typed state, declared once: `RunState`, a pydantic model. The graph's state, its output, the
middleware's `mtl` key and the reset at the start of every run are all derived from it.

Every stage is a function over a `RunState`: LangGraph validates the channels into one before each node (the
trajectory and verdicts arrive as `Trajectory` and `Verdict`, never re-parsed by hand), and the nodes return
JSON-friendly updates, so the channels (and any checkpointer or server that stores them) hold plain values."""

from __future__ import annotations

from typing import Annotated, Any, Union, get_args, get_origin

from langchain_core.messages import AnyMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.types import Overwrite
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from mtl_graph.core.trajectory import Trajectory, Verdict


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    return {**(left or {}), **(right or {})}


class MTLInput(TypedDict):
    """What a run starts from: a task object, a task dict, or the path of a task directory."""

    task: Any


class RunState(BaseModel):
    """Everything a run accumulates, stage by stage."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True, use_attribute_docstrings=True)

    task: Any = None
    """The task as given (a Task, a task dict, a task directory's path); plan replaces it with the task's dict."""
    run_id: str | None = None
    """This run's id, new at every run (a reused thread's runs are told apart by it)."""
    query: str | None = None
    """The retrieval query: the plan (HyDE), or the task text."""
    retrieved: list[dict[str, Any]] = Field(default_factory=list)
    """The memories injected before the agent started: id, score, cosine, retriever, format, domains, source tasks."""
    re_retrieved: list[dict[str, Any]] = Field(default_factory=list)
    """The memories re-retrieval showed after the first failing test run (re_retrieve)."""
    retrieval: dict[str, Any] | None = None
    """Why these memories: every candidate with similarity, utility, rank before and after re-ranking, the floor."""
    credit: dict[str, Any] | None = None
    """What the run credited: shown and cited memory ids, outcome, verdict source, quarantined, re-extracted."""
    memory_block: str = ""
    """The fenced memories the agent reads."""
    workspace: str | None = None
    """The run's workspace directory."""
    messages: Annotated[list[AnyMessage], add_messages] = Field(default_factory=list)
    """The agent's conversation (the run's inside: not in the output)."""
    trajectory: Trajectory | None = None
    """What the agent did, step by step."""
    verdict: Verdict | None = None
    """The run's verdict: tests, the LLM judge, or `error` when it got no fair try."""
    judge_verdict: Verdict | None = None
    """With judge_also: the LLM judge's verdict on a run the tests decided."""
    distilled: list[dict[str, Any]] = Field(default_factory=list)
    """The memories distilled from the run (before write back)."""
    distill_failures: list[str] = Field(default_factory=list)
    """Formats that could not be distilled, and why."""
    reviewed: dict[str, list[str]] | None = None
    """With `review_memories`: the proposed memory ids a person approved, edited (new ids) or rejected."""
    new_memory_ids: list[str] = Field(default_factory=list)
    """The memories write back added."""
    memories_written: dict[str, Any] = Field(default_factory=dict)
    """What write back did with each distilled memory: added, merged, identical, flagged."""
    retrieved_ids: list[str] = Field(default_factory=list)
    """Every memory the run was shown (injected, searched, re-retrieved), in order."""
    outcome: str | None = None
    """success, failure, unknown (judged, undecided) or error (no fair try)."""
    error: str | None = None
    """Why the run stopped short (its verdict is then `error`); None when it got a fair try."""
    error_kind: str | None = None
    """The stage that `error` came from (`mtl_graph.core.ErrorKind`): invalid_task, model, retrieval, setup, ..."""
    timings: Annotated[dict[str, float], merge_dicts] = Field(default_factory=dict)
    """Seconds per stage."""
    cost: Annotated[dict[str, dict[str, Any]], merge_dicts] = Field(default_factory=dict)
    """Model calls, input / output tokens and tool calls per stage that called a model (plan, execute, judge,
    distill)."""

    @classmethod
    def of(cls, values: "RunState | dict[str, Any]") -> "RunState":
        """A RunState from a run's values (a host that keeps its run as a dict: the middleware)."""
        return values if isinstance(values, cls) else cls.model_validate(values)

    def values(self, *names: str) -> dict[str, Any]:
        """These fields as channel values (JSON-friendly; messages stay message objects)."""
        return {name: _channel_value(getattr(self, name)) for name in names}


def _channel_value(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


MTLState = RunState
"""The run's state under its earlier name."""


def _hint(info: Any) -> Any:
    """A field's type with its reducer (pydantic keeps `Annotated` metadata apart from the annotation)."""
    return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation


RUN_FIELDS = {name: _hint(info) for name, info in RunState.model_fields.items()}
INSIDE = ("task", "messages", "workspace", "memory_block")
"""Fields that stay inside a run: a parent graph with its own `messages` key is not flooded with the agent's
conversation, and the workspace path and memory block are the run's own business."""


def state_subset(name: str, fields: tuple[str, ...] | list[str], doc: str, **extra: Any) -> Any:
    """A TypedDict of these RunState fields (same types and reducers, none required) plus `extra` ones."""
    schema = TypedDict(name, {**{f: RUN_FIELDS[f] for f in fields}, **extra}, total=False)  # type: ignore
    schema.__doc__ = doc
    return schema


OUTPUT_FIELDS = tuple(f for f in RUN_FIELDS if f not in INSIDE)
MTLOutput = state_subset("MTLOutput", OUTPUT_FIELDS, "What a run hands back (`invoke`'s result, and what a parent "
                         "graph receives when this graph is a subgraph): RunState without the run's inside fields.")


def _reducer(hint: Any) -> Any:
    return next((m for m in get_args(hint)[1:] if callable(m)), None) if get_origin(hint) is Annotated else None


def apply_update(run: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """`run` (a host's run values, kept as a dict: the middleware's) with a stage's update applied in place as the
    graph applies it: a reducer field through its reducer (timings merge, messages add), `Overwrite` past it."""
    for name, value in update.items():
        reducer = _reducer(RUN_FIELDS[name]) if name in RUN_FIELDS else None
        if isinstance(value, Overwrite):
            run[name] = value.value
        elif reducer is not None and name in run:
            run[name] = reducer(run[name], value)
        else:
            run[name] = reducer([] if name == "messages" else {}, value) if reducer is not None else value
    return run


def _empty(name: str, hint: Any) -> Any:
    if get_origin(hint) is Annotated:  # a reducer field is cleared past its reducer
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES)] if name == "messages" else Overwrite({})
    if get_origin(hint) is Union or type(None) in get_args(hint):
        return None
    return {list: [], dict: {}, str: ""}.get(get_origin(hint) or hint)


def fresh_run_state() -> dict[str, Any]:
    """Every run field of RunState at its empty value (all but ``task``).

    The first node returns it, so a run on a reused thread (LangGraph Studio, a checkpointer) never sees the
    previous run's retrievals, trajectory, verdict or messages: only memories retrieved in this run are credited.
    Reducer fields are cleared past their reducers (RemoveMessage for messages, Overwrite for timings)."""
    return {name: _empty(name, hint) for name, hint in RUN_FIELDS.items() if name != "task"}
