"""Summary: a short task summary and one paragraph of experience (environment, key actions, outcome, why)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mtl_graph.memory.formats import MemoryFormat, register
from mtl_graph.memory.formats._drafts import DRAFT_CONFIG, at_most, one_paragraph, text
from mtl_graph.memory.base import MemoryBase, Text


class SummaryMemory(MemoryBase):
    """A short task summary and a paragraph of experience (environment, key actions, outcome, why)."""

    type: Literal["summary"] = "summary"
    task_summary: Text
    """Two or three sentences on the task (the retrieval key)."""
    experience_summary: Text
    """Environment, key actions, outcome and why."""


class SummaryDraft(BaseModel):
    """A 2-3 sentence task summary and one paragraph of experience."""

    model_config = DRAFT_CONFIG

    task_summary: text(10, 800, at_most(4)) = Field(description="2-3 sentences on the task.")
    experience_summary: text(20, 2_000, one_paragraph) = Field(
        description="One paragraph: environment, key actions, outcome, why.")


SUMMARY = register(MemoryFormat(
    name="summary", memory=SummaryMemory, rank=30, summary="the task and a paragraph of experience",
    key=lambda m: m.task_summary,
    label=lambda m: f"summary{m.outcome_tag()}",
    body=lambda m, chars: f"Task: {m.task_summary}\nExperience: {m.experience_summary}",
    draft=SummaryDraft, prompts=("summary_success", "summary_failure"),
    consolidate_prompt="consolidate_summary"))
