"""Workflow: when it applies (the goal) and the reusable actions that achieved it, or the misleading strategy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mtl_graph.memory.formats import MemoryFormat, register
from mtl_graph.memory.formats._drafts import DRAFT_CONFIG, text
from mtl_graph.memory.base import MemoryBase, Text


class WorkflowMemory(MemoryBase):
    """A goal (when this applies) and the reusable actions that achieved it (or the misleading strategy)."""

    type: Literal["workflow"] = "workflow"
    goal: Text
    """When this workflow applies (the retrieval key)."""
    actions: list[Text] = Field(min_length=1, max_length=50)
    """The reusable subset of actions, in order."""


class WorkflowDraft(BaseModel):
    """A goal (when this applies) and the reusable actions, in order."""

    model_config = DRAFT_CONFIG

    goal: text(10, 500) = Field(description="The kind of task this workflow applies to (1-2 sentences).")
    actions: list[text(3, 300)] = Field(min_length=1, max_length=12, description="Reusable actions, in order.")


def _body(memory: WorkflowMemory, observation_chars: int) -> str:
    steps = "\n".join(f"{n}. {a}" for n, a in enumerate(memory.actions, 1))
    return f"Goal: {memory.goal}\n{steps}"


WORKFLOW = register(MemoryFormat(
    name="workflow", memory=WorkflowMemory, rank=20, summary="when it applies and the reusable actions",
    key=lambda m: m.goal,
    label=lambda m: f"workflow{m.outcome_tag()}",
    body=_body,
    draft=WorkflowDraft, prompts=("workflow_success", "workflow_failure"), task_free=True,
    consolidate_prompt="consolidate_workflow"))
