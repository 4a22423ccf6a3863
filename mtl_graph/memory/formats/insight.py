"""Insight: a general lesson (title, when it applies, 1-3 sentences of advice) with no task specifics."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from mtl_graph.memory.formats import MemoryFormat, register
from mtl_graph.memory.formats._drafts import DRAFT_CONFIG, at_most, text
from mtl_graph.memory.base import MemoryBase, ShortText, Text


class InsightMemory(MemoryBase):
    """A general lesson: title, one-sentence description, 1-3 sentences of content; no task specifics."""

    type: Literal["insight"] = "insight"
    title: ShortText
    """A short title."""
    description: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=600)]
    """One sentence saying when the insight applies."""
    content: Text
    """One to three sentences of advice."""


class InsightDraft(BaseModel):
    """A general lesson: title, one-sentence description, 1-3 sentences of advice; no task specifics."""

    model_config = DRAFT_CONFIG

    title: text(3, 120) = Field(description="Short imperative title, at most 12 words.")
    description: text(10, 300, at_most(1)) = Field(description="One sentence: when the insight applies.")
    content: text(10, 700, at_most(3)) = Field(description="1-3 sentences of actionable advice.")


INSIGHT = register(MemoryFormat(
    name="insight", memory=InsightMemory, rank=40, summary="a general lesson and when it applies",
    key=lambda m: f"{m.title}. {m.description}",
    label=lambda m: m.title,
    body=lambda m, chars: f"{m.description}\n{m.content}",
    draft=InsightDraft, prompts=("insight_success", "insight_failure"), task_free=True,
    consolidate_prompt="consolidate_insight"))
