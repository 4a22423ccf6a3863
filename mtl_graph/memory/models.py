"""The four memory formats (Trajectory, Workflow, Summary, Insight) as one discriminated union."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timezone
from enum import StrEnum
from typing import Annotated, Any, Iterator, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, TypeAdapter, ValidationError

from mtl_graph.core.trajectory import Outcome

MAX_SHORT = 300
MAX_TEXT = 4_000
MAX_LONG = 20_000
MAX_STEPS = 300

ShortText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SHORT)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT)]
LongText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_LONG)]


def strings_of(value: Any) -> Iterator[str]:
    """Every string inside nested dicts and lists (a memory's or a draft's text, for screening and checks)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


class MemoryType(StrEnum):
    """The four formats, from concrete to abstract."""

    TRAJECTORY = "trajectory"
    WORKFLOW = "workflow"
    SUMMARY = "summary"
    INSIGHT = "insight"


NOT_CONTENT = {"id", "sources", "stats", "flagged", "released", "merged_ids", "quarantined", "quarantine_released",
               "quarantine_baseline", "archived", "consolidated_from"}
"""Fields about a memory (identity, provenance, usage, screening) rather than its content."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Provenance(BaseModel):
    """Where a memory came from; a deduplicated memory keeps one entry per source run."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = None
    """The source run: the graph's run id, an eval attempt, or a stable hash of an imported run or record
    (the pool fills it in when missing). A merged memory keeps one entry per run id."""
    source_task_id: str | None = None
    """Id of the task whose run produced the memory (the contamination guard compares against it)."""
    domain: str | None = None
    """Benchmark or domain of the source task (hold-one-out excludes by it)."""
    task_model: str | None = None
    """The model that ran the source task."""
    distill_model: str | None = None
    """The model that distilled the run into this memory (None when built without a model call)."""
    cited: list[str] = Field(default_factory=list, max_length=50)
    """Ids of the memories the source run cited ("Using Memory N"): this memory descends from them."""
    created_at: datetime = Field(default_factory=_now)
    """When the memory was made."""


class UsageStats(BaseModel):
    """A memory's record: how often it was shown to an agent, how often the agent cited it, how those runs ended.

    Read from a pool, it is the memory's stored counts (an import's, a consolidation's sums) plus one entry per
    credited run (see memory/record.py)."""

    model_config = ConfigDict(extra="forbid")

    retrieved: int = Field(default=0, ge=0)
    """Times shown to an agent (retrieved into a credited run)."""
    retrieved_success: int = Field(default=0, ge=0)
    """Times shown in a run judged successful."""
    retrieved_failure: int = Field(default=0, ge=0)
    """Times shown in a run judged failed."""
    cited: int = Field(default=0, ge=0)
    """Times the agent named it ("Using Memory N") in a credited run."""
    cited_success: int = Field(default=0, ge=0)
    """Times cited in a run judged successful."""
    cited_failure: int = Field(default=0, ge=0)
    """Times cited in a run judged failed."""
    by_judge: int = Field(default=0, ge=0)
    """Credited runs whose verdict came from an LLM judge rather than tests (weaker evidence)."""
    shown_since_cited: int = Field(default=0, ge=0)
    """Times shown, uncited, since it was last cited (or ever): what ranking decay counts."""
    last_shown: datetime | None = None
    """When it was last shown in a credited run."""

    def plus(self, other: "UsageStats") -> "UsageStats":
        """Both records summed (shown_since_cited: the later one's run continues the earlier's)."""
        counts = {name: getattr(self, name) + getattr(other, name) for name in COUNTS}
        last = max((t for t in (self.last_shown, other.last_shown) if t is not None), default=None)
        return UsageStats(**counts, shown_since_cited=other.shown_since_cited + (
            self.shown_since_cited if other.cited == 0 else 0), last_shown=last)


COUNTS = ("retrieved", "retrieved_success", "retrieved_failure", "cited", "cited_success", "cited_failure",
          "by_judge")
"""The UsageStats fields that add up across runs and merged memories."""


