"""Optional human review of the memories a run proposes, before write back (`review_memories`).

The `review` node calls LangGraph's `interrupt()` with the proposed memories; the run pauses (a checkpointer keeps
it) until it is resumed with `Command(resume=...)`:

- `"approve"` or `"reject"`: every memory;
- `{"type": "approve" | "reject"}`: likewise; `{"type": "edit", "memory": {...}}` when one memory is proposed;
- `{"decisions": [d1, d2, ...]}` (or the bare list): one decision per proposed memory, in the interrupt's order,
  each a string or `{"type": ..., "memory": {...}}` (for `edit`: the content fields to change);
- `{"decisions": {"<memory id>": d, ...}}`: the same, keyed by the proposed memories' ids.

A payload that cannot be applied loses nothing: the node interrupts again with the same memories and an `error`
line saying what was wrong, and waits for a better answer."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.config import get_config
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, ValidationError

from mtl_graph.pipeline.state import RunState
from mtl_graph.pipeline import events
from mtl_graph.memory.base import NOT_CONTENT, first_validation_error, parse_memory
from mtl_graph.core.errors import MTLError

HOW = ('resume with "approve" or "reject" (all memories), or {"decisions": [...]}: one per memory, in order, '
       'each "approve", "reject" or {"type": "edit", "memory": {<content fields to change>}}')


class ReviewError(MTLError, ValueError):
    """A resume payload that cannot be applied; its message is shown to the reviewer."""


class ReviewDecision(BaseModel):
    """What a reviewer decided about one proposed memory."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["approve", "edit", "reject"]
    """approve: write it as proposed; edit: write it with `memory`'s fields changed; reject: do not write it."""
    memory: dict[str, Any] | None = None
    """For `edit` only: the content fields to change, e.g. {"content": "..."} (provenance and stats stay)."""


def _decision(raw: Any) -> ReviewDecision:
    try:
        decision = ReviewDecision.model_validate({"type": raw} if isinstance(raw, str) else raw)
    except ValidationError as exc:
        raise ReviewError(f"invalid decision {str(raw)[:120]!r}: {first_validation_error(exc)}") from None
    if (decision.type == "edit") != (decision.memory is not None):
        raise ReviewError('an "edit" decision needs "memory" (the fields to change); other decisions take none')
    return decision


def _in_order(by_id: dict[str, Any], ids: list[str]) -> list[Any]:
    if unknown := sorted(set(by_id) - set(ids)):
        raise ReviewError(f"no proposed memory has the id {unknown[0]!r}")
    if missing := [i for i in ids if i not in by_id]:
        raise ReviewError(f"no decision for memory {missing[0]!r}: give one per proposed memory")
    return [by_id[i] for i in ids]


def decisions_of(resume: Any, ids: list[str]) -> list[ReviewDecision]:
    """One decision per proposed memory (their ids, in order) from a resume payload (see the module's docstring)."""
    count = len(ids)
    if isinstance(resume, dict) and "decisions" in resume:
        if set(resume) != {"decisions"}:
            raise ReviewError(f"unexpected keys beside decisions: {sorted(set(resume) - {'decisions'})}")
        resume = resume["decisions"]
        if isinstance(resume, dict):  # keyed by memory id
            resume = _in_order(resume, ids)
    if isinstance(resume, list):
        if len(resume) != count:
            raise ReviewError(f"{len(resume)} decisions for {count} proposed memories: give one per memory")
        return [_decision(raw) for raw in resume]
    if isinstance(resume, (str, dict)):
        decision = _decision(resume)
        if decision.type == "edit" and count != 1:
            raise ReviewError(f"an edit applies to one memory; {count} are proposed: use decisions, one per memory")
        return [decision] * count
    raise ReviewError(f"the resume value must be a string, an object or a list, not {type(resume).__name__}")


def edited(memory: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The memory with a reviewer's content changes, validated as a memory of the same format (new content id)."""
    fixed = sorted(NOT_CONTENT | {"type", "outcome"})
    if blocked := sorted(set(changes) & set(fixed)):
        raise ReviewError(f"an edit cannot change {', '.join(blocked)} (only the memory's content fields)")
    data = {k: v for k, v in memory.items() if k != "id"}  # the id follows the content
    try:
        return parse_memory({**data, **changes}).model_dump(mode="json")
    except ValidationError as exc:
        raise ReviewError(f"the edited {memory.get('type', 'memory')} is not valid: "
                          f"{first_validation_error(exc)}") from None


def apply_review(proposed: list[dict[str, Any]], resume: Any) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The memories to write and what happened to each proposed id (approved / edited / rejected)."""
    kept: list[dict[str, Any]] = []
    reviewed: dict[str, list[str]] = {"approved": [], "edited": [], "rejected": []}
    for memory, decision in zip(proposed, decisions_of(resume, [m["id"] for m in proposed])):
        if decision.type == "reject":
            reviewed["rejected"].append(memory["id"])
            continue
        if decision.type == "edit":
            memory = edited(memory, decision.memory or {})
        reviewed["approved" if decision.type == "approve" else "edited"].append(memory["id"])
        kept.append(memory)
    return kept, reviewed


def review(state: RunState) -> dict[str, Any]:
    """Pause for a person to approve, edit or reject the run's proposed memories; write back writes what is kept."""
    if get_config().get(CONF, {}).get(CONFIG_KEY_CHECKPOINTER) is None:  # interrupt() would pause for good
        raise RuntimeError("review_memories needs a checkpointer to pause and resume the run: compile the graph "
                           "with one (build_mtl_graph(..., checkpointer=...)) or serve it with LangGraph")
    proposed = list(state.distilled)
    task = state.task if isinstance(state.task, dict) else {}
    request = {"kind": "review_memories", "task_id": task.get("id"), "run_id": state.run_id,
               "verdict": state.verdict.status.value if state.verdict is not None else None, "memories": proposed,
               "how": HOW}
    problem: str | None = None
    while True:  # on resume the node runs again and interrupt() hands back each earlier answer in turn
        answer = interrupt({**request, "error": problem} if problem else request)
        try:
            kept, reviewed = apply_review(proposed, answer)
        except ReviewError as exc:
            problem = str(exc)
            continue
        events.emit("reviewed", **reviewed)
        return {"distilled": kept, "reviewed": reviewed}
