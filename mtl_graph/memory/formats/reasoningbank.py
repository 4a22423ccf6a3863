"""ReasoningBank (a baseline): up to three reasoning items (title, description, content) per run, from successes
and failures alike, keyed by the task they came from.

As its authors describe it, a new task's text, behind an instruction prefix (`reasoningbank_query`), is compared
with the tasks of earlier runs, and the items of the most similar ones are put in the prompt; the bank only
appends (no merging beyond identical content, which the task key makes per task). Its prompts here are our own,
written from that description.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from mtl_graph.memory.formats import MemoryFormat, register
from mtl_graph.memory.formats._drafts import DRAFT_CONFIG, at_most, text
from mtl_graph.memory.base import LongText, MemoryBase, ShortText, Text

MAX_ITEMS = 3
"""Items a run yields at most."""


class ReasoningItem(BaseModel):
    """One item of a ReasoningBank memory."""

    model_config = ConfigDict(extra="forbid")

    title: ShortText
    """A short name for the strategy or the pitfall."""
    description: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=600)]
    """One sentence summing the item up."""
    content: Text
    """The reasoning, decision rule or preventive check, in a few sentences."""


class ReasoningBankMemory(MemoryBase):
    """The items one run taught, keyed by the task it ran on."""

    GIVEN_FIELDS: ClassVar[frozenset[str]] = frozenset({"query"})
    type: Literal["reasoningbank"] = "reasoningbank"
    query: LongText
    """The source task's text (the retrieval key: ReasoningBank retrieves by task similarity)."""
    items: list[ReasoningItem] = Field(min_length=1, max_length=MAX_ITEMS)
    """One to three items."""


class ReasoningItemDraft(BaseModel):
    """One item: a title, a one-sentence description, a few sentences of content."""

    model_config = DRAFT_CONFIG

    title: text(3, 120) = Field(description="A short name for the strategy or pitfall, at most 12 words.")
    description: text(10, 300, at_most(1)) = Field(description="One sentence summing the item up.")
    content: text(10, 1_000, at_most(5)) = Field(description="1-5 sentences: the reasoning, rule or check.")


class ReasoningBankDraft(BaseModel):
    """One to three reasoning items from one run."""

    model_config = DRAFT_CONFIG

    items: list[ReasoningItemDraft] = Field(min_length=1, max_length=MAX_ITEMS,
                                            description="1 to 3 items, the most useful first.")


def _body(memory: ReasoningBankMemory, observation_chars: int) -> str:
    return "\n".join(f"{n}. {i.title}: {i.description}\n   {i.content}" for n, i in enumerate(memory.items, 1))


REASONINGBANK = register(MemoryFormat(
    name="reasoningbank", memory=ReasoningBankMemory, rank=50,
    summary="a baseline: up to three reasoning items keyed by their task",
    key=lambda m: m.query,
    label=lambda m: f"reasoning items{m.outcome_tag()}",
    body=_body,
    draft=ReasoningBankDraft, prompts=("reasoningbank_success", "reasoningbank_failure"), task_free=True,
    uses_plan=False, query_template="reasoningbank_query",
    from_run=lambda run: {"query": run.task.instruction}, given=("query",)))