class _MemoryBase(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = ""
    """Deterministic UUID from the content hash: re-adding the same memory is idempotent."""
    outcome: Outcome = Outcome.UNKNOWN
    """Outcome of the source run."""
    sources: list[Provenance] = Field(default_factory=list, max_length=1000)
    """Provenance, one entry per source run (more than one after a near-duplicate merge)."""
    stats: UsageStats = Field(default_factory=UsageStats)
    """Usage statistics, updated by the graph's write-back."""
    flagged: list[str] = Field(default_factory=list, max_length=50)
    """Why write-time screening held the memory back from retrieval ("rule: reason"); empty when clean."""
    released: list[str] = Field(default_factory=list, max_length=50)
    """The screening reasons a person overrode with `mtl memories release` (the memory is retrievable again)."""
    merged_ids: list[str] = Field(default_factory=list, max_length=100_000)
    """Content ids of near-duplicates merged into this memory: `get` and credit still find it by them."""
    quarantined: list[str] = Field(default_factory=list, max_length=50)
    """Why the online loop stopped serving it (its cited runs failed, or it descends from such a memory), with
    the evidence; empty when it is not quarantined. Released by a person (`mtl memories release`)."""
    quarantine_released: list[str] = Field(default_factory=list, max_length=50)
    """Quarantine reasons a person overrode (the memory is served again)."""
    quarantine_baseline: UsageStats | None = None
    """Its record when a person released it: quarantine judges only the evidence gathered after that."""
    archived: str = ""
    """Why it is kept but never retrieved (merged by consolidation, pruned as stale); empty when live."""
    consolidated_from: list[str] = Field(default_factory=list, max_length=10_000)
    """The archived memories a consolidation merged into this one."""
    _stored_stats: UsageStats | None = PrivateAttr(default=None)
    """Read from a pool: the counts its JSON holds, before the pool's credit entries were added (record.py)."""

    @property
    def status(self) -> str:
        """active, flagged (screening), quarantined (the online loop) or archived (consolidated / pruned)."""
        return "archived" if self.archived else "quarantined" if self.quarantined else \
            "flagged" if self.flagged else "active"

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            object.__setattr__(self, "id", self.content_id())

    # --- content --------------------------------------------------------------------------
    def content_fields(self) -> dict[str, Any]:
        """The fields that define the memory's identity (not provenance or stats)."""
        return self.model_dump(mode="json", exclude=NOT_CONTENT)

    def content_id(self) -> str:
        blob = json.dumps(self.content_fields(), sort_keys=True, ensure_ascii=False)
        return str(uuid.UUID(hex=hashlib.sha256(blob.encode()).hexdigest()[:32]))

    @property
    def domains(self) -> list[str]:
        return sorted({s.domain for s in self.sources if s.domain})

    @property
    def source_task_ids(self) -> list[str]:
        return sorted({s.source_task_id for s in self.sources if s.source_task_id})

    @property
    def models(self) -> list[str]:
        return sorted({m for s in self.sources for m in (s.task_model, s.distill_model) if m})

    def key_text(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def label(self) -> str:  # pragma: no cover - overridden
        """What the memory is, for its heading (e.g. "workflow (outcome: success)")."""
        raise NotImplementedError

    def body(self, observation_chars: int = 300) -> str:  # pragma: no cover - overridden
        """The memory's own text as shown to an agent (observations cut to observation_chars)."""
        raise NotImplementedError

    def render(self, index: int, observation_chars: int = 300) -> str:
        """Plain numbered rendering (for people; prompts use mtl_graph.memory.fence, which quotes the body)."""
        return f"## Memory {index}: {self.label()}\n{self.body(observation_chars)}"

    def _outcome_tag(self) -> str:
        return f" (outcome: {self.outcome.value})"


class TrajectoryStep(BaseModel):
    """One action of a trajectory memory: the command and what it printed (reasoning dropped)."""

    model_config = ConfigDict(extra="forbid")

    command: LongText
    """The shell command or tool call, as text."""
    observation: str = Field(default="", max_length=MAX_LONG)
    """What the command printed (full; cut only when rendered)."""
    exit_code: int | None = None
    """Exit status, when known."""


class TrajectoryMemory(_MemoryBase):
    """The task and every command with its observation; failed steps kept."""

    type: Literal["trajectory"] = "trajectory"
    task: LongText
    """The task's instruction text (the retrieval key)."""
    steps: list[TrajectoryStep] = Field(min_length=1, max_length=MAX_STEPS)
    """Every action in order."""

    def key_text(self) -> str:
        return self.task

    def label(self) -> str:
        return f"past trajectory{self._outcome_tag()}"

    def body(self, observation_chars: int = 300) -> str:
        lines = [f"Task: {self.task}"]
        for n, step in enumerate(self.steps, 1):
            obs = step.observation
            if len(obs) > observation_chars:
                obs = obs[:observation_chars] + f"... [cut {len(obs) - observation_chars} chars]"
            code = "" if step.exit_code is None else f" (exit {step.exit_code})"
            lines.append(f"{n}. $ {step.command}{code}\n   {obs}" if obs else f"{n}. $ {step.command}{code}")
        return "\n".join(lines)


class WorkflowMemory(_MemoryBase):
    """A goal (when this applies) and the reusable actions that achieved it (or the misleading strategy)."""

    type: Literal["workflow"] = "workflow"
    goal: Text
    """When this workflow applies (the retrieval key)."""
    actions: list[Text] = Field(min_length=1, max_length=50)
    """The reusable subset of actions, in order."""

    def key_text(self) -> str:
        return self.goal

    def label(self) -> str:
        return f"workflow{self._outcome_tag()}"

    def body(self, observation_chars: int = 300) -> str:
        steps = "\n".join(f"{n}. {a}" for n, a in enumerate(self.actions, 1))
        return f"Goal: {self.goal}\n{steps}"


class SummaryMemory(_MemoryBase):
    """A short task summary and a paragraph of experience (environment, key actions, outcome, why)."""

    type: Literal["summary"] = "summary"
    task_summary: Text
    """Two or three sentences on the task (the retrieval key)."""
    experience_summary: Text
    """Environment, key actions, outcome and why."""

    def key_text(self) -> str:
        return self.task_summary

    def label(self) -> str:
        return f"summary{self._outcome_tag()}"

    def body(self, observation_chars: int = 300) -> str:
        return f"Task: {self.task_summary}\nExperience: {self.experience_summary}"


class InsightMemory(_MemoryBase):
    """A general lesson: title, one-sentence description, 1-3 sentences of content; no task specifics."""

    type: Literal["insight"] = "insight"
    title: ShortText
    """A short title."""
    description: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=600)]
    """One sentence saying when the insight applies."""
    content: Text
    """One to three sentences of advice."""

    def key_text(self) -> str:
        return f"{self.title}. {self.description}"

    def label(self) -> str:
        return self.title

    def body(self, observation_chars: int = 300) -> str:
        return f"{self.description}\n{self.content}"


Memory = Annotated[
    Union[TrajectoryMemory, WorkflowMemory, SummaryMemory, InsightMemory], Field(discriminator="type")
]
MEMORY_ADAPTER: TypeAdapter[Memory] = TypeAdapter(Memory)
MEMORY_CLASSES: dict[str, type[_MemoryBase]] = {
    "trajectory": TrajectoryMemory,
    "workflow": WorkflowMemory,
    "summary": SummaryMemory,
    "insight": InsightMemory,
}


def parse_memory(data: dict[str, Any] | str) -> Memory:
    """Validate one memory from a dict or a JSON string (raises pydantic.ValidationError)."""
    if isinstance(data, str):
        return MEMORY_ADAPTER.validate_json(data)
    return MEMORY_ADAPTER.validate_python(data)


def first_validation_error(exc: ValidationError) -> str:
    """The first problem of a validation error on one line ("field.path: message (and N more)")."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "value"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{more}"


def render_memories(memories: list[Memory], observation_chars: int = 300) -> str:
    """Numbered prompt rendering of several memories."""
    return "\n\n".join(m.render(i, observation_chars) for i, m in enumerate(memories, 1))


def memory_type_of(value: str) -> MemoryType:
    """Parse a memory type name with a clear error."""
    try:
        return MemoryType(value.strip().lower())
    except ValueError:
        names = ", ".join(t.value for t in MemoryType)
        raise ValueError(f"unknown memory type {value!r}; expected one of: {names}") from None
